/* proxy.c — reverse proxy of everything outside /_seed to the live organism
 * through its bridge's Unix socket. The request body and the response body
 * are streamed, the request body framed by the kernel (never the client's
 * headers); the header policy lives in proxy-policy.c. At most
 * ctl.proxy_limit requests are proxied at once (the proxied pool of
 * conns.h; 503 "My body is busy" past that), and connecting to the organism gives up after 5 seconds, so a hung
 * organism or a flood of / leaves connections for /_seed.
 *
 * Upstream connections are kept alive and pooled (upstream-pool.h): a
 * request that can safely be sent twice — GET, HEAD or OPTIONS without a
 * body — takes an idle connection to its socket when there is one, and is
 * sent once more on a new connection if the reused one turns out closed
 * before any byte of an answer (the app closed it while idle). Any other
 * request gets a new connection of its own, closed after it. A connection
 * goes back to the pool only when its answer was read to the end of its
 * framing, with nothing left over, and both sides allowed keep-alive; one
 * whose client went away mid-answer, or that failed, is closed — so an
 * answer can never reach another client.
 *
 * The response path: read_head() (the head, parsed and filtered by
 * proxy-policy.c), then body_read() (the organism's body bytes, decoded
 * from its framing, which also decides whether the connection can be
 * reused), then proxy_read() (what libmicrohttpd sends to the client). A
 * step that rewrites the body (e.g. injecting into HTML) belongs between
 * the last two; it must leave body_read() reading the upstream to its end.
 *
 * Two ways to run it. On the large daemon (a thread per connection) every
 * step blocks on the organism's socket. On the daemon of small pools
 * (loop.h: one thread for every connection) nothing blocks: the socket is
 * non-blocking and watched, and where a step would wait — a connect whose
 * backlog is full, a head or body the socket does not take yet, an answer
 * not in yet — the connection is suspended with a deadline and resumed when
 * the socket is ready, and the step runs again (px->loop). The same
 * functions read, parse and decode either way; only recv_some/flush_out
 * tell "would block" apart (px->blocked). */
#include "ctl/mhd.h"
#include "ctl/loop.h"
#include "ctl/guard.h"
#include "ctl/inject.h"
#include "ctl/pages.h"
#include "ctl/proxy-policy.h"
#include "base/log.h"
#include "organism/organism.h"

#include <poll.h>
#include <sys/epoll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>

#define UPSTREAM_TIMEOUT_S 300
#define UPSTREAM_CONNECT_TIMEOUT_S 5  /* an organism that stops accepting */
#define READ_BLOCK (16 * 1024)
#define MAX_INTERIM 8             /* 1xx responses skipped before the real one */
#define PROXY_BUF (CTL_PROXY_MAX_HEAD + READ_BLOCK)
#define OUT_MAX (64 * 1024)       /* async: request bytes held for a socket that takes no more */
#define CONNECT_RETRY_MS 10       /* async: a full backlog is tried again this often */
#define SPARES_MAX 16             /* async: proxy states kept for reuse */

/* Async: how far the request to the organism got (px->loop). */
enum px_stage {
        PX_CONNECTING,            /* no connection yet (a full backlog: tried again) */
        PX_SENDING,               /* the head is going out (px->out) */
        PX_SENT,                  /* the head is out; the body follows */
        PX_ENDED,                 /* all of the request handed over; the answer's head is read */
};

struct ctl_proxy {
        struct ctl *ctl;
        int fd;
        bool head_request;
        bool has_slot;            /* its connection is in the proxied pool (ctl.conns)... */
        uint64_t conn_id, ticket; /* ...as this connection and request */
        enum ctl_body req_body;
        uint64_t req_left;        /* CTL_BODY_LENGTH: body bytes still to send */
        bool upload_failed;
        bool body_mismatch;       /* more body than its framing said: never forwarded */
        struct ctl_upstream up;
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* the socket fd is connected to */
        bool replayable;          /* GET/HEAD/OPTIONS without a body: pooled, sent again once */
        bool reused;              /* fd came from the pool */
        bool up_done;             /* the answer was read to the end of its framing */
        struct buf head;          /* the request head sent (kept while it may be sent again)... */
        size_t head_pos;          /* ...async: sent up to here */
        size_t len, pos;          /* unread bytes are buf[pos, len) */
        uint64_t remaining;
        struct ctl_chunked ch;
        /* The kernel's script tags (tag: the badge's, the preview bar's or
         * both; inject.h) go into this answer: what is held back while they
         * are sent is pending[pend_pos, pend_len). */
        bool inject;
        bool preview;             /* sent to the owner's preview: its pages get the bar */
        const char *tag;          /* static */
        struct ctl_inject inj;
        char *pending;
        size_t pend_len, pend_pos;

        /* The asynchronous path (NULL loop: the blocking one). */
        struct ctl_loop *loop;
        struct MHD_Connection *conn;
        struct ctl_loop_watch w;  /* the socket, watched while fd >= 0 */
        bool watched, suspended;
        bool blocked;             /* the last socket call would have waited */
        bool readable;            /* the socket may have bytes (an edge came since recv last waited) */
        bool timed_out;           /* a wait passed its deadline */
        bool stopped;             /* the loop stopped: end now */
        enum px_stage stage;
        bool request_in;          /* libmicrohttpd holds the whole request (its final call came) */
        int interim;              /* 1xx answers skipped */
        int64_t connect_until;    /* PX_CONNECTING gives up then */
        struct buf out;           /* request body bytes not yet taken by the socket... */
        size_t out_pos;           /* ...from here */
        /* The fast path's (fast.h; conn NULL): told when a wait ends, and
         * the answer's head once it is in (answer_r: 0, or why there is
         * none) — kept when the request is parked for the daemon. */
        void (*on_ready)(void *userdata);
        void *ready_userdata;
        bool answered;
        int answer_r;
        char *parked_as;          /* "<method> <target>" while parked */
        struct ctl_proxy *next_spare; /* kept for reuse: ctl.px_spare's list */
        char buf[];               /* PROXY_BUF bytes: the response head, then body reads */
};

void ctl_upstream_register(struct ctl *c, int fd) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < ARRAY_SIZE(c->upstream); i++)
                if (c->upstream[i] < 0) {
                        c->upstream[i] = fd;
                        break;
                }
        if (c->stopping)
                shutdown(fd, SHUT_RDWR);
        pthread_mutex_unlock(&c->lock);
}

