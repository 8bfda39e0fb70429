/* fuzz_notify.c - the hub's handling of exec notifications (issue 29): what
 * an exec names read from memory laid out by the input (monitor/exec_read.c,
 * procmem.c: the fuzzer's own pages, read with process_vm_readv as the hub
 * reads a sandbox's), then recorded (records.c), ended, and taken into a
 * step's effects JSON (effects.c).
 *
 * An input is a list of operations; each EXEC lays out a path and an argv
 * (any lengths, pointers into the arena, wild or NULL, pages made
 * unreadable mid-string, optionally a thread rewriting the arena while it is
 * read), as a failing or a replaced exec of one of three processes, fresh or
 * stale; EXIT ends a process; STEP takes the records into effects. The
 * audit's case (two failing execs of one process, same argc, a longer
 * second argv) is fuzz/corpus/notify/same-argc-longer.
 *
 * Invariants: a read exec holds at most MON_ARGS_MAX arguments in at most
 * MON_ARGV_BYTES, exactly argc NUL-terminated strings in argv_len bytes, a
 * NUL-terminated path; every record keeps the same; the effects JSON lists
 * no more processes than were recorded, and prints as strict UTF-8. ASan
 * catches any read past a record. */
#include "fuzz.h"
#include "monitor.h"

#include <cjson/cJSON.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGES 16
#define PAGE 4096
#define ARENA (PAGES * PAGE)

static char *arena;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    FUZZ_CHECK(arena != MAP_FAILED);
    return 0;
}

typedef struct in {
    const uint8_t *d;
    size_t n, at;
} in;

static unsigned byte(in *i) { return i->at < i->n ? i->d[i->at++] : 0; }
static unsigned u16(in *i) { return byte(i) | byte(i) << 8; }

/* A NUL-terminated string of len bytes of fill at off (cut by the arena's end). */
static uint64_t place(size_t off, size_t len, char fill, int slash)
{
    off %= ARENA;
    if (off + len + 1 > ARENA)
        len = ARENA - off - 1;
    memset(arena + off, fill, len);
    if (slash && len)
        arena[off] = '/';
    arena[off + len] = 0;
    return (uint64_t)(uintptr_t)(arena + off);
}

static atomic_int stop_rewriter;

/* Rewrites bytes of the readable pages (arg: the mask of the others). */
static void *rewriter(void *arg)
{
    unsigned holes = (unsigned)(uintptr_t)arg, seed = holes;
    while (!atomic_load(&stop_rewriter)) {
        seed = seed * 1103515245u + 12345u;
        size_t off = (seed >> 8) % ARENA;
        if (holes & (1u << (off / PAGE)))
            continue;
        /* only bytes: a pointer slot rewritten stays in the arena or NULL */
        arena[off] = (char)(seed & 1 ? 0 : 'r');
    }
    return NULL;
}

static void check_exec(const mon_exec *x)
{
    FUZZ_CHECK(x->argc <= MON_ARGS_MAX);
    FUZZ_CHECK(x->argc <= x->argc_total);
    FUZZ_CHECK(x->argv_len <= sizeof x->argv);
    size_t nuls = 0;
    for (size_t k = 0; k < x->argv_len; k++)
        nuls += !x->argv[k];
    FUZZ_CHECK(nuls == x->argc);
    FUZZ_CHECK(!x->argv_len || !x->argv[x->argv_len - 1]);
    FUZZ_CHECK(memchr(x->path, 0, sizeof x->path));
}

