/* test-egress.c — the egress proxy through real sockets.
 *
 * The test process moves into a private network namespace of its own
 * (tests/common/testnet.h) whose lo holds public addresses: an echo server
 * listens on 93.184.215.14:443 (and [2606:4700::1111]:443), a TLS server
 * with a self-signed certificate on 93.184.215.15:443, and "internal
 * services" on 127.0.0.1, ::1, 10.1.2.3, 192.168.1.1, 169.254.169.254,
 * 100.64.0.1 and fd00::1, port 443, which must never see a connection. The
 * proxy dials all of them for real; names reach it through the resolver
 * seam (a table here). Doors are listening sockets on 127.0.0.1, as the
 * kernel makes inside a sandbox's namespace.
 *
 * Covered: the SSRF table (address classes, every IPv4 spelling, IPv6
 * forms, internal names, trailing dots, punycode, mixed answers, answers
 * that change between lookups, ports, methods, malformed targets); the
 * ClientHello check (match, mismatch, missing, IP, oversized, fragmented,
 * slow, not TLS) and a real TLS session through the tunnel; the limits (the
 * 65th tunnel, connections waiting for their head, idle, request and
 * connect timeouts); revocation, registries and doors closing mid-flight;
 * the refusals kept and logged. No fixed sleeps: every wait polls with a
 * deadline. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "egress/egress.h"
#include "egress/hello.h"

#include "../common/testnet.h"
#include "../common/tlshello.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>

#define WAIT_MS 10000 /* the longest any wait here may take before the test fails */

static char *no_net; /* why the private network could not be made, or NULL */

static void require_net(void) {
        if (no_net) {
                print_message("# skipped: %s\n", no_net);
                skip();
        }
}

/* ---- Sockets ---- */

static int listen_on(const char *ip, int port, int backlog) {
        struct sockaddr_storage ss = {0};
        socklen_t len;
        if (strchr(ip, ':')) {
                struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons((uint16_t)port);
                if (inet_pton(AF_INET6, ip, &s6->sin6_addr) != 1)
                        return -1;
                len = sizeof *s6;
        } else {
                struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
                s4->sin_family = AF_INET;
                s4->sin_port = htons((uint16_t)port);
                if (inet_pton(AF_INET, ip, &s4->sin_addr) != 1)
                        return -1;
                len = sizeof *s4;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0)
                return -1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ss.ss_family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, backlog) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static int local_port(int fd) {
        struct sockaddr_in sin;
        socklen_t len = sizeof sin;
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
        return ntohs(sin.sin_port);
}

static int connect_to(const char *ip, int port) {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        assert_int_equal(inet_pton(AF_INET, ip, &sin.sin_addr), 1);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        if (connect(fd, (struct sockaddr *)&sin, sizeof sin) < 0) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
        }
        return fd;
}

/* 0, or -1 when the peer closed first (a refused oversized hello). */
static int try_send_all(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static void send_all(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                assert_true(n > 0);
                p += n;
                len -= (size_t)n;
        }
}

/* Reads exactly len bytes within WAIT_MS: 0, or -1 on EOF, error, timeout. */
static int read_exact(int fd, void *data, size_t len) {
        char *p = data;
        int64_t deadline = now_ms() + WAIT_MS;
        while (len > 0) {
                if (fd_wait_readable(fd, deadline) < 0)
                        return -1;
                ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return -1;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Whether the peer closes (EOF or reset) within WAIT_MS; what arrives
 * before is dropped. */
static bool closes(int fd) {
        int64_t deadline = now_ms() + WAIT_MS;
        char sink[4096];
        for (;;) {
                if (fd_wait_readable(fd, deadline) < 0)
                        return false;
                ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0)
                        return true;
        }
}

/* ---- The stand-ins on the "internet" ---- */

#define SRV_CONNS 256
#define SRV_LISTENERS 16

/* One thread: echoes what each connection sends; counts. Listeners marked
 * internal count connections that must never happen. */
static struct server {
        pthread_t thread;
        int wake[2];
        int listeners[SRV_LISTENERS];
        bool internal[SRV_LISTENERS];
        size_t n_listeners;
        pthread_mutex_t lock;
        pthread_cond_t changed; /* on CLOCK_MONOTONIC */
        int accepted, closed, internal_accepted;
        size_t bytes;
} srv = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void srv_count(int *counter) {
        pthread_mutex_lock(&srv.lock);
        (*counter)++;
        pthread_cond_broadcast(&srv.changed);
        pthread_mutex_unlock(&srv.lock);
}

static void *server_main(void *userdata) {
        (void)userdata;
        struct pollfd p[1 + SRV_LISTENERS + SRV_CONNS];
        size_t n_conns = 0;
        int conns[SRV_CONNS];
        for (;;) {
                size_t n = 0;
                p[n++] = (struct pollfd){.fd = srv.wake[0], .events = POLLIN};
                for (size_t i = 0; i < srv.n_listeners; i++)
                        p[n++] = (struct pollfd){.fd = srv.listeners[i], .events = POLLIN};
                for (size_t i = 0; i < n_conns; i++)
                        p[n++] = (struct pollfd){.fd = conns[i], .events = POLLIN};
                if (poll(p, n, -1) < 0)
                        continue;
                if (p[0].revents)
                        break;
                for (size_t i = 0; i < srv.n_listeners; i++) {
                        if (!p[1 + i].revents)
                                continue;
                        int fd = accept4(srv.listeners[i], NULL, NULL, SOCK_CLOEXEC);
                        if (fd < 0)
                                continue;
                        if (srv.internal[i])
                                srv_count(&srv.internal_accepted);
                        srv_count(&srv.accepted);
                        if (srv.internal[i] || n_conns == SRV_CONNS) {
                                close(fd);
                                srv_count(&srv.closed);
                        } else
                                conns[n_conns++] = fd;
                }
                size_t base = 1 + srv.n_listeners;
                for (size_t i = n_conns; i-- > 0;) {
                        if (!p[base + i].revents)
                                continue;
                        char buf[65536];
                        ssize_t k = recv(conns[i], buf, sizeof buf, MSG_DONTWAIT);
                        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (k > 0) {
                                pthread_mutex_lock(&srv.lock);
                                srv.bytes += (size_t)k;
                                pthread_mutex_unlock(&srv.lock);
                                if (send(conns[i], buf, (size_t)k, MSG_NOSIGNAL) == k)
                                        continue;
                        }
                        close(conns[i]);
                        conns[i] = conns[--n_conns];
                        srv_count(&srv.closed);
                }
        }
        for (size_t i = 0; i < n_conns; i++)
                close(conns[i]);
        return NULL;
}

static void server_add(const char *ip, bool internal) {
        int fd = listen_on(ip, 443, 128);
        if (fd < 0) {
                fprintf(stderr, "cannot listen on %s:443: %s\n", ip, strerror(errno));
                return;
        }
        srv.internal[srv.n_listeners] = internal;
        srv.listeners[srv.n_listeners++] = fd;
}

static int srv_accepted(void) {
        pthread_mutex_lock(&srv.lock);
        int n = srv.accepted;
        pthread_mutex_unlock(&srv.lock);
        return n;
}

/* Waits until the echo server took at least expect connections in all and
 * every one of them has closed; returns the bytes it received in all. */
static size_t server_settle(int expect) {
        struct timespec deadline;
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += WAIT_MS / 1000;
        pthread_mutex_lock(&srv.lock);
        while (srv.accepted < expect || srv.closed != srv.accepted)
                if (pthread_cond_timedwait(&srv.changed, &srv.lock, &deadline) == ETIMEDOUT)
                        break;
        bool settled = srv.accepted >= expect && srv.closed == srv.accepted;
        size_t bytes = srv.bytes;
        pthread_mutex_unlock(&srv.lock);
        if (!settled)
                fail_msg("the echo server still has connections open");
        return bytes;
}

/* The TLS stand-in: one session at a time; answers "pong:" + what it read. */
static struct tls_server {
        pthread_t thread;
        int fd, wake[2];
        SSL_CTX *ctx;
        X509 *cert;
        int sessions;
} tls;

static void *tls_main(void *userdata) {
        (void)userdata;
        for (;;) {
                struct pollfd p[2] = {{.fd = tls.wake[0], .events = POLLIN}, {.fd = tls.fd, .events = POLLIN}};
                if (poll(p, 2, -1) < 0)
                        continue;
                if (p[0].revents)
                        return NULL;
                int fd = accept4(tls.fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                struct timeval tv = {.tv_sec = WAIT_MS / 1000};
                (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                SSL *s = SSL_new(tls.ctx);
                SSL_set_fd(s, fd);
                char buf[256] = "pong:";
                if (SSL_accept(s) == 1) {
                        int n = SSL_read(s, buf + 5, sizeof buf - 6);
                        if (n > 0) {
                                (void)SSL_write(s, buf, 5 + n);
                                __atomic_add_fetch(&tls.sessions, 1, __ATOMIC_SEQ_CST);
                        }
                        (void)SSL_shutdown(s);
                }
                SSL_free(s);
                close(fd);
        }
}

static int tls_start(void) {
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        if (!key || !x)
                return -1;
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), -3600);
        X509_gmtime_adj(X509_getm_notAfter(x), 86400);
        X509_set_pubkey(x, key);
        X509_NAME *name = X509_get_subject_name(x);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"tls.public.net", -1, -1, 0);
        X509_set_issuer_name(x, name);
        X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, "DNS:tls.public.net");
        if (!san || !X509_add_ext(x, san, -1) || !X509_sign(x, key, EVP_sha256()))
                return -1;
        X509_EXTENSION_free(san);
        tls.ctx = SSL_CTX_new(TLS_server_method());
        if (!tls.ctx || SSL_CTX_use_certificate(tls.ctx, x) != 1 || SSL_CTX_use_PrivateKey(tls.ctx, key) != 1)
                return -1;
        EVP_PKEY_free(key);
        tls.cert = x;
        tls.fd = listen_on(TESTNET_V4_B, 443, 16);
        if (tls.fd < 0 || pipe2(tls.wake, O_CLOEXEC) < 0)
                return -1;
        return pthread_create(&tls.thread, NULL, tls_main, NULL) == 0 ? 0 : -1;
}

