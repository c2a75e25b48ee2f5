/* sandbox.c — bubblewrap sandboxes: a spec becomes a policy (typed mount
 * operations + a complete environment), the policy becomes a bwrap argv, and
 * the argv runs through kernel/base/proc. */
#include "sandbox/sandbox.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/embedded.h"
#include "base/log.h"
#include "sandbox/door.h"
#include "sandbox/reap.h"
#include "sandbox/seccomp.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define SANDBOX_HOME "/home/sandbox"
#define SANDBOX_WORKSPACE "/workspace"
#define SANDBOX_PATH_MAX 4096
#define SANDBOX_ENV_MAX 64
#define SANDBOX_START_TIMEOUT_MS 30000
#define SANDBOX_DOOR_TIMEOUT_MS 10000
/* The door's address as clients inside use it, and what Node.js older than
 * 22.21 needs to honour it (sandbox/egress-node.cjs, embedded). */
#define SANDBOX_STR_(x) #x
#define SANDBOX_STR(x) SANDBOX_STR_(x)
#define SANDBOX_PROXY_URL "http://127.0.0.1:" SANDBOX_STR(EGRESS_PORT)
#define SANDBOX_NODE_SHIM "/run/seed/egress-node.cjs"

extern const struct embedded_file sandbox_files[]; /* sandbox-files.c, generated */

/* Resource limits set on every sandbox's pid 1 before the command runs
 * (inherited by everything inside; a limit is only ever lowered). */
static const struct {
        int resource;
        rlim_t value;
        const char *what;
} sandbox_limits[] = {
        /* Counted per user namespace: the sandbox's own processes and
         * threads, not the kernel's (which keeps its own, higher limit). */
        {RLIMIT_NPROC, SANDBOX_LIMIT_NPROC, "processes"},
        {RLIMIT_CORE, 0, "core dumps"},
        {RLIMIT_FSIZE, SANDBOX_LIMIT_FSIZE, "file size"},
};

/* Host system directories shown read-only. The lib and bin entries are
 * recreated as they are on the host: a symlink stays a symlink (Debian 12:
 * /bin -> usr/bin), a directory is bound read-only, a missing one skipped. */
static const char *const system_dirs[] = {"/usr", "/etc"};
static const char *const system_links[] = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};

/* Variables the policy sets itself; extra_env may not override them. */
static const char *const fixed_env_names[] = {
        "PATH", "HOME", "TMPDIR", "LANG", "PWD", "SEED_ENV", "PORT", "DATABASE_URL",
        "npm_config_cache", "XDG_CACHE_HOME",
        /* The way out: the door, and the proxy variables clients read. */
        "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY",
        "all_proxy", "NODE_USE_ENV_PROXY", "NODE_OPTIONS", "npm_config_https_proxy", "npm_config_proxy",
        "npm_config_noproxy",
};

const char *const *sandbox_fixed_env_names(size_t *ret_n) {
        *ret_n = ARRAY_SIZE(fixed_env_names);
        return fixed_env_names;
}

bool sandbox_env_name_fixed(const char *name) {
        for (size_t i = 0; name && i < ARRAY_SIZE(fixed_env_names); i++)
                if (streq(name, fixed_env_names[i]))
                        return true;
        return false;
}

const char *sandbox_profile_name(enum sandbox_profile p) {
        switch (p) {
        case SANDBOX_EVOLUTION:
                return "evolution";
        case SANDBOX_BUILD:
                return "build";
        case SANDBOX_TEST:
                return "test";
        case SANDBOX_LIVE:
                return "live";
        case SANDBOX_PREVIEW:
                return "preview";
        }
        return "unknown";
}

/* Live organism and previews: private network, no shared cache. */
static bool profile_private(enum sandbox_profile p) {
        return p == SANDBOX_LIVE || p == SANDBOX_PREVIEW;
}

const char *sandbox_bwrap_path(void) {
        return access(SANDBOX_BWRAP_PATH, X_OK) == 0 ? SANDBOX_BWRAP_PATH : NULL;
}

void sandbox_policy_free(struct sandbox_policy *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_ops; i++) {
                free(p->ops[i].src);
                free(p->ops[i].dest);
        }
        free(p->ops);
        strv_free(p->env);
        free(p->label);
        free(p);
}

static int policy_add(struct sandbox_policy *p, enum sandbox_op_kind kind, const char *src, const char *dest) {
        struct sandbox_op *ops = realloc(p->ops, (p->n_ops + 1) * sizeof(*ops));
        if (!ops)
                return -ENOMEM;
        p->ops = ops;
        struct sandbox_op op = {.kind = kind};
        if ((src && !(op.src = strdup(src))) || (dest && !(op.dest = strdup(dest)))) {
                free(op.src);
                free(op.dest);
                return -ENOMEM;
        }
        p->ops[p->n_ops++] = op;
        return 0;
}

/* An absolute, normalised host path of sane length: no "." or ".."
 * components, no empty components, no trailing slash (except "/"). */
static bool path_is_clean_abs(const char *path) {
        if (!path || path[0] != '/' || strlen(path) >= SANDBOX_PATH_MAX)
                return false;
        if (streq(path, "/"))
                return true;
        const char *s = path;
        while (*s == '/') {
                const char *c = s + 1;
                size_t n = strcspn(c, "/");
                if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                s = c + n;
        }
        return *s == 0;
}

