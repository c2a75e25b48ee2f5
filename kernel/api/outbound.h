/* outbound.h (api) — the /_seed/api routes of outbound access (SPEC §7, §8):
 *
 *   GET  outbound          {"grants", "revoked", "refused", "registries", …}
 *                          (outbound/outbound.h outbound_json)
 *   POST outbound/grant    {"hosts": [...], "for": "organism"|"evolutions",
 *                           "secrets"?: [...], "reason"?: "..."} → {"id"}
 *   POST outbound/revoke   {"id": "grt_…"} → {"ok": true}
 *
 * Bodies are at most API_OUTBOUND_BODY_MAX bytes (413 past it); a bad field
 * is a 400 naming it. A grant from here is the owner's own ("by": "owner").
 * Like self.h, the handlers know nothing of struct api: api.c's route table
 * calls them with the outbound they act on. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

struct outbound;

#define API_OUTBOUND_BODY_MAX (16 * 1024)

/* ^grt_[0-9a-f]{16}$ */
bool api_grant_id_valid(const char *s);

int api_outbound_h_get(struct outbound *o, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_outbound_h_grant(struct outbound *o, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_outbound_h_revoke(struct outbound *o, const struct ctl_api_call *call, int *ret_status, char **ret_json);
