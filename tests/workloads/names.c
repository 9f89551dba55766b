/*
 * names.c - threads that are named, and a fork child.
 *   The main thread names itself "boss" (prctl), then starts two threads: "self-named" names
 *   itself with prctl(PR_SET_NAME), and the main thread names the other "named-by-boss" with
 *   pthread_setname_np. Each thread prints the kernel's name for it just before it ends:
 *     name TID COMM      (from /proc/self/task/TID/comm)
 *   Then a fork child exits 0, and the main thread exits 0.
 */
#include "truth.h" /* first: defines _GNU_SOURCE */
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static pthread_barrier_t named;

static void print_name(void)
{
    char path[64], comm[32] = {0};
    pid_t tid = gettid();
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(comm, sizeof comm, f))
        truth_die("reading comm");
    fclose(f);
    comm[strcspn(comm, "\n")] = 0;
    printf("name %d %s\n", tid, comm);
    fflush(stdout);
}

static void *self_named(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "self-named");
    print_name();
    return NULL;
}

static void *named_by_boss(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&named);
    print_name();
    return NULL;
}

int main(void)
{
    prctl(PR_SET_NAME, "boss");
    pthread_barrier_init(&named, NULL, 2);
    pthread_t a, b;
    if (pthread_create(&a, NULL, self_named, NULL) || pthread_create(&b, NULL, named_by_boss, NULL))
        truth_die("pthread_create");
    pthread_join(a, NULL);
    if (pthread_setname_np(b, "named-by-boss"))
        truth_die("pthread_setname_np");
    pthread_barrier_wait(&named);
    pthread_join(b, NULL);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    int status;
    waitpid(child, &status, 0);
    print_name();
    return 0;
}
