/* spend.h (api) — the /_seed/api routes of the monthly spend (kernel/spend):
 *
 *   GET  spend    this UTC month's spend (spend_summary_json): by purpose,
 *                 by day, calls of unknown cost, the budget, what is paused
 *   POST spend    {"budget_usd": number 0..1000000 | null (no budget)}
 *                 → the same as GET; anything else is a 400 saying what is
 *                 expected, and changes nothing
 *
 * Bodies are at most API_SPEND_BODY_MAX bytes (413 past it). Like self.h,
 * the handlers know nothing of struct api. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

struct spend;

#define API_SPEND_BODY_MAX 1024

int api_spend_h_get(struct spend *s, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_spend_h_set(struct spend *s, const struct ctl_api_call *call, int *ret_status, char **ret_json);
