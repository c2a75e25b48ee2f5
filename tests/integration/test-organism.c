/* Integration tests for the organism supervisor: the real starter organism,
 * real bwrap and the real seed-bridge, as the unprivileged account. The only
 * way in is the bridge's Unix socket, as for the kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "base/proc.h"
#include "organism/organism.h"
#include "sandbox/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <limits.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#define BRIDGE SEED_BUILD_ROOT "/cmd/seed-bridge/seed-bridge"
#define GREETING "I don't have a purpose yet. What should I become?"

static char root[256];   /* temp dir */
static char seed[512];   /* the fake Seed folder */
static const char *marker; /* basename of root: tags every process we start */
static char *unavailable;

/* A server that crashes on request: GET /crash exits with code 3. */
static const char crashy_js[] =
        "'use strict';\n"
        "const http = require('node:http');\n"
        "const server = http.createServer((req, res) => {\n"
        "  if (req.url === '/crash') { console.log('crashing on request'); process.exit(3); }\n"
        "  res.writeHead(200, {'Content-Type': 'application/json'});\n"
        "  res.end('{\"ok\":true}');\n"
        "});\n"
        "server.listen(Number(process.env.PORT), '127.0.0.1');\n";

/* A hostile organism: GET /attack tries to swap the kernel's bridge socket
 * for one of its own (the hole this replaced: the socket's host directory
 * was mounted writable at /run/organism) and to write under .seed/, then
 * reports each attempt as "what: ok" or "what: <error code>". */
static const char attack_js[] =
        "'use strict';\n"
        "const http = require('node:http');\n"
        "const net = require('node:net');\n"
        "const fs = require('node:fs');\n"
        "net.createServer((c) => c.end('HTTP/1.1 200 OK\\r\\n\\r\\nEVIL')).listen('/tmp/evil.sock');\n"
        "// ln -sfn /tmp/evil.sock DIR/http.sock, atomically\n"
        "const swap = (dir) => {\n"
        "  fs.symlinkSync('/tmp/evil.sock', dir + '/.swap');\n"
        "  fs.renameSync(dir + '/.swap', dir + '/http.sock');\n"
        "};\n"
        "const attempts = [\n"
        "  ['mkdir /run/organism', () => fs.mkdirSync('/run/organism')],\n"
        "  ['replace /run/organism/http.sock', () => swap('/run/organism')],\n"
        "  ['write /run/organism/x', () => fs.writeFileSync('/run/organism/x', 'x')],\n"
        "  ['mkdir /workspace/.seed/organism', () => fs.mkdirSync('/workspace/.seed/organism')],\n"
        "  ['replace /workspace/.seed/organism/http.sock', () => swap('/workspace/.seed/organism')],\n"
        "  ['replace /workspace/.seed/http.sock', () => swap('/workspace/.seed')],\n"
        "  ['write /workspace/.seed/x', () => fs.writeFileSync('/workspace/.seed/x', 'x')],\n"
        "  ['write /workspace/x', () => fs.writeFileSync('/workspace/x', 'x')],\n"
        "];\n"
        "const server = http.createServer((req, res) => {\n"
        "  if (req.url !== '/attack') { res.writeHead(200); res.end('{\"ok\":true}'); return; }\n"
        "  let out = '';\n"
        "  for (const [what, fn] of attempts) {\n"
        "    try { fn(); out += what + ': ok\\n'; } catch (e) { out += what + ': ' + (e.code || e) + '\\n'; }\n"
        "  }\n"
        "  out += 'seen in /workspace/.seed: [' + fs.readdirSync('/workspace/.seed').join(',') + ']\\n';\n"
        "  res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': Buffer.byteLength(out)});\n"
        "  res.end(out);\n"
        "});\n"
        "server.listen(Number(process.env.PORT), '127.0.0.1');\n";

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
        nanosleep(&ts, NULL);
}

