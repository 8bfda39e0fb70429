/* monitor_probe.c - a static helper the monitor suites run inside sandboxes
 * (bound at /mprobe): each mode does one thing whose effects the monitor
 * must record exactly.
 *   mmap FILE TEXT       writes TEXT into FILE through a shared mapping only
 *   memfd ARG            copies itself into a memfd and fexecve's it (mode "exit 7")
 *   execveat ARG         execveat(dirfd of /, "mprobe", ...) (mode "exit 5")
 *   nodump ARG           PR_SET_DUMPABLE 0, then execs itself with "exit 3"
 *   badexec              execve with a path pointer that is not mapped
 *   args                 an exec whose argv has a pointer that is not mapped (it fails),
 *                        then one of 104 arguments whose path and one argument run
 *                        across a page's end and one is 600 bytes, of mode "any"
 *   any ...              exits 0
 *   exit N               exits with N
 *   retry N              N times: two failing execve's of one process with the same argc,
 *                        the second's argv longer (the hub once compared the second with
 *                        the first record past its end), then exits 0
 *   race N               N times: a child whose second thread flips the path it execs
 *                        between /tmp/okk and /tmp/bad while its first execs it (the
 *                        race a check of the path cannot win); exits 0
 *   sleepmark FILE       sleeps 300 ms, then creates FILE (what /tmp/bad runs in race)
 *   chain N              execs itself N times in a row (no fork), then exits 0
 *                        (scripts/bench-monitor.sh: one exec notification's cost)
 *   connect ADDR PORT    one TCP connect (the error printed)
 *   sendmsg ADDR PORT    one UDP datagram by sendmsg, its address in msg_name (the error printed)
 *   daemon FILE TEXT SECS  forks a child that execs "late FILE TEXT SECS" and returns
 *   late FILE TEXT SECS    waits SECS, appends TEXT to FILE, then execs "exit 9" */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char race_path[16] = "/tmp/okk";

