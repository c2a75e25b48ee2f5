/* The supervisor's process work: the run lock, starting kernels with the
 * sockets and secrets, waiting for them and forwarding a stop, carrying out
 * what the policy (policy.c) decides after each end, and the detached output
 * pump. */
#include "supervisor/supervisor.h"
#include "supervisor/supervisor-internal.h"

#include "base/fileio.h"
#include "base/log.h"
#include "base/proc.h"
#include "secrets/secrets.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#define SUPERVISOR_LOG_BYTES (10u << 20)
#define SUPERVISOR_LOG_KEEP 3

int supervisor_lock(const char *seed_dir, int *ret_fd) {
        _cleanup_free_ char *p = path_join(seed_dir, ".seed/run.lock");
        if (!p)
                return -ENOMEM;
        int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

static const char *build_dir(const struct supervisor_options *o) {
        return o->in_container ? SUPERVISOR_BUILD_DIR_CONTAINER : SUPERVISOR_BUILD_DIR;
}

/* What the loop keeps from one kernel to the next. */
struct loop_state {
        struct secrets *secrets; /* owned: the CLI's, merged with each restart request's */
        char **hide_paths;       /* owned: the env files' paths, every kernel hides them */
        int signal_fd;           /* the stop signals and SIGCHLD */
        int control_fd;          /* the control channel, or -1 */
};

static void loop_state_done(const struct supervisor_options *o, struct loop_state *st) {
        secrets_free(st->secrets);
        strv_free(st->hide_paths);
        if (st->signal_fd >= 0)
                close(st->signal_fd);
        supervisor_control_close(o->seed_dir, st->control_fd);
        *st = (struct loop_state){.signal_fd = -1, .control_fd = -1};
}

static int loop_state_init(const struct supervisor_options *o, const sigset_t *mask, struct loop_state *ret) {
        struct loop_state st = {.signal_fd = -1, .control_fd = -1};
        int r = secrets_new(&st.secrets);
        if (r >= 0)
                r = secrets_merge(st.secrets, o->secrets);
        for (char *const *h = o->hide_paths; r >= 0 && h && *h; h++)
                r = strv_push(&st.hide_paths, *h);
        if (r >= 0 && (st.signal_fd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
                r = -errno;
        if (r < 0) {
                loop_state_done(o, &st);
                return r;
        }
        /* Without it the Seed still runs; only `seed restart` cannot reach it. */
        int c = supervisor_control_open(o->seed_dir, &st.control_fd);
        if (c < 0)
                log_warn_errno(c, "no control channel in %s/%s (seed restart will not reach this Seed): %m",
                               o->seed_dir, SUPERVISOR_CONTROL_DIR);
        *ret = st;
        return 0;
}

/* Starts one kernel from b: the secrets go through a pipe (--secrets-fd),
 * the sockets are inherited by this child alone (--listen-fd). */
static int spawn_kernel(const struct supervisor_options *o, const struct loop_state *st,
                        const struct supervisor_bins *b, const struct ctl_listen *sockets, pid_t *ret_pid) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        char fdnum[16], lfd[CTL_LISTEN_MAX][16];
        int keep[1 + CTL_LISTEN_MAX] = {p[0]};
        snprintf(fdnum, sizeof fdnum, "%d", p[0]);
        _cleanup_free_ char **argv = calloc(11 + 2 * CTL_LISTEN_MAX + 2 * strv_length(st->hide_paths), sizeof *argv);
        if (!argv) {
                close(p[0]);
                close(p[1]);
                return -ENOMEM;
        }
        size_t n = 0;
        char *fixed[] = {b->kernel, "--dir", (char *)o->seed_dir, "--secrets-fd", fdnum, "--bridge", b->bridge,
                         "--addr", (char *)o->addr};
        for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
                argv[n++] = fixed[i];
        /* The same sockets for every kernel: inherited (only by this child),
         * so a restart never lets the port go. */
        for (size_t i = 0; i < sockets->n; i++) {
                snprintf(lfd[i], sizeof lfd[i], "%d", sockets->fd[i]);
                keep[1 + i] = sockets->fd[i];
                argv[n++] = "--listen-fd";
                argv[n++] = lfd[i];
        }
        if (o->in_container)
                argv[n++] = "--in-container";
        for (char **h = st->hide_paths; h && *h; h++) {
                argv[n++] = "--hide";
                argv[n++] = *h;
        }
        argv[n] = NULL;
        int r = proc_spawn(&(struct proc_opts){.argv = argv, .envp = o->in_container ? supervisor_container_env : supervisor_fixed_env,
                                               .cwd = o->seed_dir,
                                               .stdin_fd = -1, .out_fd = STDERR_FILENO, .keep_fds = keep,
                                               .n_keep_fds = 1 + sockets->n},
                           ret_pid);
        close(p[0]);
        if (r == 0)
                r = secrets_write_fd(st->secrets, p[1]);
        close(p[1]);
        return r;
}

/* SIGTERM, then SIGKILL to its group after SUPERVISOR_STOP_GRACE_MS. */
static void stop_kernel(pid_t pid) {
        kill(pid, SIGTERM);
        if (proc_wait(pid, SUPERVISOR_STOP_GRACE_MS) == -ETIMEDOUT) {
                log_warn("the kernel did not stop within 30 s; killing it");
                proc_kill_group(pid, SIGKILL);
                proc_wait(pid, -1);
        }
}

static bool strv_has(char *const *v, const char *s) {
        for (; v && *v; v++)
                if (streq(*v, s))
                        return true;
        return false;
}

/* Adds paths to hide (deduplicated) unless that makes too many for a kernel. */
static int hide_more(char ***hide, char *const *more) {
        _cleanup_strv_free_ char **next = NULL;
        for (char **h = *hide; h && *h; h++)
                if (strv_push(&next, *h) < 0)
                        return -ENOMEM;
        for (char *const *m = more; m && *m; m++) {
                if (strv_has(next, *m))
                        continue;
                if (strv_length(next) >= SUPERVISOR_CONTROL_HIDE_MAX)
                        return -E2BIG;
                if (strv_push(&next, *m) < 0)
                        return -ENOMEM;
        }
        strv_free(*hide);
        *hide = TAKE_PTR(next);
        return 0;
}

/* Reads a request from the control channel and takes it in: true when the
 * kernel (pid) is to be restarted. A request that cannot be taken in is
 * answered with the reason and changes nothing. */
static bool take_request(struct loop_state *st, pid_t pid) {
        struct supervisor_request q = {0};
        _cleanup_close_ int conn = -1;
        int r = supervisor_control_read(st->control_fd, &conn, &q);
        if (r == -EAGAIN)
                return false;
        if (r < 0) {
                log_warn_errno(r, "refused a request on the control channel: %m");
                return false;
        }
        _cleanup_strv_free_ char **hide = NULL;
        r = hide_more(&hide, st->hide_paths);
        if (r >= 0)
                r = hide_more(&hide, q.hide_paths);
        if (r >= 0)
                r = secrets_merge(st->secrets, q.secrets); /* all or nothing */
        size_t given = secrets_count(q.secrets);
        supervisor_request_done(&q);
        if (r < 0) {
                (void)supervisor_control_answer(conn, r == -E2BIG ? "error too many secrets or env files in all\n"
                                                                  : "error out of memory\n");
                log_warn_errno(r, "could not take the secrets of a restart request: %m");
                return false;
        }
        strv_free(st->hide_paths);
        st->hide_paths = TAKE_PTR(hide);
        char answer[32];
        snprintf(answer, sizeof answer, "ok %d\n", (int)pid);
        (void)supervisor_control_answer(conn, answer);
        log_info("restarting the kernel (pid %d) as asked (seed restart), with %zu secret%s given", (int)pid, given,
                 given == 1 ? "" : "s");
        return true;
}

/* Waits for the kernel to end, forwarding a stop request and carrying out
 * a restart request (the kernel has stopped when this returns), and keeps
 * fresh binaries as the last good ones once they ran
 * SUPERVISOR_GOOD_AFTER_MS. Fills ret's end and early; *ret_code: the exit
 * code. */
static void wait_kernel(const char *seed_dir, struct loop_state *st, struct supervisor_bins *b, pid_t pid,
                        struct supervisor_outcome *ret, int *ret_code) {
        int64_t started = now_ms();
        for (;;) {
                struct pollfd pfd[2] = {{.fd = st->signal_fd, .events = POLLIN},
                                        {.fd = st->control_fd, .events = POLLIN}};
                (void)poll(pfd, st->control_fd >= 0 ? 2 : 1, 1000);
                struct signalfd_siginfo si;
                int sig = 0;
                while (read(st->signal_fd, &si, sizeof si) == (ssize_t)sizeof si)
                        if (si.ssi_signo != SIGCHLD)
                                sig = (int)si.ssi_signo;
                if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
                        log_info("stopping the kernel (pid %d)", (int)pid);
                        stop_kernel(pid);
                        ret->end = SUPERVISOR_END_STOPPED;
                        *ret_code = 0;
                        return;
                }
                int status;
                pid_t k = waitpid(pid, &status, WNOHANG);
                if (k == pid) {
                        ret->early = now_ms() - started < SUPERVISOR_GOOD_AFTER_MS;
                        *ret_code = proc_exit_code(status);
                        ret->end = supervisor_end_of_exit(*ret_code);
                        return;
                }
                if (st->control_fd >= 0 && (pfd[1].revents & POLLIN) && take_request(st, pid)) {
                        stop_kernel(pid);
                        ret->end = SUPERVISOR_END_ASKED;
                        *ret_code = 0;
                        return;
                }
                if (b->fresh && now_ms() - started >= SUPERVISOR_GOOD_AFTER_MS)
                        supervisor_bins_promote(seed_dir, b);
        }
}

static int run_loop(const struct supervisor_options *o, struct loop_state *st, struct supervisor_bins *b,
                    const struct ctl_listen *sockets) {
        int crashes = 0;
        for (;;) {
                pid_t pid;
                int r = spawn_kernel(o, st, b, sockets, &pid);
                if (r < 0)
                        return log_error_errno(r, "cannot start the kernel: %m");
                log_info("kernel started (pid %d, %s)", (int)pid, b->fresh ? "new build" : "last good build");
                struct supervisor_outcome out = {.fresh = b->fresh, .crashes = crashes};
                int code = 0;
                wait_kernel(o->seed_dir, st, b, pid, &out, &code);
                out.fresh = b->fresh; /* promoted while it ran */
                if (out.end == SUPERVISOR_END_CRASHED)
                        log_error("the kernel exited with code %d%s", code,
                                  out.early ? " within 60 s of starting" : "");
                struct supervisor_decision d = supervisor_decide(&out);
                log_debug("supervisor: %s (%s)", supervisor_action_name(d.action), d.why);
                switch (d.action) {
                case SUPERVISOR_STOP: return 0;
                case SUPERVISOR_START_AGAIN: break;
                case SUPERVISOR_REBUILD:
                        log_info("the kernel asked to be rebuilt and restarted");
                        supervisor_bins_done(b);
                        if ((r = supervisor_bins_load(o->seed_dir, build_dir(o), b)) < 0)
                                return r;
                        crashes = 0;
                        break;
                case SUPERVISOR_FALL_BACK:
                        supervisor_bins_done(b);
                        if ((r = supervisor_bins_last_good(o->seed_dir, b)) < 0) {
                                supervisor_bins_done(b);
                                return r;
                        }
                        log_warn("falling back to the last good kernel");
                        break;
                case SUPERVISOR_RESTART: {
                        crashes++;
                        struct timespec ts = {d.delay_ms / 1000, (long)(d.delay_ms % 1000) * 1000000};
                        nanosleep(&ts, NULL);
                        break;
                }
                case SUPERVISOR_GIVE_UP:
                default: return -ECHILD;
                }
        }
}

int supervisor_loop(const struct supervisor_options *o, struct supervisor_bins *b, const struct ctl_listen *sockets) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        struct loop_state st;
        int r = loop_state_init(o, &mask, &st);
        if (r < 0)
                return log_error_errno(r, "cannot set up the supervisor: %m");
        r = run_loop(o, &st, b, sockets);
        loop_state_done(o, &st);
        return r;
}

