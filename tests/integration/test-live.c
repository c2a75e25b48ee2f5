/* Integration tests for kernel/live against a real private PostgreSQL (and
 * kernel/pg's copies of the live data for previews): the
 * chat's query_data cannot write whatever SQL it sends (each attempt is
 * checked against the live data afterwards), its results are capped, and
 * change_data runs only once the owner approved that very call. Runs as the
 * unprivileged 'seed' account (drops root first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/resource.h>

#include "base/fileio.h"
#include "base/json.h"
#include "base/priv.h"
#include "db/db.h"
#include "live/live.h"
#include "pg/pg.h"
#include "tools/tools.h"
#include "../common/comment.h"

static char seed_dir[64];
static struct pg *g_pg;
static struct live *g_live;

static const struct tool *const set[] = {live_tools, NULL};

/* The owner, as the chat's approval hook: approves (1) or denies (0). */
static int owner_answer;
static int owner_asked;
static char *owner_saw;
static int ask(struct tool_ctx *ctx, const struct tool *t, const char *args_json, enum tool_level level,
               char **ret_approval_id) {
        owner_asked++;
        free(owner_saw);
        owner_saw = strdup(args_json);
        if (owner_answer == 1)
                (void)xasprintf(ret_approval_id, "apr_%016x", (unsigned)owner_asked);
        return owner_answer;
}
static const struct tool_hooks hooks = {.ask = ask};

static struct tool_ctx ctx(void) {
        return (struct tool_ctx){
                .set = set,
                .phase = TOOL_PHASE_CHAT,
                .root_fd = -1,
                .decisions = {[TOOL_SAFE] = CFG_ALLOW, [TOOL_REVIEW] = CFG_ASK, [TOOL_DANGEROUS] = CFG_ASK},
                .live = g_live,
                .hooks = &hooks,
        };
}

static struct tool_result call(const char *name, const char *args) {
        struct tool_ctx c = ctx();
        struct tool_result r = {0};
        assert_int_equal(tools_call(&c, name, args, &r), 0);
        assert_non_null(r.output);
        return r;
}

static char *sql_args(const char *sql) {
        json_t *o = json_pack("{s:s}", "sql", sql);
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        assert_non_null(s);
        return s;
}

static struct db *connect_as(const char *role, const char *dbname) {
        _cleanup_free_ char *ci = NULL, *err = NULL;
        assert_int_equal(pg_conninfo(g_pg, role, dbname, &ci), 0);
        struct db *db = NULL;
        if (db_connect_err(ci, &db, &err) < 0)
                fail_msg("%s -> %s: %s", role, dbname, err ? err : "?");
        return db;
}

static char *value(struct db *db, const char *sql) {
        char *v = NULL;
        if (db_query_value(db, sql, 0, NULL, &v) < 0)
                fail_msg("query '%s' failed", sql);
        return v;
}

/* Everything an attempt could have changed, as one line of text. */
static char *live_state(void) {
        _cleanup_(db_closep) struct db *db = connect_as("postgres", PG_LIVE_DB);
        return value(db,
                     "SELECT (SELECT count(*) || ':' || string_agg(id || '=' || name, ',' ORDER BY id) FROM items) || '|' "
                     "|| (SELECT last_value FROM items_id_seq) || '|' "
                     "|| (SELECT count(*) FROM pg_class WHERE relname = 'evil') || '|' "
                     "|| (SELECT count(*) FROM pg_largeobject_metadata) || '|' "
                     "|| coalesce((SELECT array_to_string(rolconfig, ',') FROM pg_roles WHERE rolname = 'reader'), '') "
                     "|| '|' || (SELECT count(*) FROM pg_namespace WHERE nspname = 'evil')");
}

/* ---- the live database, as the app would have it ---- */

static void test_setup_live_data(void **state) {
        _cleanup_(db_closep) struct db *db = connect_as("organism", PG_LIVE_DB);
        _cleanup_free_ char *err = NULL;
        if (db_exec(db,
                    "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);"
                    "INSERT INTO items (name) VALUES ('apple'), ('pear'), ('plum');"
                    "CREATE TABLE many AS SELECT g AS n, repeat('x', 2000) AS pad FROM generate_series(1, 1000) g;"
                    /* A function with side effects the app might own: SECURITY
                     * DEFINER, and PUBLIC may execute it by default. */
                    "CREATE FUNCTION bump() RETURNS void LANGUAGE sql SECURITY DEFINER AS "
                    "$$INSERT INTO items (name) VALUES ('bumped')$$;"
                    "ANALYZE items",
                    &err) < 0)
                fail_msg("setup: %s", err ? err : "?");
}

