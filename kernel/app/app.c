#include "app/app.h"
#include "base/buf.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "config/config.h"
#include "ctl/ctl.h"
#include "ask/drafts.h"
#include "db/db.h"
#include "api/api.h"
#include "backups/backups.h"
#include "evolution/orchestrator.h"
#include "evolution/owner.h"
#include "live/live.h"
#include "mind/mind.h"
#include "model/model.h"
#include "organism/extensions.h"
#include "organism/organism.h"
#include "pg/pg.h"
#include "pg/watch.h"
#include "repo/repo.h"
#include "routines/routines.h"
#include "schedule/schedule.h"
#include "egress/egress.h"
#include "outbound/outbound.h"
#include "sandbox/sandbox.h"
#include "secrets/secrets.h"
#include "spend/spend.h"
#include "health/health.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* What the status shows depends on, each read before what it shows: while
 * all are the same, so is the status (app_status_json). Every part is a
 * counter of changes its module bumps with each change it would show (under
 * the lock that change takes), or the value itself. */
struct app_status_key {
        uint64_t refs, mind, pg, sched, owner;
        int organism;            /* its state, -1 without one */
        int64_t uptime_s;
        char *screens;           /* extensions.json's line, or NULL; owned */
};

struct app {
        const struct app_options *opts;
        struct cfg *cfg;
        struct secrets *secrets;
        struct pg *pg;
        struct pg_watch *pg_watch; /* restarts the private PostgreSQL should it die */
        struct db *kdb;
        struct egress *egress;   /* every sandbox's way out */
        struct outbound *outbound; /* the owner's grants, the organism's secrets, the registries */
        struct organism *organism;
        struct live *live;       /* the chat's way to the live data and app (kernel/live) */
        struct ask_drafts *drafts; /* point and ask's pictures: ctl takes them, the API sends them */
        struct mind *mind;       /* the model the Seed thinks with (kernel/mind) */
        struct spend *spend;     /* what its calls cost, the monthly budget (kernel/spend) */
        struct orchestrator *orch;
        struct api *api;         /* the /_seed/api routes (kernel/api) and their event stream */
        struct backups *backups; /* the owner's backups of the live data (kernel/backups) */
        struct scheduler *sched; /* the kernel's periodic work (kernel/schedule) */
        struct routines *routines; /* routines and the organism's jobs (kernel/routines) */
        char *job_token;         /* the organism's jobs' token (.seed/secrets/job-token) */
        pthread_mutex_t sync_lock;
        pthread_mutex_t sched_lock; /* a->sched for the organism's thread (app_note_sync) */
        char *sync_workspace;    /* the live workspace whose routines.yaml is to be synced, or NULL */
        /* The doctor's incidents (kernel/health). The organism's, the
         * proxy's and the scheduler's reports reach it under health_lock,
         * so it is never freed under a report. */
        struct health *health;
        pthread_mutex_t health_lock;
        atomic_bool restart;     /* an applied generation changed the kernel: exit 75 */
        struct ctl *ctl;
        struct ctl_listen listen;  /* the supervisor's sockets until ctl_start took them */
        char *control_token;
        char *session_key;
        char *live_url;
        char *doctor;            /* why sandboxes cannot run here, or NULL */
        int64_t started_ms;
        pid_t pid;               /* ours, for the status (no syscall per request) */
        int generation;
        struct fswatch watch;        /* the refs' and extensions.json's watches */
        struct repo_refs_cache refs; /* what the status needs of the repository */
        struct organism_ext_cache ext; /* what the status says of extensions.json */
        struct app_status_cache {
                atomic_bool on;          /* set once the start is over */
                pthread_mutex_t lock;    /* key and json */
                struct app_status_key key;
                char *json;              /* the status for key, or NULL */
        } status;
};

static char *seed_path(const struct app *a, const char *rel) { return path_join(a->opts->seed_dir, rel); }

static int app_prepare_dirs(struct app *a) {
        static const struct {
                const char *path;
                mode_t mode;
        } dirs[] = {
                {".seed", 0700},         {".seed/logs", 0700},  {".seed/run", 0700},
                {".seed/secrets", 0700}, {".seed/cache", 0700}, {".seed/organism", 0700},
        };
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                _cleanup_free_ char *p = seed_path(a, dirs[i].path);
                if (!p)
                        return -ENOMEM;
                int r = mkdir_mode(p, dirs[i].mode);
                if (r < 0)
                        return log_error_errno(r, "cannot create '%s': %m", p);
        }
        return 0;
}

/* A secret of this Seed kept across restarts in .seed/secrets (0600). */
static int app_load_key(struct app *a, const char *name, char **ret) {
        _cleanup_free_ char *p = NULL;
        if (xasprintf(&p, "%s/.seed/secrets/%s", a->opts->seed_dir, name) < 0)
                return -ENOMEM;
        char *v = NULL;
        int r = read_file(p, 4096, &v, NULL);
        if (r == 0 && strlen(v) >= 32) {
                *ret = v;
                return 0;
        }
        free(v);
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "cannot read '%s': %m", p);
        if ((r = crypto_random_hex(32, &v)) < 0 || (r = write_file_atomic(p, v, strlen(v), 0600)) < 0) {
                free(v);
                return log_error_errno(r, "cannot write '%s': %m", p);
        }
        *ret = v;
        return 0;
}

#define APP_URL_MAX 300

/* The control plane's base URL, e.g. "http://127.0.0.1:8080": the one place
 * that names it (kernel.json, hence every printed address and sign-in link,
 * and the status). A loopback address is served on 127.0.0.1 and [::1]
 * (ctl/listen.h); a wildcard one is named by its family's loopback. */
