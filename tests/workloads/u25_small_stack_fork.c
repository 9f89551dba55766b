/*
 * u25_small_stack_fork.c - issue 25: a fork from a small private stack laid out above data, as
 * coroutine and green-thread runtimes lay theirs out.
 *
 * Drops every capability while staying uid 0 (so userfaultfd(2) refuses it and the tracer takes
 * the /dev/userfaultfd way, which needs a path in the tracee's memory), fills a 48 KiB block
 * with a pattern and forks by a raw clone whose child runs on the 256 bytes above the block.
 * The child checks that not one byte of the block changed, then writes 10 pages of a fresh
 * mapping and reports region "child"; the parent checks its own copy of the block too. Exit 0 if both blocks are intact and the child exited 0; the child prints
 * "overwritten at OFFSET" on stderr and exits 1 if its block changed.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <linux/capability.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#define BLOCK (48 * 1024)
#define STACK 256

static unsigned char area[BLOCK + STACK] __attribute__((aligned(4096)));

/* The first byte of the block that is not the pattern, or -1. */
static long changed(void)
{
    for (long i = 0; i < BLOCK; i++)
        if (area[i] != 0xa5)
            return i;
    return -1;
}

/* The child, on the small stack: a check that needs almost none, then a normal stack again
 * (its own copy of the main one, which it returns to by longjmp-free means: it never returns,
 * it calls child_rest on the old stack pointer saved below). */
static void *main_stack;
static void child_rest(void);

__attribute__((noinline)) static void child_start(void)
{
    long at = changed();
    if (at >= 0) {
        char msg[64];
        int n = snprintf(msg, sizeof msg, "overwritten at %ld\n", at);
        syscall(SYS_write, 2, msg, n);
        syscall(SYS_exit, 1);
    }
    /* Back to a roomy stack (the parent's, copied by the fork) for the measurement. */
    __asm__ volatile("mov %0, %%rsp\n\tcall *%1\n\tud2" ::"r"(main_stack), "r"(child_rest) : "memory");
    __builtin_unreachable();
}

static void child_rest(void)
{
    char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 9);
    truth_region("child", a, 16);
    truth_expect("child", 10);
    truth_finish(0);
}

/* clone(SIGCHLD) with the child's stack pointer at `top`: the child calls `fn` there. */
static long fork_on(void *top, void (*fn)(void))
{
    long ret;
    register long r10 __asm__("r10") = 0;
    register long r8 __asm__("r8") = 0;
    __asm__ volatile(
        "syscall\n\t"
        "test %%rax, %%rax\n\t"
        "jnz 1f\n\t"
        "xor %%ebp, %%ebp\n\t"
        "call *%[fn]\n\t"
        "ud2\n"
        "1:\n"
        : "=a"(ret)
        : "0"((long)SYS_clone), "D"((long)SIGCHLD), "S"(top), "d"(0L), "r"(r10), "r"(r8), [fn] "r"(fn)
        : "rcx", "r11", "memory");
    return ret;
}

int main(void)
{
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
    if (syscall(SYS_capset, &header, data) != 0)
        truth_die("capset");
    memset(area, 0xa5, BLOCK);
    /* Somewhere well inside main's stack for the child's measurement, 16-byte aligned. */
    char roomy[1];
    main_stack = (void *)(((uintptr_t)roomy - 64 * 1024) & ~15UL);
    /* Touch down to there now so the child's copy has it mapped. */
    for (volatile char *p = roomy; p > (char *)main_stack - 4096; p -= 4096)
        *p = *p;

    long pid = fork_on(area + BLOCK + STACK - 16, child_start);
    if (pid < 0)
        truth_die("clone");
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && changed() < 0;
    truth_finish(ok ? 0 : 1);
}
