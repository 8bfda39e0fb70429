/* doctor.c - host checks with the exact fix for each problem. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

static lis_check *add(lis_check *c, size_t *n, size_t max, const char *name, lis_check_level lv,
                      const char *fix, const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static lis_check *add(lis_check *c, size_t *n, size_t max, const char *name, lis_check_level lv,
                      const char *fix, const char *fmt, ...)
{
    if (*n >= max)
        return NULL;
    lis_check *k = &c[(*n)++];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->level = lv;
    snprintf(k->fix, sizeof k->fix, "%s", fix ? fix : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->detail, sizeof k->detail, fmt, ap);
    va_end(ap);
    return k;
}

static long read_long(const char *path, long dflt)
{
    FILE *f = fopen(path, "re");
    long v = dflt;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = dflt;
        fclose(f);
    }
    return v;
}

/* Can this user create a user namespace right now? */
static int try_userns(void)
{
    pid_t p = fork();
    if (p == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
    int st = 0;
    if (p < 0 || waitpid(p, &st, 0) < 0)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

size_t lis_doctor(lis_ctx *ctx, lis_check *c, size_t max)
{
    size_t n = 0;
    struct utsname u;
    uname(&u);
    int major = 0, minor = 0;
    sscanf(u.release, "%d.%d", &major, &minor);
    int kv = major * 1000 + minor;
    add(c, &n, max, "kernel", kv >= 5012 ? LIS_CHECK_OK : LIS_CHECK_FAIL,
        "upgrade to Linux 5.12 or newer (clone3, openat2, mount_setattr, rootless overlayfs)",
        "Linux %s%s", u.release, kv >= 5012 ? "" : " (lis needs >= 5.12)");

    long maxns = read_long("/proc/sys/user/max_user_namespaces", -1);
    long clone_ok = read_long("/proc/sys/kernel/unprivileged_userns_clone", 1);
    long apparmor = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", 0);
    int e = try_userns();
    if (e == 0)
        add(c, &n, max, "user namespaces", LIS_CHECK_OK, NULL,
            "unprivileged user namespaces work (max_user_namespaces=%ld)", maxns);
    else if (apparmor == 1)
        add(c, &n, max, "user namespaces", LIS_CHECK_FAIL,
            "install an AppArmor profile for lis: printf 'abi <abi/4.0>,\\ninclude <tunables/global>\\n"
            "profile lis /usr/local/bin/lis flags=(unconfined) {\\n  userns,\\n}\\n' | sudo tee "
            "/etc/apparmor.d/lis && sudo systemctl reload apparmor",
            "AppArmor restricts unprivileged user namespaces (Ubuntu 24.04+)");
    else if (clone_ok == 0)
        add(c, &n, max, "user namespaces", LIS_CHECK_FAIL,
            "sudo sysctl -w kernel.unprivileged_userns_clone=1 (persist in /etc/sysctl.d/)",
            "kernel.unprivileged_userns_clone=0");
    else
        add(c, &n, max, "user namespaces", LIS_CHECK_FAIL,
            "sudo sysctl -w user.max_user_namespaces=65536 (or run lis outside a container that "
            "forbids unshare)",
            "cannot create a user namespace: %s (max_user_namespaces=%ld)",
            e > 0 ? strerror(e) : "unknown", maxns);

    int sec = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
    add(c, &n, max, "seccomp", sec >= 0 ? LIS_CHECK_OK : LIS_CHECK_FAIL,
        "a kernel with CONFIG_SECCOMP_FILTER", sec >= 0 ? "seccomp filters available"
                                                       : "seccomp is not available");

    if (ctx && ctx->newuidmap[0] && ctx->subuid.count && ctx->subgid.count)
        add(c, &n, max, "uid mapping", LIS_CHECK_OK, NULL,
            "newuidmap + /etc/subuid range %lu:%lu: full 65536-id map (apt/dpkg chown works)",
            ctx->subuid.start, ctx->subuid.count);
    else if (ctx && ctx->uid == 0)
        add(c, &n, max, "uid mapping", LIS_CHECK_OK, NULL, "running as root: single map 0->0");
    else
        add(c, &n, max, "uid mapping", LIS_CHECK_WARN,
            "sudo apt-get install uidmap && sudo usermod --add-subuids 100000-165535 "
            "--add-subgids 100000-165535 $USER",
            "single uid map only: files owned by other users inside show as nobody, chown fails");

    int v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
    int hybrid = !v2 && access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) == 0;
    add(c, &n, max, "cgroups", v2 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "boot with systemd.unified_cgroup_hierarchy=1 for per-sandbox memory/pids/cpu limits",
        v2 ? "cgroup v2 unified hierarchy" : hybrid ? "cgroup v1/v2 hybrid: no rootless limits"
                                                   : "cgroup v1: no rootless limits");

    int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    add(c, &n, max, "/dev/net/tun", tun >= 0 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "only needed for --net pasta; the default proxy mode does not need it",
        tun >= 0 ? "usable (pasta possible)" : "not usable by this user (pasta/slirp impossible)");
    if (tun >= 0)
        close(tun);

    long inot = read_long("/proc/sys/fs/inotify/max_user_instances", -1);
    add(c, &n, max, "inotify instances", inot >= 1024 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "sudo sysctl -w fs.inotify.max_user_instances=8192",
        "fs.inotify.max_user_instances=%ld, shared by all sandboxes of this user", inot);
    long pidmax = read_long("/proc/sys/kernel/pid_max", -1);
    add(c, &n, max, "pid_max", pidmax >= 65536 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "sudo sysctl -w kernel.pid_max=4194304",
        "kernel.pid_max=%ld (512 sandboxes x 1024 pids would need more)", pidmax);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    add(c, &n, max, "open files", rl.rlim_cur >= 4096 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "ulimit -n 65536 (or LimitNOFILE= in the service)",
        "RLIMIT_NOFILE=%llu (a sandbox owner keeps ~3 fds per sandbox)",
        (unsigned long long)rl.rlim_cur);
    long keys = read_long("/proc/sys/kernel/keys/maxkeys", -1);
    add(c, &n, max, "kernel keys", LIS_CHECK_OK, NULL,
        "kernel.keys.maxkeys=%ld; lis creates no keyring per sandbox", keys);
    return n;
}
