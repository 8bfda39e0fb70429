/* doctor.c - host checks with the exact fix for each problem. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : errno ? errno : EIO;
    close(fd);
    return e;
}

/* Can this user create a user namespace right now, and does it come with
 * capabilities (AppArmor's restriction hands out namespaces without)? */
void lis_userns_probe_run(lis_userns_probe *p)
{
    memset(p, 0, sizeof *p);
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0) {
        p->unshare_err = errno;
        return;
    }
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = fork();
    if (pid == 0) {
        lis_userns_probe r = {0};
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
            r.unshare_err = errno;
        } else {
            write_str("/proc/self/setgroups", "deny");
            snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
            r.map_err = write_str("/proc/self/uid_map", map);
            snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
            if (!r.map_err)
                r.map_err = write_str("/proc/self/gid_map", map);
            if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                r.mount_err = errno;
        }
        _exit(write(fd[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0) {
        p->unshare_err = errno;
        close(fd[0]);
        return;
    }
    ssize_t n = read(fd[0], p, sizeof *p);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (n != (ssize_t)sizeof *p) {
        memset(p, 0, sizeof *p);
        p->unshare_err = EIO;
    }
}

#define APPARMOR_FIX                                                                                 \
    "install lis's AppArmor profile (like Ubuntu's for bwrap): sudo scripts/apparmor/install.sh %s " \
    "(from the lis sources; docs/ci.md); or, on a throw-away CI machine only: sudo sysctl -w "       \
    "kernel.apparmor_restrict_unprivileged_userns=0"

void lis_doctor_userns(const char *proc_sys, const lis_userns_probe *p, const char *self,
                       lis_check *k)
{
    long maxns = lis_read_sysctl(proc_sys, "user/max_user_namespaces", -1);
    long clone_ok = lis_read_sysctl(proc_sys, "kernel/unprivileged_userns_clone", 1); /* Debian */
    int apparmor = lis_apparmor_restricts_userns(proc_sys);
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "user namespaces");
    k->level = LIS_CHECK_FAIL;
    const char *what = p->map_err ? "writing uid_map" : "mounting";
    int e = p->map_err ? p->map_err : p->mount_err;
    if (!p->unshare_err && !e) {
        k->level = LIS_CHECK_OK;
        snprintf(k->detail, sizeof k->detail,
                 "unprivileged user namespaces work (max_user_namespaces=%ld)%s", maxns,
                 apparmor ? "; AppArmor restricts them on this host and lets lis through" : "");
    } else if (!p->unshare_err) { /* a namespace, but no capabilities in it */
        if (apparmor) {
            snprintf(k->detail, sizeof k->detail,
                     "AppArmor restricts unprivileged user namespaces "
                     "(kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10+): lis gets "
                     "one without capabilities (%s: %s)",
                     what, strerror(e));
            snprintf(k->fix, sizeof k->fix, APPARMOR_FIX, self && *self ? self : "/path/to/lis");
        } else {
            snprintf(k->detail, sizeof k->detail,
                     "a user namespace is created but %s in it fails: %s", what, strerror(e));
            snprintf(k->fix, sizeof k->fix,
                     "a security module (AppArmor, SELinux) or a seccomp "
                     "policy of the container denies capabilities in user namespaces: allow "
                     "them for lis (aa-status, ausearch -m avc), or run lis outside that "
                     "container");
        }
    } else if (clone_ok == 0) {
        snprintf(k->detail, sizeof k->detail,
                 "kernel.unprivileged_userns_clone=0: unprivileged "
                 "user namespaces are disabled (%s)",
                 strerror(p->unshare_err));
        snprintf(k->fix, sizeof k->fix,
                 "sudo sysctl -w kernel.unprivileged_userns_clone=1, and "
                 "to keep it: echo kernel.unprivileged_userns_clone=1 | sudo tee "
                 "/etc/sysctl.d/90-lis-userns.conf");
    } else if (maxns == 0 || p->unshare_err == ENOSPC || p->unshare_err == EUSERS) {
        snprintf(k->detail, sizeof k->detail, "user.max_user_namespaces=%ld: %s", maxns,
                 maxns == 0 ? "user namespaces are disabled" : "the limit is reached");
        snprintf(k->fix, sizeof k->fix,
                 "sudo sysctl -w user.max_user_namespaces=65536, and to "
                 "keep it: echo user.max_user_namespaces=65536 | sudo tee "
                 "/etc/sysctl.d/90-lis-userns.conf");
    } else if (apparmor) {
        snprintf(k->detail, sizeof k->detail,
                 "AppArmor denies unprivileged user namespaces "
                 "(kernel.apparmor_restrict_unprivileged_userns=1): %s",
                 strerror(p->unshare_err));
        snprintf(k->fix, sizeof k->fix, APPARMOR_FIX, self && *self ? self : "/path/to/lis");
    } else {
        snprintf(k->detail, sizeof k->detail,
                 "cannot create a user namespace: %s "
                 "(max_user_namespaces=%ld)",
                 strerror(p->unshare_err), maxns);
        snprintf(k->fix, sizeof k->fix,
                 "inside a container, unshare is forbidden by its seccomp "
                 "profile: run lis on the host or in a VM (docs/ci.md); Docker: --security-opt "
                 "seccomp=unconfined --security-opt apparmor=unconfined");
    }
}

