/* store.h — evolutions, their events and the owner's approvals, kept in the
 * kernel-memory database (migration 0002). Every state change is checked
 * against the state machine and recorded as a "phase" event. Reads return
 * JSON text (caller frees) for the API and the CLI. */
#pragma once

#include "base/base.h"
#include "evolution/state.h"

struct db;

/* Event kinds of SPEC §4, and "waiting" / "resumed" (the model cannot be
 * reached and the evolution waits it out; kernel/agent). */
bool evo_event_kind_valid(const char *kind);

/* A new evolution in state requested (kind "evolve", "rollback", "owner":
 * the verification of the owner's own commits on main, or "fix": the
 * doctor's fix of an incident, which evolves like "evolve"); intent is the
 * owner's words, or the kernel's for "fix" (at most 16 KiB). *ret_id is "evo_<16 hex>"; caller frees. */
int evo_create(struct db *db, const char *intent, const char *kind, char **ret_id);
/* The same with what else a new evolution carries (migration 0010): the
 * owner's own words when the intent is the chat agent's (≤ 16 KiB, or NULL),
 * and the roadmap stage it is (roadmap_id NULL: none; stage 0-based). */
struct evo_new {
        const char *intent;
        const char *kind;
        const char *owner_words;
        const char *roadmap_id;
        int roadmap_stage;
};
int evo_create_new(struct db *db, const struct evo_new *n, char **ret_id);
/* Moves id to `to` if the state machine allows it from its current state;
 * -EPERM if not (with *ret_error saying from → to), -ENOENT for an unknown id,
 * -EAGAIN if it changed under us. Entering needs_input remembers the state
 * it interrupts; failed keeps `note` as the error. */
int evo_set_state(struct db *db, const char *id, enum evo_state to, const char *note, char **ret_error);
int evo_get_state(struct db *db, const char *id, enum evo_state *ret);
/* Appends an event; data_json must be a JSON object (at most 1 MiB). */
int evo_event(struct db *db, const char *id, const char *kind, const char *data_json);
/* Sets plan fields after submit_plan (title ≤ 200, scope slug, plan JSON). */
int evo_set_plan(struct db *db, const char *id, const char *title, const char *scope, const char *plan_json);
/* Records the commit an evolution made (on base_oid, the live commit it
 * started from) and the generations it goes from and to. */
int evo_set_generation(struct db *db, const char *id, const char *base_oid, const char *commit_oid, int from_gen,
                       int to_gen);
/* Counts a repair attempt; returns the new count. */
int evo_count_repair(struct db *db, const char *id);

/* One evolution as a JSON object (with owner_words, roadmap_id, roadmap_stage), with its events (after_event_id > 0: only
 * newer ones) and "usage" (its model calls' tokens, cached and uncached input
 * apart, and cost: db_usage_reference_json) when with_events. Its "waiting" is, while it is under way,
 * the data of its last "waiting" event not followed by "resumed"
 * ({"reason","retry_at","until","attempt"}), else null. -ENOENT if unknown. */
int evo_get_json(struct db *db, const char *id, bool with_events, int64_t after_event_id, char **ret_json);
/* The newest evolutions first (limit 1..500), each with "waiting" as above. */
int evo_list_json(struct db *db, int limit, char **ret_json);
/* The oldest evolution still requested (FIFO; the owner's commits are
 * verified first, so a queued "owner" job comes before the others), or
 * -ENOENT. */
int evo_next_requested(struct db *db, char **ret_id);
/* The oldest requested evolution of a kind, or -ENOENT. */
int evo_find_requested(struct db *db, const char *kind, char **ret_id);
/* The ids of the evolutions in state st, oldest first; *ret_ids is a
 * NULL-terminated list (NULL when there is none), caller frees with
 * strv_free(). */
int evo_ids_in_state(struct db *db, enum evo_state st, char ***ret_ids);
/* Boot recovery: every evolution that was under way is failed ("interrupted
 * by a kernel restart") and every pending approval expires. Returns how many
 * evolutions were failed. */
int evo_recover(struct db *db);

/* ---- approvals: for that exact call of that evolution, never reused ---- */
/* kind: tool | plan | apply | question. request_json: shown in full. evo_id
 * NULL: a call of the chat's. */
int evo_approval_create(struct db *db, const char *evo_id, const char *kind, const char *tool, const char *level,
                        const char *request_json, char **ret_id);
/* Decides a pending approval: a question only with an answer (non-NULL), any
 * other kind only with approved/denied (answer NULL); the wrong form is
 * -EINVAL and changes nothing. -ENOENT if unknown, -EALREADY if already
 * decided or expired. */
int evo_approval_decide(struct db *db, const char *id, bool approved, const char *answer);
/* Expires a pending approval nobody will wait for any more (the chat gave
 * up waiting, or stopped): 0, or -EALREADY when it was decided already. */
int evo_approval_expire(struct db *db, const char *id);
/* "pending", "approved", "denied", "answered" or "expired"; answer may be NULL. */
int evo_approval_state(struct db *db, const char *id, char **ret_state, char **ret_answer);
int evo_approvals_pending_json(struct db *db, char **ret_json);

/* ---- the owner's evolution settings (kernel_settings "evolution.preview") ----
 * Whether a candidate generation runs on a copy of the live data for the
 * owner to try before it is applied: on unless the owner turned it off.
 * The only reader and writer of that key. */
#define EVO_SETTING_PREVIEW "evolution.preview"
int evo_preview_enabled(struct db *db, bool *ret);
int evo_preview_set(struct db *db, bool on);
