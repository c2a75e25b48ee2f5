/* db.c — the libpq adapter: connections, the migration runner and the
 * kernel-memory queries. The only file that includes libpq-fe.h. */
#include "db/db.h"
#include "db/db-internal.h"
#include "base/buf.h"
#include "base/crypto.h"
#include "base/embedded.h"
#include "base/log.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <time.h>


DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, PQclear)
DEFINE_TRIVIAL_CLEANUP_FUNC(PGconn *, PQfinish)

#define DB_MAX_PARAMS 64
#define DB_MIGRATION_LOCK_CLASS 0x5eed /* first key of the advisory lock */
#define DB_USER_AGENT_MAX 256

static void unlockp(pthread_mutex_t **m) {
        if (*m)
                pthread_mutex_unlock(*m);
}
#define DB_LOCKED(db)                                                          \
        _cleanup_(unlockp) pthread_mutex_t *_db_guard = &(db)->lock;           \
        pthread_mutex_lock(_db_guard)

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* NOTICEs ("relation already exists, skipping") are not worth a line. */
static void notice_drop(void *arg, const char *message) {
        (void)arg;
        (void)message;
}

/* libpq's messages end with a newline and may span lines; keep them whole
 * but without the trailing whitespace. */
static char *message_dup(const char *m) {
        if (strempty(m))
                m = "unknown database error";
        size_t n = strlen(m);
        while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
                n--;
        return strndup(m, n);
}

static void set_error(char **ret_error, const char *m) {
        if (ret_error) {
                free(*ret_error);
                *ret_error = message_dup(m);
        }
}

/* The server's message for a failed result: primary text plus detail. */
static char *result_message(PGconn *conn, const PGresult *res) {
        const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        if (!primary)
                return message_dup(res && !strempty(PQresultErrorMessage(res)) ? PQresultErrorMessage(res)
                                                                             : PQerrorMessage(conn));
        const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
        char *s = NULL;
        int r = detail ? xasprintf(&s, "%s (%s)", primary, detail) : xasprintf(&s, "%s", primary);
        return r < 0 ? NULL : s;
}

/* ---- connections ---- */

static int connect_params(const char *conninfo, const char *password, struct db **ret, char **ret_error);

int db_connect_err(const char *conninfo, struct db **ret, char **ret_error) {
        return connect_params(conninfo, NULL, ret, ret_error);
}

static int connect_params(const char *conninfo, const char *password, struct db **ret, char **ret_error) {
        if (!conninfo)
                return -EINVAL;
        /* Check the syntax first: libpq's parse errors quote the text. */
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
        if (!opts) {
                PQfreemem(perr);
                set_error(ret_error, "invalid database connection string");
                return -EINVAL;
        }
        PQconninfoFree(opts);

        /* A password given apart from the conninfo (a secret) overrides it. */
        const char *const keys[] = {"dbname", "client_encoding", "application_name", password ? "password" : NULL,
                                    NULL};
        const char *const vals[] = {conninfo, "UTF8", "seed-kernel", password, NULL};
        _cleanup_(PQfinishp) PGconn *conn = PQconnectdbParams(keys, vals, 1);
        if (!conn) {
                set_error(ret_error, "out of memory");
                return -ENOMEM;
        }
        if (PQstatus(conn) != CONNECTION_OK) {
                set_error(ret_error, PQerrorMessage(conn));
                return -ECONNREFUSED;
        }
        PQsetNoticeProcessor(conn, notice_drop, NULL);

        struct db *db = calloc(1, sizeof(*db));
        if (!db)
                return -ENOMEM;
        pthread_mutex_init(&db->lock, NULL);
        db->conn = TAKE_PTR(conn);
        *ret = db;
        return 0;
}

int db_connect(const char *conninfo, struct db **ret) {
        _cleanup_free_ char *err = NULL;
        int r = db_connect_err(conninfo, ret, &err);
        if (r < 0)
                log_error("cannot connect to the database: %s", err ? err : "?");
        return r;
}

int db_connect_wait(const char *conninfo, int timeout_ms, struct db **ret) {
        return db_connect_wait_password(conninfo, NULL, timeout_ms, ret);
}

