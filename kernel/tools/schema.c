#include "tools/schema.h"
#include "base/buf.h"
#include "base/json.h"
#include "tools/regex-guard.h"

#include <stdarg.h>
#include <regex.h>

#define SCHEMA_DEPTH_MAX 32
#define SCHEMA_PATH_MAX 256

/* A path like "$.steps[2]" built up while descending; truncated when long. */
struct where {
        char s[SCHEMA_PATH_MAX];
};

/* A path too long for the buffer is cut: it only names the place in messages. */
static void where_key(struct where *out, const struct where *in, const char *key) {
        if (snprintf(out->s, sizeof out->s, "%s.%s", in->s, key) >= (int)sizeof out->s)
                memcpy(out->s + sizeof out->s - 4, "...", 4);
}

static void where_index(struct where *out, const struct where *in, size_t i) {
        if (snprintf(out->s, sizeof out->s, "%s[%zu]", in->s, i) >= (int)sizeof out->s)
                memcpy(out->s + sizeof out->s - 4, "...", 4);
}

static int fail(char **ret_error, const struct where *w, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, const struct where *w, const char *fmt, ...) {
        if (ret_error) {
                char msg[512];
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(msg, sizeof msg, fmt, ap);
                va_end(ap);
                if (xasprintf(ret_error, "%s: %s", w->s, msg) < 0)
                        *ret_error = NULL;
        }
        return -EINVAL;
}

static const char *json_type_name(const json_t *v) {
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "object";
        case JSON_ARRAY:
                return "array";
        case JSON_STRING:
                return "string";
        case JSON_INTEGER:
                return "integer";
        case JSON_REAL:
                return "number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "boolean";
        case JSON_NULL:
                return "null";
        }
        return "unknown";
}

static bool type_matches(const char *type, const json_t *v) {
        if (streq(type, "object"))
                return json_is_object(v);
        if (streq(type, "array"))
                return json_is_array(v);
        if (streq(type, "string"))
                return json_is_string(v);
        if (streq(type, "integer"))
                return json_is_integer(v);
        if (streq(type, "number"))
                return json_is_number(v);
        if (streq(type, "boolean"))
                return json_is_boolean(v);
        return false;
}

/* Characters (code points) in valid UTF-8, as jansson guarantees. */
static size_t utf8_chars(const char *s, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                if (((unsigned char)s[i] & 0xC0) != 0x80)
                        n++;
        return n;
}

static const char *const known_keys[] = {
        "type", "description", "properties", "required", "additionalProperties", "enum",
        "minLength", "maxLength", "pattern", "items", "minItems", "maxItems", "minimum", "maximum",
        "default", "title",
};

static bool known_key(const char *k) {
        for (size_t i = 0; i < ARRAY_SIZE(known_keys); i++)
                if (streq(known_keys[i], k))
                        return true;
        return false;
}

static bool nonneg_int(const json_t *v) {
        return json_is_integer(v) && json_integer_value(v) >= 0;
}

