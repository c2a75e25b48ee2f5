/* Unit tests for kernel/checks: the form of declared checks — what is
 * accepted, and every bound and bad declaration refused with an error that
 * names the check and what is wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/json.h"
#include "checks/checks.h"

#include <jansson.h>

#define assert_contains(s, sub)                                                                                \
        do {                                                                                                   \
                if (!(s) || !strstr((s), (sub)))                                                               \
                        fail_msg("\"%s\" does not contain \"%s\"", (s) ? (s) : "(null)", (sub));               \
        } while (0)

/* Parses text; returns the error (caller frees) or NULL when it parsed. */
static char *refusal(const char *text) {
        struct decl_check *c = NULL;
        size_t n = 0;
        char *err = NULL;
        int r = checks_parse_text(text, &c, &n, &err);
        if (r == 0) {
                checks_free(c, n);
                return NULL;
        }
        assert_int_equal(r, -EINVAL);
        assert_non_null(err);
        return err;
}

static void test_good(void **state) {
        struct decl_check *c = NULL;
        size_t n = 0;
        char *err = NULL;
        assert_int_equal(checks_parse_text("[{\"request\":\"http:GET /hello?x=1&y=%20\",\"status\":200,"
                                           "\"body_contains\":\"hello\"},"
                                           "{\"request\":\"http:POST /items\",\"status\":201,\"send\":\"{}\"},"
                                           "{\"request\":\"http:DELETE /items/1\",\"status\":204},"
                                           "{\"request\":\"http:HEAD /\",\"status\":200}]",
                                           &c, &n, &err),
                         0);
        assert_int_equal(n, 4);
        assert_string_equal(c[0].method, "GET");
        assert_string_equal(c[0].path, "/hello?x=1&y=%20");
        assert_string_equal(c[0].name, "http:GET /hello?x=1&y=%20");
        assert_string_equal(c[0].contains, "hello");
        assert_null(c[0].send);
        assert_false(checks_is_write(&c[0]));
        assert_string_equal(c[1].method, "POST");
        assert_string_equal(c[1].send, "{}");
        assert_int_equal(c[1].status, 201);
        assert_true(checks_is_write(&c[1]));
        assert_true(checks_is_write(&c[2]));
        assert_false(checks_is_write(&c[3]));
        checks_free(c, n);
        /* none at all */
        assert_int_equal(checks_parse(NULL, &c, &n, &err), 0);
        assert_int_equal(n, 0);
        assert_int_equal(checks_parse_text(NULL, &c, &n, &err), 0);
        assert_int_equal(n, 0);
}

