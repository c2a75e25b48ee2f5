/* roadmap.h — staged goals (issue 19 "Reach"): a goal too large for one
 * change, split by a plan (submit_plan "goal" and "stages") into 2..6
 * stages, each one evolution. Kept in the kernel DB (migration 0010: table
 * roadmaps; an evolution's roadmap_id and roadmap_stage) and rendered by
 * the kernel, never the model, as knowledge/roadmap.md (TOOLS_ROADMAP_PATH):
 * a checklist, committed with each stage's generation, its box ticked in the
 * commit of the evolution that does it. A stage is done once its evolution
 * is complete (live). JSON out-params are caller-freed text. */
#pragma once

#include "base/base.h"

struct db;
struct json_t;

#define ROADMAP_MD_MAX (16 * 1024)
/* The base's knowledge/roadmap.md when no roadmap is in play (one the owner
 * wrote, of any size), put back as it was: as large as a commit takes one
 * file (repo's 100 MiB), not the kernel's own ROADMAP_MD_MAX. */
#define ROADMAP_BASE_MAX (100u * 1024 * 1024)

/* A new roadmap of id (the declaring evolution's), goal and stages (a JSON
 * array of 2..6 strings, validated by submit_plan's schema; checked again
 * here), and makes the evolution its stage 0. -EINVAL bad input. */
int roadmap_create(struct db *db, const char *id, const char *goal, struct json_t *stages);
/* {"id","goal","stages":[…],"done","created_at","updated_at"} of id, or of
 * the newest roadmap when id is NULL; -ENOENT none. */
int roadmap_get_json(struct db *db, const char *id, char **ret_json);
/* Stage `stage` went live: done becomes at least stage + 1. */
int roadmap_stage_done(struct db *db, const char *id, int stage);
/* The id of an evolution of roadmap id still under way (not complete,
 * failed, cancelled or rolled back), or -ENOENT. */
int roadmap_running(struct db *db, const char *id, char **ret_evo_id);

/* knowledge/roadmap.md for roadmap (a roadmap_get_json() object) with the
 * first `done` stages ticked. Caller frees. */
int roadmap_markdown(struct json_t *roadmap, int done, char **ret);
/* The intent of the evolution doing stage `stage` of roadmap: the goal,
 * the stages done so far, this stage, and what comes after it. */
int roadmap_stage_intent(struct json_t *roadmap, int stage, char **ret);
/* The chat's record once stage `stage` is live: what is done and what is
 * next (or that the goal is reached). */
int roadmap_record(struct json_t *roadmap, int stage, char **ret);
