/* live-preview.h — the owner's preview of a candidate generation before it
 * is applied (issue 15, SPEC §8): once the kernel's checks passed and the
 * change is committed, the candidate runs on a copy of the live data
 * (pg_live_copy_*: a database and role preview_<hex> with a fresh password;
 * above PG_LIVE_COPY_MAX_BYTES an empty one, and a note says so), migrated
 * with the candidate's migrations, in the live organism's sandbox profile
 * (private network with the live app's grants, no secrets, the workspace
 * read-only but organism/'s build), with EVO_LIVE_PREVIEW_START_MS to
 * become healthy. Only the owner's browser is sent to it (kernel/ctl's
 * preview routing); everything is removed when it stops, and at boot what a
 * killed kernel left (the copies; the sandbox dies with the kernel).
 *
 * Not to be confused with kernel/preview: the model's own candidate app on
 * an empty scratch database while it makes the change. */
#pragma once

#include "base/base.h"

struct cfg;
struct egress;
struct pg;

#define EVO_LIVE_PREVIEW_START_MS (90 * 1000)

struct evo_live_preview_config {
        const char *seed_dir;        /* the live Seed's folder (.seed/preview, .seed/logs, .seed/cache) */
        const char *worktree;        /* the candidate's committed worktree */
        const char *evo_id;          /* evo_<hex> */
        const char *hex;             /* <hex> */
        const struct cfg *cfg;       /* organism commands, migrations folder */
        const struct pg *pg;         /* required */
        const char *bridge_path;
        struct egress *egress;       /* the live organism's policy; may be NULL */
};

struct evo_live_preview;

/* Copies the live data, migrates the copy, builds and starts the candidate
 * and waits for it to be healthy. 0: *ret (caller stops it with
 * evo_live_preview_stop) and *ret_note (caller frees) says what runs on
 * what. Else everything made is removed again and *ret_error (caller frees)
 * says why. Everything borrowed from c outlives *ret. */
int evo_live_preview_start(const struct evo_live_preview_config *c, struct evo_live_preview **ret, char **ret_note,
                           char **ret_error);
/* The candidate's bridge socket (borrowed, while it runs). */
const char *evo_live_preview_socket(const struct evo_live_preview *p);
/* Stops the candidate, drops the copy of the live data, removes its run
 * dir. Accepts NULL. */
void evo_live_preview_stop(struct evo_live_preview *p);
