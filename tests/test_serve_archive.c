/* test_serve_archive.c - `lis serve`'s archive endpoints against hostile and unusual
 * archives through docker-py (tests/serve/archive.py): a sparse file declaring 10 GB
 * refused with 413 and nothing written, a gzip bomb stopped at the budget without a
 * scratch copy, hard links made (and refused out of the archive), owners kept with a
 * full id map, GET of sparse files streamed sparse in bounded memory. */
#include "testlib.h"

#include "serve/server.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

Test(serve_archive, hostile_archives_and_sparse_files, .timeout = 600)
{
    if (system("python3 -c 'import docker' 2>/dev/null") != 0)
        cr_skip_test("python3-docker is not installed (scripts/deps.sh)");
    int code;
    char *out = NULL;
    ts_server s;
    ts_start(&s, NULL);
    const char *sock = s.sock;
    pid_t pid = s.pid;
    out =
        t_host(&code, "python3 %s/serve/archive.py %s lis-test:v1 %d %s/data/lis/serve-tmp-%d 2>&1",
               t_src_dir(), sock, (int)pid, t_tmpdir(), (int)pid);
    printf("%s", out);
    cr_assert(strstr(out, " 0 failed") && code == 0, "archive checks failed:\n%s", out);
    /* the key facts, named, so a check dropped from the script shows here */
    cr_assert(strstr(out, "ok sparse 10 GB PUT -> 413"), "%s", out);
    cr_assert(strstr(out, "ok gzip bomb -> 413"), "%s", out);
    cr_assert(strstr(out, "ok the hard link is one file with 2 links"), "%s", out);
    cr_assert(strstr(out, "ok GET sends holes as holes"), "%s", out);
    free(out);
    int st = ts_stop(&s);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "lis serve exit %d", st);
}
