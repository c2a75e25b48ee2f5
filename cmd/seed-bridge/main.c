/* seed-bridge — runs inside the live organism's sandbox as its entry point:
 *
 *   seed-bridge --listen-fd N --port $PORT -- <cmd...>
 *
 * It starts <cmd> (the organism's server) as its child and copies bytes
 * between connections accepted on fd N and 127.0.0.1:PORT, the app in its
 * private network namespace. The kernel reaches the app only this way. Fd N
 * is a listening Unix socket the kernel bound outside the sandbox and passed
 * in: the sandbox has no writable path to the socket, so nothing inside can
 * replace it. The child does not inherit it. The bridge exits with the
 * child's status when the child exits, so the supervisor sees crashes, and
 * forwards SIGTERM/SIGINT/SIGHUP to the child's process group. One thread,
 * poll(), a cap on concurrent connections, half-close in both directions. If
 * the app is not listening yet, a connection is closed at once. */
#include "base/base.h"
#include "base/log.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* In a sanitizer build (scripts/test's build-asan) the bridge runs inside
 * the organism's sandbox, whose seccomp filter refuses ptrace: LeakSanitizer
 * needs it to stop the process at exit and would fail there, replacing the
 * child's exit status the bridge reports. AddressSanitizer's memory checks
 * stay on; the kernel's own leak checks run outside the sandbox. */
#if defined(__SANITIZE_ADDRESS__)
#define BRIDGE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRIDGE_ASAN 1
#endif
#endif
#ifdef BRIDGE_ASAN
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
        return "detect_leaks=0";
}
#endif

#define BRIDGE_MAX_CONNS_DEFAULT 256
#define BRIDGE_MAX_CONNS_LIMIT 4096
#define BRIDGE_BUF 32768

struct half {
        char data[BRIDGE_BUF];
        size_t off, len;
};

struct conn {
        int cfd, ufd;      /* client (Unix socket), upstream (TCP to the app) */
        bool connecting;   /* upstream connect() in progress */
        bool c_eof, u_eof; /* the peer finished sending */
        bool u_shut, c_shut; /* we shut down writing towards it */
        struct half c2u, u2c;
};

struct bridge {
        int port;
        size_t max_conns;
        char **cmd;
        pid_t child;
        bool signalled; /* a termination signal was passed on */
        int lfd, sfd; /* the inherited listening socket (--listen-fd); the signalfd */
        struct conn **conns;
        size_t n_conns;
};

static void usage(FILE *f) {
        fprintf(f,
                "usage: seed-bridge --listen-fd N --port PORT [--max-conns N] -- CMD [ARGS...]\n"
                "\n"
                "Runs CMD (the organism's server) and bridges connections accepted on fd N,\n"
                "an inherited listening AF_UNIX stream socket, to 127.0.0.1:PORT.\n"
                "\n"
                "  --listen-fd N    the listening socket, passed in by the kernel (N >= 3)\n"
                "  --port PORT      where CMD listens, 1-65535\n"
                "  --max-conns N    concurrent connections, 1-%d (default %d)\n"
                "  --help           this text\n"
                "\n"
                "Exits with CMD's status (128+signal if it was killed); SIGTERM, SIGINT and\n"
                "SIGHUP are passed on to CMD's process group.\n",
                BRIDGE_MAX_CONNS_LIMIT, BRIDGE_MAX_CONNS_DEFAULT);
}

/* A whole decimal number in [lo, hi]. */
static int parse_long(const char *s, long lo, long hi, long *ret) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < lo || v > hi)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int parse_args(int argc, char **argv, struct bridge *b) {
        int i = 1;
        for (; i < argc; i++) {
                const char *a = argv[i];
                if (streq(a, "--")) {
                        i++;
                        break;
                }
                if (i + 1 >= argc)
                        return -EINVAL;
                long v;
                if (streq(a, "--listen-fd")) {
                        if (parse_long(argv[++i], 3, INT_MAX, &v) < 0)
                                return -EINVAL;
                        b->lfd = (int)v;
                } else if (streq(a, "--port")) {
                        if (parse_long(argv[++i], 1, 65535, &v) < 0)
                                return -EINVAL;
                        b->port = (int)v;
                } else if (streq(a, "--max-conns")) {
                        if (parse_long(argv[++i], 1, BRIDGE_MAX_CONNS_LIMIT, &v) < 0)
                                return -EINVAL;
                        b->max_conns = (size_t)v;
                } else
                        return -EINVAL;
        }
        if (b->lfd < 0 || !b->port || i >= argc)
                return -EINVAL;
        b->cmd = &argv[i];
        return 0;
}

static int spawn_child(struct bridge *b, const sigset_t *orig_mask) {
        pid_t pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                setpgid(0, 0);
                signal(SIGPIPE, SIG_DFL);
                sigprocmask(SIG_SETMASK, orig_mask, NULL);
                if (strchr(b->cmd[0], '/'))
                        execv(b->cmd[0], b->cmd);
                else
                        execvp(b->cmd[0], b->cmd);
                fprintf(stderr, "seed-bridge: cannot run %s: %s\n", b->cmd[0], strerror(errno));
                _exit(127);
        }
        setpgid(pid, pid);
        b->child = pid;
        return 0;
}

