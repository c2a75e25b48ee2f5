/* health.c (api) — the incidents' routes. See health.h. */
#include "api/health.h"
#include "api/reply.h"
#include "base/json.h"
#include "base/log.h"
#include "health/health.h"

#define NO_HEALTH "the doctor is not available: the kernel has no kernel database"

static int answer_json(int status, char *json, int *ret_status, char **ret_json) {
        *ret_status = status;
        *ret_json = json;
        return 0;
}

int api_health_h_list(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!h)
                return api_reply_error(503, NO_HEALTH, ret_status, ret_json);
        char *json = NULL;
        int r = health_list_json(h, &json);
        if (r < 0)
                return log_error_errno(r, "could not list the incidents: %m");
        return answer_json(200, json, ret_status, ret_json);
}

static int not_found(int r, int *ret_status, char **ret_json) {
        return api_reply_error(404, r == -EINVAL ? "no such incident (ids are inc_ and 16 hex digits)" : "no such incident",
                               ret_status, ret_json);
}

int api_health_h_get(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!h)
                return api_reply_error(503, NO_HEALTH, ret_status, ret_json);
        char *json = NULL;
        int r = health_get_json(h, call->param, &json);
        if (r == -ENOENT || r == -EINVAL)
                return not_found(r, ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not read an incident: %m");
        return answer_json(200, json, ret_status, ret_json);
}

/* A POST without a body or with an empty object; anything else is refused. */
static bool empty_body(const struct ctl_api_call *call) {
        if (call->body_len == 0)
                return true;
        if (call->body_len > API_HEALTH_BODY_MAX)
                return false;
        _cleanup_json_ json_t *b = json_loadb(call->body, call->body_len, JSON_REJECT_DUPLICATES, NULL);
        return json_is_object(b) && json_object_size(b) == 0;
}

int api_health_h_fix(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!h)
                return api_reply_error(503, NO_HEALTH, ret_status, ret_json);
        if (!empty_body(call))
                return api_reply_error(400, "the body must be {}", ret_status, ret_json);
        _cleanup_free_ char *evo = NULL;
        int r = health_fix(h, call->param, &evo);
        if (r == -ENOENT || r == -EINVAL)
                return not_found(r, ret_status, ret_json);
        if (r == -EBUSY)
                return api_reply_error(409, "this incident cannot be fixed now: its fix runs or is watched, or it has "
                                            "ended",
                                       ret_status, ret_json);
        if (r == -ENODEV)
                return api_reply_error(503, "evolutions are not available in this kernel", ret_status, ret_json);
        if (r == -ESTALE)
                return api_reply_error(409, "the incident changed meanwhile: look again", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not start a fix: %m");
        return api_reply(202, json_pack("{s:s}", "evolution", evo), ret_status, ret_json);
}

int api_health_h_ignore(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!h)
                return api_reply_error(503, NO_HEALTH, ret_status, ret_json);
        if (!empty_body(call))
                return api_reply_error(400, "the body must be {}", ret_status, ret_json);
        int r = health_ignore(h, call->param);
        if (r == -ENOENT || r == -EINVAL)
                return not_found(r, ret_status, ret_json);
        if (r == -EALREADY || r == -EAGAIN)
                return api_reply_error(409, "this incident has ended already (or changed meanwhile)", ret_status,
                                       ret_json);
        if (r < 0)
                return log_error_errno(r, "could not ignore an incident: %m");
        return api_health_h_get(h, call, ret_status, ret_json);
}

int api_health_h_settings(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!h)
                return api_reply_error(503, NO_HEALTH, ret_status, ret_json);
        if (call->body_len > API_HEALTH_BODY_MAX)
                return api_reply_error(413, "the body is too large (at most 1 KiB)", ret_status, ret_json);
        _cleanup_json_ json_t *b = json_loadb(call->body ? call->body : "", call->body_len, JSON_REJECT_DUPLICATES,
                                              NULL);
        json_t *v = json_object_get(b, "auto_fix");
        if (!json_is_object(b) || json_object_size(b) != 1 || !json_is_boolean(v))
                return api_reply_error(400, "the body must be {\"auto_fix\": true or false}", ret_status, ret_json);
        int r = health_auto_fix_set(h, json_is_true(v));
        if (r < 0)
                return log_error_errno(r, "could not change automatic fixing: %m");
        return api_health_h_list(h, call, ret_status, ret_json);
}
