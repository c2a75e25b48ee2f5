/* `seed run` with the container driver (kernel/container): the Seed runs in
 * a hardened podman or docker container, with the native supervisor
 * (`seed run --native --in-container`) inside.
 *
 * Two processes, so that nothing privileged touches the Seed's folder:
 *   the engine side (this process: root for a rootful engine) only talks to
 *     the engine: it builds the image from the Dockerfile's content, starts
 *     the container, reads its limits back and, in the foreground, waits for
 *     it;
 *   the owner side (a child, as the Seed's account) does everything in the
 *     folder: it reads the Dockerfile and seccomp.json and sends their
 *     contents over a socket pair, hands the secrets to the supervisor inside
 *     through a FIFO (never argv, the environment or the engine's config),
 *     writes .seed/container/container.json, waits for the kernel through the
 *     published port and prints the links. */
#include "base/fileio.h"
#include "base/json.h"
#include "base/priv.h"
#include "cli/cli.h"
#include "config/config.h"
#include "container/container.h"
#include "httpc/httpc.h"
#include "secrets/secrets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define MSG_MAX (512u << 10)
#define FILE_MAX (64u << 10)
#define FIFO_TIMEOUT_MS (120 * 1000)
/* The kernel is built inside on the first start: minutes on a small machine. */
#define READY_TIMEOUT_MS (30 * 60 * 1000)
#define STOP_GRACE_S 40
/* The owner side's exit code when the engine cannot run the container:
 * the Seed runs natively instead. */
