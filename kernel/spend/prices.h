/* prices.h — what a model call costs when its provider does not say: a table
 * of USD per million input and output tokens by model name prefix, in code
 * (spend_prices_builtin) and overridable by seed.yaml's spend.prices, each
 * entry the text "PREFIX INPUT OUTPUT" (spend_price_parse, the one parser:
 * kernel/config validates with it). Base only, so kernel/config links it
 * without the database. No memory is allocated: every price is a value. */
#pragma once

#include "base/base.h"

#define SPEND_PREFIX_MAX 128          /* bytes of a model name prefix */
#define SPEND_PRICE_MAX 10000.0       /* USD per million tokens, at most */
#define SPEND_PRICE_TEXT_MAX 256      /* one "PREFIX INPUT OUTPUT" entry */

struct spend_price {
        char prefix[SPEND_PREFIX_MAX + 1]; /* 1..SPEND_PREFIX_MAX printable ASCII, no spaces */
        double input_per_mtok, output_per_mtok; /* 0..SPEND_PRICE_MAX, finite */
};

/* "PREFIX INPUT OUTPUT" (single spaces or tabs between; numbers plain
 * decimals such as 3, 0.25 or 15.00, no exponent, sign or hex). On -EINVAL
 * *ret_why (static text, may be NULL) says what is wrong; *ret written only
 * on success. */
int spend_price_parse(const char *text, struct spend_price *ret, const char **ret_why);

/* The built-in table (static data), bare model names as the providers that
 * report no cost name them (Anthropic, OpenAI). */
const struct spend_price *spend_prices_builtin(size_t *ret_n);

/* The price for model: the longest prefix of model in overrides (seed.yaml,
 * may be NULL), else in the built-in table; with no match, the same for the
 * part after model's last '/' ("anthropic/claude-…" → "claude-…"). -ENOENT
 * when none matches: the cost is unknown. *ret borrowed from the tables. */
int spend_price_find(const struct spend_price *overrides, size_t n_overrides, const char *model,
                     const struct spend_price **ret);

/* tokens × price / 10^6, in USD; -EINVAL for negative token counts. */
int spend_price_cost(const struct spend_price *p, int64_t input_tokens, int64_t output_tokens, double *ret_usd);
