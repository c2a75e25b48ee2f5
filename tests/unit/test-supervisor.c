/* Unit tests for kernel/supervisor: the restart policy as data, checked
 * against every outcome it can be given; and the loop itself against fake
 * kernels (small shell scripts that exit 0, exit 75, die at once or wait to
 * be stopped), with the last good kernel in a temporary Seed folder. No
 * kernel is built: a rebuild there fails at once (the folder has no
 * meson.build), which the policy answers with the last good kernel. The real
 * kernel under the real supervisor is tests/integration/test_seed.py,
 * test_crash.py and test_port.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "secrets/secrets.h"
#include "supervisor/supervisor.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

/* ---- the policy ---- */

/* The decisions as `seed run` made them before the policy was a table,
 * spelled out as code: the table must agree with it everywhere. */
static enum supervisor_action reference(const struct supervisor_outcome *o, int *ret_delay_ms) {
        *ret_delay_ms = 0;
        switch (o->end) {
        case SUPERVISOR_END_STOPPED:
        case SUPERVISOR_END_EXITED: return SUPERVISOR_STOP;
        case SUPERVISOR_END_RESTART: return SUPERVISOR_REBUILD;
        case SUPERVISOR_END_BUILD_FAILED: return SUPERVISOR_FALL_BACK;
        case SUPERVISOR_END_ASKED: return SUPERVISOR_START_AGAIN;
        case SUPERVISOR_END_CRASHED:
                if (o->early && o->fresh)
                        return SUPERVISOR_FALL_BACK;
                if (o->early || o->crashes + 1 > 3)
                        return SUPERVISOR_GIVE_UP;
                *ret_delay_ms = (o->crashes + 1) * 2000;
                return SUPERVISOR_RESTART;
        default: return SUPERVISOR_GIVE_UP;
        }
}

#define FOR_EACH_OUTCOME(o)                                                                                        \
        for (int end_ = 0; end_ < _SUPERVISOR_END_MAX; end_++)                                                     \
                for (int early_ = 0; early_ < 2; early_++)                                                         \
                        for (int fresh_ = 0; fresh_ < 2; fresh_++)                                                 \
                                for (int crashes_ = 0; crashes_ <= SUPERVISOR_MAX_CRASHES + 2; crashes_++)         \
                                        for (struct supervisor_outcome o = {.end = (enum supervisor_end)end_,      \
                                                                            .early = early_,                       \
                                                                            .fresh = fresh_,                       \
                                                                            .crashes = crashes_},                  \
                                                                       *once_ = &o;                                \
                                             once_; once_ = NULL)

static void test_policy_agrees_with_the_reference_everywhere(void **state) {
        (void)state;
        size_t seen = 0;
        FOR_EACH_OUTCOME(o) {
                int delay;
                enum supervisor_action want = reference(&o, &delay);
                struct supervisor_decision d = supervisor_decide(&o);
                if (d.action != want || d.delay_ms != delay)
                        fail_msg("end %d early %d fresh %d crashes %d: %s after %d ms, want %s after %d ms", o.end,
                                 o.early, o.fresh, o.crashes, supervisor_action_name(d.action), d.delay_ms,
                                 supervisor_action_name(want), delay);
                assert_non_null(d.why);
                assert_true(strlen(d.why) > 0);
                seen++;
        }
        assert_int_equal(seen, (size_t)_SUPERVISOR_END_MAX * 2 * 2 * (SUPERVISOR_MAX_CRASHES + 3));
}

static bool rule_matches(const struct supervisor_rule *r, const struct supervisor_outcome *o) {
        bool left = o->crashes < SUPERVISOR_MAX_CRASHES;
        return r->end == o->end && (r->early == SUPERVISOR_ANY || (r->early == SUPERVISOR_YES) == o->early) &&
               (r->fresh == SUPERVISOR_ANY || (r->fresh == SUPERVISOR_YES) == o->fresh) &&
               (r->crashes_left == SUPERVISOR_ANY || (r->crashes_left == SUPERVISOR_YES) == left);
}

/* Every outcome is matched by exactly one rule (so the order of the rows
 * does not matter), every row decides something, and every row has its
 * reason. */
