/* textcalls.c — tool calls a model wrote as text. Local servers without
 * native tool parsing return what the model wrote: a JSON object with name
 * and arguments inside <tool_call>…</tool_call> (Hermes, Qwen), in a fenced
 * ```json block, or as the whole reply. Recognised strictly: an object is a
 * call only with a tool-like "name" and object (or string) "arguments" (or
 * "parameters"), and nothing else but "id" and "type"; something that looks
 * like a call and cannot be read is reported, never guessed. */
#include "model/wire-json.h"
#include "base/buf.h"
#include "base/crypto.h"

#include <ctype.h>
#include <stdarg.h>

#define TAG_OPEN "<tool_call>"
#define TAG_CLOSE "</tool_call>"
#define NAME_MAX_LEN 128

void model_text_calls_done(struct model_text_calls *t) {
        if (!t)
                return;
        for (size_t i = 0; i < t->n; i++) {
                free(t->calls[i].id);
                free(t->calls[i].name);
                free(t->calls[i].arguments);
        }
        free(t->calls);
        free(t->rest);
        *t = (struct model_text_calls){0};
}

static bool name_valid(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > NAME_MAX_LEN)
                return false;
        for (const char *p = s; *p; p++)
                if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '.'))
                        return false;
        return true;
}

/* What one JSON value is, as a call. */
enum shape {
        SHAPE_NONE,   /* not a call at all (a package.json, a list of numbers …) */
        SHAPE_CALL,   /* a call, or a list of calls */
        SHAPE_BROKEN, /* meant as a call, but not one we can read */
};

static enum shape object_shape(const json_t *o, const char **ret_why) {
        const json_t *name = json_object_get(o, "name");
        const json_t *args = json_object_get(o, "arguments");
        if (!args)
                args = json_object_get(o, "parameters");
        if (!name || !args)
                return SHAPE_NONE;
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)o, key, v)
                if (!streq(key, "name") && !streq(key, "arguments") && !streq(key, "parameters") &&
                    !streq(key, "id") && !streq(key, "type")) {
                        *ret_why = "it has keys besides name and arguments";
                        return SHAPE_BROKEN;
                }
        if (!json_is_string(name) || !name_valid(json_string_value(name))) {
                *ret_why = "its name is not a tool's name";
                return SHAPE_BROKEN;
        }
        if (!json_is_object(args) && !json_is_string(args)) {
                *ret_why = "its arguments are not a JSON object";
                return SHAPE_BROKEN;
        }
        return SHAPE_CALL;
}

static enum shape value_shape(const json_t *v, const char **ret_why) {
        if (json_is_object(v))
                return object_shape(v, ret_why);
        if (!json_is_array(v) || json_array_size(v) == 0)
                return SHAPE_NONE;
        /* A list is calls only when every element is one. */
        size_t i, calls = 0;
        const json_t *e;
        json_array_foreach(v, i, e) {
                enum shape s = json_is_object(e) ? object_shape(e, ret_why) : SHAPE_NONE;
                if (s == SHAPE_BROKEN)
                        return SHAPE_BROKEN;
                calls += s == SHAPE_CALL;
        }
        if (calls == 0)
                return SHAPE_NONE;
        if (calls != json_array_size(v)) {
                *ret_why = "a list mixes tool calls with other values";
                return SHAPE_BROKEN;
        }
        return SHAPE_CALL;
}

static int add_call(struct model_text_calls *t, const json_t *o) {
        if (t->n >= MODEL_MAX_TOOL_CALLS)
                return -E2BIG;
        struct model_tool_call *nv = realloc(t->calls, (t->n + 1) * sizeof *nv);
        if (!nv)
                return -ENOMEM;
        t->calls = nv;
        struct model_tool_call *c = &t->calls[t->n++];
        *c = (struct model_tool_call){0};
        const json_t *args = json_object_get(o, "arguments");
        if (!args)
                args = json_object_get(o, "parameters");
        c->name = strdup(json_string_value(json_object_get(o, "name")));
        c->arguments = json_is_string(args) ? strdup(json_string_value(args)) : json_dumps(args, JSON_COMPACT);
        _cleanup_free_ char *hex = NULL;
        if (crypto_random_hex(8, &hex) < 0 || xasprintf(&c->id, "call_text_%s", hex) < 0)
                c->id = NULL;
        return c->name && c->arguments && c->id ? 0 : -ENOMEM;
}

