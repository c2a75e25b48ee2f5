/* backups.h (api) — the /_seed/api routes of the owner's backups
 * (kernel/backups):
 *
 *   GET  backups                 {"backups": [{"id", "kind", "generation", "size", "time"}], "kinds", "busy"}
 *   POST backups                 {} → 201 {"id"}: a manual backup now
 *   POST backups/{id}/restore    {} → 200 {"restored", "saved"}: today's data saved as "saved" first
 *   GET  backups/{id}/download   the dump itself (application/octet-stream, attachment), streamed
 *
 * Like every /_seed/api route: the owner's session and its X-Seed-Token,
 * or the CLI token. An id is checked before anything (400); an unknown one
 * is a 404; a backup or restore while the live data is being changed (an
 * apply, another backup or restore) is a 409; a full disk is a 507 saying
 * so (nothing is lost); a restore that failed is a 500 saying why and that
 * the saved data is back. Like outbound.h, the handlers know nothing of
 * struct api. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

struct backups;

#define API_BACKUPS_BODY_MAX 1024

int api_backups_h_list(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_backups_h_take(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_backups_h_restore(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_backups_h_download(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json,
                           struct ctl_stream *ret_stream);
