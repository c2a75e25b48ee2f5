/* `seed run`: build the kernel from the Seed's own source, start it, and
 * supervise it (exit 75 = rebuild and restart; a kernel that fails to build
 * or dies within 60 s falls back to the last good kernel binary). */
#include "app/app.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "base/proc.h"
#include "cli/cli.h"
#include "config/config.h"
#include "ctl/listen.h"
#include "httpc/httpc.h"
#include "secrets/secrets.h"

#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <time.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define GOOD_AFTER_MS (60 * 1000)
#define STOP_GRACE_MS (30 * 1000)
#define READY_TIMEOUT_MS (240 * 1000)
#define SUPERVISOR_LOG_BYTES (10u << 20)
#define SUPERVISOR_LOG_KEEP 3

/* The fixed environment of kernel builds and of the kernel: nothing is taken
 * from the caller's (no CC, CFLAGS, PKG_CONFIG_PATH, secrets …). */
static char *const fixed_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent",
                                  "TZ=UTC", NULL};

struct kernel_bins {
        char *kernel, *bridge;
        bool fresh; /* built just now, not yet known good */
};

static void kernel_bins_done(struct kernel_bins *b) {
        free(b->kernel);
        free(b->bridge);
        *b = (struct kernel_bins){0};
}

static int run_logged(const char *seed_dir, char *const *argv, const char *log_name, int timeout_ms) {
        _cleanup_free_ char *logp = NULL;
        if (xasprintf(&logp, "%s/.seed/logs/%s", seed_dir, log_name) < 0)
                return -ENOMEM;
        _cleanup_close_ int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .envp = fixed_env, .cwd = seed_dir, .stdin_fd = -1,
                                             .out_fd = fd, .timeout_ms = timeout_ms},
                         &res);
        if (r < 0)
                return r;
        return res.exit_code == 0 ? 0 : -EIO;
}

static const char *find_tool(const char *a, const char *b) {
        return access(a, X_OK) == 0 ? a : b;
}

/* meson setup (once) + ninja in .seed/kernel-build, with fixed settings. */
static int build_kernel(const char *seed_dir, struct kernel_bins *ret) {
        _cleanup_free_ char *bdir = path_join(seed_dir, ".seed/kernel-build");
        _cleanup_free_ char *ninja_file = path_join(seed_dir, ".seed/kernel-build/build.ninja");
        if (!bdir || !ninja_file)
                return -ENOMEM;
        const char *meson = find_tool("/usr/bin/meson", "/usr/local/bin/meson");
        const char *ninja = find_tool("/usr/bin/ninja", "/usr/local/bin/ninja");
        int r;
        fprintf(stderr, "seed: building the kernel from %s (log: .seed/logs/kernel-build.log)\n", seed_dir);
        if (!path_exists(ninja_file)) {
                char *setup[] = {(char *)meson, "setup", bdir, (char *)seed_dir, "--buildtype=release",
                                 "-Dtests=false", "--wrap-mode=nodownload", "--prefix=/nonexistent", NULL};
                if ((r = run_logged(seed_dir, setup, "kernel-build.log", 10 * 60 * 1000)) < 0) {
                        rm_rf(bdir);
                        return r;
                }
        }
        char *build[] = {(char *)ninja, "-C", bdir, "cmd/seed-kernel/seed-kernel", "cmd/seed-bridge/seed-bridge",
                         NULL};
        if ((r = run_logged(seed_dir, build, "kernel-build.log", 20 * 60 * 1000)) < 0)
                return r;
        ret->kernel = path_join(bdir, "cmd/seed-kernel/seed-kernel");
        ret->bridge = path_join(bdir, "cmd/seed-bridge/seed-bridge");
        ret->fresh = true;
        return ret->kernel && ret->bridge ? 0 : -ENOMEM;
}

