#define _GNU_SOURCE
// separate_maps.c - N separate private anonymous mappings (issue 25 item 11, the shape of LTP munmap04): each of
// PAGES pages (default 1) is mapped with MAP_FIXED_NOREPLACE one page past the previous one's
// end, so the gaps keep the kernel from merging them; then one page of each is written, and
// each is unmapped by its own munmap. With `adjacent`, they touch, and every other one is also
// executable, which keeps them apart instead. Usage: separate_maps N [PAGES [adjacent]].
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: separate_maps N [PAGES [adjacent]]\n");
        return 2;
    }
    long n = atol(argv[1]);
    long pages = argc > 2 ? atol(argv[2]) : 1;
    int adjacent = argc > 3 && strcmp(argv[3], "adjacent") == 0;
    if (n < 1 || pages < 1) {
        fprintf(stderr, "separate_maps: N and PAGES must be positive\n");
        return 2;
    }
    long page = sysconf(_SC_PAGESIZE);
    size_t stride = (size_t)(pages + !adjacent) * page;
    // A place for all of them, found by the kernel and given back at once: nothing else maps
    // in between (one thread, no malloc here).
    char *base = mmap(NULL, stride * n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) { perror("mmap reserve"); return 1; }
    munmap(base, stride * n);
    for (long i = 0; i < n; i++) {
        char *want = base + i * stride;
        int prot = PROT_READ | PROT_WRITE | (adjacent && i % 2 ? PROT_EXEC : 0);
        char *got = mmap(want, (size_t)pages * page, prot,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (got != want) {
            fprintf(stderr, "separate_maps: mmap %ld of %ld failed\n", i, n);
            return 1;
        }
    }
    for (long i = 0; i < n; i++) *(volatile char *)(base + i * stride) = 1;
    // With SEPARATE_MAPS_PAUSE set, every page is present for 50 ms: long enough for a tracer's
    // timed read (10 ms apart) to find them all before the first munmap, whose own read covers
    // only its mapping. (Not by default: the bench times the mappings themselves.)
    if (getenv("SEPARATE_MAPS_PAUSE") != NULL)
        usleep(50 * 1000);
    for (long i = 0; i < n; i++)
        if (munmap(base + i * stride, (size_t)pages * page) != 0) { perror("munmap"); return 1; }
    printf("separate_maps: %ld mappings of %ld pages\n", n, pages);
    return 0;
}
