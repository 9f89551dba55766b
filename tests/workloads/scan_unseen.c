/*
 * scan_unseen.c - issue 14: pages made resident and dropped where no scan can
 * see them.
 *
 * Usage: scan_unseen ROUNDS [discard]. Maps 4 MiB below 4 GiB (MAP_32BIT),
 * then ROUNDS times writes its 1024 pages and, with "discard", drops them
 * with madvise(MADV_DONTNEED) made through `int $0x80` (i386 number 219):
 * another ABI's syscall, which the tracer's filter lets through unstopped,
 * so no scan comes before the drop. Prints "rounds N" and exits 0.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PG 4096UL
#define PAGES 1024UL

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 10;
    int discard = argc > 2 && !strcmp(argv[2], "discard");
    volatile char *p = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    for (long r = 0; r < rounds; r++) {
        for (unsigned long i = 0; i < PAGES; i++) p[i * PG] = 1;
        if (discard) {
            long ret = 219; /* __NR_madvise on i386 */
            __asm__ volatile("int $0x80"
                             : "+a"(ret)
                             : "b"((unsigned long)p), "c"(PAGES * PG), "d"(MADV_DONTNEED)
                             : "memory", "cc");
            if (ret != 0) { fprintf(stderr, "madvise: %ld\n", ret); return 1; }
        }
    }
    printf("rounds %ld\n", rounds);
    return 0;
}
