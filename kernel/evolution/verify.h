/* verify.h — verification run by the kernel, not the model (SPEC §4): build;
 * a fresh scratch database, migrate, test; launch on another fresh database
 * and wait for health; GET the health path and GET /; then the checks the
 * model declared (kernel/checks), in order. Every step runs in a
 * sandbox over the evolution's worktree. A failure's output goes back to the
 * model for repair. */
#pragma once

#include "base/base.h"
#include "db/db.h"

struct cfg;
struct decl_check;
struct egress;
struct pg;

struct evo_check {
        const char *name;   /* "build", "migrate", "test", "launch", "healthz", "root",
                             * or a declared check's "http:<METHOD> <path>" */
        bool ok;
        char *output;       /* what the step printed or why it failed; owned */
        int64_t duration_ms;
};

struct evo_verify_config {
        const char *seed_dir;       /* the live Seed's folder */
        const char *worktree;       /* the evolution's worktree (host path) */
        const char *evo_id;         /* evo_<hex> */
        const struct cfg *cfg;      /* organism commands, limits */
        const struct pg *pg;        /* for scratch databases */
        const char *bridge_path;    /* seed-bridge */
        struct egress *egress;      /* the sandboxes' way out (borrowed); NULL: none */
        const struct decl_check *checks; /* declared checks, sent to the launched app after
                                          * its probes (borrowed); may be NULL */
        size_t n_checks;
        /* Called after each step (from the calling thread). */
        void (*on_check)(void *userdata, const struct evo_check *check);
        void *userdata;
};

/* Runs every step in order, stopping at the first failure. Returns 0 when
 * all passed, -EIO when a check failed (then *ret_failed describes it; the
 * caller frees with evo_check_free), -errno when verification itself could
 * not run. */
int evo_verify(const struct evo_verify_config *c, struct evo_check **ret_failed);
void evo_check_free(struct evo_check *c);

