/*
 * u10_many_procs.c - issue 10: many live processes at once.
 *
 * Forks [N=600] children that each block reading a pipe (with a second
 * argument "touch", after writing one freshly mapped page); when all are started the parent closes the pipe's write end, waits
 * for every child and prints "done N" (exit 0; 1 if a child failed).
 * Run with `ulimit -n 1024`: before issue 10 the tracer ran out of
 * descriptors (about 3 per live space), traced 72 spaces as "mappings only"
 * blaming a missing vDSO, and --verify still passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 600, fds[2], failed = 0;
    if (pipe(fds)) { perror("pipe"); return 1; }
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            close(fds[1]);
            if (argc > 2) {
                char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED) _exit(1);
                p[0] = 1;
            }
            char c;
            _exit(read(fds[0], &c, 1) == 0 ? 0 : 1); /* EOF once the parent closes */
        }
    }
    close(fds[1]);
    for (int i = 0; i < n; i++) {
        int status;
        if (wait(&status) < 0) { perror("wait"); return 1; }
        failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    printf("done %d\n", n);
    return failed != 0;
}