/* ---- reads ---- */

static void test_query_data_reads(void **state) {
        _cleanup_free_ char *args = sql_args("SELECT id, name, NULL AS nothing, 'a|b' || chr(10) || 'c' AS odd "
                                             "FROM items ORDER BY id");
        struct tool_result r = call("query_data", args);
        assert_false(r.is_error);
        assert_int_equal(r.level, TOOL_SAFE);
        assert_non_null(strstr(r.output, "query_data: SELECT 3, 3 rows"));
        assert_non_null(strstr(r.output, "id | name | nothing | odd\n"));
        assert_non_null(strstr(r.output, "1 | apple | NULL | a\\|b\\nc\n"));
        assert_non_null(strstr(r.output, "3 | plum"));
        tool_result_done(&r);
        /* describe_data: tables, columns, estimates. */
        r = call("describe_data", "{}");
        assert_false(r.is_error);
        assert_non_null(strstr(r.output, "table items (about 3 rows)"));
        assert_non_null(strstr(r.output, "  name text not null"));
        assert_non_null(strstr(r.output, "  id integer not null default nextval('items_id_seq'::regclass)"));
        tool_result_done(&r);
}

static void test_query_data_caps(void **state) {
        /* Rows: 200 shown of 1000. */
        _cleanup_free_ char *a = sql_args("SELECT n FROM many ORDER BY n");
        struct tool_result r = call("query_data", a);
        assert_false(r.is_error);
        assert_non_null(strstr(r.output, "200 rows (the first 200 shown; the rest was left out"));
        assert_non_null(strstr(r.output, "\n200\n"));
        assert_null(strstr(r.output, "\n201\n"));
        tool_result_done(&r);
        /* Bytes: 1000 rows of 2 KB are over 256 KiB: fewer rows kept, and each
         * value shown cut. */
        _cleanup_free_ char *b = sql_args("SELECT n, pad FROM many ORDER BY n");
        r = call("query_data", b);
        assert_false(r.is_error);
        assert_non_null(strstr(r.output, "the rest was left out"));
        assert_non_null(strstr(r.output, "… (2000 bytes)"));
        tool_result_done(&r);
        /* The statement timeout ends a long one (10 s). */
        _cleanup_free_ char *c = sql_args("SELECT pg_sleep(120)");
        r = call("query_data", c);
        assert_true(r.is_error);
        assert_non_null(strstr(r.output, "statement timeout"));
        tool_result_done(&r);
}

static long peak_rss_kib(void) {
        struct rusage ru;
        assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
        return ru.ru_maxrss;
}

/* A single row of 64 MiB: the server measures it and sends it empty, so
 * the kernel's memory never holds it (its peak grows by far less than the
 * value); the row is left out like any over the cap, the rows before it
 * kept. Reads the server cannot wrap are refused, but SHOW; so is EXPLAIN. */
static void test_query_data_huge_row_stays_out_of_memory(void **state) {
        _cleanup_free_ char *a = sql_args("SELECT n, CASE WHEN n = 2 THEN repeat('x', 64 * 1024 * 1024) ELSE 'small' "
                                          "END AS v FROM generate_series(1, 3) n ORDER BY n");
        long before = peak_rss_kib();
        struct tool_result r = call("query_data", a);
        long grown = peak_rss_kib() - before;
        print_message("# the peak memory grew %ld KiB reading a row of 64 MiB\n", grown);
        if (r.is_error)
                fail_msg("%s", r.output);
        assert_false(r.is_error);
        assert_non_null(strstr(r.output, "n | v\n1 | small\n"));
        assert_non_null(strstr(r.output, "the rest was left out"));
        assert_null(strstr(r.output, "xxxx"));
        assert_true(grown < 16 * 1024);
        tool_result_done(&r);
        /* a row over the cap by its columns together, each one under it */
        _cleanup_free_ char *b = sql_args("SELECT 'first' AS a, 'row' AS b UNION ALL "
                                          "SELECT repeat('y', 200 * 1024), repeat('z', 200 * 1024)");
        r = call("query_data", b);
        if (r.is_error || !strstr(r.output, "the rest was left out") || !strstr(r.output, "a | b\nfirst | row\n") ||
            strstr(r.output, "yyyy"))
                fail_msg("%s", r.output);
        tool_result_done(&r);
        /* column names, NULLs and types as before the wrapping */
        _cleanup_free_ char *c = sql_args("SELECT 1 AS x, 1 AS x, NULL::int AS z, 'a '::char(3) AS p, '10.0.0.1'::inet AS i;");
        r = call("query_data", c);
        if (r.is_error) fail_msg("%s", r.output);
        assert_non_null(strstr(r.output, "x | x | z | p | i\n1 | 1 | NULL | a   | 10.0.0.1\n"));
        tool_result_done(&r);
        _cleanup_free_ char *d = sql_args("SHOW statement_timeout");
        r = call("query_data", d);
        assert_false(r.is_error);
        assert_non_null(strstr(r.output, "statement_timeout\n"));
        tool_result_done(&r);
        /* EXPLAIN quotes folded constants of any size in one row: refused */
        _cleanup_free_ char *e = sql_args("EXPLAIN VERBOSE SELECT repeat('x', 100000000)");
        r = call("query_data", e);
        if (!r.is_error || !strstr(r.output, "EXPLAIN is not available"))
                fail_msg("%s", r.output);
        tool_result_done(&r);
        /* the server's words are bounded, whatever value they quote */
        _cleanup_free_ char *h = sql_args("SELECT repeat('q', 100000)::int");
        r = call("query_data", h);
        if (!r.is_error || strlen(r.output) > 4096)
                fail_msg("%zu bytes: %.200s", strlen(r.output), r.output);
        tool_result_done(&r);
        _cleanup_free_ char *f = sql_args("SELECT repeat('x', 100000000); -- a comment after the semicolon");
        r = call("query_data", f);
        assert_true(r.is_error);
        assert_non_null(strstr(r.output, "cannot be read under the caps"));
        tool_result_done(&r);
}