static int check(json_t *schema, const struct where *w, int depth, char **ret_error) {
        if (depth > SCHEMA_DEPTH_MAX)
                return fail(ret_error, w, "schema nested too deeply");
        if (!json_is_object(schema))
                return fail(ret_error, w, "schema is not an object");
        const char *key;
        json_t *v;
        json_object_foreach(schema, key, v) {
                if (!known_key(key))
                        return fail(ret_error, w, "unsupported schema keyword '%s'", key);
        }
        json_t *type = json_object_get(schema, "type");
        if (!json_is_string(type))
                return fail(ret_error, w, "schema needs a type");
        const char *t = json_string_value(type);
        static const char *const types[] = {"object", "array", "string", "integer", "number", "boolean"};
        bool ok = false;
        for (size_t i = 0; i < ARRAY_SIZE(types); i++)
                ok = ok || streq(types[i], t);
        if (!ok)
                return fail(ret_error, w, "unsupported type '%s'", t);

        json_t *props = json_object_get(schema, "properties");
        if (props) {
                if (!json_is_object(props) || !streq(t, "object"))
                        return fail(ret_error, w, "properties must be an object on an object schema");
                json_object_foreach(props, key, v) {
                        struct where sub;
                        where_key(&sub, w, key);
                        int r = check(v, &sub, depth + 1, ret_error);
                        if (r < 0)
                                return r;
                }
        }
        json_t *req = json_object_get(schema, "required");
        if (req) {
                if (!json_is_array(req))
                        return fail(ret_error, w, "required must be an array");
                size_t i;
                json_array_foreach(req, i, v) {
                        if (!json_is_string(v) || !json_object_get(props, json_string_value(v)))
                                return fail(ret_error, w, "required names an undeclared property");
                }
        }
        json_t *addl = json_object_get(schema, "additionalProperties");
        if (addl && !json_is_boolean(addl)) {
                struct where sub;
                where_key(&sub, w, "*");
                int r = check(addl, &sub, depth + 1, ret_error);
                if (r < 0)
                        return r;
        }
        json_t *items = json_object_get(schema, "items");
        if (items) {
                if (!streq(t, "array"))
                        return fail(ret_error, w, "items on a non-array schema");
                struct where sub;
                where_key(&sub, w, "items");
                int r = check(items, &sub, depth + 1, ret_error);
                if (r < 0)
                        return r;
        }
        json_t *en = json_object_get(schema, "enum");
        if (en) {
                if (!json_is_array(en) || json_array_size(en) == 0)
                        return fail(ret_error, w, "enum must be a non-empty array");
                size_t i;
                json_array_foreach(en, i, v) {
                        if (!json_is_string(v) && !json_is_integer(v))
                                return fail(ret_error, w, "enum values must be strings or integers");
                }
        }
        static const char *const counts[] = {"minLength", "maxLength", "minItems", "maxItems"};
        for (size_t i = 0; i < ARRAY_SIZE(counts); i++) {
                v = json_object_get(schema, counts[i]);
                if (v && !nonneg_int(v))
                        return fail(ret_error, w, "%s must be a non-negative integer", counts[i]);
        }
        static const char *const bounds[] = {"minimum", "maximum"};
        for (size_t i = 0; i < ARRAY_SIZE(bounds); i++) {
                v = json_object_get(schema, bounds[i]);
                if (v && !json_is_number(v))
                        return fail(ret_error, w, "%s must be a number", bounds[i]);
        }
        json_t *pat = json_object_get(schema, "pattern");
        if (pat) {
                if (!json_is_string(pat) || !streq(t, "string"))
                        return fail(ret_error, w, "pattern must be a string on a string schema");
                regex_t re;
                char msg[128];
                const char *why = NULL;
                if (tools_regex_compile(&re, json_string_value(pat), REG_EXTENDED | REG_NOSUB, msg, sizeof msg, &why) < 0)
                        return fail(ret_error, w, "pattern does not compile: %s", why);
                regfree(&re);
        }
        return 0;
}

int tools_schema_check(json_t *schema, char **ret_error) {
        struct where w = {"$"};
        return check(schema, &w, 0, ret_error);
}

static int validate(json_t *schema, json_t *value, const struct where *w, int depth, char **ret_error);

