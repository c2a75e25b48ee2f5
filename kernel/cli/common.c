#include "app/app.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "cli/cli.h"
#include "base/priv.h"
#include "base/proc.h"
#include "httpc/httpc.h"

#include <dirent.h>
#include <getopt.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>

int cli_find_seed(const char *dir, char **ret) {
        _cleanup_free_ char *abs = NULL;
        int r = path_abs(dir ? dir : ".", &abs);
        if (r < 0) {
                fprintf(stderr, "seed: '%s': %s\n", dir ? dir : ".", strerror(-r));
                return r;
        }
        for (;;) {
                _cleanup_free_ char *cfg = path_join(abs, "seed.yaml");
                _cleanup_free_ char *kernel = path_join(abs, "kernel");
                if (!cfg || !kernel)
                        return -ENOMEM;
                if (path_exists(cfg) && path_exists(kernel)) {
                        *ret = TAKE_PTR(abs);
                        return 0;
                }
                char *slash = strrchr(abs, '/');
                if (dir || !slash || slash == abs)
                        break;
                *slash = 0;
        }
        fprintf(stderr, "seed: %s is not inside a Seed (no seed.yaml and kernel/ found)%s\n",
                dir ? dir : "the current directory", dir ? "" : "; use --dir");
        return -ENOENT;
}

bool cli_seed_running(const char *seed_dir) {
        _cleanup_free_ char *p = path_join(seed_dir, ".seed/run.lock");
        if (!p)
                return false;
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
                flock(fd, LOCK_UN);
                return false;
        }
        return errno == EWOULDBLOCK;
}

int cli_open_running_seed(const char *dir, char **ret_seed_dir) {
        _cleanup_free_ char *seed_dir = NULL;
        if (cli_find_seed(dir, &seed_dir) < 0)
                return CLI_EXIT_USAGE;
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "seed: cannot switch to the account '%s'\n", PRIV_ACCOUNT);
                return CLI_EXIT_FAILURE;
        }
        if (!cli_seed_running(seed_dir)) {
                fprintf(stderr, "seed: this Seed is not running; start it with 'seed run'\n");
                return CLI_EXIT_NOT_RUNNING;
        }
        *ret_seed_dir = TAKE_PTR(seed_dir);
        return -1;
}

void cli_print_refusal(const char *what, long status, const char *body) {
        _cleanup_json_ json_t *o = body ? json_loads(body, 0, NULL) : NULL;
        const char *e = json_string_value(json_object_get(o, "error"));
        fprintf(stderr, "seed: %s: %s (HTTP %ld)\n", what, e ? e : "unexpected answer", status);
}

void cli_endpoint_done(struct cli_endpoint *e) {
        if (e->token)
                secure_zero(e->token, strlen(e->token));
        free(e->url);
        free(e->host);
        free(e->control_url);
        free(e->token);
        free(e->addr);
        *e = (struct cli_endpoint){0};
}

static char *json_strdup(json_t *o, const char *key, bool *oom) {
        const char *v = json_string_value(json_object_get(o, key));
        char *d = v && *v ? strdup(v) : NULL;
        if (v && *v && !d)
                *oom = true;
        return d;
}

int cli_kernel_endpoint(const char *seed_dir, struct cli_endpoint *ret) {
        _cleanup_free_ char *state = path_join(seed_dir, APP_STATE_FILE);
        _cleanup_free_ char *tokp = path_join(seed_dir, APP_CONTROL_TOKEN_FILE);
        _cleanup_free_ char *data = NULL;
        struct cli_endpoint e = {0};
        if (!state || !tokp)
                return -ENOMEM;
        int r = read_file(state, 64 * 1024, &data, NULL);
        if (r < 0)
                return r;
        if ((r = read_file(tokp, 4096, &e.token, NULL)) < 0)
                return r;
        e.token[strcspn(e.token, "\r\n")] = 0;
        _cleanup_json_ json_t *o = json_loads(data, 0, NULL);
        bool oom = false;
        e.url = json_strdup(o, "url", &oom);
        e.host = json_strdup(o, "host", &oom);
        e.control_url = json_strdup(o, "control_url", &oom);
        e.addr = json_strdup(o, "addr", &oom);
        json_int_t pid = json_integer_value(json_object_get(o, "pid"));
        e.pid = pid > 1 && pid <= INT_MAX ? (pid_t)pid : 0;
        r = oom ? -ENOMEM : 0;
        if (r == 0 && (!e.url || !startswith(e.url, "http://") || (e.host && strpbrk(e.host, "\r\n"))))
                r = -EBADMSG;
        if (r == 0 && !e.control_url && xasprintf(&e.control_url, "%s/_seed/", e.url) < 0)
                r = -ENOMEM; /* a kernel from before the control plane had an origin of its own */
        if (r < 0) {
                cli_endpoint_done(&e);
                return r;
        }
        *ret = e;
        return 0;
}

