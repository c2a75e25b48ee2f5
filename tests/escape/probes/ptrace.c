/* ptrace: attach to another process of the sandbox (our own child), and to
 * the kernel's host pid (argv[1], invisible from here). Breach: any ptrace
 * request that works; seccomp is to deny ptrace outright. */
#include "probe.h"
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
        pid_t child = fork();
        if (child == 0) {
                pause();
                _exit(0);
        }
        long r = ptrace(PTRACE_ATTACH, child, NULL, NULL);
        probe_try(r == 0, "PTRACE_ATTACH own child %d", (int)child);
        if (r == 0) {
                waitpid(child, NULL, 0);
                ptrace(PTRACE_DETACH, child, NULL, NULL);
        }
        r = ptrace(PTRACE_SEIZE, child, NULL, NULL);
        probe_try(r == 0, "PTRACE_SEIZE own child");
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        pid_t traced = fork();
        if (traced == 0) {
                long t = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
                _exit(t == 0 ? 0 : 1);
        }
        int status = 0;
        waitpid(traced, &status, 0);
        errno = EPERM;
        probe_try(WIFEXITED(status) && WEXITSTATUS(status) == 0, "PTRACE_TRACEME");
        if (argc > 1) {
                pid_t k = (pid_t)atoi(argv[1]);
                r = ptrace(PTRACE_ATTACH, k, NULL, NULL);
                probe_try(r == 0, "PTRACE_ATTACH kernel host pid %d", (int)k);
                if (r == 0)
                        ptrace(PTRACE_DETACH, k, NULL, NULL);
        }
        return probe_report("ptrace");
}
