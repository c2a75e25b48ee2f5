/* terminal.c — the tools that end a phase (submit_plan, finish,
 * submit_reflection) and ask_owner. What a terminal call carries is its
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

int tools_ask_owner(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->cb || !ctx->cb->ask_owner)
                return tool_error(ret, "ask_owner is not available in this phase");
        if (ctx->questions_asked >= TOOLS_MAX_QUESTIONS)
                return tool_error(ret, "you have already asked the owner %d questions in this evolution; "
                                       "decide yourself and note the assumption in the plan",
                                  TOOLS_MAX_QUESTIONS);
        ctx->questions_asked++;
        _cleanup_free_ char *answer = NULL;
        int r = ctx->cb->ask_owner(ctx, tool_arg_str(args, "question"), &answer);
        if (r < 0)
                return r;
        return tool_ok(ret, "The owner answered: %s", answer ? answer : "");
}
