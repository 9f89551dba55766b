#define _GNU_SOURCE
// 4 threads, each with its own 64 MiB anonymous region: touch every page in a scattered order
// (1 in 8 by a read: the zero page), then for ROUNDS rounds discard random 256 KiB chunks
// (about half) and touch again; each round also maps, touches and unmaps a 1 MiB scratch area.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGES 16384
#define PAGE 4096
#define PRIME 7919
static int rounds = 30;

static void *worker(void *arg) {
    long id = (long)arg;
    unsigned seed = 1234 + id;
    char name[16];
    snprintf(name, sizeof name, "toucher-%ld", id);
    pthread_setname_np(pthread_self(), name);
    volatile char *r = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) { perror("mmap"); exit(1); }
    volatile char sink = 0;
    for (int round = 0; round <= rounds; round++) {
        if (round > 0)
            for (long c = 0; c < PAGES / 64; c++)
                if (rand_r(&seed) & 1)
                    madvise((char *)r + c * 64 * PAGE, 64 * PAGE, MADV_DONTNEED);
        for (long k = 0; k < PAGES; k++) {
            long i = (k * PRIME) % PAGES;
            if ((i * 2654435761u >> 7) % 8 == 0) sink += r[i * PAGE];
            else r[i * PAGE] = 1;
        }
        char *s = mmap(NULL, 256 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        for (long i = 0; i < 256; i++) s[i * PAGE] = 1;
        munmap(s, 256 * PAGE);
    }
    (void)sink;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf("touch4: 4 threads x %d rounds done\n", rounds);
    return 0;
}