static void test_rules_are_total_disjoint_and_explained(void **state) {
        (void)state;
        bool used[64] = {false};
        assert_true(supervisor_n_rules <= ARRAY_SIZE(used));
        FOR_EACH_OUTCOME(o) {
                size_t n = 0, which = 0;
                for (size_t i = 0; i < supervisor_n_rules; i++)
                        if (rule_matches(&supervisor_rules[i], &o))
                                n++, which = i;
                if (n != 1)
                        fail_msg("end %d early %d fresh %d crashes %d: %zu rules match", o.end, o.early, o.fresh,
                                 o.crashes, n);
                used[which] = true;
                assert_string_equal(supervisor_decide(&o).why, supervisor_rules[which].why);
        }
        for (size_t i = 0; i < supervisor_n_rules; i++) {
                if (!used[i])
                        fail_msg("rule %zu never decides", i);
                assert_true(supervisor_rules[i].action < _SUPERVISOR_ACTION_MAX);
                assert_non_null(supervisor_rules[i].why);
                assert_true(strlen(supervisor_rules[i].why) > 10);
        }
}

static void test_policy_out_of_range_gives_up(void **state) {
        (void)state;
        struct supervisor_decision d = supervisor_decide(&(struct supervisor_outcome){.end = _SUPERVISOR_END_MAX});
        assert_int_equal(d.action, SUPERVISOR_GIVE_UP);
        assert_non_null(d.why);
        d = supervisor_decide(&(struct supervisor_outcome){.end = (enum supervisor_end)-1});
        assert_int_equal(d.action, SUPERVISOR_GIVE_UP);
}

static void test_end_of_exit_code(void **state) {
        (void)state;
        assert_int_equal(supervisor_end_of_exit(0), SUPERVISOR_END_EXITED);
        assert_int_equal(supervisor_end_of_exit(75), SUPERVISOR_END_RESTART);
        assert_int_equal(supervisor_end_of_exit(1), SUPERVISOR_END_CRASHED);
        assert_int_equal(supervisor_end_of_exit(2), SUPERVISOR_END_CRASHED);
        assert_int_equal(supervisor_end_of_exit(74), SUPERVISOR_END_CRASHED);
        assert_int_equal(supervisor_end_of_exit(128 + SIGSEGV), SUPERVISOR_END_CRASHED);
        assert_int_equal(supervisor_end_of_exit(-1), SUPERVISOR_END_CRASHED);
}

static void test_action_names(void **state) {
        (void)state;
        for (int a = 0; a < _SUPERVISOR_ACTION_MAX; a++)
                assert_string_not_equal(supervisor_action_name((enum supervisor_action)a), "?");
        assert_string_equal(supervisor_action_name(SUPERVISOR_FALL_BACK), "fall back");
        assert_string_equal(supervisor_action_name(_SUPERVISOR_ACTION_MAX), "?");
}

/* ---- fake kernels ---- */

static char *seed_dir;

static int setup(void **state) {
        (void)state;
        char tmpl[] = "/tmp/seed-test-supervisor-XXXXXX";
        if (!mkdtemp(tmpl) || !(seed_dir = strdup(tmpl)))
                return -1;
        _cleanup_free_ char *logs = path_join(seed_dir, ".seed/logs");
        return logs && mkdir_p(logs, 0700) == 0 ? 0 : -1;
}

static int teardown(void **state) {
        (void)state;
        rm_rf(seed_dir);
        free(seed_dir);
        seed_dir = NULL;
        return 0;
}

static char *in_seed(const char *rel) {
        char *p = path_join(seed_dir, rel);
        assert_non_null(p);
        return p;
}

/* A fake kernel at rel: every run appends a line to <rel>.runs (in the Seed
 * folder), then body runs with the kernel's arguments parsed: $dir, $secrets
 * (the secrets pipe's fd), $listen (the --listen-fd numbers), $hide (the
 * --hide paths). */
