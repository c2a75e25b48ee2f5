/* front.h — the listening sockets' accept loop, which gives each connection
 * to one of the control plane's two libmicrohttpd daemons by the first
 * request head it sends.
 *
 * Why two: libmicrohttpd zeroes a connection's whole memory pool after every
 * request, and the pool bounds the request head. The control plane's own
 * origin needs room for a browser's whole cookie jar (1 MiB: cookies ignore
 * ports, so any server on seed.localhost:<another port> can fill the jar its
 * requests carry, and a sign-in link must still be answered); the
 * organism's origins do not, and there that zeroing was a fifth of a
 * proxied request's CPU. So a connection whose first head is complete
 * within CTL_FRONT_PEEK bytes and names another Host goes to the daemon of
 * small pools; the control plane's origin, any larger head, one not in
 * within CTL_FRONT_WAIT_MS, and every connection when there is no control
 * origin of its own (the same-origin fallback) go to the large one.
 *
 * The small daemon runs on one event loop (loop.h), the large one a thread
 * per connection; both serve the organism's origins with the same checks.
 * A wrong guess costs at most one refusal — a later head on a small
 * connection that outgrew its pool (431: libmicrohttpd then closes it, and
 * the client's next connection is sized by its own first head), or a
 * streamed answer of the control plane's own origin asked on a small
 * connection (421, closed: a stream's reads wait, which the loop never
 * does; browsers keep connections per host, so only clients that keep them
 * per address mix the two). No libmicrohttpd here. */
#pragma once

#include "base/base.h"
#include <stdint.h>
#include <sys/socket.h>

#define CTL_FRONT_PEEK (16 * 1024)     /* the most of a first head looked at */
#define CTL_FRONT_WAIT_MS 1000         /* for a first head, before the large pool is chosen */
#define CTL_FRONT_PENDING 64           /* connections waiting for their first head at most */

enum ctl_front_pool {
        CTL_FRONT_WAIT,   /* no complete head yet: look again when more arrives */
        CTL_FRONT_SMALL,
        CTL_FRONT_LARGE,
};

/* The pool for a connection whose first n bytes are buf (n <= CTL_FRONT_PEEK;
 * full: the peek filled its buffer, or the connection will send no more).
 * control_host NULL or "": no origin of its own, always large. Pure. */
enum ctl_front_pool ctl_front_choose(const char *buf, size_t n, bool full, const char *control_host);

struct ctl_front_ops {
        /* At accept, before the connection is held: false closes it at once.
         * Front thread. */
        bool (*accept)(void *userdata, const struct sockaddr *sa, socklen_t len);
        /* The connection goes to a daemon: fd is the callee's from here. */
        void (*hand)(void *userdata, int fd, const struct sockaddr *sa, socklen_t len, bool large);
        void *userdata;
};

struct ctl_front;

/* Takes the listening sockets fd[0..n) (closed by ctl_front_stop, also on
 * failure here) and starts the front thread. control_host is copied. */
int ctl_front_start(const int *fd, size_t n, const char *control_host, const struct ctl_front_ops *ops,
                    struct ctl_front **ret);
/* Stops accepting, closes the connections still waiting for a head and the
 * listening sockets (only these descriptors: a supervisor's copies stay
 * open). Accepts NULL. */
void ctl_front_stop(struct ctl_front *f);
