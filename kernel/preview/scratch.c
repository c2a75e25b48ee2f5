/* scratch.c — migrate, db_query and db_schema: the evolution's scratch
 * database, as role evolver, the only database these tools connect to. */
#include "preview/preview-internal.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "config/config.h"
#include "db/db.h"
#include "organism/migrations.h"
#include "pg/pg.h"

#include <ctype.h>
#include <strings.h>

#define DB_RESULT_MAX (2 * 1024 * 1024)
#define DB_ROWS_MAX 500
#define DB_STATEMENT_TIMEOUT "30s"

/* A connection to the evolution's scratch database as evolver — the only
 * database these tools ever connect to. */
static int scratch_connect(const struct preview *p, struct db **ret, char **ret_error) {
        if (!p->c.pg || !p->c.scratch_db)
                return -ENOENT;
        _cleanup_free_ char *ci = NULL;
        int k = pg_conninfo(p->c.pg, "evolver", p->c.scratch_db, &ci);
        if (k >= 0)
                k = db_connect_err(ci, ret, ret_error);
        if (ci)
                secure_zero(ci, strlen(ci));
        if (k >= 0)
                (void)db_exec(*ret, "SET statement_timeout = '" DB_STATEMENT_TIMEOUT "'", NULL);
        return k;
}

/* The call's scratch database in *ret_db (caller closes): 0; 1 when ret
 * holds why there is none (no preview in this phase, no database, cannot
 * connect); -ENOMEM. */
static int scratch_open(struct tool_ctx *ctx, const struct tool *t, struct db **ret_db, struct tool_result *ret) {
        if (!ctx->preview)
                return preview_unavailable(t, ret) < 0 ? -ENOMEM : 1;
        _cleanup_free_ char *err = NULL;
        int k = scratch_connect(ctx->preview, ret_db, &err);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return result(ret, true, "%s: cannot connect to the scratch database: %s", t->name,
                              k == -ENOENT ? "this evolution has none" : err ? err : strerror(-k)) < 0
                               ? -ENOMEM
                               : 1;
        return 0;
}

int preview_migrate(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_(db_closep) struct db *db = NULL;
        int k = scratch_open(ctx, t, &db, ret);
        if (k != 0)
                return k < 0 ? k : 0;
        const struct preview *p = ctx->preview;
        const char *dir = p->c.cfg->organism.migrations;
        struct db_migration *m = NULL;
        size_t n = 0;
        _cleanup_free_ char *err = NULL;
        if ((k = organism_migrations_load(p->c.root_fd, dir, &m, &n, &err)) < 0)
                return k == -ENOMEM ? k : result(ret, true, "migrate: cannot read %s: %s", dir, err ? err : strerror(-k));
        k = db_migrate(db, ORGANISM_MIGRATIONS_TABLE, m, n, &err);
        struct buf names = BUF_INIT(64 * 1024);
        for (size_t i = 0; i < n; i++)
                (void)buf_printf(&names, "%s%s", i ? ", " : "", m[i].name);
        organism_migrations_free(m, n);
        if (k < 0)
                k = k == -ENOMEM ? k
                                 : result(ret, true, "migrate: failed: %s", err ? err : strerror(-k));
        else
                k = result(ret, false, "Applied %d new migration%s to the scratch database %s (%zu in %s%s%s).", k,
                           k == 1 ? "" : "s", p->c.scratch_db, n, dir, n ? ": " : "", n && names.data ? names.data : "");
        buf_free(&names);
        return k;
}

