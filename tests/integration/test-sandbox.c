/* Integration tests for the sandbox: real bwrap, as the unprivileged account.
 * Each test runs a command inside a sandbox and checks what it can see. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "sandbox/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#define CANARY_NAME "SEED_TEST_CANARY_SECRET"

static char root[256];  /* temp dir holding everything */
static char seed[512];  /* a fake Seed folder = the workspace */
static char cache[PATH_MAX];
static char *unavailable; /* why bwrap cannot run here, or NULL */
static char *const evolvable[] = {"organism/", "knowledge/", "skills/", NULL};

static void write_in(const char *rel, const char *content) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0600), 0);
}

static void mkdir_in(const char *rel) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        assert_int_equal(mkdir_p(p, 0755), 0);
}

static int setup(void **state) {
        (void)state;
        char tmpl[] = "/tmp/itest-sandbox.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(root, sizeof root, "%s", tmpl);
        snprintf(seed, sizeof seed, "%s/seed", root);
        mkdir_in("kernel");
        mkdir_in("organism");
        mkdir_in("knowledge");
        mkdir_in("skills");
        mkdir_in(".git");
        mkdir_in(".seed/secrets");
        mkdir_in(".seed/cache");
        write_in(".seed/secrets/x", "top-secret-canary\n");
        write_in(".git/HEAD", "ref: refs/heads/main\n");
        write_in("kernel/main.c", "int main(void) { return 0; }\n");
        snprintf(cache, sizeof cache, "%s/.seed/cache", seed);
        char *msg = NULL;
        if (sandbox_check(&msg) < 0)
                unavailable = msg ? msg : strdup("sandbox_check failed");
        else
                free(msg);
        return 0;
}

static int teardown(void **state) {
        (void)state;
        rm_rf(root);
        free(unavailable);
        return 0;
}

static void require_bwrap(void) {
        if (unavailable) {
                print_message("skipped: %s\n", unavailable);
                skip();
        }
}

static struct sandbox_policy *policy(enum sandbox_profile profile) {
        struct sandbox_spec spec = {
                .profile = profile,
                .seed_dir = seed,
                .workspace = seed,
                .evolvable = evolvable,
                .workspace_readonly = profile == SANDBOX_LIVE || profile == SANDBOX_PREVIEW,
                .cache_dir = cache,
                .port = 8080,
        };
        struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        return p;
}

/* Runs sh -c script in a sandbox of profile; returns the exit code and
 * hands the output to *ret_out (caller frees). */
static int run_sh(enum sandbox_profile profile, const char *script, int timeout_ms, char **ret_out) {
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(profile);
        char *cmd[] = {"/bin/sh", "-c", (char *)script, NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, timeout_ms, &res), 0);
        assert_false(res.timed_out);
        if (ret_out)
                *ret_out = TAKE_PTR(res.output);
        proc_result_done(&res);
        return res.exit_code;
}

static void test_check(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *msg = NULL;
        assert_int_equal(sandbox_check(&msg), 0);
        assert_string_equal(sandbox_bwrap_path(), "/usr/bin/bwrap");
}

static void test_true(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_EVOLUTION);
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, (char *const[]){"/bin/true", NULL}, 30000, &res), 0);
        assert_int_equal(res.exit_code, 0);
        proc_result_done(&res);
        assert_int_equal(sandbox_run(p, (char *const[]){"/bin/false", NULL}, 30000, &res), 0);
        assert_int_equal(res.exit_code, 1);
        proc_result_done(&res);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The environment inside is exactly the policy's list, nothing inherited. */
static void test_env_exact(void **state) {
        (void)state;
        require_bwrap();
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_LIVE};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(profiles[k]);
                struct proc_result res = {0};
                assert_int_equal(sandbox_run(p, (char *const[]){"/usr/bin/env", NULL}, 30000, &res), 0);
                assert_int_equal(res.exit_code, 0);
                assert_null(strstr(res.output, CANARY_NAME));
                _cleanup_strv_free_ char **got = NULL, **want = NULL;
                for (char *line = strtok(res.output, "\n"); line; line = strtok(NULL, "\n"))
                        assert_int_equal(strv_push(&got, line), 0);
                for (char **e = p->env; *e; e++)
                        assert_int_equal(strv_push(&want, *e), 0);
                proc_result_done(&res);
                assert_int_equal(strv_length(got), strv_length(want));
                qsort(got, strv_length(got), sizeof(char *), cmp_str);
                qsort(want, strv_length(want), sizeof(char *), cmp_str);
                for (size_t i = 0; want[i]; i++)
                        assert_string_equal(got[i], want[i]);
        }
}

