/* app.c — the app and scratch-database tools. The orchestrator owns the app
 * under construction and the scratch database, so these are callbacks; a
 * missing callback means the phase does not have them. */
#include "tools/internal.h"

static tool_external_fn callback_for(const struct tool_callbacks *cb, const char *name) {
        if (!cb)
                return NULL;
        static const struct {
                const char *name;
                size_t offset;
        } map[] = {
                {"start_app", offsetof(struct tool_callbacks, start_app)},
                {"stop_app", offsetof(struct tool_callbacks, stop_app)},
                {"http_request", offsetof(struct tool_callbacks, http_request)},
                {"app_logs", offsetof(struct tool_callbacks, app_logs)},
                {"migrate", offsetof(struct tool_callbacks, migrate)},
                {"db_query", offsetof(struct tool_callbacks, db_query)},
                {"db_schema", offsetof(struct tool_callbacks, db_schema)},
        };
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (streq(map[i].name, name))
                        return *(const tool_external_fn *)((const char *)cb + map[i].offset);
        return NULL;
}

int tools_app(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        tool_external_fn fn = callback_for(ctx->cb, t->name);
        if (!fn)
                return tool_error(ret, "%s is not available in this phase", t->name);
        _cleanup_free_ char *json = json_dumps(args, JSON_COMPACT);
        if (!json)
                return -ENOMEM;
        return fn(ctx, t->name, json, ret);
}
