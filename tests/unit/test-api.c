/* test-api.c — kernel/api's pure parts (api.c): id validation, the answers
 * given before any database or orchestrator call, and the event hub behind
 * GET /_seed/api/events (fan-out, pings, lagging subscribers dropped, the
 * subscriber cap, shutdown). No database: routes that reach it are covered
 * by tests/integration/test_evolve_api.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "api/api.h"
#include "config/config.h"
#include "mind/mind.h"

#include <jansson.h>
#include <pthread.h>

static struct api *new_api(void) {
        struct api *api = NULL;
        /* Never dereferenced by the paths tested here. */
        assert_int_equal(api_new(&(struct api_config){.seed_dir = "/nonexistent", .kdb = (struct db *)1}, &api), 0);
        return api;
}

static const struct ctl_api_route *route(const char *method, const char *pattern) {
        for (const struct ctl_api_route *r = api_routes; r->pattern; r++)
                if (streq(r->method, method) && streq(r->pattern, pattern))
                        return r;
        fail_msg("no route %s %s", method, pattern);
        return NULL;
}

/* Calls a route's handler; returns the status and leaves the body in *json. */
static int call(struct api *api, const char *method, const char *pattern, const char *param, const char *query,
                const char *body, char **json) {
        const struct ctl_api_call c = {
                .method = method,
                .path = pattern,
                .param = param,
                .query = query,
                .body = body ? body : "",
                .body_len = body ? strlen(body) : 0,
                .via_cli = true,
        };
        int status = 0;
        *json = NULL;
        assert_int_equal(route(method, pattern)->handler(api, &c, &status, json), 0);
        assert_non_null(*json);
        json_t *o = json_loads(*json, 0, NULL);
        assert_non_null(o);
        json_decref(o);
        return status;
}

/* Every route of every table carries its decision (a new route cannot land
 * without one): ctl's own have an auth level, the API's are API-authenticated
 * by construction and must name a method, a /_seed/api/ path and one handler;
 * a table missing one is refused. */
static void test_every_route_has_its_decision(void **state) {
        char *err = NULL;
        assert_int_equal(ctl_routes_check(&err), 0);
        assert_null(err);
        assert_int_equal(ctl_api_routes_check(api_routes, &err), 0);
        assert_null(err);
        size_t n = 0;
        while (api_routes[n].pattern)
                n++;
        assert_true(n > 10);
        static const struct ctl_api_route bad[][2] = {
                {{.method = "GET", .pattern = "/_seed/api/x"}},               /* no handler */
                {{.method = "GET", .pattern = "/x", .handler = (void *)1}},  /* outside the API */
                {{.method = NULL, .pattern = "/_seed/api/x", .handler = (void *)1}},
                {{.method = "POST", .pattern = "/_seed/api/x", .stream = (void *)1}},
                {{.method = "GET", .pattern = "/_seed/api/x", .handler = (void *)1, .stream = (void *)1}},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                assert_int_equal(ctl_api_routes_check(bad[i], &err), -EINVAL);
                assert_non_null(strstr(err, "API route 0"));
                free(err);
                err = NULL;
        }
}

static void test_ids(void **state) {
        assert_true(api_id_valid("evo_0123456789abcdef", "evo_"));
        assert_true(api_id_valid("apr_ffffffffffffffff", "apr_"));
        assert_false(api_id_valid("evo_0123456789ABCDEF", "evo_"));
        assert_false(api_id_valid("evo_0123456789abcde", "evo_"));
        assert_false(api_id_valid("evo_0123456789abcdef0", "evo_"));
        assert_false(api_id_valid("apr_0123456789abcdef", "evo_"));
        assert_false(api_id_valid("evo_0123456789abcde/", "evo_"));
        assert_false(api_id_valid("", "evo_"));
        assert_false(api_id_valid(NULL, "evo_"));
}

static void test_refusals_before_any_call(void **state) {
        struct api *api = new_api();
        char *json;
        assert_int_equal(call(api, "GET", "/_seed/api/evolutions/*", "evo_12", NULL, NULL, &json), 400);
        free(json);
        assert_int_equal(call(api, "GET", "/_seed/api/evolutions/*/diff", "../../etc", NULL, NULL, &json), 400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/approvals/*", "apr_x", NULL, "{\"approved\":true}", &json),
                         400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/generations/*/rollback", "0", NULL, "{}", &json), 400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/generations/*/rollback", "-1", NULL, "{}", &json), 400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/generations/*/rollback", "99999999999", NULL, "{}", &json),
                         400);
        free(json);
        /* Without an orchestrator, what would change state answers 503. */
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions", NULL, NULL, "{\"intent\":\"x\"}", &json), 503);
        assert_non_null(strstr(json, "not available"));
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions/*/cancel", "evo_0123456789abcdef", NULL, "{}", &json),
                         503);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/approvals/*", "apr_0123456789abcdef", NULL,
                              "{\"approved\":true}", &json),
                         503);
        free(json);
        api_free(api);
}

/* When the start-up doctor found that sandboxes cannot run, evolutions are
 * refused with its message (and its fix). */
