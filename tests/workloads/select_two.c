/*
 * select_two.c - issue 15: what --only, --threads, --region and --min-size select.
 *
 * Two mappings at fixed places: BIG, 4 MiB at 0x200000000000, and SMALL, 64 KiB at
 * 0x300000000000. Two threads named "worker-big" and "worker-small" each write every page of
 * one; the program prints "thread NAME TID" for each. Then it runs itself again as a second
 * program named "select-child" (argv[0]), which writes 1 MiB of its own and exits; the first
 * waits for it and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG ((char *)0x200000000000UL)
#define BIG_LEN (4UL << 20)
#define SMALL ((char *)0x300000000000UL)
#define SMALL_LEN (64UL << 10)

struct job {
    const char *name;
    char *at;
    size_t len;
};

static void *work(void *arg)
{
    struct job *job = arg;
    prctl(PR_SET_NAME, job->name);
    printf("thread %s %ld\n", job->name, (long)syscall(SYS_gettid));
    fflush(stdout);
    for (size_t i = 0; i < job->len; i += 4096)
        job->at[i] = 1;
    return NULL;
}

static char *map_at(char *at, size_t len)
{
    char *p = mmap(at, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != at) {
        perror("mmap");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (size_t i = 0; i < (1 << 20); i += 4096)
            p[i] = 1;
        return 0;
    }
    struct job jobs[2] = {
        {"worker-big", map_at(BIG, BIG_LEN), BIG_LEN},
        {"worker-small", map_at(SMALL, SMALL_LEN), SMALL_LEN},
    };
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, work, &jobs[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    pid_t child = fork();
    if (child == 0) {
        execl("/proc/self/exe", "select-child", "child", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
