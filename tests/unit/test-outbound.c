/* Unit tests for kernel/outbound's pure parts: secret names, host patterns,
 * requests (as the API and the tool read them), and its tool table. The
 * grants themselves (kernel DB, proxy, organism) are tested end to end in
 * tests/integration/test_outbound_access.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "outbound/outbound.h"
#include "sandbox/sandbox.h"
#include "tools/tools.h"

static void name_ok(const char *name) {
        char *err = NULL;
        int r = outbound_secret_name_check(name, "MY_LOCAL_KEY", &err);
        if (r < 0)
                print_error("%s: %s\n", name, err);
        assert_int_equal(r, 0);
        assert_null(err);
}

static void name_refused(const char *name, const char *why) {
        char *err = NULL;
        assert_int_equal(outbound_secret_name_check(name, "MY_LOCAL_KEY", &err), -EINVAL);
        assert_non_null(err);
        if (!strstr(err, why))
                print_error("%s: '%s' does not say '%s'\n", name, err, why);
        assert_non_null(strstr(err, why));
        free(err);
}

static void test_secret_names(void **state) {
        name_ok("WEATHER_API_KEY");
        name_ok("A");
        name_ok("STRIPE_KEY_2");
        char long_ok[OUTBOUND_SECRET_NAME_MAX + 2];
        memset(long_ok, 'A', OUTBOUND_SECRET_NAME_MAX);
        long_ok[OUTBOUND_SECRET_NAME_MAX] = 0;
        name_ok(long_ok);
        long_ok[OUTBOUND_SECRET_NAME_MAX] = 'A';
        long_ok[OUTBOUND_SECRET_NAME_MAX + 1] = 0;
        name_refused(long_ok, "UPPER_SNAKE_CASE");
        name_refused("weather_key", "UPPER_SNAKE_CASE");
        name_refused("_KEY", "UPPER_SNAKE_CASE");
        name_refused("1KEY", "UPPER_SNAKE_CASE");
        name_refused("KEY-2", "UPPER_SNAKE_CASE");
        name_refused("", "UPPER_SNAKE_CASE");
        name_refused("SEED_OWNER_PASSWORD", "SEED_* variables are the kernel's own");
        name_refused("SEED_X", "SEED_*");
        /* The model's keys: every provider's variable and model.api_key_env. */
        name_refused("OPENROUTER_API_KEY", "the model's key");
        name_refused("ANTHROPIC_API_KEY", "the model's key");
        name_refused("OPENAI_API_KEY", "the model's key");
        name_refused("MY_LOCAL_KEY", "the model's key");
        /* What the sandbox sets itself. */
        name_refused("PATH", "set by the sandbox itself");
        name_refused("HOME", "set by the sandbox itself");
        name_refused("PORT", "set by the sandbox itself");
        name_refused("DATABASE_URL", "set by the sandbox itself");
        name_refused("HTTPS_PROXY", "set by the sandbox itself");
        name_refused("NODE_OPTIONS", "set by the sandbox itself");
        size_t n = 0;
        const char *const *fixed = sandbox_fixed_env_names(&n);
        assert_true(n > 10);
        for (size_t i = 0; i < n; i++) {
                char *err = NULL;
                assert_int_equal(outbound_secret_name_check(fixed[i], NULL, &err), -EINVAL);
                free(err);
        }
}

static json_t *j(const char *text) {
        json_t *o = json_loads(text, 0, NULL);
        assert_non_null(o);
        return o;
}

static void request_refused(const char *text, const char *why) {
        json_t *o = j(text);
        struct outbound_request req = {0};
        char *err = NULL;
        assert_int_equal(outbound_request_parse(o, NULL, &req, &err), -EINVAL);
        assert_null(req.hosts);
        assert_non_null(err);
        if (!strstr(err, why))
                print_error("%s: '%s' does not say '%s'\n", text, err, why);
        assert_non_null(strstr(err, why));
        free(err);
        json_decref(o);
}

