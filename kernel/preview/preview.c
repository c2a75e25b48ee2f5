/* preview.c — the candidate app of an evolution: its folders, its start in
 * a sandbox against the scratch database (start_app), its stop (stop_app,
 * the end of the evolution) and its log (app_logs). See preview.h. */
#include "preview/preview-internal.h"
#include "base/fileio.h"
#include "base/log.h"
#include "config/config.h"
#include "organism/organism.h"
#include "pg/pg.h"

#include <fcntl.h>
#include <sys/stat.h>

#define APP_START_TIMEOUT_MS (60 * 1000)
#define LOG_READ_MAX (512 * 1024)            /* bytes read from the end of the log */
#define LOG_LINES_DEFAULT 200

int preview_new(const struct preview_config *c, struct preview **ret) {
        if (!c || !c->seed_dir || !c->worktree || !c->evo_id || !c->cfg || !ret)
                return -EINVAL;
        struct preview *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->c = *c;
        if (xasprintf(&p->run_dir, "%s/.seed/preview/%s-app", c->seed_dir, c->evo_id) < 0 ||
            xasprintf(&p->log_path, "%s/.seed/logs/preview-%s-app.log", c->seed_dir, c->evo_id) < 0) {
                preview_free(p);
                return -ENOMEM;
        }
        *ret = p;
        return 0;
}

static void app_stop(struct preview *p) {
        if (!p->org)
                return;
        organism_stop(p->org);
        organism_free(p->org);
        p->org = NULL;
        (void)rm_rf(p->run_dir);
}

void preview_free(struct preview *p) {
        if (!p)
                return;
        app_stop(p);
        free(p->run_dir);
        free(p->log_path);
        free(p);
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

int preview_unavailable(const struct tool *t, struct tool_result *ret) {
        return result(ret, true, "%s is not available in this phase", t->name);
}

/* ---- the tools ---- */

int preview_start_app(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct preview *p = ctx->preview;
        if (!p)
                return preview_unavailable(t, ret);
        if (!p->c.pg || !p->c.scratch_url)
                return result(ret, true, "start_app: this evolution has no scratch database");
        if (!p->c.bridge_path)
                return result(ret, true, "start_app: no bridge binary is configured");
        bool restarted = p->org != NULL;
        app_stop(p);
        const struct cfg *cfg = p->c.cfg;
        _cleanup_free_ char *preview_dir = path_join(p->c.seed_dir, ".seed/preview"),
                            *logs_dir = path_join(p->c.seed_dir, ".seed/logs"),
                            *cache = path_join(p->c.seed_dir, ".seed/cache");
        if (!preview_dir || !logs_dir || !cache)
                return -ENOMEM;
        int k;
        if ((k = mkdir_mode(logs_dir, 0700)) < 0 || (k = mkdir_mode(preview_dir, 0700)) < 0 ||
            (k = mkdir_mode(cache, 0700)) < 0 || (k = mkdir_mode(p->run_dir, 0700)) < 0) {
                log_error_errno(k, "evolution %s: cannot create the preview's folders: %m", p->c.evo_id);
                return result(ret, true, "start_app: cannot create the preview's folders: %s", strerror(-k));
        }
        (void)unlink(p->log_path);
        char label[96];
        snprintf(label, sizeof label, "preview %s", p->c.evo_id);
        struct organism_config oc = {
                .seed_dir = p->c.worktree,
                .egress = p->c.egress,
                .label = label,
                .build_cmd = cfg->organism.build,
                .run_cmd = cfg->organism.run,
                .health_path = cfg->organism.health,
                .port = cfg->organism.port,
                .database_url = p->c.scratch_url,
                .pg_socket_dir = pg_socket_dir(p->c.pg),
                .bridge_path = p->c.bridge_path,
                .run_dir = p->run_dir,
                .log_path = p->log_path,
                .cache_dir = cache,
                .health_timeout_ms = APP_START_TIMEOUT_MS,
        };
        struct organism *o = NULL;
        if ((k = organism_new(&oc, &o)) < 0) {
                (void)rm_rf(p->run_dir);
                return result(ret, true, "start_app: cannot set up the app: %s", strerror(-k));
        }
        if ((k = organism_start(o)) < 0) {
                organism_free(o);
                (void)rm_rf(p->run_dir);
                return result(ret, true, "start_app: cannot start the app: %s", strerror(-k));
        }
        p->org = o;
        /* Wait for health in slices, so a cancelled evolution does not wait. */
        int64_t deadline = now_ms() + APP_START_TIMEOUT_MS + 30 * 1000;
        do {
                if (p->c.cancel && atomic_load(p->c.cancel)) {
                        app_stop(p);
                        return result(ret, true, "start_app: the evolution was cancelled");
                }
                k = organism_wait_ready(o, 500);
        } while (k == -ETIMEDOUT && now_ms() < deadline);
        if (k < 0) {
                _cleanup_free_ char *reason = NULL, *tail = log_tail_lines(p->log_path, 60, 16 * 1024);
                (void)organism_reason(o, &reason);
                const char *state = organism_state_name(organism_state(o));
                app_stop(p);
                return result(ret, true,
                              "start_app: the app did not become healthy (%s%s%s; state %s) and was stopped. "
                              "End of its log:\n%s",
                              k == -ETIMEDOUT ? "no healthy answer within 60 s" : "it exited",
                              reason ? ": " : "", reason ? reason : "", state, tail ? tail : "(no log)");
        }
        log_info("evolution %s: preview app %s", p->c.evo_id, restarted ? "restarted" : "started");
        return result(ret, false,
                      "The app is %s and healthy (state %s; GET %s answers 2xx). It uses the scratch database %s. "
                      "Use http_request to talk to it and app_logs to read its output.",
                      restarted ? "restarted" : "running", organism_state_name(organism_state(o)),
                      cfg->organism.health, p->c.scratch_db);
}

int preview_stop_app(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct preview *p = ctx->preview;
        if (!p)
                return preview_unavailable(t, ret);
        if (!p->org)
                return result(ret, true, "stop_app: no app is running (start it with start_app)");
        app_stop(p);
        return result(ret, false, "The app is stopped.");
}

int preview_app_logs(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct preview *p = ctx->preview;
        if (!p)
                return preview_unavailable(t, ret);
        json_int_t lines = json_integer_value(json_object_get(args, "lines"));
        if (lines < 1 || lines > 5000)
                lines = LOG_LINES_DEFAULT;
        _cleanup_free_ char *tail = log_tail_lines(p->log_path, (int)lines, LOG_READ_MAX);
        if (!tail)
                return result(ret, true, "app_logs: the app has no log yet (start it with start_app)");
        return result(ret, false, "(app %s)\n%s", p->org ? organism_state_name(organism_state(p->org)) : "stopped",
                      tail[0] ? tail : "(the log is empty)");
}