/* ---- The resolver seam ---- */

#define PUB TESTNET_V4
#define MANY_PUBLIC                                                                                                \
        PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB \
            "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB "," PUB \
            "," PUB "," PUB "," PUB "," PUB

static const struct dns_row {
        const char *name;
        const char *answer; /* addresses, comma-separated; "" none; "ENOENT" no such name */
        const char *later;  /* the answer from the second lookup on; NULL: the same */
} dns[] = {
        {"api.public.net", PUB, NULL},
        {"tls.public.net", TESTNET_V4_B, NULL},
        {"other.public.net", TESTNET_V4_B, NULL},
        {"slow.public.net", TESTNET_V4_C, NULL},
        {"closed.public.net", TESTNET_V4_D, NULL},
        {"reg.public.net", PUB, NULL},
        {"evo.public.net", PUB, NULL},
        {"live.public.net", PUB, NULL},
        {"logonce.public.net", PUB, NULL},
        {"v6.ssrf.net", TESTNET_V6, NULL},
        {"dual.ssrf.net", PUB "," TESTNET_V6, NULL},
        {"fallback.ssrf.net", TESTNET_V4_D "," PUB, NULL},
        {"loopback.ssrf.net", "127.0.0.1", NULL},
        {"loopback2.ssrf.net", "127.255.255.254", NULL},
        {"private10.ssrf.net", "10.1.2.3", NULL},
        {"private172.ssrf.net", "172.16.0.1", NULL},
        {"private192.ssrf.net", "192.168.1.1", NULL},
        {"metadata.ssrf.net", "169.254.169.254", NULL},
        {"cgnat.ssrf.net", "100.64.0.1", NULL},
        {"zero.ssrf.net", "0.0.0.0", NULL},
        {"thisnet.ssrf.net", "0.1.2.3", NULL},
        {"ietf.ssrf.net", "192.0.0.170", NULL},
        {"doc.ssrf.net", "192.0.2.1", NULL},
        {"doc2.ssrf.net", "198.51.100.1", NULL},
        {"doc3.ssrf.net", "203.0.113.1", NULL},
        {"bench.ssrf.net", "198.18.0.1", NULL},
        {"mcast.ssrf.net", "224.0.0.251", NULL},
        {"reserved.ssrf.net", "240.0.0.1", NULL},
        {"bcast.ssrf.net", "255.255.255.255", NULL},
        {"relay.ssrf.net", "192.88.99.1", NULL},
        {"lo6.ssrf.net", "::1", NULL},
        {"unspec6.ssrf.net", "::", NULL},
        {"ll6.ssrf.net", "fe80::1", NULL},
        {"ula.ssrf.net", "fd00::1", NULL},
        {"ula2.ssrf.net", "fc00::1", NULL},
        {"site.ssrf.net", "fec0::1", NULL},
        {"mcast6.ssrf.net", "ff02::1", NULL},
        {"doc6.ssrf.net", "2001:db8::1", NULL},
        {"doc6b.ssrf.net", "3fff::1", NULL},
        {"mapped.ssrf.net", "::ffff:127.0.0.1", NULL},
        {"mapped10.ssrf.net", "::ffff:10.1.2.3", NULL},
        {"mappedmeta.ssrf.net", "::ffff:169.254.169.254", NULL},
        {"compat.ssrf.net", "::127.0.0.1", NULL},
        {"nat64.ssrf.net", "64:ff9b::7f00:1", NULL},
        {"nat64meta.ssrf.net", "64:ff9b::a9fe:a9fe", NULL},
        {"nat64local.ssrf.net", "64:ff9b:1::a01:203", NULL},
        {"sixtofour.ssrf.net", "2002:7f00:1::1", NULL},
        {"sixtofourmeta.ssrf.net", "2002:a9fe:a9fe::1", NULL},
        {"teredo.ssrf.net", "2001:0:4136:e378:8000:63bf:80ff:fffe", NULL},
        {"bench6.ssrf.net", "2001:2::1", NULL},
        {"discard6.ssrf.net", "100::1", NULL},
        {"srv6.ssrf.net", "5f00::1", NULL},
        {"nonglobal6.ssrf.net", "4000::1", NULL},
        {"mix.ssrf.net", PUB ",127.0.0.1", NULL},
        {"mix2.ssrf.net", "10.1.2.3," PUB, NULL},
        {"mix6.ssrf.net", TESTNET_V6 ",::ffff:127.0.0.1", NULL},
        {"mixlate.ssrf.net", MANY_PUBLIC ",192.168.1.1", NULL},
        {"flip.ssrf.net", PUB, "127.0.0.1"},
        {"flop.ssrf.net", "127.0.0.1", PUB},
        {"nxdomain.ssrf.net", "ENOENT", NULL},
        {"empty.ssrf.net", "", NULL},
        {"closed.ssrf.net", TESTNET_V4_D, NULL},
        {"a.wild.net", PUB, NULL},
        {"b.wild.net", PUB, NULL},
        {"a.b.wild.net", PUB, NULL},
        {"wild.net", PUB, NULL},
        {"evilwild.net", PUB, NULL},
        {"xn--bcher-kva.net", PUB, NULL},
        {"other.net", PUB, NULL},
        {"127.0.0.1.nip.io", "127.0.0.1", NULL},
};

