/*
 * u10_thp.c - issue 10: a region the program asks to be huge.
 *
 * Prints the THP setting (/sys/kernel/mm/transparent_hugepage/enabled), maps
 * 64 MiB aligned to 2 MiB, madvise(MADV_HUGEPAGE), writes every 4 KiB page,
 * and prints "AnonHugePages N kB" from /proc/self/smaps_rollup.
 * Untraced with THP madvise/always: 65536 kB. Exit 0 (1 on a failed call).
 * Before issue 10 the tracer's userfaultfd made every fault a 4 KiB one: 0 kB.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE (2UL << 20)
#define SIZE (64UL << 20)

int main(void)
{
    char line[256];
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f && fgets(line, sizeof line, f)) printf("thp %s", line);
    if (f) fclose(f);
    char *raw = mmap(NULL, SIZE + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *p = (char *)(((uintptr_t)raw + HUGE - 1) & ~(HUGE - 1));
    /* trim to exactly [p, p+SIZE) so the region is its own aligned VMA */
    if (p > raw) munmap(raw, p - raw);
    if (raw + HUGE > p) munmap(p + SIZE, raw + HUGE - p);
    if (madvise(p, SIZE, MADV_HUGEPAGE)) { perror("madvise"); return 1; }
    for (size_t i = 0; i < SIZE; i += 4096) p[i] = 1;
    long huge_kb = -1;
    f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "AnonHugePages: %ld kB", &huge_kb);
    if (f) fclose(f);
    printf("AnonHugePages %ld kB\n", huge_kb);
    return 0;
}
