/*
 * u10_uffd_move.c - issue 10: a program moving pages with its own userfaultfd.
 *
 * Maps a source of 64 pages and writes them; maps a destination of 64 pages
 * and registers it with its own userfaultfd (UFFD_FEATURE_MOVE, Linux 6.8);
 * moves the first 32 source pages into it with UFFDIO_MOVE; counts the
 * present pages of the source (/proc/self/pagemap bit 63) and prints
 * "moved 131072 source 32" and exits 0. Without UFFD_FEATURE_MOVE it prints
 * "no move" and exits 0; a failed step prints "STEP: errno" and exits 1.
 * Before: UFFDIO_MOVE took pages out of a range of the tracer's with no event,
 * and the stream kept them resident (--verify exit 3).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG 4096UL
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
struct uffdio_move { __u64 dst, src, len, mode; __s64 move; };
#define UFFDIO_MOVE _IOWR(UFFDIO, 0x05, struct uffdio_move)
#endif

static int fail(const char *step)
{
    printf("%s: %s\n", step, strerror(errno));
    return 1;
}

int main(void)
{
    char *src = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *dst = mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (src == MAP_FAILED || dst == MAP_FAILED) return fail("mmap");
    memset(src, 'm', 64 * PG);
    int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (uffd < 0) return fail("userfaultfd");
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_MOVE };
    if (ioctl(uffd, UFFDIO_API, &api)) {
        if (errno == EINVAL) { printf("no move\n"); return 0; }
        return fail("UFFDIO_API");
    }
    struct uffdio_register reg = {
        .range = { (uintptr_t)dst, 64 * PG }, .mode = UFFDIO_REGISTER_MODE_MISSING };
    if (ioctl(uffd, UFFDIO_REGISTER, &reg)) return fail("UFFDIO_REGISTER");
    struct uffdio_move mv = { .dst = (uintptr_t)dst, .src = (uintptr_t)src, .len = 32 * PG };
    if (ioctl(uffd, UFFDIO_MOVE, &mv)) return fail("UFFDIO_MOVE");
    uint64_t e[64];
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0 || pread(fd, e, sizeof e, (off_t)((uintptr_t)src / PG) * 8) != sizeof e)
        return fail("pagemap");
    int present = 0;
    for (int i = 0; i < 64; i++) present += (int)(e[i] >> 63);
    printf("moved %lld source %d\n", (long long)mv.move, present);
    return dst[0] == 'm' ? 0 : 1;
}
