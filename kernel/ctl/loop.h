/* loop.h — one event-loop thread that runs the daemon of small pools (the
 * organism's origins, front.h) in libmicrohttpd's external epoll mode, with
 * the organism's sockets in the same epoll set, and a few worker threads for
 * what may block there (a /_seed route that asks PostgreSQL).
 *
 * Why: with a thread per connection a proxied request woke its thread twice
 * and made seven system calls; here one thread serves every connection of
 * the organism's origins and wakes once for many of them (proxy.c's
 * asynchronous path: a connection waits for its organism suspended, never
 * on a thread).
 *
 * Everything but ctl_loop_add_conn, ctl_loop_offload (from the loop thread
 * too) and ctl_loop_stop runs on the loop thread: the daemon's callbacks,
 * watches' ready(), jobs' done(). So what they share needs no lock.
 * libmicrohttpd's types stay out of this header. */
#pragma once

#include "base/base.h"
#include <stdint.h>
#include <sys/socket.h>

struct MHD_Daemon;
struct ctl_loop;

/* Why ready() is called. */
enum {
        CTL_LOOP_IO = 1,       /* the fd became readable or writable (edge-triggered: try, then wait) */
        CTL_LOOP_DEADLINE = 2, /* deadline_ms passed */
        CTL_LOOP_STOP = 3,     /* the loop stops: end what waits (resume the connection) */
};

/* An fd the loop watches for its owner (edge-triggered read, write and
 * hang-up), or a timer (fd -1). The owner keeps it alive while it is
 * watched. ready() must not end any watch (ends come from the daemon's
 * callbacks), only resume what waits. */
struct ctl_loop_watch {
        void (*ready)(struct ctl_loop_watch *w, int why);
        int fd;
        uint32_t events;          /* CTL_LOOP_IO: the epoll events seen */
        /* When ready(CTL_LOOP_DEADLINE) is called (now_ms() clock), once;
         * 0: never. The owner sets it while it waits. */
        int64_t deadline_ms;
        /* The epoll events watched (EPOLLIN, EPOLLOUT, EPOLLRDHUP); 0: all
         * three. A socket watched only for reading is not woken each time
         * its peer acknowledges what it sent. */
        uint32_t want;
        struct ctl_loop_watch *prev, *next; /* the loop's */
};

/* Work for a worker thread: work() there, then done() on the loop thread
 * (cancelled: the loop stopped before work() ran; done() must still resume
 * what waits for it). */
struct ctl_loop_job {
        void (*work)(struct ctl_loop_job *j);
        void (*done)(struct ctl_loop_job *j, bool cancelled);
        struct ctl_loop_job *next; /* the loop's */
};

#define CTL_LOOP_WORKERS 4

/* Who takes the loop's connections (NULL ops: the daemon takes each). */
struct ctl_loop_ops {
        /* Loop thread: a connection from ctl_loop_add_conn (fd is the
         * callee's). It may give it to the daemon (ctl_loop_daemon_add). */
        void (*take)(void *userdata, int fd, const struct sockaddr *sa, socklen_t len);
        /* Loop thread, after each turn's events and deadlines, before the
         * daemon runs; stopping: the last call, as the loop ends. */
        void (*run)(void *userdata, bool stopping);
        /* Loop thread: an fd in the set with no owner (parked: a pooled
         * connection, ctl_loop_forget) had news — bytes, or its end. */
        void (*parked_news)(void *userdata, int fd);
        void *userdata;
};

/* Starts the loop thread for d (started with MHD_USE_EPOLL, without a
 * thread of its own) and CTL_LOOP_WORKERS workers. ops is copied. */
int ctl_loop_start(struct MHD_Daemon *d, const struct ctl_loop_ops *ops, struct ctl_loop **ret);
/* Any thread: the loop thread gives fd (the callee's from here) to
 * ops.take, or to the daemon; closed when the loop stops first. */
int ctl_loop_add_conn(struct ctl_loop *l, int fd, const struct sockaddr *sa, socklen_t len);
/* Loop thread: fd (not watched, forgotten) goes to the daemon, which
 * closes it when it cannot take it (false). */
bool ctl_loop_daemon_add(struct ctl_loop *l, int fd, const struct sockaddr *sa, socklen_t len);
/* Loop thread: the events a watched fd is watched for (w->want) change. */
int ctl_loop_want(struct ctl_loop *l, struct ctl_loop_watch *w, uint32_t want);
/* Loop thread: watch w->fd / stop watching it. An fd once watched stays
 * in the epoll set with no owner (its events are dropped), so a pooled
 * connection costs no system call when it is watched again; call
 * ctl_loop_forget before closing it (or giving it to another loop). */
int ctl_loop_watch(struct ctl_loop *l, struct ctl_loop_watch *w);
void ctl_loop_unwatch(struct ctl_loop *l, struct ctl_loop_watch *w);
void ctl_loop_forget(struct ctl_loop *l, int fd);
/* Loop thread: a connection of the daemon was resumed (it runs in this
 * turn; the daemon otherwise runs only on its own news or timeouts). */
void ctl_loop_resumed(struct ctl_loop *l);
/* Loop thread: queue j for a worker. */
void ctl_loop_offload(struct ctl_loop *l, struct ctl_loop_job *j);
/* Ends the threads: workers finish their job, queued jobs are cancelled,
 * every watch gets CTL_LOOP_STOP, the daemon runs once more (so no
 * connection stays suspended) and the loop thread exits. The daemon may be
 * stopped after this, then ctl_loop_free. Accepts NULL. */
void ctl_loop_stop(struct ctl_loop *l);
void ctl_loop_free(struct ctl_loop *l);