int db_conninfo_parse(const char *conninfo, char ***ret) {
        if (!conninfo || !ret)
                return -EINVAL;
        char *perr = NULL;
        PQconninfoOption *opts = PQconninfoParse(conninfo, &perr);
        if (!opts) {
                PQfreemem(perr); /* may quote the text, which may hold a password */
                return -EINVAL;
        }
        char **v = NULL;
        int r = 0;
        for (PQconninfoOption *o = opts; r >= 0 && o->keyword; o++)
                if (o->val && o->val[0] && ((r = strv_push(&v, o->keyword)) < 0 || (r = strv_push(&v, o->val)) < 0))
                        break;
        for (PQconninfoOption *o = opts; o->keyword; o++)
                if (o->val)
                        secure_zero(o->val, strlen(o->val));
        PQconninfoFree(opts);
        if (r >= 0 && !v && !(v = calloc(1, sizeof *v)))
                r = -ENOMEM;
        if (r < 0) {
                for (size_t i = 0; v && v[i]; i++)
                        secure_zero(v[i], strlen(v[i]));
                strv_free(v);
                return r;
        }
        *ret = v;
        return 0;
}

int db_connect_wait_password(const char *conninfo, const char *password, int timeout_ms, struct db **ret) {
        int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
        int pause = 20;
        for (;;) {
                _cleanup_free_ char *err = NULL;
                int r = connect_params(conninfo, password, ret, &err);
                if (r >= 0 || r == -EINVAL || r == -ENOMEM || now_ms() >= deadline) {
                        if (r < 0)
                                log_error("cannot connect to the database within %d ms: %s", timeout_ms,
                                          err ? err : "?");
                        return r;
                }
                int64_t left = deadline - now_ms();
                sleep_ms(left < pause ? (int)(left > 0 ? left : 0) : pause);
                if (pause < 250)
                        pause *= 2;
        }
}

void db_close(struct db *db) {
        if (!db)
                return;
        PQfinish(db->conn);
        pthread_mutex_destroy(&db->lock);
        free(db);
}

/* With the lock held: reconnects once if the server dropped us. */
static int ensure_conn(struct db *db, char **ret_error) {
        if (PQstatus(db->conn) == CONNECTION_OK)
                return 0;
        PQreset(db->conn);
        if (PQstatus(db->conn) == CONNECTION_OK) {
                PQsetNoticeProcessor(db->conn, notice_drop, NULL);
                return 0;
        }
        set_error(ret_error, PQerrorMessage(db->conn));
        return -EIO;
}

/* With the lock held. nparams < 0: simple protocol (several statements, no
 * parameters). On success hands the result to *ret_res (may be NULL). Never
 * reconnects: a connection lost inside a transaction must fail it, not carry
 * on in autocommit (only the public entry points call ensure_conn). */
static int run_locked(struct db *db, const char *sql, int nparams, const char *const *params,
                      PGresult **ret_res, char **ret_error) {
        if (!sql || nparams > DB_MAX_PARAMS || (nparams > 0 && !params)) {
                set_error(ret_error, "invalid query arguments");
                return -EINVAL;
        }
        _cleanup_(PQclearp) PGresult *res = nparams < 0
                ? PQexec(db->conn, sql)
                : PQexecParams(db->conn, sql, nparams, NULL, params, NULL, NULL, 0);
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_EMPTY_QUERY) {
                if (ret_error) {
                        free(*ret_error);
                        *ret_error = result_message(db->conn, res);
                }
                return -EIO;
        }
        if (ret_res)
                *ret_res = TAKE_PTR(res);
        return 0;
}

/* With the lock held: one statement on a connection that works. A
 * connection found dead on use (the server was restarted since the last
 * statement: its watchdog, kernel/pg/watch.h) is made again and the
 * statement sent once more, so the first call after a restart does not fail
 * for nothing; one lost again fails. */
static int run_connected(struct db *db, const char *sql, int nparams, const char *const *params,
                         PGresult **ret_res, char **ret_error) {
        int r = ensure_conn(db, ret_error);
        if (r < 0)
                return r;
        r = run_locked(db, sql, nparams, params, ret_res, ret_error);
        if (r >= 0 || PQstatus(db->conn) != CONNECTION_BAD || ensure_conn(db, NULL) < 0)
                return r;
        return run_locked(db, sql, nparams, params, ret_res, ret_error);
}

static int result_count(const PGresult *res) {
        if (PQresultStatus(res) == PGRES_TUPLES_OK)
                return PQntuples(res);
        const char *t = PQcmdTuples((PGresult *)res);
        long n = strempty(t) ? 0 : strtol(t, NULL, 10);
        return n > INT_MAX ? INT_MAX : (int)n;
}

int db_exec(struct db *db, const char *sql, char **ret_error) {
        DB_LOCKED(db);
        return run_connected(db, sql, -1, NULL, NULL, ret_error);
}

int db_execp(struct db *db, const char *sql, int nparams, const char *const *params, char **ret_error) {
        DB_LOCKED(db);
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = run_connected(db, sql, nparams < 0 ? 0 : nparams, params, &res, ret_error);
        if (r < 0)
                return r;
        return result_count(res);
}

