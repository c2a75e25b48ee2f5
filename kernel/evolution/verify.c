#include "evolution/verify.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/log.h"
#include "checks/checks.h"
#include "config/config.h"
#include "fsx/fsx.h"
#include "organism/migrations.h"
#include "organism/organism.h"
#include "pg/pg.h"
#include "sandbox/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>

#define LAUNCH_TIMEOUT_MS (60 * 1000)

void evo_check_free(struct evo_check *c) {
        if (!c)
                return;
        free(c->output);
        free(c);
}

struct run {
        const struct evo_verify_config *c;
        struct evo_check *failed;
};

/* Records one step; on failure keeps it for the caller. Returns 0 or -EIO. */
static int step_done(struct run *run, const char *name, bool ok, char *output, int64_t started) {
        struct evo_check check = {.name = name, .ok = ok, .output = output ? output : strdup(""),
                                  .duration_ms = now_ms() - started};
        if (run->c->on_check)
                run->c->on_check(run->c->userdata, &check);
        if (ok) {
                free(check.output);
                return 0;
        }
        run->failed = malloc(sizeof(*run->failed));
        if (!run->failed) {
                free(check.output);
                return -ENOMEM;
        }
        *run->failed = check;
        return -EIO;
}

/* A path under the live Seed's folder (.seed/...). NULL on OOM. */
static char *seed_path(const struct evo_verify_config *c, const char *rel, const char *suffix) {
        char *p = NULL;
        if (xasprintf(&p, "%s/%s%s", c->seed_dir, rel, suffix ? suffix : "") < 0)
                return NULL;
        return p;
}

/* A command of the organism (build or test) in a sandbox over the worktree. */
static int sandboxed(struct run *run, const char *name, enum sandbox_profile profile, const char *command,
                     const char *database_url) {
        const struct evo_verify_config *c = run->c;
        int64_t started = now_ms();
        _cleanup_free_ char *cache = seed_path(c, ".seed/cache", NULL);
        char *organism_only[] = {"organism/", NULL};
        char label[96];
        snprintf(label, sizeof label, "%s %s", name, c->evo_id);
        struct sandbox_spec spec = {
                .profile = profile,
                .seed_dir = c->seed_dir,
                .workspace = c->worktree,
                .evolvable = organism_only, /* builds and tests write build outputs, nothing else */
                .pg_socket_dir = database_url ? pg_socket_dir(c->pg) : NULL,
                .database_url = database_url,
                .cache_dir = cache,
                .egress = c->egress,
                .label = label,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        int r = cache ? mkdir_mode(cache, 0700) : -ENOMEM;
        if (r < 0)
                return log_error_errno(r, "verify: cannot create the build cache: %m");
        r = sandbox_policy_build(&spec, &p);
        if (r < 0)
                return log_error_errno(r, "verify: cannot build the %s sandbox: %m", name);
        char *cmd[] = {"/bin/sh", "-c", (char *)command, NULL};
        struct proc_result res = {0};
        r = sandbox_run(p, cmd, c->cfg->evolution.command_timeout_seconds * 1000, &res);
        if (r < 0)
                return log_error_errno(r, "verify: cannot run the %s sandbox: %m", name);
        struct buf out = BUF_INIT(4u << 20);
        (void)buf_printf(&out, "$ %s\n%s", command, res.output ? res.output : "");
        if (res.timed_out)
                (void)buf_printf(&out, "\n[timed out after %d s]\n", c->cfg->evolution.command_timeout_seconds);
        else if (res.exit_code != 0)
                (void)buf_printf(&out, "\n[exit code %d]\n", res.exit_code);
        bool ok = !res.timed_out && res.exit_code == 0;
        proc_result_done(&res);
        return step_done(run, name, ok, buf_steal(&out), started);
}

/* A fresh scratch database owned by evolver with the organism's migrations. */
static int fresh_database(struct run *run, int root, const char *dbname, char **ret_url) {
        const struct evo_verify_config *c = run->c;
        int64_t started = now_ms();
        (void)pg_scratch_drop(c->pg, dbname);
        int r = pg_scratch_create(c->pg, dbname);
        if (r < 0)
                return log_error_errno(r, "verify: cannot create scratch database %s: %m", dbname);
        char *err = NULL;
        _cleanup_free_ char *ci = NULL;
        if ((r = pg_conninfo(c->pg, "evolver", dbname, &ci)) >= 0) {
                r = organism_migrations_apply(root, c->cfg->organism.migrations, ci, &err);
                secure_zero(ci, strlen(ci));
        }
        if (r >= 0)
                r = pg_sandbox_url(c->pg, "evolver", dbname, ret_url);
        if (r < 0 && r != -ENOMEM) {
                char *msg = NULL;
                (void)xasprintf(&msg, "migrating a fresh database failed: %s", err ? err : strerror(-r));
                free(err);
                return step_done(run, "migrate", false, msg, started);
        }
        free(err);
        return r < 0 ? r : step_done(run, "migrate", true, NULL, started);
}

static char *log_tail(const char *path, size_t max) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        if (read_file(path, 64u << 20, &data, &len) < 0)
                return strdup("(no log)");
        const char *start = len > max ? data + len - max : data;
        return strdup(start);
}

