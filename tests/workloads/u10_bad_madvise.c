/*
 * u10_bad_madvise.c - issue 10: a madvise that fails.
 *
 * Maps and writes 32 pages, then 1000 times calls
 * madvise(p + 16, 65536, MADV_DONTNEED), which fails with EINVAL (start not
 * page-aligned) and changes nothing. Prints "madvise EINVAL present 32"
 * (pages still present, from /proc/self/pagemap) and exits 0; 1 otherwise.
 * Before issue 10 each failure re-described the range with unmap/map lines
 * whose start was not page-aligned, counted as maps and unmaps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PG 4096UL
#define PAGES 32

int main(void)
{
    char *p = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    memset(p, 1, PAGES * PG);
    int err = 0;
    for (int i = 0; i < 1000; i++)
        if (madvise(p + 16, 65536, MADV_DONTNEED)) err = errno;
    uint64_t e[PAGES];
    int fd = open("/proc/self/pagemap", O_RDONLY), present = 0;
    if (fd < 0 || pread(fd, e, sizeof e, (uintptr_t)p / PG * 8) != sizeof e) { perror("pagemap"); return 1; }
    for (int i = 0; i < PAGES; i++) present += (int)(e[i] >> 63);
    printf("madvise %s present %d\n", err ? strerrorname_np(err) : "ok", present);
    return !(err == EINVAL && present == PAGES);
}
