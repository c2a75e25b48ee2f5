/* server.c — the libmicrohttpd daemons, one per listening socket (listen.h:
 * a taken port is never swapped for another), limits (connection pools and
 * head deadlines, timeouts, request heads), per-request state, the Host
 * allowlist on every request, and the split between /_seed (routes.c) and
 * the organism (proxy.c). */
#include "ctl/mhd.h"
#include "ctl/fast.h"
#include "ctl/front.h"
#include "ctl/guard.h"
#include "ctl/loop.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>

/* A connection's memory pool bounds its request head (431 past it), and
 * libmicrohttpd zeroes the whole pool after every request, so there are two
 * daemons (front.h chooses for each connection): the large one with a
 * thread per connection, the small one on one event loop (loop.h), where
 * the proxy never blocks (proxy.c) and a /_seed route runs on a worker
 * while its connection waits (seed_offload). The large pool has room for
 * a browser's whole cookie jar (about 180 cookies of 4 KiB), so a cookie bomb
 * cannot keep a sign-in link from being answered (and its cookies from being
 * expired) on the control plane's own origin: cookies ignore ports, so any
 * server on seed.localhost:<another port>, another local account's included,
 * can fill the jar this origin's requests carry (integration-attack's cookie
 * bomb). The small pool serves the organism's origins: a first head of at
 * most CTL_FRONT_PEEK and room for the largest response head the proxy
 * passes on (CTL_PROXY_MAX_HEAD) with the kernel's own headers. */
#define LARGE_CONNECTION_MEMORY (1024 * 1024)
#define SMALL_CONNECTION_MEMORY (128 * 1024)

/* Per connection: the request in flight, so a request that never reached the
 * access handler (e.g. a head too large) is still freed on close; and its id
 * in ctl.conns (0: not counted; it was shut down at once). */
struct ctl_conn {
        struct ctl_req *req;
        uint64_t id;
};

const char *ctl_req_header(const struct ctl_req *q, const char *name) {
        return ctl_hdrs_get(&q->hdrs, name);
}

static void req_free(struct ctl_req *q) {
        if (!q)
                return;
        free(q->uri);
        free(q->path);
        free(q->query);
        free(q->method);
        ctl_hdrs_free(&q->hdrs);
        free(q->param);
        if (q->body.data) /* it may hold a password or a lent model key */
                secure_zero(q->body.data, q->body.len);
        buf_free(&q->body);
        free(q->session_id);
        if (q->cookie_value) {
                secure_zero(q->cookie_value, strlen(q->cookie_value));
                free(q->cookie_value);
        }
        if (q->has_pending)
                ctl_resp_done(&q->pending);
        ctl_proxy_free(q->px);
        free(q);
}

