/* roadmap.h (api) — the /_seed/api routes of the roadmap (staged goals,
 * kernel/evolution/roadmap.h):
 *
 *   GET  roadmap           {"roadmap": the newest roadmap or null, "markdown":
 *                          knowledge/roadmap.md as the kernel renders it from
 *                          what is live, "next": {"stage", "text"} or null,
 *                          "running": the id of its evolution under way or null}
 *   POST roadmap/continue  {} → 202 {"id"}: the next stage's evolution;
 *                          404 no roadmap, 409 done or one under way (the
 *                          error says which)
 *
 * Like spend.h, the handlers know nothing of struct api. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

struct db;
struct orchestrator;

int api_roadmap_h_get(struct db *kdb, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_roadmap_h_continue(struct orchestrator *o, const struct ctl_api_call *call, int *ret_status,
                           char **ret_json);
