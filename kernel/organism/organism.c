/* organism.c — the live organism's supervisor. One thread per organism:
 * build in a SANDBOX_BUILD sandbox, run behind seed-bridge in a SANDBOX_LIVE
 * sandbox, probe health through the bridge's Unix socket, restart crashes
 * with exponential backoff and give up after more than 3 crashes in 10
 * minutes. A second thread copies the children's output into the organism's
 * size-rotated log.
 *
 * The bridge's socket is the kernel's: before each start the kernel binds and
 * listens on it in its own run dir (0700, never shown to a sandbox) and hands
 * the listening fd to the bridge, so nothing inside the sandbox can replace
 * what the kernel connects to. The kernel closes its copy once the sandbox
 * has started (a crash or stop therefore refuses new connections at once
 * instead of queueing them) and removes the socket when the run ends. */
#include "organism/organism.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/proc.h"
#include "httpc/httpc.h"
#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#define LOG_MAX_BYTES (10u * 1024 * 1024)
#define LOG_KEEP 3
#define BACKOFF_DEFAULT_MS 1000
#define BACKOFF_MAX_MS 30000
#define HEALTH_DEFAULT_MS 60000
#define BUILD_DEFAULT_MS (15 * 60 * 1000)
#define STOP_GRACE_MS 10000
#define CRASH_WINDOW_MS (10 * 60 * 1000)
#define CRASH_LIMIT 3 /* more than this many in the window: down */
#define POLL_STEP_MS 100
#define PROBE_TIMEOUT_MS 2000
/* Once healthy, the health check goes on: every LIVENESS_EVERY_MS; that
 * many failed in a row (each answers within PROBE_TIMEOUT_MS or fails) is
 * an organism that hangs or stopped reading its socket: restarted like a
 * crash. */
#define LIVENESS_EVERY_MS 5000
#define LIVENESS_FAILS 3
#define PROBE_BODY_MAX 1024   /* body bytes read; only the status counts */

#define SANDBOX_BRIDGE "/run/seed/bridge"
#define LISTEN_BACKLOG 128

struct organism {
        /* Configuration (owned copies). */
        char *seed_dir, *workspace, *build_cmd, *run_cmd, *health_path, *database_url, *pg_socket_dir;
        char *bridge_path, *run_dir, *log_path, *cache_dir, *socket_path;
        char *label, *build_label;  /* its sandboxes at the egress proxy */
        struct egress *egress;      /* borrowed */
        char **evolvable;
        int port, backoff_ms_base, health_timeout_ms, build_timeout_ms;
        void (*on_state)(void *userdata, enum organism_state state);
        void *userdata;

        /* Shared with the supervising thread, under lock. */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        enum organism_state state;
        bool stopping;
        char **extra_env;           /* the live sandbox's (secrets: wiped when replaced) */
        bool respawn;               /* the running app restarts with a new extra_env */
        bool thread_started, thread_done;
        pthread_t thread;
        int64_t crashes[CRASH_LIMIT + 1];
        size_t n_crashes;
        char *reason;

        /* The log and the thread that copies child output into it. */
        struct rotlog *log;
        int pipe_r, pipe_w;
        bool pump_started, pump_stop;
        pthread_t pump;
};

const char *organism_state_name(enum organism_state s) {
        static const char *const names[] = {
                [ORGANISM_STOPPED] = "stopped", [ORGANISM_BUILDING] = "building",
                [ORGANISM_STARTING] = "starting", [ORGANISM_RUNNING] = "running",
                [ORGANISM_CRASHED] = "crashed", [ORGANISM_DOWN] = "down",
        };
        return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "unknown";
}

/* A line in the organism's own log (what the owner and the model read) and
 * in the kernel's log. Never pass secrets. */
