/*
 * u25_guard_rounds.c - issue 25 (LTP madvise12's calls, many times): MADV_GUARD_INSTALL over
 * pages just written.
 *
 * `u25_guard_rounds ROUNDS`: each round maps 16 pages, writes them, makes pages 4..7 a guard
 * region, removes it, writes all 16 again (the 4 fault back in), makes all 16 a guard region
 * and unmaps them; every 50th round a fork child touches the guard (SIGSEGV, as madvise12's
 * children do). The last round's mapping is kept: region "last" (guarded, 0 present). Exit 0
 * (1 on a failed call).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>

#define GUARD_INSTALL 102
#define GUARD_REMOVE 103

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    char *a = NULL;
    for (int round = 0; round < rounds; round++) {
        a = truth_mmap_anon(16, PROT_READ | PROT_WRITE, 0);
        memset(a, 1, 16 * TRUTH_PAGE);
        if (madvise(a + 4 * TRUTH_PAGE, 4 * TRUTH_PAGE, GUARD_INSTALL)) {
            if (errno == EINVAL) {
                printf("no guard regions\n");
                return 0;
            }
            truth_die("guard install");
        }
        if (round % 50 == 0) {
            pid_t child = fork();
            if (child == 0) {
                a[5 * TRUTH_PAGE] = 1;
                _exit(0);
            }
            int status;
            if (child < 0 || waitpid(child, &status, 0) < 0)
                truth_die("fork");
        }
        if (madvise(a + 4 * TRUTH_PAGE, 4 * TRUTH_PAGE, GUARD_REMOVE))
            truth_die("guard remove");
        memset(a, 2, 16 * TRUTH_PAGE);
        if (madvise(a, 16 * TRUTH_PAGE, GUARD_INSTALL))
            truth_die("guard install, all");
        if (round + 1 < rounds)
            munmap(a, 16 * TRUTH_PAGE);
    }
    truth_region("last", a, 16);
    truth_expect("last", 0);
    truth_finish(0);
}
