/* orchestrator-internal.h — pieces of the orchestrator shared between its files. */
#pragma once

#include "evolution/orchestrator.h"

#include <stdatomic.h>

/* The system prompt of an evolution: rules, knowledge/self.yaml, the skills
 * index and the last 15 generations, read from the Seed folder (seed_root:
 * an fsx root fd of it). NULL when out of memory; caller frees. */
char *orch_system_prompt(const char *seed_dir, int seed_root, char *const *evolvable, const struct pg *pg);

/* ---- the app and scratch-database tools (apptools.c) ---- */

struct cfg;
struct pg;
struct tool_callbacks;
struct tool_ctx;

/* Everything borrowed; it outlives the struct orch_app. */
struct orch_app_config {
        const char *seed_dir;     /* the live Seed's folder (.seed/preview, .seed/logs, .seed/cache) */
        const char *worktree;     /* the evolution's worktree (host path) */
        int root_fd;              /* the same, an fsx root fd (migrations) */
        const char *evo_id;       /* evo_<hex> */
        const char *scratch_db;   /* the evolution's scratch database (evo_<hex>); NULL: none */
        const char *scratch_url;  /* its URL as the sandbox sees it, role evolver */
        const struct cfg *cfg;
        const struct pg *pg;      /* NULL: no database tools */
        const char *bridge_path;  /* seed-bridge */
        const atomic_bool *cancel; /* set: the evolution is cancelled (start_app stops waiting); may be NULL */
};

/* Per-evolution state of the tools start_app, stop_app, http_request,
 * app_logs, migrate, db_query, db_schema: one preview app at most (a second
 * start_app restarts it) and connections only ever to the scratch database
 * as evolver. */
struct orch_app;
int orch_app_new(const struct orch_app_config *c, struct orch_app **ret);
/* Stops the preview if it runs (end of the evolution), frees. Accepts NULL. */
void orch_app_free(struct orch_app *a);
/* Sets the seven callbacks in cb. */
void orch_app_set_callbacks(struct tool_callbacks *cb);
/* The evolution's struct orch_app from a tool context (orchestrator.c);
 * NULL when it has none. */
struct orch_app *orch_app_of(struct tool_ctx *ctx);