/* For the functions without an error out-parameter: log the server's
 * message once, here. */
static int query_logged(struct db *db, const char *what, const char *sql, int nparams,
                        const char *const *params, PGresult **ret_res) {
        _cleanup_free_ char *err = NULL;
        int r;
        {
                DB_LOCKED(db);
                r = run_connected(db, sql, nparams, params, ret_res, &err);
        }
        if (r < 0)
                log_error("database: %s failed: %s", what, err ? err : "?");
        return r;
}

int db_query_value(struct db *db, const char *sql, int nparams, const char *const *params, char **ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "query", sql, nparams < 0 ? 0 : nparams, params, &res);
        if (r < 0)
                return r;
        if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) < 1 || PQnfields(res) < 1 ||
            PQgetisnull(res, 0, 0))
                return -ENOENT;
        char *v = strdup(PQgetvalue(res, 0, 0));
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

int db_query_json(struct db *db, const char *sql, int nparams, const char *const *params, char **ret_json) {
        _cleanup_free_ char *wrapped = NULL;
        if (xasprintf(&wrapped, "SELECT coalesce(json_agg(row_to_json(q)), '[]')::text FROM (%s) q", sql) < 0)
                return -ENOMEM;
        return db_query_value(db, wrapped, nparams, params, ret_json);
}

int db_query_json_max(struct db *db, const char *sql, int nparams, const char *const *params, size_t max_bytes,
                      char **ret_json) {
        if (nparams < 0 || nparams > 64)
                return -EINVAL;
        _cleanup_free_ char *wrapped = NULL;
        /* The server measures the result; more than max_bytes never reaches us. */
        if (xasprintf(&wrapped,
                      "SELECT CASE WHEN octet_length(j) > $%d::bigint THEN NULL ELSE j END FROM "
                      "(SELECT coalesce(json_agg(row_to_json(q)), '[]')::text AS j FROM (%s) q) x",
                      nparams + 1, sql) < 0)
                return -ENOMEM;
        const char *p[65];
        char max[32];
        snprintf(max, sizeof max, "%zu", max_bytes);
        for (int i = 0; i < nparams; i++)
                p[i] = params[i];
        p[nparams] = max;
        int r = db_query_value(db, wrapped, nparams + 1, p, ret_json);
        return r == -ENOENT ? -E2BIG : r;
}

