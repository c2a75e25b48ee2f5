/* loop.c — the event loop of the daemon of small pools (loop.h): one epoll
 * set holding libmicrohttpd's own epoll fd, an eventfd that other threads
 * wake the loop with, and the watched fds (the organism's sockets). */
#include "ctl/loop.h"
#include "base/log.h"

#include <microhttpd.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MAX_EVENTS 64
#define MAX_WAIT_MS 1000
/* epoll data of what is not a watched fd (those carry their fd). */
#define TAG_WAKE UINT64_MAX
#define TAG_DAEMON (UINT64_MAX - 1)

/* A connection from the front thread, waiting for the loop thread. */
struct new_conn {
        int fd;
        socklen_t len;
        struct sockaddr_storage sa;
        struct new_conn *next;
};

struct ctl_loop {
        struct MHD_Daemon *d;
        struct ctl_loop_ops ops;
        /* Loop thread: the daemon runs in a turn only when it has news (its
         * epoll fd, a connection resumed or handed over) or a timeout of
         * its own is due (by daemon_at), not on every other fd's events. */
        bool daemon_due;
        int64_t daemon_at;
        int ep, wake;             /* the epoll set; an eventfd in it */
        pthread_t thread;
        bool started;
        struct ctl_loop_watch *watches; /* loop thread only: every watch... */
        struct ctl_loop_watch **owner;  /* ...by fd (NULL: in the set, no owner) */
        bool *in_set;                   /* fds added to the epoll set... */
        uint32_t *events;               /* ...with these events */
        size_t n_fds;

        pthread_mutex_t lock;     /* what other threads hand over: */
        bool stopping;            /* the loop thread ends its work */
        struct new_conn *conns;   /* to add to the daemon */
        struct ctl_loop_job *queued, **queued_tail; /* for the workers */
        struct ctl_loop_job *done; /* worked: done() on the loop thread */
        pthread_cond_t work;      /* workers wait on it */
        bool workers_stop;
        unsigned n_workers;
        pthread_t workers[CTL_LOOP_WORKERS];
};

static void wake(struct ctl_loop *l) {
        uint64_t one = 1;
        ssize_t k = write(l->wake, &one, sizeof one);
        (void)k; /* a full counter wakes the loop anyway */
}

int ctl_loop_add_conn(struct ctl_loop *l, int fd, const struct sockaddr *sa, socklen_t len) {
        struct new_conn *n = malloc(sizeof *n);
        if (!n || len > sizeof n->sa) {
                free(n);
                close(fd);
                return -ENOMEM;
        }
        *n = (struct new_conn){.fd = fd, .len = len};
        memcpy(&n->sa, sa, len);
        pthread_mutex_lock(&l->lock);
        bool stopping = l->stopping;
        if (!stopping) {
                n->next = l->conns;
                l->conns = n;
        }
        pthread_mutex_unlock(&l->lock);
        if (stopping) {
                close(fd);
                free(n);
                return -ESHUTDOWN;
        }
        wake(l);
        return 0;
}

/* Room in the tables for fd. */
static int fds_grow(struct ctl_loop *l, int fd) {
        if ((size_t)fd < l->n_fds)
                return 0;
        size_t n = l->n_fds ? l->n_fds : 256;
        while (n <= (size_t)fd)
                n *= 2;
        struct ctl_loop_watch **o = realloc(l->owner, n * sizeof *o);
        if (!o)
                return -ENOMEM;
        l->owner = o;
        bool *in = realloc(l->in_set, n * sizeof *in);
        if (!in)
                return -ENOMEM;
        l->in_set = in;
        uint32_t *ev = realloc(l->events, n * sizeof *ev);
        if (!ev)
                return -ENOMEM;
        l->events = ev;
        for (size_t i = l->n_fds; i < n; i++) {
                l->owner[i] = NULL;
                l->in_set[i] = false;
                l->events[i] = 0;
        }
        l->n_fds = n;
        return 0;
}