static void test_workspace_writes(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "echo x > /workspace/kernel/x", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "echo x > /workspace/newroot", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "rm /workspace/kernel/main.c", 30000, NULL), 0);
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "echo hello > /workspace/organism/x && "
                                                   "echo k > /workspace/knowledge/k",
                                30000, &out),
                         0);
        _cleanup_free_ char *kx = NULL, *ox = NULL, *nr = NULL;
        assert_true(xasprintf(&kx, "%s/kernel/x", seed) >= 0);
        assert_true(xasprintf(&ox, "%s/organism/x", seed) >= 0);
        assert_true(xasprintf(&nr, "%s/newroot", seed) >= 0);
        assert_false(path_exists(kx));
        assert_false(path_exists(nr));
        assert_true(path_exists(ox));
        /* The live organism cannot write even its own folder. */
        assert_int_not_equal(run_sh(SANDBOX_LIVE, "echo y > /workspace/organism/y", 30000, NULL), 0);
        /* Build cache: writable for evolutions, absent for the live organism. */
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "mkdir -p \"$npm_config_cache\" && touch /cache/c", 30000,
                                NULL),
                         0);
        assert_int_not_equal(run_sh(SANDBOX_LIVE, "test -e /cache", 30000, NULL), 0);
}

static void test_seed_hidden(void **state) {
        (void)state;
        require_bwrap();
        enum sandbox_profile profiles[] = {SANDBOX_EVOLUTION, SANDBOX_BUILD, SANDBOX_LIVE};
        for (size_t k = 0; k < ARRAY_SIZE(profiles); k++) {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(run_sh(profiles[k], "ls -A /workspace/.seed", 30000, &out), 0);
                assert_string_equal(out, "");
                assert_int_not_equal(run_sh(profiles[k], "cat /workspace/.seed/secrets/x", 30000, NULL), 0);
                _cleanup_free_ char *grep = NULL;
                /* Nowhere in the sandbox's files. */
                assert_int_not_equal(run_sh(profiles[k],
                                            "grep -rqs top-secret-canary /workspace /tmp /home /run 2>/dev/null",
                                            30000, &grep),
                                     0);
        }
        _cleanup_free_ char *git = NULL;
        assert_int_equal(run_sh(SANDBOX_LIVE, "ls -A /workspace/.git", 30000, &git), 0);
        assert_string_equal(git, "");
        _cleanup_free_ char *head = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "cat /workspace/.git/HEAD", 30000, &head), 0);
        assert_non_null(strstr(head, "refs/heads/main"));
}

static void test_pg_socket_dir(void **state) {
        (void)state;
        require_bwrap();
        /* .seed/run holds PostgreSQL's socket, and possibly other entries. */
        mkdir_in(".seed/run/organism");
        write_in(".seed/run/organism/http.sock", "live-app-canary\n");
        write_in(".seed/run/.s.PGSQL.5432.lock", "pg-lock\n");
        _cleanup_free_ char *pg = NULL;
        assert_true(xasprintf(&pg, "%s/.seed/run", seed) >= 0);
        struct sandbox_spec spec = {
                .profile = SANDBOX_EVOLUTION, .seed_dir = seed, .workspace = seed, .pg_socket_dir = pg,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", "cat /run/postgresql/.s.PGSQL.5432.lock; ls -A /run/postgresql/organism; "
                       "touch /run/postgresql/x || echo read-only", NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 30000, &res), 0);
        assert_non_null(strstr(res.output, "pg-lock\n"));
        assert_non_null(strstr(res.output, "read-only\n"));
        assert_null(strstr(res.output, "http.sock"));
        proc_result_done(&res);
}

static void test_host_dirs_absent(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *home = NULL, *uid = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "ls -A /home", 30000, &home), 0);
        assert_string_equal(home, "sandbox\n");
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "test -e /root", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "test -e /work", 30000, NULL), 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, "test -e /var", 30000, NULL), 0);
        /* The host's /tmp (where the Seed lives here) is not the sandbox's. */
        _cleanup_free_ char *script = NULL;
        assert_true(xasprintf(&script, "test -e '%s'", root) >= 0);
        assert_int_not_equal(run_sh(SANDBOX_EVOLUTION, script, 30000, NULL), 0);
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "id -u", 30000, &uid), 0);
        assert_int_equal(atoi(uid), (int)getuid());
        assert_int_not_equal(atoi(uid), 0);
}

