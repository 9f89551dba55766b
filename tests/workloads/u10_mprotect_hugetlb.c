/*
 * u10_mprotect_hugetlb.c - issue 10: mprotect, and a hugetlb mapping.
 *
 * No arg: maps 8 pages read-write, writes them, mprotects them PROT_READ,
 * reads them, mprotects them back to read-write, writes them again, and
 * leaves pages 4..7 PROT_READ. Prints "mprotect ok" and exits 0 (and the region's address on
 * stderr: "region ADDR").
 * "hugetlb": maps one 2 MiB MAP_HUGETLB page and writes it once; prints
 * "hugetlb ok" and exits 0, or "hugetlb ENOMEM" and exits 2 when no huge
 * page is reserved (/proc/sys/vm/nr_hugepages is 0).
 * Before issue 10 mprotect gave no line (the map line's prot went stale) and
 * the hugetlb mapping was reported as kind "anon".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define PG 4096UL

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "hugetlb")) {
        size_t len = 2UL << 20;
        char *h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (h == MAP_FAILED) {
            printf("hugetlb %s\n", strerrorname_np(errno));
            return 2;
        }
        h[12345] = 1;
        printf("hugetlb ok\n");
        return 0;
    }
    char *p = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    memset(p, 1, 8 * PG);
    if (mprotect(p, 8 * PG, PROT_READ)) { perror("mprotect r"); return 1; }
    int sum = 0;
    for (size_t i = 0; i < 8 * PG; i += PG) sum += p[i];
    if (mprotect(p, 8 * PG, PROT_READ | PROT_WRITE)) { perror("mprotect rw"); return 1; }
    memset(p, 2, 8 * PG);
    if (mprotect(p + 4 * PG, 4 * PG, PROT_READ)) { perror("mprotect r2"); return 1; }
    printf("mprotect %s\n", sum == 8 ? "ok" : "bad");
    fprintf(stderr, "region %lu\n", (unsigned long)p);
    return sum != 8;
}