/* "organism/" -> "organism": relative, clean, not hidden (".seed", ".git"). */
static int evolvable_clean(const char *e, char **ret) {
        if (strempty(e) || e[0] == '/' || strlen(e) >= 256)
                return -EINVAL;
        _cleanup_free_ char *d = strdup(e);
        if (!d)
                return -ENOMEM;
        size_t n = strlen(d);
        while (n > 0 && d[n - 1] == '/')
                d[--n] = 0;
        if (n == 0)
                return -EINVAL;
        _cleanup_free_ char *abs = NULL;
        if (xasprintf(&abs, "/%s", d) < 0)
                return -ENOMEM;
        if (!path_is_clean_abs(abs))
                return -EINVAL;
        /* No component may start with '.', so .seed and .git stay hidden. */
        for (const char *s = abs; *s; s++)
                if (*s == '/' && s[1] == '.')
                        return -EINVAL;
        *ret = TAKE_PTR(d);
        return 0;
}

static int add_system_dirs(struct sandbox_policy *p) {
        int r;
        for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++)
                if ((r = policy_add(p, SB_RO_BIND, system_dirs[i], system_dirs[i])) < 0)
                        return r;
        for (size_t i = 0; i < ARRAY_SIZE(system_links); i++) {
                const char *d = system_links[i];
                struct stat st;
                if (lstat(d, &st) < 0)
                        continue;
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlink(d, target, sizeof target - 1);
                        if (n <= 0)
                                continue;
                        target[n] = 0;
                        r = policy_add(p, SB_SYMLINK, target, d);
                } else if (S_ISDIR(st.st_mode))
                        r = policy_add(p, SB_RO_BIND, d, d);
                else
                        continue;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Covers dest inside the sandbox: a directory with an empty tmpfs, a file
 * with /dev/null. host_path is where dest comes from on the host. */
static int add_hide(struct sandbox_policy *p, const char *host_path, const char *dest, bool assume_dir) {
        struct stat st;
        for (size_t i = 0; i < p->n_ops; i++)
                if ((p->ops[i].kind == SB_TMPFS || p->ops[i].kind == SB_RO_BIND) && streq(p->ops[i].dest, dest) &&
                    (p->ops[i].kind == SB_TMPFS || streq(p->ops[i].src, "/dev/null")))
                        return 0; /* already covered */
        if (assume_dir)
                return policy_add(p, SB_TMPFS, NULL, dest);
        if (lstat(host_path, &st) < 0)
                return 0;
        if (S_ISDIR(st.st_mode))
                return policy_add(p, SB_TMPFS, NULL, dest);
        return policy_add(p, SB_RO_BIND, "/dev/null", dest);
}

/* If host path lies under the source of a bind already in the policy, hide
 * where it appears inside. skip_dest: a mount whose exact dest is not hidden
 * (the workspace, when the workspace is the live Seed's folder itself). */
static int hide_host_path(struct sandbox_policy *p, const char *host, bool assume_dir, const char *skip_dest) {
        size_t n_ops = p->n_ops;
        int r;
        for (size_t i = 0; i < n_ops; i++) {
                const struct sandbox_op *op = &p->ops[i];
                if (op->kind != SB_RO_BIND && op->kind != SB_RO_BIND_TRY && op->kind != SB_BIND &&
                    op->kind != SB_BIND_TRY)
                        continue;
                size_t n = strlen(op->src);
                const char *rest;
                if (streq(op->src, "/"))
                        rest = host;
                else if (startswith(host, op->src) && (host[n] == 0 || host[n] == '/'))
                        rest = host + n;
                else
                        continue;
                _cleanup_free_ char *dest = NULL;
                if (xasprintf(&dest, "%s%s", streq(op->dest, "/") ? "" : op->dest, rest) < 0)
                        return -ENOMEM;
                if (skip_dest && streq(dest, skip_dest))
                        continue;
                if ((r = add_hide(p, host, dest, assume_dir)) < 0)
                        return r;
        }
        return 0;
}

static int add_workspace(struct sandbox_policy *p, const struct sandbox_spec *spec) {
        int r;
        if ((r = policy_add(p, SB_RO_BIND, spec->workspace, SANDBOX_WORKSPACE)) < 0)
                return r;
        for (char *const *e = spec->evolvable; !spec->workspace_readonly && e && *e; e++) {
                _cleanup_free_ char *rel = NULL, *src = NULL, *dest = NULL;
                if ((r = evolvable_clean(*e, &rel)) < 0)
                        return log_error_errno(r, "sandbox: invalid evolvable directory '%s'", *e);
                if (xasprintf(&src, "%s/%s", spec->workspace, rel) < 0 ||
                    xasprintf(&dest, SANDBOX_WORKSPACE "/%s", rel) < 0)
                        return -ENOMEM;
                struct stat st;
                if (lstat(src, &st) < 0) {
                        if (errno == ENOENT)
                                continue; /* nothing to make writable (and it cannot be created) */
                        return log_error_errno(-errno, "sandbox: cannot inspect '%s': %m", src);
                }
                if (!S_ISDIR(st.st_mode))
                        return log_error_errno(-ENOTDIR, "sandbox: evolvable '%s' is not a directory", src);
                if ((r = policy_add(p, SB_BIND, src, dest)) < 0)
                        return r;
        }
        /* The kernel's own state is hidden from every sandbox; the git
         * database from the live organism and previews. */
        _cleanup_free_ char *dot_seed = path_join(spec->workspace, ".seed");
        _cleanup_free_ char *dot_git = path_join(spec->workspace, ".git");
        if (!dot_seed || !dot_git)
                return -ENOMEM;
        if ((r = add_hide(p, dot_seed, SANDBOX_WORKSPACE "/.seed", false)) < 0)
                return r;
        if (profile_private(spec->profile) && (r = add_hide(p, dot_git, SANDBOX_WORKSPACE "/.git", false)) < 0)
                return r;
        return 0;
}