int ctl_loop_watch(struct ctl_loop *l, struct ctl_loop_watch *w) {
        if (w->fd >= 0) {
                int r = fds_grow(l, w->fd);
                if (r < 0)
                        return r;
                uint32_t want = w->want ? w->want : EPOLLIN | EPOLLOUT | EPOLLRDHUP;
                if (!l->in_set[w->fd] || l->events[w->fd] != want) {
                        struct epoll_event ev = {.events = want | EPOLLET, .data.u64 = (uint64_t)w->fd};
                        if (epoll_ctl(l->ep, l->in_set[w->fd] ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, w->fd, &ev) < 0)
                                return -errno;
                        l->in_set[w->fd] = true;
                        l->events[w->fd] = want;
                }
                l->owner[w->fd] = w;
        }
        w->prev = NULL;
        w->next = l->watches;
        if (l->watches)
                l->watches->prev = w;
        l->watches = w;
        return 0;
}

int ctl_loop_want(struct ctl_loop *l, struct ctl_loop_watch *w, uint32_t want) {
        w->want = want;
        if (w->fd < 0 || (size_t)w->fd >= l->n_fds || l->owner[w->fd] != w)
                return 0;
        want = want ? want : EPOLLIN | EPOLLOUT | EPOLLRDHUP;
        if (l->events[w->fd] == want)
                return 0;
        struct epoll_event ev = {.events = want | EPOLLET, .data.u64 = (uint64_t)w->fd};
        if (epoll_ctl(l->ep, EPOLL_CTL_MOD, w->fd, &ev) < 0)
                return -errno;
        l->events[w->fd] = want;
        return 0;
}

bool ctl_loop_daemon_add(struct ctl_loop *l, int fd, const struct sockaddr *sa, socklen_t len) {
        l->daemon_due = true;
        /* libmicrohttpd closes the fd when it cannot take it. */
        if (MHD_add_connection(l->d, fd, sa, len) == MHD_YES)
                return true;
        log_limited(LOG_WARN, "loop-add", "could not take a connection: %m");
        return false;
}

void ctl_loop_resumed(struct ctl_loop *l) {
        l->daemon_due = true;
}

void ctl_loop_forget(struct ctl_loop *l, int fd) {
        if (fd >= 0 && (size_t)fd < l->n_fds && l->in_set[fd]) {
                (void)epoll_ctl(l->ep, EPOLL_CTL_DEL, fd, NULL);
                l->in_set[fd] = false;
                l->owner[fd] = NULL;
        }
}

void ctl_loop_unwatch(struct ctl_loop *l, struct ctl_loop_watch *w) {
        if (w->fd >= 0 && (size_t)w->fd < l->n_fds && l->owner[w->fd] == w)
                l->owner[w->fd] = NULL;
        if (w->prev)
                w->prev->next = w->next;
        else if (l->watches == w)
                l->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
}

void ctl_loop_offload(struct ctl_loop *l, struct ctl_loop_job *j) {
        j->next = NULL;
        pthread_mutex_lock(&l->lock);
        *l->queued_tail = j;
        l->queued_tail = &j->next;
        pthread_cond_signal(&l->work);
        pthread_mutex_unlock(&l->lock);
}

static void *worker_main(void *arg) {
        struct ctl_loop *l = arg;
        pthread_mutex_lock(&l->lock);
        for (;;) {
                while (!l->queued && !l->workers_stop)
                        pthread_cond_wait(&l->work, &l->lock);
                if (l->workers_stop)
                        break;
                struct ctl_loop_job *j = l->queued;
                if (!(l->queued = j->next))
                        l->queued_tail = &l->queued;
                pthread_mutex_unlock(&l->lock);
                j->work(j);
                pthread_mutex_lock(&l->lock);
                j->next = l->done;
                l->done = j;
                wake(l);
        }
        pthread_mutex_unlock(&l->lock);
        return NULL;
}