static struct ctl_conn *conn_ctx(struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

void ctl_conn_timeout(struct MHD_Connection *conn, unsigned seconds) {
        if (conn)
                (void)MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

void ctl_peer_ip(const struct sockaddr *sa, char out[INET6_ADDRSTRLEN]) {
        if (sa && sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, INET6_ADDRSTRLEN);
        else if (sa && sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, INET6_ADDRSTRLEN);
        else
                strcpy(out, "unknown");
}

bool ctl_capped_client(struct ctl *c, const struct sockaddr *sa, size_t len, struct ctl_client *ret) {
        struct ctl_ip ip;
        if (c->proxies.hops > 0 || ctl_ip_from_sockaddr(sa, len, &ip) < 0 ||
            ctl_proxies_trusts(&c->proxies, &ip))
                return false;
        ctl_client_from_ip(&ip, ret);
        return true;
}

void ctl_conns_log(struct ctl *c, int report, const struct ctl_client *client) {
        char who[CTL_CLIENT_STRLEN + 8] = "a client";
        if (client) {
                char ip[CTL_CLIENT_STRLEN];
                ctl_client_str(client, ip);
                snprintf(who, sizeof who, "client %s", ip);
        }
        if (report & CTL_CONNS_CUT_CLIENT)
                log_warn("%s holds %d connections without a signed-in request, the most one client "
                         "may: closing its oldest ones as it opens more",
                         who, CTL_ANON_PER_CLIENT);
        if (report & CTL_CONNS_CUT_ANON)
                log_warn("%u connections without a signed-in request are open, the most allowed: "
                         "closing the oldest ones as more open (the CLI and signed-in browsers "
                         "keep %u connections of their own)",
                         c->connection_limit - c->proxy_limit - CTL_SEED_RESERVE, CTL_SEED_RESERVE);
        if (report & CTL_CONNS_CUT_TOTAL)
                log_warn("all %u connections are open: closing the oldest ones without a signed-in "
                         "request as more open",
                         c->connection_limit);
}

/* The cut of conns.h: the connection's thread sees the end of its stream
 * and libmicrohttpd closes it. */
static void cut_connection(void *userdata, int fd) {
        (void)shutdown(fd, SHUT_RDWR);
}

/* Inside the Seed's container: whether sa is one of the container's own
 * addresses (read again when the list is old). A list that cannot be read
 * refuses every connection: nothing passes unchecked. The front thread (front.h). */
static bool from_inside(struct ctl *c, const struct sockaddr *sa) {
        int64_t now = now_ms();
        if (now - c->own.loaded_ms >= CTL_OWN_ADDRS_REFRESH_MS) {
                int r = ctl_own_addrs_load(&c->own, now);
                if (r < 0) {
                        log_limited(LOG_ERROR, "own-addrs", "cannot read the container's own addresses (%s): "
                                                          "refusing every connection until they can be read",
                                    strerror(-r));
                        return true;
                }
        }
        if (!ctl_own_addrs_match(&c->own, sa))
                return false;
        char ip[INET6_ADDRSTRLEN];
        ctl_peer_ip(sa, ip);
        log_limited(LOG_WARN, "own-addrs",
                    "refused a connection from %s, inside the Seed's own container (the owner comes in "
                    "through the published port)",
                    ip);
        return true;
}

/* At accept (front.h): inside the Seed's container, its own addresses are
 * refused before they can hold anything. */
static bool front_accept(void *userdata, const struct sockaddr *sa, socklen_t len) {
        struct ctl *c = userdata;
        return !(c->refuse_own && from_inside(c, sa));
}

/* To a daemon, once front.h chose its pool: closed at once, before it can
 * hold a thread, only when every connection is taken by signed-in or
 * proxied requests (otherwise the oldest anonymous one makes room:
 * on_connection). libmicrohttpd closes fd when it cannot take it. */
static void front_hand(void *userdata, int fd, const struct sockaddr *sa, socklen_t len, bool large) {
        struct ctl *c = userdata;
        if (!ctl_conns_admit(c->conns)) {
                close(fd);
                return;
        }
        if (!large) {
                (void)ctl_loop_add_conn(c->loop, fd, sa, len); /* closes fd when it cannot */
                return;
        }
        if (MHD_add_connection(c->large, fd, sa, len) != MHD_YES)
                log_limited(LOG_WARN, "front-add", "could not take a connection: %m");
}

static void conn_open(struct ctl *c, struct MHD_Connection *conn, struct ctl_conn *cc) {
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (!ai || !fi)
                return;
        struct ctl_client client;
        bool capped = ctl_capped_client(c, ai->client_addr, sizeof(struct sockaddr_storage), &client);
        int r = ctl_conns_open(c->conns, capped ? &client : NULL, fi->connect_fd, now_ms(), &cc->id);
        if (r < 0) {
                log_debug("no entry left for a connection: closing it");
                cut_connection(c, fi->connect_fd);
                return;
        }
        ctl_conns_log(c, r, capped ? &client : NULL);
}

/* libmicrohttpd closes the socket only after CLOSED, so ctl.conns never
 * cuts a reused fd. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        struct ctl *c = cls;
        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                struct ctl_conn *cc = calloc(1, sizeof *cc);
                if (cc)
                        conn_open(c, conn, cc);
                *socket_context = cc;
                return;
        }
        struct ctl_conn *cc = *socket_context;
        /* The fast path's request, if this connection's never came (the
         * small daemon's connections: the loop thread, or ctl_stop's once
         * the loop ended). */
        const union MHD_ConnectionInfo *di = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
        if (di && di->daemon == c->small && c->n_parked > 0) {
                const union MHD_ConnectionInfo *fi = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                if (fi)
                        ctl_proxy_free(ctl_proxy_unpark(c, fi->connect_fd));
        }
        if (cc) {
                ctl_conns_close(c->conns, cc->id);
                req_free(cc->req);
                free(cc);
        }
        *socket_context = NULL;
}

void ctl_req_authenticated(struct ctl_req *q) {
        ctl_conns_authenticated(q->ctl->conns, q->conn_id);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
        struct ctl_conn *cc = conn_ctx(conn);
        struct ctl_req *q = calloc(1, sizeof *q);
        if (!q || !cc) {
                free(q);
                return NULL;
        }
        q->ctl = cls;
        q->conn_id = cc->id;
        const union MHD_ConnectionInfo *di = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
        if (di && di->daemon == q->ctl->small)
                q->loop = q->ctl->loop;
        q->uri = strdup(uri);
        q->body = BUF_INIT(CTL_MAX_BODY);
        req_free(cc->req); /* a previous request that never reached the handler */
        cc->req = q;
        return q;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        struct ctl *c = cls;
        struct ctl_req *q = *con_cls;
        struct ctl_conn *cc = conn_ctx(conn);
        if (cc && cc->req == q)
                cc->req = NULL;
        if (cc) /* the next head is due within CTL_HEAD_TIMEOUT_S from now */
                ctl_conns_request_done(c->conns, cc->id, now_ms());
        req_free(q);
        *con_cls = NULL;
        ctl_conn_timeout(conn, CTL_HEAD_TIMEOUT_S); /* until the next request's head is in */
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char line[512];
        vsnprintf(line, sizeof line, fmt, ap);
        line[strcspn(line, "\r\n")] = 0;
        log_limited(LOG_DEBUG, "", "http: %s", line);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        struct ctl_stream *s = cls;
        ssize_t n = s->read(s->ctx, buf, max);
        return n > 0 ? n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls) {
        struct ctl_stream *s = cls;
        s->close(s->ctx);
        free(s);
}

/* A streamed body: MHD owns the stream from here (stream_free closes it). */
static struct MHD_Response *stream_response(struct ctl_resp *resp) {
        struct ctl_stream *s = malloc(sizeof *s);
        if (!s)
                return NULL;
        *s = resp->stream;
        resp->stream = (struct ctl_stream){0};
        struct MHD_Response *m = MHD_create_response_from_callback(s->size ? s->size : MHD_SIZE_UNKNOWN, 4096,
                                                                   stream_read, s,
                                                                   stream_free);
        if (!m)
                stream_free(s);
        else if (s->content_type)
                MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, s->content_type);
        return m;
}

