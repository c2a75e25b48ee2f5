/* routines.c — routines and jobs on the scheduler: the store, the runs. See
 * routines.h. */
#include "routines/routines.h"
#include "agent/agent.h"
#include "base/json.h"
#include "base/log.h"
#include "config/config.h"
#include "db/db.h"
#include "fsx/fsx.h"
#include "live/live.h"
#include "mind/mind.h"
#include "organism/organism.h"
#include "outbound/outbound.h"
#include "repo/repo.h"
#include "schedule/schedule.h"
#include "spend/spend.h"
#include "tools/tools.h"

#include <pthread.h>
#include <stdatomic.h>

#define ROUTINE_TOOLS_MAX 64

/* One scheduler job of ours: a routine or a job, with its parsed schedule
 * (which the scheduler borrows while the entry is registered). */
struct entry {
        struct routines *r;
        enum routines_kind kind;
        char *id;          /* a routine's id, a job's name */
        char *sched_name;  /* "routine.<id>" | "job.<name>" */
        char *name;        /* a routine's name (reports), a job's name */
        char *method, *path; /* jobs */
        char *schedule, *tz;
        struct sched_spec *spec;
        atomic_bool paused;
        atomic_llong since_s; /* created or resumed: the first run is after it */
        unsigned failures;    /* jobs: failed runs in a row */
        struct entry *next;
};

struct routines {
        struct routines_config c;
        char *seed_dir;
        char *job_token;
        char *jobs_error;
        pthread_mutex_t lock;        /* entries, jobs_error */
        struct entry *entries;
        pthread_mutex_t routine_run; /* one routine at a time */
        pthread_mutex_t jobs_lock;   /* with jobs_cond: at most ROUTINES_JOBS_AT_ONCE */
        pthread_cond_t jobs_cond;
        int jobs_running;
        atomic_bool cancel;          /* the kernel stops */
        struct tool tools[ROUTINE_TOOLS_MAX + 1];
        const struct tool *set[2];
};

/* ---- the read-only tool set ---- */

/* The chat's tables whose safe tools a routine may use: kernel/tools'
 * reads, kernel/outbound's status, kernel/live's reads. The chat's own
 * (start_evolution) are never among them. */
static const struct tool *const chat_tables[] = {tools_table, outbound_tools, live_tools, NULL};

static void build_tool_set(struct routines *r) {
        size_t n = 0;
        for (size_t i = 0; chat_tables[i]; i++)
                for (const struct tool *t = chat_tables[i]; t->name && n < ROUTINE_TOOLS_MAX; t++)
                        if (t->level == TOOL_SAFE && !t->terminal && tools_offered(t, TOOL_PHASE_CHAT))
                                r->tools[n++] = *t;
        r->tools[n] = (struct tool)TOOL_TABLE_END;
        r->set[0] = r->tools;
        r->set[1] = NULL;
}

/* ---- entries ---- */

static void entry_free(struct entry *e) {
        if (!e)
                return;
        free(e->id);
        free(e->sched_name);
        free(e->name);
        free(e->method);
        free(e->path);
        free(e->schedule);
        free(e->tz);
        sched_spec_free(e->spec);
        free(e);
}

static int entry_next_due(void *userdata, int64_t last_run_s, int64_t now_s, int64_t *ret_due_s) {
        struct entry *e = userdata;
        if (atomic_load(&e->paused)) {
                *ret_due_s = INT64_MAX;
                return 0;
        }
        int64_t base = last_run_s > atomic_load(&e->since_s) ? last_run_s : atomic_load(&e->since_s);
        (void)now_s;
        return sched_spec_next(e->spec, base, ret_due_s);
}

static int routine_run(void *userdata, char **ret_error);
static int job_run(void *userdata, char **ret_error);

/* Makes an entry and registers it with the scheduler; on success it is in
 * r->entries. */
static int entry_add(struct routines *r, enum routines_kind kind, const char *id, const char *name,
                     const char *schedule, const char *tz, bool paused, int64_t since_s, const char *method,
                     const char *path) {
        struct entry *e = calloc(1, sizeof *e);
        _cleanup_free_ char *why = NULL;
        if (!e)
                return -ENOMEM;
        e->r = r;
        e->kind = kind;
        atomic_init(&e->paused, paused);
        atomic_init(&e->since_s, since_s);
        int k = 0;
        if (!(e->id = strdup(id)) || !(e->name = strdup(name)) ||
            xasprintf(&e->sched_name, "%s.%s", kind == ROUTINES_ROUTINE ? "routine" : "job", id) < 0 ||
            !(e->schedule = strdup(schedule)) || !(e->tz = strdup(tz)) ||
            (method && !(e->method = strdup(method))) || (path && !(e->path = strdup(path))))
                k = -ENOMEM;
        else
                k = sched_spec_parse(schedule, streq(tz, "UTC") ? NULL : tz, &e->spec, &why);
        if (k < 0) {
                log_error("%s cannot be scheduled: %s", e->sched_name ? e->sched_name : id, why ? why : strerror(-k));
                entry_free(e);
                return k;
        }
        struct sched_job j = {.name = e->sched_name, .next_due = entry_next_due,
                              .run = kind == ROUTINES_ROUTINE ? routine_run : job_run, .userdata = e};
        if ((k = sched_add(r->c.sched, &j)) < 0) {
                log_error_errno(k, "%s cannot be scheduled: %m", e->sched_name);
                entry_free(e);
                return k;
        }
        pthread_mutex_lock(&r->lock);
        e->next = r->entries;
        r->entries = e;
        pthread_mutex_unlock(&r->lock);
        return 0;
}

