/* Unit tests for kernel/container without an engine: the limits from the
 * environment (defaults, bad values refused), the container's name, the
 * image's tag, and the hardened `run` command line itself (every flag of the
 * table, the Seed's profile, the owner's uid, ulimits within the caller's
 * own, the port on the address given, secrets absent). The real engine is
 * tests/integration/test_container.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "container/container.h"

#include <sys/resource.h>

static void clear_env(void) {
        unsetenv("SEED_MEMORY");
        unsetenv("SEED_CPUS");
        unsetenv("SEED_PIDS_LIMIT");
}

static void test_limits_default(void **state) {
        (void)state;
        clear_env();
        struct container_limits l;
        char *err = NULL;
        assert_int_equal(container_limits_from_env(&l, &err), 0);
        assert_string_equal(l.memory, "8g");
        assert_true(l.memory_bytes == (uint64_t)8 << 30);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        assert_true(l.cpus_millis == (uint64_t)(n >= 2 ? n / 2 : 1) * 1000);
        assert_int_equal(l.pids, 4096);
}

static void test_limits_from_env(void **state) {
        (void)state;
        clear_env();
        setenv("SEED_MEMORY", "512m", 1);
        setenv("SEED_CPUS", "1.5", 1);
        setenv("SEED_PIDS_LIMIT", "100", 1);
        struct container_limits l;
        char *err = NULL;
        assert_int_equal(container_limits_from_env(&l, &err), 0);
        assert_true(l.memory_bytes == (uint64_t)512 << 20);
        assert_true(l.cpus_millis == 1500);
        assert_string_equal(l.cpus, "1.5");
        assert_int_equal(l.pids, 100);
        clear_env();
}

static void test_bad_limits_are_refused(void **state) {
        (void)state;
        static const char *const bad[][2] = {
                {"SEED_MEMORY", "lots"}, {"SEED_MEMORY", "8x"}, {"SEED_MEMORY", "-1g"}, {"SEED_MEMORY", "1m"},
                {"SEED_MEMORY", "99999999999999999999g"}, {"SEED_CPUS", "0"}, {"SEED_CPUS", "1.2345"},
                {"SEED_CPUS", "a"}, {"SEED_CPUS", "-2"}, {"SEED_CPUS", "1;rm"}, {"SEED_PIDS_LIMIT", "10"},
                {"SEED_PIDS_LIMIT", "4096x"}, {"SEED_PIDS_LIMIT", "99999999999"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                clear_env();
                setenv(bad[i][0], bad[i][1], 1);
                struct container_limits l = {.pids = 7};
                char *err = NULL;
                assert_int_equal(container_limits_from_env(&l, &err), -EINVAL);
                assert_non_null(err);
                assert_non_null(strstr(err, bad[i][0])); /* names the variable */
                assert_int_equal(l.pids, 7);             /* untouched */
                free(err);
        }
        clear_env();
}

static void test_name_is_valid_and_per_path(void **state) {
        (void)state;
        char *a = NULL, *b = NULL, *c = NULL;
        assert_int_equal(container_name("/srv/seeds/Demo App", &a), 0);
        assert_int_equal(container_name("/tmp/x/Demo App", &b), 0);
        assert_int_equal(container_name("/", &c), 0);
        assert_true(startswith(a, "seed-demo-app-"));
        assert_int_equal(strlen(a), strlen("seed-demo-app-") + 8);
        assert_string_not_equal(a, b); /* the same folder name elsewhere is another Seed */
        for (const char *p = a; *p; p++)
                assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-');
        assert_true(startswith(c, "seed-seed-"));
        free(a);
        free(b);
        free(c);
}

static void test_tag_is_the_dockerfiles_hash(void **state) {
        (void)state;
        char *t1 = NULL, *t2 = NULL, *t3 = NULL;
        assert_int_equal(container_image_tag("FROM debian:bookworm\n", 21, &t1), 0);
        assert_int_equal(container_image_tag("FROM debian:bookworm\n", 21, &t2), 0);
        assert_int_equal(container_image_tag("FROM debian:bookworm\nRUN true\n", 30, &t3), 0);
        assert_string_equal(t1, t2);
        assert_string_not_equal(t1, t3);
        assert_true(startswith(t1, "localhost/seed:"));
        assert_int_equal(strlen(t1), strlen("localhost/seed:") + 16);
        free(t1);
        free(t2);
        free(t3);
}

static bool has(char **args, const char *want) {
        for (char **a = args; *a; a++)
                if (streq(*a, want))
                        return true;
        return false;
}

static const char *with_prefix(char **args, const char *prefix) {
        for (char **a = args; *a; a++)
                if (startswith(*a, prefix))
                        return *a;
        return NULL;
}

static struct container_limits limits = {.memory = "8g", .memory_bytes = (uint64_t)8 << 30, .cpus = "1",
                                         .cpus_millis = 1000, .pids = 4096};

static struct container_run a_run(void) {
        return (struct container_run){.name = "seed-x-12345678", .image = "localhost/seed:0123456789abcdef",
                                      .seed_dir = "/srv/seeds/x", .seed_binary = "/usr/local/bin/seed",
                                      .profile = "/tmp/p/seccomp.json", .uid = 999, .gid = 995,
                                      .publish_ip = "127.0.0.1", .port = 8080, .limits = &limits};
}