int cli_api(const char *seed_dir, const char *method, const char *path, const char *body,
            long *ret_status, char **ret_body) {
        return cli_api_timeout(seed_dir, method, path, body, 30000, ret_status, ret_body);
}

int cli_api_timeout(const char *seed_dir, const char *method, const char *path, const char *body, int timeout_ms,
                    long *ret_status, char **ret_body) {
        _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
        _cleanup_free_ char *full = NULL, *auth = NULL, *host = NULL, *err = NULL;
        int r = cli_kernel_endpoint(seed_dir, &e);
        if (r < 0)
                return r;
        if (xasprintf(&full, "%s%s", e.url, path) < 0 || xasprintf(&auth, "Authorization: Bearer %s", e.token) < 0 ||
            (e.host && xasprintf(&host, "Host: %s", e.host) < 0))
                return -ENOMEM;
        char *headers[] = {auth, "Content-Type: application/json", "Accept: application/json", host, NULL};
        struct httpc_response res = {0};
        r = httpc_do(&(struct httpc_request){.method = method, .url = full, .headers = headers, .body = body,
                                             .body_len = body ? strlen(body) : 0, .timeout_ms = timeout_ms},
                     &res, &err);
        secure_zero(auth, strlen(auth));
        if (r < 0) {
                fprintf(stderr, "seed: cannot reach the kernel at %s: %s\n", e.url, err ? err : strerror(-r));
                return r;
        }
        *ret_status = res.status;
        *ret_body = res.body;
        return 0;
}

int cli_login_link(const char *seed_dir, char **ret_url) {
        long status = 0;
        _cleanup_free_ char *body = NULL;
        int r = cli_api(seed_dir, "POST", "/_seed/api/login-links", "{}", &status, &body);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *o = json_loads(body, 0, NULL);
        const char *url = o ? json_string_value(json_object_get(o, "url")) : NULL;
        if ((status != 200 && status != 201) || !url) {
                const char *e = o ? json_string_value(json_object_get(o, "error")) : NULL;
                fprintf(stderr, "seed: the kernel refused a sign-in link (HTTP %ld): %s\n", status,
                        e ? e : "unexpected answer");
                return -EIO;
        }
        char *u = strdup(url);
        if (!u)
                return -ENOMEM;
        *ret_url = u;
        return 0;
}

void cli_scrub_arg(char *arg) {
        char *eq = strchr(arg, '=');
        if (eq)
                memset(eq + 1, 'x', strlen(eq + 1));
}

const char *cli_source_dir(void) {
        static char dir[PATH_MAX];
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
                exe[n] = 0;
                /* Installed: <prefix>/bin/seed -> <prefix>/share/seed/source */
                char *slash = strrchr(exe, '/');
                if (slash) {
                        *slash = 0;
                        if (endswith(exe, "/bin")) {
                                exe[strlen(exe) - 4] = 0;
                                snprintf(dir, sizeof dir, "%s/share/seed/source", exe);
                                char probe[PATH_MAX + 16];
                                snprintf(probe, sizeof probe, "%s/meson.build", dir);
                                if (path_exists(probe))
                                        return dir;
                        }
                }
        }
        return SEED_SOURCE_DIR; /* running from the build tree */
}

/* What a Seed's source tree is: the design card's top level. */
static const char *const tree_entries[] = {
        "meson.build", "meson_options.txt", "seed.yaml", "README.md", "SECURITY.md", ".gitignore",
        "seccomp.json", "Dockerfile", "kernel", "cmd", "control", "organism", "knowledge", "skills", "tests", "bench",
        "scripts", "tools", ".ci",
};

/* Not source: VCS and kernel dirs, dependencies, caches, test output
 * (the browser tests' screenshots in tests/browser/out). */