/* The entry of kind and id, or NULL. Call with r->lock held. */
static struct entry *entry_find(struct routines *r, enum routines_kind kind, const char *id) {
        for (struct entry *e = r->entries; e; e = e->next)
                if (e->kind == kind && streq(e->id, id))
                        return e;
        return NULL;
}

/* Unlinks and unregisters an entry (waits for its run), then frees it. */
static void entry_remove(struct routines *r, struct entry *e) {
        pthread_mutex_lock(&r->lock);
        for (struct entry **p = &r->entries; *p; p = &(*p)->next)
                if (*p == e) {
                        *p = e->next;
                        break;
                }
        pthread_mutex_unlock(&r->lock);
        (void)sched_remove(r->c.sched, e->sched_name);
        entry_free(e);
}

/* ---- runs ---- */

static void record_run(struct routines *r, const struct entry *e, int64_t started, const char *outcome,
                       const char *text, const char *error) {
        char s[32], en[32];
        snprintf(s, sizeof s, "%lld", (long long)started);
        snprintf(en, sizeof en, "%lld", (long long)wall_ms());
        bool routine = e->kind == ROUTINES_ROUTINE;
        const char *p[] = {routine ? e->id : NULL, routine ? NULL : e->id, s, en, outcome, text, error};
        _cleanup_free_ char *err = NULL;
        if (db_execp(r->c.kdb,
                     "INSERT INTO routine_runs (routine_id, job_name, started_at, ended_at, outcome, text, error) "
                     "VALUES ($1::bigint, $2, $3::bigint, $4::bigint, $5, $6, $7)",
                     7, p, &err) < 0) {
                log_error("%s: its run could not be recorded: %s", e->sched_name, err ? err : "?");
                return;
        }
        char kept[16];
        snprintf(kept, sizeof kept, "%d", ROUTINES_RUNS_KEPT);
        const char *q[] = {e->id, kept};
        (void)db_execp(r->c.kdb,
                       routine ? "DELETE FROM routine_runs WHERE routine_id = $1::bigint AND id NOT IN (SELECT id FROM "
                                 "routine_runs WHERE routine_id = $1::bigint ORDER BY id DESC LIMIT $2::int)"
                               : "DELETE FROM routine_runs WHERE job_name = $1 AND id NOT IN (SELECT id FROM "
                                 "routine_runs WHERE job_name = $1 ORDER BY id DESC LIMIT $2::int)",
                       2, q, NULL);
}

static char *routine_system(struct routines *r, const char *name) {
        char *s = NULL;
        if (xasprintf(&s,
                      "You are the Seed named '%s', running your routine '%s' on its schedule. Nobody is "
                      "watching: the owner reads your answer later in the chat, as this routine's report. You may "
                      "only read: your files, the live data (describe_data, query_data, call_api with GET). You "
                      "cannot change anything or start evolutions. Do what the routine asks, then answer in one "
                      "short message for the owner. If there is nothing worth telling the owner, answer exactly "
                      "%s and nothing else.",
                      r->c.cfg && r->c.cfg->name ? r->c.cfg->name : "seed", name, ROUTINES_QUIET) < 0)
                return NULL;
        return s;
}

static int routine_complete(void *userdata, const struct model_request *req, struct model_response *ret,
                            char **ret_error) {
        struct routines *r = userdata;
        return mind_complete(r->c.mind, req, ret, ret_error);
}

/* Sets *cancel when the deadline passes, the kernel stops, or done. */
struct watchdog {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
        atomic_bool cancel;
        const atomic_bool *stop;
        int64_t timeout_ms;
};

