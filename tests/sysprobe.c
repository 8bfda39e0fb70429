/* sysprobe - tried inside a sandbox by the tests: calls one syscall and
 * prints "ok" or the errno name. Static, so it runs in any rootfs. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int report(long rc)
{
    if (rc >= 0) {
        puts("ok");
        return 0;
    }
    puts(errno == EPERM    ? "EPERM"
         : errno == ENOSYS ? "ENOSYS"
         : errno == EACCES ? "EACCES"
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
    /* holds MiB of touched anonymous memory for SECONDS, then exits */
    if (argc >= 4 && !strcmp(w, "hold")) {
        size_t n = (size_t)atoi(argv[2]) << 20;
        char *p = malloc(n);
        if (!p)
            return report(-1);
        memset(p, 1, n);
        sleep((unsigned)atoi(argv[3]));
        return report(p[n - 1]);
    }
    /* a vfork child that spins and never execs: its parent waits in the
     * kernel (D state) for as long as the child lives (test_pause.c) */
    if (!strcmp(w, "vfork-spin")) {
        pid_t c = vfork();
        if (c == 0) {
            for (volatile unsigned long n = 0;; n++)
                ;
        }
        return report(c);
    }
    /* a process that hides from ptrace-based inspection and leaves its
     * parent's session (a double fork), then sleeps */
    if (!strcmp(w, "hide-and-sleep")) {
        pid_t c = fork();
        if (c == 0) {
            setsid();
            if (fork() == 0) {
                prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
                sleep(300);
            }
            _exit(0);
        }
        waitpid(c, NULL, 0);
        return report(c);
    }
    /* the supervisor's processes, by pid: ptrace, memory, fds */
    if (argc >= 3 && !strcmp(w, "ptrace")) {
        long rc = ptrace(PTRACE_ATTACH, atoi(argv[2]), 0, 0);
        if (rc == 0)
            ptrace(PTRACE_DETACH, atoi(argv[2]), 0, 0);
        return report(rc);
    }
    if (argc >= 3 && !strcmp(w, "seize"))
        return report(ptrace(PTRACE_SEIZE, atoi(argv[2]), 0, 0));
    if (argc >= 3 && !strcmp(w, "memopen")) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%s/mem", argv[2]);
        return report(open(path, O_RDWR));
    }
    if (argc >= 3 && !strcmp(w, "vmwrite")) {
        /* writes one byte at an address of ours into the target (it fails
         * before the address matters when access is refused) */
        static char byte = 0;
        struct iovec l = {&byte, 1}, r = {&byte, 1};
        return report(syscall(SYS_process_vm_writev, atoi(argv[2]), &l, 1, &r, 1, 0));
    }
    if (argc >= 4 && !strcmp(w, "getfd")) {
        long pfd = syscall(SYS_pidfd_open, atoi(argv[2]), 0);
        if (pfd < 0)
            return report(pfd);
        return report(syscall(SYS_pidfd_getfd, (int)pfd, atoi(argv[3]), 0));
    }
    return 2;
}
