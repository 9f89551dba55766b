/*
 * oom_eater.c CGROUP_DIR - issue 15: a process the kernel's OOM killer kills.
 *
 * Moves itself into the memory cgroup CGROUP_DIR (the test made it, with a limit far below
 * 256 MiB and no swap beyond it), then writes 256 MiB of private anonymous memory a page at a
 * time. It should be killed on the way; if it is not, it exits 3.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    char path[512], pid[32];
    snprintf(path, sizeof path, "%s/cgroup.procs", argv[1]);
    snprintf(pid, sizeof pid, "%d\n", getpid());
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, pid, strlen(pid)) != (ssize_t)strlen(pid)) {
        perror(path);
        return 1;
    }
    close(fd);
    size_t size = 256UL << 20;
    char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 1;
    for (size_t i = 0; i < size; i += 4096)
        p[i] = 1;
    return 3;
}
