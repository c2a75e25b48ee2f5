/* spend.h — what the Seed's model calls cost, and the owner's monthly budget
 * (issue 18 "Spend").
 *
 * Every model call is recorded (table model_usage, through kernel/db) with
 * its purpose, tokens and cost: the provider's reported cost when it reports
 * one (OpenRouter's usage.cost), else the price table (prices.h: built in,
 * overridden by seed.yaml's spend.prices), else unknown — stored as NULL and
 * counted apart, never as 0.
 *
 * The budget is in USD per UTC calendar month, kept in kernel_settings
 * ("spend.budget_usd"; none by default). Once the month's known costs reach
 * it, autonomous work is paused: spend_allows() says no for the purposes the
 * table in spend.c marks autonomous (routine, health, and any purpose it
 * does not know), yes for the owner's (chat, evolution, reflection, probe).
 * The first time in a month that happens, one kernel message says so in the
 * chat (through cfg.notify); "spend.notice_month" remembers the month.
 *
 * Safe to call from several threads. */
#pragma once

#include "base/base.h"
#include "spend/prices.h"

struct db;
struct model_usage;

#define SPEND_BUDGET_MAX 1000000.0     /* USD a month, at most */
#define SPEND_JSON_MAX (256 * 1024)

struct spend_config {
        struct db *kdb;                /* borrowed */
        /* seed.yaml's spend.prices (validated by kernel/config; parsed and
         * copied here); NULL or empty: the built-in table only. */
        char *const *prices;
        /* Posts text in the chat as a kernel message (not the owner's);
         * >= 0 when it was posted. May be NULL (then never posted, and
         * tried again at the next check). Called without locks held by
         * the caller, from the thread that recorded a call or set the
         * budget. */
        int (*notify)(void *userdata, const char *text);
        void *userdata;
};

struct spend;

/* -EINVAL for a missing kdb or a price entry spend_price_parse refuses. */
int spend_new(const struct spend_config *cfg, struct spend **ret);
void spend_free(struct spend *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct spend *, spend_free)

/* The UTC calendar month holding now_ms: [*ret_from, *ret_to) in ms, and
 * its name "YYYY-MM" (ret_name: at least 8 bytes, may be NULL). */
int spend_month(int64_t now_ms, int64_t *ret_from, int64_t *ret_to, char *ret_name);

/* The cost of one call: *ret_source "provider" or "prices" and *ret_usd,
 * or -ENOENT when it is unknown. Static strings. */
int spend_cost(const struct spend *s, const char *model, const struct model_usage *u, const char **ret_source,
               double *ret_usd);

/* Records one call made at at_ms (a model_usage_fn's arguments), then, past
 * the budget, posts the month's notice if it was not yet. Logs its own
 * failure (a call is never failed for its accounting). */
int spend_record(struct spend *s, int64_t at_ms, const char *purpose, const char *reference, const char *model,
                 const struct model_usage *u);

/* Whether work of purpose may call the model now: always for the owner's
 * purposes; for autonomous ones only while the month's spend is below the
 * budget (or there is none). A database error answers no for autonomous
 * purposes (logged). Posts the month's notice when it pauses work and it
 * was not yet posted. */
bool spend_allows(struct spend *s, const char *purpose);
bool spend_allows_at(struct spend *s, const char *purpose, int64_t now_ms);
/* Whether purpose is autonomous work (paused over budget). */
bool spend_purpose_autonomous(const char *purpose);

/* The budget in USD: 1 and *ret_usd when one is set, 0 when none. */
int spend_budget_get(struct spend *s, double *ret_usd);
/* Sets (usd >= 0, finite, at most SPEND_BUDGET_MAX) or clears (has = false)
 * the budget; -EINVAL for a value out of range. Then checks it at now_ms
 * (a budget set below this month's spend posts the notice). */
int spend_budget_set(struct spend *s, bool has, double usd, int64_t now_ms);

/* The month holding now_ms as JSON (caller frees): {"month", "from", "to",
 * "budget_usd" (null: none), "spent_usd", "over_budget", "paused":
 * [autonomous purposes], "calls", "unknown_cost_calls", "by_purpose":
 * [{purpose, calls, input_tokens, output_tokens, cost_usd,
 * unknown_cost_calls}], "by_day": [{day, calls, cost_usd,
 * unknown_cost_calls}]}. */
int spend_summary_json(struct spend *s, int64_t now_ms, char **ret_json);
