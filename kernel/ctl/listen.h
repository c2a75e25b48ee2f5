/* listen.h — the control plane's listening sockets.
 *
 * A Seed keeps its port: nothing here moves to another one when it is taken
 * (another local account would get the old one, and the owner's open tabs
 * with it). A loopback address (127.0.0.1, localhost, ::1) is served on both
 * 127.0.0.1 and [::1] with the same port, so no other account can take the
 * family a browser tries first for localhost names; any other address is
 * bound exactly as given. `seed run`'s supervisor binds them once
 * (ctl_listen_open) and hands them to every kernel it starts, which takes
 * them with ctl_listen_adopt: a restart frees nothing. No libmicrohttpd here. */
#pragma once

#include "base/base.h"
#include <stdint.h>

#define CTL_LISTEN_MAX 2

struct ctl_listen {
        int fd[CTL_LISTEN_MAX];   /* listening TCP sockets (O_CLOEXEC, O_NONBLOCK); owned */
        size_t n;
        uint16_t port;            /* the same on every one */
};

#define CTL_LISTEN_INIT {.fd = {-1, -1}, .n = 0, .port = 0}

/* Binds and listens on addr ("HOST:PORT" or "[IPv6]:PORT"). Port 0 picks a
 * free port, the same for both loopback families (tests). Without IPv6 on
 * the host at all, a loopback address is served on 127.0.0.1 alone (logged:
 * then nobody can listen on [::1] either). Logs every failure, naming the
 * address: -EADDRINUSE when the port is taken on either family, -EINVAL
 * for a malformed addr. On success *ret holds the sockets (caller closes
 * them with ctl_listen_close). */
int ctl_listen_open(const char *addr, struct ctl_listen *ret);

/* Takes fd, inherited from the supervisor, into l once it is proven a
 * listening TCP socket (IPv4 or IPv6) on l's port (when l has one already),
 * and marks it O_CLOEXEC and O_NONBLOCK. Does not log. -ENOTSOCK, -EINVAL
 * (not listening, not TCP, another family or port), -E2BIG (more than
 * CTL_LISTEN_MAX), or -EBADF; fd is left alone then. */
int ctl_listen_adopt(struct ctl_listen *l, int fd);

/* Closes l's sockets; l is empty again. Accepts an empty l. */
void ctl_listen_close(struct ctl_listen *l);

/* Whether a listening address is a loopback one served on both families. */
bool ctl_listen_is_loopback(const char *host);
