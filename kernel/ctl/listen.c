/* listen.c — binding the control plane's port (see listen.h): never the
 * next free one, both loopback families on one port, and the checks on
 * sockets a kernel inherits from its supervisor. */
#include "ctl/listen.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>

#define BACKLOG 128
/* Port 0 only: fresh ports tried when [::1] already has the one 127.0.0.1 got. */
#define PAIR_TRIES 8

static int parse_addr(const char *addr, char **ret_host, unsigned *ret_port) {
        const char *colon;
        _cleanup_free_ char *host = NULL;
        if (strempty(addr))
                return -EINVAL;
        if (addr[0] == '[') {
                const char *end = strchr(addr, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                host = strndup(addr + 1, (size_t)(end - addr - 1));
                colon = end + 1;
        } else {
                colon = strrchr(addr, ':');
                if (!colon)
                        return -EINVAL;
                host = strndup(addr, (size_t)(colon - addr));
        }
        if (!host)
                return -ENOMEM;
        char *end = NULL;
        errno = 0;
        unsigned long port = strtoul(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || port > 65535)
                return -EINVAL;
        *ret_host = TAKE_PTR(host);
        *ret_port = (unsigned)port;
        return 0;
}

bool ctl_listen_is_loopback(const char *host) {
        return host && (streq(host, "127.0.0.1") || streq(host, "::1") || strcasecmp(host, "localhost") == 0);
}

static uint16_t port_of(const struct sockaddr_storage *ss) {
        return ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port
                                               : ((const struct sockaddr_in *)ss)->sin_port);
}

static void set_port(struct sockaddr_storage *ss, uint16_t port) {
        if (ss->ss_family == AF_INET6)
                ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
        else
                ((struct sockaddr_in *)ss)->sin_port = htons(port);
}

static struct sockaddr_storage loopback(int family, uint16_t port) {
        struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
        if (family == AF_INET6)
                ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
        else
                ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        set_port(&ss, port);
        return ss;
}

/* "127.0.0.1:8080" or "[::1]:8080". */
static void addr_str(const struct sockaddr_storage *ss, char out[INET6_ADDRSTRLEN + 8]) {
        char ip[INET6_ADDRSTRLEN] = "?";
        bool v6 = ss->ss_family == AF_INET6;
        const void *a = v6 ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
                           : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
        (void)inet_ntop(ss->ss_family, a, ip, sizeof ip);
        snprintf(out, INET6_ADDRSTRLEN + 8, v6 ? "[%s]:%u" : "%s:%u", ip, port_of(ss));
}

/* One listening socket on ss. Does not log. */
static int bind_one(const struct sockaddr_storage *ss, int *ret_fd, uint16_t *ret_port) {
        _cleanup_close_ int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* SO_REUSEADDR only gets past our own old connections in TIME_WAIT
         * (a listening port stays refused to everyone else). Never
         * SO_REUSEPORT: it would let another socket share the port. */
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0)
                return -errno;
        if (ss->ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0)
                return -errno;
        socklen_t sl = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
        if (bind(fd, (const struct sockaddr *)ss, sl) < 0 || listen(fd, BACKLOG) < 0)
                return -errno;
        struct sockaddr_storage bound;
        socklen_t bl = sizeof bound;
        if (getsockname(fd, (struct sockaddr *)&bound, &bl) < 0)
                return -errno;
        *ret_port = port_of(&bound);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int log_bind_error(int r, const char *where, bool pair) {
        if (r == -EADDRINUSE)
                return log_error_errno(r,
                                       "cannot listen on %s: the port is taken by another program%s. A Seed keeps "
                                       "its port instead of moving to another one: free it, or choose another "
                                       "port with --addr HOST:PORT",
                                       where, pair ? " (on localhost a Seed listens on both 127.0.0.1 and [::1])" : "");
        return log_error_errno(r, "cannot listen on %s: %m", where);
}

