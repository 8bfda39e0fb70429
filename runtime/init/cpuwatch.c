/* cpuwatch.c - the CPU share where no cgroup can enforce one: a process of
 * the sandbox that wanted a CPU for most of the time over the last 4 s is
 * moved to SCHED_IDLE and its autogroup to nice 19, so it runs only on CPU
 * time nobody else wants: the host, the neighbours and the sandbox's own
 * short commands come first. "Wanted" is the time it ran plus the time it
 * waited on a run queue (/proc/PID/schedstat): with 64 hogs on 2 CPUs each
 * runs 3 % of the time and waits the rest, and counting only the time it ran
 * (as this did once) demoted none of them. Only a hog that kept at it for
 * HOG_INTERVALS checks in a row is one: a command's CPU burst of a few
 * seconds (a build step, a pipe of 25 MB on a host 10 times oversubscribed) is
 * not held back, which on a host loaded by other work would starve it. A command cannot leave SCHED_IDLE (that needs
 * CAP_SYS_NICE or RLIMIT_NICE); it can raise its autogroup back, and is
 * demoted again at the next check. PID 1 checks every 250 ms (docs/runtime.md). */
#include "init.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ns one process spent running or runnable (schedstat's run time + run delay;
 * without it, its CPU time from stat), and its policy; -1 when gone */
static long long cpu_wanted(int dirfd, const char *pid, pid_t p, int *policy)
{
    char path[64], buf[1024];
    *policy = sched_getscheduler(p);
    snprintf(path, sizeof path, "%s/schedstat", pid);
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        buf[n] = 0;
        char *end;
        long long run = strtoll(buf, &end, 10), wait = strtoll(end, NULL, 10);
        return run + wait;
    }
    snprintf(path, sizeof path, "%s/stat", pid);
    fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *q = strrchr(buf, ')');
    if (!q)
        return -1;
    /* after the comm: field 3 is the state; utime and stime are 14 and 15 */
    long long ut = 0, stt = 0;
    int field = 2;
    for (char *tok = strtok(q + 1, " "); tok; tok = strtok(NULL, " ")) {
        if (++field == 14)
            ut = atoll(tok);
        else if (field == 15) {
            stt = atoll(tok);
            break;
        }
    }
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (ut + stt) * (1000000000ll / hz) : -1;
}

/* SCHED_IDLE ranks the process only inside its scheduling group, and with
 * autogroups (kernel.sched_autogroup_enabled) each command's session is a
 * group of normal weight: the group goes to nice 19 too. A command may set
 * its group back to 0; it is then demoted again at the next check. */
static void demote(int dirfd, const char *pid, pid_t p, int policy)
{
    if (policy != SCHED_IDLE) {
        struct sched_param sp = {0};
        sched_setscheduler(p, SCHED_IDLE, &sp);
    }
    char path[64];
    snprintf(path, sizeof path, "%s/autogroup", pid);
    int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, "19", 2) < 0) {
            /* no autogroups on this kernel: SCHED_IDLE alone */
        }
        close(fd);
    }
}

/* checks in a row (250 ms each) a process must want a CPU for 3/4 of */
#define HOG_INTERVALS 16

void init_cpuwatch(struct cpu_sample **tab, int *n, int64_t interval_ms)
{
    long long busy = interval_ms * 1000000ll * 3 / 4;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct cpu_sample *next = NULL;
    int m = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, "1"))
            continue;
        pid_t pid = atoi(e->d_name);
        int policy;
        long long t = cpu_wanted(dirfd(d), e->d_name, pid, &policy);
        if (t < 0)
            continue;
        int streak = 0;
        for (int i = 0; i < *n; i++)
            if ((*tab)[i].pid == pid && busy > 0 && t - (*tab)[i].ticks >= busy)
                streak = (*tab)[i].streak + 1;
        if (streak >= HOG_INTERVALS)
            demote(dirfd(d), e->d_name, pid, policy);
        if (m == cap) {
            cap = cap ? 2 * cap : 64;
            struct cpu_sample *g = realloc(next, (size_t)cap * sizeof *g);
            if (!g)
                break;
            next = g;
        }
        next[m++] = (struct cpu_sample){pid, t, streak};
    }
    closedir(d);
    free(*tab);
    *tab = next;
    *n = m;
}
