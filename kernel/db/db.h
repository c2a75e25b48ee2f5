/* db.h — the only libpq user: connections, the migration runner and the
 * kernel-memory queries. A struct db is safe to share between threads (calls
 * are serialised). Never log a conninfo: it may hold a password. */
#pragma once

#include "base/base.h"

struct db;

/* conninfo: a libpq keyword/value string or postgresql:// URL. Borrowed. */
int db_connect(const char *conninfo, struct db **ret);
/* Like db_connect, without logging: on failure sets *ret_error (may be NULL)
 * to libpq's message (never contains the password; caller frees). -EINVAL for
 * a malformed conninfo (its text is not echoed), -ECONNREFUSED otherwise. */
int db_connect_err(const char *conninfo, struct db **ret, char **ret_error);
/* Like db_connect, retrying until timeout_ms passes (server starting up). */
int db_connect_wait(const char *conninfo, int timeout_ms, struct db **ret);
/* Like db_connect_wait, with the password given apart (NULL = none). */
int db_connect_wait_password(const char *conninfo, const char *password, int timeout_ms, struct db **ret);
void db_close(struct db *db);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct db *, db_close)
/* The options a conninfo (keyword/value string or postgresql:// URL) sets,
 * as libpq reads them: *ret is a NULL-terminated list of alternating
 * keyword and value, only the options given (empty values left out),
 * including "password" when there is one. -EINVAL for a malformed conninfo
 * (its text is not echoed). Caller frees with strv_free after wiping. */
int db_conninfo_parse(const char *conninfo, char ***ret);

/* Runs one or more statements without parameters. On a server error returns
 * -EIO and sets *ret_error (may be NULL) to its message; caller frees. */
int db_exec(struct db *db, const char *sql, char **ret_error);
/* Runs one parameterised statement; returns the number of rows affected or
 * returned (>= 0). Text parameters only; NULL entries are SQL NULL. */
int db_execp(struct db *db, const char *sql, int nparams, const char *const *params, char **ret_error);
/* One text value of the first row/column, or -ENOENT when no row (or the
 * value is SQL NULL). Server errors are logged and return -EIO. Caller frees. */
int db_query_value(struct db *db, const char *sql, int nparams, const char *const *params, char **ret);
/* Every row of a query (one SELECT, no trailing ';') as a JSON array of
 * objects, column names as keys. Caller frees. */
int db_query_json(struct db *db, const char *sql, int nparams, const char *const *params, char **ret_json);
/* Like db_query_json, refusing (-E2BIG) a result over max_bytes of JSON
 * text, measured by the server so that it never reaches our memory. */
int db_query_json_max(struct db *db, const char *sql, int nparams, const char *const *params, size_t max_bytes,
                      char **ret_json);
/* Quotes an identifier / literal for SQL text built by the kernel. Caller frees. */
int db_quote_ident(struct db *db, const char *s, char **ret);
int db_quote_literal(struct db *db, const char *s, char **ret);
/* The SCRAM-SHA-256 verifier of password for role, computed client-side, so
 * ALTER ROLE ... PASSWORD never sends (or logs) the password itself. Caller frees. */
int db_encrypt_password(struct db *db, const char *role, const char *password, char **ret);

/* ---- one statement of SQL the kernel did not write (statement.c) ----
 * For the model's query_data and change_data (kernel/live): the text goes to
 * the server as one statement of the extended protocol, which refuses
 * several ("a; b"); rows are read one at a time and only what fits the caps
 * is kept. A read (read_only) runs in a READ ONLY transaction whose snapshot
 * is taken before the statement, so it cannot be made read-write, and which
 * is rolled back whatever the statement did; past a cap the server is asked
 * to stop. A change runs alone, in the server's implicit transaction, and is
 * read to its end (rows past the caps are counted, not kept) so that it is
 * never cancelled half way. The role the connection was made with is what
 * really decides what the statement may do. A COPY is refused. libpq reads
 * a row whole before it can be measured, so a read is prepared and, when it
 * returns rows, run inside a query of ours that has the server measure each
 * row and send its cells NULL when it is over max_bytes: a read never brings
 * more than about max_bytes per row into memory, however large a value is.
 * A read that cannot be wrapped so is refused (saying so), except SHOW and
 * EXPLAIN. A change's rows are read whole (one can be as large as
 * PostgreSQL allows, 1 GB): only the owner's approved statements run so. */