static int quote(struct db *db, const char *s, bool ident, char **ret) {
        if (!s)
                return -EINVAL;
        DB_LOCKED(db);
        char *q = ident ? PQescapeIdentifier(db->conn, s, strlen(s)) : PQescapeLiteral(db->conn, s, strlen(s));
        if (!q)
                return -EINVAL; /* invalid encoding or out of memory */
        char *copy = strdup(q);
        PQfreemem(q);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

int db_quote_ident(struct db *db, const char *s, char **ret) { return quote(db, s, true, ret); }
int db_quote_literal(struct db *db, const char *s, char **ret) { return quote(db, s, false, ret); }

int db_encrypt_password(struct db *db, const char *role, const char *password, char **ret) {
        if (!role || !password)
                return -EINVAL;
        DB_LOCKED(db);
        char *v = PQencryptPasswordConn(db->conn, password, role, "scram-sha-256");
        if (!v)
                return log_error_errno(-EIO, "cannot compute the password verifier for role '%s'", role);
        char *copy = strdup(v);
        PQfreemem(v);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

/* ---- migrations ---- */

#define DB_MIGRATION_NAME_MAX 128

int db_migration_parse_name(const char *filename, int *ret_version) {
        if (!filename || strlen(filename) > DB_MIGRATION_NAME_MAX)
                return -EINVAL;
        const char *p = filename;
        long version = 0;
        size_t digits = 0;
        for (; *p >= '0' && *p <= '9'; p++, digits++) {
                if (digits >= 9)
                        return -EINVAL;
                version = version * 10 + (*p - '0');
        }
        if (digits < 4 || version < 1 || *p != '_')
                return -EINVAL;
        p++;
        const char *suffix = strrchr(p, '.');
        if (!suffix || !streq(suffix, ".sql") || suffix == p)
                return -EINVAL;
        for (; p < suffix; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
                        return -EINVAL;
        if (ret_version)
                *ret_version = (int)version;
        return 0;
}

void db_migration_checksum(const struct db_migration *m, char out[65]) {
        crypto_sha256_hex(m->sql ? m->sql : "", m->sql ? m->len : 0, out);
}

int db_migrations_validate(const struct db_migration *m, size_t n, char **ret_error) {
        _cleanup_free_ char *msg = NULL;
        for (size_t i = 0; i < n && !msg; i++) {
                const char *name = m[i].name ? m[i].name : "(unnamed)";
                int v;
                if (db_migration_parse_name(m[i].name, &v) < 0)
                        (void)xasprintf(&msg, "migration file name '%s' is not NNNN_name.sql "
                                              "(digits, '_', lowercase letters, digits or '_', .sql)", name);
                else if (v != m[i].version)
                        (void)xasprintf(&msg, "migration %s: version %d does not match its name", name,
                                        m[i].version);
                else if (!m[i].sql || strnlen(m[i].sql, m[i].len) != m[i].len)
                        (void)xasprintf(&msg, "migration %s: SQL text is missing or contains a NUL byte", name);
                else if (i > 0 && m[i].version == m[i - 1].version)
                        (void)xasprintf(&msg, "duplicate migration version %d (%s and %s)", v, m[i - 1].name, name);
                else if (i > 0 && m[i].version < m[i - 1].version)
                        (void)xasprintf(&msg, "migrations out of order: %s comes after %s", name, m[i - 1].name);
                else
                        continue;
                if (!msg)
                        return -ENOMEM;
        }
        if (!msg)
                return 0;
        if (ret_error)
                *ret_error = TAKE_PTR(msg);
        return -EINVAL;
}

static bool table_name_valid(const char *t) {
        if (!t || !*t || strlen(t) > 63 || (*t >= '0' && *t <= '9'))
                return false;
        for (; *t; t++)
                if (!((*t >= 'a' && *t <= 'z') || (*t >= '0' && *t <= '9') || *t == '_'))
                        return false;
        return true;
}

/* All migration helpers below run with the lock held. */

static int migrate_lock(struct db *db, const char *table, char **ret_error) {
        _cleanup_free_ char *sql = NULL;
        if (xasprintf(&sql, "SELECT pg_advisory_xact_lock(%d, hashtext($1))", DB_MIGRATION_LOCK_CLASS) < 0)
                return -ENOMEM;
        const char *p[] = {table};
        return run_locked(db, sql, 1, p, NULL, ret_error);
}

static void rollback(struct db *db) {
        if (PQtransactionStatus(db->conn) != PQTRANS_IDLE)
                PQclear(PQexec(db->conn, "ROLLBACK"));
}

static int changed_error(const struct db_migration *m, const char *sum, const char *applied, char **ret_error) {
        if (ret_error) {
                free(*ret_error);
                *ret_error = NULL;
                (void)xasprintf(ret_error, "migration %s was changed after it was applied (checksum %s != %s)",
                                m->name, sum, applied);
        }
        return -EIO;
}

/* Creates the table if needed and checks every applied migration still in
 * the list against its checksum, in one transaction. */
static int migrate_prepare(struct db *db, const char *qtable, const char *table, const struct db_migration *m,
                           size_t n, char **ret_error) {
        _cleanup_free_ char *create = NULL, *select = NULL;
        if (xasprintf(&create,
                      "CREATE TABLE IF NOT EXISTS %s (version integer PRIMARY KEY, name text NOT NULL, "
                      "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
                      qtable) < 0 ||
            xasprintf(&select, "SELECT version, name, checksum FROM %s ORDER BY version", qtable) < 0)
                return -ENOMEM;
        int r = run_locked(db, "BEGIN", -1, NULL, NULL, ret_error);
        if (r < 0)
                return r;
        _cleanup_(PQclearp) PGresult *res = NULL;
        if ((r = migrate_lock(db, table, ret_error)) < 0 || (r = run_locked(db, create, -1, NULL, NULL, ret_error)) < 0 ||
            (r = run_locked(db, select, 0, NULL, &res, ret_error)) < 0) {
                rollback(db);
                return r;
        }
        size_t j = 0;
        for (int row = 0; row < PQntuples(res); row++) {
                long v = strtol(PQgetvalue(res, row, 0), NULL, 10);
                while (j < n && m[j].version < v)
                        j++;
                if (j >= n || m[j].version != v)
                        continue; /* applied by a newer tree; rollback does not reverse migrations */
                char sum[65];
                db_migration_checksum(&m[j], sum);
                const char *applied = PQgetvalue(res, row, 2);
                if (!streq(sum, applied)) {
                        rollback(db);
                        return changed_error(&m[j], sum, applied, ret_error);
                }
        }
        return run_locked(db, "COMMIT", -1, NULL, NULL, ret_error);
}

/* Applies one migration in its own transaction under the advisory lock.
 * Returns 1 if applied, 0 if another runner had applied it meanwhile. */
static int migrate_one(struct db *db, const char *qtable, const char *table, const struct db_migration *m,
                       char **ret_error) {
        _cleanup_free_ char *check = NULL, *insert = NULL, *err = NULL;
        if (xasprintf(&check, "SELECT checksum FROM %s WHERE version = $1", qtable) < 0 ||
            xasprintf(&insert, "INSERT INTO %s (version, name, checksum) VALUES ($1, $2, $3)", qtable) < 0)
                return -ENOMEM;
        char version[16], sum[65];
        snprintf(version, sizeof version, "%d", m->version);
        db_migration_checksum(m, sum);

        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = run_locked(db, "BEGIN", -1, NULL, NULL, &err);
        if (r >= 0 && (r = migrate_lock(db, table, &err)) >= 0)
                r = run_locked(db, check, 1, (const char *[]){version}, &res, &err);
        if (r >= 0 && PQntuples(res) > 0) {
                rollback(db);
                const char *applied = PQgetvalue(res, 0, 0);
                return streq(applied, sum) ? 0 : changed_error(m, sum, applied, ret_error);
        }
        if (r >= 0 && (r = run_locked(db, m->sql, -1, NULL, NULL, &err)) >= 0 &&
            PQtransactionStatus(db->conn) != PQTRANS_INTRANS) {
                free(err);
                err = strdup("it must not end the transaction itself (COMMIT/ROLLBACK/BEGIN)");
                r = -EIO;
        }
        if (r >= 0)
                r = run_locked(db, insert, 3, (const char *[]){version, m->name, sum}, NULL, &err);
        if (r >= 0)
                r = run_locked(db, "COMMIT", -1, NULL, NULL, &err);
        if (r >= 0)
                return 1;
        rollback(db);
        if (ret_error) {
                free(*ret_error);
                *ret_error = NULL;
                (void)xasprintf(ret_error, "migration %s failed: %s", m->name, err ? err : "?");
        }
        return r;
}

int db_migrate(struct db *db, const char *table, const struct db_migration *m, size_t n, char **ret_error) {
        if (!table_name_valid(table)) {
                set_error(ret_error, "invalid migrations table name");
                return -EINVAL;
        }
        int r = db_migrations_validate(m, n, ret_error);
        if (r < 0)
                return r;
        _cleanup_free_ char *qtable = NULL;
        if ((r = db_quote_ident(db, table, &qtable)) < 0)
                return r;

        DB_LOCKED(db);
        r = ensure_conn(db, ret_error);
        if (r < 0)
                return r;
        if (PQtransactionStatus(db->conn) != PQTRANS_IDLE) {
                set_error(ret_error, "cannot migrate inside an open transaction");
                return -EBUSY;
        }
        r = migrate_prepare(db, qtable, table, m, n, ret_error);
        if (r < 0)
                return r;
        int applied = 0;
        for (size_t i = 0; i < n; i++) {
                r = migrate_one(db, qtable, table, &m[i], ret_error);
                if (r < 0)
                        return r;
                applied += r;
        }
        return applied;
}

extern const struct embedded_file db_kernel_migration_files[];

int db_kernel_migrations(struct db_migration **ret, size_t *ret_n) {
        size_t n = 0;
        while (db_kernel_migration_files[n].path)
                n++;
        _cleanup_free_ struct db_migration *m = calloc(n ? n : 1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const struct embedded_file *f = &db_kernel_migration_files[i];
                m[i] = (struct db_migration){.name = f->path, .sql = (const char *)f->data, .len = f->len};
                if (db_migration_parse_name(f->path, &m[i].version) < 0)
                        return log_error_errno(-EINVAL, "embedded kernel migration '%s' has an invalid name",
                                               f->path);
        }
        _cleanup_free_ char *err = NULL;
        int r = db_migrations_validate(m, n, &err);
        if (r < 0)
                return log_error_errno(r, "embedded kernel migrations are invalid: %s", err ? err : "?");
        *ret = TAKE_PTR(m);
        *ret_n = n;
        return 0;
}

/* ---- kernel memory: sign-in links and sessions ---- */

#define I64(buf, v) (snprintf((buf), sizeof(buf), "%" PRId64, (int64_t)(v)), (buf))

static int64_t to_i64(const char *s) { return s ? strtoll(s, NULL, 10) : 0; }

int db_link_count_live(struct db *db, int64_t now) {
        char a[24];
        const char *p[] = {I64(a, now)};
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "counting sign-in links",
                             "SELECT count(*) FROM signin_links WHERE used_at IS NULL AND expires_at > $1", 1, p, &res);
        if (r < 0)
                return r;
        int64_t n = to_i64(PQgetvalue(res, 0, 0));
        return n > INT_MAX ? INT_MAX : (int)n;
}

int db_link_insert(struct db *db, const char *hash, int64_t expires_at) {
        if (strempty(hash))
                return -EINVAL;
        char a[24], b[24];
        const char *p[] = {hash, I64(a, wall_ms()), I64(b, expires_at)};
        int r = query_logged(db, "storing a sign-in link",
                             "INSERT INTO signin_links (hash, created_at, expires_at) VALUES ($1, $2, $3)", 3, p, NULL);
        return r < 0 ? r : 0;
}

int db_link_consume(struct db *db, const char *hash, int64_t now) {
        if (strempty(hash))
                return -ENOENT;
        char a[24];
        const char *p[] = {hash, I64(a, now)};
        _cleanup_(PQclearp) PGresult *res = NULL;
        /* One statement: two concurrent consumers cannot both see it unused. */
        int r = query_logged(db, "using a sign-in link",
                             "UPDATE signin_links SET used_at = $2 WHERE hash = $1 AND used_at IS NULL "
                             "AND expires_at > $2 RETURNING hash",
                             2, p, &res);
        if (r < 0)
                return r;
        return PQntuples(res) == 1 ? 0 : -ENOENT;
}

int db_link_prune(struct db *db, int64_t now) {
        char a[24];
        const char *p[] = {I64(a, now)};
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "pruning sign-in links",
                             "DELETE FROM signin_links WHERE used_at IS NOT NULL OR expires_at <= $1", 1, p, &res);
        return r < 0 ? r : result_count(res);
}

void db_session_done(struct db_session *s) {
        if (!s)
                return;
        free(s->id);
        free(s->user_agent);
        *s = (struct db_session){0};
}

/* Printable ASCII only, bounded: a header from outside, shown in Settings. */
static char *user_agent_clean(const char *ua) {
        size_t n = ua ? strnlen(ua, DB_USER_AGENT_MAX) : 0;
        char *s = malloc(n + 1);
        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++)
                s[i] = ua[i] >= 0x20 && ua[i] < 0x7f ? ua[i] : '?';
        s[n] = 0;
        return s;
}