enum MHD_Result ctl_queue(struct MHD_Connection *conn, struct ctl_resp *resp) {
        struct MHD_Response *m = resp->stream.read
                                         ? stream_response(resp)
                                         : MHD_create_response_from_buffer(
                                                   resp->len, resp->body ? resp->body : (char *)"",
                                                   resp->body_static ? MHD_RESPMEM_PERSISTENT
                                                                     : MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ok = MHD_NO;
        if (!m)
                goto out;
        if (resp->ctype)
                MHD_add_response_header(m, MHD_HTTP_HEADER_CONTENT_TYPE, resp->ctype);
        for (size_t i = 0; i < resp->hdrs.n; i++)
                if (MHD_add_response_header(m, resp->hdrs.v[i].name, resp->hdrs.v[i].value) != MHD_YES)
                        goto out;
        ok = MHD_queue_response(conn, (unsigned)resp->status, m);
out:
        if (m)
                MHD_destroy_response(m);
        ctl_resp_done(resp);
        return ok;
}

/* A /_seed-style answer (all security headers) for refusals made before
 * routing, and for handler results. */
static enum MHD_Result queue_seed(struct ctl_req *q, struct MHD_Connection *conn,
                                  struct ctl_resp *resp) {
        q->kind = CTL_REQ_DONE;
        if (ctl_expire_foreign_cookies(q, &resp->hdrs) < 0 || ctl_add_security_headers(&resp->hdrs) < 0) {
                ctl_resp_done(resp);
                return MHD_NO;
        }
        return ctl_queue(conn, resp);
}

static enum MHD_Result queue_text(struct ctl_req *q, struct MHD_Connection *conn, int status,
                                  const char *text) {
        struct ctl_resp resp = {0};
        if (ctl_resp_set(&resp, status, "text/plain; charset=utf-8", text) < 0)
                return MHD_NO;
        return queue_seed(q, conn, &resp);
}

static enum MHD_Result queue_internal_error(struct ctl_req *q, struct MHD_Connection *conn) {
        struct ctl_resp resp = {0};
        if (ctl_resp_error(&resp, 500, "internal error (see the kernel log)") < 0)
                return MHD_NO;
        return queue_seed(q, conn, &resp);
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
        struct ctl_req *q = cls;
        return ctl_hdrs_add(&q->hdrs, key, value ? value : "") < 0 ? MHD_NO : MHD_YES;
}

static int req_parse(struct ctl_req *q, struct MHD_Connection *conn, const char *method) {
        q->method = strdup(method);
        if (!q->method || !q->uri)
                return -ENOMEM;
        int n = MHD_get_connection_values(conn, MHD_HEADER_KIND, collect_header, q);
        if (n < 0 || (size_t)n != q->hdrs.n)
                return -E2BIG;
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        ctl_peer_ip(ci ? ci->client_addr : NULL, q->client_ip);
        const char *qm = strchr(q->uri, '?');
        q->path = qm ? strndup(q->uri, (size_t)(qm - q->uri)) : strdup(q->uri);
        if (qm && !(q->query = strdup(qm + 1)))
                return -ENOMEM;
        return q->path ? 0 : -ENOMEM;
}

/* The loop's pool closes a socket the loop watched (upstream-pool.h). */
static void apool_closes(void *userdata, int fd) {
        struct ctl *c = userdata;
        if (c->loop)
                ctl_loop_forget(c->loop, fd);
}

/* A pooled connection of the loop's had bytes nobody asked for, or ended. */
static void apool_stirred(void *userdata, int fd) {
        struct ctl *c = userdata;
        ctl_upool_stirred(&c->apool, fd);
}

/* ---- /_seed on the loop's daemon ---- */

/* A stream's read blocks (an event stream waits up to 15 s for its next
 * event): it never runs on the loop. No route of the organism's origins
 * streams; the control plane's own host reaches this daemon only from a
 * client that sent it on a connection it opened for the organism's
 * (browsers keep connections per host; Node's keep-alive agent, say, keeps
 * them per address): 421 Misdirected Request, the connection closed, so
 * the client asks again on a new one, which front.h gives the large daemon. */
static int misdirect(struct ctl_req *q) {
        ctl_resp_done(&q->pending);
        if (ctl_resp_set(&q->pending, 421, "text/plain; charset=utf-8",
                         "Misdirected Request: ask again on a new connection.\n") < 0 ||
            ctl_hdrs_add(&q->pending.hdrs, "Connection", "close") < 0)
                return -ENOMEM;
        return 1;
}

/* ctl_seed_begin or ctl_seed_finish on a worker (a session lookup may ask
 * PostgreSQL, and the loop serves every connection of the organism's
 * origins) while the connection waits; its answer lands in q->pending. */
struct seed_job {
        struct ctl_loop_job j;
        struct ctl_req *q;
        struct MHD_Connection *conn;
        bool finish;
};

static void seed_work(struct ctl_loop_job *j) {
        struct seed_job *s = (struct seed_job *)j;
        struct ctl_req *q = s->q;
        q->seed_result = s->finish ? ctl_seed_finish(q, &q->pending) : ctl_seed_begin(q, &q->pending);
}

/* Loop thread: the worker's answer becomes q->pending (an error a 500),
 * and the connection goes on. */
static void seed_done(struct ctl_loop_job *j, bool cancelled) {
        struct seed_job *s = (struct seed_job *)j;
        struct ctl_req *q = s->q;
        int r = cancelled ? -ECANCELED : q->seed_result;
        if (r > 0 && q->pending.stream.read)
                r = misdirect(q);
        if (r < 0) {
                if (r != -ECANCELED)
                        log_error_errno(r, "%s %s failed: %m", q->method, q->path);
                ctl_resp_done(&q->pending);
                if (ctl_resp_error(&q->pending, 500, "internal error (see the kernel log)") < 0)
                        q->pending = (struct ctl_resp){.status = 500, .body = (char *)"", .body_static = true};
        }
        q->seed_result = r;
        q->has_pending = r != 0 || s->finish; /* 0 from begin: the body comes next */
        q->seed_job_running = false;
        MHD_resume_connection(s->conn);
        free(s);
}

static enum MHD_Result seed_offload(struct ctl_req *q, struct MHD_Connection *conn, bool finish) {
        struct seed_job *s = malloc(sizeof *s);
        if (!s)
                return MHD_NO;
        *s = (struct seed_job){.j = {.work = seed_work, .done = seed_done}, .q = q, .conn = conn, .finish = finish};
        q->seed_job_running = true;
        q->resumed_first = !finish;
        MHD_suspend_connection(conn);
        ctl_loop_offload(q->loop, &s->j);
        return MHD_YES;
}

static bool has_body(const struct ctl_req *q) {
        return !(q->body_kind == CTL_BODY_NONE || (q->body_kind == CTL_BODY_LENGTH && q->body_len == 0));
}

static enum MHD_Result begin(struct ctl_req *q, struct MHD_Connection *conn, const char *method) {
        struct ctl_resp resp = {0};
        ctl_conns_head_done(q->ctl->conns, q->conn_id);
        ctl_conn_timeout(conn, CTL_REQUEST_TIMEOUT_S); /* the head is in */
        int r = req_parse(q, conn, method);
        if (r == -E2BIG)
                return queue_text(q, conn, 431, "Too many request headers.\n");
        if (r < 0)
                return MHD_NO;
        int kind = ctl_target_is_clean(q->uri) ? ctl_path_classify(q->path) : -EINVAL;
        if (kind < 0)
                return queue_text(q, conn, 400, "Bad request path.\n");
        if (ctl_hdrs_count(&q->hdrs, "Host") > 1)
                return queue_text(q, conn, 400, "More than one Host header.\n");
        if (!ctl_host_allowed(ctl_req_header(q, "Host"), q->ctl->allowed_hosts)) {
                log_limited(LOG_DEBUG, q->client_ip, "refused a request for a Host that is not allowed (client %s)",
                            q->client_ip);
                char text[512];
                snprintf(text, sizeof text,
                         "Misdirected Request: this Seed answers only to localhost names and "
                         "server.allowed_hosts. To reach it from another machine, forward its port "
                         "('ssh -L %u:127.0.0.1:%u <server>') and open http://seed.localhost:%u/_seed/, or add "
                         "this name to server.allowed_hosts in seed.yaml.\n",
                         (unsigned)q->ctl->port, (unsigned)q->ctl->port, (unsigned)q->ctl->port);
                return queue_text(q, conn, 421, text);
        }
        r = ctl_request_framing(&q->hdrs, &q->body_kind, &q->body_len);
        if (r == -EOPNOTSUPP)
                return queue_text(q, conn, 501, "Only the chunked transfer coding is supported.\n");
        if (r < 0) {
                log_limited(LOG_INFO, q->client_ip, "refused a request with ambiguous body framing (client %s)",
                            q->client_ip);
                return queue_text(q, conn, 400,
                                  "Bad request framing: send either one Content-Length (plain "
                                  "decimal) or Transfer-Encoding: chunked, not both.\n");
        }
        /* On the control plane's own origin the organism is never served. */
        bool no_app = kind == CTL_PATH_ORGANISM && q->ctl->control_host && ctl_req_on_control_host(q);
        if (kind == CTL_PATH_ORGANISM && !no_app)
                return ctl_proxy_begin(q, conn);
        if (ctl_req_header(q, "Service-Worker"))
                return queue_text(q, conn, 403,
                                  "Service workers are not allowed: one at / would also control /_seed.\n");
        if (no_app) {
                if (ctl_control_host_other(q, &resp) < 0)
                        return MHD_NO;
                return queue_seed(q, conn, &resp);
        }