static int setup(void **state) {
        (void)state;
        char tmpl[] = "/tmp/itest-organism.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(root, sizeof root, "%s", tmpl);
        marker = strrchr(root, '/') + 1;
        snprintf(seed, sizeof seed, "%s/seed", root);
        assert_int_equal(mkdir_p(seed, 0755), 0);
        char *cp[] = {"/bin/cp", "-r", SEED_SOURCE_ROOT "/organism", seed, NULL};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = cp, .stdin_fd = -1, .out_fd = -1,
                                                      .timeout_ms = 60000},
                                  &res),
                         0);
        assert_int_equal(res.exit_code, 0);
        proc_result_done(&res);
        _cleanup_free_ char *crashy = NULL, *attack = NULL, *nm = NULL;
        assert_true(xasprintf(&crashy, "%s/organism/bin/crashy.js", seed) >= 0);
        assert_int_equal(write_file_atomic(crashy, crashy_js, strlen(crashy_js), 0644), 0);
        assert_true(xasprintf(&attack, "%s/organism/bin/attack.js", seed) >= 0);
        assert_int_equal(write_file_atomic(attack, attack_js, strlen(attack_js), 0644), 0);
        assert_true(xasprintf(&nm, "%s/organism/node_modules", seed) >= 0);
        rm_rf(nm);

        char *msg = NULL;
        if (sandbox_check(&msg) < 0)
                unavailable = msg ? msg : strdup("sandbox_check failed");
        else if (access(BRIDGE, X_OK) < 0)
                unavailable = strdup("seed-bridge is not built: " BRIDGE);
        else if (access("/usr/bin/node", X_OK) < 0)
                unavailable = strdup("node is not installed at /usr/bin/node");
        free(unavailable ? NULL : msg);
        return 0;
}

static int teardown(void **state) {
        (void)state;
        if (getenv("KEEP_TMP"))
                fprintf(stderr, "kept %s\n", root);
        else
                rm_rf(root);
        free(unavailable);
        return 0;
}

static void require_env(void) {
        if (unavailable) {
                print_message("# skipped: %s\n", unavailable);
                skip();
        }
}

/* Records state changes from the supervising thread. */
struct states {
        pthread_mutex_t lock;
        enum organism_state seq[256];
        size_t n;
};

static void on_state(void *userdata, enum organism_state s) {
        struct states *st = userdata;
        pthread_mutex_lock(&st->lock);
        if (st->n < ARRAY_SIZE(st->seq))
                st->seq[st->n++] = s;
        pthread_mutex_unlock(&st->lock);
}

/* Index of the first s at or after from; -1 if none. */
static ssize_t states_find(struct states *st, size_t from, enum organism_state s) {
        pthread_mutex_lock(&st->lock);
        ssize_t r = -1;
        for (size_t i = from; i < st->n && r < 0; i++)
                if (st->seq[i] == s)
                        r = (ssize_t)i;
        pthread_mutex_unlock(&st->lock);
        return r;
}

static struct organism_config config(const char *build_cmd, const char *run_cmd, struct states *st) {
        return (struct organism_config){
                .seed_dir = seed,
                .build_cmd = build_cmd,
                .run_cmd = run_cmd,
                .health_path = "/healthz",
                .port = 8080,
                .bridge_path = BRIDGE,
                .backoff_ms_base = 100,
                .health_timeout_ms = 30000,
                .on_state = st ? on_state : NULL,
                .userdata = st,
        };
}

/* A raw HTTP/1.1 GET through the bridge socket. Returns the status code and
 * hands the whole response to *ret (caller frees). */
static int http_get(const char *sock, const char *path, char **ret) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        assert_true(strlen(sock) < sizeof sa.sun_path);
        strcpy(sa.sun_path, sock);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        struct timeval tv = {.tv_sec = 10};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
                return -errno;
        char req[256];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n", path);
        if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
                return -EIO;
        struct buf b = BUF_INIT(1024 * 1024);
        char chunk[4096];
        for (;;) {
                ssize_t k = recv(fd, chunk, sizeof chunk, 0);
                if (k <= 0)
                        break;
                if (buf_append(&b, chunk, (size_t)k) < 0)
                        break;
        }
        int status = -EIO;
        if (b.data && startswith(b.data, "HTTP/1.1 "))
                status = atoi(b.data + 9);
        if (ret)
                *ret = buf_steal(&b);
        buf_free(&b);
        return status;
}

static int count_procs(const char *m) {
        DIR *d = opendir("/proc");
        assert_non_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9' || atoi(de->d_name) == getpid())
                        continue;
                char path[300];
                snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
                _cleanup_free_ char *cmd = NULL;
                size_t len = 0;
                if (read_file(path, 65536, &cmd, &len) < 0)
                        continue;
                for (size_t i = 0; i < len; i++)
                        if (!cmd[i])
                                cmd[i] = ' ';
                if (strstr(cmd, m)) {
                        n++;
                        if (getenv("DEBUG_PROCS")) {
                                char sp[300];
                                snprintf(sp, sizeof sp, "/proc/%s/stat", de->d_name);
                                _cleanup_free_ char *stat = NULL;
                                read_file(sp, 4096, &stat, NULL);
                                fprintf(stderr, "left: %s\n   %s", cmd, stat ? stat : "?\n");
                        }
                }
        }
        closedir(d);
        return n;
}