int db_session_insert(struct db *db, const char *id, const char *hash, const char *user_agent, int64_t now,
                      int64_t expires_at) {
        if (strempty(id) || strempty(hash))
                return -EINVAL;
        _cleanup_free_ char *ua = user_agent_clean(user_agent);
        if (!ua)
                return -ENOMEM;
        char a[24], b[24];
        const char *p[] = {id, hash, ua, I64(a, now), I64(b, expires_at)};
        int r = query_logged(db, "storing a session",
                             "INSERT INTO owner_sessions (id, hash, user_agent, created_at, last_used_at, expires_at) "
                             "VALUES ($1, $2, $3, $4, $4, $5)",
                             5, p, NULL);
        return r < 0 ? r : 0;
}

#define SESSION_COLUMNS "id, created_at, last_used_at, expires_at, user_agent"
#define SESSION_RENEW_MS "60000"

static int session_from_row(const PGresult *res, int row, struct db_session *ret) {
        struct db_session s = {
                .id = strdup(PQgetvalue(res, row, 0)),
                .created_at = to_i64(PQgetvalue(res, row, 1)),
                .last_used_at = to_i64(PQgetvalue(res, row, 2)),
                .expires_at = to_i64(PQgetvalue(res, row, 3)),
                .user_agent = strdup(PQgetvalue(res, row, 4)),
        };
        if (!s.id || !s.user_agent) {
                db_session_done(&s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

int db_session_touch(struct db *db, const char *hash, int64_t now, int64_t new_expires_at, struct db_session *ret) {
        if (strempty(hash))
                return -ENOENT;
        char a[24], b[24];
        const char *p[] = {hash, I64(a, now), I64(b, new_expires_at)};
        _cleanup_(PQclearp) PGresult *res = NULL;
        /* Renewed at most once a minute: a session used more often is only
         * read, which writes nothing (no commit to flush per request). */
        int r = query_logged(db, "renewing a session",
                             "WITH touched AS (UPDATE owner_sessions SET last_used_at = $2, expires_at = $3 "
                             "WHERE hash = $1 AND revoked_at IS NULL AND expires_at > $2 "
                             "AND last_used_at <= $2 - " SESSION_RENEW_MS " RETURNING " SESSION_COLUMNS ") "
                             "SELECT " SESSION_COLUMNS " FROM touched UNION ALL "
                             "SELECT " SESSION_COLUMNS " FROM owner_sessions WHERE hash = $1 AND revoked_at IS NULL "
                             "AND expires_at > $2 AND NOT EXISTS (SELECT 1 FROM touched)",
                             3, p, &res);
        if (r < 0)
                return r;
        if (PQntuples(res) != 1)
                return -ENOENT;
        return ret ? session_from_row(res, 0, ret) : 0;
}

int db_session_revoke(struct db *db, const char *id) {
        if (strempty(id))
                return -ENOENT;
        char a[24];
        const char *p[] = {id, I64(a, wall_ms())};
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "revoking a session",
                             "UPDATE owner_sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", 2, p,
                             &res);
        if (r < 0)
                return r;
        return result_count(res) > 0 ? 0 : -ENOENT;
}

int db_session_prune(struct db *db, int64_t before) {
        char a[24];
        const char *p[] = {I64(a, before)};
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "pruning sessions",
                             "DELETE FROM owner_sessions WHERE expires_at <= $1 OR revoked_at <= $1", 1, p, &res);
        return r < 0 ? r : result_count(res);
}

int db_session_list(struct db *db, int64_t now, struct db_session **ret, size_t *ret_n) {
        char a[24];
        const char *p[] = {I64(a, now)};
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "listing sessions",
                             "SELECT " SESSION_COLUMNS " FROM owner_sessions WHERE revoked_at IS NULL "
                             "AND expires_at > $1 ORDER BY created_at DESC, id",
                             1, p, &res);
        if (r < 0)
                return r;
        size_t n = (size_t)PQntuples(res);
        struct db_session *s = calloc(n ? n : 1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                r = session_from_row(res, (int)i, &s[i]);
                if (r < 0) {
                        for (size_t j = 0; j < i; j++)
                                db_session_done(&s[j]);
                        free(s);
                        return r;
                }
        }
        *ret = s;
        *ret_n = n;
        return 0;
}

