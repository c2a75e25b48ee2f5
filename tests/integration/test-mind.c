/* Integration tests of kernel/mind against the scripted model server
 * (tests/fakes/model_server.py): a lent key reaches the provider; the list
 * of models (tool-capable only, cached per key); the probe that guards a
 * choice; a key swapped while a call is in flight. The choice kept across
 * restarts (the kernel DB) is tested end to end by tests/browser/mind.test.js
 * and tests/integration/test_mind.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>

#include "base/crypto.h"
#include "config/config.h"
#include "mind/mind.h"

#include "model-server.h"

#define KEY_A "sk-lent-A-0123456789abcdef"
#define KEY_B "sk-lent-B-fedcba9876543210"

static struct cfg *config(const char *env) {
        struct cfg *c = NULL;
        assert_int_equal(cfg_new_default(&c), 0);
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        free(c->model.provider);
        free(c->model.name);
        free(c->model.base_url);
        free(c->model.api_key_env);
        assert_non_null(c->model.provider = strdup("openai-compatible"));
        assert_non_null(c->model.name = strdup("scripted"));
        assert_non_null(c->model.base_url = strdup(url));
        assert_non_null(c->model.api_key_env = strdup(env));
        c->model.max_tokens = 256;
        return c;
}

static int say(struct mind *m, const char *text, char **ret_reply) {
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = (char *)text};
        struct model_response res = {0};
        _cleanup_free_ char *err = NULL;
        int r = mind_complete(m, &(struct model_request){.messages = &user, .n_messages = 1, .purpose = "test"}, &res,
                              &err);
        if (r < 0)
                print_error("mind_complete: %s\n", err ? err : "?");
        if (r >= 0 && ret_reply)
                *ret_reply = strdup(res.message.text ? res.message.text : "");
        model_response_done(&res);
        return r;
}

/* The sha256 the server recorded for request i's bearer key. */
static char *auth_of(json_t *reqs, size_t i) {
        json_t *a = json_object_get(json_object_get(json_array_get(reqs, i), "auth"), "authorization");
        const char *h = json_string_value(json_object_get(a, "sha256"));
        return h ? strdup(h) : NULL;
}

static void assert_key_sent(json_t *reqs, size_t i, const char *key) {
        char want[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(key, strlen(key), want);
        _cleanup_free_ char *got = auth_of(reqs, i);
        assert_non_null(got);
        assert_string_equal(got, want);
}

static void test_lent_key_reaches_the_model(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config("SEED_TEST_MODEL_KEY");
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c, .backoff_base_ms = 10}, &m), 0);
        assert_false(mind_ready(m));
        load_script("[{\"text\": \"hello\"}]");
        assert_int_equal(say(m, "hi", NULL), -ENOKEY);
        assert_int_equal(request_count(), 0); /* nothing was sent without a key */
        _cleanup_free_ char *err = NULL, *reply = NULL;
        assert_int_equal(mind_lend_key(m, "openai-compatible", KEY_A, &err), 0);
        assert_int_equal(say(m, "hi", &reply), 0);
        assert_string_equal(reply, "hello");
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 1);
        assert_key_sent(reqs, 0, KEY_A);
        json_decref(reqs);
        /* forgotten: no call goes out */
        assert_int_equal(mind_forget_key(m, "openai-compatible"), 1);
        assert_int_equal(say(m, "hi", NULL), -ENOKEY);
        assert_int_equal(request_count(), 1);
}

static void test_models_listed_and_cached(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config("");
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c, .backoff_base_ms = 10}, &m), 0);
        load_script("[]");
        _cleanup_free_ char *err = NULL, *json = NULL;
        assert_int_equal(mind_models_json(m, "openai-compatible", &json, &err), 0);
        json_t *o = json_loads(json, 0, NULL);
        json_t *models = json_object_get(o, "models");
        assert_int_equal(json_array_size(models), 2); /* the one without tools is left out */
        assert_string_equal(json_string_value(json_object_get(json_array_get(models, 0), "id")), "scripted");
        assert_string_equal(json_string_value(json_object_get(json_array_get(models, 1), "id")), "scripted-large");
        assert_true(json_is_true(json_object_get(json_array_get(models, 1), "tools")));
        json_decref(o);
        /* the second time from the cache */
        free(TAKE_PTR(json));
        assert_int_equal(mind_models_json(m, "openai-compatible", &json, &err), 0);
        assert_int_equal(request_count(), 1);
        /* another key: fetched again, with it */
        assert_int_equal(mind_lend_key(m, "openai-compatible", KEY_B, &err), 0);
        free(TAKE_PTR(json));
        assert_int_equal(mind_models_json(m, "openai-compatible", &json, &err), 0);
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(reqs, 1), "path")), "/v1/models");
        assert_key_sent(reqs, 1, KEY_B);
        json_decref(reqs);
}

