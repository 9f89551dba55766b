/*
 * u10_vm_writev.c - issue 10: first touches made by another process.
 *
 * A forked child maps 4 pages (untouched) and sends their address to the
 * parent through a pipe; the parent writes 'w' into each page with
 * process_vm_writev and says so through a second pipe; the child counts its
 * present pages (/proc/self/pagemap bit 63) and exits with that count. The
 * parent prints "present 4" and exits 0 when the child saw 4.
 * Before issue 10 the resident lines carried the writer's (parent's) pid and
 * the summary grew a phantom process.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096UL

static int present_pages(char *p, int n)
{
    int fd = open("/proc/self/pagemap", O_RDONLY), count = 0;
    uint64_t e[16];
    if (fd < 0 || pread(fd, e, n * 8, (uintptr_t)p / PG * 8) != n * 8) return -1;
    for (int i = 0; i < n; i++) count += (int)(e[i] >> 63);
    close(fd);
    return count;
}

int main(void)
{
    int to_parent[2], to_child[2];
    if (pipe(to_parent) || pipe(to_child)) { perror("pipe"); return 1; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 1; }
    if (pid == 0) {
        char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) _exit(100);
        char done;
        if (write(to_parent[1], &p, sizeof p) != sizeof p || read(to_child[0], &done, 1) != 1) _exit(101);
        if (p[0] != 'w' || p[3 * PG] != 'w') _exit(102);
        _exit(present_pages(p, 4));
    }
    char *remote, w = 'w';
    if (read(to_parent[0], &remote, sizeof remote) != sizeof remote) { perror("read"); return 1; }
    for (int i = 0; i < 4; i++) {
        struct iovec local = { &w, 1 }, far = { remote + i * PG, 1 };
        if (process_vm_writev(pid, &local, 1, &far, 1, 0) != 1) { perror("process_vm_writev"); return 1; }
    }
    if (write(to_child[1], "x", 1) != 1) { perror("write"); return 1; }
    int status;
    waitpid(pid, &status, 0);
    int seen = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    printf("present %d\n", seen);
    return seen != 4;
}