static void test_live_no_network(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_LIVE, "cat /proc/net/dev", 30000, &out), 0);
        int ifaces = 0;
        bool lo = false;
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                if (!strchr(line, ':'))
                        continue;
                while (*line == ' ')
                        line++;
                if (startswith(line, "Inter-") || startswith(line, "face"))
                        continue;
                ifaces++;
                lo |= startswith(line, "lo:");
        }
        assert_int_equal(ifaces, 1);
        assert_true(lo);
}

/* Host pids whose command line contains marker. */
static int count_procs(const char *marker) {
        DIR *d = opendir("/proc");
        assert_non_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
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
                if (strstr(cmd, marker))
                        n++;
        }
        closedir(d);
        return n;
}

static void test_timeout_kills_group(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_EVOLUTION);
        /* A child in the background and one in the foreground. */
        char *cmd[] = {"/bin/sh", "-c", "sleep 100.4711 & sleep 100.4712; echo never", NULL};
        struct proc_result res = {0};
        int64_t t0 = now_ms();
        assert_int_equal(sandbox_run(p, cmd, 1000, &res), 0);
        assert_true(res.timed_out);
        assert_true(now_ms() - t0 < 20000);
        assert_null(strstr(res.output ? res.output : "", "never"));
        proc_result_done(&res);
        int64_t deadline = now_ms() + 10000;
        while (count_procs("100.471") > 0 && now_ms() < deadline) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(count_procs("100.471"), 0);
}

static void test_output_capped(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION,
                                "printf START; head -c 5000000 /dev/zero | tr '\\0' x; printf END", 60000, &out),
                         0);
        size_t n = strlen(out);
        assert_true(n <= 2 * 1024 * 1024 + 100);
        assert_true(n >= 2 * 1024 * 1024);
        assert_true(startswith(out, "STARTxxx"));
        assert_true(endswith(out, "xxxEND"));
        assert_non_null(strstr(out, "bytes omitted"));
}

static void test_pid_namespace(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        /* Few processes visible, and pid 1 is the sandbox's own init. */
        assert_int_equal(run_sh(SANDBOX_EVOLUTION,
                                "n=0; for d in /proc/[0-9]*; do n=$((n+1)); done; echo $n $$; "
                                "tr '\\0' ' ' < /proc/1/cmdline",
                                30000, &out),
                         0);
        int nprocs = 0, self = 0;
        assert_int_equal(sscanf(out, "%d %d", &nprocs, &self), 2);
        assert_true(nprocs <= 4);
        assert_true(self < 10);
        assert_non_null(strstr(out, "bwrap")); /* the host's pid 1 is not bwrap */
}

static void test_no_leaked_fds(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "ls /proc/self/fd | sort -n | tr '\\n' ' '", 30000, &out), 0);
        assert_string_equal(out, "0 1 2 3 ");
}