        q->kind = CTL_REQ_SEED;
        if (q->loop)
                return seed_offload(q, conn, false);
        r = ctl_seed_begin(q, &resp);
        if (r < 0) {
                ctl_resp_done(&resp);
                log_error_errno(r, "%s %s failed: %m", q->method, q->path);
                return queue_internal_error(q, conn);
        }
        if (r == 0)
                return MHD_YES; /* the body comes next */
        /* Answered from the head alone. Without a body, the answer is queued
         * on the next call, once MHD holds the whole request: one queued
         * before that makes MHD 0.9.75 close the connection (no keep-alive). */
        if (!has_body(q)) {
                q->pending = resp;
                q->has_pending = true;
                return MHD_YES;
        }
        return queue_seed(q, conn, &resp);
}

static enum MHD_Result finish_seed(struct ctl_req *q, struct MHD_Connection *conn) {
        struct ctl_resp resp = {0};
        int r = ctl_seed_finish(q, &resp);
        if (r < 0) {
                ctl_resp_done(&resp);
                log_error_errno(r, "%s %s failed: %m", q->method, q->path);
                return queue_internal_error(q, conn);
        }
        return queue_seed(q, conn, &resp);
}

/* A piece of a /_seed request body. Past CTL_MAX_BODY (only a chunked body
 * gets there: a Content-Length that large is refused from the head) the
 * rest is read and dropped, so the client can read its 413; one that sends
 * far more than that loses the connection. */
static enum MHD_Result seed_upload(struct ctl_req *q, const char *data, size_t n) {
        if (!q->body_overflow && buf_append(&q->body, data, n) >= 0)
                return MHD_YES;
        if (!q->body_overflow) {
                q->body_overflow = true;
                q->body_dropped = q->body.len;
                buf_free(&q->body);
        }
        q->body_dropped += n;
        if (q->body_dropped <= CTL_MAX_DRAIN)
                return MHD_YES;
        log_limited(LOG_INFO, q->client_ip, "closed a connection whose body passed %d MiB (client %s)",
                    CTL_MAX_DRAIN >> 20, q->client_ip);
        return MHD_NO;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        struct ctl_req *q = *con_cls;
        if (!q)
                return MHD_NO;
        switch (q->kind) {
        case CTL_REQ_NEW:
                return begin(q, conn, method);
        case CTL_REQ_SEED:
                if (q->resumed_first) {
                        /* libmicrohttpd's call after a resume in its first
                         * call, before any body: an answer from the head
                         * alone is queued here only when a body follows
                         * (as begin does), else on the final call. */
                        q->resumed_first = false;
                        if (q->has_pending && has_body(q)) {
                                q->has_pending = false;
                                return queue_seed(q, conn, &q->pending);
                        }
                        return MHD_YES;
                }
                if (*upload_data_size > 0) {
                        size_t n = *upload_data_size;
                        *upload_data_size = 0;
                        return seed_upload(q, upload_data, n);
                }
                if (q->has_pending) {
                        q->has_pending = false;
                        return queue_seed(q, conn, &q->pending);
                }
                if (q->loop)
                        return seed_offload(q, conn, true);
                return finish_seed(q, conn);
        case CTL_REQ_PROXY:
                if (*upload_data_size > 0)
                        return ctl_proxy_upload(q, upload_data, upload_data_size);
                return ctl_proxy_finish(q, conn);
        case CTL_REQ_DONE:
                *upload_data_size = 0;
                return MHD_YES;
        }
        return MHD_NO;
}

/* ---- serving the listening sockets ---- */

/* Duplicates of the sockets to serve: the configured ones, or addr bound here. */
static int listen_sockets(const struct ctl_config *cfg, struct ctl_listen *ret) {
        if (!cfg->listen)
                return ctl_listen_open(cfg->addr, ret);
        if (cfg->listen->n == 0 || cfg->listen->n > CTL_LISTEN_MAX)
                return -EINVAL;
        struct ctl_listen l = CTL_LISTEN_INIT;
        for (size_t i = 0; i < cfg->listen->n; i++) {
                int fd = fcntl(cfg->listen->fd[i], F_DUPFD_CLOEXEC, 3);
                if (fd < 0) {
                        int r = -errno;
                        ctl_listen_close(&l);
                        return log_error_errno(r, "cannot duplicate the listening socket: %m");
                }
                l.fd[l.n++] = fd;
        }
        l.port = cfg->listen->port;
        *ret = l;
        return 0;
}

/* One daemon without a listening socket of its own: front.h hands it its
 * connections. The large one has a thread per connection (MHD_USE_ITC:
 * stopping wakes its thread through a pipe); the small one runs on the
 * event loop (loop.h), in epoll mode, suspending what waits. */
static struct MHD_Daemon *start_daemon(struct ctl *c, size_t pool, bool on_loop) {
        unsigned flags = on_loop ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                                 : MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                                           MHD_USE_ITC;
        flags |= MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
        return MHD_start_daemon(
                flags, 0, NULL, NULL, on_request, c,
                MHD_OPTION_CONNECTION_LIMIT, c->connection_limit,
                MHD_OPTION_CONNECTION_TIMEOUT, CTL_HEAD_TIMEOUT_S,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool,
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, c,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, c,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, c,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, c,
                MHD_OPTION_END);
}

static int start_daemons(struct ctl *c, const struct ctl_config *cfg) {
        c->large = start_daemon(c, LARGE_CONNECTION_MEMORY, false);
        c->small = start_daemon(c, SMALL_CONNECTION_MEMORY, true);
        if (!c->large || !c->small)
                return log_error_errno(-EIO, "could not start the HTTP server");
        int r0 = ctl_fast_new(c, &c->fast);
        if (r0 < 0)
                return log_error_errno(r0, "could not start the HTTP server: %m");
        const struct ctl_loop_ops lops = {.take = ctl_fast_take, .run = ctl_fast_run, .parked_news = apool_stirred,
                                          .userdata = c};
        r0 = ctl_loop_start(c->small, &lops, &c->loop);
        if (r0 < 0)
                return log_error_errno(r0, "could not start the HTTP server's event loop: %m");
        struct ctl_listen l = CTL_LISTEN_INIT;
        int r = listen_sockets(cfg, &l);
        if (r < 0)
                return r;
        c->port = l.port;
        c->n_listen = l.n;
        const struct ctl_front_ops ops = {.accept = front_accept, .hand = front_hand, .userdata = c};
        r = ctl_front_start(l.fd, l.n, c->control_host, &ops, &c->front); /* takes the sockets */
        if (r < 0)
                return log_error_errno(r, "could not start accepting connections: %m");
        return 0;
}

/* ---- the head deadlines ---- */

/* At most once a minute: how many heads were late since the last report. */
static void reaper_log(struct ctl *c, unsigned n, int64_t now) {
        c->reaper_cuts += n;
        if (c->reaper_cuts == 0 || (c->reaper_logged_ms != 0 && now - c->reaper_logged_ms < 60000))
                return;
        log_warn("closed %u connection%s whose request head was not complete within %u seconds "
                 "(slow clients, or a slowloris)%s",
                 c->reaper_cuts, c->reaper_cuts == 1 ? "" : "s", CTL_HEAD_TIMEOUT_S,
                 c->reaper_logged_ms ? " in the last minute" : "");
        c->reaper_cuts = 0;
        c->reaper_logged_ms = now;
}

/* CLOCK_MONOTONIC ms milliseconds from now (reaper_wake's clock). */
static struct timespec mono_after(int64_t ms) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_sec += ms / 1000;
        t.tv_nsec += (ms % 1000) * 1000000;
        if (t.tv_nsec >= 1000000000) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000;
        }
        return t;
}