#define CHECK_BODY_SHOWN 2000 /* bytes of a failing check's answer shown */

/* The status of organism_http()'s answer text ("HTTP/1.1 201 Created\n…"), or -1. */
static int answer_status(const char *text) {
        const char *sp = strchr(text, ' ');
        if (!startswith(text, "HTTP/") || !sp || sp[1] < '1' || sp[1] > '5')
                return -1;
        int st = 0;
        for (int i = 1; i <= 3; i++) {
                if (sp[i] < '0' || sp[i] > '9')
                        return -1;
                st = st * 10 + (sp[i] - '0');
        }
        return st;
}

/* One declared check against the launched app: the status, then the body
 * (after the blank line ending the headers) must contain the substring. */
static int declared_check(struct run *run, const char *socket, const struct decl_check *dc) {
        int64_t started = now_ms();
        _cleanup_free_ char *text = NULL, *err = NULL;
        struct organism_http_request req = {.method = dc->method, .path = dc->path, .body = dc->send};
        int k = organism_http(socket, &req, &text, &err);
        if (k == -ENOMEM)
                return k;
        char *msg = NULL;
        bool ok = false;
        if (k < 0) {
                (void)xasprintf(&msg, "%s %s: no answer: %s", dc->method, dc->path, err ? err : strerror(-k));
                return step_done(run, dc->name, false, msg, started);
        }
        const char *body = strstr(text, "\n\n");
        body = body ? body + 2 : "";
        int st = answer_status(text);
        if (st != dc->status)
                (void)xasprintf(&msg, "%s %s answered %d, the check expects %d. The answer:\n%.*s", dc->method, dc->path,
                                st, dc->status, CHECK_BODY_SHOWN, text);
        else if (dc->contains && !strstr(body, dc->contains))
                (void)xasprintf(&msg, "%s %s answered %d but its body does not contain \"%s\". The answer:\n%.*s",
                                dc->method, dc->path, st, dc->contains, CHECK_BODY_SHOWN, text);
        else {
                ok = true;
                (void)xasprintf(&msg, "%s %s answered %d%s", dc->method, dc->path, st,
                                dc->contains ? " with the expected text" : "");
        }
        return step_done(run, dc->name, ok, msg, started);
}

/* Launches the worktree's organism on its own fresh database, like the live
 * one (private network, no cache), waits for health and probes it. */
