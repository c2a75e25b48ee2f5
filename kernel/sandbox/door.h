/* door.h — the one way out of a sandbox: a listening TCP socket on
 * 127.0.0.1:<port> inside the sandbox's own network namespace, made there by
 * the kernel and kept by the kernel (kernel/egress accepts on it).
 *
 * Every sandbox has its own network namespace holding only lo (bwrap
 * --unshare-net): no interface leads outside, to the host's addresses, its
 * loopback (the kernel's control port, the proxy to the live app) or its
 * abstract Unix sockets. A socket belongs to the namespace it was created
 * in, so the kernel creates the door from a child of its own that joins the
 * sandbox's namespaces for that one call: nothing inside the sandbox relays
 * or can replace it, and whoever connects to it is that sandbox.
 *
 * bwrap gives lo its 127.0.0.1 while the sandbox is set up, possibly after
 * the door is made: the door is bound with IP_FREEBIND, so it is ready
 * whenever lo is. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

/* Makes the door for the sandbox whose pid 1 is init_pid (held by bwrap's
 * --block-fd, so nothing inside runs yet), within timeout_ms. *ret_fd: a
 * listening TCP socket (O_CLOEXEC) in that namespace; the caller's. */
int sandbox_door_listen(pid_t init_pid, int port, int timeout_ms, int *ret_fd);
