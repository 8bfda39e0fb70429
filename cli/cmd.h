/* cmd.h - sub-command entry points of the lis binary. */
#ifndef LIS_CMD_H
#define LIS_CMD_H
int cmd_sandbox(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
/* cmd_state.c: lis sandbox pause (on 1) | resume NAME... */
int cmd_sandbox_state(int argc, char **argv, int on);
#endif
