/*
 * nocaps_fork.c - drops every capability while staying uid 0 (as stress-ng's workers do), then
 * forks. The child, which cannot call userfaultfd(2) any more, writes 10 pages of a fresh
 * 16-page mapping and reports region "child" (10 present) with its anon total; the parent waits
 * and reports its own anon total. Exit 0 if the child exited 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>

int main(void)
{
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
    if (syscall(SYS_capset, &header, data) != 0)
        truth_die("capset");

    pid_t pid = fork();
    if (pid < 0)
        truth_die("fork");
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
