/* front.c — the accept loop of front.h: one thread, one epoll set holding
 * the listening sockets, an eventfd that stops it, and the connections
 * waiting for their first head (edge-triggered: a head is only peeked at,
 * never read, so its bytes stay readable until libmicrohttpd reads them). */
#include "ctl/front.h"
#include "ctl/guard.h"
#include "ctl/listen.h"
#include "base/log.h"

#include <pthread.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#define HOST_MAX 300               /* as ctl_host_is reads one */
#define ACCEPT_PAUSE_MS 100        /* after running out of descriptors */
/* Looks at one connection's first bytes (each look copies them all, up to
 * CTL_FRONT_PEEK): a head sent in more pieces than this goes to the large
 * pool without waiting for its end, so a client trickling bytes cannot make
 * this thread copy without bound. A browser's head comes in one piece. */
#define PEEKS_MAX 8
#define EV_WAKE UINT64_MAX
#define EV_LISTEN (UINT64_MAX - 8) /* + the socket's index */

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

enum ctl_front_pool ctl_front_choose(const char *buf, size_t n, bool full, const char *control_host) {
        const char *end = n >= 4 ? memmem(buf, n, "\r\n\r\n", 4) : NULL;
        if (!end)
                return full ? CTL_FRONT_LARGE : CTL_FRONT_WAIT;
        if (strempty(control_host))
                return CTL_FRONT_LARGE;
        /* The header lines: after the request line, up to the empty one. */
        const char *p = memchr(buf, '\n', (size_t)(end - buf));
        const char *value = NULL;
        size_t value_len = 0;
        unsigned hosts = 0;
        bool after_host = false;
        for (p = p ? p + 1 : end; p < end;) {
                const char *eol = memchr(p, '\n', (size_t)(end + 2 - p));
                size_t len = (size_t)(eol - p);
                if (len > 0 && p[len - 1] == '\r')
                        len--;
                if (after_host && len > 0 && is_ows(p[0]))
                        return CTL_FRONT_LARGE; /* a folded Host: read as libmicrohttpd reads it, there */
                after_host = len >= 5 && strncasecmp(p, "host:", 5) == 0;
                if (after_host) {
                        hosts++;
                        value = p + 5;
                        value_len = len - 5;
                        while (value_len > 0 && is_ows(value[0]))
                                value++, value_len--;
                        while (value_len > 0 && is_ows(value[value_len - 1]))
                                value_len--;
                }
                p = eol + 1;
        }
        if (hosts != 1 || value_len == 0 || value_len > HOST_MAX)
                return CTL_FRONT_LARGE; /* refused either way; the large daemon says why */
        char host[HOST_MAX + 1];
        memcpy(host, value, value_len);
        host[value_len] = 0;
        return ctl_host_is(host, control_host) ? CTL_FRONT_LARGE : CTL_FRONT_SMALL;
}

struct pending {
        int fd;                    /* -1: a free slot */
        unsigned peeks;
        int64_t deadline;
        socklen_t len;
        struct sockaddr_storage addr;
};

struct ctl_front {
        int ep, wake;
        int listen[CTL_LISTEN_MAX];
        size_t n_listen;
        bool listening;            /* the listening sockets are in the epoll set */
        int64_t accept_paused_until;
        char *control_host;
        struct ctl_front_ops ops;
        struct pending pend[CTL_FRONT_PENDING];
        pthread_t thread;
        bool started;
};

static void listening_set(struct ctl_front *f, bool on) {
        if (f->listening == on)
                return;
        for (size_t i = 0; i < f->n_listen; i++) {
                struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_LISTEN + i};
                (void)epoll_ctl(f->ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, f->listen[i], &ev);
        }
        f->listening = on;
}

static void pending_drop(struct ctl_front *f, struct pending *p) {
        (void)epoll_ctl(f->ep, EPOLL_CTL_DEL, p->fd, NULL);
        p->fd = -1;
}

static void hand(struct ctl_front *f, struct pending *p, bool large) {
        int fd = p->fd;
        pending_drop(f, p);
        f->ops.hand(f->ops.userdata, fd, (const struct sockaddr *)&p->addr, p->len, large);
}

static void close_pending(struct ctl_front *f, struct pending *p) {
        int fd = p->fd;
        pending_drop(f, p);
        close(fd);
}

/* Looks at what p has sent so far; hands it over once the pool is clear. */
static void peek(struct ctl_front *f, struct pending *p) {
        char buf[CTL_FRONT_PEEK];
        ssize_t k;
        do
                k = recv(p->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k < 0 && errno == EAGAIN)
                return;
        if (k <= 0) { /* gone before its first head (or reset) */
                close_pending(f, p);
                return;
        }
        bool last = (size_t)k == sizeof buf || ++p->peeks >= PEEKS_MAX;
        enum ctl_front_pool pool = ctl_front_choose(buf, (size_t)k, last, f->control_host);
        if (pool != CTL_FRONT_WAIT)
                hand(f, p, pool == CTL_FRONT_LARGE);
}