static void *watchdog_main(void *userdata) {
        struct watchdog *w = userdata;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t until = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + w->timeout_ms;
        pthread_mutex_lock(&w->lock);
        while (!w->done) {
                clock_gettime(CLOCK_MONOTONIC, &ts);
                int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
                if (now >= until || atomic_load(w->stop)) {
                        atomic_store(&w->cancel, true);
                        break;
                }
                int64_t next = now + 1000 < until ? now + 1000 : until; /* the kernel's stop is looked at each second */
                ts.tv_sec = next / 1000;
                ts.tv_nsec = (next % 1000) * 1000000L;
                pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

/* The agent's run of a routine's prompt: *ret_text its answer (caller
 * frees), or *ret_error. */
static int routine_agent(struct routines *r, const struct entry *e, const char *prompt, char **ret_text,
                         char **ret_error) {
        _cleanup_free_ char *system = routine_system(r, e->name);
        _cleanup_strv_free_ char **tracked = NULL;
        _cleanup_close_ int root = -1;
        struct agent_state st;
        struct agent_result res = {0};
        agent_state_init(&st);
        int k;
        if (!system || agent_state_add_user(&st, prompt) < 0) {
                k = -ENOMEM;
                goto out;
        }
        if ((k = fsx_open_root(r->seed_dir, &root)) < 0 || (k = repo_tracked_paths(r->seed_dir, &tracked)) < 0) {
                (void)xasprintf(ret_error, "cannot read the Seed's folder: %s", strerror(-k));
                goto out;
        }
        struct tool_ctx tc = {
                .set = r->set,
                .phase = TOOL_PHASE_CHAT,
                .root_fd = root,
                .root_path = r->seed_dir,
                .tracked = tracked,
                .evolvable = r->c.cfg->kernel.evolvable,
                .outbound = r->c.outbound,
                .live = r->c.live,
                /* Read only, whatever seed.yaml says: nothing is asked,
                 * anything above safe (call_api with POST) is denied. */
                .decisions = {[TOOL_SAFE] = CFG_ALLOW, [TOOL_REVIEW] = CFG_DENY, [TOOL_DANGEROUS] = CFG_DENY},
        };
        struct watchdog w = {.stop = &r->cancel, .timeout_ms = r->c.routine_timeout_ms};
        pthread_mutex_init(&w.lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w.cond, &ca);
        pthread_condattr_destroy(&ca);
        atomic_init(&w.cancel, false);
        pthread_t th;
        bool watching = pthread_create(&th, NULL, watchdog_main, &w) == 0;
        struct agent_config ac = {
                .complete = routine_complete,
                .complete_userdata = r,
                .system = system,
                .purpose = "routine",
                .reference = e->sched_name,
                .tools = &tc,
                .max_turns = ROUTINES_MAX_TURNS,
                .context_budget = (size_t)r->c.cfg->model.context_chars,
                .cancel = &w.cancel,
                .end_on_reply = true,
        };
        k = watching ? agent_run(&ac, &st, &res) : -EAGAIN;
        if (watching) {
                pthread_mutex_lock(&w.lock);
                w.done = true;
                pthread_cond_signal(&w.cond);
                pthread_mutex_unlock(&w.lock);
                pthread_join(th, NULL);
        }
        pthread_mutex_destroy(&w.lock);
        pthread_cond_destroy(&w.cond);
        if (k < 0) {
                (void)xasprintf(ret_error, "the routine could not run: %s", strerror(-k));
                goto out;
        }
        if (res.outcome == AGENT_CANCELLED) {
                int t = r->c.routine_timeout_ms;
                if (atomic_load(&r->cancel))
                        (void)xasprintf(ret_error, "stopped: the kernel stopped");
                else if (t % 60000 == 0)
                        (void)xasprintf(ret_error, "stopped after %d minutes", t / 60000);
                else
                        (void)xasprintf(ret_error, "stopped after %d ms", t);
                k = -ETIMEDOUT;
        } else if (res.outcome != AGENT_REPLIED || strempty(res.text)) {
                (void)xasprintf(ret_error, "no answer (%s): %.*s", agent_outcome_name(res.outcome), ROUTINES_ERROR_MAX,
                                res.error ? res.error : "no text");
                k = -EREMOTEIO;
        } else {
                *ret_text = TAKE_PTR(res.text);
                k = 0;
        }
out:
        agent_result_done(&res);
        agent_state_done(&st);
        return k;
}

/* A report as posted: cut at ROUTINES_REPORT_MAX on a character boundary. */
static void cut_report(char *text) {
        size_t n = strlen(text);
        if (n <= ROUTINES_REPORT_MAX)
                return;
        n = ROUTINES_REPORT_MAX;
        while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
                n--;
        memcpy(text + n, "…", sizeof "…");
}

static int routine_run(void *userdata, char **ret_error) {
        struct entry *e = userdata;
        struct routines *r = e->r;
        int64_t started = wall_ms();
        pthread_mutex_lock(&r->routine_run); /* one at a time: the next waits its turn */
        if (atomic_load(&r->cancel)) { /* the kernel stopped while it waited: not run (nor recorded) */
                pthread_mutex_unlock(&r->routine_run);
                if (ret_error)
                        *ret_error = strdup("not run: the kernel stopped");
                return -ECANCELED;
        }
        _cleanup_free_ char *prompt = NULL, *text = NULL, *error = NULL;
        const char *p[] = {e->id};
        int k = db_query_value(r->c.kdb, "SELECT prompt FROM routines WHERE id = $1::bigint", 1, p, &prompt);
        if (k < 0 || !prompt) {
                pthread_mutex_unlock(&r->routine_run);
                return k < 0 ? k : -ENOENT;
        }
        if (r->c.spend && !spend_allows(r->c.spend, "routine")) {
                log_info("%s is not run: the month's spend budget is reached", e->sched_name);
                record_run(r, e, started, "skipped", NULL, "the month's spend budget is reached");
                pthread_mutex_unlock(&r->routine_run);
                return 0;
        }
        if (!r->c.mind || !mind_ready(r->c.mind)) {
                k = -ENODEV;
                error = strdup("no model to think with (no key)");
        } else {
                k = routine_agent(r, e, prompt, &text, &error);
        }
        if (k >= 0 && routines_quiet(text)) {
                record_run(r, e, started, "quiet", NULL, NULL);
        } else if (k >= 0) {
                cut_report(text);
                record_run(r, e, started, "reported", text, NULL);
                if (r->c.post && r->c.post(r->c.userdata, e->name, text) < 0)
                        log_warn("%s: its report could not be posted in the chat (kept in its runs)", e->sched_name);
        } else {
                record_run(r, e, started, "failed", NULL, error ? error : strerror(-k));
                if (ret_error)
                        *ret_error = TAKE_PTR(error);
        }
        pthread_mutex_unlock(&r->routine_run);
        return k < 0 ? k : 0;
}

static void jobs_enter(struct routines *r) {
        pthread_mutex_lock(&r->jobs_lock);
        while (r->jobs_running >= ROUTINES_JOBS_AT_ONCE)
                pthread_cond_wait(&r->jobs_cond, &r->jobs_lock);
        r->jobs_running++;
        pthread_mutex_unlock(&r->jobs_lock);
}

static void jobs_leave(struct routines *r) {
        pthread_mutex_lock(&r->jobs_lock);
        r->jobs_running--;
        pthread_cond_signal(&r->jobs_cond);
        pthread_mutex_unlock(&r->jobs_lock);
}

/* The status line of an answer's text ("HTTP/1.1 200 OK"), and its code. */
static int status_of(const char *text, char *line, size_t size) {
        size_t n = strcspn(text, "\r\n");
        snprintf(line, size, "%.*s", (int)(n < size ? n : size - 1), text);
        const char *sp = strchr(line, ' ');
        return sp ? atoi(sp + 1) : 0;
}

static int job_run(void *userdata, char **ret_error) {
        struct entry *e = userdata;
        struct routines *r = e->r;
        int64_t started = wall_ms();
        jobs_enter(r);
        _cleanup_free_ char *text = NULL, *error = NULL;
        char line[128] = "";
        int k;
        if (!r->c.organism) {
                k = -ENODEV;
                error = strdup("the organism is not running");
        } else {
                _cleanup_json_ json_t *h = json_pack("{s:s}", ROUTINES_JOB_TOKEN_HEADER, r->job_token);
                struct organism_http_request req = {.method = e->method, .path = e->path, .headers = h,
                                                    .body = streq(e->method, "GET") ? NULL : "",
                                                    .timeout_ms = r->c.job_timeout_ms};
                k = h ? organism_http(organism_socket(r->c.organism), &req, &text, &error) : -ENOMEM;
                if (k >= 0) {
                        int code = status_of(text, line, sizeof line);
                        if (code < 200 || code > 299) {
                                k = -EIO;
                                (void)xasprintf(&error, "%s %s answered %s", e->method, e->path, line);
                        }
                }
        }
        jobs_leave(r);
        if (k >= 0) {
                e->failures = 0;
                record_run(r, e, started, "ok", line, NULL);
                return 0;
        }
        unsigned n = ++e->failures;
        const char *why = error ? error : strerror(-k);
        record_run(r, e, started, "failed", line[0] ? line : NULL, why);
        if (r->c.on_job_failure)
                r->c.on_job_failure(r->c.userdata, e->id, why, n);
        if (ret_error)
                *ret_error = strdup(why);
        return k;
}

/* ---- loading ---- */

static int load_routines(struct routines *r) {
        _cleanup_free_ char *rows = NULL;
        int k = db_query_json(r->c.kdb,
                              "SELECT id::text AS id, name, schedule, tz, paused, created_at FROM routines ORDER BY routines.id",
                              0, NULL, &rows);
        if (k < 0)
                return log_error_errno(k, "cannot read the routines: %m");
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o) {
                (void)entry_add(r, ROUTINES_ROUTINE, json_string_value(json_object_get(o, "id")),
                                json_string_value(json_object_get(o, "name")),
                                json_string_value(json_object_get(o, "schedule")),
                                json_string_value(json_object_get(o, "tz")),
                                json_is_true(json_object_get(o, "paused")),
                                json_integer_value(json_object_get(o, "created_at")) / 1000, NULL, NULL);
        }
        return 0;
}

static int load_jobs(struct routines *r) {
        _cleanup_free_ char *rows = NULL;
        int k = db_query_json(r->c.kdb, "SELECT name, method, path, schedule, tz, paused, synced_at FROM routine_jobs",
                              0, NULL, &rows);
        if (k < 0)
                return log_error_errno(k, "cannot read the jobs: %m");
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o) {
                const char *name = json_string_value(json_object_get(o, "name"));
                (void)entry_add(r, ROUTINES_JOB, name, name, json_string_value(json_object_get(o, "schedule")),
                                json_string_value(json_object_get(o, "tz")), json_is_true(json_object_get(o, "paused")),
                                json_integer_value(json_object_get(o, "synced_at")) / 1000,
                                json_string_value(json_object_get(o, "method")),
                                json_string_value(json_object_get(o, "path")));
        }
        return 0;
}