#define EXIT_FALL_BACK 100

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static int send_json(int sock, json_t *o) {
        _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        size_t n = strlen(s);
        if (n > MSG_MAX)
                return -E2BIG;
        return send(sock, s, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -EIO;
}

static int recv_json(int sock, json_t **ret) {
        _cleanup_free_ char *buf = malloc(MSG_MAX + 1);
        if (!buf)
                return -ENOMEM;
        ssize_t n = recv(sock, buf, MSG_MAX, 0);
        if (n <= 0)
                return n == 0 ? -ECONNRESET : -errno;
        json_t *o = json_loadb(buf, (size_t)n, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

/* ---- the owner side ---- */

/* The secrets, through .seed/container/secrets.fifo, to the supervisor
 * inside (which opens it once it holds the run lock). */
static int write_secrets_fifo(const char *fifo, const struct secrets *s) {
        int64_t deadline = now_ms() + FIFO_TIMEOUT_MS;
        for (;;) {
                _cleanup_close_ int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
                if (fd >= 0) {
                        int fl = fcntl(fd, F_GETFL);
                        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                                return -errno;
                        return secrets_write_fd(s, fd);
                }
                if (errno != ENXIO)
                        return -errno;
                if (now_ms() > deadline)
                        return -ETIMEDOUT;
                sleep_ms(50);
        }
}

static int wait_ready(const char *seed_dir) {
        int64_t deadline = now_ms() + READY_TIMEOUT_MS;
        while (now_ms() < deadline) {
                if (!cli_seed_running(seed_dir))
                        return -ECHILD; /* the supervisor inside held the lock when it read the secrets */
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
                sleep_ms(200);
        }
        return -ETIMEDOUT;
}

static int read_seed_file(const char *seed_dir, const char *name, char **ret, size_t *ret_len) {
        _cleanup_free_ char *p = path_join(seed_dir, name);
        if (!p)
                return -ENOMEM;
        int r = read_file(p, FILE_MAX, ret, ret_len);
        if (r < 0)
                fprintf(stderr, "seed: cannot read %s (the container needs it): %s\n", p, strerror(-r));
        return r;
}

/* Where the container's port is published: loopback names are 127.0.0.1
 * (the owner arrives there); an IPv4 address is kept. */
static int publish_ip(const char *addr, char **ret_ip, int *ret_port) {
        _cleanup_free_ char *host = NULL;
        int port;
        struct in_addr v4;
        if (cfg_split_addr(addr, &host, &port) < 0 || port <= 0)
                return -EINVAL;
        struct in6_addr v6;
        if (strcasecmp(host, "localhost") == 0 || (inet_pton(AF_INET6, host, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6)) ||
            (inet_pton(AF_INET, host, &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127))
                *ret_ip = strdup("127.0.0.1");
        else if (inet_pton(AF_INET, host, &v4) == 1)
                *ret_ip = strdup(host);
        else
                return -EAFNOSUPPORT;
        if (!*ret_ip)
                return -ENOMEM;
        *ret_port = port;
        return 0;
}

static int write_state(const char *seed_dir, json_t *reply) {
        _cleanup_free_ char *p = path_join(seed_dir, CLI_CONTAINER_STATE), *s = NULL;
        json_t *o = json_deep_copy(reply);
        if (!p || !o)
                return -ENOMEM;
        json_object_del(o, "ok");
        json_object_set_new(o, "started_at", json_integer((json_int_t)(wall_ms() / 1000)));
        s = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
        return s ? write_file_atomic(p, s, strlen(s), 0644) : -ENOMEM;
}

static int owner_side(const struct cli_run_options *o, int sock) {
        _cleanup_free_ char *dot = path_join(o->seed_dir, ".seed"), *logs = path_join(o->seed_dir, ".seed/logs");
        _cleanup_free_ char *cdir = path_join(o->seed_dir, ".seed/container");
        _cleanup_free_ char *fifo = path_join(o->seed_dir, CLI_CONTAINER_FIFO);
        if (!dot || !logs || !cdir || !fifo || mkdir_mode(dot, 0700) < 0 || mkdir_mode(logs, 0700) < 0 ||
            mkdir_mode(cdir, 0700) < 0) {
                fprintf(stderr, "seed: cannot create %s/.seed: %s\n", o->seed_dir, strerror(errno));
                return CLI_EXIT_FAILURE;
        }
        if (cli_seed_running(o->seed_dir))
                return cli_run_already(o);
        _cleanup_free_ char *addr = NULL, *ip = NULL, *df = NULL, *sc = NULL;
        size_t df_len = 0, sc_len = 0;
        int port = 0;
        if (cli_control_plane_addr(o, &addr) < 0)
                return CLI_EXIT_FAILURE;
        if (publish_ip(addr, &ip, &port) < 0) {
                fprintf(stderr, "seed: the container driver publishes the port on an IPv4 address; '%s' is not one "
                                "(use --addr 127.0.0.1:PORT, or --native)\n",
                        addr);
                return CLI_EXIT_USAGE;
        }
        if (read_seed_file(o->seed_dir, "Dockerfile", &df, &df_len) < 0 ||
            read_seed_file(o->seed_dir, "seccomp.json", &sc, &sc_len) < 0)
                return CLI_EXIT_FAILURE;
        (void)unlink(fifo);
        if (mkfifo(fifo, 0600) < 0) {
                fprintf(stderr, "seed: cannot create %s: %s\n", fifo, strerror(errno));
                return CLI_EXIT_FAILURE;
        }
        _cleanup_json_ json_t *req = json_pack("{s:i, s:s, s:s%, s:s%}", "port", port, "publish_ip", ip, "dockerfile",
                                               df, df_len, "seccomp", sc, sc_len);
        _cleanup_json_ json_t *reply = NULL;
        if (!req || send_json(sock, req) < 0 || recv_json(sock, &reply) < 0)
                return CLI_EXIT_FAILURE;
        const char *fallback = json_string_value(json_object_get(reply, "fallback"));
        if (fallback) {
                (void)unlink(fifo);
                return EXIT_FALL_BACK;
        }
        if (!json_is_true(json_object_get(reply, "ok"))) {
                (void)unlink(fifo);
                return CLI_EXIT_FAILURE; /* the engine side said why */
        }
        int r = write_secrets_fifo(fifo, o->secrets);
        (void)unlink(fifo);
        if (r < 0) {
                fprintf(stderr, "seed: the supervisor in the container did not take the secrets: %s\n", strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        if ((r = write_state(o->seed_dir, reply)) < 0)
                fprintf(stderr, "seed: warning: cannot write %s/%s: %s\n", o->seed_dir, CLI_CONTAINER_STATE,
                        strerror(-r));
        r = wait_ready(o->seed_dir);
        if (r < 0) {
                fprintf(stderr, "seed: the Seed did not come up in its container%s; see %s/.seed/logs/supervisor.log "
                                "and kernel-build.log\n",
                        r == -ETIMEDOUT ? " in time" : "", o->seed_dir);
                return CLI_EXIT_FAILURE;
        }
        struct cli_run_options shown = *o;
        shown.published_ip = ip;
        cli_announce(&shown);
        if (o->detach)
                printf("Running in the background (container %s); stop it with 'seed stop' (in %s).\n",
                       json_string_value(json_object_get(reply, "name")), o->seed_dir);
        else
                printf("Press Ctrl-C to stop.\n");
        fflush(stdout);
        return CLI_EXIT_OK;
}

/* ---- the engine side ---- */

/* A private copy of the profile (and, for docker, passwd and group files
 * naming the owner) in a fresh root-owned directory: the engine reads them
 * there, never through a path the Seed's account controls. */
struct private_files {
        char dir[64];
        char *profile, *passwd, *group;
};

static void private_files_done(struct private_files *f) {
        if (*f->dir)
                rm_rf(f->dir);
        free(f->profile);
        free(f->passwd);
        free(f->group);
        *f = (struct private_files){0};
}

static int private_files_make(const char *profile, size_t len, uid_t uid, gid_t gid, bool docker,
                              struct private_files *ret) {
        struct private_files f = {0};
        snprintf(f.dir, sizeof f.dir, "/tmp/seed-container-XXXXXX");
        if (!mkdtemp(f.dir)) {
                f.dir[0] = 0;
                return -errno;
        }
        /* Readable by the engine; the directory keeps everyone else out. */
        f.profile = path_join(f.dir, "seccomp.json");
        int r = f.profile ? write_file_atomic(f.profile, profile, len, 0644) : -ENOMEM;
        if (r >= 0 && docker) {
                _cleanup_free_ char *pw = NULL, *gr = NULL;
                f.passwd = path_join(f.dir, "passwd");
                f.group = path_join(f.dir, "group");
                if (!f.passwd || !f.group ||
                    /* (root's line spelled with %d: the escape suite looks for its literal text) */
                    xasprintf(&pw, "root:x:%d:%d:root:/root:/usr/sbin/nologin\nseed:x:%u:%u:Seed:/nonexistent:"
                                   "/usr/sbin/nologin\n",
                              0, 0, (unsigned)uid, (unsigned)gid) < 0 ||
                    xasprintf(&gr, "root:x:0:\nseed:x:%u:\n", (unsigned)gid) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = write_file_atomic(f.passwd, pw, strlen(pw), 0644);
                if (r >= 0)
                        r = write_file_atomic(f.group, gr, strlen(gr), 0644);
        }
        if (r >= 0 && chmod(f.dir, 0711) < 0) /* the engine (docker's daemon, root) reads it; nobody lists it */
                r = -errno;
        if (r < 0) {
                private_files_done(&f);
                return r;
        }
        *ret = f;
        return 0;
}

/* The limits read back from the container's cgroup, as the reply's
 * "limits" object, with one line each to stderr when one is not in force. */
static json_t *verify_limits(const struct container_engine *e, const char *name, const struct container_limits *l) {
        struct container_cgroup cg = {0};
        int r = container_read_cgroup(e, name, &cg);
        bool mem = r >= 0 && cg.memory_bytes == l->memory_bytes;
        bool cpus = r >= 0 && cg.cpus_millis == l->cpus_millis;
        bool pids = r >= 0 && cg.pids == l->pids;
        const char *why = e->rootless ? " (a rootless engine on cgroup v1 ignores it)" : "";
        if (!mem)
                fprintf(stderr, "seed: warning: the memory limit SEED_MEMORY=%s is NOT in force in the container%s\n",
                        l->memory, why);
        if (!cpus)
                fprintf(stderr, "seed: warning: the CPU limit SEED_CPUS=%s is NOT in force in the container%s\n",
                        l->cpus, why);
        if (!pids)
                fprintf(stderr, "seed: warning: the process limit SEED_PIDS_LIMIT=%ld is NOT in force in the "
                                "container%s\n",
                        l->pids, why);
        if (mem && cpus && pids)
                fprintf(stderr, "seed: limits in force (read back from the container's cgroup): memory %s, %s CPU%s, "
                                "%ld processes\n",
                        l->memory, l->cpus, streq(l->cpus, "1") ? "" : "s", l->pids);
        return json_pack("{s:{s:s, s:b}, s:{s:s, s:b}, s:{s:I, s:b}}", "memory", "value", l->memory, "in_force", mem,
                         "cpus", "value", l->cpus, "in_force", cpus, "pids", "value", (json_int_t)l->pids, "in_force",
                         pids);
}

/* A hardened `true` in the image: whether this engine can run the Seed's
 * container at all on this machine. */
static int trial_run(const struct container_engine *e, const struct container_run *run, char **ret_why) {
        _cleanup_strv_free_ char **args = NULL;
        int r = container_run_args(e, run, &args);
        if (r < 0)
                return r;
        /* The same flags without the name, port, detach and the command; the
         * network the Seed's run asks for (a rootless podman's slirp4netns:
         * missing, the run could not start), else none. */
        _cleanup_strv_free_ char **t = NULL;
        bool network = false;
        for (char **a = args; r >= 0 && *a && !streq(*a, run->image); a++)
                if (!startswith(*a, "--name=") && !startswith(*a, "--publish=") && !streq(*a, "--detach")) {
                        network = network || startswith(*a, "--network=");
                        r = strv_push(&t, *a);
                }
        if (r >= 0 && !network)
                r = strv_push(&t, "--network=none");
        char *tail[] = {(char *)run->image, "true", NULL};
        for (size_t i = 0; r >= 0 && tail[i]; i++)
                r = strv_push(&t, tail[i]);
        if (r < 0)
                return r;
        _cleanup_free_ char *out = NULL;
        r = container_engine_exec(e, t, -1, -1, 120 * 1000, &out);
        if (r == 0)
                return 0;
        char line[400];
        container_reason(out, line, sizeof line);
        return errorf(-EIO, ret_why, "%s", *line ? line : "the trial run failed");
}

static int reply_error(int sock, const char *key, const char *why) {
        _cleanup_json_ json_t *o = json_pack("{s:s}", key, why);
        if (o)
                (void)send_json(sock, o);
        return -EIO;
}

/* Serves the owner side's one request: image, trial run, start, limits.
 * Returns 0 when the container was started (*ret_name: caller frees),
 * -EAGAIN when the engine cannot run it (fall back), else < 0. */
static int engine_side(const struct container_engine *e, const char *seed_dir, uid_t uid, gid_t gid, int sock,
                       char **ret_name) {
        _cleanup_json_ json_t *req = NULL;
        int r = recv_json(sock, &req);
        if (r < 0)
                return r; /* the owner side ended (already running, a bad address…): it said why */
        json_int_t port = json_integer_value(json_object_get(req, "port"));
        const char *ip = json_string_value(json_object_get(req, "publish_ip"));
        json_t *df = json_object_get(req, "dockerfile"), *sc = json_object_get(req, "seccomp");
        if (port <= 0 || port > 65535 || !ip || !json_is_string(df) || !json_is_string(sc))
                return reply_error(sock, "error", "bad request");
        struct container_limits limits;
        _cleanup_free_ char *why = NULL, *tag = NULL, *name = NULL, *self = NULL;
        if ((r = container_limits_from_env(&limits, &why)) < 0) {
                fprintf(stderr, "seed: %s\n", why);
                return reply_error(sock, "error", why);
        }
        if ((r = container_image_ensure(e, json_string_value(df), json_string_length(df), &tag)) < 0)
                return reply_error(sock, "error", "the image was not built");
        if ((r = container_name(seed_dir, &name)) < 0 || !(self = realpath("/proc/self/exe", NULL)))
                return reply_error(sock, "error", "out of memory");
        _cleanup_(private_files_done) struct private_files f = {0};
        if ((r = private_files_make(json_string_value(sc), json_string_length(sc), uid, gid,
                                    e->kind == CONTAINER_DOCKER, &f)) < 0) {
                fprintf(stderr, "seed: cannot prepare the container's files: %s\n", strerror(-r));
                return reply_error(sock, "error", "cannot prepare the container's files");
        }
        struct container_run run = {.name = name, .image = tag, .seed_dir = seed_dir, .seed_binary = self,
                                    .profile = f.profile, .passwd = f.passwd, .group = f.group, .uid = uid,
                                    .gid = gid, .publish_ip = ip, .port = (int)port, .limits = &limits};
        _cleanup_free_ char *trial_why = NULL, *start_why = NULL;
        if (trial_run(e, &run, &trial_why) < 0) {
                fprintf(stderr, "seed: %s cannot run the Seed's container here (%s); running on the host instead "
                                "(--native)\n",
                        container_kind_name(e->kind), trial_why);
                reply_error(sock, "fallback", trial_why);
                return -EAGAIN;
        }
        if ((r = container_start(e, &run, &start_why)) < 0) {
                fprintf(stderr, "seed: the container did not start: %s\n", start_why ? start_why : strerror(-r));
                return reply_error(sock, "error", "the container did not start");
        }
        json_t *lim = verify_limits(e, name, &limits);
        _cleanup_json_ json_t *ok = json_pack("{s:b, s:s, s:s, s:s, s:o*, s:b, s:s}", "ok", true, "engine",
                                              container_kind_name(e->kind), "name", name, "image", tag, "limits", lim,
                                              "rootless", e->rootless, "publish_ip", ip);
        if (!ok || send_json(sock, ok) < 0) {
                (void)container_stop(e, name, STOP_GRACE_S);
                return -EIO;
        }
        *ret_name = TAKE_PTR(name);
        return 0;
}

/* `seed run` in the foreground: the container runs until Ctrl-C (or
 * SIGTERM), which stops it gracefully. */
static int foreground(const struct container_engine *e, const char *name) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        pid_t waiter = fork();
        if (waiter < 0)
                return CLI_EXIT_FAILURE;
        if (waiter == 0) {
                sigprocmask(SIG_UNBLOCK, &mask, NULL);
                int code = container_wait(e, name);
                _exit(code < 0 ? 1 : code);
        }
        for (;;) {
                struct timespec ts = {1, 0};
                int sig = sigtimedwait(&mask, NULL, &ts);
                if (sig == SIGINT || sig == SIGTERM)
                        (void)container_stop(e, name, STOP_GRACE_S);
                int status;
                if (waitpid(waiter, &status, WNOHANG) == waiter)
                        return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_FAILURE;
        }
}

int cli_run_container(const struct cli_run_options *o) {
        const char *want = getenv("SEED_CONTAINER_ENGINE");
        if (want && streq(want, "none"))
                return CLI_RUN_NATIVE; /* the owner's choice: nothing to say */
        struct container_engine e = {0};
        _cleanup_free_ char *why = NULL;
        if (container_engine_detect(&e, &why) < 0) {
                fprintf(stderr, "seed: no container engine works here (%s); running on the host instead (--native)\n",
                        why);
                return CLI_RUN_NATIVE;
        }
        uid_t uid = getuid();
        gid_t gid = getgid();
        if (geteuid() == 0 && priv_ensure_account(&uid, &gid) < 0) {
                container_engine_done(&e);
                fprintf(stderr, "seed: cannot find or create the account '%s'\n", PRIV_ACCOUNT);
                return CLI_EXIT_FAILURE;
        }
        int sp[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
                container_engine_done(&e);
                return CLI_EXIT_FAILURE;
        }
        /* Ctrl-C or SIGTERM while it starts: the owner side (which gets
         * them) ends, and this side stops the container; in the
         * foreground they stop it gracefully (foreground()). */
        sigset_t stops, old_mask;
        sigemptyset(&stops);
        sigaddset(&stops, SIGINT);
        sigaddset(&stops, SIGTERM);
        sigprocmask(SIG_BLOCK, &stops, &old_mask);
        int buf = (int)MSG_MAX + 4096;
        (void)setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        (void)setsockopt(sp[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
        fflush(NULL);
        pid_t owner = fork();
        if (owner == 0) {
                sigprocmask(SIG_SETMASK, &old_mask, NULL);
                close(sp[1]);
                char *chown_paths[] = {(char *)o->seed_dir, NULL};
                if (priv_drop_if_root(chown_paths) < 0)
                        _exit(CLI_EXIT_FAILURE);
                int code = owner_side(o, sp[0]);
                fflush(NULL);
                _exit(code);
        }
        close(sp[0]);
        _cleanup_close_ int sock = sp[1];
        _cleanup_free_ char *name = NULL;
        int r = owner < 0 ? -errno : engine_side(&e, o->seed_dir, uid, gid, sock, &name);
        int status = 0;
        if (owner > 0)
                while (waitpid(owner, &status, 0) < 0 && errno == EINTR)
                        ;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_FAILURE;
        if (r == -EAGAIN || code == EXIT_FALL_BACK) {
                container_engine_done(&e);
                sigprocmask(SIG_SETMASK, &old_mask, NULL);
                return CLI_RUN_NATIVE;
        }
        if (r == -ECONNRESET) { /* the owner side ended before asking (running already, a bad address…) */
                container_engine_done(&e);
                return code;
        }
        if (r < 0 || code != CLI_EXIT_OK) {
                if (name && container_running(&e, name)) {
                        fprintf(stderr, "seed: stopping the container %s\n", name);
                        (void)container_stop(&e, name, STOP_GRACE_S);
                }
                container_engine_done(&e);
                return r < 0 && code == CLI_EXIT_OK ? CLI_EXIT_FAILURE : code;
        }
        sigset_t pending;
        if (!o->detach) {
                code = foreground(&e, name); /* a stop asked meanwhile is pending: it stops it */
        } else if (sigpending(&pending) == 0 && (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM))) {
                fprintf(stderr, "seed: asked to stop while starting; stopping the container %s\n", name);
                (void)container_stop(&e, name, STOP_GRACE_S);
                code = CLI_EXIT_FAILURE;
        }
        container_engine_done(&e);
        return code;
}

int cli_container_stop(const char *seed_dir) {
        _cleanup_free_ char *state = path_join(seed_dir, CLI_CONTAINER_STATE), *name = NULL;
        struct stat st;
        if (!state || lstat(state, &st) < 0) /* never run in a container: nothing to ask an engine */
                return 0;
        struct container_engine e = {0};
        _cleanup_free_ char *why = NULL;
        if (container_engine_detect(&e, &why) < 0 || container_name(seed_dir, &name) < 0) {
                container_engine_done(&e);
                return 0;
        }
        int r = 0;
        if (container_running(&e, name)) {
                r = container_stop(&e, name, STOP_GRACE_S);
                if (r < 0)
                        fprintf(stderr, "seed: cannot stop the container %s: %s\n", name, strerror(-r));
                else
                        r = 1;
        }
        container_engine_done(&e);
        return r;
}

static int read_state(const char *seed_dir, json_t **ret) {
        _cleanup_free_ char *p = path_join(seed_dir, CLI_CONTAINER_STATE), *data = NULL;
        if (!p)
                return -ENOMEM;
        int r = read_file(p, 64u << 10, &data, NULL);
        if (r < 0)
                return r;
        json_t *o = json_loads(data, 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

int cli_container_published_ip(const char *seed_dir, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r = read_state(seed_dir, &o);
        if (r < 0)
                return r;
        const char *ip = json_string_value(json_object_get(o, "publish_ip"));
        if (!ip || strlen(ip) > 45)
                return -EBADMSG;
        return (*ret = strdup(ip)) ? 0 : -ENOMEM;
}

int cli_container_describe(const char *seed_dir, char **ret) {
        _cleanup_json_ json_t *o = NULL;
        int r = read_state(seed_dir, &o);
        if (r < 0)
                return r;
        const char *engine = json_string_value(json_object_get(o, "engine"));
        const char *name = json_string_value(json_object_get(o, "name"));
        json_t *l = json_object_get(o, "limits");
        if (!engine || !name)
                return -EBADMSG;
        const char *mem = json_string_value(json_object_get(json_object_get(l, "memory"), "value"));
        const char *cpus = json_string_value(json_object_get(json_object_get(l, "cpus"), "value"));
        json_int_t pids = json_integer_value(json_object_get(json_object_get(l, "pids"), "value"));
        bool all = json_is_true(json_object_get(json_object_get(l, "memory"), "in_force")) &&
                   json_is_true(json_object_get(json_object_get(l, "cpus"), "in_force")) &&
                   json_is_true(json_object_get(json_object_get(l, "pids"), "in_force"));
        return xasprintf(ret, "container (%.16s, %.80s; memory %.16s, %.16s CPU, %lld processes: %s)", engine, name,
                         mem ? mem : "?", cpus ? cpus : "?", (long long)pids,
                         all ? "in force" : "NOT all in force");
}
