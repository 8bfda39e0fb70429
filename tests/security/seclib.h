/* seclib.h - helpers of the escape suites (tests/security/test_*.c).
 *
 * Every attempt runs tests/security/escape_probe (bound read-only at /probe)
 * or a shell inside a sandbox, then checks on the host that nothing changed. */
#ifndef LIS_SECLIB_H
#define LIS_SECLIB_H

#include "lis_monitor.h"
#include "testlib.h"

#include <sys/types.h>

/* How a sandbox of an attempt is made; zero is an ephemeral busybox sandbox
 * with --net none and a tmpfs upper layer. */
typedef struct sec_opts {
    const char *rootfs; /* NULL: the busybox fixture */
    const char *name;
    lis_net_mode net;
    int persist;
    lis_limits limits;
    const lis_bind *binds; /* added after /probe */
    size_t nbinds;
} sec_opts;

/* The host path of the probe binary. */
const char *sec_probe(void);
/* A sandbox with the probe at /probe; o may be NULL. */
lis_sandbox *sec_sandbox(lis_ctx *ctx, const sec_opts *o);
/* Tries to create one; 0 or -1 with err (for images that may be refused). */
int sec_try_sandbox(lis_ctx *ctx, const sec_opts *o, lis_sandbox **sb, lis_error *err);
/* Runs sh -c CMD (stderr joined to stdout, 60 s timeout); output malloc'ed. */
char *sec_sh(lis_sandbox *sb, const char *cmd, int *code);
/* Starts ex and waits for it at most max_wait seconds. Returns 1 with *r filled
 * when it finished, 0 when it was still running (it is then left to the
 * sandbox's destruction), -1 when lis lost it (the reason is logged; *r is
 * freed or empty). */
int sec_run(lis_sandbox *sb, const lis_exec_spec *ex, lis_result *r, double max_wait);
/* The sandbox still runs commands: "echo alive" answers. */
int sec_alive(lis_sandbox *sb);
void sec_destroy(lis_sandbox *sb);
/* The probe said its attack worked: a line of out is exactly "ok". */
int sec_won(const char *out);

/* A fresh directory t_tmpdir()/NAME (malloc'ed path). */
char *sec_dir(const char *name);
void sec_write(const char *path, const char *content);
/* Listing (names, types, sizes, modes, mtimes) and content hash of a host
 * tree or file: equal strings mean nothing in it changed. malloc'ed. */
char *sec_digest(const char *path);
/* The host's lis-init (the binary every sandbox's PID 1 runs). */
const char *sec_init_bin(void);
/* Reads a host file whole ("" when unreadable); malloc'ed. */
char *sec_read(const char *path);
/* Field "Key:" of /proc/PID/status (e.g. "State", "TracerPid"); malloc'ed. */
char *sec_status(pid_t pid, const char *key);

/* A host process on a fresh pseudo-terminal: the lis CLI with ARGS as its
 * controlling terminal's session leader, the slave kept open by the test so
 * its input queue can be inspected. */
typedef struct sec_term {
    int master, slave;
    pid_t pid;
    char out[65536];
    size_t len;
} sec_term;
void sec_term_start(sec_term *t, const char *const *args);
/* Collects output until the CLI exits (at most max_wait s); its exit code or -1. */
int sec_term_wait(sec_term *t, double max_wait);
/* What is queued as input on the terminal (typed into it by someone): malloc'ed. */
char *sec_term_queued(sec_term *t);
void sec_term_close(sec_term *t);

#endif