/* A passed fd reaches the command at its number, and only when passed. */
static void test_keep_fds(void **state) {
        (void)state;
        require_bwrap();
        int fds[2];
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        int w = dup3(fds[1], 42, O_CLOEXEC);
        assert_int_equal(w, 42);
        close(fds[1]);
        struct sandbox_spec spec = {
                .profile = SANDBOX_LIVE, .seed_dir = seed, .workspace = seed, .workspace_readonly = true,
                .keep_fds = &w, .n_keep_fds = 1,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo via-42 > /proc/self/fd/42", NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 30000, &res), 0);
        assert_int_equal(res.exit_code, 0);
        assert_string_equal(res.output, "0 1 2 3 42 ");
        proc_result_done(&res);
        close(w);
        char buf[64] = {0};
        assert_int_equal(read(fds[0], buf, sizeof buf - 1), 7);
        assert_string_equal(buf, "via-42\n");
        close(fds[0]);

        /* Without keep_fds an open fd of ours never arrives. */
        int other = open("/dev/null", O_RDONLY); /* not even without O_CLOEXEC */
        assert_true(other >= 0);
        _cleanup_free_ char *out = NULL, *script = NULL;
        assert_true(xasprintf(&script, "test -e /proc/self/fd/%d && echo leaked; true", other) >= 0);
        assert_int_equal(run_sh(SANDBOX_LIVE, script, 30000, &out), 0);
        assert_string_equal(out, "");
        close(other);
}

/* Live: nothing outside /tmp and the home is writable, not even the
 * sandbox's own root, so no /run/organism can be made up; hidden places
 * are read-only in every profile. */
static void test_read_only(void **state) {
        (void)state;
        require_bwrap();
        const char *script = "for p in /run/organism /x /run/seed/x /workspace/.seed/x /workspace/x; do "
                             "  mkdir \"$p\" 2>/dev/null && echo \"wrote $p\"; "
                             "done; "
                             "ln -s /tmp/evil.sock /run/organism.sock 2>/dev/null && echo wrote-link; "
                             "touch /tmp/t && touch \"$HOME/h\" && echo scratch-ok";
        _cleanup_free_ char *out = NULL;
        assert_int_equal(run_sh(SANDBOX_LIVE, script, 30000, &out), 0);
        assert_string_equal(out, "scratch-ok\n");
        _cleanup_free_ char *evo = NULL;
        assert_int_equal(run_sh(SANDBOX_EVOLUTION, "touch /workspace/.seed/x 2>/dev/null && echo wrote; true", 30000,
                                &evo),
                         0);
        assert_string_equal(evo, "");
}

/* A long-running sandbox: SIGTERM reaches the command inside (not just
 * bwrap), and stopping one still being set up leaves nothing behind. */
static void test_start_stop(void **state) {
        (void)state;
        require_bwrap();
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = policy(SANDBOX_LIVE);
        int pipefd[2];
        assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
        char *cmd[] = {"/bin/sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; sleep 100.4721 & wait",
                       NULL};
        struct sandbox_child c;
        assert_int_equal(sandbox_start(p, cmd, pipefd[1], &c), 0);
        close(pipefd[1]);
        assert_true(c.pid > 1);
        assert_true(c.init_pid > 1);
        assert_true(c.init_pid != c.pid);
        char buf[256];
        size_t len = 0;
        while (!memmem(buf, len, "ready", 5) && len < sizeof buf - 1) {
                ssize_t n = read(pipefd[0], buf + len, sizeof buf - 1 - len);
                assert_true(n > 0);
                len += (size_t)n;
        }
        assert_int_equal(sandbox_stop(&c, 10000), 7);
        sandbox_child_done(&c);
        for (;;) {
                ssize_t n = read(pipefd[0], buf + len, sizeof buf - 1 - len);
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = 0;
        close(pipefd[0]);
        assert_non_null(strstr(buf, "got-term"));

        /* Stopped at once, repeatedly: no sandbox survives its bwrap. */
        char *cmd2[] = {"/bin/sh", "-c", "sleep 100.4722", NULL};
        for (int i = 0; i < 10; i++) {
                assert_int_equal(sandbox_start(p, cmd2, -1, &c), 0);
                assert_true(sandbox_stop(&c, 2000) >= 0);
                sandbox_child_done(&c);
        }
        int64_t deadline = now_ms() + 10000;
        while ((count_procs("100.4721") > 0 || count_procs("100.4722") > 0) && now_ms() < deadline) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(count_procs("100.4721"), 0);
        assert_int_equal(count_procs("100.4722"), 0);
}

static void test_refuses_root_spec(void **state) {
        (void)state;
        /* The test runs unprivileged: root was dropped in main(). */
        assert_int_not_equal(geteuid(), 0);
}

int main(void) {
        setenv(CANARY_NAME, "leak", 1);
        /* Whatever started us may have leaked fds; the kernel does the same at boot. */
        close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_check),
                cmocka_unit_test(test_true),
                cmocka_unit_test(test_env_exact),
                cmocka_unit_test(test_workspace_writes),
                cmocka_unit_test(test_seed_hidden),
                cmocka_unit_test(test_pg_socket_dir),
                cmocka_unit_test(test_host_dirs_absent),
                cmocka_unit_test(test_live_no_network),
                cmocka_unit_test(test_timeout_kills_group),
                cmocka_unit_test(test_output_capped),
                cmocka_unit_test(test_pid_namespace),
                cmocka_unit_test(test_no_leaked_fds),
                cmocka_unit_test(test_keep_fds),
                cmocka_unit_test(test_read_only),
                cmocka_unit_test(test_start_stop),
                cmocka_unit_test(test_refuses_root_spec),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
