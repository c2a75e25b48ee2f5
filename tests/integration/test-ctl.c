/* Integration tests of the control plane's HTTP side: a real PostgreSQL (the
 * kernel DB with links and sessions), the real libmicrohttpd server on
 * loopback, a raw HTTP/1.1 client, and a fake organism on a Unix socket.
 * Runs as the unprivileged 'seed' account (drops root first). Tests share
 * state and run in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "ctl/ctl.h"
#include "ctl/front.h"
#include "ctl/listen.h"
#include "ctl/limit.h"
#include "db/db.h"
#include "pg/pg.h"

#define SESSION_KEY "integration-session-key-0123456789"
#define OWNER_PASSWORD "integration pässword"
#define CLI_TOKEN "cli-token-abcdef0123456789abcdef0123456789"
#define NAV "Sec-Fetch-Dest: document\r\nSec-Fetch-Mode: navigate\r\nSec-Fetch-Site: none\r\n"
#define FETCH "Sec-Fetch-Dest: empty\r\nSec-Fetch-Mode: cors\r\nSec-Fetch-Site: same-origin\r\n"

static char seed_dir[64] = "/tmp/seed-ctl-XXXXXX";
static char sock_path[100];
static struct pg *g_pg;
static struct db *g_kdb;
static struct ctl *g_ctl;
static uint16_t g_port;
static char g_host[64];
static char g_cookie_name[32];
static char g_cookie[65];     /* a signed-in browser's cookie value */
static char g_token[65];      /* its API token */

/* ---- a raw HTTP client ---- */

struct resp {
        int status;
        char *head;   /* status line + headers */
        char *body;
        size_t body_len;
};

static void resp_done(struct resp *r) {
        free(r->head);
        free(r->body);
        *r = (struct resp){0};
}

/* The n-th (0-based) value of a response header, or NULL. */
static const char *resp_header_nth(const struct resp *r, const char *name, int n, char *out, size_t outsz) {
        size_t nl = strlen(name);
        for (const char *p = strstr(r->head, "\r\n"); p && p[2];) {
                p += 2;
                const char *e = strstr(p, "\r\n");
                size_t ll = e ? (size_t)(e - p) : strlen(p);
                if (ll > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0 && n-- == 0) {
                        const char *v = p + nl + 1;
                        while (*v == ' ')
                                v++;
                        snprintf(out, outsz, "%.*s", (int)(ll - (size_t)(v - p)), v);
                        return out;
                }
                p = e;
        }
        return NULL;
}

static int resp_header_count(const struct resp *r, const char *name) {
        char tmp[8];
        int n = 0;
        while (resp_header_nth(r, name, n, tmp, sizeof tmp))
                n++;
        return n;
}

static char *resp_header(const struct resp *r, const char *name) {
        static __thread char out[8192];
        return (char *)resp_header_nth(r, name, 0, out, sizeof out);
}

/* Decodes a complete chunked body in place; -1 if malformed. */
static ssize_t dechunk(char *b, size_t len) {
        size_t in = 0, out = 0;
        for (;;) {
                char *end = NULL;
                if (in >= len)
                        return -1;
                unsigned long n = strtoul(b + in, &end, 16);
                char *crlf = strstr(b + in, "\r\n");
                if (!crlf || end == b + in)
                        return -1;
                in = (size_t)(crlf - b) + 2;
                if (n == 0)
                        return (ssize_t)out;
                if (in + n + 2 > len)
                        return -1;
                memmove(b + out, b + in, n);
                out += n;
                in += n + 2;
        }
}

static int connect_tcp(int family, uint16_t port) {
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct timeval tv = {.tv_sec = 20};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        int r;
        if (family == AF_INET6) {
                struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons(port),
                                          .sin6_addr = IN6ADDR_LOOPBACK_INIT};
                r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        } else {
                struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        }
        if (r < 0) {
                close(fd);
                return -errno;
        }
        return fd;
}

static void send_all(int fd, const char *d, size_t n) {
        while (n > 0) {
                ssize_t k = send(fd, d, n, MSG_NOSIGNAL);
                if (k <= 0)
                        return; /* the server may answer and close early (413) */
                d += k;
                n -= (size_t)k;
        }
}

static void read_response(int fd, struct resp *ret) {
        struct buf b = BUF_INIT(8 << 20);
        char tmp[16384];
        for (;;) {
                ssize_t k = recv(fd, tmp, sizeof tmp, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == ECONNRESET && b.len > 0)
                        break;
                assert_true(k >= 0);
                if (k == 0)
                        break;
                assert_int_equal(buf_append(&b, tmp, (size_t)k), 0);
        }
        assert_non_null(b.data);
        char *sep = strstr(b.data, "\r\n\r\n");
        if (!sep)
                fail_msg("no response head in: %.200s", b.data);
        *ret = (struct resp){0};
        ret->head = strndup(b.data, (size_t)(sep - b.data) + 2);
        size_t blen = b.len - (size_t)(sep + 4 - b.data);
        ret->body = malloc(blen + 1);
        memcpy(ret->body, sep + 4, blen);
        ret->body[blen] = 0;
        ret->body_len = blen;
        assert_int_equal(sscanf(ret->head, "HTTP/1.%*d %d", &ret->status), 1);
        const char *te = resp_header(ret, "Transfer-Encoding");
        if (te && strcasecmp(te, "chunked") == 0) {
                ssize_t n = dechunk(ret->body, ret->body_len);
                if (n < 0)
                        fail_msg("bad chunked body after %s", ret->head);
                ret->body_len = (size_t)n;
                ret->body[n] = 0;
        }
        buf_free(&b);
}

/* Sends one request (Connection: close) with the given Host and extra header
 * lines; body may be NULL. */
static void http_host(const char *method, const char *target, const char *host, const char *extra,
                      const char *body, struct resp *ret) {
        struct buf req = BUF_INIT(8 << 20);
        assert_int_equal(buf_printf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s", method,
                                    target, host, extra ? extra : ""),
                         0);
        if (body)
                assert_int_equal(buf_printf(&req, "Content-Length: %zu\r\n", strlen(body)), 0);
        assert_int_equal(buf_puts(&req, "\r\n"), 0);
        if (body)
                assert_int_equal(buf_puts(&req, body), 0);
        int fd = connect_tcp(AF_INET, g_port);
        assert_true(fd >= 0);
        send_all(fd, req.data, req.len);
        read_response(fd, ret);
        close(fd);
        buf_free(&req);
}

static void http(const char *method, const char *target, const char *extra, const char *body,
                 struct resp *ret) {
        http_host(method, target, g_host, extra, body, ret);
}

/* The Host the API answers on: the control plane's own origin when it has
 * one (integration-ctl-loop), else 127.0.0.1. */
static void own_host(uint16_t port, char *out, size_t n) {
        const char *h = getenv("CTL_TEST_CONTROL_HOST");
        snprintf(out, n, "%s:%u", h ? h : "127.0.0.1", port);
}

/* Extra header lines for a signed-in browser: cookie (+ token). */
static char *browser(const char *cookie, const char *token, const char *more) {
        char *s = NULL;
        assert_int_equal(xasprintf(&s, "Cookie: other=1; %s=%s\r\n%s%s%s%s", g_cookie_name, cookie,
                                   token ? "X-Seed-Token: " : "", token ? token : "", token ? "\r\n" : "",
                                   more ? more : ""),
                         0);
        return s;
}

static char *cli(const char *more) {
        char *s = NULL;
        assert_int_equal(xasprintf(&s, "Authorization: Bearer %s\r\n%s", CLI_TOKEN, more ? more : ""), 0);
        return s;
}

static void assert_seed_headers(const struct resp *r) {
        assert_string_equal(resp_header(r, "Content-Security-Policy"),
                            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
        assert_string_equal(resp_header(r, "Cross-Origin-Opener-Policy"), "same-origin");
        assert_string_equal(resp_header(r, "X-Content-Type-Options"), "nosniff");
        assert_string_equal(resp_header(r, "Referrer-Policy"), "no-referrer");
        assert_string_equal(resp_header(r, "Cache-Control"), "no-store");
        assert_string_equal(resp_header(r, "X-Frame-Options"), "DENY");
}

/* ---- a fake organism on a Unix socket ---- */

static int org_listen_fd = -1;
static pthread_t org_thread;
static pthread_mutex_t org_lock = PTHREAD_MUTEX_INITIALIZER;
static char org_last_head[16384];
static char org_last_body[4096];
static int org_requests;        /* requests the fake organism has read */
static int org_strays;          /* unasked answers it sent (/stray) */
static int org_accepts;         /* connections it accepted */
static bool org_drop_reused;    /* the next request on a used connection: closed unanswered */
/* The connections being served (a thread each), so org_stop can end them. */
#define ORG_CONNS_MAX 64
static int org_conns[ORG_CONNS_MAX];
static int org_n_conns;
static pthread_cond_t org_cond = PTHREAD_COND_INITIALIZER;
static struct {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool released;
} org_big = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};

/* Answers one request; false when the answer ends with the connection. */
static bool org_reply(int fd, const char *path) {
        if (startswith(path, "/id/")) {
                char r[512];
                snprintf(r, sizeof r, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(path + 4),
                         path + 4);
                send_all(fd, r, strlen(r));
                return true;
        }
        if (streq(path, "/big")) {
                /* Half of the body, then the rest once the test says so. */
                static char half[32768];
                memset(half, 'x', sizeof half);
                const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n";
                send_all(fd, h, strlen(h));
                send_all(fd, half, sizeof half);
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 30;
                pthread_mutex_lock(&org_big.lock);
                while (!org_big.released && pthread_cond_timedwait(&org_big.cond, &org_big.lock, &until) == 0)
                        ;
                pthread_mutex_unlock(&org_big.lock);
                send(fd, half, sizeof half, MSG_NOSIGNAL);
                return true;
        }
        if (streq(path, "/chunked") || streq(path, "/policy")) {
                /* Headers the proxy's policy drops or adds to; /policy's
                 * body whole with a Content-Length (the loop's own answer). */
                bool chunked = streq(path, "/chunked");
                char head[512];
                snprintf(head, sizeof head,
                         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n%s\r\n"
                         "Content-Security-Policy: default-src 'self'\r\n"
                         "Cross-Origin-Opener-Policy: same-origin\r\n"
                         "Service-Worker-Allowed: /\r\nSet-Cookie: %s=evil; Path=/_seed\r\n"
                         "Set-Cookie: app=1; Path=/\r\nX-Organism: yes\r\n\r\n",
                         chunked ? "Transfer-Encoding: chunked" : "Content-Length: 20", g_cookie_name);
                send_all(fd, head, strlen(head));
                if (!chunked) {
                        send_all(fd, "Hello, from the body", 20);
                        return true;
                }
                /* Split anywhere, including inside chunk-size lines. */
                static const char *const pieces[] = {"7\r\nHello,", " \r", "\n0", "d;x=y\r\nfrom the ",
                                                     "body\r\n", "0\r\n", "\r\n"};
                for (size_t i = 0; i < ARRAY_SIZE(pieces); i++) {
                        send_all(fd, pieces[i], strlen(pieces[i]));
                        usleep(2000); /* not a wait: keeps the pieces in separate reads */
                }
                return true;
        } else if (streq(path, "/stray")) {
                /* An answer, then, once the connection is idle, one nobody
                 * asked for. */
                const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray";
                send_all(fd, r, strlen(r));
                usleep(100 * 1000); /* the scenario: the connection is back in the pool by then */
                const char *forged = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
                send_all(fd, forged, strlen(forged));
                pthread_mutex_lock(&org_lock);
                org_strays++;
                pthread_cond_broadcast(&org_cond);
                pthread_mutex_unlock(&org_lock);
                return true;
        } else if (streq(path, "/large")) {
                /* More than a client's small receive buffer takes at once. */
                static char body[60000];
                memset(body, 'L', sizeof body);
                const char *h = "HTTP/1.1 200 OK\r\nContent-Length: 60000\r\n\r\n";
                send_all(fd, h, strlen(h));
                send_all(fd, body, sizeof body);
                return true;
        } else if (streq(path, "/echo")) {
                char head[256];
                pthread_mutex_lock(&org_lock);
                snprintf(head, sizeof head, "HTTP/1.1 201 Created\r\nContent-Length: %zu\r\n\r\n",
                         strlen(org_last_body));
                send_all(fd, head, strlen(head));
                send_all(fd, org_last_body, strlen(org_last_body));
                pthread_mutex_unlock(&org_lock);
                return true;
        } else if (startswith(path, "/fail/")) {
                const char *r = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 6\r\n\r\nbroken";
                send_all(fd, r, strlen(r));
                return true;
        } else if (streq(path, "/close")) {
                const char *r = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end";
                send_all(fd, r, strlen(r));
        } else if (streq(path, "/drop")) {
                /* closes without an answer */
        } else if (streq(path, "/wide")) {
                /* A response head just under the proxy's 64 KiB. */
                const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n";
                send_all(fd, r, strlen(r));
                char line[1000];
                for (int i = 0; i < 64; i++) {
                        int k = snprintf(line, sizeof line, "X-Wide-%02d: ", i);
                        memset(line + k, 'w', sizeof line - (size_t)k - 2);
                        memcpy(line + sizeof line - 2, "\r\n", 2);
                        send_all(fd, line, sizeof line);
                }
                send_all(fd, "\r\nwide", 6);
                return true;
        } else if (streq(path, "/bighead")) {
                const char *r = "HTTP/1.1 200 OK\r\n";
                send_all(fd, r, strlen(r));
                char line[1024];
                memset(line, 'a', sizeof line);
                memcpy(line, "X-Big: ", 7);
                line[sizeof line - 2] = '\r';
                line[sizeof line - 1] = '\n';
                for (int i = 0; i < 80; i++)
                        send_all(fd, line, sizeof line);
                send_all(fd, "\r\n", 2);
        } else {
                const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found";
                send_all(fd, r, strlen(r));
                return true;
        }
        return false;
}

/* Reads one request (head, then a Content-Length or chunked body) and
 * answers it; true when the connection may carry another. used: it carried
 * one already. */
static bool org_serve(int fd, bool used) {
        struct buf b = BUF_INIT(1 << 20);
        char tmp[4096], *sep = NULL;
        while (!(b.data && (sep = strstr(b.data, "\r\n\r\n")))) {
                ssize_t k = recv(fd, tmp, sizeof tmp, 0);
                if (k <= 0) {
                        buf_free(&b);
                        return false;
                }
                buf_append(&b, tmp, (size_t)k);
        }
        size_t head_len = (size_t)(sep - b.data) + 4;
        char path[256] = "";
        sscanf(b.data, "%*s %255s", path);
        path[strcspn(path, "?")] = 0;
        bool chunked = strcasestr(b.data, "\r\nTransfer-Encoding: chunked\r\n") != NULL;
        const char *cl = strcasestr(b.data, "\r\nContent-Length: ");
        size_t want = cl && cl < sep ? strtoul(cl + 18, NULL, 10) : 0;
        for (;;) {
                size_t have = b.len - head_len;
                if (!chunked && have >= want)
                        break;
                if (chunked && strstr(b.data + head_len, "0\r\n\r\n"))
                        break;
                ssize_t k = recv(fd, tmp, sizeof tmp, 0);
                if (k <= 0)
                        break;
                buf_append(&b, tmp, (size_t)k);
        }
        pthread_mutex_lock(&org_lock);
        org_requests++;
        bool drop = used && org_drop_reused;
        if (drop)
                org_drop_reused = false;
        snprintf(org_last_head, sizeof org_last_head, "%.*s", (int)head_len, b.data);
        size_t blen = b.len - head_len;
        memcpy(org_last_body, b.data + head_len, blen < sizeof org_last_body ? blen : sizeof org_last_body - 1);
        org_last_body[blen < sizeof org_last_body ? blen : sizeof org_last_body - 1] = 0;
        if (chunked) {
                ssize_t n = dechunk(org_last_body, strlen(org_last_body));
                org_last_body[n < 0 ? 0 : n] = 0;
        }
        pthread_mutex_unlock(&org_lock);
        bool close_asked = strcasestr(b.data, "\r\nConnection: close\r\n") != NULL;
        bool again = !drop && org_reply(fd, path) && !close_asked;
        buf_free(&b);
        return again;
}

/* One connection, as long as it carries requests (HTTP/1.1 keep-alive). */
static void *org_conn_main(void *arg) {
        int fd = (int)(intptr_t)arg;
        for (bool used = false; org_serve(fd, used); used = true)
                ;
        pthread_mutex_lock(&org_lock);
        for (int i = 0; i < org_n_conns; i++)
                if (org_conns[i] == fd) {
                        org_conns[i] = org_conns[--org_n_conns];
                        break;
                }
        close(fd);
        pthread_cond_broadcast(&org_cond);
        pthread_mutex_unlock(&org_lock);
        return NULL;
}

static void *org_main(void *arg) {
        for (;;) {
                int fd = accept4(org_listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return NULL;
                }
                pthread_t t;
                pthread_mutex_lock(&org_lock);
                org_accepts++;
                bool room = org_n_conns < ORG_CONNS_MAX;
                if (room)
                        org_conns[org_n_conns++] = fd;
                pthread_mutex_unlock(&org_lock);
                if (!room || pthread_create(&t, NULL, org_conn_main, (void *)(intptr_t)fd) != 0) {
                        close(fd); /* (a slot it took is freed when the test ends) */
                        continue;
                }
                pthread_detach(t);
        }
}

static void org_start(void) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
        org_listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(org_listen_fd >= 0);
        assert_int_equal(bind(org_listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(org_listen_fd, 16), 0);
        assert_int_equal(pthread_create(&org_thread, NULL, org_main, NULL), 0);
}

/* Stops accepting and ends every connection (as an organism's restart
 * does: its bridge goes with it), waiting until each is closed. */
static void org_stop(void) {
        if (org_listen_fd < 0)
                return;
        shutdown(org_listen_fd, SHUT_RDWR);
        pthread_join(org_thread, NULL);
        close(org_listen_fd);
        org_listen_fd = -1;
        unlink(sock_path);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 30;
        pthread_mutex_lock(&org_lock);
        for (int i = 0; i < org_n_conns; i++)
                shutdown(org_conns[i], SHUT_RDWR);
        while (org_n_conns > 0 && pthread_cond_timedwait(&org_cond, &org_lock, &until) == 0)
                ;
        assert_int_equal(org_n_conns, 0);
        pthread_mutex_unlock(&org_lock);
}

