/* process_vm_readv: read another process's memory (our own child's).
 * Breach: the call works; seccomp is to deny process_vm_*. */
#include "probe.h"
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>

static char secret[64] = "escape-process-vm-secret";

int main(int argc, char **argv) {
        pid_t child = fork();
        if (child == 0) {
                pause();
                _exit(0);
        }
        char buf[64] = {0};
        struct iovec local = {buf, sizeof buf}, remote = {secret, sizeof secret};
        ssize_t n = process_vm_readv(child, &local, 1, &remote, 1, 0);
        probe_try(n > 0, "process_vm_readv own child");
        n = process_vm_writev(child, &local, 1, &remote, 1, 0);
        probe_try(n > 0, "process_vm_writev own child");
        if (argc > 1) {
                n = process_vm_readv((pid_t)atoi(argv[1]), &local, 1, &remote, 1, 0);
                probe_try(n > 0, "process_vm_readv kernel host pid %s", argv[1]);
        }
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return probe_report("process_vm");
}
