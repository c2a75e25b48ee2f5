/* Unit tests for kernel/doctor: the table of start-up checks as data, and
 * the rows that read a Seed's folder (no sandbox is started here: the
 * sandbox rows' checks are tests/integration/test-sandbox.c's; `seed doctor`
 * itself is tests/integration/test_readme.py's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "doctor/doctor.h"

#include <sys/stat.h>

static const struct doctor_check *row(const char *name) {
        for (size_t i = 0; i < doctor_n_checks; i++)
                if (streq(doctor_checks[i].name, name))
                        return &doctor_checks[i];
        fail_msg("no row '%s'", name);
        return NULL;
}

static void test_every_row_has_a_name_a_run_function_and_a_fix(void **state) {
        (void)state;
        assert_true(doctor_n_checks >= 6);
        for (size_t i = 0; i < doctor_n_checks; i++) {
                const struct doctor_check *c = &doctor_checks[i];
                assert_non_null(c->name);
                assert_non_null(c->run);
                assert_non_null(c->fix);
                assert_true(strlen(c->fix) > 10);
                for (size_t k = 0; k < i; k++)
                        assert_string_not_equal(doctor_checks[k].name, c->name);
        }
}

static void test_what_a_seed_needs_is_needed_and_the_rest_is_not(void **state) {
        (void)state;
        static const char *const needed[] = {"bubblewrap", "user namespaces", "seccomp", "PostgreSQL"};
        for (size_t i = 0; i < ARRAY_SIZE(needed); i++) {
                assert_true(row(needed[i])->needed);
                assert_false(row(needed[i])->per_seed);
        }
        /* One row for the sandboxes' way out, swappable, and not a failure. */
        assert_false(row("sandbox network")->needed);
        assert_false(row("container engine")->needed);
        assert_true(row("Seed folder")->per_seed);
        assert_true(row("seed.yaml")->per_seed);
}

static void test_status_names(void **state) {
        (void)state;
        assert_string_equal(doctor_status_name(DOCTOR_OK), "ok");
        assert_string_equal(doctor_status_name(DOCTOR_FAIL), "FAIL");
        assert_string_equal(doctor_status_name(DOCTOR_WARN), "warn");
        assert_string_equal(doctor_status_name(DOCTOR_INFO), "info");
        assert_string_equal(doctor_status_name(_DOCTOR_STATUS_MAX), "?");
}

static char *tmpdir(void) {
        char tmpl[] = "/tmp/seed-test-doctor-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *d = strdup(tmpl);
        assert_non_null(d);
        return d;
}

static void test_seed_yaml_row_names_the_line_of_a_bad_config(void **state) {
        (void)state;
        _cleanup_free_ char *dir = tmpdir(), *cfg = path_join(dir, "seed.yaml");
        struct doctor_context x = {.seed_dir = dir};
        struct doctor_result res = {0};
        assert_int_equal(write_file_atomic(cfg, "name: ok\nbogus_key: 1\n", 22, 0644), 0);
        assert_int_equal(doctor_run(row("seed.yaml"), &x, &res), 0);
        assert_int_equal(res.status, DOCTOR_FAIL);
        assert_non_null(strstr(res.detail, "bogus_key"));
        assert_non_null(strstr(res.detail, ":2:"));
        doctor_result_done(&res);
        assert_int_equal(write_file_atomic(cfg, "name: ok\n", 9, 0644), 0);
        assert_int_equal(doctor_run(row("seed.yaml"), &x, &res), 0);
        assert_int_equal(res.status, DOCTOR_OK);
        doctor_result_done(&res);
        rm_rf(dir);
}

static void test_folder_row_says_private_or_open(void **state) {
        (void)state;
        _cleanup_free_ char *dir = tmpdir();
        struct doctor_context x = {.seed_dir = dir};
        struct doctor_result res = {0};
        assert_int_equal(chmod(dir, 0700), 0);
        assert_int_equal(doctor_run(row("Seed folder"), &x, &res), 0);
        assert_int_equal(res.status, DOCTOR_OK);
        assert_non_null(strstr(res.detail, "private"));
        doctor_result_done(&res);
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(doctor_run(row("Seed folder"), &x, &res), 0);
        assert_int_equal(res.status, DOCTOR_INFO); /* `seed run` fixes it: not a failure */
        assert_non_null(strstr(res.detail, "0755"));
        doctor_result_done(&res);
        rm_rf(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_row_has_a_name_a_run_function_and_a_fix),
                cmocka_unit_test(test_what_a_seed_needs_is_needed_and_the_rest_is_not),
                cmocka_unit_test(test_status_names),
                cmocka_unit_test(test_seed_yaml_row_names_the_line_of_a_bad_config),
                cmocka_unit_test(test_folder_row_says_private_or_open),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