static int app_base_url(const struct app *a, char *buf, size_t size) {
        _cleanup_free_ char *host = NULL;
        int port = 0;
        int r = cfg_split_addr(a->opts->addr ? a->opts->addr : a->cfg->server.addr, &host, &port);
        if (r < 0)
                return r;
        const char *name = streq(host, "0.0.0.0") ? "127.0.0.1" : streq(host, "::") ? "::1" : host;
        bool v6 = strchr(name, ':') != NULL;
        int n = snprintf(buf, size, "http://%s%s%s:%u", v6 ? "[" : "", name, v6 ? "]" : "",
                         a->ctl ? ctl_port(a->ctl) : 0);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* What the owner opens: the control plane's own origin
 * ("http://seed.localhost:8080/_seed/"), or in the same-origin fallback the
 * address the kernel listens on. A control host that is not a localhost name
 * is reached through a proxy in front, on its own port. */
static void app_control_url(const struct app *a, unsigned port, char *out, size_t n) {
        const char *h = a->cfg->server.control_host;
        char base[APP_URL_MAX];
        if (!*h)
                snprintf(out, n, "%s/_seed/", app_base_url(a, base, sizeof base) == 0 ? base : "http://127.0.0.1");
        else if (streq(h, "localhost") || endswith(h, ".localhost"))
                snprintf(out, n, "http://%s:%u/_seed/", h, port);
        else
                snprintf(out, n, "http://%s/_seed/", h);
}

static void app_status_key_done(struct app_status_key *k) {
        free(k->screens);
        *k = (struct app_status_key){0};
}

static int app_status_key_now(struct app *a, struct app_status_key *ret) {
        uint64_t changes = fswatch_changes(&a->watch); /* one poll for both caches */
        struct app_status_key k = {
                .refs = repo_refs_cache_version(&a->refs, changes),
                .mind = mind_status_version(a->mind),
                .pg = pg_watch_version(a->pg_watch),
                .sched = sched_status_version(a->sched),
                .owner = orch_owner_change_version(a->orch),
                .organism = a->organism ? (int)organism_state(a->organism) : -1,
                .uptime_s = (now_ms() - a->started_ms) / 1000,
        };
        if (organism_ext_cache_status(&a->ext, changes, &k.screens) < 0)
                return -ENOMEM;
        *ret = k;
        return 0;
}

static bool same_text(const char *x, const char *y) {
        return x == y || (x && y && streq(x, y));
}

static bool app_status_key_eq(const struct app_status_key *x, const struct app_status_key *y) {
        return x->refs == y->refs && x->mind == y->mind && x->pg == y->pg && x->sched == y->sched &&
               x->owner == y->owner && x->organism == y->organism && x->uptime_s == y->uptime_s &&
               same_text(x->screens, y->screens);
}

/* The status for key k (read just before). *ret_whole is false when a part
 * was left out (out of memory, the repository not read): such a status is
 * not kept. */
static int app_status_build(struct app *a, const struct app_status_key *k, char **ret_json, bool *ret_whole) {
        bool whole = true;
        /* From the refs cache: the repository is read again only when its
         * refs moved (a new generation, the owner's commits) or a second
         * passed. Where main stands carries the live generation too. */
        _cleanup_(repo_owner_change_done) struct repo_owner_change oc = {0};
        bool have_oc = repo_refs_cache_owner_change(&a->refs, &oc) >= 0;
        int gen = have_oc ? oc.generation : 0;
        if (!have_oc && repo_refs_cache_generation(&a->refs, &gen) < 0)
                gen = a->generation;
        _cleanup_json_ json_t *o = json_pack("{s:s, s:i, s:s, s:{s:s}, s:{s:i, s:I, s:s}}",
                              "name", a->cfg->name,
                              "generation", gen,
                              "url", "",
                              "organism", "state",
                              k->organism >= 0 ? organism_state_name(k->organism) : a->doctor ? "down" : "stopped",
                              "kernel", "pid", (int)a->pid, "uptime_seconds", (json_int_t)k->uptime_s,
                              "version", "0.1.0");
        if (!o)
                return -ENOMEM;
        char url[APP_URL_MAX + 1], control[APP_URL_MAX + 16];
        if (app_base_url(a, url, sizeof url - 1) == 0)
                json_object_set_new(o, "url", json_string(strcat(url, "/")));
        app_control_url(a, a->ctl ? ctl_port(a->ctl) : 0, control, sizeof control);
        json_object_set_new(o, "control_url", json_string(control));
        json_t *mind = NULL;
        if (a->mind && mind_status_json(a->mind, false, &mind) < 0)
                whole = false;
        else if (mind)
                json_object_set_new(o, "mind", mind);
        if (a->doctor)
                json_object_set_new(o, "doctor", json_string(a->doctor));
        /* Which PostgreSQL, never where: the URL may hold a password. */
        if (a->pg)
                json_object_set_new(o, "database", json_string(pg_is_external(a->pg) ? "external" : "private"));
        /* The organism's admin screens, and what of them was refused. */
        if (k->screens)
                json_object_set_new(o, "admin_screens", json_string(k->screens));
        /* The private PostgreSQL: up or down, and the last time it died. */
        json_t *pgw = NULL;
        if (a->pg_watch && !pg_is_external(a->pg) && pg_watch_json(a->pg_watch, &pgw) < 0)
                whole = false;
        else if (pgw)
                json_object_set_new(o, "postgres", pgw);
        /* The kernel's periodic work: each job's last run and when it is due. */
        json_t *jobs = NULL;
        if (a->sched && sched_status_json(a->sched, &jobs) < 0)
                whole = false;
        else if (jobs)
                json_object_set_new(o, "jobs", jobs);
        /* The owner's commits on main that are not a generation (yet). */
        json_t *owner = NULL;
        if (have_oc && a->orch && orch_owner_change_json(a->orch, &oc, &owner) < 0)
                whole = false;
        else if (owner)
                json_object_set_new(o, "owner_change", owner);
        char *s = json_dumps(o, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        *ret_whole = whole && have_oc;
        return 0;
}

/* The control plane asks for the status on every poll of every open page
 * and `seed status`: it is built again only when its key changed (at least
 * once a second, for the uptime), from the end of the start on (before it,
 * what the key does not cover is still being set up: the control plane's
 * port, the wiped password). */
static int app_status_json(void *userdata, char **ret_json) {
        struct app *a = userdata;
        struct app_status_cache *c = &a->status;
        _cleanup_(app_status_key_done) struct app_status_key k = {0};
        int r = app_status_key_now(a, &k);
        if (r < 0)
                return r;
        bool on = atomic_load(&c->on);
        if (on) {
                char *kept = NULL;
                pthread_mutex_lock(&c->lock);
                bool hit = c->json && app_status_key_eq(&c->key, &k);
                if (hit)
                        kept = strdup(c->json);
                pthread_mutex_unlock(&c->lock);
                if (hit && !kept)
                        return -ENOMEM;
                if (hit) {
                        *ret_json = kept;
                        return 0;
                }
        }
        _cleanup_free_ char *json = NULL;
        bool whole = false;
        if ((r = app_status_build(a, &k, &json, &whole)) < 0)
                return r;
        char *copy = on && whole ? strdup(json) : NULL;
        if (copy) {
                pthread_mutex_lock(&c->lock);
                free(c->json);
                app_status_key_done(&c->key);
                c->json = copy;
                c->key = k;
                k = (struct app_status_key){0}; /* the cache owns its line now */
                pthread_mutex_unlock(&c->lock);
        }
        *ret_json = TAKE_PTR(json);
        return 0;
}

static int app_write_state(struct app *a) {
        _cleanup_free_ char *p = seed_path(a, APP_STATE_FILE);
        _cleanup_free_ char *tok = seed_path(a, APP_CONTROL_TOKEN_FILE);
        if (!p || !tok)
                return -ENOMEM;
        int r = write_file_atomic(tok, a->control_token, strlen(a->control_token), 0600);
        if (r < 0)
                return log_error_errno(r, "cannot write '%s': %m", tok);
        char url[APP_URL_MAX], control[APP_URL_MAX + 16], hosthdr[APP_URL_MAX] = "";
        if ((r = app_base_url(a, url, sizeof url)) < 0)
                return log_error_errno(r, "cannot name the control plane's address: %m");
        app_control_url(a, ctl_port(a->ctl), control, sizeof control);
        if (*a->cfg->server.control_host)
                snprintf(hosthdr, sizeof hosthdr, "%s:%u", a->cfg->server.control_host, ctl_port(a->ctl));
        _cleanup_json_ json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:i, s:I, s:s}", "pid", (int)getpid(), "url", url,
                              "host", hosthdr, "control_url", control, "port", (int)ctl_port(a->ctl), "started_at",
                              (json_int_t)(wall_ms() / 1000), "addr",
                              a->opts->addr ? a->opts->addr : a->cfg->server.addr);
        char *s = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
        if (!s)
                return -ENOMEM;
        r = write_file_atomic(p, s, strlen(s), 0644);
        free(s);
        if (r < 0)
                return log_error_errno(r, "cannot write '%s': %m", p);
        log_info("control plane at %s", control);
        return 0;
}

