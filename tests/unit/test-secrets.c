/* Unit tests for kernel/secrets: parsing -e and env files, the pipe format. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>

#include "base/fileio.h"
#include "secrets/secrets.h"

static void test_arg_forms(void **state) {
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_add_arg(s, "API_KEY=abc=def", &err), 0);
        assert_string_equal(secrets_get(s, "API_KEY"), "abc=def");
        setenv("SEED_TEST_FROM_ENV", "from-env", 1);
        assert_int_equal(secrets_add_arg(s, "SEED_TEST_FROM_ENV", &err), 0);
        assert_string_equal(secrets_get(s, "SEED_TEST_FROM_ENV"), "from-env");
        unsetenv("SEED_TEST_UNSET");
        assert_int_equal(secrets_add_arg(s, "SEED_TEST_UNSET", &err), -ENOENT);
        assert_non_null(strstr(err, "not set"));
        free(TAKE_PTR(err));
        assert_int_equal(secrets_add_arg(s, "1BAD=x", &err), -EINVAL);
        assert_non_null(strstr(err, "not a valid variable name"));
        free(TAKE_PTR(err));
        assert_int_equal(secrets_add_arg(s, "=x", &err), -EINVAL);
        assert_int_equal(secrets_count(s), 2);
}

static void test_replace_and_limits(void **state) {
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_set(s, "A", "1"), 0);
        assert_int_equal(secrets_set(s, "A", "2"), 0);
        assert_int_equal(secrets_count(s), 1);
        assert_string_equal(secrets_get(s, "A"), "2");
        _cleanup_free_ char *big = malloc(SECRETS_VALUE_MAX + 2);
        memset(big, 'v', SECRETS_VALUE_MAX + 1);
        big[SECRETS_VALUE_MAX + 1] = 0;
        assert_int_equal(secrets_set(s, "BIG", big), -E2BIG);
        for (int i = 0; i < SECRETS_MAX - 1; i++) {
                char name[16];
                snprintf(name, sizeof name, "N%d", i);
                assert_int_equal(secrets_set(s, name, "x"), 0);
        }
        assert_int_equal(secrets_set(s, "ONE_TOO_MANY", "x"), -E2BIG);
}

static void test_env_file(void **state) {
        char path[] = "/tmp/seed-test-envfile-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        const char *text = "# comment\n\nexport A=1\nB = \"two words\"\nC='x y'\n  D=plain  \n";
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_add_env_file(s, path, &err), 0);
        assert_string_equal(secrets_get(s, "A"), "1");
        assert_string_equal(secrets_get(s, "B"), "two words");
        assert_string_equal(secrets_get(s, "C"), "x y");
        assert_string_equal(secrets_get(s, "D"), "plain");

        fd = open(path, O_WRONLY | O_TRUNC);
        assert_int_equal(write(fd, "A=1\nbroken line\n", 16), 16);
        close(fd);
        assert_int_equal(secrets_add_env_file(s, path, &err), -EINVAL);
        assert_non_null(strstr(err, ":2: expected NAME=VALUE"));
        unlink(path);
        free(TAKE_PTR(err));
        assert_true(secrets_add_env_file(s, "/nonexistent/env", &err) < 0);
        assert_non_null(err);
}

static void test_pipe_roundtrip(void **state) {
        _cleanup_(secrets_freep) struct secrets *a = NULL, *b = NULL;
        assert_int_equal(secrets_new(&a), 0);
        assert_int_equal(secrets_new(&b), 0);
        assert_int_equal(secrets_set(a, "K1", "value with spaces\nand newline"), 0);
        assert_int_equal(secrets_set(a, "K2", ""), 0);
        int p[2];
        assert_int_equal(pipe(p), 0);
        assert_int_equal(secrets_write_fd(a, p[1]), 0);
        close(p[1]);
        assert_int_equal(secrets_read_fd(b, p[0]), 0);
        close(p[0]);
        assert_int_equal(secrets_count(b), 2);
        assert_string_equal(secrets_get(b, "K1"), "value with spaces\nand newline");
        assert_string_equal(secrets_get(b, "K2"), "");
}

static void test_pipe_rejects_garbage(void **state) {
        _cleanup_(secrets_freep) struct secrets *b = NULL;
        assert_int_equal(secrets_new(&b), 0);
        int p[2];
        assert_int_equal(pipe(p), 0);
        assert_int_equal(write(p[1], "NOEQUALS\0", 9), 9);
        close(p[1]);
        assert_int_equal(secrets_read_fd(b, p[0]), -EBADMSG);
        close(p[0]);
        assert_int_equal(pipe(p), 0);
        assert_int_equal(write(p[1], "A=unterminated", 14), 14);
        close(p[1]);
        assert_int_equal(secrets_read_fd(b, p[0]), -EBADMSG);
        close(p[0]);
}

static void test_merge_overrides_keeps_and_is_all_or_nothing(void **state) {
        _cleanup_(secrets_freep) struct secrets *s = NULL, *from = NULL, *many = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_new(&from), 0);
        assert_int_equal(secrets_set(s, "KEPT", "old"), 0);
        assert_int_equal(secrets_set(s, "KEY", "old-key"), 0);
        assert_int_equal(secrets_set(from, "KEY", "new-key"), 0);
        assert_int_equal(secrets_set(from, "ADDED", "a"), 0);
        assert_int_equal(secrets_merge(s, from), 0);
        assert_int_equal(secrets_count(s), 3);
        assert_string_equal(secrets_get(s, "KEPT"), "old");
        assert_string_equal(secrets_get(s, "KEY"), "new-key");
        assert_string_equal(secrets_get(s, "ADDED"), "a");
        assert_int_equal(secrets_merge(s, NULL), 0);
        assert_int_equal(secrets_count(s), 3);
        /* Past SECRETS_MAX in all: refused, and s is as it was. */
        assert_int_equal(secrets_new(&many), 0);
        for (int i = 0; i < SECRETS_MAX - 2; i++) {
                char name[16];
                snprintf(name, sizeof name, "N%d", i);
                assert_int_equal(secrets_set(many, name, "x"), 0);
        }
        assert_int_equal(secrets_merge(s, many), -E2BIG);
        assert_int_equal(secrets_count(s), 3);
        assert_string_equal(secrets_get(s, "KEY"), "new-key");
        assert_null(secrets_get(s, "N0"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_arg_forms),
                cmocka_unit_test(test_replace_and_limits),
                cmocka_unit_test(test_env_file),
                cmocka_unit_test(test_pipe_roundtrip),
                cmocka_unit_test(test_pipe_rejects_garbage),
                cmocka_unit_test(test_merge_overrides_keeps_and_is_all_or_nothing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