static int good_bins(const char *seed_dir, struct kernel_bins *ret) {
        ret->kernel = path_join(seed_dir, ".seed/kernel-good/seed-kernel");
        ret->bridge = path_join(seed_dir, ".seed/kernel-good/seed-bridge");
        ret->fresh = false;
        if (!ret->kernel || !ret->bridge)
                return -ENOMEM;
        return access(ret->kernel, X_OK) == 0 && access(ret->bridge, X_OK) == 0 ? 0 : -ENOENT;
}

static int copy_bin(const char *from, const char *to) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        int r = read_file(from, 256u << 20, &data, &len);
        return r < 0 ? r : write_file_atomic(to, data, len, 0755);
}

/* The binaries ran for a minute: keep them as the last good kernel. */
static void promote_bins(const char *seed_dir, struct kernel_bins *b) {
        _cleanup_free_ char *dir = path_join(seed_dir, ".seed/kernel-good");
        _cleanup_free_ char *k = path_join(seed_dir, ".seed/kernel-good/seed-kernel");
        _cleanup_free_ char *br = path_join(seed_dir, ".seed/kernel-good/seed-bridge");
        if (!dir || !k || !br || mkdir_mode(dir, 0700) < 0)
                return;
        if (copy_bin(b->kernel, k) < 0 || copy_bin(b->bridge, br) < 0)
                log_warn("could not keep the kernel as the last good one");
        b->fresh = false;
}

static int load_bins(const char *seed_dir, struct kernel_bins *ret) {
        int r = build_kernel(seed_dir, ret);
        if (r == 0)
                return 0;
        kernel_bins_done(ret);
        if (good_bins(seed_dir, ret) == 0) {
                log_warn("the kernel did not build (see .seed/logs/kernel-build.log); using the last good kernel");
                return 0;
        }
        kernel_bins_done(ret);
        log_error("the kernel did not build and there is no last good kernel; see %s/.seed/logs/kernel-build.log",
                  seed_dir);
        return r;
}

/* What every kernel this supervisor starts gets: the control plane's
 * sockets (bound once, in cli_run_seed) and the address they serve. */
struct kernel_listen {
        struct ctl_listen sockets;
        char *addr;
};

static int spawn_kernel(const struct cli_run_options *o, const struct kernel_bins *b, const struct kernel_listen *l,
                        pid_t *ret_pid) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        char fdnum[16], lfd[CTL_LISTEN_MAX][16];
        int keep[1 + CTL_LISTEN_MAX] = {p[0]};
        snprintf(fdnum, sizeof fdnum, "%d", p[0]);
        _cleanup_free_ char **argv = calloc(10 + 2 * CTL_LISTEN_MAX + 2 * strv_length(o->hide_paths), sizeof *argv);
        if (!argv) {
                close(p[0]);
                close(p[1]);
                return -ENOMEM;
        }
        size_t n = 0;
        char *fixed[] = {b->kernel, "--dir", (char *)o->seed_dir, "--secrets-fd", fdnum, "--bridge", b->bridge,
                         "--addr", l->addr};
        for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
                argv[n++] = fixed[i];
        /* The same sockets for every kernel: inherited (only by this child),
         * so a restart never lets the port go. */
        for (size_t i = 0; i < l->sockets.n; i++) {
                snprintf(lfd[i], sizeof lfd[i], "%d", l->sockets.fd[i]);
                keep[1 + i] = l->sockets.fd[i];
                argv[n++] = "--listen-fd";
                argv[n++] = lfd[i];
        }
        for (char *const *h = o->hide_paths; h && *h; h++) {
                argv[n++] = "--hide";
                argv[n++] = *h;
        }
        argv[n] = NULL;
        int r = proc_spawn(&(struct proc_opts){.argv = argv, .envp = fixed_env, .cwd = o->seed_dir, .stdin_fd = -1,
                                               .out_fd = STDERR_FILENO, .keep_fds = keep,
                                               .n_keep_fds = 1 + l->sockets.n},
                           ret_pid);
        close(p[0]);
        if (r == 0 && o->secrets)
                r = secrets_write_fd(o->secrets, p[1]);
        close(p[1]);
        return r;
}

