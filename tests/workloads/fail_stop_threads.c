/*
 * fail_stop_threads.c COUNTER_FILE [DONE_FILE] - 4 creator threads each
 * create threads one after another (pthread_create, pthread_join) until
 * DONE_FILE exists; without DONE_FILE, 50 threads each. Each new thread's
 * first action is to add 1 to a shared counter and write its value to
 * COUNTER_FILE; it goes on doing so every 200 us until its creator has seen
 * pthread_create return. So a new thread that runs while its creator is
 * stopped keeps changing COUNTER_FILE, and one that stays stopped with its
 * group changes nothing. (A group stop that begins after a thread is created
 * and before it first runs is that thread's first stop; several creators
 * make that more likely.)
 *
 * Main prints "created N" every 100 threads and "created N threads" at the
 * end. Exit 0; 1 if DONE_FILE did not appear within 60 s.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <stdatomic.h>
#include <time.h>

#define CREATORS 4
#define DEFAULT_THREADS 50 /* per creator */
#define LIMIT_SECONDS 60

static atomic_ulong counter;
static int counter_fd;
static const char *done;
static atomic_long created;
static atomic_int timed_out;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void bump(void)
{
    unsigned long n = atomic_fetch_add(&counter, 1) + 1;
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%020lu\n", n);
    if (pwrite(counter_fd, buf, (size_t)len, 0) != len)
        truth_die("pwrite counter");
}

static void *worker(void *arg)
{
    atomic_int *released = arg;
    bump();
    while (!atomic_load(released)) {
        usleep(200);
        bump();
    }
    return NULL;
}

static int finished(long mine)
{
    return done ? access(done, F_OK) == 0 : mine >= DEFAULT_THREADS;
}

/* Creates threads one after another until finished. */
static void *creator(void *arg)
{
    (void)arg;
    double limit = now() + LIMIT_SECONDS;
    for (long mine = 0; !finished(mine); mine++) {
        if (now() > limit) {
            atomic_store(&timed_out, 1);
            break;
        }
        atomic_int released = 0;
        pthread_t t;
        int e = pthread_create(&t, NULL, worker, &released);
        if (e != 0) {
            errno = e;
            truth_die("pthread_create");
        }
        atomic_store(&released, 1);
        e = pthread_join(t, NULL);
        if (e != 0) {
            errno = e;
            truth_die("pthread_join");
        }
        atomic_fetch_add(&created, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        errno = EINVAL;
        truth_die("usage: fail_stop_threads COUNTER_FILE [DONE_FILE]");
    }
    counter_fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (counter_fd < 0)
        truth_die("open counter file");
    done = argc > 2 ? argv[2] : NULL;

    pthread_t creators[CREATORS];
    for (int i = 0; i < CREATORS; i++) {
        int e = pthread_create(&creators[i], NULL, creator, NULL);
        if (e != 0) {
            errno = e;
            truth_die("pthread_create creator");
        }
    }
    /* Progress, until every creator is done. */
    long reported = 0;
    int joined[CREATORS] = {0};
    for (int running = CREATORS; running > 0;) {
        for (int i = 0; i < CREATORS; i++) {
            if (!joined[i] && pthread_tryjoin_np(creators[i], NULL) == 0) {
                joined[i] = 1;
                running--;
            }
        }
        long n = atomic_load(&created);
        if (n / 100 > reported / 100) {
            printf("created %ld\n", n);
            fflush(stdout);
            reported = n;
        }
        usleep(1000);
    }
    if (atomic_load(&timed_out)) {
        fprintf(stderr, "fail_stop_threads: %s did not appear\n", done);
        return 1;
    }
    printf("created %ld threads\n", atomic_load(&created));
    return 0;
}