static int validate_object(json_t *schema, json_t *value, const struct where *w, int depth, char **ret_error) {
        json_t *props = json_object_get(schema, "properties");
        json_t *req = json_object_get(schema, "required");
        size_t i;
        json_t *v;
        json_array_foreach(req, i, v) {
                const char *name = json_string_value(v);
                if (name && !json_object_get(value, name))
                        return fail(ret_error, w, "missing required property '%s'", name);
        }
        json_t *addl = json_object_get(schema, "additionalProperties");
        const char *key;
        json_object_foreach(value, key, v) {
                struct where sub;
                where_key(&sub, w, key);
                json_t *ps = json_object_get(props, key);
                if (!ps) {
                        if (json_is_false(addl))
                                return fail(ret_error, w, "unknown property '%.64s'", key);
                        if (!addl || json_is_true(addl))
                                continue;
                        ps = addl;
                }
                int r = validate(ps, v, &sub, depth + 1, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int validate_array(json_t *schema, json_t *value, const struct where *w, int depth, char **ret_error) {
        size_t n = json_array_size(value);
        json_t *mn = json_object_get(schema, "minItems"), *mx = json_object_get(schema, "maxItems");
        if (mn && n < (size_t)json_integer_value(mn))
                return fail(ret_error, w, "needs at least %lld items, got %zu", (long long)json_integer_value(mn), n);
        if (mx && n > (size_t)json_integer_value(mx))
                return fail(ret_error, w, "at most %lld items allowed, got %zu", (long long)json_integer_value(mx), n);
        json_t *items = json_object_get(schema, "items");
        if (!items)
                return 0;
        size_t i;
        json_t *v;
        json_array_foreach(value, i, v) {
                struct where sub;
                where_index(&sub, w, i);
                int r = validate(items, v, &sub, depth + 1, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int validate_string(json_t *schema, json_t *value, const struct where *w, char **ret_error) {
        const char *s = json_string_value(value);
        size_t len = json_string_length(value);
        if (strlen(s) != len)
                return fail(ret_error, w, "string contains a NUL character");
        size_t chars = utf8_chars(s, len);
        json_t *mn = json_object_get(schema, "minLength"), *mx = json_object_get(schema, "maxLength");
        if (mn && chars < (size_t)json_integer_value(mn))
                return fail(ret_error, w, "shorter than %lld characters", (long long)json_integer_value(mn));
        if (mx && chars > (size_t)json_integer_value(mx))
                return fail(ret_error, w, "longer than %lld characters (got %zu)", (long long)json_integer_value(mx),
                            chars);
        json_t *pat = json_object_get(schema, "pattern");
        if (pat) {
                regex_t re;
                char msg[128];
                const char *why = NULL;
                if (tools_regex_compile(&re, json_string_value(pat), REG_EXTENDED | REG_NOSUB, msg, sizeof msg, &why) < 0)
                        return fail(ret_error, w, "the schema's pattern does not compile: %s", why);
                int m = regexec(&re, s, 0, NULL, 0);
                regfree(&re);
                if (m != 0)
                        return fail(ret_error, w, "does not match %s", json_string_value(pat));
        }
        return 0;
}

static int validate_number(json_t *schema, json_t *value, const struct where *w, char **ret_error) {
        json_t *mn = json_object_get(schema, "minimum"), *mx = json_object_get(schema, "maximum");
        if (json_is_integer(value)) {
                json_int_t x = json_integer_value(value);
                if (mn && (json_is_integer(mn) ? x < json_integer_value(mn) : (double)x < json_number_value(mn)))
                        return fail(ret_error, w, "must be at least %g", json_number_value(mn));
                if (mx && (json_is_integer(mx) ? x > json_integer_value(mx) : (double)x > json_number_value(mx)))
                        return fail(ret_error, w, "must be at most %g", json_number_value(mx));
                return 0;
        }
        double x = json_number_value(value);
        if (mn && x < json_number_value(mn))
                return fail(ret_error, w, "must be at least %g", json_number_value(mn));
        if (mx && x > json_number_value(mx))
                return fail(ret_error, w, "must be at most %g", json_number_value(mx));
        return 0;
}

static int validate_enum(json_t *en, json_t *value, const struct where *w, char **ret_error) {
        size_t i;
        json_t *v;
        json_array_foreach(en, i, v) {
                if (json_equal(v, value))
                        return 0;
        }
        struct buf b = BUF_INIT(400);
        json_array_foreach(en, i, v) {
                if (json_is_string(v))
                        buf_printf(&b, "%s\"%s\"", i ? ", " : "", json_string_value(v));
                else
                        buf_printf(&b, "%s%lld", i ? ", " : "", (long long)json_integer_value(v));
        }
        int r = fail(ret_error, w, "must be one of %s", b.data ? b.data : "");
        buf_free(&b);
        return r;
}

static int validate(json_t *schema, json_t *value, const struct where *w, int depth, char **ret_error) {
        if (depth > SCHEMA_DEPTH_MAX)
                return fail(ret_error, w, "nested too deeply");
        const char *type = json_string_value(json_object_get(schema, "type"));
        if (!type)
                return fail(ret_error, w, "the schema has no type");
        if (!type_matches(type, value))
                return fail(ret_error, w, "expected %s, got %s", type, json_type_name(value));
        json_t *en = json_object_get(schema, "enum");
        if (en) {
                int r = validate_enum(en, value, w, ret_error);
                if (r < 0)
                        return r;
        }
        switch (json_typeof(value)) {
        case JSON_OBJECT:
                return validate_object(schema, value, w, depth, ret_error);
        case JSON_ARRAY:
                return validate_array(schema, value, w, depth, ret_error);
        case JSON_STRING:
                return validate_string(schema, value, w, ret_error);
        case JSON_INTEGER:
        case JSON_REAL:
                return validate_number(schema, value, w, ret_error);
        default:
                return 0;
        }
}

int tools_schema_validate(json_t *schema, json_t *value, char **ret_error) {
        struct where w = {"$"};
        return validate(schema, value, &w, 0, ret_error);
}