static void *flipper(void *arg)
{
    (void)arg;
    for (;;) {
        memcpy(race_path, "/tmp/bad", 9);
        memcpy(race_path, "/tmp/okk", 9);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    const char *m = argv[1];
    if (!strcmp(m, "exit") && argc == 3)
        return atoi(argv[2]);
    if (!strcmp(m, "chain") && argc == 3) {
        long n = atol(argv[2]);
        if (n <= 0)
            return 0;
        char next[32];
        snprintf(next, sizeof next, "%ld", n - 1);
        char *args[] = {argv[0], "chain", next, NULL};
        execve(argv[0], args, environ);
        return 1;
    }
    if (!strcmp(m, "retry") && argc == 3) {
        static char longer[3000];
        memset(longer, 'x', sizeof longer - 1);
        for (long i = atol(argv[2]); i > 0; i--) {
            char *a[] = {"/nonexistent/p", "y", NULL};
            char *b[] = {"/nonexistent/p", longer, NULL};
            execve(a[0], a, environ);
            execve(b[0], b, environ);
        }
        return 0;
    }
    if (!strcmp(m, "race") && argc == 3) {
        for (long i = atol(argv[2]); i > 0; i--) {
            pid_t c = fork();
            if (c == 0) {
                pthread_t t;
                pthread_create(&t, NULL, flipper, NULL);
                char *a[] = {"true", "sleepmark", "/tmp/ran", NULL};
                execve(race_path, a, environ);
                _exit(127);
            }
            waitpid(c, NULL, 0);
        }
        return 0;
    }
    if (!strcmp(m, "sleepmark") && argc == 3) {
        struct timespec ts = {0, 300000000};
        nanosleep(&ts, NULL);
        int fd = open(argv[2], O_WRONLY | O_CREAT, 0644);
        return fd < 0;
    }
    if (!strcmp(m, "mmap") && argc == 4) {
        int fd = open(argv[2], O_RDWR | O_CREAT, 0644);
        size_t n = strlen(argv[3]);
        if (fd < 0 || ftruncate(fd, (off_t)n) < 0)
            return 1;
        char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            return 1;
        memcpy(p, argv[3], n);
        munmap(p, n);
        close(fd);
        return 0;
    }
    if (!strcmp(m, "memfd")) {
        int self = open("/proc/self/exe", O_RDONLY);
        int mfd = (int)syscall(SYS_memfd_create, "probe-copy", 0);
        struct stat st;
        if (self < 0 || mfd < 0 || fstat(self, &st) < 0)
            return 1;
        char buf[65536];
        ssize_t n;
        while ((n = read(self, buf, sizeof buf)) > 0)
            if (write(mfd, buf, (size_t)n) != n)
                return 1;
        char *av[] = {"mprobe-memfd", "exit", "7", NULL};
        fexecve(mfd, av, environ);
        return 1;
    }
    if (!strcmp(m, "execveat")) {
        int root = open("/", O_PATH | O_DIRECTORY);
        char *av[] = {"mprobe-at", "exit", "5", NULL};
        syscall(SYS_execveat, root, "mprobe", av, environ, 0);
        return 1;
    }
    if (!strcmp(m, "nodump")) {
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        char *av[] = {"/mprobe", "exit", "3", NULL};
        execve("/mprobe", av, environ);
        return 1;
    }
    if (!strcmp(m, "badexec")) {
        char *av[] = {"x", NULL};
        syscall(SYS_execve, (char *)16, av, environ);
        printf("badexec: %s\n", strerror(errno));
        return 0;
    }
    if (!strcmp(m, "any"))
        return 0;
    if (!strcmp(m, "args")) {
        long pg = sysconf(_SC_PAGESIZE);
        char *mem = mmap(NULL, (size_t)(3 * pg), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            return 1;
        char *bad[] = {"/mprobe", "bad", (char *)16, NULL};
        execve("/mprobe", bad, environ);
        printf("args: %s\n", strerror(errno));
        fflush(stdout); /* before the exec replaces the buffer */
        char *path = mem + pg - 3, *strad = mem + 2 * pg - 5, *longarg = mem + 100;
        memcpy(path, "/mprobe", 8);
        memcpy(strad, "straddling-argument", 20);
        memset(longarg, 'L', 600);
        longarg[600] = 0;
        static char *av[105];
        static char nums[100][8];
        av[0] = path;
        av[1] = "any";
        av[2] = strad;
        av[3] = longarg;
        for (int i = 0; i < 100; i++) {
            snprintf(nums[i], sizeof nums[i], "a%d", i);
            av[4 + i] = nums[i];
        }
        av[104] = NULL;
        execve(path, av, environ);
        return 1;
    }
    if (!strcmp(m, "connect") && argc == 4) {
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
        inet_pton(AF_INET, argv[2], &a.sin_addr);
        int rc = connect(s, (struct sockaddr *)&a, sizeof a);
        printf("connect: %s\n", rc ? strerror(errno) : "ok");
        return 0;
    }
    if (!strcmp(m, "sendmsg") && argc == 4) {
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
        inet_pton(AF_INET, argv[2], &a.sin_addr);
        char byte = 'x';
        struct iovec io = {&byte, 1};
        struct msghdr mh = {.msg_name = &a,
                            .msg_namelen = sizeof a,
                            .msg_iov = &io,
                            .msg_iovlen = 1};
        ssize_t rc = sendmsg(s, &mh, 0);
        printf("sendmsg: %s\n", rc < 0 ? strerror(errno) : "ok");
        return 0;
    }
    if (!strcmp(m, "files") && argc == 4) { /* N empty files in DIR (made), as fast as it goes */
        long n = atol(argv[2]);
        if (mkdir(argv[3], 0755) < 0 && errno != EEXIST)
            return 1;
        int d = open(argv[3], O_RDONLY | O_DIRECTORY);
        for (long i = 0; d >= 0 && i < n; i++) {
            char name[32];
            snprintf(name, sizeof name, "f%ld", i);
            int fd = openat(d, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd < 0 && errno != EEXIST)
                return 1;
            if (fd >= 0)
                close(fd);
        }
        return d >= 0 ? 0 : 1;
    }
    if (!strcmp(m, "daemon") && argc == 5) {
        /* returns once the child's exec went through (its close-on-exec end closed) */
        int pp[2];
        if (pipe2(pp, O_CLOEXEC) < 0)
            return 1;
        pid_t p = fork();
        if (p == 0) {
            close(pp[0]);
            setsid();
            int nul = open("/dev/null", O_RDWR);
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
            char *av[] = {"/mprobe", "late", argv[2], argv[3], argv[4], NULL};
            execve("/mprobe", av, environ);
            return 1;
        }
        close(pp[1]);
        char c;
        while (p > 0 && read(pp[0], &c, 1) > 0)
            ;
        return p > 0 ? 0 : 1;
    }
    if (!strcmp(m, "late") && argc == 5) {
        sleep((unsigned)atoi(argv[4]));
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (write(fd, argv[3], strlen(argv[3])) < 0)
            return 1;
        close(fd);
        char *av[] = {"/mprobe", "exit", "9", NULL};
        execve("/mprobe", av, environ);
        return 1;
    }
    return 2;
}