/* The Seed's PostgreSQL: its own private server, or for hosting an external
 * one (database.url, or SEED_DATABASE_URL passed as a secret at start, which
 * may hold the password; SEED_DATABASE_PASSWORD overrides it). Either way
 * the kernel's memory, the live database and the scratch databases are
 * there, with the same roles; the URL is never logged. */
static int app_start_database(struct app *a) {
        int r;
        const char *url = secrets_get(a->secrets, "SEED_DATABASE_URL");
        if (strempty(url))
                url = a->cfg->database.url;
        if (strempty(url)) {
                if ((r = pg_start(a->opts->seed_dir, &a->pg)) < 0)
                        return log_error_errno(r, "the private PostgreSQL did not start");
        } else {
                struct pg_external x = {.seed_dir = a->opts->seed_dir, .url = url, .name = a->cfg->name,
                                        .password = secrets_get(a->secrets, "SEED_DATABASE_PASSWORD")};
                if (x.password && !*x.password)
                        x.password = NULL;
                if ((r = pg_start_external(&x, &a->pg)) < 0)
                        return log_error_errno(r, "the external PostgreSQL cannot be used");
        }
        _cleanup_free_ char *conninfo = NULL;
        if ((r = pg_conninfo(a->pg, "postgres", PG_KERNEL_DB, &conninfo)) < 0 ||
            (r = pg_sandbox_url(a->pg, "organism", PG_LIVE_DB, &a->live_url)) < 0)
                return log_error_errno(r, "cannot build database addresses: %m");
        r = db_connect_wait(conninfo, 30000, &a->kdb);
        secure_zero(conninfo, strlen(conninfo));
        if (r < 0)
                return log_error_errno(r, "cannot connect to the kernel database");
        return pg_watch_start(a->pg, &a->pg_watch);
}

/* The egress proxy: every sandbox's only way out. */
static int app_start_egress(struct app *a) {
        int r = egress_new(&(struct egress_config){0}, &a->egress);
        if (r < 0)
                return log_error_errno(r, "the egress proxy did not start: %m");
        return 0;
}

/* The organism's jobs' token in its environment, so the app can tell the
 * kernel's job requests (kernel/routines) from anyone else's. */
static int app_job_token_env(struct app *a, char ***env) {
        return strv_pushf(env, "%s=%s", ROUTINES_JOB_TOKEN_ENV, a->job_token) < 0 ? -ENOMEM : 0;
}

/* A grant or revocation changed the live organism's secrets: it restarts
 * with them (the API's, the chat's or the orchestrator's thread). */
static void app_outbound_env(void *userdata) {
        struct app *a = userdata;
        char **env = NULL;
        if (!a->organism)
                return;
        int r = outbound_organism_env(a->outbound, &env);
        if (r >= 0)
                r = app_job_token_env(a, &env);
        if (r >= 0)
                r = organism_set_env(a->organism, env);
        outbound_env_free(env);
        if (r < 0)
                log_error_errno(r, "the live organism did not get its new secrets: %m");
        else
                log_info("the live organism restarts with the secrets granted to it");
}

/* The owner's grants into the proxy, and the registries evolutions may
 * reach, asked of the package clients without delaying the start. */
