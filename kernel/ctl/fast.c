/* fast.c — the loop's own HTTP/1.1 for plain GETs on the organism's
 * origins (fast.h): the head parser, the connections, their answers. */
#include "ctl/fast.h"
#include "ctl/front.h"
#include "ctl/guard.h"
#include "ctl/loop.h"
#include "ctl/server.h"
#include "base/log.h"

#include <strings.h>
#include <sys/epoll.h>
#include <sys/uio.h>

#define PEEKS_MAX 8                /* looks at one head; then the daemon reads it (as front.c) */
#define WRITE_TIMEOUT_MS (310 * 1000) /* a client that takes no bytes (the daemon's proxied timeout) */

/* ---- the head ---- */

static bool is_tchar(unsigned char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool name_is(const char *p, size_t n, const char *name) {
        return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

enum ctl_fast_verdict ctl_fast_parse(const char *buf, size_t n, bool full, struct ctl_fast_head *ret,
                                     struct ctl_hdrs *hdrs) {
        ctl_hdrs_free(hdrs);
        *hdrs = (struct ctl_hdrs){0};
        const char *end = n >= 4 ? memmem(buf, n, "\r\n\r\n", 4) : NULL;
        if (!end)
                return full || (n >= 4 && memcmp(buf, "GET ", 4) != 0) ? CTL_FAST_DAEMON : CTL_FAST_WAIT;
        size_t len = (size_t)(end - buf) + 4;
        if (len != n || n < 5 || memcmp(buf, "GET /", 5) != 0)
                return CTL_FAST_DAEMON;
        const char *t = buf + 4, *p = t;
        while (p < end && *p > 0x20 && *p < 0x7f)
                p++;
        size_t tlen = (size_t)(p - t);
        if (tlen > CTL_FAST_TARGET_MAX || end - p < 10 || memcmp(p, " HTTP/1.1\r\n", 11) != 0)
                return CTL_FAST_DAEMON;
        unsigned hosts = 0;
        bool close = false;
        for (p += 11; p < end + 2;) {
                const char *name = p;
                while (p < end && is_tchar((unsigned char)*p))
                        p++;
                size_t nlen = (size_t)(p - name);
                if (nlen == 0 || *p != ':')
                        goto daemon;
                const char *v = ++p;
                while (*p != '\r' && (*p == '\t' || ((unsigned char)*p >= 0x20 && *p != 0x7f)))
                        p++;
                if (p[0] != '\r' || p[1] != '\n')
                        goto daemon; /* a control character, or a bare CR */
                const char *ve = p;
                while (v < ve && (*v == ' ' || *v == '\t'))
                        v++;
                while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                        ve--;
                size_t vlen = (size_t)(ve - v);
                if (name_is(name, nlen, "content-length") || name_is(name, nlen, "transfer-encoding") ||
                    name_is(name, nlen, "expect") || name_is(name, nlen, "upgrade") ||
                    name_is(name, nlen, "service-worker") ||
                    (name_is(name, nlen, "connection") && !(vlen == 10 && strncasecmp(v, "keep-alive", 10) == 0) &&
                     !(vlen == 5 && strncasecmp(v, "close", 5) == 0)))
                        goto daemon;
                if (name_is(name, nlen, "connection") && vlen == 5)
                        close = true;
                if (name_is(name, nlen, "host"))
                        hosts++;
                if (hdrs->n >= CTL_MAX_HEADERS || ctl_hdrs_addn(hdrs, name, nlen, v, vlen) < 0)
                        goto daemon;
                p += 2;
        }
        if (hosts != 1)
                goto daemon;
        *ret = (struct ctl_fast_head){.len = len, .target = t, .target_len = tlen, .close = close};
        return CTL_FAST_OURS;
daemon:
        ctl_hdrs_free(hdrs);
        *hdrs = (struct ctl_hdrs){0};
        return CTL_FAST_DAEMON;
}

/* ---- connections ---- */

enum conn_state {
        C_IDLE,                    /* waiting for a head */
        C_PROXY,                   /* its request is with the organism */
        C_WRITE,                   /* its answer is going out */
};

struct fconn {
        struct ctl_fast *f;
        int fd;
        socklen_t salen;
        struct sockaddr_storage sa;
        uint64_t id;               /* in ctl.conns */
        struct ctl_loop_watch w;
        enum conn_state state;
        bool rx, tx, timed_out, stop; /* what the loop told since the last step */
        bool px_due;               /* the proxy's wait ended */
        bool ended;                /* the client closed its side, or the socket was cut */
        bool queued;
        struct fconn *next_queued;
        struct fconn *prev, *next; /* every connection here */
        unsigned peeks;
        size_t head_len;           /* C_PROXY, C_WRITE: the head still in the socket (0: read) */
        bool close_after;          /* the client asked for "Connection: close" */
        struct ctl_req q;          /* the request (its strings and headers) */
        struct ctl_proxy *px;
        struct buf out;            /* the answer's head... */
        const char *body;          /* ...and body (in px) */
        size_t body_len, sent;     /* of both, in order */
};

struct ctl_fast {
        struct ctl *c;
        struct fconn *conns;
        struct fconn *queue, **queue_tail;
};

static void enqueue(struct fconn *fc) {
        if (fc->queued)
                return;
        fc->queued = true;
        fc->next_queued = NULL;
        *fc->f->queue_tail = fc; /* in the order the loop saw them */
        fc->f->queue_tail = &fc->next_queued;
}

static void req_clear(struct ctl_req *q) {
        free(q->uri);
        free(q->path);
        free(q->query);
        ctl_hdrs_free(&q->hdrs);
        q->uri = q->path = q->query = NULL;
        q->hdrs = (struct ctl_hdrs){0};
}

/* Leaves the list and the loop; the socket stays open. */
static void conn_detach(struct fconn *fc) {
        struct ctl_fast *f = fc->f;
        ctl_loop_unwatch(f->c->loop, &fc->w);
        ctl_loop_forget(f->c->loop, fc->fd);
        ctl_conns_close(f->c->conns, fc->id);
        if (fc->prev)
                fc->prev->next = fc->next;
        else
                f->conns = fc->next;
        if (fc->next)
                fc->next->prev = fc->prev;
        if (fc->queued) /* (ctl_fast_run takes a connection off the queue before its step) */
                for (struct fconn **pp = &f->queue; *pp; pp = &(*pp)->next_queued)
                        if (*pp == fc) {
                                if (!(*pp = fc->next_queued))
                                        f->queue_tail = pp;
                                break;
                        }
        req_clear(&fc->q);
        buf_free(&fc->out);
}

static void conn_close(struct fconn *fc) {
        conn_detach(fc);
        ctl_proxy_free(fc->px);
        close(fc->fd);
        free(fc);
}

/* The connection goes to libmicrohttpd as it is, with its request (px,
 * when it was sent) parked for it. */
static void conn_hand(struct fconn *fc) {
        struct ctl *c = fc->f->c;
        int fd = fc->fd;
        struct ctl_proxy *px = TAKE_PTR(fc->px);
        bool parked = px && ctl_proxy_park(c, fd, px, "GET", fc->q.uri) >= 0;
        conn_detach(fc);
        if (!ctl_loop_daemon_add(c->loop, fd, (const struct sockaddr *)&fc->sa, fc->salen) && parked)
                ctl_proxy_free(ctl_proxy_unpark(c, fd));
        free(fc);
}

static void px_ready_cb(void *userdata) {
        struct fconn *fc = userdata;
        fc->px_due = true;
        enqueue(fc);
}

static void conn_ready(struct ctl_loop_watch *w, int why) {
        struct fconn *fc = (struct fconn *)((char *)w - offsetof(struct fconn, w));
        if (why == CTL_LOOP_STOP)
                fc->stop = true;
        else if (why == CTL_LOOP_DEADLINE)
                fc->timed_out = true;
        else {
                if (w->events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                        fc->rx = true;
                if (w->events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                        fc->ended = true;
                if (w->events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
                        fc->tx = true;
        }
        enqueue(fc);
}

/* Fills fc->q from a head of ours; false: the daemon decides it. */
static bool request_of(struct fconn *fc, const struct ctl_fast_head *h) {
        struct ctl *c = fc->f->c;
        struct ctl_req *q = &fc->q;
        q->uri = strndup(h->target, h->target_len);
        if (!q->uri)
                return false;
        const char *qm = strchr(q->uri, '?');
        q->path = qm ? strndup(q->uri, (size_t)(qm - q->uri)) : strdup(q->uri);
        if (!q->path || (qm && !(q->query = strdup(qm + 1))))
                return false;
        /* As server.c's begin(): anything it would answer itself is its. */
        if (!ctl_target_is_clean(q->uri) || ctl_path_classify(q->path) != CTL_PATH_ORGANISM ||
            !ctl_host_allowed(ctl_req_header(q, "Host"), c->allowed_hosts) ||
            (c->control_host && ctl_req_on_control_host(q)))
                return false;
        return true;
}

static void conn_write(struct fconn *fc);

/* The answer's head is in (or will not come): sent from here, or the
 * connection goes to the daemon with it. */
static void conn_answer(struct fconn *fc) {
        fc->out.len = 0;
        int r = ctl_proxy_fast_answer(&fc->q, fc->px, fc->close_after, &fc->out, &fc->body, &fc->body_len);
        if (r <= 0) {
                conn_hand(fc);
                return;
        }
        /* The head was peeked at: read it now (it is all there, and ours). */
        char sink[CTL_FRONT_PEEK];
        ssize_t k;
        do
                k = recv(fc->fd, sink, fc->head_len, MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k != (ssize_t)fc->head_len) {
                conn_close(fc);
                return;
        }
        fc->head_len = 0;
        fc->sent = 0;
        fc->state = C_WRITE;
        conn_write(fc);
}

static void conn_head(struct fconn *fc);

static void conn_write(struct fconn *fc) {
        size_t total = fc->out.len + fc->body_len;
        while (fc->sent < total) {
                struct iovec iov[2];
                int n = 0;
                if (fc->sent < fc->out.len)
                        iov[n++] = (struct iovec){fc->out.data + fc->sent, fc->out.len - fc->sent};
                size_t bpos = fc->sent > fc->out.len ? fc->sent - fc->out.len : 0;
                if (fc->body_len > bpos)
                        iov[n++] = (struct iovec){(char *)fc->body + bpos, fc->body_len - bpos};
                struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
                ssize_t k = sendmsg(fc->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !fc->timed_out) {
                        fc->tx = false;
                        fc->w.deadline_ms = now_ms() + WRITE_TIMEOUT_MS;
                        if (ctl_loop_want(fc->f->c->loop, &fc->w, 0) < 0)
                                conn_close(fc);
                        return; /* the next EPOLLOUT goes on */
                }
                if (k <= 0) {
                        conn_close(fc);
                        return;
                }
                fc->sent += (size_t)k;
                fc->timed_out = false;
                fc->w.deadline_ms = 0;
        }
        /* Sent: the request is over. */
        if (fc->close_after) {
                conn_close(fc);
                return;
        }
        ctl_proxy_free(TAKE_PTR(fc->px));
        req_clear(&fc->q);
        buf_free(&fc->out);
        fc->body = NULL;
        fc->body_len = fc->sent = 0;
        fc->w.deadline_ms = 0;
        (void)ctl_loop_want(fc->f->c->loop, &fc->w, EPOLLIN | EPOLLRDHUP);
        ctl_conns_request_done(fc->f->c->conns, fc->id, now_ms());
        fc->state = C_IDLE;
        fc->peeks = 0;
        if (fc->rx) /* bytes came while it was busy: perhaps the next head */
                conn_head(fc);
}

/* Looks at what the client sent: a head of ours starts its request. */
static void conn_head(struct fconn *fc) {
        fc->rx = false;
        char buf[CTL_FRONT_PEEK];
        ssize_t k;
        do
                k = recv(fc->fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return;
        if (k <= 0) { /* gone (or cut by the head deadline) */
                conn_close(fc);
                return;
        }
        struct ctl_fast_head h;
        bool full = (size_t)k == sizeof buf || ++fc->peeks >= PEEKS_MAX;
        enum ctl_fast_verdict v = ctl_fast_parse(buf, (size_t)k, full, &h, &fc->q.hdrs);
        if (v == CTL_FAST_WAIT) {
                if (fc->ended) /* the rest of this head will never come (a cut leaves its start readable) */
                        conn_close(fc);
                return;
        }
        if (v == CTL_FAST_DAEMON || !request_of(fc, &h)) {
                conn_hand(fc);
                return;
        }
        ctl_conns_head_done(fc->f->c->conns, fc->id);
        fc->head_len = h.len;
        fc->close_after = h.close;
        if (ctl_proxy_fast_start(&fc->q, px_ready_cb, fc, &fc->px) < 0) {
                conn_hand(fc); /* busy, or no organism: the daemon says so */
                return;
        }
        fc->state = C_PROXY;
        fc->px_due = false;
        if (ctl_proxy_fast_step(fc->px) == 0)
                conn_answer(fc);
}

static void conn_step(struct fconn *fc, bool stopping) {
        if (stopping || fc->stop) {
                conn_close(fc);
                return;
        }
        switch (fc->state) {
        case C_IDLE:
                if (fc->rx)
                        conn_head(fc);
                break;
        case C_PROXY:
                if (fc->px_due) {
                        fc->px_due = false;
                        if (ctl_proxy_fast_step(fc->px) == 0)
                                conn_answer(fc);
                }
                break;
        case C_WRITE:
                if (fc->tx || fc->timed_out)
                        conn_write(fc);
                break;
        }
}

void ctl_fast_run(void *userdata, bool stopping) {
        struct ctl_fast *f = ((struct ctl *)userdata)->fast;
        while (f->queue) {
                struct fconn *fc = f->queue;
                if (!(f->queue = fc->next_queued))
                        f->queue_tail = &f->queue;
                fc->queued = false;
                conn_step(fc, stopping);
        }
        while (stopping && f->conns)
                conn_close(f->conns);
}

void ctl_fast_take(void *userdata, int fd, const struct sockaddr *sa, socklen_t len) {
        struct ctl *c = userdata;
        struct ctl_fast *f = c->fast;
        struct fconn *fc = calloc(1, sizeof *fc);
        if (!fc || len > sizeof fc->sa) {
                free(fc);
                close(fd);
                return;
        }
        *fc = (struct fconn){.f = f, .fd = fd, .salen = len, .out = BUF_INIT(CTL_PROXY_MAX_HEAD * 2)};
        memcpy(&fc->sa, sa, len);
        struct ctl_client client;
        bool capped = ctl_capped_client(c, sa, len, &client);
        int r = ctl_conns_open(c->conns, capped ? &client : NULL, fd, now_ms(), &fc->id);
        if (r < 0) {
                log_debug("no entry left for a connection: closing it");
                close(fd);
                free(fc);
                return;
        }
        ctl_conns_log(c, r, capped ? &client : NULL);
        fc->q = (struct ctl_req){.ctl = c, .kind = CTL_REQ_PROXY, .conn_id = fc->id, .loop = c->loop,
                                 .method = (char *)"GET", .body_kind = CTL_BODY_NONE};
        ctl_peer_ip(sa, fc->q.client_ip);
        fc->w = (struct ctl_loop_watch){.ready = conn_ready, .fd = fd, .want = EPOLLIN | EPOLLRDHUP};
        if (ctl_loop_watch(c->loop, &fc->w) < 0) {
                ctl_conns_close(c->conns, fc->id);
                close(fd);
                free(fc);
                return;
        }
        fc->next = f->conns;
        if (f->conns)
                f->conns->prev = fc;
        f->conns = fc;
        fc->rx = true; /* the front saw its head come */
        enqueue(fc);
}

int ctl_fast_new(struct ctl *c, struct ctl_fast **ret) {
        struct ctl_fast *f = calloc(1, sizeof *f);
        if (!f)
                return -ENOMEM;
        f->c = c;
        f->queue_tail = &f->queue;
        *ret = f;
        return 0;
}

void ctl_fast_free(struct ctl_fast *f) {
        if (!f)
                return;
        while (f->conns)
                conn_close(f->conns);
        free(f);
}
