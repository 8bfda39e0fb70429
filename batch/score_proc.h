/* score_proc.h - batch/ internal: the child processes of the scorers (the
 * resident reward.py worker, --scorer CMD), implemented in score_proc.c. */
#ifndef LIS_BATCH_SCORE_PROC_H
#define LIS_BATCH_SCORE_PROC_H

#include "score.h"

#include <sys/types.h>

typedef struct sproc {
    pid_t pid; /* in its own process group; -1 when none */
    int in;    /* its stdin (a socket: writes never raise SIGPIPE) */
    int out;   /* its replies: fd 3 (worker) or stdout (command) */
    int err;   /* its stderr (and the worker's stdout) */
} sproc;

/* Starts argv (argv[0] looked up in PATH). worker: replies on fd 3 and
 * stdout goes to stderr; else replies on stdout. */
int sproc_spawn(char *const argv[], int worker, sproc *p, lis_error *err);

typedef enum sproc_rc { SP_OK = 0, SP_EOF, SP_TIMEOUT, SP_IOERR } sproc_rc;

/* Writes in (len n; NULL: nothing) then reads until one full line came on
 * out (line_mode) or until out and err are at end of file (then stdin is
 * closed after writing). stderr is kept in *errtail (its last few KB). */
sproc_rc sproc_talk(sproc *p, const char *in, size_t n, int line_mode, strbuf *out, strbuf *errtail,
                    double timeout);
/* Kills the group (when kill_it), closes the fds, reaps; returns the wait
 * status (or -1). */
int sproc_end(sproc *p, int kill_it);
/* "exit 3", "signal 9 (Killed)" for a wait status */
void sproc_status_text(int status, char *buf, size_t len);
/* The last non-empty line of t (at most 300 bytes), or "" */
void sproc_last_line(const strbuf *t, char *buf, size_t len);

#endif