static void test_refused_by_the_doctor(void **state) {
        struct api *api = NULL;
        const char *why = "unprivileged user namespaces are disabled; fix: sysctl kernel.unprivileged_userns_clone=1";
        assert_int_equal(api_new(&(struct api_config){.seed_dir = "/nonexistent", .kdb = (struct db *)1,
                                                      .refused = why},
                                 &api),
                         0);
        char *json;
        const char *const calls[][4] = {
                {"POST", "/_seed/api/evolutions", NULL, "{\"intent\":\"x\"}"},
                {"POST", "/_seed/api/evolutions/*/decide", "evo_0123456789abcdef", "{}"},
                {"POST", "/_seed/api/evolutions/*/cancel", "evo_0123456789abcdef", "{}"},
                {"POST", "/_seed/api/approvals/*", "apr_0123456789abcdef", "{\"approved\":true}"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
                assert_int_equal(call(api, calls[i][0], calls[i][1], calls[i][2], NULL, calls[i][3], &json), 503);
                assert_non_null(strstr(json, "evolutions are refused on this host: unprivileged user namespaces"));
                free(json);
        }
        api_free(api);
}

/* The chat: no model answers 503 saying so (before the body or the DB is
 * touched); a bad limit is 400 before the DB. */
static void test_chat_refusals(void **state) {
        struct api *api = new_api();
        char *json;
        assert_int_equal(call(api, "POST", "/_seed/api/messages", NULL, NULL, "{\"text\":\"hi\"}", &json), 503);
        assert_non_null(strstr(json, "no model"));
        free(json);
        static const char *const bad[] = {"limit=0", "limit=201", "limit=x", "limit=-1", "limit="};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_int_equal(call(api, "GET", "/_seed/api/messages", NULL, bad[i], NULL, &json), 400);
                free(json);
        }
        api_free(api);
}

/* The mind's routes, and the 409 without a key: evolutions and messages
 * are refused with the message naming the variable, before anything is
 * created (the orchestrator and the DB are never reached). A lent key is
 * never echoed. */
#define LENT "sk-lent-unit-SECRET-0123456789"
static void test_mind_routes(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = NULL;
        assert_int_equal(cfg_new_default(&c), 0); /* openrouter, no secrets */
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c}, &m), 0);
        struct api *api = NULL;
        assert_int_equal(api_new(&(struct api_config){.seed_dir = "/nonexistent", .kdb = (struct db *)1, .mind = m,
                                                      .cfg = c},
                                 &api),
                         0);
        api_set_orchestrator(api, (struct orchestrator *)1); /* never called */
        const char *why = "No model key: the Seed cannot think yet. Start it with -e OPENROUTER_API_KEY (or lend a key "
                          "in Settings).";
        char *json;
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions", NULL, NULL, "{\"intent\":\"x\"}", &json), 409);
        assert_non_null(strstr(json, why));
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/messages", NULL, NULL, "{\"text\":\"hi\"}", &json), 409);
        assert_non_null(strstr(json, why));
        free(json);
        assert_int_equal(call(api, "GET", "/_seed/api/mind", NULL, NULL, NULL, &json), 200);
        assert_non_null(strstr(json, "\"key_source\":\"none\""));
        assert_non_null(strstr(json, "\"key_env\":\"OPENROUTER_API_KEY\""));
        free(json);
        /* lending: bad bodies and keys are 400, never echoed */
        static const char *const bad[] = {
                "", "[]", "{\"provider\":\"openrouter\"}", "{\"provider\":\"openrouter\",\"key\":3}",
                "{\"provider\":\"openrouter\",\"key\":\"" LENT "\",\"extra\":\"x\"}",
                "{\"provider\":\"openrouter\",\"key\":\"" LENT " x\"}", "{\"provider\":\"nope\",\"key\":\"" LENT "\"}",
                "{\"provider\":\"openai-compatible\",\"key\":\"" LENT "\"}",
                "{\"provider\":\"openrouter\",\"key\":\"" LENT "\",\"key\":\"" LENT "\"}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_int_equal(call(api, "POST", "/_seed/api/mind/key", NULL, NULL, bad[i], &json), 400);
                assert_null(strstr(json, LENT));
                free(json);
        }
        assert_int_equal(call(api, "POST", "/_seed/api/mind/key", NULL, NULL,
                              "{\"provider\":\"openrouter\",\"key\":\"" LENT "\"}", &json),
                         200);
        assert_null(strstr(json, LENT));
        assert_non_null(strstr(json, "\"key_source\":\"lent\""));
        assert_non_null(strstr(json, "\"ready\":true"));
        free(json);
        assert_int_equal(call(api, "GET", "/_seed/api/mind", NULL, NULL, NULL, &json), 200);
        assert_null(strstr(json, LENT));
        free(json);
        /* choosing: bad input is 400; a provider without a key is 409 */
        assert_int_equal(call(api, "POST", "/_seed/api/mind", NULL, NULL, "{\"provider\":\"openrouter\"}", &json), 400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/mind", NULL, NULL, "{\"provider\":\"openai\",\"model\":\"gpt\"}",
                              &json),
                         409);
        assert_non_null(strstr(json, "-e OPENAI_API_KEY"));
        free(json);
        assert_int_equal(call(api, "GET", "/_seed/api/mind/models", NULL, "provider=anthropic", NULL, &json), 409);
        assert_non_null(strstr(json, "-e ANTHROPIC_API_KEY"));
        free(json);
        assert_int_equal(call(api, "GET", "/_seed/api/mind/models", NULL, "provider=nope", NULL, &json), 400);
        free(json);
        /* forgetting */
        assert_int_equal(call(api, "POST", "/_seed/api/mind/key/forget", NULL, NULL, "{\"provider\":\"nope\"}", &json),
                         400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/mind/key/forget", NULL, NULL, "{}", &json), 200);
        assert_non_null(strstr(json, "\"forgotten\":1"));
        assert_non_null(strstr(json, "\"key_source\":\"none\""));
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions", NULL, NULL, "{\"intent\":\"x\"}", &json), 409);
        free(json);
        api_free(api);
}