void ctl_upstream_unregister(struct ctl *c, int fd) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < ARRAY_SIZE(c->upstream); i++)
                if (c->upstream[i] == fd)
                        c->upstream[i] = -1;
        pthread_mutex_unlock(&c->lock);
}

/* Moves q's connection to the proxied pool (conns.h); false when it is full. */
static bool proxy_slot_take(struct ctl_req *q, struct ctl_proxy *px) {
        struct ctl *c = q->ctl;
        bool report = false;
        px->has_slot = ctl_conns_proxy_begin(c->conns, q->conn_id, &px->ticket, &report) >= 0;
        px->conn_id = q->conn_id;
        if (report)
                log_warn("proxy: %u requests to the organism are in flight, the most allowed; "
                         "answering 503 until one ends (/_seed keeps connections of its own)",
                         c->proxy_limit);
        return px->has_slot;
}

/* Back to its pool; a connection of a request that ended long ago (closed,
 * or carrying another request by now) is left alone (the ticket). */
static void proxy_slot_put(struct ctl_proxy *px) {
        int report = ctl_conns_proxy_end(px->ctl->conns, px->conn_id, px->ticket);
        if (report)
                ctl_conns_log(px->ctl, report, NULL);
        px->has_slot = false;
}

/* Whether fd may carry another request: the answer read to its end with
 * nothing left over, keep-alive on both sides, and nothing of the request
 * body outstanding. */
static bool proxy_reusable(const struct ctl_proxy *px) {
        return px->replayable && px->up_done && px->up.keep_alive && px->pos == px->len && !px->upload_failed;
}

/* Blocking and non-blocking sockets are pooled apart. */
static struct ctl_upool *pool_of(struct ctl_proxy *px) {
        return px->loop ? &px->ctl->apool : &px->ctl->pool;
}

static void unwatch(struct ctl_proxy *px) {
        if (px->watched)
                ctl_loop_unwatch(px->loop, &px->w);
        px->watched = false;
}

/* Done with fd: back to the pool, or closed. */
static void upstream_release(struct ctl_proxy *px) {
        if (px->fd < 0)
                return;
        unwatch(px);
        if (!px->loop)
                ctl_upstream_unregister(px->ctl, px->fd);
        if (proxy_reusable(px)) {
                ctl_upool_put(pool_of(px), px->path, px->fd);
        } else {
                if (px->loop)
                        ctl_loop_forget(px->loop, px->fd);
                close(px->fd);
        }
        px->fd = -1;
}

void ctl_proxy_free(struct ctl_proxy *px) {
        if (!px)
                return;
        unwatch(px); /* the socket's, or a connect's timer */
        if (px->has_slot)
                proxy_slot_put(px);
        upstream_release(px);
        ctl_upstream_done(&px->up);
        buf_free(&px->head);
        buf_free(&px->out);
        free(px->pending);
        free(px->parked_as);
        struct ctl *c = px->ctl;
        if (px->loop && c->n_px_spare < SPARES_MAX) {
                /* Kept for the loop's next request: no 80 KiB malloc and
                 * free per request (the loop's thread only). */
                px->next_spare = c->px_spare;
                c->px_spare = px;
                c->n_px_spare++;
                return;
        }
        free(px);
}

void ctl_proxy_spares_free(struct ctl *c) {
        while (c->px_spare) {
                struct ctl_proxy *px = c->px_spare;
                c->px_spare = px->next_spare;
                free(px);
        }
        c->n_px_spare = 0;
}

/* A proxy state (its buffer not zeroed: only [0, len) is read). */
static struct ctl_proxy *proxy_new(struct ctl_req *q) {
        struct ctl *c = q->ctl;
        if (q->loop && c->px_spare) {
                struct ctl_proxy *px = c->px_spare;
                c->px_spare = px->next_spare;
                c->n_px_spare--;
                return px;
        }
        return malloc(sizeof(struct ctl_proxy) + PROXY_BUF);
}

static void proxy_free_cb(void *cls) {
        ctl_proxy_free(cls);
}