static int app_start_outbound(struct app *a) {
        struct outbound_config oc = {
                .kdb = a->kdb,
                .egress = a->egress,
                .secrets = a->secrets,
                .cfg = a->cfg,
                .on_env = app_outbound_env,
                .userdata = a,
        };
        int r = outbound_new(&oc, &a->outbound);
        if (r < 0)
                return log_error_errno(r, "the outbound grants cannot be loaded: %m");
        (void)outbound_discover_registries(a->outbound); /* logged there */
        return 0;
}

#define SYNC_JOB "routines.sync"

/* The organism's jobs are synced from the workspace it runs (a deploy, a
 * restart): noted here, on the supervising thread while the workspace
 * cannot change, and done by the scheduler's job SYNC_JOB. */
static void app_note_sync(struct app *a, const char *workspace) {
        char *copy = workspace ? strdup(workspace) : NULL;
        if (!copy)
                return;
        pthread_mutex_lock(&a->sync_lock);
        free(a->sync_workspace);
        a->sync_workspace = copy;
        pthread_mutex_unlock(&a->sync_lock);
        pthread_mutex_lock(&a->sched_lock); /* app_stop cannot free it meanwhile */
        if (a->sched)
                sched_wake(a->sched);
        pthread_mutex_unlock(&a->sched_lock);
}

static int app_sync_due(void *userdata, int64_t last_run_s, int64_t now_s, int64_t *ret_due_s) {
        struct app *a = userdata;
        pthread_mutex_lock(&a->sync_lock);
        *ret_due_s = a->sync_workspace ? now_s : INT64_MAX;
        pthread_mutex_unlock(&a->sync_lock);
        return 0;
}

static int app_sync_run(void *userdata, char **ret_error) {
        struct app *a = userdata;
        struct routines *rt = __atomic_load_n(&a->routines, __ATOMIC_ACQUIRE);
        if (!rt)
                return 0; /* not yet: kept for when routines exist */
        pthread_mutex_lock(&a->sync_lock);
        _cleanup_free_ char *ws = TAKE_PTR(a->sync_workspace);
        pthread_mutex_unlock(&a->sync_lock);
        if (!ws)
                return 0;
        int r = routines_jobs_sync(rt, ws); /* logs its outcome; the error is shown on the Routines screen */
        if (r < 0 && ret_error)
                *ret_error = strdup("organism/routines.yaml is not valid: see the Routines screen");
        return r;
}

/* ---- reports to the doctor (kernel/health) ---- */

/* The organism's state changes, on its supervising thread: a healthy start
 * (a deploy, a restart) syncs its jobs; a crash or giving up is the
 * doctor's. */
static void app_organism_state(void *userdata, enum organism_state state) {
        struct app *a = userdata;
        if (state == ORGANISM_RUNNING && a->organism)
                app_note_sync(a, organism_workspace(a->organism));
        if (state != ORGANISM_CRASHED && state != ORGANISM_DOWN)
                return;
        pthread_mutex_lock(&a->health_lock);
        if (state == ORGANISM_CRASHED)
                health_report_crash(a->health, "the live organism exited or stopped answering its health check; "
                                               "the supervisor restarts it");
        else
                health_report_down(a->health, "the live organism is down: it crashed too often, or its build "
                                              "failed, and is not restarted");
        pthread_mutex_unlock(&a->health_lock);
}

static void app_on_5xx(void *userdata, const char *method, const char *path, int status) {
        struct app *a = userdata;
        pthread_mutex_lock(&a->health_lock);
        health_report_5xx(a->health, method, path, status);
        pthread_mutex_unlock(&a->health_lock);
}

static void app_sched_result(void *userdata, const char *job, int result, const char *error,
                             unsigned consecutive_failures) {
        struct app *a = userdata;
        pthread_mutex_lock(&a->health_lock);
        if (a->health)
                health_sched_result(a->health, job, result, error, consecutive_failures);
        pthread_mutex_unlock(&a->health_lock);
}

static void app_health_publish(void *userdata, const char *kind, const char *json) {
        struct app *a = userdata;
        api_publish(__atomic_load_n(&a->api, __ATOMIC_ACQUIRE), NULL, kind, json);
}

static int app_start_health(struct app *a) {
        if (!a->kdb)
                return 0;
        _cleanup_free_ char *log_path = seed_path(a, ".seed/logs/organism.log");
        /* What the organism may print to its log and no prompt may see: the
         * job token and the secrets passed at start (any may be granted to
         * it). Not the owner's password, which the organism never gets and
         * the control plane wipes (only pointers here: the doctor copies). */
        size_t n = secrets_count(a->secrets);
        _cleanup_free_ const char **redact = calloc(n + 2, sizeof *redact);
        if (!log_path || !redact)
                return -ENOMEM;
        size_t k = 0;
        if (a->job_token)
                redact[k++] = a->job_token;
        for (size_t i = 0; i < n; i++)
                if (!streq(secrets_name(a->secrets, i), "SEED_OWNER_PASSWORD"))
                        redact[k++] = secrets_get(a->secrets, secrets_name(a->secrets, i));
        struct health *h = NULL;
        int r = health_new(&(struct health_config){.seed_dir = a->opts->seed_dir, .kdb = a->kdb, .cfg = a->cfg,
                                                   .mind = a->mind, .spend = a->spend, .live = a->live,
                                                   .organism_log = log_path, .redact = redact,
                                                   .publish = app_health_publish, .userdata = a},
                           &h);
        if (r < 0)
                return log_error_errno(r, "cannot set up the doctor's incidents: %m");
        health_set_orchestrator(h, a->orch);
        pthread_mutex_lock(&a->health_lock);
        a->health = h;
        pthread_mutex_unlock(&a->health_lock);
        return 0;
}

static void app_stop_health(struct app *a) {
        pthread_mutex_lock(&a->health_lock);
        struct health *h = TAKE_PTR(a->health);
        pthread_mutex_unlock(&a->health_lock);
        health_free(h); /* a diagnosis running is cancelled, its thread joined */
}

