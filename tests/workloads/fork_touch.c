/*
 * fork_touch.c - parent mmaps 64 pages and writes 0..15, then fork()s.
 *   child : writes 16..31, reads 48..51, reports region "region" (36 present:
 *           0..15 inherited + 16..31 written + 48..51 zero-page reads), _exit(0).
 *   parent: writes 32..47, waits for the child, reports region "region"
 *           (32 present: 0..15 + 32..47), exits with 0 if the child exited 0.
 * A second region of 32 pages, all written, is marked MADV_DONTFORK: the child does not
 * inherit it, so its "anon" total must not count it, while the parent's does.
 * The parent prints only after the child has exited, so lines never interleave.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>

int main(void)
{
    char *a = truth_mmap_anon(64, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(a, 0, 15);
    char *kept = truth_mmap_anon(32, PROT_READ | PROT_WRITE, 0);
    if (madvise(kept, 32 * TRUTH_PAGE, MADV_DONTFORK) != 0)
        truth_die("madvise(MADV_DONTFORK)");
    truth_write_pages(kept, 0, 31);

    pid_t pid = fork();
    if (pid < 0)
        truth_die("fork");
    if (pid == 0) {
        truth_write_pages(a, 16, 31);
        if (truth_read_pages(a, 48, 51) != 0)
            truth_die("child: pages 48..51 not zero");
        truth_region("region", a, 64);
        truth_expect("region", 16 + 16 + 4);
        truth_finish(0);
    }

    truth_write_pages(a, 32, 47);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            truth_die("waitpid");
    }
    truth_region("region", a, 64);
    truth_expect("region", 16 + 16);
    truth_finish(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}
