/* proxy.c — the egress proxy's doors, connections and tunnels.
 *
 * One accept thread waits (epoll) on every door and a wake eventfd. Each
 * accepted connection gets a thread of its own (small stack) that reads
 * the request head, checks it against the rules and the door's policy,
 * resolves the name once, checks every address, dials a checked one,
 * answers 200, judges the ClientHello and then splices both ways until
 * either side is done, the tunnel is idle, or it is cancelled.
 *
 * Cancelling a connection (revocation, egress_door_close, egress_free)
 * sets its flag and shuts its sockets down, under the lock; a connection
 * thread only closes its sockets after unregistering itself under the same
 * lock, so a cancel never touches a descriptor that was reused. */
#include "egress/egress.h"
#include "base/log.h"
#include "egress/addr.h"
#include "egress/hello.h"
#include "egress/policy.h"
#include "egress/request.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <resolv.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#define THREAD_STACK (256 * 1024) /* getaddrinfo goes through NSS modules: not the smallest */
/* Pipe sizes: the bulk of the bytes come down, requests go up. A larger
 * pipe means fewer splices, wake-ups and ACKs per byte (with 1 MiB,
 * bench/egress spent about a third less CPU per byte than with the default
 * 64 KiB). 64 tunnels of 512 + 64 KiB take 36 MiB of the 64 MiB an
 * unprivileged account's pipes may reach (pipe-user-pages-soft) before new
 * pipes shrink to two pages. */
#define PIPE_DOWN (512 * 1024)
#define PIPE_UP (64 * 1024)
#define ACCEPT_BATCH 16
#define ACCEPT_BACKOFF_MS 100     /* after EMFILE and the like */
#define LINGER_MS 2000            /* reading what a refused client still sends, so it gets the answer */
#define LINGER_MAX (64 * 1024)
#define BUF_SIZE (EGRESS_HELLO_RAW_MAX + 1)
#define LABEL_MAX 64

struct egress_door {
        struct egress *e;
        struct egress_door *next;
        uint64_t id;
        int fd;
        enum egress_policy policy;
        char label[LABEL_MAX + 1];
};

struct conn {
        struct egress *e;
        struct conn *prev, *next;
        uint64_t door_id;
        enum egress_policy policy;
        char label[LABEL_MAX + 1];
        int client_fd, upstream_fd;  /* upstream_fd changes under the lock */
        struct egress_request req;   /* host: "" unless well-formed */
        bool pending;                /* counted in n_pending (under the lock) */
        bool admitted;               /* holds a tunnel place; its host passed the policy (under the lock) */
        atomic_bool cancelled;
        struct egress_timeouts t;    /* as they were when it was accepted */
        uint8_t *buf;                /* BUF_SIZE: the head, then the ClientHello's records */
        size_t len;
};

struct egress {
        pthread_mutex_t lock;
        pthread_cond_t threads_done;
        struct egress_allowlist allow;
        egress_resolve_fn resolve;
        void *resolve_data;
        struct egress_timeouts timeouts;
        atomic_int idle_ms;
        struct egress_door *doors;
        struct conn *conns;
        uint64_t next_door_id;
        size_t n_pending, n_tunnels, n_threads;
        struct egress_refusal kept[EGRESS_REFUSALS_KEPT];
        size_t kept_next, kept_n;
        struct log_limiter *limiter; /* refusals logged: per reason, door and host */
        int epoll_fd, wake_fd;
        bool acceptor_started, stopping;
        pthread_t acceptor;
};

#define WAKE_ID 0

/* ---- Answers and refusals ---- */

static const struct {
        int status;
        const char *text;
} statuses[] = {
        {200, "Connection established"}, {400, "Bad Request"},         {403, "Forbidden"},
        {405, "Method Not Allowed"},     {408, "Request Timeout"},     {502, "Bad Gateway"},
        {503, "Service Unavailable"},    {504, "Gateway Timeout"},
};

static const char *status_text(int status) {
        for (size_t i = 0; i < ARRAY_SIZE(statuses); i++)
                if (statuses[i].status == status)
                        return statuses[i].text;
        return "Error";
}

