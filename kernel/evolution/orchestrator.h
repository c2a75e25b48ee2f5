/* orchestrator.h — runs evolutions, one at a time in FIFO order, through the
 * state machine of SPEC §4: plan → mutate → verify (repair) → reflect →
 * boundary check → commit → apply, in a git worktree per evolution with a
 * scratch database per evolution, every step persisted as an event (store.h)
 * and announced through on_event. The owner's own commits on main on top of
 * the live generation are a job of their own (kind "owner", owner.h), queued
 * at start and before the next evolution or rollback, run first: verified
 * like an evolution (no model), recorded as a generation, applied. */
#pragma once

#include "base/base.h"
#include "base/json.h"

struct cfg;
struct db;
struct pg;
struct mind;
struct organism;
struct outbound;
struct repo_owner_change;

struct orch_config {
        const char *seed_dir;          /* the live Seed's folder */
        const struct cfg *cfg;         /* seed.yaml (borrowed, outlives the orchestrator) */
        struct db *kdb;                /* kernel-memory DB */
        const struct pg *pg;           /* the private PostgreSQL (scratch DBs, live migrations) */
        struct mind *mind;             /* the model it thinks with (borrowed, outlives it); without a
                                        * usable model an evolution fails at planning saying why */
        struct organism *organism;     /* the live organism (restarted on apply); may be NULL */
        const char *bridge_path;       /* seed-bridge, for previews */
        struct egress *egress;         /* every sandbox's way out (borrowed); NULL: none */
        struct outbound *outbound;     /* the owner's outbound access, for request_outbound_access
                                        * and outbound_status (borrowed); NULL: not available */
        /* While the model cannot be reached, an evolution retries every this
         * many ms, for seed.yaml's evolution.model_wait_seconds; 0 = 30 s
         * (tests use small values). */
        int model_wait_interval_ms;
        /* Every event, after it is stored: (evolution id, kind, compact JSON
         * object). Called from the worker thread. */
        void (*on_event)(void *userdata, const char *evo_id, const char *kind, const char *json);
        /* An applied generation changed kernel files: the kernel should exit
         * 75 so `seed run` rebuilds it from its new source. */
        void (*request_restart)(void *userdata);
        /* A record of the kernel's for the owner's chat (role "kernel", never
         * the owner's words): e.g. a roadmap stage is live and what is next.
         * May be NULL. */
        int (*on_record)(void *userdata, const char *text);
        /* The owner's preview of evolution evo_id (its candidate is
         * generation) runs behind the bridge socket at socket_path
         * (live-preview.h), or ended (socket_path NULL): only the owner's
         * browser is to be sent there. Called from the worker thread. May be
         * NULL. */
        void (*on_preview)(void *userdata, const char *evo_id, int generation, const char *socket_path);
        void *userdata;
};

struct orchestrator;
struct tool;

/* The tool set of every evolution phase (NULL-terminated tables, see
 * tools/tools.h): kernel/tools' table, kernel/preview's, kernel/outbound's
 * (request_outbound_access, outbound_status) and the orchestrator's own (ask_owner, whose handler takes the evolution's run from
 * tool_ctx.userdata). Static data. */
extern const struct tool *const orch_tool_set[];

/* Boot recovery (interrupted evolutions fail, the live generation is
 * untouched, pending approvals expire), then starts the worker thread. */
int orch_start(const struct orch_config *cfg, struct orchestrator **ret);
/* Cancels the running evolution, stops the worker, frees. Accepts NULL. */
void orch_stop(struct orchestrator *o);

/* Queues an evolution for the owner's intent. *ret_id: caller frees. */
int orch_submit(struct orchestrator *o, const char *intent, const char *owner_words, char **ret_id);
/* Queues the doctor's fix of an incident (kernel/health): an evolution of
 * kind "fix", whose intent the planner is shown as the kernel's, not as the
 * owner's. *ret_id: caller frees. */
int orch_submit_fix(struct orchestrator *o, const char *intent, char **ret_id);
/* How the planner is shown an evolution's intent: the owner's, a stage of
 * the kernel's roadmap, the kernel's incident fix (kind "fix"). Static. */
const char *orch_intent_label(const char *kind, bool roadmap_stage);
/* Queues the next stage of the newest roadmap (roadmap.h) as an evolution
 * whose intent is the goal, the stages done and this stage. -ENOENT no
 * roadmap, -EALREADY every stage is done, -EBUSY one of its evolutions is
 * under way; then *ret_error (caller frees) says so. */
int orch_continue_roadmap(struct orchestrator *o, char **ret_id, char **ret_error);
/* Queues a rollback: a new generation restoring generation n's tree and,
 * with_data, the live data as backed up last while n was live. */
int orch_rollback(struct orchestrator *o, int generation, bool with_data, char **ret_id);
/* Cancels a queued or running evolution: -ENOENT unknown, -EALREADY ended,
 * -EBUSY applying (main is moving: it ends complete or rolled back). */
int orch_cancel(struct orchestrator *o, const char *evo_id);
/* The status' "owner_change" (evolution/owner.h): the owner's commits on
 * main that are not a generation (pending, being verified, failed), or main
 * not containing the live generation; *ret = NULL when there is nothing to
 * say. change is where main stands (repo_owner_change(), e.g. cached:
 * repo_refs_cache_owner_change()), borrowed. Caller owns *ret. */
int orch_owner_change_json(struct orchestrator *o, const struct repo_owner_change *change, json_t **ret);
/* Changes whenever the orchestrator's part of that changes (a counter,
 * never going back; where main stands is the caller's to compare). No lock
 * taken. 0 for NULL. */
uint64_t orch_owner_change_version(struct orchestrator *o);
/* Decides a pending approval or answers a question (answer != NULL) and
 * wakes the evolution waiting for it. -ENOENT unknown, -EALREADY decided. */
int orch_decide(struct orchestrator *o, const char *approval_id, bool approved, const char *answer);

/* The owner's decision on the preview of a candidate generation (issue 15;
 * the preview runs when the setting evolution.preview is on, store.h):
 * apply goes live as without a preview; changes sends feedback (at most
 * ORCH_FEEDBACK_MAX bytes) back to the model for a new round of the same
 * evolution (mutate, verify, reflect, commit, preview again); discard ends
 * it, cancelled. -ENOENT when no preview of evo_id is waiting for the owner,
 * -EINVAL for changes without feedback. */
enum orch_preview_action { ORCH_PREVIEW_APPLY = 1, ORCH_PREVIEW_CHANGES, ORCH_PREVIEW_DISCARD };
#define ORCH_FEEDBACK_MAX (16 * 1024)
int orch_preview_decide(struct orchestrator *o, const char *evo_id, enum orch_preview_action action,
                        const char *feedback);
