/* Unit tests for the sandbox policy: the policy is data, so every rule of the
 * security model is asserted here without running bwrap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "sandbox/sandbox.h"
#include "sandbox/seccomp.h"

#include <sched.h>
#include <sys/socket.h>

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#define CANARY_NAME "SEED_TEST_CANARY_SECRET"
#define CANARY_VALUE "canary-7f3a9c"

static char ws[512];         /* a fake workspace */
static char cache[PATH_MAX]; /* a fake .seed/cache */
static char run[PATH_MAX];   /* a fake .seed/organism (the kernel's socket dir) */
static char *const evolvable[] = {"organism/", "knowledge/", "skills/", NULL};

static void mkdir_in(const char *base, const char *rel) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", base, rel) >= 0);
        assert_int_equal(mkdir_p(p, 0755), 0);
}

static int setup_ws(void **state) {
        (void)state;
        char tmpl[] = "/tmp/test-sandbox.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(ws, sizeof ws, "%s/seed", tmpl);
        mkdir_in(ws, "organism");
        mkdir_in(ws, "knowledge");
        mkdir_in(ws, "kernel");
        mkdir_in(ws, ".seed/secrets");
        mkdir_in(ws, ".git");
        snprintf(cache, sizeof cache, "%s/.seed/cache", ws);
        snprintf(run, sizeof run, "%s/.seed/organism", ws);
        mkdir_in(ws, ".seed/cache");
        mkdir_in(ws, ".seed/organism");
        mkdir_in(ws, ".seed/run/organism"); /* not PostgreSQL's: hidden in /run/postgresql */
        return 0;
}

static int teardown_ws(void **state) {
        (void)state;
        char *slash = strrchr(ws, '/');
        *slash = 0;
        rm_rf(ws);
        return 0;
}

static struct sandbox_spec base_spec(enum sandbox_profile profile) {
        return (struct sandbox_spec){
                .profile = profile,
                .seed_dir = ws,
                .workspace = ws,
                .evolvable = evolvable,
                .cache_dir = cache,
        };
}

static ssize_t find_op(const struct sandbox_policy *p, enum sandbox_op_kind kind, const char *src,
                       const char *dest) {
        for (size_t i = 0; i < p->n_ops; i++) {
                const struct sandbox_op *op = &p->ops[i];
                if (op->kind != kind)
                        continue;
                if (src && (!op->src || !streq(op->src, src)))
                        continue;
                if (dest && (!op->dest || !streq(op->dest, dest)))
                        continue;
                return (ssize_t)i;
        }
        return -1;
}

static char *ws_path(const char *rel) {
        char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", ws, rel) >= 0);
        return p;
}

/* Asserts the policy's environment is exactly want (in order). */
static void assert_env(const struct sandbox_policy *p, const char *const *want) {
        size_t n = 0;
        for (; want[n]; n++) {
                assert_non_null(p->env[n]);
                assert_string_equal(p->env[n], want[n]);
        }
        assert_null(p->env[n]);
        for (char **e = p->env; *e; e++) {
                assert_null(strstr(*e, CANARY_NAME));
                assert_null(strstr(*e, CANARY_VALUE));
        }
}

/* Nothing in the workspace is writable except what is listed. */
static void assert_writable_only(const struct sandbox_policy *p, const char *const *rel) {
        for (size_t i = 0; i < p->n_ops; i++) {
                const struct sandbox_op *op = &p->ops[i];
                if ((op->kind != SB_BIND && op->kind != SB_BIND_TRY) || !startswith(op->dest, "/workspace"))
                        continue;
                bool listed = false;
                for (const char *const *r = rel; *r; r++) {
                        char d[PATH_MAX];
                        snprintf(d, sizeof d, "/workspace/%s", *r);
                        listed |= streq(op->dest, d);
                }
                if (!listed)
                        fail_msg("unexpected writable mount %s -> %s", op->src, op->dest);
        }
}

static void test_evolution(void **state) {
        (void)state;
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);

        ssize_t w = find_op(p, SB_RO_BIND, ws, "/workspace");
        assert_true(w >= 0);
        _cleanup_free_ char *org = ws_path("organism"), *kn = ws_path("knowledge"), *kern = ws_path("kernel");
        ssize_t o = find_op(p, SB_BIND, org, "/workspace/organism");
        ssize_t k = find_op(p, SB_BIND, kn, "/workspace/knowledge");
        assert_true(o > w); /* after the read-only workspace, so it wins */
        assert_true(k > w);
        /* skills/ is missing on the host: nothing to bind. */
        assert_true(find_op(p, SB_BIND, NULL, "/workspace/skills") < 0);
        assert_true(find_op(p, SB_BIND, kern, NULL) < 0);
        assert_writable_only(p, (const char *const[]){"organism", "knowledge", NULL});

        /* .seed is hidden after the workspace mount; .git stays visible. */
        ssize_t s = find_op(p, SB_TMPFS, NULL, "/workspace/.seed");
        assert_true(s > w);
        assert_true(find_op(p, SB_TMPFS, NULL, "/workspace/.git") < 0);

        /* No way out without the proxy (no door, no proxy variables);
         * build cache writable at /cache. */
        assert_null(p->egress);
        assert_true(find_op(p, SB_RO_BIND_DATA, NULL, NULL) < 0);
        assert_true(find_op(p, SB_BIND, cache, "/cache") >= 0);
        assert_true(find_op(p, SB_CHDIR, NULL, "/workspace") >= 0);
        assert_env(p, (const char *const[]){"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox",
                                            "TMPDIR=/tmp", "LANG=C.UTF-8", "PWD=/workspace", "SEED_ENV=evolution",
                                            "npm_config_cache=/cache/npm", "XDG_CACHE_HOME=/cache/xdg", NULL});
}

