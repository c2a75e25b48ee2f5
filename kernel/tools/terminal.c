/* terminal.c — the tools that end a phase (submit_plan, finish,
 * submit_reflection) and the checks of their arguments. What a terminal call
 * carries is its validated arguments (tool_result.args); the orchestrator
 * reads them. */
#include "tools/internal.h"
#include "checks/checks.h"
#include "repo/repo.h"

int tools_check_plan(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error) {
        bool goal = json_object_get(args, "goal") != NULL, stages = json_object_get(args, "stages") != NULL;
        if (goal != stages)
                return errorf(-EINVAL, ret_error, "a goal needs its stages (%d to %d) and stages need their goal",
                              TOOLS_STAGES_MIN, TOOLS_STAGES_MAX);
        /* The schema counts characters; the roadmap keeps bytes (roadmap.h):
         * refuse the call here, so the model can shorten it, rather than
         * fail the evolution when the roadmap cannot be kept. */
        const char *g = json_string_value(json_object_get(args, "goal"));
        if (g && strlen(g) > TOOLS_GOAL_MAX)
                return errorf(-EINVAL, ret_error, "the goal is %zu bytes of UTF-8: at most %d; say it shorter",
                              strlen(g), TOOLS_GOAL_MAX);
        size_t i;
        json_t *s;
        json_array_foreach(json_object_get(args, "stages"), i, s)
                if (json_string_length(s) > TOOLS_STAGE_MAX)
                        return errorf(-EINVAL, ret_error,
                                      "stage %zu is %zu bytes of UTF-8: at most %d; say it shorter", i + 1,
                                      json_string_length(s), TOOLS_STAGE_MAX);
        struct decl_check *c = NULL;
        size_t n = 0;
        int r = checks_parse(json_object_get(args, "checks"), &c, &n, ret_error);
        checks_free(c, n);
        return r;
}

/* 1 if a write check among c expects 2xx. */
static bool expects_write(const struct decl_check *c, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (checks_is_write(&c[i]) && c[i].status >= 200 && c[i].status <= 299)
                        return true;
        return false;
}

/* 1 if something under organism/ differs from the evolution's base, 0 not,
 * negative when it cannot be told. */
static int organism_changed(const struct tool_ctx *ctx) {
        _cleanup_free_ char *base = NULL;
        int r = ctx->base_oid ? ((base = strdup(ctx->base_oid)) ? 0 : -ENOMEM) : repo_head(ctx->root_path, &base);
        if (r < 0)
                return r;
        struct repo_change *c = NULL;
        size_t n = 0;
        if ((r = repo_boundary_changes(ctx->root_path, base, ctx->evolvable, &c, &n)) < 0)
                return r;
        char *const organism[] = {"organism/", NULL};
        bool changed = false;
        for (size_t i = 0; i < n && !changed; i++)
                changed = !c[i].ignored && (tools_path_in(c[i].path, organism) ||
                                            (c[i].old_path && tools_path_in(c[i].old_path, organism)));
        repo_changes_free(c, n);
        return changed;
}

int tools_check_finish(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error) {
        struct decl_check *mine = NULL, *plan = NULL;
        size_t n_mine = 0, n_plan = 0;
        _cleanup_free_ char *plan_error = NULL;
        int r = checks_parse(json_object_get(args, "checks"), &mine, &n_mine, ret_error);
        if (r < 0)
                return r;
        /* The plan's were checked when it was submitted; unreadable now: none. */
        if (checks_parse_text(ctx->plan_checks, &plan, &n_plan, &plan_error) == -ENOMEM) {
                checks_free(mine, n_mine);
                return -ENOMEM;
        }
        bool writes = expects_write(mine, n_mine) || expects_write(plan, n_plan);
        checks_free(mine, n_mine);
        checks_free(plan, n_plan);
        if (!writes || !ctx->root_path)
                return 0;
        r = organism_changed(ctx);
        if (r == -ENOMEM)
                return r;
        if (r == 0)
                return errorf(-EINVAL, ret_error,
                              "a declared check writes (POST, PUT, PATCH or DELETE) and expects 2xx, but nothing "
                              "under organism/ changed, so no code could answer it: make the change first, or "
                              "declare what the app really answers");
        return 0;
}

int tools_submit_plan(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        return tool_ok(ret, "Plan \"%s\" submitted.", tool_arg_str(args, "title"));
}

int tools_finish(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        return tool_ok(ret, "Finished. The kernel will now build, test, launch and check the app.");
}

int tools_submit_reflection(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        return tool_ok(ret, "Reflection recorded.");
}
