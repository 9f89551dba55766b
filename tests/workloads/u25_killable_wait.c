/*
 * u25_killable_wait.c - issue 25: a process in a killable wait when a fatal signal comes.
 *
 * Makes a userfaultfd of its own with UFFD_FEATURE_EVENT_FORK, registers a fresh mapping with
 * it and forks without anyone reading the descriptor: the fork waits in the kernel, killably,
 * for the fork event to be read (a fatal signal ends it; no other signal is taken). Prints
 * "forking" before the fork. Untraced, a SIGTERM ends it at once (status 143). If the fork
 * ever returns, it prints "forked" and exits 0 (the child exits 0 at once).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
    int uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
    if (uffd < 0) {
        perror("userfaultfd");
        return 1;
    }
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_EVENT_FORK};
    if (ioctl(uffd, UFFDIO_API, &api)) {
        perror("UFFDIO_API");
        return 1;
    }
    char *a = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct uffdio_register reg = {
        .range = {.start = (unsigned long)a, .len = 4 * 4096},
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (a == MAP_FAILED || ioctl(uffd, UFFDIO_REGISTER, &reg)) {
        perror("register");
        return 1;
    }
    printf("forking\n");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    printf("forked\n");
    return 0;
}