static void test_build_and_test_profiles(void **state) {
        (void)state;
        enum sandbox_profile profiles[] = {SANDBOX_BUILD, SANDBOX_TEST};
        for (size_t i = 0; i < ARRAY_SIZE(profiles); i++) {
                struct sandbox_spec spec = base_spec(profiles[i]);
                spec.evolvable = (char *const[]){"organism", NULL};
                spec.port = 8123;
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);
                assert_true(find_op(p, SB_BIND, cache, "/cache") >= 0);
                assert_writable_only(p, (const char *const[]){"organism", NULL});
                assert_true(find_op(p, SB_TMPFS, NULL, "/workspace/.seed") >= 0);
                assert_env(p, (const char *const[]){"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox",
                                                    "TMPDIR=/tmp", "LANG=C.UTF-8", "PWD=/workspace", "SEED_ENV=evolution",
                                                    "PORT=8123", "npm_config_cache=/cache/npm",
                                                    "XDG_CACHE_HOME=/cache/xdg", NULL});
        }
}

static bool op_writable(const struct sandbox_op *op) {
        return op->kind == SB_BIND || op->kind == SB_BIND_TRY;
}

/* Index of the last op that mounts something (not remount, chdir). */
static ssize_t last_mount(const struct sandbox_policy *p) {
        ssize_t last = -1;
        for (size_t i = 0; i < p->n_ops; i++)
                if (p->ops[i].kind != SB_REMOUNT_RO && p->ops[i].kind != SB_CHDIR)
                        last = (ssize_t)i;
        return last;
}

static void test_live(void **state) {
        (void)state;
        enum sandbox_profile profiles[] = {SANDBOX_LIVE, SANDBOX_PREVIEW};
        _cleanup_free_ char *dot_seed = ws_path(".seed");
        /* A socket directory of its own: a shared one (/tmp) may hold more
         * entries than the sandbox agrees to hide one by one. */
        _cleanup_free_ char *pg_dir = ws_path("pg-sockets");
        assert_true(mkdir(pg_dir, 0700) == 0 || errno == EEXIST);
        int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(sock > 2);
        for (size_t i = 0; i < ARRAY_SIZE(profiles); i++) {
                struct sandbox_spec spec = base_spec(profiles[i]);
                spec.workspace_readonly = true;
                spec.port = 8080;
                spec.database_url = "postgresql://organism@/live?host=/run/postgresql";
                spec.pg_socket_dir = pg_dir;
                spec.bridge_path = "/usr/bin/true";
                spec.keep_fds = &sock;
                spec.n_keep_fds = 1;
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);

                /* The bridge's socket comes in as a passed fd: the kernel's run
                 * dir is not mounted, nothing is at /run/organism, and no path
                 * under .seed/ (host) is writable; in fact no host path is. */
                assert_int_equal(p->n_keep_fds, 1);
                assert_int_equal(p->keep_fds[0], sock);
                for (size_t k = 0; k < p->n_ops; k++) {
                        const struct sandbox_op *op = &p->ops[k];
                        if (op->dest && startswith(op->dest, "/run/organism"))
                                fail_msg("something at %s", op->dest);
                        if (op->src && (streq(op->src, run) || startswith(op->src, run)))
                                fail_msg("the kernel's socket dir is mounted at %s", op->dest);
                        if (op_writable(op) && op->src &&
                            (streq(op->src, dot_seed) ||
                             (startswith(op->src, dot_seed) && op->src[strlen(dot_seed)] == '/')))
                                fail_msg("writable mount of .seed: %s -> %s", op->src, op->dest);
                        if (op_writable(op))
                                fail_msg("writable host path in a %s sandbox: %s -> %s",
                                         sandbox_profile_name(profiles[i]), op->src, op->dest);
                }
                /* The root is read-only too (no made-up /run/organism), and so
                 * is the tmpfs over .seed; both after every mount. */
                ssize_t root_ro = find_op(p, SB_REMOUNT_RO, NULL, "/");
                ssize_t seed_ro = find_op(p, SB_REMOUNT_RO, NULL, "/workspace/.seed");
                assert_true(root_ro > last_mount(p));
                assert_true(seed_ro > last_mount(p));
                assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/tmp") < 0);
                assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/home/sandbox") < 0);

                assert_null(p->egress);
                assert_true(find_op(p, SB_RO_BIND_DATA, NULL, NULL) < 0); /* no shim without a door */
                /* Never the shared cache, even when one is passed. */
                assert_true(find_op(p, SB_BIND, NULL, "/cache") < 0);
                assert_true(find_op(p, SB_BIND, cache, NULL) < 0);
                /* The whole workspace read-only; .seed and .git hidden. */
                assert_true(find_op(p, SB_RO_BIND, ws, "/workspace") >= 0);
                assert_writable_only(p, (const char *const[]){NULL});
                assert_true(find_op(p, SB_TMPFS, NULL, "/workspace/.seed") >= 0);
                assert_true(find_op(p, SB_TMPFS, NULL, "/workspace/.git") >= 0);
                /* No tmpfs over /workspace itself (it is the Seed's folder). */
                assert_true(find_op(p, SB_TMPFS, NULL, "/workspace") < 0);
                assert_true(find_op(p, SB_RO_BIND, pg_dir, "/run/postgresql") >= 0);
                assert_true(find_op(p, SB_RO_BIND, "/usr/bin/true", "/run/seed/bridge") >= 0);
                assert_env(p, (const char *const[]){"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox",
                                                    "TMPDIR=/tmp", "LANG=C.UTF-8", "PWD=/workspace", "SEED_ENV=live", "PORT=8080",
                                                    "DATABASE_URL=postgresql://organism@/live?host=/run/postgresql",
                                                    NULL});
        }
        close(sock);
}

