/*
 * deep_stack.c - one small mapping made 40 calls deep beside a big one made by main (issue 25
 * item 19: the report's flame graph of a deep stack).
 *
 * main writes all 1024 pages of a mapping it makes itself ("shallow"), then calls
 * descend(40), which recurses 40 times and at the bottom maps 64 pages and writes them
 * ("deep"). Each is made MADV_NOHUGEPAGE. Build with frame pointers (and -g) for the stacks.
 * Truth: regions "shallow" (expect 1024) and "deep" (expect 64); exit 0.
 */
#include "truth.h"

static void *deep_region;

__attribute__((noinline)) void descend(int n)
{
    if (n == 0) {
        deep_region = truth_mmap_anon(64, PROT_READ | PROT_WRITE, 0);
        truth_write_pages(deep_region, 0, 63);
        return;
    }
    descend(n - 1);
    /* Work after the call: no tail call, so each level keeps its frame. */
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    char *shallow = truth_mmap_anon(1024, PROT_READ | PROT_WRITE, 0);
    truth_write_pages(shallow, 0, 1023);
    descend(40);
    truth_region("shallow", shallow, 1024);
    truth_region("deep", deep_region, 64);
    truth_expect("shallow", 1024);
    truth_expect("deep", 64);
    truth_finish(0);
}
