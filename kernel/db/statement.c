/* statement.c — one statement of SQL the kernel did not write (the model's
 * query_data and change_data, kernel/live), run through libpq's extended
 * protocol and read row by row under caps. See db.h "one statement". */
#include "db/db.h"
#include "db/db-internal.h"
#include "base/buf.h"
#include "base/log.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <strings.h>


DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, PQclear)

void db_statement_result_done(struct db_statement_result *r) {
        if (!r)
                return;
        strv_free(r->columns);
        for (size_t i = 0; r->cells && i < r->n_rows * r->n_columns; i++)
                free(r->cells[i]);
        free(r->cells);
        free(r->command);
        *r = (struct db_statement_result){0};
}

#define SERVER_MESSAGE_MAX 1000 /* bytes of the server's message, and of its detail */

static char *server_message(PGconn *conn, const PGresult *res) {
        const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
        const char *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
        if (!m)
                m = res && !strempty(PQresultErrorMessage(res)) ? PQresultErrorMessage(res) : PQerrorMessage(conn);
        if (strempty(m))
                m = "unknown database error";
        char *s = NULL;
        size_t n = strlen(m);
        while (n > 0 && (m[n - 1] == '\n' || m[n - 1] == ' '))
                n--;
        /* The server's words may quote the statement's values: bounded. */
        if (n > SERVER_MESSAGE_MAX)
                n = SERVER_MESSAGE_MAX;
        int r = detail ? xasprintf(&s, "%.*s (%.*s)", (int)n, m, SERVER_MESSAGE_MAX, detail)
                       : xasprintf(&s, "%.*s", (int)n, m);
        return r < 0 ? NULL : s;
}

/* Our own statements around theirs (simple protocol, our text only). */
static int own(PGconn *conn, const char *sql, char **ret_error) {
        _cleanup_(PQclearp) PGresult *res = PQexec(conn, sql);
        ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
                return 0;
        if (ret_error) {
                free(*ret_error);
                *ret_error = server_message(conn, res);
        }
        return -EIO;
}

static void cancel(PGconn *conn) {
        PGcancel *c = PQgetCancel(conn);
        char err[256];
        if (c) {
                (void)PQcancel(c, err, sizeof err);
                PQfreeCancel(c);
        }
}

/* A COPY has no place here: its data is refused and the statement ends. */
static void refuse_copy(PGconn *conn, ExecStatusType st) {
        if (st == PGRES_COPY_IN || st == PGRES_COPY_BOTH)
                (void)PQputCopyEnd(conn, "COPY is not available here");
        if (st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
                cancel(conn);
                char *data = NULL;
                while (PQgetCopyData(conn, &data, 0) > 0) {
                        PQfreemem(data);
                        data = NULL;
                }
        }
}

struct reading {
        const struct db_statement_limits *lim;
        struct db_statement_result res;
        size_t bytes, cap_rows;
        bool guarded;     /* rows come through guard(): one more column, the row's size */
        bool cancelled;   /* we asked the server to stop: its error is ours */
        char *error;      /* the server's, for the caller */
        bool copy;
};

static int keep_columns(struct reading *rd, const PGresult *res) {
        if (rd->res.columns)
                return 0;
        int n = PQnfields(res);
        _cleanup_strv_free_ char **cols = NULL;
        for (int i = 0; i < n; i++)
                if (strv_push(&cols, PQfname(res, i)) < 0)
                        return -ENOMEM;
        if (n == 0 && !(cols = calloc(1, sizeof(char *))))
                return -ENOMEM;
        rd->res.columns = TAKE_PTR(cols);
        rd->res.n_columns = (size_t)n;
        return 0;
}