static void test_bad(void **state) {
        static const struct {
                const char *text, *error;
        } cases[] = {
                {"{}", "\"checks\" must be an array"},
                {"not json", "not JSON"},
                {"[1]", "check 1: must be an object"},
                {"[{\"status\":200}]", "check 1: \"request\""},
                {"[{\"request\":\"GET /\",\"status\":200}]", "must start with \"http:\""},
                {"[{\"request\":\"http:FETCH /\",\"status\":200}]", "the method must be one of"},
                {"[{\"request\":\"http:get /\",\"status\":200}]", "the method must be one of"},
                {"[{\"request\":\"http:GET\",\"status\":200}]", "the method must be one of"},
                {"[{\"request\":\"http:GET  /\",\"status\":200}]", "must start with '/'"},
                {"[{\"request\":\"http:GET //evil.example/x y\",\"status\":200}]", "only URL path"},
                {"[{\"request\":\"http:GET /a\\r\\nHost: x\",\"status\":200}]", "only URL path"},
                {"[{\"request\":\"http:GET /<b>\",\"status\":200}]", "only URL path"},
                {"[{\"request\":\"http:GET /\",\"status\":99}]", "\"status\" must be an HTTP status"},
                {"[{\"request\":\"http:GET /\",\"status\":600}]", "\"status\" must be an HTTP status"},
                {"[{\"request\":\"http:GET /\",\"status\":\"200\"}]", "\"status\" must be an HTTP status"},
                {"[{\"request\":\"http:GET /\",\"status\":200,\"body_contains\":\"\"}]", "\"body_contains\""},
                {"[{\"request\":\"http:GET /\",\"status\":200,\"send\":\"{}\"}]", "only for POST, PUT and PATCH"},
                {"[{\"request\":\"http:GET /\",\"status\":200,\"extra\":1}]", "unknown field"},
                {"[{\"request\":\"http:GET /\",\"status\":200},{\"request\":\"http:GET /\",\"status\":1}]",
                 "check 2:"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *err = refusal(cases[i].text);
                if (!err)
                        fail_msg("case %zu was accepted: %s", i, cases[i].text);
                assert_contains(err, cases[i].error);
                free(err);
        }
}

/* Each bound: at the limit accepted, one past it refused. */
static void test_limits(void **state) {
        _cleanup_json_ json_t *arr = json_array();
        for (int i = 0; i < CHECKS_MAX; i++)
                json_array_append_new(arr, json_pack("{s:s, s:i}", "request", "http:GET /", "status", 200));
        _cleanup_free_ char *max = json_dumps(arr, JSON_COMPACT);
        assert_null(refusal(max));
        json_array_append_new(arr, json_pack("{s:s, s:i}", "request", "http:GET /", "status", 200));
        _cleanup_free_ char *over = json_dumps(arr, JSON_COMPACT);
        char *err = refusal(over);
        assert_contains(err, "at most 12 checks");
        free(err);

        char path[CHECKS_PATH_MAX + 2];
        memset(path, 'a', sizeof path);
        path[0] = '/';
        path[CHECKS_PATH_MAX] = 0;
        _cleanup_free_ char *ok = NULL, *long_path = NULL;
        assert_true(xasprintf(&ok, "[{\"request\":\"http:GET %s\",\"status\":200}]", path) >= 0);
        assert_null(refusal(ok));
        path[CHECKS_PATH_MAX] = 'a';
        path[CHECKS_PATH_MAX + 1] = 0;
        assert_true(xasprintf(&long_path, "[{\"request\":\"http:GET %s\",\"status\":200}]", path) >= 0);
        err = refusal(long_path);
        assert_contains(err, "longer than 200 bytes");
        free(err);

        char text[CHECKS_SEND_MAX + 2];
        memset(text, 'x', sizeof text);
        text[CHECKS_CONTAINS_MAX] = 0;
        _cleanup_free_ char *c_ok = NULL, *c_over = NULL, *s_ok = NULL, *s_over = NULL;
        assert_true(xasprintf(&c_ok, "[{\"request\":\"http:GET /\",\"status\":200,\"body_contains\":\"%s\"}]", text) >= 0);
        assert_null(refusal(c_ok));
        text[CHECKS_CONTAINS_MAX] = 'x';
        text[CHECKS_CONTAINS_MAX + 1] = 0;
        assert_true(xasprintf(&c_over, "[{\"request\":\"http:GET /\",\"status\":200,\"body_contains\":\"%s\"}]", text) >= 0);
        err = refusal(c_over);
        assert_contains(err, "\"body_contains\" must be text of 1 to 200 bytes");
        free(err);
        memset(text, 'x', sizeof text);
        text[CHECKS_SEND_MAX] = 0;
        assert_true(xasprintf(&s_ok, "[{\"request\":\"http:PUT /\",\"status\":200,\"send\":\"%s\"}]", text) >= 0);
        assert_null(refusal(s_ok));
        text[CHECKS_SEND_MAX] = 'x';
        text[CHECKS_SEND_MAX + 1] = 0;
        assert_true(xasprintf(&s_over, "[{\"request\":\"http:PUT /\",\"status\":200,\"send\":\"%s\"}]", text) >= 0);
        err = refusal(s_over);
        assert_contains(err, "\"send\" must be text of at most 4096 bytes");
        free(err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),
                cmocka_unit_test(test_bad),
                cmocka_unit_test(test_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