#define DELEGATE_FIX                                                                                \
    "sudo mkdir -p /etc/systemd/system/user@.service.d && printf '[Service]\\nDelegate=cpu cpuset " \
    "io memory pids\\n' | sudo tee /etc/systemd/system/user@.service.d/delegate.conf && sudo "      \
    "systemctl daemon-reload, log in again, then run lis in a delegated scope: systemd-run --user " \
    "--scope -p Delegate=yes lis ... (or run lis inside a container/CI job with its own cgroup "    \
    "namespace)"

static void cgroup_checks(lis_ctx *ctx, lis_check *c, size_t *n, size_t max)
{
    lis_cg_info in;
    if (ctx)
        lis_cg_probe(ctx, &in);
    else
        memset(&in, 0, sizeof in);
    int pure_v2 = in.unified && !in.hybrid;
    add(c, n, max, "cgroups", pure_v2 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "boot with systemd.unified_cgroup_hierarchy=1 (kernel command line) for rootless "
        "per-sandbox memory/pids/cpu limits",
        "%s",
        pure_v2      ? "cgroup v2 unified hierarchy"
        : in.unified ? "cgroup v1/v2 hybrid: memory/pids/cpu are on v1, no rootless cgroups"
                     : "cgroup v1: no rootless cgroups");
    if (in.kind == LIS_CG_V2) {
        int cpu = strstr(in.controllers, "cpu") != NULL;
        add(c, n, max, "cgroup delegation", cpu ? LIS_CHECK_OK : LIS_CHECK_WARN, DELEGATE_FIX,
            "%s is delegated (controllers: %s)%s", in.base, in.controllers,
            cpu ? "" : "; no cpu controller: --cpus is not enforced");
    } else if (in.kind == LIS_CG_V1) {
        add(c, n, max, "cgroup delegation", LIS_CHECK_WARN,
            "use a cgroup v2 host (systemd.unified_cgroup_hierarchy=1) for rootless limits",
            "root on cgroup v1: limits enforced through the v1 fallback (%s)", in.base);
    } else {
        add(c, n, max, "cgroup delegation", LIS_CHECK_WARN, DELEGATE_FIX,
            "no cgroup for sandboxes: %s", ctx ? in.reason : "no context");
        /* what sandboxes get instead (docs/runtime.md, fallback limits) */
        add(c, n, max, "fallback limits", LIS_CHECK_WARN, NULL,
            "sandboxes get fallback limits: processes per sandbox (RLIMIT_NPROC), memory per "
            "process (RLIMIT_DATA) and in sum (lis-init's watchdog, 0.1-1 s late), CPU only "
            "by priority (nice 10, CPU hogs moved to SCHED_IDLE; no quota)");
    }
}

/* Native overlayfs with userxattr inside a user namespace, for real: in the
 * data directory, where upper layers live. Returns 0 or an errno. */