/* One row of single-row mode: kept while under the caps, else counted. */
static int keep_row(struct reading *rd, PGconn *conn, const PGresult *res) {
        int r = keep_columns(rd, res);
        if (r < 0)
                return r;
        size_t n = rd->res.n_columns, row_bytes = 0;
        if (rd->guarded) {
                /* the server's measure; over the cap, its cells came NULL */
                if (PQnfields(res) != (int)n + 1)
                        return -EPROTO;
                row_bytes = (size_t)strtoull(PQgetvalue(res, 0, (int)n), NULL, 10);
        }
        for (size_t i = 0; i < n; i++)
                row_bytes += rd->guarded ? 0 : (size_t)PQgetlength(res, 0, (int)i);
        rd->res.total_rows++;
        if (rd->res.truncated || rd->res.n_rows >= rd->lim->max_rows || rd->bytes + row_bytes > rd->lim->max_bytes) {
                if (!rd->res.truncated && rd->lim->read_only) {
                        cancel(conn); /* a read only: nothing is lost by stopping it */
                        rd->cancelled = true;
                }
                rd->res.truncated = true;
                return 0;
        }
        if (rd->res.n_rows == rd->cap_rows) {
                size_t cap = rd->cap_rows ? rd->cap_rows * 2 : 16;
                char **cells = reallocarray(rd->res.cells, cap * (n ? n : 1), sizeof(char *));
                if (!cells)
                        return -ENOMEM;
                rd->res.cells = cells;
                rd->cap_rows = cap;
        }
        char **row = rd->res.cells + rd->res.n_rows * n;
        for (size_t i = 0; i < n; i++) {
                row[i] = NULL;
                if (!PQgetisnull(res, 0, (int)i) && !(row[i] = strdup(PQgetvalue(res, 0, (int)i)))) {
                        for (size_t k = 0; k < i; k++)
                                free(row[k]);
                        return -ENOMEM;
                }
        }
        rd->res.n_rows++;
        rd->bytes += row_bytes;
        return 0;
}

/* Reads every result of the statement sent. 0, or -ENOMEM. rd->error is
 * set when the server refused it. */
static int read_results(struct reading *rd, PGconn *conn) {
        int r = 0;
        PGresult *res;
        while ((res = PQgetResult(conn))) {
                ExecStatusType st = PQresultStatus(res);
                switch (st) {
                case PGRES_SINGLE_TUPLE:
                        if (r >= 0)
                                r = keep_row(rd, conn, res);
                        break;
                case PGRES_TUPLES_OK:
                case PGRES_COMMAND_OK:
                        if (r >= 0)
                                r = keep_columns(rd, res);
                        free(rd->res.command);
                        rd->res.command = strdup(PQcmdStatus(res));
                        if (!rd->res.command)
                                r = -ENOMEM;
                        break;
                case PGRES_EMPTY_QUERY:
                        if (!rd->error)
                                rd->error = strdup("the statement is empty");
                        break;
                case PGRES_COPY_IN:
                case PGRES_COPY_OUT:
                case PGRES_COPY_BOTH:
                        rd->copy = true;
                        refuse_copy(conn, st);
                        break;
                default:
                        if (!rd->error && !(rd->cancelled && rd->res.truncated))
                                rd->error = server_message(conn, res);
                        break;
                }
                PQclear(res);
        }
        if (rd->copy) {
                free(rd->error);
                rd->error = strdup("COPY is not available here: select the rows instead");
        }
        return r;
}

/* ---- a read's rows, measured by the server before they are sent ----
 * libpq reads a row whole before handing it over, so a single value of a
 * gigabyte would be in the kernel's memory before any cap could apply. A
 * read is prepared first; when it returns rows it runs wrapped, so that the
 * server measures each row (every value as its type's output function
 * writes it, which is what would be sent) and sends its cells NULL when it
 * is over the byte cap:
 *   SELECT CASE WHEN seed_l.n > max THEN NULL ELSE seed_q.c1 END, ..., seed_l.n
 *   FROM (SELECT * FROM (sql) AS seed_i OFFSET 0) AS seed_q(c1, ...), LATERAL (SELECT octet_length(format('%s', seed_q.c1)) + ...) seed_l(n)
 * A statement that cannot be wrapped is refused, but for SHOW and EXPLAIN
 * (rows the server writes itself) and a WITH that modifies data (refused by
 * the read-only transaction before any row). */

