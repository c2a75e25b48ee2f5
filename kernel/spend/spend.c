/* spend.c — see spend.h. */
#include "spend/spend.h"
#include "base/json.h"
#include "base/log.h"
#include "db/db.h"
#include "model/model.h"

#include <math.h>
#include <pthread.h>
#include <time.h>

#define BUDGET_KEY "spend.budget_usd"
#define NOTICE_KEY "spend.notice_month"
#define MONTH_NAME_LEN 8 /* "YYYY-MM" */

/* Who starts the work that calls the model with each purpose: the owner's
 * own (never paused) or the kernel's on its own (paused over budget). A
 * purpose not listed is autonomous: a new kind of work is paused until it
 * is classed here. */
static const struct {
        const char *purpose;
        bool autonomous;
        const char *why;
} purposes[] = {
        {"chat", false, "the owner is talking to the Seed"},
        {"evolution", false, "an evolution the owner asked for (in the chat or the control plane)"},
        {"reflection", false, "the end of such an evolution: what it learned"},
        {"probe", false, "the owner checks a model before choosing it"},
        {"routine", true, "an agent routine running on its schedule"},
        {"health", true, "the doctor's diagnosis and automatic fixes"},
};

struct spend {
        struct db *kdb;
        struct spend_price *prices; /* seed.yaml's, parsed */
        size_t n_prices;
        int (*notify)(void *userdata, const char *text);
        void *userdata;
        pthread_mutex_t notice_lock; /* one notice a month, even with calls racing */
};

bool spend_purpose_autonomous(const char *purpose) {
        for (size_t i = 0; purpose && i < ARRAY_SIZE(purposes); i++)
                if (streq(purposes[i].purpose, purpose))
                        return purposes[i].autonomous;
        return true;
}

int spend_new(const struct spend_config *cfg, struct spend **ret) {
        if (!cfg || !cfg->kdb)
                return -EINVAL;
        size_t n = cfg->prices ? strv_length(cfg->prices) : 0;
        _cleanup_free_ struct spend_price *prices = calloc(n ? n : 1, sizeof *prices);
        if (!prices)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *why = NULL;
                if (spend_price_parse(cfg->prices[i], &prices[i], &why) < 0)
                        return log_error_errno(-EINVAL, "spend.prices[%zu]: %s", i, why ? why : "malformed");
        }
        struct spend *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->kdb = cfg->kdb;
        s->prices = TAKE_PTR(prices);
        s->n_prices = n;
        s->notify = cfg->notify;
        s->userdata = cfg->userdata;
        pthread_mutex_init(&s->notice_lock, NULL);
        *ret = s;
        return 0;
}

void spend_free(struct spend *s) {
        if (!s)
                return;
        pthread_mutex_destroy(&s->notice_lock);
        free(s->prices);
        free(s);
}