/* ---- kernel memory: model usage (model_usage) ---- */

/* The token sums a usage row reports (coalesced: a reference without calls has 0s). */
#define USAGE_TOKEN_SUMS                                                                                       \
        "coalesce(sum(input_tokens), 0)::bigint AS input_tokens, "                                          \
        "coalesce(sum(cache_read_tokens), 0)::bigint AS cached_input_tokens, "                              \
        "coalesce(sum(greatest(input_tokens - cache_read_tokens, 0)), 0)::bigint AS uncached_input_tokens, " \
        "coalesce(sum(cache_write_tokens), 0)::bigint AS cache_write_tokens, "                              \
        "coalesce(sum(output_tokens), 0)::bigint AS output_tokens"
/* ... and the known costs' sum (0 when none is known) with the calls of unknown cost. */
#define USAGE_SUMS                                                      \
        USAGE_TOKEN_SUMS ", coalesce(sum(cost_usd), 0)::double precision AS cost_usd, " \
        "count(*) FILTER (WHERE cost_usd IS NULL)::bigint AS unknown_cost_calls"

int db_usage_insert(struct db *db, const struct db_usage *u, char **ret_error) {
        if (!db || !u)
                return -EINVAL;
        if (u->cache_read_tokens < 0 || u->cache_write_tokens < 0)
                return -EINVAL;
        if (u->cost_source && ((!streq(u->cost_source, "provider") && !streq(u->cost_source, "prices")) ||
                               !isfinite(u->cost_usd) || u->cost_usd < 0))
                return -EINVAL;
        char at[24], in[24], out[24], cread[24], cwrite[24], cost[64];
        snprintf(cost, sizeof cost, "%.10g", u->cost_usd);
        const char *p[] = {I64(at, u->at), u->purpose ? u->purpose : "unknown", u->reference, u->model ? u->model : "",
                           I64(in, u->input_tokens), I64(out, u->output_tokens), u->cost_source ? cost : NULL,
                           u->cost_source, I64(cread, u->cache_read_tokens), I64(cwrite, u->cache_write_tokens)};
        int r = db_execp(db,
                         "INSERT INTO model_usage (at, purpose, reference, model, input_tokens, output_tokens, cost_usd, "
                         "cost_source, cache_read_tokens, cache_write_tokens) "
                         "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                         10, p, ret_error);
        return r < 0 ? r : 0;
}

int db_usage_summary_json(struct db *db, size_t max_bytes, char **ret_json) {
        return db_query_json_max(db,
                                 "SELECT purpose, model, count(*)::bigint AS calls, "
                                 USAGE_TOKEN_SUMS ", sum(cost_usd)::double precision AS cost_usd, "
                                 "count(*) FILTER (WHERE cost_usd IS NULL)::bigint AS unknown_cost_calls, "
                                 "max(at) AS last_at "
                                 "FROM model_usage GROUP BY purpose, model ORDER BY purpose, model LIMIT 500",
                                 0, NULL, max_bytes, ret_json);
}

int db_usage_reference_json(struct db *db, const char *reference, char **ret_json) {
        if (!db || strempty(reference))
                return -EINVAL;
        const char *p[] = {reference};
        _cleanup_free_ char *rows = NULL;
        int r = db_query_json_max(db, "SELECT count(*)::bigint AS calls, " USAGE_SUMS " FROM model_usage WHERE reference = $1",
                                  1, p, 4096, &rows);
        if (r < 0)
                return r;
        /* one row, as an array: unwrap it */
        size_t len = strlen(rows);
        if (len < 2 || rows[0] != '[' || rows[len - 1] != ']')
                return -EBADMSG;
        char *obj = strndup(rows + 1, len - 2);
        if (!obj)
                return -ENOMEM;
        *ret_json = obj;
        return 0;
}

int db_usage_cost_between(struct db *db, int64_t from, int64_t to, double *ret_cost) {
        char a[24], b[24];
        const char *p[] = {I64(a, from), I64(b, to)};
        _cleanup_free_ char *v = NULL;
        int r = db_query_value(db,
                               "SELECT coalesce(sum(cost_usd), 0)::double precision FROM model_usage "
                               "WHERE at >= $1::bigint AND at < $2::bigint",
                               2, p, &v);
        if (r < 0)
                return r;
        char *end = NULL;
        double c = strtod(v, &end);
        if (end == v || *end || !isfinite(c))
                return -EBADMSG;
        *ret_cost = c;
        return 0;
}

int db_usage_by_purpose_json(struct db *db, int64_t from, int64_t to, size_t max_bytes, char **ret_json) {
        char a[24], b[24];
        const char *p[] = {I64(a, from), I64(b, to)};
        return db_query_json_max(db,
                                 "SELECT purpose, count(*)::bigint AS calls, "
                                 "sum(input_tokens)::bigint AS input_tokens, "
                                 "sum(output_tokens)::bigint AS output_tokens, "
                                 "coalesce(sum(cost_usd), 0)::double precision AS cost_usd, "
                                 "count(*) FILTER (WHERE cost_usd IS NULL)::bigint AS unknown_cost_calls "
                                 "FROM model_usage WHERE at >= $1::bigint AND at < $2::bigint "
                                 "GROUP BY purpose ORDER BY purpose LIMIT 100",
                                 2, p, max_bytes, ret_json);
}

int db_usage_by_day_json(struct db *db, int64_t from, int64_t to, size_t max_bytes, char **ret_json) {
        char a[24], b[24];
        const char *p[] = {I64(a, from), I64(b, to)};
        return db_query_json_max(db,
                                 "SELECT to_char(to_timestamp(at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, "
                                 "count(*)::bigint AS calls, "
                                 "coalesce(sum(cost_usd), 0)::double precision AS cost_usd, "
                                 "count(*) FILTER (WHERE cost_usd IS NULL)::bigint AS unknown_cost_calls "
                                 "FROM model_usage WHERE at >= $1::bigint AND at < $2::bigint "
                                 "GROUP BY day ORDER BY day LIMIT 62",
                                 2, p, max_bytes, ret_json);
}

/* ---- kernel memory: settings ---- */

static bool setting_key_valid(const char *key) {
        if (strempty(key) || strlen(key) > DB_SETTING_KEY_MAX)
                return false;
        for (const char *p = key; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
                        return false;
        return true;
}

int db_setting_get(struct db *db, const char *key, char **ret) {
        if (!db || !setting_key_valid(key))
                return -EINVAL;
        const char *p[] = {key};
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = query_logged(db, "reading a setting", "SELECT value FROM kernel_settings WHERE key = $1", 1, p, &res);
        if (r < 0)
                return r;
        if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
                return -ENOENT;
        char *v = strdup(PQgetvalue(res, 0, 0));
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}

int db_setting_set(struct db *db, const char *key, const char *value) {
        if (!db || !setting_key_valid(key) || !value)
                return -EINVAL;
        if (strlen(value) > DB_SETTING_VALUE_MAX)
                return -E2BIG;
        char at[24];
        const char *p[] = {key, value, I64(at, wall_ms())};
        int r = query_logged(db, "storing a setting",
                             "INSERT INTO kernel_settings (key, value, updated_at) VALUES ($1, $2, $3) "
                             "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at",
                             3, p, NULL);
        return r < 0 ? r : 0;
}