#define STMT_ORIGINAL "seed_q"
#define STMT_GUARDED "seed_w"

/* text and varchar are sent as they are stored: their size is read without
 * writing them out (octet_length of a value is its header's) */
#define OID_TEXT 25
#define OID_VARCHAR 1043

static int guard_sql(const char *sql, const PGresult *desc, int n, size_t max_bytes, char **ret) {
        /* a subquery ends at the statement's last ';' (and the blanks after it) */
        size_t len = strlen(sql);
        while (len > 0 && (isspace((unsigned char)sql[len - 1]) || sql[len - 1] == ';'))
                len--;
        struct buf b = BUF_INIT(1024 * 1024 + len);
        int r = buf_puts(&b, "SELECT ");
        for (int i = 1; r >= 0 && i <= n; i++)
                r = buf_printf(&b, "CASE WHEN seed_l.n > %zu THEN NULL ELSE seed_q.c%d END, ", max_bytes, i);
        if (r >= 0)
                /* OFFSET 0: the statement is not pulled up into ours, so
                 * each value is computed once, not once per use below */
                r = buf_printf(&b, "seed_l.n FROM (SELECT * FROM (\n%.*s\n) AS seed_i OFFSET 0) AS seed_q(", (int)len,
                               sql);
        for (int i = 1; r >= 0 && i <= n; i++)
                r = buf_printf(&b, "%sc%d", i > 1 ? ", " : "", i);
        if (r >= 0)
                r = buf_puts(&b, "), LATERAL (SELECT 0::bigint");
        for (int i = 1; r >= 0 && i <= n; i++) {
                Oid t = PQftype(desc, i - 1);
                r = t == OID_TEXT || t == OID_VARCHAR
                            ? buf_printf(&b, " + coalesce(octet_length(seed_q.c%d), 0)", i)
                            : buf_printf(&b, " + coalesce(octet_length(format('%%s', seed_q.c%d)), 0)", i);
        }
        if (r >= 0)
                r = buf_puts(&b, ") AS seed_l(n)");
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = buf_steal(&b);
        return *ret ? 0 : -ENOMEM;
}

static bool starts_with_word(const char *sql, const char *word) {
        while (*sql == ' ' || *sql == '\t' || *sql == '\n' || *sql == '\r' || *sql == '(')
                sql++;
        size_t l = strlen(word);
        return !strncasecmp(sql, word, l) && !isalnum((unsigned char)sql[l]) && sql[l] != '_';
}

/* Prepares the read (STMT_ORIGINAL) and, when it returns rows, its guarded
 * form (STMT_GUARDED, rd->guarded) with the read's column names kept. 0:
 * *ret_name is the statement to run; -EIO with rd->error. */
static int prepare_read(struct reading *rd, PGconn *conn, const char *sql, const char **ret_name) {
        _cleanup_(PQclearp) PGresult *p = PQprepare(conn, STMT_ORIGINAL, sql, 0, NULL);
        if (!p || PQresultStatus(p) != PGRES_COMMAND_OK) {
                rd->error = server_message(conn, p);
                return -EIO;
        }
        _cleanup_(PQclearp) PGresult *d = PQdescribePrepared(conn, STMT_ORIGINAL);
        if (!d || PQresultStatus(d) != PGRES_COMMAND_OK) {
                rd->error = server_message(conn, d);
                return -EIO;
        }
        *ret_name = STMT_ORIGINAL;
        int n = PQnfields(d);
        if (n == 0)
                return 0; /* no rows to measure (and no notices: client_min_messages) */
        _cleanup_free_ char *guarded = NULL, *err = NULL;
        if (guard_sql(sql, d, n, rd->lim->max_bytes, &guarded) < 0)
                return -ENOMEM;
        int r;
        if ((r = own(conn, "SAVEPOINT seed_guard", &rd->error)) < 0)
                return r;
        _cleanup_(PQclearp) PGresult *g = PQprepare(conn, STMT_GUARDED, guarded, 0, NULL);
        if (g && PQresultStatus(g) == PGRES_COMMAND_OK) {
                if ((r = keep_columns(rd, d)) < 0)
                        return r;
                rd->guarded = true;
                *ret_name = STMT_GUARDED;
                return 0;
        }
        const char *state = g ? PQresultErrorField(g, PG_DIAG_SQLSTATE) : NULL;
        bool modifying_with = starts_with_word(sql, "with") && state && streq(state, "0A000");
        err = server_message(conn, g);
        if ((r = own(conn, "ROLLBACK TO SAVEPOINT seed_guard", &rd->error)) < 0)
                return r;
        /* SHOW reports one setting (what a read sets is rolled back); a
         * modifying WITH is refused by the read-only transaction before any
         * row. EXPLAIN is not let through: its plan quotes the constants it
         * folded, e.g. a repeat() of any size, in one row. */
        if (starts_with_word(sql, "show") || modifying_with)
                return 0;
        if (xasprintf(&rd->error, "this statement cannot be read under the caps (%s): write it as one SELECT, WITH, "
                                  "VALUES, TABLE or SHOW (EXPLAIN is not available)",
                      err ? err : "it cannot be a subquery") < 0)
                rd->error = NULL;
        return -EIO;
}