static char *fake_kernel(const char *rel, const char *body) {
        _cleanup_free_ char *script = NULL;
        char *path = in_seed(rel);
        _cleanup_free_ char *parent = strdup(path);
        assert_non_null(parent);
        *strrchr(parent, '/') = 0;
        assert_int_equal(mkdir_p(parent, 0700), 0);
        assert_int_equal(xasprintf(&script,
                                   "#!/bin/sh\n"
                                   "listen=\nhide=\n"
                                   "while [ $# -gt 1 ]; do\n"
                                   "  case \"$1\" in\n"
                                   "  --dir) dir=$2 ;;\n"
                                   "  --secrets-fd) secrets=$2 ;;\n"
                                   "  --listen-fd) listen=\"$listen $2\" ;;\n"
                                   "  --hide) hide=\"$hide $2\" ;;\n"
                                   "  esac\n"
                                   "  shift 2\n"
                                   "done\n"
                                   "echo ran >> \"$dir/%s.runs\"\n"
                                   "%s\n",
                                   rel, body),
                         0);
        assert_int_equal(write_file_atomic(path, script, strlen(script), 0755), 0);
        return path;
}

/* The last good kernel (.seed/kernel-good), whose bridge is /bin/true's copy. */
static void last_good(const char *body) {
        free(fake_kernel(".seed/kernel-good/seed-kernel", body));
        _cleanup_free_ char *bridge = in_seed(".seed/kernel-good/seed-bridge");
        assert_int_equal(write_file_atomic(bridge, "#!/bin/sh\n", 10, 0755), 0);
}

static int runs(const char *rel) {
        _cleanup_free_ char *p = NULL, *data = NULL;
        size_t len = 0;
        assert_int_equal(xasprintf(&p, "%s/%s.runs", seed_dir, rel), 0);
        if (read_file(p, 4096, &data, &len) < 0)
                return 0;
        int n = 0;
        for (size_t i = 0; i < len; i++)
                n += data[i] == '\n';
        return n;
}

static int loop(const char *kernel_body, bool fresh, const struct supervisor_options *extra,
                const struct ctl_listen *sockets) {
        struct supervisor_bins b = {.kernel = fake_kernel("fresh-kernel", kernel_body), .bridge = strdup("/bin/true"),
                                    .fresh = fresh};
        assert_non_null(b.bridge);
        struct ctl_listen none = CTL_LISTEN_INIT;
        struct supervisor_options o = extra ? *extra : (struct supervisor_options){0};
        o.seed_dir = seed_dir;
        o.addr = "127.0.0.1:0";
        int r = supervisor_loop(&o, &b, sockets ? sockets : &none);
        supervisor_bins_done(&b);
        return r;
}

static void test_a_kernel_that_exits_0_stops_the_supervisor(void **state) {
        (void)state;
        assert_int_equal(loop("exit 0", true, NULL, NULL), 0);
        assert_int_equal(runs("fresh-kernel"), 1);
}

static void test_a_fresh_kernel_dying_at_once_falls_back_to_the_last_good(void **state) {
        (void)state;
        last_good("exit 0");
        assert_int_equal(loop("exit 1", true, NULL, NULL), 0);
        assert_int_equal(runs("fresh-kernel"), 1);
        assert_int_equal(runs(".seed/kernel-good/seed-kernel"), 1);
}

static void test_a_fresh_kernel_dying_at_once_without_a_last_good_gives_up(void **state) {
        (void)state;
        assert_true(loop("kill -SEGV $$", true, NULL, NULL) < 0);
        assert_int_equal(runs("fresh-kernel"), 1);
}

static void test_a_good_kernel_dying_at_once_is_not_restarted(void **state) {
        (void)state;
        last_good("exit 0");
        assert_true(loop("exit 3", false, NULL, NULL) < 0);
        assert_int_equal(runs("fresh-kernel"), 1);
        assert_int_equal(runs(".seed/kernel-good/seed-kernel"), 0);
}