/* 127.0.0.1:port and [::1]:port (port 0: one picked for both). */
static int open_loopback(unsigned port, struct ctl_listen *l) {
        char where[INET6_ADDRSTRLEN + 8];
        for (unsigned i = 0; i < (port == 0 ? PAIR_TRIES : 1); i++) {
                struct sockaddr_storage v4 = loopback(AF_INET, (uint16_t)port);
                int fd4 = -1, fd6 = -1;
                uint16_t p = 0, p6 = 0;
                int r = bind_one(&v4, &fd4, &p);
                if (r < 0) {
                        addr_str(&v4, where);
                        return log_bind_error(r, where, true);
                }
                struct sockaddr_storage v6 = loopback(AF_INET6, p);
                r = bind_one(&v6, &fd6, &p6);
                if (r == -EADDRNOTAVAIL || r == -EAFNOSUPPORT) {
                        log_info("this host has no IPv6 loopback: the control plane listens on 127.0.0.1:%u only "
                                 "(no program can listen on [::1] here either)",
                                 p);
                        *l = (struct ctl_listen){.fd = {fd4, -1}, .n = 1, .port = p};
                        return 0;
                }
                if (r == 0) {
                        *l = (struct ctl_listen){.fd = {fd4, fd6}, .n = 2, .port = p};
                        return 0;
                }
                close(fd4);
                if (r == -EADDRINUSE && port == 0)
                        continue; /* someone has [::1] on the port we were given: take another */
                addr_str(&v6, where);
                return log_bind_error(r, where, true);
        }
        return log_error_errno(-EADDRINUSE, "found no port free on both 127.0.0.1 and [::1] in %d tries",
                               PAIR_TRIES);
}

/* Exactly the address given (e.g. 0.0.0.0:8080). */
static int open_exact(const char *addr, const char *host, unsigned port, struct ctl_listen *l) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        int g = getaddrinfo(host, NULL, &hints, &ai);
        if (g != 0)
                return log_error_errno(-EADDRNOTAVAIL, "cannot use '%s' to listen on: %s", host, gai_strerror(g));
        struct sockaddr_storage ss = {0};
        bool ok = ai->ai_addrlen <= sizeof ss && (ai->ai_family == AF_INET || ai->ai_family == AF_INET6);
        if (ok)
                memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
        if (!ok)
                return log_error_errno(-EAFNOSUPPORT, "cannot use '%s' to listen on: not an IP address", host);
        set_port(&ss, (uint16_t)port);
        int fd = -1;
        uint16_t p = 0;
        int r = bind_one(&ss, &fd, &p);
        if (r < 0)
                return log_bind_error(r, addr, false);
        *l = (struct ctl_listen){.fd = {fd, -1}, .n = 1, .port = p};
        return 0;
}

int ctl_listen_open(const char *addr, struct ctl_listen *ret) {
        _cleanup_free_ char *host = NULL;
        unsigned port = 0;
        int r = parse_addr(addr, &host, &port);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return log_error_errno(r, "server.addr '%s' is not HOST:PORT", strempty(addr) ? "" : addr);
        struct ctl_listen l = CTL_LISTEN_INIT;
        r = ctl_listen_is_loopback(host) ? open_loopback(port, &l) : open_exact(addr, host, port, &l);
        if (r < 0)
                return r;
        *ret = l;
        return 0;
}

static int sockopt_int(int fd, int opt, int *ret) {
        int v = 0;
        socklen_t vl = sizeof v;
        if (getsockopt(fd, SOL_SOCKET, opt, &v, &vl) < 0)
                return -errno;
        *ret = v;
        return 0;
}

int ctl_listen_adopt(struct ctl_listen *l, int fd) {
        int type = 0, domain = 0, proto = 0, listening = 0, r;
        if (l->n >= CTL_LISTEN_MAX)
                return -E2BIG;
        if (fd < 0 || fcntl(fd, F_GETFD) < 0)
                return -EBADF;
        if ((r = sockopt_int(fd, SO_TYPE, &type)) < 0 || (r = sockopt_int(fd, SO_DOMAIN, &domain)) < 0 ||
            (r = sockopt_int(fd, SO_PROTOCOL, &proto)) < 0 || (r = sockopt_int(fd, SO_ACCEPTCONN, &listening)) < 0)
                return r;
        if (type != SOCK_STREAM || (domain != AF_INET && domain != AF_INET6) || proto != IPPROTO_TCP || !listening)
                return -EINVAL;
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
                return -errno;
        uint16_t port = port_of(&ss);
        if (ss.ss_family != domain || port == 0 || (l->n > 0 && port != l->port))
                return -EINVAL;
        for (size_t i = 0; i < l->n; i++) {
                int other = 0;
                if (l->fd[i] == fd || (sockopt_int(l->fd[i], SO_DOMAIN, &other) == 0 && other == domain))
                        return -EINVAL; /* one socket per family */
        }
        int fl = fcntl(fd, F_GETFL);
        if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        l->fd[l->n++] = fd;
        l->port = port;
        return 0;
}

void ctl_listen_close(struct ctl_listen *l) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                if (l->fd[i] >= 0)
                        close(l->fd[i]);
        *l = (struct ctl_listen)CTL_LISTEN_INIT;
}
