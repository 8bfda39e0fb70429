/* cpuwatch.c - the CPU share where no cgroup can enforce one: a process of
 * the sandbox that keeps wanting a CPU is held back in two steps. Once it has
 * wanted one for 3/4 of a window of 4 s, it and its autogroup (each command
 * is a session, so a scheduling group of its own when
 * kernel.sched_autogroup_enabled is on) go to nice 19: between groups only
 * the group's weight counts, and at nice 19 (weight 15 against a normal
 * group's 1024) 64 hogs on 2 CPUs weigh less than one neighbour. After 30 s
 * it goes to SCHED_IDLE: it then runs only on CPU time nobody else wants.
 * "Wanting" is the time it ran plus the time it waited on a run queue
 * (/proc/PID/schedstat): with 64 hogs on 2 CPUs each runs 3 % of the time and
 * waits the rest. It is judged over the whole window, not check by check:
 * schedstat adds a wait only when the task next runs, so a starved hog shows
 * no progress in many single checks (a rule of 120 checks in a row demoted
 * none of 64); a process found on a run queue (state R) when its figure did
 * not move is counted as having wanted the CPU since the last check, so a hog
 * that waits for seconds on a host busy with other work stays one. The 4 s keep a burst (a build step, a pipe) at full share. A
 * command cannot lower its nice or leave SCHED_IDLE (that needs CAP_SYS_NICE
 * in the initial namespace, or RLIMIT_NICE); it can set its autogroup back to
 * 0 and is demoted again at the next check. The kernel lets an unprivileged
 * process change an autogroup's nice only ten times a second, host-wide
 * (proc_sched_autogroup_set_nice), so a group is written only when it is not
 * already where it should be, and a refused write is retried 250 ms later.
 * PID 1 checks every 250 ms (docs/runtime.md). */
#include "init.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* ns one process spent running or runnable (schedstat's run time + run delay;
 * without it, its CPU time from stat), and its policy; -1 when gone */
static long long cpu_wanted(int dirfd, const char *pid, pid_t p, int *policy)
{
    char buf[1024];
    *policy = sched_getscheduler(p);
    if (init_proc_read(dirfd, pid, "schedstat", buf, sizeof buf) > 0) {
        char *end;
        long long run = strtoll(buf, &end, 10), wait = strtoll(end, NULL, 10);
        return run + wait;
    }
    if (init_proc_read(dirfd, pid, "stat", buf, sizeof buf) < 0)
        return -1;
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

/* Whether the process runs or waits on a run queue now (state R). */
static int is_runnable(int dirfd, const char *pid)
{
    char buf[512];
    if (init_proc_read(dirfd, pid, "stat", buf, sizeof buf) < 0)
        return 0;
    const char *q = strrchr(buf, ')');
    return q && q[1] == ' ' && q[2] == 'R';
}

/* The autogroup at nice 19, written only when it is not (see the top). */
static void autogroup_to_19(int dirfd, const char *pid)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "%s/autogroup", pid);
    int fd = openat(dirfd, path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return; /* no autogroups on this kernel: the process's nice alone */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    const char *nice = strstr(buf, " nice ");
    if (!nice || atoi(nice + 6) != 19) {
        if (write(fd, "19", 2) < 0) {
            /* EAGAIN: the host-wide rate limit; the next check tries again */
        }
    }
    close(fd);
}

/* The first step: nice 19, the process and its group. */
static void hold_back(int dirfd, const char *pid, pid_t p)
{
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)p);
    if (errno == 0 && nice < 19)
        setpriority(PRIO_PROCESS, (id_t)p, 19);
    autogroup_to_19(dirfd, pid);
}

/* The window a process must want a CPU for 3/4 of: for nice 19, then for
 * SCHED_IDLE; a window shorter than JUDGE_MS is not judged yet (schedstat's
 * lag, see the top), a longer one that falls under 3/4 starts again. */
#define HOLD_MS 4000
#define IDLE_MS 30000
#define JUDGE_MS 2000

void init_cpuwatch(struct cpu_sample **tab, int *n, int64_t now_ms)
{
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
        struct cpu_sample s = {pid, t, now_ms, t, now_ms};
        for (int i = 0; i < *n; i++)
            if ((*tab)[i].pid == pid) {
                s = (*tab)[i];
                /* schedstat lags for a starved task (see the top): one that
                 * is on a run queue now wanted the CPU since the last check */
                long long dt = (now_ms - s.at_ms) * 1000000ll, est = s.est;
                if (t - est < dt * 3 / 4 && is_runnable(dirfd(d), e->d_name))
                    est += dt;
                s.est = t > est ? t : est;
                s.at_ms = now_ms;
            }
        int64_t span = now_ms - s.since_ms;
        if (span >= JUDGE_MS && (s.est - s.since_ns) * 4 < span * 1000000ll * 3)
            s = (struct cpu_sample){pid, s.est, now_ms, s.est, now_ms}; /* not a hog: anew */
        else if (span >= IDLE_MS) {
            if (policy != SCHED_IDLE) {
                struct sched_param sp = {0};
                sched_setscheduler(pid, SCHED_IDLE, &sp);
            }
            hold_back(dirfd(d), e->d_name, pid);
        } else if (span >= HOLD_MS) {
            hold_back(dirfd(d), e->d_name, pid);
        }
        if (m == cap) {
            cap = cap ? 2 * cap : 64;
            struct cpu_sample *g = realloc(next, (size_t)cap * sizeof *g);
            if (!g)
                break;
            next = g;
        }
        next[m++] = s;
    }
    closedir(d);
    free(*tab);
    *tab = next;
    *n = m;
}