struct db_statement_limits {
        bool read_only;
        int timeout_ms;          /* statement_timeout, > 0 */
        size_t max_rows;         /* rows kept, > 0 */
        size_t max_bytes;        /* bytes of values kept, > 0 */
};
struct db_statement_result {
        char **columns;          /* names, NULL-terminated (empty for a statement without rows) */
        size_t n_columns;
        char **cells;            /* n_rows x n_columns values, row by row; NULL = SQL NULL */
        size_t n_rows;           /* rows kept */
        size_t total_rows;       /* rows the server sent (a stopped read: those read until then) */
        bool truncated;          /* rows were left out by a cap */
        char *command;           /* the server's command tag ("SELECT 3", "UPDATE 2"), or NULL */
};
void db_statement_result_done(struct db_statement_result *r);
/* Runs sql on db under lim. 0 with *ret filled (caller frees with
 * db_statement_result_done); -EIO with *ret_error (caller frees; may be
 * NULL) the server's message (or why it was refused); -EINVAL bad
 * arguments; -ENOMEM. Does not log. */
int db_statement(struct db *db, const char *sql, const struct db_statement_limits *lim,
                 struct db_statement_result *ret, char **ret_error);

/* ---- migrations ---- */
struct db_migration {
        int version;          /* NNNN from the file name */
        const char *name;     /* file name, e.g. "0001_init.sql" */
        const char *sql;      /* whole file */
        size_t len;
};
/* Parses "NNNN_name.sql" (digits, '_', [a-z0-9_]+, ".sql"). -EINVAL otherwise. */
int db_migration_parse_name(const char *filename, int *ret_version);
/* sha256 hex of the SQL text. out must hold 65 bytes. */
void db_migration_checksum(const struct db_migration *m, char out[65]);
/* Checks a list is sorted by version with no duplicates. */
int db_migrations_validate(const struct db_migration *m, size_t n, char **ret_error);
/* Applies, in order, those not yet recorded in table `table` (created if
 * missing), each in one transaction with its checksum recorded. An applied
 * migration whose checksum differs is an error naming it. Returns how many
 * were applied. */
int db_migrate(struct db *db, const char *table, const struct db_migration *m, size_t n,
               char **ret_error);
/* The kernel's own migrations (kernel/db/migrations/NNNN_name.sql, embedded
 * at build time), parsed and validated. The entries borrow static data: the
 * caller frees only the array. Applied to the kernel-memory DB with table
 * DB_KERNEL_MIGRATIONS_TABLE. */
#define DB_KERNEL_MIGRATIONS_TABLE "kernel_migrations"
int db_kernel_migrations(struct db_migration **ret, size_t *ret_n);

/* ---- kernel memory: sign-in links and sessions (hashes only) ---- */
/* Times are milliseconds since the epoch. */
int db_link_count_live(struct db *db, int64_t now);
int db_link_insert(struct db *db, const char *hash, int64_t expires_at);
/* Marks an unused, unexpired link used. 0 = consumed, -ENOENT = no such live link. */
int db_link_consume(struct db *db, const char *hash, int64_t now);
/* Drops expired and used links; returns how many. */
int db_link_prune(struct db *db, int64_t now);

struct db_session {
        char *id;             /* public id (for listing/revoking), hex */
        int64_t created_at, last_used_at, expires_at;
        char *user_agent;
};
void db_session_done(struct db_session *s);
/* user_agent (may be NULL) is stored bounded to 256 printable ASCII bytes. */
int db_session_insert(struct db *db, const char *id, const char *hash, const char *user_agent,
                      int64_t now, int64_t expires_at);
/* Finds a live session by cookie hash and renews it (last_used, expires),
 * at most once a minute: within a minute of the last renewal it is only
 * read. -ENOENT if missing, revoked or expired. ret may be NULL. */
int db_session_touch(struct db *db, const char *hash, int64_t now, int64_t new_expires_at,
                     struct db_session *ret);