int routines_new(const struct routines_config *cfg, struct routines **ret) {
        if (!cfg || !cfg->kdb || !cfg->sched || !cfg->cfg || strempty(cfg->seed_dir) || strempty(cfg->job_token) ||
            cfg->job_timeout_ms < 0 || cfg->routine_timeout_ms < 0)
                return -EINVAL;
        struct routines *r = calloc(1, sizeof *r);
        if (!r)
                return -ENOMEM;
        r->c = *cfg;
        if (!(r->seed_dir = strdup(cfg->seed_dir)) || !(r->job_token = strdup(cfg->job_token))) {
                free(r->seed_dir);
                free(r);
                return -ENOMEM;
        }
        r->c.seed_dir = r->seed_dir;
        r->c.job_token = NULL; /* only r->job_token */
        if (!r->c.job_timeout_ms)
                r->c.job_timeout_ms = ROUTINES_JOB_TIMEOUT_MS;
        if (!r->c.routine_timeout_ms)
                r->c.routine_timeout_ms = ROUTINES_RUN_TIMEOUT_MS;
        pthread_mutex_init(&r->lock, NULL);
        pthread_mutex_init(&r->routine_run, NULL);
        pthread_mutex_init(&r->jobs_lock, NULL);
        pthread_cond_init(&r->jobs_cond, NULL);
        atomic_init(&r->cancel, false);
        build_tool_set(r);
        int k = load_routines(r);
        if (k >= 0)
                k = load_jobs(r);
        if (k < 0) {
                routines_free(r);
                return k;
        }
        *ret = r;
        return 0;
}

