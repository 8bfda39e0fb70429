/* test_escape_host.c - host objects a sandbox must not reach (abstract unix
 * sockets, SysV IPC, POSIX shared memory, the host's /tmp) and host resources
 * it must not exhaust (disk through tmpfs layers, processes, memory) when no
 * cgroup is available. */
#include "seclib.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A host socket bound in the abstract namespace; returns its fd. */
static int abstract_listener(const char *name, int type)
{
    int s = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    cr_assert(s >= 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(un.sun_path + 1, name, n);
    cr_assert_eq(bind(s, (struct sockaddr *)&un,
                      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)),
                 0);
    if (type == SOCK_STREAM)
        cr_assert_eq(listen(s, 8), 0);
    return s;
}

static void abstract_attempt(lis_net_mode net, int type)
{
    char name[64], cmd[160];
    snprintf(name, sizeof name, "lis-escape-%d-%d", (int)getpid(), type);
    int s = abstract_listener(name, type);
    lis_ctx *ctx = t_ctx();
    sec_opts o = {.net = net};
    lis_sandbox *sb = sec_sandbox(ctx, &o);
    snprintf(cmd, sizeof cmd, "/probe abstract %s %s", name, type == SOCK_DGRAM ? "dgram" : "");
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect(!sec_won(out), "the host's abstract socket @%s was reached: %s", name, out);
    /* nothing arrived on the host side */
    char buf[8];
    int got = type == SOCK_STREAM ? accept4(s, NULL, NULL, SOCK_CLOEXEC)
                                  : (int)recv(s, buf, sizeof buf, MSG_DONTWAIT);
    cr_expect(got < 0 && errno == EAGAIN, "the host socket received a connection or datagram");
    free(out);
    close(s);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, abstract_unix_socket_net_none, .timeout = 60)
{
    abstract_attempt(LIS_NET_NONE, SOCK_STREAM);
}

Test(escape, abstract_unix_socket_net_proxy, .timeout = 60)
{
    abstract_attempt(LIS_NET_PROXY, SOCK_STREAM);
}

Test(escape, abstract_unix_datagram_net_none, .timeout = 60)
{
    abstract_attempt(LIS_NET_NONE, SOCK_DGRAM);
}

/* A SysV object of the host user (as ipcmk makes them): invisible inside,
 * not attachable or removable by key or id, intact afterwards. */
static void sysv_attempt(const char *kind)
{
    key_t key = (key_t)(0x4c490000 | (getpid() & 0xffff));
    int id;
    if (!strcmp(kind, "shm"))
        id = shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0600);
    else if (!strcmp(kind, "msg"))
        id = msgget(key, IPC_CREAT | IPC_EXCL | 0600);
    else
        id = semget(key, 1, IPC_CREAT | IPC_EXCL | 0600);
    cr_assert(id >= 0, "creating a host %s object failed", kind);
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char cmd[256], hex[16];
    snprintf(hex, sizeof hex, "%08x", (unsigned)key);
    snprintf(cmd, sizeof cmd, "ipcs 2>&1; cat /proc/sysvipc/%s 2>&1; /probe ipc %s %d %d", kind,
             kind, (int)key, id);
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect(!strstr(out, hex), "the host's %s key 0x%s is listed inside: %s", kind, hex, out);
    cr_expect(strstr(out, "get=fail use=fail rm=fail"), "the host's %s object was reached: %s",
              kind, out);
    sec_destroy(sb);
    int alive;
    if (!strcmp(kind, "shm")) {
        struct shmid_ds ds;
        alive = shmctl(id, IPC_STAT, &ds) == 0 && ds.shm_nattch == 0;
        shmctl(id, IPC_RMID, NULL);
    } else if (!strcmp(kind, "msg")) {
        struct msqid_ds ds;
        alive = msgctl(id, IPC_STAT, &ds) == 0 && ds.msg_qnum == 0;
        msgctl(id, IPC_RMID, NULL);
    } else {
        alive = semctl(id, 0, GETVAL) == 0;
        semctl(id, 0, IPC_RMID);
    }
    cr_expect(alive, "the host's %s object was changed or removed", kind);
    free(out);
    lis_ctx_free(ctx);
}

Test(escape, sysv_shm_of_the_host, .timeout = 60) { sysv_attempt("shm"); }

Test(escape, sysv_msg_queue_of_the_host, .timeout = 60) { sysv_attempt("msg"); }