/* Revokes a live session by public id; -ENOENT if there is none. */
int db_session_revoke(struct db *db, const char *id);
/* Deletes sessions that expired or were revoked before `before`; returns how many. */
int db_session_prune(struct db *db, int64_t before);
/* Live sessions, newest first. Caller frees each with db_session_done and the array. */
int db_session_list(struct db *db, int64_t now, struct db_session **ret, size_t *ret_n);

/* ---- kernel memory: model usage, one row per model call ---- */
/* The only writer and reader of table model_usage. */
struct db_usage {
        int64_t at;                 /* ms since the epoch */
        const char *purpose;        /* "chat", "evolution", "reflection" …; NULL = "unknown"; borrowed */
        const char *reference;      /* e.g. the evolution's id, or NULL; borrowed */
        const char *model;          /* NULL = ""; borrowed */
        int64_t input_tokens, output_tokens;
        int64_t cache_read_tokens, cache_write_tokens; /* of input_tokens (>= 0; see struct model_usage) */
        /* "provider" (its reported cost) or "prices" (the price table);
         * NULL: the cost is unknown, stored as SQL NULL (cost_usd ignored). */
        const char *cost_source;
        double cost_usd;            /* >= 0 and finite when cost_source is set */
};
/* Records one call. Does not log: on a server error returns -EIO and sets
 * *ret_error (may be NULL) to its message; caller frees. -EINVAL for an
 * unknown cost_source or a negative or non-finite cost. */
int db_usage_insert(struct db *db, const struct db_usage *u, char **ret_error);
/* Usage by purpose and model (at most 500 rows: purpose, model, calls,
 * input_tokens, cached_input_tokens (read from the cache),
 * uncached_input_tokens, cache_write_tokens, output_tokens, cost_usd (null
 * when no call's cost is known), unknown_cost_calls, last_at) as a JSON
 * array; -E2BIG past max_bytes (see db_query_json_max). Caller frees. */
int db_usage_summary_json(struct db *db, size_t max_bytes, char **ret_json);
/* The usage of the calls made for reference (e.g. an evolution's id) as one
 * JSON object: calls, input_tokens, cached_input_tokens,
 * uncached_input_tokens, cache_write_tokens, output_tokens, cost_usd (the
 * known costs' sum; 0 when none), unknown_cost_calls (all 0 when there were
 * none). Caller frees. */
int db_usage_reference_json(struct db *db, const char *reference, char **ret_json);
/* The sum of the known costs of the calls made in [from, to) (ms); 0 when
 * none. Server errors are logged and return -EIO. */
int db_usage_cost_between(struct db *db, int64_t from, int64_t to, double *ret_cost);
/* The calls made in [from, to) (ms) grouped by purpose (rows: purpose,
 * calls, input_tokens, output_tokens, cost_usd = the known costs' sum,
 * unknown_cost_calls; at most 100 purposes) or by UTC day (rows: day
 * "YYYY-MM-DD", calls, cost_usd, unknown_cost_calls; at most 62 days), as
 * JSON arrays; -E2BIG past max_bytes. Caller frees. */
int db_usage_by_purpose_json(struct db *db, int64_t from, int64_t to, size_t max_bytes, char **ret_json);
int db_usage_by_day_json(struct db *db, int64_t from, int64_t to, size_t max_bytes, char **ret_json);

/* ---- kernel memory: settings the owner changes in the control plane ---- */
/* The only writer and reader of table kernel_settings. Never a secret. Keys
 * are [a-z0-9_.]{1,DB_SETTING_KEY_MAX}; values at most DB_SETTING_VALUE_MAX
 * bytes of text (no NUL). */
#define DB_SETTING_KEY_MAX 64
#define DB_SETTING_VALUE_MAX 4096
/* The value of key (caller frees): -ENOENT when it was never set, -EINVAL
 * for a bad key, -EIO on a server error (logged). */
int db_setting_get(struct db *db, const char *key, char **ret);
/* Sets (inserts or replaces) key. -EINVAL for a bad key, -E2BIG for a long
 * value, -EIO on a server error (logged). */
int db_setting_set(struct db *db, const char *key, const char *value);
