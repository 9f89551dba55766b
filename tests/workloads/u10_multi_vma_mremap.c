/*
 * u10_multi_vma_mremap.c - issue 10: mremap of a range made by two mmaps.
 *
 * No arg: two 4-page anonymous mmaps placed next to each other (the second
 * MAP_FIXED), same prot, so the kernel merges them into one VMA; both are
 * written; a guard page after them forces mremap(8 -> 16 pages, MAYMOVE) to
 * move. Prints "vmas 1 ok moved" (errno name instead of ok on failure).
 * "move": the two halves differ in prot (two VMAs even untraced), and the
 * whole range is moved without resizing (MREMAP_MAYMOVE|MREMAP_FIXED), which
 * Linux >= 6.17 allows over several VMAs, except uffd-registered ones (EFAULT).
 * Exit 0 when mremap succeeded, 1 otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define PG 4096UL
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static int vmas_in(uintptr_t start, uintptr_t end)
{
    FILE *f = fopen("/proc/self/maps", "r");
    unsigned long s, e;
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s < end && e > start) n++;
    if (f) fclose(f);
    return n;
}

int main(int argc, char **argv)
{
    int move = argc > 1 && !strcmp(argv[1], "move");
    char *a = mmap(NULL, 9 * PG, RW, ANON, -1, 0); /* find 9 free pages */
    if (a == MAP_FAILED) { perror("mmap"); return 1; }
    munmap(a, 9 * PG);
    if (mmap(a, 4 * PG, RW, ANON | MAP_FIXED_NOREPLACE, -1, 0) != a ||
        mmap(a + 4 * PG, 4 * PG, RW, ANON | MAP_FIXED_NOREPLACE, -1, 0) != a + 4 * PG ||
        mmap(a + 8 * PG, PG, PROT_NONE, ANON | MAP_FIXED_NOREPLACE, -1, 0) != a + 8 * PG) {
        perror("mmap fixed");
        return 1;
    }
    memset(a, 1, 8 * PG);
    if (move && mprotect(a + 4 * PG, 4 * PG, PROT_READ)) { perror("mprotect"); return 1; }
    printf("vmas %d ", vmas_in((uintptr_t)a, (uintptr_t)(a + 8 * PG)));
    char *q;
    if (move) {
        char *dst = mmap(NULL, 8 * PG, PROT_NONE, ANON, -1, 0);
        q = mremap(a, 8 * PG, 8 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    } else {
        q = mremap(a, 8 * PG, 16 * PG, MREMAP_MAYMOVE);
    }
    if (q == MAP_FAILED) {
        printf("%s\n", strerrorname_np(errno));
        return 1;
    }
    printf("ok %s %d\n", q != a ? "moved" : "in-place", q[0] + q[7 * PG]);
    return 0;
}
