/* Integration tests of the model layer against the scripted model server
 * (tests/fakes/model_server.py, a real HTTP server speaking both wire
 * formats): the real client code, real HTTP, real retries. Each test loads
 * its own script with POST /_script and checks what the server was sent
 * with GET /_requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <time.h>

#include "base/crypto.h"
#include "base/fileio.h"
#include "base/proc.h"
#include "httpc/httpc.h"
#include "model/model-internal.h"

#define KEY "sk-local-test-key-0123456789"

#include "model-server.h"

/* ---- the client ---- */

struct usage_seen {
        int calls;
        char purpose[32], reference[32], model[64];
        struct model_usage usage;
};

static void on_usage(void *userdata, const char *purpose, const char *reference, const char *model,
                     const struct model_usage *usage) {
        struct usage_seen *u = userdata;
        u->calls++;
        snprintf(u->purpose, sizeof u->purpose, "%s", purpose ? purpose : "");
        snprintf(u->reference, sizeof u->reference, "%s", reference ? reference : "");
        snprintf(u->model, sizeof u->model, "%s", model);
        u->usage = *usage;
}

static struct model *compat_model(const char *key, int timeout_ms) {
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        struct model *m = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "scripted-1",
                                                          .base_url = url, .api_key = key, .max_tokens = 512,
                                                          .timeout_ms = timeout_ms, .backoff_base_ms = 10},
                                   &m, &err),
                         0);
        return m;
}

static int ask(struct model *m, const char *text, struct model_response *res, char **err) {
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = (char *)text};
        *err = NULL;
        return model_complete(m, &(struct model_request){.system = "You are a test.", .messages = &user,
                                                         .n_messages = 1, .purpose = "chat"},
                              res, err);
}

/* Asserts a failure whose message contains want; frees it. */
static void assert_failed(int r, int want_r, char **errp, const char *want) {
        char *err = *errp; /* read after r was computed: argument order is unspecified */
        *errp = NULL;
        if (r != want_r || !err || !strstr(err, want))
                print_error("r=%d (want %d) err=%s (want '%s')\n", r, want_r, err ? err : "(null)", want);
        assert_int_equal(r, want_r);
        assert_non_null(err);
        assert_non_null(strstr(err, want));
        assert_null(strstr(err, KEY));
        free(err);
}

/* ---- tests ---- */

static void test_text_reply(void **state) {
        load_script("[{\"text\": \"Hello, owner.\", \"match\": \"say hello\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *err;
        assert_int_equal(ask(m, "please say hello", &res, &err), 0);
        assert_string_equal(res.message.text, "Hello, owner.");
        assert_int_equal(res.message.n_calls, 0);
        assert_int_equal(res.stop, MODEL_STOP_END);
        model_response_done(&res);

        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 1);
        json_t *r0 = json_array_get(reqs, 0);
        assert_string_equal(json_string_value(json_object_get(r0, "path")), "/v1/chat/completions");
        json_t *body = json_object_get(r0, "body");
        assert_string_equal(json_string_value(json_object_get(body, "model")), "scripted-1");
        assert_int_equal(json_integer_value(json_object_get(body, "max_tokens")), 512);
        json_t *msgs = json_object_get(body, "messages");
        assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "role")), "system");
        assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 1), "content")), "please say hello");
        assert_null(json_object_get(body, "usage")); /* only OpenRouter is asked for the cost */
        json_decref(reqs);
}

