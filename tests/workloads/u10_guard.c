/*
 * u10_guard.c - issue 10: MADV_GUARD_INSTALL (Linux 6.13) drops pages.
 *
 * Maps 16 pages, writes them, makes pages 4..7 a guard region, counts the
 * region's present pages (/proc/self/pagemap bit 63), removes the guard, and
 * prints "guard 0 present 12" (guard: madvise's result; on a kernel without
 * guard regions it fails with EINVAL and prints "guard -1 present 16").
 * Exit 0 (1 on a failed call).
 * Before: no discard line, and pagemap's guard markers (swap entries) counted
 * as pages: the stream kept the 4 pages resident.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define MADV_GUARD_INSTALL_ 102
#define MADV_GUARD_REMOVE_ 103

int main(void)
{
    char *a = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED) { perror("mmap"); return 1; }
    memset(a, 1, 16 * PAGE);
    int r = madvise(a + 4 * PAGE, 4 * PAGE, MADV_GUARD_INSTALL_);
    uint64_t e[16];
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0 || pread(fd, e, sizeof e, (off_t)((uintptr_t)a / PAGE) * 8) != sizeof e) {
        perror("pagemap");
        return 1;
    }
    close(fd);
    int present = 0;
    for (int i = 0; i < 16; i++) present += (int)(e[i] >> 63);
    if (r == 0 && madvise(a + 4 * PAGE, 4 * PAGE, MADV_GUARD_REMOVE_)) { perror("remove"); return 1; }
    printf("guard %d present %d\n", r, present);
    return 0;
}
