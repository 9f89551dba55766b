/*
 * u10_own_uffd.c - issue 10: a program with its own userfaultfd.
 *
 * Opens a userfaultfd (UFFD_API handshake), maps 16 anonymous pages,
 * registers them for MISSING faults; a thread reads page 3, the main thread
 * reads the fault and resolves it with UFFDIO_COPY of a page of 'Z'.
 * Prints "ok Z" and exits 0; a failed step prints "STEP: errno" and exits 1.
 * Before issue 10, under the tracer, UFFDIO_REGISTER failed with EBUSY (the
 * range was registered with the tracer's userfaultfd already).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG 4096UL
static char *region;

static void *toucher(void *arg)
{
    (void)arg;
    return (void *)(long)*(volatile char *)(region + 3 * PG);
}

#define FAIL(step) do { printf("%s: %s\n", step, strerror(errno)); return 1; } while (0)

int main(void)
{
    int uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) FAIL("userfaultfd");
    struct uffdio_api api = { .api = UFFD_API };
    if (ioctl(uffd, UFFDIO_API, &api)) FAIL("UFFDIO_API");
    region = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) FAIL("mmap");
    struct uffdio_register reg = {
        .range = { .start = (unsigned long)region, .len = 16 * PG },
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(uffd, UFFDIO_REGISTER, &reg)) FAIL("UFFDIO_REGISTER");
    pthread_t t;
    if (pthread_create(&t, NULL, toucher, NULL)) FAIL("pthread_create");
    struct uffd_msg msg;
    if (read(uffd, &msg, sizeof msg) != sizeof msg) FAIL("read uffd");
    if (msg.event != UFFD_EVENT_PAGEFAULT) { printf("event %d\n", msg.event); return 1; }
    static char page[PG] __attribute__((aligned(4096)));
    memset(page, 'Z', PG);
    struct uffdio_copy copy = {
        .dst = msg.arg.pagefault.address & ~(PG - 1), .src = (unsigned long)page, .len = PG,
    };
    if (ioctl(uffd, UFFDIO_COPY, &copy)) FAIL("UFFDIO_COPY");
    void *got;
    pthread_join(t, &got);
    printf("ok %c\n", (char)(long)got);
    return 0;
}
