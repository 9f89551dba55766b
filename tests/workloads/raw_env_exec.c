/*
 * raw_env_exec.c - runs a program with an environment a shell cannot make: an entry with no
 * `=` ("NOEQUALS") among ordinary ones, in this order.
 *
 * raw_env_exec PROGRAM ARGS...: execve's PROGRAM (a path) with the environment
 * {"A=1", "NOEQUALS", "B=2"}. Exit 127 (and errno on stderr) if the exec fails.
 */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: raw_env_exec PROGRAM ARGS...\n");
        return 2;
    }
    char *env[] = {"A=1", "NOEQUALS", "B=2", NULL};
    execve(argv[1], argv + 1, env);
    perror("execve");
    return 127;
}
