/* grants.c — the queries of table outbound_grants. See grants.h. */
#include "db/grants.h"
#include "db/db.h"
#include "base/log.h"

#include <inttypes.h>

#define GRANT_COLUMNS                                                                                          \
        "id, hosts, scope AS \"for\", secrets, reason, granted_by AS \"by\", granted_at AS \"at\", revoked_at"

int db_grant_insert(struct db *db, const char *id, const char *hosts_json, const char *scope,
                    const char *secrets_json, const char *reason, const char *by, int64_t at) {
        if (!db || !id || !hosts_json || !scope || !secrets_json || !by)
                return -EINVAL;
        char when[24];
        snprintf(when, sizeof when, "%" PRId64, at);
        const char *p[] = {id, hosts_json, scope, secrets_json, reason ? reason : "", by, when};
        _cleanup_free_ char *err = NULL;
        int r = db_execp(db,
                         "INSERT INTO outbound_grants (id, hosts, scope, secrets, reason, granted_by, granted_at) "
                         "VALUES ($1, $2::jsonb, $3, $4::jsonb, $5, $6, $7::bigint)",
                         7, p, &err);
        if (r < 0)
                return log_error_errno(r, "cannot store an outbound grant: %s", err ? err : "?");
        return 0;
}

int db_grant_revoke(struct db *db, const char *id, int64_t at, char **ret_json) {
        if (!db || !id)
                return -EINVAL;
        char when[24];
        snprintf(when, sizeof when, "%" PRId64, at);
        const char *p[] = {id, when};
        _cleanup_free_ char *rows = NULL;
        /* A data-modifying WITH must be the top level: no db_query_json here. */
        int r = db_query_value(db,
                               "WITH g AS (UPDATE outbound_grants SET revoked_at = $2::bigint "
                               "WHERE id = $1 AND revoked_at IS NULL RETURNING " GRANT_COLUMNS ") "
                               "SELECT coalesce(json_agg(row_to_json(g)), '[]')::text FROM g",
                               2, p, &rows);
        if (r < 0)
                return r;
        if (!rows || streq(rows, "[]"))
                return -ENOENT;
        if (ret_json)
                *ret_json = TAKE_PTR(rows);
        return 0;
}

int db_grants_active_json(struct db *db, char **ret_json) {
        return db_query_json(db,
                             "SELECT " GRANT_COLUMNS " FROM outbound_grants WHERE revoked_at IS NULL "
                             "ORDER BY granted_at, id",
                             0, NULL, ret_json);
}

int db_grants_json(struct db *db, char **ret_json) {
        char max[16];
        snprintf(max, sizeof max, "%d", DB_GRANTS_LIST_MAX);
        const char *p[] = {max};
        return db_query_json(db,
                             "SELECT " GRANT_COLUMNS " FROM outbound_grants ORDER BY granted_at DESC, id LIMIT $1::int",
                             1, p, ret_json);
}