static void olog(struct organism *o, enum log_level level, const char *fmt, ...) _printf_(3, 4);
static void olog(struct organism *o, enum log_level level, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_msg(level, 0, "organism: %s", msg);
        char line[1100];
        int n = snprintf(line, sizeof line, "[seed] %s\n", msg);
        if (n > 0)
                rotlog_write(o->log, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

/* The callback runs first, so anyone woken by the new state (e.g.
 * organism_wait_ready) also sees what the callback recorded. */
static void set_state(struct organism *o, enum organism_state s, const char *reason) {
        if (o->on_state && organism_state(o) != s)
                o->on_state(o->userdata, s);
        pthread_mutex_lock(&o->lock);
        o->state = s;
        if (reason) {
                free(o->reason);
                o->reason = strdup(reason);
        }
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
}

static bool is_stopping(struct organism *o) {
        pthread_mutex_lock(&o->lock);
        bool s = o->stopping;
        pthread_mutex_unlock(&o->lock);
        return s;
}

static struct timespec deadline_ts(int64_t ms_from_now) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms_from_now / 1000;
        ts.tv_nsec += (ms_from_now % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
        }
        return ts;
}

/* Waits up to ms or until stop is requested; returns true if stopping. */
static bool wait_or_stop(struct organism *o, int64_t ms) {
        struct timespec ts = deadline_ts(ms > 0 ? ms : 0);
        pthread_mutex_lock(&o->lock);
        while (!o->stopping && pthread_cond_timedwait(&o->cond, &o->lock, &ts) == 0)
                ;
        bool s = o->stopping;
        pthread_mutex_unlock(&o->lock);
        return s;
}

/* Copies children's output into the log until EOF or stop. */
static void *pump_main(void *arg) {
        struct organism *o = arg;
        char buf[16384];
        for (;;) {
                struct pollfd p = {.fd = o->pipe_r, .events = POLLIN};
                int k = poll(&p, 1, 200);
                if (k < 0 && errno != EINTR)
                        break;
                if (k > 0) {
                        ssize_t n = read(o->pipe_r, buf, sizeof buf);
                        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                                break;
                        if (n > 0) {
                                rotlog_write(o->log, buf, (size_t)n);
                                continue;
                        }
                }
                pthread_mutex_lock(&o->lock);
                bool stop = o->pump_stop;
                pthread_mutex_unlock(&o->lock);
                if (stop && k == 0)
                        break;
        }
        return NULL;
}

/* SIGTERM to what runs inside the sandbox (the bridge passes it on to the
 * app), SIGKILL after the grace period; reaps and releases it. */
static int terminate(struct sandbox_child *c) {
        int code = sandbox_stop(c, STOP_GRACE_MS);
        sandbox_child_done(c);
        return code;
}

/* Polls for the sandbox's exit without blocking; the exit code, or -EAGAIN.
 * Once it has exited, whatever is left is killed and c released. */
static int child_exited(struct sandbox_child *c) {
        int code = proc_wait(c->pid, 0);
        if (code == -ETIMEDOUT)
                return -EAGAIN;
        (void)sandbox_signal(c, SIGKILL);
        sandbox_child_done(c);
        return code;
}

/* ---- the bridge socket ---- */

/* Splits an absolute socket path into its directory and a plain file name. */
static int socket_path_split(const char *socket_path, char **ret_dir, const char **ret_name) {
        const char *slash = socket_path ? strrchr(socket_path, '/') : NULL;
        if (!slash || socket_path[0] != '/')
                return -EINVAL;
        const char *name = slash + 1;
        if (strempty(name) || streq(name, ".") || streq(name, "..") || strlen(name) > 64)
                return -EINVAL;
        char *dir = slash == socket_path ? strdup("/") : strndup(socket_path, (size_t)(slash - socket_path));
        if (!dir)
                return -ENOMEM;
        *ret_dir = dir;
        *ret_name = name;
        return 0;
}

/* The socket's directory itself, not through a symlink, and ours alone: a
 * directory owned by us that nobody else may write into (-EPERM otherwise).
 * Does not log. */
static int run_dir_open(const char *dir, int *ret_fd) {
        _cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_uid != geteuid() || (st.st_mode & 0077))
                return -EPERM;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The address of name inside the opened directory dirfd: the path is not
 * resolved again, and it fits sun_path however long the Seed's path is. */
static int socket_addr_at(int dirfd, const char *name, struct sockaddr_un *ret) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int n = snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/%s", dirfd, name);
        if (n < 0 || (size_t)n >= sizeof sa.sun_path)
                return -ENAMETOOLONG;
        *ret = sa;
        return 0;
}

/* Removes name from dirfd if it is a socket (never following a symlink);
 * missing is fine; anything else there is refused (-EEXIST). */
static int socket_remove_at(int dirfd, const char *name) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* Creates the bridge's listening socket at socket_path: any stale socket is
 * replaced, anything else refused; bound through the opened directory (so
 * the path is not resolved again), mode 0600. Returns the listening fd
 * (blocking, O_CLOEXEC); the caller closes it. */
