/* test-mind.c — kernel/mind without a model server or database: where the
 * key comes from (start, lent, none, not needed), the message naming the
 * real variable, lending and forgetting (bounds, providers, never echoed),
 * refused choices. A probe that cannot connect (a loopback port nothing
 * listens on) is the only call made. No network. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "config/config.h"
#include "mind/mind.h"
#include "secrets/secrets.h"

#define KEY "sk-or-test-SECRET-0123456789abcdef"
#define LENT "sk-lent-SECRET-fedcba9876543210"

static void set_str(char **field, const char *v) {
        free(*field);
        assert_non_null(*field = strdup(v));
}

/* seed.yaml's defaults (openrouter), or openai-compatible at base_url with
 * key variable env ("" = none). */
static struct cfg *config(const char *base_url, const char *env) {
        struct cfg *c = NULL;
        assert_int_equal(cfg_new_default(&c), 0);
        if (base_url) {
                set_str(&c->model.provider, "openai-compatible");
                set_str(&c->model.name, "local");
                set_str(&c->model.base_url, base_url);
                set_str(&c->model.api_key_env, env);
        }
        return c;
}

static json_t *status(struct mind *m, bool full) {
        json_t *o = NULL;
        assert_int_equal(mind_status_json(m, full, &o), 0);
        char *s = json_dumps(o, JSON_COMPACT);
        assert_non_null(s);
        assert_null(strstr(s, KEY)); /* never a key */
        assert_null(strstr(s, LENT));
        free(s);
        return o;
}

static const char *member(json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

static void assert_source(struct mind *m, const char *want) {
        json_t *o = status(m, false);
        assert_string_equal(member(o, "key_source"), want);
        json_decref(o);
}

static void test_no_key_names_the_variable(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config(NULL, NULL);
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c}, &m), 0);
        assert_false(mind_ready(m));
        char *why = mind_why_not(m);
        assert_string_equal(why, "No model key: the Seed cannot think yet. Start it with -e OPENROUTER_API_KEY (or lend a "
                                 "key in Settings).");
        free(why);
        json_t *o = status(m, true);
        assert_string_equal(member(o, "provider"), "openrouter");
        assert_string_equal(member(o, "model"), c->model.name);
        assert_string_equal(member(o, "key_source"), "none");
        assert_string_equal(member(o, "key_env"), "OPENROUTER_API_KEY");
        assert_true(json_is_false(json_object_get(o, "ready")));
        assert_non_null(strstr(member(o, "why_not"), "-e OPENROUTER_API_KEY"));
        assert_true(json_is_false(json_object_get(o, "chosen")));
        /* every provider, with its own variable; openai-compatible only with a base_url */
        json_t *providers = json_object_get(o, "providers");
        assert_int_equal(json_array_size(providers), 4);
        json_t *anthropic = json_array_get(providers, 2);
        assert_string_equal(member(anthropic, "name"), "anthropic");
        assert_string_equal(member(anthropic, "key_env"), "ANTHROPIC_API_KEY");
        assert_true(json_is_true(json_object_get(anthropic, "available")));
        assert_true(json_is_false(json_object_get(json_array_get(providers, 3), "available")));
        json_decref(o);
        /* a call says the same, and creates nothing */
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "hi"};
        struct model_response res = {0};
        char *err = NULL;
        assert_int_equal(mind_complete(m, &(struct model_request){.messages = &user, .n_messages = 1}, &res, &err),
                         -ENOKEY);
        assert_non_null(strstr(err, "Start it with -e OPENROUTER_API_KEY"));
        free(err);
}

static void test_sources(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config(NULL, NULL);
        _cleanup_(secrets_freep) struct secrets *s = NULL;
        assert_int_equal(secrets_new(&s), 0);
        assert_int_equal(secrets_set(s, "OPENROUTER_API_KEY", KEY), 0);
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c, .secrets = s}, &m), 0);
        assert_true(mind_ready(m));
        assert_null(mind_why_not(m));
        assert_source(m, "start");
        /* a lent key goes before the start key, until it is forgotten; each
         * change moves the status' version (the status cache's key) */
        char *err = NULL;
        uint64_t v = mind_status_version(m);
        assert_int_equal(mind_lend_key(m, "openrouter", LENT, &err), 0);
        assert_source(m, "lent");
        assert_true(mind_ready(m));
        assert_true(mind_status_version(m) != v);
        v = mind_status_version(m);
        assert_int_equal(mind_forget_key(m, "openrouter"), 1);
        assert_source(m, "start");
        assert_true(mind_status_version(m) != v);
        v = mind_status_version(m);
        assert_int_equal(mind_forget_key(m, "openrouter"), 0);
        assert_true(mind_status_version(m) == v);
        /* a key lent for another provider changes nothing here (but the
         * full view's list) */
        assert_int_equal(mind_lend_key(m, "anthropic", LENT, &err), 0);
        assert_source(m, "start");
        assert_true(mind_status_version(m) != v);
        json_t *o = status(m, true);
        assert_string_equal(member(json_array_get(json_object_get(o, "providers"), 2), "key_source"), "lent");
        json_decref(o);
        assert_int_equal(mind_forget_key(m, NULL), 1);
        assert_int_equal(mind_forget_key(m, "nope"), -EINVAL);
}

