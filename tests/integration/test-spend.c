/* Integration tests for kernel/spend against a real private PostgreSQL and
 * the scripted model server (tests/fakes/model_server.py): every call is
 * recorded with its purpose and cost — the provider's usage.cost, the price
 * table, or unknown —, the month is the UTC calendar month, and reaching the
 * budget pauses autonomous work only, saying so once a month. Runs as the
 * unprivileged 'seed' account (drops root first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>

#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "base/priv.h"
#include "db/db.h"
#include "model/model.h"
#include "pg/pg.h"
#include "spend/spend.h"

#pragma GCC diagnostic ignored "-Wunused-function" /* model-server.h helpers this file does not use */
#include "model-server.h"

static char seed_dir[64];
static struct pg *g_pg;
static struct db *g_db;

/* 2026-12-01T00:00:00Z and neighbours, in ms */
#define DEC_1 1796083200000LL
#define JAN_1 1798761600000LL
#define DAY_MS (24LL * 3600 * 1000)

/* What the chat was told. */
static struct {
        int calls;
        int fail; /* answer -EAGAIN this many times first */
        char last[1024];
} told;

static int notify(void *userdata, const char *text) {
        if (told.fail > 0) {
                told.fail--;
                return -EAGAIN;
        }
        told.calls++;
        snprintf(told.last, sizeof told.last, "%s", text);
        return 0;
}

static struct spend *new_spend(char *const *prices) {
        struct spend *s = NULL;
        assert_int_equal(spend_new(&(struct spend_config){.kdb = g_db, .prices = prices, .notify = notify}, &s), 0);
        return s;
}

static void reset(void) {
        assert_int_equal(db_exec(g_db, "DELETE FROM model_usage; DELETE FROM kernel_settings WHERE key LIKE 'spend.%'",
                                 NULL),
                         0);
        memset(&told, 0, sizeof told);
}

static char *value(const char *sql) {
        char *v = NULL;
        int r = db_query_value(g_db, sql, 0, NULL, &v);
        if (r == -ENOENT)
                return strdup("NULL");
        if (r < 0)
                fail_msg("query '%s' failed: %d", sql, r);
        return v;
}

static void assert_value(const char *sql, const char *want) {
        _cleanup_free_ char *v = value(sql);
        if (!streq(v, want))
                fail_msg("%s: got '%s', wanted '%s'", sql, v, want);
}

/* ---- through the wire: the usage hook records each call ---- */

static int64_t hook_at; /* 0: now */

static void on_usage(void *userdata, const char *purpose, const char *reference, const char *model,
                     const struct model_usage *u) {
        assert_int_equal(spend_record(userdata, hook_at ? hook_at : wall_ms(), purpose, reference, model, u), 0);
}

static void call_model(struct spend *s, const char *name, const char *purpose, const char *script) {
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        _cleanup_(model_freep) struct model *m = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = name,
                                                          .base_url = url, .max_tokens = 512, .timeout_ms = 20000,
                                                          .backoff_base_ms = 10},
                                   &m, &err),
                         0);
        model_set_usage_hook(m, on_usage, s);
        load_script(script);
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "hi"};
        struct model_response res = {0};
        int r = model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1, .purpose = purpose,
                                                          .reference = "ref-1"},
                               &res, &err);
        if (r < 0)
                fail_msg("model_complete: %s", err ? err : "?");
        model_response_done(&res);
}

static void test_cost_from_the_provider(void **state) {
        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        call_model(s, "scripted-1", "chat",
                   "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 1200, \"output_tokens\": 30, \"cost\": 0.0125}}]");
        assert_value("SELECT purpose || ' ' || reference || ' ' || model || ' ' || input_tokens || ' ' || output_tokens "
                     "|| ' ' || cost_source || ' ' || cost_usd FROM model_usage",
                     "chat ref-1 scripted-1 1200 30 provider 0.0125");
        /* a provider's cost wins over the table, even for a model the table knows */
        call_model(s, "gpt-4o", "evolution",
                   "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 1000000, \"output_tokens\": 0, \"cost\": 0.5}}]");
        assert_value("SELECT cost_source || ' ' || cost_usd FROM model_usage WHERE model = 'gpt-4o'", "provider 0.5");
}

