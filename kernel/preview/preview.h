/* preview.h — the candidate app an evolution runs in a sandbox, and its tools
 * (SPEC §5): start_app, stop_app, http_request and app_logs act only on the
 * evolution's own preview (its worktree's organism, in a sandbox, behind a
 * bridge socket in a run dir of its own); migrate, db_query and db_schema
 * only on its own scratch database (evo_<id>, as role evolver) — never on
 * the live organism or the live database.
 *
 * The tools are a table of this module, preview_tools (name, level, schema,
 * handler, like every other table of a tool set, see tools/tools.h): the
 * handlers get the evolution's struct preview through the call's context
 * (tool_ctx.preview). A context without
 * one answers "<tool> is not available in this phase". Every failure becomes
 * an error result for the model. Called from the evolution's worker thread
 * only. */
#pragma once

#include "tools/tools.h"

#include <stdatomic.h>

struct cfg;
struct pg;

/* Everything borrowed; it outlives the struct preview. */
struct preview_config {
        const char *seed_dir;     /* the live Seed's folder (.seed/preview, .seed/logs, .seed/cache) */
        const char *worktree;     /* the evolution's worktree (host path) */
        int root_fd;              /* the same, an fsx root fd (migrations) */
        const char *evo_id;       /* evo_<hex> */
        const char *scratch_db;   /* the evolution's scratch database (evo_<hex>); NULL: none */
        const char *scratch_url;  /* its URL as the sandbox sees it, role evolver */
        const struct cfg *cfg;
        const struct pg *pg;      /* NULL: no database tools */
        const char *bridge_path;  /* seed-bridge */
        struct egress *egress;    /* the preview's way out (the live organism's policy); NULL: none */
        const atomic_bool *cancel; /* set: the evolution is cancelled (start_app stops waiting); may be NULL */
};

/* Per-evolution state of the tools: one preview app at most (a second
 * start_app restarts it) and connections only ever to the scratch database
 * as evolver. c is copied (its pointers stay borrowed). Caller frees *ret
 * with preview_free(). */
struct preview;
int preview_new(const struct preview_config *c, struct preview **ret);
/* Stops the app if it runs (end of the evolution), frees. Accepts NULL. */
void preview_free(struct preview *p);

/* The tools (static data, TOOL_TABLE_END-terminated): start_app, stop_app,
 * http_request, app_logs, migrate, db_query, db_schema. */
extern const struct tool preview_tools[];

/* Their handlers, named by preview_tools. args: validated against the
 * entry's schema, borrowed. */
int preview_start_app(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
int preview_stop_app(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
int preview_app_logs(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
int preview_http_request(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
int preview_migrate(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
int preview_db_query(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
int preview_db_schema(struct tool_ctx *ctx, const struct tool *t, struct json_t *args, struct tool_result *ret);