static int app_start_organism(struct app *a) {
        /* The start-up doctor: without working sandboxes nothing of the
         * model's runs, so say why once, clearly, and keep the control plane up. */
        if (sandbox_check(&a->doctor) < 0) {
                log_error("sandboxes cannot run on this host, so the organism stays down and evolutions are "
                          "refused: %s", a->doctor);
                return 0;
        }
        /* The kernel binds the organism's socket here and hands the bridge the
         * listening fd: no sandbox sees this dir (unlike .seed/run, PostgreSQL's
         * socket dir, which sandboxes see read-only). */
        _cleanup_free_ char *run_dir = seed_path(a, ".seed/organism");
        _cleanup_free_ char *log_path = seed_path(a, ".seed/logs/organism.log");
        _cleanup_free_ char *workspace = NULL;
        if (!run_dir || !log_path || evo_owner_live_workspace(a->opts->seed_dir, &workspace) < 0)
                return -ENOMEM;
        /* The secrets granted to it (only the live organism gets any). */
        _cleanup_(outbound_env_freep) char **env = NULL;
        int r = outbound_organism_env(a->outbound, &env);
        if (r >= 0)
                r = app_job_token_env(a, &env);
        if (r < 0)
                return r;
        struct organism_config oc = {
                .on_state = app_organism_state,
                .userdata = a,
                .seed_dir = a->opts->seed_dir,
                .workspace = workspace, /* the live generation, even with the owner's commits on main */
                .build_cmd = a->cfg->organism.build,
                .run_cmd = a->cfg->organism.run,
                .health_path = a->cfg->organism.health,
                .port = a->cfg->organism.port,
                .database_url = a->live_url,
                .pg_socket_dir = a->pg ? pg_socket_dir(a->pg) : NULL,
                .bridge_path = a->opts->bridge_path,
                .run_dir = run_dir,
                .log_path = log_path,
                .evolvable = NULL, /* the live build writes only organism/ */
                .egress = a->egress,
                .label = "live",
                .extra_env = env,
        };
        r = organism_new(&oc, &a->organism);
        if (r < 0)
                return log_error_errno(r, "cannot set up the organism: %m");
        return organism_start(a->organism);
}

/* Every model call's tokens and cost, by purpose and reference. */
static void app_model_usage(void *userdata, const char *purpose, const char *reference, const char *model,
                            const struct model_usage *u) {
        struct app *a = userdata;
        if (a->spend)
                (void)spend_record(a->spend, wall_ms(), purpose, reference, model, u); /* logs its failure */
}

/* The budget's notice goes to the chat once the API runs. */
static int app_spend_notify(void *userdata, const char *text) {
        struct app *a = userdata;
        return api_kernel_message(__atomic_load_n(&a->api, __ATOMIC_ACQUIRE), text);
}

static int app_create_spend(struct app *a) {
        if (!a->kdb)
                return 0;
        int r = spend_new(&(struct spend_config){.kdb = a->kdb, .prices = a->cfg->spend.prices,
                                                 .notify = app_spend_notify, .userdata = a},
                          &a->spend);
        if (r < 0)
                return log_error_errno(r, "cannot set up the spend accounting: %m");
        return 0;
}

/* The mind: seed.yaml's model or the owner's kept choice, with the start
 * secrets and keys lent later. No key is no error: it says why (and the
 * status, the CLI and the control plane show it). */
static int app_create_mind(struct app *a) {
        int r = mind_new(&(struct mind_config){.cfg = a->cfg, .secrets = a->secrets, .kdb = a->kdb,
                                                .usage_fn = app_model_usage, .usage_userdata = a},
                         &a->mind);
        if (r < 0)
                return log_error_errno(r, "cannot set up the model: %m");
        return 0;
}

static void app_request_restart(void *userdata) {
        struct app *a = userdata;
        atomic_store(&a->restart, true);
        log_info("the kernel changed: restarting into its new source");
        kill(getpid(), SIGTERM);
}

/* The orchestrator's records (a roadmap stage is live) go to the chat. */
static int app_on_record(void *userdata, const char *text) {
        struct app *a = userdata;
        return api_kernel_message(__atomic_load_n(&a->api, __ATOMIC_ACQUIRE), text);
}

/* Every orchestrator event goes to the API's event stream subscribers. */
static void app_on_event(void *userdata, const char *evo_id, const char *kind, const char *json) {
        struct app *a = userdata;
        api_publish(__atomic_load_n(&a->api, __ATOMIC_ACQUIRE), evo_id, kind, json);
}

/* The owner's preview started or ended: only the owner's browser goes there. */
static void app_on_preview(void *userdata, const char *evo_id, int generation, const char *socket_path) {
        struct app *a = userdata;
        ctl_preview_set(__atomic_load_n(&a->ctl, __ATOMIC_ACQUIRE), evo_id, generation, socket_path);
}

static int app_start_orchestrator(struct app *a) {
        if (a->doctor)
                return 0; /* evolutions are refused: the API says why */
        struct orch_config oc = {
                .seed_dir = a->opts->seed_dir,
                .cfg = a->cfg,
                .kdb = a->kdb,
                .pg = a->pg,
                .mind = a->mind,
                .organism = a->organism,
                .bridge_path = a->opts->bridge_path,
                .egress = a->egress,
                .outbound = a->outbound,
                .request_restart = app_request_restart,
                .on_event = app_on_event,
                .on_record = app_on_record,
                .on_preview = app_on_preview,
                .userdata = a,
        };
        int r = orch_start(&oc, &a->orch);
        if (r < 0)
                return log_error_errno(r, "the orchestrator did not start: %m");
        return 0;
}

/* The owner's backups, and the kernel's periodic work: one scheduler, its
 * jobs one table. */
