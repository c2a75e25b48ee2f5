/* unshare: new namespaces from inside the sandbox (a new user namespace
 * would give capabilities again, and with them mount and more).
 * Breach: any unshare works. Each is tried in a child so one success does
 * not change the next try. */
#include "probe.h"
#include <sched.h>
#include <sys/wait.h>

static void try_flags(int flags, const char *name) {
        pid_t c = fork();
        if (c == 0)
                _exit(unshare(flags) == 0 ? 0 : errno);
        int status = 0;
        waitpid(c, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
        errno = code;
        probe_try(code == 0, "unshare(%s)", name);
}

int main(void) {
        try_flags(CLONE_NEWUSER, "CLONE_NEWUSER");
        try_flags(CLONE_NEWUSER | CLONE_NEWNS, "CLONE_NEWUSER|CLONE_NEWNS");
        try_flags(CLONE_NEWNS, "CLONE_NEWNS");
        try_flags(CLONE_NEWNET, "CLONE_NEWNET");
        try_flags(CLONE_NEWPID, "CLONE_NEWPID");
        try_flags(CLONE_NEWCGROUP, "CLONE_NEWCGROUP");
        return probe_report("unshare");
}
