/* state.c - pausing and resuming a sandbox (issue 15).
 *
 * With a cgroup v2 the kernel's freezer stops everything in the sandbox's
 * cgroup, lis-init included (cgroup.freeze, then cgroup.events "frozen 1").
 * Without one (no delegation, or cgroup v1) the owner sends SIGSTOP to every
 * process in the sandbox's pid namespace except PID 1, lis-init, which keeps
 * reaping and watching memory. The limits of that fallback:
 *  - a process that the sandbox had stopped itself is continued by resume;
 *  - parents inside the sandbox see their children stop (SIGCHLD, CLD_STOPPED);
 *  - it is a scan of /proc repeated until every thread is held (stopped, or in
 *    D state with SIGSTOP pending: a vfork parent waiting for a stopped child
 *    cannot leave the kernel without stopping), so a process forked during the
 *    scan is caught by the next pass; a process still not held after 2 s is
 *    killed (a warning names it); if that does not end it, pause fails after
 *    5 s (resumed again, the error says so: never a pause that did not hold).
 * Either way the owner side records "paused" (meta.json, or the handle of a
 * sandbox without state) and lis_exec / lis_exec_start refuse with one line:
 * lis-init is never asked while paused. */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { PAUSE_KILL_AFTER_S = 2, PAUSE_FAIL_AFTER_S = 5 };

static int sandbox_alive(const lis_sandbox *sb)
{
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    return sb->pidfd >= 0 && poll(&p, 1, 0) == 0;
}

/* SIGSTOP (bit 19) in a SigPnd/ShdPnd mask of /proc/PID/task/TID/status. */
static int stop_pending(pid_t pid, const char *tid)
{
    char path[96], buf[4096]; /* SigPnd and ShdPnd come in its first 2 KiB */
    snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int)pid, tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1; /* gone meanwhile: nothing runs */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 1;
    buf[n] = 0;
    const char *keys[] = {"\nSigPnd:", "\nShdPnd:"};
    for (int i = 0; i < 2; i++) {
        const char *p = strstr(buf, keys[i]);
        if (p && (strtoull(p + 8, NULL, 16) & (1ULL << (SIGSTOP - 1))))
            return 1;
    }
    return 0;
}

/* Is every thread of pid held: stopped, dead, or in the kernel in D state with
 * SIGSTOP pending? The last is a vfork parent waiting for a child that we
 * stopped (or any uninterruptible sleep): it cannot leave the kernel without
 * handling the pending SIGSTOP first, so it runs no instruction of its own
 * until resume. A leader that exited (Z) while other threads run is not held:
 * every thread is looked at. Returns 1 held, 0 not, with the state seen in *st. */