static void test_cost_from_the_price_table(void **state) {
        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        /* gpt-4o-mini: 0.15 in, 0.6 out per million */
        call_model(s, "gpt-4o-mini-2024-07-18", "evolution",
                   "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 2000000, \"output_tokens\": 500000}}]");
        assert_value("SELECT purpose || ' ' || cost_source || ' ' || cost_usd FROM model_usage", "evolution prices 0.6");
        /* seed.yaml's spend.prices: a local model, and an override of the table */
        char *prices[] = {"scripted 2 4", "gpt-4o-mini 1 1", NULL};
        _cleanup_(spend_freep) struct spend *y = new_spend(prices);
        call_model(y, "scripted-1", "chat",
                   "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 1000000, \"output_tokens\": 250000}}]");
        assert_value("SELECT cost_source || ' ' || cost_usd FROM model_usage WHERE model = 'scripted-1'", "prices 3");
        call_model(y, "gpt-4o-mini", "chat",
                   "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 1000000, \"output_tokens\": 1000000}}]");
        assert_value("SELECT cost_source || ' ' || cost_usd FROM model_usage WHERE model = 'gpt-4o-mini'", "prices 2");
        /* a bad entry is refused (kernel/config already checked it) */
        char *bad[] = {"scripted 2", NULL};
        struct spend *z = NULL;
        assert_int_equal(spend_new(&(struct spend_config){.kdb = g_db, .prices = bad}, &z), -EINVAL);
        assert_null(z);
}

static void test_cost_unknown(void **state) {
        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        hook_at = DEC_1 + DAY_MS;
        call_model(s, "scripted-1", "routine", "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 2}}]");
        call_model(s, "scripted-1", "routine",
                   "[{\"text\": \"hi\", \"usage\": {\"input_tokens\": 10, \"output_tokens\": 2, \"cost\": 0.25}}]");
        hook_at = 0;
        /* stored as unknown (NULL), never as 0 */
        assert_value("SELECT count(*) FROM model_usage WHERE cost_usd IS NULL AND cost_source IS NULL", "1");
        _cleanup_free_ char *json = NULL;
        assert_int_equal(spend_summary_json(s, DEC_1 + 2 * DAY_MS, &json), 0);
        _cleanup_json_ json_t *o = json_loads(json, 0, NULL);
        assert_non_null(o);
        assert_int_equal(json_integer_value(json_object_get(o, "calls")), 2);
        assert_int_equal(json_integer_value(json_object_get(o, "unknown_cost_calls")), 1);
        assert_true(json_number_value(json_object_get(o, "spent_usd")) == 0.25);
        json_t *p = json_array_get(json_object_get(o, "by_purpose"), 0);
        assert_string_equal(json_string_value(json_object_get(p, "purpose")), "routine");
        assert_int_equal(json_integer_value(json_object_get(p, "unknown_cost_calls")), 1);
        assert_true(json_is_null(json_object_get(o, "budget_usd")));
}

/* ---- the UTC month ---- */

static struct model_usage costs(double usd) {
        return (struct model_usage){.input_tokens = 1, .output_tokens = 1, .cost_usd = usd, .cost_reported = true};
}

