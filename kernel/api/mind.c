/* mind.c (api) — the routes of the Seed's mind. See api/mind.h. */
#include "api/mind.h"
#include "base/json.h"
#include "base/log.h"

/* Answers status with o (taken). */
static int answer(int status, json_t *o_taken, int *ret_status, char **ret_json) {
        _cleanup_json_ json_t *o = o_taken;
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!s)
                return -ENOMEM;
        *ret_status = status;
        *ret_json = s;
        return 0;
}

/* {"error": msg}, msg bounded (a provider's text, never a key). */
static int answer_error(int status, const char *msg, int *ret_status, char **ret_json) {
        char bounded[API_MIND_ERROR_MAX + 4];
        snprintf(bounded, sizeof bounded, "%s", msg ? msg : "failed");
        if (msg && strlen(msg) > API_MIND_ERROR_MAX) {
                /* cut at a character boundary, then mark the cut */
                size_t n = API_MIND_ERROR_MAX;
                while (n > 0 && ((unsigned char)bounded[n] & 0xc0) == 0x80)
                        n--;
                memcpy(bounded + n, "...", 4);
        }
        json_t *o = json_pack("{s:s}", "error", bounded);
        if (!o) /* not UTF-8: never expected from the kernel's own messages */
                o = json_pack("{s:s}", "error", "failed");
        return answer(status, o, ret_status, ret_json);
}

/* The mind as GET mind shows it, with extra members (taken, may be NULL). */
static int answer_mind(struct mind *m, json_t *extra_taken, int *ret_status, char **ret_json) {
        _cleanup_json_ json_t *extra = extra_taken, *o = NULL;
        int r = mind_status_json(m, true, &o);
        if (r < 0)
                return r;
        if (extra && json_object_update(o, extra) < 0)
                return -ENOMEM;
        return answer(200, TAKE_PTR(o), ret_status, ret_json);
}

/* An error of kernel/mind as an answer: its message, with the status its
 * code means. */
static int answer_mind_error(int r, const char *err, int *ret_status, char **ret_json) {
        int status = r == -EINVAL ? 400 : r == -ENOKEY || r == -EBUSY ? 409 : r == -EIO ? 500 : 502;
        if (r == -ENOMEM)
                return r;
        return answer_error(status, err ? err : strerror(-r), ret_status, ret_json);
}

/* The body as an object holding only string members named in keys (at most
 * max bytes each); 1 = answered 400. */
static int body_strings(const struct ctl_api_call *call, const char *const *keys, size_t max, json_t **ret,
                        int *ret_status, char **ret_json) {
        json_error_t e;
        _cleanup_json_ json_t *o = call->body_len > API_MIND_BODY_MAX
                                           ? NULL
                                           : json_loadb(call->body, call->body_len, JSON_REJECT_DUPLICATES, &e);
        bool ok = json_is_object(o);
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v) {
                bool known = false;
                for (const char *const *p = keys; *p; p++)
                        known = known || streq(*p, k);
                ok = ok && known && json_is_string(v) && json_string_length(v) <= max &&
                     strlen(json_string_value(v)) == json_string_length(v);
        }
        if (!ok) {
                int r = answer_error(400, "the body must be a JSON object of the documented string members",
                                     ret_status, ret_json);
                return r < 0 ? r : 1;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

/* Wipes a string member of a parsed body (a key) before the body goes. */
static void wipe_member(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        if (json_is_string(v))
                secure_zero((char *)json_string_value(v), json_string_length(v));
}

int api_mind_h_get(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return answer_mind(m, NULL, ret_status, ret_json);
}

int api_mind_h_models(struct mind *m, const char *provider, int *ret_status, char **ret_json) {
        _cleanup_json_ json_t *st = NULL;
        int r = mind_status_json(m, false, &st);
        if (r < 0)
                return r;
        _cleanup_free_ char *err = NULL;
        char *json = NULL;
        r = mind_models_json(m, provider ? provider : json_string_value(json_object_get(st, "provider")), &json, &err);
        if (r < 0)
                return answer_mind_error(r, err, ret_status, ret_json);
        *ret_status = 200;
        *ret_json = json;
        return 0;
}

int api_mind_h_choose(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        static const char *const keys[] = {"provider", "model", NULL};
        _cleanup_json_ json_t *body = NULL;
        int r = body_strings(call, keys, MODEL_ID_MAX, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        const char *provider = json_string_value(json_object_get(body, "provider"));
        const char *model = json_string_value(json_object_get(body, "model"));
        if (!provider || !model)
                return answer_error(400, "give \"provider\" and \"model\"", ret_status, ret_json);
        _cleanup_free_ char *err = NULL;
        r = mind_choose(m, provider, model, &err);
        if (r < 0)
                return answer_mind_error(r, err, ret_status, ret_json);
        return answer_mind(m, NULL, ret_status, ret_json);
}

int api_mind_h_lend(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        static const char *const keys[] = {"provider", "key", NULL};
        _cleanup_json_ json_t *body = NULL;
        int r = body_strings(call, keys, MIND_KEY_MAX + 1, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        const char *provider = json_string_value(json_object_get(body, "provider"));
        const char *key = json_string_value(json_object_get(body, "key"));
        _cleanup_free_ char *err = NULL;
        if (!provider || !key)
                r = answer_error(400, "give \"provider\" and \"key\"", ret_status, ret_json);
        else if ((r = mind_lend_key(m, provider, key, &err)) < 0)
                r = answer_mind_error(r, err, ret_status, ret_json);
        else
                r = answer_mind(m, NULL, ret_status, ret_json);
        wipe_member(body, "key");
        return r;
}

int api_mind_h_forget(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        static const char *const keys[] = {"provider", NULL};
        _cleanup_json_ json_t *body = NULL;
        int r = call->body_len == 0 ? 0 : body_strings(call, keys, MODEL_ID_MAX, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        const char *provider = json_string_value(json_object_get(body, "provider"));
        r = mind_forget_key(m, provider);
        if (r == -EINVAL)
                return answer_error(400, "unknown provider", ret_status, ret_json);
        if (r < 0)
                return r;
        return answer_mind(m, json_pack("{s:i}", "forgotten", r), ret_status, ret_json);
}