static void test_tool_calls_round_trip(void **state) {
        load_script("[{\"text\": \"Checking.\", \"tool_calls\": ["
                    "  {\"name\": \"read_file\", \"arguments\": {\"path\": \"README.md\"}},"
                    "  {\"name\": \"run\", \"arguments\": {\"cmd\": \"make\", \"timeout\": 5}}]},"
                    " {\"text\": \"Fixed.\", \"match\": \"build failed: missing semicolon\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        const struct model_tool_def tools[] = {
                {"read_file", "Read a file", "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}"},
                {"run", "Run a command", "{\"type\":\"object\"}"},
        };
        struct model_message convo[4] = {{.role = MODEL_ROLE_USER, .text = "fix the build"}};
        struct model_response res = {0};
        char *err = NULL;
        struct model_request req = {.messages = convo, .n_messages = 1, .tools = tools, .n_tools = 2,
                                    .purpose = "evolution"};
        assert_int_equal(model_complete(m, &req, &res, &err), 0);
        assert_int_equal(res.stop, MODEL_STOP_TOOL_CALLS);
        assert_string_equal(res.message.text, "Checking.");
        assert_int_equal(res.message.n_calls, 2);
        assert_string_equal(res.message.calls[0].name, "read_file");
        assert_string_equal(res.message.calls[0].id, "call_0_0");
        json_t *args = json_loads(res.message.calls[1].arguments, 0, NULL);
        assert_non_null(args);
        assert_string_equal(json_string_value(json_object_get(args, "cmd")), "make");
        assert_int_equal(json_integer_value(json_object_get(args, "timeout")), 5);
        json_decref(args);

        /* Feed both results back: the second is a build failure. */
        assert_int_equal(model_message_copy(&res.message, &convo[1]), 0);
        convo[2] = (struct model_message){.role = MODEL_ROLE_TOOL, .tool_call_id = res.message.calls[0].id,
                                          .text = "# Seed"};
        convo[3] = (struct model_message){.role = MODEL_ROLE_TOOL, .tool_call_id = res.message.calls[1].id,
                                          .text = "build failed: missing semicolon", .is_error = true};
        req.n_messages = 4;
        struct model_response res2 = {0};
        assert_int_equal(model_complete(m, &req, &res2, &err), 0);
        assert_string_equal(res2.message.text, "Fixed.");
        model_response_done(&res2);

        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        json_t *msgs = json_object_get(json_object_get(json_array_get(reqs, 1), "body"), "messages");
        assert_int_equal(json_array_size(msgs), 4);
        json_t *asst = json_array_get(msgs, 1), *t2 = json_array_get(msgs, 3);
        assert_string_equal(json_string_value(json_object_get(asst, "role")), "assistant");
        assert_int_equal(json_array_size(json_object_get(asst, "tool_calls")), 2);
        assert_string_equal(json_string_value(json_object_get(t2, "role")), "tool");
        assert_string_equal(json_string_value(json_object_get(t2, "tool_call_id")), "call_0_1");
        assert_string_equal(json_string_value(json_object_get(t2, "content")), "Error: build failed: missing semicolon");
        json_decref(reqs);
        model_message_done(&convo[1]);
        model_response_done(&res);
}

