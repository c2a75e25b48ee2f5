/* prices.c — see prices.h. */
#include "spend/prices.h"

#include <math.h>

/* USD per million tokens, as the providers list them (December 2026). A
 * prefix matches every dated or versioned name that starts with it; the
 * longest match wins ("gpt-4o-mini" before "gpt-4o"). seed.yaml's
 * spend.prices overrides any of these, or adds models (local ones at 0). */
static const struct spend_price builtin[] = {
        /* Anthropic */
        {"claude-opus-4-5", 5, 25},
        {"claude-opus-4", 15, 75},
        {"claude-sonnet-4", 3, 15},
        {"claude-haiku-4-5", 1, 5},
        {"claude-3-7-sonnet", 3, 15},
        {"claude-3-5-sonnet", 3, 15},
        {"claude-3-5-haiku", 0.8, 4},
        {"claude-3-opus", 15, 75},
        {"claude-3-haiku", 0.25, 1.25},
        /* OpenAI */
        {"gpt-5", 1.25, 10},
        {"gpt-5-mini", 0.25, 2},
        {"gpt-5-nano", 0.05, 0.4},
        {"gpt-4.1", 2, 8},
        {"gpt-4.1-mini", 0.4, 1.6},
        {"gpt-4.1-nano", 0.1, 0.4},
        {"gpt-4o", 2.5, 10},
        {"gpt-4o-mini", 0.15, 0.6},
        {"o3", 2, 8},
        {"o3-mini", 1.1, 4.4},
        {"o4-mini", 1.1, 4.4},
};

const struct spend_price *spend_prices_builtin(size_t *ret_n) {
        *ret_n = ARRAY_SIZE(builtin);
        return builtin;
}

/* A plain decimal in [0, SPEND_PRICE_MAX]: digits, at most one '.', at most
 * 12 digits on each side. */
static int parse_amount(const char *s, size_t len, double *ret) {
        char tmp[32];
        size_t digits = 0, dots = 0;
        if (len == 0 || len >= sizeof tmp)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '.')
                        dots++;
                else if (s[i] >= '0' && s[i] <= '9')
                        digits++;
                else
                        return -EINVAL;
        }
        if (dots > 1 || digits == 0)
                return -EINVAL;
        memcpy(tmp, s, len);
        tmp[len] = 0;
        double v = strtod(tmp, NULL);
        if (!isfinite(v) || v < 0 || v > SPEND_PRICE_MAX)
                return -ERANGE;
        *ret = v;
        return 0;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

int spend_price_parse(const char *text, struct spend_price *ret, const char **ret_why) {
        const char *why = NULL;
        const char *field[3];
        size_t flen[3], n = 0;
        if (!text || strlen(text) > SPEND_PRICE_TEXT_MAX) {
                why = "must be at most 256 bytes";
                goto bad;
        }
        for (const char *p = text; *p;) {
                while (is_blank(*p))
                        p++;
                if (!*p)
                        break;
                const char *start = p;
                while (*p && !is_blank(*p))
                        p++;
                if (n == 3) {
                        n++;
                        break;
                }
                field[n] = start;
                flen[n++] = (size_t)(p - start);
        }
        if (n != 3) {
                why = "expected \"PREFIX INPUT OUTPUT\": a model name prefix and its USD per million input and "
                      "output tokens";
                goto bad;
        }
        if (flen[0] > SPEND_PREFIX_MAX) {
                why = "the model name prefix is longer than 128 bytes";
                goto bad;
        }
        for (size_t i = 0; i < flen[0]; i++)
                if ((unsigned char)field[0][i] < 0x21 || (unsigned char)field[0][i] > 0x7e) {
                        why = "the model name prefix must be printable ASCII";
                        goto bad;
                }
        struct spend_price p = {0};
        int r = parse_amount(field[1], flen[1], &p.input_per_mtok);
        if (r >= 0)
                r = parse_amount(field[2], flen[2], &p.output_per_mtok);
        if (r == -ERANGE) {
                why = "a price must be from 0 to 10000 USD per million tokens";
                goto bad;
        }
        if (r < 0) {
                why = "a price must be a plain decimal number of USD per million tokens (e.g. 3 or 0.25)";
                goto bad;
        }
        memcpy(p.prefix, field[0], flen[0]);
        p.prefix[flen[0]] = 0;
        *ret = p;
        return 0;
bad:
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
}

static const struct spend_price *longest(const struct spend_price *t, size_t n, const char *name) {
        const struct spend_price *best = NULL;
        for (size_t i = 0; t && i < n; i++)
                if (startswith(name, t[i].prefix) && (!best || strlen(t[i].prefix) > strlen(best->prefix)))
                        best = &t[i];
        return best;
}

static const struct spend_price *find_one(const struct spend_price *over, size_t n_over, const char *name) {
        const struct spend_price *p = longest(over, n_over, name);
        return p ? p : longest(builtin, ARRAY_SIZE(builtin), name);
}

int spend_price_find(const struct spend_price *overrides, size_t n_overrides, const char *model,
                     const struct spend_price **ret) {
        if (strempty(model))
                return -ENOENT;
        const struct spend_price *p = find_one(overrides, n_overrides, model);
        const char *slash = strrchr(model, '/');
        if (!p && slash && slash[1])
                p = find_one(overrides, n_overrides, slash + 1);
        if (!p)
                return -ENOENT;
        *ret = p;
        return 0;
}

int spend_price_cost(const struct spend_price *p, int64_t input_tokens, int64_t output_tokens, double *ret_usd) {
        if (!p || input_tokens < 0 || output_tokens < 0)
                return -EINVAL;
        *ret_usd = ((double)input_tokens * p->input_per_mtok + (double)output_tokens * p->output_per_mtok) / 1e6;
        return 0;
}
