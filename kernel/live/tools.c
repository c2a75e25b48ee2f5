/* tools.c — the live data's and the live app's tools as data (see live.h):
 * query_data, describe_data, change_data and call_api. */
#include "live/live-internal.h"
#include "base/buf.h"
#include "base/json.h"
#include "db/db.h"
#include "organism/organism.h"

#define DESCRIBE_ROWS_MAX 5000
#define DESCRIBE_BYTES_MAX (1024 * 1024)

static int unavailable(const struct tool *t, struct tool_result *ret) {
        return tool_result_printf(ret, true, "%s is not available here", t->name);
}

/* The answer to a statement: its command tag, how many rows, the table. */
static int statement_answer(const struct tool *t, const struct db_statement_result *res, struct tool_result *ret) {
        _cleanup_free_ char *table = NULL;
        int r = live_table_text(res, &table);
        if (r < 0)
                return r;
        _cleanup_free_ char *more = NULL;
        if (res->truncated &&
            xasprintf(&more, " (the first %zu shown; the rest was left out: at most %d rows and %d KiB are read)",
                      res->n_rows, LIVE_ROWS_MAX, LIVE_BYTES_MAX / 1024) < 0)
                return -ENOMEM;
        if (res->n_columns == 0)
                return tool_result_printf(ret, false, "%s: %s", t->name, res->command ? res->command : "done");
        return tool_result_printf(ret, false, "%s: %s, %zu row%s%s\n\n%s", t->name,
                                  res->command ? res->command : "rows", res->n_rows, res->n_rows == 1 ? "" : "s",
                                  more ? more : "", table);
}

/* One statement on the live database as role, under the caps. */
static int run_statement(struct tool_ctx *ctx, const struct tool *t, const char *role, bool read_only, json_t *args,
                         struct tool_result *ret) {
        const char *sql = json_string_value(json_object_get(args, "sql"));
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *err = NULL;
        int r = live_connect(ctx->live, role, &db, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_printf(ret, true, "%s: cannot connect to the live database: %s", t->name,
                                          err ? err : strerror(-r));
        struct db_statement_limits lim = {
                .read_only = read_only,
                .timeout_ms = read_only ? LIVE_READ_TIMEOUT_MS : LIVE_CHANGE_TIMEOUT_MS,
                .max_rows = LIVE_ROWS_MAX,
                .max_bytes = LIVE_BYTES_MAX,
        };
        struct db_statement_result res = {0};
        r = db_statement(db, sql, &lim, &res, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_printf(ret, true, "%s: %s", t->name, err ? err : strerror(-r));
        r = statement_answer(t, &res, ret);
        db_statement_result_done(&res);
        return r;
}

static int tool_query_data(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->live)
                return unavailable(t, ret);
        return run_statement(ctx, t, "reader", true, args, ret);
}

static int tool_change_data(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->live)
                return unavailable(t, ret);
        /* Asked every time: it runs only for a call the owner approved just now. */
        if (!ctx->approval_id)
                return tool_result_printf(ret, true, "%s: not run: the owner was not asked", t->name);
        return run_statement(ctx, t, "organism", false, args, ret);
}

/* ---- describe_data ---- */

static const char describe_sql[] =
        "SELECT n.nspname AS s, c.relname AS t, c.relkind::text AS k, c.reltuples::bigint AS est, "
        "a.attname AS col, format_type(a.atttypid, a.atttypmod) AS ty, a.attnotnull::text AS nn, "
        "pg_get_expr(d.adbin, d.adrelid) AS def "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
        "LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%' "
        "ORDER BY n.nspname, c.relname, a.attnum";

static const char *relkind_name(const char *k) {
        switch (k ? k[0] : 0) {
        case 'v': return "view";
        case 'm': return "materialized view";
        case 'f': return "foreign table";
        case 'p': return "partitioned table";
        default: return "table";
        }
}

static int describe_text(const struct db_statement_result *res, struct buf *b, size_t *ret_tables) {
        const char *last_s = NULL, *last_t = NULL;
        size_t tables = 0;
        int r = 0;
        for (size_t row = 0; r >= 0 && row < res->n_rows; row++) {
                char **v = res->cells + row * res->n_columns;
                const char *s = v[0] ?: "", *tab = v[1] ?: "", *est = v[3] ?: "-1";
                if (!last_t || !streq(s, last_s) || !streq(tab, last_t)) {
                        long long n = strtoll(est, NULL, 10);
                        char rows[64];
                        if (n < 0)
                                snprintf(rows, sizeof rows, "rows: not yet estimated");
                        else
                                snprintf(rows, sizeof rows, "about %lld row%s", n, n == 1 ? "" : "s");
                        r = buf_printf(b, "%s%s %s%s%s (%s)\n", tables ? "\n" : "", relkind_name(v[2]),
                                       streq(s, "public") ? "" : s, streq(s, "public") ? "" : ".", tab, rows);
                        tables++;
                        last_s = s;
                        last_t = tab;
                }
                if (r >= 0)
                        r = buf_printf(b, "  %s %s%s%s%s\n", v[4] ?: "", v[5] ?: "",
                                       streq(v[6] ?: "", "true") ? " not null" : "", v[7] ? " default " : "",
                                       v[7] ? v[7] : "");
        }
        *ret_tables = tables;
        return r;
}