static struct {
        pthread_mutex_t lock;
        int calls[ARRAY_SIZE(dns)];
        int unknown; /* names not in the table */
} dns_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int fake_resolve(void *userdata, const char *host, struct sockaddr_storage *ret, size_t max, size_t *ret_n) {
        (void)userdata;
        const struct dns_row *row = NULL;
        int calls = 0;
        pthread_mutex_lock(&dns_state.lock);
        for (size_t i = 0; i < ARRAY_SIZE(dns); i++)
                if (streq(dns[i].name, host)) {
                        row = &dns[i];
                        calls = ++dns_state.calls[i];
                }
        if (!row)
                dns_state.unknown++;
        pthread_mutex_unlock(&dns_state.lock);
        if (!row)
                return -ENOENT;
        const char *answer = calls > 1 && row->later ? row->later : row->answer;
        if (streq(answer, "ENOENT"))
                return -ENOENT;
        size_t n = 0;
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", answer);
        for (char *save = NULL, *a = strtok_r(copy, ",", &save); a && n < max; a = strtok_r(NULL, ",", &save)) {
                ret[n] = (struct sockaddr_storage){0};
                if (strchr(a, ':')) {
                        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ret[n];
                        s6->sin6_family = AF_INET6;
                        if (inet_pton(AF_INET6, a, &s6->sin6_addr) != 1)
                                return -EINVAL;
                } else {
                        struct sockaddr_in *s4 = (struct sockaddr_in *)&ret[n];
                        s4->sin_family = AF_INET;
                        if (inet_pton(AF_INET, a, &s4->sin_addr) != 1)
                                return -EINVAL;
                }
                n++;
        }
        *ret_n = n;
        return 0;
}

static int dns_calls(const char *name) {
        pthread_mutex_lock(&dns_state.lock);
        int n = -1;
        for (size_t i = 0; i < ARRAY_SIZE(dns); i++)
                if (streq(dns[i].name, name))
                        n = dns_state.calls[i];
        pthread_mutex_unlock(&dns_state.lock);
        return n;
}

/* ---- The proxy and its clients ---- */

struct proxy {
        struct egress *e;
        struct egress_door *door;
        int port;
};

static struct egress_door *open_door(struct egress *e, enum egress_policy p, const char *label, int *ret_port) {
        int fd = listen_on("127.0.0.1", 0, 128);
        assert_true(fd >= 0);
        *ret_port = local_port(fd);
        struct egress_door *d = NULL;
        assert_int_equal(egress_door_open(e, fd, p, label, &d), 0);
        return d;
}

static void proxy_start(struct proxy *p, enum egress_policy policy, char *const *registries) {
        *p = (struct proxy){0};
        assert_int_equal(egress_new(&(struct egress_config){.registries = registries}, &p->e), 0);
        egress_set_resolver(p->e, fake_resolve, NULL);
        p->door = open_door(p->e, policy, policy == EGRESS_POLICY_LIVE ? "live" : "evolution evo_test", &p->port);
}

static void proxy_stop(struct proxy *p) {
        egress_door_close(p->door);
        egress_free(p->e);
        *p = (struct proxy){0};
}

static int ask_wait_ms = WAIT_MS; /* for an answer */

/* Sends a request (a whole request line, or a CONNECT target) and reads
 * the answer's head (and, for a refusal, its body): the status, or -1. The
 * connection is handed to *ret_fd (closed when NULL). */