/* Polls until no process carries the marker (teardown is asynchronous). */
static void assert_no_processes(void) {
        int64_t deadline = now_ms() + 10000;
        while (count_procs(marker) > 0 && now_ms() < deadline)
                sleep_ms(20);
        assert_int_equal(count_procs(marker), 0);
}

static char *organism_log(void) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/.seed/logs/organism.log", seed) >= 0);
        char *s = NULL;
        if (read_file(p, 16 * 1024 * 1024, &s, NULL) < 0)
                return strdup("");
        return s;
}

/* Polls the organism log for needle. */
static bool log_eventually_has(const char *needle) {
        int64_t deadline = now_ms() + 10000;
        do {
                _cleanup_free_ char *log = organism_log();
                if (strstr(log, needle))
                        return true;
                sleep_ms(20);
        } while (now_ms() < deadline);
        return false;
}

static void test_starter_runs(void **state) {
        (void)state;
        require_env();
        _cleanup_free_ char *run = NULL;
        assert_true(xasprintf(&run, "organism/bin/server %s", marker) >= 0);
        struct organism_config cfg = config("make -C organism build", run, NULL);
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        assert_int_equal(organism_start(o), 0);
        assert_int_equal(organism_start(o), -EBUSY);
        assert_int_equal(organism_wait_ready(o, 90000), 0);
        assert_int_equal(organism_state(o), ORGANISM_RUNNING);

        _cleanup_free_ char *page = NULL, *health = NULL, *missing = NULL;
        assert_int_equal(http_get(organism_socket(o), "/", &page), 200);
        assert_non_null(strstr(page, GREETING));
        assert_int_equal(http_get(organism_socket(o), "/healthz", &health), 200);
        assert_non_null(strstr(health, "{\"ok\":true}"));
        assert_int_equal(http_get(organism_socket(o), "/nope", &missing), 404);
        /* Output of the build and of the server reaches the organism log. */
        assert_true(log_eventually_has("node --check bin/server"));
        assert_true(log_eventually_has("organism listening on http://127.0.0.1:8080"));

        /* The socket is the owner's only: mode 0600. */
        struct stat st;
        assert_int_equal(stat(organism_socket(o), &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        /* Restart: stop, then start again. */
        assert_int_equal(organism_restart(o), 0);
        assert_int_equal(organism_wait_ready(o, 90000), 0);
        assert_int_equal(http_get(organism_socket(o), "/healthz", NULL), 200);

        organism_stop(o);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        assert_no_processes();
        assert_true(http_get(organism_socket(o), "/healthz", NULL) < 0);
        /* Stopping is graceful: SIGTERM reached the bridge, which passed it on. */
        assert_true(log_eventually_has("seed-bridge info: received signal 15"));
        assert_true(log_eventually_has("organism shutting down (SIGTERM)"));
        organism_free(o);
}

/* Names in dir, sorted, joined with ','. Caller frees. */
static char *list_dir(const char *dir) {
        struct dirent **names = NULL;
        int n = scandir(dir, &names, NULL, alphasort);
        assert_true(n >= 0);
        char *s = strdup("");
        for (int i = 0; i < n; i++) {
                if (!streq(names[i]->d_name, ".") && !streq(names[i]->d_name, "..")) {
                        char *t = NULL;
                        assert_true(xasprintf(&t, "%s%s%s", s, *s ? "," : "", names[i]->d_name) >= 0);
                        free(s);
                        s = t;
                }
                free(names[i]);
        }
        free(names);
        return s;
}

/* The live organism cannot replace the socket the kernel connects to: the
 * kernel binds it outside the sandbox and nothing of .seed/ is writable
 * inside. After the organism tried, the host's http.sock is still the
 * kernel's own listening socket and requests still reach the organism. */
static void test_socket_cannot_be_swapped(void **state) {
        (void)state;
        require_env();
        _cleanup_free_ char *run = NULL, *dot_seed = NULL, *run_dir = NULL;
        assert_true(xasprintf(&run, "node organism/bin/attack.js %s", marker) >= 0);
        assert_true(xasprintf(&dot_seed, "%s/.seed", seed) >= 0);
        assert_true(xasprintf(&run_dir, "%s/.seed/organism", seed) >= 0);
        struct organism_config cfg = config("true", run, NULL);
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        assert_int_equal(organism_wait_ready(o, 60000), 0);

        /* The kernel's run dir: 0700, holding only the socket it bound. */
        const char *sock = organism_socket(o);
        _cleanup_free_ char *want_sock = NULL;
        assert_true(xasprintf(&want_sock, "%s/http.sock", run_dir) >= 0);
        assert_string_equal(sock, want_sock);
        struct stat dst, before, after;
        assert_int_equal(lstat(run_dir, &dst), 0);
        assert_true(S_ISDIR(dst.st_mode));
        assert_int_equal(dst.st_mode & 0777, 0700);
        assert_int_equal(lstat(sock, &before), 0);
        assert_true(S_ISSOCK(before.st_mode));
        _cleanup_free_ char *seed_before = list_dir(dot_seed), *run_before = list_dir(run_dir);
        assert_string_equal(run_before, "http.sock");

        _cleanup_free_ char *report = NULL;
        assert_int_equal(http_get(sock, "/attack", &report), 200);
        const char *body = strstr(report, "\r\n\r\n");
        for (char *l = strtok(body ? strdupa(body + 4) : strdupa(report), "\n"); l; l = strtok(NULL, "\n"))
                print_message("# %s\n", l); /* a TAP comment */
        /* Every attempt ran and every one failed. */
        const char *tried[] = {"mkdir /run/organism: ", "replace /run/organism/http.sock: ",
                               "write /run/organism/x: ", "mkdir /workspace/.seed/organism: ",
                               "replace /workspace/.seed/organism/http.sock: ", "replace /workspace/.seed/http.sock: ",
                               "write /workspace/.seed/x: ", "write /workspace/x: "};
        for (size_t i = 0; i < ARRAY_SIZE(tried); i++) {
                const char *line = strstr(report, tried[i]);
                if (!line)
                        fail_msg("attempt '%s' not reported", tried[i]);
                const char *result = line + strlen(tried[i]);
                if (startswith(result, "ok\n"))
                        fail_msg("the organism could %s", tried[i]);
                assert_true(startswith(result, "E")); /* an errno name: EROFS, ENOENT, … */
        }
        assert_non_null(strstr(report, "mkdir /run/organism: EROFS\n"));
        assert_non_null(strstr(report, "write /workspace/.seed/x: EROFS\n"));
        assert_non_null(strstr(report, "seen in /workspace/.seed: []\n"));

        /* On the host: nothing new under .seed/, the same socket inode, and
         * it is the kernel's own listener (SO_PEERCRED: this process). */
        _cleanup_free_ char *seed_after = list_dir(dot_seed), *run_after = list_dir(run_dir);
        assert_string_equal(seed_after, seed_before);
        assert_string_equal(run_after, "http.sock");
        assert_int_equal(lstat(sock, &after), 0);
        assert_true(S_ISSOCK(after.st_mode));
        assert_int_equal(after.st_ino, before.st_ino);
        assert_int_equal(after.st_uid, geteuid());
        int fd = -1;
        assert_int_equal(organism_connect(sock, 0, &fd), 0);
        struct ucred cred;
        socklen_t len = sizeof cred;
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len), 0);
        assert_int_equal(cred.pid, getpid());
        close(fd);
        _cleanup_free_ char *health = NULL;
        assert_int_equal(http_get(sock, "/healthz", &health), 200);
        assert_null(strstr(health, "EVIL"));

        organism_stop(o);
        assert_no_processes();
        /* The kernel removes its socket when the organism stops. */
        assert_int_equal(lstat(sock, &after), -1);
        assert_int_equal(errno, ENOENT);
        organism_free(o);
}

