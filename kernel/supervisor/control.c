/* The supervisor's control channel: a Unix socket in .seed/supervisor/
 * (0700, under .seed/ which no sandbox sees) over which `seed restart` asks
 * the running supervisor to restart its kernel with more secrets. One
 * request per connection, bounded in size and time, from a peer of the
 * supervisor's own uid or root only. The socket is named through
 * /proc/self/fd/<dir fd>/ so a long Seed path never meets the 108-byte limit
 * of sun_path. */
#include "supervisor/supervisor.h"

#include "base/fileio.h"
#include "secrets/secrets.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define CONTROL_VERB "restart"

void supervisor_request_done(struct supervisor_request *q) {
        secrets_free(q->secrets);
        strv_free(q->hide_paths);
        *q = (struct supervisor_request){0};
}

/* The socket's address through an fd of its directory. */
static int control_addr(int dirfd, struct sockaddr_un *ret, socklen_t *ret_len) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int n = snprintf(a.sun_path, sizeof a.sun_path, "/proc/self/fd/%d/%s", dirfd, SUPERVISOR_CONTROL_SOCKET);
        if (n < 0 || (size_t)n >= sizeof a.sun_path)
                return -ENAMETOOLONG;
        *ret = a;
        *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
        return 0;
}

static int open_dir(const char *seed_dir, bool create, int *ret_fd) {
        _cleanup_free_ char *dir = path_join(seed_dir, SUPERVISOR_CONTROL_DIR);
        if (!dir)
                return -ENOMEM;
        int r = create ? mkdir_mode(dir, 0700) : 0;
        if (r < 0)
                return r;
        int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

int supervisor_control_open(const char *seed_dir, int *ret_fd) {
        _cleanup_close_ int dirfd = -1;
        int r = open_dir(seed_dir, true, &dirfd);
        if (r < 0)
                return r;
        struct sockaddr_un a;
        socklen_t len;
        if ((r = control_addr(dirfd, &a, &len)) < 0)
                return r;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void)unlink(a.sun_path); /* a dead supervisor's: we hold the run lock */
        if (bind(fd, (struct sockaddr *)&a, len) < 0 || listen(fd, 4) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

void supervisor_control_close(const char *seed_dir, int fd) {
        if (fd < 0)
                return;
        close(fd);
        _cleanup_free_ char *p = NULL;
        if (xasprintf(&p, "%s/%s/%s", seed_dir, SUPERVISOR_CONTROL_DIR, SUPERVISOR_CONTROL_SOCKET) >= 0)
                (void)unlink(p);
}

static void set_timeouts(int fd, int timeout_ms) {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static bool peer_allowed(int fd) {
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return false;
        return cred.uid == geteuid() || cred.uid == 0;
}

/* One line of the request's head, without its '\n', into line (at most
 * size - 1 bytes). -EBADMSG when the line is longer or the stream ends. */
static int read_line(int fd, char *line, size_t size) {
        size_t n = 0;
        for (;;) {
                char c;
                ssize_t k = read(fd, &c, 1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
                if (k == 0 || n + 1 >= size)
                        return -EBADMSG;
                if (c == '\n')
                        break;
                line[n++] = c;
        }
        line[n] = 0;
        return 0;
}

/* "restart", then "hide <absolute path>" lines, then an empty line. */
static int read_head(int fd, char ***ret_hide) {
        _cleanup_strv_free_ char **hide = NULL;
        char line[PATH_MAX + 8];
        int r = read_line(fd, line, sizeof line);
        if (r < 0)
                return r;
        if (!streq(line, CONTROL_VERB))
                return -EBADMSG;
        for (;;) {
                if ((r = read_line(fd, line, sizeof line)) < 0)
                        return r;
                if (!*line)
                        break;
                if (!startswith(line, "hide /") || strv_length(hide) >= SUPERVISOR_CONTROL_HIDE_MAX)
                        return -EBADMSG;
                if (strv_push(&hide, line + 5) < 0)
                        return -ENOMEM;
        }
        *ret_hide = TAKE_PTR(hide);
        return 0;
}

int supervisor_control_answer(int conn, const char *line) {
        size_t len = strlen(line);
        while (len > 0) {
                ssize_t w = send(conn, line, len, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                line += w;
                len -= (size_t)w;
        }
        return 0;
}

static const char *refusal(int r) {
        switch (r) {
        case -EPERM: return "error only the Seed's own account (or root) may ask\n";
        case -ETIMEDOUT: return "error the request did not arrive in time\n";
        case -E2BIG: return "error too many secrets, or a value too long\n";
        default: return "error a malformed request\n";
        }
}

int supervisor_control_read(int listen_fd, int *ret_conn, struct supervisor_request *ret) {
        _cleanup_close_ int conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
        set_timeouts(conn, SUPERVISOR_CONTROL_TIMEOUT_MS);
        struct supervisor_request q = {0};
        int r = peer_allowed(conn) ? 0 : -EPERM;
        if (r == 0)
                r = read_head(conn, &q.hide_paths);
        if (r == 0)
                r = secrets_new(&q.secrets);
        if (r == 0) {
                r = secrets_read_fd(q.secrets, conn);
                if (r == -EAGAIN || r == -EWOULDBLOCK)
                        r = -ETIMEDOUT;
        }
        if (r < 0) {
                (void)supervisor_control_answer(conn, refusal(r));
                supervisor_request_done(&q);
                return r;
        }
        *ret_conn = TAKE_FD(conn);
        *ret = q;
        return 0;
}

/* ---- the client: `seed restart` ---- */

static int send_all(int fd, const char *s) {
        return supervisor_control_answer(fd, s);
}

/* The answer line (at most size - 1 bytes), without its '\n'. */
static int read_answer(int fd, char *line, size_t size) {
        int r = read_line(fd, line, size);
        return r == -EBADMSG ? -ECONNRESET : r;
}

int supervisor_request_restart(const char *seed_dir, const struct secrets *s, char *const *hide_paths,
                               pid_t *ret_old_pid, char **ret_error) {
        if (strv_length(hide_paths) > SUPERVISOR_CONTROL_HIDE_MAX)
                return -E2BIG;
        _cleanup_close_ int dirfd = -1;
        int r = open_dir(seed_dir, false, &dirfd);
        if (r < 0)
                return r == -ENOTDIR ? -ENOENT : r;
        struct sockaddr_un a;
        socklen_t len;
        if ((r = control_addr(dirfd, &a, &len)) < 0)
                return r;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&a, len) < 0)
                return errno == ECONNREFUSED ? -ENOENT : -errno;
        /* The supervisor may be building a kernel before it reads this. */
        set_timeouts(fd, SUPERVISOR_CONTROL_ANSWER_MS);
        if ((r = send_all(fd, CONTROL_VERB "\n")) < 0)
                return r;
        for (char *const *h = hide_paths; h && *h; h++) {
                if (**h != '/' || strchr(*h, '\n') || strlen(*h) >= PATH_MAX)
                        return -EINVAL;
                if ((r = send_all(fd, "hide ")) < 0 || (r = send_all(fd, *h)) < 0 || (r = send_all(fd, "\n")) < 0)
                        return r;
        }
        if ((r = send_all(fd, "\n")) < 0 || (s && (r = secrets_write_fd(s, fd)) < 0))
                return r;
        if (shutdown(fd, SHUT_WR) < 0)
                return -errno;
        char line[512];
        if ((r = read_answer(fd, line, sizeof line)) < 0)
                return r;
        if (startswith(line, "ok ")) {
                char *end;
                long pid = strtol(line + 3, &end, 10);
                if (*end || pid <= 1 || pid > INT_MAX)
                        return -EBADMSG;
                *ret_old_pid = (pid_t)pid;
                return 0;
        }
        if (ret_error)
                *ret_error = strdup(startswith(line, "error ") ? line + 6 : line);
        return -EIO;
}