static int socket_listen(const char *socket_path, int *ret_fd) {
        _cleanup_free_ char *dir = NULL;
        const char *name;
        int r = socket_path_split(socket_path, &dir, &name);
        if (r < 0)
                return log_error_errno(r, "organism: invalid socket path");
        _cleanup_close_ int dirfd = -1;
        if ((r = run_dir_open(dir, &dirfd)) < 0)
                return log_error_errno(r, "organism: run dir '%s' must be a directory of ours with mode 0700: %m",
                                       dir);
        if ((r = socket_remove_at(dirfd, name)) == -EEXIST)
                return log_error_errno(r, "organism: refusing to replace '%s': it is not a socket", socket_path);
        if (r < 0)
                return log_error_errno(r, "organism: cannot remove the stale '%s': %m", socket_path);
        struct sockaddr_un sa;
        if ((r = socket_addr_at(dirfd, name, &sa)) < 0)
                return log_error_errno(r, "organism: socket name too long");
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return log_error_errno(-errno, "organism: socket: %m");
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
                return log_error_errno(-errno, "organism: cannot bind '%s': %m", socket_path);
        if (fchmodat(dirfd, name, 0600, AT_SYMLINK_NOFOLLOW) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
                r = log_error_errno(-errno, "organism: cannot listen on '%s': %m", socket_path);
                (void)socket_remove_at(dirfd, name);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Removes the socket after a run, so a client gets ENOENT, not a dead socket. */
static void socket_unlink(const char *socket_path) {
        _cleanup_free_ char *dir = NULL;
        const char *name;
        _cleanup_close_ int dirfd = -1;
        if (socket_path_split(socket_path, &dir, &name) < 0 || run_dir_open(dir, &dirfd) < 0)
                return;
        (void)socket_remove_at(dirfd, name);
}

int organism_socket_open(const char *socket_path, int *ret_dirfd, char **ret_path) {
        _cleanup_free_ char *dir = NULL;
        const char *name;
        _cleanup_close_ int dirfd = -1;
        struct sockaddr_un sa;
        int r;
        if ((r = socket_path_split(socket_path, &dir, &name)) < 0 || (r = run_dir_open(dir, &dirfd)) < 0 ||
            (r = socket_addr_at(dirfd, name, &sa)) < 0)
                return r;
        /* connect() follows a symlink: refuse one outright (the peer check
         * would only catch a link to a socket that is not ours). */
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return S_ISLNK(st.st_mode) ? -ELOOP : -ENOTSOCK;
        char *path = strdup(sa.sun_path);
        if (!path)
                return -ENOMEM;
        *ret_path = path;
        *ret_dirfd = TAKE_FD(dirfd);
        return 0;
}

int organism_peer_check(int fd, const char *socket_path) {
        /* The peer's credentials are the listener's at listen() time: ours
         * for a socket this kernel bound, whoever runs the bridge otherwise. */
        struct ucred cred;
        socklen_t len = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (cred.pid != getpid())
                return log_warn_errno(-EPERM, "organism: '%s' is not a socket this kernel listens on (pid %d)",
                                      socket_path, (int)cred.pid);
        return 0;
}

int organism_connect(const char *socket_path, int timeout_ms, int *ret_fd) {
        _cleanup_close_ int dirfd = -1;
        _cleanup_free_ char *path = NULL;
        int r = organism_socket_open(socket_path, &dirfd, &path);
        if (r < 0)
                return r;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path); /* fits: socket_addr_at() made it */
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (timeout_ms < 0 ? SOCK_NONBLOCK : 0), 0);
        if (fd < 0)
                return -errno;
        /* A Unix-socket connect() blocks while the listener's backlog is full
         * and gives up after SO_SNDTIMEO (EAGAIN). */
        struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
        if (timeout_ms > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
                return -errno;
        do
                r = connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ? -errno : 0;
        while (r == -EINTR);
        if (r == -EAGAIN || r == -EINPROGRESS)
                return timeout_ms < 0 ? -EAGAIN : -ETIMEDOUT;
        if (r < 0 || (r = organism_peer_check(fd, socket_path)) < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The probe's connection: organism_peer_check() once connected. */
struct probe_conn {
        const char *socket_path;
        bool connected;
        int error;      /* the peer check's, or 0 */
};

static int probe_check(void *userdata, int fd) {
        struct probe_conn *pc = userdata;
        pc->connected = true;
        return (pc->error = organism_peer_check(fd, pc->socket_path));
}

int organism_probe(const char *socket_path, const char *path) {
        if (!path || path[0] != '/')
                return -EINVAL;
        _cleanup_close_ int dirfd = -1;
        _cleanup_free_ char *sock = NULL, *url = NULL;
        int r = organism_socket_open(socket_path, &dirfd, &sock);
        if (r < 0)
                return r;
        if (xasprintf(&url, "http://localhost%s", path) < 0)
                return -ENOMEM;
        /* "Name:" alone keeps curl from adding one of its own. */
        static char *const headers[] = {"User-Agent: seed-kernel", "Connection: close", "Accept:", NULL};
        struct probe_conn pc = {.socket_path = socket_path};
        struct httpc_response res = {0};
        r = httpc_do(&(struct httpc_request){.method = "GET", .url = url, .headers = headers,
                                             .connect_timeout_ms = PROBE_TIMEOUT_MS,
                                             .timeout_ms = 2 * PROBE_TIMEOUT_MS, /* connect, then the answer */
                                             .max_response = PROBE_BODY_MAX, .truncate = true,
                                             .unix_socket = sock, .check_fn = probe_check, .check_userdata = &pc},
                     &res, NULL);
        if (r == -ENOMEM)
                return r;
        /* Not connected (refused, timed out): why; refused by the peer
         * check: its error; no (2xx) answer once connected: -EIO. */
        if (r < 0)
                return !pc.connected || pc.error < 0 ? r : -EIO;
        r = res.status >= 200 && res.status <= 299 ? 0 : -EIO;
        httpc_response_done(&res);
        return r;
}

static int build_policy(struct organism *o, struct sandbox_policy **ret) {
        static char *const organism_only[] = {"organism/", NULL};
        struct sandbox_spec spec = {
                .profile = SANDBOX_BUILD,
                .seed_dir = o->seed_dir,
                .workspace = o->workspace,
                .evolvable = o->evolvable ? o->evolvable : organism_only,
                .cache_dir = o->cache_dir,
                .port = o->port,
                .egress = o->egress,
                .label = o->build_label,
        };
        return sandbox_policy_build(&spec, ret);
}

static void env_free(char **env) {
        for (char **e = env; e && *e; e++)
                secure_zero(*e, strlen(*e));
        strv_free(env);
}

/* listen_fd: the bridge's listening socket, passed at the same number. */
static int live_policy(struct organism *o, const int *listen_fd, struct sandbox_policy **ret) {
        /* The environment as it is now; a change from here on restarts. */
        char **env = NULL;
        int r = 0;
        pthread_mutex_lock(&o->lock);
        for (char **e = o->extra_env; r == 0 && e && *e; e++)
                r = strv_push(&env, *e);
        o->respawn = false;
        pthread_mutex_unlock(&o->lock);
        if (r < 0) {
                env_free(env);
                return r;
        }
        struct sandbox_spec spec = {
                .profile = SANDBOX_LIVE,
                .seed_dir = o->seed_dir,
                .workspace = o->workspace,
                .workspace_readonly = true,
                .pg_socket_dir = o->pg_socket_dir,
                .database_url = o->database_url,
                .bridge_path = o->bridge_path,
                .keep_fds = listen_fd,
                .n_keep_fds = 1,
                .port = o->port,
                .extra_env = env,
                .egress = o->egress,
                .label = o->label,
        };
        r = sandbox_policy_build(&spec, ret);
        env_free(env);
        return r;
}

/* Runs the build to completion; 0 on success, -ECANCELED when stopped,
 * another -errno on failure (logged here). */
static int run_build(struct organism *o) {
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        int r = build_policy(o, &p);
        if (r < 0) {
                olog(o, LOG_ERROR, "cannot prepare the build sandbox: %s", strerror(-r));
                return r;
        }
        char *cmd[] = {"/bin/sh", "-c", o->build_cmd, NULL};
        olog(o, LOG_INFO, "building: %s", o->build_cmd);
        struct sandbox_child c;
        if ((r = sandbox_start(p, cmd, o->pipe_w, &c)) < 0) {
                olog(o, LOG_ERROR, "cannot start the build: %s", strerror(-r));
                return r;
        }
        int64_t deadline = now_ms() + o->build_timeout_ms;
        for (;;) {
                int code = child_exited(&c);
                if (code >= 0) {
                        if (code == 0)
                                return 0;
                        olog(o, LOG_ERROR, "build failed (exit code %d)", code);
                        return -EIO;
                }
                if (code != -EAGAIN) {
                        olog(o, LOG_ERROR, "lost the build process: %s", strerror(-code));
                        return code;
                }
                if (now_ms() >= deadline) {
                        terminate(&c);
                        olog(o, LOG_ERROR, "build timed out after %d s", o->build_timeout_ms / 1000);
                        return -ETIMEDOUT;
                }
                if (wait_or_stop(o, POLL_STEP_MS)) {
                        terminate(&c);
                        return -ECANCELED;
                }
        }
}

enum run_outcome { RUN_STOPPED, RUN_EXITED, RUN_UNHEALTHY, RUN_HUNG, RUN_RESPAWN };

static bool respawn_asked(struct organism *o) {
        pthread_mutex_lock(&o->lock);
        bool r = o->respawn;
        pthread_mutex_unlock(&o->lock);
        return r;
}

/* Watches a started organism: STARTING until healthy, then RUNNING until it
 * exits, stops answering its health check (LIVENESS_*) or stop is
 * requested. */
static enum run_outcome watch(struct organism *o, struct sandbox_child *c, int *ret_code) {
        int64_t health_deadline = now_ms() + o->health_timeout_ms;
        int64_t next_check = 0;
        int fails = 0;
        bool healthy = false;
        for (;;) {
                int code = child_exited(c);
                if (code != -EAGAIN) {
                        *ret_code = code;
                        return RUN_EXITED;
                }
                if (!healthy) {
                        if (organism_probe(o->socket_path, o->health_path) == 0) {
                                healthy = true;
                                next_check = now_ms() + LIVENESS_EVERY_MS;
                                olog(o, LOG_INFO, "healthy (%s answered)", o->health_path);
                                set_state(o, ORGANISM_RUNNING, "running");
                                continue;
                        }
                        if (now_ms() >= health_deadline)
                                return RUN_UNHEALTHY;
                } else if (now_ms() >= next_check) {
                        fails = organism_probe(o->socket_path, o->health_path) == 0 ? 0 : fails + 1;
                        if (fails >= LIVENESS_FAILS)
                                return RUN_HUNG;
                        next_check = now_ms() + (fails ? PROBE_TIMEOUT_MS : LIVENESS_EVERY_MS);
                }
                if (wait_or_stop(o, POLL_STEP_MS))
                        return RUN_STOPPED;
                if (respawn_asked(o))
                        return RUN_RESPAWN;
        }
}

/* Records a crash; returns how many happened within the window. */
static size_t record_crash(struct organism *o) {
        int64_t now = now_ms();
        pthread_mutex_lock(&o->lock);
        size_t j = 0;
        for (size_t i = 0; i < o->n_crashes; i++)
                if (now - o->crashes[i] < CRASH_WINDOW_MS)
                        o->crashes[j++] = o->crashes[i];
        if (j == ARRAY_SIZE(o->crashes)) { /* keep the newest */
                memmove(o->crashes, o->crashes + 1, (j - 1) * sizeof(o->crashes[0]));
                j--;
        }
        o->crashes[j++] = now;
        o->n_crashes = j;
        pthread_mutex_unlock(&o->lock);
        return j;
}

static int64_t backoff_ms(const struct organism *o, size_t crashes) {
        int64_t ms = o->backoff_ms_base;
        for (size_t i = 1; i < crashes && ms < BACKOFF_MAX_MS; i++)
                ms *= 2;
        return ms < BACKOFF_MAX_MS ? ms : BACKOFF_MAX_MS;
}

/* Binds the socket and starts the live sandbox with the bridge accepting on
 * it; the kernel's copy of the listening fd is closed before returning. */
static int start_live(struct organism *o, struct sandbox_child *ret) {
        _cleanup_close_ int lfd = -1;
        int r = socket_listen(o->socket_path, &lfd);
        if (r < 0)
                return r;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        if ((r = live_policy(o, &lfd, &p)) < 0)
                return r;
        char port[16], fd[16];
        snprintf(port, sizeof port, "%d", o->port);
        snprintf(fd, sizeof fd, "%d", lfd);
        char *cmd[] = {SANDBOX_BRIDGE, "--listen-fd", fd, "--port", port, "--", "/bin/sh", "-c", o->run_cmd, NULL};
        return sandbox_start(p, cmd, o->pipe_w, ret);
}

/* One start of the live sandbox; returns false when supervision ends. */
static bool run_once(struct organism *o) {
        set_state(o, ORGANISM_STARTING, "starting");
        struct sandbox_child c;
        int r = start_live(o, &c);
        if (r < 0) {
                socket_unlink(o->socket_path);
                olog(o, LOG_ERROR, "cannot start the organism: %s", strerror(-r));
                set_state(o, ORGANISM_DOWN, "cannot start the organism sandbox");
                return false;
        }
        olog(o, LOG_INFO, "starting: %s (port %d)", o->run_cmd, o->port);
        int code = 0;
        enum run_outcome out = watch(o, &c, &code);
        if (out != RUN_EXITED)
                terminate(&c);
        socket_unlink(o->socket_path);
        if (out == RUN_STOPPED) {
                olog(o, LOG_INFO, "stopped");
                return false;
        }
        if (out == RUN_RESPAWN) {
                olog(o, LOG_INFO, "restarting with a new environment (secrets granted or revoked)");
                return true;
        }
        if (out == RUN_UNHEALTHY) {
                olog(o, LOG_ERROR, "did not become healthy within %d s (%s)", o->health_timeout_ms / 1000,
                     o->health_path);
        } else if (out == RUN_HUNG) {
                olog(o, LOG_ERROR, "stopped answering %s (%d checks in a row failed): it hangs; restarting it",
                     o->health_path, LIVENESS_FAILS);
        } else
                olog(o, LOG_WARN, "exited with code %d", code);
        size_t n = record_crash(o);
        if (n > CRASH_LIMIT) {
                olog(o, LOG_ERROR, "crashed %zu times within 10 minutes; giving up until it is restarted", n);
                set_state(o, ORGANISM_DOWN, "crashed too often");
                return false;
        }
        int64_t wait = backoff_ms(o, n);
        set_state(o, ORGANISM_CRASHED, out == RUN_UNHEALTHY ? "unhealthy, restarting"
                                       : out == RUN_HUNG    ? "hung, restarting"
                                                            : "crashed, restarting");
        olog(o, LOG_INFO, "restarting in %lld ms", (long long)wait);
        return !wait_or_stop(o, wait);
}

static void *supervise(void *arg) {
        struct organism *o = arg;
        int r = run_build(o);
        if (r == 0) {
                while (run_once(o))
                        ;
        } else if (r != -ECANCELED)
                set_state(o, ORGANISM_DOWN, "build failed");
        if (is_stopping(o))
                set_state(o, ORGANISM_STOPPED, "stopped");
        pthread_mutex_lock(&o->lock);
        o->thread_done = true;
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
        return NULL;
}

/* ---- lifecycle ---- */

static int dup_opt(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int strv_copy(char *const *v, char ***ret) {
        *ret = NULL;
        for (char *const *s = v; s && *s; s++)
                if (strv_push(ret, *s) < 0) {
                        strv_free(*ret);
                        *ret = NULL;
                        return -ENOMEM;
                }
        return 0;
}

static bool health_path_valid(const char *p) {
        if (!p || p[0] != '/' || strlen(p) > 256)
                return false;
        for (const char *s = p; *s; s++)
                if ((unsigned char)*s <= ' ' || *s == 0x7f)
                        return false;
        return true;
}

static bool is_abs(const char *p) {
        return p && p[0] == '/';
}

void organism_free(struct organism *o) {
        if (!o)
                return;
        organism_stop(o);
        if (o->pump_started) {
                pthread_mutex_lock(&o->lock);
                o->pump_stop = true;
                pthread_mutex_unlock(&o->lock);
                if (o->pipe_w >= 0)
                        close(o->pipe_w);
                o->pipe_w = -1;
                pthread_join(o->pump, NULL);
        }
        if (o->pipe_r >= 0)
                close(o->pipe_r);
        if (o->pipe_w >= 0)
                close(o->pipe_w);
        rotlog_free(o->log);
        pthread_cond_destroy(&o->cond);
        pthread_mutex_destroy(&o->lock);
        if (o->database_url) {
                secure_zero(o->database_url, strlen(o->database_url));
                free(o->database_url);
        }
        free(o->seed_dir);
        free(o->workspace);
        free(o->build_cmd);
        free(o->run_cmd);
        free(o->health_path);
        free(o->pg_socket_dir);
        free(o->bridge_path);
        free(o->run_dir);
        free(o->log_path);
        free(o->cache_dir);
        free(o->socket_path);
        free(o->label);
        free(o->build_label);
        free(o->reason);
        strv_free(o->evolvable);
        env_free(o->extra_env);
        free(o);
}

static int organism_copy_config(struct organism *o, const struct organism_config *cfg) {
        int r;
        if ((r = dup_opt(cfg->seed_dir, &o->seed_dir)) < 0 ||
            (r = dup_opt(cfg->workspace ? cfg->workspace : cfg->seed_dir, &o->workspace)) < 0 ||
            (r = dup_opt(cfg->build_cmd, &o->build_cmd)) < 0 ||
            (r = dup_opt(cfg->run_cmd, &o->run_cmd)) < 0 ||
            (r = dup_opt(cfg->health_path ? cfg->health_path : "/healthz", &o->health_path)) < 0 ||
            (r = dup_opt(cfg->database_url, &o->database_url)) < 0 ||
            (r = dup_opt(cfg->pg_socket_dir, &o->pg_socket_dir)) < 0 ||
            (r = dup_opt(cfg->bridge_path, &o->bridge_path)) < 0 ||
            (r = strv_copy(cfg->evolvable, &o->evolvable)) < 0 || (r = strv_copy(cfg->extra_env, &o->extra_env)) < 0)
                return r;
        o->run_dir = cfg->run_dir ? strdup(cfg->run_dir) : path_join(cfg->seed_dir, ".seed/organism");
        o->log_path = cfg->log_path ? strdup(cfg->log_path) : path_join(cfg->seed_dir, ".seed/logs/organism.log");
        o->cache_dir = cfg->cache_dir ? strdup(cfg->cache_dir) : path_join(cfg->seed_dir, ".seed/cache");
        if (!o->run_dir || !o->log_path || !o->cache_dir)
                return -ENOMEM;
        o->socket_path = path_join(o->run_dir, "http.sock");
        if (!o->socket_path)
                return -ENOMEM;
        o->egress = cfg->egress;
        const char *label = cfg->label ? cfg->label : "organism";
        if (!(o->label = strndup(label, 48)) || xasprintf(&o->build_label, "%s build", o->label) < 0)
                return -ENOMEM;
        o->port = cfg->port;
        o->backoff_ms_base = cfg->backoff_ms_base > 0 ? cfg->backoff_ms_base : BACKOFF_DEFAULT_MS;
        o->health_timeout_ms = cfg->health_timeout_ms > 0 ? cfg->health_timeout_ms : HEALTH_DEFAULT_MS;
        o->build_timeout_ms = cfg->build_timeout_ms > 0 ? cfg->build_timeout_ms : BUILD_DEFAULT_MS;
        o->on_state = cfg->on_state;
        o->userdata = cfg->userdata;
        return 0;
}

int organism_new(const struct organism_config *cfg, struct organism **ret) {
        if (!cfg || !is_abs(cfg->seed_dir) || (cfg->workspace && !is_abs(cfg->workspace)) ||
            strempty(cfg->build_cmd) || strempty(cfg->run_cmd) ||
            !is_abs(cfg->bridge_path) || cfg->port < 1 || cfg->port > 65535 ||
            (cfg->health_path && !health_path_valid(cfg->health_path)) ||
            (cfg->run_dir && !is_abs(cfg->run_dir)) || (cfg->log_path && !is_abs(cfg->log_path)) ||
            (cfg->cache_dir && !is_abs(cfg->cache_dir)) || (cfg->pg_socket_dir && !is_abs(cfg->pg_socket_dir)))
                return log_error_errno(-EINVAL, "organism: invalid configuration");
        struct organism *o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        o->pipe_r = o->pipe_w = -1;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&o->cond, &ca);
        pthread_condattr_destroy(&ca);
        pthread_mutex_init(&o->lock, NULL);
        o->state = ORGANISM_STOPPED;
        int r = organism_copy_config(o, cfg);
        if (r < 0) {
                organism_free(o);
                return r;
        }
        *ret = o;
        return 0;
}

/* Folders, the log and its pump: once per organism. */
static int organism_prepare(struct organism *o) {
        int r;
        _cleanup_free_ char *log_dir = strdup(o->log_path);
        if (!log_dir)
                return -ENOMEM;
        char *slash = strrchr(log_dir, '/');
        if (slash && slash != log_dir)
                *slash = 0;
        if ((r = mkdir_p(log_dir, 0700)) < 0)
                return log_error_errno(r, "organism: cannot create '%s': %m", log_dir);
        if ((r = mkdir_p(o->run_dir, 0700)) < 0 || (r = mkdir_mode(o->run_dir, 0700)) < 0)
                return log_error_errno(r, "organism: cannot create '%s': %m", o->run_dir);
        if ((r = mkdir_p(o->cache_dir, 0700)) < 0)
                return log_error_errno(r, "organism: cannot create '%s': %m", o->cache_dir);
        if (o->pump_started)
                return 0;
        if (!o->log && (r = rotlog_open(o->log_path, LOG_MAX_BYTES, LOG_KEEP, &o->log)) < 0)
                return log_error_errno(r, "organism: cannot open log '%s': %m", o->log_path);
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) < 0)
                return log_error_errno(-errno, "organism: pipe: %m");
        o->pipe_r = fds[0];
        o->pipe_w = fds[1];
        if ((r = -pthread_create(&o->pump, NULL, pump_main, o)) < 0)
                return log_error_errno(r, "organism: cannot start the log thread: %m");
        o->pump_started = true;
        return 0;
}

int organism_start(struct organism *o) {
        pthread_mutex_lock(&o->lock);
        bool busy = o->thread_started && !o->thread_done;
        bool joinable = o->thread_started && o->thread_done;
        pthread_mutex_unlock(&o->lock);
        if (busy)
                return -EBUSY;
        if (joinable) {
                pthread_join(o->thread, NULL);
                o->thread_started = false;
        }
        if (access(o->bridge_path, X_OK) < 0)
                return log_error_errno(-errno, "organism: bridge '%s' is not executable: %m", o->bridge_path);
        int r = organism_prepare(o);
        if (r < 0)
                return r;
        pthread_mutex_lock(&o->lock);
        o->stopping = false;
        o->thread_done = false;
        o->n_crashes = 0;
        pthread_mutex_unlock(&o->lock);
        set_state(o, ORGANISM_BUILDING, "building");
        if ((r = -pthread_create(&o->thread, NULL, supervise, o)) < 0) {
                set_state(o, ORGANISM_STOPPED, "cannot start");
                return log_error_errno(r, "organism: cannot start the supervising thread: %m");
        }
        o->thread_started = true;
        return 0;
}

void organism_stop(struct organism *o) {
        if (!o || !o->thread_started)
                return;
        pthread_mutex_lock(&o->lock);
        o->stopping = true;
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
        pthread_join(o->thread, NULL);
        o->thread_started = false;
        set_state(o, ORGANISM_STOPPED, "stopped");
}

int organism_set_env(struct organism *o, char *const *env) {
        char **copy = NULL;
        for (char *const *e = env; e && *e; e++)
                if (strv_push(&copy, *e) < 0) {
                        env_free(copy);
                        return -ENOMEM;
                }
        pthread_mutex_lock(&o->lock);
        char **old = o->extra_env;
        o->extra_env = copy;
        o->respawn = o->thread_started && !o->thread_done;
        pthread_cond_broadcast(&o->cond);
        pthread_mutex_unlock(&o->lock);
        env_free(old);
        return 0;
}

int organism_restart(struct organism *o) {
        organism_stop(o);
        return organism_start(o);
}

int organism_set_workspace(struct organism *o, const char *workspace) {
        const char *w = workspace ? workspace : o->seed_dir;
        if (!is_abs(w))
                return -EINVAL;
        pthread_mutex_lock(&o->lock);
        bool busy = o->thread_started && !o->thread_done;
        pthread_mutex_unlock(&o->lock);
        if (busy)
                return -EBUSY;
        if (streq(w, o->workspace))
                return 0;
        char *copy = strdup(w);
        if (!copy)
                return -ENOMEM;
        free(o->workspace);
        o->workspace = copy;
        return 0;
}

const char *organism_workspace(struct organism *o) {
        return o->workspace;
}

enum organism_state organism_state(struct organism *o) {
        pthread_mutex_lock(&o->lock);
        enum organism_state s = o->state;
        pthread_mutex_unlock(&o->lock);
        return s;
}

const char *organism_socket(struct organism *o) {
        return o->socket_path;
}

int organism_crash_count(struct organism *o) {
        pthread_mutex_lock(&o->lock);
        int64_t now = now_ms();
        int n = 0;
        for (size_t i = 0; i < o->n_crashes; i++)
                if (now - o->crashes[i] < CRASH_WINDOW_MS)
                        n++;
        pthread_mutex_unlock(&o->lock);
        return n;
}

int organism_reason(struct organism *o, char **ret) {
        pthread_mutex_lock(&o->lock);
        char *s = strdup(o->reason ? o->reason : organism_state_name(o->state));
        pthread_mutex_unlock(&o->lock);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int organism_wait_ready(struct organism *o, int timeout_ms) {
        struct timespec ts = deadline_ts(timeout_ms > 0 ? timeout_ms : 0);
        pthread_mutex_lock(&o->lock);
        int r = 0;
        for (;;) {
                if (o->state == ORGANISM_RUNNING) {
                        r = 0;
                        break;
                }
                if (o->state == ORGANISM_DOWN) {
                        r = -EIO;
                        break;
                }
                if (o->state == ORGANISM_STOPPED) {
                        r = -ESRCH;
                        break;
                }
                if (pthread_cond_timedwait(&o->cond, &o->lock, &ts) == ETIMEDOUT) {
                        r = o->state == ORGANISM_RUNNING ? 0 : -ETIMEDOUT;
                        break;
                }
        }
        pthread_mutex_unlock(&o->lock);
        return r;
}