static void test_run_args_podman(void **state) {
        (void)state;
        struct container_engine e = {.kind = CONTAINER_PODMAN, .path = "/usr/bin/podman"};
        struct container_run o = a_run();
        char **args = NULL;
        assert_int_equal(container_run_args(&e, &o, &args), 0);
        static const char *const want[] = {
                "run", "--detach", "--name=seed-x-12345678", "--cap-drop=ALL", "--security-opt=no-new-privileges",
                "--read-only", "--read-only-tmpfs=false", "--init", "--security-opt=unmask=/proc/*",
                "--security-opt=seccomp=/tmp/p/seccomp.json", "--user=999:995", "--memory=8g", "--memory-swap=8g",
                "--cpus=1", "--pids-limit=4096", "--publish=127.0.0.1:8080:8080", "--volume=/srv/seeds/x:/seed:rw",
                "--volume=/usr/local/bin/seed:/usr/local/bin/seed:ro", "--env=SEED_IN_CONTAINER=1", "--pull=never",
                "localhost/seed:0123456789abcdef", "--native", "--in-container", "--addr=0.0.0.0:8080",
        };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                if (!has(args, want[i]))
                        fail_msg("missing %s", want[i]);
        }
        const char *tmp = with_prefix(args, "--tmpfs=/tmp:");
        assert_non_null(tmp);
        assert_non_null(strstr(tmp, "size="));
        assert_null(with_prefix(args, "--privileged"));
        assert_null(with_prefix(args, "--cap-add"));
        assert_null(with_prefix(args, "--security-opt=systempaths")); /* docker's spelling */
        assert_null(with_prefix(args, "--userns")); /* rootful: the uid is the owner's as it is */
        /* ulimits never above the caller's own hard limits */
        struct rlimit rl;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        const char *nofile = with_prefix(args, "--ulimit=nofile=");
        assert_non_null(nofile);
        long long soft = 0, hard = 0;
        assert_int_equal(sscanf(nofile, "--ulimit=nofile=%lld:%lld", &soft, &hard), 2);
        assert_true(rl.rlim_max == RLIM_INFINITY || (hard >= 0 && (rlim_t)hard <= rl.rlim_max));
        assert_true(soft <= hard || hard < 0);
        const char *nproc = with_prefix(args, "--ulimit=nproc=");
        assert_non_null(nproc);
        assert_int_equal(sscanf(nproc, "--ulimit=nproc=%lld:%lld", &soft, &hard), 2);
        assert_true(hard > 0 && hard <= 4096);
        strv_free(args);
}

static void test_run_args_docker_and_rootless(void **state) {
        (void)state;
        struct container_engine d = {.kind = CONTAINER_DOCKER, .path = "/usr/bin/docker"};
        struct container_run o = a_run();
        o.passwd = "/tmp/p/passwd";
        o.group = "/tmp/p/group";
        char **args = NULL;
        assert_int_equal(container_run_args(&d, &o, &args), 0);
        assert_true(has(args, "--security-opt=systempaths=unconfined"));
        assert_false(has(args, "--security-opt=unmask=/proc/*"));
        assert_false(has(args, "--read-only-tmpfs=false"));
        assert_true(has(args, "--volume=/tmp/p/passwd:/etc/passwd:ro"));
        strv_free(args);
        struct container_engine p = {.kind = CONTAINER_PODMAN, .path = "/usr/bin/podman", .rootless = true};
        assert_int_equal(container_run_args(&p, &o, &args), 0);
        assert_true(has(args, "--userns=keep-id"));
        assert_true(has(args, "--network=slirp4netns:port_handler=slirp4netns"));
        assert_false(has(args, "--volume=/tmp/p/passwd:/etc/passwd:ro")); /* podman adds the user itself */
        strv_free(args);
}

/* The reason of a failed engine command is its error line, not a warning
 * printed before it. */
static void test_reason_is_the_error_line(void **state) {
        (void)state;
        char line[64];
        container_reason("Resource limits are not supported and ignored on cgroups V1 rootless systems\n"
                         "Error: could not find slirp4netns\n",
                         line, sizeof line);
        assert_string_equal(line, "Error: could not find slirp4netns");
        container_reason("docker: Error response from daemon: no such image.\nSee 'docker run --help'.\n", line,
                         sizeof line);
        assert_string_equal(line, "docker: Error response from daemon: no such image.");
        /* no error line: the last one that says something */
        container_reason("first\r\nsecond\n  \n\n", line, sizeof line);
        assert_string_equal(line, "second");
        container_reason("", line, sizeof line);
        assert_string_equal(line, "");
        container_reason(NULL, line, sizeof line);
        assert_string_equal(line, "");
        /* bounded */
        char small[8];
        container_reason("Error: a very long reason\n", small, sizeof small);
        assert_string_equal(small, "Error: ");
}

static void test_run_args_refuse_root_and_bad_input(void **state) {
        (void)state;
        struct container_engine e = {.kind = CONTAINER_PODMAN, .path = "/usr/bin/podman"};
        char **args = NULL;
        struct container_run o = a_run();
        o.uid = 0;
        assert_int_equal(container_run_args(&e, &o, &args), -EINVAL); /* never uid 0 inside */
        o = a_run();
        o.port = 0;
        assert_int_equal(container_run_args(&e, &o, &args), -EINVAL);
        o = a_run();
        o.seed_dir = "/srv/a,b"; /* would split the --volume option */
        assert_int_equal(container_run_args(&e, &o, &args), -EINVAL);
        o = a_run();
        o.seed_dir = "/srv/a:b";
        assert_int_equal(container_run_args(&e, &o, &args), -EINVAL);
        assert_null(args);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_limits_default),
                cmocka_unit_test(test_limits_from_env),
                cmocka_unit_test(test_bad_limits_are_refused),
                cmocka_unit_test(test_name_is_valid_and_per_path),
                cmocka_unit_test(test_tag_is_the_dockerfiles_hash),
                cmocka_unit_test(test_run_args_podman),
                cmocka_unit_test(test_run_args_docker_and_rootless),
                cmocka_unit_test(test_run_args_refuse_root_and_bad_input),
                cmocka_unit_test(test_reason_is_the_error_line),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