static int launch(struct run *run, const char *database_url) {
        const struct evo_verify_config *c = run->c;
        int64_t started = now_ms();
        _cleanup_free_ char *run_dir = seed_path(c, ".seed/preview/", c->evo_id);
        _cleanup_free_ char *preview_dir = seed_path(c, ".seed/preview", NULL);
        _cleanup_free_ char *logs_dir = seed_path(c, ".seed/logs", NULL);
        _cleanup_free_ char *log_name = NULL, *log_path = NULL;
        if (xasprintf(&log_name, "preview-%s.log", c->evo_id) < 0 || !logs_dir ||
            !(log_path = path_join(logs_dir, log_name)))
                return -ENOMEM;
        _cleanup_free_ char *cache = seed_path(c, ".seed/cache", NULL);
        if (!run_dir || !preview_dir || !cache)
                return -ENOMEM;
        int r;
        if ((r = mkdir_mode(logs_dir, 0700)) < 0 || (r = mkdir_mode(preview_dir, 0700)) < 0 ||
            (r = mkdir_mode(run_dir, 0700)) < 0)
                return log_error_errno(r, "verify: cannot create %s: %m", run_dir);
        (void)unlink(log_path);
        char label[96];
        snprintf(label, sizeof label, "check %s", c->evo_id);
        struct organism_config oc = {
                .seed_dir = c->worktree,
                .egress = c->egress,
                .label = label,
                .build_cmd = c->cfg->organism.build,
                .run_cmd = c->cfg->organism.run,
                .health_path = c->cfg->organism.health,
                .port = c->cfg->organism.port,
                .database_url = database_url,
                .pg_socket_dir = pg_socket_dir(c->pg),
                .bridge_path = c->bridge_path,
                .run_dir = run_dir,
                .log_path = log_path,
                .cache_dir = cache,
                .health_timeout_ms = LAUNCH_TIMEOUT_MS,
        };
        struct organism *o = NULL;
        if ((r = organism_new(&oc, &o)) < 0)
                return log_error_errno(r, "verify: cannot set up the preview: %m");
        if ((r = organism_start(o)) < 0) {
                organism_free(o);
                return r;
        }
        r = organism_wait_ready(o, LAUNCH_TIMEOUT_MS + 30 * 1000);
        if (r < 0) {
                organism_stop(o);
                organism_free(o);
                char *msg = NULL, *tail = log_tail(log_path, 16 * 1024);
                (void)xasprintf(&msg, "the app did not become healthy (%s); end of its log:\n%s",
                                r == -ETIMEDOUT ? "no answer within 60 s" : "it exited", tail ? tail : "");
                free(tail);
                return step_done(run, "launch", false, msg, started);
        }
        if ((r = step_done(run, "launch", true, NULL, started)) < 0)
                goto out;
        static const struct {
                const char *name;
                bool health;
        } probes[] = {{"healthz", true}, {"root", false}};
        for (size_t i = 0; i < ARRAY_SIZE(probes); i++) {
                const char *path = probes[i].health ? c->cfg->organism.health : "/";
                int64_t t = now_ms();
                int p = organism_probe(organism_socket(o), path);
                char *msg = NULL;
                if (p < 0)
                        (void)xasprintf(&msg, "GET %s did not answer 2xx: %s", path, strerror(-p));
                if ((r = step_done(run, probes[i].name, p == 0, msg, t)) < 0)
                        break;
        }
        for (size_t i = 0; r == 0 && i < c->n_checks; i++)
                r = declared_check(run, organism_socket(o), &c->checks[i]);
out:
        organism_stop(o);
        organism_free(o);
        rm_rf(run_dir);
        return r;
}

int evo_verify(const struct evo_verify_config *c, struct evo_check **ret_failed) {
        struct run run = {.c = c};
        _cleanup_close_ int root = -1;
        _cleanup_free_ char *test_db = NULL, *run_db = NULL, *test_url = NULL, *run_url = NULL;
        int r = fsx_open_root(c->worktree, &root);
        if (r < 0)
                return log_error_errno(r, "verify: cannot open the worktree %s: %m", c->worktree);
        if (xasprintf(&test_db, "%s_test", c->evo_id) < 0 || xasprintf(&run_db, "%s_run", c->evo_id) < 0)
                return -ENOMEM;
        r = sandboxed(&run, "build", SANDBOX_BUILD, c->cfg->organism.build, NULL);
        if (r == 0)
                r = fresh_database(&run, root, test_db, &test_url);
        if (r == 0)
                r = sandboxed(&run, "test", SANDBOX_TEST, c->cfg->organism.test, test_url);
        if (r == 0)
                r = fresh_database(&run, root, run_db, &run_url);
        if (r == 0)
                r = launch(&run, run_url);
        (void)pg_scratch_drop(c->pg, test_db);
        (void)pg_scratch_drop(c->pg, run_db);
        if (test_url)
                secure_zero(test_url, strlen(test_url));
        if (run_url)
                secure_zero(run_url, strlen(run_url));
        if (r == -EIO && ret_failed)
                *ret_failed = TAKE_PTR(run.failed);
        evo_check_free(run.failed);
        return r;
}