/* The reaper thread: cuts the connections whose head deadline passed, at
 * the next deadline or every second, until ctl_stop. */
static void *reaper_main(void *arg) {
        struct ctl *c = arg;
        pthread_mutex_lock(&c->lock);
        while (!c->stopping) {
                pthread_mutex_unlock(&c->lock);
                int64_t now = now_ms(), next;
                unsigned n = ctl_conns_reap(c->conns, now, &next);
                reaper_log(c, n, now);
                struct timespec until = mono_after(next == INT64_MAX || next - now > 1000 ? 1000 : next - now);
                pthread_mutex_lock(&c->lock);
                if (!c->stopping)
                        (void)pthread_cond_timedwait(&c->reaper_wake, &c->lock, &until);
        }
        pthread_mutex_unlock(&c->lock);
        return NULL;
}

static int reaper_start(struct ctl *c) {
        int r = -pthread_create(&c->reaper, NULL, reaper_main, c);
        c->reaper_started = r == 0;
        return r;
}

static void reaper_stop(struct ctl *c) {
        if (!c->reaper_started)
                return;
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        pthread_cond_broadcast(&c->reaper_wake);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->reaper, NULL);
        c->reaper_started = false;
}

static void ctl_free(struct ctl *c) {
        if (!c)
                return;
        reaper_stop(c);
        if (c->cli_token)
                secure_zero(c->cli_token, strlen(c->cli_token));
        if (c->session_key)
                secure_zero(c->session_key, strlen(c->session_key));
        free(c->cli_token);
        free(c->session_key);
        free(c->seed_name);
        free(c->seed_dir);
        free(c->organism_socket_override);
        free(c->control_host);
        strv_free(c->allowed_hosts);
        ctl_owner_clear(&c->owner);
        ctl_limiter_free(c->limiter);
        ctl_conns_free(c->conns);
        pthread_cond_destroy(&c->reaper_wake);
        pthread_mutex_destroy(&c->lock);
        ctl_preview_done(&c->preview);
        ctl_badge_done(c);
        ctl_session_cache_done(&c->sessions);
        ctl_upool_done(&c->pool);
        ctl_upool_done(&c->apool);
        free(c);
}

