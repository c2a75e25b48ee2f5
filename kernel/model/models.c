/* models.c — the wire format of a provider's list of models, the one parser
 * of it (see model_wire_parse_models in model-internal.h). */
#include "model/wire-json.h"
#include "base/text.h"

#define NAME_MAX_BYTES 256

bool model_id_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > MODEL_ID_MAX)
                return false;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
                if (*p < 0x20 || *p > 0x7e)
                        return false;
        return true;
}

/* A display name fit to show: control characters become spaces, at most
 * NAME_MAX_BYTES, valid UTF-8; NULL for none. */
static int display_name(const char *s, char **ret) {
        *ret = NULL;
        if (strempty(s))
                return 0;
        size_t n = strnlen(s, NAME_MAX_BYTES);
        _cleanup_free_ char *raw = strndup(s, n);
        if (!raw)
                return -ENOMEM;
        for (char *p = raw; *p; p++)
                if ((unsigned char)*p < 0x20 || *p == 0x7f)
                        *p = ' ';
        return (*ret = text_utf8_sanitize(raw)) ? 0 : -ENOMEM;
}

/* 1: supported_parameters holds "tools"; 0: it is a list without it; -1: not said. */
static int tools_of(const json_t *entry, bool tools_on_all) {
        const json_t *params = json_object_get(entry, "supported_parameters");
        if (!json_is_array(params))
                return tools_on_all ? 1 : -1;
        size_t i;
        const json_t *v;
        json_array_foreach(params, i, v)
                if (json_is_string(v) && streq(json_string_value(v), "tools"))
                        return 1;
        return 0;
}

static int entry_parse(const json_t *entry, bool tools_on_all, struct model_info *ret) {
        const char *id = wire_get_str(entry, "id");
        if (!json_is_object(entry) || !model_id_valid(id))
                return 0; /* skipped */
        const char *name = wire_get_str(entry, "name");
        if (!name)
                name = wire_get_str(entry, "display_name");
        struct model_info m = {.tools = tools_of(entry, tools_on_all)};
        int64_t ctx = wire_get_int(entry, "context_length");
        m.context_length = ctx > 0 ? ctx : 0;
        if (!(m.id = strdup(id)) || display_name(name, &m.name) < 0) {
                free(m.id);
                return -ENOMEM;
        }
        *ret = m;
        return 1;
}

int model_wire_parse_models(const char *body, size_t len, bool tools_on_all, struct model_list *ret,
                            char **ret_error) {
        json_error_t e;
        _cleanup_json_ json_t *root = json_loadb(body, len, 0, &e);
        if (!root)
                return wire_malformed(ret_error, "invalid JSON at byte %d", e.position);
        if (!json_is_object(root))
                return wire_malformed(ret_error, "not a JSON object");
        const json_t *err = json_object_get(root, "error");
        const char *type = wire_get_str(root, "type");
        if ((err && !json_is_null(err)) || (type && streq(type, "error"))) {
                int r = wire_body_error(err ? err : root, ret_error);
                return r == -EAGAIN ? -EREMOTEIO : r;
        }
        const json_t *data = json_object_get(root, "data");
        if (!json_is_array(data))
                return wire_malformed(ret_error, "no \"data\" list of models");
        size_t n = json_array_size(data);
        struct model_list l = {.truncated = n > MODEL_LIST_MAX};
        if (n > MODEL_LIST_MAX)
                n = MODEL_LIST_MAX;
        if (n > 0 && !(l.models = calloc(n, sizeof *l.models)))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = entry_parse(json_array_get(data, i), tools_on_all, &l.models[l.n]);
                if (r < 0) {
                        model_list_done(&l);
                        return r;
                }
                l.n += (size_t)r;
        }
        *ret = l;
        return 0;
}
