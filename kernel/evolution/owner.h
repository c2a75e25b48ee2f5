/* owner.h — the owner's own commits on main, as the kernel explains and
 * serves them. A commit the owner made on main on top of the live
 * generation is verified like an evolution (by the orchestrator, as a job of
 * kind "owner") and recorded as a generation of its own. Until then the live
 * organism keeps running the live generation from an export of it
 * (<seed>/.seed/live), and the status, the control plane and `seed status`
 * say what is happening, what failed and how to fix or revert it, in the
 * words made here. */
#pragma once

#include "base/base.h"
#include "base/json.h"

struct cfg;

enum evo_owner_state {
        EVO_OWNER_PENDING,   /* committed while the kernel ran: verified before the
                              * next evolution or at the next start */
        EVO_OWNER_VERIFYING, /* its job is queued or running */
        EVO_OWNER_FAILED,    /* it did not build, test, launch or stay healthy */
        EVO_OWNER_DIVERGED,  /* main does not contain the live generation */
};
const char *evo_owner_state_name(enum evo_owner_state s);

/* What is known about the owner's commits. Strings are borrowed. */
struct evo_owner_view {
        enum evo_owner_state state;
        const char *seed_dir;     /* for the git commands of the fix */
        const char *commit;       /* HEAD's commit (40 hex) */
        const char *subject;      /* its summary (one line), or NULL */
        size_t n_commits;         /* commits on top of the live generation */
        int generation;           /* the live generation */
        bool on_main;             /* DIVERGED: whether HEAD is the branch main */
        const char *error;        /* FAILED: what failed (evo_owner_check_error()) */
        int restored;             /* FAILED once live: the generation that restored
                                   * the live one's files, else 0 */
        const char *evolution;    /* the job verifying it, or NULL */
};

/* The plain sentence the status, the banner and `seed status` show, and the
 * fix on its own (both at most a few KiB; caller frees each). */
int evo_owner_text(const struct evo_owner_view *v, char **ret_text, char **ret_fix);
/* The status' "owner_change": {commit, subject, commits, generation, state,
 * error (FAILED), fix, text, evolution (when known)}. Caller owns *ret. */
int evo_owner_json(const struct evo_owner_view *v, json_t **ret);
/* What failed, from a failed check of verify.h: "the build failed:" and the
 * first lines of its output (and its last ones when it is longer), at most
 * 3 KiB, valid UTF-8 without control characters but newlines. check is the
 * step's name ("build", "test", …). Caller frees *ret. */
int evo_owner_check_error(const char *check, const char *output, char **ret);

/* The folder the live organism builds and runs from: the Seed folder when
 * main is the live generation (uncommitted edits there are picked up as
 * always), else a fresh export of the live generation in <seed>/.seed/live.
 * Falls back to the Seed folder (logged) when the export cannot be made.
 * Caller frees *ret_path. */
int evo_owner_live_workspace(const char *seed_dir, char **ret_path);
/* The live generation's seed.yaml, parsed, when main is not the live
 * generation (the owner's commits on top, or diverged): what the kernel
 * runs with when the Seed folder's seed.yaml does not load, so the owner's
 * broken seed.yaml does not keep the Seed from starting (its verification
 * then says what is wrong). -ENOENT when main is the live generation (its
 * seed.yaml is the folder's). Caller frees *ret with cfg_free(). */
int evo_owner_live_config(const char *seed_dir, struct cfg **ret);
