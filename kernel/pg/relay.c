/* relay.c — how sandboxes reach an external PostgreSQL. They have no
 * network (only lo), but they see .seed/run as /run/postgresql: the kernel
 * listens there on .s.PGSQL.5432, as a private server would, and carries
 * each connection to the one server database.url names, and nowhere else.
 *
 * Per connection: the client's startup packet is read (SSLRequest and
 * GSSENCRequest are answered 'N': the Unix socket needs no encryption) and
 * checked — protocol 3, no replication, a user that is one of this Seed's
 * roles (organism, evolver, reader) and a database of this Seed's that is
 * not the kernel's; anything else is answered with PostgreSQL's own FATAL
 * error and closed. Then the relay dials the server (TLS to it when the URL
 * asks for it, as libpq would), sends the startup packet on and copies
 * bytes both ways. A CancelRequest is carried as it is (the server checks
 * its key). At most PG_RELAY_MAX connections; the startup packet must come
 * within PG_RELAY_STARTUP_MS. */
#include "pg/internal.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/tls.h"
#include "pg/wire.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define PG_RELAY_MAX 80              /* the roles' CONNECTION LIMITs (70) and cancels */
#define PG_RELAY_STARTUP_MS 10000
#define PG_RELAY_CONNECT_MS 10000
#define PG_RELAY_STOP_MS 5000
#define PG_RELAY_WARN_MS 60000
#define PG_RELAY_BUF 16384

struct relay_conn {
        struct pg_relay *relay;
        int client, server; /* -1 when not open */
        struct tls *tls;    /* over server, or NULL */
        bool used;
};

struct pg_relay {
        int listen_fd;
        int stop[2];              /* readable once the relay stops */
        pthread_t acceptor;
        pthread_mutex_t lock;
        pthread_cond_t idle;
        unsigned active;
        struct relay_conn conns[PG_RELAY_MAX];
        char *socket_path;
        /* where: a host name or address (or a Unix socket directory) and port */
        char *host, *port;
        enum tls_mode tls_mode;
        char *tls_rootcert;       /* NULL: the system's store */
        /* who: this Seed's roles, and its databases' prefix */
        char *users[ROLE_COUNT - 1];
        char *db_prefix, *kernel_db, *copy_prefix;
        struct pg_wire_who who;   /* the above, as wire.c reads them */
        _Atomic int64_t warned_ms; /* when an unreachable server was last logged */
};

static const char *server_option(const struct pg *pg, const char *key) {
        for (size_t k = 0; pg->server[k] && pg->server[k + 1]; k += 2)
                if (streq(pg->server[k], key))
                        return pg->server[k + 1];
        return NULL;
}

