/* cpuwatch.c - the CPU share where no cgroup can enforce one: a process of
 * the sandbox that keeps wanting a CPU is held back in two steps. After 4 s
 * its autogroup (each command is a session, so a scheduling group of its own
 * when kernel.sched_autogroup_enabled is on) goes to nice 10: a tenth of a
 * normal group's share, as every sandbox process's nice 10 is to a host
 * process. After 30 s it goes to SCHED_IDLE and its autogroup to nice 19: it
 * then runs only on CPU time nobody else wants, so the host, the neighbours
 * and the sandbox's short commands come first. "Wanting" is the time it ran
 * plus the time it waited on a run queue (/proc/PID/schedstat), for 3/4 of
 * each check: with 64 hogs on 2 CPUs each runs 3 % of the time and waits the
 * rest, and counting only the time it ran (as this did once) held none of
 * them back. The steps are slow on purpose: a command that computes for a
 * few seconds on a host loaded by other work also waits most of the time,
 * and at nice 19 it would get next to nothing. A command cannot leave
 * SCHED_IDLE or lower its autogroup's nice (that needs CAP_SYS_NICE or
 * RLIMIT_NICE); PID 1 checks every 250 ms (docs/runtime.md). */
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
static void set_autogroup(int dirfd, const char *pid, const char *nice)
{
    char path[64];
    snprintf(path, sizeof path, "%s/autogroup", pid);
    int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, nice, strlen(nice)) < 0) {
            /* no autogroups on this kernel: the policy alone */
        }
        close(fd);
    }
}

/* The second step: only what nobody else wants. */
static void demote(int dirfd, const char *pid, pid_t p, int policy)
{
    if (policy != SCHED_IDLE) {
        struct sched_param sp = {0};
        sched_setscheduler(p, SCHED_IDLE, &sp);
    }
    set_autogroup(dirfd, pid, "19");
}

/* checks in a row (250 ms each) a process must want a CPU for 3/4 of: for
 * its autogroup to go to nice 10 (a tenth of a normal group's share, as the
 * fallback's nice 10 is to a process), then for SCHED_IDLE and nice 19 */
#define HOG_INTERVALS 16
#define IDLE_INTERVALS 120

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
        if (streak >= IDLE_INTERVALS)
            demote(dirfd(d), e->d_name, pid, policy);
        else if (streak >= HOG_INTERVALS && policy != SCHED_IDLE)
            set_autogroup(dirfd(d), e->d_name, "10");
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
