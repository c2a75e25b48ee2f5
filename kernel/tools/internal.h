/* internal.h — shared by the files of kernel/tools (not a public API). */
#pragma once

#include "base/json.h"
#include "tools/tools.h"

/* Sets ret->output to the formatted text (is_error false / true). 0 or -ENOMEM. */
int tool_ok(struct tool_result *ret, const char *fmt, ...) _printf_(2, 3);
int tool_error(struct tool_result *ret, const char *fmt, ...) _printf_(2, 3);
/* Takes ownership of output (which may be NULL: then ""). */
int tool_take(struct tool_result *ret, char *output, bool is_error);

/* Accessors for validated arguments. */
const char *tool_arg_str(json_t *args, const char *key); /* NULL when absent */
int64_t tool_arg_int(json_t *args, const char *key, int64_t dflt);
bool tool_arg_bool(json_t *args, const char *key, bool dflt);

/* Classifier of write_file / edit_file / delete_path: review inside the
 * evolvable dirs, dangerous elsewhere; a bad path is -EINVAL/-EPERM. */
int tools_classify_write(const struct tool_ctx *ctx, const struct tool *t, json_t *args, enum tool_level *ret);

/* Refuses a write at TOOLS_ROADMAP_PATH or a directory above it. */
int tools_check_write(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error);
/* submit_plan: goal and stages come together; declared checks well formed. */
int tools_check_plan(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error);
/* finish: declared checks well formed; refused when a declared write check
 * (the plan's, ctx->plan_checks, or its own) expects 2xx and nothing changed
 * under organism/ since ctx->base_oid. Should the worktree not compare (no
 * repository), finish is taken: the verification's checks still decide. */
int tools_check_finish(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error);

/* Handlers (one file per family). */
int tools_read_file(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_list_dir(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_search(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_read_skill(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_write_file(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_edit_file(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_delete_path(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_run(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_git(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_submit_plan(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_finish(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);
int tools_submit_reflection(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret);

/* Directories the reflect phase may write. */
extern char *const tools_reflect_dirs[];