int db_statement(struct db *db, const char *sql, const struct db_statement_limits *lim,
                 struct db_statement_result *ret, char **ret_error) {
        if (!db || !sql || !lim || lim->timeout_ms <= 0 || lim->max_rows == 0 || lim->max_bytes == 0)
                return -EINVAL;
        pthread_mutex_lock(&db->lock);
        PGconn *conn = db->conn;
        struct reading rd = {.lim = lim};
        _cleanup_free_ char *setup = NULL;
        int r;
        if (PQstatus(conn) != CONNECTION_OK) {
                rd.error = strdup("the database connection is closed");
                r = -EIO;
                goto out;
        }
        /* A read: a read-only transaction whose snapshot is taken before
         * their statement runs, so not even SET transaction_read_only = off
         * can make it read-write. A change: their statement alone, in the
         * transaction the server gives one statement. */
        if ((lim->read_only
                     ? xasprintf(&setup, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; "
                                         "SET LOCAL statement_timeout = %d; "
                                         "SET LOCAL client_min_messages = error; SELECT 1",
                                 lim->timeout_ms)
                     : xasprintf(&setup, "SET statement_timeout = %d", lim->timeout_ms)) < 0) {
                r = -ENOMEM;
                goto out;
        }
        if ((r = own(conn, setup, &rd.error)) < 0)
                goto out;
        /* The extended protocol: the server refuses more than one statement.
         * A read is measured by the server before its rows are sent. */
        const char *name = NULL;
        if (lim->read_only && (r = prepare_read(&rd, conn, sql, &name)) < 0)
                goto end;
        if (name ? !PQsendQueryPrepared(conn, name, 0, NULL, NULL, NULL, 0)
                 : !PQsendQueryParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0)) {
                rd.error = server_message(conn, NULL);
                r = -EIO;
                goto end;
        }
        (void)PQsetSingleRowMode(conn);
        if ((r = read_results(&rd, conn)) < 0)
                goto end;
        r = rd.error ? -EIO : 0;
end:
        if (lim->read_only && PQstatus(conn) == CONNECTION_OK) {
                /* Whatever their statement did to the transaction, it ends
                 * here. A stop we asked for may still land on the ROLLBACK:
                 * the caller closes this connection anyway. */
                _cleanup_free_ char *err = NULL;
                if (own(conn, "ROLLBACK", &err) < 0 && r >= 0 && !rd.cancelled) {
                        rd.error = TAKE_PTR(err);
                        r = -EIO;
                }
        }
out:
        pthread_mutex_unlock(&db->lock);
        if (r == -EIO && ret_error) {
                free(*ret_error);
                *ret_error = rd.error ? TAKE_PTR(rd.error) : strdup("the database refused the statement");
        }
        free(rd.error);
        if (r < 0) {
                db_statement_result_done(&rd.res);
                return r;
        }
        *ret = rd.res;
        return 0;
}