static int send_all(int fd, const void *data, size_t n) {
        const char *p = data;
        while (n > 0) {
                ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

/* Async: -EAGAIN sets px->blocked (the caller waits for the socket). */
static ssize_t recv_some(struct ctl_proxy *px, void *data, size_t n) {
        px->blocked = false;
        for (;;) {
                ssize_t k = recv(px->fd, data, n, 0);
                if (k >= 0 || errno != EINTR) {
                        if (k > 0)
                                px->timed_out = false; /* a deadline that passed as bytes came */
                        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && px->loop) {
                                px->blocked = true;
                                px->readable = false;
                                return -EAGAIN;
                        }
                        return k < 0 ? -errno : k;
                }
        }
}

/* ---- answers of our own ---- */

/* The headers of the kernel's own answers on the organism's origins: on the
 * admin origin (q's ctl_req_admin_framer) the control plane may frame them,
 * so an admin screen whose app is down says so inside its frame. */
static int organism_headers(const struct ctl_req *q, struct ctl_hdrs *h) {
        _cleanup_free_ char *framer = NULL, *framed = NULL;
        int r = ctl_req_admin_framer(q, &framer);
        if (r >= 0 && framer)
                r = ctl_csp_framed_by(framer, &framed);
        if (r < 0)
                return r;
        if ((r = ctl_hdrs_add(h, "Content-Security-Policy", framed ? framed : CTL_CSP)) < 0)
                return r;
        static const char *const hs[][2] = {
                {"Cross-Origin-Opener-Policy", "unsafe-none"},
                {"X-Content-Type-Options", "nosniff"},
                {"Referrer-Policy", "no-referrer"},
                {"Cache-Control", "no-store"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(hs) && r >= 0; i++)
                r = ctl_hdrs_add(h, hs[i][0], hs[i][1]);
        return r;
}

static const char *body_state(struct ctl *c) {
        if (!c->organism)
                return "not running";
        enum organism_state s = organism_state(c->organism);
        if (s == ORGANISM_RUNNING)
                return "not answering";
        return organism_state_name(s);
}

static enum MHD_Result queue_own(struct ctl_req *q, struct MHD_Connection *conn, int status,
                                 const char *heading, const char *text, bool refresh,
                                 bool close) {
        struct ctl_resp resp = {0};
        char *html = NULL;
        int r;
        q->kind = CTL_REQ_DONE;
        if (status == 503) {
                r = ctl_page_body_state(q->ctl->seed_name, heading, &html);
        } else
                r = ctl_page(heading, heading, text, 0, &html);
        if (r < 0)
                return MHD_NO;
        ctl_resp_take(&resp, status, "text/html; charset=utf-8", html);
        r = organism_headers(q, &resp.hdrs);
        if (r >= 0 && refresh)
                r = ctl_hdrs_add(&resp.hdrs, "Refresh", "5");
        if (r >= 0 && close) /* frees the connection (and its thread) for someone else */
                r = ctl_hdrs_add(&resp.hdrs, "Connection", "close");
        if (r < 0) {
                ctl_resp_done(&resp);
                return MHD_NO;
        }
        return ctl_queue(conn, &resp);
}

static enum MHD_Result queue_unavailable(struct ctl_req *q, struct MHD_Connection *conn) {
        return queue_own(q, conn, 503, body_state(q->ctl), NULL, true, false);
}

static enum MHD_Result queue_busy(struct ctl_req *q, struct MHD_Connection *conn) {
        return queue_own(q, conn, 503, "busy", NULL, true, true);
}

/* A 5xx of the live organism (never the owner's preview of a candidate). */
static void count_5xx(struct ctl_req *q, const struct ctl_proxy *px, int status) {
        if (status >= 500 && status <= 599 && q->ctl->on_5xx && !px->preview)
                q->ctl->on_5xx(q->ctl->on_5xx_userdata, q->method, q->path, status);
}

static enum MHD_Result queue_bad_gateway(struct ctl_req *q, struct MHD_Connection *conn,
                                         int status, const char *why) {
        count_5xx(q, q->px, status);
        ctl_proxy_free(TAKE_PTR(q->px));
        log_limited(LOG_WARN, q->client_ip, "proxy: %s (%s %s, client %s)", why, q->method, q->path, q->client_ip);
        return queue_own(q, conn, status, status == 504 ? "My body took too long to answer"
                                                       : "My body gave an answer I cannot pass on",
                         why, false, false);
}

/* ---- request ---- */

/* Async: the loop calls this when the socket is ready or a deadline
 * passed; the connection, if it waits, runs its step again. Never frees. */
static void px_ready(struct ctl_loop_watch *w, int why) {
        struct ctl_proxy *px = (struct ctl_proxy *)((char *)w - offsetof(struct ctl_proxy, w));
        if (why == CTL_LOOP_DEADLINE)
                px->timed_out = true;
        if (why == CTL_LOOP_IO && (w->events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
                px->readable = true;
        if (why == CTL_LOOP_STOP) {
                px->stopped = true;
                px->watched = false; /* the loop let go of it */
        }
        if (px->suspended) {
                px->suspended = false;
                w->deadline_ms = 0;
                if (px->conn) {
                        MHD_resume_connection(px->conn);
                        ctl_loop_resumed(px->loop);
                } else if (px->on_ready)
                        px->on_ready(px->ready_userdata);
        }
}

/* Async: the connection waits (suspended) until the socket is ready or
 * until deadline. */
static void px_wait(struct ctl_proxy *px, int64_t deadline) {
        px->timed_out = false;
        px->w.deadline_ms = deadline;
        if (!px->suspended) {
                px->suspended = true;
                if (px->conn)
                        MHD_suspend_connection(px->conn);
        }
}

/* px->fd is ours: registered for ctl_stop (blocking) or watched (async). */
static int upstream_adopt(struct ctl_proxy *px) {
        if (!px->loop) {
                ctl_upstream_register(px->ctl, px->fd);
                return 0;
        }
        unwatch(px);
        /* Read only: a send that would block asks for writes (send_from). */
        px->w = (struct ctl_loop_watch){.ready = px_ready, .fd = px->fd, .want = EPOLLIN | EPOLLRDHUP};
        px->readable = false; /* new, or pooled and quiet: an edge comes with its first byte */
        int r = ctl_loop_watch(px->loop, &px->w);
        px->watched = r >= 0;
        return r;
}

/* A new connection to px->path. Async: -EAGAIN while the backlog is full. */
static int upstream_connect(struct ctl_proxy *px) {
        /* Never by plain path: organism_connect() refuses a swapped or foreign
         * socket, and works for any path length. */
        _cleanup_close_ int fd = -1;
        int r = organism_connect(px->path, px->loop ? -1 : UPSTREAM_CONNECT_TIMEOUT_S * 1000, &fd);
        if (r < 0)
                return r;
        struct timeval tv = {.tv_sec = UPSTREAM_TIMEOUT_S};
        if (!px->loop && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
                          setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0))
                return -errno;
        px->fd = TAKE_FD(fd);
        px->reused = false;
        return upstream_adopt(px);
}

/* Closes fd without pooling it (it failed). */
static void upstream_drop(struct ctl_proxy *px) {
        unwatch(px);
        if (px->loop)
                ctl_loop_forget(px->loop, px->fd);
        else
                ctl_upstream_unregister(px->ctl, px->fd);
        close(px->fd);
        px->fd = -1;
}

/* The owner's browser in a preview reaches the candidate; everyone else the
 * live organism. A replayable request takes an idle connection first. */
static int upstream_open(struct ctl_proxy *px, const char *preview_socket) {
        struct ctl *c = px->ctl;
        const char *path = preview_socket ? preview_socket : c->organism_socket_override;
        if (!path && c->organism)
                path = organism_socket(c->organism);
        if (strempty(path) || strlen(path) >= sizeof px->path)
                return -ENOENT;
        strcpy(px->path, path);
        if (px->replayable && ctl_upool_take(pool_of(px), px->path, &px->fd) >= 0) {
                px->reused = true;
                return upstream_adopt(px);
        }
        return px->loop ? 0 : upstream_connect(px); /* async: connects in send_head() */
}

/* The reused connection was closed under us before any answer: the same
 * request once more, on a new connection. */
static int upstream_retry(struct ctl_proxy *px) {
        upstream_drop(px);
        px->len = px->pos = 0;
        int r = upstream_connect(px);
        return r < 0 ? r : send_all(px->fd, px->head.data, px->head.len);
}

/* ---- the asynchronous request ---- */

/* Async: sends b from *pos on. 0 once all is out, -EAGAIN (px->blocked)
 * when the socket takes no more now, or -errno. */
static int send_from(struct ctl_proxy *px, const struct buf *b, size_t *pos) {
        px->blocked = false;
        while (*pos < b->len) {
                ssize_t k = send(px->fd, b->data + *pos, b->len - *pos, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        px->blocked = true;
                        int r = ctl_loop_want(px->loop, &px->w, 0); /* the edge when it takes more */
                        return r < 0 ? r : -EAGAIN;
                }
                if (k < 0)
                        return -errno;
                *pos += (size_t)k;
                px->timed_out = false;
        }
        return 0;
}

/* Async: sends what px->out holds (emptied once all is out). */
static int flush_out(struct ctl_proxy *px) {
        int r = send_from(px, &px->out, &px->out_pos);
        if (r >= 0)
                px->out.len = px->out_pos = 0;
        return r;
}

/* Async: appends to px->out (moving what is left to its start first). */
static int out_add(struct ctl_proxy *px, const void *data, size_t n) {
        if (px->out_pos > 0) {
                memmove(px->out.data, px->out.data + px->out_pos, px->out.len - px->out_pos);
                px->out.len -= px->out_pos;
                px->out_pos = 0;
        }
        return buf_append(&px->out, data, n);
}

/* Async: connects, or while the organism's backlog is full, tries again
 * every CONNECT_RETRY_MS until UPSTREAM_CONNECT_TIMEOUT_S passed (-EAGAIN:
 * the connection waits; -ETIMEDOUT at the end). */
static int px_connect(struct ctl_proxy *px) {
        unwatch(px); /* the retry's timer */
        px->timed_out = false; /* that timer's, not a wait's */
        int r = upstream_connect(px);
        if (r != -EAGAIN)
                return r;
        int64_t now = now_ms();
        if (now >= px->connect_until)
                return -ETIMEDOUT;
        px->w = (struct ctl_loop_watch){.ready = px_ready, .fd = -1};
        if ((r = ctl_loop_watch(px->loop, &px->w)) < 0)
                return r;
        px->watched = true;
        px_wait(px, now + CONNECT_RETRY_MS);
        return -EAGAIN;
}

/* Async: connects when there is no connection yet and sends the head (a
 * reused connection that turns out closed: once more on a new one). 0 once
 * the head is out, -EAGAIN while the connection waits, or -errno. */
static int send_head(struct ctl_proxy *px) {
        for (;;) {
                int r;
                switch (px->stage) {
                case PX_CONNECTING:
                        if (px->fd < 0 && (r = px_connect(px)) < 0)
                                return r;
                        px->head_pos = 0;
                        px->stage = PX_SENDING;
                        break;
                case PX_SENDING:
                        r = send_from(px, &px->head, &px->head_pos);
                        if (r == -EAGAIN && !px->timed_out) {
                                px_wait(px, now_ms() + UPSTREAM_TIMEOUT_S * 1000);
                                return r;
                        }
                        if (r < 0 && r != -EAGAIN && px->reused) {
                                upstream_drop(px);
                                px->reused = false;
                                px->stage = PX_CONNECTING;
                                break;
                        }
                        if (r < 0)
                                return r == -EAGAIN ? -ETIMEDOUT : r;
                        px->stage = PX_SENT;
                        return 0;
                default:
                        return 0;
                }
        }
}

/* Async: a piece of the request body, framed for the organism, as much as
 * the socket (and OUT_MAX) takes now; what is left stays in *n and the
 * connection waits for the socket, then libmicrohttpd hands it again. */
static void upload_async(struct ctl_proxy *px, const char *data, size_t *n) {
        int r = flush_out(px);
        if (r == -EAGAIN && px->timed_out)
                r = -ETIMEDOUT;
        if (r < 0 && r != -EAGAIN) {
                px->upload_failed = true;
                *n = 0;
                return;
        }
        size_t take = 0;
        if (px->out.len - px->out_pos < OUT_MAX) {
                take = *n < OUT_MAX ? *n : OUT_MAX;
                char line[32];
                int k = snprintf(line, sizeof line, "%zx\r\n", take);
                if (px->req_body == CTL_BODY_CHUNKED)
                        r = out_add(px, line, (size_t)k);
                if (r >= 0)
                        r = out_add(px, data, take);
                if (r >= 0 && px->req_body == CTL_BODY_CHUNKED)
                        r = out_add(px, "\r\n", 2);
                if (r >= 0 && px->req_body == CTL_BODY_LENGTH)
                        px->req_left -= take;
                if (r >= 0)
                        r = flush_out(px);
                if (r < 0 && r != -EAGAIN) {
                        px->upload_failed = true;
                        *n = 0;
                        return;
                }
        }
        *n -= take;
        if (*n > 0)
                px_wait(px, now_ms() + UPSTREAM_TIMEOUT_S * 1000);
}

/* A proxy state for q (its buffer not zeroed), before its slot is taken. */
static struct ctl_proxy *proxy_init(struct ctl_req *q, struct MHD_Connection *conn) {
        struct ctl_proxy *px = proxy_new(q);
        if (!px)
                return NULL;
        *px = (struct ctl_proxy){.ctl = q->ctl, .fd = -1, .head = BUF_INIT(CTL_PROXY_MAX_HEAD * 4), .loop = q->loop,
                                 .conn = conn, .out = BUF_INIT(2 * OUT_MAX + 64),
                                 .connect_until = now_ms() + UPSTREAM_CONNECT_TIMEOUT_S * 1000};
        px->head_request = streq(q->method, "HEAD");
        px->replayable = q->body_kind == CTL_BODY_NONE &&
                         (streq(q->method, "GET") || px->head_request || streq(q->method, "OPTIONS"));
        return px;
}

/* Opens px's way to the organism (async: connected when the head is sent)
 * and builds the request head. < 0: the organism cannot be reached. */
static int proxy_prepare(struct ctl_req *q, struct ctl_proxy *px) {
        struct ctl *c = q->ctl;
        int r = -EHOSTDOWN;
        _cleanup_free_ char *preview = ctl_preview_socket_for(c, q);
        px->preview = preview != NULL;
        if (preview || c->organism_socket_override || !c->organism || organism_state(c->organism) == ORGANISM_RUNNING)
                r = upstream_open(px, preview);
        if (r == -ETIMEDOUT)
                log_limited(LOG_WARN, "", "proxy: the organism did not accept a connection within %d seconds",
                            UPSTREAM_CONNECT_TIMEOUT_S);
        if (r < 0) {
                if (r != -ETIMEDOUT)
                        log_limited(LOG_DEBUG, "", "proxy: organism not reachable: %s", strerror(-r));
                return r;
        }
        char preview_cookie[64];
        if ((r = ctl_preview_cookie_name(c, preview_cookie, sizeof preview_cookie)) < 0)
                return r;
        struct ctl_proxy_req pr = {
                .method = q->method,
                .target = q->uri,
                .host = ctl_req_header(q, "Host"),
                .client_ip = q->client_ip,
                .cookie_name = c->cookie_name,
                .preview_cookie_name = preview_cookie,
                .cli_token = c->cli_token,
                /* server.c checked the framing (ctl_request_framing): the
                 * organism gets the framing libmicrohttpd reads the body by,
                 * never the client's headers. */
                .body = q->body_kind,
                .body_len = q->body_len,
                .keep_alive = px->replayable,
        };
        px->req_body = pr.body;
        px->req_left = pr.body_len;
        return ctl_proxy_request_head(&q->hdrs, &pr, &px->head);
}

/* The request the fast path parked on this connection (fast.h), if it is
 * q's: its answer is already in, or on its way. */
static struct ctl_proxy *unpark_for(struct ctl_req *q, struct MHD_Connection *conn) {
        if (!q->loop || q->ctl->n_parked == 0)
                return NULL;
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ctl_proxy *px = fi ? ctl_proxy_unpark(q->ctl, fi->connect_fd) : NULL;
        if (!px)
                return NULL;
        size_t ml = strlen(q->method);
        if (strncmp(px->parked_as, q->method, ml) != 0 || px->parked_as[ml] != ' ' ||
            !streq(px->parked_as + ml + 1, q->uri)) {
                ctl_proxy_free(px); /* another request than the one parked: that one is asked anew */
                return NULL;
        }
        px->conn = conn;
        return px;
}

enum MHD_Result ctl_proxy_begin(struct ctl_req *q, struct MHD_Connection *conn) {
        if (ctl_req_header(q, "Service-Worker")) {
                struct ctl_resp resp = {0};
                q->kind = CTL_REQ_DONE;
                if (ctl_resp_set(&resp, 403, "text/plain; charset=utf-8",
                                 "Service workers are not allowed: one at / would also control /_seed.\n") < 0 ||
                    organism_headers(q, &resp.hdrs) < 0) {
                        ctl_resp_done(&resp);
                        return MHD_NO;
                }
                return ctl_queue(conn, &resp);
        }

        struct ctl_proxy *px = unpark_for(q, conn);
        bool parked = px != NULL;
        if (!px && !(px = proxy_init(q, conn)))
                return MHD_NO;
        if (!proxy_slot_take(q, px)) {
                ctl_proxy_free(px);
                return queue_busy(q, conn);
        }
        q->px = px;
        q->kind = CTL_REQ_PROXY;
        if (parked)
                return MHD_YES; /* sent already; ctl_proxy_finish takes its answer */

        int r = proxy_prepare(q, px);
        if (r >= 0 && px->loop) {
                r = send_head(px);
                if (r == -EAGAIN)
                        return MHD_YES; /* it waits; libmicrohttpd calls again (ctl_proxy_finish) */
                if (r == -ETIMEDOUT && px->stage == PX_CONNECTING)
                        log_limited(LOG_WARN, "", "proxy: the organism did not accept a connection within %d seconds",
                                    UPSTREAM_CONNECT_TIMEOUT_S);
        } else if (r >= 0)
                r = send_all(px->fd, px->head.data, px->head.len);
        if (r < 0 && r != -ENOMEM && px->reused && !px->loop)
                r = upstream_retry(px);
        if (r >= 0 && !px->reused)
                buf_free(&px->head); /* never sent again */
        if (r < 0) {
                ctl_proxy_free(TAKE_PTR(q->px));
                return queue_unavailable(q, conn);
        }
        return MHD_YES;
}

enum MHD_Result ctl_proxy_upload(struct ctl_req *q, const char *data, size_t *size) {
        struct ctl_proxy *px = q->px;
        size_t n = *size;
        *size = 0;
        if (px && px->stopped)
                return MHD_NO;
        if (!px || px->upload_failed)
                return MHD_YES; /* keep reading; the answer decides */
        int r = 0;
        if (px->req_body == CTL_BODY_NONE ||
            (px->req_body == CTL_BODY_LENGTH && n > px->req_left)) {
                /* Bytes the head did not announce would reach the organism
                 * unframed; libmicrohttpd should never hand us any. */
                px->upload_failed = px->body_mismatch = true;
                return MHD_YES;
        }
        if (px->loop) {
                *size = n;
                /* The head is out (PX_SENT): while it waits, its connection
                 * is suspended in libmicrohttpd's first call, which is made
                 * again at each resume; the body is handed only after. */
                upload_async(px, data, size);
                return MHD_YES;
        }
        if (px->req_body == CTL_BODY_CHUNKED) {
                char line[32];
                int k = snprintf(line, sizeof line, "%zx\r\n", n);
                r = send_all(px->fd, line, (size_t)k);
                if (r >= 0)
                        r = send_all(px->fd, data, n);
                if (r >= 0)
                        r = send_all(px->fd, "\r\n", 2);
        } else {
                r = send_all(px->fd, data, n);
                px->req_left -= n;
        }
        if (r < 0)
                px->upload_failed = true;
        return MHD_YES;
}

/* ---- response ---- */

/* Reads the response head (skipping 1xx). 0, -E2BIG (too large), -EBADMSG,
 * -ETIMEDOUT/-EAGAIN (too slow) or another -errno. */
static int read_head(struct ctl_proxy *px) {
        for (; px->interim <= MAX_INTERIM; px->interim++) {
                size_t end;
                while ((end = ctl_proxy_head_end(px->buf + px->pos, px->len - px->pos)) == 0) {
                        if (px->len - px->pos >= CTL_PROXY_MAX_HEAD)
                                return -E2BIG;
                        if (px->pos > 0) {
                                memmove(px->buf, px->buf + px->pos, px->len - px->pos);
                                px->len -= px->pos;
                                px->pos = 0;
                        }
                        ssize_t k = recv_some(px, px->buf + px->len, PROXY_BUF - px->len);
                        if (k < 0)
                                return (int)k;
                        if (k == 0) /* closed: before any byte, the organism went away */
                                return px->interim == 0 && px->len == 0 ? -ECONNRESET : -EBADMSG;
                        px->len += (size_t)k;
                }
                ctl_upstream_done(&px->up);
                int r = ctl_proxy_parse_head(px->buf + px->pos, end, px->head_request, &px->up);
                if (r < 0)
                        return r;
                px->pos += end;
                if (px->up.status == 101)
                        return -EBADMSG; /* no upgrades: Upgrade was not forwarded */
                if (px->up.status >= 200)
                        return 0;
        }
        return -EBADMSG;
}

static ssize_t take_buffered(struct ctl_proxy *px, char *out, size_t max) {
        size_t n = px->len - px->pos;
        if (n > max)
                n = max;
        memcpy(out, px->buf + px->pos, n);
        px->pos += n;
        return (ssize_t)n;
}

static ssize_t read_chunked(struct ctl_proxy *px, char *out, size_t max) {
        for (;;) {
                if (px->ch.done)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (px->pos == px->len) {
                        ssize_t k = recv_some(px, px->buf, PROXY_BUF);
                        if (k <= 0)
                                return MHD_CONTENT_READER_END_WITH_ERROR;
                        px->pos = 0;
                        px->len = (size_t)k;
                }
                size_t used = 0, made = 0;
                int r = ctl_chunked_decode(&px->ch, px->buf + px->pos, px->len - px->pos, out, max,
                                           &used, &made);
                if (r < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                px->pos += used;
                px->up_done = px->ch.done;
                if (made > 0)
                        return (ssize_t)made;
        }
}

/* The organism's body, decoded from its framing: up to max bytes into out
 * (> 0), MHD_CONTENT_READER_END_OF_STREAM at its end, or
 * MHD_CONTENT_READER_END_WITH_ERROR. Sets up_done once the framing says
 * the answer is complete. */
static ssize_t body_read(struct ctl_proxy *px, char *out, size_t max) {
        switch (px->up.body) {
        case CTL_BODY_CHUNKED:
                return read_chunked(px, out, max);
        case CTL_BODY_LENGTH:
                if (px->remaining == 0)
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (max > px->remaining)
                        max = (size_t)px->remaining;
                __attribute__((fallthrough));
        case CTL_BODY_CLOSE: {
                ssize_t k = px->pos < px->len ? take_buffered(px, out, max) : recv_some(px, out, max);
                if (k < 0)
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (k == 0)
                        return px->up.body == CTL_BODY_CLOSE ? MHD_CONTENT_READER_END_OF_STREAM
                                                             : MHD_CONTENT_READER_END_WITH_ERROR;
                if (px->up.body == CTL_BODY_LENGTH) {
                        px->remaining -= (uint64_t)k;
                        px->up_done = px->remaining == 0;
                }
                return k;
        }
        case CTL_BODY_NONE:
                break;
        }
        return MHD_CONTENT_READER_END_OF_STREAM;
}

/* Holds back tail (n bytes) behind the tag; false when out of memory. */
static bool hold_with_tag(struct ctl_proxy *px, const char *tail, size_t n) {
        size_t tl = strlen(px->tag);
        px->pending = malloc(tl + n);
        if (!px->pending)
                return false;
        memcpy(px->pending, px->tag, tl);
        if (n > 0)
                memcpy(px->pending + tl, tail, n);
        px->pend_len = tl + n;
        px->pend_pos = 0;
        return true;
}

/* The organism's body with the badge's tag put in (the step between
 * body_read() and the client): the upstream is still read to its end, the
 * tag only delays bytes. */
static ssize_t inject_read(struct ctl_proxy *px, char *out, size_t max) {
        if (px->pend_pos < px->pend_len) {
                size_t n = px->pend_len - px->pend_pos < max ? px->pend_len - px->pend_pos : max;
                memcpy(out, px->pending + px->pend_pos, n);
                px->pend_pos += n;
                return (ssize_t)n;
        }
        ssize_t k = body_read(px, out, max);
        if (k == MHD_CONTENT_READER_END_OF_STREAM && ctl_inject_at_end(&px->inj)) {
                size_t at;
                (void)ctl_inject_feed(&px->inj, NULL, 0, &at);
                px->inj.done = true; /* no place in the page: the tag goes at its end */
                if (!hold_with_tag(px, NULL, 0))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                return inject_read(px, out, max);
        }
        size_t at = 0;
        if (k > 0 && ctl_inject_feed(&px->inj, out, (size_t)k, &at) == CTL_INJECT_HERE) {
                if (!hold_with_tag(px, out + at, (size_t)k - at))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (at == 0)
                        return inject_read(px, out, max);
                return (ssize_t)at;
        }
        return k;
}

static ssize_t proxy_read(void *cls, uint64_t pos, char *out, size_t max) {
        struct ctl_proxy *px = cls;
        if (max == 0)
                return 0;
        if (px->stopped)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        px->blocked = false;
        ssize_t k = px->inject ? inject_read(px, out, max) : body_read(px, out, max);
        if (k == MHD_CONTENT_READER_END_WITH_ERROR && px->blocked && !px->timed_out) {
                px_wait(px, now_ms() + UPSTREAM_TIMEOUT_S * 1000); /* nothing yet: resumed when there is */
                return 0;
        }
        if (px->up_done)
                upstream_release(px); /* to the pool now, not when the client is done */
        return k;
}

/* Async: the request's end to the organism, then the answer's head (as
 * the blocking path: a reused connection closed before any answer gets the
 * request once more on a new one). -EAGAIN while the connection waits. */
static int finish_async(struct ctl_proxy *px) {
        int r;
        if (px->answered) /* by the fast path, before it parked the request */
                return px->answer_r;
        if (px->stage < PX_SENT) { /* the once more: a request without a body */
                if ((r = send_head(px)) < 0)
                        return r;
                px->stage = PX_ENDED;
        }
        if (px->stage == PX_SENT) {
                if (px->req_body == CTL_BODY_CHUNKED && !px->upload_failed && out_add(px, "0\r\n\r\n", 5) < 0)
                        px->upload_failed = true;
                px->stage = PX_ENDED;
        }
        if (!px->upload_failed && (r = flush_out(px)) < 0) {
                if (r == -EAGAIN && !px->timed_out) {
                        px_wait(px, now_ms() + UPSTREAM_TIMEOUT_S * 1000);
                        return -EAGAIN;
                }
                px->upload_failed = true;
        }
        /* Nothing came since the socket was last drained: wait for the
         * edge rather than ask. */
        r = px->readable ? read_head(px) : -EAGAIN;
        if (r == -EAGAIN) {
                if (px->timed_out)
                        return -ETIMEDOUT;
                px_wait(px, now_ms() + UPSTREAM_TIMEOUT_S * 1000);
                return -EAGAIN;
        }
        if (px->reused && px->len == 0 && (r == -ECONNRESET || r == -EPIPE)) {
                upstream_drop(px);
                px->reused = false;
                px->stage = PX_CONNECTING;
                return finish_async(px);
        }
        return r;
}

enum MHD_Result ctl_proxy_finish(struct ctl_req *q, struct MHD_Connection *conn) {
        struct ctl_proxy *px = q->px;
        if (!px || px->stopped)
                return MHD_NO;
        int r;
        if (px->loop && !px->request_in && px->stage < PX_SENT) {
                /* libmicrohttpd calls once more after a resume in its first
                 * call, before the body: the head goes on going out. */
                r = send_head(px);
                if (r == -EAGAIN)
                        return MHD_YES;
                if (r >= 0) {
                        if (!px->reused)
                                buf_free(&px->head); /* never sent again */
                        return MHD_YES;
                }
                if (r == -ETIMEDOUT && px->stage == PX_CONNECTING)
                        log_limited(LOG_WARN, "", "proxy: the organism did not accept a connection within %d seconds",
                                    UPSTREAM_CONNECT_TIMEOUT_S);
                ctl_proxy_free(TAKE_PTR(q->px));
                return queue_unavailable(q, conn);
        }
        px->request_in = true;
        if (px->body_mismatch) {
                ctl_proxy_free(TAKE_PTR(q->px));
                log_limited(LOG_WARN, q->client_ip, "proxy: a request body did not match its framing (%s %s, client %s)",
                            q->method, q->path, q->client_ip);
                return queue_own(q, conn, 400, "Bad request",
                                 "The request body did not match its framing.", false, true);
        }
        if (px->loop) {
                r = finish_async(px);
                if (r == -EAGAIN)
                        return MHD_YES; /* it waits; libmicrohttpd calls again */
        } else {
                if (px->req_body == CTL_BODY_CHUNKED && !px->upload_failed &&
                    send_all(px->fd, "0\r\n\r\n", 5) < 0)
                        px->upload_failed = true;
                r = read_head(px);
                /* Closed before any byte of an answer, on a connection that had
                 * been idle: the app closed it meanwhile. Once more, on a new one. */
                if (px->reused && px->len == 0 && (r == -ECONNRESET || r == -EPIPE)) {
                        r = upstream_retry(px);
                        if (r >= 0)
                                r = read_head(px);
                }
        }
        buf_free(&px->head);
        if (r == -E2BIG)
                return queue_bad_gateway(q, conn, 502, "the response head is larger than 64 KiB");
        if (r == -EAGAIN || r == -ETIMEDOUT)
                return queue_bad_gateway(q, conn, 504, "no answer within 300 seconds");
        if (r == -EBADMSG)
                return queue_bad_gateway(q, conn, 502, "a malformed or missing response");
        if (r < 0) {
                /* The connection broke before any answer: the organism went away. */
                ctl_proxy_free(TAKE_PTR(q->px));
                return queue_unavailable(q, conn);
        }

        struct ctl_hdrs out = {0};
        _cleanup_free_ char *framer = NULL; /* on the admin origin: the control plane's */
        if (ctl_req_admin_framer(q, &framer) < 0 ||
            ctl_proxy_response_headers(&px->up.hdrs, q->ctl->cookie_name, framer, px->preview, &out) < 0) {
                ctl_hdrs_free(&out);
                return MHD_NO;
        }
        struct MHD_Response *m;
        uint64_t size = MHD_SIZE_UNKNOWN;
        if (px->up.body == CTL_BODY_LENGTH) {
                size = px->remaining = px->up.length;
                px->up_done = px->remaining == 0;
        } else if (px->up.body == CTL_BODY_NONE) {
                const char *cl = ctl_hdrs_get(&px->up.hdrs, "Content-Length");
                size = px->head_request && cl ? strtoull(cl, NULL, 10) : 0;
                px->up_done = true;
        }
        if (px->up_done)
                upstream_release(px);
        int status = px->up.status;
        count_5xx(q, px, status);
        /* The owner's badge and, on the candidate's pages in the owner's
         * previewing browser, the preview bar: script tags in the app's pages
         * (never its admin origin, never a HEAD, an API answer, a partial,
         * compressed or large one: inject.h). The length changes, so the
         * answer is sent without one (chunked). */
        bool badge = ctl_badge_on(q->ctl);
        px->tag = badge && px->preview ? CTL_INJECT_TAG CTL_INJECT_PREVIEW_TAG
                  : px->preview        ? CTL_INJECT_PREVIEW_TAG
                                       : CTL_INJECT_TAG;
        px->inject = !px->head_request && (badge || px->preview) && !ctl_host_is_organism(ctl_req_header(q, "Host")) &&
                     ctl_inject_wanted(q->method, &q->hdrs, status, &px->up.hdrs, px->up.body != CTL_BODY_NONE);
        if (px->inject) {
                ctl_inject_init(&px->inj);
                size = MHD_SIZE_UNKNOWN;
        }
        q->px = NULL; /* the response owns it now */
        if (px->loop && !px->inject && px->up.body == CTL_BODY_LENGTH && px->remaining > 0 &&
            px->len - px->pos >= px->remaining) {
                /* The whole body came with the head (a small page): handed
                 * over as one buffer, so libmicrohttpd sends head and body in
                 * one write (with a callback it sends them apart: two
                 * segments, and the client woken twice), and the
                 * connection goes back to the pool now. */
                size_t n = (size_t)px->remaining;
                char *body = px->buf + px->pos;
                px->pos += n;
                px->remaining = 0;
                px->up_done = true;
                upstream_release(px);
                /* Not copied: px (its buffer) is freed with the response. */
                m = MHD_create_response_from_buffer_with_free_callback_cls(n, body, proxy_free_cb, px);
                if (!m)
                        ctl_proxy_free(px);
        } else {
                m = MHD_create_response_from_callback(size, READ_BLOCK, proxy_read, px, proxy_free_cb);
                if (!m)
                        ctl_proxy_free(px);
        }
        if (!m) {
                ctl_hdrs_free(&out);
                return MHD_NO;
        }
        for (size_t i = 0; i < out.n; i++)
                if (MHD_add_response_header(m, out.v[i].name, out.v[i].value) != MHD_YES)
                        log_limited(LOG_DEBUG, "", "proxy: dropped a response header MHD refused: %s", out.v[i].name);
        ctl_hdrs_free(&out);
        q->kind = CTL_REQ_DONE;
        /* The organism may pause its answer (a stream, a long poll) for as
         * long as the proxy waits for it; the client side must not give up
         * first. A client that stops reading is still dropped after that. */
        ctl_conn_timeout(conn, UPSTREAM_TIMEOUT_S + 10);
        enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, m);
        MHD_destroy_response(m);
        return ok;
}

/* ---- the fast path's requests (fast.h) ---- */

int ctl_proxy_fast_start(struct ctl_req *q, void (*on_ready)(void *userdata), void *userdata,
                         struct ctl_proxy **ret) {
        struct ctl_proxy *px = proxy_init(q, NULL);
        if (!px)
                return -ENOMEM;
        px->on_ready = on_ready;
        px->ready_userdata = userdata;
        if (!proxy_slot_take(q, px)) {
                ctl_proxy_free(px);
                return -EBUSY;
        }
        int r = proxy_prepare(q, px);
        if (r < 0) {
                ctl_proxy_free(px);
                return r;
        }
        *ret = px;
        return 0;
}

int ctl_proxy_fast_step(struct ctl_proxy *px) {
        if (px->answered)
                return 0;
        int r = 0;
        if (px->stopped)
                r = -ESHUTDOWN;
        else if (px->stage < PX_SENT) {
                r = send_head(px);
                if (r == -EAGAIN)
                        return r;
                if (r == -ETIMEDOUT && px->stage == PX_CONNECTING)
                        log_limited(LOG_WARN, "", "proxy: the organism did not accept a connection within %d seconds",
                                    UPSTREAM_CONNECT_TIMEOUT_S);
                if (r < 0)
                        r = -EHOSTDOWN; /* not sent: answered as an organism out of reach */
        }
        if (r >= 0) {
                if (!px->reused)
                        buf_free(&px->head); /* never sent again */
                px->request_in = true;
                r = finish_async(px);
                if (r == -EAGAIN)
                        return r;
        }
        px->answered = true;
        px->answer_r = r;
        px->request_in = true; /* a parked request is never sent again */
        return 0;
}

int ctl_proxy_fast_answer(struct ctl_req *q, struct ctl_proxy *px, bool close, struct buf *out,
                          const char **ret_body, size_t *ret_len) {
        int status = px->up.status;
        if (!px->answered || px->answer_r < 0 || px->head_request || px->up.body != CTL_BODY_LENGTH ||
            status == 204 || status == 304 || px->up.length > px->len - px->pos)
                return 0;
        if ((ctl_badge_on(q->ctl) || px->preview) && !ctl_host_is_organism(ctl_req_header(q, "Host")) &&
            ctl_inject_wanted(q->method, &q->hdrs, status, &px->up.hdrs, true))
                return 0; /* a tag goes in: streamed by the daemon */
        struct ctl_hdrs h = {0};
        _cleanup_free_ char *framer = NULL;
        int r = ctl_req_admin_framer(q, &framer);
        if (r >= 0)
                r = ctl_proxy_response_headers(&px->up.hdrs, q->ctl->cookie_name, framer, px->preview, &h);
        if (r >= 0)
                r = buf_printf(out, "HTTP/1.1 %d %s\r\n", status, MHD_get_reason_phrase_for((unsigned)status));
        for (size_t i = 0; r >= 0 && i < h.n; i++)
                if (!strpbrk(h.v[i].name, "\r\n\t") && !strpbrk(h.v[i].value, "\r\n"))
                        r = ctl_hdr_line(out, h.v[i].name, h.v[i].value);
        if (r >= 0 && !ctl_hdrs_get(&h, "Date")) {
                char date[64];
                time_t now = time(NULL);
                struct tm tm;
                strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
                r = buf_printf(out, "Date: %s\r\n", date);
        }
        if (r >= 0 && close)
                r = buf_puts(out, "Connection: close\r\n");
        if (r >= 0)
                r = buf_printf(out, "Content-Length: %llu\r\n\r\n", (unsigned long long)px->up.length);
        ctl_hdrs_free(&h);
        if (r < 0)
                return r;
        *ret_body = px->buf + px->pos;
        *ret_len = (size_t)px->up.length;
        px->pos += (size_t)px->up.length;
        px->remaining = 0;
        px->up_done = true;
        upstream_release(px);
        count_5xx(q, px, status);
        return 1;
}

int ctl_proxy_park(struct ctl *c, int fd, struct ctl_proxy *px, const char *method, const char *target) {
        struct ctl_parked *slot = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(c->parked) && !slot; i++)
                if (!c->parked[i].px)
                        slot = &c->parked[i];
        if (!slot || xasprintf(&px->parked_as, "%s %s", method, target) < 0) {
                ctl_proxy_free(px);
                return -ENOSPC;
        }
        if (px->has_slot)
                proxy_slot_put(px); /* the daemon's request takes its own */
        px->on_ready = NULL;
        px->w.deadline_ms = 0;
        px->suspended = false;
        *slot = (struct ctl_parked){.fd = fd, .px = px};
        c->n_parked++;
        return 0;
}

struct ctl_proxy *ctl_proxy_unpark(struct ctl *c, int fd) {
        for (size_t i = 0; i < ARRAY_SIZE(c->parked) && c->n_parked > 0; i++)
                if (c->parked[i].px && c->parked[i].fd == fd) {
                        c->n_parked--;
                        return TAKE_PTR(c->parked[i].px);
                }
        return NULL;
}