/* A detached supervisor's stdout and stderr (and so the kernel's): a pipe
 * that a small process copies into .seed/logs/supervisor.log, rotated like
 * every log (10 MiB x 3). It ends when the last writer is gone. Called
 * while the supervisor is still single-threaded. */
static void detach_output(const char *seed_dir, int lock) {
        _cleanup_free_ char *slog = path_join(seed_dir, ".seed/logs/supervisor.log");
        struct rotlog *l = NULL;
        int fds[2];
        if (!slog || rotlog_open(slog, SUPERVISOR_LOG_BYTES, SUPERVISOR_LOG_KEEP, &l) < 0)
                return;
        if (pipe2(fds, O_CLOEXEC) < 0) {
                rotlog_free(l);
                return;
        }
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        pid_t pump = devnull >= 0 ? fork() : -1;
        if (pump == 0) {
                /* Not the caller's terminal or pipes: `seed run --detach`
                 * must not wait for this process to close them. */
                dup2(devnull, STDIN_FILENO);
                dup2(devnull, STDOUT_FILENO);
                dup2(devnull, STDERR_FILENO);
                close(fds[1]);
                close(lock);
                signal(SIGTERM, SIG_IGN); /* drain to the end: it ends with the writers */
                signal(SIGINT, SIG_IGN);
                signal(SIGHUP, SIG_IGN);
                rotlog_pump(l, fds[0], 0);
                rotlog_free(l);
                _exit(0);
        }
        rotlog_free(l);
        close(fds[0]);
        if (pump > 0) {
                dup2(devnull, STDIN_FILENO);
                dup2(fds[1], STDOUT_FILENO);
                dup2(fds[1], STDERR_FILENO);
        }
        if (devnull >= 0)
                close(devnull);
        close(fds[1]);
}

