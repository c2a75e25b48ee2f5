/* upstream-pool.h — idle keep-alive connections from the proxy to organisms' bridge
 * sockets (the live organism's, a preview's), so a request to / does not
 * pay for a new connection (and the bridge's new TCP connection to the app)
 * every time. Keyed by socket path: a connection is only ever reused for the
 * socket it was made to (and checked on: organism_connect()).
 *
 * A connection is put back only by the proxy, once its response was read to
 * the end of its framing with nothing left over (proxy.c decides). One the
 * organism (or its bridge, when the organism restarted) closed while idle,
 * or sent bytes nobody asked for on, is closed and never taken: taking one
 * looks at it (a peek), or, in a pool whose owner watches its idle
 * connections (the loop's: ctl_upool_watched), it was closed when the news
 * came — as nginx's keep-alive cache does; bytes that arrive in the
 * microseconds between the loop's wait and the take are read as the next
 * answer's, as they would be a moment after a peek. One idle for
 * CTL_UPOOL_IDLE_MS or more is closed
 * (below Node's 5 s keepAliveTimeout, so the app rarely closes one just as
 * it is reused; when it does, proxy.c retries once on a new connection).
 * At most CTL_UPOOL_MAX are kept, over all sockets. Thread-safe; logs nothing. */
#pragma once

#include "base/base.h"

#include <pthread.h>
#include <sys/un.h>

#define CTL_UPOOL_MAX 64
#define CTL_UPOOL_IDLE_MS 3000

struct ctl_upool_conn {
        int fd;                   /* -1: a free slot */
        int64_t idle_since_ms;    /* now_ms() when it was put back */
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

struct ctl_upool {
        pthread_mutex_t lock;
        /* Told of every descriptor the pool closes, just before (NULL: none). */
        void (*on_close)(void *userdata, int fd);
        void *userdata;
        bool closed;              /* ctl_upool_close_all ran: nothing is kept any more */
        /* Its owner watches every idle connection and tells of any news on
         * one (ctl_upool_stirred), so taking one costs no look at it. */
        bool watched;
        struct ctl_upool_conn c[CTL_UPOOL_MAX];
};

void ctl_upool_init(struct ctl_upool *p);
/* Sets p->on_close (before the pool is used). */
void ctl_upool_on_close(struct ctl_upool *p, void (*on_close)(void *userdata, int fd), void *userdata);
/* Closes every idle connection; from now on put closes at once. */
void ctl_upool_close_all(struct ctl_upool *p);
void ctl_upool_done(struct ctl_upool *p);
/* The pool's idle connections are watched by its owner (before use). */
void ctl_upool_watched(struct ctl_upool *p);
/* Idle connection fd had news (bytes, or its end): closed, if it is one of
 * the pool's. */
void ctl_upool_stirred(struct ctl_upool *p, int fd);
/* An idle connection to path that is still usable, the most recently used
 * first (the caller owns *ret_fd); -ENOENT if there is none. */
int ctl_upool_take(struct ctl_upool *p, const char *path, int *ret_fd);
/* Gives fd (a connection to path, owned by the pool from now on) back:
 * closed when the pool is full or closed, or path is too long. */
void ctl_upool_put(struct ctl_upool *p, const char *path, int fd);
/* Idle connections kept (for tests). */
size_t ctl_upool_idle(struct ctl_upool *p);