static bool skip_name(const char *parent, const char *name) {
        return streq(name, ".") || streq(name, "..") || streq(name, "node_modules") || streq(name, ".git") ||
               streq(name, ".seed") || streq(name, "__pycache__") || (streq(parent, "browser") && streq(name, "out"));
}

static int copy_file(int sfd, int dfd, const char *name, const struct stat *st) {
        _cleanup_close_ int in = openat(sfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0)
                return -errno;
        _cleanup_close_ int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                                         (st->st_mode & 0111) ? 0755 : 0644);
        if (out < 0)
                return -errno;
        char buf[65536];
        for (;;) {
                ssize_t k = read(in, buf, sizeof buf);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return 0;
                for (ssize_t off = 0; off < k;) {
                        ssize_t w = write(out, buf + off, (size_t)(k - off));
                        if (w < 0)
                                return -errno;
                        off += w;
                }
        }
}

static int copy_entry(int sfd, int dfd, const char *name, int depth) {
        struct stat st;
        if (depth > 32)
                return -ELOOP;
        if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(sfd, name, target, sizeof target - 1);
                if (n < 0)
                        return -errno;
                target[n] = 0;
                return symlinkat(target, dfd, name) < 0 ? -errno : 0;
        }
        if (S_ISREG(st.st_mode))
                return copy_file(sfd, dfd, name, &st);
        if (!S_ISDIR(st.st_mode))
                return 0; /* sockets, fifos: not source */
        if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int sub_s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        _cleanup_close_ int sub_d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (sub_s < 0 || sub_d < 0)
                return -errno;
        DIR *d = fdopendir(dup(sub_s));
        if (!d)
                return -errno;
        int r = 0;
        struct dirent *de;
        while (r == 0 && (de = readdir(d)))
                if (!skip_name(name, de->d_name))
                        r = copy_entry(sub_s, sub_d, de->d_name, depth + 1);
        closedir(d);
        return r;
}

int cli_copy_source_tree(const char *src, const char *dst) {
        _cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0 || dfd < 0)
                return -errno;
        for (size_t i = 0; i < ARRAY_SIZE(tree_entries); i++) {
                if (faccessat(sfd, tree_entries[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                int r = copy_entry(sfd, dfd, tree_entries[i], 0);
                if (r < 0)
                        return log_error_errno(r, "cannot copy '%s/%s': %m", src, tree_entries[i]);
        }
        return 0;
}

bool cli_path_inside(const char *path, const char *dir) {
        _cleanup_free_ char *abs = NULL;
        if (path_abs(path, &abs) < 0)
                return false;
        size_t n = strlen(dir);
        return strncmp(abs, dir, n) == 0 && (abs[n] == '/' || abs[n] == 0);
}

void cli_open_in_browser(const char *url) {
        /* Only what a desktop opener needs: never the caller's whole environment. */
        static const char *const pass[] = {"DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS",
                                           "HOME", "PATH"};
        if (access("/usr/bin/xdg-open", X_OK) < 0 || (!getenv("DISPLAY") && !getenv("WAYLAND_DISPLAY")))
                return;
        _cleanup_strv_free_ char **env = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(pass); i++) {
                const char *v = getenv(pass[i]);
                if (v && strv_pushf(&env, "%s=%s", pass[i], v) < 0)
                        return;
        }
        char *argv[] = {"/usr/bin/xdg-open", (char *)url, NULL};
        pid_t pid;
        if (proc_spawn(&(struct proc_opts){.argv = argv, .envp = env, .stdin_fd = -1, .out_fd = -1}, &pid) == 0)
                (void)proc_wait(pid, 5000); /* xdg-open hands over to the browser and exits */
}

int cli_args_dir_only(int argc, char **argv, const char *usage, const char **ret_dir) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},
                {"help", no_argument, NULL, 'h'},
                {0},
        };
        const char *dir = NULL;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'd': dir = optarg; break;
                case 'h': fputs(usage, stdout); return CLI_EXIT_OK;
                default: fputs(usage, stderr); return CLI_EXIT_USAGE;
                }
        }
        if (optind != argc) {
                fputs(usage, stderr);
                return CLI_EXIT_USAGE;
        }
        *ret_dir = dir;
        return -1;
}
