/*
 * pressure_pages.c CGROUP_DIR v1|v2 - issue 15: pages that leave memory with no release by
 * the program, and come back.
 *
 * Moves itself into the memory cgroup CGROUP_DIR (the test made it), writes 16 MiB (A) and
 * 8 MiB (B) of private anonymous memory, frees B with MADV_FREE, then in three steps:
 *   1. MADV_PAGEOUT over the first 8 MiB of A: written to swap (the test turned swap on);
 *   2. reads the first 2 MiB of A again: back from swap;
 *   3. lowers its cgroup's limit below what it uses, then lifts it: the kernel reclaims what
 *      it can, B's lazily freed pages first.
 * It prints "regions A_ADDR B_ADDR" (hex) first. After each step it reads its own pagemap and
 * prints "step N A present swapped absent B present swapped absent" (pages), sleeps 300 ms (many sample periods), then maps and unmaps a marker of N+1 pages:
 * the stream's state just before that marker's `map` line is the state the step printed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define A_PAGES 4096UL
#define B_PAGES 2048UL
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static int pagemap;

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void count(const char *name, char *p, size_t pages)
{
    long present = 0, swapped = 0, absent = 0;
    static uint64_t entries[A_PAGES];
    off_t at = (uintptr_t)p / PAGE * 8;
    if (pread(pagemap, entries, pages * 8, at) != (ssize_t)(pages * 8))
        die("pagemap");
    for (size_t i = 0; i < pages; i++) {
        if (entries[i] & (1ULL << 63))
            present++;
        else if (entries[i] & (1ULL << 62))
            swapped++;
        else
            absent++;
    }
    printf(" %s %ld %ld %ld", name, present, swapped, absent);
}

static void write_file(const char *dir, const char *file, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        die(path);
    close(fd);
}

static void step(int n, char *a, char *b)
{
    printf("step %d", n);
    count("A", a, A_PAGES);
    count("B", b, B_PAGES);
    printf("\n");
    fflush(stdout);
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    void *marker = mmap(NULL, (n + 1) * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (marker == MAP_FAILED)
        die("marker");
    munmap(marker, (n + 1) * PAGE);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    const char *cgroup = argv[1];
    int v2 = strcmp(argv[2], "v2") == 0;
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", getpid());
    write_file(cgroup, "cgroup.procs", pid);
    pagemap = open("/proc/self/pagemap", O_RDONLY);
    if (pagemap < 0)
        die("pagemap");
    char *a = mmap(NULL, A_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = mmap(NULL, B_PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED)
        die("mmap");
    /* No huge page: a page each, as the test counts them. */
    madvise(a, A_PAGES * PAGE, MADV_NOHUGEPAGE);
    madvise(b, B_PAGES * PAGE, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < A_PAGES; i++)
        a[i * PAGE] = 1 + i % 7;
    for (size_t i = 0; i < B_PAGES; i++)
        b[i * PAGE] = 1;
    if (madvise(b, B_PAGES * PAGE, MADV_FREE))
        die("MADV_FREE");
    printf("regions %lx %lx\n", (unsigned long)a, (unsigned long)b);

    if (madvise(a, A_PAGES / 2 * PAGE, MADV_PAGEOUT))
        die("MADV_PAGEOUT");
    step(1, a, b);

    long sum = 0;
    for (size_t i = 0; i < A_PAGES / 8; i++)
        sum += ((volatile char *)a)[i * PAGE];
    if (sum == 0)
        die("the pages came back empty");
    step(2, a, b);

    /* What the cgroup uses now, less 6 MiB: reclaim has to find that much. */
    char path[512], text[64];
    snprintf(path, sizeof path, "%s/%s", cgroup, v2 ? "memory.current" : "memory.usage_in_bytes");
    FILE *f = fopen(path, "r");
    long long usage = 0;
    if (!f || fscanf(f, "%lld", &usage) != 1)
        die(path);
    fclose(f);
    snprintf(text, sizeof text, "%lld\n", usage - (6LL << 20));
    const char *limit = v2 ? "memory.max" : "memory.limit_in_bytes";
    write_file(cgroup, limit, text);
    write_file(cgroup, limit, v2 ? "max\n" : "-1\n");
    step(3, a, b);
    return 0;
}