/* Binds the control plane's port once, for the supervisor's whole life:
 * --addr or seed.yaml's server.addr, never another port when it is taken
 * (ctl_listen_open says which address, and how to choose another). */
static int bind_control_plane(const struct cli_run_options *o, struct kernel_listen *ret) {
        _cleanup_(cfg_freep) struct cfg *cfg = NULL;
        const char *addr = o->addr;
        if (!addr) {
                _cleanup_free_ char *path = path_join(o->seed_dir, "seed.yaml"), *err = NULL;
                if (!path)
                        return -ENOMEM;
                int r = cfg_load(path, &cfg, &err);
                if (r < 0) {
                        fprintf(stderr, "seed: %s\n", err ? err : "cannot load seed.yaml");
                        return r;
                }
                addr = cfg->server.addr;
        }
        _cleanup_free_ char *copy = strdup(addr);
        if (!copy)
                return -ENOMEM;
        int r = ctl_listen_open(addr, &ret->sockets);
        if (r < 0)
                return r;
        ret->addr = TAKE_PTR(copy);
        return 0;
}

static void kernel_listen_done(struct kernel_listen *l) {
        ctl_listen_close(&l->sockets);
        free(l->addr);
        l->addr = NULL;
}

/* Waits for the kernel to exit, forwarding a stop request. Returns its exit
 * code (*ret_early: within 60 s of starting), or -EINTR when we were asked to
 * stop (the kernel has stopped by then). */
static int supervise_once(const char *seed_dir, struct kernel_bins *b, pid_t pid, const sigset_t *mask,
                          bool *ret_early) {
        int64_t started = now_ms();
        for (;;) {
                struct timespec ts = {1, 0};
                int sig = sigtimedwait(mask, NULL, &ts);
                if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
                        log_info("stopping the kernel (pid %d)", (int)pid);
                        kill(pid, SIGTERM);
                        if (proc_wait(pid, STOP_GRACE_MS) == -ETIMEDOUT) {
                                log_warn("the kernel did not stop within 30 s; killing it");
                                proc_kill_group(pid, SIGKILL);
                                proc_wait(pid, -1);
                        }
                        return -EINTR;
                }
                int status;
                pid_t k = waitpid(pid, &status, WNOHANG);
                if (k == pid) {
                        *ret_early = now_ms() - started < GOOD_AFTER_MS;
                        return proc_exit_code(status);
                }
                if (b->fresh && now_ms() - started >= GOOD_AFTER_MS)
                        promote_bins(seed_dir, b);
        }
}

/* The supervisor: runs in its own session until the Seed is stopped. */
static int supervise(const struct cli_run_options *o, struct kernel_bins *b, const struct kernel_listen *l) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        int crashes = 0;
        for (;;) {
                pid_t pid;
                int r = spawn_kernel(o, b, l, &pid);
                if (r < 0)
                        return log_error_errno(r, "cannot start the kernel: %m");
                log_info("kernel started (pid %d, %s)", (int)pid, b->fresh ? "new build" : "last good build");
                bool early = false;
                int code = supervise_once(o->seed_dir, b, pid, &mask, &early);
                if (code == -EINTR)
                        return CLI_EXIT_OK;
                if (code == APP_EXIT_OK)
                        return CLI_EXIT_OK;
                if (code == APP_EXIT_RESTART) {
                        log_info("the kernel asked to be rebuilt and restarted");
                        kernel_bins_done(b);
                        if (load_bins(o->seed_dir, b) < 0)
                                return CLI_EXIT_FAILURE;
                        crashes = 0;
                        continue;
                }
                log_error("the kernel exited with code %d%s", code, early ? " within 60 s of starting" : "");
                if (early && b->fresh) {
                        kernel_bins_done(b);
                        if (good_bins(o->seed_dir, b) == 0) {
                                log_warn("falling back to the last good kernel");
                                continue;
                        }
                        kernel_bins_done(b);
                        return CLI_EXIT_FAILURE;
                }
                if (early || ++crashes > 3)
                        return CLI_EXIT_FAILURE;
                struct timespec ts = {crashes * 2, 0};
                nanosleep(&ts, NULL);
        }
}