static struct pending *free_slot(struct ctl_front *f) {
        struct pending *oldest = NULL;
        for (size_t i = 0; i < CTL_FRONT_PENDING; i++) {
                if (f->pend[i].fd < 0)
                        return &f->pend[i];
                if (!oldest || f->pend[i].deadline < oldest->deadline)
                        oldest = &f->pend[i];
        }
        hand(f, oldest, true); /* full: the one waiting longest goes on as it would at its deadline */
        return oldest;
}

static void accept_from(struct ctl_front *f, int lfd, int64_t now) {
        for (;;) {
                struct sockaddr_storage sa;
                socklen_t len = sizeof sa;
                int fd = accept4(lfd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                                log_limited(LOG_WARN, "front-accept", "cannot accept a connection (%m): "
                                                                      "pausing new connections briefly");
                                listening_set(f, false);
                                f->accept_paused_until = now + ACCEPT_PAUSE_MS;
                        }
                        return; /* EAGAIN: all taken */
                }
                if (!f->ops.accept(f->ops.userdata, (struct sockaddr *)&sa, len)) {
                        close(fd);
                        continue;
                }
                struct pending *p = free_slot(f);
                *p = (struct pending){.fd = fd, .deadline = now + CTL_FRONT_WAIT_MS, .len = len, .addr = sa};
                struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                                         .data.u64 = (uint64_t)(p - f->pend)};
                if (epoll_ctl(f->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
                        p->fd = -1;
                        f->ops.hand(f->ops.userdata, fd, (struct sockaddr *)&sa, len, true);
                        continue;
                }
                peek(f, p); /* a client may send its head with the handshake's last packet */
        }
}

/* Hands over the connections whose head is late; the next deadline, or -1. */
static int expire(struct ctl_front *f, int64_t now) {
        int64_t next = INT64_MAX;
        for (size_t i = 0; i < CTL_FRONT_PENDING; i++) {
                struct pending *p = &f->pend[i];
                if (p->fd < 0)
                        continue;
                if (p->deadline <= now)
                        hand(f, p, true);
                else if (p->deadline < next)
                        next = p->deadline;
        }
        if (!f->listening) {
                if (f->accept_paused_until <= now)
                        listening_set(f, true);
                else if (f->accept_paused_until < next)
                        next = f->accept_paused_until;
        }
        return next == INT64_MAX ? -1 : (int)(next - now);
}

static void *front_main(void *arg) {
        struct ctl_front *f = arg;
        for (;;) {
                int timeout = expire(f, now_ms());
                struct epoll_event evs[32];
                int n = epoll_wait(f->ep, evs, ARRAY_SIZE(evs), timeout);
                if (n < 0 && errno != EINTR) {
                        log_error_errno(-errno, "the accept loop failed: %m");
                        return NULL;
                }
                int64_t now = now_ms();
                for (int i = 0; i < n; i++) {
                        uint64_t tag = evs[i].data.u64;
                        if (tag == EV_WAKE)
                                return NULL;
                        if (tag >= EV_LISTEN) {
                                if (f->listening)
                                        accept_from(f, f->listen[tag - EV_LISTEN], now);
                        } else if (tag < CTL_FRONT_PENDING && f->pend[tag].fd >= 0)
                                peek(f, &f->pend[tag]);
                }
        }
}

int ctl_front_start(const int *fd, size_t n, const char *control_host, const struct ctl_front_ops *ops,
                    struct ctl_front **ret) {
        struct ctl_front *f = calloc(1, sizeof *f);
        if (!f || n == 0 || n > CTL_LISTEN_MAX) {
                for (size_t i = 0; i < n; i++)
                        close(fd[i]);
                free(f);
                return f ? -EINVAL : -ENOMEM;
        }
        f->ops = *ops;
        f->ep = f->wake = -1;
        for (size_t i = 0; i < n; i++)
                f->listen[f->n_listen++] = fd[i];
        for (size_t i = 0; i < CTL_FRONT_PENDING; i++)
                f->pend[i].fd = -1;
        int r = 0;
        if (!strempty(control_host) && !(f->control_host = strdup(control_host)))
                r = -ENOMEM;
        if (r >= 0 && ((f->ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
                       (f->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0))
                r = -errno;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_WAKE};
        if (r >= 0 && epoll_ctl(f->ep, EPOLL_CTL_ADD, f->wake, &ev) < 0)
                r = -errno;
        if (r >= 0) {
                listening_set(f, true);
                r = -pthread_create(&f->thread, NULL, front_main, f);
                f->started = r == 0;
        }
        if (r < 0) {
                ctl_front_stop(f);
                return r;
        }
        *ret = f;
        return 0;
}

void ctl_front_stop(struct ctl_front *f) {
        if (!f)
                return;
        if (f->started) {
                uint64_t one = 1;
                if (write(f->wake, &one, sizeof one) < 0)
                        log_error_errno(-errno, "cannot stop the accept loop: %m");
                pthread_join(f->thread, NULL);
        }
        for (size_t i = 0; i < CTL_FRONT_PENDING; i++)
                if (f->pend[i].fd >= 0)
                        close(f->pend[i].fd);
        for (size_t i = 0; i < f->n_listen; i++)
                close(f->listen[i]);
        if (f->wake >= 0)
                close(f->wake);
        if (f->ep >= 0)
                close(f->ep);
        free(f->control_host);
        free(f);
}