static void test_month_boundary(void **state) {
        int64_t from, to;
        char name[8];
        assert_int_equal(spend_month(DEC_1 - 1, &from, &to, name), 0);
        assert_string_equal(name, "2026-11");
        assert_true(from == DEC_1 - 30 * DAY_MS && to == DEC_1);
        assert_int_equal(spend_month(DEC_1, &from, &to, name), 0);
        assert_string_equal(name, "2026-12");
        assert_true(from == DEC_1 && to == JAN_1);
        assert_int_equal(spend_month(JAN_1 - 1, &from, &to, name), 0); /* December ends the year */
        assert_true(from == DEC_1 && to == JAN_1);
        assert_int_equal(spend_month(JAN_1, &from, &to, name), 0);
        assert_string_equal(name, "2027-01");

        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        struct model_usage u = costs(1);
        assert_int_equal(spend_record(s, DEC_1 - 1, "chat", NULL, "m", &u), 0); /* 23:59:59.999 on Nov 30 */
        u = costs(2);
        assert_int_equal(spend_record(s, DEC_1, "chat", NULL, "m", &u), 0);
        u = costs(4);
        assert_int_equal(spend_record(s, DEC_1 + 2 * DAY_MS + 5, "evolution", NULL, "m", &u), 0);
        u = costs(8);
        assert_int_equal(spend_record(s, JAN_1, "chat", NULL, "m", &u), 0);

        _cleanup_free_ char *nov = NULL, *dec = NULL;
        assert_int_equal(spend_summary_json(s, DEC_1 - DAY_MS, &nov), 0);
        assert_int_equal(spend_summary_json(s, JAN_1 - 1, &dec), 0);
        _cleanup_json_ json_t *n = json_loads(nov, 0, NULL), *d = json_loads(dec, 0, NULL);
        assert_string_equal(json_string_value(json_object_get(n, "month")), "2026-11");
        assert_true(json_number_value(json_object_get(n, "spent_usd")) == 1);
        assert_string_equal(json_string_value(json_object_get(d, "month")), "2026-12");
        assert_true(json_number_value(json_object_get(d, "spent_usd")) == 6);
        assert_int_equal(json_integer_value(json_object_get(d, "calls")), 2);
        json_t *days = json_object_get(d, "by_day");
        assert_int_equal(json_array_size(days), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(days, 0), "day")), "2026-12-01");
        assert_string_equal(json_string_value(json_object_get(json_array_get(days, 1), "day")), "2026-12-03");
        assert_true(json_number_value(json_object_get(json_array_get(days, 1), "cost_usd")) == 4);
        json_t *by = json_object_get(d, "by_purpose");
        assert_int_equal(json_array_size(by), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(by, 0), "purpose")), "chat");
        assert_string_equal(json_string_value(json_object_get(json_array_get(by, 1), "purpose")), "evolution");
}

/* ---- the budget ---- */

static void test_budget_pauses_autonomous_work_only(void **state) {
        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        int64_t now = DEC_1 + 10 * DAY_MS;
        double b = -1;
        assert_int_equal(spend_budget_get(s, &b), 0); /* none by default */
        assert_true(spend_allows_at(s, "routine", now));
        assert_int_equal(spend_budget_set(s, true, 1.0, now), 0);
        assert_int_equal(spend_budget_get(s, &b), 1);
        assert_true(b == 1.0);

        struct model_usage u = costs(0.6);
        assert_int_equal(spend_record(s, now, "routine", NULL, "m", &u), 0);
        assert_true(spend_allows_at(s, "routine", now));
        assert_true(spend_allows_at(s, "health", now));
        assert_int_equal(told.calls, 0);
        /* an unknown cost does not move the spend */
        u = (struct model_usage){.input_tokens = 5};
        assert_int_equal(spend_record(s, now, "routine", NULL, "unpriced-model", &u), 0);
        assert_true(spend_allows_at(s, "routine", now));

        u = costs(0.4); /* reaches 1.00 exactly: reached is over */
        assert_int_equal(spend_record(s, now + 1, "chat", NULL, "m", &u), 0);
        assert_int_equal(told.calls, 1);
        assert_non_null(strstr(told.last, "Kernel notice"));
        assert_non_null(strstr(told.last, "$1.00"));
        assert_non_null(strstr(told.last, "2026-12"));
        assert_false(spend_allows_at(s, "routine", now + 2));
        assert_false(spend_allows_at(s, "health", now + 2));
        assert_false(spend_allows_at(s, "some-new-kind-of-work", now + 2)); /* unknown purposes are autonomous */
        assert_false(spend_allows_at(s, NULL, now + 2));
        assert_true(spend_allows_at(s, "chat", now + 2));
        assert_true(spend_allows_at(s, "evolution", now + 2));
        assert_true(spend_allows_at(s, "reflection", now + 2));
        u = costs(0.3);
        assert_int_equal(spend_record(s, now + 3, "evolution", NULL, "m", &u), 0);
        assert_int_equal(told.calls, 1); /* once a month, however often it is checked */

        _cleanup_free_ char *json = NULL;
        assert_int_equal(spend_summary_json(s, now + 4, &json), 0);
        _cleanup_json_ json_t *o = json_loads(json, 0, NULL);
        assert_true(json_is_true(json_object_get(o, "over_budget")));
        assert_string_equal(json_string_value(json_array_get(json_object_get(o, "paused"), 0)), "routine");
        assert_string_equal(json_string_value(json_array_get(json_object_get(o, "paused"), 1)), "health");

        /* a new kernel (restart) does not say it again this month */
        _cleanup_(spend_freep) struct spend *again = new_spend(NULL);
        assert_false(spend_allows_at(again, "routine", now + 5));
        assert_int_equal(told.calls, 1);

        /* raised: autonomous work goes on */
        assert_int_equal(spend_budget_set(s, true, 5, now + 6), 0);
        assert_true(spend_allows_at(s, "routine", now + 6));
        /* the next month starts from 0 */
        assert_int_equal(spend_budget_set(s, true, 1, now + 7), 0);
        assert_false(spend_allows_at(s, "routine", now + 7));
        assert_true(spend_allows_at(s, "routine", JAN_1));
        u = costs(1.5);
        assert_int_equal(spend_record(s, JAN_1 + 1, "health", NULL, "m", &u), 0);
        assert_int_equal(told.calls, 2); /* January's notice */
        assert_non_null(strstr(told.last, "2027-01"));
        assert_false(spend_allows_at(s, "health", JAN_1 + 2));
        /* removed: no budget, nothing paused */
        assert_int_equal(spend_budget_set(s, false, 0, JAN_1 + 3), 0);
        assert_int_equal(spend_budget_get(s, &b), 0);
        assert_true(spend_allows_at(s, "health", JAN_1 + 3));
}