static void test_bodies_validated(void **state) {
        struct api *api = new_api();
        /* A non-NULL orchestrator that is never called: validation comes first. */
        api_set_orchestrator(api, (struct orchestrator *)1);
        static const char *const bad[] = {
                "", "[]", "\"x\"", "{}", "{\"intent\":\"\"}", "{\"intent\":3}", "{\"intent\":\"a\",\"intent\":\"b\"}",
                "{\"intent\":\"a\\u0000b\"}",
        };
        char *json;
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_int_equal(call(api, "POST", "/_seed/api/evolutions", NULL, NULL, bad[i], &json), 400);
                assert_non_null(strstr(json, "\"error\""));
                free(json);
        }
        size_t n = API_INTENT_MAX + 1;
        char *big = malloc(n + 20);
        assert_non_null(big);
        strcpy(big, "{\"intent\":\"");
        memset(big + 11, 'a', n);
        strcpy(big + 11 + n, "\"}");
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions", NULL, NULL, big, &json), 400);
        free(json);
        free(big);
        assert_int_equal(call(api, "POST", "/_seed/api/approvals/*", "apr_0123456789abcdef", NULL,
                              "{\"approved\":\"yes\"}", &json),
                         400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions/*/answer", "evo_0123456789abcdef", NULL,
                              "{\"approval\":\"apr_1\",\"answer\":\"x\"}", &json),
                         400);
        free(json);
        assert_int_equal(call(api, "POST", "/_seed/api/evolutions/*/answer", "evo_0123456789abcdef", NULL,
                              "{\"approval\":\"apr_0123456789abcdef\"}", &json),
                         400);
        free(json);
        api_free(api);
}

/* ---- the event hub ---- */

static int open_stream(struct api *api, struct ctl_stream *st, int *status, char **json) {
        const struct ctl_api_call c = {.method = "GET", .path = "/_seed/api/events", .body = "", .via_cli = true};
        *st = (struct ctl_stream){0};
        *json = NULL;
        *status = 0;
        return route("GET", "/_seed/api/events")->stream(api, &c, status, json, st);
}

/* Reads until the buffer holds want (or the stream ends). */
static bool read_until(struct ctl_stream *st, const char *want, char *out, size_t size) {
        size_t len = 0;
        out[0] = 0;
        while (!strstr(out, want)) {
                ssize_t n = st->read(st->ctx, out + len, size - 1 - len);
                if (n <= 0)
                        return false;
                len += (size_t)n;
                out[len] = 0;
        }
        return true;
}