static char *strdup_or_null(const char *s, bool *oom) {
        char *d = s ? strdup(s) : NULL;
        if (s && !d)
                *oom = true;
        return d;
}

/* Password sign-in and trusted proxies. A bad setting is logged and turned
 * off (links keep working), rather than keeping the control plane down. */
static void sign_in_setup(struct ctl *c, const struct ctl_config *cfg) {
        int r = ctl_owner_init(&c->owner, cfg->owner_user, cfg->owner_password);
        if (r == -ENOENT)
                log_info("no SEED_OWNER_PASSWORD: the owner signs in with one-time links only");
        else if (r == -EINVAL)
                log_error("SEED_OWNER_PASSWORD is shorter than %d characters: password sign-in is off "
                          "(one-time links from 'seed login' still work)",
                          CTL_PASSWORD_MIN_CHARS);
        else if (r == -E2BIG)
                log_error("SEED_OWNER_PASSWORD is longer than %d bytes: password sign-in is off "
                          "(one-time links from 'seed login' still work)",
                          CTL_PASSWORD_MAX_BYTES);
        else if (r == -EBADMSG)
                log_error("SEED_OWNER_USER is longer than %d bytes or has control characters: password "
                          "sign-in is off (one-time links from 'seed login' still work)",
                          CTL_USER_MAX_BYTES);
        else if (r < 0)
                log_error_errno(r, "password sign-in is off: %m");
        else
                log_info("password sign-in is on (SEED_OWNER_USER%s)",
                         strempty(cfg->owner_user) ? " not set: user 'owner'" : "");
        if (ctl_proxies_parse(cfg->trusted_proxies, &c->proxies) < 0)
                log_error("SEED_TRUSTED_PROXIES is neither a number of proxies (1 to %d) nor a list of "
                          "their addresses or CIDR ranges (at most %d): X-Forwarded-For stays ignored",
                          CTL_MAX_PROXY_HOPS, CTL_MAX_PROXIES);
        else if (c->proxies.hops > 0)
                log_info("X-Forwarded-For is read behind %u trusted prox%s; connections are not capped "
                         "per client (every peer may be the proxy: it has to cap its own clients)",
                         c->proxies.hops, c->proxies.hops == 1 ? "y" : "ies");
        else if (c->proxies.n > 0)
                log_info("X-Forwarded-For is read from %zu trusted proxy address%s; connections from "
                         "them are not capped per client",
                         c->proxies.n, c->proxies.n == 1 ? "" : "es");
}