void routines_free(struct routines *r) {
        if (!r)
                return;
        atomic_store(&r->cancel, true);
        for (;;) {
                pthread_mutex_lock(&r->lock);
                struct entry *e = r->entries;
                pthread_mutex_unlock(&r->lock);
                if (!e)
                        break;
                entry_remove(r, e);
        }
        pthread_mutex_destroy(&r->lock);
        pthread_mutex_destroy(&r->routine_run);
        pthread_mutex_destroy(&r->jobs_lock);
        pthread_cond_destroy(&r->jobs_cond);
        if (r->job_token)
                secure_zero(r->job_token, strlen(r->job_token));
        free(r->job_token);
        free(r->jobs_error);
        free(r->seed_dir);
        free(r);
}

/* ---- routines ---- */

/* Returns r, with *ret_error (when asked for) saying why. */
static int _printf_(3, 4) refuse(char **ret_error, int r, const char *fmt, ...) {
        if (!ret_error)
                return r;
        va_list ap;
        va_start(ap, fmt);
        int k = xvasprintf(ret_error, fmt, ap);
        va_end(ap);
        return k < 0 ? -ENOMEM : r;
}

int routines_check(struct routines *r, const char *name, const char *prompt, const char *schedule, const char *tz,
                   char **ret_error) {
        if (!r)
                return -EINVAL;
        const char *zone = strempty(tz) ? "UTC" : tz;
        if (!routines_name_valid(name))
                return refuse(ret_error, -EINVAL, "the name must be 1 to %d of a-z, 0-9, '-' and '_', starting with a "
                                            "letter or digit", ROUTINES_NAME_MAX);
        if (strempty(prompt) || strlen(prompt) > ROUTINES_PROMPT_MAX)
                return refuse(ret_error, -EINVAL, "the prompt must be 1 to %d bytes", ROUTINES_PROMPT_MAX);
        if (!streq(zone, "UTC") && !sched_tz_name_valid(zone))
                return refuse(ret_error, -EINVAL, "the time zone is not a valid name");
        int k = routines_schedule_check(schedule, zone, true, wall_ms() / 1000, ret_error);
        if (k < 0)
                return k;
        _cleanup_free_ char *count = NULL, *named = NULL;
        const char *q[] = {name};
        if ((k = db_query_value(r->c.kdb, "SELECT count(*)::text FROM routines", 0, NULL, &count)) < 0 ||
            (k = db_query_value(r->c.kdb, "SELECT count(*)::text FROM routines WHERE name = $1", 1, q, &named)) < 0)
                return log_error_errno(k, "cannot read the routines: %m");
        if (atoi(named) > 0)
                return refuse(ret_error, -EEXIST, "a routine named '%s' exists already", name);
        if (atoi(count) >= ROUTINES_MAX)
                return refuse(ret_error, -E2BIG, "there are %d routines already, the most there can be: delete one first",
                                 ROUTINES_MAX);
        return 0;
}