/* ---- no SQL whatsoever writes ---- */

static const struct {
        const char *sql;
        const char *error;   /* a part of the refusal ("": any refusal; NULL: it may even run,
                              * as lo_create does, but the rollback keeps nothing) */
} attempts[] = {
        {"INSERT INTO items (name) VALUES ('evil')", "read-only transaction"},
        {"UPDATE items SET name = 'evil'", "read-only transaction"},
        {"DELETE FROM items", "read-only transaction"},
        {"TRUNCATE items", "read-only transaction"},
        {"DROP TABLE items", "read-only transaction"},
        {"CREATE TABLE evil (x int)", "read-only transaction"},
        {"CREATE SCHEMA evil", "read-only transaction"},
        {"ALTER TABLE items ADD COLUMN evil int", "read-only transaction"},
        {"CREATE TEMP TABLE evil (x int)", ""},
        {"SET transaction_read_only = off", "before any query"},
        {"SELECT set_config('transaction_read_only', 'off', true), bump()", ""},
        {"COMMIT; DELETE FROM items", "multiple commands"},
        {"SELECT 1; DELETE FROM items", "multiple commands"},
        {"WITH d AS (DELETE FROM items RETURNING *) SELECT count(*) FROM d", "read-only transaction"},
        {"SELECT bump()", "read-only transaction"},
        {"DO $$BEGIN DELETE FROM items; END$$", "read-only transaction"},
        {"SELECT nextval('items_id_seq')", ""},
        {"SELECT setval('items_id_seq', 100)", ""},
        {"COPY items TO PROGRAM 'touch /tmp/seed-live-test-pwned'", ""},
        {"COPY items FROM STDIN", ""},
        {"COPY (SELECT 1) TO '/tmp/seed-live-test-pwned'", ""},
        {"SELECT lo_import('/etc/hostname')", ""},
        {"SELECT lo_create(0)", NULL},
        {"SELECT lo_from_bytea(0, 'x')", NULL},
        {"SELECT lo_put(lo_create(0), 0, 'x')", NULL},
        {"LOCK TABLE items IN ACCESS EXCLUSIVE MODE", ""},
        {"VACUUM items", ""},
        {"GRANT ALL ON items TO reader", "read-only transaction"},
        {"SET ROLE organism", "permission denied"},
        {"ALTER ROLE reader SET default_transaction_read_only = off", "read-only transaction"},
        {"CREATE FUNCTION evil() RETURNS int LANGUAGE sql AS 'SELECT 1'", "read-only transaction"},
        {"NOTIFY evil", NULL}, /* rolled back: never delivered */
};

