/* Unit tests for the organism supervisor's configuration and state API (the
 * supervising itself runs real sandboxes: tests/integration/test-organism.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "organism/organism.h"

static struct organism_config good(void) {
        return (struct organism_config){
                .seed_dir = "/srv/seeds/tasks",
                .build_cmd = "make -C organism build",
                .run_cmd = "organism/bin/server",
                .health_path = "/healthz",
                .port = 8080,
                .bridge_path = "/usr/libexec/seed/seed-bridge",
        };
}

static void test_defaults(void **state) {
        (void)state;
        struct organism_config cfg = good();
        struct organism *o = NULL;
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_int_equal(organism_state(o), ORGANISM_STOPPED);
        assert_string_equal(organism_socket(o), "/srv/seeds/tasks/.seed/run/organism/http.sock");
        assert_int_equal(organism_crash_count(o), 0);
        assert_int_equal(organism_wait_ready(o, 10), -ESRCH);
        char *reason = NULL;
        assert_int_equal(organism_reason(o, &reason), 0);
        assert_string_equal(reason, "stopped");
        free(reason);
        organism_stop(o); /* never started: a no-op */
        organism_free(o);
        organism_free(NULL);

        cfg.run_dir = "/run/x";
        assert_int_equal(organism_new(&cfg, &o), 0);
        assert_string_equal(organism_socket(o), "/run/x/http.sock");
        organism_free(o);
}

static void test_invalid(void **state) {
        (void)state;
        struct organism *o = NULL;
        struct organism_config cfg = good();
        cfg.seed_dir = NULL;
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = good();
        cfg.run_cmd = "";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        cfg = good();
        cfg.port = 70000;
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        const char *bad_health[] = {"healthz", "/a b", "/a\r\nX: y", ""};
        for (size_t i = 0; i < sizeof bad_health / sizeof bad_health[0]; i++) {
                cfg = good();
                cfg.health_path = bad_health[i];
                assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        }
        cfg = good();
        cfg.bridge_path = "seed-bridge";
        assert_int_equal(organism_new(&cfg, &o), -EINVAL);
        assert_null(o);
}

static void test_state_names(void **state) {
        (void)state;
        assert_string_equal(organism_state_name(ORGANISM_STOPPED), "stopped");
        assert_string_equal(organism_state_name(ORGANISM_BUILDING), "building");
        assert_string_equal(organism_state_name(ORGANISM_STARTING), "starting");
        assert_string_equal(organism_state_name(ORGANISM_RUNNING), "running");
        assert_string_equal(organism_state_name(ORGANISM_CRASHED), "crashed");
        assert_string_equal(organism_state_name(ORGANISM_DOWN), "down");
        assert_string_equal(organism_state_name((enum organism_state)99), "unknown");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_state_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
