/* exec_canon.c - what an exec will run, named as the kernel resolves it
 * inside the sandbox's root, so that exec rules match the file and not a
 * spelling: "//", "." and ".." (never above the root), symlinks (40 at
 * most, as the kernel), /proc/self|thread-self|PID/fd/N and /dev/fd/N (the
 * process's own fd links: a memfd is named "memfd:NAME"), the interpreters
 * of a shebang (4 levels, as the kernel) and the program that ld.so is
 * asked to load.
 *
 * Every lookup is an openat2 below an O_PATH fd of /proc/TID/root with
 * RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS: the hub follows no link itself
 * (each one is read and spliced here, inside the root), so a sandbox that
 * swaps a directory for a link mid-walk gets ELOOP, never a lookup on the
 * host. The only file read is the first 256 bytes of a regular file the
 * walk ended on (the kernel's BINPRM_BUF_SIZE). What the race can change
 * after this is checked again after the exec (docs/monitoring.md). */
#include "monitor.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LINKS_MAX 40          /* the kernel's MAXSYMLINKS */
#define HEAD_MAX 256          /* the kernel's BINPRM_BUF_SIZE */
#define COPY_CMP (256u << 10) /* bytes of two same-size files compared */
#define COPY_RULES_MAX 8      /* plain-path deny rules looked at for copies, per exec */
/* lookups one exec may cost the hub (a legitimate path takes a few dozen):
 * past it the exec is unresolved, and its rules follow on_unknown */
#define LOOKUPS_MAX 256

typedef struct walk {
    pid_t tid;
    int rootfd;
    int links, lookups;
    int missing; /* a component did not exist: the exec fails with ENOENT */
} walk;

static int open_below(int rootfd, const char *rel)
{
    struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS};
    return (int)syscall(SYS_openat2, rootfd, *rel ? rel : ".", &how, sizeof how);
}

