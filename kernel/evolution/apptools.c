/* apptools.c — the app and scratch-database tools of the mutate phase (SPEC
 * §5): start_app, stop_app, http_request, app_logs, migrate, db_query,
 * db_schema. They act only on the evolution's own preview (its worktree's
 * organism, in a sandbox, behind a bridge socket in a run dir of its own)
 * and on its own scratch database (evo_<id>, as role evolver) — never on the
 * live organism or the live database. Every failure becomes an error result
 * for the model. Called from the evolution's worker thread only. */
#include "evolution/orchestrator-internal.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/log.h"
#include "config/config.h"
#include "db/db.h"
#include "base/text.h"
#include "httpc/httpc.h"
#include "evolution/verify.h"
#include "organism/organism.h"
#include "pg/pg.h"
#include "tools/tools.h"

#include <jansson.h>
#include <ctype.h>
#include <fcntl.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>

#define APP_START_TIMEOUT_MS (60 * 1000)
#define HTTP_TIMEOUT_MS (10 * 1000)
#define HTTP_CONNECT_TIMEOUT_MS 2000
#define HTTP_RESPONSE_MAX (1024 * 1024)      /* body bytes kept */
#define HTTP_HEADERS_MAX (64 * 1024)         /* header bytes shown */
#define LOG_READ_MAX (512 * 1024)            /* bytes read from the end of the log */
#define LOG_LINES_DEFAULT 200
#define DB_RESULT_MAX (2 * 1024 * 1024)
#define DB_ROWS_MAX 500
#define DB_STATEMENT_TIMEOUT "30s"
#define ORGANISM_MIGRATIONS_TABLE "organism_migrations"

struct orch_app {
        struct orch_app_config c;
        struct organism *org;    /* the running preview, or NULL */
        char *run_dir;           /* .seed/preview/<evo_id>-app */
        char *log_path;          /* .seed/logs/preview-<evo_id>-app.log */
};

/* Every answer to the model goes through tool_result_printf (kernel/tools). */
#define result tool_result_printf

