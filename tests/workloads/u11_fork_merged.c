/*
 * u11_fork_merged.c - two anonymous mappings made apart, which the kernel merges into one,
 * some of whose pages were only read (the zero page), inherited by a fork child.
 *   A 128-page PROT_NONE reservation; "first" = its first 64 pages mapped read-write, then, 20 ms
 *   later, "second" = the next 64 (MAP_FIXED, same flags: one VMA in /proc/PID/maps). Pages 0..7
 *   of "first" are read (zero page), pages 0..7 of "second" written. Then a fork child that
 *   exits at once, and the parent's regions "first" and "second" with their present pages.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>

int main(void)
{
    size_t half = 64 * TRUTH_PAGE;
    char *r = mmap(NULL, 2 * half, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        truth_die("mmap reservation");
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
    if (mmap(r, half, PROT_READ | PROT_WRITE, flags, -1, 0) == MAP_FAILED)
        truth_die("mmap first");
    usleep(20000);
    if (mmap(r + half, half, PROT_READ | PROT_WRITE, flags, -1, 0) == MAP_FAILED)
        truth_die("mmap second");
    truth_nohuge(r, 2 * half);
    if (truth_read_pages(r, 0, 7) != 0)
        truth_die("read pages not zero");
    truth_write_pages(r + half, 0, 7);
    pid_t child = fork();
    if (child < 0)
        truth_die("fork");
    if (child == 0)
        _exit(0);
    int status;
    if (waitpid(child, &status, 0) < 0)
        truth_die("waitpid");
    truth_region("first", r, 64);
    truth_region("second", r + half, 64);
    truth_expect("first", 8);
    truth_expect("second", 8);
    truth_finish(WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1);
}