static int add_calls(struct model_text_calls *t, const json_t *v) {
        if (json_is_object(v))
                return add_call(t, v);
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
                int r = add_call(t, e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char *skip_space(const char *p, const char *end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
                p++;
        return p;
}

static const char *trim_end(const char *p, const char *end) {
        while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' || end[-1] == '\n'))
                end--;
        return end;
}

/* Does [p, end) look like someone tried to write a call? */
static bool looks_like_call(const char *p, const char *end) {
        _cleanup_free_ char *s = strndup(p, (size_t)(end - p));
        return s && strstr(s, "\"name\"") && (strstr(s, "\"arguments\"") || strstr(s, "\"parameters\""));
}

static int set_why(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int set_why(char **ret_error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int k = ret_error ? xvasprintf(ret_error, fmt, ap) : 0;
        va_end(ap);
        return k < 0 ? -ENOMEM : -EBADMSG;
}

/* One candidate block [p, end): a fence inside a tag is unwrapped. Adds its
 * calls to t. in_tag: the block was marked as a call, so anything but a
 * call is broken. Returns 1 calls added, 0 not a call, -EBADMSG broken. */
static int block(struct model_text_calls *t, const char *p, const char *end, bool in_tag, const char *where,
                 char **ret_error) {
        p = skip_space(p, end);
        end = trim_end(p, end);
        if (in_tag && end - p >= 3 && startswith(p, "```")) { /* <tool_call>```json … ```</tool_call> */
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *close = end - 3 >= p + 3 && memcmp(end - 3, "```", 3) == 0 ? end - 3 : end;
                if (nl && nl < close) {
                        p = skip_space(nl + 1, close);
                        end = trim_end(p, close);
                }
        }
        json_error_t e;
        _cleanup_json_ json_t *v = json_loadb(p, (size_t)(end - p), JSON_REJECT_DUPLICATES, &e);
        if (!v) {
                if (in_tag || looks_like_call(p, end))
                        return set_why(ret_error, "%s is not valid JSON (%s at character %d)", where, e.text,
                                       e.position);
                return 0;
        }
        const char *why = "it is not an object with name and arguments";
        enum shape s = value_shape(v, &why);
        if (s == SHAPE_NONE && !in_tag)
                return 0;
        if (s != SHAPE_CALL)
                return set_why(ret_error, "%s is not a tool call: %s", where, why);
        int r = add_calls(t, v);
        if (r == -E2BIG)
                return set_why(ret_error, "more than %d tool calls", MODEL_MAX_TOOL_CALLS);
        return r < 0 ? r : 1;
}

/* Appends [p, end) to the text kept outside the calls. */
static int keep(struct buf *rest, const char *p, const char *end) {
        return end > p ? buf_append(rest, p, (size_t)(end - p)) : 0;
}

static int parse_tags(struct model_text_calls *t, const char *text, struct buf *rest, char **ret_error) {
        const char *p = text, *end = text + strlen(text);
        int n = 0;
        for (const char *open; (open = strstr(p, TAG_OPEN));) {
                int r = keep(rest, p, open);
                if (r < 0)
                        return r;
                const char *body = open + strlen(TAG_OPEN);
                const char *close = strstr(body, TAG_CLOSE);
                const char *stop = close ? close : end; /* a last tag left open runs to the end */
                char where[48];
                snprintf(where, sizeof where, "<tool_call> block %d", ++n);
                r = block(t, body, stop, true, where, ret_error);
                if (r < 0)
                        return r;
                p = close ? close + strlen(TAG_CLOSE) : end;
        }
        if (strstr(p, TAG_CLOSE))
                return set_why(ret_error, "a </tool_call> has no <tool_call> before it");
        return keep(rest, p, end);
}

/* ```json (or ```tool_call, or a bare ```) fenced blocks holding JSON. */
static int parse_fences(struct model_text_calls *t, const char *text, struct buf *rest, char **ret_error) {
        const char *p = text, *end = text + strlen(text);
        int n = 0;
        for (const char *fence; (fence = strstr(p, "```"));) {
                const char *lang = fence + 3, *nl = strchr(lang, '\n');
                if (!nl)
                        break;
                const char *close = strstr(nl + 1, "```");
                if (!close)
                        break;
                const char *after = close + 3;
                _cleanup_free_ char *l = strndup(lang, (size_t)(nl - lang));
                if (!l)
                        return -ENOMEM;
                const char *lt = skip_space(l, l + strlen(l));
                *(char *)trim_end(lt, lt + strlen(lt)) = 0;
                bool jsonish = streq(lt, "json") || streq(lt, "tool_call") || streq(lt, "tool_code") || !*lt;
                int r = 0;
                if (jsonish) {
                        char where[48];
                        snprintf(where, sizeof where, "the fenced block %d", ++n);
                        r = block(t, nl + 1, close, false, where, ret_error);
                        if (r < 0)
                                return r;
                }
                if ((r = keep(rest, p, r == 1 ? fence : after)) < 0)
                        return r;
                p = after;
        }
        return keep(rest, p, end);
}

int model_text_calls_parse(const char *text, struct model_text_calls *ret, char **ret_error) {
        if (strempty(text))
                return 0;
        if (strlen(text) > MODEL_MAX_RESPONSE)
                return set_why(ret_error, "the reply is too large to hold tool calls");
        struct model_text_calls t = {0};
        struct buf rest = BUF_INIT(MODEL_MAX_RESPONSE);
        int r;
        const char *s = skip_space(text, text + strlen(text));
        if (strstr(text, TAG_OPEN) || strstr(text, TAG_CLOSE))
                r = parse_tags(&t, text, &rest, ret_error);
        else if (strstr(text, "```"))
                r = parse_fences(&t, text, &rest, ret_error);
        else if (*s == '{' || *s == '[') /* the whole reply, or nothing */
                r = block(&t, s, text + strlen(text), false, "the reply", ret_error);
        else
                r = 0;
        if (r >= 0 && t.n == 0)
                r = 0;
        if (r > 0 || (r >= 0 && t.n > 0)) {
                const char *k = rest.data ? skip_space(rest.data, rest.data + rest.len) : NULL;
                const char *ke = k ? trim_end(k, rest.data + rest.len) : NULL;
                if (k && ke > k && !(t.rest = strndup(k, (size_t)(ke - k))))
                        r = -ENOMEM;
                else
                        r = 1;
        }
        buf_free(&rest);
        if (r <= 0) {
                model_text_calls_done(&t);
                return r;
        }
        *ret = t;
        return 1;
}