/* PostgreSQL's socket directory, read-only at /run/postgresql, with nothing
 * but PostgreSQL's own entries visible: the directory may be shared with
 * other sockets (the Seed's .seed/run also holds the live organism's bridge
 * socket, which no evolution may reach). */
static int add_pg_socket_dir(struct sandbox_policy *p, const char *dir) {
        int r = policy_add(p, SB_RO_BIND, dir, "/run/postgresql");
        if (r < 0)
                return r;
        DIR *d = opendir(dir);
        if (!d)
                return log_error_errno(-errno, "sandbox: cannot list '%s': %m", dir);
        struct dirent *de;
        size_t n = 0;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (startswith(de->d_name, ".s.PGSQL."))
                        continue;
                if (++n > 256) {
                        r = log_error_errno(-E2BIG, "sandbox: too many entries in '%s'", dir);
                        break;
                }
                _cleanup_free_ char *host = path_join(dir, de->d_name), *dest = path_join("/run/postgresql", de->d_name);
                if (!host || !dest) {
                        r = -ENOMEM;
                        break;
                }
                if ((r = add_hide(p, host, dest, false)) < 0)
                        break;
        }
        closedir(d);
        return r < 0 ? r : 0;
}

static bool env_name_valid(const char *entry, size_t *ret_len) {
        size_t n = 0;
        for (; entry[n] && entry[n] != '='; n++) {
                char c = entry[n];
                bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                          (n > 0 && c >= '0' && c <= '9');
                if (!ok)
                        return false;
        }
        if (n == 0 || n > 128 || entry[n] != '=' || strlen(entry) > 32768)
                return false;
        *ret_len = n;
        return true;
}

static int build_env(struct sandbox_policy *p, const struct sandbox_spec *spec, bool with_cache) {
        char **env = NULL;
        int r = 0;
        if (strv_push(&env, "PATH=/usr/local/bin:/usr/bin:/bin") < 0 ||
            strv_push(&env, "HOME=" SANDBOX_HOME) < 0 || strv_push(&env, "TMPDIR=/tmp") < 0 ||
            strv_push(&env, "LANG=C.UTF-8") < 0 ||
            strv_pushf(&env, "PWD=%s", spec->cwd ? spec->cwd : SANDBOX_WORKSPACE) < 0 || /* bwrap sets it */
            strv_pushf(&env, "SEED_ENV=%s", profile_private(spec->profile) ? "live" : "evolution") < 0)
                goto oom;
        if (spec->port > 0 && strv_pushf(&env, "PORT=%d", spec->port) < 0)
                goto oom;
        if (spec->database_url && strv_pushf(&env, "DATABASE_URL=%s", spec->database_url) < 0)
                goto oom;
        if (with_cache && (strv_push(&env, "npm_config_cache=/cache/npm") < 0 ||
                           strv_push(&env, "XDG_CACHE_HOME=/cache/xdg") < 0))
                goto oom;
        if (spec->egress) {
                /* Every common client's spelling; plain HTTP is sent there
                 * too, to be refused with a reason rather than to vanish. */
                static const char *const proxy_env[] = {
                        "HTTPS_PROXY=" SANDBOX_PROXY_URL,
                        "https_proxy=" SANDBOX_PROXY_URL,
                        "HTTP_PROXY=" SANDBOX_PROXY_URL,
                        "http_proxy=" SANDBOX_PROXY_URL,
                        "npm_config_https_proxy=" SANDBOX_PROXY_URL,
                        "npm_config_proxy=" SANDBOX_PROXY_URL,
                        "NO_PROXY=localhost,127.0.0.1",
                        "no_proxy=localhost,127.0.0.1",
                        "npm_config_noproxy=localhost,127.0.0.1",
                        "NODE_USE_ENV_PROXY=1",
                        "NODE_OPTIONS=--require " SANDBOX_NODE_SHIM,
                };
                for (size_t i = 0; i < ARRAY_SIZE(proxy_env); i++)
                        if (strv_push(&env, proxy_env[i]) < 0)
                                goto oom;
        }
        for (char *const *e = spec->extra_env; e && *e; e++) {
                size_t n;
                if (!env_name_valid(*e, &n) || strv_length(env) >= SANDBOX_ENV_MAX) {
                        r = log_error_errno(-EINVAL, "sandbox: invalid extra environment entry");
                        goto fail;
                }
                for (size_t i = 0; i < ARRAY_SIZE(fixed_env_names); i++)
                        if (strlen(fixed_env_names[i]) == n && strncmp(*e, fixed_env_names[i], n) == 0) {
                                r = log_error_errno(-EINVAL, "sandbox: extra environment may not set %s",
                                                    fixed_env_names[i]);
                                goto fail;
                        }
                if (strv_push(&env, *e) < 0)
                        goto oom;
        }
        p->env = env;
        return 0;
oom:
        r = -ENOMEM;
fail:
        strv_free(env);
        return r;
}

