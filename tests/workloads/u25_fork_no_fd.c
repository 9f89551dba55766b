/*
 * u25_fork_no_fd.c - issue 25 (LTP fork09's shape): a process forked with no descriptor free.
 *
 * Lowers RLIMIT_NOFILE to 64 and opens /dev/null until open fails with EMFILE, then forks. The
 * child is born with every descriptor taken (so nothing can be put in it); it closes four,
 * writes 10 pages of a fresh mapping and reports region "child". The parent closes four too
 * and reports its own memory. Exit 0 if the child exited 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/resource.h>
#include <sys/wait.h>

int main(void)
{
    struct rlimit lim = {64, 64};
    if (setrlimit(RLIMIT_NOFILE, &lim))
        truth_die("setrlimit");
    int last = -1, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0)
        last = fd;
    if (errno != EMFILE || last < 4)
        truth_die("open");
    pid_t pid = fork();
    if (pid < 0)
        truth_die("fork");
    for (int i = 0; i < 4; i++)
        close(last - i);
    if (pid == 0) {
        char *a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 9);
        truth_region("child", a, 16);
        truth_expect("child", 10);
        truth_finish(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    truth_finish(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}
