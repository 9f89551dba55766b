/*
 * scan_tick.c - issue 14: when do timed scans find pages touched with no
 * syscall after them?
 *
 * Usage: scan_tick SLEEP_MS. Maps 64 pages (the last layout syscall it
 * makes), reads CLOCK_REALTIME, writes the 64 pages, prints
 * "touched REALTIME_NS ADDR" and sleeps SLEEP_MS with no memory syscall,
 * then exits 0. Under --faults scan the pages can only be found by a timed
 * scan during the sleep, or by the last scan at exit.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define PG 4096UL
#define PAGES 64

int main(int argc, char **argv)
{
    long sleep_ms = argc > 1 ? atol(argv[1]) : 300;
    volatile char *p = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (unsigned long i = 0; i < PAGES; i++) p[i * PG] = 1;
    printf("touched %lld %lu\n", (long long)now.tv_sec * 1000000000LL + now.tv_nsec,
           (unsigned long)p);
    fflush(stdout);
    struct timespec nap = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    nanosleep(&nap, NULL);
    return 0;
}