int orch_app_new(const struct orch_app_config *c, struct orch_app **ret) {
        if (!c || !c->seed_dir || !c->worktree || !c->evo_id || !c->cfg || !ret)
                return -EINVAL;
        struct orch_app *a = calloc(1, sizeof *a);
        if (!a)
                return -ENOMEM;
        a->c = *c;
        if (xasprintf(&a->run_dir, "%s/.seed/preview/%s-app", c->seed_dir, c->evo_id) < 0 ||
            xasprintf(&a->log_path, "%s/.seed/logs/preview-%s-app.log", c->seed_dir, c->evo_id) < 0) {
                orch_app_free(a);
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

static void app_stop(struct orch_app *a) {
        if (!a->org)
                return;
        organism_stop(a->org);
        organism_free(a->org);
        a->org = NULL;
        (void)rm_rf(a->run_dir);
}

void orch_app_free(struct orch_app *a) {
        if (!a)
                return;
        app_stop(a);
        free(a->run_dir);
        free(a->log_path);
        free(a);
}

/* The last `lines` lines of at most max bytes of the preview's log. */
static char *log_tail_lines(const char *path, int lines, size_t max) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return NULL;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return NULL;
        off_t start = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
        size_t want = (size_t)(st.st_size - start);
        char *data = malloc(want + 1);
        if (!data)
                return NULL;
        size_t len = 0;
        while (len < want) {
                ssize_t k = pread(fd, data + len, want - len, start + (off_t)len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                len += (size_t)k;
        }
        data[len] = 0;
        size_t end = len;
        if (end > 0 && data[end - 1] == '\n')
                end--;
        int seen = 0;
        size_t i = end;
        while (i > 0) {
                if (data[i - 1] == '\n' && ++seen >= lines)
                        break;
                i--;
        }
        memmove(data, data + i, len - i + 1);
        return data;
}

/* ---- the preview ---- */

static int cb_start_app(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        if (!a)
                return result(ret, true, "start_app is not available in this evolution");
        if (!a->c.pg || !a->c.scratch_url)
                return result(ret, true, "start_app: this evolution has no scratch database");
        if (!a->c.bridge_path)
                return result(ret, true, "start_app: no bridge binary is configured");
        bool restarted = a->org != NULL;
        app_stop(a);
        const struct cfg *cfg = a->c.cfg;
        _cleanup_free_ char *preview_dir = path_join(a->c.seed_dir, ".seed/preview"),
                            *logs_dir = path_join(a->c.seed_dir, ".seed/logs"),
                            *cache = path_join(a->c.seed_dir, ".seed/cache");
        if (!preview_dir || !logs_dir || !cache)
                return -ENOMEM;
        int k;
        if ((k = mkdir_mode(logs_dir, 0700)) < 0 || (k = mkdir_mode(preview_dir, 0700)) < 0 ||
            (k = mkdir_mode(cache, 0700)) < 0 || (k = mkdir_mode(a->run_dir, 0700)) < 0) {
                log_error_errno(k, "evolution %s: cannot create the preview's folders: %m", a->c.evo_id);
                return result(ret, true, "start_app: cannot create the preview's folders: %s", strerror(-k));
        }
        (void)unlink(a->log_path);
        struct organism_config oc = {
                .seed_dir = a->c.worktree,
                .build_cmd = cfg->organism.build,
                .run_cmd = cfg->organism.run,
                .health_path = cfg->organism.health,
                .port = cfg->organism.port,
                .database_url = a->c.scratch_url,
                .pg_socket_dir = pg_socket_dir(a->c.pg),
                .bridge_path = a->c.bridge_path,
                .run_dir = a->run_dir,
                .log_path = a->log_path,
                .cache_dir = cache,
                .health_timeout_ms = APP_START_TIMEOUT_MS,
        };
        struct organism *o = NULL;
        if ((k = organism_new(&oc, &o)) < 0) {
                (void)rm_rf(a->run_dir);
                return result(ret, true, "start_app: cannot set up the app: %s", strerror(-k));
        }
        if ((k = organism_start(o)) < 0) {
                organism_free(o);
                (void)rm_rf(a->run_dir);
                return result(ret, true, "start_app: cannot start the app: %s", strerror(-k));
        }
        a->org = o;
        /* Wait for health in slices, so a cancelled evolution does not wait. */
        int64_t deadline = now_ms() + APP_START_TIMEOUT_MS + 30 * 1000;
        do {
                if (a->c.cancel && atomic_load(a->c.cancel)) {
                        app_stop(a);
                        return result(ret, true, "start_app: the evolution was cancelled");
                }
                k = organism_wait_ready(o, 500);
        } while (k == -ETIMEDOUT && now_ms() < deadline);
        if (k < 0) {
                _cleanup_free_ char *reason = NULL, *tail = log_tail_lines(a->log_path, 60, 16 * 1024);
                (void)organism_reason(o, &reason);
                const char *state = organism_state_name(organism_state(o));
                app_stop(a);
                return result(ret, true,
                              "start_app: the app did not become healthy (%s%s%s; state %s) and was stopped. "
                              "End of its log:\n%s",
                              k == -ETIMEDOUT ? "no healthy answer within 60 s" : "it exited",
                              reason ? ": " : "", reason ? reason : "", state, tail ? tail : "(no log)");
        }
        log_info("evolution %s: preview app %s", a->c.evo_id, restarted ? "restarted" : "started");
        return result(ret, false,
                      "The app is %s and healthy (state %s; GET %s answers 2xx). It uses the scratch database %s. "
                      "Use http_request to talk to it and app_logs to read its output.",
                      restarted ? "restarted" : "running", organism_state_name(organism_state(o)),
                      cfg->organism.health, a->c.scratch_db);
}

static int cb_stop_app(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        if (!a || !a->org)
                return result(ret, true, "stop_app: no app is running (start it with start_app)");
        app_stop(a);
        return result(ret, false, "The app is stopped.");
}

static int cb_app_logs(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        if (!a)
                return result(ret, true, "app_logs is not available in this evolution");
        json_t *args = json_loads(args_json ? args_json : "{}", 0, NULL);
        json_int_t lines = json_integer_value(json_object_get(args, "lines"));
        json_decref(args);
        if (lines < 1 || lines > 5000)
                lines = LOG_LINES_DEFAULT;
        _cleanup_free_ char *tail = log_tail_lines(a->log_path, (int)lines, LOG_READ_MAX);
        if (!tail)
                return result(ret, true, "app_logs: the app has no log yet (start it with start_app)");
        return result(ret, false, "(app %s)\n%s", a->org ? organism_state_name(organism_state(a->org)) : "stopped",
                      tail[0] ? tail : "(the log is empty)");
}

/* ---- http_request: the one HTTP client (kernel/httpc) over the bridge socket ---- */

/* httpc connects to the preview's bridge socket through its checked
 * directory (organism_socket_open()) and speaks only once this kernel is
 * the listener (organism_peer_check()). */
struct app_conn {
        const char *socket_path;
        int error;      /* the checks', or 0 */
};

static int app_check(void *userdata, int fd) {
        struct app_conn *cn = userdata;
        return (cn->error = organism_peer_check(fd, cn->socket_path));
}

/* Header lines the kernel sets itself, whatever the model asks. */
static bool header_is_kernels(const char *name) {
        static const char *const names[] = {"host", "connection", "content-length", "transfer-encoding", "expect"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (!strcasecmp(name, names[i]))
                        return true;
        return false;
}

/* The request's header lines: the model's (each name a token, each value
 * free of CR, LF and other controls; else -EINVAL and *ret_bad is the name,
 * borrowed from headers), then the kernel's. Caller frees *ret with strv_free. */
static int request_headers(json_t *headers, bool framed, bool has_body, char ***ret, const char **ret_bad) {
        _cleanup_strv_free_ char **l = NULL;
        bool has_type = false, has_accept = false;
        const char *name;
        json_t *v;
        json_object_foreach(headers, name, v) {
                const char *value = json_string_value(v);
                if (!http_token_ok(name) || !value || !http_field_value_ok(value)) {
                        *ret_bad = name;
                        return -EINVAL;
                }
                if (header_is_kernels(name))
                        continue;
                has_type = has_type || !strcasecmp(name, "content-type");
                has_accept = has_accept || !strcasecmp(name, "accept");
                if (strv_pushf(&l, "%s: %s", name, value) < 0)
                        return -ENOMEM;
        }
        /* "Name:" alone keeps curl from adding one of its own. */
        if (strv_pushf(&l, "Connection: close") < 0 || strv_pushf(&l, "Expect:") < 0 ||
            (!has_accept && strv_pushf(&l, "Accept:") < 0) ||
            (framed && !has_type && strv_pushf(&l, has_body ? "Content-Type: application/json" : "Content-Type:") < 0))
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

/* A path is sent as given: no spaces or controls that would split the request line. */
static bool path_ok(const char *path) {
        for (const char *s = path; *s; s++)
                if ((unsigned char)*s <= ' ' || *s == 127)
                        return false;
        return true;
}

/* What the model reads: the status line, the headers (names lower-cased, at
 * most HTTP_HEADERS_MAX bytes of them), a blank line, the body. */
static int response_text(const struct httpc_response *res, char **ret) {
        struct buf out = BUF_INIT(HTTP_RESPONSE_MAX + HTTP_HEADERS_MAX + 256);
        int k = buf_printf(&out, "%s\n", res->status_line);
        for (char **h = res->headers; k >= 0 && *h; h++) {
                if (out.len + strlen(*h) > HTTP_HEADERS_MAX)
                        break;
                size_t at = out.len;
                k = buf_printf(&out, "%s\n", *h);
                for (char *c = out.data + at; k >= 0 && *c && *c != ':'; c++)
                        *c = (char)tolower((unsigned char)*c);
        }
        if (k >= 0)
                k = buf_puts(&out, "\n");
        if (k >= 0 && res->body_len)
                k = buf_append(&out, res->body, res->body_len);
        if (k >= 0 && res->truncated)
                k = buf_puts(&out, "\n[response truncated at 1 MiB]");
        if (k < 0) {
                buf_free(&out);
                return -ENOMEM;
        }
        *ret = buf_steal(&out);
        return *ret ? 0 : -ENOMEM;
}

static int http_error(struct tool_result *ret, const char *method, const char *path, int r, const char *err,
                      const struct app_conn *cn) {
        if (r == -ENOMEM)
                return r;
        if (cn->error < 0 || r == -ECONNREFUSED)
                return result(ret, true, "http_request: cannot connect to the app: %s (is it running? see app_logs)",
                              strerror(-r));
        if (r == -ETIMEDOUT)
                return result(ret, true, "http_request: %s %s: no complete answer within 10 s", method, path);
        return result(ret, true, "http_request: %s %s: the app's answer is not HTTP (%s)", method, path,
                      err ? err : strerror(-r));
}

static int cb_http_request(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        if (!a || !a->org)
                return result(ret, true, "http_request: no app is running (start it with start_app first)");
        _cleanup_(json_decrefp) json_t *args = json_loads(args_json ? args_json : "{}", 0, NULL);
        if (!args)
                return result(ret, true, "http_request: arguments are not JSON");
        const char *method = json_string_value(json_object_get(args, "method"));
        const char *path = json_string_value(json_object_get(args, "path"));
        const char *body = json_string_value(json_object_get(args, "body"));
        if (!http_token_ok(method) || !path || path[0] != '/')
                return result(ret, true, "http_request: method and an absolute path (\"/...\") are required");
        if (!path_ok(path))
                return result(ret, true, "http_request: the path must not contain spaces or control "
                                         "characters (percent-encode them)");
        bool framed = body || streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH");
        _cleanup_strv_free_ char **headers = NULL;
        const char *bad = NULL;
        int k = request_headers(json_object_get(args, "headers"), framed, body != NULL, &headers, &bad);
        if (k == -EINVAL)
                return result(ret, true, "http_request: header \"%s\" is not a valid header name and value", bad);
        _cleanup_free_ char *url = NULL, *err = NULL, *text = NULL;
        if (k < 0 || xasprintf(&url, "http://localhost%s", path) < 0)
                return -ENOMEM;
        struct app_conn cn = {.socket_path = organism_socket(a->org)};
        _cleanup_close_ int dirfd = -1;
        _cleanup_free_ char *sock = NULL;
        if ((k = organism_socket_open(cn.socket_path, &dirfd, &sock)) < 0) {
                cn.error = k;
                return http_error(ret, method, path, k, NULL, &cn);
        }
        struct httpc_response res = {0};
        k = httpc_do(&(struct httpc_request){.method = method, .url = url, .headers = headers,
                                             .body = framed ? (body ? body : "") : NULL,
                                             .body_len = body ? strlen(body) : 0,
                                             .timeout_ms = HTTP_TIMEOUT_MS, .max_response = HTTP_RESPONSE_MAX,
                                             .truncate = true, .connect_timeout_ms = HTTP_CONNECT_TIMEOUT_MS,
                                             .unix_socket = sock, .check_fn = app_check, .check_userdata = &cn},
                     &res, &err);
        if (k < 0)
                return http_error(ret, method, path, k, err, &cn);
        k = response_text(&res, &text);
        httpc_response_done(&res);
        if (k < 0)
                return k;
        free(ret->output);
        ret->output = TAKE_PTR(text);
        ret->is_error = false;
        return 0;
}

/* ---- the scratch database ---- */

/* A connection to the evolution's scratch database as evolver — the only
 * database these tools ever connect to. */
static int scratch_connect(struct orch_app *a, struct db **ret, char **ret_error) {
        if (!a->c.pg || !a->c.scratch_db)
                return -ENOENT;
        _cleanup_free_ char *ci = NULL;
        int k = pg_conninfo(a->c.pg, "evolver", a->c.scratch_db, &ci);
        if (k >= 0)
                k = db_connect_err(ci, ret, ret_error);
        if (ci)
                secure_zero(ci, strlen(ci));
        if (k >= 0)
                (void)db_exec(*ret, "SET statement_timeout = '" DB_STATEMENT_TIMEOUT "'", NULL);
        return k;
}

static int connect_or_error(struct orch_app *a, const char *tool, struct db **db, struct tool_result *ret) {
        _cleanup_free_ char *err = NULL;
        if (!a)
                return result(ret, true, "%s is not available in this evolution", tool) < 0 ? -ENOMEM : -ENOENT;
        int k = scratch_connect(a, db, &err);
        if (k == -ENOMEM)
                return k;
        if (k < 0) {
                if (result(ret, true, "%s: cannot connect to the scratch database: %s", tool,
                           k == -ENOENT ? "this evolution has none" : err ? err : strerror(-k)) < 0)
                        return -ENOMEM;
                return -ENOENT;
        }
        return 0;
}

static int cb_migrate(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        _cleanup_(db_closep) struct db *db = NULL;
        int k = connect_or_error(a, tool, &db, ret);
        if (k < 0)
                return k == -ENOMEM ? k : 0;
        const char *dir = a->c.cfg->organism.migrations;
        struct db_migration *m = NULL;
        size_t n = 0;
        _cleanup_free_ char *err = NULL;
        if ((k = evo_load_migrations(a->c.root_fd, dir, &m, &n, &err)) < 0)
                return k == -ENOMEM ? k : result(ret, true, "migrate: cannot read %s: %s", dir, err ? err : strerror(-k));
        k = db_migrate(db, ORGANISM_MIGRATIONS_TABLE, m, n, &err);
        struct buf names = BUF_INIT(64 * 1024);
        for (size_t i = 0; i < n; i++)
                (void)buf_printf(&names, "%s%s", i ? ", " : "", m[i].name);
        evo_migrations_free(m, n);
        if (k < 0)
                k = k == -ENOMEM ? k
                                 : result(ret, true, "migrate: failed: %s", err ? err : strerror(-k));
        else
                k = result(ret, false, "Applied %d new migration%s to the scratch database %s (%zu in %s%s%s).", k,
                           k == 1 ? "" : "s", a->c.scratch_db, n, dir, n ? ": " : "", n && names.data ? names.data : "");
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

static int cb_db_query(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        json_t *args = json_loads(args_json ? args_json : "{}", 0, NULL);
        const char *s = json_string_value(json_object_get(args, "sql"));
        _cleanup_free_ char *sql = s ? strdup(s) : NULL;
        json_decref(args);
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
        int k = connect_or_error(a, tool, &db, ret);
        if (k < 0)
                return k == -ENOMEM ? k : 0;
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
                        json_t *rows = json_loads(json, 0, NULL);
                        size_t n = json_array_size(rows);
                        bool more = n > DB_ROWS_MAX;
                        if (more)
                                json_array_remove(rows, DB_ROWS_MAX);
                        _cleanup_free_ char *text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
                        json_decref(rows);
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

static int cb_db_schema(struct tool_ctx *ctx, const char *tool, const char *args_json, struct tool_result *ret) {
        struct orch_app *a = orch_app_of(ctx);
        _cleanup_(db_closep) struct db *db = NULL;
        int k = connect_or_error(a, tool, &db, ret);
        if (k < 0)
                return k == -ENOMEM ? k : 0;
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
        json_t *rows = json_loads(json, 0, NULL);
        struct buf out = BUF_INIT(4u << 20);
        const char *last_s = NULL, *last_t = NULL;
        size_t i, tables = 0;
        json_t *row;
        json_array_foreach(rows, i, row) {
                const char *sc = json_string_value(json_object_get(row, "s")) ?: "";
                const char *t = json_string_value(json_object_get(row, "t")) ?: "";
                const char *d = json_string_value(json_object_get(row, "d"));
                if (!last_t || !streq(sc, last_s) || !streq(t, last_t)) {
                        if (streq(sc, "public"))
                                (void)buf_printf(&out, "%stable %s\n", tables ? "\n" : "", t);
                        else
                                (void)buf_printf(&out, "%stable %s.%s\n", tables ? "\n" : "", sc, t);
                        tables++;
                        last_s = sc;
                        last_t = t;
                }
                (void)buf_printf(&out, "  %s %s%s%s%s\n", json_string_value(json_object_get(row, "c")) ?: "",
                                 json_string_value(json_object_get(row, "ty")) ?: "",
                                 streq(json_string_value(json_object_get(row, "n")) ?: "", "NO") ? " not null" : "",
                                 d ? " default " : "", d ? d : "");
        }
        k = tables ? result(ret, false, "Scratch database %s: %zu table%s\n\n%s", a->c.scratch_db, tables,
                            tables == 1 ? "" : "s", out.data ? out.data : "")
                   : result(ret, false, "The scratch database %s has no tables yet.", a->c.scratch_db);
        json_decref(rows);
        buf_free(&out);
        return k;
}

void orch_app_set_callbacks(struct tool_callbacks *cb) {
        cb->start_app = cb_start_app;
        cb->stop_app = cb_stop_app;
        cb->http_request = cb_http_request;
        cb->app_logs = cb_app_logs;
        cb->migrate = cb_migrate;
        cb->db_query = cb_db_query;
        cb->db_schema = cb_db_schema;
}
