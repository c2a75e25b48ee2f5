/* grants.h — kernel memory: the owner's outbound grants (table
 * outbound_grants, migration 0004). kernel/outbound is their only user and
 * checks every field before it comes here; this file is only their queries
 * (libpq stays in kernel/db). Rows come back as JSON text (caller frees):
 * {"id", "hosts": [...], "for": "organism"|"evolutions", "secrets": [...],
 *  "reason", "by", "at", "revoked_at": null|ms}. */
#pragma once

#include "base/base.h"

struct db;

#define DB_GRANTS_LIST_MAX 500 /* rows a listing returns, newest first */

/* Inserts an active grant. hosts_json and secrets_json are JSON arrays of
 * strings (checked by the caller), scope "organism" or "evolutions", by
 * "owner" or an approval id. -EIO on a server error (logged). */
int db_grant_insert(struct db *db, const char *id, const char *hosts_json, const char *scope,
                    const char *secrets_json, const char *reason, const char *by, int64_t at);
/* Marks an active grant revoked at `at`; *ret_json (may be NULL) gets the
 * row as it was. -ENOENT when there is no active grant of that id. */
int db_grant_revoke(struct db *db, const char *id, int64_t at, char **ret_json);
/* The active grants, oldest first (all of them: each was checked against the
 * proxy's limits when it was granted). */
int db_grants_active_json(struct db *db, char **ret_json);
/* Every grant, revoked ones too, newest first (at most DB_GRANTS_LIST_MAX). */
int db_grants_json(struct db *db, char **ret_json);