static int app_start_schedule(struct app *a) {
        int r = backups_new(&(struct backups_config){.seed_dir = a->opts->seed_dir, .pg = a->pg,
                                                     .organism = a->organism,
                                                     .migrations = a->cfg->organism.migrations},
                            &a->backups);
        if (r < 0)
                return log_error_errno(r, "cannot set up the backups: %m");
        const struct sched_job jobs[] = {
                {.name = BACKUPS_JOB_DAILY, .next_due = backups_daily_due, .run = backups_daily_run,
                 .userdata = a->backups},
                {.name = SYNC_JOB, .next_due = app_sync_due, .run = app_sync_run, .userdata = a},
                {0},
        };
        struct scheduler *sched = NULL;
        if ((r = sched_new(&(struct sched_config){.kdb = a->kdb, .on_result = app_sched_result, .userdata = a},
                           a->pg ? jobs : jobs + 1, &sched)) < 0)
                return r;
        pthread_mutex_lock(&a->sched_lock); /* the organism's thread may look (app_note_sync) */
        a->sched = sched;
        pthread_mutex_unlock(&a->sched_lock);
        return sched_start(a->sched);
}

/* A routine's report goes to the chat once the API runs. */
static int app_routine_post(void *userdata, const char *routine_name, const char *text) {
        struct app *a = userdata;
        return api_routine_message(__atomic_load_n(&a->api, __ATOMIC_ACQUIRE), routine_name, text);
}

static int app_start_routines(struct app *a) {
        struct routines *rt = NULL;
        int r = routines_new(&(struct routines_config){.seed_dir = a->opts->seed_dir, .cfg = a->cfg, .kdb = a->kdb,
                                                       .sched = a->sched, .mind = a->mind, .spend = a->spend,
                                                       .live = a->live, .outbound = a->outbound,
                                                       .organism = a->organism, .job_token = a->job_token,
                                                       .post = app_routine_post, .userdata = a},
                             &rt);
        if (r < 0)
                return log_error_errno(r, "cannot set up the routines: %m");
        __atomic_store_n(&a->routines, rt, __ATOMIC_RELEASE);
        if (a->organism)
                app_note_sync(a, organism_workspace(a->organism)); /* the live generation's jobs, at boot */
        return 0;
}

static int app_start_ctl(struct app *a) {
        struct api *api = NULL;
        int r = live_new(&(struct live_config){.pg = a->pg, .organism = a->organism}, &a->live);
        if (r < 0)
                return log_error_errno(r, "cannot set up the live data's tools: %m");
        if ((r = app_start_routines(a)) < 0)
                return r;
        r = ask_drafts_new(a->cfg->server.ask_draft_seconds * 1000LL, &a->drafts);
        if (r < 0)
                return log_error_errno(r, "cannot set up point and ask's drafts: %m");
        if ((r = app_start_health(a)) < 0)
                return r;
        r = api_new(&(struct api_config){.seed_dir = a->opts->seed_dir, .kdb = a->kdb, .orch = a->orch,
                                             .refused = a->doctor, .outbound = a->outbound, .live = a->live,
                                             .mind = a->mind, .cfg = a->cfg, .drafts = a->drafts,
                                             .backups = a->backups,
                                             .spend = a->spend, .routines = a->routines,
                                             .health = a->health},
                        &api);
        if (r < 0)
                return log_error_errno(r, "cannot set up the evolution API: %m");
        __atomic_store_n(&a->api, api, __ATOMIC_RELEASE);
        struct ctl_config cc = {
                .addr = a->opts->addr ? a->opts->addr : a->cfg->server.addr,
                .listen = a->listen.n ? &a->listen : NULL,
                .allowed_hosts = a->cfg->server.allowed_hosts,
                .control_host = a->cfg->server.control_host,
                .seed_name = a->cfg->name,
                .seed_dir = a->opts->seed_dir,
                .kdb = a->kdb,
                .cli_token = a->control_token,
                .session_key = a->session_key,
                .owner_user = secrets_get(a->secrets, "SEED_OWNER_USER"),
                .owner_password = secrets_get(a->secrets, "SEED_OWNER_PASSWORD"),
                .trusted_proxies = secrets_get(a->secrets, "SEED_TRUSTED_PROXIES"),
                .organism = a->organism,
                .status = app_status_json,
                .userdata = a,
                .api_routes = api_routes,
                .api_userdata = api,
                .on_5xx = app_on_5xx,
                .on_5xx_userdata = a,
                .refuse_own_addresses = a->opts->in_container,
                .drafts = a->drafts,
        };
        r = ctl_start(&cc, &a->ctl);
        ctl_listen_close(&a->listen); /* the control plane holds its own now */
        /* The control plane keeps only a keyed hash: wipe the plain password. */
        if (secrets_get(a->secrets, "SEED_OWNER_PASSWORD"))
                (void)secrets_set(a->secrets, "SEED_OWNER_PASSWORD", "");
        if (r < 0)
                return log_error_errno(r, "the control plane did not start on %s: %m", cc.addr);
        return 0;
}

