/*
 * fork_goes_on.c - a fork child that goes on without an exec, as a prefork worker does.
 *   parent: mmaps 4096 pages ("inherited"), forks, waits for the child.
 *   child : writes pages 0..99 of "inherited" before any syscall of its own (fewer records
 *           than wake the lane: they may still be in the first ring when it is replaced),
 *           then mmaps 1024 pages ("own") (its first layout syscall), writes pages 100..4095
 *           of "inherited" and every page of "own", and reports both regions.
 * Under --faults records the child's first ring is a small one, replaced by a whole one at
 * that mmap: every page the child wrote, before and after, names the child.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>

#define INHERITED 4096
#define OWN 1024
#define BEFORE 100

int main(void)
{
    char *a = truth_mmap_anon(INHERITED, PROT_READ | PROT_WRITE, 0);
    pid_t pid = fork();
    if (pid < 0)
        truth_die("fork");
    if (pid == 0) {
        truth_write_pages(a, 0, BEFORE - 1);
        char *own = truth_mmap_anon(OWN, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, BEFORE, INHERITED - 1);
        truth_write_pages(own, 0, OWN - 1);
        truth_region("inherited", a, INHERITED);
        truth_region("own", own, OWN);
        truth_expect("inherited", INHERITED);
        truth_expect("own", OWN);
        truth_finish(0);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    truth_region("inherited", a, INHERITED);
    truth_expect("inherited", 0);
    truth_finish(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}
