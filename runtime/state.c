/* state.c - pausing and resuming a sandbox (issue 15).
 *
 * With a cgroup v2 the kernel's freezer stops everything in the sandbox's
 * cgroup, lis-init included (cgroup.freeze, then cgroup.events "frozen 1").
 * Without one (no delegation, or cgroup v1) the owner sends SIGSTOP to every
 * process in the sandbox's pid namespace except PID 1, lis-init, which keeps
 * reaping and watching memory. The limits of that fallback:
 *  - a process that the sandbox had stopped itself is continued by resume;
 *  - parents inside the sandbox see their children stop (SIGCHLD, CLD_STOPPED);
 *  - it is a scan of /proc repeated until no running process is left, so a
 *    process forked during the scan is caught by the next pass; a sandbox that
 *    forks faster than we stop it makes pause fail after 5 s (resumed again).
 * Either way the owner side records "paused" (meta.json, or the handle of a
 * sandbox without state) and lis_exec / lis_exec_start refuse with one line:
 * lis-init is never asked while paused. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int sandbox_alive(const lis_sandbox *sb)
{
    struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
    return sb->pidfd >= 0 && poll(&p, 1, 0) == 0;
}

struct signal_pass {
    pid_t pid1;
    int sig, running;
};

static int signal_one(pid_t pid, const char *stat, void *arg)
{
    struct signal_pass *sp = arg;
    char s = stat[0];
    if (pid == sp->pid1 || s == 'Z' || s == 'X')
        return 0;
    if (s != 'T' && s != 't')
        sp->running++;
    kill(pid, sp->sig); /* it may have exited since: nothing to stop then */
    return 0;
}

/* Sends sig to every process of sb's pid namespace but PID 1. Returns how
 * many of them were not stopped (state T/t, zombie or gone) before, or -1. */
static int signal_all(lis_sandbox *sb, int sig, lis_error *err)
{
    struct signal_pass sp = {sb->pid, sig, 0};
    int rc = lis_pidns_each(sb->pid, signal_one, &sp);
    if (rc < 0)
        return lis_fail_errnum(err, -rc, "sandbox %s: reading its processes", sb->name);
    return sp.running;
}

static int stop_all(lis_sandbox *sb, lis_error *err)
{
    /* SIGSTOP is delivered asynchronously: repeat until a pass finds every
     * process stopped already (which also catches the ones forked meanwhile). */
    long wait_us = 50, total_us = 0; /* 0.05 ms doubling to 5 ms: at most ~5 s */
    while (total_us < 5000000) {
        int running = signal_all(sb, SIGSTOP, err);
        if (running <= 0)
            return running;
        struct timespec ts = {0, wait_us * 1000};
        nanosleep(&ts, NULL);
        total_us += wait_us;
        wait_us = wait_us < 5000 ? wait_us * 2 : 5000;
    }
    lis_error ignore;
    signal_all(sb, SIGCONT, &ignore);
    return lis_fail(err, ETIMEDOUT,
                    "sandbox %s: its processes did not all stop within 5 s "
                    "(resumed again)",
                    sb->name);
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
    if (rc == 0)
        rc = signal_all(sb, SIGCONT, err);
    if (rc < 0)
        return lis_wrap(err, "resuming sandbox %s", sb->name);
    if (set_paused(sb, 0, err) < 0)
        return lis_wrap(err, "resuming sandbox %s", sb->name);
    return 0;
}

int lis_sandbox_is_paused(lis_sandbox *sb) { return sandbox_alive(sb) && lis_meta_paused(sb); }