/* The pools of conns.h for a connection limit: CTL_SEED_RESERVE only for
 * signed-in requests, the rest half anonymous, half proxied. */
static struct ctl_conns_limits conns_limits(unsigned limit) {
        unsigned shared = limit - CTL_SEED_RESERVE;
        return (struct ctl_conns_limits){
                .total = limit,
                .anon = shared / 2,
                .anon_per_client = CTL_ANON_PER_CLIENT,
                .proxied = shared - shared / 2,
                .head_ms = CTL_HEAD_TIMEOUT_S * 1000,
        };
}

int ctl_start(const struct ctl_config *cfg, struct ctl **ret) {
        if (!cfg || strempty(cfg->addr) || strempty(cfg->session_key))
                return -EINVAL;
        unsigned limit = cfg->connection_limit ? cfg->connection_limit : CTL_MAX_CONNECTIONS;
        if (limit < CTL_SEED_RESERVE + 2 || limit > CTL_MAX_CONNECTIONS)
                return -EINVAL;
        _cleanup_free_ char *bad = NULL;
        if (ctl_routes_check(&bad) < 0 || ctl_api_routes_check(cfg->api_routes, &bad) < 0)
                return log_error_errno(-EINVAL, "the control plane's route table is malformed: %s", bad);
        struct ctl *c = calloc(1, sizeof *c);
        int r0;
        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        ctl_session_cache_init(&c->sessions);
        ctl_upool_init(&c->pool);
        ctl_upool_init(&c->apool);
        ctl_upool_on_close(&c->apool, apool_closes, c);
        ctl_upool_watched(&c->apool); /* by the loop (apool_stirred) */
        ctl_preview_init(&c->preview);
        c->kdb = cfg->kdb;
        c->drafts = cfg->drafts;
        ctl_badge_init(c);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&c->reaper_wake, &ca);
        pthread_condattr_destroy(&ca);
        for (size_t i = 0; i < ARRAY_SIZE(c->upstream); i++)
                c->upstream[i] = -1;
        bool oom = false;
        c->seed_name = strdup_or_null(strempty(cfg->seed_name) ? "seed" : cfg->seed_name, &oom);
        c->seed_dir = strdup_or_null(cfg->seed_dir, &oom);
        c->cli_token = strdup_or_null(cfg->cli_token, &oom);
        c->session_key = strdup_or_null(cfg->session_key, &oom);
        c->organism_socket_override = strdup_or_null(cfg->organism_socket_override, &oom);
        c->control_host = strdup_or_null(strempty(cfg->control_host) ? NULL : cfg->control_host, &oom);
        c->allowed_hosts = calloc(1, sizeof(char *));
        for (char *const *a = cfg->allowed_hosts; a && *a && !oom; a++)
                oom = strv_push(&c->allowed_hosts, *a) < 0;
        if (oom || !c->allowed_hosts) {
                ctl_free(c);
                return -ENOMEM;
        }
        c->kdb = cfg->kdb;
        c->organism = cfg->organism;
        c->status = cfg->status;
        c->userdata = cfg->userdata;
        c->api_routes = cfg->api_routes;
        c->api_userdata = cfg->api_userdata ? cfg->api_userdata : cfg->userdata;
        c->on_5xx = cfg->on_5xx;
        c->on_5xx_userdata = cfg->on_5xx_userdata;
        c->connection_limit = limit;
        c->proxy_limit = conns_limits(limit).proxied;
        c->refuse_own = cfg->refuse_own_addresses;
        if (c->refuse_own && (r0 = ctl_own_addrs_load(&c->own, now_ms())) < 0) {
                ctl_free(c);
                return log_error_errno(r0, "cannot read the container's own addresses: %m");
        }
        ctl_cookie_name(c->session_key, c->cookie_name);
        int r = ctl_limiter_new(&ctl_limits_default, &c->limiter);
        if (r < 0) {
                ctl_free(c);
                return r;
        }
        sign_in_setup(c, cfg);
        const struct ctl_conns_limits lim = conns_limits(limit);
        r = ctl_conns_new(&lim, cut_connection, c, &c->conns);
        if (r < 0) {
                ctl_free(c);
                return r;
        }

        if ((r = reaper_start(c)) < 0) {
                ctl_free(c);
                return log_error_errno(r, "could not start the connection reaper: %m");
        }
        if ((r = start_daemons(c, cfg)) < 0) {
                ctl_stop(c);
                return r;
        }
        log_info("control plane listening on port %u%s", c->port,
                 c->n_listen > 1 ? " of 127.0.0.1 and [::1]" : "");
        *ret = c;
        return 0;
}