static void test_reader_cannot_write(void **state) {
        _cleanup_free_ char *before = live_state();
        for (size_t i = 0; i < ARRAY_SIZE(attempts); i++) {
                _cleanup_free_ char *args = sql_args(attempts[i].sql);
                struct tool_result r = call("query_data", args);
                if (attempts[i].error && !r.is_error)
                        fail_msg("%s: not refused: %s", attempts[i].sql, r.output);
                if (attempts[i].error && !strstr(r.output, attempts[i].error))
                        fail_msg("%s: refused, but not for '%s': %s", attempts[i].sql, attempts[i].error, r.output);
                _cleanup_free_ char *line = NULL;
                assert_true(xasprintf(&line, "%s -> %s", attempts[i].sql, r.output) >= 0);
                print_comment("", line);
                tool_result_done(&r);
                _cleanup_free_ char *after = live_state();
                if (!streq(before, after))
                        fail_msg("%s changed the live data: %s -> %s", attempts[i].sql, before, after);
        }
        assert_false(path_exists("/tmp/seed-live-test-pwned"));
        /* Reads still work after all that. */
        _cleanup_free_ char *a = sql_args("SELECT count(*) AS n FROM items");
        struct tool_result r = call("query_data", a);
        assert_false(r.is_error);
        assert_non_null(strstr(r.output, "n\n3\n"));
        tool_result_done(&r);
}

/* The reader role may connect to the live database only. */
static void test_reader_reaches_only_live_data(void **state) {
        _cleanup_free_ char *ci = NULL, *err = NULL;
        assert_int_equal(pg_conninfo(g_pg, "reader", PG_KERNEL_DB, &ci), 0);
        struct db *db = NULL;
        assert_true(db_connect_err(ci, &db, &err) < 0);
        assert_non_null(strstr(err, "permission denied"));
}

/* ---- change_data: the owner approves each one ---- */

static void test_change_data_asks_every_time(void **state) {
        _cleanup_free_ char *before = live_state();
        _cleanup_free_ char *args = sql_args("UPDATE items SET name = 'quince' WHERE name = 'pear' RETURNING id, name");
        /* Denied: nothing changes. */
        owner_answer = 0;
        int asked = owner_asked;
        struct tool_result r = call("change_data", args);
        assert_true(r.is_error);
        assert_non_null(strstr(r.output, "denied by the owner"));
        assert_int_equal(owner_asked, asked + 1);
        assert_string_equal(owner_saw, args); /* the whole request was shown */
        tool_result_done(&r);
        _cleanup_free_ char *after = live_state();
        assert_string_equal(before, after);
        /* 17 KB: refused before anyone is asked. */
        char *big = malloc(17 * 1024 + 64);
        assert_non_null(big);
        int n = sprintf(big, "UPDATE items SET name = '");
        memset(big + n, 'x', 17 * 1024);
        strcpy(big + n + 17 * 1024, "'");
        _cleanup_free_ char *big_args = sql_args(big);
        free(big);
        owner_answer = 1;
        r = call("change_data", big_args);
        assert_true(r.is_error);
        assert_non_null(strstr(r.output, "too large for the owner to review"));
        assert_int_equal(owner_asked, asked + 1);
        tool_result_done(&r);
        free(after);
        after = live_state();
        assert_string_equal(before, after);
        /* Approved: it runs, as the app's role, and says what it did. */
        r = call("change_data", args);
        assert_false(r.is_error);
        assert_int_equal(owner_asked, asked + 2);
        assert_non_null(strstr(r.output, "change_data: UPDATE 1, 1 row"));
        assert_non_null(strstr(r.output, "2 | quince"));
        tool_result_done(&r);
        _cleanup_(db_closep) struct db *db = connect_as("postgres", PG_LIVE_DB);
        _cleanup_free_ char *v = value(db, "SELECT name FROM items WHERE id = 2");
        assert_string_equal(v, "quince");
        /* Several statements are refused even when approved. */
        _cleanup_free_ char *two = sql_args("UPDATE items SET name = 'a'; UPDATE items SET name = 'b'");
        r = call("change_data", two);
        assert_true(r.is_error);
        assert_non_null(strstr(r.output, "multiple commands"));
        tool_result_done(&r);
        _cleanup_free_ char *v2 = value(db, "SELECT string_agg(name, ',' ORDER BY id) FROM items");
        assert_string_equal(v2, "apple,quince,plum");
}

/* ---- copies of the live data for previews (kernel/pg) ---- */

static struct db *connect_copy(const struct pg_live_copy *c) {
        _cleanup_free_ char *ci = NULL, *err = NULL;
        assert_int_equal(pg_live_copy_conninfo(g_pg, c, &ci), 0);
        struct db *db = NULL;
        if (db_connect_err(ci, &db, &err) < 0)
                fail_msg("%s: %s", c->name, err ? err : "?");
        return db;
}