/* Takes the next component of *rest (a '/'-separated list) into comp. */
static int next_comp(const char **rest, char *comp, size_t cap)
{
    const char *s = *rest;
    while (*s == '/')
        s++;
    if (!*s)
        return 0;
    size_t n = strcspn(s, "/");
    if (n >= cap)
        return -1;
    memcpy(comp, s, n);
    comp[n] = 0;
    *rest = s + n;
    return 1;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The text of a /proc/<who>/<what> link of the sandbox: the process's own
 * from the host's /proc (self, thread-self), another process's through the
 * sandbox's procfs. */
static int proc_link(const walk *w, const char *who, const char *what, char *buf, size_t cap)
{
    if (!strcmp(who, "self") || !strcmp(who, "thread-self"))
        return mon_read_link(w->tid, what, buf, cap);
    char rel[96];
    snprintf(rel, sizeof rel, "proc/%s/%s", who, what);
    int fd = open_below(w->rootfd, rel);
    if (fd < 0)
        return -1;
    ssize_t n = readlinkat(fd, "", buf, cap);
    close(fd);
    if (n < 0 || (size_t)n >= cap) {
        errno = n < 0 ? errno : ENAMETOOLONG;
        return -1;
    }
    buf[n] = 0;
    return 0;
}

static int fail(char *why, size_t wl, const char *what, int e)
{
    snprintf(why, wl, "%s: %s", what, strerror(e));
    return -1;
}

/* Resolves path (absolute) into out; *fdp: an O_PATH fd of what it names
 * when it exists (-1 else). 0, or -1 with why. */
static int resolve(walk *w, const char *path, char *out, size_t cap, int *fdp, char *why, size_t wl)
{
    char rest[2 * MON_EXEC_PATH], comp[256], cur[MON_EXEC_PATH] = "";
    *fdp = -1;
    if (path[0] != '/')
        return fail(why, wl, "not an absolute path", EINVAL);
    if (strlen(path) >= sizeof rest)
        return fail(why, wl, "path", ENAMETOOLONG);
    snprintf(rest, sizeof rest, "%s", path);
    const char *r = rest;
    int fd = -1;
    for (;;) {
        int got = next_comp(&r, comp, sizeof comp);
        if (got < 0) {
            if (fd >= 0)
                close(fd);
            return fail(why, wl, "a component", ENAMETOOLONG);
        }
        if (!got)
            break;
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
        if (!strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            char *slash = strrchr(cur, '/');
            if (slash)
                *slash = 0; /* the root's ".." is the root */
            continue;
        }
        /* /proc/WHO/fd/N and /proc/WHO/exe: the process's links, as text */
        char who[32], what[64];
        const char *peek = r;
        if (!strcmp(cur, "/proc") && strlen(comp) < sizeof who &&
            (!strcmp(comp, "self") || !strcmp(comp, "thread-self") || all_digits(comp))) {
            char c2[32], c3[32], task[48] = "";
            snprintf(who, sizeof who, "%s", comp);
            int g2 = next_comp(&peek, c2, sizeof c2), g3 = 0;
            if (g2 > 0 && !strcmp(c2, "task") && next_comp(&peek, c3, sizeof c3) > 0 &&
                all_digits(c3)) {
                snprintf(task, sizeof task, "task/%s/", c3); /* a thread's own links */
                g2 = next_comp(&peek, c2, sizeof c2);
            }
            if (g2 > 0 && !strcmp(c2, "fd"))
                g3 = next_comp(&peek, c3, sizeof c3);
            what[0] = 0;
            if (g2 > 0 && (!strcmp(c2, "exe") || !strcmp(c2, "cwd") || !strcmp(c2, "root")))
                snprintf(what, sizeof what, "%s%s", task, c2);
            else if (g3 > 0 && all_digits(c3))
                snprintf(what, sizeof what, "%sfd/%s", task, c3);
            if (what[0]) {
                char text[MON_EXEC_PATH];
                if (!strcmp(c2, "root"))
                    snprintf(text, sizeof text, "/"); /* the sandbox's root: ours */
                else if (proc_link(w, who, what, text, sizeof text) < 0)
                    return fail(why, wl, "a /proc link", errno);
                if (++w->links > LINKS_MAX)
                    return fail(why, wl, "links", ELOOP);
                if (text[0] != '/' || strstr(text, " (deleted)") || !strncmp(text, "/memfd:", 7)) {
                    /* no path leads to it: named by its link, as the kernel names it */
                    const char *t = !strncmp(text, "/memfd:", 7) ? text + 1 : text;
                    size_t tl = strlen(t), dl = strlen(" (deleted)");
                    if (t != text && tl > dl && !strcmp(t + tl - dl, " (deleted)"))
                        tl -= dl; /* a memfd is always "deleted" */
                    snprintf(out, cap, "%.*s", (int)tl, t);
                    if (!strcmp(who, "self") || !strcmp(who, "thread-self")) {
                        char host[64];
                        snprintf(host, sizeof host, "/proc/%d/%s", (int)w->tid, what);
                        *fdp = open(host, O_PATH | O_CLOEXEC);
                    }
                    return 0;
                }
                char tail[MON_EXEC_PATH];
                snprintf(tail, sizeof tail, "%s", peek);
                if (snprintf(rest, sizeof rest, "%s/%s", text, tail) >= (int)sizeof rest)
                    return fail(why, wl, "path", ENAMETOOLONG);
                r = rest;
                cur[0] = 0;
                continue;
            }
        }
        char cand[MON_EXEC_PATH];
        if (snprintf(cand, sizeof cand, "%s/%s", cur, comp) >= (int)sizeof cand)
            return fail(why, wl, "path", ENAMETOOLONG);
        if (++w->lookups > LOOKUPS_MAX)
            return fail(why, wl, "more lookups than the hub gives one exec", E2BIG);
        fd = open_below(w->rootfd, cand + 1);
        if (fd < 0) {
            /* below /proc, a name the hub cannot see (self, a pid of another
             * namespace) is not a missing file: unresolved, never "missing" */
            if ((errno != ENOENT && errno != ENOTDIR) || !strncmp(cand, "/proc/", 6))
                return fail(why, wl, cand, errno);
            /* the exec would fail: named as spelled from here on */
            w->missing = 1;
            snprintf(out, cap, "%s%s", cand, r);
            return 0;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            close(fd);
            return fail(why, wl, cand, errno);
        }
        if (S_ISLNK(st.st_mode)) {
            char target[MON_EXEC_PATH], tail[MON_EXEC_PATH];
            ssize_t n = readlinkat(fd, "", target, sizeof target);
            close(fd);
            fd = -1;
            if (n < 0 || (size_t)n >= sizeof target)
                return fail(why, wl, cand, n < 0 ? errno : ENAMETOOLONG);
            target[n] = 0;
            if (++w->links > LINKS_MAX)
                return fail(why, wl, "links", ELOOP);
            snprintf(tail, sizeof tail, "%s", r);
            if (snprintf(rest, sizeof rest, "%s/%s", target, tail) >= (int)sizeof rest)
                return fail(why, wl, "path", ENAMETOOLONG);
            r = rest;
            if (target[0] == '/')
                cur[0] = 0;
            continue;
        }
        snprintf(cur, sizeof cur, "%s", cand);
        if (!S_ISDIR(st.st_mode)) {
            char more[8];
            const char *q = r;
            if (next_comp(&q, more, sizeof more) != 0) {
                close(fd);
                w->missing = 1; /* ENOTDIR */
                snprintf(out, cap, "%s%s", cur, r);
                return 0;
            }
        }
    }
    snprintf(out, cap, "%s", cur[0] ? cur : "/");
    *fdp = fd;
    return 0;
}

/* The first bytes of the regular file behind an O_PATH fd. */
static ssize_t head_of(int opath, char *buf, size_t cap)
{
    struct stat st;
    if (fstat(opath, &st) < 0 || !S_ISREG(st.st_mode))
        return -1;
    char via[64];
    snprintf(via, sizeof via, "/proc/self/fd/%d", opath);
    /* O_NONBLOCK: never wait on what the sandbox made (a regular file does
     * not, but the check and the open are not one step) */
    int fd = open(via, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st2;
    ssize_t n = fstat(fd, &st2) == 0 && S_ISREG(st2.st_mode) ? pread(fd, buf, cap, 0) : -1;
    close(fd);
    return n;
}

/* A shebang's interpreter, made absolute from the process's cwd. */
static int shebang(pid_t tid, const char *head, size_t n, char *out, size_t cap)
{
    if (n < 3 || head[0] != '#' || head[1] != '!')
        return 0;
    size_t i = 2, j;
    while (i < n && (head[i] == ' ' || head[i] == '\t'))
        i++;
    for (j = i; j < n && head[j] != ' ' && head[j] != '\t' && head[j] != '\n' && head[j]; j++)
        ;
    if (j == i)
        return 0;
    char name[HEAD_MAX + 1];
    memcpy(name, head + i, j - i);
    name[j - i] = 0;
    if (name[0] == '/') {
        snprintf(out, cap, "%s", name);
        return 1;
    }
    char cwd[MON_EXEC_PATH];
    if (mon_read_link(tid, "cwd", cwd, sizeof cwd) < 0)
        return -1;
    snprintf(out, cap, "%s/%s", cwd, name);
    return 1;
}

/* ld.so by name, or an ELF that has no interpreter and is a shared object
 * of the size of the sandbox's own ld.so (a copy by another name). */
static int is_ldso(const walk *w, const char *canon, const char *head, size_t n, int opath)
{
    const char *base = strrchr(canon, '/');
    base = base ? base + 1 : canon;
    if (!fnmatch("ld-linux*.so*", base, 0) || !fnmatch("ld.so*", base, 0) ||
        !fnmatch("ld-musl-*.so*", base, 0) || !fnmatch("ld64.so*", base, 0))
        return 1;
    if (n < sizeof(Elf64_Ehdr) || memcmp(head, ELFMAG, SELFMAG) || head[EI_CLASS] != ELFCLASS64)
        return 0;
    const Elf64_Ehdr *eh = (const void *)head;
    if (eh->e_type != ET_DYN)
        return 0;
    struct stat st, ld;
    int lfd = open_below(w->rootfd, "lib64/ld-linux-x86-64.so.2");
    if (lfd < 0)
        return 0;
    int same = fstat(opath, &st) == 0 && fstat(lfd, &ld) == 0 && S_ISLNK(ld.st_mode) == 0 &&
               st.st_size == ld.st_size;
    close(lfd);
    return same;
}

/* The program ld.so is asked to run: its first argument that is not an
 * option (glibc's rtld options; those that take a value skip it). */
static const char *ldso_program(const mon_exec *x)
{
    static const char *const with_value[] =
        {"--library-path",         "--inhibit-rpath",    "--audit", "--preload", "--argv0",
         "--glibc-hwcaps-prepend", "--glibc-hwcaps-mask"};
    const char *a = x->argv, *end = x->argv + x->argv_len;
    for (size_t i = 0; i < x->argc && a < end; i++, a += strlen(a) + 1) {
        if (i == 0)
            continue;
        if (strncmp(a, "--", 2))
            return a;
        if (!strcmp(a, "--"))
            continue;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            if (!strcmp(a, with_value[k]) && i + 1 < x->argc) {
                a += strlen(a) + 1;
                i++;
                break;
            }
    }
    return NULL;
}

static int absolute(pid_t tid, const char *p, char *out, size_t cap)
{
    if (p[0] == '/') {
        snprintf(out, cap, "%s", p);
        return 0;
    }
    char cwd[MON_EXEC_PATH];
    if (mon_read_link(tid, "cwd", cwd, sizeof cwd) < 0)
        return -1;
    return snprintf(out, cap, "%s/%s", cwd, p) >= (int)cap ? -1 : 0;
}

int mon_exec_resolve(pid_t tid, const mon_exec *x, mon_exec_names *out)
{
    memset(out, 0, sizeof *out);
    char byfd[48];
    const char *path = x->path;
    if (x->by_fd) {
        snprintf(byfd, sizeof byfd, "/proc/self/fd/%d", x->fd_nr);
        path = byfd;
    }
    if (x->unread[0] || x->path_cut || path[0] != '/') {
        snprintf(out->why, sizeof out->why, "%s",
                 x->unread[0]  ? x->unread
                 : x->path_cut ? "path cut"
                               : "path not absolute");
        return -1;
    }
    char root[64];
    snprintf(root, sizeof root, "/proc/%d/root", (int)tid);
    walk w = {.tid = tid, .rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)};
    if (w.rootfd < 0) {
        snprintf(out->why, sizeof out->why, "the process's root: %s", strerror(errno));
        return -1;
    }
    int fd = -1, rc = 0;
    char head[HEAD_MAX];
    if (resolve(&w, path, out->name[0], sizeof out->name[0], &fd, out->why, sizeof out->why) < 0) {
        rc = -1;
        goto done;
    }
    out->n = 1;
    /* shebangs, nested as the kernel allows */
    while (fd >= 0 && out->n < MON_EXEC_NAMES) {
        ssize_t hn = head_of(fd, head, sizeof head);
        if (hn <= 0)
            break;
        char interp[MON_EXEC_PATH];
        int sb = shebang(tid, head, (size_t)hn, interp, sizeof interp);
        if (sb == 0) {
            if (is_ldso(&w, out->name[out->n - 1], head, (size_t)hn, fd)) {
                const char *prog = ldso_program(x);
                char abs[MON_EXEC_PATH];
                close(fd);
                fd = -1;
                if (prog && absolute(tid, prog, abs, sizeof abs) == 0 &&
                    resolve(&w, abs, out->name[out->n], sizeof out->name[out->n], &fd, out->why,
                            sizeof out->why) == 0)
                    out->n++;
                else if (prog)
                    rc = -1;
            }
            break;
        }
        close(fd);
        fd = -1;
        if (sb < 0 || resolve(&w, interp, out->name[out->n], sizeof out->name[out->n], &fd,
                              out->why, sizeof out->why) < 0) {
            rc = -1;
            break;
        }
        out->n++;
    }
    out->missing = w.missing;
done:
    if (fd >= 0)
        close(fd);
    close(w.rootfd);
    return rc;
}

/* An O_RDONLY fd of a regular file behind an O_PATH fd, -1 else. */
static int reopen_reg(int opath, struct stat *st)
{
    char via[64];
    snprintf(via, sizeof via, "/proc/self/fd/%d", opath);
    int fd = fstat(opath, st) == 0 && S_ISREG(st->st_mode)
                 ? open(via, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
                 : -1;
    struct stat again;
    if (fd >= 0 && (fstat(fd, &again) < 0 || !S_ISREG(again.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int same_bytes(int a, int b, size_t n)
{
    char x[8192], y[8192];
    for (size_t off = 0; off < n;) {
        size_t want = n - off < sizeof x ? n - off : sizeof x;
        ssize_t p = pread(a, x, want, (off_t)off), q = pread(b, y, want, (off_t)off);
        if (p <= 0 || p != q || memcmp(x, y, (size_t)p))
            return 0;
        off += (size_t)p;
    }
    return 1;
}

int mon_exec_copy_of(pid_t tid, const char *file, const char *of)
{
    char root[64], ra[MON_EXEC_PATH], rb[MON_EXEC_PATH], why[96];
    snprintf(root, sizeof root, "/proc/%d/root", (int)tid);
    walk w = {.tid = tid, .rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)};
    if (w.rootfd < 0)
        return 0;
    int pa = -1, pb = -1, fa = -1, fb = -1, same = 0;
    struct stat sa, sb;
    if (resolve(&w, file, ra, sizeof ra, &pa, why, sizeof why) == 0 && pa >= 0 &&
        resolve(&w, of, rb, sizeof rb, &pb, why, sizeof why) == 0 && pb >= 0 &&
        (fa = reopen_reg(pa, &sa)) >= 0 && (fb = reopen_reg(pb, &sb)) >= 0 &&
        sa.st_size == sb.st_size && sa.st_size > 0) {
        /* the same inode (a hard link), or the same bytes as far as compared:
         * a file of the denied one's size whose first 256 KiB are its own */
        same = (sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino) ||
               same_bytes(fa, fb, (size_t)sa.st_size < COPY_CMP ? (size_t)sa.st_size : COPY_CMP);
    }
    int fds[] = {pa, pb, fa, fb, w.rootfd};
    for (size_t k = 0; k < sizeof fds / sizeof *fds; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    return same;
}

/* The deny rule naming by a plain path a program of which the exec runs a
 * copy (or a hard link): resolved names only. */
const mon_rule *mon_exec_copy_rule(const lis_policy *p, pid_t tid, const mon_exec_names *nm)
{
    /* each literal rule costs two resolutions and up to 512 KiB read: the
     * first COPY_RULES_MAX of them are looked at (docs/monitoring.md) */
    size_t looked = 0;
    for (size_t i = 0; p && i < p->n && looked < COPY_RULES_MAX; i++) {
        const mon_rule *r = &p->rules[i];
        if (r->kind != MR_EXEC || r->action != LIS_ACT_DENY || r->argv || !r->path ||
            r->path[0] != '/' || strcspn(r->path, "*?[\\") != strlen(r->path))
            continue;
        looked++;
        for (size_t k = 0; k < nm->n; k++)
            if (strcmp(nm->name[k], r->path) && mon_exec_copy_of(tid, nm->name[k], r->path))
                return r;
    }
    return NULL;
}