static int try_overlay(const char *base)
{
    char l[PATH_MAX + 8], u[PATH_MAX + 8], w[PATH_MAX + 8], m[PATH_MAX + 8], ww[PATH_MAX + 16];
    snprintf(l, sizeof l, "%s/l", base);
    snprintf(u, sizeof u, "%s/u", base);
    snprintf(w, sizeof w, "%s/w", base);
    snprintf(m, sizeof m, "%s/m", base);
    if (mkdir(l, 0755) || mkdir(u, 0755) || mkdir(w, 0755) || mkdir(m, 0755))
        return errno;
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t p = fork();
    if (p == 0) {
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
            _exit(errno);
        char map[64];
        int fd = open("/proc/self/setgroups", O_WRONLY);
        if (fd >= 0) {
            if (write(fd, "deny", 4) < 0) {
            }
            close(fd);
        }
        snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
        fd = open("/proc/self/uid_map", O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
            _exit(errno);
        close(fd);
        snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
        fd = open("/proc/self/gid_map", O_WRONLY);
        if (fd < 0 || write(fd, map, strlen(map)) < 0)
            _exit(errno);
        close(fd);
        char opts[4 * PATH_MAX];
        snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", l, u, w);
        _exit(mount("overlay", m, "overlay", 0, opts) == 0 ? 0 : errno);
    }
    int st = 0;
    int e = p < 0 || waitpid(p, &st, 0) < 0 ? errno : WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
    snprintf(ww, sizeof ww, "%s/work", w);
    rmdir(ww);
    rmdir(l), rmdir(u), rmdir(w), rmdir(m);
    return e;
}

static void overlay_check(lis_ctx *ctx, lis_check *c, size_t *n, size_t max)
{
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s/.doctor-XXXXXX", ctx ? ctx->data_dir : "/tmp");
    if (!mkdtemp(base)) {
        add(c, n, max, "overlay in userns", LIS_CHECK_WARN,
            "check that the data directory is "
            "writable",
            "could not try: mkdtemp %s: %s", base, strerror(errno));
        return;
    }
    int e = try_overlay(base);
    rmdir(base);
    if (!e)
        add(c, n, max, "overlay in userns", LIS_CHECK_OK, NULL,
            "native overlayfs (userxattr) mounts in a user namespace on %s",
            ctx ? ctx->data_dir : "/tmp");
    else
        add(c, n, max, "overlay in userns", LIS_CHECK_FAIL,
            "Linux >= 5.11 with overlayfs; keep the data directory (XDG_DATA_HOME) on ext4, xfs "
            "or tmpfs, not on NFS or overlayfs (e.g. in Docker mount a volume there)",
            "mounting overlayfs with userxattr in a user namespace on %s failed: %s",
            ctx ? ctx->data_dir : "/tmp", strerror(e));
}

size_t lis_doctor(lis_ctx *ctx, lis_check *c, size_t max)
{
    size_t n = 0;
    lis_error perr;
    if (ctx)
        lis_ctx_prepare_spawn(ctx, &perr);
    struct utsname u;
    uname(&u);
    int major = 0, minor = 0;
    sscanf(u.release, "%d.%d", &major, &minor);
    int kv = major * 1000 + minor;
    add(c, &n, max, "kernel", kv >= 5012 ? LIS_CHECK_OK : LIS_CHECK_FAIL,
        "upgrade to Linux 5.12 or newer (clone3, openat2, mount_setattr, rootless overlayfs)",
        "Linux %s%s", u.release, kv >= 5012 ? "" : " (lis needs >= 5.12)");

    if (n < max) {
        lis_userns_probe up;
        lis_userns_probe_run(&up);
        char self[PATH_MAX];
        ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
        self[sl > 0 ? sl : 0] = 0;
        lis_doctor_userns(NULL, &up, self, &c[n++]);
    }

    int sec = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
    add(c, &n, max, "seccomp", sec >= 0 ? LIS_CHECK_OK : LIS_CHECK_FAIL,
        "a kernel with CONFIG_SECCOMP_FILTER",
        sec >= 0 ? "seccomp filters available" : "seccomp is not available");
    /* what a policy's rules guarantee here (docs/monitoring.md has the table) */
    int ll = lis_landlock_abi();
    if (ll)
        add(c, &n, max, "policy rules", LIS_CHECK_OK, NULL,
            "Landlock ABI %d: exec and write allow-lists are enforced by the kernel; exec deny "
            "rules by the monitor at the exec and checked after it; file rules after each step",
            ll);
    else
        add(c, &n, max, "policy rules", LIS_CHECK_WARN,
            "a kernel with Landlock (5.13+, landlock in the lsm= list)",
            "no Landlock: exec rules are enforced by the monitor at the exec and checked after "
            "it, not by the kernel; file rules after each step");

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

    cgroup_checks(ctx, c, &n, max);
    overlay_check(ctx, c, &n, max);

    /* information only: lis needs no tun device (--net proxy gives sandboxes
     * HTTP(S) without one), so its absence is no warning */
    int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    add(c, &n, max, "/dev/net/tun", LIS_CHECK_OK, NULL, "%s; lis does not need it (--net proxy)",
        tun >= 0 ? "usable by this user" : "not usable by this user");
    if (tun >= 0)
        close(tun);

    long inot = lis_read_long("/proc/sys/fs/inotify/max_user_instances", -1);
    add(c, &n, max, "inotify instances", inot >= 1024 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "sudo sysctl -w fs.inotify.max_user_instances=8192",
        "fs.inotify.max_user_instances=%ld, shared by all sandboxes of this user", inot);
    long pidmax = lis_read_long("/proc/sys/kernel/pid_max", -1);
    add(c, &n, max, "pid_max", pidmax >= 65536 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "sudo sysctl -w kernel.pid_max=4194304",
        "kernel.pid_max=%ld (512 sandboxes x 1024 pids would need more)", pidmax);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    add(c, &n, max, "open files", rl.rlim_cur >= 4096 ? LIS_CHECK_OK : LIS_CHECK_WARN,
        "ulimit -n 65536 (or LimitNOFILE= in the service)",
        "RLIMIT_NOFILE=%llu (a sandbox owner keeps ~3 fds per sandbox)",
        (unsigned long long)rl.rlim_cur);
    long keys = lis_read_long("/proc/sys/kernel/keys/maxkeys", -1);
    add(c, &n, max, "kernel keys", LIS_CHECK_OK, NULL,
        "kernel.keys.maxkeys=%ld; lis creates no keyring per sandbox", keys);
    return n;
}