/* The forked supervisor: never returns. */
__attribute__((noreturn)) static void supervisor_main(const struct supervisor_options *o, int lock, struct supervisor_bins *b,
                                       struct ctl_listen *sockets) {
        setsid();
        prctl(PR_SET_DUMPABLE, 0); /* it holds the secrets for every restart */
        if (o->detach)
                detach_output(o->seed_dir, lock);
        _cleanup_free_ char *pidp = o->in_container ? NULL : path_join(o->seed_dir, ".seed/supervisor.pid");
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
        if (pidp)
                (void)write_file_atomic(pidp, pid, (size_t)n, 0644);
        int r = supervisor_loop(o, b, sockets);
        if (pidp)
                unlink(pidp);
        supervisor_bins_done(b);
        ctl_listen_close(sockets);
        _exit(r < 0 ? SUPERVISOR_EXIT_FAILURE : SUPERVISOR_EXIT_OK);
}

int supervisor_start(const struct supervisor_options *o, int lock_fd, pid_t *ret_pid) {
        _cleanup_close_ int lock = lock_fd;
        if (!o || !o->seed_dir || !o->addr || lock < 0)
                return -EINVAL;
        /* Before the build: a taken port refuses the start at once. */
        struct ctl_listen sockets = CTL_LISTEN_INIT;
        int r = ctl_listen_open(o->addr, &sockets);
        if (r < 0)
                return r;
        struct supervisor_bins bins = {0};
        if ((r = supervisor_bins_load(o->seed_dir, build_dir(o), &bins)) < 0) {
                ctl_listen_close(&sockets);
                return r;
        }
        fflush(NULL);
        pid_t sup = fork();
        if (sup == 0)
                supervisor_main(o, lock, &bins, &sockets);
        r = sup < 0 ? -errno : 0;
        supervisor_bins_done(&bins);
        ctl_listen_close(&sockets); /* the supervisor holds them */
        if (r < 0)
                return r;
        *ret_pid = sup;
        return 0;
}

static void stop_signals(sigset_t *ret) {
        sigemptyset(ret);
        sigaddset(ret, SIGINT);
        sigaddset(ret, SIGTERM);
}

void supervisor_hold_stop_signals(void) {
        sigset_t mask;
        stop_signals(&mask);
        sigprocmask(SIG_BLOCK, &mask, NULL);
}

int supervisor_wait(pid_t pid) {
        sigset_t mask;
        stop_signals(&mask);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        for (;;) {
                struct timespec ts = {1, 0};
                int sig = sigtimedwait(&mask, NULL, &ts);
                if (sig == SIGINT || sig == SIGTERM)
                        kill(pid, SIGTERM);
                int status;
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return proc_exit_code(status);
        }
}
