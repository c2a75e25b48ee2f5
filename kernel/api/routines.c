/* routines.c (api) — the routes of routines and jobs. See routines.h. */
#include "api/routines.h"
#include "api/reply.h"
#include "base/json.h"
#include "base/log.h"

#include <ctype.h>

#define NO_ROUTINES "routines are not available: the kernel has no kernel database"

/* A routine's id (digits) or a job's name, as kernel/routines makes them. */
static bool param_valid(enum routines_kind kind, const char *p) {
        if (kind == ROUTINES_JOB)
                return routines_name_valid(p);
        if (!p || !*p || strlen(p) > 19)
                return false;
        for (; *p; p++)
                if (!isdigit((unsigned char)*p))
                        return false;
        return true;
}

/* 1 and answered when the call's body or parameter is wrong. */
static int refuse(enum routines_kind kind, const struct ctl_api_call *call, bool post, int *ret_status,
                  char **ret_json) {
        int r = 0;
        if (!param_valid(kind, call->param))
                r = api_reply_error(400, kind == ROUTINES_JOB ? "not a job name" : "not a routine id", ret_status,
                                    ret_json);
        else if (post && call->body_len > API_ROUTINES_BODY_MAX)
                r = api_reply_error(413, "the body is too large (at most 1 KiB)", ret_status, ret_json);
        else if (post && call->body_len > 0) {
                _cleanup_json_ json_t *o = json_loadb(call->body, call->body_len, JSON_REJECT_DUPLICATES, NULL);
                if (json_is_object(o))
                        return 0;
                r = api_reply_error(400, "the body must be a JSON object ({})", ret_status, ret_json);
        } else
                return 0;
        return r < 0 ? r : 1;
}

int api_routines_h_list(struct routines *r, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!r)
                return api_reply_error(503, NO_ROUTINES, ret_status, ret_json);
        char *json = NULL;
        int k = routines_list_json(r, &json);
        if (k < 0)
                return log_error_errno(k, "could not list the routines: %m");
        *ret_status = 200;
        *ret_json = json;
        return 0;
}

int api_routines_h_runs(struct routines *r, enum routines_kind kind, const struct ctl_api_call *call,
                        int *ret_status, char **ret_json) {
        if (!r)
                return api_reply_error(503, NO_ROUTINES, ret_status, ret_json);
        int k = refuse(kind, call, false, ret_status, ret_json);
        if (k != 0)
                return k < 0 ? k : 0;
        char *json = NULL;
        k = routines_runs_json(r, kind, call->param, &json);
        if (k == -ENOENT)
                return api_reply_error(404, kind == ROUTINES_JOB ? "no such job" : "no such routine", ret_status,
                                       ret_json);
        if (k < 0)
                return log_error_errno(k, "could not list the runs of %s: %m", call->param);
        *ret_status = 200;
        *ret_json = json;
        return 0;
}

int api_routines_h_act(struct routines *r, enum routines_kind kind, enum api_routines_action action,
                       const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!r)
                return api_reply_error(503, NO_ROUTINES, ret_status, ret_json);
        int k = refuse(kind, call, true, ret_status, ret_json);
        if (k != 0)
                return k < 0 ? k : 0;
        switch (action) {
        case API_ROUTINES_PAUSE:
        case API_ROUTINES_RESUME:
                k = routines_set_paused(r, kind, call->param, action == API_ROUTINES_PAUSE);
                break;
        case API_ROUTINES_RUN:
                k = routines_run_now(r, kind, call->param);
                break;
        case API_ROUTINES_DELETE:
                k = routines_delete(r, kind, call->param);
                break;
        }
        if (k == -ENOENT)
                return api_reply_error(404, kind == ROUTINES_JOB ? "no such job" : "no such routine", ret_status,
                                       ret_json);
        if (k == -EBUSY)
                return api_reply_error(409, "it runs already", ret_status, ret_json);
        if (k == -EPERM)
                return api_reply_error(409, "a job is the organism's: remove it from organism/routines.yaml",
                                       ret_status, ret_json);
        if (k < 0)
                return api_reply_error(500, "that failed: see the kernel log", ret_status, ret_json);
        return api_routines_h_list(r, call, ret_status, ret_json);
}