static void test_notice_retried_until_posted(void **state) {
        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        int64_t now = DEC_1 + DAY_MS;
        told.fail = 1; /* the chat is not up yet */
        struct model_usage u = costs(3);
        assert_int_equal(spend_record(s, now, "chat", NULL, "m", &u), 0);
        /* a budget set below the month's spend pauses at once */
        assert_int_equal(spend_budget_set(s, true, 2, now), 0);
        assert_int_equal(told.calls, 0);
        assert_false(spend_allows_at(s, "routine", now));
        assert_int_equal(told.calls, 1);
        assert_false(spend_allows_at(s, "routine", now));
        assert_int_equal(told.calls, 1);
        /* zero is a budget: no autonomous spend at all */
        assert_int_equal(spend_budget_set(s, true, 0, JAN_1), 0);
        assert_false(spend_allows_at(s, "routine", JAN_1));
}

static void test_budget_validation(void **state) {
        reset();
        _cleanup_(spend_freep) struct spend *s = new_spend(NULL);
        assert_int_equal(spend_budget_set(s, true, 12.5, DEC_1), 0);
        const double bad[] = {-0.01, SPEND_BUDGET_MAX + 1, NAN, INFINITY, -INFINITY};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                assert_int_equal(spend_budget_set(s, true, bad[i], DEC_1), -EINVAL);
        double b = 0;
        assert_int_equal(spend_budget_get(s, &b), 1);
        assert_true(b == 12.5); /* unchanged */
        assert_int_equal(spend_budget_set(s, true, SPEND_BUDGET_MAX, DEC_1), 0);
        assert_int_equal(spend_budget_set(s, true, 0.001, DEC_1), 0); /* kept as given, not rounded to 0 */
        assert_int_equal(spend_budget_get(s, &b), 1);
        assert_true(b == 0.001);
        /* a stored value that is not a number is no budget, not a crash */
        assert_int_equal(db_setting_set(g_db, "spend.budget_usd", "lots"), 0);
        assert_int_equal(spend_budget_get(s, &b), 0);
}

static int group_setup(void **state) {
        snprintf(seed_dir, sizeof seed_dir, "/tmp/seed-test-spend-XXXXXX");
        if (!mkdtemp(seed_dir) || pg_start(seed_dir, &g_pg) < 0)
                return -1;
        _cleanup_free_ char *ci = NULL;
        if (pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci) < 0 || db_connect(ci, &g_db) < 0)
                return -1;
        return start_server(state);
}

static int group_teardown(void **state) {
        stop_server(state);
        db_close(g_db);
        pg_stop(g_pg);
        rm_rf(seed_dir);
        return 0;
}

int main(void) {
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "cannot drop root\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cost_from_the_provider),
                cmocka_unit_test(test_cost_from_the_price_table),
                cmocka_unit_test(test_cost_unknown),
                cmocka_unit_test(test_month_boundary),
                cmocka_unit_test(test_budget_pauses_autonomous_work_only),
                cmocka_unit_test(test_notice_retried_until_posted),
                cmocka_unit_test(test_budget_validation),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
