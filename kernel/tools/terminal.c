/* terminal.c — the tools that end a phase (submit_plan, finish,
 * submit_reflection). What a terminal call carries is its
 * validated arguments (tool_result.args); the orchestrator reads them. */
#include "tools/internal.h"

int tools_submit_plan(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        return tool_ok(ret, "Plan \"%s\" submitted.", tool_arg_str(args, "title"));
}

int tools_finish(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        return tool_ok(ret, "Finished. The kernel will now build, test, launch and check the app.");
}

int tools_submit_reflection(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        return tool_ok(ret, "Reflection recorded.");
}
