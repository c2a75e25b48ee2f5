/* fast.h — the event loop's own HTTP/1.1 for the commonest request on the
 * organism's origins: a GET without a body whose answer comes whole with
 * a Content-Length (a page, a script, an API answer).
 *
 * Why: on libmicrohttpd 0.9.75 a proxied request costs a suspend and a
 * resume (its connection leaves and re-enters libmicrohttpd's epoll set,
 * and its next read finds nothing), one more wait on its epoll set per
 * run, and the zeroing of its memory pool — a third of the kernel's CPU
 * per request, and the rest of the gap to nginx (README, benchmarks).
 *
 * How: every connection the front gives the daemon of small pools (front.h)
 * comes here first. Each request head is peeked at, never read, until its
 * answer is known, so the connection can still go to libmicrohttpd
 * untouched at a request boundary: anything but a strictly formed GET
 * (ctl_fast_parse), anything the daemon refuses or decides (/_seed, a Host
 * that is not allowed, the control plane's own origin, a Service-Worker),
 * more bytes than one head (a pipelined request), and every answer that is
 * not whole in one buffer (a stream, a HEAD, a tag to put in, the kernel's
 * own error pages) — then the connection goes to the daemon for good, with
 * the request already sent parked for it (proxy.c: the organism is asked
 * once). A head that is ours is read once its answer is written.
 * Connections are counted in ctl.conns as the daemon's are (pools, caps,
 * head deadlines, the proxied cap), and the proxy, its header policy and
 * its upstream pool are the daemon's (proxy.c). Loop thread only. */
#pragma once

#include "base/base.h"
#include "ctl/http.h"

#include <sys/socket.h>

struct ctl;
struct ctl_fast;

#define CTL_FAST_TARGET_MAX 8192   /* a longer request-target goes to the daemon */

enum ctl_fast_verdict {
        CTL_FAST_WAIT,     /* not a whole head yet */
        CTL_FAST_DAEMON,   /* libmicrohttpd serves it (and the connection from here on) */
        CTL_FAST_OURS,
};

/* A head of ours: borrowed from the buffer parsed. */
struct ctl_fast_head {
        size_t len;                /* the head's bytes, blank line included */
        const char *target;
        size_t target_len;
        bool close;                /* "Connection: close": the connection ends with the answer */
};

/* Reads buf[0, n) (full: no more will come before it is decided) as the
 * start of a request. CTL_FAST_OURS only for exactly one whole head and
 * nothing after it: "GET <target> HTTP/1.1", target origin-form of
 * visible ASCII (at most CTL_FAST_TARGET_MAX), header lines of a token
 * name, a colon and a value without control characters but tab, each
 * ended by CRLF, at most CTL_MAX_HEADERS, exactly one Host, and none of
 * Content-Length, Transfer-Encoding, Expect, Upgrade, Service-Worker, or a
 * Connection other than "keep-alive" or "close". Headers go to hdrs (emptied first)
 * with their values' surrounding blanks taken off. Pure. */
enum ctl_fast_verdict ctl_fast_parse(const char *buf, size_t n, bool full, struct ctl_fast_head *ret,
                                     struct ctl_hdrs *hdrs);

int ctl_fast_new(struct ctl *c, struct ctl_fast **ret);
/* After the loop stopped (which closed every connection here). Accepts NULL. */
void ctl_fast_free(struct ctl_fast *f);

/* The loop's ops (loop.h; userdata: the struct ctl): a connection from
 * the front, and each turn's work. */
void ctl_fast_take(void *userdata, int fd, const struct sockaddr *sa, socklen_t len);
void ctl_fast_run(void *userdata, bool stopping);