static int org_accepted(void) {
        pthread_mutex_lock(&org_lock);
        int n = org_accepts;
        pthread_mutex_unlock(&org_lock);
        return n;
}

static int org_count(void) {
        pthread_mutex_lock(&org_lock);
        int n = org_requests;
        pthread_mutex_unlock(&org_lock);
        return n;
}

/* ---- an organism that accepts connections and never answers ---- */

#define HANG_MAX 64

static struct hang {
        int listen_fd;
        pthread_t thread;
        pthread_mutex_t lock;
        int held[HANG_MAX];
        int n_held;
        bool answer;            /* answer new connections at once */
} hang = {.listen_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static void *hang_main(void *arg) {
        for (;;) {
                int fd = accept4(hang.listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        return NULL;
                }
                pthread_mutex_lock(&hang.lock);
                if (!hang.answer && hang.n_held < HANG_MAX) {
                        hang.held[hang.n_held++] = fd;
                        fd = -1;
                }
                pthread_mutex_unlock(&hang.lock);
                if (fd >= 0) {
                        char tmp[4096];
                        (void)recv(fd, tmp, sizeof tmp, 0);
                        const char *r = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nawake";
                        send_all(fd, r, strlen(r));
                        close(fd);
                }
        }
}

static int hang_count(void) {
        pthread_mutex_lock(&hang.lock);
        int n = hang.n_held;
        pthread_mutex_unlock(&hang.lock);
        return n;
}

/* From now on the organism answers, and the connections it held break. */
static void hang_release(void) {
        pthread_mutex_lock(&hang.lock);
        hang.answer = true;
        for (int i = 0; i < hang.n_held; i++)
                close(hang.held[i]);
        hang.n_held = 0;
        pthread_mutex_unlock(&hang.lock);
}

/* A Unix socket listening with the given backlog; accept_too starts the
 * thread that accepts (and holds) connections. */
static int unix_listen(const char *path, int backlog) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(fd, backlog), 0);
        return fd;
}

/* A Unix socket listening with an empty backlog that one connection (the
 * filler, *ret_filler) already fills: the next connect() finds no room
 * until the filler is accepted. */
static int unix_listen_full(const char *path, int *ret_filler) {
        int lfd = unix_listen(path, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
        *ret_filler = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(*ret_filler >= 0);
        assert_int_equal(connect(*ret_filler, (struct sockaddr *)&sa, sizeof sa), 0);
        return lfd;
}

/* The requests of http() and friends go to server c from here until
 * aim_back(saved). */
struct aimed {
        uint16_t port;
        char host[64];
};

static void aim_at(struct ctl *c, struct aimed *saved) {
        saved->port = g_port;
        snprintf(saved->host, sizeof saved->host, "%s", g_host);
        g_port = ctl_port(c);
        snprintf(g_host, sizeof g_host, "127.0.0.1:%u", g_port);
}

static void aim_back(const struct aimed *saved) {
        g_port = saved->port;
        snprintf(g_host, sizeof g_host, "%s", saved->host);
}

/* ---- setup ---- */

static int ext_echo(void *userdata, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        *ret_status = 202;
        return xasprintf(ret_json, "{\"param\":\"%s\",\"body\":%s,\"cli\":%s}", call->param, call->body,
                         call->via_cli ? "true" : "false");
}

static int ext_fail(void *userdata, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return -EIO;
}

/* A stream that sends "a", then waits until the test releases it (or 60
 * seconds), sends "b" and ends: a quiet stretch like an event stream's. */
static struct {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool released;
        int closed;
} slow = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};

static ssize_t slow_read(void *ctx, char *buf, size_t max) {
        int *step = ctx;
        if (*step == 1) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 60;
                pthread_mutex_lock(&slow.lock);
                while (!slow.released && pthread_cond_timedwait(&slow.cond, &slow.lock, &until) == 0)
                        ;
                pthread_mutex_unlock(&slow.lock);
        }
        if (*step >= 2)
                return -1;
        buf[0] = *step == 0 ? 'a' : 'b';
        (*step)++;
        return 1;
}

static void slow_close(void *ctx) {
        free(ctx);
        pthread_mutex_lock(&slow.lock);
        slow.closed++;
        pthread_mutex_unlock(&slow.lock);
}

static void slow_release(void) {
        pthread_mutex_lock(&slow.lock);
        slow.released = true;
        pthread_cond_broadcast(&slow.cond);
        pthread_mutex_unlock(&slow.lock);
}

static int ext_slow_stream(void *userdata, const struct ctl_api_call *call, int *ret_status, char **ret_json,
                           struct ctl_stream *ret_stream) {
        int *step = calloc(1, sizeof *step);
        if (!step)
                return -ENOMEM;
        *ret_stream = (struct ctl_stream){.content_type = "text/plain", .read = slow_read, .close = slow_close,
                                          .ctx = step};
        return 0;
}

static const struct ctl_api_route ext_routes[] = {
        {.method = "POST", .pattern = "/_seed/api/echo/*", .handler = ext_echo},
        {.method = "GET", .pattern = "/_seed/api/fail", .handler = ext_fail},
        {.method = "GET", .pattern = "/_seed/api/slow-stream", .stream = ext_slow_stream},
        {0},
};

static int status_cb(void *userdata, char **ret_json) {
        *ret_json = strdup("{\"name\":\"itest\",\"organism\":{\"state\":\"running\"},\"generation\":1}");
        return *ret_json ? 0 : -ENOMEM;
}

/* What the proxy told of 5xx answers (ctl_config.on_5xx). */
static struct {
        pthread_mutex_t lock;
        int calls;
        char last[256];
} told_5xx = {PTHREAD_MUTEX_INITIALIZER, 0, ""};

static void on_5xx(void *userdata, const char *method, const char *path, int status) {
        pthread_mutex_lock(&told_5xx.lock);
        told_5xx.calls++;
        snprintf(told_5xx.last, sizeof told_5xx.last, "%s %s %d", method, path, status);
        pthread_mutex_unlock(&told_5xx.lock);
}

static int told_5xx_calls(char *ret_last, size_t size) {
        pthread_mutex_lock(&told_5xx.lock);
        int n = told_5xx.calls;
        snprintf(ret_last, size, "%s", told_5xx.last);
        pthread_mutex_unlock(&told_5xx.lock);
        return n;
}

static struct ctl_config ctl_cfg(const char *addr) {
        return (struct ctl_config){
                .addr = addr,
                .seed_name = "itest",
                .seed_dir = seed_dir,
                .kdb = g_kdb,
                .cli_token = CLI_TOKEN,
                .session_key = SESSION_KEY,
                .owner_password = OWNER_PASSWORD,
                .trusted_proxies = "127.0.0.1",
                .organism_socket_override = sock_path,
                .status = status_cb,
                .api_routes = ext_routes,
                .on_5xx = on_5xx,
                /* integration-ctl-loop runs the proxy's tests again with
                 * an origin of its own for the control plane: requests
                 * for 127.0.0.1 then go to the event loop (loop.h). */
                .control_host = getenv("CTL_TEST_CONTROL_HOST"),
        };
}

/* A server of its own whose organism is the socket at path, aimed at. */
static struct ctl *start_aimed(const char *path, struct aimed *saved) {
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        cfg.organism_socket_override = path;
        struct ctl *c = NULL;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        aim_at(c, saved);
        return c;
}

static void start_ctl(void) {
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        assert_int_equal(ctl_start(&cfg, &g_ctl), 0);
        g_port = ctl_port(g_ctl);
        assert_true(g_port > 0);
        snprintf(g_host, sizeof g_host, "127.0.0.1:%u", g_port);
}

static int group_setup(void **state) {
        if (!mkdtemp(seed_dir))
                return -1;
        snprintf(sock_path, sizeof sock_path, "%s/organism.sock", seed_dir);
        _cleanup_free_ char *logs = path_join(seed_dir, ".seed/logs");
        if (mkdir_p(logs, 0700) < 0)
                return -1;
        _cleanup_free_ char *klog = path_join(logs, "kernel.log");
        const char *lines = "line one\nline two\nline \"three\"\nline four\nline five\n";
        if (write_file_atomic(klog, lines, strlen(lines), 0600) < 0)
                return -1;
        if (pg_start(seed_dir, &g_pg) < 0)
                return -1;
        _cleanup_free_ char *ci = NULL;
        if (pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci) < 0 || db_connect(ci, &g_kdb) < 0)
                return -1;
        ctl_cookie_name(SESSION_KEY, g_cookie_name);
        return 0;
}

static int group_teardown(void **state) {
        ctl_stop(g_ctl);
        org_stop();
        db_close(g_kdb);
        pg_stop(g_pg);
        rm_rf(seed_dir);
        return 0;
}

/* Signs in with a fresh link; fills cookie (65 bytes). */
static void sign_in(char *cookie) {
        _cleanup_free_ char *t = NULL, *target = NULL;
        struct resp r;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        http("GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 200);
        const char *sc = resp_header(&r, "Set-Cookie");
        assert_non_null(sc);
        assert_true(startswith(sc, g_cookie_name));
        memcpy(cookie, sc + strlen(g_cookie_name) + 1, 64);
        cookie[64] = 0;
        resp_done(&r);
}

/* ---- tests ---- */

static void test_start_and_healthz(void **state) {
        start_ctl();
        struct resp r;
        http("GET", "/_seed/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "{\"ok\":true}\n");
        assert_string_equal(resp_header(&r, "Content-Type"), "application/json");
        assert_seed_headers(&r);
        resp_done(&r);
}

/* A listening socket of ours on family's loopback (port 0: any). */
static int listen_loopback(int family, uint16_t port, uint16_t *ret_port) {
        int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        /* Past other programs' connections using the port locally; a listener
         * still refuses us. */
        int reuse = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse);
        struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
        socklen_t sl;
        if (family == AF_INET6) {
                int one = 1;
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
                ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
                ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
                sl = sizeof(struct sockaddr_in6);
        } else {
                ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                ((struct sockaddr_in *)&ss)->sin_port = htons(port);
                sl = sizeof(struct sockaddr_in);
        }
        if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1) < 0) {
                close(fd);
                return -errno;
        }
        assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &sl), 0);
        *ret_port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
        return fd;
}

static int healthz_status(int family, uint16_t port) {
        int fd = connect_tcp(family, port);
        if (fd < 0)
                return fd;
        char req[256];
        snprintf(req, sizeof req, "GET /_seed/healthz HTTP/1.1\r\nHost: %s:%u\r\nConnection: close\r\n\r\n",
                 family == AF_INET6 ? "[::1]" : "127.0.0.1", port);
        send_all(fd, req, strlen(req));
        struct resp r;
        read_response(fd, &r);
        close(fd);
        int st = r.status;
        resp_done(&r);
        return st;
}

/* A Seed keeps its port: taken on either loopback family, the start fails
 * (no next free port, which another account could be waiting for). */
static void test_port_taken_refuses(void **state) {
        static const int families[] = {AF_INET, AF_INET6};
        for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
                uint16_t taken = 0;
                int fd = listen_loopback(families[i], 0, &taken);
                if (fd < 0 && families[i] == AF_INET6)
                        continue; /* no IPv6 loopback here */
                assert_true(fd >= 0);
                char addr[64];
                snprintf(addr, sizeof addr, "127.0.0.1:%u", taken);
                struct ctl_config cfg = ctl_cfg(addr);
                struct ctl *c = NULL;
                assert_int_equal(ctl_start(&cfg, &c), -EADDRINUSE);
                assert_null(c);
                /* and nothing of ours is left on the other family */
                uint16_t again = 0;
                int other = listen_loopback(families[i] == AF_INET ? AF_INET6 : AF_INET, taken, &again);
                assert_true(other >= 0 || families[i] == AF_INET);
                if (other >= 0)
                        close(other);
                close(fd);
        }
}

/* 127.0.0.1 is served on [::1] too, with the same port (browsers try
 * [::1] first for localhost names); port 0 picks one free on both. */
static void test_loopback_serves_both_families(void **state) {
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        struct ctl *c = NULL;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        uint16_t port = ctl_port(c);
        assert_int_equal(healthz_status(AF_INET, port), 200);
        uint16_t p6 = 0;
        int probe = listen_loopback(AF_INET6, 0, &p6);
        if (probe >= 0) { /* the host has IPv6 loopback */
                close(probe);
                assert_int_equal(healthz_status(AF_INET6, port), 200);
        }
        ctl_stop(c);
        assert_true(healthz_status(AF_INET, port) < 0);
}

/* Whether a healthz request on port gets any byte back (false: the
 * connection was closed or reset unanswered). */
static bool answered(int family, uint16_t port) {
        int fd = connect_tcp(family, port);
        if (fd < 0)
                return false;
        char req[256], c;
        snprintf(req, sizeof req, "GET /_seed/healthz HTTP/1.1\r\nHost: %s:%u\r\nConnection: close\r\n\r\n",
                 family == AF_INET6 ? "[::1]" : "127.0.0.1", port);
        send_all(fd, req, strlen(req));
        ssize_t k;
        do
                k = recv(fd, &c, 1, 0);
        while (k < 0 && errno == EINTR);
        close(fd);
        return k > 0;
}

/* Inside the Seed's container (refuse_own_addresses): a connection from the
 * kernel's own addresses — loopback, both families — is closed before any
 * answer, healthz included; the same control plane without the flag serves
 * it (so it is the flag that refuses, not a broken start). */
static void test_own_addresses_refused_in_container(void **state) {
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        cfg.refuse_own_addresses = true;
        struct ctl *c = NULL;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        uint16_t port = ctl_port(c);
        assert_false(answered(AF_INET, port));
        uint16_t p6 = 0;
        int probe = listen_loopback(AF_INET6, 0, &p6);
        if (probe >= 0) {
                close(probe);
                assert_false(answered(AF_INET6, port));
        }
        ctl_stop(c);
        cfg.refuse_own_addresses = false;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        assert_int_equal(healthz_status(AF_INET, ctl_port(c)), 200);
        ctl_stop(c);
}

/* Served from sockets the supervisor bound (ctl_config.listen): stopping
 * hands them back untouched, so the supervisor's copies keep the port. */
static void test_given_sockets_outlive_ctl(void **state) {
        struct ctl_listen l = CTL_LISTEN_INIT;
        assert_int_equal(ctl_listen_open("127.0.0.1:0", &l), 0);
        struct ctl_config cfg = ctl_cfg("127.0.0.1:1");
        cfg.listen = &l;
        for (int round = 0; round < 2; round++) {
                struct ctl *c = NULL;
                assert_int_equal(ctl_start(&cfg, &c), 0);
                assert_int_equal(ctl_port(c), l.port);
                for (size_t i = 0; i < l.n; i++)
                        assert_int_equal(healthz_status(i == 0 ? AF_INET : AF_INET6, l.port), 200);
                ctl_stop(c);
                /* still listening (queued until the next kernel), and nobody else can bind */
                for (size_t i = 0; i < l.n; i++) {
                        int v = 0;
                        socklen_t vl = sizeof v;
                        assert_int_equal(getsockopt(l.fd[i], SOL_SOCKET, SO_ACCEPTCONN, &v, &vl), 0);
                        assert_int_equal(v, 1);
                        uint16_t got = 0;
                        assert_int_equal(listen_loopback(i == 0 ? AF_INET : AF_INET6, l.port, &got), -EADDRINUSE);
                }
        }
        ctl_listen_close(&l);
}

static void test_ipv6(void **state) {
        struct ctl_config cfg = ctl_cfg("[::1]:0");
        struct ctl *c = NULL;
        if (ctl_start(&cfg, &c) < 0)
                skip(); /* no IPv6 loopback here */
        int fd = connect_tcp(AF_INET6, ctl_port(c));
        assert_true(fd >= 0);
        char req[256];
        snprintf(req, sizeof req, "GET /_seed/healthz HTTP/1.1\r\nHost: [::1]:%u\r\nConnection: close\r\n\r\n",
                 ctl_port(c));
        send_all(fd, req, strlen(req));
        struct resp r;
        read_response(fd, &r);
        close(fd);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        ctl_stop(c);
}

