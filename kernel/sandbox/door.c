/* door.c — see door.h. */
#include "sandbox/door.h"
#include "base/fileio.h"
#include "base/log.h"
#include "sandbox/reap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#define DOOR_BACKLOG 128

/* The steps of door_child(), for the message when one fails. */
static const char *const door_steps[] = {
        "join the sandbox's user namespace",
        "join its network namespace",
        "create a socket there",
        "let it bind before lo is up (IP_FREEBIND)",
        "bind 127.0.0.1",
        "listen",
        "hand the socket to the kernel",
};

/* In a forked child of a threaded process: system calls only. Sends the
 * listening socket over channel, or the failed step (an index into
 * door_steps) and its errno as two ints. */
static _Noreturn void door_child(int userns, int netns, const struct sockaddr_in *sin, int channel) {
        int report[2] = {0, 0}, s = -1, one = 1;
        if (setns(userns, CLONE_NEWUSER) < 0)
                goto fail;
        report[0]++;
        if (setns(netns, CLONE_NEWNET) < 0)
                goto fail;
        report[0]++;
        if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
                goto fail;
        report[0]++;
        if (setsockopt(s, IPPROTO_IP, IP_FREEBIND, &one, sizeof one) < 0)
                goto fail;
        report[0]++;
        if (bind(s, (const struct sockaddr *)sin, sizeof *sin) < 0)
                goto fail;
        report[0]++;
        if (listen(s, DOOR_BACKLOG) < 0)
                goto fail;
        report[0]++;
        char control[CMSG_SPACE(sizeof(int))] = {0};
        char byte = 'D';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &s, sizeof s);
        if (sendmsg(channel, &m, MSG_NOSIGNAL) != 1)
                goto fail;
        _exit(0);
fail:
        report[1] = errno;
        (void)!send(channel, report, sizeof report, MSG_NOSIGNAL);
        _exit(1);
}

/* The child's answer: the socket (*ret_fd), or -errno of the step that failed. */
static int door_receive(int channel, int64_t deadline, int *ret_fd) {
        int r = fd_wait_readable(channel, deadline);
        if (r < 0)
                return r;
        int report[2] = {0, 0};
        char control[CMSG_SPACE(sizeof(int))];
        struct iovec iov = {.iov_base = report, .iov_len = sizeof report};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control, .msg_controllen = sizeof control};
        ssize_t n = recvmsg(channel, &m, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        if (n == 1 && c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int))) {
                memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
                return 0;
        }
        if (n != (ssize_t)sizeof report || report[0] < 0 || (size_t)report[0] >= ARRAY_SIZE(door_steps) ||
            report[1] <= 0)
                return log_error_errno(-EIO, "sandbox: making the sandbox's door failed");
        return log_error_errno(-report[1], "sandbox: cannot %s for the sandbox's door: %m", door_steps[report[0]]);
}

int sandbox_door_listen(pid_t init_pid, int port, int timeout_ms, int *ret_fd) {
        if (init_pid <= 1 || port <= 0 || port > 65535)
                return -EINVAL;
        int64_t deadline = now_ms() + timeout_ms;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/ns/net", (int)init_pid);
        _cleanup_close_ int netns = open(path, O_RDONLY | O_CLOEXEC);
        if (netns < 0)
                return log_error_errno(-errno, "sandbox: cannot open the network namespace of %d: %m", (int)init_pid);
        /* The user namespace that owns the network namespace, not
         * /proc/PID/ns/user: for --disable-userns bwrap moves pid 1 into a
         * nested user namespace during setup, which does not own it. */
        _cleanup_close_ int userns = ioctl(netns, NS_GET_USERNS);
        if (userns < 0)
                return log_error_errno(-errno, "sandbox: cannot find the owner of the sandbox's network: %m");
        (void)fcntl(userns, F_SETFD, FD_CLOEXEC);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        _cleanup_close_ int channel = pair[0], child_end = pair[1];
        /* Joining a user namespace takes a single-threaded process: a child. */
        pid_t pid = fork();
        if (pid < 0)
                return log_error_errno(-errno, "sandbox: cannot fork to make the sandbox's door: %m");
        if (pid == 0)
                door_child(userns, netns, &sin, child_end);
        close(TAKE_FD(child_end));
        int fd = -1;
        int r = door_receive(channel, deadline, &fd);
        int64_t left = deadline - now_ms();
        int code = sandbox_reap(pid, r == 0 && left > 0 ? (int)left : 0);
        if (code == -ETIMEDOUT) {
                (void)kill(pid, SIGKILL);
                (void)sandbox_reap(pid, -1);
        }
        if (r == -ETIMEDOUT)
                return log_error_errno(r, "sandbox: making the sandbox's door took over %d ms", timeout_ms);
        if (r < 0)
                return r;
        *ret_fd = fd;
        return 0;
}
