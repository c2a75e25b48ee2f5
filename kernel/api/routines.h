/* routines.h (api) — the /_seed/api routes of routines and jobs
 * (kernel/routines), owner only like every /_seed/api route:
 *
 *   GET  routines                       routines and jobs with their last runs
 *                                        (routines_list_json)
 *   GET  routines/{id}/runs             a routine's last runs, newest first
 *   POST routines/{id}/pause|resume|run|delete
 *   GET  jobs/{name}/runs               a job's last runs
 *   POST jobs/{name}/pause|resume|run   (a job is deleted from organism/routines.yaml)
 *
 * POST bodies: empty or {} (at most API_ROUTINES_BODY_MAX bytes). 404
 * unknown, 409 it runs already (run), 503 no routines (no kernel database).
 * Like spend.h, the handlers know nothing of struct api. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"
#include "routines/routines.h"

#define API_ROUTINES_BODY_MAX 1024

enum api_routines_action { API_ROUTINES_PAUSE, API_ROUTINES_RESUME, API_ROUTINES_RUN, API_ROUTINES_DELETE };

int api_routines_h_list(struct routines *r, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_routines_h_runs(struct routines *r, enum routines_kind kind, const struct ctl_api_call *call,
                        int *ret_status, char **ret_json);
int api_routines_h_act(struct routines *r, enum routines_kind kind, enum api_routines_action action,
                       const struct ctl_api_call *call, int *ret_status, char **ret_json);