static void test_bridge_refuses_bad_fd(void **state) {
        (void)state;
        require_env();
        /* Not a listening AF_UNIX stream socket: the bridge says so and
         * never starts the organism. */
        int notlistening = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int dgram = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(notlistening > 2 && dgram > 2 && file > 2);
        struct {
                int fd;
                const char *why;
        } cases[] = {{notlistening, "not listening"}, {dgram, "not an AF_UNIX stream socket"},
                     {file, "not a socket"}, {999, "not an open fd"}};
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char fd[16];
                snprintf(fd, sizeof fd, "%d", cases[i].fd);
                char *argv[] = {BRIDGE, "--listen-fd", fd, "--port", "8080", "--", "/bin/echo", "started", NULL};
                int keep = cases[i].fd;
                struct proc_result res = {0};
                assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1,
                                                              .keep_fds = keep == 999 ? NULL : &keep,
                                                              .n_keep_fds = keep == 999 ? 0 : 1,
                                                              .timeout_ms = 10000},
                                          &res),
                                 0);
                assert_int_equal(res.exit_code, 1);
                assert_non_null(strstr(res.output, cases[i].why));
                assert_null(strstr(res.output, "started"));
                proc_result_done(&res);
        }
        /* The old way of asking it to bind a path itself is gone. */
        char *old[] = {BRIDGE, "--listen", "/tmp/x.sock", "--port", "8080", "--", "/bin/true", NULL};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = old, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 10000},
                                  &res),
                         0);
        assert_int_equal(res.exit_code, 2);
        assert_non_null(strstr(res.output, "--listen-fd N"));
        proc_result_done(&res);
        close(notlistening);
        close(dgram);
        close(file);
}

