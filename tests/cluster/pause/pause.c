/* The pod sandbox's process: holds the pod's namespaces open and reaps orphans until told to stop.
 * Built static, so its image is this one file (no registry here serves a pause image). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction stop = {.sa_handler = quit}, child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGCHLD, &child, NULL);
    for (;;)
        pause();
}