static int tool_describe_data(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->live)
                return unavailable(t, ret);
        _cleanup_(db_closep) struct db *db = NULL;
        _cleanup_free_ char *err = NULL;
        int r = live_connect(ctx->live, "reader", &db, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_printf(ret, true, "%s: cannot connect to the live database: %s", t->name,
                                          err ? err : strerror(-r));
        struct db_statement_limits lim = {.read_only = true, .timeout_ms = LIVE_READ_TIMEOUT_MS,
                                          .max_rows = DESCRIBE_ROWS_MAX, .max_bytes = DESCRIBE_BYTES_MAX};
        struct db_statement_result res = {0};
        r = db_statement(db, describe_sql, &lim, &res, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_printf(ret, true, "%s: %s", t->name, err ? err : strerror(-r));
        struct buf b = BUF_INIT(4u << 20);
        size_t tables = 0;
        r = res.n_columns == 8 ? describe_text(&res, &b, &tables) : -EPROTO;
        if (r >= 0)
                r = tables ? tool_result_printf(ret, false, "The live database: %zu table%s and view%s%s\n\n%s",
                                                tables, tables == 1 ? "" : "s", tables == 1 ? "" : "s",
                                                res.truncated ? " (more columns than shown)" : "", b.data)
                           : tool_result_printf(ret, false, "The live database has no tables yet.");
        buf_free(&b);
        db_statement_result_done(&res);
        return r;
}

/* ---- call_api ---- */

static bool is_get(json_t *args) { return streq(json_string_value(json_object_get(args, "method")) ?: "", "GET"); }

static int classify_call(const struct tool_ctx *ctx, const struct tool *t, json_t *args, enum tool_level *ret) {
        *ret = is_get(args) ? TOOL_SAFE : TOOL_DANGEROUS;
        return 0;
}

static int check_call(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error) {
        if (is_get(args) && json_object_get(args, "body"))
                return errorf(-EINVAL, ret_error, "a GET has no body: use another method (which the owner approves)");
        return 0;
}

static int tool_call_api(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct live *l = ctx->live;
        if (!l || !l->c.organism)
                return unavailable(t, ret);
        /* Only a GET reads; any other call runs only once the owner approved it. */
        if (!is_get(args) && !ctx->approval_id)
                return tool_result_printf(ret, true, "%s: not sent: the owner was not asked", t->name);
        struct organism_http_request req = {
                .method = json_string_value(json_object_get(args, "method")),
                .path = json_string_value(json_object_get(args, "path")),
                .headers = json_object_get(args, "headers"),
                .body = json_string_value(json_object_get(args, "body")),
        };
        _cleanup_free_ char *text = NULL, *err = NULL;
        int r = organism_http(organism_socket(l->c.organism), &req, &text, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_printf(ret, true, "%s: %s", t->name, err ? err : strerror(-r));
        return tool_result_printf(ret, false, "%s", text);
}

#define SQL_SCHEMA                                                                                             \
        "{\"type\":\"object\",\"properties\":{"                                                                \
        "\"sql\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":65536,\"description\":\"exactly one SQL statement\"}}," \
        "\"required\":[\"sql\"],\"additionalProperties\":false}"

const struct tool live_tools[] = {
        {
                .name = "query_data",
                .description = "Read the live app's data: one SQL statement (SELECT, WITH, VALUES, TABLE or SHOW) on the "
                               "live database, as a read-only role in a read-only transaction: it cannot change "
                               "anything. At most 200 rows are shown, 10 s at most. Use describe_data first to see "
                               "the tables. When your answer uses the result, say so.",
                .level = TOOL_SAFE,
                .schema = SQL_SCHEMA,
                .handler = tool_query_data,
                .phases = TOOL_PHASE_CHAT | TOOL_PHASE_HEALTH, /* the doctor's diagnosis reads too */
                .live_data = true,
        },
        {
                .name = "describe_data",
                .description = "The live database's tables and views: their columns (type, not null, default) "
                               "and an estimate of their rows.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
                .handler = tool_describe_data,
                .phases = TOOL_PHASE_CHAT | TOOL_PHASE_HEALTH, /* the doctor's diagnosis reads too */
                .live_data = true,
        },
        {
                .name = "change_data",
                .description = "Change the live app's data: one SQL statement (INSERT, UPDATE, DELETE …) run on the "
                               "live database as the app's own role. Dangerous: the owner sees the whole statement "
                               "and approves or denies it, every time; at most 16 KB. Prefer an evolution (with a "
                               "migration) for changes to the schema.",
                .level = TOOL_DANGEROUS,
                .always_ask = true,
                .schema = SQL_SCHEMA,
                .handler = tool_change_data,
                .phases = TOOL_PHASE_CHAT,
                .live_data = true,
        },
        {
                .name = "call_api",
                .description = "Send one HTTP request to the live app (its own API, as a browser would). GET reads "
                               "and is safe; any other method may change the live data, so the owner sees the whole "
                               "request and approves or denies it, every time (at most 16 KB). The answer: status "
                               "line, headers, body (at most 1 MiB).",
                .level = TOOL_SAFE,
                .classify = classify_call,
                .check = check_call,
                .always_ask = true,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"method\":{\"type\":\"string\",\"enum\":[\"GET\",\"HEAD\",\"POST\",\"PUT\",\"PATCH\",\"DELETE\"]},"
                          "\"path\":{\"type\":\"string\",\"pattern\":\"^/\",\"maxLength\":2048},"
                          "\"headers\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"maxLength\":4096}},"
                          "\"body\":{\"type\":\"string\",\"maxLength\":1048576}},"
                          "\"required\":[\"method\",\"path\"],\"additionalProperties\":false}",
                .handler = tool_call_api,
                .phases = TOOL_PHASE_CHAT,
                .live_data = true,
        },
        TOOL_TABLE_END,
};