static void op_exec(in *i, lis_monitor *m)
{
    memset(arena, 0, ARENA);
    struct seccomp_data d;
    memset(&d, 0, sizeof d);
    unsigned flags = byte(i);
    d.nr = flags & 1 ? SYS_execveat : SYS_execve;
    size_t plen = (size_t)u16(i) % 5200; /* past PATH_MAX too */
    uint64_t path = flags & 2 ? 0 : place(u16(i), plen, (char)('a' + byte(i) % 26), flags & 4);
    size_t argc = byte(i) % 90;
    size_t ptr_off = (u16(i) % (ARENA - 8 * 96)) & ~(size_t)7;
    uint64_t *ptrs = (uint64_t *)(void *)(arena + ptr_off);
    for (size_t k = 0; k < argc; k++) {
        unsigned kind = byte(i);
        size_t len = (size_t)(kind % 8 == 0 ? u16(i) % 5000 : byte(i) * 3 % 700);
        size_t off = u16(i);
        if (off >= ptr_off && off < ptr_off + 8 * 96)
            off = ptr_off + 8 * 96;                 /* strings never overwrite the pointers */
        ptrs[k] = kind == 0xff   ? (uint64_t)0x1000 /* unmapped */
                  : kind == 0xfe ? 0
                                 : place(off, len, (char)('A' + kind % 26), 0);
    }
    ptrs[argc] = 0;
    uint64_t argv = flags & 8 ? 0 : (uint64_t)(uintptr_t)ptrs;
    if (d.nr == SYS_execveat) {
        d.args[0] = flags & 16 ? (uint64_t)-100 /* AT_FDCWD */ : 0;
        d.args[1] = path;
        d.args[2] = argv;
        d.args[4] = flags & 32 ? 0x1000 /* AT_EMPTY_PATH */ : 0;
    } else {
        d.args[0] = path;
        d.args[1] = argv;
    }
    /* pages made unreadable, after the layout: strings and pointers cut mid-way */
    unsigned holes = u16(i);
    for (int p = 0; p < PAGES; p++)
        if (holes & (1u << p) && (flags & 64))
            mprotect(arena + p * PAGE, PAGE, PROT_NONE);
    pthread_t t;
    unsigned made = flags & 64 ? holes : 0;
    int rw = (flags & 128) && pthread_create(&t, NULL, rewriter, (void *)(uintptr_t)made) == 0;
    mon_exec x;
    memset(&x, 0, sizeof x);
    mon_exec_read((pid_t)syscall(SYS_gettid), &d, &x);
    if (rw) {
        atomic_store(&stop_rewriter, 1);
        pthread_join(t, NULL);
        atomic_store(&stop_rewriter, 0);
    }
    mprotect(arena, ARENA, PROT_READ | PROT_WRITE);
    check_exec(&x);
    unsigned who = byte(i);
    mon_exec_ids ids = {.tgid = 100 + (pid_t)(who % 3),
                        .nspid = 2 + (pid_t)(who % 3),
                        .stale = (who >> 2) & 1};
    mon_proc *prev = NULL;
    mon_proc *p = mon_exec_record(m, &x, &ids, (who >> 3) & 1 ? "rule" : NULL, 1.0, &prev);
    if (p) {
        FUZZ_CHECK(p->argv_len == x.argv_len && p->argc == x.argc);
        FUZZ_CHECK(!memcmp(p->argv, x.argv, x.argv_len));
        FUZZ_CHECK(strlen(p->path) < MON_PATH_MAX);
    }
    FUZZ_CHECK(!prev || prev != p);
}

static void op_exit(in *i, lis_monitor *m)
{
    mon_proc *p = mon_running_proc(m, 100 + (pid_t)(byte(i) % 3));
    if (p) {
        p->state = byte(i) & 1 ? MP_EXITED : MP_KILLED;
        p->exit_code = 1;
    }
}

static void op_step(lis_monitor *m)
{
    lis_effects *e = calloc(1, sizeof *e);
    FUZZ_CHECK(e);
    e->step = m->step;
    e->tool = strdup("execute_bash");
    e->command = strdup("x");
    size_t before = m->nprocs;
    FUZZ_CHECK(mon_records_take(m, e) == 0);
    FUZZ_CHECK(e->nprocs <= before && m->nprocs <= before);
    mon_classify(e);
    cJSON *j = lis_effects_json(e);
    FUZZ_CHECK(j);
    FUZZ_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "processes")) <= (int)e->nprocs);
    char *txt = lis_json_print(j, 0); /* as every file lis writes: strict UTF-8 */
    FUZZ_CHECK(txt && lis_utf8_valid(txt, strlen(txt)));
    free(txt);
    cJSON_Delete(j);
    lis_effects_free(e);
    m->step++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    in i = {data, size, 0};
    lis_monitor *m = calloc(1, sizeof *m);
    FUZZ_CHECK(m);
    pthread_mutex_init(&m->mu, NULL);
    m->listener = m->evfd = -1;
    m->in_step = 1;
    m->pid1 = 1;
    for (int ops = 0; i.at < i.n && ops < 64; ops++) {
        switch (byte(&i) % 4) {
        case 0:
        case 3: op_exec(&i, m); break;
        case 1: op_exit(&i, m); break;
        case 2: op_step(m); break;
        }
    }
    op_step(m);
    for (size_t k = 0; k < m->nprocs; k++)
        mon_proc_free(m->procs[k]);
    free(m->procs);
    pthread_mutex_destroy(&m->mu);
    free(m);
    return 0;
}