static int ask(int port, const char *line, int *ret_fd, char *ret_answer, size_t answer_max) {
        int fd = connect_to("127.0.0.1", port);
        assert_true(fd >= 0);
        char req[2048];
        if (strchr(line, ' '))
                snprintf(req, sizeof req, "%s\r\nHost: x\r\n\r\n", line);
        else
                snprintf(req, sizeof req, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: test\r\n\r\n", line, line);
        send_all(fd, req, strlen(req));
        char head[2048];
        size_t len = 0;
        int64_t deadline = now_ms() + ask_wait_ms;
        while (len < sizeof head - 1) {
                if (fd_wait_readable(fd, deadline) < 0)
                        break;
                ssize_t n = recv(fd, head + len, 1, 0); /* byte by byte: nothing past the head */
                if (n <= 0)
                        break;
                len += (size_t)n;
                head[len] = 0;
                if (len >= 4 && !memcmp(head + len - 4, "\r\n\r\n", 4))
                        break;
        }
        head[len] = 0;
        int status = -1;
        if (sscanf(head, "HTTP/1.1 %d ", &status) != 1)
                status = -1;
        if (status != 200 && status > 0) {
                /* The body: the reason, then the proxy closes. */
                while (len < sizeof head - 1 && fd_wait_readable(fd, deadline) == 0) {
                        ssize_t n = recv(fd, head + len, sizeof head - 1 - len, 0);
                        if (n <= 0)
                                break;
                        len += (size_t)n;
                }
                head[len] = 0;
                if (!strstr(head, "Connection: close\r\n"))
                        status = -2;
        }
        if (ret_answer)
                snprintf(ret_answer, answer_max, "%s", head);
        if (ret_fd)
                *ret_fd = fd;
        else
                close(fd);
        return status;
}

static uint8_t hello_bytes[EGRESS_HELLO_RAW_MAX * 2];

/* A tunnel to target, its ClientHello sent (with the target's host as
 * SNI) and echoed back by the upstream: the client's fd. */
static int tunnel_to(int port, const char *target) {
        int fd = -1;
        char answer[2048];
        int status = ask(port, target, &fd, answer, sizeof answer);
        if (status != 200)
                fail_msg("%s: %d: %s", target, status, answer);
        char host[300];
        snprintf(host, sizeof host, "%.*s", (int)strcspn(target, ":"), target);
        size_t len = tlshello_build(&(struct tlshello){.sni = host}, hello_bytes, sizeof hello_bytes);
        send_all(fd, hello_bytes, len);
        uint8_t back[1024];
        assert_true(len <= sizeof back);
        assert_int_equal(read_exact(fd, back, len), 0);
        assert_memory_equal(back, hello_bytes, len);
        return fd;
}

/* Whether bytes still flow both ways through the tunnel at fd. */
static bool echoes(int fd) {
        static const char ping[] = "ping";
        if (send(fd, ping, 4, MSG_NOSIGNAL) != 4)
                return false;
        char back[4];
        return read_exact(fd, back, 4) == 0 && !memcmp(back, ping, 4);
}

/* ---- The SSRF table ---- */

#define CASE(t, st, v6, says) {t, st, v6, says}
#define OK(t) CASE(t, 200, false, NULL)
#define OK6(t) CASE(t, 200, true, NULL)
#define RESOLVES(t) CASE(t, 403, false, "the name resolves to a")
#define UNREACHABLE(t) CASE(t, 502, false, NULL)
#define LITERAL(t) CASE(t, 403, false, "an IP address, not a host name")
#define INTERNAL(t) CASE(t, 403, false, "an internal name")
#define UNAPPROVED(t) CASE(t, 403, false, "not approved for the organism")
#define PORT(t) CASE(t, 403, false, "only port 443")
#define METHOD(t) CASE(t, 405, false, "only CONNECT")
#define MALFORMED(t) CASE(t, 400, false, NULL)

static const struct ssrf_case {
        const char *line; /* a CONNECT target, or a whole request line */
        int status;
        bool v6;          /* needs the IPv6 addresses */
        const char *says; /* in the answer's reason, or NULL */
} ssrf[] = {
        /* Allowed: public answers, spellings of an approved name. */
        OK("api.public.net:443"),
        OK("api.public.net.:443"),
        OK("API.Public.NET:443"),
        OK6("v6.ssrf.net:443"),
        OK("dual.ssrf.net:443"),
        OK("fallback.ssrf.net:443"), /* the first checked address refuses; the second is dialed */
        OK("xn--bcher-kva.net:443"),
        OK("a.wild.net:443"),
        OK("a.b.wild.net:443"),
        OK("flip.ssrf.net:443"), /* resolved once: the later private answer is never seen */
        /* The name resolves somewhere not public. */
        RESOLVES("loopback.ssrf.net:443"),
        RESOLVES("loopback2.ssrf.net:443"),
        RESOLVES("private10.ssrf.net:443"),
        RESOLVES("private172.ssrf.net:443"),
        RESOLVES("private192.ssrf.net:443"),
        RESOLVES("metadata.ssrf.net:443"),
        RESOLVES("cgnat.ssrf.net:443"),
        RESOLVES("zero.ssrf.net:443"),
        RESOLVES("thisnet.ssrf.net:443"),
        RESOLVES("ietf.ssrf.net:443"),
        RESOLVES("doc.ssrf.net:443"),
        RESOLVES("doc2.ssrf.net:443"),
        RESOLVES("doc3.ssrf.net:443"),
        RESOLVES("bench.ssrf.net:443"),
        RESOLVES("mcast.ssrf.net:443"),
        RESOLVES("reserved.ssrf.net:443"),
        RESOLVES("bcast.ssrf.net:443"),
        RESOLVES("relay.ssrf.net:443"),
        RESOLVES("lo6.ssrf.net:443"),
        RESOLVES("unspec6.ssrf.net:443"),
        RESOLVES("ll6.ssrf.net:443"),
        RESOLVES("ula.ssrf.net:443"),
        RESOLVES("ula2.ssrf.net:443"),
        RESOLVES("site.ssrf.net:443"),
        RESOLVES("mcast6.ssrf.net:443"),
        RESOLVES("doc6.ssrf.net:443"),
        RESOLVES("doc6b.ssrf.net:443"),
        RESOLVES("mapped.ssrf.net:443"),
        RESOLVES("mapped10.ssrf.net:443"),
        RESOLVES("mappedmeta.ssrf.net:443"),
        RESOLVES("compat.ssrf.net:443"),
        RESOLVES("nat64.ssrf.net:443"),
        RESOLVES("nat64meta.ssrf.net:443"),
        RESOLVES("nat64local.ssrf.net:443"),
        RESOLVES("sixtofour.ssrf.net:443"),
        RESOLVES("sixtofourmeta.ssrf.net:443"),
        RESOLVES("teredo.ssrf.net:443"),
        RESOLVES("bench6.ssrf.net:443"),
        RESOLVES("discard6.ssrf.net:443"),
        RESOLVES("srv6.ssrf.net:443"),
        RESOLVES("nonglobal6.ssrf.net:443"),
        RESOLVES("mix.ssrf.net:443"),
        RESOLVES("mix2.ssrf.net:443"),
        RESOLVES("mix6.ssrf.net:443"),
        RESOLVES("mixlate.ssrf.net:443"),
        RESOLVES("flop.ssrf.net:443"),
        RESOLVES("127.0.0.1.nip.io:443"),
        /* No answer, or nobody there. */
        UNREACHABLE("nxdomain.ssrf.net:443"),
        UNREACHABLE("empty.ssrf.net:443"),
        UNREACHABLE("closed.ssrf.net:443"),
        /* IP literals in every spelling, never resolved. */
        LITERAL("127.0.0.1:443"),
        LITERAL("127.1:443"),
        LITERAL("127.0.1:443"),
        LITERAL("0177.0.0.1:443"),
        LITERAL("0x7f.0.0.1:443"),
        LITERAL("0x7F.1:443"),
        LITERAL("0x7f000001:443"),
        LITERAL("2130706433:443"),
        LITERAL("017700000001:443"),
        LITERAL("127.0.0.1.:443"),
        LITERAL("0.0.0.0:443"),
        LITERAL("169.254.169.254:443"),
        LITERAL("93.184.215.14:443"), /* public, and still an address, not a name */
        LITERAL("1.2.3.256:443"),
        LITERAL("[::1]:443"),
        LITERAL("[::ffff:127.0.0.1]:443"),
        LITERAL("[::ffff:7f00:1]:443"),
        LITERAL("[fe80::1%25eth0]:443"),
        LITERAL("[fe80::1%eth0]:443"),
        LITERAL("[2606:4700::1111]:443"),
        LITERAL("::1:443"),
        /* Internal names, whatever they resolve to. */
        INTERNAL("localhost:443"),
        INTERNAL("LOCALHOST.:443"),
        INTERNAL("foo.localhost:443"),
        INTERNAL("metadata.google.internal:443"),
        INTERNAL("printer.local:443"),
        INTERNAL("router.lan:443"),
        INTERNAL("x.home.arpa:443"),
        INTERNAL("a.test:443"),
        INTERNAL("intranet:443"),
        /* Not approved. */
        UNAPPROVED("wild.net:443"), /* "*.wild.net" is for subdomains only */
        UNAPPROVED("evilwild.net:443"),
        UNAPPROVED("other.net:443"),
        /* Ports and methods. */
        PORT("api.public.net:80"),
        PORT("api.public.net:8443"),
        PORT("api.public.net:22"),
        MALFORMED("api.public.net"),
        MALFORMED("api.public.net:0443"),
        METHOD("GET http://api.public.net/ HTTP/1.1"),
        METHOD("POST http://api.public.net/ HTTP/1.1"),
        MALFORMED("CONNECT api.public.net:443 HTTP/2.0"),
        /* Malformed targets. */
        MALFORMED("user@api.public.net:443"),
        MALFORMED("api_public.net:443"),
        MALFORMED("b\xc3\xbc" "cher.net:443"),
        MALFORMED("api..public.net:443"),
        MALFORMED("-api.public.net:443"),
        MALFORMED("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.public.net:443"),
        MALFORMED("api.public.net:443/x"),
};

static void test_ssrf_table(void **state) {
        require_net();
        assert_true(ARRAY_SIZE(ssrf) >= 60);
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        const char *grants[] = {"api.public.net", "*.ssrf.net", "xn--bcher-kva.net", "*.wild.net", "*.nip.io"};
        for (size_t i = 0; i < ARRAY_SIZE(grants); i++)
                assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, grants[i]), 0);
        int unknown_before = dns_state.unknown;
        size_t ran = 0;
        for (size_t i = 0; i < ARRAY_SIZE(ssrf); i++) {
                if (ssrf[i].v6 && !testnet_v6)
                        continue;
                char answer[2048];
                int fd = -1;
                int status = ask(p.port, ssrf[i].line, &fd, answer, sizeof answer);
                if (status != ssrf[i].status || (ssrf[i].says && !strstr(answer, ssrf[i].says)))
                        fail_msg("%s: %d, expected %d (%s): %s", ssrf[i].line, status, ssrf[i].status,
                                 ssrf[i].says ? ssrf[i].says : "-", answer);
                if (status == 200) {
                        /* The tunnel reached the echo server on the public address. */
                        char host[300];
                        snprintf(host, sizeof host, "%.*s", (int)strcspn(ssrf[i].line, ":"), ssrf[i].line);
                        size_t len = tlshello_build(&(struct tlshello){.sni = host}, hello_bytes, sizeof hello_bytes);
                        send_all(fd, hello_bytes, len);
                        uint8_t back[1024];
                        if (read_exact(fd, back, len) < 0 || memcmp(back, hello_bytes, len))
                                fail_msg("%s: no echo through the tunnel", ssrf[i].line);
                }
                close(fd);
                ran++;
        }
        print_message("# %zu cases through the proxy\n", ran);
        /* Each name was looked up once (flip's later, private answer never
         * asked for); IP literals and internal names never reached it. */
        assert_int_equal(dns_calls("flip.ssrf.net"), 1);
        assert_int_equal(dns_calls("flop.ssrf.net"), 1);
        assert_int_equal(dns_calls("localhost"), -1);
        assert_int_equal(dns_state.unknown, unknown_before);
        (void)server_settle(0);
        pthread_mutex_lock(&srv.lock);
        int internal = srv.internal_accepted;
        pthread_mutex_unlock(&srv.lock);
        assert_int_equal(internal, 0);
        proxy_stop(&p);
}

