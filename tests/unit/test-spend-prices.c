/* Unit tests for kernel/spend/prices.c: the price table as data, its one
 * parser, the longest-prefix match and the arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "spend/prices.h"

static void test_builtin_table_is_valid(void **state) {
        size_t n = 0;
        const struct spend_price *t = spend_prices_builtin(&n);
        assert_true(n > 10);
        for (size_t i = 0; i < n; i++) {
                assert_true(strlen(t[i].prefix) > 0 && strlen(t[i].prefix) <= SPEND_PREFIX_MAX);
                assert_true(t[i].input_per_mtok >= 0 && t[i].input_per_mtok <= SPEND_PRICE_MAX);
                assert_true(t[i].output_per_mtok >= 0 && t[i].output_per_mtok <= SPEND_PRICE_MAX);
                for (size_t j = 0; j < i; j++)
                        assert_string_not_equal(t[i].prefix, t[j].prefix); /* one price per prefix */
        }
}

static void test_parse(void **state) {
        struct spend_price p = {0};
        const char *why = NULL;
        assert_int_equal(spend_price_parse("my-model 0.25 1.5", &p, &why), 0);
        assert_string_equal(p.prefix, "my-model");
        assert_true(p.input_per_mtok == 0.25 && p.output_per_mtok == 1.5);
        assert_int_equal(spend_price_parse("\tlocal/qwen  0\t0 ", &p, &why), 0);
        assert_string_equal(p.prefix, "local/qwen");
        assert_true(p.input_per_mtok == 0 && p.output_per_mtok == 0);

        struct spend_price untouched = {.prefix = "keep", .input_per_mtok = 7};
        const char *bad[] = {"", "m", "m 1", "m 1 2 3", "m -1 2", "m 1 +2", "m 1e2 2", "m 0x10 2", "m 1..2 2",
                             "m . 2", "m nan 2", "m inf 2", "m 10000.01 1", "m\x01x 1 2", "m\xc3\xa9 1 2"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                p = untouched;
                why = NULL;
                assert_int_equal(spend_price_parse(bad[i], &p, &why), -EINVAL);
                assert_non_null(why);
                assert_string_equal(p.prefix, "keep"); /* written only on success */
        }
        char longp[SPEND_PREFIX_MAX + 16];
        memset(longp, 'a', SPEND_PREFIX_MAX + 1);
        strcpy(longp + SPEND_PREFIX_MAX + 1, " 1 2");
        assert_int_equal(spend_price_parse(longp, &p, &why), -EINVAL);
        longp[SPEND_PREFIX_MAX] = ' '; /* exactly SPEND_PREFIX_MAX bytes */
        assert_int_equal(spend_price_parse(longp, &p, &why), 0);
        assert_int_equal(strlen(p.prefix), SPEND_PREFIX_MAX);
        assert_int_equal(spend_price_parse(NULL, &p, &why), -EINVAL);
}

static void test_find_longest_prefix(void **state) {
        const struct spend_price *p = NULL;
        assert_int_equal(spend_price_find(NULL, 0, "gpt-4o-mini-2024-07-18", &p), 0);
        assert_string_equal(p->prefix, "gpt-4o-mini");
        assert_int_equal(spend_price_find(NULL, 0, "gpt-4o-2024-08-06", &p), 0);
        assert_string_equal(p->prefix, "gpt-4o");
        assert_int_equal(spend_price_find(NULL, 0, "claude-sonnet-4-5-20250929", &p), 0);
        assert_string_equal(p->prefix, "claude-sonnet-4");
        /* a vendor/ name: its part after the last '/' */
        assert_int_equal(spend_price_find(NULL, 0, "anthropic/claude-opus-4-5", &p), 0);
        assert_string_equal(p->prefix, "claude-opus-4-5");
        /* unknown: -ENOENT, never a price of 0 */
        p = NULL;
        assert_int_equal(spend_price_find(NULL, 0, "llama3.1:8b", &p), -ENOENT);
        assert_null(p);
        assert_int_equal(spend_price_find(NULL, 0, "", &p), -ENOENT);
        assert_int_equal(spend_price_find(NULL, 0, NULL, &p), -ENOENT);
        assert_int_equal(spend_price_find(NULL, 0, "vendor/", &p), -ENOENT);
}

static void test_overrides_win(void **state) {
        struct spend_price over[2];
        assert_int_equal(spend_price_parse("llama 0 0", &over[0], NULL), 0);
        assert_int_equal(spend_price_parse("gpt-4o 1 2", &over[1], NULL), 0);
        const struct spend_price *p = NULL;
        assert_int_equal(spend_price_find(over, 2, "llama3.1:8b", &p), 0);
        assert_ptr_equal(p, &over[0]);
        /* seed.yaml's entry wins over the built-in one, even a longer one */
        assert_int_equal(spend_price_find(over, 2, "gpt-4o-mini", &p), 0);
        assert_ptr_equal(p, &over[1]);
        assert_int_equal(spend_price_find(over, 2, "claude-3-haiku-20240307", &p), 0);
        assert_string_equal(p->prefix, "claude-3-haiku");
}

static void test_cost(void **state) {
        struct spend_price p;
        assert_int_equal(spend_price_parse("m 3 15", &p, NULL), 0);
        double usd = -1;
        assert_int_equal(spend_price_cost(&p, 1000000, 200000, &usd), 0);
        assert_true(usd > 5.999999 && usd < 6.000001); /* 3 + 0.2 × 15 */
        assert_int_equal(spend_price_cost(&p, 0, 0, &usd), 0);
        assert_true(usd == 0);
        usd = 42;
        assert_int_equal(spend_price_cost(&p, -1, 0, &usd), -EINVAL);
        assert_true(usd == 42);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_builtin_table_is_valid),
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_find_longest_prefix),
                cmocka_unit_test(test_overrides_win),
                cmocka_unit_test(test_cost),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
