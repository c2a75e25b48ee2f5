/* extensions.c — GET /_seed/api/extensions. See extensions.h. */
#include "api/extensions.h"
#include "base/json.h"
#include "base/log.h"
#include "fsx/fsx.h"
#include "organism/extensions.h"

static json_t *screens_json(const struct organism_extensions *x) {
        _cleanup_json_ json_t *arr = json_array();
        for (size_t i = 0; arr && i < x->n_screens; i++) {
                const struct organism_screen *s = &x->screens[i];
                if (json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "id", s->id, "title", s->title,
                                                         "path", s->path)) < 0)
                        return NULL;
        }
        return TAKE_PTR(arr);
}

static json_t *errors_json(char *const *errors) {
        _cleanup_json_ json_t *arr = json_array();
        for (char *const *e = errors; arr && e && *e; e++)
                if (json_array_append_new(arr, json_string(*e)) < 0)
                        return NULL;
        return TAKE_PTR(arr);
}

int api_extensions_json(const char *seed_dir, char **ret_json) {
        _cleanup_close_ int root = -1;
        _cleanup_(organism_extensions_freep) struct organism_extensions *x = NULL;
        int r = fsx_open_root(seed_dir, &root);
        if (r < 0)
                return log_error_errno(r, "cannot open the Seed folder for its admin screens: %m");
        r = organism_extensions_read(root, &x);
        if (r < 0)
                return r;
        json_t *screens = screens_json(x), *errors = errors_json(x->errors);
        if (!screens || !errors) {
                json_decref(screens);
                json_decref(errors);
                return -ENOMEM;
        }
        _cleanup_json_ json_t *o = json_pack("{s:s, s:o, s:o}", "file", ORGANISM_EXT_FILE, "screens", screens,
                                             "errors", errors);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

int api_extensions_h_list(const char *seed_dir, const struct ctl_api_call *call, int *ret_status,
                          char **ret_json) {
        char *json = NULL;
        int r = api_extensions_json(seed_dir, &json);
        if (r < 0)
                return r;
        *ret_status = 200;
        *ret_json = json;
        return 0;
}
