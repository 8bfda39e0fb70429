/* capacity.c - before a batch starts: will N sandboxes fit on this host?
 * Raises RLIMIT_NOFILE as far as the hard limit allows and checks the
 * per-user namespace and pid limits every sandbox draws on, so a run of 512
 * fails at once with the fix rather than at episode 300 with EAGAIN; and
 * checks that N x (memory limit + writable budget) fits the host's memory:
 * a batch sandbox's writable space is a tmpfs, RAM (or swap) like its
 * processes' memory, so a run that does not fit can take the host down
 * (--overcommit starts it anyway). */
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

/* MemAvailable + SwapFree of /proc/meminfo in bytes; 0 when unknown */
static uint64_t host_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb, avail = 0, swap = 0;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            avail = kb;
        else if (sscanf(line, "SwapFree: %llu kB", &kb) == 1)
            swap = kb;
    }
    fclose(f);
    return (uint64_t)(avail + swap) * 1024;
}

static double gib(uint64_t b) { return (double)b / (1u << 30); }

int batch_memory_check(int n, uint64_t memory, uint64_t disk, int overcommit, FILE *warn,
                       lis_error *err)
{
    uint64_t have = host_memory();
    if (!have || n <= 0)
        return 0;
    if (memory == LIS_UNLIMITED || disk == LIS_UNLIMITED) {
        if (overcommit)
            return 0;
        return lis_fail(err, ENOMEM,
                        "--%s unlimited: %d sandboxes' memory and writable space (a tmpfs: RAM) "
                        "cannot be bounded by this host's %.1f GiB; give a size, or pass "
                        "--overcommit to run anyway",
                        memory == LIS_UNLIMITED ? "memory" : "disk", n, gib(have));
    }
    uint64_t each = memory + disk, need = (uint64_t)n * each;
    if (need <= have)
        return 0;
    if (overcommit) {
        if (warn)
            fprintf(warn,
                    "lis: warning: --overcommit: %d x (%.2f GiB memory + %.2f GiB disk) = %.1f "
                    "GiB is more than the host's available %.1f GiB; episodes may be OOM-killed\n",
                    n, gib(memory), gib(disk), gib(need), gib(have));
        return 0;
    }
    long fit = (long)(have / each);
    return lis_fail(err, ENOMEM,
                    "--concurrency %d x (--memory %.2f GiB + --disk %.2f GiB) = %.1f GiB is more "
                    "than this host's available memory, %.1f GiB (MemAvailable + SwapFree; a "
                    "batch sandbox's writable space is a tmpfs, so it is RAM too): lower "
                    "--concurrency to %ld, --memory or --disk, or pass --overcommit to start "
                    "anyway (then the kernel's OOM killer may end episodes)",
                    n, gib(memory), gib(disk), gib(need), gib(have), fit > 0 ? fit : 1);
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