static void test_lending_a_key_makes_it_think(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config(NULL, NULL);
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c}, &m), 0);
        char *err = NULL;
        assert_int_equal(mind_lend_key(m, "openrouter", LENT, &err), 0);
        assert_true(mind_ready(m));
        assert_source(m, "lent");
        assert_int_equal(mind_forget_key(m, NULL), 1);
        assert_false(mind_ready(m));
        assert_source(m, "none");
}

static void test_bad_keys_and_providers(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config(NULL, NULL);
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c}, &m), 0);
        char big[MIND_KEY_MAX + 2];
        memset(big, 'k', sizeof big - 1);
        big[sizeof big - 1] = 0;
        const char *bad[] = {"", LENT " ", LENT "\r\nX-Evil: 1", "sk-\xc3\xa9", big};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *err = NULL;
                assert_int_equal(mind_lend_key(m, "openrouter", bad[i], &err), -EINVAL);
                assert_non_null(strstr(err, "printable characters"));
                assert_null(strstr(err, LENT)); /* never quoted */
                free(err);
        }
        big[MIND_KEY_MAX] = 0; /* the longest allowed */
        char *err = NULL;
        assert_int_equal(mind_lend_key(m, "openrouter", big, &err), 0);
        assert_true(mind_ready(m));
        assert_int_equal(mind_lend_key(m, "nope", LENT, &err), -EINVAL);
        assert_non_null(strstr(err, "Unknown provider"));
        free(TAKE_PTR(err));
        /* openai-compatible's host comes from seed.yaml only */
        assert_int_equal(mind_lend_key(m, "openai-compatible", LENT, &err), -EINVAL);
        assert_non_null(strstr(err, "model.base_url in seed.yaml"));
        free(TAKE_PTR(err));
        assert_int_equal(mind_choose(m, "openai-compatible", "x", &err), -EINVAL);
        free(TAKE_PTR(err));
        char *json = NULL;
        assert_int_equal(mind_models_json(m, "openai-compatible", &json, &err), -EINVAL);
        free(TAKE_PTR(err));
        /* bad model names are refused before anything is called */
        assert_int_equal(mind_choose(m, "openrouter", "", &err), -EINVAL);
        free(TAKE_PTR(err));
        assert_int_equal(mind_choose(m, "openrouter", "a\nb", &err), -EINVAL);
        free(TAKE_PTR(err));
        /* no key for that provider: said, naming its variable */
        assert_int_equal(mind_choose(m, "openai", "gpt-x", &err), -ENOKEY);
        assert_non_null(strstr(err, "-e OPENAI_API_KEY"));
        free(TAKE_PTR(err));
        assert_int_equal(mind_models_json(m, "anthropic", &json, &err), -ENOKEY);
        assert_non_null(strstr(err, "-e ANTHROPIC_API_KEY"));
        free(TAKE_PTR(err));
}

static void test_openai_compatible(void **state) {
        /* No key variable: no key needed. */
        _cleanup_(cfg_freep) struct cfg *c = config("http://127.0.0.1:1/v1", "");
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c}, &m), 0);
        assert_true(mind_ready(m));
        json_t *o = status(m, true);
        assert_string_equal(member(o, "key_source"), "not_needed");
        assert_true(json_is_null(json_object_get(o, "key_env")));
        assert_true(json_is_true(json_object_get(json_array_get(json_object_get(o, "providers"), 3), "available")));
        json_decref(o);
        /* With one: the message names it. */
        _cleanup_(cfg_freep) struct cfg *c2 = config("http://127.0.0.1:1/v1", "LOCAL_MODEL_KEY");
        _cleanup_(mind_freep) struct mind *m2 = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c2}, &m2), 0);
        char *why = mind_why_not(m2);
        assert_non_null(strstr(why, "Start it with -e LOCAL_MODEL_KEY"));
        free(why);
        char *err = NULL;
        assert_int_equal(mind_lend_key(m2, "openai-compatible", LENT, &err), 0);
        assert_true(mind_ready(m2));
}

/* A model that does not answer its check is not chosen. */
static void test_failed_probe_changes_nothing(void **state) {
        _cleanup_(cfg_freep) struct cfg *c = config("http://127.0.0.1:1/v1", "");
        _cleanup_(mind_freep) struct mind *m = NULL;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = c, .backoff_base_ms = 1}, &m), 0);
        char *err = NULL;
        int r = mind_choose(m, "openai-compatible", "other", &err);
        assert_true(r < 0);
        assert_non_null(strstr(err, "The model did not answer the check"));
        free(err);
        json_t *o = status(m, true);
        assert_string_equal(member(o, "model"), "local");
        assert_true(json_is_false(json_object_get(o, "chosen")));
        json_decref(o);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_key_names_the_variable),
                cmocka_unit_test(test_sources),
                cmocka_unit_test(test_lending_a_key_makes_it_think),
                cmocka_unit_test(test_bad_keys_and_providers),
                cmocka_unit_test(test_openai_compatible),
                cmocka_unit_test(test_failed_probe_changes_nothing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