/* Whether sql is a query whose rows can be returned as JSON. */
static bool returns_rows(const char *sql) {
        while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r' || *sql == '(')
                sql++;
        static const char *const kw[] = {"select", "with", "values", "table"};
        for (size_t i = 0; i < ARRAY_SIZE(kw); i++) {
                size_t l = strlen(kw[i]);
                if (!strncasecmp(sql, kw[i], l) && !isalnum((unsigned char)sql[l]) && sql[l] != '_')
                        return true;
        }
        return false;
}

int preview_db_query(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        const char *s = json_string_value(json_object_get(args, "sql"));
        _cleanup_free_ char *sql = s ? strdup(s) : NULL;
        if (!sql)
                return s ? -ENOMEM : result(ret, true, "db_query: \"sql\" is required");
        /* One statement: a trailing ';' (and blanks) is dropped; libpq's
         * extended protocol refuses more than one. */
        size_t len = strlen(sql);
        while (len > 0 && (isspace((unsigned char)sql[len - 1]) || sql[len - 1] == ';'))
                sql[--len] = 0;
        if (len == 0)
                return result(ret, true, "db_query: the statement is empty");
        _cleanup_(db_closep) struct db *db = NULL;
        int k = scratch_open(ctx, t, &db, ret);
        if (k != 0)
                return k < 0 ? k : 0;
        if (returns_rows(sql)) {
                _cleanup_free_ char *wrapped = NULL, *json = NULL;
                if (xasprintf(&wrapped, "SELECT * FROM (%s\n) AS seed_q LIMIT %d", sql, DB_ROWS_MAX + 1) < 0)
                        return -ENOMEM;
                k = db_query_json_max(db, wrapped, 0, NULL, DB_RESULT_MAX, &json);
                if (k == -ENOMEM)
                        return k;
                if (k == -E2BIG)
                        return result(ret, true, "db_query: the result is larger than %d bytes; select fewer rows "
                                      "or columns", DB_RESULT_MAX);
                if (k >= 0) {
                        _cleanup_json_ json_t *rows = json_loads(json, 0, NULL);
                        size_t n = json_array_size(rows);
                        bool more = n > DB_ROWS_MAX;
                        if (more)
                                json_array_remove(rows, DB_ROWS_MAX);
                        _cleanup_free_ char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
                        if (!text)
                                return -ENOMEM;
                        return result(ret, false, "%zu row%s%s:\n%s", more ? (size_t)DB_ROWS_MAX : n,
                                      n == 1 ? "" : "s", more ? " (only the first 500)" : "", text);
                }
                /* Fall through: the statement as written (a data-modifying
                 * WITH, or an error whose message we then get). A statement
                 * that failed above changed nothing. */
        }
        _cleanup_free_ char *err = NULL;
        k = db_execp(db, sql, 0, NULL, &err);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return result(ret, true, "db_query: %s", err ? err : strerror(-k));
        return result(ret, false, "OK: %d row%s affected.", k, k == 1 ? "" : "s");
}

int preview_db_schema(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_(db_closep) struct db *db = NULL;
        int k = scratch_open(ctx, t, &db, ret);
        if (k != 0)
                return k < 0 ? k : 0;
        const struct preview *p = ctx->preview;
        _cleanup_free_ char *json = NULL;
        k = db_query_json(db,
                          "SELECT c.table_schema AS s, c.table_name AS t, c.column_name AS c, c.data_type AS ty, "
                          "c.is_nullable AS n, c.column_default AS d FROM information_schema.columns c "
                          "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND "
                          "t.table_name = c.table_name "
                          "WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') "
                          "ORDER BY c.table_schema, c.table_name, c.ordinal_position LIMIT 5000",
                          0, NULL, &json);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return result(ret, true, "db_schema: cannot read the scratch database's schema");
        _cleanup_json_ json_t *rows = json_loads(json, 0, NULL);
        struct buf out = BUF_INIT(4u << 20);
        const char *last_s = NULL, *last_t = NULL;
        size_t i, tables = 0;
        json_t *row;
        json_array_foreach(rows, i, row) {
                const char *sc = json_string_value(json_object_get(row, "s")) ?: "";
                const char *tab = json_string_value(json_object_get(row, "t")) ?: "";
                const char *d = json_string_value(json_object_get(row, "d"));
                if (!last_t || !streq(sc, last_s) || !streq(tab, last_t)) {
                        if (streq(sc, "public"))
                                (void)buf_printf(&out, "%stable %s\n", tables ? "\n" : "", tab);
                        else
                                (void)buf_printf(&out, "%stable %s.%s\n", tables ? "\n" : "", sc, tab);
                        tables++;
                        last_s = sc;
                        last_t = tab;
                }
                (void)buf_printf(&out, "  %s %s%s%s%s\n", json_string_value(json_object_get(row, "c")) ?: "",
                                 json_string_value(json_object_get(row, "ty")) ?: "",
                                 streq(json_string_value(json_object_get(row, "n")) ?: "", "NO") ? " not null" : "",
                                 d ? " default " : "", d ? d : "");
        }
        k = tables ? result(ret, false, "Scratch database %s: %zu table%s\n\n%s", p->c.scratch_db, tables,
                            tables == 1 ? "" : "s", out.data ? out.data : "")
                   : result(ret, false, "The scratch database %s has no tables yet.", p->c.scratch_db);
        buf_free(&out);
        return k;
}