static void test_exit_75_rebuilds_and_a_failed_build_falls_back(void **state) {
        (void)state;
        /* The good kernel asks for a rebuild once, then stops. */
        last_good("[ -e \"$dir/asked\" ] && exit 0\ntouch \"$dir/asked\"\nexit 75");
        assert_int_equal(loop("exit 75", true, NULL, NULL), 0);
        assert_int_equal(runs("fresh-kernel"), 1);
        assert_int_equal(runs(".seed/kernel-good/seed-kernel"), 2); /* each rebuild failed: no meson.build */
        _cleanup_free_ char *build_log = in_seed(".seed/logs/kernel-build.log");
        assert_true(path_exists(build_log));
}

static void test_every_kernel_gets_the_sockets_and_the_secrets(void **state) {
        (void)state;
        struct ctl_listen sockets = CTL_LISTEN_INIT;
        if (ctl_listen_open("127.0.0.1:0", &sockets) < 0)
                skip(); /* no loopback to bind here */
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_add_arg(s, "SEED_TEST_KEY=sk-test-value", &err), 0);
        struct supervisor_options o = {.secrets = s};
        /* Exit 75 once: the last good kernel must get the same sockets. */
        const char *check = "n=0\n"
                            "for fd in $listen; do [ -S /proc/self/fd/$fd ] || exit 1; n=$((n+1)); done\n"
                            "[ $n -ge 1 ] || exit 1\n"
                            "cat <&$secrets | tr '\\0' '\\n' >> \"$dir/secrets.out\"\n";
        _cleanup_free_ char *good = NULL, *fresh = NULL;
        assert_int_equal(xasprintf(&good, "%s\nexit 0", check), 0);
        assert_int_equal(xasprintf(&fresh, "%s\nexit 75", check), 0);
        last_good(good);
        int r = loop(fresh, true, &o, &sockets);
        ctl_listen_close(&sockets);
        assert_int_equal(r, 0);
        assert_int_equal(runs("fresh-kernel"), 1);
        assert_int_equal(runs(".seed/kernel-good/seed-kernel"), 1);
        _cleanup_free_ char *out = in_seed("secrets.out"), *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(out, 4096, &data, &len), 0);
        assert_string_equal(data, "SEED_TEST_KEY=sk-test-value\nSEED_TEST_KEY=sk-test-value\n");
}

static void test_a_stop_request_stops_the_kernel_and_the_loop(void **state) {
        (void)state;
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        raise(SIGTERM); /* pending: the loop sees it as soon as the kernel runs */
        int64_t t0 = now_ms();
        assert_int_equal(loop("exec sleep 30", true, NULL, NULL), 0);
        assert_true(now_ms() - t0 < 20 * 1000); /* stopped, not waited out */
}

/* ---- restart requests (the control channel) ---- */

/* Each kernel writes its secrets (sorted) and hide paths to secrets.out,
 * then "---", tells the client (SIGUSR1 to the pid in client.pid) and
 * waits to be stopped. */
#define RECORDING_KERNEL                                                                                \
        "cat <&$secrets | tr '\\0' '\\n' | sort >> \"$dir/secrets.out\"\n"                              \
        "echo \"hide:$hide\" >> \"$dir/secrets.out\"\n"                                                 \
        "echo --- >> \"$dir/secrets.out\"\n"                                                              \
        "kill -USR1 $(cat \"$dir/client.pid\")\n"                                                          \
        "exec sleep 30"

/* In the forked client (no cmocka there): the next kernel's "recorded". */
static bool child_wait_record(void) {
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        struct timespec ts = {30, 0};
        return sigtimedwait(&usr1, NULL, &ts) == SIGUSR1;
}

/* Forks a client that runs fn once the first kernel has recorded, then
 * waits until `then` kernels have and stops the loop (SIGTERM to us).
 * Returns its pid; it exits 0 when fn returned true. */
static pid_t client(bool (*fn)(void), int then) {
        pid_t parent = getpid();
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, NULL); /* before the fork: no signal is lost */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                bool ok = child_wait_record() && fn();
                for (int i = 1; ok && i < then; i++)
                        ok = child_wait_record();
                kill(parent, SIGTERM);
                _exit(ok ? 0 : 1);
        }
        char text[32];
        int n = snprintf(text, sizeof text, "%d\n", (int)pid);
        _cleanup_free_ char *p = in_seed("client.pid");
        assert_int_equal(write_file_atomic(p, text, (size_t)n, 0600), 0);
        return pid;
}

