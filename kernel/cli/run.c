/* `seed run`: parses its arguments, prepares the Seed's folder, starts the
 * supervisor (kernel/supervisor: it builds the kernel from the Seed's own
 * source, starts it and restarts it: exit 75 = rebuild and restart; a kernel
 * that fails to build or dies within 60 s falls back to the last good one),
 * and prints what the owner needs. */
#include "base/fileio.h"
#include "base/json.h"
#include "base/priv.h"
#include "cli/cli.h"
#include "config/config.h"
#include "evolution/owner.h"
#include "httpc/httpc.h"
#include "secrets/secrets.h"
#include "supervisor/supervisor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <strings.h>
#include <signal.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define READY_TIMEOUT_MS (240 * 1000)

int cli_control_plane_addr(const struct cli_run_options *o, char **ret) {
        const char *addr = o->addr;
        _cleanup_(cfg_freep) struct cfg *cfg = NULL;
        if (!addr) {
                _cleanup_free_ char *path = path_join(o->seed_dir, "seed.yaml"), *err = NULL;
                if (!path)
                        return -ENOMEM;
                int r = cfg_load(path, &cfg, &err);
                if (r < 0) {
                        fprintf(stderr, "seed: %s\n", err ? err : "cannot load seed.yaml");
                        /* A commit of the owner's broke it: the live generation's still holds. */
                        if (evo_owner_live_config(o->seed_dir, &cfg) < 0)
                                return r;
                }
                addr = cfg->server.addr;
        }
        *ret = strdup(addr);
        return *ret ? 0 : -ENOMEM;
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

/* Whether addr ("HOST:PORT") can be reached from this machine only. */
static bool addr_is_loopback(const char *addr) {
        _cleanup_free_ char *host = NULL;
        int port;
        if (!addr || cfg_split_addr(addr, &host, &port) < 0)
                return true; /* unknown: nothing to add */
        struct in_addr v4;
        struct in6_addr v6;
        if (inet_pton(AF_INET, host, &v4) == 1)
                return (ntohl(v4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, host, &v6) == 1)
                return IN6_IS_ADDR_LOOPBACK(&v6);
        return strcasecmp(host, "localhost") == 0;
}

/* Listening beyond loopback: the control plane still answers only on
 * seed.localhost (and server.allowed_hosts), so say how to get there. */
static void print_remote_hint(const struct cli_endpoint *e) {
        if (addr_is_loopback(e->addr))
                return;
        _cleanup_free_ char *host = NULL;
        int port = 0;
        (void)cfg_split_addr(e->addr, &host, &port);
        printf("From another machine: forward the port ('ssh -L %d:127.0.0.1:%d <this server>') and open these "
               "links there, or give the Seed a name of its own (server.allowed_hosts and control_host in "
               "seed.yaml; README: \"Reaching a Seed on a server\").\n",
               port, port);
}

/* One line when the Seed cannot think (no model key): what to pass, or to
 * lend a key in Settings. The kernel words it (kernel/mind), naming the
 * variable of the configured provider. */
static void announce_mind(const struct cli_run_options *o) {
        long status = 0;
        _cleanup_free_ char *body = NULL;
        if (cli_api(o->seed_dir, "GET", "/_seed/api/status", NULL, &status, &body) < 0 || status != 200)
                return;
        _cleanup_json_ json_t *st = json_loads(body, 0, NULL);
        json_t *mind = json_object_get(st, "mind");
        const char *why = json_string_value(json_object_get(mind, "why_not"));
        if (json_is_false(json_object_get(mind, "ready")) && why)
                printf("%s\n", why);
}

void cli_announce(const struct cli_run_options *o) {
        _cleanup_free_ char *link = NULL;
        _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
        if (cli_kernel_endpoint(o->seed_dir, &e) == 0) {
                printf("Seed running%s: the app at %s/, the control plane at %s\n",
                       o->published_ip ? " in its container" : "", e.url, e.control_url);
                /* In a container the kernel listens on all of the container's
                 * addresses; what counts is where the port is published. */
                _cleanup_free_ char *published = NULL;
                if (!o->published_ip)
                        (void)cli_container_published_ip(o->seed_dir, &published);
                const char *ip = o->published_ip ? o->published_ip : published;
                if (!ip || !streq(ip, "127.0.0.1"))
                        print_remote_hint(&e);
        }
        announce_mind(o);
        if (cli_login_link(o->seed_dir, &link) < 0)
                return;
        printf("Sign in (one use, 15 minutes): %s\n", link);
        fflush(stdout);
        if (o->open)
                cli_open_in_browser(link);
}

/* Secrets given to a Seed that runs already would be dropped silently:
 * name them (never their values) and say how to apply them. */
static void print_not_applied(const struct cli_run_options *o) {
        size_t n = secrets_count(o->secrets);
        fprintf(stderr, "seed: the secret%s given (", n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
                fprintf(stderr, "%s%s", i ? ", " : "", secrets_name(o->secrets, i));
        fprintf(stderr, ") %s NOT applied: the running kernel keeps the ones it started with.\n"
                        "seed: apply them with a graceful restart (the port stays bound): seed restart",
                n == 1 ? "was" : "were");
        if (o->hide_paths && *o->hide_paths) {
                for (char *const *f = o->hide_paths; *f; f++)
                        fprintf(stderr, " --env-file %s", *f);
                fprintf(stderr, " (and the same -e options)\n");
                return;
        }
        for (size_t i = 0; i < n; i++)
                fprintf(stderr, " -e %s", secrets_name(o->secrets, i));
        fprintf(stderr, "\n");
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

int cli_run_already(const struct cli_run_options *o) {
        _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
        if (cli_kernel_endpoint(o->seed_dir, &e) == 0)
                printf("This Seed is already running at %s (not started twice).\n", e.control_url);
        else
                printf("This Seed is already starting (not started twice).\n");
        if (secrets_count(o->secrets) == 0)
                return CLI_EXIT_OK;
        print_not_applied(o);
        return CLI_EXIT_FAILURE;
}

/* Inside the container: the secrets come through CLI_CONTAINER_FIFO, which
 * the `seed run` outside writes once this supervisor holds the run lock. */
static int read_secrets_fifo(const char *seed_dir, struct secrets *s) {
        _cleanup_free_ char *p = path_join(seed_dir, CLI_CONTAINER_FIFO);
        if (!p)
                return -ENOMEM;
        _cleanup_close_ int fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
                return -EBADF;
        int r = fd_wait_readable(fd, now_ms() + 120 * 1000);
        if (r < 0)
                return r;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return -errno;
        r = secrets_read_fd(s, fd);
        (void)unlink(p);
        return r;
}

/* `seed run --native --in-container`: the supervisor as the container's
 * main process. No readiness wait over TCP (the kernel refuses connections
 * from inside its own container: the `seed run` outside waits through the
 * published port) and nothing printed for the owner (the outside does it). */
static int run_in_container(const struct cli_run_options *o, int lock) {
        int r = read_secrets_fifo(o->seed_dir, o->secrets);
        if (r < 0) {
                close(lock);
                fprintf(stderr, "seed: no secrets from %s/%s: %s\n", o->seed_dir, CLI_CONTAINER_FIFO, strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        pid_t sup;
        struct supervisor_options so = {.seed_dir = o->seed_dir, .addr = o->addr, .detach = true,
                                        .secrets = o->secrets, .in_container = true};
        if (!o->addr || supervisor_start(&so, lock, &sup) < 0)
                return CLI_EXIT_FAILURE;
        supervisor_hold_stop_signals();
        return supervisor_wait(sup);
}

int cli_run_seed(const struct cli_run_options *o) {
        if (!o->native && !o->in_container) {
                int code = cli_run_container(o);
                if (code != CLI_RUN_NATIVE)
                        return code;
        }
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
        r = supervisor_lock(o->seed_dir, &lock);
        if (r == -EBUSY)
                return cli_run_already(o);
        if (r < 0) {
                fprintf(stderr, "seed: cannot lock %s/.seed/run.lock: %s\n", o->seed_dir, strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        if (o->in_container)
                return run_in_container(o, lock);
        /* On the host now: what a container run wrote no longer holds. */
        _cleanup_free_ char *cstate = path_join(o->seed_dir, CLI_CONTAINER_STATE);
        if (cstate)
                (void)unlink(cstate);
        _cleanup_free_ char *addr = NULL;
        if (cli_control_plane_addr(o, &addr) < 0) {
                close(lock);
                return CLI_EXIT_FAILURE;
        }
        pid_t sup;
        struct supervisor_options so = {.seed_dir = o->seed_dir, .addr = addr, .detach = o->detach,
                                        .secrets = o->secrets, .hide_paths = o->hide_paths};
        if (supervisor_start(&so, lock, &sup) < 0) /* logged; the lock is closed */
                return CLI_EXIT_FAILURE;

        /* While we wait, Ctrl-C stops the Seed (the supervisor forwards it). */
        supervisor_hold_stop_signals();
        r = wait_ready(o->seed_dir, sup);
        if (r < 0) {
                fprintf(stderr, "seed: the Seed did not come up%s; see %s/.seed/logs/kernel.log\n",
                        r == -ETIMEDOUT ? " in time" : "", o->seed_dir);
                if (r == -ETIMEDOUT)
                        kill(sup, SIGTERM);
                return CLI_EXIT_FAILURE;
        }
        cli_announce(o);
        if (o->detach) {
                printf("Running in the background; stop it with 'seed stop' (in %s).\n", o->seed_dir);
                return CLI_EXIT_OK;
        }
        printf("Press Ctrl-C to stop.\n");
        fflush(stdout);
        return supervisor_wait(sup);
}

static void run_usage(FILE *f) {
        fputs("Usage: seed run [--dir DIR] [--addr HOST:PORT] [-e NAME[=VALUE]]... [--env-file FILE]\n"
              "                [--detach] [--open] [--native]\n"
              "\n"
              "Builds the Seed's kernel from the Seed's own source (into .seed/kernel-build)\n"
              "and starts it, then prints a one-time sign-in link. Exit code 75 from the\n"
              "kernel means 'rebuild and restart'; a kernel that fails to build or dies\n"
              "within 60 s falls back to the last good kernel. A running Seed is not\n"
              "started twice (secrets given to it are not applied: 'seed restart -e NAME'\n"
              "applies them). The port is bound once and kept across those restarts.\n"
              "Run as root, it switches to the unprivileged account 'seed'. Without a\n"
              "model key it says which -e variable the configured provider reads (or\n"
"lend a key in the control plane: it lasts until the Seed restarts).\n"
              "\n"
              "Where podman or docker works, the Seed runs in a container of its own (one\n"
              "per Seed, named seed-<folder>-<hash of its path>): built from the Seed's\n"
              "Dockerfile with no build context (cached by the Dockerfile's hash; without a\n"
              "Debian base image one is made from the Debian mirror with mmdebstrap), run\n"
              "as the Seed's account with every capability dropped, no-new-privileges, a\n"
              "read-only root, the Seed's seccomp.json, the folder at /seed and the port\n"
              "published on 127.0.0.1 only. Limits, read back from the container's cgroup\n"
              "(a limit the engine ignores is reported, never claimed):\n"
              "  SEED_MEMORY=8g  SEED_CPUS=<half the cores>  SEED_PIDS_LIMIT=4096\n"
              "SEED_CONTAINER_ENGINE=podman|docker chooses the engine (default: podman,\n"
              "then docker). With no engine that works, it runs on the host and says why.\n"
              "'seed status' shows which.\n"
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
              "  --native           run on the host, not in a container\n"
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

int cli_check_env_files(char *const *env_files, const char *seed_dir) {
        for (char *const *f = env_files; f && *f; f++)
                if (cli_path_inside(*f, seed_dir)) {
                        fprintf(stderr, "seed: --env-file %s is inside the Seed's folder, where sandboxes and git can "
                                        "read it; keep secrets outside the Seed (e.g. in ~/.config/seed/)\n",
                                *f);
                        return -EINVAL;
                }
        return 0;
}

int cli_cmd_run(int argc, char **argv) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},      {"addr", required_argument, NULL, 'a'},
                {"env", required_argument, NULL, 'e'},      {"env-file", required_argument, NULL, 'f'},
                {"detach", no_argument, NULL, 'D'},         {"open", no_argument, NULL, 'o'},
                {"native", no_argument, NULL, 'N'},         {"in-container", no_argument, NULL, 'C'},
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
                case 'N': o.native = true; break;
                case 'C': o.in_container = true; break; /* internal: what the container runs */
                case 'h': run_usage(stdout); return CLI_EXIT_OK;
                default: run_usage(stderr); return CLI_EXIT_USAGE;
                }
        }
        if (optind != argc || (o.in_container && (!o.native || !o.addr || secrets_count(secrets) > 0))) {
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
        if (cli_check_env_files(env_files, seed_dir) < 0)
                return CLI_EXIT_USAGE;
        o.seed_dir = seed_dir;
        o.secrets = secrets;
        o.hide_paths = hide;
        return cli_run_seed(&o);
}
