/* testlib.h - helpers shared by the criterion suites.
 * The suites run as an unprivileged user (scripts/test.sh arranges it) against
 * real namespaces, mounts and processes. */
#ifndef LIS_TESTLIB_H
#define LIS_TESTLIB_H

#include "lis.h"
#include <criterion/criterion.h>
#include <stddef.h>

/* Fixture root filesystems; the test is skipped when one is missing. */
const char *t_busybox(void);
const char *t_debian(void);
/* The Debian fixture imported as NAME into the store of t_ctx()'s tmpdir (a
 * tar of it, then `lis rootfs import`): the image lis serve's suites use. */
void t_import_debian(const char *name);
/* The one run directory lis batch made under DIR/out, without its last '/'
 * ("" when there is none yet). */
void t_run_dir(const char *dir, char *out, size_t len);
/* The lis binary and the repository's tests/ directory. */
const char *t_lis_bin(void);
const char *t_src_dir(void);
/* A context with private run/data dirs under a fresh temporary directory. */
lis_ctx *t_ctx(void);
/* The temporary directory of the last t_ctx(). */
const char *t_tmpdir(void);
/* An ephemeral sandbox on rootfs with a tmpfs upper layer. */
lis_sandbox *t_sandbox(lis_ctx *ctx, const char *rootfs);
/* Runs sh -c CMD in sb with captured output; asserts the call itself worked. */
void t_sh(lis_sandbox *sb, const char *cmd, lis_result *r);
/* Runs a host shell command, returns its stdout (malloc'ed) and exit code. */
char *t_host(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A web server on the host's loopback serving dir (python3's http.server,
 * gone after `seconds` at the latest); returns its port. t_web_stop(dir)
 * ends it (its pid is in dir/pid). */
int t_web_start(const char *dir, int seconds);
void t_web_stop(const char *dir);
/* How many host processes live in the pid namespace whose link text is ns. */
int t_procs_in_ns(const char *ns);
/* Runs the lis CLI (stdout and stderr together) with XDG dirs under the last
 * t_ctx()'s tmpdir; returns its output (malloc'ed) and exit code. */
char *t_lis(int *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A file of the build tree next to the lis binary (e.g. "tests/sysprobe");
 * fails the test when it is missing. Returns a static buffer. */
const char *t_build_file(const char *rel);
/* A tmpfs sandbox of rootfs with limits lim and tests/sysprobe at /probe. */
lis_sandbox *t_probe_sandbox(lis_ctx *ctx, const char *rootfs, lis_limits lim);
/* Current resident set size of this process in KiB. */
long t_rss_kib(void);
/* A fresh directory /tmp/PREFIX-XXXXXX in dir[len] (fails the test when it
 * cannot be made); t_rmtree removes it and empties dir ("" is a no-op). */
void t_mkdtemp(char *dir, size_t len, const char *prefix);
void t_rmtree(char *dir);
/* DIR/NAME in one of four rotating static buffers (so a call may use four). */
const char *t_under(const char *dir, const char *name);
/* Writes TEXT to PATH (replacing it); reads a whole file (at most 64 MiB,
 * malloc'ed, NUL-terminated), or one as JSON. Each fails the test on error. */
void t_put(const char *path, const char *text);
char *t_slurp(const char *path);

/* tests/fake_llm.py on 127.0.0.1 with SCRIPT (JSON text), killed with the test
 * process at the latest; url is its OpenAI base URL, log the request log. */
#include <cjson/cJSON.h>
typedef struct t_fake {
    pid_t pid;
    int port, out_fd;
    char dir[256], script[300], log[300], url[128];
} t_fake;
void t_fake_start(t_fake *f, const char *script);
void t_fake_stop(t_fake *f);
/* The n-th logged request (0-based), NULL when absent; the number logged. */
cJSON *t_fake_request(const t_fake *f, int n);
int t_fake_count(const t_fake *f);

/* A lis batch output directory's results.jsonl as an array of rows (empty
 * when missing); a torn row fails the test. */
cJSON *t_results_rows(const char *rdir);
cJSON *t_slurp_json(const char *path);

/* As root, the two test users ($LIS_TEST_USER and $LIS_TEST_USER-b; the test
 * is skipped without them or the busybox fixture) and a directory
 * /tmp/lis-TAG-XXXXXX with a home of 0700 for each (owner[64], other[80],
 * dir[256] filled), the busybox fixture as bb.tar in the owner's. */
void t_two_users(char *owner, char *other, char *dir, const char *tag);

/* text into path (created or truncated); the test fails when it cannot. */
void t_write_file(const char *path, const char *text);

/* A fresh directory TMPDIR/PREFIX-NAME-PID with an empty out/ in it (static:
 * the next call reuses it). */
char *t_fresh_dir(const char *prefix, const char *name);
/* sh -c cmd in a child; its pid. */
pid_t t_spawn_sh(const char *cmd);
/* A TCP port on 127.0.0.1 that takes connections (the kernel's backlog) and
 * never answers: a model endpoint whose calls wait as long as the test wants. */
int t_silent_endpoint(int *port);

#endif
