/*
 * u10_drop_root.c - issue 10: a program that drops root, as a setuid helper or a
 * daemon does, then execs.
 *
 * No arg: setresgid/setresuid to 65534 (nobody), then execs itself with
 * "dropped". "dropped": maps 1 MiB, writes it, prints "uid 65534 wrote 1 MiB".
 * Exit 0 (1 on a failed call). Needs root to start.
 * Under the tracer the exec'd space cannot get a userfaultfd (the process has
 * no CAP_SYS_PTRACE, and /dev/userfaultfd is root's): before issue 10
 * `--verify` passed with 0 checks; it must say it could not verify (exit 4).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "dropped") == 0) {
        char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) { perror("mmap"); return 1; }
        memset(p, 1, 1 << 20);
        printf("uid %d wrote 1 MiB\n", (int)getuid());
        return 0;
    }
    if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)) {
        perror("setresuid");
        return 1;
    }
    execl("/proc/self/exe", argv[0], "dropped", (char *)NULL);
    perror("execl");
    return 1;
}