/* ---- The ClientHello ---- */

/* Opens a tunnel to api.public.net, sends raw bytes, and says whether the
 * tunnel then carried them (true) or was closed with nothing sent on. */
static bool hello_passes(struct proxy *p, const uint8_t *bytes, size_t len, bool pipelined) {
        size_t before = server_settle(0);
        int expect = srv_accepted() + 1; /* the tunnel's connection to the host */
        int fd;
        if (pipelined) {
                /* The ClientHello in the same write as the request. */
                fd = connect_to("127.0.0.1", p->port);
                assert_true(fd >= 0);
                static const char req[] = "CONNECT api.public.net:443 HTTP/1.1\r\nHost: api.public.net:443\r\n\r\n";
                uint8_t both[EGRESS_HELLO_RAW_MAX * 2];
                memcpy(both, req, sizeof req - 1);
                memcpy(both + sizeof req - 1, bytes, len);
                (void)try_send_all(fd, both, sizeof req - 1 + len);
                static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                char head[sizeof ok];
                assert_int_equal(read_exact(fd, head, sizeof ok - 1), 0);
                assert_memory_equal(head, ok, sizeof ok - 1);
        } else {
                assert_int_equal(ask(p->port, "api.public.net:443", &fd, NULL, 0), 200);
                (void)try_send_all(fd, bytes, len);
        }
        static uint8_t back[EGRESS_HELLO_RAW_MAX * 2];
        bool passed = read_exact(fd, back, len) == 0 && !memcmp(back, bytes, len) && echoes(fd);
        if (!passed)
                assert_true(closes(fd));
        close(fd);
        size_t after = server_settle(expect);
        if (!passed)
                assert_int_equal(after, before); /* not one byte reached the host */
        return passed;
}