static int client_exit(pid_t pid) {
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void block_sigterm(void) {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
}

static bool ask_restart_with_more_secrets(void) {
        struct secrets *s = NULL;
        char *err = NULL;
        pid_t old = 0;
        char *hide[] = {"/etc/seed/new.env", NULL};
        if (secrets_new(&s) < 0 || secrets_set(s, "KEY", "new-key") < 0 || secrets_set(s, "ADDED", "a") < 0)
                return false;
        int r = supervisor_request_restart(seed_dir, s, hide, &old, &err);
        secrets_free(s);
        free(err);
        return r == 0 && old > 1;
}

static void test_a_restart_request_restarts_with_the_secrets_merged(void **state) {
        (void)state;
        block_sigterm();
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_set(s, "KEY", "old-key"), 0);
        assert_int_equal(secrets_set(s, "KEPT", "kept"), 0);
        char *hide[] = {"/root/first.env", NULL};
        struct supervisor_options o = {.secrets = s, .hide_paths = hide};
        pid_t c = client(ask_restart_with_more_secrets, 2);
        assert_int_equal(loop(RECORDING_KERNEL, true, &o, NULL), 0);
        assert_int_equal(client_exit(c), 0);
        assert_int_equal(runs("fresh-kernel"), 2); /* the same binaries, started again */
        _cleanup_free_ char *out = in_seed("secrets.out"), *data = NULL;
        assert_int_equal(read_file(out, 65536, &data, NULL), 0);
        assert_string_equal(data, "KEPT=kept\nKEY=old-key\nhide: /root/first.env\n---\n"
                                  "ADDED=a\nKEPT=kept\nKEY=new-key\nhide: /root/first.env /etc/seed/new.env\n---\n");
        /* The channel is gone with the supervisor. */
        pid_t old = 0;
        assert_int_equal(supervisor_request_restart(seed_dir, NULL, NULL, &old, NULL), -ENOENT);
}

/* Raw requests on the control socket; true when every answer is an error. */
static bool send_bad_requests(void) {
        static const struct {
                const char *data;
                size_t len;
        } bad[] = {
#define RAW(s) {s, sizeof(s) - 1}
                RAW("restrat\n\n"),                   /* an unknown verb */
                RAW("restart\nhide relative\n\n"),   /* a hide path that is not absolute */
                RAW("restart\n\nNOEQUALS"),           /* a secret without '=' or its NUL */
                RAW("restart\n"),                      /* the head never ends */
#undef RAW
        };
        _cleanup_free_ char *path = NULL;
        if (xasprintf(&path, "%s/%s/%s", seed_dir, SUPERVISOR_CONTROL_DIR, SUPERVISOR_CONTROL_SOCKET) < 0)
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(bad) + 1; i++) {
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
                if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
                        return false;
                if (i < ARRAY_SIZE(bad)) {
                        if (write(fd, bad[i].data, bad[i].len) != (ssize_t)bad[i].len)
                                return false;
                } else {
                        /* One hide path past the limit. */
                        if (write(fd, "restart\n", 8) != 8)
                                return false;
                        for (int k = 0; k <= SUPERVISOR_CONTROL_HIDE_MAX; k++)
                                if (write(fd, "hide /x\n", 8) != 8)
                                        return false;
                        if (write(fd, "\n", 1) != 1)
                                return false;
                }
                shutdown(fd, SHUT_WR);
                char answer[128] = "";
                ssize_t n = read(fd, answer, sizeof answer - 1);
                close(fd);
                if (n <= 0 || !startswith(answer, "error "))
                        return false;
        }
        return true;
}

static void test_bad_restart_requests_are_refused_and_change_nothing(void **state) {
        (void)state;
        block_sigterm();
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_set(s, "KEY", "old-key"), 0);
        struct supervisor_options o = {.secrets = s};
        pid_t c = client(send_bad_requests, 1);
        assert_int_equal(loop(RECORDING_KERNEL, true, &o, NULL), 0);
        assert_int_equal(client_exit(c), 0);
        assert_int_equal(runs("fresh-kernel"), 1);
        _cleanup_free_ char *out = in_seed("secrets.out"), *data = NULL;
        assert_int_equal(read_file(out, 65536, &data, NULL), 0);
        assert_string_equal(data, "KEY=old-key\nhide:\n---\n");
}

