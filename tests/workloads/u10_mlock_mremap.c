/*
 * u10_mlock_mremap.c - issue 10: growing locked memory with mremap.
 *
 * No arg: mmap one page, mlock it, place a guard page right after it
 * (MAP_FIXED_NOREPLACE) so that mremap(p, 4096, 8192, MREMAP_MAYMOVE) must
 * move; the kernel populates the locked range inside mremap. Touch the new
 * page.  "mlockall": mlockall(MCL_CURRENT|MCL_FUTURE), malloc 1 MiB,
 * realloc to 4 MiB, touch every page.
 * Prints "ok moved=1" / "ok"; exit 0 (1 on a failed call).
 * Before issue 10 the tracer livelocked on both paths.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PG 4096UL

static int locked_all(void)
{
    if (mlockall(MCL_CURRENT | MCL_FUTURE)) { perror("mlockall"); return 1; }
    char *p = malloc(1 << 20);
    if (!p) { perror("malloc"); return 1; }
    memset(p, 1, 1 << 20);
    char *q = realloc(p, 4 << 20);
    if (!q) { perror("realloc"); return 1; }
    for (size_t i = 0; i < (4 << 20); i += PG) q[i] = 2;
    printf("ok %d\n", q[0] + q[(4 << 20) - 1]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "mlockall")) return locked_all();
    /* reserve 3 pages, keep the first, so the second is free for the guard */
    char *p = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    munmap(p + PG, 2 * PG);
    char *guard = mmap(p + PG, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (guard != p + PG) { perror("guard mmap"); return 1; }
    if (mlock(p, PG)) { perror("mlock"); return 1; }
    p[0] = 7;
    char *q = mremap(p, PG, 2 * PG, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) { perror("mremap"); return 1; }
    q[PG + 5] = 1;
    printf("ok moved=%d %d\n", q != p, q[0] + q[PG + 5]);
    return 0;
}