/* One send, never blocking: an answer is far smaller than a socket buffer. */
static void answer(int fd, int status, const char *why) {
        char out[512];
        int n = snprintf(out, sizeof out,
                         "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
                         "%sConnection: close\r\n\r\n%s\n",
                         status, status_text(status), strlen(why) + 1, status == 405 ? "Allow: CONNECT\r\n" : "",
                         why);
        if (n > 0 && (size_t)n < sizeof out)
                (void)send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Reads what has arrived already (without waiting), at most 64 KiB. */
static void drop_unread(int fd) {
        char sink[4096];
        for (int i = 0; i < 16 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
                ;
}

/* Keeps a refusal among the newest EGRESS_REFUSALS_KEPT. Called with the
 * lock held. */
static void keep_locked(struct egress *e, const char *label, const char *host, int port, const char *why) {
        struct egress_refusal *k = &e->kept[e->kept_next];
        *k = (struct egress_refusal){.at_ms = wall_ms(), .port = port, .reason = why};
        snprintf(k->host, sizeof k->host, "%s", host);
        snprintf(k->door, sizeof k->door, "%s", label);
        e->kept_next = (e->kept_next + 1) % EGRESS_REFUSALS_KEPT;
        if (e->kept_n < EGRESS_REFUSALS_KEPT)
                e->kept_n++;
}

/* Logs a refusal at most once a minute per door, host and reason, by a
 * limiter of the proxy's own (refusals share no budget with anything else
 * the kernel logs); without the lock, so a slow log never stalls the
 * proxy. */
static void log_refusal(struct egress *e, const char *label, const char *host, int port, const char *why) {
        char key[LABEL_MAX + EGRESS_HOST_MAX + 2];
        uint64_t suppressed = 0;
        snprintf(key, sizeof key, "%s|%s", label, host);
        if (!log_limiter_admit(e->limiter, why, key, now_ms(), &suppressed))
                return;
        char more[96] = "";
        if (suppressed > 0)
                snprintf(more, sizeof more, " (and %llu more like it since the last one logged)",
                         (unsigned long long)suppressed);
        log_info("egress: refused %s%s%d for %s: %s%s", *host ? host : "(no host name)", *host ? ":" : " port ",
                 port, label, why, more);
}

static void keep_refusal(struct conn *c, const char *why) {
        pthread_mutex_lock(&c->e->lock);
        keep_locked(c->e, c->label, c->req.host, c->req.port, why);
        pthread_mutex_unlock(&c->e->lock);
        log_refusal(c->e, c->label, c->req.host, c->req.port, why);
}

/* Waits for one of the fds, or the deadline (now_ms() time): the poll
 * result, 0 on timeout, -errno. */
static int wait_fds(struct pollfd *p, nfds_t n, int64_t deadline) {
        for (;;) {
                int64_t left = deadline - now_ms();
                if (left < 0)
                        left = 0;
                int r = poll(p, n, left > INT32_MAX ? INT32_MAX : (int)left);
                if (r >= 0 || errno != EINTR)
                        return r < 0 ? -errno : r;
        }
}

/* After an answer: stop sending, then read and drop what the client still
 * sends (bounded) until it closes, so that closing does not reset the
 * connection before the client read the answer. */
static void linger(struct conn *c) {
        (void)shutdown(c->client_fd, SHUT_WR);
        int64_t deadline = now_ms() + LINGER_MS;
        size_t dropped = 0;
        char sink[4096];
        while (dropped < LINGER_MAX && !atomic_load(&c->cancelled)) {
                struct pollfd p = {.fd = c->client_fd, .events = POLLIN};
                if (wait_fds(&p, 1, deadline) <= 0)
                        return;
                ssize_t n = recv(c->client_fd, sink, sizeof sink, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return;
                dropped += (size_t)n;
        }
}

static void refuse(struct conn *c, int status, const char *why) {
        keep_refusal(c, why);
        answer(c->client_fd, status, why);
        linger(c);
}

/* ---- Connections ---- */

static void cancel_locked(struct conn *c) {
        atomic_store(&c->cancelled, true);
        (void)shutdown(c->client_fd, SHUT_RDWR);
        if (c->upstream_fd >= 0)
                (void)shutdown(c->upstream_fd, SHUT_RDWR);
}

static void set_upstream(struct conn *c, int fd) {
        pthread_mutex_lock(&c->e->lock);
        c->upstream_fd = fd;
        if (fd >= 0 && atomic_load(&c->cancelled))
                (void)shutdown(fd, SHUT_RDWR);
        pthread_mutex_unlock(&c->e->lock);
}

static void close_upstream(struct conn *c) {
        int fd = c->upstream_fd;
        set_upstream(c, -1);
        if (fd >= 0)
                close(fd);
}

/* Whether the bytes from old to len can change the parser's answer: an
 * end of the head, a byte no head may hold, or the bound. So a client
 * sending its head a byte at a time costs one pass over it, not one per
 * byte. */
static bool worth_parsing(const uint8_t *buf, size_t old, size_t len) {
        size_t from = old >= 3 ? old - 3 : 0;
        if (old == 0 || len >= EGRESS_REQUEST_MAX || memmem(buf + from, len - from, "\r\n\r\n", 4) ||
            memchr(buf + old, 0, len - old))
                return true;
        for (size_t i = old; i < len; i++)
                if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r'))
                        return true;
        return false;
}

/* Reads the request head: 0 with c->req filled and the bytes after the
 * head moved to the start of c->buf, or -1 when the connection is done
 * (answered or gone). */
static int read_request(struct conn *c) {
        int64_t deadline = now_ms() + c->t.request_ms;
        const char *why = NULL;
        size_t old = 0;
        for (;;) {
                int r = worth_parsing(c->buf, old, c->len)
                                ? egress_request_parse((const char *)c->buf, c->len, &c->req, &why)
                                : -EAGAIN;
                old = c->len;
                if (r == 0)
                        break;
                if (r != -EAGAIN) {
                        int status = r == -EOPNOTSUPP ? 405 : r == -EPERM ? 403 : 400;
                        refuse(c, status, why);
                        return -1;
                }
                struct pollfd p = {.fd = c->client_fd, .events = POLLIN};
                r = wait_fds(&p, 1, deadline);
                if (atomic_load(&c->cancelled) || r < 0)
                        return -1;
                if (r == 0) {
                        refuse(c, 408, "the request head did not arrive in time");
                        return -1;
                }
                ssize_t n = recv(c->client_fd, c->buf + c->len, EGRESS_REQUEST_MAX - c->len, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return -1; /* the client went away */
                c->len += (size_t)n;
        }
        c->len -= c->req.head_len;
        memmove(c->buf, c->buf + c->req.head_len, c->len);
        return 0;
}

/* The host against the door's policy, and a tunnel place: 0, or -1 when
 * refused (answered). */
static int admit(struct conn *c) {
        struct egress *e = c->e;
        const char *why = NULL;
        int status = 0;
        pthread_mutex_lock(&e->lock);
        if (atomic_load(&c->cancelled)) {
                pthread_mutex_unlock(&e->lock);
                return -1;
        }
        if (!egress_allowlist_allows(&e->allow, c->policy, c->req.host)) {
                status = 403;
                why = c->policy == EGRESS_POLICY_LIVE ? "not approved for the organism"
                                                      : "not a registry and not approved for evolutions";
        } else if (e->n_tunnels >= EGRESS_MAX_TUNNELS) {
                status = 503;
                why = "too many tunnels at once";
        } else {
                e->n_tunnels++;
                c->admitted = true;
                e->n_pending--;
                c->pending = false;
        }
        if (status)
                keep_locked(e, c->label, c->req.host, c->req.port, why);
        pthread_mutex_unlock(&e->lock);
        if (!status)
                return 0;
        log_refusal(e, c->label, c->req.host, c->req.port, why);
        answer(c->client_fd, status, why);
        linger(c);
        return -1;
}

static const char *const resolves_to[] = {
        [EGRESS_ADDR_UNSPECIFIED] = "the name resolves to an unspecified address",
        [EGRESS_ADDR_LOOPBACK] = "the name resolves to a loopback address",
        [EGRESS_ADDR_PRIVATE] = "the name resolves to a private address",
        [EGRESS_ADDR_LINK_LOCAL] = "the name resolves to a link-local address",
        [EGRESS_ADDR_CGNAT] = "the name resolves to a carrier-grade NAT address",
        [EGRESS_ADDR_DOCUMENTATION] = "the name resolves to a documentation address",
        [EGRESS_ADDR_BENCHMARKING] = "the name resolves to a benchmarking address",
        [EGRESS_ADDR_MULTICAST] = "the name resolves to a multicast address",
        [EGRESS_ADDR_RESERVED] = "the name resolves to a reserved address",
        [EGRESS_ADDR_TRANSLATED] = "the name resolves to a translated address of a non-public one",
};

static int resolve_default(void *userdata, const char *host, struct sockaddr_storage *ret, size_t max,
                           size_t *ret_n) {
        /* The name as it is, so that /etc/hosts (matched only as written)
         * counts, but never with the resolver's search domains appended:
         * they are switched off in this thread's resolver state. */
        if (!(_res.options & RES_INIT) && res_init() < 0)
                return -EIO;
        _res.options &= ~(unsigned long)(RES_DNSRCH | RES_DEFNAMES);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_protocol = IPPROTO_TCP};
        struct addrinfo *res = NULL;
        int r = getaddrinfo(host, NULL, &hints, &res);
        switch (r) {
        case 0:
                break;
        case EAI_NONAME:
        case EAI_NODATA:
                return -ENOENT;
        case EAI_AGAIN:
                return -EAGAIN;
        case EAI_MEMORY:
                return -ENOMEM;
        case EAI_SYSTEM:
                return errno > 0 ? -errno : -EIO;
        default:
                return -EIO;
        }
        size_t n = 0;
        for (struct addrinfo *a = res; a && n < max; a = a->ai_next) {
                if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof *ret)
                        continue;
                ret[n] = (struct sockaddr_storage){0};
                memcpy(&ret[n++], a->ai_addr, a->ai_addrlen);
        }
        freeaddrinfo(res);
        *ret_n = n;
        return 0;
}

/* Resolves once and checks every address: 0 with the addresses, or -1
 * when refused (answered). */
static int resolve(struct conn *c, struct sockaddr_storage *addrs, size_t *ret_n) {
        struct egress *e = c->e;
        pthread_mutex_lock(&e->lock);
        egress_resolve_fn fn = e->resolve;
        void *data = e->resolve_data;
        pthread_mutex_unlock(&e->lock);
        size_t n = 0;
        int r = fn(data, c->req.host, addrs, EGRESS_ADDRS_MAX, &n);
        if (atomic_load(&c->cancelled))
                return -1;
        if (r < 0 || n == 0 || n > EGRESS_ADDRS_MAX) {
                refuse(c, 502, r == -ENOENT || (r >= 0 && n == 0) ? "the name does not resolve"
                                                                   : "the name could not be resolved");
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                enum egress_addr_class k = egress_addr_class((const struct sockaddr *)&addrs[i]);
                if (k != EGRESS_ADDR_PUBLIC) {
                        refuse(c, 403,
                               (size_t)k < ARRAY_SIZE(resolves_to) && resolves_to[k]
                                       ? resolves_to[k]
                                       : "the name resolves to an address that is not public");
                        return -1;
                }
        }
        *ret_n = n;
        return 0;
}

static void nodelay(int fd) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Dials one checked address on port 443: 0, -ETIMEDOUT when the deadline
 * passed, -ECANCELED, or the connect error. */
static int dial_one(struct conn *c, const struct sockaddr_storage *a, int64_t deadline) {
        struct sockaddr_storage to = *a;
        socklen_t len;
        if (to.ss_family == AF_INET) {
                ((struct sockaddr_in *)&to)->sin_port = htons(443);
                len = sizeof(struct sockaddr_in);
        } else {
                ((struct sockaddr_in6 *)&to)->sin6_port = htons(443);
                len = sizeof(struct sockaddr_in6);
        }
        int fd = socket(to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0)
                return -errno;
        nodelay(fd);
        set_upstream(c, fd);
        if (connect(fd, (struct sockaddr *)&to, len) == 0)
                return 0;
        if (errno != EINPROGRESS)
                return -errno;
        /* A cancel shuts fd down, which wakes this; the client counts only
         * when it is gone both ways (POLLHUP, POLLERR: always reported). */
        struct pollfd p[2] = {{.fd = fd, .events = POLLOUT}, {.fd = c->client_fd}};
        int r = wait_fds(p, 2, deadline);
        if (atomic_load(&c->cancelled) || (r > 0 && !p[0].revents))
                return -ECANCELED;
        if (r < 0)
                return r;
        if (r == 0)
                return -ETIMEDOUT;
        int err = 0;
        socklen_t elen = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
                return -errno;
        return -err;
}

/* Tries the checked addresses in order (never resolving again): 0, or -1
 * when refused (answered) or cancelled. */
static int dial(struct conn *c, const struct sockaddr_storage *addrs, size_t n) {
        int64_t deadline = now_ms() + c->t.connect_ms;
        int r = -EHOSTUNREACH;
        for (size_t i = 0; i < n; i++) {
                r = dial_one(c, &addrs[i], deadline);
                if (r == 0)
                        return 0;
                close_upstream(c);
                if (r == -ETIMEDOUT || r == -ECANCELED)
                        break;
        }
        if (r == -ECANCELED)
                return -1;
        if (r == -ETIMEDOUT)
                refuse(c, 504, "the host did not accept a connection in time");
        else
                refuse(c, 502, "the host refused the connection or cannot be reached");
        return -1;
}

static int send_all(struct conn *c, int fd, const void *data, size_t len, int64_t deadline) {
        const uint8_t *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0) {
                        p += n;
                        len -= (size_t)n;
                        continue;
                }
                if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                struct pollfd pf = {.fd = fd, .events = POLLOUT};
                int r = wait_fds(&pf, 1, deadline);
                if (atomic_load(&c->cancelled))
                        return -ECANCELED;
                if (r <= 0)
                        return r < 0 ? r : -ETIMEDOUT;
        }
        return 0;
}