int routines_create(struct routines *r, const char *name, const char *prompt, const char *schedule,
                    const char *tz, const char *approval_id, char **ret_id, char **ret_error) {
        if (!r || !ret_id)
                return -EINVAL;
        const char *zone = strempty(tz) ? "UTC" : tz;
        int k = routines_check(r, name, prompt, schedule, zone, ret_error);
        if (k < 0)
                return k;
        char at[32], max[16];
        snprintf(at, sizeof at, "%lld", (long long)wall_ms());
        snprintf(max, sizeof max, "%d", ROUTINES_MAX);
        const char *p[] = {name, prompt, schedule, zone, approval_id, at, max};
        _cleanup_free_ char *id = NULL;
        /* The cap and the name are checked by the insert itself, so two
         * approvals at once cannot make 21. */
        pthread_mutex_lock(&r->lock);
        k = db_query_value(r->c.kdb,
                           "INSERT INTO routines (name, prompt, schedule, tz, approval_id, created_at) "
                           "SELECT $1, $2, $3, $4, $5, $6::bigint WHERE (SELECT count(*) FROM routines) < $7::int "
                           "AND NOT EXISTS (SELECT 1 FROM routines WHERE name = $1) RETURNING id::text",
                           7, p, &id);
        pthread_mutex_unlock(&r->lock);
        if (k < 0 && k != -ENOENT)
                return log_error_errno(k, "cannot store the routine '%s': %m", name);
        if (k == -ENOENT) { /* another was made meanwhile: the name or the cap */
                _cleanup_free_ char *exists = NULL;
                const char *q[] = {name};
                if (db_query_value(r->c.kdb, "SELECT id::text FROM routines WHERE name = $1", 1, q, &exists) >= 0)
                        return refuse(ret_error, -EEXIST, "a routine named '%s' exists already", name);
                return refuse(ret_error, -E2BIG, "there are %d routines already, the most there can be: delete one first",
                                 ROUTINES_MAX);
        }
        if ((k = entry_add(r, ROUTINES_ROUTINE, id, name, schedule, zone, false, wall_ms() / 1000, NULL, NULL)) < 0) {
                const char *q[] = {id};
                (void)db_execp(r->c.kdb, "DELETE FROM routines WHERE id = $1::bigint", 1, q, NULL);
                return k;
        }
        log_info("routine %s ('%s', %s %s) created", id, name, schedule, zone);
        *ret_id = TAKE_PTR(id);
        return 0;
}

int routines_kind_parse(const char *s, enum routines_kind *ret) {
        if ((s && streq(s, "routine")))
                *ret = ROUTINES_ROUTINE;
        else if ((s && streq(s, "job")))
                *ret = ROUTINES_JOB;
        else
                return -EINVAL;
        return 0;
}

/* Whether each entry runs now, and its scheduler name, as {"<sched name>": bool}. */
static json_t *running_map(struct routines *r) {
        json_t *m = json_object();
        pthread_mutex_lock(&r->lock);
        for (struct entry *e = r->entries; m && e; e = e->next)
                json_object_set_new(m, e->sched_name, json_boolean(sched_running(r->c.sched, e->sched_name)));
        pthread_mutex_unlock(&r->lock);
        return m;
}

static int add_running(json_t *arr, json_t *running, const char *prefix, const char *key) {
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o) {
                char n[ROUTINES_NAME_MAX + 32];
                snprintf(n, sizeof n, "%s.%s", prefix, json_string_value(json_object_get(o, key)) ?: "");
                if (json_object_set_new(o, "running", json_boolean(json_is_true(json_object_get(running, n)))) < 0)
                        return -ENOMEM;
        }
        return 0;
}