/* Loop thread: new connections to the daemon, worked jobs' done();
 * whether the loop is to stop (then nothing is taken). */
static bool take_handed(struct ctl_loop *l) {
        pthread_mutex_lock(&l->lock);
        bool stopping = l->stopping;
        struct new_conn *conns = stopping ? NULL : TAKE_PTR(l->conns);
        struct ctl_loop_job *done = stopping ? NULL : TAKE_PTR(l->done);
        pthread_mutex_unlock(&l->lock);
        while (conns) {
                struct new_conn *c = conns;
                conns = c->next;
                if (l->ops.take)
                        l->ops.take(l->ops.userdata, c->fd, (const struct sockaddr *)&c->sa, c->len);
                else
                        ctl_loop_daemon_add(l, c->fd, (const struct sockaddr *)&c->sa, c->len);
                free(c);
        }
        while (done) {
                struct ctl_loop_job *j = done;
                done = j->next;
                j->done(j, false);
        }
        return stopping;
}

/* Loop thread: the watches whose deadline passed get it; the next deadline
 * (INT64_MAX: none). */
static int64_t deadlines(struct ctl_loop *l, int64_t now) {
        int64_t next = INT64_MAX;
        for (struct ctl_loop_watch *w = l->watches; w; w = w->next) {
                if (w->deadline_ms > 0 && w->deadline_ms <= now) {
                        w->deadline_ms = 0;
                        w->ready(w, CTL_LOOP_DEADLINE);
                }
                if (w->deadline_ms > 0 && w->deadline_ms < next)
                        next = w->deadline_ms;
        }
        return next;
}

static int wait_ms(struct ctl_loop *l, int64_t next_deadline, int64_t now) {
        MHD_UNSIGNED_LONG_LONG t;
        int64_t ms = MAX_WAIT_MS;
        if (MHD_get_timeout(l->d, &t) == MHD_YES && (int64_t)t < ms)
                ms = (int64_t)t;
        l->daemon_at = now + ms;
        if (next_deadline != INT64_MAX && next_deadline - now < ms)
                ms = next_deadline - now;
        return ms < 0 ? 0 : (int)ms;
}

/* Loop thread at the end: every job's done() (cancelled when never worked),
 * every watch's CTL_LOOP_STOP, and the daemon once more, so it resumes
 * what they resumed and no connection stays suspended. */
static void wind_down(struct ctl_loop *l) {
        pthread_mutex_lock(&l->lock);
        struct ctl_loop_job *done = TAKE_PTR(l->done);
        struct ctl_loop_job *queued = TAKE_PTR(l->queued);
        l->queued_tail = &l->queued;
        struct new_conn *conns = TAKE_PTR(l->conns);
        pthread_mutex_unlock(&l->lock);
        while (done) {
                struct ctl_loop_job *j = done;
                done = j->next;
                j->done(j, false);
        }
        while (queued) {
                struct ctl_loop_job *j = queued;
                queued = j->next;
                j->done(j, true);
        }
        while (conns) {
                struct new_conn *c = conns;
                conns = c->next;
                close(c->fd);
                free(c);
        }
        while (l->watches) {
                struct ctl_loop_watch *w = l->watches;
                ctl_loop_unwatch(l, w);
                w->ready(w, CTL_LOOP_STOP);
        }
        if (l->ops.run)
                l->ops.run(l->ops.userdata, true);
        MHD_run(l->d);
}

