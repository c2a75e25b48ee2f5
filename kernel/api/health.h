/* health.h (api) — the /_seed/api routes of the doctor's incidents
 * (kernel/health):
 *
 *   GET  incidents              the newest first (at most 100), without their evidence and
 *                               diagnosis, with "auto_fix", "diagnoses_today", "diagnoses_per_day"
 *   GET  incidents/{id}         one, with its evidence and diagnosis
 *   POST incidents/{id}/fix     {} → 202 {"evolution": id}: the fix's evolution is queued
 *                               (409 when its status allows no fix)
 *   POST incidents/{id}/ignore  {} → the incident, ignored (409 when it has ended)
 *   POST health                 {"auto_fix": bool} → the same as GET incidents
 *
 * Ids are ^inc_[0-9a-f]{16}$ (404 otherwise); bodies at most
 * API_HEALTH_BODY_MAX bytes. Like spend.h, the handlers know nothing of
 * struct api. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

struct health;

#define API_HEALTH_BODY_MAX 1024

int api_health_h_list(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_health_h_get(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_health_h_fix(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_health_h_ignore(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_health_h_settings(struct health *h, const struct ctl_api_call *call, int *ret_status, char **ret_json);