int spend_month(int64_t now_ms, int64_t *ret_from, int64_t *ret_to, char *ret_name) {
        if (now_ms < 0)
                return -EINVAL;
        time_t t = (time_t)(now_ms / 1000);
        struct tm tm;
        if (!gmtime_r(&t, &tm))
                return -EOVERFLOW;
        struct tm start = {.tm_year = tm.tm_year, .tm_mon = tm.tm_mon, .tm_mday = 1};
        struct tm next = {.tm_year = tm.tm_year + (tm.tm_mon == 11), .tm_mon = (tm.tm_mon + 1) % 12, .tm_mday = 1};
        time_t from = timegm(&start), to = timegm(&next);
        if (from == (time_t)-1 || to == (time_t)-1)
                return -EOVERFLOW;
        if (ret_name) {
                char name[32];
                snprintf(name, sizeof name, "%04d-%02d", (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100);
                memcpy(ret_name, name, MONTH_NAME_LEN - 1);
                ret_name[MONTH_NAME_LEN - 1] = 0;
        }
        *ret_from = (int64_t)from * 1000;
        *ret_to = (int64_t)to * 1000;
        return 0;
}

int spend_cost(const struct spend *s, const char *model, const struct model_usage *u, const char **ret_source,
               double *ret_usd) {
        if (u->cost_reported && isfinite(u->cost_usd) && u->cost_usd >= 0) {
                *ret_source = "provider";
                *ret_usd = u->cost_usd;
                return 0;
        }
        const struct spend_price *p = NULL;
        double usd = 0;
        int r = spend_price_find(s->prices, s->n_prices, model, &p);
        if (r < 0)
                return r;
        if ((r = spend_price_cost(p, u->input_tokens, u->output_tokens, &usd)) < 0)
                return -ENOENT; /* nonsense token counts: the cost is not known */
        *ret_source = "prices";
        *ret_usd = usd;
        return 0;
}

int spend_budget_get(struct spend *s, double *ret_usd) {
        _cleanup_free_ char *v = NULL;
        int r = db_setting_get(s->kdb, BUDGET_KEY, &v);
        if (r == -ENOENT || (r >= 0 && strempty(v)))
                return 0;
        if (r < 0)
                return r;
        char *end = NULL;
        double usd = strtod(v, &end);
        if (end == v || *end || !isfinite(usd) || usd < 0 || usd > SPEND_BUDGET_MAX) {
                log_warn("the stored spend budget '%.40s' is not a number: no budget is in force", v);
                return 0;
        }
        *ret_usd = usd;
        return 1;
}

/* What the month's spend is against the budget: 1 over (or at) it, 0 not
 * (or no budget); *ret_spent and *ret_budget when over. */
static int over_budget(struct spend *s, int64_t now_ms, double *ret_spent, double *ret_budget) {
        double budget = 0, spent = 0;
        int64_t from, to;
        int r = spend_budget_get(s, &budget);
        if (r <= 0)
                return r;
        if ((r = spend_month(now_ms, &from, &to, NULL)) < 0 || (r = db_usage_cost_between(s->kdb, from, to, &spent)) < 0)
                return r;
        if (spent < budget)
                return 0;
        *ret_spent = spent;
        *ret_budget = budget;
        return 1;
}

/* Over budget: says so in the chat, once a month. */
static void notice_once(struct spend *s, int64_t now_ms, double spent, double budget) {
        char month[MONTH_NAME_LEN];
        int64_t from, to;
        if (!s->notify || spend_month(now_ms, &from, &to, month) < 0)
                return;
        pthread_mutex_lock(&s->notice_lock);
        _cleanup_free_ char *done = NULL, *text = NULL;
        int r = db_setting_get(s->kdb, NOTICE_KEY, &done);
        if (r >= 0 && streq(done, month))
                goto out;
        if (r < 0 && r != -ENOENT)
                goto out; /* logged by db: tried again at the next check */
        if (xasprintf(&text,
                      "Kernel notice: this month's model spend (%s UTC) is $%.2f, which reached the budget of "
                      "$%.2f. Autonomous work — routines, diagnosis and automatic fixes — is paused until the "
                      "month ends or the budget is raised (Spending in the control plane). The chat and the "
                      "evolutions you start go on.",
                      month, spent, budget) < 0)
                goto out;
        if ((r = s->notify(s->userdata, text)) < 0) {
                log_warn("could not post the spend notice in the chat (%s): will try again", strerror(-r));
                goto out;
        }
        log_info("this month's model spend $%.2f reached the budget $%.2f: autonomous work is paused", spent,
                 budget);
        if (db_setting_set(s->kdb, NOTICE_KEY, month) < 0)
                log_warn("could not remember that the spend notice of %s was posted", month);
out:
        pthread_mutex_unlock(&s->notice_lock);
}

/* Checks the budget at now_ms; 1 = over it (the notice posted once). */
static int check(struct spend *s, int64_t now_ms) {
        double spent = 0, budget = 0;
        int r = over_budget(s, now_ms, &spent, &budget);
        if (r > 0)
                notice_once(s, now_ms, spent, budget);
        return r;
}

int spend_record(struct spend *s, int64_t at_ms, const char *purpose, const char *reference, const char *model,
                 const struct model_usage *u) {
        if (!s || !u)
                return -EINVAL;
        const char *source = NULL;
        double usd = 0;
        if (spend_cost(s, model, u, &source, &usd) < 0)
                source = NULL; /* unknown: recorded as such */
        struct db_usage row = {.at = at_ms, .purpose = purpose, .reference = reference, .model = model,
                               .input_tokens = u->input_tokens, .output_tokens = u->output_tokens,
                               .cache_read_tokens = u->cache_read_tokens, .cache_write_tokens = u->cache_write_tokens,
                               .cost_source = source, .cost_usd = usd};
        _cleanup_free_ char *err = NULL;
        int r = db_usage_insert(s->kdb, &row, &err);
        if (r < 0) {
                log_warn("cannot record model usage: %s", err ? err : strerror(-r));
                return r;
        }
        if (source)
                (void)check(s, at_ms);
        return 0;
}

bool spend_allows_at(struct spend *s, const char *purpose, int64_t now_ms) {
        if (!spend_purpose_autonomous(purpose))
                return true;
        if (!s)
                return false;
        int r = check(s, now_ms);
        if (r < 0)
                log_warn("cannot read this month's spend (%s): %s work waits", strerror(-r), purpose ? purpose : "?");
        return r == 0;
}

bool spend_allows(struct spend *s, const char *purpose) { return spend_allows_at(s, purpose, wall_ms()); }

int spend_budget_set(struct spend *s, bool has, double usd, int64_t now_ms) {
        char v[64] = "";
        if (has && (!isfinite(usd) || usd < 0 || usd > SPEND_BUDGET_MAX))
                return -EINVAL;
        if (has)
                snprintf(v, sizeof v, "%.10g", usd); /* as given: $0.001 is not rounded to no spend at all */
        int r = db_setting_set(s->kdb, BUDGET_KEY, v);
        if (r < 0)
                return r;
        log_info("the owner %s the monthly spend budget%s%s", has ? "set" : "removed", has ? " to $" : "",
                 has ? v : "");
        (void)check(s, now_ms);
        return 0;
}

static int load_array(const char *text, json_t **ret) {
        json_t *a = json_loads(text, 0, NULL);
        if (!json_is_array(a)) {
                json_decref(a);
                return -EBADMSG;
        }
        *ret = a;
        return 0;
}

int spend_summary_json(struct spend *s, int64_t now_ms, char **ret_json) {
        char month[MONTH_NAME_LEN];
        int64_t from, to;
        double budget = 0, spent = 0;
        _cleanup_free_ char *purpose_rows = NULL, *day_rows = NULL;
        _cleanup_json_ json_t *by_purpose = NULL, *by_day = NULL, *paused = json_array();
        int r = spend_month(now_ms, &from, &to, month);
        if (r < 0)
                return r;
        int has = spend_budget_get(s, &budget);
        if (has < 0)
                return has;
        if ((r = db_usage_by_purpose_json(s->kdb, from, to, SPEND_JSON_MAX / 2, &purpose_rows)) < 0 ||
            (r = db_usage_by_day_json(s->kdb, from, to, SPEND_JSON_MAX / 2, &day_rows)) < 0 ||
            (r = load_array(purpose_rows, &by_purpose)) < 0 || (r = load_array(day_rows, &by_day)) < 0)
                return r;
        if (!paused)
                return -ENOMEM;
        json_int_t calls = 0, unknown = 0;
        json_t *row;
        size_t i;
        json_array_foreach(by_purpose, i, row) {
                calls += json_integer_value(json_object_get(row, "calls"));
                unknown += json_integer_value(json_object_get(row, "unknown_cost_calls"));
                spent += json_number_value(json_object_get(row, "cost_usd"));
        }
        bool over = has && spent >= budget;
        for (i = 0; over && i < ARRAY_SIZE(purposes); i++)
                if (purposes[i].autonomous && json_array_append_new(paused, json_string(purposes[i].purpose)) < 0)
                        return -ENOMEM;
        _cleanup_json_ json_t *o = json_pack("{s:s, s:I, s:I, s:o, s:f, s:b, s:O, s:I, s:I, s:O, s:O}", "month", month,
                                             "from", (json_int_t)from, "to", (json_int_t)to, "budget_usd",
                                             has ? json_real(budget) : json_null(), "spent_usd", spent, "over_budget",
                                             over, "paused", paused, "calls", calls, "unknown_cost_calls", unknown,
                                             "by_purpose", by_purpose, "by_day", by_day);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!text)
                return -ENOMEM;
        *ret_json = text;
        return 0;
}