static void test_stream_fan_out(void **state) {
        struct api *api = new_api();
        struct ctl_stream a, b;
        int status;
        char *json, buf[8192];
        assert_int_equal(open_stream(api, &a, &status, &json), 0);
        assert_non_null(a.read);
        assert_string_equal(a.content_type, "text/event-stream; charset=utf-8");
        assert_int_equal(open_stream(api, &b, &status, &json), 0);
        assert_true(read_until(&a, ": connected\n\n", buf, sizeof buf));
        api_publish(api, "evo_0123456789abcdef", "phase", "{\"from\":\"requested\",\"to\":\"planning\"}");
        api_publish(api, "evo_0123456789abcdef", "bad kind!", "{}");          /* ignored */
        api_publish(api, "evo_0123456789abcdef", "note", "not json");         /* data: just the id */
        assert_true(read_until(&a, "event: note\n", buf, sizeof buf));
        assert_non_null(strstr(buf, "event: phase\ndata: {\"from\":\"requested\",\"to\":\"planning\","
                                    "\"evolution\":\"evo_0123456789abcdef\"}\n\n"));
        assert_null(strstr(buf, "bad kind"));
        assert_true(read_until(&b, "event: note\ndata: {\"evolution\":\"evo_0123456789abcdef\"}\n\n", buf, sizeof buf));
        a.close(a.ctx);
        b.close(b.ctx);
        api_free(api);
}

static void test_stream_lagging_subscriber_dropped(void **state) {
        struct api *api = new_api();
        struct ctl_stream a;
        int status;
        char *json, buf[4096];
        assert_int_equal(open_stream(api, &a, &status, &json), 0);
        assert_true(read_until(&a, ": connected\n\n", buf, sizeof buf));
        /* Never read: past API_SSE_QUEUE_MAX bytes the subscriber is dropped. */
        char *big = malloc(64 * 1024 + 32);
        assert_non_null(big);
        strcpy(big, "{\"text\":\"");
        memset(big + 9, 'x', 64 * 1024);
        strcpy(big + 9 + 64 * 1024, "\"}");
        for (int i = 0; i < API_SSE_QUEUE_MAX / (64 * 1024) + 2; i++)
                api_publish(api, "evo_0123456789abcdef", "note", big);
        free(big);
        assert_true(a.read(a.ctx, buf, sizeof buf) < 0);
        a.close(a.ctx);
        api_free(api);
}

static void test_stream_cap_and_shutdown(void **state) {
        struct api *api = new_api();
        struct ctl_stream st[API_SSE_SUBSCRIBERS], extra;
        int status;
        char *json, buf[256];
        for (size_t i = 0; i < ARRAY_SIZE(st); i++) {
                assert_int_equal(open_stream(api, &st[i], &status, &json), 0);
                assert_non_null(st[i].read);
        }
        assert_int_equal(open_stream(api, &extra, &status, &json), 0);
        assert_null(extra.read);
        assert_int_equal(status, 503);
        assert_non_null(strstr(json, "too many event streams"));
        free(json);
        /* A closed slot is free again. */
        st[0].close(st[0].ctx);
        assert_int_equal(open_stream(api, &st[0], &status, &json), 0);
        assert_non_null(st[0].read);
        /* Shutdown ends every stream at once, instead of at the next ping. */
        assert_true(st[1].read(st[1].ctx, buf, sizeof buf) > 0); /* the greeting */
        api_shutdown(api);
        assert_true(st[1].read(st[1].ctx, buf, sizeof buf) < 0);
        for (size_t i = 0; i < ARRAY_SIZE(st); i++)
                st[i].close(st[i].ctx);
        assert_int_equal(open_stream(api, &extra, &status, &json), 0);
        assert_int_equal(status, 503);
        free(json);
        api_free(api);
}

struct reader {
        struct ctl_stream st;
        char buf[4096];
        bool got;
};

static void *reader_thread(void *p) {
        struct reader *r = p;
        r->got = read_until(&r->st, "event: check", r->buf, sizeof r->buf);
        return NULL;
}

static void test_stream_wakes_blocked_reader(void **state) {
        struct api *api = new_api();
        struct reader r = {0};
        int status;
        char *json;
        assert_int_equal(open_stream(api, &r.st, &status, &json), 0);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, reader_thread, &r), 0);
        api_publish(api, "evo_0123456789abcdef", "check", "{\"name\":\"build\",\"ok\":true}");
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_true(r.got);
        assert_non_null(strstr(r.buf, "\"name\":\"build\""));
        r.st.close(r.st.ctx);
        api_free(api);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_route_has_its_decision),
                cmocka_unit_test(test_ids),
                cmocka_unit_test(test_refusals_before_any_call),
                cmocka_unit_test(test_refused_by_the_doctor),
                cmocka_unit_test(test_bodies_validated),
                cmocka_unit_test(test_chat_refusals),
                cmocka_unit_test(test_mind_routes),
                cmocka_unit_test(test_stream_fan_out),
                cmocka_unit_test(test_stream_lagging_subscriber_dropped),
                cmocka_unit_test(test_stream_cap_and_shutdown),
                cmocka_unit_test(test_stream_wakes_blocked_reader),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