static int threads_held(pid_t pid, char *st)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 1; /* gone */
    struct dirent *e;
    int held = 1;
    while (held && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char buf[1024], spath[96];
        snprintf(spath, sizeof spath, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
        int fd = open(spath, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = 0;
        const char *p = strrchr(buf, ')');
        char s = p && p[1] == ' ' ? p[2] : 'R';
        if (s == 'T' || s == 't' || s == 'Z' || s == 'X')
            continue;
        *st = s;
        held = s == 'D' && stop_pending(pid, e->d_name);
    }
    closedir(d);
    return held;
}

struct stop_pass {
    lis_sandbox *sb;
    int kill_left; /* past the first bound: SIGKILL what is still not held */
    int running, killed;
};

static int stop_one(pid_t pid, const char *stat, void *arg)
{
    struct stop_pass *sp = arg;
    if (pid == sp->sb->pid)
        return 0;
    /* Sent before looking, each pass: a SIGCONT from a process not yet
     * stopped clears a pending stop, and a group stop that one thread began
     * leaves the others to take it on their way out of the kernel. */
    kill(pid, SIGSTOP);
    char st = stat[0];
    if (threads_held(pid, &st))
        return 0;
    sp->running++;
    if (sp->kill_left && kill(pid, SIGKILL) == 0) {
        sp->killed++;
        lis_warn(sp->sb->ctx,
                 "sandbox %s: pause killed pid %d (state %c, not stoppable within %d s)",
                 sp->sb->name, (int)pid, st, PAUSE_KILL_AFTER_S);
    }
    return 0;
}

static int signal_one(pid_t pid, const char *stat, void *arg)
{
    (void)stat;
    if (pid != *(pid_t *)arg)
        kill(pid, SIGCONT); /* it may have exited since: nothing to continue then */
    return 0;
}

static int stop_all(lis_sandbox *sb, lis_error *err)
{
    /* SIGSTOP is delivered asynchronously: repeat until a pass finds every
     * process held (which also catches the ones forked meanwhile). Past
     * PAUSE_KILL_AFTER_S a process still not held is killed (and said so);
     * past PAUSE_FAIL_AFTER_S the pause fails: everything is continued and the
     * caller learns it (an episode then ends with reason pause_failed). */
    long wait_us = 50, total_us = 0; /* 0.05 ms doubling to 5 ms */
    int killed = 0, kill_pass = 0;
    while (total_us < PAUSE_FAIL_AFTER_S * 1000000L) {
        /* one pass kills: a process that SIGKILL cannot end is not killed again */
        int kill_now = !kill_pass && total_us >= PAUSE_KILL_AFTER_S * 1000000L;
        kill_pass |= kill_now;
        struct stop_pass sp = {sb, kill_now, 0, 0};
        int rc = lis_pidns_each(sb->pid, stop_one, &sp);
        if (rc < 0)
            return lis_fail_errnum(err, -rc, "sandbox %s: reading its processes", sb->name);
        if (sp.running == 0)
            return 0;
        killed += sp.killed;
        struct timespec ts = {0, wait_us * 1000};
        nanosleep(&ts, NULL);
        total_us += wait_us;
        wait_us = wait_us < 5000 ? wait_us * 2 : 5000;
    }
    pid_t pid1 = sb->pid;
    lis_pidns_each(sb->pid, signal_one, &pid1);
    return lis_fail(err, ETIMEDOUT,
                    "sandbox %s: pause failed: its processes did not all stop within %d s, "
                    "%d killed (resumed again)",
                    sb->name, PAUSE_FAIL_AFTER_S, killed);
}

static int set_paused(lis_sandbox *sb, int on, lis_error *err)
{
    sb->paused = on;
    return sb->state_dir[0] ? lis_meta_save(sb, err) : 0;
}

int lis_sandbox_pause(lis_sandbox *sb, lis_error *err)
{
    if (!sandbox_alive(sb))
        return lis_fail(err, ESRCH, "sandbox %s is dead (lis sandbox gc cleans it up)", sb->name);
    if (lis_meta_paused(sb))
        return 0; /* already paused: nothing to do */
    /* Recorded first, so that no command starts while the processes stop. */
    if (set_paused(sb, 1, err) < 0)
        return lis_wrap(err, "pausing sandbox %s", sb->name);
    int rc = lis_cg_freeze(sb->cg, 1, err);
    if (rc == 0)
        rc = stop_all(sb, err);
    if (rc < 0) {
        lis_error ignore;
        set_paused(sb, 0, &ignore);
        return lis_wrap(err, "pausing sandbox %s", sb->name);
    }
    return 0;
}

int lis_sandbox_resume(lis_sandbox *sb, lis_error *err)
{
    if (!sandbox_alive(sb))
        return lis_fail(err, ESRCH, "sandbox %s is dead (lis sandbox gc cleans it up)", sb->name);
    if (!lis_meta_paused(sb))
        return 0;
    int rc = lis_cg_freeze(sb->cg, 0, err);
    pid_t pid1 = sb->pid;
    if (rc == 0 && (rc = lis_pidns_each(sb->pid, signal_one, &pid1)) < 0)
        lis_fail_errnum(err, -rc, "sandbox %s: reading its processes", sb->name);
    if (rc < 0)
        return lis_wrap(err, "resuming sandbox %s", sb->name);
    if (set_paused(sb, 0, err) < 0)
        return lis_wrap(err, "resuming sandbox %s", sb->name);
    return 0;
}

int lis_sandbox_is_paused(lis_sandbox *sb) { return sandbox_alive(sb) && lis_meta_paused(sb); }