static void test_keep_fds(void **state) {
        (void)state;
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        struct sandbox_spec spec = base_spec(SANDBOX_LIVE);
        spec.keep_fds = fds;
        spec.n_keep_fds = 2;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        assert_int_equal(p->n_keep_fds, 2);
        assert_int_equal(p->keep_fds[0], fds[0]);
        assert_int_equal(p->keep_fds[1], fds[1]);
        /* Nothing passed unless asked for. */
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *none = NULL;
        spec.n_keep_fds = 0;
        assert_int_equal(sandbox_policy_build(&spec, &none), 0);
        assert_int_equal(none->n_keep_fds, 0);

        struct sandbox_policy *bad = NULL;
        int stdio[] = {1}, dup_fd[] = {fds[0], fds[0]}, closed[] = {fds[1]};
        int many[SANDBOX_KEEP_FDS_MAX + 1];
        for (size_t i = 0; i < ARRAY_SIZE(many); i++)
                many[i] = fds[0];
        spec.keep_fds = stdio;
        spec.n_keep_fds = 1;
        assert_int_equal(sandbox_policy_build(&spec, &bad), -EBADF);
        spec.keep_fds = dup_fd;
        spec.n_keep_fds = 2;
        assert_int_equal(sandbox_policy_build(&spec, &bad), -EINVAL);
        spec.keep_fds = many;
        spec.n_keep_fds = ARRAY_SIZE(many);
        assert_int_equal(sandbox_policy_build(&spec, &bad), -E2BIG);
        spec.keep_fds = NULL;
        spec.n_keep_fds = 1;
        assert_int_equal(sandbox_policy_build(&spec, &bad), -EINVAL);
        close(fds[0]);
        close(fds[1]);
        spec.keep_fds = closed;
        spec.n_keep_fds = 1;
        assert_int_equal(sandbox_policy_build(&spec, &bad), -EBADF);
        assert_null(bad);
}

static void test_hiding_read_only(void **state) {
        (void)state;
        /* Every profile: the tmpfs that hide things are read-only; /tmp and
         * the home are not; only private profiles get a read-only root. */
        for (int prof = SANDBOX_EVOLUTION; prof <= SANDBOX_PREVIEW; prof++) {
                struct sandbox_spec spec = base_spec((enum sandbox_profile)prof);
                spec.seed_dir = "/usr/share/doc";
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);
                ssize_t last = last_mount(p);
                assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/workspace/.seed") > last);
                assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/usr/share/doc") > last);
                assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/tmp") < 0);
                assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/home/sandbox") < 0);
                bool private = prof == SANDBOX_LIVE || prof == SANDBOX_PREVIEW;
                assert_int_equal(find_op(p, SB_REMOUNT_RO, NULL, "/") > last, private);
                _cleanup_strv_free_ char **argv = NULL;
                struct sandbox_fds fds = SANDBOX_FDS_NONE;
                fds.data[0] = 5; /* the resolv.conf of networked profiles */
                assert_int_equal(sandbox_policy_argv(p, "/usr/bin/bwrap", &fds, (char *const[]){"/bin/true", NULL},
                                                     &argv),
                                 0);
                bool found = false;
                for (char **a = argv; *a && a[1]; a++)
                        found |= streq(a[0], "--remount-ro") && streq(a[1], "/workspace/.seed");
                assert_true(found);
        }
}