static void test_forged_host(void **state) {
        static const char *const hosts[] = {"evil.com", "127.0.0.1.evil.com", "localhost.evil.com:80",
                                            "10.0.0.1"};
        for (size_t i = 0; i < ARRAY_SIZE(hosts); i++) {
                struct resp r;
                http_host("GET", "/_seed/healthz", hosts[i], NULL, NULL, &r);
                assert_int_equal(r.status, 421);
                resp_done(&r);
                http_host("GET", "/", hosts[i], NULL, NULL, &r);
                assert_int_equal(r.status, 421);
                /* It says what to do: tunnel, or allow the name. */
                assert_non_null(strstr(r.body, "ssh -L"));
                assert_non_null(strstr(r.body, "server.allowed_hosts in seed.yaml"));
                resp_done(&r);
        }
        struct resp r;
        http_host("GET", "/_seed/healthz", "localhost", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        http_host("GET", "/_seed/healthz", "seed.localhost:1234", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        /* /_seed is never served on the organism's origin. */
        http_host("GET", "/_seed/healthz", "organism.localhost", NULL, NULL, &r);
        assert_int_equal(r.status, 421);
        resp_done(&r);
        /* A request head past the connection's memory limit (1 MiB: room for
         * a browser's whole cookie jar) is refused. */
        char *huge = malloc(1100 * 1024 + 32);
        strcpy(huge, "X-Huge: ");
        memset(huge + 8, 'a', 1100 * 1024);
        strcpy(huge + 8 + 1100 * 1024, "\r\n");
        http("GET", "/_seed/healthz", huge, NULL, &r);
        assert_int_equal(r.status, 431);
        resp_done(&r);
        free(huge);
        /* A disguised /_seed path is refused, not proxied. */
        http("GET", "/%5Fseed/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 400);
        resp_done(&r);
}

static void test_link_sign_in(void **state) {
        _cleanup_free_ char *t = NULL, *target = NULL;
        struct resp r;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        assert_true(strlen(t) >= 32);
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);

        /* Without Fetch Metadata: refused, and the link stays usable. */
        http("GET", target, NULL, NULL, &r);
        assert_int_equal(r.status, 400);
        assert_non_null(strstr(r.body, "too old"));
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
        /* As a fetch: refused too. */
        http("GET", target, FETCH, NULL, &r);
        assert_int_equal(r.status, 403);
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);

        http("GET", target, NAV "User-Agent: itest-browser\r\n", NULL, &r);
        assert_int_equal(r.status, 200); /* "Signed in", moving on by itself */
        assert_non_null(strstr(r.body, "<meta http-equiv=\"refresh\" content=\"0;url=/_seed/\">"));
        assert_seed_headers(&r);
        const char *sc = resp_header(&r, "Set-Cookie");
        assert_non_null(sc);
        char want[256];
        assert_true(strlen(sc) > strlen(g_cookie_name) + 65);
        memcpy(g_cookie, sc + strlen(g_cookie_name) + 1, 64);
        g_cookie[64] = 0;
        snprintf(want, sizeof want, "%s=%s; Path=/_seed; HttpOnly; SameSite=Lax; Max-Age=2592000",
                 g_cookie_name, g_cookie);
        assert_string_equal(sc, want);
        ctl_api_token(SESSION_KEY, g_cookie, g_token);
        resp_done(&r);

        /* Single use. */
        http("GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 403);
        assert_non_null(strstr(r.body, "This sign-in link is no longer valid"));
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
        /* Unknown token and no token. */
        http("GET", "/_seed/login?t=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", NAV, NULL, &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);
        http("GET", "/_seed/login", NAV, NULL, &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);
}

/* The same-origin fallback (no control_host, as ctl_cfg): cookies under
 * /_seed that the kernel did not set are expired on page loads (the organism
 * shares the origin and could plant any), never its own; API calls stay
 * small. */
static void test_foreign_cookies_expired(void **state) {
        struct resp r;
        _cleanup_free_ char *cookies = NULL, *b = NULL;
        assert_int_equal(xasprintf(&cookies, "bomb1=x; %s=%s; bomb2=y", g_cookie_name, g_cookie), 0);
        assert_int_equal(xasprintf(&b, NAV "Cookie: %s\r\n", cookies), 0);
        http("GET", "/_seed/", b, NULL, &r);
        assert_int_equal(r.status, 200);
        int n = 0;
        char v[512];
        for (int i = 0; resp_header_nth(&r, "Set-Cookie", i, v, sizeof v); i++) {
                if (startswith(v, g_cookie_name))
                        continue; /* the session's own renewal */
                assert_true(streq(v, "bomb1=; Path=/_seed; Max-Age=0") || streq(v, "bomb1=; Path=/_seed/; Max-Age=0") ||
                            streq(v, "bomb2=; Path=/_seed; Max-Age=0") || streq(v, "bomb2=; Path=/_seed/; Max-Age=0"));
                n++;
        }
        assert_int_equal(n, 4); /* not Path=/: that is the organism's own, on a shared origin */
        resp_done(&r);
        _cleanup_free_ char *api = browser(g_cookie, g_token, FETCH);
        _cleanup_free_ char *api2 = NULL;
        assert_int_equal(xasprintf(&api2, "%sCookie: bomb1=x\r\n", api), 0);
        http("GET", "/_seed/api/status", api2, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
}

static void test_expired_link(void **state) {
        const char *t = "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeedface";
        char hash[65];
        crypto_sha256_hex(t, strlen(t), hash);
        assert_int_equal(db_link_insert(g_kdb, hash, wall_ms() - 1000), 0);
        _cleanup_free_ char *target = NULL;
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        struct resp r;
        http("GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 403);
        assert_non_null(strstr(r.body, "This sign-in link is no longer valid"));
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
}

static void test_page(void **state) {
        struct resp r;
        _cleanup_free_ char *b = browser(g_cookie, NULL, NAV);
        http("GET", "/_seed/", b, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_seed_headers(&r);
        char meta[128];
        snprintf(meta, sizeof meta, "<meta name=\"seed-token\" content=\"%s\">", g_token);
        assert_non_null(strstr(r.body, meta));
        assert_non_null(strstr(r.body, "<script src=\"/_seed/app.js\""));
        /* No inline script or handlers: every <script has a src. */
        for (const char *p = strstr(r.body, "<script"); p; p = strstr(p + 1, "<script"))
                assert_true(strncmp(p, "<script src=", 12) == 0);
        assert_null(strstr(r.body, "onclick"));
        assert_null(strstr(r.body, "{{"));
        /* The browser's cookie is renewed. */
        assert_non_null(strstr(resp_header(&r, "Set-Cookie"), "Max-Age=2592000"));
        resp_done(&r);

        /* Without Fetch Metadata: the browser is too old. */
        _cleanup_free_ char *b2 = browser(g_cookie, NULL, NULL);
        http("GET", "/_seed/", b2, NULL, &r);
        assert_int_equal(r.status, 400);
        assert_null(strstr(r.body, g_token));
        resp_done(&r);
        /* As a fetch from a script: refused. */
        _cleanup_free_ char *b3 = browser(g_cookie, NULL, FETCH);
        http("GET", "/_seed/", b3, NULL, &r);
        assert_int_equal(r.status, 403);
        assert_null(strstr(r.body, g_token));
        resp_done(&r);
        /* No session: private. */
        http("GET", "/_seed/", NAV, NULL, &r);
        assert_int_equal(r.status, 401);
        assert_non_null(strstr(r.body, "This Seed is private"));
        /* With the password form: Referrer-Policy same-origin (see
         * test_password_form_on_private_page), the rest as everywhere. */
        assert_string_equal(resp_header(&r, "Referrer-Policy"), "same-origin");
        assert_string_equal(resp_header(&r, "Cross-Origin-Opener-Policy"), "same-origin");
        assert_string_equal(resp_header(&r, "X-Frame-Options"), "DENY");
        assert_non_null(strstr(resp_header(&r, "Content-Security-Policy"), "frame-ancestors 'none'"));
        resp_done(&r);
        /* A forged cookie: private. */
        _cleanup_free_ char *b4 = browser("00000000000000000000000000000000000000000000000000000000deadbeef", NULL, NAV);
        http("GET", "/_seed/", b4, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        /* /_seed redirects to /_seed/. */
        http("GET", "/_seed", NULL, NULL, &r);
        assert_int_equal(r.status, 308);
        resp_done(&r);
}

static void test_assets(void **state) {
        struct resp r;
        _cleanup_free_ char *b = browser(g_cookie, NULL, "Sec-Fetch-Dest: script\r\n");
        http("GET", "/_seed/app.js", b, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_true(startswith(resp_header(&r, "Content-Type"), "text/javascript"));
        assert_non_null(strstr(r.body, "X-Seed-Token"));
        resp_done(&r);
        http("GET", "/_seed/style.css", b, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        http("GET", "/_seed/app.js", NULL, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        http("GET", "/_seed/nothing-here", NULL, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        http("GET", "/_seed/public.css", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        /* The icon every page names: no session needed (the private page
         * shows it too). (/favicon.ico on the control plane's own origin:
         * test_attack.py; here, in the same-origin layout, it is the app's.) */
        http("GET", "/_seed/favicon.svg", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.head, "Content-Type: image/svg+xml"));
        assert_true(r.body_len > 0 && strncmp(r.body, "<svg", 4) == 0);
        resp_done(&r);
        http("GET", "/_seed/", NULL, NULL, &r);
        assert_non_null(strstr(r.body, "<link rel=\"icon\" href=\"/_seed/favicon.svg\""));
        resp_done(&r);
}

static void test_status_api(void **state) {
        struct resp r;
        _cleanup_free_ char *ok = browser(g_cookie, g_token, FETCH);
        http("GET", "/_seed/api/status", ok, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"state\":\"running\""));
        assert_seed_headers(&r);
        resp_done(&r);

        _cleanup_free_ char *cookie_only = browser(g_cookie, NULL, FETCH);
        http("GET", "/_seed/api/status", cookie_only, NULL, &r);
        assert_int_equal(r.status, 401);
        assert_true(startswith(r.body, "{\"error\":"));
        resp_done(&r);

        _cleanup_free_ char *token_only = NULL;
        assert_int_equal(xasprintf(&token_only, "X-Seed-Token: %s\r\n" FETCH, g_token), 0);
        http("GET", "/_seed/api/status", token_only, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);

        char wrong[65];
        memcpy(wrong, g_token, sizeof wrong);
        wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
        _cleanup_free_ char *bad = browser(g_cookie, wrong, FETCH);
        http("GET", "/_seed/api/status", bad, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);

        _cleanup_free_ char *target = NULL;
        assert_int_equal(xasprintf(&target, "/_seed/api/status?token=%s", g_token), 0);
        http("GET", target, cookie_only, NULL, &r);
        assert_int_equal(r.status, 400);
        resp_done(&r);
        http("GET", target, ok, NULL, &r);
        assert_int_equal(r.status, 400);
        resp_done(&r);

        _cleanup_free_ char *c = cli(NULL);
        http("GET", "/_seed/api/status", c, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        http("GET", "/_seed/api/status", "Authorization: Bearer nope\r\n", NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        http("GET", "/_seed/api/nothing", c, NULL, &r);
        assert_int_equal(r.status, 404);
        resp_done(&r);
        http("GET", "/_seed/api/nothing", NULL, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
}

static void test_logs_api(void **state) {
        struct resp r;
        _cleanup_free_ char *c = cli(NULL);
        http("GET", "/_seed/api/logs?name=kernel&lines=2", c, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "{\"name\":\"kernel\",\"lines\":[\"line four\",\"line five\"]}\n");
        resp_done(&r);
        http("GET", "/_seed/api/logs?name=kernel", c, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"line \\\"three\\\"\""));
        resp_done(&r);
        http("GET", "/_seed/api/logs?name=organism", c, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "{\"name\":\"organism\",\"lines\":[]}\n");
        resp_done(&r);
        http("GET", "/_seed/api/logs?name=../../etc/passwd", c, NULL, &r);
        assert_int_equal(r.status, 400);
        resp_done(&r);
        http("GET", "/_seed/api/logs?name=kernel&lines=2001", c, NULL, &r);
        assert_int_equal(r.status, 400);
        resp_done(&r);
}

static void test_login_links_api(void **state) {
        struct resp r;
        _cleanup_free_ char *c = cli("Content-Type: application/json\r\n");
        http("POST", "/_seed/api/login-links", c, "{}", &r);
        assert_int_equal(r.status, 201);
        char prefix[128];
        snprintf(prefix, sizeof prefix, "{\"url\":\"http://%s/_seed/login?t=", g_host);
        assert_true(startswith(r.body, prefix));
        char *t = r.body + strlen(prefix);
        t[strcspn(t, "\"")] = 0;
        _cleanup_free_ char *target = NULL;
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        resp_done(&r);
        http("GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);

        /* A browser session cannot make links: CLI only. */
        _cleanup_free_ char *b = browser(g_cookie, g_token, FETCH "Content-Type: application/json\r\n"
                                                                  "Origin: http://127.0.0.1\r\n");
        http("POST", "/_seed/api/login-links", b, "{}", &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
}

static void test_state_changing_rules(void **state) {
        struct resp r;
        _cleanup_free_ char *form = cli("Content-Type: application/x-www-form-urlencoded\r\n");
        http("POST", "/_seed/api/login-links", form, "a=1", &r);
        assert_int_equal(r.status, 415);
        resp_done(&r);
        _cleanup_free_ char *none = cli(NULL);
        http("POST", "/_seed/api/login-links", none, "{}", &r);
        assert_int_equal(r.status, 415);
        resp_done(&r);
        _cleanup_free_ char *cross = cli("Content-Type: application/json\r\nOrigin: http://evil.com\r\n");
        http("POST", "/_seed/api/login-links", cross, "{}", &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);
        _cleanup_free_ char *cross2 = cli("Content-Type: application/json\r\nSec-Fetch-Site: cross-site\r\n");
        http("POST", "/_seed/api/login-links", cross2, "{}", &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);

        /* A browser must say same-origin: without Fetch Metadata it is refused. */
        char origin[128];
        snprintf(origin, sizeof origin, "Origin: http://%s\r\nContent-Type: application/json\r\n", g_host);
        _cleanup_free_ char *old = browser(g_cookie, g_token, origin);
        http("POST", "/_seed/api/owner/logout", old, "{}", &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);
        _cleanup_free_ char *evil = browser(g_cookie, g_token, FETCH "Origin: http://evil.com\r\n"
                                                                     "Content-Type: application/json\r\n");
        http("POST", "/_seed/api/owner/logout", evil, "{}", &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);

        /* Too large a body. */
        _cleanup_free_ char *big = cli("Content-Type: application/json\r\nContent-Length: 2000000\r\n");
        int fd = connect_tcp(AF_INET, g_port);
        char req[512];
        snprintf(req, sizeof req, "POST /_seed/api/login-links HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n",
                 g_host, big);
        send_all(fd, req, strlen(req));
        read_response(fd, &r);
        close(fd);
        assert_int_equal(r.status, 413);
        resp_done(&r);
        /* GET on a POST route. */
        http("GET", "/_seed/api/login-links", none, NULL, &r);
        assert_int_equal(r.status, 405);
        resp_done(&r);
}

static void test_api_routes_from_other_modules(void **state) {
        struct resp r;
        char more[256];
        snprintf(more, sizeof more, FETCH "Origin: http://%s\r\nContent-Type: application/json\r\n", g_host);
        _cleanup_free_ char *b = browser(g_cookie, g_token, more);
        http("POST", "/_seed/api/echo/evo_7", b, "{\"x\":1}", &r);
        assert_int_equal(r.status, 202);
        assert_string_equal(r.body, "{\"param\":\"evo_7\",\"body\":{\"x\":1},\"cli\":false}");
        assert_seed_headers(&r);
        resp_done(&r);
        _cleanup_free_ char *c = cli("Content-Type: application/json\r\n");
        http("POST", "/_seed/api/echo/abc", c, "[]", &r);
        assert_int_equal(r.status, 202);
        assert_non_null(strstr(r.body, "\"cli\":true"));
        resp_done(&r);
        /* Same guards as built-in routes. */
        _cleanup_free_ char *cookie_only = browser(g_cookie, NULL, more);
        http("POST", "/_seed/api/echo/x", cookie_only, "{}", &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        _cleanup_free_ char *form = browser(g_cookie, g_token, FETCH "Content-Type: text/plain\r\n");
        http("POST", "/_seed/api/echo/x", form, "{}", &r);
        assert_int_equal(r.status, 415);
        resp_done(&r);
        http("GET", "/_seed/api/echo/x", c, NULL, &r);
        assert_int_equal(r.status, 405);
        resp_done(&r);
        http("POST", "/_seed/api/echo/", c, "{}", &r);
        assert_int_equal(r.status, 404);
        resp_done(&r);
        http("GET", "/_seed/api/fail", c, NULL, &r);
        assert_int_equal(r.status, 500);
        assert_non_null(strstr(r.body, "\"error\""));
        resp_done(&r);
}

static void test_logout(void **state) {
        char other[65], token[65];
        sign_in(other);
        ctl_api_token(SESSION_KEY, other, token);
        struct resp r;
        char more[256];
        snprintf(more, sizeof more, FETCH "Origin: http://%s\r\nContent-Type: application/json\r\n", g_host);
        _cleanup_free_ char *b = browser(other, token, more);
        http("POST", "/_seed/api/owner/logout", b, "{}", &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(resp_header(&r, "Set-Cookie"), "Max-Age=0"));
        resp_done(&r);
        http("GET", "/_seed/api/status", b, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        /* The first browser is still signed in. */
        _cleanup_free_ char *ok = browser(g_cookie, g_token, FETCH);
        http("GET", "/_seed/api/owner/sessions", ok, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"current\":true"));
        assert_non_null(strstr(r.body, "itest-browser"));
        resp_done(&r);
}

/* A session revoked from another browser stops working at once, although
 * the kernel keeps verified sessions in memory (ctl/session-cache.h): its
 * very next call is refused, and a session revoked in the DB behind the
 * kernel's back is not touched by the revocation of another. */
static void test_revoke_at_once(void **state) {
        char victim[65], vtoken[65], bystander[65], btoken[65];
        sign_in(victim);
        sign_in(bystander);
        ctl_api_token(SESSION_KEY, victim, vtoken);
        ctl_api_token(SESSION_KEY, bystander, btoken);
        _cleanup_free_ char *v = browser(victim, vtoken, FETCH);
        _cleanup_free_ char *bs = browser(bystander, btoken, FETCH);
        struct resp r;
        /* Both verified (and so cached) by a call each; the victim's id. */
        http("GET", "/_seed/api/status", bs, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        http("GET", "/_seed/api/owner/sessions", v, NULL, &r);
        assert_int_equal(r.status, 200);
        const char *cur = strstr(r.body, "\"current\":true");
        assert_non_null(cur);
        const char *idp = NULL;
        for (const char *p = r.body; (p = strstr(p, "\"id\":\"")) && p < cur; p++)
                idp = p;
        assert_non_null(idp);
        char id[65];
        snprintf(id, sizeof id, "%.*s", (int)strcspn(idp + 6, "\""), idp + 6);
        resp_done(&r);
        http("GET", "/_seed/api/status", v, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);

        /* Revoked by the first browser: refused at once. */
        char more[256], target[128];
        snprintf(more, sizeof more, FETCH "Origin: http://%s\r\nContent-Type: application/json\r\n", g_host);
        _cleanup_free_ char *ok = browser(g_cookie, g_token, more);
        snprintf(target, sizeof target, "/_seed/api/owner/sessions/%s/revoke", id);
        http("POST", target, ok, "{}", &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        for (int i = 0; i < 3; i++) {
                http("GET", "/_seed/api/status", v, NULL, &r);
                assert_int_equal(r.status, 401);
                resp_done(&r);
        }
        /* The page is refused too (the cookie alone). */
        _cleanup_free_ char *vpage = browser(victim, NULL, NAV);
        http("GET", "/_seed/", vpage, NULL, &r);
        assert_int_not_equal(r.status, 200);
        resp_done(&r);
        /* The other browser is still signed in. */
        http("GET", "/_seed/api/status", bs, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

static void test_link_limit(void **state) {
        int live = db_link_count_live(g_kdb, wall_ms());
        assert_true(live >= 0 && live < 20);
        char *made[20] = {0};
        int n = 20 - live;
        for (int i = 0; i < n; i++)
                assert_int_equal(ctl_login_link_new(g_kdb, &made[i]), 0);
        char *t = NULL;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), -EMFILE);
        struct resp r;
        _cleanup_free_ char *c = cli("Content-Type: application/json\r\n");
        http("POST", "/_seed/api/login-links", c, "{}", &r);
        assert_int_equal(r.status, 429);
        assert_non_null(strstr(r.body, "too many"));
        resp_done(&r);
        /* Using one frees a place. */
        char hash[65];
        for (int i = 0; i < n; i++) {
                crypto_sha256_hex(made[i], strlen(made[i]), hash);
                assert_int_equal(db_link_consume(g_kdb, hash, wall_ms()), 0);
                free(made[i]);
        }
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        free(t);
}

static void test_session_survives_restart(void **state) {
        ctl_stop(g_ctl);
        g_ctl = NULL;
        start_ctl();
        struct resp r;
        _cleanup_free_ char *b = browser(g_cookie, NULL, NAV);
        http("GET", "/_seed/", b, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, g_token));
        resp_done(&r);
}

static void test_proxy(void **state) {
        org_start();
        struct resp r;
        _cleanup_free_ char *extra = NULL;
        assert_int_equal(xasprintf(&extra,
                                   "Cookie: theme=dark; %s=%s; lang=en\r\nX-Seed-Token: %s\r\n"
                                   "Authorization: Bearer %s\r\nX-Forwarded-For: 6.6.6.6\r\n"
                                   "Accept: text/plain\r\n",
                                   g_cookie_name, g_cookie, g_token, CLI_TOKEN),
                         0);
        /* The same policy on a streamed answer and on one whole with its
         * length (on the loop, written by its own HTTP/1.1: fast.h). */
        char v[256];
        static const char *const targets[] = {"/policy", "/chunked?q=1"};
        for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
                http("GET", targets[i], extra, NULL, &r);
                assert_int_equal(r.status, 200);
                assert_string_equal(r.body, "Hello, from the body");
                assert_string_equal(resp_header(&r, "Cross-Origin-Opener-Policy"), "unsafe-none");
                assert_int_equal(resp_header_count(&r, "Cross-Origin-Opener-Policy"), 1);
                assert_int_equal(resp_header_count(&r, "Content-Security-Policy"), 2);
                assert_string_equal(resp_header_nth(&r, "Content-Security-Policy", 0, v, sizeof v), "default-src 'self'");
                assert_string_equal(resp_header_nth(&r, "Content-Security-Policy", 1, v, sizeof v),
                                    "frame-ancestors 'none'");
                assert_null(resp_header(&r, "Service-Worker-Allowed"));
                assert_int_equal(resp_header_count(&r, "Set-Cookie"), 1);
                assert_string_equal(resp_header(&r, "Set-Cookie"), "app=1; Path=/");
                assert_string_equal(resp_header(&r, "X-Organism"), "yes");
                assert_non_null(strstr(resp_header(&r, "Vary"), "Cookie"));
                assert_int_equal(resp_header_count(&r, "Content-Length") + resp_header_count(&r, "Transfer-Encoding"), 1);
                resp_done(&r);
        }

        pthread_mutex_lock(&org_lock);
        assert_true(startswith(org_last_head, "GET /chunked?q=1 HTTP/1.1\r\n"));
        assert_non_null(strstr(org_last_head, "Cookie: theme=dark; lang=en\r\n"));
        assert_null(strstr(org_last_head, g_cookie));
        assert_null(strstr(org_last_head, g_cookie_name));
        assert_null(strstr(org_last_head, g_token));
        assert_null(strstr(org_last_head, CLI_TOKEN));
        assert_null(strstr(org_last_head, "6.6.6.6"));
        assert_non_null(strstr(org_last_head, "X-Forwarded-For: 127.0.0.1\r\n"));
        assert_non_null(strstr(org_last_head, "X-Forwarded-Proto: http\r\n"));
        char fh[128];
        snprintf(fh, sizeof fh, "X-Forwarded-Host: %s\r\n", g_host);
        assert_non_null(strstr(org_last_head, fh));
        /* A GET keeps its upstream connection (pooled). */
        assert_null(strstr(org_last_head, "Connection:"));
        assert_non_null(strstr(org_last_head, "Accept: text/plain\r\n"));
        pthread_mutex_unlock(&org_lock);

        /* Request bodies are streamed: Content-Length … */
        http("POST", "/echo", "Content-Type: text/plain\r\n", "hello organism", &r);
        assert_int_equal(r.status, 201);
        assert_string_equal(r.body, "hello organism");
        resp_done(&r);
        /* … and chunked (re-chunked to the organism). */
        int fd = connect_tcp(AF_INET, g_port);
        char req[512];
        snprintf(req, sizeof req,
                 "POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "5\r\nhello\r\n6\r\n there\r\n0\r\n\r\n",
                 g_host);
        send_all(fd, req, strlen(req));
        read_response(fd, &r);
        close(fd);
        assert_int_equal(r.status, 201);
        assert_string_equal(r.body, "hello there");
        resp_done(&r);

        http("GET", "/close", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "until the end");
        resp_done(&r);
        http("GET", "/bighead", NULL, NULL, &r);
        assert_int_equal(r.status, 502);
        resp_done(&r);
        http("GET", "/missing", NULL, NULL, &r);
        assert_int_equal(r.status, 404);
        assert_string_equal(r.body, "not found");
        resp_done(&r);
        http("HEAD", "/echo", NULL, NULL, &r);
        assert_int_equal(r.status, 201);
        resp_done(&r);

        /* The organism hangs up without answering: unavailable. */
        http("GET", "/drop", NULL, NULL, &r);
        assert_int_equal(r.status, 503);
        assert_non_null(strstr(r.body, "My body is"));
        resp_done(&r);

        /* No service workers. */
        http("GET", "/sw.js", "Service-Worker: script\r\n", NULL, &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);
}

/* GETs share one upstream connection, kept alive; anything else gets one of
 * its own; an organism that restarts (every connection gone with its
 * bridge) or closes an idle connection just as it is reused costs only a
 * new connection, never an error. */
static void test_proxy_keep_alive(void **state) {
        org_stop();
        org_start();
        struct resp r;
        int acc = org_accepted();
        for (int i = 0; i < 5; i++) {
                char target[32], want[16];
                snprintf(target, sizeof target, "/id/%d", i);
                snprintf(want, sizeof want, "%d", i);
                http("GET", target, NULL, NULL, &r);
                assert_int_equal(r.status, 200);
                assert_string_equal(r.body, want);
                resp_done(&r);
        }
        assert_int_equal(org_accepted(), acc + 1);
        /* A POST: a new connection, closed after it. */
        http("POST", "/echo", "Content-Type: text/plain\r\n", "posted", &r);
        assert_int_equal(r.status, 201);
        assert_string_equal(r.body, "posted");
        resp_done(&r);
        assert_int_equal(org_accepted(), acc + 2);
        pthread_mutex_lock(&org_lock);
        assert_non_null(strstr(org_last_head, "Connection: close\r\n"));
        pthread_mutex_unlock(&org_lock);

        /* The organism restarts: its connections are gone. */
        org_stop();
        org_start();
        http("GET", "/id/after-restart", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "after-restart");
        resp_done(&r);

        /* It closes the idle connection as the next request arrives: that
         * request is sent once more, on a new connection. */
        acc = org_accepted();
        int reqs = org_count();
        pthread_mutex_lock(&org_lock);
        org_drop_reused = true;
        pthread_mutex_unlock(&org_lock);
        http("GET", "/id/retried", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "retried");
        resp_done(&r);
        assert_int_equal(org_count(), reqs + 2);
        assert_int_equal(org_accepted(), acc + 1);
        /* The same for a request that is not sent twice: a POST never
         * rides a reused connection. */
        pthread_mutex_lock(&org_lock);
        org_drop_reused = true;
        pthread_mutex_unlock(&org_lock);
        reqs = org_count();
        http("POST", "/echo", "Content-Type: text/plain\r\n", "once", &r);
        assert_int_equal(r.status, 201);
        resp_done(&r);
        assert_int_equal(org_count(), reqs + 1);
        pthread_mutex_lock(&org_lock);
        org_drop_reused = false;
        pthread_mutex_unlock(&org_lock);
}

/* One GET of /id/<tag> on a new client connection; 0 if its answer is
 * exactly 200 and tag, else -1. No cmocka asserts: runs in threads. */
static int get_id(const char *tag) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(g_port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct timeval tv = {.tv_sec = 20};
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
            connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        char req[256], got[4096];
        int n = snprintf(req, sizeof req, "GET /id/%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", tag, g_host);
        size_t len = 0;
        int r = send(fd, req, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
        while (r == 0 && len < sizeof got - 1) {
                ssize_t k = recv(fd, got + len, sizeof got - 1 - len, 0);
                if (k < 0)
                        r = -1;
                if (k <= 0)
                        break;
                len += (size_t)k;
        }
        close(fd);
        got[len] = 0;
        const char *body = strstr(got, "\r\n\r\n");
        return r == 0 && startswith(got, "HTTP/1.1 200 ") && body && streq(body + 4, tag) ? 0 : -1;
}

static atomic_int mix_failures;

static void *mix_main(void *arg) {
        for (int i = 0; i < 40; i++) {
                char tag[32];
                snprintf(tag, sizeof tag, "c%d-%d", (int)(intptr_t)arg, i);
                if (get_id(tag) < 0)
                        atomic_fetch_add(&mix_failures, 1);
        }
        return NULL;
}

/* Answers never reach another client: a client that goes away in the
 * middle of an answer leaves its upstream connection closed, not pooled
 * with the rest of that answer in it; clients at once each get their own. */
static void test_proxy_never_mixes(void **state) {
        int fd = connect_tcp(AF_INET, g_port);
        char req[256], got[1024];
        int n = snprintf(req, sizeof req, "GET /big HTTP/1.1\r\nHost: %s\r\n\r\n", g_host);
        send_all(fd, req, (size_t)n);
        size_t len = 0;
        while (len < sizeof got - 1) {
                ssize_t k = recv(fd, got + len, sizeof got - 1 - len, 0);
                assert_true(k > 0);
                len += (size_t)k;
                got[len] = 0;
                if (strstr(got, "\r\n\r\nx"))
                        break;
        }
        assert_true(startswith(got, "HTTP/1.1 200 "));
        close(fd); /* half of the answer is still to come */
        for (int i = 0; i < 5; i++) {
                char tag[16];
                snprintf(tag, sizeof tag, "after-%d", i);
                assert_int_equal(get_id(tag), 0);
        }
        pthread_mutex_lock(&org_big.lock);
        org_big.released = true;
        pthread_cond_broadcast(&org_big.cond);
        pthread_mutex_unlock(&org_big.lock);
        for (int i = 0; i < 5; i++) {
                char tag[16];
                snprintf(tag, sizeof tag, "released-%d", i);
                assert_int_equal(get_id(tag), 0);
        }

        pthread_t t[8];
        atomic_store(&mix_failures, 0);
        for (int i = 0; i < 8; i++)
                assert_int_equal(pthread_create(&t[i], NULL, mix_main, (void *)(intptr_t)i), 0);
        for (int i = 0; i < 8; i++)
                pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&mix_failures), 0);
}

/* The doctor is told of 5xx answers only (the app's own, and the proxy's
 * 502 and 504 for it), with the method and the path without its query. */
static void test_proxy_tells_5xx(void **state) {
        if (org_listen_fd < 0)
                org_start();
        char last[256];
        int before = told_5xx_calls(last, sizeof last);
        struct resp r;
        http("GET", "/echo", NULL, NULL, &r); /* 201 */
        resp_done(&r);
        http("GET", "/nothing-here", NULL, NULL, &r); /* 404 */
        assert_int_equal(r.status, 404);
        resp_done(&r);
        assert_int_equal(told_5xx_calls(last, sizeof last), before);
        http("GET", "/fail/42?secret=1", NULL, NULL, &r);
        assert_int_equal(r.status, 500);
        resp_done(&r);
        assert_int_equal(told_5xx_calls(last, sizeof last), before + 1);
        assert_string_equal(last, "GET /fail/42 500");
        http("GET", "/bighead", NULL, NULL, &r); /* the proxy's own 502 for the app */
        assert_int_equal(r.status, 502);
        resp_done(&r);
        assert_int_equal(told_5xx_calls(last, sizeof last), before + 2);
        assert_string_equal(last, "GET /bighead 502");
        http("GET", "/_seed/healthz", NULL, NULL, &r); /* never the control plane's */
        resp_done(&r);
        assert_int_equal(told_5xx_calls(last, sizeof last), before + 2);
}

static void test_proxy_upstream_down(void **state) {
        org_stop();
        struct resp r;
        http("GET", "/", NULL, NULL, &r);
        assert_int_equal(r.status, 503);
        assert_non_null(strstr(r.body, "My body is not running"));
        assert_non_null(strstr(r.body, "http-equiv=\"refresh\" content=\"5\""));
        assert_null(strstr(r.body, "<script"));
        assert_string_equal(resp_header(&r, "Refresh"), "5");
        assert_string_equal(resp_header(&r, "Cross-Origin-Opener-Policy"), "unsafe-none");
        assert_non_null(strstr(resp_header(&r, "Content-Security-Policy"), "frame-ancestors 'none'"));
        resp_done(&r);
}

/* Sends a raw request and reads the answer (the server must close). */
static void http_raw(const char *req, struct resp *ret) {
        int fd = connect_tcp(AF_INET, g_port);
        assert_true(fd >= 0);
        send_all(fd, req, strlen(req));
        read_response(fd, ret);
        close(fd);
}

static void test_proxy_request_framing(void **state) {
        org_start();
        struct resp r;
        char req[1024];

        /* Content-Length and chunked at once: libmicrohttpd de-chunks, so the
         * client's Content-Length would cut the body short for the organism
         * and the rest would reach it as a second request that skipped the
         * kernel's header policy. Refused; the connection is not reused. */
        const char *smuggled = "GET /smuggled HTTP/1.1\r\nX-Seed-Token: x\r\n\r\n";
        int before = org_count();
        snprintf(req, sizeof req,
                 "POST /echo HTTP/1.1\r\nHost: %s\r\nContent-Length: 3\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
                 g_host, strlen(smuggled), smuggled);
        http_raw(req, &r);
        assert_int_equal(r.status, 400);
        assert_null(strstr(r.body, "HTTP/1.1")); /* one answer, then the connection closed */
        resp_done(&r);
        assert_int_equal(org_count(), before);

        /* The same with the headers the other way round and in other cases. */
        snprintf(req, sizeof req,
                 "POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                 "transfer-encoding: chunked\r\ncontent-length: 30\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                 g_host);
        http_raw(req, &r);
        assert_int_equal(r.status, 400);
        resp_done(&r);

        /* Content-Length must be plain decimal, and several must agree. */
        static const char *const bad_lengths[] = {
                "Content-Length: 3\r\nContent-Length: 5\r\n",
                "Content-Length: 3, 3\r\n",
                "Content-Length: +3\r\n",
                "Content-Length: 0x3\r\n",
                "Content-Length: 3 3\r\n",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad_lengths); i++) {
                snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\nabc",
                         g_host, bad_lengths[i]);
                http_raw(req, &r);
                if (r.status != 400)
                        fail_msg("%s answered %d", bad_lengths[i], r.status);
                resp_done(&r);
        }
        /* Transfer codings other than chunked alone. */
        static const struct {
                const char *te;
                int status;
        } codings[] = {
                {"Transfer-Encoding: gzip, chunked\r\n", 501},
                {"Transfer-Encoding: chunked, gzip\r\n", 400},
                {"Transfer-Encoding: gzip\r\n", 400},
                {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400},
        };
        for (size_t i = 0; i < ARRAY_SIZE(codings); i++) {
                snprintf(req, sizeof req,
                         "POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n%s\r\n3\r\nabc\r\n0\r\n\r\n",
                         g_host, codings[i].te);
                http_raw(req, &r);
                if (r.status != codings[i].status)
                        fail_msg("%s answered %d", codings[i].te, r.status);
                resp_done(&r);
        }
        assert_int_equal(org_count(), before);

        /* The same rules on /_seed. */
        snprintf(req, sizeof req,
                 "GET /_seed/healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: 3\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                 g_host);
        http_raw(req, &r);
        assert_int_equal(r.status, 400);
        assert_seed_headers(&r);
        resp_done(&r);

        /* Equal Content-Lengths are one: the organism gets the kernel's own. */
        snprintf(req, sizeof req,
                 "POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: 5\r\n"
                 "Content-Length: 5\r\n\r\nhello",
                 g_host);
        http_raw(req, &r);
        assert_int_equal(r.status, 201);
        assert_string_equal(r.body, "hello");
        resp_done(&r);
        pthread_mutex_lock(&org_lock);
        assert_non_null(strstr(org_last_head, "\r\nContent-Length: 5\r\n"));
        assert_null(strstr(strstr(org_last_head, "Content-Length: 5") + 1, "Content-Length"));
        assert_null(strcasestr(org_last_head, "Transfer-Encoding"));
        pthread_mutex_unlock(&org_lock);

        /* A chunked body is re-chunked by the kernel, with no Content-Length. */
        snprintf(req, sizeof req,
                 "POST /echo HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n"
                 "\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n",
                 g_host);
        http_raw(req, &r);
        assert_int_equal(r.status, 201);
        assert_string_equal(r.body, "abcde");
        resp_done(&r);
        pthread_mutex_lock(&org_lock);
        assert_non_null(strstr(org_last_head, "\r\nTransfer-Encoding: chunked\r\n"));
        assert_null(strcasestr(org_last_head, "Content-Length"));
        assert_null(strstr(org_last_head, "X-Trailer"));
        pthread_mutex_unlock(&org_lock);
        org_stop();
}

static void test_service_worker_on_seed(void **state) {
        struct resp r;
        http("GET", "/_seed/healthz", "Service-Worker: script\r\n", NULL, &r);
        assert_int_equal(r.status, 403);
        assert_seed_headers(&r);
        resp_done(&r);
        _cleanup_free_ char *b = browser(g_cookie, NULL, NAV "Service-Worker: script\r\n");
        http("GET", "/_seed/", b, NULL, &r);
        assert_int_equal(r.status, 403);
        assert_null(strstr(r.body, g_token));
        resp_done(&r);
        _cleanup_free_ char *a = browser(g_cookie, NULL, "Service-Worker: script\r\n");
        http("GET", "/_seed/app.js", a, NULL, &r);
        assert_int_equal(r.status, 403);
        resp_done(&r);
        /* Without the header the same requests work. */
        http("GET", "/_seed/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A second server with a small connection limit (40: 32 kept for the
 * owner, 4 anonymous, 4 proxied at once) in front of an organism that
 * accepts and never answers. */
#define SMALL_LIMIT 40
#define SMALL_PROXIED ((SMALL_LIMIT - 32) - (SMALL_LIMIT - 32) / 2)

static void test_proxy_busy_keeps_seed_reachable(void **state) {
        char hang_path[sizeof seed_dir + 16];
        snprintf(hang_path, sizeof hang_path, "%s/hang.sock", seed_dir);
        hang.listen_fd = unix_listen(hang_path, 64);
        assert_int_equal(pthread_create(&hang.thread, NULL, hang_main, NULL), 0);

        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        cfg.organism_socket_override = hang_path;
        struct ctl *small = NULL;
        /* The limit must leave room for proxied requests and fit the server. */
        cfg.connection_limit = 32;
        assert_int_equal(ctl_start(&cfg, &small), -EINVAL);
        cfg.connection_limit = 33; /* no room for both anonymous and proxied ones */
        assert_int_equal(ctl_start(&cfg, &small), -EINVAL);
        cfg.connection_limit = 257;
        assert_int_equal(ctl_start(&cfg, &small), -EINVAL);
        cfg.connection_limit = SMALL_LIMIT;
        assert_int_equal(ctl_start(&cfg, &small), 0);
        struct aimed saved;
        aim_at(small, &saved);

        /* Fill every place for proxied requests. */
        int held[SMALL_PROXIED];
        char req[256];
        snprintf(req, sizeof req, "GET /hang HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", g_host);
        for (int i = 0; i < SMALL_PROXIED; i++) {
                held[i] = connect_tcp(AF_INET, g_port);
                assert_true(held[i] >= 0);
                send_all(held[i], req, strlen(req));
        }
        int64_t deadline = mono_ms() + 20000;
        while (hang_count() < SMALL_PROXIED && mono_ms() < deadline)
                poll(NULL, 0, 10);
        assert_int_equal(hang_count(), SMALL_PROXIED);

        /* The next ones get 503 at once, and the organism never sees them. */
        struct resp r;
        for (int i = 0; i < 3 * SMALL_LIMIT; i++) {
                int64_t t0 = mono_ms();
                http("GET", "/more", NULL, NULL, &r);
                int64_t took = mono_ms() - t0;
                assert_int_equal(r.status, 503);
                if (took > 2000)
                        fail_msg("a refused request took %lld ms", (long long)took);
                if (i == 0) {
                        assert_non_null(strstr(r.body, "My body is busy"));
                        assert_string_equal(resp_header(&r, "Refresh"), "5");
                        assert_string_equal(resp_header(&r, "Cross-Origin-Opener-Policy"), "unsafe-none");
                }
                resp_done(&r);
        }
        /* A refused client does not keep its connection (and thread). */
        char keep[256];
        snprintf(keep, sizeof keep, "GET /more HTTP/1.1\r\nHost: %s\r\n\r\n", g_host);
        http_raw(keep, &r);
        assert_int_equal(r.status, 503);
        assert_string_equal(resp_header(&r, "Connection"), "close");
        resp_done(&r);
        assert_int_equal(hang_count(), SMALL_PROXIED);

        /* The owner still reaches /_seed. */
        http("GET", "/_seed/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        _cleanup_free_ char *c = cli(NULL);
        char own[80];
        own_host(g_port, own, sizeof own);
        http_host("GET", "/_seed/api/status", own, c, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"generation\":1"));
        resp_done(&r);

        /* The organism breaks the connections it held: those requests end
         * (503), their places come back, and the organism is reached again. */
        hang_release();
        for (int i = 0; i < SMALL_PROXIED; i++) {
                read_response(held[i], &r);
                assert_int_equal(r.status, 503);
                resp_done(&r);
                close(held[i]);
        }
        deadline = mono_ms() + 20000;
        int status = 0;
        do {
                http("GET", "/again", NULL, NULL, &r);
                status = r.status;
                resp_done(&r);
        } while (status != 200 && mono_ms() < deadline && poll(NULL, 0, 20) == 0);
        assert_int_equal(status, 200);

        ctl_stop(small);
        aim_back(&saved);
        shutdown(hang.listen_fd, SHUT_RDWR);
        pthread_join(hang.thread, NULL);
        close(hang.listen_fd);
        unlink(hang_path);
}

/* An organism that stops accepting: connect() waits at most 5 seconds. */
static void test_proxy_connect_timeout(void **state) {
        char path[sizeof seed_dir + 16];
        snprintf(path, sizeof path, "%s/full.sock", seed_dir);
        int filler;
        int lfd = unix_listen_full(path, &filler); /* the next connect() blocks */

        struct aimed saved;
        struct ctl *c = start_aimed(path, &saved);

        struct resp r;
        int64_t t0 = mono_ms();
        http("GET", "/", NULL, NULL, &r);
        int64_t took = mono_ms() - t0;
        assert_int_equal(r.status, 503);
        assert_non_null(strstr(r.body, "My body is"));
        resp_done(&r);
        if (took < 4000 || took > 15000)
                fail_msg("the connect timeout took %lld ms, not about 5 s", (long long)took);

        ctl_stop(c);
        aim_back(&saved);
        close(filler);
        close(lfd);
        unlink(path);
}

/* The organism of test_proxy_body_while_connecting: after a while of the
 * kernel trying to connect, frees the backlog, then serves one request as
 * the fake organism does (/echo: 201 with the body it read). */
struct late_organism {
        int lfd, filler;
};

static void *late_organism_main(void *arg) {
        struct late_organism *o = arg;
        /* The organism stays unreachable this long: the kernel's connect()
         * finds the backlog full meanwhile, and the request's body reaches
         * the kernel before any connection does. */
        poll(NULL, 0, 300);
        int first = accept(o->lfd, NULL, NULL); /* the filler's: room for one in the backlog */
        int fd = accept(o->lfd, NULL, NULL);
        if (first >= 0)
                close(first);
        if (fd < 0)
                return NULL;
        struct timeval tv = {.tv_sec = 10};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        org_serve(fd, false);
        close(fd);
        return NULL;
}

/* A request body that comes while the organism's backlog is full (on the
 * event loop the connect is tried again every 10 ms, the connection
 * suspended in between) reaches the organism whole, after the head. */
static void test_proxy_body_while_connecting(void **state) {
        char path[sizeof seed_dir + 16];
        snprintf(path, sizeof path, "%s/late.sock", seed_dir);
        struct late_organism o = {0};
        o.lfd = unix_listen_full(path, &o.filler);

        struct aimed saved;
        struct ctl *c = start_aimed(path, &saved);

        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, late_organism_main, &o), 0);
        struct resp r;
        http("POST", "/echo", NULL, "a body that waited for a connection", &r);
        pthread_join(t, NULL);
        assert_int_equal(r.status, 201);
        assert_string_equal(r.body, "a body that waited for a connection");
        resp_done(&r);

        ctl_stop(c);
        aim_back(&saved);
        close(o.filler);
        close(o.lfd);
        unlink(path);
}

/* ---- password sign-in and the failure limits ---- */

/* One request from the given loopback source address (127.0.0.0/8 all
 * reaches the server), to the given port. */
static void http_from(uint16_t port, const char *src, const char *method, const char *target,
                      const char *extra, const char *body, struct resp *ret) {
        struct buf req = BUF_INIT(1 << 20);
        assert_int_equal(buf_printf(&req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n%s", method,
                                    target, port, extra ? extra : ""),
                         0);
        if (body)
                assert_int_equal(buf_printf(&req, "Content-Length: %zu\r\n", strlen(body)), 0);
        assert_int_equal(buf_puts(&req, "\r\n"), 0);
        if (body)
                assert_int_equal(buf_puts(&req, body), 0);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct timeval tv = {.tv_sec = 20};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons(port)};
        assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof from), 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
        send_all(fd, req.data, req.len);
        read_response(fd, ret);
        close(fd);
        buf_free(&req);
}

/* The headers of a browser posting the sign-in form from /_seed/ (plus
 * more, e.g. X-Forwarded-For). Caller frees. */
static char *form_headers(uint16_t port, const char *more) {
        char *s = NULL;
        assert_int_equal(xasprintf(&s,
                                   "Sec-Fetch-Dest: document\r\nSec-Fetch-Mode: navigate\r\n"
                                   "Sec-Fetch-Site: same-origin\r\nSec-Fetch-User: ?1\r\n"
                                   "Origin: http://127.0.0.1:%u\r\n"
                                   "Content-Type: application/x-www-form-urlencoded\r\n%s",
                                   port, more ? more : ""),
                         0);
        return s;
}

#define GOOD_FORM "user=owner&password=integration+p%C3%A4ssword"
#define BAD_FORM "user=owner&password=integration+password"

/* POSTs form from src (with more headers); returns the status. */
static int post_form(uint16_t port, const char *src, const char *more, const char *form) {
        _cleanup_free_ char *h = form_headers(port, more);
        struct resp r;
        http_from(port, src, "POST", "/_seed/login", h, form, &r);
        int status = r.status;
        if (status == 303)
                assert_non_null(resp_header(&r, "Set-Cookie"));
        else
                assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
        return status;
}

static int live_sessions(void) {
        struct db_session *s = NULL;
        size_t n = 0;
        assert_int_equal(db_session_list(g_kdb, wall_ms(), &s, &n), 0);
        for (size_t i = 0; i < n; i++)
                db_session_done(&s[i]);
        free(s);
        return (int)n;
}

static void test_password_form_on_private_page(void **state) {
        struct resp r;
        http("GET", "/_seed/", NAV, NULL, &r);
        assert_int_equal(r.status, 401);
        assert_non_null(strstr(r.body, "<form class=\"sign-in\" method=\"post\" action=\"/_seed/login\""));
        assert_null(strstr(r.body, "<script"));
        /* Its POST must carry a real Origin (not "null"). */
        assert_string_equal(resp_header(&r, "Referrer-Policy"), "same-origin");
        assert_int_equal(resp_header_count(&r, "Referrer-Policy"), 1);
        assert_non_null(strstr(resp_header(&r, "Content-Security-Policy"), "form-action 'self'"));
        assert_string_equal(resp_header(&r, "Cross-Origin-Opener-Policy"), "same-origin");
        resp_done(&r);
        /* Not to scripts, and not on the asset routes. */
        http("GET", "/_seed/", FETCH, NULL, &r);
        assert_int_equal(r.status, 403);
        assert_null(strstr(r.body, "<form"));
        resp_done(&r);
        http("GET", "/_seed/", NULL, NULL, &r);
        assert_int_equal(r.status, 400);
        assert_null(strstr(r.body, "<form"));
        resp_done(&r);
        http("GET", "/_seed/app.js", NAV, NULL, &r);
        assert_int_equal(r.status, 401);
        assert_null(strstr(r.body, "<form"));
        assert_string_equal(resp_header(&r, "Referrer-Policy"), "no-referrer");
        resp_done(&r);
}

static void test_password_sign_in(void **state) {
        int before = live_sessions();
        _cleanup_free_ char *h = form_headers(g_port, "User-Agent: password-browser\r\n");
        struct resp r;
        http_from(g_port, "127.0.0.20", "POST", "/_seed/login", h, GOOD_FORM, &r);
        assert_int_equal(r.status, 303);
        assert_string_equal(resp_header(&r, "Location"), "/_seed/");
        assert_seed_headers(&r);
        const char *sc = resp_header(&r, "Set-Cookie");
        assert_non_null(sc);
        char cookie[65], token[65];
        assert_true(startswith(sc, g_cookie_name));
        memcpy(cookie, sc + strlen(g_cookie_name) + 1, 64);
        cookie[64] = 0;
        assert_non_null(strstr(sc, "; Path=/_seed; HttpOnly; SameSite=Lax; Max-Age=2592000"));
        resp_done(&r);
        assert_int_equal(live_sessions(), before + 1);
        /* The same session as a link gives: page, token, API. */
        ctl_api_token(SESSION_KEY, cookie, token);
        _cleanup_free_ char *b = browser(cookie, NULL, NAV);
        http("GET", "/_seed/", b, NULL, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, token));
        resp_done(&r);
        _cleanup_free_ char *api = browser(cookie, token, FETCH);
        http("GET", "/_seed/api/status", api, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        /* A user other than "owner" is wrong. */
        assert_int_equal(post_form(g_port, "127.0.0.20", NULL, "user=admin&password=integration+p%C3%A4ssword"), 401);
        assert_int_equal(live_sessions(), before + 1);
}

static void test_password_failures_limited(void **state) {
        int before = live_sessions();
        struct resp r;
        _cleanup_free_ char *h = form_headers(g_port, NULL);
        http_from(g_port, "127.0.0.21", "POST", "/_seed/login", h, BAD_FORM, &r);
        assert_int_equal(r.status, 401);
        assert_non_null(strstr(r.body, "Wrong username or password."));
        assert_non_null(strstr(r.body, "<form"));
        assert_null(strstr(r.body, "integration"));
        resp_done(&r);
        for (int i = 1; i < 5; i++)
                assert_int_equal(post_form(g_port, "127.0.0.21", NULL, BAD_FORM), 401);
        /* The 6th: not checked, right or wrong. */
        http_from(g_port, "127.0.0.21", "POST", "/_seed/login", h, BAD_FORM, &r);
        assert_int_equal(r.status, 429);
        assert_non_null(strstr(r.body, "Too many failed sign-ins"));
        assert_null(strstr(r.body, "<form"));
        char *wrong_body = strdup(r.body);
        resp_done(&r);
        http_from(g_port, "127.0.0.21", "POST", "/_seed/login", h, GOOD_FORM, &r);
        assert_int_equal(r.status, 429);
        assert_string_equal(r.body, wrong_body); /* the same answer */
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
        free(wrong_body);
        assert_int_equal(live_sessions(), before);
        /* Another address is its own client. */
        assert_int_equal(post_form(g_port, "127.0.0.22", NULL, GOOD_FORM), 303);
        /* A sign-in link still works for the limited client. */
        _cleanup_free_ char *t = NULL, *target = NULL;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        http_from(g_port, "127.0.0.21", "GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

static void test_bad_links_count(void **state) {
        struct resp r;
        for (int i = 0; i < 5; i++) {
                http_from(g_port, "127.0.0.24", "GET",
                          "/_seed/login?t=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", NAV,
                          NULL, &r);
                assert_int_equal(r.status, 403);
                resp_done(&r);
        }
        assert_int_equal(post_form(g_port, "127.0.0.24", NULL, GOOD_FORM), 429);
        /* A link without a token tried nothing: not counted. */
        for (int i = 0; i < 6; i++) {
                http_from(g_port, "127.0.0.25", "GET", "/_seed/login", NAV, NULL, &r);
                assert_int_equal(r.status, 403);
                resp_done(&r);
        }
        assert_int_equal(post_form(g_port, "127.0.0.25", NULL, GOOD_FORM), 303);
}

/* Speculative loads (speculation rules, <link rel=prefetch>, prerender)
 * of the sign-in routes are answered 503 and checked not at all: bad links
 * do not count as failures, and a good one is not used up. */
static void test_prefetch_is_not_a_sign_in(void **state) {
        struct resp r;
        static const char *const purposes[] = {"Sec-Purpose: prefetch\r\n", "Sec-Purpose: prefetch;prerender\r\n",
                                               "Purpose: prefetch\r\n"};
        for (int i = 0; i < 20; i++) {
                char h[256];
                snprintf(h, sizeof h, NAV "%s", purposes[i % 3]);
                http_from(g_port, "127.0.0.26", "GET",
                          "/_seed/login?t=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", h,
                          NULL, &r);
                assert_int_equal(r.status, 503);
                assert_null(resp_header(&r, "Set-Cookie"));
                resp_done(&r);
        }
        _cleanup_free_ char *t = NULL, *target = NULL;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        http_from(g_port, "127.0.0.26", "GET", target, NAV "Sec-Purpose: prefetch;prerender\r\n", NULL, &r);
        assert_int_equal(r.status, 503);
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
        /* The form's POST is not prefetched either. */
        _cleanup_free_ char *pf = form_headers(g_port, "Sec-Purpose: prefetch\r\n");
        http_from(g_port, "127.0.0.26", "POST", "/_seed/login", pf, GOOD_FORM, &r);
        assert_int_equal(r.status, 503);
        assert_null(resp_header(&r, "Set-Cookie"));
        resp_done(&r);
        /* The good link still works, and the client is not limited. */
        http_from(g_port, "127.0.0.26", "GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 200); /* "Signed in" */
        resp_done(&r);
        assert_int_equal(post_form(g_port, "127.0.0.26", NULL, GOOD_FORM), 303);
}

/* A chunked API body past 1 MiB: 413, as with a Content-Length. */
static void test_chunked_body_too_large(void **state) {
        int fd = connect_tcp(AF_INET, g_port);
        assert_true(fd >= 0);
        struct timeval tv = {.tv_sec = 20};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        _cleanup_free_ char *head = NULL;
        assert_int_equal(xasprintf(&head,
                                   "POST /_seed/api/login-links HTTP/1.1\r\nHost: %s\r\n"
                                   "Authorization: Bearer " CLI_TOKEN "\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n",
                                   g_host),
                         0);
        send_all(fd, head, strlen(head));
        static char chunk[65536 + 16];
        int n = snprintf(chunk, sizeof chunk, "10000\r\n");
        memset(chunk + n, ' ', 65536);
        memcpy(chunk + n + 65536, "\r\n", 2);
        for (int i = 0; i < 24; i++) /* 1.5 MiB */
                send_all(fd, chunk, (size_t)n + 65536 + 2);
        send_all(fd, "0\r\n\r\n", 5);
        struct resp r;
        read_response(fd, &r);
        close(fd);
        assert_int_equal(r.status, 413);
        assert_non_null(strstr(r.body, "too large"));
        resp_done(&r);
        /* The server is fine afterwards. */
        http("GET", "/_seed/healthz", NULL, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

/* Basic credentials (the browser adds them to every request to this origin
 * once an organism page asked for them) are not a wrong CLI token: session
 * auth decides, and the owner's calls work. */
static void test_basic_auth_is_ignored_by_the_api(void **state) {
        char cookie[65], token[65];
        sign_in(cookie);
        ctl_api_token(SESSION_KEY, cookie, token);
        struct resp r;
        _cleanup_free_ char *api = browser(cookie, token, FETCH "Authorization: Basic b3duZXI6cGFzc3dvcmQ=\r\n");
        http("GET", "/_seed/api/status", api, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        /* Without a session it is still refused, and a wrong Bearer is still wrong. */
        http("GET", "/_seed/api/status", FETCH "Authorization: Basic b3duZXI6cGFzc3dvcmQ=\r\n", NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        _cleanup_free_ char *bad = browser(cookie, token, FETCH "Authorization: Bearer nope\r\n");
        http("GET", "/_seed/api/status", bad, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        /* The CLI-only route still needs the CLI token. */
        http("POST", "/_seed/api/login-links", "Authorization: Basic b3duZXI6cGFzc3dvcmQ=\r\nContent-Type: application/json\r\n",
             "{}", &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        /* The CLI token with trailing whitespace is the CLI token. */
        http("GET", "/_seed/api/status", "Authorization: Bearer " CLI_TOKEN " \t\r\n", NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

static size_t log_count(const char *path, const char *needle) {
        _cleanup_free_ char *data = NULL;
        size_t n = 0;
        assert_int_equal(read_file(path, 64 << 20, &data, NULL), 0);
        for (const char *p = data; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* A flood of refused requests writes a bounded number of lines. */
static void test_refusal_flood_is_logged_at_a_bounded_rate(void **state) {
        _cleanup_free_ char *path = path_join(seed_dir, "flood.log");
        assert_int_equal(log_open(path, 10u << 20, 3), 0);
        log_set_level(LOG_INFO);
        struct resp r;
        for (int i = 0; i < 300; i++) {
                http_from(g_port, "127.0.0.31", "GET", "/_seed/api/status", "Authorization: Bearer wrong\r\n", NULL,
                          &r);
                assert_int_equal(r.status, 401);
                resp_done(&r);
                http_from(g_port, "127.0.0.32", "GET",
                          "/_seed/login?t=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", NAV,
                          NULL, &r);
                assert_int_equal(r.status, 403);
                resp_done(&r);
        }
        log_set_level(LOG_WARN);
        log_close();
        assert_int_equal(log_count(path, "wrong bearer token (client 127.0.0.31)"), 1);
        assert_int_equal(log_count(path, "used, expired or unknown (client 127.0.0.32)"), 1);
        assert_true(log_count(path, "made 5 failed sign-ins") <= 1);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        print_message("# 600 refused requests wrote %lld bytes of log\n", (long long)st.st_size);
        assert_true(st.st_size < 4096);
}

static void test_forwarded_for(void **state) {
        /* From the trusted proxy (127.0.0.1): the client is X-Forwarded-For,
         * IPv6 grouped by /48. */
        for (int i = 0; i < 5; i++)
                assert_int_equal(post_form(g_port, "127.0.0.1", "X-Forwarded-For: 6.6.6.6, 2001:db8:5:1::1\r\n",
                                           BAD_FORM),
                                 401);
        assert_int_equal(post_form(g_port, "127.0.0.1", "X-Forwarded-For: 2001:db8:5:ffff::2\r\n", GOOD_FORM), 429);
        assert_int_equal(post_form(g_port, "127.0.0.1", "X-Forwarded-For: 2001:db8:6::1\r\n", GOOD_FORM), 303);
        /* From anyone else the header is ignored: rotating it does not help. */
        char xff[128];
        for (int i = 0; i < 5; i++) {
                snprintf(xff, sizeof xff, "X-Forwarded-For: 203.0.113.%d\r\n", i);
                assert_int_equal(post_form(g_port, "127.0.0.23", xff, BAD_FORM), 401);
        }
        assert_int_equal(post_form(g_port, "127.0.0.23", "X-Forwarded-For: 198.51.100.1\r\n", GOOD_FORM), 429);
}

static void test_form_guards(void **state) {
        int before = live_sessions();
        const uint16_t p = g_port;
        char origin[64];
        snprintf(origin, sizeof origin, "Origin: http://127.0.0.1:%u\r\n", p);
        static const char nav[] = "Sec-Fetch-Dest: document\r\nSec-Fetch-Mode: navigate\r\n";
        static const char form[] = "Content-Type: application/x-www-form-urlencoded\r\n";
        char h[512];
        struct resp r;
        struct {
                const char *what;
                int status;
        } cases[] = {
                {"no Fetch Metadata", 400},
                {"cross-site", 403},
                {"other origin", 403},
                {"null origin", 403},
                {"iframe", 403},
                {"fetch", 403},
                {"json", 415},
                {"no type", 415},
                {"too big", 413},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *body = GOOD_FORM;
                _cleanup_free_ char *big = NULL;
                switch (i) {
                case 0: snprintf(h, sizeof h, "%s%s", origin, form); break;
                case 1: snprintf(h, sizeof h, "%sSec-Fetch-Site: cross-site\r\n%s%s", nav, origin, form); break;
                case 2: snprintf(h, sizeof h, "%sSec-Fetch-Site: same-origin\r\nOrigin: http://evil.com\r\n%s", nav, form); break;
                case 3: snprintf(h, sizeof h, "%sSec-Fetch-Site: same-origin\r\nOrigin: null\r\n%s", nav, form); break;
                case 4: snprintf(h, sizeof h, "Sec-Fetch-Dest: iframe\r\nSec-Fetch-Mode: navigate\r\n"
                                              "Sec-Fetch-Site: same-origin\r\n%s%s", origin, form); break;
                case 5: snprintf(h, sizeof h, FETCH "%s%s", origin, form); break;
                case 6: snprintf(h, sizeof h, "%sSec-Fetch-Site: same-origin\r\n%sContent-Type: application/json\r\n",
                                 nav, origin); break;
                case 7: snprintf(h, sizeof h, "%sSec-Fetch-Site: same-origin\r\n%s", nav, origin); break;
                case 8:
                        snprintf(h, sizeof h, "%sSec-Fetch-Site: same-origin\r\n%s%s", nav, origin, form);
                        big = calloc(1, 5000);
                        memset(big, 'a', 4999);
                        memcpy(big, "user=owner&password=", 20);
                        body = big;
                        break;
                }
                http_from(p, "127.0.0.30", "POST", "/_seed/login", h, body, &r);
                if (r.status != cases[i].status)
                        fail_msg("%s: %d, not %d", cases[i].what, r.status, cases[i].status);
                assert_null(resp_header(&r, "Set-Cookie"));
                resp_done(&r);
        }
        /* Missing fields: 400, and nothing was counted. */
        for (int i = 0; i < 6; i++)
                assert_int_equal(post_form(p, "127.0.0.30", NULL, "user=owner"), 400);
        assert_int_equal(live_sessions(), before);
        /* None of that counted as a failure: the right password works. */
        assert_int_equal(post_form(p, "127.0.0.30", NULL, GOOD_FORM), 303);
}

/* A second server: fn gets its port. */
static void with_server(const char *password, const char *trusted_proxies, void (*fn)(uint16_t port)) {
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        cfg.owner_password = password;
        cfg.trusted_proxies = trusted_proxies;
        struct ctl *c = NULL;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        fn(ctl_port(c));
        ctl_stop(c);
}

static void overall_limit(uint16_t port) {
        char xff[128];
        struct resp r;
        int before = live_sessions();
        /* 1000 failures from 250 clients (4 each: none is limited itself). */
        for (int i = 0; i < 1000; i++) {
                snprintf(xff, sizeof xff, "X-Forwarded-For: 10.%d.%d.1\r\n", i / 4 / 100, i / 4 % 100);
                int st = post_form(port, "127.0.0.1", xff, BAD_FORM);
                if (st != 401)
                        fail_msg("failure %d answered %d", i, st);
        }
        /* Now no password is checked, from anyone. */
        assert_int_equal(post_form(port, "127.0.0.1", "X-Forwarded-For: 192.0.2.99\r\n", GOOD_FORM), 429);
        assert_int_equal(post_form(port, "127.0.0.40", NULL, GOOD_FORM), 429);
        _cleanup_free_ char *h = form_headers(port, NULL);
        http_from(port, "127.0.0.41", "POST", "/_seed/login", h, GOOD_FORM, &r);
        assert_int_equal(r.status, 429);
        assert_non_null(strstr(r.body, "seed login"));
        resp_done(&r);
        assert_int_equal(live_sessions(), before);
        /* Links and signed-in browsers still work. */
        _cleanup_free_ char *t = NULL, *target = NULL;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        http_from(port, "127.0.0.42", "GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        _cleanup_free_ char *api = browser(g_cookie, g_token, FETCH);
        http_from(port, "127.0.0.42", "GET", "/_seed/api/status", api, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        _cleanup_free_ char *page = browser(g_cookie, NULL, NAV);
        http_from(port, "127.0.0.43", "GET", "/_seed/", page, NULL, &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
}

static void test_overall_limit(void **state) {
        with_server(OWNER_PASSWORD, "127.0.0.1", overall_limit);
}

/* 1000+ bad links from one client that is limited already: another client
 * still signs in with its password. */
static void limited_client_adds_nothing(uint16_t port) {
        struct resp r;
        for (int i = 0; i < CTL_FAIL_OVERALL + 100; i++) {
                http_from(port, "127.0.0.43", "GET",
                          "/_seed/login?t=00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", NAV,
                          NULL, &r);
                if (r.status != 403)
                        fail_msg("bad link %d answered %d", i, r.status);
                resp_done(&r);
        }
        assert_int_equal(post_form(port, "127.0.0.43", NULL, GOOD_FORM), 429);
        assert_int_equal(post_form(port, "127.0.0.44", NULL, GOOD_FORM), 303);
}

static void test_limited_client_does_not_lock_out_others(void **state) {
        with_server(OWNER_PASSWORD, "127.0.0.1", limited_client_adds_nothing);
}

static void password_off(uint16_t port) {
        struct resp r;
        http_from(port, "127.0.0.50", "GET", "/_seed/", NAV, NULL, &r);
        assert_int_equal(r.status, 401);
        assert_null(strstr(r.body, "<form"));
        assert_string_equal(resp_header(&r, "Referrer-Policy"), "no-referrer");
        resp_done(&r);
        assert_int_equal(post_form(port, "127.0.0.50", NULL, "user=owner&password=short"), 403);
        assert_int_equal(post_form(port, "127.0.0.50", NULL, "user=owner&password="), 403);
}

static void test_short_password_turns_password_sign_in_off(void **state) {
        with_server("short", "127.0.0.1", password_off);
        with_server(NULL, "127.0.0.1", password_off);
}

/* ---- the logo ---- */

#define LOGO_CSP "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:"
#define LOGO_SVG "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 2 2\"><circle r=\"1\"/></svg>"
#define PNG_SIG "\x89PNG\r\n\x1a\n"

static void logo_write(const char *name, const void *data, size_t len) {
        _cleanup_free_ char *dir = path_join(seed_dir, "knowledge");
        _cleanup_free_ char *p = path_join(dir, name);
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_int_equal(write_file_atomic(p, data, len, 0644), 0);
}

static void logo_remove(const char *name) {
        _cleanup_free_ char *p = path_join(seed_dir, "knowledge");
        _cleanup_free_ char *f = path_join(p, name);
        (void)unlink(f);
}

/* GET /_seed/logo as an <img> of a signed-in browser would (cookie, no
 * token); more may add headers. */
static void get_logo(const char *more, struct resp *r) {
        char extra[512];
        snprintf(extra, sizeof extra, "Sec-Fetch-Dest: image\r\nSec-Fetch-Mode: no-cors\r\n"
                                      "Sec-Fetch-Site: same-origin\r\n%s", more ? more : "");
        _cleanup_free_ char *b = browser(g_cookie, NULL, extra);
        http("GET", "/_seed/logo", b, NULL, r);
}

static void assert_logo_404(void) {
        struct resp r;
        get_logo(NULL, &r);
        assert_int_equal(r.status, 404);
        assert_true(startswith(resp_header(&r, "Content-Type"), "text/html"));
        assert_null(strstr(r.body, "root:"));
        assert_null(strstr(r.body, "<svg"));
        resp_done(&r);
}

static int count_in_file(const char *path, const char *needle) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 16 << 20, &data, &len) < 0)
                return 0;
        int n = 0;
        for (const char *p = data; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

static void test_logo(void **state) {
        struct resp r;
        _cleanup_free_ char *logpath = path_join(seed_dir, "logo-test.log");
        assert_int_equal(log_open(logpath, 1 << 20, 1), 0);

        /* No logo yet: 404. */
        assert_logo_404();

        /* An SVG: served with its type and a sandbox, never cached unchecked. */
        logo_write("logo.svg", LOGO_SVG, strlen(LOGO_SVG));
        logo_write("logo.png", PNG_SIG "rest", 12);
        get_logo(NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, LOGO_SVG);
        assert_string_equal(resp_header(&r, "Content-Type"), "image/svg+xml");
        assert_int_equal(resp_header_count(&r, "Content-Security-Policy"), 1);
        assert_string_equal(resp_header(&r, "Content-Security-Policy"), LOGO_CSP);
        assert_string_equal(resp_header(&r, "X-Content-Type-Options"), "nosniff");
        assert_string_equal(resp_header(&r, "Cache-Control"), "no-cache");
        assert_string_equal(resp_header(&r, "Content-Disposition"), "inline");
        assert_string_equal(resp_header(&r, "X-Frame-Options"), "DENY");
        char etag[80];
        snprintf(etag, sizeof etag, "%s", resp_header(&r, "ETag"));
        assert_int_equal(strlen(etag), 66);
        resp_done(&r);
        /* Unchanged since: 304 without a body. */
        char inm[128];
        snprintf(inm, sizeof inm, "If-None-Match: %s\r\n", etag);
        get_logo(inm, &r);
        assert_int_equal(r.status, 304);
        assert_int_equal(r.body_len, 0);
        assert_string_equal(resp_header(&r, "ETag"), etag);
        resp_done(&r);
        get_logo("If-None-Match: \"0000\"\r\n", &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);

        /* It needs a browser session (the cookie alone: no API token, no
         * navigation); the CLI token is not one. Without a session it is
         * private. */
        _cleanup_free_ char *c = cli(NULL);
        http("GET", "/_seed/logo", c, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        http("GET", "/_seed/logo", "Sec-Fetch-Dest: image\r\nSec-Fetch-Mode: no-cors\r\n", NULL, &r);
        assert_int_equal(r.status, 401);
        assert_null(strstr(r.body, "<svg"));
        assert_non_null(strstr(r.body, "private"));
        resp_done(&r);
        _cleanup_free_ char *forged = browser("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                              NULL, NULL);
        http("GET", "/_seed/logo", forged, NULL, &r);
        assert_int_equal(r.status, 401);
        resp_done(&r);
        http("POST", "/_seed/logo", NULL, "x", &r);
        assert_true(r.status == 401 || r.status == 405);
        assert_null(strstr(r.body, "<svg"));
        resp_done(&r);

        /* No SVG: the PNG, by its type. */
        logo_remove("logo.svg");
        get_logo(NULL, &r);
        assert_int_equal(r.status, 200);
        assert_string_equal(resp_header(&r, "Content-Type"), "image/png");
        assert_int_equal(r.body_len, 12);
        assert_memory_equal(r.body, PNG_SIG "rest", 12);
        assert_string_equal(resp_header(&r, "Content-Security-Policy"), LOGO_CSP);
        resp_done(&r);

        /* A .png without the PNG signature (HTML, say) is refused. */
        logo_write("logo.png", "<html><script>alert(1)</script></html>", 38);
        assert_logo_404();
        assert_int_equal(count_in_file(logpath, "knowledge/logo.png is not a PNG"), 1);

        /* logo.svg a symlink to a host file: refused, and the PNG is not
         * served in its place either. */
        logo_write("logo.png", PNG_SIG "rest", 12);
        _cleanup_free_ char *kn = path_join(seed_dir, "knowledge");
        _cleanup_free_ char *svg = path_join(kn, "logo.svg");
        assert_int_equal(symlink("/etc/passwd", svg), 0);
        assert_logo_404();
        assert_logo_404();
        assert_int_equal(count_in_file(logpath, "knowledge/logo.svg is a symlink or leads outside"), 1);
        logo_remove("logo.svg");

        /* Over 256 KiB: refused, and logged (once, however often it is asked for). */
        size_t big = 256 * 1024 + 1;
        char *data = malloc(big);
        memset(data, ' ', big);
        memcpy(data, "<svg", 4);
        logo_write("logo.svg", data, big);
        assert_logo_404();
        assert_logo_404();
        assert_int_equal(count_in_file(logpath, "knowledge/logo.svg is larger than 256 KiB"), 1);
        /* Exactly 256 KiB is fine. */
        logo_write("logo.svg", data, big - 1);
        get_logo(NULL, &r);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, big - 1);
        resp_done(&r);
        free(data);

        /* Once it was served, the same trouble is logged again. */
        logo_remove("logo.svg");
        assert_int_equal(symlink("/etc/passwd", svg), 0);
        assert_logo_404();
        assert_int_equal(count_in_file(logpath, "knowledge/logo.svg is a symlink or leads outside"), 2);
        logo_remove("logo.svg");
        logo_remove("logo.png");
        assert_logo_404();
        log_close();
        unlink(logpath);
}

/* ---- connections per client and timeouts ---- */

/* A TCP connection to port from the loopback source address src. */
static int connect_from(uint16_t port, const char *src) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct timeval tv = {.tv_sec = 30};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons(port)};
        assert_int_equal(inet_pton(AF_INET, src, &from.sin_addr), 1);
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof from), 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof to), 0);
        return fd;
}

/* Whether the server closed fd (end of stream or reset), without waiting. */
static bool closed_by_server(int fd) {
        char c;
        ssize_t k = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
        return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static int count_closed(const int *fds, int n) {
        int k = 0;
        for (int i = 0; i < n; i++)
                k += closed_by_server(fds[i]);
        return k;
}

static int healthz_from(uint16_t port, const char *src) {
        struct resp r;
        http_from(port, src, "GET", "/_seed/healthz", NULL, NULL, &r);
        int status = r.status;
        resp_done(&r);
        return status;
}

#define IDLE_CONNS 40
#define CAP 16

static void connection_limits(uint16_t port) {
        int idle[IDLE_CONNS];
        int64_t t0 = mono_ms();
        /* 40 connections from one client that never send a byte: the
         * newest 16 are kept (until the head timeout), the oldest closed
         * as the newer ones come. */
        for (int i = 0; i < IDLE_CONNS; i++)
                idle[i] = connect_from(port, "127.0.0.60");
        int64_t deadline = t0 + 5000;
        while (count_closed(idle, IDLE_CONNS) < IDLE_CONNS - CAP && mono_ms() < deadline)
                poll(NULL, 0, 10);
        assert_int_equal(count_closed(idle, IDLE_CONNS), IDLE_CONNS - CAP);
        for (int i = IDLE_CONNS - CAP; i < IDLE_CONNS; i++)
                if (closed_by_server(idle[i]))
                        fail_msg("connection %d of the newest %d was closed", i, CAP);
        /* A request of that client's that comes at once is answered (its
         * oldest idle connection makes room); another client is served. */
        assert_int_equal(healthz_from(port, "127.0.0.60"), 200);
        deadline = mono_ms() + 5000;
        while (count_closed(idle, IDLE_CONNS) < IDLE_CONNS - CAP + 1 && mono_ms() < deadline)
                poll(NULL, 0, 10);
        assert_true(closed_by_server(idle[IDLE_CONNS - CAP]));
        assert_int_equal(healthz_from(port, "127.0.0.61"), 200);

        /* Once the head is in, the longer timeout holds: a body sent after
         * the head timeout passed, and a stream quiet for as long. */
        int post = connect_from(port, "127.0.0.62");
        char head[512];
        snprintf(head, sizeof head,
                 "POST /_seed/api/echo/late HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n"
                 "Authorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n",
                 port, CLI_TOKEN);
        send_all(post, head, strlen(head));
        int stream = connect_from(port, "127.0.0.63");
        snprintf(head, sizeof head,
                 "GET /_seed/api/slow-stream HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n"
                 "Authorization: Bearer %s\r\n\r\n",
                 port, CLI_TOKEN);
        send_all(stream, head, strlen(head));
        /* The first piece of the stream arrives at once. */
        struct pollfd pf = {.fd = stream, .events = POLLIN};
        assert_int_equal(poll(&pf, 1, 10000), 1);
        /* A connection with half a request head is closed like an idle one. */
        int partial = connect_from(port, "127.0.0.64");
        snprintf(head, sizeof head, "GET /_seed/healthz HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n", port);
        send_all(partial, head, strlen(head));

        /* The head timeout (10 s) closes the idle ones; not before. */
        deadline = t0 + 40000;
        while (count_closed(idle, IDLE_CONNS) < IDLE_CONNS && mono_ms() < deadline)
                poll(NULL, 0, 50);
        int64_t took = mono_ms() - t0;
        assert_int_equal(count_closed(idle, IDLE_CONNS), IDLE_CONNS);
        if (took < 9000)
                fail_msg("idle connections were closed after %lld ms, before the head timeout", (long long)took);
        deadline = mono_ms() + 15000;
        while (!closed_by_server(partial) && mono_ms() < deadline)
                poll(NULL, 0, 50);
        assert_true(closed_by_server(partial));
        close(partial);
        for (int i = 0; i < IDLE_CONNS; i++)
                close(idle[i]);
        /* Its connections gone, the client is served again. */
        assert_int_equal(healthz_from(port, "127.0.0.60"), 200);

        /* The request whose head came in before is still answered... */
        assert_false(closed_by_server(post));
        send_all(post, "{}", 2);
        struct resp r;
        read_response(post, &r);
        close(post);
        assert_int_equal(r.status, 202);
        assert_non_null(strstr(r.body, "\"param\":\"late\""));
        resp_done(&r);
        /* ...and the quiet stream goes on. */
        slow_release();
        read_response(stream, &r);
        close(stream);
        assert_int_equal(r.status, 200);
        assert_string_equal(r.body, "ab");
        resp_done(&r);
}

static void test_connection_limits(void **state) {
        /* No trusted proxy: every client is capped. */
        with_server(OWNER_PASSWORD, NULL, connection_limits);
}

static void trusted_proxy_uncapped(uint16_t port) {
        int fds[CAP + 4];
        for (int i = 0; i < CAP + 4; i++)
                fds[i] = connect_from(port, "127.0.0.1");
        /* The proxy's connections are not capped: a request on the last
         * one is answered. */
        char req[128];
        snprintf(req, sizeof req, "GET /_seed/healthz HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n\r\n",
                 port);
        send_all(fds[CAP + 3], req, strlen(req));
        struct resp r;
        read_response(fds[CAP + 3], &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        for (int i = 0; i < CAP + 4; i++)
                close(fds[i]);
        /* Other clients still are. */
        int other[CAP + 1];
        for (int i = 0; i <= CAP; i++)
                other[i] = connect_from(port, "127.0.0.65");
        int64_t deadline = mono_ms() + 5000;
        while (count_closed(other, CAP + 1) < 1 && mono_ms() < deadline)
                poll(NULL, 0, 10);
        assert_int_equal(count_closed(other, CAP + 1), 1);
        for (int i = 0; i <= CAP; i++)
                close(other[i]);
}

static void any_peer_uncapped(uint16_t port) {
        int fds[CAP + 4];
        for (int i = 0; i < CAP + 4; i++)
                fds[i] = connect_from(port, "127.0.0.66");
        char req[128];
        snprintf(req, sizeof req, "GET /_seed/healthz HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n\r\n",
                 port);
        send_all(fds[CAP + 3], req, strlen(req));
        struct resp r;
        read_response(fds[CAP + 3], &r);
        assert_int_equal(r.status, 200);
        resp_done(&r);
        for (int i = 0; i < CAP + 4; i++)
                close(fds[i]);
}

static void test_connection_cap_behind_proxies(void **state) {
        /* A listed proxy is not capped (its clients share its address). */
        with_server(OWNER_PASSWORD, "127.0.0.1", trusted_proxy_uncapped);
        /* A count of proxies: any peer may be the proxy, so none is capped. */
        with_server(OWNER_PASSWORD, "1", any_peer_uncapped);
}

/* ---- the pools: held organism answers, slowloris, slow heads ---- */

/* A hanging organism at seed_dir/hang2.sock (holds every request). */
static void hang_start(char *path, size_t len) {
        snprintf(path, len, "%s/hang2.sock", seed_dir);
        pthread_mutex_lock(&hang.lock);
        hang.answer = false;
        hang.n_held = 0;
        pthread_mutex_unlock(&hang.lock);
        hang.listen_fd = unix_listen(path, 64);
        assert_int_equal(pthread_create(&hang.thread, NULL, hang_main, NULL), 0);
}

static void hang_stop(const char *path) {
        hang_release();
        shutdown(hang.listen_fd, SHUT_RDWR);
        pthread_join(hang.thread, NULL);
        close(hang.listen_fd);
        unlink(path);
}

/* One request (raw text) from src to port, never asserting: its status, or
 * -1 when the connection is closed without an answer or none comes within
 * timeout_ms. */
static int try_request(uint16_t port, const char *src, const char *req, int timeout_ms) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons(port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0 || inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&from, sizeof from) < 0 ||
            connect(fd, (struct sockaddr *)&to, sizeof to) < 0 ||
            send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        char buf[64] = "";
        size_t got = 0;
        int64_t deadline = mono_ms() + timeout_ms;
        while (got < 12 && mono_ms() < deadline) {
                struct pollfd pf = {.fd = fd, .events = POLLIN};
                if (poll(&pf, 1, (int)(deadline - mono_ms())) <= 0)
                        continue;
                ssize_t k = recv(fd, buf + got, sizeof buf - 1 - got, 0);
                if (k <= 0)
                        break;
                got += (size_t)k;
        }
        close(fd);
        int status = -1;
        return got >= 12 && sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : -1;
}

static struct ctl *pools_server(const char *organism_sock, uint16_t *ret_port) {
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        cfg.trusted_proxies = NULL; /* 127.0.0.1 is a client like any other: capped */
        if (organism_sock)
                cfg.organism_socket_override = organism_sock;
        struct ctl *c = NULL;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        *ret_port = ctl_port(c);
        return c;
}

/* Signs in with a fresh link at port; fills cookie (65 bytes). */
static void sign_in_at(uint16_t port, char *cookie) {
        _cleanup_free_ char *t = NULL, *target = NULL;
        struct resp r;
        assert_int_equal(ctl_login_link_new(g_kdb, &t), 0);
        assert_int_equal(xasprintf(&target, "/_seed/login?t=%s", t), 0);
        http_from(port, "127.0.0.1", "GET", target, NAV, NULL, &r);
        assert_int_equal(r.status, 200);
        const char *sc = resp_header(&r, "Set-Cookie");
        assert_non_null(sc);
        assert_true(startswith(sc, g_cookie_name));
        memcpy(cookie, sc + strlen(g_cookie_name) + 1, 64);
        cookie[64] = 0;
        resp_done(&r);
}

#define HELD 20  /* more than the 16 connections one client may hold anonymously */

/* Slow organism answers held by the owner's own address (the organism's
 * pages open there, through *.localhost) do not lock out the CLI. */
static void test_held_organism_answers_leave_the_cli_room(void **state) {
        char hang_path[sizeof seed_dir + 16];
        hang_start(hang_path, sizeof hang_path);
        uint16_t port;
        struct ctl *c = pools_server(hang_path, &port);
        char ctl_host[64], req[512];
        snprintf(ctl_host, sizeof ctl_host, "127.0.0.1:%u", port);

        int held[HELD];
        snprintf(req, sizeof req, "GET /slow HTTP/1.1\r\nHost: %s\r\n\r\n", ctl_host);
        int64_t deadline = mono_ms() + 20000;
        for (int i = 0; i < HELD; i++) {
                held[i] = connect_from(port, "127.0.0.1");
                send_all(held[i], req, strlen(req));
                /* One at a time, each held by the organism before the next:
                 * connections still without a request head are the
                 * anonymous pool's, whose oldest are cut at its cap. */
                while (hang_count() < i + 1 && mono_ms() < deadline)
                        poll(NULL, 0, 5);
        }
        int reached = hang_count();
        /* The CLI, an anonymous request and a new page of the organism's
         * from the same address are all answered at once. */
        char own[80];
        own_host(port, own, sizeof own);
        snprintf(req, sizeof req,
                 "GET /_seed/api/status HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                 "Authorization: Bearer %s\r\n\r\n",
                 own, CLI_TOKEN);
        int64_t t0 = mono_ms();
        int cli_status = try_request(port, "127.0.0.1", req, 5000);
        int64_t cli_ms = mono_ms() - t0;
        snprintf(req, sizeof req, "GET /_seed/healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                 ctl_host);
        int health = try_request(port, "127.0.0.1", req, 5000);
        int closed = count_closed(held, HELD);

        for (int i = 0; i < HELD; i++)
                close(held[i]);
        ctl_stop(c);
        hang_stop(hang_path);
        printf("# %d organism answers held from 127.0.0.1; the CLI got %d in %lld ms, healthz %d\n", reached,
               cli_status, (long long)cli_ms, health);
        assert_int_equal(cli_status, 200); /* answered (within try_request's deadline) */
        assert_int_equal(health, 200);
        assert_int_equal(reached, HELD);
        assert_int_equal(closed, 0);
}

#define LORIS_ADDRS 20
#define LORIS_PER_ADDR 15
#define LORIS_N (LORIS_ADDRS * LORIS_PER_ADDR)

/* Slowloris: LORIS_N connections from 127.0.0.10-29, each trickling one
 * byte of a request head a second, reconnecting whenever one is closed. */
static struct {
        pthread_t thread;
        uint16_t port;
        atomic_bool stop;
        atomic_int opened, rounds;
        int fds[LORIS_N];
} loris;

static int loris_connect(int i) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 10 + i / LORIS_PER_ADDR);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET, .sin_port = htons(loris.port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        inet_pton(AF_INET, src, &from.sin_addr);
        char head[128];
        snprintf(head, sizeof head, "GET /_seed/healthz HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nX-Slow: ", loris.port);
        if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof from) < 0 ||
            connect(fd, (struct sockaddr *)&to, sizeof to) < 0 ||
            send(fd, head, strlen(head), MSG_NOSIGNAL) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        atomic_fetch_add(&loris.opened, 1);
        return fd;
}

static void *loris_main(void *arg) {
        for (int i = 0; i < LORIS_N; i++)
                loris.fds[i] = loris_connect(i);
        while (!atomic_load(&loris.stop)) {
                int64_t next = mono_ms() + 1000;
                for (int i = 0; i < LORIS_N && !atomic_load(&loris.stop); i++) {
                        if (loris.fds[i] >= 0 && closed_by_server(loris.fds[i])) {
                                close(loris.fds[i]);
                                loris.fds[i] = -1;
                        }
                        if (loris.fds[i] < 0)
                                loris.fds[i] = loris_connect(i);
                        else if (send(loris.fds[i], "a", 1, MSG_NOSIGNAL) < 0) {
                                close(loris.fds[i]);
                                loris.fds[i] = -1;
                        }
                }
                atomic_fetch_add(&loris.rounds, 1);
                while (!atomic_load(&loris.stop) && mono_ms() < next)
                        poll(NULL, 0, 50);
        }
        for (int i = 0; i < LORIS_N; i++)
                if (loris.fds[i] >= 0)
                        close(loris.fds[i]);
        return NULL;
}

#define OWNER_CALLS 28

/* 20 loopback addresses x 15 slow heads: every one of the owner's calls
 * (the CLI's and a signed-in browser's, from 127.0.0.1) is answered. */
static void test_slowloris_leaves_the_owner_room(void **state) {
        uint16_t port;
        struct ctl *c = pools_server(NULL, &port);
        char ctl_host[64], cli_req[512], browser_req[1024];
        snprintf(ctl_host, sizeof ctl_host, "127.0.0.1:%u", port);
        char cookie[65], token[65];
        sign_in_at(port, cookie);
        ctl_api_token(SESSION_KEY, cookie, token);
        snprintf(cli_req, sizeof cli_req,
                 "GET /_seed/api/status HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
                 "Authorization: Bearer %s\r\n\r\n",
                 ctl_host, CLI_TOKEN);
        snprintf(browser_req, sizeof browser_req,
                 "GET /_seed/api/status HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" FETCH
                 "Cookie: %s=%s\r\nX-Seed-Token: %s\r\n\r\n",
                 ctl_host, g_cookie_name, cookie, token);

        loris.port = port;
        atomic_store(&loris.stop, false);
        atomic_store(&loris.opened, 0);
        atomic_store(&loris.rounds, 0);
        assert_int_equal(pthread_create(&loris.thread, NULL, loris_main, NULL), 0);
        /* Every slow connection opened, and two rounds of trickling. */
        int64_t deadline = mono_ms() + 30000;
        while ((atomic_load(&loris.opened) < LORIS_N || atomic_load(&loris.rounds) < 2) &&
               mono_ms() < deadline)
                poll(NULL, 0, 20);
        int answered = 0, slowest = 0;
        int64_t t0 = mono_ms();
        for (int i = 0; i < OWNER_CALLS && mono_ms() - t0 < 40000; i++) {
                /* One every 400 ms: through the 10 s wave of cut heads too. */
                while (mono_ms() < t0 + 400 * i)
                        poll(NULL, 0, (int)(t0 + 400 * i - mono_ms()));
                int64_t t1 = mono_ms();
                int st = try_request(port, "127.0.0.1", i % 2 ? browser_req : cli_req, 10000);
                answered += st == 200;
                if (mono_ms() - t1 > slowest)
                        slowest = (int)(mono_ms() - t1);
        }
        int opened = atomic_load(&loris.opened);
        atomic_store(&loris.stop, true);
        pthread_join(loris.thread, NULL);
        ctl_stop(c);
        printf("# slowloris: %d of %d owner calls answered over %lld ms, the slowest in %d ms; %d slow "
               "connections opened in all\n",
               answered, OWNER_CALLS, (long long)(mono_ms() - t0), slowest, opened);
        assert_true(opened >= LORIS_N);
        assert_int_equal(answered, OWNER_CALLS);
}

/* The last answer kept_alive_status read (per thread: loop clients share it). */
static _Thread_local char kept_alive_answer[256 * 1024];

/* The status of one answer read from a kept-alive connection (Content-Length
 * framing); 0 when the connection ended first. */
static int kept_alive_status(int fd, const char *req, size_t req_len) {
        send_all(fd, req, req_len);
        char *buf = kept_alive_answer;
        size_t len = 0;
        for (;;) {
                ssize_t k = recv(fd, buf + len, sizeof kept_alive_answer - 1 - len, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t)k;
                buf[len] = 0;
                const char *end = strstr(buf, "\r\n\r\n");
                const char *cl = end ? strcasestr(buf, "\r\nContent-Length:") : NULL;
                if (cl && cl < end && len >= (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10))
                        break;
        }
        buf[len] = 0;
        int status = 0;
        return sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

/* A request for host with a Cookie header of cookie_bytes (0: none). */
static size_t head_with_cookie(const char *target, const char *host, size_t cookie_bytes, char **ret) {
        struct buf b = BUF_INIT(1 << 20);
        assert_int_equal(buf_printf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, host), 0);
        if (cookie_bytes > 0) {
                assert_int_equal(buf_puts(&b, "Cookie: bomb="), 0);
                for (size_t i = 0; i < cookie_bytes; i++)
                        assert_int_equal(buf_append(&b, "b", 1), 0);
                assert_int_equal(buf_puts(&b, "\r\n"), 0);
        }
        assert_int_equal(buf_puts(&b, "\r\n"), 0);
        *ret = (char *)b.data;
        return b.len;
}

static int status_on(int fd, const char *target, const char *host, size_t cookie_bytes) {
        _cleanup_free_ char *req = NULL;
        size_t n = head_with_cookie(target, host, cookie_bytes, &req);
        return kept_alive_status(fd, req, n);
}

/* A control plane with an origin of its own (seed.localhost), before a
 * fake organism started afresh; its port in *ret_port. */
static struct ctl *start_with_own_origin(uint16_t *ret_port) {
        org_stop();
        org_start();
        struct ctl_config cfg = ctl_cfg("127.0.0.1:0");
        cfg.control_host = "seed.localhost";
        cfg.trusted_proxies = NULL;
        struct ctl *c = NULL;
        assert_int_equal(ctl_start(&cfg, &c), 0);
        *ret_port = ctl_port(c);
        return c;
}

/* The status of one request on a kept-alive connection, with extra header
 * lines. */
static int status_on_with(int fd, const char *target, const char *host, const char *extra) {
        _cleanup_free_ char *req = NULL;
        assert_int_equal(xasprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, host, extra), 0);
        return kept_alive_status(fd, req, strlen(req));
}

/* front.h: a connection to the organism's origin whose first head is small
 * gets a small pool, so a far larger head later on it is refused (431); one
 * to the control plane's own origin, or whose first head is large, or that
 * waited past the most connections held for a first head, has room for a
 * cookie bomb. A small connection still passes the largest response head
 * the proxy allows. */
static void test_pools_by_first_head(void **state) {
        uint16_t port;
        struct ctl *c = start_with_own_origin(&port);
        char app[64], own[64];
        snprintf(app, sizeof app, "127.0.0.1:%u", port);
        snprintf(own, sizeof own, "seed.localhost:%u", port);
        const size_t bomb = 200 * 1024;

        /* The organism's origin, a small first head: a small pool. */
        int fd = connect_tcp(AF_INET, port);
        assert_int_equal(status_on(fd, "/id/small", app, 0), 200);
        assert_int_equal(status_on(fd, "/id/small", app, bomb), 431);
        close(fd);
        /* The largest response head the proxy passes on fits in it. */
        fd = connect_tcp(AF_INET, port);
        assert_int_equal(status_on(fd, "/id/first", app, 0), 200);
        assert_int_equal(status_on(fd, "/wide", app, 0), 200);
        assert_non_null(strstr(kept_alive_answer, "\r\nX-Wide-63: www"));
        assert_non_null(strstr(kept_alive_answer, "\r\n\r\nwide"));
        close(fd);

        /* The control plane's own origin: a large pool from the start. */
        fd = connect_tcp(AF_INET, port);
        assert_int_equal(status_on(fd, "/_seed/healthz", own, 0), 200);
        assert_int_equal(status_on(fd, "/_seed/healthz", own, bomb), 200);
        close(fd);
        /* A large first head, on any origin. */
        fd = connect_tcp(AF_INET, port);
        assert_int_equal(status_on(fd, "/_seed/healthz", own, CTL_FRONT_PEEK), 200);
        close(fd);
        fd = connect_tcp(AF_INET, port);
        int first = status_on(fd, "/id/large", app, CTL_FRONT_PEEK);
        assert_true(first != 0 && first != 431);
        assert_int_equal(status_on(fd, "/_seed/healthz", own, bomb), 200);
        close(fd);

        /* More silent connections than are held for a first head: the
         * oldest go on (large) and new ones are still answered. */
        int quiet[CTL_FRONT_PENDING + 4];
        for (size_t i = 0; i < ARRAY_SIZE(quiet); i++)
                assert_true((quiet[i] = connect_tcp(AF_INET, port)) >= 0);
        fd = connect_tcp(AF_INET, port);
        assert_int_equal(status_on(fd, "/id/after", app, 0), 200);
        close(fd);
        assert_int_equal(status_on(quiet[0], "/_seed/healthz", own, bomb), 200);
        assert_int_equal(status_on(quiet[ARRAY_SIZE(quiet) - 1], "/id/last", app, 0), 200);
        for (size_t i = 0; i < ARRAY_SIZE(quiet); i++)
                close(quiet[i]);
        ctl_stop(c);
}

#define LOOP_CLIENTS 16
#define LOOP_REQUESTS 200

struct loop_client {
        uint16_t port;
        const char *target;
        int ok;                   /* requests answered 200 */
};

/* LOOP_REQUESTS requests on one kept-alive connection. */
static void *loop_client_main(void *arg) {
        struct loop_client *lc = arg;
        char app[64];
        snprintf(app, sizeof app, "127.0.0.1:%u", lc->port);
        int fd = connect_tcp(AF_INET, lc->port);
        for (int i = 0; i < LOOP_REQUESTS && fd >= 0; i++) {
                _cleanup_free_ char *req = NULL;
                size_t n = head_with_cookie(lc->target, app, 0, &req);
                if (kept_alive_status(fd, req, n) != 200)
                        break;
                lc->ok++;
        }
        if (fd >= 0)
                close(fd);
        return NULL;
}

/* The organism's origins are served on the event loop (loop.h): /_seed
 * routes (on a worker) and proxied requests, one after another on one
 * kept-alive connection. */
static void test_loop_keeps_connections_alive(void **state) {
        uint16_t port;
        struct ctl *c = start_with_own_origin(&port);
        char app[64];
        snprintf(app, sizeof app, "127.0.0.1:%u", port);
        int fd = connect_tcp(AF_INET, port);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(status_on(fd, "/_seed/healthz", app, 0), 200);
                assert_int_equal(status_on(fd, "/id/a", app, 0), 200);
        }
        /* The control plane's own origin on such a connection (a client
         * that keeps connections per address, not per host): answered on
         * a worker; only a streamed answer, whose reads wait, is
         * misdirected there (421, the connection closed), and a new
         * connection (the large daemon) gets it. */
        char own[64], cli[256];
        snprintf(own, sizeof own, "seed.localhost:%u", port);
        snprintf(cli, sizeof cli, "Authorization: Bearer %s\r\n", CLI_TOKEN);
        assert_int_equal(status_on_with(fd, "/_seed/api/status", own, cli), 200);
        assert_int_equal(status_on(fd, "/id/a", app, 0), 200);
        assert_int_equal(status_on_with(fd, "/_seed/api/slow-stream", own, cli), 421);
        assert_int_equal(status_on(fd, "/id/a", app, 0), 0);
        close(fd);
        fd = connect_tcp(AF_INET, port);
        assert_int_equal(status_on_with(fd, "/_seed/api/status", own, cli), 200);
        close(fd);
        /* Many at once. */
        pthread_t t[LOOP_CLIENTS];
        struct loop_client lc[LOOP_CLIENTS];
        for (int i = 0; i < LOOP_CLIENTS; i++) {
                lc[i] = (struct loop_client){.port = port, .target = i % 2 ? "/id/b" : "/_seed/healthz"};
                assert_int_equal(pthread_create(&t[i], NULL, loop_client_main, &lc[i]), 0);
        }
        for (int i = 0; i < LOOP_CLIENTS; i++) {
                pthread_join(t[i], NULL);
                if (lc[i].ok != LOOP_REQUESTS)
                        fail_msg("client %d (%s): %d of %d answered", i, lc[i].target, lc[i].ok, LOOP_REQUESTS);
        }
        ctl_stop(c);
}

/* fast.h: a plain GET on the organism's origin is answered by the loop's
 * own HTTP/1.1, anything else by libmicrohttpd — on one connection, at a
 * request boundary, with the organism asked once: pipelined requests, a
 * head in two pieces, /_seed after the app, answers the fast path does not
 * send itself (a stream, a body until the close), and a client too slow to
 * take a large answer at once. */
static void test_fast_path_and_the_daemon(void **state) {
        uint16_t port;
        struct ctl *c = start_with_own_origin(&port);
        char app[64], req[512];
        snprintf(app, sizeof app, "127.0.0.1:%u", port);

        /* Two requests in one write: both answered, in order. */
        int fd = connect_tcp(AF_INET, port);
        int k = snprintf(req, sizeof req, "GET /id/first HTTP/1.1\r\nHost: %s\r\n\r\n"
                                          "GET /id/second HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                         app, app);
        send_all(fd, req, (size_t)k);
        struct resp r;
        read_response(fd, &r); /* both answers, up to the close */
        char *second = strstr(r.body, "HTTP/1.1 200");
        assert_non_null(second);
        assert_memory_equal(r.body, "first", 5);
        assert_non_null(strstr(second, "\r\n\r\nsecond"));
        resp_done(&r);
        close(fd);

        /* A head in two pieces, then /_seed and the app again on the same
         * connection (the daemon's from the second request on). */
        fd = connect_tcp(AF_INET, port);
        k = snprintf(req, sizeof req, "GET /id/split HTTP/1.1\r\nHo");
        send_all(fd, req, (size_t)k);
        usleep(50 * 1000); /* the scenario: the rest comes later, in a read of its own */
        k = snprintf(req, sizeof req, "st: %s\r\n\r\n", app);
        assert_int_equal(kept_alive_status(fd, req, (size_t)k), 200);
        assert_non_null(strstr(kept_alive_answer, "\r\n\r\nsplit"));
        assert_int_equal(status_on(fd, "/id/a", app, 0), 200);
        assert_int_equal(status_on(fd, "/_seed/healthz", app, 0), 200);
        assert_int_equal(status_on(fd, "/id/b", app, 0), 200);
        assert_non_null(strstr(kept_alive_answer, "\r\n\r\nb"));
        close(fd);

        /* Answers the daemon sends (chunked; until the close): the organism
         * was asked once, the client gets all of it. */
        static const struct {
                const char *target, *body;
        } daemon_sends[] = {{"/chunked", "Hello, from the body"}, {"/close", "until the end"}};
        for (size_t i = 0; i < ARRAY_SIZE(daemon_sends); i++) {
                int before = org_count();
                fd = connect_tcp(AF_INET, port);
                k = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                             daemon_sends[i].target, app);
                send_all(fd, req, (size_t)k);
                read_response(fd, &r);
                close(fd);
                assert_int_equal(r.status, 200);
                assert_string_equal(r.body, daemon_sends[i].body);
                assert_int_equal(org_count(), before + 1);
                resp_done(&r);
        }

        /* Bytes the organism sends on an idle pooled connection are never
         * taken for the next request's answer: that connection is closed. */
        for (int round = 0; round < 3; round++) {
                fd = connect_tcp(AF_INET, port);
                pthread_mutex_lock(&org_lock);
                int strays = org_strays;
                pthread_mutex_unlock(&org_lock);
                assert_int_equal(status_on(fd, "/stray", app, 0), 200);
                assert_non_null(strstr(kept_alive_answer, "\r\n\r\nstray"));
                /* The unasked answer is out before the next request: the
                 * loop hears of it first (its epoll reports in order). */
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 20;
                pthread_mutex_lock(&org_lock);
                while (org_strays == strays && pthread_cond_timedwait(&org_cond, &org_lock, &until) == 0)
                        ;
                assert_int_equal(org_strays, strays + 1);
                pthread_mutex_unlock(&org_lock);
                for (int i = 0; i < 4; i++) {
                        assert_int_equal(status_on(fd, "/id/next", app, 0), 200);
                        if (!strstr(kept_alive_answer, "\r\n\r\nnext"))
                                fail_msg("round %d, request %d got: %.300s", round, i, kept_alive_answer);
                }
                close(fd);
        }

        /* A client whose receive buffer is small, reading late: the rest of
         * the answer waits for it. */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        int small = 2048;
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        k = snprintf(req, sizeof req, "GET /large HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", app);
        send_all(fd, req, (size_t)k);
        usleep(200 * 1000); /* the scenario: a client that does not read yet */
        read_response(fd, &r);
        assert_int_equal(r.status, 200);
        assert_int_equal(r.body_len, 60000);
        for (size_t i = 0; i < r.body_len; i++)
                if (r.body[i] != 'L')
                        fail_msg("byte %zu of the large answer is %d", i, r.body[i]);
        resp_done(&r);
        close(fd);
        ctl_stop(c);
}

/* A head sent a byte every half second is cut once its 10 s are up: the
 * deadline is total, not idle. */
static void test_trickled_head_is_cut(void **state) {
        uint16_t port;
        struct ctl *c = pools_server(NULL, &port);
        int fd = connect_from(port, "127.0.0.70");
        char head[128];
        snprintf(head, sizeof head, "GET /_seed/healthz HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nX-Slow: ", port);
        int64_t t0 = mono_ms();
        send_all(fd, head, strlen(head));
        bool closed = false;
        while (!closed && mono_ms() - t0 < 20000) {
                (void)send(fd, "a", 1, MSG_NOSIGNAL);
                struct pollfd pf = {.fd = fd, .events = POLLIN};
                (void)poll(&pf, 1, 500);
                closed = closed_by_server(fd);
        }
        int64_t took = mono_ms() - t0;
        close(fd);
        ctl_stop(c);
        if (!closed)
                fail_msg("a head trickled for %lld ms was never cut", (long long)took);
        /* Not before the deadline; the upper bound is only "it was cut",
         * with room for a loaded machine. */
        if (took < 9500 || took > 25000)
                fail_msg("the trickled head was cut after %lld ms, not about 10 s", (long long)took);
}


int main(void) {
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "cannot drop root\n");
                return 1;
        }
        log_set_level(LOG_WARN);
        if (getenv("CTL_TEST_FILTER")) /* e.g. "test_slowloris*": one test (those needing no earlier ones) */
                cmocka_set_test_filter(getenv("CTL_TEST_FILTER"));
        /* integration-ctl-loop: the proxy's tests on the event loop. */
        const struct CMUnitTest loop_tests[] = {
                cmocka_unit_test(test_start_and_healthz),
                cmocka_unit_test(test_proxy),
                cmocka_unit_test(test_proxy_keep_alive),
                cmocka_unit_test(test_proxy_never_mixes),
                cmocka_unit_test(test_proxy_tells_5xx),
                cmocka_unit_test(test_proxy_upstream_down),
                cmocka_unit_test(test_proxy_request_framing),
                cmocka_unit_test(test_proxy_busy_keeps_seed_reachable),
                cmocka_unit_test(test_proxy_connect_timeout),
                cmocka_unit_test(test_proxy_body_while_connecting),
                cmocka_unit_test(test_held_organism_answers_leave_the_cli_room),
        };
        if (getenv("CTL_TEST_CONTROL_HOST")) {
                /* No sign-in here: a session and token to check are kept from the organism. */
                memset(g_cookie, 'c', 64);
                memset(g_token, 't', 64);
                return cmocka_run_group_tests(loop_tests, group_setup, group_teardown);
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_start_and_healthz),
                cmocka_unit_test(test_port_taken_refuses),
                cmocka_unit_test(test_own_addresses_refused_in_container),
                cmocka_unit_test(test_loopback_serves_both_families),
                cmocka_unit_test(test_given_sockets_outlive_ctl),
                cmocka_unit_test(test_ipv6),
                cmocka_unit_test(test_forged_host),
                cmocka_unit_test(test_link_sign_in),
                cmocka_unit_test(test_expired_link),
                cmocka_unit_test(test_foreign_cookies_expired),
                cmocka_unit_test(test_page),
                cmocka_unit_test(test_assets),
                cmocka_unit_test(test_status_api),
                cmocka_unit_test(test_logs_api),
                cmocka_unit_test(test_login_links_api),
                cmocka_unit_test(test_state_changing_rules),
                cmocka_unit_test(test_api_routes_from_other_modules),
                cmocka_unit_test(test_logout),
                cmocka_unit_test(test_revoke_at_once),
                cmocka_unit_test(test_link_limit),
                cmocka_unit_test(test_password_form_on_private_page),
                cmocka_unit_test(test_password_sign_in),
                cmocka_unit_test(test_password_failures_limited),
                cmocka_unit_test(test_bad_links_count),
                cmocka_unit_test(test_prefetch_is_not_a_sign_in),
                cmocka_unit_test(test_chunked_body_too_large),
                cmocka_unit_test(test_basic_auth_is_ignored_by_the_api),
                cmocka_unit_test(test_refusal_flood_is_logged_at_a_bounded_rate),
                cmocka_unit_test(test_forwarded_for),
                cmocka_unit_test(test_form_guards),
                cmocka_unit_test(test_overall_limit),
                cmocka_unit_test(test_limited_client_does_not_lock_out_others),
                cmocka_unit_test(test_short_password_turns_password_sign_in_off),
                cmocka_unit_test(test_session_survives_restart),
                cmocka_unit_test(test_proxy),
                cmocka_unit_test(test_proxy_keep_alive),
                cmocka_unit_test(test_proxy_never_mixes),
                cmocka_unit_test(test_proxy_tells_5xx),
                cmocka_unit_test(test_proxy_upstream_down),
                cmocka_unit_test(test_proxy_request_framing),
                cmocka_unit_test(test_service_worker_on_seed),
                cmocka_unit_test(test_proxy_busy_keeps_seed_reachable),
                cmocka_unit_test(test_proxy_connect_timeout),
                cmocka_unit_test(test_proxy_body_while_connecting),
                cmocka_unit_test(test_logo),
                cmocka_unit_test(test_connection_limits),
                cmocka_unit_test(test_connection_cap_behind_proxies),
                cmocka_unit_test(test_held_organism_answers_leave_the_cli_room),
                cmocka_unit_test(test_slowloris_leaves_the_owner_room),
                cmocka_unit_test(test_trickled_head_is_cut),
                cmocka_unit_test(test_pools_by_first_head),
                cmocka_unit_test(test_loop_keeps_connections_alive),
                cmocka_unit_test(test_fast_path_and_the_daemon),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