static bool hello_case(struct proxy *p, const struct tlshello *o) {
        size_t len = tlshello_build(o, hello_bytes, sizeof hello_bytes);
        assert_true(len > 0 && len <= sizeof hello_bytes);
        return hello_passes(p, hello_bytes, len, false);
}

static const char *last_refusal(struct egress *e) {
        struct egress_refusal *k = NULL;
        size_t n = 0;
        assert_int_equal(egress_refusals(e, &k, &n), 0);
        static char why[256];
        snprintf(why, sizeof why, "%s", n ? k[0].reason : "");
        free(k);
        return why;
}

static void test_hello_checks(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        assert_true(hello_case(&p, &(struct tlshello){.sni = "api.public.net"}));
        assert_true(hello_case(&p, &(struct tlshello){.sni = "API.public.net"}));
        assert_true(hello_case(&p, &(struct tlshello){.sni = "api.public.net", .record_max = 7}));
        assert_true(hello_case(&p, &(struct tlshello){.sni = "api.public.net", .record_max = 1}));
        assert_true(hello_case(&p, &(struct tlshello){.sni = "api.public.net", .pad = 12000, .record_max = 3000}));
        size_t len = tlshello_build(&(struct tlshello){.sni = "api.public.net"}, hello_bytes, sizeof hello_bytes);
        assert_true(hello_passes(&p, hello_bytes, len, true));
        /* Refused: the tunnel closes and the host gets nothing. */
        assert_false(hello_case(&p, &(struct tlshello){.sni = "other.public.net"}));
        assert_string_equal(last_refusal(p.e), "the TLS server name (SNI) is not the requested host");
        assert_false(hello_case(&p, &(struct tlshello){.sni = "other.public.net", .record_max = 5}));
        assert_false(hello_case(&p, &(struct tlshello){.sni = "api.public.net.evil.net"}));
        assert_false(hello_case(&p, &(struct tlshello){.sni = NULL}));
        assert_string_equal(last_refusal(p.e), "no server name (SNI)");
        assert_false(hello_case(&p, &(struct tlshello){.sni = "93.184.215.14"}));
        assert_false(hello_case(&p, &(struct tlshello){.sni = "api.public.net", .sni2 = "other.public.net"}));
        assert_false(hello_case(&p, &(struct tlshello){.sni = "api.public.net", .pad = 20000}));
        assert_string_equal(last_refusal(p.e), "the ClientHello is too large");
        assert_false(hello_case(&p, &(struct tlshello){.sni = "api.public.net", .pad = 3000, .record_max = 1}));
        static const char plain[] = "GET / HTTP/1.1\r\nHost: api.public.net\r\n\r\n";
        assert_false(hello_passes(&p, (const uint8_t *)plain, strlen(plain), false));
        proxy_stop(&p);
}

/* A ClientHello that does not complete in time ends the tunnel. */
static void test_hello_slow(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        assert_int_equal(egress_set_timeouts(p.e, &(struct egress_timeouts){.hello_ms = 300}), 0);
        size_t before = server_settle(0);
        int expect = srv_accepted() + 1;
        int fd;
        assert_int_equal(ask(p.port, "api.public.net:443", &fd, NULL, 0), 200);
        size_t len = tlshello_build(&(struct tlshello){.sni = "api.public.net"}, hello_bytes, sizeof hello_bytes);
        send_all(fd, hello_bytes, len / 2);
        assert_true(closes(fd));
        close(fd);
        assert_int_equal(server_settle(expect), before);
        assert_string_equal(last_refusal(p.e), "no complete TLS ClientHello in time");
        proxy_stop(&p);
}

/* A real TLS client through the tunnel to a TLS server: the handshake
 * completes with the server's certificate and bytes flow both ways; with
 * another server name the proxy ends it before the server hears anything. */
static int tls_through(int port, const char *target, const char *sni, char *out, size_t out_max) {
        int fd;
        if (ask(port, target, &fd, NULL, 0) != 200)
                return -1;
        struct timeval tv = {.tv_sec = WAIT_MS / 1000};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        SSL *s = SSL_new(ctx);
        SSL_set_fd(s, fd);
        SSL_set_tlsext_host_name(s, sni);
        int r = -1;
        if (SSL_connect(s) == 1) {
                X509 *peer = SSL_get1_peer_certificate(s);
                if (peer && X509_cmp(peer, tls.cert) == 0 && SSL_write(s, "ping", 4) == 4) {
                        int n = SSL_read(s, out, (int)out_max - 1);
                        if (n > 0) {
                                out[n] = 0;
                                r = 0;
                        }
                }
                X509_free(peer);
        }
        SSL_free(s);
        SSL_CTX_free(ctx);
        close(fd);
        return r;
}

static void test_tls_session(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "tls.public.net"), 0);
        char out[64] = "";
        int before = __atomic_load_n(&tls.sessions, __ATOMIC_SEQ_CST);
        assert_int_equal(tls_through(p.port, "tls.public.net:443", "tls.public.net", out, sizeof out), 0);
        assert_string_equal(out, "pong:ping");
        assert_int_equal(__atomic_load_n(&tls.sessions, __ATOMIC_SEQ_CST), before + 1);
        /* Same tunnel target, another name inside TLS (domain fronting). */
        assert_int_equal(tls_through(p.port, "tls.public.net:443", "other.public.net", out, sizeof out), -1);
        assert_int_equal(__atomic_load_n(&tls.sessions, __ATOMIC_SEQ_CST), before + 1);
        proxy_stop(&p);
}

/* ---- Limits ---- */

static void test_max_tunnels(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        int fds[EGRESS_MAX_TUNNELS];
        for (int i = 0; i < EGRESS_MAX_TUNNELS; i++)
                fds[i] = tunnel_to(p.port, "api.public.net:443");
        char answer[1024];
        assert_int_equal(ask(p.port, "api.public.net:443", NULL, answer, sizeof answer), 503);
        assert_non_null(strstr(answer, "too many tunnels"));
        for (int i = 0; i < EGRESS_MAX_TUNNELS; i++)
                assert_true(echoes(fds[i]));
        /* One ends; a place comes free (once its thread noticed). */
        close(fds[0]);
        int64_t deadline = now_ms() + WAIT_MS;
        int status, fd = -1;
        while ((status = ask(p.port, "api.public.net:443", &fd, NULL, 0)) == 503 && now_ms() < deadline)
                close(fd);
        assert_int_equal(status, 200);
        close(fd);
        for (int i = 1; i < EGRESS_MAX_TUNNELS; i++)
                close(fds[i]);
        proxy_stop(&p);
        (void)server_settle(0);
}

/* Connections that never send their head: EGRESS_MAX_PENDING wait, the
 * next is answered 503 at once. */