static uint32_t get32(const unsigned char *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(unsigned char *p, uint32_t v) {
        p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static int write_all(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len) {
                ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EPIPE;
                p += k, len -= (size_t)k;
        }
        return 0;
}

/* Exactly len bytes before the deadline. */
static int read_exact(int fd, void *buf, size_t len, int64_t deadline) {
        char *p = buf;
        while (len) {
                int r = fd_wait_readable(fd, deadline);
                if (r < 0)
                        return r;
                ssize_t k = recv(fd, p, len, 0);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -ECONNRESET;
                p += k, len -= (size_t)k;
        }
        return 0;
}

/* PostgreSQL's ErrorResponse, so the client (libpq, node-postgres…) shows
 * why: FATAL, SQLSTATE code, message. */
static void refuse(int fd, const char *code, const char *msg) {
        unsigned char out[512];
        size_t n = 5;
        n += (size_t)snprintf((char *)out + n, sizeof out - n - 2, "SFATAL%cVFATAL%cC%s%cM%s%c", 0, 0, code, 0, msg, 0);
        if (n > sizeof out - 1)
                n = sizeof out - 1;
        out[n++] = 0;
        out[0] = 'E';
        put32(out + 1, (uint32_t)(n - 1));
        (void)write_all(fd, out, n);
}

/* The client's startup packet (after answering SSL or GSS encryption
 * requests with 'N'), at most PG_WIRE_STARTUP_MAX bytes. Caller frees. */
static int read_startup(int fd, unsigned char **ret, size_t *ret_len) {
        int64_t deadline = now_ms() + PG_RELAY_STARTUP_MS;
        for (int round = 0; round < 3; round++) {
                unsigned char head[8];
                int r = read_exact(fd, head, sizeof head, deadline);
                if (r < 0)
                        return r;
                uint32_t len = get32(head), code = get32(head + 4);
                if (len < 8 || len > PG_WIRE_STARTUP_MAX)
                        return -EBADMSG;
                if ((code == PG_WIRE_CODE_SSL || code == PG_WIRE_CODE_GSSENC) && len == 8) {
                        if ((r = write_all(fd, "N", 1)) < 0)
                                return r;
                        continue;
                }
                unsigned char *p = malloc(len);
                if (!p)
                        return -ENOMEM;
                memcpy(p, head, 8);
                if ((r = read_exact(fd, p + 8, len - 8, deadline)) < 0) {
                        free(p);
                        return r;
                }
                *ret = p;
                *ret_len = len;
                return 0;
        }
        return -EBADMSG;
}

static int dial_unix(const char *dir, const char *port) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/.s.PGSQL.%s", dir, port);
        if (n < 0 || (size_t)n >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

/* A TCP connection to host:port, each address tried in turn, each within
 * PG_RELAY_CONNECT_MS. */
static int dial(const struct pg_relay *rl) {
        if (rl->host[0] == '/')
                return dial_unix(rl->host, rl->port);
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
        int g = getaddrinfo(rl->host, rl->port, &hints, &res);
        if (g != 0)
                return g == EAI_SYSTEM ? -errno : -EHOSTUNREACH;
        int r = -ECONNREFUSED;
        for (struct addrinfo *a = res; a; a = a->ai_next) {
                int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
                if (fd < 0) {
                        r = -errno;
                        continue;
                }
                struct timeval tv = {PG_RELAY_CONNECT_MS / 1000, 0};
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
                        struct timeval none = {0, 0};
                        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
                        int one = 1;
                        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                        freeaddrinfo(res);
                        return fd;
                }
                r = -errno;
                close(fd);
        }
        freeaddrinfo(res);
        return r;
}

/* The server side: SSLRequest, then TLS when the mode wants it (libpq's
 * sslmode: disable/allow plain, prefer TLS if offered, require and
 * verify-* TLS or nothing). */
static int server_open(struct relay_conn *c) {
        const struct pg_relay *rl = c->relay;
        int fd = dial(rl);
        if (fd < 0)
                return fd;
        c->server = fd;
        if (rl->tls_mode == TLS_MODE_OFF || rl->host[0] == '/')
                return 0;
        unsigned char req[8];
        put32(req, 8);
        put32(req + 4, PG_WIRE_CODE_SSL);
        char answer = 0;
        int r = write_all(fd, req, sizeof req);
        if (r >= 0)
                r = read_exact(fd, &answer, 1, now_ms() + PG_RELAY_CONNECT_MS);
        if (r < 0)
                return r;
        if (answer == 'N')
                return rl->tls_mode == TLS_MODE_PREFER ? 0 : -EPROTO;
        if (answer != 'S')
                return -EPROTO;
        return tls_client_start(fd, rl->host, rl->tls_mode, rl->tls_rootcert, &c->tls);
}

static int server_write(struct relay_conn *c, const void *data, size_t len) {
        return c->tls ? tls_write_all(c->tls, data, len) : write_all(c->server, data, len);
}

static ssize_t server_read(struct relay_conn *c, void *buf, size_t len) {
        if (c->tls)
                return tls_read(c->tls, buf, len);
        ssize_t k;
        while ((k = recv(c->server, buf, len, 0)) < 0 && errno == EINTR)
                ;
        return k < 0 ? -errno : k;
}

static int server_read_exact(struct relay_conn *c, void *buf, size_t len) {
        char *p = buf;
        while (len) {
                ssize_t k = server_read(c, p, len);
                if (k <= 0)
                        return k < 0 ? (int)k : -ECONNRESET;
                p += k, len -= (size_t)k;
        }
        return 0;
}

/* The server's first answer, carried to the client: any
 * NegotiateProtocolVersion, then the authentication request. Over TLS the
 * server offers SCRAM-SHA-256-PLUS (channel binding to *its* TLS session),
 * which a client on the relay's Unix socket, rightly, takes for a downgrade
 * attack: the relay, which is that TLS session's end, takes it out of the
 * list, and the client uses SCRAM-SHA-256 (the password check itself is
 * still the server's, end to end). */
#define PG_AUTH_MESSAGE_MAX 65536
static int relay_auth_offer(struct relay_conn *c) {
        for (int round = 0; round < 3; round++) {
                unsigned char head[5];
                int r = server_read_exact(c, head, sizeof head);
                if (r < 0)
                        return r;
                uint32_t len = get32(head + 1);
                if (len < 4 || len > PG_AUTH_MESSAGE_MAX)
                        return -EBADMSG;
                _cleanup_free_ unsigned char *msg = malloc(len + 1);
                if (!msg)
                        return -ENOMEM;
                memcpy(msg, head, 5);
                if ((r = server_read_exact(c, msg + 5, len - 4)) < 0)
                        return r;
                size_t n = 0;
                if ((r = pg_wire_drop_scram_plus(msg, len + 1, &n)) < 0)
                        return r;
                if ((r = write_all(c->client, msg, n)) < 0)
                        return r;
                if (head[0] != 'v')
                        return 0;
        }
        return -EBADMSG;
}

/* Bytes both ways until either side ends or the relay stops. */
static void pump(struct relay_conn *c) {
        char buf[PG_RELAY_BUF];
        struct pollfd p[3] = {{.fd = c->client, .events = POLLIN}, {.fd = c->server, .events = POLLIN},
                              {.fd = c->relay->stop[0], .events = POLLIN}};
        for (;;) {
                /* TLS may hold decrypted bytes the socket no longer shows. */
                bool pending = c->tls && tls_pending(c->tls);
                if (!pending && poll(p, 3, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                if (!pending && p[2].revents)
                        return;
                if (pending || p[1].revents) {
                        ssize_t k = server_read(c, buf, sizeof buf);
                        if (k <= 0 || write_all(c->client, buf, (size_t)k) < 0)
                                return;
                }
                if (!pending && p[0].revents) {
                        ssize_t k;
                        while ((k = recv(c->client, buf, sizeof buf, 0)) < 0 && errno == EINTR)
                                ;
                        if (k <= 0 || server_write(c, buf, (size_t)k) < 0)
                                return;
                }
        }
}

static void conn_serve(struct relay_conn *c) {
        _cleanup_free_ unsigned char *pkt = NULL;
        size_t len = 0;
        int r = read_startup(c->client, &pkt, &len);
        if (r < 0)
                return;
        uint32_t code = get32(pkt + 4);
        bool cancel = code == PG_WIRE_CODE_CANCEL && len == 16;
        const char *why = NULL;
        if (!cancel && pg_wire_startup_check(pkt, len, &c->relay->who, &why) < 0) {
                refuse(c->client, "28000", why);
                return;
        }
        if ((r = server_open(c)) < 0) {
                /* A sandbox can knock as often as it likes: said once a minute. */
                int64_t now = now_ms(), last = atomic_load(&c->relay->warned_ms);
                if (now - last >= PG_RELAY_WARN_MS && atomic_compare_exchange_strong(&c->relay->warned_ms, &last, now))
                        log_warn_errno(r, "PostgreSQL relay: cannot reach the external server%s: %m",
                                       r == -EPROTO ? " (TLS failed or did not verify)" : "");
                refuse(c->client, "08006", "the Seed's relay cannot reach the external PostgreSQL");
                return;
        }
        if (server_write(c, pkt, len) < 0 || cancel || relay_auth_offer(c) < 0)
                return;
        pump(c);
}

static void *conn_main(void *arg) {
        struct relay_conn *c = arg;
        struct pg_relay *rl = c->relay;
        conn_serve(c);
        pthread_mutex_lock(&rl->lock);
        tls_free(c->tls);
        c->tls = NULL;
        if (c->server >= 0)
                close(c->server);
        close(c->client);
        c->client = c->server = -1;
        c->used = false;
        if (--rl->active == 0)
                pthread_cond_broadcast(&rl->idle);
        pthread_mutex_unlock(&rl->lock);
        return NULL;
}

static void *accept_main(void *arg) {
        struct pg_relay *rl = arg;
        struct pollfd p[2] = {{.fd = rl->listen_fd, .events = POLLIN}, {.fd = rl->stop[0], .events = POLLIN}};
        bool warned = false;
        for (;;) {
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return NULL;
                }
                if (p[1].revents)
                        return NULL;
                int fd = accept4(rl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                pthread_mutex_lock(&rl->lock);
                struct relay_conn *c = NULL;
                for (size_t i = 0; !c && i < PG_RELAY_MAX; i++)
                        if (!rl->conns[i].used)
                                c = &rl->conns[i];
                if (c) {
                        *c = (struct relay_conn){.relay = rl, .client = fd, .server = -1, .used = true};
                        rl->active++;
                }
                pthread_mutex_unlock(&rl->lock);
                if (!c) {
                        if (!warned)
                                log_warn("PostgreSQL relay: %d connections are open; refusing more", PG_RELAY_MAX);
                        warned = true;
                        refuse(fd, "53300", "too many connections to the Seed's PostgreSQL relay");
                        close(fd);
                        continue;
                }
                warned = false;
                pthread_t t;
                pthread_attr_t attr;
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                pthread_attr_setstacksize(&attr, 256 * 1024);
                int r = pthread_create(&t, &attr, conn_main, c);
                pthread_attr_destroy(&attr);
                if (r != 0) {
                        pthread_mutex_lock(&rl->lock);
                        close(c->client);
                        c->used = false;
                        rl->active--;
                        pthread_mutex_unlock(&rl->lock);
                }
        }
}

static void relay_free(struct pg_relay *rl) {
        if (!rl)
                return;
        if (rl->listen_fd >= 0)
                close(rl->listen_fd);
        if (rl->socket_path)
                (void)unlink(rl->socket_path);
        for (int i = 0; i < 2; i++)
                if (rl->stop[i] >= 0)
                        close(rl->stop[i]);
        pthread_mutex_destroy(&rl->lock);
        pthread_cond_destroy(&rl->idle);
        free(rl->socket_path);
        free(rl->host);
        free(rl->port);
        free(rl->tls_rootcert);
        for (size_t i = 0; i < ARRAY_SIZE(rl->users); i++)
                free(rl->users[i]);
        free(rl->db_prefix);
        free(rl->kernel_db);
        free(rl->copy_prefix);
        free(rl);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pg_relay *, relay_free)

/* Where the URL points, and how securely (libpq's defaults: host from
 * hostaddr or host, else the local socket directory; port 5432; sslmode
 * prefer). */
static int relay_target(struct pg_relay *rl, const struct pg *pg) {
        const char *host = server_option(pg, "hostaddr");
        if (!host)
                host = server_option(pg, "host");
        if (!host)
                host = "/var/run/postgresql";
        const char *port = server_option(pg, "port");
        const char *mode = server_option(pg, "sslmode");
        const char *root = server_option(pg, "sslrootcert");
        int r = tls_mode_parse(mode ? mode : "prefer", &rl->tls_mode);
        if (r < 0)
                return log_error_errno(r, "the external database's sslmode is not one libpq knows");
        if (server_option(pg, "sslcert") || server_option(pg, "sslkey"))
                return log_error_errno(-EOPNOTSUPP, "the external database's URL asks for a client certificate, "
                                                    "which the Seed's relay does not present");
        if (!(rl->host = strdup(host)) || !(rl->port = strdup(port ? port : PG_PORT)) ||
            (root && !streq(root, "system") && !(rl->tls_rootcert = strdup(root))))
                return -ENOMEM;
        /* The name to check the certificate against is host's, even when
         * hostaddr says where to dial. */
        if (server_option(pg, "hostaddr") && server_option(pg, "host") && rl->tls_mode == TLS_MODE_VERIFY_FULL)
                return log_error_errno(-EOPNOTSUPP, "sslmode=verify-full with hostaddr: give host alone");
        return 0;
}

int pg_relay_start(const struct pg *pg, struct pg_relay **ret) {
        _cleanup_(relay_freep) struct pg_relay *rl = calloc(1, sizeof *rl);
        if (!rl)
                return -ENOMEM;
        rl->listen_fd = rl->stop[0] = rl->stop[1] = -1;
        atomic_init(&rl->warned_ms, INT64_MIN / 2);
        pthread_mutex_init(&rl->lock, NULL);
        pthread_cond_init(&rl->idle, NULL);
        int r = relay_target(rl, pg);
        if (r < 0)
                return r;
        for (int i = ROLE_ORGANISM; i < ROLE_COUNT; i++)
                if (!(rl->users[i - 1] = strdup(pg->roles[i])))
                        return -ENOMEM;
        rl->who = (struct pg_wire_who){.users = (const char *const *)rl->users, .n_users = ARRAY_SIZE(rl->users)};
        if (!(rl->db_prefix = strdup(pg->prefix)) || !(rl->kernel_db = strdup(pg->kernel_db)) ||
            xasprintf(&rl->copy_prefix, "%s%s", pg->prefix, PG_LIVE_COPY_PREFIX) < 0 ||
            xasprintf(&rl->socket_path, "%s%s", pg->rundir, PG_SOCKET_NAME) < 0)
                return -ENOMEM;
        rl->who.db_prefix = rl->db_prefix;
        rl->who.copy_prefix = rl->copy_prefix;
        rl->who.kernel_db = rl->kernel_db;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(rl->socket_path) >= sizeof sa.sun_path)
                return -ENAMETOOLONG; /* pg_setup_paths said so already */
        strcpy(sa.sun_path, rl->socket_path);
        if (pipe2(rl->stop, O_CLOEXEC) < 0)
                return -errno;
        rl->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (rl->listen_fd < 0)
                return -errno;
        (void)unlink(rl->socket_path); /* a socket left by a killed kernel, or the private server's */
        if (bind(rl->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(rl->socket_path, 0700) < 0 ||
            listen(rl->listen_fd, 64) < 0)
                return log_error_errno(-errno, "PostgreSQL relay: cannot listen on %s: %m", rl->socket_path);
        if ((r = -pthread_create(&rl->acceptor, NULL, accept_main, rl)) < 0)
                return log_error_errno(r, "PostgreSQL relay: cannot start: %m");
        *ret = TAKE_PTR(rl);
        return 0;
}

void pg_relay_stop(struct pg_relay *rl) {
        if (!rl)
                return;
        (void)write(rl->stop[1], "x", 1);
        pthread_join(rl->acceptor, NULL);
        /* Every connection sees stop[0] readable; one blocked writing to a
         * peer that does not read is cut. */
        pthread_mutex_lock(&rl->lock);
        for (size_t i = 0; i < PG_RELAY_MAX; i++)
                if (rl->conns[i].used) {
                        (void)shutdown(rl->conns[i].client, SHUT_RDWR);
                        if (rl->conns[i].server >= 0)
                                (void)shutdown(rl->conns[i].server, SHUT_RDWR);
                }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += PG_RELAY_STOP_MS / 1000;
        while (rl->active > 0 && pthread_cond_timedwait(&rl->idle, &rl->lock, &until) == 0)
                ;
        bool left = rl->active > 0;
        pthread_mutex_unlock(&rl->lock);
        if (left) {
                log_warn("PostgreSQL relay: %u connection(s) did not end; leaving them", rl->active);
                return; /* their threads still use rl: leak it rather than free it under them */
        }
        relay_free(rl);
}