static void app_stop(struct app *a) {
        /* The API first (its event streams end, then no handler runs), so no
         * request can reach an orchestrator being stopped. */
        api_shutdown(a->api);
        if (a->ctl)
                ctl_stop(a->ctl);
        ctl_listen_close(&a->listen);
        /* No request runs any more: the jobs' sync goes (sched_remove waits
         * for a sync in progress: it uses the routines), then the routines'
         * jobs (a routine's run stops at its next call), then the scheduler. */
        pthread_mutex_lock(&a->sched_lock);
        struct scheduler *sched = TAKE_PTR(a->sched);
        pthread_mutex_unlock(&a->sched_lock);
        if (sched)
                (void)sched_remove(sched, SYNC_JOB);
        routines_free(__atomic_exchange_n(&a->routines, NULL, __ATOMIC_ACQ_REL));
        sched_free(sched); /* waits for a run in progress (a daily backup) */
        app_stop_health(a); /* before the orchestrator its fixes go to, the API and the live data it reads */
        orch_stop(a->orch);
        a->orch = NULL;
        api_free(__atomic_exchange_n(&a->api, NULL, __ATOMIC_ACQ_REL));
        backups_free(a->backups); /* after the API, its only other user */
        live_free(a->live); /* after the chat, its only user */
        a->live = NULL;
        ask_drafts_free(a->drafts); /* after ctl and the API, its users */
        a->drafts = NULL;
        if (a->organism) {
                organism_stop(a->organism);
                organism_free(a->organism);
        }
        outbound_free(a->outbound);
        egress_free(a->egress); /* after every sandbox that had a door */
        mind_free(a->mind);
        spend_free(a->spend); /* after the mind: no call is recorded any more */
        db_close(a->kdb);
        pg_watch_stop(a->pg_watch);
        pg_stop(a->pg);
        _cleanup_free_ char *p = seed_path(a, APP_STATE_FILE);
        _cleanup_free_ char *tok = seed_path(a, APP_CONTROL_TOKEN_FILE);
        if (p)
                unlink(p);
        if (tok)
                unlink(tok);
        repo_refs_cache_done(&a->refs); /* after ctl: no status is asked any more */
        organism_ext_cache_done(&a->ext);
        fswatch_done(&a->watch);
        free(a->status.json);
        app_status_key_done(&a->status.key);
        cfg_free(a->cfg);
        secrets_free(a->secrets);
        if (a->control_token)
                secure_zero(a->control_token, strlen(a->control_token));
        free(a->control_token);
        if (a->session_key)
                secure_zero(a->session_key, strlen(a->session_key));
        free(a->session_key);
        crypto_hmac_forget(); /* its keyed copies */
        if (a->live_url)
                secure_zero(a->live_url, strlen(a->live_url));
        free(a->live_url);
        free(a->doctor);
        if (a->job_token)
                secure_zero(a->job_token, strlen(a->job_token));
        free(a->job_token);
        free(a->sync_workspace);
        pthread_mutex_destroy(&a->sync_lock);
        pthread_mutex_destroy(&a->sched_lock);
}

/* The kernel holds many descriptors at once: 256 control-plane
 * connections, and the egress proxy's 64 tunnels and 64 waiting
 * connections at about 6 each (two sockets, two pipes). The soft limit
 * (often 1024) goes up to the hard one, at most APP_NOFILE; what the kernel
 * starts gets its own limits (sandboxes set theirs). */
#define APP_NOFILE 16384
static void app_raise_nofile(void) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        rlim_t want = rl.rlim_max < APP_NOFILE ? rl.rlim_max : APP_NOFILE;
        if (rl.rlim_cur >= want)
                return;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warn("cannot raise the open-file limit to %llu: %m", (unsigned long long)want);
}

/* The supervisor's listening sockets (--listen-fd): each proven a listening
 * TCP socket on the one port before anything else runs, and closed on exec
 * from here on (nothing the kernel starts inherits them). */
static int app_take_listeners(struct app *a) {
        for (size_t i = 0; i < a->opts->n_listen_fds; i++) {
                int fd = a->opts->listen_fds[i];
                int r = ctl_listen_adopt(&a->listen, fd);
                if (r < 0)
                        return log_error_errno(r, "--listen-fd %d is not a listening TCP socket on the Seed's port "
                                                  "(%m): refusing it",
                                               fd);
        }
        return 0;
}

/* Reads the secrets from the CLI's pipe and makes sure none of them is left
 * in our environment, so nothing the kernel starts can inherit one. */
static int app_take_secrets(struct app *a) {
        int r = secrets_new(&a->secrets);
        if (r < 0)
                return r;
        if (a->opts->secrets_fd >= 0) {
                r = secrets_read_fd(a->secrets, a->opts->secrets_fd);
                close(a->opts->secrets_fd);
                if (r < 0)
                        return log_error_errno(r, "cannot read the secrets from the CLI: %m");
        }
        struct buf names = BUF_INIT(64 * 1024);
        for (size_t i = 0; i < secrets_count(a->secrets); i++) {
                unsetenv(secrets_name(a->secrets, i));
                (void)buf_printf(&names, "%s%s", i ? ", " : "", secrets_name(a->secrets, i));
        }
        if (names.len)
                log_info("holding %zu secret(s) in memory: %s", secrets_count(a->secrets), names.data);
        buf_free(&names);
        return 0;
}

int app_run(const struct app_options *o) {
        struct app a = {.opts = o, .started_ms = now_ms(), .pid = getpid(), .listen = CTL_LISTEN_INIT,
                        .status.lock = PTHREAD_MUTEX_INITIALIZER, .sync_lock = PTHREAD_MUTEX_INITIALIZER,
                        .sched_lock = PTHREAD_MUTEX_INITIALIZER,
                        .health_lock = PTHREAD_MUTEX_INITIALIZER};
        _cleanup_free_ char *cfg_path = NULL, *err = NULL, *log_path = NULL;
        int r;

        log_set_ident("kernel");
        if (sandbox_hide_everywhere(o->hide_paths) < 0)
                return APP_EXIT_FAILURE;
        /* Our memory holds the owner's secrets: no core dumps, and no
         * /proc/<pid>/mem for other processes of our account. */
        prctl(PR_SET_DUMPABLE, 0);
        if (geteuid() == 0) {
                log_error("the kernel never runs as root; start it with 'seed run', which switches to the "
                          "unprivileged account '%s'",
                          "seed");
                return APP_EXIT_USAGE;
        }
        app_raise_nofile();
        if ((r = app_take_listeners(&a)) < 0)
                goto fail;
        sigset_t stop;
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        signal(SIGPIPE, SIG_IGN);

        cfg_path = seed_path(&a, "seed.yaml");
        if ((r = cfg_load(cfg_path, &a.cfg, &err)) < 0) {
                log_error("%s", err ? err : "cannot load seed.yaml");
                /* The owner's commit broke it: the live generation's serves meanwhile. */
                if ((r = evo_owner_live_config(o->seed_dir, &a.cfg)) < 0)
                        goto fail;
        }
        if ((r = app_prepare_dirs(&a)) < 0)
                goto fail;
        log_path = seed_path(&a, ".seed/logs/kernel.log");
        if ((r = log_open(log_path, 10u << 20, 3)) < 0)
                log_warn_errno(r, "cannot open '%s': %m", log_path);
        log_info("starting Seed '%s' (pid %d)", a.cfg->name, (int)getpid());
        if ((r = app_take_secrets(&a)) < 0)
                goto fail;
        if (repo_live_generation(o->seed_dir, &a.generation) < 0)
                a.generation = 0;
        if ((r = fswatch_init(&a.watch)) < 0 || (r = repo_refs_cache_init(&a.refs, o->seed_dir, &a.watch)) < 0 ||
            (r = organism_ext_cache_init(&a.ext, o->seed_dir, &a.watch)) < 0)
                goto fail;

        if ((r = crypto_random_hex(32, &a.control_token)) < 0 ||
            (r = app_load_key(&a, "session-key", &a.session_key)) < 0 ||
            (r = app_load_key(&a, "job-token", &a.job_token)) < 0)
                goto fail;
        if ((r = app_start_database(&a)) < 0 || (r = app_create_spend(&a)) < 0 || (r = app_create_mind(&a)) < 0 ||
            (r = app_start_egress(&a)) < 0 || (r = app_start_outbound(&a)) < 0 || (r = app_start_organism(&a)) < 0 ||
            (r = app_start_orchestrator(&a)) < 0 || (r = app_start_schedule(&a)) < 0 || (r = app_start_ctl(&a)) < 0 ||
            (r = app_write_state(&a)) < 0)
                goto fail;
        atomic_store(&a.status.on, true);
        log_info("generation %d is live", a.generation);

        int sig = 0;
        sigwait(&stop, &sig);
        log_info("stopping (signal %d)", sig);
        bool restart = atomic_load(&a.restart);
        app_stop(&a);
        log_info(restart ? "stopped: restarting into the new kernel" : "stopped");
        log_close();
        return restart ? APP_EXIT_RESTART : APP_EXIT_OK;
fail:
        app_stop(&a);
        log_close();
        return APP_EXIT_FAILURE;
}