static void test_max_pending(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        int fds[EGRESS_MAX_PENDING];
        for (int i = 0; i < EGRESS_MAX_PENDING; i++) {
                fds[i] = connect_to("127.0.0.1", p.port);
                assert_true(fds[i] >= 0);
        }
        int fd = connect_to("127.0.0.1", p.port);
        char answer[256] = "";
        assert_true(fd >= 0);
        ssize_t n = 0;
        if (fd_wait_readable(fd, now_ms() + WAIT_MS) == 0)
                n = recv(fd, answer, sizeof answer - 1, 0);
        assert_true(n > 0);
        answer[n] = 0;
        assert_non_null(strstr(answer, "HTTP/1.1 503 "));
        close(fd);
        /* The waiting ones are still served. */
        static const char req[] = "CONNECT api.public.net:443 HTTP/1.1\r\n\r\n";
        send_all(fds[0], req, strlen(req));
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        char head[sizeof ok];
        assert_int_equal(read_exact(fds[0], head, sizeof ok - 1), 0);
        assert_memory_equal(head, ok, sizeof ok - 1);
        for (int i = 0; i < EGRESS_MAX_PENDING; i++)
                close(fds[i]);
        proxy_stop(&p);
        (void)server_settle(0);
}

static void test_idle_timeout(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        assert_int_equal(egress_set_timeouts(p.e, &(struct egress_timeouts){.idle_ms = 1000}), 0);
        int fd = tunnel_to(p.port, "api.public.net:443");
        assert_true(echoes(fd));
        assert_true(closes(fd)); /* nothing either way: it ends */
        close(fd);
        proxy_stop(&p);
        (void)server_settle(0);
}

static void test_request_timeout(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_set_timeouts(p.e, &(struct egress_timeouts){.request_ms = 200}), 0);
        int fd = connect_to("127.0.0.1", p.port);
        assert_true(fd >= 0);
        static const char part[] = "CONNECT api.public.net:443 HTTP/1.1\r\n";
        send_all(fd, part, strlen(part));
        char answer[512];
        assert_int_equal(read_exact(fd, answer, 12), 0);
        assert_memory_equal(answer, "HTTP/1.1 408", 12);
        assert_true(closes(fd));
        close(fd);
        /* An oversized head: 400 as soon as the bound is passed (with the
         * default time for the head, whatever the machine's load). */
        struct egress_timeouts t = {.request_ms = EGRESS_REQUEST_TIMEOUT_MS};
        assert_int_equal(egress_set_timeouts(p.e, &t), 0);
        char big[EGRESS_REQUEST_MAX + 64];
        memset(big, 'a', sizeof big);
        memcpy(big, "CONNECT api.public.net:443 HTTP/1.1\r\nX: ", 40);
        fd = connect_to("127.0.0.1", p.port);
        send_all(fd, big, sizeof big);
        assert_int_equal(read_exact(fd, answer, 12), 0);
        assert_memory_equal(answer, "HTTP/1.1 400", 12);
        close(fd);
        proxy_stop(&p);
}

/* A head sent a byte at a time is judged as a whole: good, or bad as soon
 * as a bad byte arrives. */
static void test_request_bytewise(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        static const char *const heads[] = {
                "CONNECT api.public.net:443 HTTP/1.1\r\nHost: api.public.net:443\r\nX: y\r\n\r\n",
                "CONNECT api.public.net:443 HTTP/1.1\r\nHost: x\ny: z",
        };
        static const char *const want[] = {"HTTP/1.1 200", "HTTP/1.1 400"};
        for (size_t k = 0; k < ARRAY_SIZE(heads); k++) {
                int fd = connect_to("127.0.0.1", p.port);
                int one = 1;
                assert_true(fd >= 0);
                (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                for (const char *b = heads[k]; *b; b++)
                        if (try_send_all(fd, b, 1) < 0)
                                break;
                char answer[12];
                assert_int_equal(read_exact(fd, answer, sizeof answer), 0);
                assert_memory_equal(answer, want[k], sizeof answer);
                close(fd);
        }
        proxy_stop(&p);
        (void)server_settle(0);
}

static void test_connect_timeout(void **state) {
        require_net();
        /* A host whose accept queue is full drops further SYNs. */
        int l = listen_on(TESTNET_V4_C, 443, 0);
        assert_true(l >= 0);
        int filler = connect_to(TESTNET_V4_C, 443);
        assert_true(filler >= 0);
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "slow.public.net"), 0);
        assert_int_equal(egress_set_timeouts(p.e, &(struct egress_timeouts){.connect_ms = 300}), 0);
        char answer[1024];
        assert_int_equal(ask(p.port, "slow.public.net:443", NULL, answer, sizeof answer), 504);
        assert_non_null(strstr(answer, "did not accept a connection in time"));
        proxy_stop(&p);
        close(filler);
        close(l);
}

/* ---- Revocation, registries, doors ---- */

static void test_revoke_midflight(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "*.wild.net"), 0);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "b.wild.net"), 0);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "api.public.net"), 0);
        int a = tunnel_to(p.port, "a.wild.net:443");
        int b = tunnel_to(p.port, "b.wild.net:443");
        int other = tunnel_to(p.port, "api.public.net:443");
        /* A grant for evolutions changes nothing for the organism. */
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_EVOLUTION, "a.wild.net"), 0);
        assert_int_equal(egress_revoke(p.e, EGRESS_SCOPE_ORGANISM, "*.wild.net"), 0);
        assert_true(closes(a));
        assert_true(echoes(b));     /* still granted by name */
        assert_true(echoes(other)); /* never concerned */
        assert_int_equal(ask(p.port, "a.wild.net:443", NULL, NULL, 0), 403);
        assert_int_equal(egress_revoke(p.e, EGRESS_SCOPE_ORGANISM, "b.wild.net"), 0);
        assert_true(closes(b));
        assert_true(echoes(other));
        assert_int_equal(egress_revoke(p.e, EGRESS_SCOPE_ORGANISM, "b.wild.net"), -ENOENT);
        close(a);
        close(b);
        close(other);
        proxy_stop(&p);
        (void)server_settle(0);
}