static void test_live_copy(void **state) {
        _cleanup_free_ char *before = live_state();
        struct pg_live_copy a = {0}, b = {0};
        assert_int_equal(pg_live_copy_create(g_pg, "preview_0123456789abcdef", PG_LIVE_COPY_MAX_BYTES, &a), 0);
        assert_true(a.copied);
        assert_true(a.live_bytes > 0);
        {
                /* The live data is there, and the copy's role owns it: a write
                 * stays in the copy. */
                _cleanup_(db_closep) struct db *db = connect_copy(&a);
                _cleanup_free_ char *v = value(db, "SELECT string_agg(name, ',' ORDER BY id) FROM items");
                assert_string_equal(v, "apple,quince,plum");
                _cleanup_free_ char *err = NULL;
                assert_true(db_exec(db, "UPDATE items SET name = 'changed in the preview'; DELETE FROM many", &err) >= 0);
                /* Its role reaches no other database. */
                _cleanup_free_ char *other = value(db, "SELECT has_database_privilege('" PG_LIVE_DB "', 'CONNECT')::text "
                                                       "|| has_database_privilege('" PG_KERNEL_DB "', 'CONNECT')::text "
                                                       "|| has_database_privilege('postgres', 'CONNECT')::text");
                assert_string_equal(other, "falsefalsefalse");
        }
        _cleanup_free_ char *after = live_state();
        assert_string_equal(before, after);
        /* Over the size limit: an empty copy, and it says so. A fresh password each time. */
        assert_int_equal(pg_live_copy_create(g_pg, "preview_fedcba9876543210", 0, &b), 0);
        assert_false(b.copied);
        assert_string_not_equal(a.password, b.password);
        {
                _cleanup_(db_closep) struct db *db = connect_copy(&b);
                _cleanup_free_ char *n = value(db, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'");
                assert_string_equal(n, "0");
        }
        /* The URL a sandbox gets names the copy's role and socket dir. */
        _cleanup_free_ char *url = NULL;
        assert_int_equal(pg_live_copy_url(g_pg, &a, &url), 0);
        assert_true(strncmp(url, "postgresql://preview_0123456789abcdef:", 38) == 0);
        assert_non_null(strstr(url, "@/preview_0123456789abcdef?host=/run/postgresql"));
        /* Bad names are refused. */
        struct pg_live_copy bad = {0};
        assert_int_equal(pg_live_copy_create(g_pg, PG_LIVE_DB, 0, &bad), -EINVAL);
        assert_int_equal(pg_live_copy_create(g_pg, "preview_x; DROP", 0, &bad), -EINVAL);
        assert_int_equal(pg_live_copy_drop(g_pg, "evo_1"), -EINVAL);
        /* One dropped, then every other one (as at boot after a kill). */
        assert_int_equal(pg_live_copy_drop(g_pg, a.name), 0);
        assert_int_equal(pg_live_copy_drop_all(g_pg), 1);
        assert_int_equal(pg_live_copy_drop_all(g_pg), 0);
        _cleanup_(db_closep) struct db *su = connect_as("postgres", "postgres");
        _cleanup_free_ char *left = value(su, "SELECT (SELECT count(*) FROM pg_database WHERE datname LIKE 'preview%') + "
                                              "(SELECT count(*) FROM pg_roles WHERE rolname LIKE 'preview%')");
        assert_string_equal(left, "0");
        pg_live_copy_done(&a);
        pg_live_copy_done(&b);
        free(after);
        after = live_state();
        assert_string_equal(before, after);
}

static int group_setup(void **state) {
        snprintf(seed_dir, sizeof seed_dir, "/tmp/seed-test-live-XXXXXX");
        if (!mkdtemp(seed_dir))
                return -1;
        (void)unlink("/tmp/seed-live-test-pwned");
        if (pg_start(seed_dir, &g_pg) < 0)
                return -1;
        return live_new(&(struct live_config){.pg = g_pg}, &g_live);
}

static int group_teardown(void **state) {
        live_free(g_live);
        pg_stop(g_pg);
        rm_rf(seed_dir);
        free(owner_saw);
        return 0;
}

int main(void) {
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "cannot drop root\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_setup_live_data),
                cmocka_unit_test(test_query_data_reads),
                cmocka_unit_test(test_query_data_caps),
                cmocka_unit_test(test_query_data_huge_row_stays_out_of_memory),
                cmocka_unit_test(test_reader_cannot_write),
                cmocka_unit_test(test_reader_reaches_only_live_data),
                cmocka_unit_test(test_change_data_asks_every_time),
                cmocka_unit_test(test_live_copy),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