/* Reads the ClientHello and compares its server name with the host: 0, or
 * -1 when the tunnel ends here (refusals are kept and logged, not answered). */
static int check_hello(struct conn *c) {
        int64_t deadline = now_ms() + c->t.hello_ms;
        for (;;) {
                char sni[EGRESS_HOST_MAX + 1];
                const char *why = NULL;
                int r = c->len > 0 ? egress_hello_parse(c->buf, c->len, sni, &why) : -EAGAIN;
                if (r == 0) {
                        if (streq(sni, c->req.host))
                                return 0;
                        keep_refusal(c, "the TLS server name (SNI) is not the requested host");
                        return -1;
                }
                if (r == -EAGAIN && c->len >= BUF_SIZE) /* the parser says -E2BIG first; never wait on a full buffer */
                        r = -E2BIG, why = "the ClientHello's records are too large";
                if (r != -EAGAIN) {
                        keep_refusal(c, why);
                        return -1;
                }
                struct pollfd p = {.fd = c->client_fd, .events = POLLIN};
                r = wait_fds(&p, 1, deadline);
                if (atomic_load(&c->cancelled) || r < 0)
                        return -1;
                if (r == 0) {
                        keep_refusal(c, "no complete TLS ClientHello in time");
                        return -1;
                }
                ssize_t n = recv(c->client_fd, c->buf + c->len, BUF_SIZE - c->len, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return -1;
                c->len += (size_t)n;
        }
}

/* ---- Tunnels ---- */

struct half {
        int from, to;   /* sockets */
        int rd, wr;     /* the pipe between them */
        size_t queued;  /* bytes in the pipe */
        size_t cap;     /* the pipe's size */
        bool eof, shut; /* from has finished; to was told so */
};

static void pipe_close(struct half *h) {
        if (h->rd >= 0)
                close(h->rd);
        if (h->wr >= 0)
                close(h->wr);
}

static int half_init(struct half *h, int from, int to, int size) {
        int p[2];
        *h = (struct half){.from = from, .to = to, .rd = -1, .wr = -1};
        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        h->rd = p[0];
        h->wr = p[1];
        (void)fcntl(h->wr, F_SETPIPE_SZ, size); /* best effort: the default is 64 KiB */
        int sz = fcntl(h->wr, F_GETPIPE_SZ);
        h->cap = sz > 0 ? (size_t)sz : 65536;
        return 0;
}

/* Moves what it can without waiting: >= 0 (1 when a byte moved), or -errno. */
static int half_step(struct half *h) {
        int moved = 0;
        if (!h->eof && h->queued < h->cap) {
                ssize_t n = splice(h->from, NULL, h->wr, NULL, h->cap - h->queued, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (n > 0) {
                        h->queued += (size_t)n;
                        moved = 1;
                } else if (n == 0)
                        h->eof = true;
                else if (errno != EAGAIN && errno != EINTR)
                        return -errno;
        }
        if (h->queued > 0) {
                ssize_t n = splice(h->rd, NULL, h->to, NULL, h->queued, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (n > 0) {
                        h->queued -= (size_t)n;
                        moved = 1;
                } else if (n < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
        }
        if (h->eof && h->queued == 0 && !h->shut) {
                (void)shutdown(h->to, SHUT_WR); /* half-close passed on */
                h->shut = true;
        }
        return moved;
}

/* What h waits for: to read while its pipe is empty (a pipe with bytes in
 * it may be full of small buffers, so reading waits for them to go out),
 * else to write. */
static void half_events(const struct half *h, struct pollfd *from, struct pollfd *to) {
        if (h->queued > 0)
                to->events |= POLLOUT;
        else if (!h->eof)
                from->events |= POLLIN;
}

/* Splices both ways: 0 when both sides finished, -ETIMEDOUT when idle,
 * -ECANCELED, or a socket's error. */
static int tunnel(struct conn *c) {
        struct half h[2];
        int r = half_init(&h[0], c->client_fd, c->upstream_fd, PIPE_UP);
        if (r >= 0 && (r = half_init(&h[1], c->upstream_fd, c->client_fd, PIPE_DOWN)) < 0)
                pipe_close(&h[0]);
        if (r < 0) {
                log_limited(LOG_WARN, c->label, "egress: cannot make a tunnel's pipes: %s", strerror(-r));
                return r;
        }
        int64_t last = now_ms();
        for (;;) {
                if (atomic_load(&c->cancelled)) {
                        r = -ECANCELED;
                        break;
                }
                int moved = 0;
                for (size_t i = 0; i < 2 && r >= 0; i++) {
                        r = half_step(&h[i]);
                        moved |= r > 0;
                }
                if (r < 0 || (h[0].shut && h[1].shut))
                        break;
                if (moved) {
                        last = now_ms();
                        continue;
                }
                struct pollfd p[2] = {{.fd = c->client_fd}, {.fd = c->upstream_fd}};
                half_events(&h[0], &p[0], &p[1]);
                half_events(&h[1], &p[1], &p[0]);
                int64_t deadline = last + atomic_load(&c->e->idle_ms);
                if (now_ms() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                r = wait_fds(p, 2, deadline);
                if (r < 0)
                        break;
                r = 0;
        }
        pipe_close(&h[0]);
        pipe_close(&h[1]);
        return r;
}

static void conn_run(struct conn *c) {
        if (read_request(c) < 0 || admit(c) < 0)
                return;
        struct sockaddr_storage addrs[EGRESS_ADDRS_MAX];
        size_t n = 0;
        if (resolve(c, addrs, &n) < 0 || dial(c, addrs, n) < 0)
                return;
        static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        if (send_all(c, c->client_fd, established, sizeof established - 1, now_ms() + c->t.hello_ms) < 0 ||
            check_hello(c) < 0)
                return;
        /* The ClientHello's bytes (and any after them) go first. */
        if (send_all(c, c->upstream_fd, c->buf, c->len, now_ms() + atomic_load(&c->e->idle_ms)) < 0)
                return;
        free(TAKE_PTR(c->buf));
        (void)tunnel(c);
}

static void conn_free(struct conn *c) {
        if (!c)
                return;
        if (c->client_fd >= 0)
                close(c->client_fd);
        if (c->upstream_fd >= 0)
                close(c->upstream_fd);
        free(c->buf);
        free(c);
}

/* Unregisters c and releases what it held; then the thread touches
 * nothing of e. */
static void conn_end(struct conn *c) {
        struct egress *e = c->e;
        pthread_mutex_lock(&e->lock);
        if (c->prev)
                c->prev->next = c->next;
        else
                e->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (c->pending)
                e->n_pending--;
        if (c->admitted)
                e->n_tunnels--;
        e->n_threads--;
        pthread_cond_broadcast(&e->threads_done);
        pthread_mutex_unlock(&e->lock);
        conn_free(c);
}

static void *conn_main(void *userdata) {
        struct conn *c = userdata;
        conn_run(c);
        conn_end(c);
        return NULL;
}

/* ---- Doors and the accept thread ---- */

static struct egress_door *door_find_locked(struct egress *e, uint64_t id) {
        for (struct egress_door *d = e->doors; d; d = d->next)
                if (d->id == id)
                        return d;
        return NULL;
}

/* Starts a connection thread for fd (taken): 0, or -errno (fd closed). */
static int conn_start_locked(struct egress *e, struct egress_door *d, int fd) {
        struct conn *c = calloc(1, sizeof *c);
        uint8_t *buf = malloc(BUF_SIZE);
        if (!c || !buf) {
                free(c);
                free(buf);
                close(fd);
                return -ENOMEM;
        }
        *c = (struct conn){.e = e, .door_id = d->id, .policy = d->policy, .client_fd = fd, .upstream_fd = -1,
                           .pending = true, .t = e->timeouts, .buf = buf};
        memcpy(c->label, d->label, sizeof c->label);
        nodelay(fd);
        pthread_attr_t attr;
        pthread_t t;
        int r = -pthread_attr_init(&attr);
        if (r == 0) {
                (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                (void)pthread_attr_setstacksize(&attr, THREAD_STACK);
                r = -pthread_create(&t, &attr, conn_main, c);
                pthread_attr_destroy(&attr);
        }
        if (r < 0) {
                conn_free(c);
                return r;
        }
        c->next = e->conns;
        if (e->conns)
                e->conns->prev = c;
        e->conns = c;
        e->n_pending++;
        e->n_threads++;
        return 0;
}

/* Accepts what is waiting at door id: 0, or -errno when accept itself
 * fails for want of resources (the caller backs off). */
static int accept_door(struct egress *e, uint64_t id) {
        static const char busy[] = "too many connections waiting to send their request";
        char label[LABEL_MAX + 1] = "";
        int r = 0, refused = 0;
        pthread_mutex_lock(&e->lock);
        struct egress_door *d = door_find_locked(e, id);
        for (int k = 0; d && !e->stopping && k < ACCEPT_BATCH; k++) {
                int fd = accept4(d->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN)
                                r = -errno;
                        break;
                }
                if (e->n_pending >= EGRESS_MAX_PENDING) {
                        keep_locked(e, d->label, "", 0, busy);
                        answer(fd, 503, busy);
                        drop_unread(fd); /* so that closing is less likely to reset it before it is read */
                        close(fd);
                        memcpy(label, d->label, sizeof label);
                        refused++;
                        continue;
                }
                int q = conn_start_locked(e, d, fd);
                if (q < 0)
                        log_limited(LOG_WARN, d->label, "egress: cannot serve a connection: %s", strerror(-q));
        }
        pthread_mutex_unlock(&e->lock);
        for (int i = 0; i < refused; i++) /* the limiter counts the ones it does not write */
                log_refusal(e, label, "", 0, busy);
        return r;
}

static void *accept_main(void *userdata) {
        struct egress *e = userdata;
        for (;;) {
                struct epoll_event ev[16];
                int n = epoll_wait(e->epoll_fd, ev, ARRAY_SIZE(ev), -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        log_error_errno(-errno, "egress: epoll_wait failed, no more connections accepted: %m");
                        return NULL;
                }
                bool backoff = false;
                for (int i = 0; i < n; i++) {
                        if (ev[i].data.u64 == WAKE_ID) {
                                uint64_t v;
                                (void)!read(e->wake_fd, &v, sizeof v);
                                continue;
                        }
                        int r = accept_door(e, ev[i].data.u64);
                        if (r < 0) {
                                log_limited(LOG_WARN, "", "egress: cannot accept a connection: %s", strerror(-r));
                                backoff = true;
                        }
                }
                pthread_mutex_lock(&e->lock);
                bool stop = e->stopping;
                pthread_mutex_unlock(&e->lock);
                if (stop)
                        return NULL;
                if (backoff) {
                        struct pollfd p = {.fd = e->wake_fd, .events = POLLIN};
                        (void)poll(&p, 1, ACCEPT_BACKOFF_MS);
                }
        }
}

static bool label_ok(const char *label) {
        if (!label || !*label || strlen(label) > LABEL_MAX)
                return false;
        for (const char *p = label; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

int egress_door_open(struct egress *e, int listen_fd, enum egress_policy p, const char *label,
                     struct egress_door **ret) {
        _cleanup_close_ int fd = listen_fd;
        if (!e || fd < 0 || (p != EGRESS_POLICY_LIVE && p != EGRESS_POLICY_BUILD) || !label_ok(label))
                return -EINVAL;
        int listening = 0;
        socklen_t len = sizeof listening;
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) < 0)
                return -errno;
        if (!listening)
                return -EINVAL;
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return -errno;
        struct egress_door *d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        *d = (struct egress_door){.e = e, .fd = fd, .policy = p};
        snprintf(d->label, sizeof d->label, "%s", label);
        int r = 0;
        pthread_mutex_lock(&e->lock);
        if (e->stopping)
                r = -ESHUTDOWN;
        else {
                d->id = ++e->next_door_id;
                struct epoll_event ev = {.events = EPOLLIN, .data.u64 = d->id};
                if (epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
                        r = -errno;
                else {
                        d->next = e->doors;
                        e->doors = d;
                }
        }
        pthread_mutex_unlock(&e->lock);
        if (r < 0) {
                free(d);
                return r;
        }
        TAKE_FD(fd);
        *ret = d;
        return 0;
}

/* Takes d out (epoll, the list) and cancels its connections. */
static void door_remove_locked(struct egress *e, struct egress_door *d) {
        for (struct egress_door **p = &e->doors; *p; p = &(*p)->next)
                if (*p == d) {
                        *p = d->next;
                        break;
                }
        (void)epoll_ctl(e->epoll_fd, EPOLL_CTL_DEL, d->fd, NULL);
        for (struct conn *c = e->conns; c; c = c->next)
                if (c->door_id == d->id)
                        cancel_locked(c);
}

void egress_door_close(struct egress_door *d) {
        if (!d)
                return;
        struct egress *e = d->e;
        pthread_mutex_lock(&e->lock);
        door_remove_locked(e, d);
        pthread_mutex_unlock(&e->lock);
        close(d->fd);
        free(d);
}

/* ---- The proxy ---- */

int egress_new(const struct egress_config *cfg, struct egress **ret) {
        struct egress *e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        e->epoll_fd = e->wake_fd = -1;
        e->resolve = resolve_default;
        e->timeouts = (struct egress_timeouts){.idle_ms = EGRESS_IDLE_MS,
                                               .connect_ms = EGRESS_CONNECT_TIMEOUT_MS,
                                               .request_ms = EGRESS_REQUEST_TIMEOUT_MS,
                                               .hello_ms = EGRESS_HELLO_TIMEOUT_MS};
        atomic_init(&e->idle_ms, EGRESS_IDLE_MS);
        int r = -pthread_mutex_init(&e->lock, NULL);
        if (r < 0) {
                free(e);
                return r;
        }
        if ((r = -pthread_cond_init(&e->threads_done, NULL)) < 0) {
                pthread_mutex_destroy(&e->lock);
                free(e);
                return r;
        }
        if ((r = log_limiter_new(LOG_LIMIT_INTERVAL_MS, &e->limiter)) < 0)
                goto fail;
        if (cfg && (r = egress_allowlist_set_registries(&e->allow, cfg->registries)) < 0)
                goto fail;
        e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (e->epoll_fd < 0 || e->wake_fd < 0) {
                r = -errno;
                goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_ID};
        if (epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, e->wake_fd, &ev) < 0) {
                r = -errno;
                goto fail;
        }
        /* The proxy's threads take no signals: they go to the process's own
         * threads, and a SIGPIPE a splice raises stays pending on its thread. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_attr_t attr;
        r = -pthread_attr_init(&attr);
        if (r == 0) {
                (void)pthread_attr_setstacksize(&attr, THREAD_STACK);
                r = -pthread_create(&e->acceptor, &attr, accept_main, e);
                pthread_attr_destroy(&attr);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0)
                goto fail;
        e->acceptor_started = true;
        *ret = e;
        return 0;
fail:
        egress_free(e);
        return r;
}

void egress_free(struct egress *e) {
        if (!e)
                return;
        pthread_mutex_lock(&e->lock);
        e->stopping = true;
        while (e->doors) {
                struct egress_door *d = e->doors;
                door_remove_locked(e, d);
                close(d->fd);
                free(d);
        }
        for (struct conn *c = e->conns; c; c = c->next)
                cancel_locked(c);
        pthread_mutex_unlock(&e->lock);
        if (e->acceptor_started) {
                uint64_t one = 1;
                (void)!write(e->wake_fd, &one, sizeof one);
                pthread_join(e->acceptor, NULL);
        }
        pthread_mutex_lock(&e->lock);
        while (e->n_threads > 0)
                pthread_cond_wait(&e->threads_done, &e->lock);
        pthread_mutex_unlock(&e->lock);
        if (e->epoll_fd >= 0)
                close(e->epoll_fd);
        if (e->wake_fd >= 0)
                close(e->wake_fd);
        egress_allowlist_done(&e->allow);
        log_limiter_free(e->limiter);
        pthread_cond_destroy(&e->threads_done);
        pthread_mutex_destroy(&e->lock);
        free(e);
}

void egress_set_resolver(struct egress *e, egress_resolve_fn fn, void *userdata) {
        pthread_mutex_lock(&e->lock);
        e->resolve = fn ? fn : resolve_default;
        e->resolve_data = fn ? userdata : NULL;
        pthread_mutex_unlock(&e->lock);
}

int egress_set_timeouts(struct egress *e, const struct egress_timeouts *t) {
        if (!e || !t || t->idle_ms < 0 || t->connect_ms < 0 || t->request_ms < 0 || t->hello_ms < 0)
                return -EINVAL;
        pthread_mutex_lock(&e->lock);
        if (t->idle_ms)
                e->timeouts.idle_ms = t->idle_ms;
        if (t->connect_ms)
                e->timeouts.connect_ms = t->connect_ms;
        if (t->request_ms)
                e->timeouts.request_ms = t->request_ms;
        if (t->hello_ms)
                e->timeouts.hello_ms = t->hello_ms;
        atomic_store(&e->idle_ms, e->timeouts.idle_ms);
        pthread_mutex_unlock(&e->lock);
        return 0;
}

/* Ends the connections whose host the allowlist no longer allows. */
static void recheck_locked(struct egress *e) {
        size_t ended = 0;
        for (struct conn *c = e->conns; c; c = c->next)
                if (c->admitted && !atomic_load(&c->cancelled) &&
                    !egress_allowlist_allows(&e->allow, c->policy, c->req.host)) {
                        cancel_locked(c);
                        ended++;
                }
        if (ended > 0)
                log_info("egress: ended %zu tunnel(s) to hosts no longer allowed", ended);
}

int egress_grant(struct egress *e, enum egress_scope s, const char *pattern) {
        pthread_mutex_lock(&e->lock);
        int r = egress_allowlist_grant(&e->allow, s, pattern);
        pthread_mutex_unlock(&e->lock);
        return r;
}

int egress_revoke(struct egress *e, enum egress_scope s, const char *pattern) {
        pthread_mutex_lock(&e->lock);
        int r = egress_allowlist_revoke(&e->allow, s, pattern);
        if (r >= 0)
                recheck_locked(e);
        pthread_mutex_unlock(&e->lock);
        return r;
}

int egress_set_registries(struct egress *e, char *const *patterns) {
        pthread_mutex_lock(&e->lock);
        int r = egress_allowlist_set_registries(&e->allow, patterns);
        if (r >= 0)
                recheck_locked(e);
        pthread_mutex_unlock(&e->lock);
        return r;
}

int egress_allowed(struct egress *e, enum egress_policy p, char ***ret) {
        pthread_mutex_lock(&e->lock);
        int r = egress_allowlist_list(&e->allow, p, ret);
        pthread_mutex_unlock(&e->lock);
        return r;
}

int egress_refusals(struct egress *e, struct egress_refusal **ret, size_t *ret_n) {
        pthread_mutex_lock(&e->lock);
        size_t n = e->kept_n;
        struct egress_refusal *out = calloc(n ? n : 1, sizeof *out);
        if (out)
                for (size_t i = 0; i < n; i++)
                        out[i] = e->kept[(e->kept_next + EGRESS_REFUSALS_KEPT - 1 - i) % EGRESS_REFUSALS_KEPT];
        pthread_mutex_unlock(&e->lock);
        if (!out)
                return -ENOMEM;
        *ret = out;
        *ret_n = n;
        return 0;
}
