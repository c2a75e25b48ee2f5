/* chat.c — the chat's tools, as calls into the orchestrator. */
#include "tools/internal.h"

static int from_callback(int r, char *output, struct tool_result *ret) {
        if (r < 0) {
                free(output);
                return r;
        }
        return tool_take(ret, output, false);
}

int tools_start_evolution(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->cb || !ctx->cb->start_evolution)
                return tool_error(ret, "%s is not available in this phase", t->name);
        char *out = NULL;
        int r = ctx->cb->start_evolution(ctx, tool_arg_str(args, "intent"), &out);
        return from_callback(r, out, ret);
}

int tools_list_evolutions(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->cb || !ctx->cb->list_evolutions)
                return tool_error(ret, "%s is not available in this phase", t->name);
        char *out = NULL;
        int r = ctx->cb->list_evolutions(ctx, &out);
        return from_callback(r, out, ret);
}
