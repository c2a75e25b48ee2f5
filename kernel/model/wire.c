/* wire.c — what both wire formats share: JSON helpers, error bodies, text
 * hygiene (UTF-8, excerpts, redaction), and the build/parse entry points. */
#include "model/wire-json.h"
#include "base/buf.h"
#include "base/text.h"

#include <stdarg.h>

/* A printable excerpt of len bytes at s: control characters become spaces,
 * at most MODEL_ERROR_EXCERPT bytes, valid UTF-8. */
static char *excerpt(const char *s, size_t len) {
        bool cut = len > MODEL_ERROR_EXCERPT;
        if (cut)
                len = MODEL_ERROR_EXCERPT;
        _cleanup_free_ char *raw = malloc(len + 4);
        if (!raw)
                return NULL;
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)s[i];
                raw[o++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
        }
        while (o > 0 && raw[o - 1] == ' ')
                o--;
        if (cut) {
                memcpy(raw + o, "...", 3);
                o += 3;
        }
        raw[o] = 0;
        return text_utf8_sanitize(raw);
}

json_t *wire_str(const char *s) {
        if (!s)
                return json_string("");
        json_t *j = json_string(s);
        if (j)
                return j;
        _cleanup_free_ char *clean = text_utf8_sanitize(s);
        return clean ? json_string(clean) : NULL;
}

int wire_set(json_t *obj, const char *key, json_t *v) {
        if (!v)
                return -ENOMEM;
        return json_object_set_new(obj, key, v) < 0 ? -ENOMEM : 0;
}

int wire_append(json_t *arr, json_t *v) {
        if (!v)
                return -ENOMEM;
        return json_array_append_new(arr, v) < 0 ? -ENOMEM : 0;
}

int wire_tool_schema(const struct model_tool_def *t, json_t **ret, char **ret_error) {
        if (!t->parameters) {
                json_t *j = json_pack("{s:s, s:{}}", "type", "object", "properties");
                if (!j)
                        return -ENOMEM;
                *ret = j;
                return 0;
        }
        json_error_t e;
        _cleanup_json_ json_t *j = json_loads(t->parameters, 0, &e);
        if (!j || !json_is_object(j)) {
                (void)xasprintf(ret_error, "tool '%s': parameters are not a JSON object", t->name);
                return -EINVAL;
        }
        *ret = TAKE_PTR(j);
        return 0;
}

json_t *wire_cache_control(void) {
        return json_pack("{s:s}", "type", "ephemeral");
}

void wire_cache_targets(const json_t *messages, size_t ret_idx[2]) {
        size_t n = json_array_size(messages);
        ret_idx[0] = n > 0 ? n - 1 : SIZE_MAX;
        ret_idx[1] = SIZE_MAX;
        bool after_assistant = false;
        for (size_t i = n; i-- > 0;) {
                const char *role = wire_get_str(json_array_get(messages, i), "role");
                if (!role)
                        continue;
                if (streq(role, "assistant"))
                        after_assistant = true;
                else if (after_assistant && (streq(role, "user") || streq(role, "tool"))) {
                        ret_idx[1] = i;
                        break;
                }
        }
}

