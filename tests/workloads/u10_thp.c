/*
 * u10_thp.c - issue 10: a region the program asks to be huge.
 *
 * Prints the THP setting (/sys/kernel/mm/transparent_hugepage/enabled), maps
 * 64 MiB aligned to 2 MiB, prints "region START END" (hex) on stderr, and by
 * MODE:
 *   huge (or none): madvise(MADV_HUGEPAGE), then writes every 4 KiB page;
 *   collapse : writes every other 4 KiB page of the first 2 MiB, then
 *              madvise(MADV_COLLAPSE) on it and prints "collapse ok" (or the
 *              errno's name) - untraced the kernel makes one huge page of it
 *              (filling the pages not written);
 *   reads    : madvise(MADV_HUGEPAGE), then reads one byte of each 2 MiB
 *              block (the huge zero page, where the kernel uses it) and
 *              writes the second half of the region;
 *   collapse-mremap: as collapse, then moves the region's first 8 MiB, grown
 *              to 32 MiB (mremap MAYMOVE), and prints "mremap ok" (or the
 *              errno's name): the collapse must not have split the mapping;
 *   collapse-beside: as collapse, then maps 2 MiB just below the region
 *              (the kernel merges it into the collapsed mapping, whose flags
 *              a collapse leaves alone), writes a page of it, and moves the
 *              new part with the region's first 8 MiB, grown to 32 MiB:
 *              "mremap ok" when nothing split the merged mapping;
 *   stack    : as huge, then madvise(MADV_HUGEPAGE) on the main stack and on
 *              a 64-page MAP_GROWSDOWN mapping, grows the stack by 1 MiB of
 *              recursion and the other mapping by 16 pages, prints "grew";
 *   heap     : unmaps the region and uses the heap instead: grows it by
 *              32 MiB, madvise(MADV_HUGEPAGE) on it, grows it by 32 MiB
 *              more (a new mapping: brk does not merge it with the advised
 *              one, so only the first half gets huge pages), writes every
 *              page of the 64 MiB (the region printed is the heap's part).
 * Then prints "AnonHugePages N kB" from /proc/self/smaps_rollup, and the
 * region's pages present by /proc/self/pagemap as "present N".
 * Untraced with THP madvise/always: 65536 kB (collapse: 2048 kB; reads and
 * heap: 32768 kB). Exit 0 (1 on a failed call).
 * Before issue 10 the tracer's userfaultfd made every fault a 4 KiB one: 0 kB
 * (reads: 8208 pages present, not 16384: no huge zero page), and
 * MADV_COLLAPSE of the sparse block got EBUSY.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE (2UL << 20)
#define SIZE (64UL << 20)
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

static long present_pages(char *p, size_t size)
{
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) return -1;
    long n = 0;
    uint64_t entries[512];
    for (size_t off = 0; off < size; off += 512 * 4096UL) {
        off_t at = (off_t)(((uintptr_t)p + off) / 4096) * 8;
        if (pread(fd, entries, sizeof entries, at) != (ssize_t)sizeof entries) { n = -1; break; }
        for (int i = 0; i < 512; i++) n += (entries[i] >> 63) & 1;
    }
    close(fd);
    return n;
}

/* Recursion 4 KiB a level: grows the main stack. */
__attribute__((noinline)) static int deep(int n)
{
    volatile char frame[4096];
    frame[0] = 1;
    return n == 0 ? frame[0] : deep(n - 1) + frame[0];
}

/* Asks for huge pages on the main stack and on a MAP_GROWSDOWN mapping, then grows both. */
static int grow_stacks(void)
{
    unsigned long lo = 0, hi = 0;
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "[stack]")) sscanf(line, "%lx-%lx", &lo, &hi);
    if (f) fclose(f);
    if (!lo || madvise((void *)lo, hi - lo, MADV_HUGEPAGE)) { perror("madvise stack"); return 1; }
    char *g = mmap(NULL, 64 * 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
    if (g == MAP_FAILED) { perror("mmap growsdown"); return 1; }
    if (madvise(g, 64 * 4096, MADV_HUGEPAGE)) { perror("madvise growsdown"); return 1; }
    g[0] = 1;
    for (int i = 1; i <= 16; i++) g[-4096 * i] = 2;
    if (deep(256) != 257) return 1;
    printf("grew\n");
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
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
    if (strcmp(mode, "heap") == 0) {
        munmap(p, SIZE);
        char *brk0 = sbrk(0);
        p = (char *)(((uintptr_t)brk0 + HUGE - 1) & ~(HUGE - 1));
        if (sbrk(p - brk0 + SIZE / 2) == (void *)-1) { perror("sbrk"); return 1; }
        if (madvise(brk0, p - brk0 + SIZE / 2, MADV_HUGEPAGE)) { perror("madvise"); return 1; }
        if (sbrk(SIZE / 2) == (void *)-1) { perror("sbrk"); return 1; }
    }
    fprintf(stderr, "region %lx %lx\n", (unsigned long)p, (unsigned long)(p + SIZE));
    if (strcmp(mode, "heap") == 0) {
        for (size_t i = 0; i < SIZE; i += 4096) p[i] = 1;
    } else if (strncmp(mode, "collapse", 8) == 0) {
        for (size_t i = 0; i < HUGE; i += 8192) p[i] = 1;
        int r = madvise(p, HUGE, MADV_COLLAPSE);
        printf("collapse %s\n", r == 0 ? "ok" : strerrorname_np(errno));
        char *from = p;
        size_t len = 8UL << 20;
        if (strcmp(mode, "collapse-beside") == 0) {
            from = mmap(p - HUGE, HUGE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (from == MAP_FAILED) { perror("mmap beside"); return 1; }
            from[0] = 1;
            len += HUGE;
        }
        if (strcmp(mode, "collapse") != 0) {
            char *q = mremap(from, len, 32UL << 20, MREMAP_MAYMOVE);
            printf("mremap %s\n", q != MAP_FAILED ? "ok" : strerrorname_np(errno));
            if (q != MAP_FAILED) p = q + (p - from); /* the rest stays where it was */
        }
    } else {
        if (madvise(p, SIZE, MADV_HUGEPAGE)) { perror("madvise"); return 1; }
        if (strcmp(mode, "reads") == 0) {
            volatile char sum = 0;
            for (size_t i = 0; i < SIZE / 2; i += HUGE) sum += p[i];
            for (size_t i = SIZE / 2; i < SIZE; i += 4096) p[i] = 1;
        } else {
            for (size_t i = 0; i < SIZE; i += 4096) p[i] = 1;
        }
        if (strcmp(mode, "stack") == 0 && grow_stacks()) return 1;
    }
    long huge_kb = -1;
    f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "AnonHugePages: %ld kB", &huge_kb);
    if (f) fclose(f);
    printf("AnonHugePages %ld kB\n", huge_kb);
    printf("present %ld\n", present_pages(p, SIZE));
    return 0;
}