Test(escape, sysv_semaphore_of_the_host, .timeout = 60) { sysv_attempt("sem"); }

/* A host file in /dev/shm (POSIX shared memory) and one in /tmp. */
static void host_dir_attempt(const char *dir)
{
    char name[64], host[128];
    snprintf(name, sizeof name, "lis-escape-%d", (int)getpid());
    snprintf(host, sizeof host, "%s/%s", dir, name);
    sec_write(host, "HOST-SECRET\n");
    char *before = sec_digest(host);
    lis_ctx *ctx = t_ctx();
    lis_sandbox *sb = sec_sandbox(ctx, NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "ls -a %s | grep -c %s; cat %s/%s 2>/dev/null; echo pwned > %s/%s; "
             "echo pwned > %s/%s.new; echo tried",
             dir, name, dir, name, dir, name, dir, name);
    char *out = sec_sh(sb, cmd, NULL);
    cr_expect(strstr(out, "tried"), "%s", out);
    cr_expect(!strstr(out, "HOST-SECRET") && strncmp(out, "0\n", 2) == 0,
              "the host's %s is visible inside: %s", dir, out);
    sec_destroy(sb);
    char *after = sec_digest(host);
    cr_expect_str_eq(after, before, "the host's %s changed", host);
    char created[160];
    snprintf(created, sizeof created, "%s.new", host);
    cr_expect_neq(access(created, F_OK), 0, "the sandbox wrote into the host's %s", dir);
    unlink(host);
    unlink(created);
    free(before);
    free(after);
    free(out);
    lis_ctx_free(ctx);
}

Test(escape, posix_shm_of_the_host, .timeout = 60) { host_dir_attempt("/dev/shm"); }

Test(escape, host_tmp_untouched, .timeout = 60) { host_dir_attempt("/tmp"); }

/* --disk SIZE bounds the tmpfs layers: a 64 MiB write into a 16 MiB budget
 * gets ENOSPC and leaves at most the budget behind. */
static void disk_budget(const char *dir)
{
    lis_ctx_free(t_ctx());
    int code;
    char *out = t_lis(&code,
                      "sandbox run --disk=16M --rootfs %s -- sh -c "
                      "'dd if=/dev/zero of=%s/fill bs=1M count=64 2>&1; echo rc=$?; "
                      "echo size=$(stat -c %%s %s/fill)'",
                      t_busybox(), dir, dir);
    cr_expect_eq(code, 0, "lis sandbox run --disk=16M: %s", out);
    cr_expect(strstr(out, "No space left"), "writing 64 MiB into %s did not hit ENOSPC: %s", dir,
              out);
    cr_expect(!strstr(out, "rc=0"), "%s", out);
    char *sz = strstr(out, "size=");
    cr_expect(sz && atol(sz + 5) <= 16L << 20, "%s holds more than the 16 MiB budget: %s", dir,
              out);
    free(out);
}

Test(escape, disk_budget_tmp, .timeout = 60) { disk_budget("/tmp"); }

Test(escape, disk_budget_root, .timeout = 60) { disk_budget("/root"); }

Test(escape, disk_budget_dev_shm, .timeout = 60) { disk_budget("/dev/shm"); }

Test(escape, process_count_bounded_without_cgroups, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    sec_opts o = {.limits = {.pids = 32}};
    lis_sandbox *sb = sec_sandbox(ctx, &o);
    /* a bounded fork bomb: 200 processes at most, so a missing limit cannot
     * hurt the host's (shared) pid space either */
    char *out = sec_sh(sb, "/probe forks 200", NULL);
    char *n = strstr(out, "forked=");
    cr_expect(n && atoi(n + 7) < 32, "a sandbox limited to 32 processes forked %s", out);
    cr_expect(sec_alive(sb));
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}

Test(escape, memory_bounded_without_cgroups, .timeout = 120)
{
    lis_ctx *ctx = t_ctx();
    sec_opts o = {.limits = {.memory_bytes = 64 << 20}};
    lis_sandbox *sb = sec_sandbox(ctx, &o);
    char *out = sec_sh(sb, "/probe alloc 256", NULL);
    cr_expect(!sec_won(out), "a sandbox limited to 64 MiB touched 256 MiB: %s", out);
    cr_expect(sec_alive(sb));
    free(out);
    sec_destroy(sb);
    lis_ctx_free(ctx);
}