int wire_malformed(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *what = NULL;
        va_start(ap, fmt);
        int k = xvasprintf(&what, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        (void)xasprintf(ret_error, "malformed response: %s", what);
        free(what);
        return -EBADMSG;
}

const char *wire_get_str(const json_t *obj, const char *key) {
        json_t *v = json_object_get(obj, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

int64_t wire_get_int(const json_t *obj, const char *key) {
        json_t *v = json_object_get(obj, key);
        if (json_is_integer(v))
                return (int64_t)json_integer_value(v);
        if (json_is_real(v)) { /* converted only within range: a huge one is UB to cast */
                double d = json_real_value(v);
                return d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : d == d ? (int64_t)d : 0;
        }
        return 0;
}

int64_t wire_get_tokens(const json_t *obj, const char *key) {
        int64_t n = wire_get_int(obj, key);
        return n < 0 ? 0 : n > MODEL_TOKENS_MAX ? MODEL_TOKENS_MAX : n;
}

bool wire_calls_complete(const struct model_message *msg) {
        if (msg->n_calls == 0)
                return false;
        for (size_t i = 0; i < msg->n_calls; i++) {
                _cleanup_json_ json_t *j = msg->calls[i].arguments ? json_loads(msg->calls[i].arguments, 0, NULL) : NULL;
                if (!json_is_object(j))
                        return false;
        }
        return true;
}

int wire_text_append(char **acc, const char *s) {
        char *n = NULL;
        if (xasprintf(&n, "%s%s", *acc ? *acc : "", s) < 0)
                return -ENOMEM;
        free(*acc);
        *acc = n;
        return 0;
}

int wire_body_error(const json_t *err, char **ret_error) {
        const char *message = NULL, *type = NULL;
        char code[64] = "";
        if (json_is_string(err))
                message = json_string_value(err);
        else if (json_is_object(err)) {
                message = wire_get_str(err, "message");
                type = wire_get_str(err, "type");
                json_t *c = json_object_get(err, "code");
                if (json_is_integer(c))
                        snprintf(code, sizeof code, "%lld", (long long)json_integer_value(c));
                else if (json_is_string(c))
                        snprintf(code, sizeof code, "%s", json_string_value(c));
        }
        bool retry = model_error_code_retryable(code) || (type && model_error_code_retryable(type));
        _cleanup_free_ char *msg = excerpt(message ? message : "(no message)", strlen(message ? message : "(no message)"));
        _cleanup_free_ char *label = excerpt(*code ? code : type ? type : "", strlen(*code ? code : type ? type : ""));
        if (!msg || !label)
                return -ENOMEM;
        if (xasprintf(ret_error, "provider error%s%s: %s", *label ? " " : "", label, msg) < 0)
                return -ENOMEM;
        return retry ? -EAGAIN : -EREMOTEIO;
}

char *model_wire_error_text(const char *body, size_t len) {
        json_error_t e;
        _cleanup_json_ json_t *root = json_loadb(body, len, 0, &e);
        if (json_is_object(root)) {
                json_t *err = json_object_get(root, "error");
                const char *m = json_is_string(err) ? json_string_value(err)
                                : json_is_object(err) ? wire_get_str(err, "message")
                                                      : wire_get_str(root, "message");
                if (m)
                        return excerpt(m, strlen(m));
        }
        if (len == 0)
                return strdup("(empty body)");
        return excerpt(body, len);
}

int model_wire_build(const struct model_wire *w, const struct model_request *req, char **ret_json,
                     char **ret_error) {
        _cleanup_json_ json_t *root = NULL;
        int r = w->format == MODEL_FORMAT_ANTHROPIC ? anthropic_build(w, req, &root, ret_error)
                                                    : openai_build(w, req, &root, ret_error);
        if (r < 0)
                return r;
        char *s = json_dumps(root, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

int model_wire_parse(enum model_format fmt, const char *body, size_t len, struct model_response *ret,
                     char **ret_error) {
        json_error_t e;
        _cleanup_json_ json_t *root = json_loadb(body, len, 0, &e);
        if (!root) {
                _cleanup_free_ char *what = excerpt(e.text, strlen(e.text));
                return wire_malformed(ret_error, "invalid JSON at byte %d: %s", e.position, what ? what : "");
        }
        if (!json_is_object(root))
                return wire_malformed(ret_error, "not a JSON object");
        struct model_response res = {.message.role = MODEL_ROLE_ASSISTANT};
        int r = fmt == MODEL_FORMAT_ANTHROPIC ? anthropic_parse(root, &res, ret_error)
                                              : openai_parse(root, &res, ret_error);
        if (r < 0) {
                model_response_done(&res);
                return r;
        }
        *ret = res;
        return 0;
}
