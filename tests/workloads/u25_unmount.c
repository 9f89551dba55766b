/*
 * u25_unmount.c - issue 25 (LTP execveat03's shape): a program unmounts the file system it
 * ran a program from, as soon as that program has ended.
 *
 * In a mount namespace of its own, it mounts a fresh tmpfs, copies itself there, and runs the
 * copy (`child`: it maps, writes and unmaps 1 MiB from its own code, and exits 0), waits for it,
 * then unmounts the tmpfs at once, with no retry. Prints "unmounted" and exits 0, or names
 * the failing call and exits 1 (EBUSY: someone still holds a file of it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what)
{
    printf("%s: %s\n", what, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return 1;
        memset(p, 1, 1 << 20);
        munmap(p, 1 << 20);
        return 0;
    }
    if (unshare(CLONE_NEWNS))
        return fail("unshare");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
        return fail("mount --make-rprivate /");
    char dir[] = "/tmp/mevi-unmount-XXXXXX";
    if (!mkdtemp(dir))
        return fail("mkdtemp");
    if (mount("mevi", dir, "tmpfs", 0, "size=64m"))
        return fail("mount tmpfs");
    char copy[64];
    snprintf(copy, sizeof copy, "%s/prog", dir);
    int in = open("/proc/self/exe", O_RDONLY), out = open(copy, O_WRONLY | O_CREAT, 0755);
    if (in < 0 || out < 0)
        return fail("open");
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, n) != n)
            return fail("write");
    close(in);
    close(out);
    pid_t pid = fork();
    if (pid == 0) {
        execl(copy, copy, "child", (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) < 0)
        return fail("fork");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("the copy failed: %d\n", status);
        return 1;
    }
    if (umount2(dir, 0))
        return fail("umount");
    rmdir(dir);
    printf("unmounted\n");
    return 0;
}