static void test_raw_arguments_preserved(void **state) {
        load_script("[{\"tool_calls\": [{\"name\": \"run\", \"arguments\": \"{\\\"cmd\\\": \\\"make\"}]}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *err;
        assert_int_equal(ask(m, "go", &res, &err), 0);
        assert_int_equal(res.message.n_calls, 1);
        assert_string_equal(res.message.calls[0].arguments, "{\"cmd\": \"make");
        assert_null(res.message.text);
        model_response_done(&res);
}

static void test_429_twice_then_success(void **state) {
        load_script("[{\"http_error\": 429}, {\"http_error\": 429, \"headers\": {\"Retry-After\": \"0\"}},"
                    " {\"text\": \"finally\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct usage_seen seen = {0};
        model_set_usage_hook(m, on_usage, &seen);
        struct model_response res = {0};
        char *err;
        assert_int_equal(ask(m, "hi", &res, &err), 0);
        assert_string_equal(res.message.text, "finally");
        model_response_done(&res);
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 3);
        for (size_t i = 0; i < 3; i++) /* the same request each time */
                assert_true(json_equal(json_object_get(json_array_get(reqs, i), "body"),
                                       json_object_get(json_array_get(reqs, 0), "body")));
        assert_int_equal(json_integer_value(json_object_get(json_array_get(reqs, 1), "status")), 429);
        json_decref(reqs);
        assert_int_equal(seen.calls, 1); /* only the successful call is accounted */
}

static void test_retry_after_honoured(void **state) {
        load_script("[{\"http_error\": 503, \"headers\": {\"Retry-After\": \"1\"}}, {\"text\": \"ok\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *err;
        int64_t t0 = now_ms();
        assert_int_equal(ask(m, "hi", &res, &err), 0);
        assert_true(now_ms() - t0 >= 1000); /* not the 10 ms backoff */
        assert_int_equal(request_count(), 2);
        model_response_done(&res);
}

static void test_error_in_200(void **state) {
        load_script("[{\"error_in_200\": {\"message\": \"upstream provider down\", \"code\": 502}},"
                    " {\"text\": \"recovered\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *err;
        assert_int_equal(ask(m, "hi", &res, &err), 0);
        assert_string_equal(res.message.text, "recovered");
        model_response_done(&res);
        assert_int_equal(request_count(), 2);

        /* not retryable: fails at once */
        load_script("[{\"error_in_200\": {\"message\": \"context too long\", \"code\": 400}}, {\"text\": \"never\"}]");
        assert_failed(ask(m, "hi", &res, &err), -EREMOTEIO, &err, "context too long");
        assert_int_equal(request_count(), 1);
}

static void test_400_fails_at_once(void **state) {
        load_script("[{\"http_error\": 400, \"body\": {\"error\": {\"message\": \"unknown model scripted-1\"}}},"
                    " {\"text\": \"never\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *e1 = NULL;
        assert_int_equal(ask(m, "hi", &res, &e1), -EREMOTEIO);
        /* Permanent: one attempt, and the message names the fix. */
        if (!strstr(e1, "HTTP 400: unknown model scripted-1") || !strstr(e1, "check model.name") ||
            !strstr(e1, "(1 attempt)"))
                fail_msg("%s", e1);
        free(e1);
        assert_int_equal(request_count(), 1);
        json_t *st = control("GET", "/_state", NULL);
        assert_int_equal(json_integer_value(json_object_get(st, "remaining")), 1);
        json_decref(st);
}

static void test_malformed_body(void **state) {
        /* A malformed answer is transient: retried within the budget. */
        load_script("[{\"malformed\": \"{\\\"choices\\\": [{\\\"mess\"}, {\"text\": \"recovered\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *err;
        assert_int_equal(ask(m, "hi", &res, &err), 0);
        assert_string_equal(res.message.text, "recovered");
        model_response_done(&res);
        assert_int_equal(request_count(), 2);

        load_script("[{\"malformed\": \"{\\\"id\\\": \\\"x\\\"}\"}, {\"malformed\": \"{\\\"choices\\\": []}\"},"
                    " {\"malformed\": \"{}\"}, {\"malformed\": \"\"}, {\"malformed\": \"{\\\"choices\\\": []}\"},"
                    " {\"text\": \"never\"}]");
        assert_failed(ask(m, "hi", &res, &err), -EBADMSG, &err, "malformed response: no choices (5 attempts)");
        assert_int_equal(request_count(), 5);
        /* A body past the 8 MiB cap is refused, not buffered. */
        size_t big = MODEL_MAX_RESPONSE + 1024;
        char *script = malloc(big + 64);
        assert_non_null(script);
        int k = sprintf(script, "[{\"malformed\": \"");
        memset(script + k, 'a', big);
        strcpy(script + k + big, "\"}]");
        load_script(script);
        free(script);
        assert_failed(ask(m, "hi", &res, &err), -EBADMSG, &err, "response larger than 8 MiB");
        assert_int_equal(request_count(), 1);
}

static void test_max_tokens_stop(void **state) {
        load_script("[{\"text\": \"partial answ\", \"stop\": \"max_tokens\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct model_response res = {0};
        char *err;
        assert_int_equal(ask(m, "write a lot", &res, &err), 0);
        assert_int_equal(res.stop, MODEL_STOP_MAX_TOKENS);
        assert_string_equal(res.message.text, "partial answ");
        model_response_done(&res);
}

static void test_overall_timeout(void **state) {
        load_script("[{\"delay_ms\": 4000, \"text\": \"too late\"}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 700);
        struct model_response res = {0};
        char *err;
        int64_t t0 = now_ms();
        assert_failed(ask(m, "hi", &res, &err), -ETIMEDOUT, &err, "timed out");
        int64_t took = now_ms() - t0;
        assert_true(took >= 600 && took < 2500);
        assert_int_equal(request_count(), 1);

        /* A Retry-After beyond the deadline is not waited for. */
        load_script("[{\"http_error\": 429, \"headers\": {\"Retry-After\": \"30\"}}, {\"text\": \"never\"}]");
        t0 = now_ms();
        assert_failed(ask(m, "hi", &res, &err), -ETIMEDOUT, &err, "HTTP 429");
        assert_true(now_ms() - t0 < 2500);
        assert_int_equal(request_count(), 1);
}

static void test_authorization_header(void **state) {
        char want[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(KEY, strlen(KEY), want);
        load_script("[{\"text\": \"a\"}, {\"text\": \"b\"}]");
        struct model_response res = {0};
        char *err;
        {
                _cleanup_(model_freep) struct model *m = compat_model(KEY, 20000);
                assert_int_equal(ask(m, "hi", &res, &err), 0);
                model_response_done(&res);
        }
        {
                _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
                assert_int_equal(ask(m, "hi", &res, &err), 0);
                model_response_done(&res);
        }
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        json_t *with = json_object_get(json_object_get(json_array_get(reqs, 0), "auth"), "authorization");
        json_t *without = json_object_get(json_object_get(json_array_get(reqs, 1), "auth"), "authorization");
        assert_true(json_is_true(json_object_get(with, "present")));
        assert_string_equal(json_string_value(json_object_get(with, "scheme")), "Bearer");
        assert_string_equal(json_string_value(json_object_get(with, "sha256")), want);
        assert_true(json_is_false(json_object_get(without, "present")));
        json_t *xk = json_object_get(json_object_get(json_array_get(reqs, 0), "auth"), "x-api-key");
        assert_true(json_is_false(json_object_get(xk, "present")));
        json_decref(reqs);
}

static void test_key_echo_redacted(void **state) {
        /* A server that quotes the key back must not get it into our errors. */
        load_script("[{\"http_error\": 401, \"body\": {\"error\": {\"message\": \"invalid key " KEY "\"}}}]");
        _cleanup_(model_freep) struct model *m = compat_model(KEY, 20000);
        struct model_response res = {0};
        char *err;
        assert_failed(ask(m, "hi", &res, &err), -EREMOTEIO, &err, "HTTP 401: invalid key [redacted]");
        load_script("[{\"http_error\": 401}]");
        assert_failed(ask(m, "hi", &res, &err), -EREMOTEIO, &err, "check the variable model.api_key_env names");
}

static void test_usage_hook(void **state) {
        load_script("[{\"text\": \"counted\", \"usage\": {\"input_tokens\": 1234, \"output_tokens\": 56, \"cost\": 0.25}},"
                    " {\"http_error\": 400}]");
        _cleanup_(model_freep) struct model *m = compat_model(NULL, 20000);
        struct usage_seen seen = {0};
        model_set_usage_hook(m, on_usage, &seen);
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "hi"};
        struct model_response res = {0};
        char *err = NULL;
        assert_int_equal(model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1,
                                                                   .purpose = "evolution", .reference = "evo_42"},
                                        &res, &err),
                         0);
        assert_int_equal(seen.calls, 1);
        assert_string_equal(seen.purpose, "evolution");
        assert_string_equal(seen.reference, "evo_42");
        assert_string_equal(seen.model, "scripted-1");
        assert_int_equal(seen.usage.input_tokens, 1234);
        assert_int_equal(seen.usage.output_tokens, 56);
        assert_true(seen.usage.cost_usd > 0.249 && seen.usage.cost_usd < 0.251);
        assert_true(seen.usage.cost_reported);
        assert_int_equal(res.usage.input_tokens, 1234);
        model_response_done(&res);
        /* a failed call is not accounted */
        assert_int_equal(ask(m, "hi", &res, &err), -EREMOTEIO);
        free(err);
        assert_int_equal(seen.calls, 1);
}

/* The models list: one GET with the key, only the models that take tools. */
static void test_list_models(void **state) {
        char want[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(KEY, strlen(KEY), want);
        load_script("[]");
        _cleanup_(model_freep) struct model *m = compat_model(KEY, 20000);
        struct model_list l = {0};
        _cleanup_free_ char *err = NULL;
        assert_int_equal(model_list(m, &l, &err), 0);
        assert_int_equal(l.n, 2); /* scripted-no-tools is left out */
        assert_string_equal(l.models[0].id, "scripted");
        assert_string_equal(l.models[0].name, "Scripted");
        assert_int_equal(l.models[0].tools, 1);
        assert_int_equal(l.models[0].context_length, 200000);
        assert_string_equal(l.models[1].id, "scripted-large");
        model_list_done(&l);
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 1);
        json_t *rq = json_array_get(reqs, 0);
        assert_string_equal(json_string_value(json_object_get(rq, "method")), "GET");
        assert_string_equal(json_string_value(json_object_get(rq, "path")), "/v1/models");
        json_t *auth = json_object_get(json_object_get(rq, "auth"), "authorization");
        assert_string_equal(json_string_value(json_object_get(auth, "sha256")), want);
        json_decref(reqs);

        /* Anthropic's list: every model takes tools; the key goes as x-api-key. */
        struct model *a = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "anthropic", .name = "claude-test",
                                                          .api_key = KEY, .timeout_ms = 20000},
                                   &a, &err),
                         0);
        char url[160];
        snprintf(url, sizeof url, "%s/v1/messages", base);
        assert_int_equal(model_set_endpoint_for_tests(a, url), 0);
        assert_int_equal(model_list(a, &l, &err), 0);
        assert_int_equal(l.n, 3);
        assert_string_equal(l.models[2].id, "scripted-no-tools");
        assert_string_equal(l.models[2].name, "Scripted without tools");
        assert_int_equal(l.models[2].tools, 1);
        model_list_done(&l);
        reqs = requests();
        json_t *xk = json_object_get(json_object_get(json_array_get(reqs, 1), "auth"), "x-api-key");
        assert_string_equal(json_string_value(json_object_get(xk, "sha256")), want);
        json_decref(reqs);

        /* A server that answers with an error: said, without the key. */
        snprintf(url, sizeof url, "%s/nowhere/chat/completions", base);
        assert_int_equal(model_set_endpoint_for_tests(a, url), 0);
        assert_int_equal(model_list(a, &l, &err), -EREMOTEIO);
        assert_non_null(strstr(err, "cannot list the models: HTTP 404"));
        assert_null(strstr(err, KEY));
        model_free(a);
}

/* A model that does not take tools is refused when offered them (as
 * OpenRouter does), without using a script step. */
static void test_no_tools_model_refused(void **state) {
        load_script("[{\"text\": \"ok\"}]");
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        _cleanup_(model_freep) struct model *m = NULL;
        _cleanup_free_ char *err0 = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "scripted-no-tools",
                                                          .base_url = url, .timeout_ms = 20000, .backoff_base_ms = 10},
                                   &m, &err0),
                         0);
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "hi"};
        const struct model_tool_def tool = {.name = "ok", .description = "Say ok."};
        struct model_response res = {0};
        char *err = NULL;
        assert_failed(model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1, .tools = &tool,
                                                                .n_tools = 1, .purpose = "probe"},
                                     &res, &err),
                      -EREMOTEIO, &err, "HTTP 404: No endpoints found that support tool use");
        /* without tools it is answered by the script */
        assert_int_equal(model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1, .purpose = "x"},
                                        &res, &err),
                         0);
        assert_string_equal(res.message.text, "ok");
        model_response_done(&res);
}

