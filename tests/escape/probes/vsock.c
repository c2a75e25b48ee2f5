/* AF_VSOCK: sockets to the hypervisor and other VMs, outside every network
 * namespace. Breach: a socket is created (connecting to the host, CID 2, is
 * tried too and reported). */
#include "probe.h"
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <linux/vm_sockets.h>

int main(void) {
        int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
        probe_try(fd >= 0, "socket(AF_VSOCK)");
        if (fd >= 0) {
                struct sockaddr_vm a = {.svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_HOST, .svm_port = 52};
                fcntl(fd, F_SETFL, O_NONBLOCK);
                int r = connect(fd, (struct sockaddr *)&a, sizeof a);
                if (r < 0 && errno == EINPROGRESS) {
                        struct pollfd p = {.fd = fd, .events = POLLOUT};
                        int err = 0;
                        socklen_t l = sizeof err;
                        r = poll(&p, 1, 1000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0
                                    ? 0
                                    : -1;
                        errno = err ? err : ETIMEDOUT;
                }
                probe_try(r == 0, "connect to the host (CID 2, port 52)");
                close(fd);
        }
        int d = socket(AF_VSOCK, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        probe_try(d >= 0, "socket(AF_VSOCK, SOCK_DGRAM)");
        if (d >= 0)
                close(d);
        return probe_report("vsock");
}