static void test_crash_restarts(void **state) {
        (void)state;
        require_env();
        struct states st = {.lock = PTHREAD_MUTEX_INITIALIZER};
        _cleanup_free_ char *run = NULL;
        assert_true(xasprintf(&run, "node organism/bin/crashy.js %s", marker) >= 0);
        struct organism_config cfg = config("true", run, &st);
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        assert_int_equal(organism_wait_ready(o, 60000), 0);
        assert_int_equal(organism_crash_count(o), 0);

        /* The app dies; the bridge exits with it; the supervisor restarts it. */
        http_get(organism_socket(o), "/crash", NULL);
        int64_t deadline = now_ms() + 30000;
        while (organism_crash_count(o) < 1 && now_ms() < deadline)
                sleep_ms(10);
        assert_int_equal(organism_crash_count(o), 1);
        assert_int_equal(organism_wait_ready(o, 60000), 0);
        ssize_t running1 = states_find(&st, 0, ORGANISM_RUNNING);
        ssize_t crashed = states_find(&st, (size_t)running1, ORGANISM_CRASHED);
        ssize_t starting2 = crashed < 0 ? -1 : states_find(&st, (size_t)crashed, ORGANISM_STARTING);
        ssize_t running2 = starting2 < 0 ? -1 : states_find(&st, (size_t)starting2, ORGANISM_RUNNING);
        assert_true(running1 >= 0 && crashed > running1 && starting2 > crashed && running2 > starting2);
        assert_int_equal(http_get(organism_socket(o), "/healthz", NULL), 200);
        assert_true(log_eventually_has("crashing on request"));
        assert_true(log_eventually_has("exited with code 3"));

        organism_stop(o);
        assert_no_processes();
        organism_free(o);
}

static void test_always_crashing_goes_down(void **state) {
        (void)state;
        require_env();
        struct states st = {.lock = PTHREAD_MUTEX_INITIALIZER};
        _cleanup_free_ char *run = NULL;
        assert_true(xasprintf(&run, "echo dying %s; exit 4", marker) >= 0);
        struct organism_config cfg = config("true", run, &st);
        cfg.backoff_ms_base = 50;
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        assert_int_equal(organism_wait_ready(o, 60000), -EIO);
        assert_int_equal(organism_state(o), ORGANISM_DOWN);
        /* Down after the 4th crash: three restarts, then it stays down. */
        assert_int_equal(organism_crash_count(o), 4);
        size_t crashed = 0, starting = 0;
        for (size_t i = 0; i < st.n; i++) {
                crashed += st.seq[i] == ORGANISM_CRASHED;
                starting += st.seq[i] == ORGANISM_STARTING;
        }
        assert_int_equal(crashed, 3);
        assert_int_equal(starting, 4);
        assert_int_equal(st.seq[st.n - 1], ORGANISM_DOWN);
        _cleanup_free_ char *reason = NULL;
        assert_int_equal(organism_reason(o, &reason), 0);
        assert_string_equal(reason, "crashed too often");
        assert_true(log_eventually_has("giving up"));
        assert_true(log_eventually_has("exited with code 4"));
        /* It stays down. */
        sleep_ms(300);
        assert_int_equal(organism_state(o), ORGANISM_DOWN);
        assert_no_processes();
        organism_stop(o);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        organism_free(o);
}

static void test_build_failure_goes_down(void **state) {
        (void)state;
        require_env();
        struct organism_config cfg = config("echo build-broken-marker; exit 2", "organism/bin/server", NULL);
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        assert_int_equal(organism_wait_ready(o, 60000), -EIO);
        assert_int_equal(organism_state(o), ORGANISM_DOWN);
        _cleanup_free_ char *reason = NULL;
        assert_int_equal(organism_reason(o, &reason), 0);
        assert_string_equal(reason, "build failed");
        assert_true(log_eventually_has("build-broken-marker"));
        assert_true(log_eventually_has("build failed (exit code 2)"));
        organism_free(o);
}