static void test_choice_is_probed(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config("");
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c, .backoff_base_ms = 10}, &m), 0);
        /* A model that cannot take tools fails its check, verbatim, and is not chosen. */
        load_script("[]");
        char *err = NULL;
        assert_int_equal(mind_choose(m, "openai-compatible", "scripted-no-tools", &err), -EREMOTEIO);
        assert_non_null(strstr(err, "The model did not answer the check"));
        assert_non_null(strstr(err, "No endpoints found that support tool use"));
        free(TAKE_PTR(err));
        json_t *st = NULL;
        assert_int_equal(mind_status_json(m, true, &st), 0);
        assert_string_equal(json_string_value(json_object_get(st, "model")), "scripted");
        json_decref(st);
        /* One that answers is chosen, and the next call uses it. */
        load_script("[{\"text\": \"ready\", \"match\": \"connection check\"}, {\"text\": \"next\"}]");
        assert_int_equal(mind_choose(m, "openai-compatible", "scripted-large", &err), 0);
        assert_int_equal(mind_status_json(m, true, &st), 0);
        assert_string_equal(json_string_value(json_object_get(st, "model")), "scripted-large");
        assert_true(json_is_true(json_object_get(st, "chosen")));
        json_decref(st);
        assert_int_equal(say(m, "hi", NULL), 0);
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        json_t *probe = json_object_get(json_array_get(reqs, 0), "body");
        assert_string_equal(json_string_value(json_object_get(probe, "model")), "scripted-large");
        assert_int_equal(json_integer_value(json_object_get(probe, "max_tokens")), MIND_PROBE_MAX_TOKENS);
        assert_int_equal(json_array_size(json_object_get(probe, "tools")), 1); /* so a model without tools fails */
        json_t *next = json_object_get(json_array_get(reqs, 1), "body");
        assert_string_equal(json_string_value(json_object_get(next, "model")), "scripted-large");
        json_decref(reqs);
}

struct call {
        struct mind *m;
        int r;
        char *reply;
};

static void *call_thread(void *userdata) {
        struct call *c = userdata;
        c->r = say(c->m, "slowly", &c->reply);
        return NULL;
}

/* A key replaced while a call runs: that call finishes with the key it
 * started with; the next one uses the new key. */
static void test_key_swapped_during_a_call(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config("SEED_TEST_MODEL_KEY");
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c, .backoff_base_ms = 10}, &m), 0);
        _cleanup_free_ char *err = NULL, *reply = NULL;
        assert_int_equal(mind_lend_key(m, "openai-compatible", KEY_A, &err), 0);
        load_script("[{\"text\": \"slow\", \"delay_ms\": 1500}, {\"text\": \"after\"}]");
        struct call call = {.m = m};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, call_thread, &call), 0);
        int64_t deadline = now_ms() + 15000;
        while (request_count() < 1 && now_ms() < deadline)
                sleep_ms(20);
        assert_int_equal(request_count(), 1);
        assert_int_equal(mind_lend_key(m, "openai-compatible", KEY_B, &err), 0); /* A is wiped from the mind */
        assert_int_equal(say(m, "now", &reply), 0);
        pthread_join(t, NULL);
        assert_int_equal(call.r, 0);
        assert_string_equal(call.reply, "slow");
        assert_string_equal(reply, "after");
        free(call.reply);
        json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        assert_key_sent(reqs, 0, KEY_A);
        assert_key_sent(reqs, 1, KEY_B);
        json_decref(reqs);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lent_key_reaches_the_model),
                cmocka_unit_test(test_models_listed_and_cached),
                cmocka_unit_test(test_choice_is_probed),
                cmocka_unit_test(test_key_swapped_during_a_call),
        };
        return cmocka_run_group_tests(tests, start_server, stop_server);
}
