/*
 * tree_peak.c - two children hold memory at the same time, then, once they are gone, the
 * parent holds more than either did alone.
 *   Each child writes 2048 pages (8 MiB), prints "held PAGES" (the kernel's count of the
 *   region's present pages) once both children hold theirs, and exits when the parent says so.
 *   After both have exited, the parent writes 3072 pages and prints "held PAGES".
 * So the tree's concurrent peak is at least the two children's 4096 pages together, while the
 * sum of every process's own peak counts the parent's 3072 pages on top.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <sys/wait.h>

static void print_held(char *p, size_t pages)
{
    int pm_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm_fd < 0)
        truth_die("open(/proc/self/pagemap)");
    long present = truth_count_present(pm_fd, (uintptr_t)p, (uintptr_t)p + pages * TRUTH_PAGE);
    close(pm_fd);
    printf("held %ld\n", present);
    fflush(stdout);
}

int main(void)
{
    int ready[2], go[2];
    if (pipe(ready) || pipe(go))
        truth_die("pipe");
    pid_t children[2];
    for (int i = 0; i < 2; i++) {
        children[i] = fork();
        if (children[i] < 0)
            truth_die("fork");
        if (children[i] == 0) {
            char *p = truth_mmap_anon(2048, PROT_READ | PROT_WRITE, 0);
            truth_write_pages(p, 0, 2047);
            if (write(ready[1], "r", 1) != 1)
                truth_die("write");
            char c;
            if (read(go[0], &c, 1) != 1)
                truth_die("read");
            print_held(p, 2048);
            _exit(0);
        }
    }
    char c;
    for (int i = 0; i < 2; i++)
        if (read(ready[0], &c, 1) != 1)
            truth_die("read");
    /* Both children hold their pages now; each measures before it may exit. */
    if (write(go[1], "gg", 2) != 2)
        truth_die("write");
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        int status;
        if (waitpid(children[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            ok = 0;
    }
    char *p = truth_mmap_anon(3072, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(p, 0, 3071);
    print_held(p, 3072);
    return ok ? 0 : 1;
}