static void test_policies(void **state) {
        require_net();
        char *regs[] = {"reg.public.net", NULL};
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_BUILD, regs);
        int live_port;
        struct egress_door *live = open_door(p.e, EGRESS_POLICY_LIVE, "live", &live_port);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_EVOLUTION, "evo.public.net"), 0);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "live.public.net"), 0);
        int reg = tunnel_to(p.port, "reg.public.net:443");
        int evo = tunnel_to(p.port, "evo.public.net:443");
        assert_int_equal(ask(p.port, "live.public.net:443", NULL, NULL, 0), 403);
        int lv = tunnel_to(live_port, "live.public.net:443");
        assert_int_equal(ask(live_port, "reg.public.net:443", NULL, NULL, 0), 403);
        assert_int_equal(ask(live_port, "evo.public.net:443", NULL, NULL, 0), 403);
        /* The registries change: the tunnel to the one dropped ends. */
        char *none[] = {NULL};
        assert_int_equal(egress_set_registries(p.e, none), 0);
        assert_true(closes(reg));
        assert_true(echoes(evo));
        assert_true(echoes(lv));
        /* Closing a door ends its tunnels, not the other door's. */
        egress_door_close(p.door);
        p.door = NULL;
        assert_true(closes(evo));
        assert_true(echoes(lv));
        errno = 0;
        assert_int_equal(connect_to("127.0.0.1", p.port), -1);
        assert_int_equal(errno, ECONNREFUSED);
        /* Freeing the proxy ends the rest. */
        egress_free(p.e);
        assert_true(closes(lv));
        close(reg);
        close(evo);
        close(lv);
        (void)live;
        (void)server_settle(0);
}

/* ---- Refusals: kept (hosts only as names) and logged once ---- */

static void test_refusals(void **state) {
        require_net();
        char dir[] = "/tmp/itest-egress.XXXXXX";
        assert_non_null(mkdtemp(dir));
        char log_path[64];
        snprintf(log_path, sizeof log_path, "%s/log", dir);
        assert_int_equal(log_open(log_path, 1 << 20, 1), 0);
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        for (int i = 0; i < 3; i++)
                assert_int_equal(ask(p.port, "logonce.public.net:443", NULL, NULL, 0), 403);
        assert_int_equal(ask(p.port, "evil<script>.net:443", NULL, NULL, 0), 400);
        assert_int_equal(ask(p.port, "127.0.0.1:443", NULL, NULL, 0), 403);
        struct egress_refusal *k = NULL;
        size_t n = 0;
        assert_int_equal(egress_refusals(p.e, &k, &n), 0);
        assert_int_equal(n, 5);
        assert_string_equal(k[0].host, ""); /* an address is not a name */
        assert_int_equal(k[0].port, 443);
        assert_string_equal(k[0].reason, "an IP address, not a host name");
        assert_string_equal(k[1].host, ""); /* never the client's bytes */
        assert_string_equal(k[2].host, "logonce.public.net");
        assert_string_equal(k[2].door, "live");
        assert_string_equal(k[2].reason, "not approved for the organism");
        assert_true(k[2].at_ms > 0 && k[0].at_ms >= k[2].at_ms);
        free(k);
        log_close();
        _cleanup_free_ char *text = NULL;
        assert_int_equal(read_file(log_path, 1 << 20, &text, NULL), 0);
        int lines = 0;
        for (const char *s = text; (s = strstr(s, "egress: refused logonce.public.net:443")); s++)
                lines++;
        assert_int_equal(lines, 1);
        assert_null(strstr(text, "<script>"));
        /* The newest EGRESS_REFUSALS_KEPT are kept. */
        for (int i = 0; i < EGRESS_REFUSALS_KEPT + 5; i++)
                assert_int_equal(ask(p.port, "other.net:443", NULL, NULL, 0), 403);
        assert_int_equal(egress_refusals(p.e, &k, &n), 0);
        assert_int_equal(n, EGRESS_REFUSALS_KEPT);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(k[i].host, "other.net");
        free(k);
        proxy_stop(&p);
        rm_rf(dir);
}

/* The default resolver (getaddrinfo on a connection thread's stack), for
 * a name under a top-level domain that does not exist: no nameserver is
 * reachable from the test's namespace, and one reached from outside it
 * (nscd, systemd-resolved) says there is no such name: a 502 either way.
 * A resolver's own timeouts may take a while. */
static void test_default_resolver(void **state) {
        require_net();
        struct proxy p;
        proxy_start(&p, EGRESS_POLICY_LIVE, NULL);
        egress_set_resolver(p.e, NULL, NULL);
        assert_int_equal(egress_grant(p.e, EGRESS_SCOPE_ORGANISM, "nothing.no-such-tld-seed-egress"), 0);
        ask_wait_ms = 6 * WAIT_MS;
        int status = ask(p.port, "nothing.no-such-tld-seed-egress:443", NULL, NULL, 0);
        ask_wait_ms = WAIT_MS;
        assert_int_equal(status, 502);
        proxy_stop(&p);
}

/* Internal services: loopback, and private addresses put on lo. */
static const char *const internal[] = {"127.0.0.1", "::1", "10.1.2.3", "192.168.1.1", "169.254.169.254",
                                       "100.64.0.1", "fd00::1"};

static int setup(void **state) {
        (void)state;
        if (no_net)
                return 0;
        pthread_condattr_t ca;
        if (pipe2(srv.wake, O_CLOEXEC) < 0 || pthread_condattr_init(&ca) != 0 ||
            pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&srv.changed, &ca) != 0)
                return -1;
        server_add(TESTNET_V4, false);
        if (testnet_v6)
                server_add(TESTNET_V6, false);
        for (size_t i = 0; i < ARRAY_SIZE(internal); i++)
                if (!strchr(internal[i], ':') || testnet_v6)
                        server_add(internal[i], true);
        if (pthread_create(&srv.thread, NULL, server_main, NULL) != 0)
                return -1;
        return tls_start();
}

static int teardown(void **state) {
        (void)state;
        if (no_net)
                return 0;
        (void)!write(srv.wake[1], "x", 1);
        pthread_join(srv.thread, NULL);
        (void)!write(tls.wake[1], "x", 1);
        pthread_join(tls.thread, NULL);
        return 0;
}

int main(void) {
        /* First, while single-threaded: the test's own network. */
        if (testnet_enter(&no_net) < 0 && !no_net)
                no_net = strdup("cannot make the test's private network");
        for (size_t i = 2; !no_net && i < ARRAY_SIZE(internal); i++) /* while we may */
                if ((!strchr(internal[i], ':') || testnet_v6) && testnet_add(internal[i]) < 0)
                        no_net = strdup("cannot put private addresses on the test's lo");
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ssrf_table),
                cmocka_unit_test(test_hello_checks),
                cmocka_unit_test(test_hello_slow),
                cmocka_unit_test(test_tls_session),
                cmocka_unit_test(test_max_tunnels),
                cmocka_unit_test(test_max_pending),
                cmocka_unit_test(test_idle_timeout),
                cmocka_unit_test(test_request_timeout),
                cmocka_unit_test(test_request_bytewise),
                cmocka_unit_test(test_connect_timeout),
                cmocka_unit_test(test_revoke_midflight),
                cmocka_unit_test(test_policies),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_default_resolver),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
