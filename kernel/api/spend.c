/* spend.c (api) — GET and POST spend. See spend.h. */
#include "api/spend.h"
#include "api/reply.h"
#include "base/json.h"
#include "base/log.h"
#include "spend/spend.h"

#include <math.h>

#define NO_SPEND "spending is not available: the kernel has no kernel database"
#define BAD_BUDGET "the body must be {\"budget_usd\": a number of US dollars from 0 to 1000000, or null for no budget}"

static int summary(struct spend *s, int *ret_status, char **ret_json) {
        char *json = NULL;
        int r = spend_summary_json(s, wall_ms(), &json);
        if (r < 0)
                return log_error_errno(r, "could not read this month's spend: %m");
        *ret_status = 200;
        *ret_json = json;
        return 0;
}

int api_spend_h_get(struct spend *s, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!s)
                return api_reply_error(503, NO_SPEND, ret_status, ret_json);
        return summary(s, ret_status, ret_json);
}

int api_spend_h_set(struct spend *s, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!s)
                return api_reply_error(503, NO_SPEND, ret_status, ret_json);
        if (call->body_len > API_SPEND_BODY_MAX)
                return api_reply_error(413, "the body is too large (at most 1 KiB)", ret_status, ret_json);
        _cleanup_json_ json_t *body = json_loadb(call->body ? call->body : "", call->body_len, JSON_REJECT_DUPLICATES,
                                                 NULL);
        json_t *v = json_object_get(body, "budget_usd");
        if (!json_is_object(body) || json_object_size(body) != 1 || !v || (!json_is_null(v) && !json_is_number(v)))
                return api_reply_error(400, BAD_BUDGET, ret_status, ret_json);
        double usd = json_is_null(v) ? 0 : json_number_value(v);
        if (!json_is_null(v) && (!isfinite(usd) || usd < 0 || usd > SPEND_BUDGET_MAX))
                return api_reply_error(400, "budget_usd must be from 0 to 1000000 US dollars (or null for no budget)",
                                       ret_status, ret_json);
        int r = spend_budget_set(s, !json_is_null(v), usd, wall_ms());
        if (r < 0)
                return log_error_errno(r, "could not set the spend budget: %m");
        return summary(s, ret_status, ret_json);
}