static void test_build_cannot_touch_kernel(void **state) {
        (void)state;
        require_env();
        /* The build may write organism/ but nothing else of the Seed. */
        struct organism_config cfg = config("touch organism/built && touch seed.yaml", "organism/bin/server", NULL);
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        assert_int_equal(organism_wait_ready(o, 60000), -EIO);
        _cleanup_free_ char *built = NULL, *yaml = NULL;
        assert_true(xasprintf(&built, "%s/organism/built", seed) >= 0);
        assert_true(xasprintf(&yaml, "%s/seed.yaml", seed) >= 0);
        assert_true(path_exists(built));
        assert_false(path_exists(yaml));
        organism_free(o);
}

static void test_stop_is_prompt(void **state) {
        (void)state;
        require_env();
        /* Stop during a long build. */
        _cleanup_free_ char *build = NULL;
        assert_true(xasprintf(&build, "sleep 60; echo %s", marker) >= 0);
        struct organism_config cfg = config(build, "organism/bin/server", NULL);
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        int64_t deadline = now_ms() + 10000;
        while (count_procs(marker) < 2 && now_ms() < deadline)
                sleep_ms(10);
        assert_int_equal(organism_state(o), ORGANISM_BUILDING);
        int64_t t0 = now_ms();
        organism_stop(o);
        assert_true(now_ms() - t0 < 12000);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        assert_no_processes();
        organism_free(o);

        /* Stop during a long backoff wakes it at once. */
        struct states st = {.lock = PTHREAD_MUTEX_INITIALIZER};
        cfg = config("true", "exit 1", &st);
        cfg.backoff_ms_base = 60000;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), 0);
        deadline = now_ms() + 30000;
        while (states_find(&st, 0, ORGANISM_CRASHED) < 0 && now_ms() < deadline)
                sleep_ms(10);
        assert_int_equal(organism_state(o), ORGANISM_CRASHED);
        t0 = now_ms();
        organism_stop(o);
        assert_true(now_ms() - t0 < 2000);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        organism_free(o);
}

/* The starter's own tests pass in a test sandbox (as an evolution runs them). */
static void test_starter_tests_pass(void **state) {
        (void)state;
        require_env();
        _cleanup_free_ char *cache = NULL;
        assert_true(xasprintf(&cache, "%s/.seed/cache", seed) >= 0);
        assert_int_equal(mkdir_p(cache, 0700), 0);
        struct sandbox_spec spec = {
                .profile = SANDBOX_TEST,
                .seed_dir = seed,
                .workspace = seed,
                .evolvable = (char *const[]){"organism/", NULL},
                .cache_dir = cache,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", "make -C organism test", NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 120000, &res), 0);
        if (res.exit_code != 0)
                print_message("%s\n", res.output);
        assert_int_equal(res.exit_code, 0);
        assert_non_null(strstr(res.output, "# pass 5")); /* the starter organism's tests, its logo's among them */
        assert_non_null(strstr(res.output, "# fail 0"));
        proc_result_done(&res);
}

static void test_invalid_config(void **state) {
        (void)state;
        struct organism *o = NULL;
        struct organism_config cfg = config("true", "true", NULL);
        cfg.seed_dir = "relative";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = config("true", "true", NULL);
        cfg.health_path = "/healthz HTTP/1.1\r\nX: y";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = config("true", "true", NULL);
        cfg.port = 0;
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = config("true", "true", NULL);
        cfg.bridge_path = "/nonexistent/seed-bridge";
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_start(o), -ENOENT);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        assert_int_equal(organism_wait_ready(o, 10), -ESRCH);
        assert_string_equal(organism_state_name(ORGANISM_CRASHED), "crashed");
        organism_free(o);
}

int main(void) {
        close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_starter_runs),
                cmocka_unit_test(test_socket_cannot_be_swapped),
                cmocka_unit_test(test_bridge_refuses_bad_fd),
                cmocka_unit_test(test_crash_restarts),
                cmocka_unit_test(test_always_crashing_goes_down),
                cmocka_unit_test(test_build_failure_goes_down),
                cmocka_unit_test(test_build_cannot_touch_kernel),
                cmocka_unit_test(test_stop_is_prompt),
                cmocka_unit_test(test_starter_tests_pass),
                cmocka_unit_test(test_invalid_config),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