static void app_usage(FILE *f) {
        fputs("Usage: seed-kernel --dir DIR [--addr HOST:PORT] [--listen-fd FD]... [--secrets-fd FD]\n"
              "                   [--bridge PATH] [--hide PATH]... [--in-container]\n"
              "\n"
              "The Seed's kernel daemon. You normally do not start it yourself: 'seed run'\n"
              "builds it from the Seed's own source and supervises it.\n"
              "\n"
              "  --dir DIR         the Seed's folder (required)\n"
              "  --addr HOST:PORT  listen here instead of seed.yaml's server.addr (on a taken\n"
              "                    port it does not start; on localhost, 127.0.0.1 and [::1])\n"
              "  --listen-fd FD    serve this inherited listening TCP socket instead of binding\n"
              "                    (at most 2, one per address family; 'seed run' passes them)\n"
              "  --secrets-fd FD   read the owner's secrets (NAME=VALUE\\0 records) from FD\n"
              "  --bridge PATH     the seed-bridge helper built with this kernel\n"
              "  --hide PATH       a file of the owner's (an env file) that no sandbox may see\n"
              "  --in-container    the kernel runs inside its Seed's container: connections from\n"
              "                    the container's own addresses (loopback included) are refused\n"
              "  -h, --help        show this help\n"
              "\n"
              "Exit codes: 0 stopped, 1 failed, 2 usage, 75 rebuild and restart me.\n",
              f);
}

/* An inherited descriptor number (3 to 1024), or -1 (printed). */
static int parse_fd(const char *opt, const char *arg) {
        char *end;
        errno = 0;
        long fd = strtol(arg, &end, 10);
        if (errno || end == arg || *end || fd < 3 || fd > 1024) {
                fprintf(stderr, "seed-kernel: %s: '%s' is not a file descriptor\n", opt, arg);
                return -1;
        }
        return (int)fd;
}

int app_main(int argc, char **argv) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},     {"addr", required_argument, NULL, 'a'},
                {"secrets-fd", required_argument, NULL, 's'}, {"bridge", required_argument, NULL, 'b'},
                {"hide", required_argument, NULL, 'H'},    {"help", no_argument, NULL, 'h'},
                {"listen-fd", required_argument, NULL, 'l'}, {"in-container", no_argument, NULL, 'C'},
                {0},
        };
        struct app_options o = {.secrets_fd = -1};
        _cleanup_strv_free_ char **hide = NULL;
        int c;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'd': o.seed_dir = optarg; break;
                case 'a': o.addr = optarg; break;
                case 'b': o.bridge_path = optarg; break;
                case 'H':
                        if (optarg[0] != '/' || strv_length(hide) >= SANDBOX_HIDE_MAX) {
                                fprintf(stderr, "seed-kernel: --hide: '%s' is not an absolute path (or too many)\n",
                                        optarg);
                                return APP_EXIT_USAGE;
                        }
                        if (strv_push(&hide, optarg) < 0)
                                return APP_EXIT_FAILURE;
                        break;
                case 's':
                        if ((o.secrets_fd = parse_fd("--secrets-fd", optarg)) < 0)
                                return APP_EXIT_USAGE;
                        break;
                case 'l':
                        if (o.n_listen_fds >= ARRAY_SIZE(o.listen_fds)) {
                                fprintf(stderr, "seed-kernel: --listen-fd: at most %zu\n", ARRAY_SIZE(o.listen_fds));
                                return APP_EXIT_USAGE;
                        }
                        if ((o.listen_fds[o.n_listen_fds++] = parse_fd("--listen-fd", optarg)) < 0)
                                return APP_EXIT_USAGE;
                        break;
                case 'C': o.in_container = true; break;
                case 'h': app_usage(stdout); return APP_EXIT_OK;
                default: app_usage(stderr); return APP_EXIT_USAGE;
                }
        }
        if (!o.seed_dir || optind != argc) {
                app_usage(stderr);
                return APP_EXIT_USAGE;
        }
        _cleanup_free_ char *abs = NULL;
        int r = path_abs(o.seed_dir, &abs);
        if (r < 0) {
                fprintf(stderr, "seed-kernel: '%s': %s\n", o.seed_dir, strerror(-r));
                return APP_EXIT_USAGE;
        }
        o.seed_dir = abs;
        o.hide_paths = hide;
        return app_run(&o);
}