static void test_anthropic_round_trip(void **state) {
        load_script("[{\"text\": \"Reading.\", \"tool_calls\": ["
                    "   {\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}},"
                    "   {\"name\": \"run\", \"arguments\": {\"cmd\": \"false\"}}]},"
                    " {\"text\": \"The file says hi.\", \"match\": \"exit status 1\","
                    "  \"usage\": {\"input_tokens\": 300, \"output_tokens\": 9}}]");
        struct model *m = NULL;
        _cleanup_free_ char *err0 = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "anthropic", .name = "claude-test",
                                                          .api_key = KEY, .max_tokens = 256, .timeout_ms = 20000,
                                                          .backoff_base_ms = 10},
                                   &m, &err0),
                         0);
        char url[160];
        snprintf(url, sizeof url, "%s/v1/messages", base);
        assert_int_equal(model_set_endpoint_for_tests(m, url), 0);
        struct usage_seen seen = {0};
        model_set_usage_hook(m, on_usage, &seen);
        const struct model_tool_def tools[] = {
                {"read_file", "Read a file", "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}"},
                {"run", "Run a command", NULL},
        };
        struct model_message convo[4] = {{.role = MODEL_ROLE_USER, .text = "what does a.txt say?"}};
        struct model_request req = {.system = "You are a Seed.", .messages = convo, .n_messages = 1, .tools = tools,
                                    .n_tools = 2, .purpose = "chat"};
        struct model_response res = {0};
        char *err = NULL;
        int r = model_complete(m, &req, &res, &err);
        if (r < 0)
                print_error("%s\n", err);
        assert_int_equal(r, 0);
        assert_int_equal(res.stop, MODEL_STOP_TOOL_CALLS);
        assert_string_equal(res.message.text, "Reading.");
        assert_int_equal(res.message.n_calls, 2);
        assert_string_equal(res.message.calls[0].id, "toolu_0_0");
        assert_string_equal(res.message.calls[0].arguments, "{\"path\":\"a.txt\"}");

        assert_int_equal(model_message_copy(&res.message, &convo[1]), 0);
        convo[2] = (struct model_message){.role = MODEL_ROLE_TOOL, .tool_call_id = "toolu_0_0", .text = "hi"};
        convo[3] = (struct model_message){.role = MODEL_ROLE_TOOL, .tool_call_id = "toolu_0_1",
                                          .text = "exit status 1", .is_error = true};
        req.n_messages = 4;
        struct model_response res2 = {0};
        r = model_complete(m, &req, &res2, &err);
        if (r < 0)
                print_error("%s\n", err);
        assert_int_equal(r, 0);
        assert_string_equal(res2.message.text, "The file says hi.");
        assert_int_equal(res2.stop, MODEL_STOP_END);
        assert_int_equal(seen.calls, 2);
        assert_int_equal(seen.usage.input_tokens, 300);
        model_response_done(&res2);

        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        char want[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(KEY, strlen(KEY), want);
        json_t *r0 = json_array_get(reqs, 0), *r1 = json_array_get(reqs, 1);
        assert_string_equal(json_string_value(json_object_get(r0, "path")), "/v1/messages");
        json_t *auth = json_object_get(r0, "auth");
        assert_true(json_is_true(json_object_get(json_object_get(auth, "x-api-key"), "present")));
        assert_string_equal(json_string_value(json_object_get(json_object_get(auth, "x-api-key"), "sha256")), want);
        assert_true(json_is_false(json_object_get(json_object_get(auth, "authorization"), "present")));
        assert_string_equal(json_string_value(json_object_get(json_object_get(r0, "headers"), "anthropic-version")),
                            "2023-06-01");
        json_t *b0 = json_object_get(r0, "body");
        /* the system prompt as one block: a prompt-caching breakpoint (test_cache_markers) */
        json_t *sys0 = json_array_get(json_object_get(b0, "system"), 0);
        assert_string_equal(json_string_value(json_object_get(sys0, "text")), "You are a Seed.");
        assert_int_equal(json_integer_value(json_object_get(b0, "max_tokens")), 256);

        /* the second request: tool_use in the assistant turn, both results in one user turn */
        json_t *msgs = json_object_get(json_object_get(r1, "body"), "messages");
        assert_int_equal(json_array_size(msgs), 3);
        json_t *asst = json_object_get(json_array_get(msgs, 1), "content");
        json_t *use = json_array_get(asst, 1);
        assert_string_equal(json_string_value(json_object_get(use, "type")), "tool_use");
        assert_string_equal(json_string_value(json_object_get(use, "id")), "toolu_0_0");
        assert_string_equal(json_string_value(json_object_get(json_object_get(use, "input"), "path")), "a.txt");
        json_t *results = json_object_get(json_array_get(msgs, 2), "content");
        assert_int_equal(json_array_size(results), 2);
        json_t *res0 = json_array_get(results, 0), *res1 = json_array_get(results, 1);
        assert_string_equal(json_string_value(json_object_get(res0, "type")), "tool_result");
        assert_string_equal(json_string_value(json_object_get(res0, "tool_use_id")), "toolu_0_0");
        assert_string_equal(json_string_value(json_object_get(res0, "content")), "hi");
        assert_null(json_object_get(res0, "is_error"));
        assert_string_equal(json_string_value(json_object_get(res1, "tool_use_id")), "toolu_0_1");
        assert_true(json_is_true(json_object_get(res1, "is_error")));
        json_decref(reqs);
        model_message_done(&convo[1]);
        model_response_done(&res);
        model_free(m);
}

