/*
 * exec_thread.c - exec from a non-leader thread.
 *   no args : start a thread that execv("/proc/self/exe", {argv0, "child"})
 *             while the main thread blocks in pthread_join. The kernel kills
 *             the other threads and the exec'ing thread takes over the
 *             leader's pid.
 *   "child" : mmap 8 pages, write 5, report region "after_exec" (expect 5)
 *             + anon + rollup, _exit(0).
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>

static char *self_argv0;

static void *exec_thread(void *arg)
{
    (void)arg;
    char *args[] = {self_argv0, "child", NULL};
    execv("/proc/self/exe", args);
    truth_die("execv(/proc/self/exe)");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        char *a = truth_mmap_anon(8, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(a, 0, 4);
        truth_region("after_exec", a, 8);
        truth_expect("after_exec", 5);
        truth_finish(0);
    }

    self_argv0 = argv[0];
    pthread_t th;
    int e = pthread_create(&th, NULL, exec_thread, NULL);
    if (e != 0) {
        errno = e;
        truth_die("pthread_create");
    }
    pthread_join(th, NULL); /* never returns if the exec succeeds */
    errno = 0;
    truth_die("exec thread returned");
}