/* Passed fds: open, never stdio (the child's 0-2 are set up by proc), no
 * duplicates, a few at most. */
static int keep_fds_validate(const int *fds, size_t n) {
        if (n > 0 && !fds)
                return -EINVAL;
        if (n > SANDBOX_KEEP_FDS_MAX)
                return log_error_errno(-E2BIG, "sandbox: too many fds to pass (%zu)", n);
        for (size_t i = 0; i < n; i++) {
                if (fds[i] <= STDERR_FILENO)
                        return log_error_errno(-EBADF, "sandbox: cannot pass fd %d", fds[i]);
                if (fcntl(fds[i], F_GETFD) < 0)
                        return log_error_errno(-errno, "sandbox: fd %d to pass is not open: %m", fds[i]);
                for (size_t j = 0; j < i; j++)
                        if (fds[j] == fds[i])
                                return log_error_errno(-EINVAL, "sandbox: fd %d passed twice", fds[i]);
        }
        return 0;
}

static int spec_validate(const struct sandbox_spec *spec) {
        if ((unsigned)spec->profile > SANDBOX_PREVIEW)
                return -EINVAL;
        if (!path_is_clean_abs(spec->workspace) || streq(spec->workspace, "/"))
                return log_error_errno(-EINVAL, "sandbox: workspace must be an absolute, normalised path");
        const char *paths[] = {spec->seed_dir, spec->pg_socket_dir, spec->cache_dir, spec->bridge_path};
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++)
                if (paths[i] && !path_is_clean_abs(paths[i]))
                        return log_error_errno(-EINVAL, "sandbox: '%s' is not an absolute, normalised path",
                                               paths[i]);
        for (char *const *h = spec->hide_paths; h && *h; h++)
                if (!path_is_clean_abs(*h) || streq(*h, "/"))
                        return log_error_errno(-EINVAL, "sandbox: cannot hide '%s'", *h);
        if (spec->cwd && !path_is_clean_abs(spec->cwd))
                return log_error_errno(-EINVAL, "sandbox: cwd must be an absolute path inside the sandbox");
        if (spec->port < 0 || spec->port > 65535)
                return -EINVAL;
        int r = keep_fds_validate(spec->keep_fds, spec->n_keep_fds);
        if (r < 0)
                return r;
        struct stat st;
        if (stat(spec->workspace, &st) < 0)
                return log_error_errno(-errno, "sandbox: workspace '%s': %m", spec->workspace);
        if (!S_ISDIR(st.st_mode))
                return log_error_errno(-ENOTDIR, "sandbox: workspace '%s' is not a directory", spec->workspace);
        return 0;
}

/* Last, once every mount point exists: the tmpfs that hide things become
 * read-only, and for the live organism and previews so does the root (bwrap
 * builds it on a tmpfs the sandbox could otherwise write, e.g. to make up a
 * /run/organism of its own). /tmp and the home stay writable. */
static int add_read_only(struct sandbox_policy *p) {
        size_t n_ops = p->n_ops;
        int r;
        for (size_t i = 0; i < n_ops; i++) {
                const struct sandbox_op *op = &p->ops[i];
                if (op->kind != SB_TMPFS || streq(op->dest, "/tmp") || streq(op->dest, SANDBOX_HOME))
                        continue;
                if ((r = policy_add(p, SB_REMOUNT_RO, NULL, op->dest)) < 0)
                        return r;
        }
        if (profile_private(p->profile) && (r = policy_add(p, SB_REMOUNT_RO, NULL, "/")) < 0)
                return r;
        return 0;
}

/* Node.js honours HTTPS_PROXY in fetch() only from 22.21 (with
 * NODE_USE_ENV_PROXY=1); for older ones NODE_OPTIONS preloads this shim,
 * which routes fetch() and https requests through the door. */
static int add_node_shim(struct sandbox_policy *p) {
        const struct embedded_file *f = embedded_find(sandbox_files, "egress-node.cjs");
        if (!f)
                return -ENOENT;
        int r = policy_add(p, SB_DIR, NULL, "/run/seed");
        if (r < 0)
                return r;
        return policy_add(p, SB_RO_BIND_DATA, (const char *)f->data, SANDBOX_NODE_SHIM);
}

static char *hidden_everywhere[SANDBOX_HIDE_MAX + 1];

int sandbox_hide_everywhere(char *const *paths) {
        size_t n = 0;
        for (char *const *h = paths; h && *h; h++) {
                if (n >= SANDBOX_HIDE_MAX || !path_is_clean_abs(*h) || streq(*h, "/"))
                        return log_error_errno(-EINVAL, "sandbox: cannot hide '%s' everywhere", *h);
                if (!(hidden_everywhere[n++] = strdup(*h)))
                        return -ENOMEM;
        }
        return 0;
}