/* Prompt caching, per provider: the breakpoints (counted and checked by the
 * server) are sent exactly to Anthropic's models — natively and through
 * OpenRouter — and each provider's usage fields come back as cached and
 * uncached input tokens. */
static void test_cache_markers(void **state) {
        static const struct {
                const char *provider, *model, *path;
                size_t breakpoints[2]; /* of the first and the second request */
        } table[] = {
                /* tools, system, last turn; then also the previous request's last turn */
                {"anthropic", "claude-test", "/v1/messages", {3, 4}},
                /* system, last turn; then the previous one too */
                {"openrouter", "anthropic/claude-test", "/v1/chat/completions", {2, 3}},
                {"openrouter", "openai/gpt-test", "/v1/chat/completions", {0, 0}},
                {"openai", "gpt-test", "/v1/chat/completions", {0, 0}},
                {"openai-compatible", "anthropic/claude-test", "/v1/chat/completions", {0, 0}},
        };
        const struct model_tool_def tools[] = {{"read_file", "Read a file", NULL}};
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                load_script("[{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}],"
                            "  \"usage\": {\"input_tokens\": 1000, \"output_tokens\": 5, \"cache_write_tokens\": 900}},"
                            " {\"text\": \"done\","
                            "  \"usage\": {\"input_tokens\": 1200, \"output_tokens\": 7, \"cached_tokens\": 900,"
                            "  \"cache_write_tokens\": 250}}]");
                struct model *m = NULL;
                _cleanup_free_ char *err0 = NULL;
                char url[160];
                snprintf(url, sizeof url, "%s/v1", base);
                bool compat = streq(table[i].provider, "openai-compatible");
                assert_int_equal(model_new(&(struct model_config){.provider = table[i].provider, .name = table[i].model,
                                                                  .api_key = KEY, .base_url = compat ? url : NULL,
                                                                  .max_tokens = 256, .timeout_ms = 20000,
                                                                  .backoff_base_ms = 10},
                                           &m, &err0),
                                 0);
                snprintf(url, sizeof url, "%s%s", base, table[i].path);
                if (!compat)
                        assert_int_equal(model_set_endpoint_for_tests(m, url), 0);
                struct usage_seen seen = {0};
                model_set_usage_hook(m, on_usage, &seen);
                struct model_message convo[3] = {{.role = MODEL_ROLE_USER, .text = "read a"}};
                struct model_request req = {.system = "You are a Seed.", .messages = convo, .n_messages = 1,
                                            .tools = tools, .n_tools = 1, .purpose = "evolution"};
                struct model_response res = {0};
                char *err = NULL;
                int r = model_complete(m, &req, &res, &err);
                if (r < 0)
                        print_error("%s %s: %s\n", table[i].provider, table[i].model, err);
                assert_int_equal(r, 0);
                assert_int_equal(seen.usage.input_tokens, 1000);
                assert_int_equal(seen.usage.cache_read_tokens, 0);
                assert_int_equal(seen.usage.cache_write_tokens, 900);
                assert_int_equal(model_message_copy(&res.message, &convo[1]), 0);
                convo[2] = (struct model_message){.role = MODEL_ROLE_TOOL, .tool_call_id = res.message.calls[0].id,
                                                  .text = "contents of a"};
                req.n_messages = 3;
                struct model_response res2 = {0};
                r = model_complete(m, &req, &res2, &err);
                if (r < 0)
                        print_error("%s %s: %s\n", table[i].provider, table[i].model, err);
                assert_int_equal(r, 0);
                assert_int_equal(seen.calls, 2);
                assert_int_equal(seen.usage.input_tokens, 1200);
                assert_int_equal(seen.usage.cache_read_tokens, 900);
                assert_int_equal(seen.usage.cache_write_tokens, 250);
                assert_int_equal(seen.usage.output_tokens, 7);

                json_t *reqs = requests();
                assert_int_equal(json_array_size(reqs), 2);
                for (size_t k = 0; k < 2; k++) {
                        json_t *q = json_array_get(reqs, k);
                        assert_int_equal(json_integer_value(json_object_get(q, "status")), 200);
                        size_t got = (size_t)json_integer_value(json_object_get(q, "cache_breakpoints"));
                        if (got != table[i].breakpoints[k])
                                print_error("%s %s request %zu: %zu breakpoints, want %zu\n", table[i].provider,
                                            table[i].model, k, got, table[i].breakpoints[k]);
                        assert_int_equal(got, table[i].breakpoints[k]);
                }
                json_decref(reqs);
                model_message_done(&convo[1]);
                model_response_done(&res);
                model_response_done(&res2);
                model_free(m);
        }
}

