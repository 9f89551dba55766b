/*
 * thread_names.c - threads that name themselves both ways, and touch known pages.
 *   The main thread names itself "boss" (prctl), then starts 3 threads. Thread i:
 *     - prctl(PR_GET_NAME), prctl(PR_SET_DUMPABLE, 1) and a prctl(PR_SET_NAME) that fails
 *       (EFAULT): none of them names it;
 *     - prctl(PR_SET_NAME, "prctl-i"), then writes the first 40*(i+1) pages of its region;
 *     - pthread_setname_np(pthread_self(), "self-i"), then writes 24*(i+1) more pages;
 *     - waits until the main thread has named it "other-i" through pthread_setname_np on
 *       another thread (a write of /proc/self/task/TID/comm, no prctl), and ends.
 *   Once they are joined, the main thread prints, for each thread:
 *     thread TID START END PAGES COMM
 *   (its region [START, END), the pages it wrote there, its name as it ended), and exits 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>
#include <sys/prctl.h>

#define THREADS 3

struct worker {
    pthread_t thread;
    pid_t tid;
    char *region;
    long pages;
    char comm[32];
};

static struct worker workers[THREADS];
static pthread_barrier_t started, renamed;

static void write_pages(char *at, long n)
{
    for (long p = 0; p < n; p++)
        at[p * TRUTH_PAGE] = 1;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    int i = (int)(w - workers);
    char name[16];
    w->tid = gettid();
    if (prctl(PR_GET_NAME, name) || prctl(PR_SET_DUMPABLE, 1))
        truth_die("prctl");
    if (prctl(PR_SET_NAME, (char *)8) != -1 || errno != EFAULT)
        truth_die("a prctl(PR_SET_NAME) from a bad address succeeded");
    snprintf(name, sizeof name, "prctl-%d", i);
    if (prctl(PR_SET_NAME, name))
        truth_die("prctl(PR_SET_NAME)");
    long first = 40L * (i + 1), then = 24L * (i + 1);
    write_pages(w->region, first);
    snprintf(name, sizeof name, "self-%d", i);
    if (pthread_setname_np(pthread_self(), name))
        truth_die("pthread_setname_np");
    write_pages(w->region + first * TRUTH_PAGE, then);
    w->pages = first + then;
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&renamed);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", w->tid);
    /* No stdio here: a FILE would be this thread's malloc, and its first touches. */
    int fd = open(path, O_RDONLY);
    if (fd < 0 || read(fd, w->comm, sizeof w->comm - 1) <= 0)
        truth_die("reading comm");
    close(fd);
    w->comm[strcspn(w->comm, "\n")] = 0;
    return NULL;
}

int main(void)
{
    if (prctl(PR_SET_NAME, "boss"))
        truth_die("prctl(PR_SET_NAME)");
    pthread_barrier_init(&started, NULL, THREADS + 1);
    pthread_barrier_init(&renamed, NULL, THREADS + 1);
    for (int i = 0; i < THREADS; i++) {
        workers[i].region = mmap(NULL, 256 * TRUTH_PAGE, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (workers[i].region == MAP_FAILED)
            truth_die("mmap");
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]))
            truth_die("pthread_create");
    }
    pthread_barrier_wait(&started);
    for (int i = 0; i < THREADS; i++) {
        char name[16];
        snprintf(name, sizeof name, "other-%d", i);
        if (pthread_setname_np(workers[i].thread, name))
            truth_die("pthread_setname_np on another thread");
    }
    pthread_barrier_wait(&renamed);
    for (int i = 0; i < THREADS; i++)
        pthread_join(workers[i].thread, NULL);
    for (int i = 0; i < THREADS; i++) {
        struct worker *w = &workers[i];
        printf("thread %d %lu %lu %ld %s\n", w->tid, (unsigned long)w->region,
               (unsigned long)(w->region + 256 * TRUTH_PAGE), w->pages, w->comm);
    }
    return 0;
}
