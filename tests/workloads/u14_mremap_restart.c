/*
 * u14_mremap_restart.c [SECONDS] - issue 14 (default 1 s): a written 1 MiB
 * mapping, advised MADV_MERGEABLE, is halved down to one page with
 * mremap(MREMAP_MAYMOVE|MREMAP_FIXED) to an address just mapped and unmapped,
 * then unmapped, until the time is up. Moving a VM_MERGEABLE mapping unmerges
 * its KSM pages after the FIXED target and the shrunk tail are unmapped
 * (Linux 6.18 mm/mremap.c prep_move_vma); with a signal pending there (a
 * tracer's PTRACE_INTERRUPT is one) the call returns -ERESTARTSYS half done
 * and the kernel runs it again. Prints "rounds N"; exit 0 (1 on a failure).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define PG 4096UL
#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
    size_t size = 256 * PG;
    long rounds = 0;
    while (now() < end) {
        char *buf = mmap(NULL, size, RW, ANON, -1, 0);
        if (buf == MAP_FAILED) { perror("mmap"); return 1; }
        /* Without KSM (EINVAL) the moves still run, just never half way. */
        (void)madvise(buf, size, MADV_MERGEABLE);
        for (size_t i = 0; i < size; i += PG) buf[i] = 1;
        size_t old_len = size;
        for (size_t new_len = size / 2; new_len >= PG; new_len /= 2) {
            /* A free place for the move, as stress-ng's mremap stressor finds one. */
            void *to = mmap(NULL, new_len + PG, RW, ANON, -1, 0);
            if (to == MAP_FAILED) { perror("mmap"); return 1; }
            munmap(to, new_len + PG);
            char *moved = mremap(buf, old_len, new_len, MREMAP_MAYMOVE | MREMAP_FIXED, to);
            if (moved == MAP_FAILED) { perror("mremap"); return 1; }
            buf = moved;
            old_len = new_len;
        }
        munmap(buf, old_len);
        rounds++;
    }
    printf("rounds %ld\n", rounds);
    return 0;
}
