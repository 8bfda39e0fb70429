/* capacity.c - before a batch starts: will N sandboxes fit on this host?
 * Raises RLIMIT_NOFILE as far as the hard limit allows and checks the
 * per-user namespace and pid limits every sandbox draws on, so a run of 512
 * fails at once with the fix rather than at episode 300 with EAGAIN. */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

/* fds the batch process holds per live episode: the sandbox handle (pidfd,
 * control socket, ns fds), a running command (connection, epoll, pipes) and
 * an LLM connection, with room to spare */
#define FDS_PER_EPISODE 16

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

int batch_capacity_check(int n, int sandboxes, FILE *warn, lis_error *err)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)n * FDS_PER_EPISODE + 256;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        rl.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (want < need)
            return lis_fail(err, EMFILE,
                            "--concurrency %d needs about %llu open files, but the "
                            "hard limit is %llu: raise it (ulimit -Hn %llu as root, or nofile in "
                            "/etc/security/limits.conf) or lower --concurrency",
                            n, (unsigned long long)need, (unsigned long long)rl.rlim_max,
                            (unsigned long long)need);
    }
    if (!sandboxes)
        return 0;
    /* each sandbox: a user, mount, pid, net, ipc, uts and cgroup namespace, plus
     * one uts namespace per running command (its kill tag) */
    static const char *const ns[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        char path[96];
        snprintf(path, sizeof path, "/proc/sys/user/max_%s_namespaces", ns[i]);
        long have = read_long(path), want = (long)n * (strcmp(ns[i], "uts") ? 2 : 3) + 64;
        if (have >= 0 && have < want)
            return lis_fail(err, EAGAIN,
                            "--concurrency %d needs up to %ld %s namespaces, the "
                            "host allows %ld: sysctl -w user.max_%s_namespaces=%ld (lis doctor "
                            "checks this), or lower --concurrency",
                            n, want, ns[i], have, ns[i], want);
    }
    long pid_max = read_long("/proc/sys/kernel/pid_max");
    long want_pids = (long)n * 8 + 1024;
    if (pid_max >= 0 && pid_max < want_pids)
        return lis_fail(err, EAGAIN,
                        "--concurrency %d needs about %ld pids, kernel.pid_max is "
                        "%ld: sysctl -w kernel.pid_max=%ld, or lower --concurrency",
                        n, want_pids, pid_max, want_pids < 4194304 ? want_pids * 2 : 4194304);
    long threads = read_long("/proc/sys/kernel/threads-max");
    if (threads >= 0 && threads < want_pids)
        return lis_fail(err, EAGAIN,
                        "--concurrency %d needs about %ld tasks, kernel.threads-max "
                        "is %ld: sysctl -w kernel.threads-max=%ld",
                        n, want_pids, threads, want_pids * 2);
    long ino = read_long("/proc/sys/fs/inotify/max_user_instances");
    if (ino >= 0 && ino < n && warn)
        fprintf(warn,
                "lis: warning: fs.inotify.max_user_instances is %ld, below --concurrency "
                "%d: tools that watch files in many sandboxes at once may fail (sysctl -w "
                "fs.inotify.max_user_instances=%d)\n",
                ino, n, n * 2);
    return 0;
}
