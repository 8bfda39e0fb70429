/* sysprobe - tried inside a sandbox by the tests: calls one syscall and
 * prints "ok" or the errno name. Static, so it runs in any rootfs. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long rc)
{
    if (rc >= 0) {
        puts("ok");
        return 0;
    }
    puts(errno == EPERM ? "EPERM" : errno == ENOSYS ? "ENOSYS" : errno == EACCES ? "EACCES"
                                                                                 : strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *w = argv[1];
    if (!strcmp(w, "keyctl"))
        return report(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
    if (!strcmp(w, "add_key"))
        return report(syscall(SYS_add_key, "user", "k", "v", 1, -3));
    if (!strcmp(w, "bpf"))
        return report(syscall(SYS_bpf, 0, NULL, 0));
    if (!strcmp(w, "mount"))
        return report(mount("none", "/tmp", "tmpfs", 0, NULL));
    if (!strcmp(w, "umount"))
        return report(umount2("/proc", MNT_DETACH));
    if (!strcmp(w, "userns"))
        return report(unshare(CLONE_NEWUSER));
    if (!strcmp(w, "clone-userns")) {
        long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
            _exit(0);
        if (pid > 0)
            waitpid((pid_t)pid, NULL, 0);
        return report(pid);
    }
    if (!strcmp(w, "pivot_root"))
        return report(syscall(SYS_pivot_root, "/", "/"));
    if (!strcmp(w, "personality"))
        return report(personality(ADDR_NO_RANDOMIZE));
    if (!strcmp(w, "perf"))
        return report(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
    if (!strcmp(w, "tiocsti")) {
        char c = 'x';
        return report(ioctl(0, TIOCSTI, &c));
    }
    if (!strcmp(w, "getpid"))
        return report(getpid());
    return 2;
}
