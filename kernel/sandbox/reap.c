#include "sandbox/reap.h"
#include "base/fileio.h"
#include "base/proc.h"

#include <sys/syscall.h>
#include <sys/wait.h>

int sandbox_reap(pid_t pid, int timeout_ms) {
        if (pid <= 0)
                return -EINVAL;
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return proc_wait(pid, timeout_ms);
        int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
        int r = fd_wait_readable(fd, deadline); /* a pidfd is readable once the process exited */
        if (r >= 0) {
                int status;
                pid_t w;
                while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                        ;
                r = w == pid ? proc_exit_code(status) : -errno;
        }
        close(fd);
        return r;
}