uint16_t ctl_port(const struct ctl *c) {
        return c ? c->port : 0;
}

void ctl_stop(struct ctl *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        for (size_t i = 0; i < ARRAY_SIZE(c->upstream); i++)
                if (c->upstream[i] >= 0)
                        shutdown(c->upstream[i], SHUT_RDWR);
        pthread_mutex_unlock(&c->lock);
        ctl_upool_close_all(&c->pool); /* a connection put back from now on is closed */
        ctl_front_stop(TAKE_PTR(c->front)); /* no new connections */
        if (c->large)
                MHD_stop_daemon(c->large);
        /* The loop first: it leaves no connection suspended (libmicrohttpd
         * refuses to stop a daemon with one). */
        ctl_loop_stop(c->loop);
        ctl_upool_close_all(&c->apool); /* the loop's thread has ended: here is safe */
        if (c->small)
                MHD_stop_daemon(c->small);
        /* What the fast path left (the loop ended: no thread uses it). */
        ctl_fast_free(TAKE_PTR(c->fast));
        for (size_t i = 0; i < ARRAY_SIZE(c->parked); i++)
                ctl_proxy_free(TAKE_PTR(c->parked[i].px));
        c->n_parked = 0;
        ctl_loop_free(TAKE_PTR(c->loop));
        ctl_proxy_spares_free(c);
        ctl_free(c);
}
