/* outbound.c (api) — GET outbound, POST outbound/grant, POST
 * outbound/revoke. See outbound.h. */
#include "api/outbound.h"
#include "api/reply.h"
#include "base/json.h"
#include "base/log.h"
#include "outbound/outbound.h"


#define NO_OUTBOUND "outbound access is not available: the kernel could not load the grants"

bool api_grant_id_valid(const char *s) {
        if (!s || !startswith(s, "grt_") || strlen(s) != 20)
                return false;
        for (const char *h = s + 4; *h; h++)
                if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
                        return false;
        return true;
}

/* The body as a JSON object of at most API_OUTBOUND_BODY_MAX bytes; 1 when
 * answered (413/400). */
static int body_object(const struct ctl_api_call *call, json_t **ret, int *ret_status, char **ret_json) {
        int r;
        if (call->body_len > API_OUTBOUND_BODY_MAX) {
                r = api_reply_error(413, "the body is too large (at most 16 KiB)", ret_status, ret_json);
                return r < 0 ? r : 1;
        }
        _cleanup_json_ json_t *o = json_loadb(call->body ? call->body : "", call->body_len, JSON_REJECT_DUPLICATES,
                                              NULL);
        if (!json_is_object(o)) {
                r = api_reply_error(400, "the body must be a JSON object", ret_status, ret_json);
                return r < 0 ? r : 1;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

int api_outbound_h_get(struct outbound *o, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!o)
                return api_reply_error(503, NO_OUTBOUND, ret_status, ret_json);
        json_t *j = NULL;
        int r = outbound_json(o, &j);
        if (r < 0)
                return log_error_errno(r, "could not describe outbound access: %m");
        return api_reply(200, j, ret_status, ret_json);
}

int api_outbound_h_grant(struct outbound *o, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!o)
                return api_reply_error(503, NO_OUTBOUND, ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        int r = body_object(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        struct outbound_request req;
        _cleanup_free_ char *why = NULL, *id = NULL;
        r = outbound_request_check(o, body, &req, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return api_reply_error(400, why ? why : "invalid request", ret_status, ret_json);
        r = outbound_grant(o, &req, "owner", &id);
        outbound_request_done(&req);
        if (r == -E2BIG)
                return api_reply_error(409, "too many hosts are granted already: revoke some first", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not grant outbound access: %m");
        return api_reply(200, json_pack("{s:s?}", "id", id), ret_status, ret_json);
}

int api_outbound_h_revoke(struct outbound *o, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!o)
                return api_reply_error(503, NO_OUTBOUND, ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        int r = body_object(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        const char *id = json_string_value(json_object_get(body, "id"));
        if (json_object_size(body) != 1 || !api_grant_id_valid(id))
                return api_reply_error(400, "the body must be {\"id\": \"grt_…\"} (grt_ and 16 hex digits)", ret_status,
                                   ret_json);
        r = outbound_revoke(o, id);
        if (r == -ENOENT)
                return api_reply_error(404, "no active grant has that id", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not revoke grant %s: %m", id);
        return api_reply(200, json_pack("{s:b}", "ok", 1), ret_status, ret_json);
}