static void test_system_dirs(void **state) {
        (void)state;
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        assert_true(find_op(p, SB_RO_BIND, "/usr", "/usr") >= 0);
        assert_true(find_op(p, SB_RO_BIND, "/etc", "/etc") >= 0);
        const char *links[] = {"/bin", "/sbin", "/lib", "/lib64"};
        for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
                struct stat st;
                if (lstat(links[i], &st) < 0) {
                        assert_true(find_op(p, SB_SYMLINK, NULL, links[i]) < 0);
                        continue;
                }
                if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlink(links[i], target, sizeof target - 1);
                        assert_true(n > 0);
                        target[n] = 0;
                        assert_true(find_op(p, SB_SYMLINK, target, links[i]) >= 0);
                        assert_true(find_op(p, SB_RO_BIND, links[i], NULL) < 0);
                } else {
                        assert_true(find_op(p, SB_RO_BIND, links[i], links[i]) >= 0);
                }
        }
        assert_true(find_op(p, SB_DEV, NULL, "/dev") >= 0);
        assert_true(find_op(p, SB_PROC, NULL, "/proc") >= 0);
        assert_true(find_op(p, SB_TMPFS, NULL, "/tmp") >= 0);
        assert_true(find_op(p, SB_TMPFS, NULL, "/home/sandbox") >= 0);
        /* Nothing else of the host: no /, /home, /root, /run, /var. */
        const char *never[] = {"/", "/home", "/root", "/run", "/var", "/srv", "/work"};
        for (size_t i = 0; i < ARRAY_SIZE(never); i++) {
                assert_true(find_op(p, SB_RO_BIND, never[i], NULL) < 0);
                assert_true(find_op(p, SB_BIND, never[i], NULL) < 0);
        }
        for (size_t i = 0; i < p->n_ops; i++)
                if (p->ops[i].kind == SB_BIND || p->ops[i].kind == SB_RO_BIND)
                        assert_false(startswith(p->ops[i].src, "/home") || startswith(p->ops[i].src, "/root"));
}

static bool argv_has(char **argv, const char *s) {
        for (char **a = argv; *a; a++)
                if (streq(*a, s))
                        return true;
        return false;
}

static ssize_t argv_index(char **argv, const char *s) {
        for (ssize_t i = 0; argv[i]; i++)
                if (streq(argv[i], s))
                        return i;
        return -1;
}

/* The fds a launch hands bwrap, with made-up numbers. */
static struct sandbox_fds some_fds(void) {
        struct sandbox_fds fds = {.seccomp = 7, .info = 8, .block = 9, .data = {11, -1}};
        return fds;
}

/* argv[i + 1] of the first argv[i] == flag, or NULL. */
static const char *argv_after(char **argv, const char *flag) {
        for (size_t i = 0; argv[i] && argv[i + 1]; i++)
                if (streq(argv[i], flag))
                        return argv[i + 1];
        return NULL;
}

static void test_argv(void **state) {
        (void)state;
        char *cmd[] = {"/bin/sh", "-c", "echo hi", NULL};
        for (int prof = SANDBOX_EVOLUTION; prof <= SANDBOX_PREVIEW; prof++) {
                struct sandbox_spec spec = base_spec((enum sandbox_profile)prof);
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                _cleanup_strv_free_ char **argv = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);
                struct sandbox_fds fds = some_fds();
                assert_int_equal(sandbox_policy_argv(p, "/usr/bin/bwrap", &fds, cmd, &argv), 0);
                assert_string_equal(argv[0], "/usr/bin/bwrap");
                const char *flags[] = {"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc",
                                       "--unshare-uts", "--unshare-user", "--unshare-cgroup-try", "--clearenv",
                                       "--disable-userns"};
                for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
                        assert_true(argv_has(argv, flags[i]));
                /* Never the host's network, in any profile. */
                assert_true(argv_has(argv, "--unshare-net"));
                assert_false(argv_has(argv, "--share-net"));
                /* --clearenv before every --setenv; the command last, after "--". */
                ssize_t ce = argv_index(argv, "--clearenv"), se = argv_index(argv, "--setenv");
                assert_true(ce > 0 && se > ce);
                size_t n = strv_length(argv);
                assert_string_equal(argv[n - 4], "--");
                assert_string_equal(argv[n - 3], "/bin/sh");
                assert_string_equal(argv[n - 1], "echo hi");
                for (char **a = argv; *a; a++) {
                        assert_null(strstr(*a, CANARY_NAME));
                        assert_null(strstr(*a, CANARY_VALUE));
                }
                /* Each env entry appears as --setenv NAME VALUE. */
                for (char **e = p->env; *e; e++) {
                        const char *eq = strchr(*e, '=');
                        bool found = false;
                        for (size_t i = 0; i + 2 < n; i++)
                                if (streq(argv[i], "--setenv") && strlen(argv[i + 1]) == (size_t)(eq - *e) &&
                                    strncmp(argv[i + 1], *e, (size_t)(eq - *e)) == 0 && streq(argv[i + 2], eq + 1))
                                        found = true;
                        assert_true(found);
                }
                /* --ro-bind <ws> /workspace is there as a triple. */
                bool ws_ro = false;
                for (size_t i = 0; i + 2 < n; i++)
                        ws_ro |= streq(argv[i], "--ro-bind") && streq(argv[i + 1], ws) &&
                                 streq(argv[i + 2], "/workspace");
                assert_true(ws_ro);
        }
}

