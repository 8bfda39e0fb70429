/* procmem.c - a notifying process read from outside: strings and words of
 * its memory (process_vm_readv of the pid the kernel gave, read before the
 * hub checks that the notification is still valid), its status and CPU
 * time, the text of its own links. Nothing here follows a path the process
 * chose: the only files opened are /proc entries named by that pid. */
#include "monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

static ssize_t read_proc(pid_t pid, const char *what, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

/* The last number of a "Key:\tA\tB..." line (NSpid: the innermost pid). */
static long field_last(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    if (!p)
        return -1;
    p += strlen(key);
    long v = -1;
    while (*p && *p != '\n') {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        v = x;
        p = end;
    }
    return v;
}

int mon_read_status(pid_t tid, mon_pstatus *st)
{
    char buf[4096];
    if (read_proc(tid, "status", buf, sizeof buf) < 0)
        return -1;
    st->tgid = (pid_t)field_last(buf, "\nTgid:");
    st->ppid = (pid_t)field_last(buf, "\nPPid:");
    st->nspid = (pid_t)field_last(buf, "\nNStgid:");
    st->nsppid_hint = 0;
    return st->tgid > 0 ? 0 : -1;
}

int mon_read_cpu(pid_t pid, double *cpu, char *state)
{
    char buf[1024];
    if (read_proc(pid, "stat", buf, sizeof buf) < 0)
        return -1;
    const char *p = strrchr(buf, ')'); /* the name may hold anything but ends at the last ) */
    if (!p || p[1] != ' ')
        return -1;
    *state = p[2];
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime: utime is the 12th field from here */
    p += 2;
    unsigned long long ut = 0, st = 0;
    for (int i = 0; i < 11 && p; i++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    char *end = NULL;
    if (p)
        ut = strtoull(p, &end, 10);
    if (!p || end == p || *end != ' ')
        return -1;
    p = end + 1;
    st = strtoull(p, &end, 10);
    if (end == p)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    *cpu = (double)(ut + st) / (double)(hz > 0 ? hz : 100);
    return 0;
}

ssize_t mon_read_mem(pid_t tid, uint64_t addr, void *out, size_t len)
{
    struct iovec local = {out, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
    if (n == 0) {
        errno = EIO;
        return -1;
    }
    return n;
}

ssize_t mon_read_str(pid_t tid, uint64_t addr, char *buf, size_t max, int *cut)
{
    size_t have = 0;
    *cut = 0;
    if (!addr) {
        errno = EFAULT;
        return -1;
    }
    while (have < max - 1) {
        /* never across a page: the next one may be unmapped */
        uint64_t at = addr + have;
        size_t room = 4096 - (size_t)(at & 4095);
        if (room > max - 1 - have)
            room = max - 1 - have;
        ssize_t n = mon_read_mem(tid, at, buf + have, room);
        if (n < 0) {
            if (have)
                break; /* what was read stands, cut */
            return -1;
        }
        char *nul = memchr(buf + have, 0, (size_t)n);
        if (nul)
            return (ssize_t)(nul - buf);
        have += (size_t)n;
    }
    have = lis_utf8_cut(buf, have); /* never inside a character */
    buf[have] = 0;
    *cut = 1;
    return (ssize_t)have;
}

size_t mon_chunk_len(uint64_t addr, size_t cap)
{
    size_t to_page_end = 4096 - (size_t)(addr & 4095);
    return to_page_end < cap ? to_page_end : cap;
}

ssize_t mon_str_from_chunk(pid_t tid, uint64_t addr, const char *chunk, size_t clen, char *buf,
                           size_t max, int *cut)
{
    if (chunk) {
        size_t lim = clen < max - 1 ? clen : max - 1;
        const char *nul = memchr(chunk, 0, lim);
        if (nul || clen >= max - 1) {
            size_t len = nul ? (size_t)(nul - chunk) : lis_utf8_cut(chunk, lim);
            memcpy(buf, chunk, len);
            buf[len] = 0;
            *cut = !nul;
            return (ssize_t)len;
        }
    }
    return mon_read_str(tid, addr, buf, max, cut);
}

size_t mon_read_ranges(pid_t tid, const uint64_t *addrs, char *const *outs, const size_t *lens,
                       size_t n)
{
    struct iovec local[MON_RANGES_MAX], remote[MON_RANGES_MAX];
    if (n > MON_RANGES_MAX)
        n = MON_RANGES_MAX;
    for (size_t i = 0; i < n; i++) {
        local[i] = (struct iovec){outs[i], lens[i]};
        remote[i] = (struct iovec){(void *)(uintptr_t)addrs[i], lens[i]};
    }
    ssize_t got = n ? process_vm_readv(tid, local, n, remote, n, 0) : 0;
    size_t whole = 0;
    /* the kernel stops at the first range it cannot read whole */
    for (size_t left = got > 0 ? (size_t)got : 0; whole < n && left >= lens[whole]; whole++)
        left -= lens[whole];
    return whole;
}

ssize_t mon_read_words(pid_t tid, uint64_t addr, uint64_t *out, size_t n)
{
    if (!addr) {
        errno = EFAULT;
        return -1;
    }
    ssize_t got = mon_read_mem(tid, addr, out, n * sizeof *out);
    if (got < (ssize_t)sizeof *out) {
        if (got >= 0)
            errno = EIO;
        return -1;
    }
    return got / (ssize_t)sizeof *out;
}

int mon_read_link(pid_t tid, const char *what, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)tid, what);
    ssize_t n = readlink(path, buf, len);
    if (n < 0)
        return -1;
    if ((size_t)n >= len) {
        errno = ENAMETOOLONG; /* it may have been cut: never taken for whole */
        return -1;
    }
    buf[n] = 0;
    return 0;
}

/* The value under name in a /proc/net/snmp pair of lines ("Ip: names..."
 * then "Ip: values..."), -1 when not there. */
static long long snmp_field(const char *text, const char *proto, const char *name)
{
    const char *head = strstr(text, proto);
    const char *vals = head ? strstr(head + 1, proto) : NULL;
    if (!vals)
        return -1;
    size_t nl = strlen(name);
    const char *h = head + strlen(proto), *v = vals + strlen(proto);
    while (*h && *h != '\n' && *v && *v != '\n') {
        while (*h == ' ')
            h++;
        while (*v == ' ')
            v++;
        size_t hw = strcspn(h, " \n"), vw = strcspn(v, " \n");
        if (hw == nl && !strncmp(h, name, nl))
            return strtoll(v, NULL, 10);
        h += hw;
        v += vw;
    }
    return -1;
}

long long mon_read_noroutes(pid_t pid)
{
    char buf[8192];
    long long total = -1;
    if (read_proc(pid, "net/snmp", buf, sizeof buf) >= 0) {
        total = snmp_field(buf, "Ip:", "OutNoRoutes"); /* the file's first two lines */
    }
    if (total >= 0 && read_proc(pid, "net/snmp6", buf, sizeof buf) >= 0) {
        const char *l = strstr(buf, "Ip6OutNoRoutes");
        if (l)
            total += strtoll(l + strlen("Ip6OutNoRoutes"), NULL, 10);
    }
    return total;
}
