#include "sandbox/reap.h"
#include "base/proc.h"

#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>

int sandbox_reap(pid_t pid, int timeout_ms) {
        if (pid <= 0)
                return -EINVAL;
        int fd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (fd < 0)
                return proc_wait(pid, timeout_ms);
        int64_t deadline = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
        int r;
        for (;;) {
                int64_t left = deadline == INT64_MAX ? -1 : deadline - now_ms();
                struct pollfd pf = {.fd = fd, .events = POLLIN};
                int k = poll(&pf, 1, left < 0 ? -1 : (int)left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = -errno;
                        break;
                }
                if (k == 0 && left >= 0 && now_ms() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                if (k == 0)
                        continue;
                int status;
                pid_t w;
                while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
                        ;
                r = w == pid ? proc_exit_code(status) : -errno;
                break;
        }
        close(fd);
        return r;
}