/* Every profile: the filter and the pid-1 handshake; with a way out, the
 * Node.js shim as data; never a network of bwrap's or slirp's. */
static void test_argv_fds(void **state) {
        (void)state;
        for (int prof = SANDBOX_EVOLUTION; prof <= SANDBOX_PREVIEW; prof++) {
                struct sandbox_spec spec = base_spec((enum sandbox_profile)prof);
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                _cleanup_strv_free_ char **argv = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);
                struct sandbox_fds fds = some_fds();
                assert_int_equal(sandbox_policy_argv(p, "/usr/bin/bwrap", &fds, (char *const[]){"/bin/true", NULL},
                                                     &argv),
                                 0);
                assert_string_equal(argv_after(argv, "--seccomp"), "7");
                assert_string_equal(argv_after(argv, "--info-fd"), "8");
                assert_string_equal(argv_after(argv, "--block-fd"), "9");
                assert_false(argv_has(argv, "--sync-fd"));
                assert_false(argv_has(argv, "--share-net"));
                bool data = find_op(p, SB_RO_BIND_DATA, NULL, NULL) >= 0;
                assert_int_equal(argv_has(argv, "--ro-bind-data"), data);
                if (data) {
                        ssize_t i = argv_index(argv, "--ro-bind-data");
                        assert_string_equal(argv[i + 1], "11");
                        assert_true(argv[i + 2][0] == '/');
                }
                /* Everything about fds comes before the command. */
                assert_true(argv_index(argv, "--seccomp") < argv_index(argv, "--"));
                assert_true(argv_index(argv, "--block-fd") < argv_index(argv, "--"));
        }
        /* No fds: no --seccomp and no handshake (what the benchmark's bare
         * bwrap runs); a data op without its fd cannot be passed. */
        struct sandbox_spec spec = base_spec(SANDBOX_LIVE);
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        assert_int_equal(sandbox_policy_argv(p, "/usr/bin/bwrap", NULL, (char *const[]){"/bin/true", NULL}, &argv), 0);
        assert_false(argv_has(argv, "--seccomp"));
        assert_false(argv_has(argv, "--block-fd"));
        assert_int_equal(sandbox_policy_argv(p, "/usr/bin/bwrap", NULL, (char *const[]){NULL}, &argv), -EINVAL);
        struct sandbox_spec evo = base_spec(SANDBOX_EVOLUTION);
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *q = NULL;
        assert_int_equal(sandbox_policy_build(&evo, &q), 0);
        if (find_op(q, SB_RO_BIND_DATA, NULL, NULL) >= 0) {
                char **bad = NULL;
                assert_int_equal(sandbox_policy_argv(q, "/usr/bin/bwrap", NULL, (char *const[]){"/bin/true", NULL},
                                                     &bad),
                                 -EINVAL);
                assert_null(bad);
        }
}

static bool table_has(const struct sandbox_sc_rule *rules, size_t n, const char *name, int err) {
        for (size_t i = 0; i < n; i++)
                if (streq(rules[i].syscall, name) && rules[i].err == err)
                        return true;
        return false;
}

/* The table compiles with this libseccomp, knows every call, and denies at
 * least what the security model lists; each rule says why. */