static void test_requests(void **state) {
        json_t *o = j("{\"hosts\": [\"API.Example.COM.\", \"*.cdn.example.org\", \"api.example.com\"], "
                      "\"for\": \"organism\", \"secrets\": [\"WEATHER_KEY\", \"WEATHER_KEY\"], \"reason\": \"forecasts\"}");
        struct outbound_request req = {0};
        char *err = NULL;
        assert_int_equal(outbound_request_parse(o, NULL, &req, &err), 0);
        assert_int_equal(strv_length(req.hosts), 2);
        assert_string_equal(req.hosts[0], "api.example.com");
        assert_string_equal(req.hosts[1], "*.cdn.example.org");
        assert_int_equal(req.scope, OUTBOUND_FOR_ORGANISM);
        assert_int_equal(strv_length(req.secrets), 1);
        assert_string_equal(req.reason, "forecasts");
        /* The normal form is what the owner is shown and what is granted. */
        json_t *norm = outbound_request_json(&req);
        char *s = json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, "{\"for\":\"organism\",\"hosts\":[\"api.example.com\",\"*.cdn.example.org\"],"
                               "\"reason\":\"forecasts\",\"secrets\":[\"WEATHER_KEY\"]}");
        free(s);
        json_decref(norm);
        outbound_request_done(&req);
        json_decref(o);

        o = j("{\"hosts\": [\"pkgs.example.net\"], \"for\": \"evolutions\"}");
        assert_int_equal(outbound_request_parse(o, NULL, &req, &err), 0);
        assert_int_equal(req.scope, OUTBOUND_FOR_EVOLUTIONS);
        assert_non_null(req.secrets);
        assert_null(req.secrets[0]);
        assert_string_equal(req.reason, "");
        outbound_request_done(&req);
        json_decref(o);

        request_refused("[1]", "must be a JSON object");
        request_refused("{\"hosts\": [\"a.example.com\"]}", "for: must be");
        request_refused("{\"hosts\": [\"a.example.com\"], \"for\": \"everyone\"}", "for: must be");
        request_refused("{\"hosts\": [], \"for\": \"organism\"}", "hosts: must be a list of 1 to 16");
        request_refused("{\"hosts\": \"a.example.com\", \"for\": \"organism\"}", "hosts: must be a list");
        request_refused("{\"hosts\": [\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\","
                        "\"o\",\"p\",\"q\"], \"for\": \"organism\"}",
                        "hosts: must be a list of 1 to 16");
        request_refused("{\"hosts\": [\"a.example.com\", 7], \"for\": \"organism\"}", "hosts[1]: must be a string");
        request_refused("{\"hosts\": [\"a.example.com\", \"10.0.0.1\"], \"for\": \"organism\"}",
                        "hosts[1]: '10.0.0.1' cannot be granted");
        request_refused("{\"hosts\": [\"localhost\"], \"for\": \"organism\"}", "hosts[0]: 'localhost' cannot be granted");
        request_refused("{\"hosts\": [\"metadata.google.internal\"], \"for\": \"organism\"}", "cannot be granted");
        request_refused("{\"hosts\": [\"*\"], \"for\": \"organism\"}", "hosts[0]: '*' cannot be granted");
        request_refused("{\"hosts\": [\"a.example.com\"], \"for\": \"organism\", \"secrets\": [\"SEED_OWNER_PASSWORD\"]}",
                        "secrets[0]: SEED_OWNER_PASSWORD: SEED_*");
        request_refused("{\"hosts\": [\"a.example.com\"], \"for\": \"organism\", \"secrets\": \"KEY\"}",
                        "secrets: must be a list");
        request_refused("{\"hosts\": [\"a.example.com\"], \"for\": \"evolutions\", \"secrets\": [\"KEY\"]}",
                        "only the live organism gets secrets");
        request_refused("{\"hosts\": [\"a.example.com\"], \"for\": \"organism\", \"reason\": 5}", "reason: must be");
        request_refused("{\"hosts\": [\"a.example.com\"], \"for\": \"organism\", \"why\": \"x\"}", "unknown field 'why'");
}

/* The tool table: request_outbound_access is dangerous, of a fixed level
 * and asked every time; outbound_status is safe and offered everywhere. */
static void test_tools(void **state) {
        const struct tool *const set[] = {outbound_tools, NULL};
        const struct tool *req = tools_find(set, "request_outbound_access");
        assert_non_null(req);
        assert_int_equal(req->level, TOOL_DANGEROUS);
        assert_null(req->classify);
        assert_true(req->always_ask);
        assert_non_null(req->check);
        assert_true(tools_offered(req, TOOL_PHASE_CHAT));
        assert_true(tools_offered(req, TOOL_PHASE_MUTATE));
        assert_false(tools_offered(req, TOOL_PHASE_REFLECT));
        const struct tool *st = tools_find(set, "outbound_status");
        assert_non_null(st);
        assert_int_equal(st->level, TOOL_SAFE);
        assert_false(st->always_ask);
        assert_true(tools_offered(st, TOOL_PHASE_CHAT));
        assert_true(tools_offered(st, TOOL_PHASE_PLAN));
        assert_true(tools_offered(st, TOOL_PHASE_MUTATE));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_secret_names),
                cmocka_unit_test(test_requests),
                cmocka_unit_test(test_tools),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