#define LAST_RUN(where)                                                                                            \
        "(SELECT row_to_json(x) FROM (SELECT started_at, ended_at, outcome, text, error FROM routine_runs rr "    \
        "WHERE " where " ORDER BY rr.id DESC LIMIT 1) x) AS last_run"

int routines_list_json(struct routines *r, char **ret_json) {
        _cleanup_free_ char *routines = NULL, *jobs = NULL;
        int k = db_query_json(r->c.kdb,
                              "SELECT id::text AS id, name, prompt, schedule, tz, paused, created_at, " LAST_RUN(
                                      "rr.routine_id = routines.id") " FROM routines ORDER BY routines.id",
                              0, NULL, &routines);
        if (k >= 0)
                k = db_query_json(r->c.kdb,
                                  "SELECT name, method, path, schedule, tz, paused, " LAST_RUN(
                                          "rr.job_name = routine_jobs.name") " FROM routine_jobs ORDER BY name",
                                  0, NULL, &jobs);
        if (k < 0)
                return k;
        _cleanup_json_ json_t *running = running_map(r);
        json_t *ra = json_loads(routines, 0, NULL), *ja = json_loads(jobs, 0, NULL);
        pthread_mutex_lock(&r->lock);
        json_t *err = r->jobs_error ? json_string(r->jobs_error) : json_null();
        pthread_mutex_unlock(&r->lock);
        _cleanup_json_ json_t *o = json_pack("{s:o?, s:o?, s:o?, s:i}", "routines", ra, "jobs", ja, "jobs_error", err,
                                             "max", ROUTINES_MAX);
        if (!o || !running || add_running(ra, running, "routine", "id") < 0 ||
            add_running(ja, running, "job", "name") < 0)
                return -ENOMEM;
        char *s = json_dumps(o, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

int routines_runs_json(struct routines *r, enum routines_kind kind, const char *id, char **ret_json) {
        pthread_mutex_lock(&r->lock);
        bool known = entry_find(r, kind, id) != NULL;
        pthread_mutex_unlock(&r->lock);
        if (!known)
                return -ENOENT;
        const char *p[] = {id};
        return db_query_json(r->c.kdb,
                             kind == ROUTINES_ROUTINE
                                     ? "SELECT id::text AS id, started_at, ended_at, outcome, text, error FROM "
                                       "routine_runs WHERE routine_id = $1::bigint ORDER BY routine_runs.id DESC LIMIT 100"
                                     : "SELECT id::text AS id, started_at, ended_at, outcome, text, error FROM "
                                       "routine_runs WHERE job_name = $1 ORDER BY routine_runs.id DESC LIMIT 100",
                             1, p, ret_json);
}

int routines_set_paused(struct routines *r, enum routines_kind kind, const char *id, bool paused) {
        pthread_mutex_lock(&r->lock);
        struct entry *e = entry_find(r, kind, id);
        if (e) {
                atomic_store(&e->paused, paused);
                if (!paused)
                        atomic_store(&e->since_s, wall_ms() / 1000);
        }
        pthread_mutex_unlock(&r->lock);
        if (!e)
                return -ENOENT;
        const char *p[] = {id, paused ? "true" : "false"};
        int k = db_execp(r->c.kdb,
                         kind == ROUTINES_ROUTINE ? "UPDATE routines SET paused = $2::boolean WHERE id = $1::bigint"
                                                  : "UPDATE routine_jobs SET paused = $2::boolean WHERE name = $1",
                         2, p, NULL);
        if (k < 0)
                return log_error_errno(k, "cannot keep that %s is %s: %m", id, paused ? "paused" : "resumed");
        sched_wake(r->c.sched);
        log_info("%s %s %s", kind == ROUTINES_ROUTINE ? "routine" : "job", id, paused ? "paused" : "resumed");
        return 0;
}

int routines_run_now(struct routines *r, enum routines_kind kind, const char *id) {
        _cleanup_free_ char *name = NULL;
        pthread_mutex_lock(&r->lock);
        struct entry *e = entry_find(r, kind, id);
        if (e)
                name = strdup(e->sched_name);
        pthread_mutex_unlock(&r->lock);
        if (!e)
                return -ENOENT;
        if (!name)
                return -ENOMEM;
        return sched_run_now(r->c.sched, name);
}

int routines_delete(struct routines *r, enum routines_kind kind, const char *id) {
        if (kind == ROUTINES_JOB)
                return -EPERM;
        pthread_mutex_lock(&r->lock);
        struct entry *e = entry_find(r, kind, id);
        pthread_mutex_unlock(&r->lock);
        if (!e)
                return -ENOENT;
        entry_remove(r, e);
        const char *p[] = {id};
        int k = db_execp(r->c.kdb, "DELETE FROM routines WHERE id = $1::bigint", 1, p, NULL);
        if (k < 0)
                return log_error_errno(k, "cannot delete routine %s: %m", id);
        log_info("routine %s deleted", id);
        return 0;
}

/* ---- jobs from organism/routines.yaml ---- */

static void set_jobs_error(struct routines *r, char *error) {
        pthread_mutex_lock(&r->lock);
        free(r->jobs_error);
        r->jobs_error = error;
        pthread_mutex_unlock(&r->lock);
}

/* Whether entry e is job j as declared. */
static bool job_same(const struct entry *e, const struct routines_job *j) {
        return streq(e->method, j->method) && streq(e->path, j->path) && streq(e->schedule, j->schedule) &&
               streq(e->tz, j->tz);
}

/* A new or changed job, declared now (its pause is kept). */
static int job_store(struct routines *r, const struct routines_job *j) {
        char at[32];
        snprintf(at, sizeof at, "%lld", (long long)wall_ms());
        const char *p[] = {j->name, j->method, j->path, j->schedule, j->tz, at};
        return db_execp(r->c.kdb,
                        "INSERT INTO routine_jobs (name, method, path, schedule, tz, synced_at) "
                        "VALUES ($1, $2, $3, $4, $5, $6::bigint) ON CONFLICT (name) DO UPDATE SET method = $2, "
                        "path = $3, schedule = $4, tz = $5, synced_at = $6::bigint",
                        6, p, NULL);
}

int routines_jobs_sync(struct routines *r, const char *workspace) {
        _cleanup_close_ int root = -1;
        _cleanup_free_ char *text = NULL, *err = NULL;
        size_t len = 0, n = 0;
        struct routines_job *jobs = NULL;
        int k = fsx_open_root(workspace, &root);
        if (k >= 0) {
                k = fsx_read(root, ROUTINES_JOBS_FILE, ROUTINES_JOBS_FILE_MAX, &text, &len, &err);
                if (k == -ENOENT) {
                        k = 0; /* no file: no jobs */
                        len = 0;
                        free(TAKE_PTR(text));
                } else if (k < 0 && !err) {
                        (void)xasprintf(&err, "%s: cannot read: %s", ROUTINES_JOBS_FILE, strerror(-k));
                }
        }
        if (k >= 0)
                k = routines_jobs_parse(text, len, wall_ms() / 1000, &jobs, &n, &err);
        if (k < 0) {
                log_error("the organism's jobs are not synced (the ones before are kept): %s", err ? err : strerror(-k));
                set_jobs_error(r, TAKE_PTR(err));
                return -EINVAL;
        }
        set_jobs_error(r, NULL);
        /* Gone or changed: removed; new or changed: added. */
        for (;;) {
                struct entry *drop = NULL;
                pthread_mutex_lock(&r->lock);
                for (struct entry *e = r->entries; e && !drop; e = e->next) {
                        if (e->kind != ROUTINES_JOB)
                                continue;
                        size_t i = 0;
                        while (i < n && !streq(jobs[i].name, e->id))
                                i++;
                        if (i == n || !job_same(e, &jobs[i]))
                                drop = e;
                }
                pthread_mutex_unlock(&r->lock);
                if (!drop)
                        break;
                entry_remove(r, drop);
        }
        for (size_t i = 0; i < n; i++) {
                pthread_mutex_lock(&r->lock);
                bool have = entry_find(r, ROUTINES_JOB, jobs[i].name) != NULL;
                pthread_mutex_unlock(&r->lock);
                if (have)
                        continue; /* unchanged: its schedule and pause go on */
                _cleanup_free_ char *paused = NULL;
                const char *q[] = {jobs[i].name};
                if ((k = job_store(r, &jobs[i])) < 0 ||
                    (k = db_query_value(r->c.kdb, "SELECT paused::text FROM routine_jobs WHERE name = $1", 1, q,
                                        &paused)) < 0 ||
                    (k = entry_add(r, ROUTINES_JOB, jobs[i].name, jobs[i].name, jobs[i].schedule, jobs[i].tz,
                                   (paused && streq(paused, "true")), wall_ms() / 1000, jobs[i].method, jobs[i].path)) < 0)
                        log_error_errno(k, "job %s cannot be kept: %m", jobs[i].name);
        }
        /* Jobs no longer declared go with their runs. */
        json_t *names = json_array();
        for (size_t i = 0; names && i < n; i++)
                json_array_append_new(names, json_string(jobs[i].name));
        _cleanup_free_ char *list = names ? json_dumps(names, JSON_COMPACT) : NULL;
        json_decref(names);
        const char *p[] = {list ? list : "[]"};
        (void)db_execp(r->c.kdb,
                       "DELETE FROM routine_jobs WHERE name NOT IN (SELECT jsonb_array_elements_text($1::jsonb))", 1,
                       p, NULL);
        log_info("the organism's jobs are synced: %zu", n);
        routines_jobs_free(jobs, n);
        return 0;
}
