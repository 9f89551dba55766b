/*
 * u10_growsdown.c - issue 10: growth of a MAP_GROWSDOWN mapping.
 *
 * Frees an 8 MiB hole, maps 4 pages MAP_GROWSDOWN at its top, writes them,
 * then writes the page 16 pages below the start: the kernel grows the
 * mapping down to that page (the rest of the hole stays above the 1 MiB
 * stack guard gap). Prints "grew 16 pages" (start moved by that many pages,
 * from /proc/self/maps) and exits 0; 1 on a failed call or no growth.
 * Before issue 10 the growth gave no line (--verify exit 3).
 * "protect": then mprotect(p + 1 page, 1 page, PROT_READ | PROT_GROWSDOWN),
 * which the kernel applies from the mapping's start (16 pages below p) up to
 * p + 2 pages, and mprotect(p, 1 page, PROT_READ | PROT_GROWSUP), which x86
 * refuses (EINVAL). Prints "grew 16 pages" and "growsdown ok growsup EINVAL",
 * and on stderr each mapping of the hole as "maps START END PROT" (decimal).
 * Before issue 10 the protect line covered only the page passed.
 * "deep": only grows the main stack by 8 MiB of recursion, 4 KiB a level, and
 * prints "deep ok": under --verify-every, checkpoints stop the thread inside
 * faults that grew the stack, whose messages the kernel takes back to retry
 * after the stop. Before, such a check found the grown page unmapped in the
 * stream (--verify exit 3).
 * "adjacent": maps 16 pages MAP_GROWSDOWN, then 8 populated pages
 * MAP_GROWSDOWN just below them (the kernel merges the two into one mapping),
 * and sleeps 100 ms for checks; prints "adjacent ok". Before, a check took
 * the merged mapping for the first one's growth and wrote the second one's
 * pages not resident (--verify exit 3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG 4096UL
#define HOLE (8UL << 20)

static uintptr_t start_of(uintptr_t inside)
{
    FILE *f = fopen("/proc/self/maps", "r");
    unsigned long s, e, found = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &s, &e) == 2 && s <= inside && inside < e) found = s;
    if (f) fclose(f);
    return found;
}

/* Every mapping in [lo, hi) on stderr, as /proc/self/maps says. */
static void print_maps(uintptr_t lo, uintptr_t hi)
{
    FILE *f = fopen("/proc/self/maps", "r");
    unsigned long s, e;
    char prot[5], line[512];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %4s", &s, &e, prot) == 3 && s < hi && e > lo)
            fprintf(stderr, "maps %lu %lu %.3s\n", s, e, prot);
    if (f) fclose(f);
}

/* Recursion 4 KiB a level: grows the main stack. */
__attribute__((noinline)) static int deep(int n)
{
    volatile char frame[4096];
    frame[0] = 1;
    return n == 0 ? frame[0] : deep(n - 1) + frame[0];
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "adjacent")) {
        char *g = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
        if (g == MAP_FAILED) { perror("mmap"); return 1; }
        char *h = mmap(g - 8 * PG, 8 * PG, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN | MAP_FIXED_NOREPLACE |
                           MAP_POPULATE, -1, 0);
        if (h == MAP_FAILED) { perror("mmap below"); return 1; }
        usleep(100000);
        printf("adjacent ok\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "deep")) {
        int levels = deep(2000);
        printf("deep %s\n", levels == 2001 ? "ok" : "wrong");
        return levels != 2001;
    }
    int protect = argc > 1 && !strcmp(argv[1], "protect");
    char *hole = mmap(NULL, HOLE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (hole == MAP_FAILED) { perror("mmap hole"); return 1; }
    munmap(hole, HOLE);
    char *want = hole + HOLE - 4 * PG;
    char *p = mmap(want, 4 * PG, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != want) { perror("mmap growsdown"); return 1; }
    for (int i = 0; i < 4; i++) p[i * PG] = 1;
    uintptr_t before = start_of((uintptr_t)p);
    *(volatile char *)(p - 16 * PG) = 2; /* grows the mapping down */
    uintptr_t after = start_of((uintptr_t)p);
    long grew = (long)((before - after) / PG);
    printf("grew %ld pages\n", grew);
    if (!protect)
        return grew != 16;
    int down = mprotect(p + PG, PG, PROT_READ | PROT_GROWSDOWN);
    int up = mprotect(p, PG, PROT_READ | PROT_GROWSUP) ? errno : 0;
    printf("growsdown %s growsup %s\n", down ? "failed" : "ok", up ? strerrorname_np(up) : "ok");
    fflush(stdout);
    print_maps((uintptr_t)hole, (uintptr_t)(hole + HOLE));
    return grew != 16 || down;
}