static void test_seccomp_table(void **state) {
        (void)state;
        const void *prog = NULL;
        size_t len = 0;
        assert_int_equal(sandbox_seccomp_program(&prog, &len), 0);
        assert_non_null(prog);
        assert_true(len > 0 && len % 8 == 0 && len <= 4096 * 8); /* struct sock_filter, BPF's cap */
        assert_int_equal(sandbox_seccomp_skipped(), 0);
        /* Built once: the same program every time. */
        const void *again = NULL;
        size_t len2 = 0;
        assert_int_equal(sandbox_seccomp_program(&again, &len2), 0);
        assert_ptr_equal(again, prog);
        assert_int_equal(len2, len);

        size_t n = 0;
        const struct sandbox_sc_rule *rules = sandbox_seccomp_rules(&n);
        assert_true(n > 40);
        for (size_t i = 0; i < n; i++) {
                assert_non_null(rules[i].syscall);
                assert_true(rules[i].why && strlen(rules[i].why) > 5);
                assert_true(rules[i].err == EPERM || rules[i].err == ENOSYS);
                assert_true(rules[i].arg < 6);
        }
        const char *eperm[] = {"ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup",
                               "io_uring_enter", "io_uring_register", "bpf", "keyctl", "add_key", "request_key",
                               "userfaultfd", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
                               "finit_module", "delete_module", "mount", "umount2", "pivot_root", "move_mount",
                               "open_tree", "fsopen", "fsmount", "fspick", "mount_setattr", "unshare", "setns",
                               "clone", "socket", "ioctl", "personality", "acct", "swapon", "swapoff", "reboot",
                               "settimeofday", "clock_settime"};
        for (size_t i = 0; i < ARRAY_SIZE(eperm); i++)
                if (!table_has(rules, n, eperm[i], EPERM))
                        fail_msg("%s is not denied", eperm[i]);
        assert_true(table_has(rules, n, "clone3", ENOSYS));
        /* clone is refused only with a namespace flag: plain fork and threads pass. */
        for (size_t i = 0; i < n; i++)
                if (streq(rules[i].syscall, "clone")) {
                        assert_int_equal(rules[i].match, SANDBOX_SC_ANY_BIT);
                        assert_true(rules[i].value & CLONE_NEWUSER);
                        assert_true(rules[i].value & CLONE_NEWNET);
                        assert_false(rules[i].value & CLONE_THREAD);
                        assert_false(rules[i].value & CLONE_VM);
                }
}

static void test_seccomp_memfd(void **state) {
        (void)state;
        const void *prog = NULL;
        size_t len = 0;
        assert_int_equal(sandbox_seccomp_program(&prog, &len), 0);
        int fd = -1, fd2 = -1;
        assert_int_equal(sandbox_seccomp_memfd(&fd), 0);
        assert_int_equal(sandbox_seccomp_memfd(&fd2), 0);
        assert_true(fd > 2 && fd2 > 2 && fd != fd2); /* one per sandbox: each read from 0 */
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        int seals = fcntl(fd, F_GET_SEALS);
        assert_true(seals & F_SEAL_WRITE);
        assert_true(seals & F_SEAL_SEAL);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
        char *buf = malloc(len + 1);
        assert_non_null(buf);
        assert_int_equal(read(fd, buf, len + 1), (ssize_t)len);
        assert_memory_equal(buf, prog, len);
        free(buf);
        assert_true(write(fd, "x", 1) < 0); /* sealed */
        close(fd);
        close(fd2);
}

static bool env_has(char *const *env, const char *entry) {
        for (; env && *env; env++)
                if (streq(*env, entry))
                        return true;
        return false;
}

/* With the kernel's egress proxy, every profile gets a way out: a door
 * (made at start, see sandbox/door.h) with the profile's policy, the proxy
 * variables every common client reads, and the Node.js shim; none of them can
 * be overridden by extra_env. Without it, none of that. */
static void test_egress(void **state) {
        (void)state;
        struct egress *fake = (struct egress *)&fake; /* only stored, never used by the policy */
        static const struct {
                enum sandbox_profile profile;
                enum egress_policy policy;
        } cases[] = {
                {SANDBOX_EVOLUTION, EGRESS_POLICY_BUILD}, {SANDBOX_BUILD, EGRESS_POLICY_BUILD},
                {SANDBOX_TEST, EGRESS_POLICY_BUILD},      {SANDBOX_LIVE, EGRESS_POLICY_LIVE},
                {SANDBOX_PREVIEW, EGRESS_POLICY_LIVE},
        };
        static const char *const proxy_env[] = {
                "HTTPS_PROXY=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
                "HTTP_PROXY=http://127.0.0.1:3128",  "http_proxy=http://127.0.0.1:3128",
                "NO_PROXY=localhost,127.0.0.1",      "no_proxy=localhost,127.0.0.1",
                "NODE_USE_ENV_PROXY=1",              "NODE_OPTIONS=--require /run/seed/egress-node.cjs",
                "npm_config_https_proxy=http://127.0.0.1:3128",
        };
        for (size_t k = 0; k < ARRAY_SIZE(cases); k++) {
                struct sandbox_spec spec = base_spec(cases[k].profile);
                spec.workspace_readonly = cases[k].profile == SANDBOX_LIVE || cases[k].profile == SANDBOX_PREVIEW;
                spec.egress = fake;
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);
                assert_ptr_equal(p->egress, fake);
                assert_int_equal(p->egress_policy, cases[k].policy);
                assert_string_equal(p->label, sandbox_profile_name(cases[k].profile));
                for (size_t i = 0; i < ARRAY_SIZE(proxy_env); i++)
                        assert_true(env_has(p->env, proxy_env[i]));
                ssize_t shim = find_op(p, SB_RO_BIND_DATA, NULL, "/run/seed/egress-node.cjs");
                assert_true(shim >= 0);
                assert_non_null(strstr(p->ops[shim].src, "HTTPS_PROXY"));
                assert_true(find_op(p, SB_DIR, NULL, "/run/seed") < shim);
                if (cases[k].policy == EGRESS_POLICY_LIVE) /* the root goes read-only after the shim's mount */
                        assert_true(find_op(p, SB_REMOUNT_RO, NULL, "/") > shim);

                /* The same spec without the proxy: nothing of it. */
                spec.egress = NULL;
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *q = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &q), 0);
                assert_null(q->egress);
                for (char **e = q->env; *e; e++)
                        assert_null(strcasestr(*e, "proxy"));
                assert_true(find_op(q, SB_RO_BIND_DATA, NULL, NULL) < 0);
        }
        /* The label names the sandbox at the proxy. */
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        spec.egress = fake;
        spec.label = "evolution evo_0123456789abcdef";
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        assert_string_equal(p->label, "evolution evo_0123456789abcdef");
        /* Code may not point clients elsewhere. */
        static const char *const overrides[] = {"HTTPS_PROXY=http://10.0.0.1:3128", "https_proxy=x",
                                                "NO_PROXY=*", "NODE_OPTIONS=--inspect", "ALL_PROXY=x"};
        for (size_t i = 0; i < ARRAY_SIZE(overrides); i++) {
                spec.extra_env = (char *const[]){(char *)overrides[i], NULL};
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *bad = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &bad), -EINVAL);
        }
}