int sandbox_policy_build(const struct sandbox_spec *spec, struct sandbox_policy **ret) {
        int r = spec_validate(spec);
        if (r < 0)
                return r;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->profile = spec->profile;
        p->egress = spec->egress;
        p->egress_policy = profile_private(spec->profile) ? EGRESS_POLICY_LIVE : EGRESS_POLICY_BUILD;
        if (!(p->label = strndup(spec->label ? spec->label : sandbox_profile_name(spec->profile), 64)))
                return -ENOMEM;
        bool with_cache = spec->cache_dir && !profile_private(spec->profile);

        if ((r = add_system_dirs(p)) < 0)
                return r;
        if ((r = policy_add(p, SB_DEV, NULL, "/dev")) < 0 ||
            (r = policy_add(p, SB_PROC, NULL, "/proc")) < 0 || (r = policy_add(p, SB_TMPFS, NULL, "/tmp")) < 0 ||
            (r = policy_add(p, SB_TMPFS, NULL, SANDBOX_HOME)) < 0)
                return r;
        if ((r = add_workspace(p, spec)) < 0)
                return r;
        if (spec->pg_socket_dir && (r = add_pg_socket_dir(p, spec->pg_socket_dir)) < 0)
                return r;
        if (with_cache && (r = policy_add(p, SB_BIND, spec->cache_dir, "/cache")) < 0)
                return r;
        if (spec->bridge_path && (r = policy_add(p, SB_RO_BIND, spec->bridge_path, "/run/seed/bridge")) < 0)
                return r;
        if (spec->egress && (r = add_node_shim(p)) < 0)
                return r;
        /* The live Seed's folder and the owner's config stay invisible even
         * when they lie under something mounted (e.g. a Seed in /usr/local). */
        if (spec->seed_dir &&
            (r = hide_host_path(p, spec->seed_dir, true,
                                streq(spec->seed_dir, spec->workspace) ? SANDBOX_WORKSPACE : NULL)) < 0)
                return r;
        for (char *const *h = spec->hide_paths; h && *h; h++)
                if ((r = hide_host_path(p, *h, false, NULL)) < 0)
                        return r;
        for (char **h = hidden_everywhere; *h; h++)
                if ((r = hide_host_path(p, *h, false, NULL)) < 0)
                        return r;
        if ((r = add_read_only(p)) < 0)
                return r;
        if ((r = policy_add(p, SB_CHDIR, NULL, spec->cwd ? spec->cwd : SANDBOX_WORKSPACE)) < 0)
                return r;
        for (size_t i = 0; i < spec->n_keep_fds; i++)
                p->keep_fds[p->n_keep_fds++] = spec->keep_fds[i];
        if ((r = build_env(p, spec, with_cache)) < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

static const char *op_flag(enum sandbox_op_kind k) {
        switch (k) {
        case SB_RO_BIND:
                return "--ro-bind";
        case SB_RO_BIND_TRY:
                return "--ro-bind-try";
        case SB_BIND:
                return "--bind";
        case SB_BIND_TRY:
                return "--bind-try";
        case SB_TMPFS:
                return "--tmpfs";
        case SB_DIR:
                return "--dir";
        case SB_SYMLINK:
                return "--symlink";
        case SB_DEV:
                return "--dev";
        case SB_PROC:
                return "--proc";
        case SB_CHDIR:
                return "--chdir";
        case SB_REMOUNT_RO:
                return "--remount-ro";
        case SB_RO_BIND_DATA:
                return "--ro-bind-data";
        }
        return NULL;
}

static bool op_has_src(enum sandbox_op_kind k) {
        return k == SB_RO_BIND || k == SB_RO_BIND_TRY || k == SB_BIND || k == SB_BIND_TRY || k == SB_SYMLINK;
}

static int push_fd_option(char ***v, const char *flag, int fd) {
        if (fd < 0)
                return 0;
        if (strv_push(v, flag) < 0 || strv_pushf(v, "%d", fd) < 0)
                return -ENOMEM;
        return 0;
}

/* The bwrap options of the policy, without argv[0] and the command. */
static int policy_options(const struct sandbox_policy *p, const struct sandbox_fds *fds, char ***ret) {
        static const char *const base_flags[] = {
                "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-user", "--disable-userns", "--unshare-cgroup-try", "--unshare-net",
        };
        const struct sandbox_fds none = SANDBOX_FDS_NONE;
        if (!fds)
                fds = &none;
        _cleanup_strv_free_ char **v = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(base_flags); i++)
                if (strv_push(&v, base_flags[i]) < 0)
                        return -ENOMEM;
        if (strv_push(&v, "--clearenv") < 0)
                return -ENOMEM;
        for (char **e = p->env; e && *e; e++) {
                const char *eq = strchr(*e, '=');
                if (!eq)
                        return -EINVAL;
                if (strv_push(&v, "--setenv") < 0 || strv_pushf(&v, "%.*s", (int)(eq - *e), *e) < 0 ||
                    strv_push(&v, eq + 1) < 0)
                        return -ENOMEM;
        }
        size_t n_data = 0;
        for (size_t i = 0; i < p->n_ops; i++) {
                const struct sandbox_op *op = &p->ops[i];
                const char *flag = op_flag(op->kind);
                if (!flag || !op->dest || (op_has_src(op->kind) && !op->src))
                        return -EINVAL;
                if (op->kind == SB_RO_BIND_DATA) {
                        if (n_data >= SANDBOX_DATA_MAX || fds->data[n_data] < 0)
                                return -EINVAL;
                        if (push_fd_option(&v, flag, fds->data[n_data++]) < 0 || strv_push(&v, op->dest) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (strv_push(&v, flag) < 0 || (op_has_src(op->kind) && strv_push(&v, op->src) < 0) ||
                    strv_push(&v, op->dest) < 0)
                        return -ENOMEM;
        }
        if (push_fd_option(&v, "--seccomp", fds->seccomp) < 0 || push_fd_option(&v, "--info-fd", fds->info) < 0 ||
            push_fd_option(&v, "--block-fd", fds->block) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(v);
        return 0;
}

static int argv_append_cmd(char ***v, char *const *cmd) {
        if (strv_push(v, "--") < 0)
                return -ENOMEM;
        for (char *const *c = cmd; *c; c++)
                if (strv_push(v, *c) < 0)
                        return -ENOMEM;
        return 0;
}

int sandbox_policy_argv(const struct sandbox_policy *p, const char *bwrap, const struct sandbox_fds *fds,
                        char *const *cmd, char ***ret) {
        if (!p || !bwrap || !cmd || !cmd[0])
                return -EINVAL;
        _cleanup_strv_free_ char **opts = NULL, **v = NULL;
        int r = policy_options(p, fds, &opts);
        if (r < 0)
                return r;
        if (strv_push(&v, bwrap) < 0)
                return -ENOMEM;
        for (char **o = opts; *o; o++)
                if (strv_push(&v, *o) < 0)
                        return -ENOMEM;
        if ((r = argv_append_cmd(&v, cmd)) < 0)
                return r;
        *ret = TAKE_PTR(v);
        return 0;
}

/* A sealed memfd holding len bytes (bwrap reads it and closes its copy). */
static int sealed_memfd(const char *name, const void *data, size_t len, int *ret_fd) {
        _cleanup_close_ int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        const char *s = data;
        while (len > 0) {
                ssize_t k = write(fd, s, len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                s += k;
                len -= (size_t)k;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The options go to bwrap through a sealed memfd (--args FD) rather than the
 * command line, which any local user can read in /proc: they carry
 * DATABASE_URL. */
static int options_memfd(char *const *opts, int *ret_fd) {
        _cleanup_buf_ struct buf b = BUF_INIT(16 * 1024 * 1024);
        for (char *const *o = opts; *o; o++)
                if (buf_append(&b, *o, strlen(*o) + 1) < 0) /* with the NUL separator */
                        return -E2BIG;
        return sealed_memfd("bwrap-args", b.data ? b.data : "", b.len, ret_fd);
}

/* One sandbox being started: bwrap's ends of its fds, and ours. */
struct launch {
        struct sandbox_fds fds; /* handed to bwrap; closed here once it runs */
        int args_fd;
        int info_r;  /* bwrap's JSON with the sandbox's pid 1 */
        int block_w; /* one byte lets the command run */
};

static void launch_close_bwrap_ends(struct launch *l) {
        int *fds[] = {&l->fds.seccomp, &l->fds.info, &l->fds.block, &l->fds.data[0], &l->fds.data[1],
                      &l->args_fd};
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                closep(fds[i]), *fds[i] = -1;
}

static void launch_done(struct launch *l) {
        launch_close_bwrap_ends(l);
        closep(&l->info_r);
        closep(&l->block_w);
}

/* Creates the fds, and bwrap's argv [bwrap, --args, N, --, cmd...]. */
static int launch_prepare(const struct sandbox_policy *p, char *const *cmd, struct launch *l, char ***ret_argv) {
        if (geteuid() == 0)
                return log_error_errno(-EPERM, "refusing to start a sandbox as host uid 0");
        if (!p || !cmd || !cmd[0])
                return -EINVAL;
        const char *bwrap = sandbox_bwrap_path();
        if (!bwrap)
                return log_error_errno(-ENOENT, "sandbox: %s is missing (install bubblewrap)", SANDBOX_BWRAP_PATH);
        int r = sandbox_seccomp_memfd(&l->fds.seccomp);
        if (r < 0)
                return log_error_errno(r, "sandbox: no seccomp filter, so no sandbox: %m");
        int info[2], block[2];
        if (pipe2(info, O_CLOEXEC) < 0)
                return -errno;
        l->info_r = info[0];
        l->fds.info = info[1];
        /* A socket, so that releasing a bwrap that died cannot raise SIGPIPE. */
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, block) < 0)
                return -errno;
        l->block_w = block[0];
        l->fds.block = block[1];
        size_t n_data = 0;
        for (size_t i = 0; i < p->n_ops; i++) {
                if (p->ops[i].kind != SB_RO_BIND_DATA)
                        continue;
                if (n_data >= SANDBOX_DATA_MAX || !p->ops[i].src)
                        return -EINVAL;
                if ((r = sealed_memfd("bwrap-data", p->ops[i].src, strlen(p->ops[i].src), &l->fds.data[n_data++])) <
                    0)
                        return r;
        }
        _cleanup_strv_free_ char **opts = NULL, **v = NULL;
        if ((r = policy_options(p, &l->fds, &opts)) < 0)
                return r;
        if ((r = options_memfd(opts, &l->args_fd)) < 0)
                return log_error_errno(r, "sandbox: cannot pass options to bwrap: %m");
        if (strv_push(&v, bwrap) < 0 || strv_push(&v, "--args") < 0 || strv_pushf(&v, "%d", l->args_fd) < 0)
                return -ENOMEM;
        if ((r = argv_append_cmd(&v, cmd)) < 0)
                return r;
        *ret_argv = TAKE_PTR(v);
        return 0;
}

#define LAUNCH_KEEP_MAX (SANDBOX_KEEP_FDS_MAX + 4 + SANDBOX_DATA_MAX)

/* What bwrap inherits: its own fds, and the policy's, which it passes on to
 * the command. Returns how many. */
static size_t keep_list(const struct sandbox_policy *p, const struct launch *l, int keep[LAUNCH_KEEP_MAX]) {
        size_t n = 0;
        const int own[] = {l->args_fd, l->fds.seccomp, l->fds.info, l->fds.block, l->fds.data[0],
                           l->fds.data[1]};
        for (size_t i = 0; i < ARRAY_SIZE(own); i++)
                if (own[i] >= 0)
                        keep[n++] = own[i];
        for (size_t i = 0; i < p->n_keep_fds && i < SANDBOX_KEEP_FDS_MAX; i++)
                keep[n++] = p->keep_fds[i];
        return n;
}

/* bwrap's --info-fd JSON carries "child-pid": the sandbox's pid 1 as seen
 * from here. EOF without it: bwrap failed before creating the sandbox. */
static int read_init_pid(int fd, int timeout_ms, pid_t *ret) {
        char buf[1024];
        size_t len = 0;
        int64_t deadline = now_ms() + timeout_ms;
        while (len < sizeof buf - 1 && !memchr(buf, '}', len)) {
                int r = fd_wait_readable(fd, deadline);
                if (r < 0)
                        return r;
                ssize_t n = read(fd, buf + len, sizeof buf - 1 - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = 0;
        const char *s = strstr(buf, "\"child-pid\":");
        if (!s)
                return -ESRCH;
        char *end;
        long v = strtol(s + strlen("\"child-pid\":"), &end, 10);
        if (end == s || v <= 1 || v > INT_MAX)
                return -EBADMSG;
        *ret = (pid_t)v;
        return 0;
}

static bool init_alive(const struct sandbox_child *c) {
        if (c->init_pid <= 0)
                return false;
        if (c->init_pidfd < 0)
                return kill(c->init_pid, 0) == 0;
        struct pollfd pf = {.fd = c->init_pidfd, .events = POLLIN};
        return poll(&pf, 1, 0) == 0; /* readable once it has exited */
}

/* Limits on the sandbox's pid 1, held by --block-fd: everything inside
 * inherits them. Only lowered, never raised. The pidfd is checked after, so
 * a pid 1 that died meanwhile (its number reused) fails the start. */
static int apply_limits(const struct sandbox_child *c) {
        for (size_t i = 0; i < ARRAY_SIZE(sandbox_limits); i++) {
                struct rlimit old, rl;
                if (prlimit(c->init_pid, sandbox_limits[i].resource, NULL, &old) < 0)
                        return log_error_errno(-errno, "sandbox: cannot read the %s limit of the sandbox: %m",
                                               sandbox_limits[i].what);
                rl.rlim_max = old.rlim_max < sandbox_limits[i].value ? old.rlim_max : sandbox_limits[i].value;
                rl.rlim_cur = old.rlim_cur < rl.rlim_max ? old.rlim_cur : rl.rlim_max;
                if (prlimit(c->init_pid, sandbox_limits[i].resource, &rl, NULL) < 0)
                        return log_error_errno(-errno, "sandbox: cannot limit the sandbox's %s: %m",
                                               sandbox_limits[i].what);
        }
        /* Raising one's OOM score needs no privilege; best effort (code
         * inside may lower it back to 0, no further). */
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)c->init_pid);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || dprintf(fd, "%d\n", SANDBOX_OOM_SCORE_ADJ) < 0)
                log_debug("sandbox: cannot raise the OOM score of %d: %m", (int)c->init_pid);
        return init_alive(c) ? 0 : -ESRCH;
}

/* The sandbox's way out: a door in its network namespace, served by the
 * egress proxy with the profile's policy. A sandbox that should have one
 * and cannot does not start. */
static int open_door(const struct sandbox_policy *p, struct sandbox_child *c) {
        int fd = -1;
        int r = sandbox_door_listen(c->init_pid, EGRESS_PORT, SANDBOX_DOOR_TIMEOUT_MS, &fd);
        if (r < 0)
                return r;
        if ((r = egress_door_open(p->egress, fd, p->egress_policy, p->label, &c->door)) < 0)
                return log_error_errno(r, "sandbox: the egress proxy refused the %s sandbox's door: %m", p->label);
        return 0;
}

/* Starts bwrap, waits for the sandbox's pid 1, limits it, opens its door,
 * then lets the command run. */
static int launch(const struct sandbox_policy *p, char *const *cmd, int out_fd, struct sandbox_child *ret) {
        struct launch l = {.fds = SANDBOX_FDS_NONE, .args_fd = -1, .info_r = -1, .block_w = -1};
        _cleanup_strv_free_ char **argv = NULL;
        int r = launch_prepare(p, cmd, &l, &argv);
        if (r < 0)
                goto out;
        int keep[LAUNCH_KEEP_MAX];
        pid_t pid;
        r = proc_spawn(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = out_fd, .keep_fds = keep,
                                           .n_keep_fds = keep_list(p, &l, keep)},
                       &pid);
        if (r < 0)
                goto out;
        launch_close_bwrap_ends(&l);
        struct sandbox_child c = {.pid = pid, .init_pidfd = -1};
        r = read_init_pid(l.info_r, SANDBOX_START_TIMEOUT_MS, &c.init_pid);
        if (r == -ETIMEDOUT) {
                proc_kill_group(pid, SIGKILL);
                (void)proc_wait(pid, -1);
                r = log_error_errno(r, "sandbox: bwrap did not start within %d s", SANDBOX_START_TIMEOUT_MS / 1000);
                goto out;
        }
        /* Without a pid 1, bwrap failed early and exits by itself (its
         * complaint is in out_fd); the caller sees the exit code. */
        if (c.init_pid > 0) {
                c.init_pidfd = (int)syscall(SYS_pidfd_open, c.init_pid, 0);
                if ((r = apply_limits(&c)) < 0) {
                        (void)sandbox_signal(&c, SIGKILL);
                        (void)proc_wait(pid, -1);
                        sandbox_child_done(&c);
                        goto out;
                }
                if (p->egress && (r = open_door(p, &c)) < 0) {
                        (void)sandbox_signal(&c, SIGKILL);
                        (void)proc_wait(pid, -1);
                        sandbox_child_done(&c);
                        goto out;
                }
                (void)send(l.block_w, "1", 1, MSG_NOSIGNAL); /* fails only if bwrap is gone */
        }
        *ret = c;
        r = 0;
out:
        launch_done(&l);
        return r;
}

/* After bwrap was reaped: whatever is left, by means that cannot hit a
 * reused pid (the pidfd, bwrap's process group); then its door. */
static void sandbox_finish(struct sandbox_child *c) {
        if (c->init_pidfd >= 0)
                (void)syscall(SYS_pidfd_send_signal, c->init_pidfd, SIGKILL, NULL, 0);
        if (c->pid > 1)
                (void)kill(-c->pid, SIGKILL);
        egress_door_close(c->door);
        c->door = NULL;
}

int sandbox_run(const struct sandbox_policy *p, char *const *cmd, int timeout_ms, struct proc_result *ret) {
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int out_r = pipefd[0];
        struct sandbox_child c;
        int r = launch(p, cmd, pipefd[1], &c);
        close(pipefd[1]);
        if (r < 0)
                return r;
        struct headtail ht;
        if ((r = headtail_init(&ht, 1024 * 1024, 1024 * 1024)) < 0) {
                (void)sandbox_signal(&c, SIGKILL);
                (void)proc_wait(c.pid, -1);
                sandbox_finish(&c);
                sandbox_child_done(&c);
                return r;
        }
        bool timed_out = false;
        int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : INT64_MAX;
        if (headtail_read_fd(&ht, out_r, deadline) == -ETIMEDOUT) {
                timed_out = true;
                (void)sandbox_signal(&c, SIGKILL);
        }
        int64_t left = deadline == INT64_MAX ? -1 : deadline - now_ms();
        int code = sandbox_reap(c.pid, left < 0 && deadline != INT64_MAX ? 0 : (int)left);
        if (code == -ETIMEDOUT) {
                timed_out = true;
                (void)sandbox_signal(&c, SIGKILL);
                code = sandbox_reap(c.pid, -1);
        }
        sandbox_finish(&c);
        sandbox_child_done(&c);
        *ret = (struct proc_result){.exit_code = code < 0 ? 255 : code, .timed_out = timed_out,
                                    .output = headtail_render(&ht)};
        headtail_free(&ht);
        return 0;
}

int sandbox_start(const struct sandbox_policy *p, char *const *cmd, int out_fd, struct sandbox_child *ret) {
        return launch(p, cmd, out_fd, ret);
}

int sandbox_signal(const struct sandbox_child *c, int sig) {
        if (!c || c->pid <= 1)
                return -EINVAL;
        if (sig == SIGKILL) {
                /* Killing the sandbox's pid 1 tears down its pid namespace. */
                if (c->init_pidfd >= 0)
                        (void)syscall(SYS_pidfd_send_signal, c->init_pidfd, SIGKILL, NULL, 0);
                else if (init_alive(c))
                        (void)kill(c->init_pid, SIGKILL);
                (void)proc_kill_group(c->pid, SIGKILL);
                return 0;
        }
        /* pid 1 leads the session and process group of everything inside
         * (--new-session) and, as a namespace init, ignores the signal. */
        if (!init_alive(c))
                return -ESRCH;
        if (kill(-c->init_pid, sig) < 0)
                return -errno;
        return 0;
}

int sandbox_stop(struct sandbox_child *c, int grace_ms) {
        bool delivered = sandbox_signal(c, SIGTERM) == 0;
        int64_t deadline = now_ms() + (grace_ms > 0 ? grace_ms : 0);
        for (;;) {
                int code = proc_wait(c->pid, 0);
                if (code != -ETIMEDOUT) {
                        sandbox_finish(c); /* anything left behind */
                        return code;
                }
                if (now_ms() >= deadline)
                        break;
                /* The sandbox may not have had its own session yet. */
                if (!delivered)
                        delivered = sandbox_signal(c, SIGTERM) == 0;
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        (void)sandbox_signal(c, SIGKILL);
        int code = proc_wait(c->pid, -1);
        sandbox_finish(c);
        return code;
}

void sandbox_child_done(struct sandbox_child *c) {
        if (!c)
                return;
        if (c->init_pidfd >= 0)
                close(c->init_pidfd);
        egress_door_close(c->door);
        *c = (struct sandbox_child){.init_pidfd = -1};
}
