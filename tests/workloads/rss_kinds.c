/*
 * rss_kinds.c - issue 15: memory of every kind the kernel counts in
 * /proc/PID/status (RssAnon, RssFile, RssShmem).
 *
 * Writes 8 MiB of private anonymous memory and 4 MiB of shared anonymous
 * memory, reads a 2 MiB file through a private mapping (its pages are file
 * pages), then sleeps 300 ms (several sample periods) and prints
 * "rss ANON FILE SHMEM SWAP" in bytes as /proc/self/status says them, and
 * exits 0. Usage: rss_kinds FILE (a scratch path it creates).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static char status[8192];

static long long kib(const char *key)
{
    const char *at = strstr(status, key);
    return at ? atoll(at + strlen(key)) * 1024 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    const size_t mib = 1 << 20;
    char *anon = mmap(NULL, 8 * mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shared = mmap(NULL, 4 * mib, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (anon == MAP_FAILED || shared == MAP_FAILED) { perror("mmap"); return 1; }
    memset(anon, 1, 8 * mib);
    memset(shared, 2, 4 * mib);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 2 * mib) != 0) { perror("file"); return 1; }
    char *file = mmap(NULL, 2 * mib, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file == MAP_FAILED) { perror("mmap file"); return 1; }
    volatile char sum = 0;
    for (size_t i = 0; i < 2 * mib; i += 4096) sum += file[i];
    /* A dry run first: the code that measures and prints is in memory before the sleep, so
     * that the figures do not move between the last sample and the measurement. */
    static char line[128];
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            struct timespec nap = {0, 300 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        int self = open("/proc/self/status", O_RDONLY);
        ssize_t n = self < 0 ? -1 : read(self, status, sizeof status - 1);
        if (n <= 0) { perror("status"); return 1; }
        close(self);
        status[n] = 0;
        int len = snprintf(line, sizeof line, "rss %lld %lld %lld %lld\n", kib("RssAnon:"),
                           kib("RssFile:"), kib("RssShmem:"), kib("VmSwap:"));
        if (pass == 1 && write(1, line, (size_t)len) != len) return 1;
    }
    unlink(argv[1]);
    return 0;
}