static int sockopt_int(int fd, int opt, int *ret) {
        int v = 0;
        socklen_t len = sizeof v;
        if (getsockopt(fd, SOL_SOCKET, opt, &v, &len) < 0)
                return -errno;
        *ret = v;
        return 0;
}

/* The inherited fd must be a listening AF_UNIX stream socket. It is made
 * close-on-exec (the organism does not get it) and non-blocking. Logs why
 * not. */
static int listen_fd_adopt(int fd) {
        int domain, type, accepting, r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return log_error_errno(-errno, "--listen-fd %d: not an open fd: %m", fd);
        if (!S_ISSOCK(st.st_mode))
                return log_error_errno(-ENOTSOCK, "--listen-fd %d: not a socket", fd);
        if ((r = sockopt_int(fd, SO_DOMAIN, &domain)) < 0 || (r = sockopt_int(fd, SO_TYPE, &type)) < 0 ||
            (r = sockopt_int(fd, SO_ACCEPTCONN, &accepting)) < 0)
                return log_error_errno(r, "--listen-fd %d: cannot inspect the socket: %m", fd);
        if (domain != AF_UNIX || type != SOCK_STREAM)
                return log_error_errno(-EPROTOTYPE, "--listen-fd %d: not an AF_UNIX stream socket", fd);
        if (!accepting)
                return log_error_errno(-EINVAL, "--listen-fd %d: the socket is not listening", fd);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                return log_error_errno(-errno, "--listen-fd %d: %m", fd);
        return 0;
}

static void conn_free(struct conn *c) {
        if (!c)
                return;
        if (c->cfd >= 0)
                close(c->cfd);
        if (c->ufd >= 0)
                close(c->ufd);
        free(c);
}

/* Accepts one client and starts connecting to the app. A refused connect
 * (the app is not listening yet) closes the client at once. */
static int bridge_accept(struct bridge *b) {
        int cfd = accept4(b->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return -errno;
        struct conn *c = calloc(1, sizeof(*c));
        if (!c) {
                close(cfd);
                return 0;
        }
        c->cfd = cfd;
        c->ufd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->ufd < 0) {
                conn_free(c);
                return 0;
        }
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)b->port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(c->ufd, (struct sockaddr *)&sa, sizeof sa) < 0) {
                if (errno != EINPROGRESS) {
                        conn_free(c);
                        return 0;
                }
                c->connecting = true;
        }
        b->conns[b->n_conns++] = c;
        return 0;
}

/* What to poll for on each side; fd -1 when nothing is wanted. */
static void conn_events(const struct conn *c, struct pollfd *pc, struct pollfd *pu) {
        short ce = 0, ue = 0;
        if (c->connecting)
                ue = POLLOUT;
        else {
                if (!c->c_eof && c->c2u.len == 0)
                        ce |= POLLIN;
                if (c->u2c.len > 0)
                        ce |= POLLOUT;
                if (!c->u_eof && c->u2c.len == 0)
                        ue |= POLLIN;
                if (c->c2u.len > 0)
                        ue |= POLLOUT;
        }
        *pc = (struct pollfd){.fd = ce ? c->cfd : -1, .events = ce};
        *pu = (struct pollfd){.fd = ue ? c->ufd : -1, .events = ue};
}

/* Reads into h from fd; returns -1 on error, sets *eof at end of stream. */
static int half_read(int fd, struct half *h, bool *eof) {
        ssize_t n = read(fd, h->data, sizeof h->data);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
        if (n == 0)
                *eof = true;
        h->off = 0;
        h->len = (size_t)n;
        return 0;
}

static int half_write(int fd, struct half *h) {
        ssize_t n = send(fd, h->data + h->off, h->len, MSG_NOSIGNAL);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -1;
        h->off += (size_t)n;
        h->len -= (size_t)n;
        return 0;
}

/* Handles poll results for one connection; returns false when it is done. */
static bool conn_step(struct conn *c, short crev, short urev) {
        if (c->connecting) {
                if (!urev)
                        return true;
                int err = 0;
                socklen_t len = sizeof err;
                if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err)
                        return false;
                c->connecting = false;
                return true;
        }
        if ((crev | urev) & POLLNVAL)
                return false;
        if ((crev & (POLLIN | POLLHUP | POLLERR)) && !c->c_eof && c->c2u.len == 0 &&
            half_read(c->cfd, &c->c2u, &c->c_eof) < 0)
                return false;
        if ((urev & (POLLIN | POLLHUP | POLLERR)) && !c->u_eof && c->u2c.len == 0 &&
            half_read(c->ufd, &c->u2c, &c->u_eof) < 0)
                return false;
        if (c->c2u.len > 0 && (urev & (POLLOUT | POLLERR | POLLHUP)) && half_write(c->ufd, &c->c2u) < 0)
                return false;
        if (c->u2c.len > 0 && (crev & (POLLOUT | POLLERR | POLLHUP)) && half_write(c->cfd, &c->u2c) < 0)
                return false;
        /* Half-close: pass on the end of a stream once its data is through. */
        if (c->c_eof && c->c2u.len == 0 && !c->u_shut) {
                shutdown(c->ufd, SHUT_WR);
                c->u_shut = true;
        }
        if (c->u_eof && c->u2c.len == 0 && !c->c_shut) {
                shutdown(c->cfd, SHUT_WR);
                c->c_shut = true;
        }
        return !(c->u_shut && c->c_shut);
}

