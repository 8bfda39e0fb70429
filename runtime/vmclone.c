/* vmclone.c - clone3 with CLONE_VM on a stack of its own: a sandbox child
 * that shares its owner's address space until it execs lis-init, so the
 * clone copies no page table and the owner's threads take no copy-on-write
 * fault (spawn.c says what such a child may and may not do).
 *
 * The child's stacks and copytree.c's arena are one mapping made by the
 * creator before the clone and unmapped by it once the child has exec'd or
 * been reaped, so nothing the child maps can outlive it in the owner. */
#include "internal.h"

#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>

#if LIS_VM_CLONE
/* The trampoline: clone3(ca, size); the child, on its new stack, calls
 * fn(arg) and, should fn return, exits 127. The parent gets the raw result
 * (a pid or -errno). The kernel keeps r8/r9 in the child (only rax and rsp
 * differ), so fn and arg travel there. */
long lis_vm_clone3_raw(struct clone_args *ca, size_t size, void (*fn)(void *), void *arg);
__asm__(".text\n"
        ".globl lis_vm_clone3_raw\n"
        ".hidden lis_vm_clone3_raw\n"
        ".type lis_vm_clone3_raw,@function\n"
        "lis_vm_clone3_raw:\n"
        "    mov %rdx, %r9\n"
        "    mov %rcx, %r8\n"
        "    mov $435, %eax\n" /* SYS_clone3 */
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 1f\n"
        "    xor %ebp, %ebp\n" /* the child: an outermost frame */
        "    mov %r8, %rdi\n"
        "    call *%r9\n"
        "    mov $127, %edi\n"
        "    mov $60, %eax\n" /* SYS_exit */
        "    syscall\n"
        "    hlt\n"
        "1:  ret\n"
        ".size lis_vm_clone3_raw, .-lis_vm_clone3_raw\n");

long lis_vm_clone3(struct clone_args *ca, const lis_vm_stacks *st, int which, void (*fn)(void *),
                   void *arg)
{
    ca->flags |= CLONE_VM;
    ca->stack = (uint64_t)(uintptr_t)st->stack[which];
    ca->stack_size = which ? LIS_VM_STACK_MID : LIS_VM_STACK;
    long r = lis_vm_clone3_raw(ca, sizeof *ca, fn, arg);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}
#endif

/* Low to high: the arena, a guard, the child's stack, a guard, the mid's
 * stack (spawn.c's full-map path). A guard is larger than any frame of the
 * child's code (the largest, load_filter's, is 32 KiB), so an overflow
 * faults in the guard and never reaches the owner's memory below it. The
 * arena stays PROT_NONE (no commit charge, even with vm.overcommit_memory=2)
 * until a child that copies the image's /tmp makes it writable (copytree.c). */
int lis_vm_stacks_map(lis_vm_stacks *st)
{
    size_t len = LIS_COPY_ARENA + LIS_VM_GUARD + LIS_VM_STACK + LIS_VM_GUARD + LIS_VM_STACK_MID;
    char *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return errno;
    char *s0 = m + LIS_COPY_ARENA + LIS_VM_GUARD, *s1 = s0 + LIS_VM_STACK + LIS_VM_GUARD;
    if (mprotect(s0, LIS_VM_STACK, PROT_READ | PROT_WRITE) < 0 ||
        mprotect(s1, LIS_VM_STACK_MID, PROT_READ | PROT_WRITE) < 0) {
        int e = errno;
        munmap(m, len);
        return e;
    }
    st->base = m;
    st->len = len;
    st->arena = m;
    st->stack[0] = s0;
    st->stack[1] = s1;
    return 0;
}

void lis_vm_stacks_unmap(lis_vm_stacks *st)
{
    if (st->base)
        munmap(st->base, st->len);
    st->base = NULL;
}
