/*
 * u10_io_uring.c - issue 10: io_uring reads done by io-wq worker threads.
 *
 * Raw io_uring (no liburing), one entry. For [SECONDS=1]: map a fresh
 * 16-page anonymous buffer, read a 64 KiB file (made in /tmp, unlinked) into it with
 * IOSQE_ASYNC (so an iou-wrk-* kernel thread does the copy and takes the
 * first-touch faults), wait for the completion, check the bytes, unmap.
 * Prints "ok" and exits 0; 1 on a failed call or short read. With a second argument
 * "thread-exit", main ends with the exit syscall (its thread only), not exit_group: the
 * io-wq worker is not killed, and lives until main's exit cancels its io_uring.
 * Before issue 10 --verify checkpoints were not quiescent (false mismatches).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define LEN 65536
#define FAIL(what) do { perror(what); return 1; } while (0)

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    char path[] = "/tmp/u10_io_uring.XXXXXX", data[LEN];
    int file = mkstemp(path);
    memset(data, 'u', LEN);
    if (file < 0 || write(file, data, LEN) != LEN) FAIL("temp file");
    unlink(path);
    struct io_uring_params par;
    memset(&par, 0, sizeof par);
    int ring = syscall(SYS_io_uring_setup, 1, &par);
    if (ring < 0) FAIL("io_uring_setup");
    size_t sq_len = par.sq_off.array + par.sq_entries * sizeof(unsigned);
    size_t cq_len = par.cq_off.cqes + par.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(NULL, par.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) FAIL("mmap ring");
    _Atomic unsigned *sq_tail = (void *)(sq + par.sq_off.tail);
    unsigned *sq_array = (void *)(sq + par.sq_off.array);
    _Atomic unsigned *cq_head = (void *)(cq + par.cq_off.head);
    _Atomic unsigned *cq_tail = (void *)(cq + par.cq_off.tail);
    struct io_uring_cqe *cqes = (void *)(cq + par.cq_off.cqes);
    unsigned mask = *(unsigned *)(sq + par.sq_off.ring_mask);
    unsigned cmask = *(unsigned *)(cq + par.cq_off.ring_mask);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long rounds = 0;
    do {
        char *buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED) FAIL("mmap buf");
        unsigned tail = atomic_load(sq_tail);
        struct io_uring_sqe *sqe = &sqes[tail & mask];
        memset(sqe, 0, sizeof *sqe);
        sqe->opcode = IORING_OP_READ;
        sqe->flags = IOSQE_ASYNC;
        sqe->fd = file;
        sqe->addr = (unsigned long)buf;
        sqe->len = LEN;
        sq_array[tail & mask] = tail & mask;
        atomic_store(sq_tail, tail + 1);
        /* a stop (job control, ptrace) can end the wait early: wait again */
        for (unsigned n = 1; atomic_load(cq_tail) == atomic_load(cq_head); n = 0)
            if (syscall(SYS_io_uring_enter, ring, n, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) FAIL("enter");
        unsigned head = atomic_load(cq_head);
        int res = cqes[head & cmask].res;
        atomic_store(cq_head, head + 1);
        if (res != LEN || memcmp(buf, data, LEN)) { fprintf(stderr, "read %d\n", res); return 1; }
        munmap(buf, LEN);
        rounds++;
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    printf("ok\n");
    if (argc > 2 && !strcmp(argv[2], "thread-exit")) {
        fflush(stdout);
        syscall(SYS_exit, rounds > 0 ? 0 : 1);
    }
    return rounds > 0 ? 0 : 1;
}
