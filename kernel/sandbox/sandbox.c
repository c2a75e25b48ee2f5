/* sandbox.c — bubblewrap sandboxes: a spec becomes a policy (typed mount
 * operations + a complete environment), the policy becomes a bwrap argv, and
 * the argv runs through kernel/base/proc. */
#include "sandbox/sandbox.h"
#include "base/fileio.h"
#include "base/log.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define BWRAP_PATH "/usr/bin/bwrap"
#define SANDBOX_HOME "/home/sandbox"
#define SANDBOX_WORKSPACE "/workspace"
#define SANDBOX_PATH_MAX 4096
#define SANDBOX_ENV_MAX 64

/* Host system directories shown read-only. The lib and bin entries are
 * recreated as they are on the host: a symlink stays a symlink (Debian 12:
 * /bin -> usr/bin), a directory is bound read-only, a missing one skipped. */
static const char *const system_dirs[] = {"/usr", "/etc"};
static const char *const system_links[] = {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"};

/* Variables the policy sets itself; extra_env may not override them. */
static const char *const fixed_env_names[] = {
        "PATH", "HOME", "TMPDIR", "LANG", "PWD", "SEED_ENV", "PORT", "DATABASE_URL",
        "npm_config_cache", "XDG_CACHE_HOME",
};

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
        return access(BWRAP_PATH, X_OK) == 0 ? BWRAP_PATH : NULL;
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

int sandbox_policy_build(const struct sandbox_spec *spec, struct sandbox_policy **ret) {
        int r = spec_validate(spec);
        if (r < 0)
                return r;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->profile = spec->profile;
        p->share_net = !profile_private(spec->profile);
        bool with_cache = spec->cache_dir && !profile_private(spec->profile);

        if ((r = add_system_dirs(p)) < 0 || (r = policy_add(p, SB_DEV, NULL, "/dev")) < 0 ||
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
        /* The live Seed's folder and the owner's config stay invisible even
         * when they lie under something mounted (e.g. a Seed in /usr/local). */
        if (spec->seed_dir &&
            (r = hide_host_path(p, spec->seed_dir, true,
                                streq(spec->seed_dir, spec->workspace) ? SANDBOX_WORKSPACE : NULL)) < 0)
                return r;
        for (char *const *h = spec->hide_paths; h && *h; h++)
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
        }
        return NULL;
}

static bool op_has_src(enum sandbox_op_kind k) {
        return k == SB_RO_BIND || k == SB_RO_BIND_TRY || k == SB_BIND || k == SB_BIND_TRY || k == SB_SYMLINK;
}

/* The bwrap options of the policy, without argv[0] and the command. */
static int policy_options(const struct sandbox_policy *p, int seccomp_fd, char ***ret) {
        static const char *const base_flags[] = {
                "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-user", "--disable-userns", "--unshare-cgroup-try",
        };
        _cleanup_strv_free_ char **v = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(base_flags); i++)
                if (strv_push(&v, base_flags[i]) < 0)
                        return -ENOMEM;
        if (!p->share_net && strv_push(&v, "--unshare-net") < 0)
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
        for (size_t i = 0; i < p->n_ops; i++) {
                const struct sandbox_op *op = &p->ops[i];
                const char *flag = op_flag(op->kind);
                if (!flag || !op->dest || (op_has_src(op->kind) && !op->src))
                        return -EINVAL;
                if (strv_push(&v, flag) < 0 || (op_has_src(op->kind) && strv_push(&v, op->src) < 0) ||
                    strv_push(&v, op->dest) < 0)
                        return -ENOMEM;
        }
        if (seccomp_fd >= 0 && (strv_push(&v, "--seccomp") < 0 || strv_pushf(&v, "%d", seccomp_fd) < 0))
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

int sandbox_policy_argv(const struct sandbox_policy *p, const char *bwrap, int seccomp_fd, char *const *cmd,
                        char ***ret) {
        if (!p || !bwrap || !cmd || !cmd[0])
                return -EINVAL;
        _cleanup_strv_free_ char **opts = NULL, **v = NULL;
        int r = policy_options(p, seccomp_fd, &opts);
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

/* The options go to bwrap through a sealed memfd (--args FD) rather than the
 * command line, which any local user can read in /proc: they carry
 * DATABASE_URL. bwrap closes the fd after reading it. */
static int options_memfd(char *const *opts, int *ret_fd) {
        _cleanup_close_ int fd = memfd_create("bwrap-args", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        for (char *const *o = opts; *o; o++) {
                size_t left = strlen(*o) + 1; /* with the NUL separator */
                const char *s = *o;
                while (left > 0) {
                        ssize_t k = write(fd, s, left);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k <= 0)
                                return k < 0 ? -errno : -EIO;
                        s += k;
                        left -= (size_t)k;
                }
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        (void)fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* argv [bwrap, --args, N, (--info-fd I,) --, cmd...] with the options in
 * *ret_fd. info_fd < 0: none. */
static int exec_argv(const struct sandbox_policy *p, char *const *cmd, int info_fd, char ***ret_argv, int *ret_fd) {
        if (geteuid() == 0)
                return log_error_errno(-EPERM, "refusing to start a sandbox as host uid 0");
        if (!p || !cmd || !cmd[0])
                return -EINVAL;
        const char *bwrap = sandbox_bwrap_path();
        if (!bwrap)
                return log_error_errno(-ENOENT, "sandbox: %s is missing (install bubblewrap)", BWRAP_PATH);
        _cleanup_strv_free_ char **opts = NULL, **v = NULL;
        _cleanup_close_ int fd = -1;
        int r = policy_options(p, -1, &opts);
        if (r < 0)
                return r;
        if ((r = options_memfd(opts, &fd)) < 0)
                return log_error_errno(r, "sandbox: cannot pass options to bwrap: %m");
        if (strv_push(&v, bwrap) < 0 || strv_push(&v, "--args") < 0 || strv_pushf(&v, "%d", fd) < 0)
                return -ENOMEM;
        if (info_fd >= 0 && (strv_push(&v, "--info-fd") < 0 || strv_pushf(&v, "%d", info_fd) < 0))
                return -ENOMEM;
        if ((r = argv_append_cmd(&v, cmd)) < 0)
                return r;
        *ret_argv = TAKE_PTR(v);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* What bwrap inherits: its options fd, the info fd (or -1) and the policy's
 * fds, which bwrap passes on to the command. keep has room for
 * SANDBOX_KEEP_FDS_MAX + 2. Returns how many. */
static size_t keep_list(const struct sandbox_policy *p, int args_fd, int info_fd, int *keep) {
        size_t n = 0;
        keep[n++] = args_fd;
        if (info_fd >= 0)
                keep[n++] = info_fd;
        for (size_t i = 0; i < p->n_keep_fds && i < SANDBOX_KEEP_FDS_MAX; i++)
                keep[n++] = p->keep_fds[i];
        return n;
}

int sandbox_run(const struct sandbox_policy *p, char *const *cmd, int timeout_ms, struct proc_result *ret) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int fd = -1;
        int r = exec_argv(p, cmd, -1, &argv, &fd);
        if (r < 0)
                return r;
        int keep[SANDBOX_KEEP_FDS_MAX + 2];
        struct proc_opts o = {
                .argv = argv,
                .stdin_fd = -1,
                .out_fd = -1,
                .keep_fds = keep,
                .n_keep_fds = keep_list(p, fd, -1, keep),
                .timeout_ms = timeout_ms > 0 ? timeout_ms : 0,
                .out_head = 1024 * 1024,
                .out_tail = 1024 * 1024,
        };
        return proc_run(&o, ret);
}

int sandbox_spawn(const struct sandbox_policy *p, char *const *cmd, int out_fd, pid_t *ret_pid) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int fd = -1;
        int r = exec_argv(p, cmd, -1, &argv, &fd);
        if (r < 0)
                return r;
        int keep[SANDBOX_KEEP_FDS_MAX + 2];
        struct proc_opts o = {
                .argv = argv,
                .stdin_fd = -1,
                .out_fd = out_fd,
                .keep_fds = keep,
                .n_keep_fds = keep_list(p, fd, -1, keep),
        };
        return proc_spawn(&o, ret_pid);
}

/* bwrap's --info-fd JSON carries "child-pid": the sandbox's pid 1 as seen
 * from here. EOF without it: bwrap failed before creating the sandbox. */
static int read_init_pid(int fd, int timeout_ms, pid_t *ret) {
        char buf[1024];
        size_t len = 0;
        int64_t deadline = now_ms() + timeout_ms;
        while (len < sizeof buf - 1 && !memchr(buf, '}', len)) {
                int64_t left = deadline - now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd pf = {.fd = fd, .events = POLLIN};
                int k = poll(&pf, 1, (int)left);
                if (k < 0 && errno != EINTR)
                        return -errno;
                if (k <= 0)
                        continue;
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

int sandbox_start(const struct sandbox_policy *p, char *const *cmd, int out_fd, struct sandbox_child *ret) {
        int info[2];
        if (pipe2(info, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int info_r = info[0], info_w = info[1];
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int fd = -1;
        int r = exec_argv(p, cmd, info_w, &argv, &fd);
        if (r < 0)
                return r;
        int keep[SANDBOX_KEEP_FDS_MAX + 2];
        struct proc_opts o = {
                .argv = argv,
                .stdin_fd = -1,
                .out_fd = out_fd,
                .keep_fds = keep,
                .n_keep_fds = keep_list(p, fd, info_w, keep),
        };
        pid_t pid;
        if ((r = proc_spawn(&o, &pid)) < 0)
                return r;
        close(TAKE_FD(info_w));
        pid_t init = 0;
        r = read_init_pid(info_r, 30000, &init);
        if (r == -ETIMEDOUT) {
                proc_kill_group(pid, SIGKILL);
                (void)proc_wait(pid, -1);
                return log_error_errno(r, "sandbox: bwrap did not start within 30 s");
        }
        /* Otherwise, without an init bwrap failed early and exits by itself
         * (its complaint is in out_fd); the caller sees the exit code. */
        int pidfd = init > 0 ? (int)syscall(SYS_pidfd_open, init, 0) : -1;
        *ret = (struct sandbox_child){.pid = pid, .init_pid = init, .init_pidfd = pidfd};
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
                        (void)sandbox_signal(c, SIGKILL); /* anything left behind */
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
        return proc_wait(c->pid, -1);
}

void sandbox_child_done(struct sandbox_child *c) {
        if (!c)
                return;
        if (c->init_pidfd >= 0)
                close(c->init_pidfd);
        *c = (struct sandbox_child){.init_pidfd = -1};
}

/* Reads a small integer sysctl; -1 when absent or unreadable. */
static long sysctl_long(const char *path) {
        _cleanup_free_ char *s = NULL;
        if (read_file(path, 64, &s, NULL) < 0)
                return -1;
        char *end;
        long v = strtol(s, &end, 10);
        return end == s ? -1 : v;
}

/* The first line of bwrap's complaint, bounded, for the message. */
static char *first_line(const char *out) {
        if (!out)
                return strdup("");
        size_t n = strcspn(out, "\n");
        if (n > 300)
                n = 300;
        return strndup(out, n);
}

static int check_fail(int r, char **ret_message, const char *fmt, ...) _printf_(3, 4);
static int check_fail(int r, char **ret_message, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *m = NULL;
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        if (ret_message)
                *ret_message = m;
        else
                free(m);
        return r;
}

int sandbox_check(char **ret_message) {
        const char *bwrap = sandbox_bwrap_path();
        if (!bwrap)
                return check_fail(-ENOENT, ret_message,
                                  "bubblewrap is not installed (%s is missing). Seed runs every command in a "
                                  "bubblewrap sandbox; install it, e.g. 'sudo apt-get install bubblewrap'.",
                                  BWRAP_PATH);
        if (geteuid() == 0)
                return check_fail(-EPERM, ret_message,
                                  "the kernel is running as root; sandboxes never run as host uid 0. Start the "
                                  "Seed as an unprivileged user (the seed CLI drops to the '" "seed"
                                  "' account).");
        char *argv[] = {(char *)bwrap, "--die-with-parent", "--unshare-user", "--unshare-pid", "--unshare-ipc",
                        "--unshare-uts", "--unshare-net", "--disable-userns", "--ro-bind", "/", "/",
                        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--", "/usr/bin/true", NULL};
        struct proc_result res = {0};
        int r = proc_run(&(struct proc_opts){.argv = argv, .stdin_fd = -1, .out_fd = -1, .timeout_ms = 20000,
                                             .out_head = 4096, .out_tail = 1},
                         &res);
        if (r < 0)
                return check_fail(r, ret_message, "cannot run %s: %s", bwrap, strerror(-r));
        if (res.exit_code == 0 && !res.timed_out) {
                proc_result_done(&res);
                return 0;
        }
        _cleanup_free_ char *why = first_line(res.output);
        proc_result_done(&res);
        if (sysctl_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
                return check_fail(-EPERM, ret_message,
                                  "bubblewrap cannot create a sandbox (%s): AppArmor restricts unprivileged user "
                                  "namespaces on this host. Fix: 'sudo sysctl -w "
                                  "kernel.apparmor_restrict_unprivileged_userns=0' (or install an AppArmor "
                                  "profile for %s that allows userns).",
                                  why, bwrap);
        if (sysctl_long("/proc/sys/kernel/unprivileged_userns_clone") == 0)
                return check_fail(-EPERM, ret_message,
                                  "bubblewrap cannot create a sandbox (%s): unprivileged user namespaces are "
                                  "disabled. Fix: 'sudo sysctl -w kernel.unprivileged_userns_clone=1'.",
                                  why);
        if (sysctl_long("/proc/sys/user/max_user_namespaces") == 0)
                return check_fail(-EPERM, ret_message,
                                  "bubblewrap cannot create a sandbox (%s): user namespaces are disabled "
                                  "(user.max_user_namespaces=0). Fix: 'sudo sysctl -w "
                                  "user.max_user_namespaces=15000'.",
                                  why);
        if (path_exists("/.dockerenv") || path_exists("/run/.containerenv"))
                return check_fail(-EPERM, ret_message,
                                  "bubblewrap cannot create a sandbox (%s): this container forbids namespaces. "
                                  "Run it with Seed's seccomp profile (seccomp.json) and AppArmor relaxed "
                                  "('--security-opt seccomp=seccomp.json --security-opt apparmor=unconfined "
                                  "--security-opt systempaths=unconfined'), or use 'seed run' with the "
                                  "container driver.",
                                  why);
        return check_fail(-EPERM, ret_message,
                          "bubblewrap cannot create a sandbox here (%s). Unprivileged user namespaces must be "
                          "available: check 'sysctl kernel.apparmor_restrict_unprivileged_userns "
                          "kernel.unprivileged_userns_clone user.max_user_namespaces'.",
                          why);
}
