/*
 * u10_selfkill.c - issue 10: a program SIGKILLed at its very start.
 *
 * Its first statement is kill(getpid(), SIGKILL): it prints nothing, and its
 * status is "killed by SIGKILL" (a shell shows 137).
 * Before issue 10 the tracer exited 1 ("died before it could be traced")
 * instead of 137.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    kill(getpid(), SIGKILL);
    printf("not reached\n");
    return 1;
}
