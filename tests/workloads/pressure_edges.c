/*
 * pressure_edges.c - issue 15: pages swapped out where the stream has them by other ways.
 *
 * 1. Writes 4 MiB on its main thread's stack (which grows to hold it), and pages out 2 MiB of
 *    it with MADV_PAGEOUT.
 * 2. Writes 1 MiB of a mapping, pages it out, then frees it with MADV_FREE (which drops what
 *    is in swap), and writes its first half again.
 * Sleeps 100 ms after each step (several sample periods); prints "done" and exits 0. Needs swap.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#define MIB (1UL << 20)

static void pause_a_little(void)
{
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static __attribute__((noinline)) int deep(void)
{
    volatile char big[4 * MIB];
    for (size_t i = 0; i < sizeof big; i += 4096)
        big[i] = 1;
    uintptr_t start = ((uintptr_t)big + 4095) & ~4095UL;
    if (madvise((void *)start, 2 * MIB, MADV_PAGEOUT))
        perror("MADV_PAGEOUT of the stack");
    pause_a_little();
    return big[0];
}

int main(void)
{
    if (deep() != 1)
        return 1;
    char *p = mmap(NULL, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(p, MIB, MADV_NOHUGEPAGE);
    memset(p, 1, MIB);
    madvise(p, MIB, MADV_PAGEOUT);
    pause_a_little();
    madvise(p, MIB, MADV_FREE);
    memset(p, 2, MIB / 2);
    pause_a_little();
    printf("done\n");
    return 0;
}