static void test_seed_dir_under_system_dir(void **state) {
        (void)state;
        /* A Seed planted under /usr would be visible through the /usr bind:
         * it gets covered by a tmpfs, after that bind. */
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        spec.seed_dir = "/usr/share/doc";
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        ssize_t t = find_op(p, SB_TMPFS, NULL, "/usr/share/doc");
        assert_true(t > find_op(p, SB_RO_BIND, "/usr", "/usr"));

        /* A Seed under the workspace (the workspace is a parent folder). */
        _cleanup_free_ char *inner = ws_path("organism/nested-seed");
        spec.seed_dir = inner;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *q = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &q), 0);
        ssize_t ro = find_op(q, SB_TMPFS, NULL, "/workspace/organism/nested-seed");
        assert_true(ro > find_op(q, SB_BIND, NULL, "/workspace/organism"));

        /* The owner's config: a file is covered with /dev/null. */
        spec.seed_dir = ws;
        spec.hide_paths = (char *const[]){"/etc/hostname", "/nonexistent/x", NULL};
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *r = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &r), 0);
        if (path_exists("/etc/hostname"))
                assert_true(find_op(r, SB_RO_BIND, "/dev/null", "/etc/hostname") >= 0);
        assert_true(find_op(r, SB_TMPFS, NULL, "/nonexistent/x") < 0);
        assert_true(find_op(r, SB_RO_BIND, NULL, "/nonexistent/x") < 0);
}

static void test_pg_socket_dir_only_postgres(void **state) {
        (void)state;
        /* The socket dir is shared with the organism's run dir: only
         * PostgreSQL's own entries stay visible. */
        _cleanup_free_ char *pg = ws_path(".seed/run");
        _cleanup_free_ char *sock = ws_path(".seed/run/.s.PGSQL.5432");
        _cleanup_free_ char *other = ws_path(".seed/run/other.sock");
        assert_int_equal(write_file_atomic(sock, "", 0, 0600), 0);
        assert_int_equal(write_file_atomic(other, "", 0, 0600), 0);
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        spec.pg_socket_dir = pg;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        ssize_t b = find_op(p, SB_RO_BIND, pg, "/run/postgresql");
        assert_true(b >= 0);
        assert_true(find_op(p, SB_TMPFS, NULL, "/run/postgresql/organism") > b);
        assert_true(find_op(p, SB_RO_BIND, "/dev/null", "/run/postgresql/other.sock") > b);
        assert_true(find_op(p, SB_TMPFS, NULL, "/run/postgresql/.s.PGSQL.5432") < 0);
        assert_true(find_op(p, SB_RO_BIND, NULL, "/run/postgresql/.s.PGSQL.5432") < 0);
        unlink(sock);
        unlink(other);
}

static void test_extra_env_and_cwd(void **state) {
        (void)state;
        struct sandbox_spec spec = base_spec(SANDBOX_LIVE);
        spec.cache_dir = NULL;
        spec.extra_env = (char *const[]){"APP_MODE=production", NULL};
        spec.cwd = "/workspace/organism";
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        assert_true(find_op(p, SB_CHDIR, NULL, "/workspace/organism") >= 0);
        assert_env(p, (const char *const[]){"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/sandbox",
                                            "TMPDIR=/tmp", "LANG=C.UTF-8", "PWD=/workspace/organism",
                                            "SEED_ENV=live", "APP_MODE=production", NULL});
}