static void test_a_restart_request_without_a_supervisor_is_enoent(void **state) {
        (void)state;
        pid_t old = 0;
        assert_int_equal(supervisor_request_restart(seed_dir, NULL, NULL, &old, NULL), -ENOENT);
        _cleanup_free_ char *dir = in_seed(SUPERVISOR_CONTROL_DIR);
        assert_int_equal(mkdir_p(dir, 0700), 0);
        assert_int_equal(supervisor_request_restart(seed_dir, NULL, NULL, &old, NULL), -ENOENT);
}

/* ---- the binaries ---- */

static void test_promote_keeps_the_binaries_as_the_last_good(void **state) {
        (void)state;
        struct supervisor_bins none = {0};
        assert_int_equal(supervisor_bins_last_good(seed_dir, &none), -ENOENT);
        supervisor_bins_done(&none);
        struct supervisor_bins b = {.kernel = fake_kernel("build/seed-kernel", "exit 0"),
                                    .bridge = fake_kernel("build/seed-bridge", "exit 0"), .fresh = true};
        supervisor_bins_promote(seed_dir, &b);
        assert_false(b.fresh);
        struct supervisor_bins good = {0};
        assert_int_equal(supervisor_bins_last_good(seed_dir, &good), 0);
        assert_false(good.fresh);
        struct stat st;
        assert_int_equal(stat(good.kernel, &st), 0);
        assert_true(st.st_mode & S_IXUSR);
        _cleanup_free_ char *a = NULL, *k = NULL;
        size_t alen = 0, klen = 0;
        assert_int_equal(read_file(b.kernel, 65536, &a, &alen), 0);
        assert_int_equal(read_file(good.kernel, 65536, &k, &klen), 0);
        assert_int_equal(alen, klen);
        assert_memory_equal(a, k, alen);
        supervisor_bins_done(&good);
        supervisor_bins_done(&b);
        assert_null(b.kernel);
}

static void test_load_without_source_or_last_good_fails(void **state) {
        (void)state;
        struct supervisor_bins b = {0};
        assert_true(supervisor_bins_load(seed_dir, SUPERVISOR_BUILD_DIR, &b) < 0);
        assert_null(b.kernel);
        last_good("exit 0");
        assert_int_equal(supervisor_bins_load(seed_dir, SUPERVISOR_BUILD_DIR, &b), 0);
        assert_false(b.fresh);
        assert_non_null(strstr(b.kernel, "/.seed/kernel-good/seed-kernel"));
        supervisor_bins_done(&b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_policy_agrees_with_the_reference_everywhere),
                cmocka_unit_test(test_rules_are_total_disjoint_and_explained),
                cmocka_unit_test(test_policy_out_of_range_gives_up),
                cmocka_unit_test(test_end_of_exit_code),
                cmocka_unit_test(test_action_names),
                cmocka_unit_test_setup_teardown(test_a_kernel_that_exits_0_stops_the_supervisor, setup, teardown),
                cmocka_unit_test_setup_teardown(test_a_fresh_kernel_dying_at_once_falls_back_to_the_last_good, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_a_fresh_kernel_dying_at_once_without_a_last_good_gives_up, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_a_good_kernel_dying_at_once_is_not_restarted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exit_75_rebuilds_and_a_failed_build_falls_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_every_kernel_gets_the_sockets_and_the_secrets, setup, teardown),
                cmocka_unit_test_setup_teardown(test_a_stop_request_stops_the_kernel_and_the_loop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_a_restart_request_restarts_with_the_secrets_merged, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_bad_restart_requests_are_refused_and_change_nothing, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_a_restart_request_without_a_supervisor_is_enoent, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_promote_keeps_the_binaries_as_the_last_good, setup, teardown),
                cmocka_unit_test_setup_teardown(test_load_without_source_or_last_good_fails, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