static void test_script_exhausted_and_mismatch(void **state) {
        load_script("[]");
        struct model *m = NULL;
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        _cleanup_free_ char *err0 = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "s",
                                                          .base_url = url, .max_attempts = 2, .backoff_base_ms = 1},
                                   &m, &err0),
                         0);
        struct model_response res = {0};
        char *err;
        assert_failed(ask(m, "hi", &res, &err), -EREMOTEIO, &err, "HTTP 400: script exhausted");
        assert_int_equal(request_count(), 1);

        load_script("[{\"text\": \"x\", \"match\": \"NOT-IN-THE-REQUEST\"}, {\"text\": \"y\"}]");
        assert_failed(ask(m, "hi", &res, &err), -EREMOTEIO, &err, "script step 0: request does not contain");
        json_t *st = control("GET", "/_state", NULL);
        assert_non_null(json_string_value(json_object_get(st, "failure")));
        json_decref(st);
        model_free(m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_text_reply),
                cmocka_unit_test(test_tool_calls_round_trip),
                cmocka_unit_test(test_raw_arguments_preserved),
                cmocka_unit_test(test_429_twice_then_success),
                cmocka_unit_test(test_retry_after_honoured),
                cmocka_unit_test(test_error_in_200),
                cmocka_unit_test(test_400_fails_at_once),
                cmocka_unit_test(test_malformed_body),
                cmocka_unit_test(test_max_tokens_stop),
                cmocka_unit_test(test_overall_timeout),
                cmocka_unit_test(test_authorization_header),
                cmocka_unit_test(test_key_echo_redacted),
                cmocka_unit_test(test_usage_hook),
                cmocka_unit_test(test_cache_markers),
                cmocka_unit_test(test_anthropic_round_trip),
                cmocka_unit_test(test_list_models),
                cmocka_unit_test(test_no_tools_model_refused),
                cmocka_unit_test(test_script_exhausted_and_mismatch),
        };
        return cmocka_run_group_tests(tests, start_server, stop_server);
}