/* Handles pending signals; returns true when the child has exited. */
static bool bridge_signals(struct bridge *b, int *ret_status) {
        struct signalfd_siginfo si;
        while (read(b->sfd, &si, sizeof si) == sizeof si) {
                if (si.ssi_signo == SIGCHLD)
                        continue;
                log_info("received signal %u, passing it to the organism", si.ssi_signo);
                if (kill(-b->child, (int)si.ssi_signo) < 0)
                        kill(b->child, (int)si.ssi_signo);
                b->signalled = true;
        }
        int status;
        for (;;) {
                pid_t p = waitpid(-1, &status, WNOHANG);
                if (p <= 0)
                        return false;
                if (p == b->child) {
                        *ret_status = status;
                        return true;
                }
        }
}

static int bridge_loop(struct bridge *b) {
        size_t cap = 2 + 2 * b->max_conns;
        _cleanup_free_ struct pollfd *pfd = calloc(cap, sizeof(*pfd));
        if (!pfd)
                return -ENOMEM;
        for (;;) {
                int status;
                if (bridge_signals(b, &status)) {
                        if (WIFEXITED(status))
                                log_info("organism exited with status %d", WEXITSTATUS(status));
                        else if (WIFSIGNALED(status))
                                log_info("organism was killed by signal %d", WTERMSIG(status));
                        return WIFEXITED(status) ? WEXITSTATUS(status)
                                                 : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 255;
                }
                pfd[0] = (struct pollfd){.fd = b->sfd, .events = POLLIN};
                pfd[1] = (struct pollfd){.fd = b->n_conns < b->max_conns ? b->lfd : -1, .events = POLLIN};
                for (size_t i = 0; i < b->n_conns; i++)
                        conn_events(b->conns[i], &pfd[2 + 2 * i], &pfd[3 + 2 * i]);
                if (poll(pfd, 2 + 2 * b->n_conns, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(-errno, "poll: %m");
                }
                size_t n = b->n_conns;
                for (size_t i = 0, j = 0; i < n; i++) {
                        struct conn *c = b->conns[i];
                        if (conn_step(c, pfd[2 + 2 * i].revents, pfd[3 + 2 * i].revents))
                                b->conns[j++] = c;
                        else {
                                conn_free(c);
                                b->n_conns--;
                        }
                }
                if (pfd[1].revents & POLLIN)
                        for (int k = 0; k < 16 && b->n_conns < b->max_conns; k++)
                                if (bridge_accept(b) < 0)
                                        break;
        }
}

/* After a passed-on SIGTERM the child (often a shell) may die at once while
 * the app in its process group is still shutting down: give the group up to
 * BRIDGE_DRAIN_MS to finish, since leaving ends the whole sandbox. */
#define BRIDGE_DRAIN_MS 9000
static void bridge_drain_group(struct bridge *b) {
        int64_t deadline = now_ms() + BRIDGE_DRAIN_MS;
        while (kill(-b->child, 0) == 0 && now_ms() < deadline) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
}

int main(int argc, char **argv) {
        log_set_ident("seed-bridge");
        if (argc == 2 && streq(argv[1], "--help")) {
                usage(stdout);
                return 0;
        }
        struct bridge b = {.max_conns = BRIDGE_MAX_CONNS_DEFAULT, .lfd = -1, .sfd = -1};
        int r = parse_args(argc, argv, &b);
        if (r < 0) {
                usage(stderr);
                return 2;
        }
        b.conns = calloc(b.max_conns, sizeof(*b.conns));
        if (!b.conns)
                return 1;

        signal(SIGPIPE, SIG_IGN);
        sigset_t mask, orig;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, &orig) < 0 ||
            (b.sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
                log_error_errno(-errno, "cannot set up signals: %m");
                return 1;
        }
        if (listen_fd_adopt(b.lfd) < 0)
                return 1;
        if ((r = spawn_child(&b, &orig)) < 0) {
                log_error_errno(r, "cannot start the organism: %m");
                return 1;
        }
        int code = bridge_loop(&b);
        close(TAKE_FD(b.lfd)); /* refuse new clients at once, not after the drain */
        if (code >= 0 && b.signalled)
                bridge_drain_group(&b);
        for (size_t i = 0; i < b.n_conns; i++)
                conn_free(b.conns[i]);
        free(b.conns);
        if (code < 0) {
                kill(-b.child, SIGKILL);
                return 1;
        }
        return code;
}