static void *loop_main(void *arg) {
        struct ctl_loop *l = arg;
        struct epoll_event ev[MAX_EVENTS];
        int64_t next = INT64_MAX;
        for (;;) {
                int n = epoll_wait(l->ep, ev, MAX_EVENTS, wait_ms(l, next, now_ms()));
                if (n < 0 && errno != EINTR) {
                        log_error_errno(-errno, "control plane: the event loop cannot wait: %m");
                        break;
                }
                bool woken = false;
                for (int i = 0; i < n; i++) {
                        uint64_t tag = ev[i].data.u64;
                        if (tag == TAG_WAKE) {
                                woken = true;
                                continue;
                        }
                        if (tag == TAG_DAEMON) {
                                l->daemon_due = true;
                                continue; /* below */
                        }
                        struct ctl_loop_watch *w = tag < l->n_fds ? l->owner[tag] : NULL;
                        if (!w) { /* parked: nobody waits on it */
                                if (l->ops.parked_news && tag < l->n_fds &&
                                    (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                                        l->ops.parked_news(l->ops.userdata, (int)tag);
                                continue;
                        }
                        w->events = ev[i].events;
                        w->ready(w, CTL_LOOP_IO);
                }
                /* Whatever other threads hand over comes with a wake. */
                if (woken) {
                        uint64_t k;
                        ssize_t got = read(l->wake, &k, sizeof k);
                        (void)got;
                        if (take_handed(l))
                                break;
                }
                next = deadlines(l, now_ms());
                if (l->ops.run)
                        l->ops.run(l->ops.userdata, false);
                if (l->daemon_due || woken || now_ms() >= l->daemon_at) {
                        l->daemon_due = false;
                        MHD_run(l->d);
                }
        }
        wind_down(l);
        return NULL;
}

static void workers_stop(struct ctl_loop *l) {
        pthread_mutex_lock(&l->lock);
        l->workers_stop = true;
        pthread_cond_broadcast(&l->work);
        pthread_mutex_unlock(&l->lock);
        for (unsigned i = 0; i < l->n_workers; i++)
                pthread_join(l->workers[i], NULL);
        l->n_workers = 0;
}

void ctl_loop_stop(struct ctl_loop *l) {
        if (!l)
                return;
        workers_stop(l); /* their last jobs' done() is queued for the loop */
        pthread_mutex_lock(&l->lock);
        l->stopping = true;
        pthread_mutex_unlock(&l->lock);
        wake(l);
        if (l->started)
                pthread_join(l->thread, NULL);
        l->started = false;
}

void ctl_loop_free(struct ctl_loop *l) {
        if (!l)
                return;
        ctl_loop_stop(l);
        if (l->ep >= 0)
                close(l->ep);
        if (l->wake >= 0)
                close(l->wake);
        pthread_cond_destroy(&l->work);
        pthread_mutex_destroy(&l->lock);
        free(l->owner);
        free(l->in_set);
        free(l->events);
        free(l);
}

int ctl_loop_start(struct MHD_Daemon *d, const struct ctl_loop_ops *ops, struct ctl_loop **ret) {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD);
        if (!di)
                return -EINVAL;
        struct ctl_loop *l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        l->d = d;
        if (ops)
                l->ops = *ops;
        l->queued_tail = &l->queued;
        pthread_mutex_init(&l->lock, NULL);
        pthread_cond_init(&l->work, NULL);
        l->ep = epoll_create1(EPOLL_CLOEXEC);
        l->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int r = 0;
        struct epoll_event wev = {.events = EPOLLIN, .data.u64 = TAG_WAKE};
        struct epoll_event dev = {.events = EPOLLIN, .data.u64 = TAG_DAEMON};
        if (l->ep < 0 || l->wake < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->wake, &wev) < 0 ||
            epoll_ctl(l->ep, EPOLL_CTL_ADD, di->epoll_fd, &dev) < 0)
                r = -errno;
        for (unsigned i = 0; r >= 0 && i < CTL_LOOP_WORKERS; i++) {
                r = -pthread_create(&l->workers[i], NULL, worker_main, l);
                if (r == 0)
                        l->n_workers++;
        }
        if (r >= 0) {
                r = -pthread_create(&l->thread, NULL, loop_main, l);
                l->started = r == 0;
        }
        if (r < 0) {
                ctl_loop_free(l);
                return r;
        }
        *ret = l;
        return 0;
}