static int open_run_lock(const char *seed_dir, int *ret_fd) {
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

static int wait_ready(const char *seed_dir, pid_t supervisor) {
        int64_t deadline = now_ms() + READY_TIMEOUT_MS;
        while (now_ms() < deadline) {
                int status;
                if (waitpid(supervisor, &status, WNOHANG) == supervisor)
                        return -ECHILD;
                _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
                _cleanup_free_ char *health = NULL;
                if (cli_kernel_endpoint(seed_dir, &e) == 0 && xasprintf(&health, "%s/_seed/healthz", e.url) == 0) {
                        struct httpc_response res = {0};
                        if (httpc_do(&(struct httpc_request){.method = "GET", .url = health, .timeout_ms = 2000}, &res,
                                     NULL) == 0) {
                                long st = res.status;
                                httpc_response_done(&res);
                                if (st == 200)
                                        return 0;
                        }
                }
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

static void announce(const struct cli_run_options *o) {
        _cleanup_free_ char *link = NULL;
        _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
        if (cli_kernel_endpoint(o->seed_dir, &e) == 0)
                printf("Seed running: the app at %s/, the control plane at %s\n", e.url, e.control_url);
        if (cli_login_link(o->seed_dir, &link) < 0)
                return;
        printf("Sign in (one use, 15 minutes): %s\n", link);
        fflush(stdout);
        if (o->open)
                cli_open_in_browser(link);
}

/* The Seed's folder is its account's alone: one readable by other local
 * users (planted before `seed new` made it 0700, or chmod-ed since) loses
 * its group and other bits, and says so. */
static void make_folder_private(const char *seed_dir) {
        _cleanup_close_ int fd = open(seed_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || (st.st_mode & 077) == 0)
                return;
        if (fchmod(fd, st.st_mode & 07700) < 0) {
                fprintf(stderr, "seed: warning: %s is open to other local users (mode %04o) and could not be "
                                "made private: %s; run 'chmod 700 %s'\n",
                        seed_dir, (unsigned)(st.st_mode & 07777), strerror(errno), seed_dir);
                return;
        }
        fprintf(stderr, "seed: %s was open to other local users (mode %04o); it is now 0700 (the Seed's "
                        "account only)\n",
                seed_dir, (unsigned)(st.st_mode & 07777));
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

int cli_run_seed(const struct cli_run_options *o) {
        _cleanup_free_ char *dot = path_join(o->seed_dir, ".seed");
        _cleanup_free_ char *logs = path_join(o->seed_dir, ".seed/logs");
        char *chown_paths[] = {(char *)o->seed_dir, NULL};
        signal(SIGPIPE, SIG_IGN); /* a kernel that exits early must not kill us mid-write */
        int r = priv_drop_if_root(chown_paths);
        if (r < 0)
                return CLI_EXIT_FAILURE;
        make_folder_private(o->seed_dir);
        if (!dot || !logs || mkdir_mode(dot, 0700) < 0 || mkdir_mode(logs, 0700) < 0) {
                fprintf(stderr, "seed: cannot create %s/.seed: %s\n", o->seed_dir, strerror(errno));
                return CLI_EXIT_FAILURE;
        }
        int lock = -1;
        r = open_run_lock(o->seed_dir, &lock);
        if (r == -EBUSY) {
                _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
                if (cli_kernel_endpoint(o->seed_dir, &e) == 0)
                        printf("This Seed is already running at %s (not started twice).\n", e.control_url);
                else
                        printf("This Seed is already starting (not started twice).\n");
                return CLI_EXIT_OK;
        }
        if (r < 0) {
                fprintf(stderr, "seed: cannot lock %s/.seed/run.lock: %s\n", o->seed_dir, strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        /* Before the build: a taken port refuses the start at once. */
        struct kernel_listen listen = {.sockets = CTL_LISTEN_INIT};
        if (bind_control_plane(o, &listen) < 0) {
                close(lock);
                return CLI_EXIT_FAILURE;
        }
        struct kernel_bins bins = {0};
        if (load_bins(o->seed_dir, &bins) < 0) {
                kernel_listen_done(&listen);
                close(lock);
                return CLI_EXIT_FAILURE;
        }

        fflush(NULL);
        pid_t sup = fork();
        if (sup < 0) {
                kernel_bins_done(&bins);
                kernel_listen_done(&listen);
                return CLI_EXIT_FAILURE;
        }
        if (sup == 0) {
                setsid();
                prctl(PR_SET_DUMPABLE, 0); /* it holds the secrets for every restart */
                if (o->detach)
                        detach_output(o->seed_dir, lock);
                _cleanup_free_ char *pidp = path_join(o->seed_dir, ".seed/supervisor.pid");
                char pid[32];
                int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
                if (pidp)
                        (void)write_file_atomic(pidp, pid, (size_t)n, 0644);
                int code = supervise(o, &bins, &listen);
                if (pidp)
                        unlink(pidp);
                kernel_bins_done(&bins);
                kernel_listen_done(&listen);
                _exit(code);
        }
        close(lock);
        kernel_bins_done(&bins);
        kernel_listen_done(&listen); /* the supervisor holds them */

        /* While we wait, Ctrl-C stops the Seed (the supervisor forwards it). */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        r = wait_ready(o->seed_dir, sup);
        if (r < 0) {
                fprintf(stderr, "seed: the Seed did not come up%s; see %s/.seed/logs/kernel.log\n",
                        r == -ETIMEDOUT ? " in time" : "", o->seed_dir);
                if (r == -ETIMEDOUT)
                        kill(sup, SIGTERM);
                return CLI_EXIT_FAILURE;
        }
        announce(o);
        if (o->detach) {
                printf("Running in the background; stop it with 'seed stop' (in %s).\n", o->seed_dir);
                return CLI_EXIT_OK;
        }
        printf("Press Ctrl-C to stop.\n");
        fflush(stdout);
        for (;;) {
                struct timespec ts = {1, 0};
                int sig = sigtimedwait(&mask, NULL, &ts);
                if (sig == SIGINT || sig == SIGTERM)
                        kill(sup, SIGTERM);
                int status;
                if (waitpid(sup, &status, WNOHANG) == sup)
                        return proc_exit_code(status);
        }
}

static void run_usage(FILE *f) {
        fputs("Usage: seed run [--dir DIR] [--addr HOST:PORT] [-e NAME[=VALUE]]... [--env-file FILE]\n"
              "                [--detach] [--open]\n"
              "\n"
              "Builds the Seed's kernel from the Seed's own source (into .seed/kernel-build)\n"
              "and starts it, then prints a one-time sign-in link. Exit code 75 from the\n"
              "kernel means 'rebuild and restart'; a kernel that fails to build or dies\n"
              "within 60 s falls back to the last good kernel. A running Seed is not\n"
              "started twice. The port is bound once and kept across those restarts.\n"
              "Run as root, it switches to the unprivileged account 'seed'.\n"
              "\n"
              "  --dir DIR          the Seed's folder (default: the one you are in)\n"
              "  --addr HOST:PORT   listen here instead of seed.yaml's server.addr. A Seed\n"
              "                     keeps its port: if it is taken, the Seed does not start\n"
              "                     (on localhost it listens on both 127.0.0.1 and [::1])\n"
              "  -e NAME[=VALUE]    pass a secret (e.g. a model API key); without =VALUE it is\n"
              "                     taken from your environment. Secrets live only in memory.\n"
              "  --env-file FILE    pass the secrets listed in FILE (NAME=VALUE lines)\n"
              "  --detach           run in the background\n"
              "  --open             open the sign-in link in a browser\n"
              "  -h, --help         show this help\n",
              f);
}

int cli_parse_secret_opt(int c, const char *arg, struct secrets *s, char ***hide) {
        _cleanup_free_ char *err = NULL;
        int r = c == 'e' ? secrets_add_arg(s, arg, &err) : secrets_add_env_file(s, arg, &err);
        if (r < 0) {
                fprintf(stderr, "seed: %s\n", err ? err : strerror(-r));
                return r;
        }
        if (c == 'f') {
                /* The owner's config: no sandbox may see it, wherever it is. */
                char *real = realpath(arg, NULL);
                if (!real || strv_push(hide, real) < 0) {
                        free(real);
                        return -ENOMEM;
                }
                free(real);
        }
        if (c == 'e' && !strchr(arg, '=')) {
                /* Taken from our environment: wipe it there too, so it neither
                 * stays in /proc/<pid>/environ nor reaches anything we start. */
                char *v = getenv(arg);
                if (v)
                        memset(v, 'x', strlen(v));
                unsetenv(arg);
        }
        if (c == 'e')
                cli_scrub_arg((char *)arg);
        return 0;
}

int cli_cmd_run(int argc, char **argv) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},      {"addr", required_argument, NULL, 'a'},
                {"env", required_argument, NULL, 'e'},      {"env-file", required_argument, NULL, 'f'},
                {"detach", no_argument, NULL, 'D'},         {"open", no_argument, NULL, 'o'},
                {"help", no_argument, NULL, 'h'},           {0},
        };
        _cleanup_(secrets_freep) struct secrets *secrets = NULL;
        _cleanup_strv_free_ char **env_files = NULL, **hide = NULL;
        const char *dir = NULL;
        struct cli_run_options o = {0};
        if (secrets_new(&secrets) < 0)
                return CLI_EXIT_FAILURE;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "he:", longopts, NULL)) != -1) {
                switch (c) {
                case 'd': dir = optarg; break;
                case 'a': o.addr = optarg; break;
                case 'e':
                case 'f':
                        if (cli_parse_secret_opt(c, optarg, secrets, &hide) < 0)
                                return CLI_EXIT_USAGE;
                        if (c == 'f' && strv_push(&env_files, optarg) < 0)
                                return CLI_EXIT_FAILURE;
                        break;
                case 'D': o.detach = true; break;
                case 'o': o.open = true; break;
                case 'h': run_usage(stdout); return CLI_EXIT_OK;
                default: run_usage(stderr); return CLI_EXIT_USAGE;
                }
        }
        if (optind != argc) {
                run_usage(stderr);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *host = NULL;
        int port;
        if (o.addr && cfg_split_addr(o.addr, &host, &port) < 0) {
                fprintf(stderr, "seed: --addr '%s' is not HOST:PORT\n", o.addr);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *seed_dir = NULL;
        if (cli_find_seed(dir, &seed_dir) < 0)
                return CLI_EXIT_USAGE;
        for (char **f = env_files; f && *f; f++)
                if (cli_path_inside(*f, seed_dir)) {
                        fprintf(stderr, "seed: --env-file %s is inside the Seed's folder, where sandboxes and git can "
                                        "read it; keep secrets outside the Seed (e.g. in ~/.config/seed/)\n",
                                *f);
                        return CLI_EXIT_USAGE;
                }
        o.seed_dir = seed_dir;
        o.secrets = secrets;
        o.hide_paths = hide;
        return cli_run_seed(&o);
}