static void test_invalid_specs(void **state) {
        (void)state;
        struct sandbox_policy *p = NULL;
        const char *bad_evolvable[] = {"../x", "/organism", ".seed", "organism/../kernel", "a/.git", "", "./x"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_evolvable); i++) {
                struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
                spec.evolvable = (char *const[]){(char *)bad_evolvable[i], NULL};
                assert_int_equal(sandbox_policy_build(&spec, &p), -EINVAL);
        }
        const char *bad_env[] = {"PATH=/evil", "DATABASE_URL=x", "HOME=/root", "noequals", "=x", "1A=b",
                                 "SEED_ENV=live", "A B=c"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_env); i++) {
                struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
                spec.extra_env = (char *const[]){(char *)bad_env[i], NULL};
                assert_int_equal(sandbox_policy_build(&spec, &p), -EINVAL);
        }
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        spec.workspace = "relative/ws";
        assert_int_equal(sandbox_policy_build(&spec, &p), -EINVAL);
        spec.workspace = "/tmp/../etc";
        assert_int_equal(sandbox_policy_build(&spec, &p), -EINVAL);
        spec = base_spec(SANDBOX_EVOLUTION);
        spec.cwd = "workspace";
        assert_int_equal(sandbox_policy_build(&spec, &p), -EINVAL);
        spec = base_spec(SANDBOX_EVOLUTION);
        spec.workspace = "/nonexistent-seed-ws";
        assert_int_equal(sandbox_policy_build(&spec, &p), -ENOENT);

        /* An evolvable directory replaced by a symlink is refused, not followed. */
        _cleanup_free_ char *link = ws_path("skills");
        assert_int_equal(symlink("/root", link), 0);
        spec = base_spec(SANDBOX_EVOLUTION);
        assert_int_equal(sandbox_policy_build(&spec, &p), -ENOTDIR);
        assert_int_equal(unlink(link), 0);
        assert_null(p);
}

static void test_profile_names(void **state) {
        (void)state;
        assert_string_equal(sandbox_profile_name(SANDBOX_EVOLUTION), "evolution");
        assert_string_equal(sandbox_profile_name(SANDBOX_LIVE), "live");
        assert_string_equal(sandbox_profile_name(SANDBOX_PREVIEW), "preview");
}

static void test_refuses_root(void **state) {
        (void)state;
        if (geteuid() != 0)
                skip();
        struct sandbox_spec spec = base_spec(SANDBOX_EVOLUTION);
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        struct proc_result res = {0};
        char *cmd[] = {"/bin/true", NULL};
        assert_int_equal(sandbox_run(p, cmd, 1000, &res), -EPERM);
        struct sandbox_child c = {.pid = 0};
        assert_int_equal(sandbox_start(p, cmd, -1, &c), -EPERM);
        assert_int_equal(c.pid, 0);
}

/* The owner's env files are hidden in every sandbox of every profile,
 * without each caller listing them. Last: the list is process-wide. */
static void test_hidden_everywhere(void **state) {
        (void)state;
        _cleanup_free_ char *env = ws_path("organism/owner.env");
        assert_int_equal(write_file_atomic(env, "OPENAI_API_KEY=x\n", 17, 0600), 0);
        assert_int_equal(sandbox_hide_everywhere((char *const[]){"relative", NULL}), -EINVAL);
        assert_int_equal(sandbox_hide_everywhere((char *const[]){env, "/etc/hostname", NULL}), 0);
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_BUILD, SANDBOX_TEST, SANDBOX_LIVE, SANDBOX_PREVIEW};
        for (size_t i = 0; i < ARRAY_SIZE(profiles); i++) {
                struct sandbox_spec spec = base_spec(profiles[i]);
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
                assert_int_equal(sandbox_policy_build(&spec, &p), 0);
                assert_true(find_op(p, SB_RO_BIND, "/dev/null", "/workspace/organism/owner.env") >= 0);
                if (path_exists("/etc/hostname"))
                        assert_true(find_op(p, SB_RO_BIND, "/dev/null", "/etc/hostname") >= 0);
        }
        unlink(env);
}

int main(void) {
        setenv(CANARY_NAME, CANARY_VALUE, 1);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_evolution),
                cmocka_unit_test(test_build_and_test_profiles),
                cmocka_unit_test(test_live),
                cmocka_unit_test(test_keep_fds),
                cmocka_unit_test(test_hiding_read_only),
                cmocka_unit_test(test_system_dirs),
                cmocka_unit_test(test_argv),
                cmocka_unit_test(test_argv_fds),
                cmocka_unit_test(test_seccomp_table),
                cmocka_unit_test(test_seccomp_memfd),
                cmocka_unit_test(test_egress),
                cmocka_unit_test(test_seed_dir_under_system_dir),
                cmocka_unit_test(test_pg_socket_dir_only_postgres),
                cmocka_unit_test(test_extra_env_and_cwd),
                cmocka_unit_test(test_invalid_specs),
                cmocka_unit_test(test_profile_names),
                cmocka_unit_test(test_refuses_root),
                cmocka_unit_test(test_hidden_everywhere),
        };
        return cmocka_run_group_tests(tests, setup_ws, teardown_ws);
}
