/* Integration tests for kernel/routines against a real private PostgreSQL
 * and the real scheduler: at most 20 routines, also when many are created
 * at once; the 15-minute rule and a taken name refused with nothing stored;
 * organism/routines.yaml synced (a bad file changes nothing and its error is
 * kept; a job's pause survives a sync of the same job); a failed job run
 * recorded and told to the failure hook with the count in a row; the last
 * 100 runs kept; a run missed while nothing ran runs once (a fake clock); a
 * routine waiting its turn does not start once the kernel stops.
 * The limits of issue 18, each with a stand-in that holds what it is asked
 * until the test lets it go: at most ROUTINES_JOBS_AT_ONCE job requests in
 * flight (a real organism — real bwrap and seed-bridge — whose job paths
 * answer only when released), one routine run at a time (the scripted model
 * server holding the first routine's model call), and the two timeouts
 * (shortened through routines_config: a job whose request is never answered
 * fails with a timeout recorded in its run; a routine whose model call never
 * ends is stopped and recorded as failed). Runs as the unprivileged 'seed'
 * account (drops root first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "base/fileio.h"
#include "base/json.h"
#include "base/priv.h"
#include "config/config.h"
#include "db/db.h"
#include "mind/mind.h"
#include "organism/organism.h"
#include "pg/pg.h"
#include "repo/repo.h"
#include "routines/routines.h"
#include "sandbox/sandbox.h"
#include "schedule/schedule.h"

#pragma GCC diagnostic ignored "-Wunused-function" /* model-server.h helpers this file does not use */
#include "model-server.h"

#define BRIDGE SEED_BUILD_ROOT "/cmd/seed-bridge/seed-bridge"

static char seed_dir[64];
static struct pg *g_pg;
static struct db *g_db;
static struct cfg *g_cfg;
static struct scheduler *g_sched;
static struct routines *g_r;
static char code_dir[64];         /* a Seed's folder (a git repository) with the stand-in organism */
static struct cfg *g_mcfg;        /* seed.yaml with the scripted model server as the model */
static struct mind *g_mind;
static struct organism *g_org;    /* NULL when no sandbox can run here (why: no_organism) */
static char *no_organism;

/* The scheduler's clock: the real one moved on by skip seconds. */
static atomic_llong skip;
static int64_t fake_now(void) {
        return wall_ms() / 1000 + atomic_load(&skip);
}

static struct {
        pthread_mutex_t lock;
        unsigned calls, last_consecutive;
        char job[64], error[256];
} failed = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void on_job_failure(void *userdata, const char *job, const char *error, unsigned consecutive) {
        pthread_mutex_lock(&failed.lock);
        failed.calls++;
        failed.last_consecutive = consecutive;
        snprintf(failed.job, sizeof failed.job, "%s", job);
        snprintf(failed.error, sizeof failed.error, "%s", error);
        pthread_mutex_unlock(&failed.lock);
}

static char *value(const char *sql) {
        char *v = NULL;
        int r = db_query_value(g_db, sql, 0, NULL, &v);
        if (r == -ENOENT)
                return strdup("NULL");
        if (r < 0)
                fail_msg("query '%s' failed: %d", sql, r);
        return v;
}

static void assert_value(const char *sql, const char *want) {
        _cleanup_free_ char *v = value(sql);
        if (!streq(v, want))
                fail_msg("%s: got '%s', wanted '%s'", sql, v, want);
}

static void reset(void) {
        /* A fresh routines object over empty tables. */
        routines_free(g_r);
        g_r = NULL;
        assert_int_equal(db_exec(g_db, "DELETE FROM routine_runs; DELETE FROM routines; DELETE FROM routine_jobs", NULL),
                         0);
        assert_int_equal(routines_new(&(struct routines_config){.seed_dir = seed_dir, .cfg = g_cfg, .kdb = g_db,
                                                                .sched = g_sched, .job_token = "0123456789abcdef0123456789abcdef",
                                                                .on_job_failure = on_job_failure},
                                      &g_r),
                         0);
}

static int create(const char *name, const char *schedule, char **ret_error) {
        _cleanup_free_ char *id = NULL;
        return routines_create(g_r, name, "Look at the orders.", schedule, "Europe/Lisbon", NULL, &id, ret_error);
}

static void test_at_most_20(void **state) {
        reset();
        char name[32];
        for (int i = 0; i < ROUTINES_MAX; i++) {
                snprintf(name, sizeof name, "r%d", i);
                assert_int_equal(create(name, "every 1h", NULL), 0);
        }
        _cleanup_free_ char *err = NULL;
        assert_int_equal(create("one-more", "every 1h", &err), -E2BIG);
        assert_non_null(strstr(err, "there are 20 routines already"));
        assert_value("SELECT count(*) FROM routines", "20");
        _cleanup_free_ char *json = NULL;
        assert_int_equal(routines_list_json(g_r, &json), 0);
        _cleanup_json_ json_t *o = json_loads(json, 0, NULL);
        assert_int_equal(json_array_size(json_object_get(o, "routines")), 20);
        assert_int_equal(json_integer_value(json_object_get(o, "max")), 20);
        /* One deleted: one more fits. */
        _cleanup_free_ char *id = value("SELECT id FROM routines WHERE name = 'r3'");
        assert_int_equal(routines_delete(g_r, ROUTINES_ROUTINE, id), 0);
        assert_int_equal(routines_delete(g_r, ROUTINES_ROUTINE, id), -ENOENT);
        assert_int_equal(create("one-more", "every 1h", NULL), 0);
        assert_value("SELECT count(*) FROM routines", "20");
}

static atomic_int made;

static void *create_one(void *arg) {
        char name[32];
        snprintf(name, sizeof name, "race-%d", (int)(intptr_t)arg);
        if (create(name, "every 2h", NULL) == 0)
                atomic_fetch_add(&made, 1);
        return NULL;
}

static void test_at_most_20_at_once(void **state) {
        reset();
        char name[32];
        for (int i = 0; i < 15; i++) {
                snprintf(name, sizeof name, "r%d", i);
                assert_int_equal(create(name, "every 1h", NULL), 0);
        }
        atomic_store(&made, 0);
        pthread_t t[12];
        for (intptr_t i = 0; i < 12; i++)
                assert_int_equal(pthread_create(&t[i], NULL, create_one, (void *)i), 0);
        for (int i = 0; i < 12; i++)
                pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&made), 5);
        assert_value("SELECT count(*) FROM routines", "20");
}

static void test_refused_with_nothing_stored(void **state) {
        reset();
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;
        assert_int_equal(create("often", "*/5 * * * *", &e1), -EINVAL);
        assert_non_null(strstr(e1, "at least 15 minutes apart"));
        assert_int_equal(create("often", "every 10m", &e2), -EINVAL);
        assert_int_equal(create("Bad Name", "every 1h", &e3), -EINVAL);
        assert_non_null(strstr(e3, "the name must be"));
        assert_value("SELECT count(*) FROM routines", "0");
        assert_int_equal(create("daily", "0 7 * * *", NULL), 0);
        assert_int_equal(create("daily", "0 8 * * *", &e4), -EEXIST);
        assert_non_null(strstr(e4, "exists already"));
        assert_value("SELECT count(*) FROM routines", "1");
        assert_value("SELECT tz FROM routines", "Europe/Lisbon");
}

static void write_jobs(const char *text) {
        _cleanup_free_ char *dir = NULL, *file = NULL;
        assert_true(xasprintf(&dir, "%s/ws/organism", seed_dir) >= 0);
        assert_true(xasprintf(&file, "%s/routines.yaml", dir) >= 0);
        assert_int_equal(mkdir_p(dir, 0755), 0);
        if (text)
                assert_int_equal(write_file_atomic(file, text, strlen(text), 0644), 0);
        else
                (void)unlink(file);
}

static int sync_jobs(void) {
        _cleanup_free_ char *ws = NULL;
        assert_true(xasprintf(&ws, "%s/ws", seed_dir) >= 0);
        return routines_jobs_sync(g_r, ws);
}

static json_t *listing(void) {
        _cleanup_free_ char *json = NULL;
        assert_int_equal(routines_list_json(g_r, &json), 0);
        return json_loads(json, 0, NULL);
}

#define TWO_JOBS "jobs:\n  - name: digest\n    path: /jobs/digest\n    schedule: \"0 7 * * *\"\n" \
                 "  - name: ping\n    method: GET\n    path: /jobs/ping\n    schedule: every 5m\n"

static void test_jobs_sync(void **state) {
        reset();
        write_jobs(TWO_JOBS);
        assert_int_equal(sync_jobs(), 0);
        assert_value("SELECT string_agg(name || ' ' || method || ' ' || path, ', ' ORDER BY name) FROM routine_jobs",
                     "digest POST /jobs/digest, ping GET /jobs/ping");
        assert_int_equal(routines_set_paused(g_r, ROUTINES_JOB, "ping", true), 0);
        /* A bad file: nothing changes, the error names the line. */
        write_jobs(TWO_JOBS "  - name: x\n    path: nope\n    schedule: every 1h\n");
        assert_int_equal(sync_jobs(), -EINVAL);
        _cleanup_json_ json_t *l = listing();
        assert_int_equal(json_array_size(json_object_get(l, "jobs")), 2);
        const char *err = json_string_value(json_object_get(l, "jobs_error"));
        assert_non_null(err);
        assert_non_null(strstr(err, "organism/routines.yaml:9: the path must start with '/'"));
        /* The same jobs again: ping stays paused; the error is gone. */
        write_jobs(TWO_JOBS);
        assert_int_equal(sync_jobs(), 0);
        assert_value("SELECT paused::text FROM routine_jobs WHERE name = 'ping'", "true");
        _cleanup_json_ json_t *l2 = listing();
        assert_true(json_is_null(json_object_get(l2, "jobs_error")));
        /* Jobs are the organism's: not deleted from here. */
        assert_int_equal(routines_delete(g_r, ROUTINES_JOB, "ping"), -EPERM);
        /* No file: no jobs. */
        write_jobs(NULL);
        assert_int_equal(sync_jobs(), 0);
        assert_value("SELECT count(*) FROM routine_jobs", "0");
        assert_int_equal(routines_run_now(g_r, ROUTINES_JOB, "ping"), -ENOENT);
}

/* Polls cond every 10 ms until it holds; fails after 60 s. */
#define POLL(cond, what)                                                                                           \
        do {                                                                                                       \
                int64_t deadline_ = now_ms() + 60000;                                                              \
                while (!(cond)) {                                                                                  \
                        if (now_ms() > deadline_)                                                                  \
                                fail_msg("not within 60 s: %s", what);                                             \
                        sleep_ms(10);                                                                              \
                }                                                                                                  \
        } while (0)

/* Polls (no fixed sleep) until the query answers want, for at most 60 s. */
static void wait_value(const char *sql, const char *want) {
        for (int i = 0; i < 6000; i++) {
                _cleanup_free_ char *v = value(sql);
                if (streq(v, want))
                        return;
                nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
        }
        assert_value(sql, want);
}

static void test_a_failed_job_is_told_and_the_last_100_runs_kept(void **state) {
        reset();
        write_jobs("jobs:\n  - name: ping\n    path: /jobs/ping\n    schedule: every 1d\n");
        assert_int_equal(sync_jobs(), 0);
        /* 104 runs before: only the newest 100 stay once one more is recorded. */
        assert_int_equal(db_exec(g_db,
                                 "INSERT INTO routine_runs (job_name, started_at, ended_at, outcome) "
                                 "SELECT 'ping', i, i, 'ok' FROM generate_series(1, 104) i",
                                 NULL),
                         0);
        memset(failed.job, 0, sizeof failed.job);
        failed.calls = 0;
        assert_int_equal(routines_run_now(g_r, ROUTINES_JOB, "ping"), 0);
        wait_value("SELECT count(*) FROM routine_runs WHERE outcome = 'failed'", "1");
        /* The oldest go just after the new run is stored (a second statement). */
        wait_value("SELECT count(*) FROM routine_runs", "100");
        assert_value("SELECT min(started_at) FROM routine_runs WHERE outcome = 'ok'", "6");
        assert_value("SELECT error FROM routine_runs WHERE outcome = 'failed'", "the organism is not running");
        POLL(!sched_running(g_sched, "job.ping"), "the run to end");
        assert_int_equal(routines_run_now(g_r, ROUTINES_JOB, "ping"), 0);
        wait_value("SELECT count(*) FROM routine_runs WHERE outcome = 'failed'", "2");
        POLL(!sched_running(g_sched, "job.ping"), "the run to end");
        pthread_mutex_lock(&failed.lock);
        assert_int_equal(failed.calls, 2);
        assert_int_equal(failed.last_consecutive, 2);
        assert_string_equal(failed.job, "ping");
        pthread_mutex_unlock(&failed.lock);
        _cleanup_free_ char *runs = NULL;
        assert_int_equal(routines_runs_json(g_r, ROUTINES_JOB, "ping", &runs), 0);
        _cleanup_json_ json_t *arr = json_loads(runs, 0, NULL);
        assert_int_equal(json_array_size(arr), 100);
        const char *newest = json_string_value(json_object_get(json_array_get(arr, 0), "outcome"));
        if (!newest || !streq(newest, "failed"))
                fail_msg("the newest run is not the failed one: %.300s", runs);
}

/* The job's entry in the scheduler's status: its runs and next due. */
static json_t *sched_entry(const char *name) {
        _cleanup_json_ json_t *a = NULL;
        assert_int_equal(sched_status_json(g_sched, &a), 0);
        size_t i;
        json_t *o;
        json_array_foreach(a, i, o)
                if (streq(json_string_value(json_object_get(o, "name")), name))
                        return json_incref(o);
        _cleanup_free_ char *json = json_dumps(a, JSON_COMPACT);
        fail_msg("no job %s in %s", name, json ? json : "?");
        return NULL;
}

/* Three hourly slots pass while nothing runs (the kernel down): the routine
 * runs once, and is not due again at once. Without a model the run fails,
 * saying so, and is recorded. */
static void test_a_missed_run_runs_once(void **state) {
        reset();
        _cleanup_free_ char *id = NULL, *name = NULL;
        assert_int_equal(routines_create(g_r, "missed", "Anything new?", "every 1h", NULL, NULL, &id, NULL), 0);
        assert_true(xasprintf(&name, "routine.%s", id) >= 0);
        _cleanup_json_ json_t *before = sched_entry(name);
        assert_int_equal(json_integer_value(json_object_get(before, "runs")), 0);
        atomic_store(&skip, 3 * 3600 + 120);
        sched_wake(g_sched);
        wait_value("SELECT count(*) FROM routine_runs WHERE routine_id IS NOT NULL", "1");
        POLL(!sched_running(g_sched, name), "the run to end");
        assert_value("SELECT outcome || ': ' || error FROM routine_runs", "failed: no model to think with (no key)");
        _cleanup_json_ json_t *after = sched_entry(name);
        assert_int_equal(json_integer_value(json_object_get(after, "runs")), 1);
        assert_true(json_integer_value(json_object_get(after, "next_due")) > fake_now());
        assert_value("SELECT count(*) FROM routine_runs", "1");
        atomic_store(&skip, 0);
}


/* ---- the limits ---- */

/* The organism for the limits: GET /jobs/hold* is held until GET /release
 * answers the oldest held one; /jobs/hang is never answered; /stats says how
 * many job requests arrived, are in flight (held), and the most in flight at
 * once. GET /open answers every held (and hung) one and from then on holds nothing
 * (so that a failed test leaves no run waiting); GET /close holds again,
 * counting from 0. */
static const char jobs_js[] =
        "'use strict';\n"
        "const http = require('node:http');\n"
        "let inFlight = 0, max = 0, arrived = 0, open = false;\n"
        "const held = [], hung = [];\n"
        "const json = (res, o) => { res.writeHead(200, {'Content-Type': 'application/json'}); res.end(JSON.stringify(o)); };\n"
        "http.createServer((req, res) => {\n"
        "  const p = req.url;\n"
        "  if (p === '/healthz') return json(res, {ok: true});\n"
        "  if (p === '/stats') return json(res, {arrived, in_flight: inFlight, max});\n"
        "  if (p === '/release') {\n"
        "    const h = held.shift();\n"
        "    if (h) { inFlight--; json(h, {ok: true}); }\n"
        "    return json(res, {released: !!h});\n"
        "  }\n"
        "  if (p === '/open') {\n"
        "    open = true;\n"
        "    while (held.length) { inFlight--; json(held.shift(), {ok: true}); }\n"
        "    while (hung.length) json(hung.shift(), {ok: true});\n"
        "    return json(res, {open});\n"
        "  }\n"
        "  if (p === '/close') { open = false; arrived = 0; max = 0; return json(res, {open}); }\n"
        "  if (p.startsWith('/jobs/hold') && open) return json(res, {ok: true});\n"
        "  if (p.startsWith('/jobs/hold')) {\n"
        "    arrived++; inFlight++; max = Math.max(max, inFlight);\n"
        "    console.log(`job ${p} arrived, ${inFlight} in flight`);\n"
        "    held.push(res);\n"
        "    return;\n"
        "  }\n"
        "  if (p === '/jobs/hang') { console.log('job /jobs/hang arrived: never answered'); hung.push(res); return; }\n"
        "  res.writeHead(404); res.end();\n"
        "}).listen(Number(process.env.PORT), '127.0.0.1');\n";

static json_t *org_get(const char *path);

/* Lets every held job request and model call go (a test that failed
 * midway leaves them held), so that routines_free() does not wait on them. */
static void let_all_go(void) {
        if (g_org && organism_state(g_org) == ORGANISM_RUNNING)
                json_decref(org_get("/open"));
        load_script("[]");
}

/* A fresh routines object over empty tables, on the Seed's folder code_dir
 * (a repository: routine runs read it), with the organism, the mind and
 * the timeouts given. */
static void reset_limits(struct organism *o, struct mind *m, int job_timeout_ms, int routine_timeout_ms) {
        let_all_go();
        routines_free(g_r);
        g_r = NULL;
        assert_int_equal(db_exec(g_db, "DELETE FROM routine_runs; DELETE FROM routines; DELETE FROM routine_jobs", NULL),
                         0);
        assert_int_equal(routines_new(&(struct routines_config){.seed_dir = code_dir, .cfg = g_mcfg, .kdb = g_db,
                                                                .sched = g_sched, .mind = m, .organism = o,
                                                                .job_token = "0123456789abcdef0123456789abcdef",
                                                                .job_timeout_ms = job_timeout_ms,
                                                                .routine_timeout_ms = routine_timeout_ms},
                                      &g_r),
                         0);
}

static void require_organism(void) {
        if (no_organism) {
                print_message("# SKIP %s\n", no_organism);
                skip();
        }
        assert_int_equal(organism_wait_ready(g_org, 90000), 0);
}

/* GET path of the stand-in organism; its body as JSON. */
static json_t *org_get(const char *path) {
        _cleanup_free_ char *text = NULL, *err = NULL;
        int k = organism_http(organism_socket(g_org), &(struct organism_http_request){.method = "GET", .path = path},
                              &text, &err);
        if (k < 0)
                fail_msg("GET %s: %s", path, err ? err : strerror(-k));
        const char *body = strstr(text, "\n\n");
        json_t *j = body ? json_loads(body + 2, 0, NULL) : NULL;
        if (!j)
                fail_msg("GET %s: not JSON: %.300s", path, text);
        return j;
}

static long long stat_of(const char *key) {
        _cleanup_json_ json_t *j = org_get("/stats");
        return json_integer_value(json_object_get(j, key));
}

static void release_one(void) {
        _cleanup_json_ json_t *j = org_get("/release");
        assert_true(json_is_true(json_object_get(j, "released")));
}


/* While the limit keeps the rest waiting, nothing more may get in: looked
 * at for a while (a limit that is not kept lets the next one in at once). */
#define NEVER(cond, what)                                                                                          \
        do {                                                                                                       \
                for (int i_ = 0; i_ < 50; i_++) {                                                                  \
                        if (cond)                                                                                  \
                                fail_msg("%s", what);                                                              \
                        sleep_ms(10);                                                                              \
                }                                                                                                  \
        } while (0)

static void write_jobs_in(const char *dir, const char *text) {
        _cleanup_free_ char *org = path_join(dir, "organism"), *file = path_join(org, "routines.yaml");
        assert_int_equal(mkdir_p(org, 0755), 0);
        assert_int_equal(write_file_atomic(file, text, strlen(text), 0644), 0);
        assert_int_equal(routines_jobs_sync(g_r, dir), 0);
}

static bool all_running(int n) {
        char name[32];
        for (int i = 1; i <= n; i++) {
                snprintf(name, sizeof name, "job.hold%d", i);
                if (!sched_running(g_sched, name))
                        return false;
        }
        return true;
}

/* Six jobs run now at once: four requests reach the organism, the other two
 * wait; each answer lets exactly one more in; all six succeed. */
static void test_at_most_4_jobs_at_once(void **state) {
        require_organism();
        reset_limits(g_org, NULL, 0, 0);
        enum { N = ROUTINES_JOBS_AT_ONCE + 2 };
        char yaml[2048] = "jobs:\n", name[32];
        for (int i = 1; i <= N; i++) {
                size_t n = strlen(yaml);
                snprintf(yaml + n, sizeof yaml - n, "  - name: hold%d\n    method: GET\n    path: /jobs/hold%d\n"
                                                   "    schedule: every 1d\n", i, i);
        }
        write_jobs_in(code_dir, yaml);
        json_decref(org_get("/close"));
        for (int i = 1; i <= N; i++) {
                snprintf(name, sizeof name, "hold%d", i);
                assert_int_equal(routines_run_now(g_r, ROUTINES_JOB, name), 0);
        }
        POLL(stat_of("arrived") >= ROUTINES_JOBS_AT_ONCE && all_running(N),
             "4 job requests in flight, all 6 jobs running");
        NEVER(stat_of("in_flight") > ROUTINES_JOBS_AT_ONCE, "more than 4 job requests in flight at once");
        assert_int_equal(stat_of("arrived"), ROUTINES_JOBS_AT_ONCE);
        /* One answered: the fifth gets in; another: the sixth. */
        for (int more = 1; more <= N - ROUTINES_JOBS_AT_ONCE; more++) {
                release_one();
                POLL(stat_of("arrived") == ROUTINES_JOBS_AT_ONCE + more, "one more job request after an answer");
                NEVER(stat_of("in_flight") > ROUTINES_JOBS_AT_ONCE, "more than 4 job requests in flight at once");
        }
        for (int i = 0; i < ROUTINES_JOBS_AT_ONCE; i++)
                release_one();
        wait_value("SELECT count(*) FROM routine_runs WHERE outcome = 'ok'", "6");
        assert_value("SELECT count(*) FROM routine_runs", "6");
        assert_int_equal(stat_of("max"), ROUTINES_JOBS_AT_ONCE);
        assert_int_equal(stat_of("in_flight"), 0);
}

/* A job whose request is never answered fails at its timeout, said so in
 * its run (and told to the failure hook). */
static void test_a_hung_job_times_out(void **state) {
        require_organism();
        reset_limits(g_org, NULL, 2000, 0);
        struct routines *bad = NULL;
        assert_int_equal(routines_new(&(struct routines_config){.seed_dir = code_dir, .cfg = g_mcfg, .kdb = g_db,
                                                                .sched = g_sched, .job_token = "t", .job_timeout_ms = -1},
                                      &bad),
                         -EINVAL);
        assert_null(bad);
        write_jobs_in(code_dir, "jobs:\n  - name: hang\n    method: GET\n    path: /jobs/hang\n    schedule: every 1d\n");
        assert_int_equal(routines_run_now(g_r, ROUTINES_JOB, "hang"), 0);
        wait_value("SELECT outcome || ': ' || error FROM routine_runs WHERE job_name = 'hang'",
                   "failed: GET /jobs/hang: no complete answer within 2 s");
        assert_value("SELECT (ended_at - started_at >= 2000)::text FROM routine_runs", "true");
}

static json_t *model_state(void) {
        return control("GET", "/_state", NULL);
}

static bool holding(const char *name) {
        _cleanup_json_ json_t *s = model_state();
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(s, "holding"), i, v)
                if (streq(json_string_value(v), name))
                        return true;
        return false;
}

static void release_model(const char *name) {
        char body[128];
        snprintf(body, sizeof body, "{\"name\": \"%s\"}", name);
        json_decref(control("POST", "/_release", body));
}

/* Two routines run now at once: the second calls the model only after the
 * first's run has ended. */
static void test_one_routine_at_a_time(void **state) {
        reset_limits(NULL, g_mind, 0, 0);
        load_script("[{\"text\": \"The first one's report.\", \"hold\": \"first\"},"
                    " {\"text\": \"NOTHING_TO_REPORT\"}]");
        _cleanup_free_ char *a = NULL, *b = NULL, *sb = NULL;
        assert_int_equal(routines_create(g_r, "first", "First: anything new?", "every 1h", NULL, NULL, &a, NULL), 0);
        assert_int_equal(routines_create(g_r, "second", "Second: anything new?", "every 1h", NULL, NULL, &b, NULL), 0);
        assert_true(xasprintf(&sb, "routine.%s", b) >= 0);
        assert_int_equal(routines_run_now(g_r, ROUTINES_ROUTINE, a), 0);
        POLL(holding("first"), "the first routine's model call");
        assert_int_equal(routines_run_now(g_r, ROUTINES_ROUTINE, b), 0);
        POLL(sched_running(g_sched, sb), "the second routine running");
        NEVER(request_count() > 1, "the second routine called the model while the first one ran");
        release_model("first");
        wait_value("SELECT count(*) FROM routine_runs", "2");
        char sql[256];
        snprintf(sql, sizeof sql, "SELECT outcome || ': ' || coalesce(text, '') FROM routine_runs WHERE routine_id = %s", a);
        assert_value(sql, "reported: The first one's report.");
        snprintf(sql, sizeof sql, "SELECT outcome FROM routine_runs WHERE routine_id = %s", b);
        assert_value(sql, "quiet");
        /* The second's model call began after the first's was answered. */
        _cleanup_json_ json_t *reqs = requests();
        assert_int_equal(json_array_size(reqs), 2);
        json_t *r0 = json_array_get(reqs, 0), *r1 = json_array_get(reqs, 1);
        _cleanup_free_ char *body0 = json_dumps(json_object_get(r0, "body"), 0);
        assert_non_null(body0);
        assert_non_null(strstr(body0, "First: anything new?"));
        double end0 = json_real_value(json_object_get(r0, "started_at")) +
                      json_number_value(json_object_get(r0, "duration_ms")) / 1000.0;
        assert_true(json_real_value(json_object_get(r1, "started_at")) >= end0);
}

/* A routine whose model call never ends is stopped at its timeout and
 * recorded as failed, saying so. */
static void test_a_hung_routine_times_out(void **state) {
        reset_limits(NULL, g_mind, 0, 1500);
        load_script("[{\"text\": \"Too late.\", \"hold\": \"forever\"}]");
        _cleanup_free_ char *id = NULL;
        assert_int_equal(routines_create(g_r, "hung", "Anything new?", "every 1h", NULL, NULL, &id, NULL), 0);
        assert_int_equal(routines_run_now(g_r, ROUTINES_ROUTINE, id), 0);
        wait_value("SELECT outcome || ': ' || error FROM routine_runs", "failed: stopped after 1500 ms");
        assert_value("SELECT (ended_at - started_at >= 1500)::text FROM routine_runs", "true");
        release_model("forever");
}

static void *free_routines(void *arg) {
        routines_free(arg);
        return NULL;
}

/* The kernel stops while routine B waits its turn behind routine A: B does
 * not start (no model run, no run recorded). A is held inside its turn by a
 * lock on the routines table, taken on a second connection. */
static void test_a_routine_waiting_its_turn_does_not_start_after_stop(void **state) {
        reset();
        _cleanup_free_ char *a = NULL, *b = NULL, *ci = NULL, *name_a = NULL, *name_b = NULL, *sql = NULL;
        assert_int_equal(routines_create(g_r, "first", "Look.", "every 1h", "UTC", NULL, &a, NULL), 0);
        assert_int_equal(routines_create(g_r, "second", "Look.", "every 1h", "UTC", NULL, &b, NULL), 0);
        assert_true(xasprintf(&name_a, "routine.%s", a) >= 0 && xasprintf(&name_b, "routine.%s", b) >= 0);
        assert_int_equal(pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci), 0);
        /* The watcher asks pg_stat_activity outside the locker's transaction:
         * inside one, PostgreSQL answers every read with the snapshot of the
         * first, so a poll that came before A waited would never see it. */
        _cleanup_(db_closep) struct db *locker = NULL, *watcher = NULL;
        assert_int_equal(db_connect(ci, &locker), 0);
        assert_int_equal(db_connect(ci, &watcher), 0);
        /* (a failed assertion below leaves the transaction: the server ends it
         * after a while, so the teardown is not blocked for good) */
        assert_int_equal(db_exec(locker,
                                 "BEGIN; SET LOCAL idle_in_transaction_session_timeout = '120s'; "
                                 "LOCK TABLE routines IN ACCESS EXCLUSIVE MODE",
                                 NULL),
                         0);
        /* A takes its turn and waits for the table */
        assert_int_equal(routines_run_now(g_r, ROUTINES_ROUTINE, a), 0);
        int64_t deadline = wall_ms() + 30000;
        for (;;) {
                _cleanup_free_ char *n = NULL;
                assert_int_equal(db_query_value(watcher,
                                                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                                "AND query LIKE 'SELECT prompt FROM routines%'",
                                                0, NULL, &n),
                                 0);
                if (streq(n, "1"))
                        break;
                if (wall_ms() > deadline)
                        fail_msg("routine A never waited for the table");
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
        }
        /* B waits its turn; then the kernel stops (routines_free removes B
         * first, the newest, once it has set cancel) */
        assert_int_equal(routines_run_now(g_r, ROUTINES_ROUTINE, b), 0);
        deadline = wall_ms() + 30000;
        while (!sched_running(g_sched, name_b)) {
                if (wall_ms() > deadline)
                        fail_msg("routine B never began");
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
        }
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, free_routines, g_r), 0);
        g_r = NULL;
        deadline = wall_ms() + 30000;
        while (sched_running(g_sched, name_b)) { /* false once removed: cancel is set */
                if (wall_ms() > deadline)
                        fail_msg("routine B was never removed");
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(db_exec(locker, "ROLLBACK", NULL), 0);
        pthread_join(th, NULL);
        assert_true(xasprintf(&sql, "SELECT count(*) FROM routine_runs WHERE routine_id = %s", a) >= 0);
        assert_value(sql, "1"); /* A had begun: it ends (no model here) */
        free(sql);
        assert_true(xasprintf(&sql, "SELECT count(*) FROM routine_runs WHERE routine_id = %s", b) >= 0);
        assert_value(sql, "0"); /* B never started */
}

static int group_setup(void **state) {
        snprintf(seed_dir, sizeof seed_dir, "/tmp/seed-test-routines-XXXXXX");
        if (!mkdtemp(seed_dir) || pg_start(seed_dir, &g_pg) < 0)
                return -1;
        _cleanup_free_ char *ci = NULL;
        if (pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci) < 0 || db_connect(ci, &g_db) < 0)
                return -1;
        if (cfg_new_default(&g_cfg) < 0 ||
            sched_new(&(struct sched_config){.kdb = g_db, .now_s = fake_now}, NULL, &g_sched) < 0 ||
            sched_start(g_sched) < 0)
                return -1;
        /* The limits' Seed folder: a repository with the stand-in organism. */
        snprintf(code_dir, sizeof code_dir, "/tmp/seed-test-routines-code-XXXXXX");
        _cleanup_free_ char *bin = NULL, *js = NULL, *err = NULL;
        if (!mkdtemp(code_dir) || !(bin = path_join(code_dir, "organism/bin")) || mkdir_p(bin, 0755) < 0 ||
            !(js = path_join(bin, "jobs.js")) || write_file_atomic(js, jobs_js, strlen(jobs_js), 0644) < 0 ||
            repo_init_commit(code_dir, "Initial seed", "seed/gen-1", &err) < 0)
                return -1;
        start_server(state);
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        if (cfg_new_default(&g_mcfg) < 0)
                return -1;
        free(g_mcfg->model.provider);
        free(g_mcfg->model.name);
        free(g_mcfg->model.base_url);
        free(g_mcfg->model.api_key_env);
        g_mcfg->model.api_key_env = NULL; /* openai-compatible: no key needed */
        if (!(g_mcfg->model.provider = strdup("openai-compatible")) || !(g_mcfg->model.name = strdup("scripted")) ||
            !(g_mcfg->model.base_url = strdup(url)) ||
            mind_new(&(struct mind_config){.cfg = g_mcfg, .backoff_base_ms = 10}, &g_mind) < 0)
                return -1;
        char *msg = NULL;
        if (sandbox_check(&msg) < 0)
                no_organism = msg ? msg : strdup("no sandbox can run here");
        else if (access(BRIDGE, X_OK) < 0)
                no_organism = strdup("seed-bridge is not built: " BRIDGE);
        else if (access("/usr/bin/node", X_OK) < 0)
                no_organism = strdup("node is not installed at /usr/bin/node");
        if (no_organism)
                return 0;
        free(msg);
        struct organism_config oc = {.seed_dir = code_dir, .build_cmd = "true", .run_cmd = "node organism/bin/jobs.js",
                                     .health_path = "/healthz", .port = 8080, .bridge_path = BRIDGE,
                                     .backoff_ms_base = 100, .health_timeout_ms = 30000};
        if (organism_new(&oc, &g_org) < 0 || organism_start(g_org) < 0)
                return -1;
        return 0;
}

static int group_teardown(void **state) {
        let_all_go();
        routines_free(g_r);
        organism_free(g_org);
        mind_free(g_mind);
        cfg_free(g_mcfg);
        free(no_organism);
        stop_server(state);
        rm_rf(code_dir);
        sched_free(g_sched);
        cfg_free(g_cfg);
        db_close(g_db);
        pg_stop(g_pg);
        rm_rf(seed_dir);
        return 0;
}

int main(void) {
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "cannot drop root\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_at_most_20),
                cmocka_unit_test(test_at_most_20_at_once),
                cmocka_unit_test(test_refused_with_nothing_stored),
                cmocka_unit_test(test_jobs_sync),
                cmocka_unit_test(test_a_failed_job_is_told_and_the_last_100_runs_kept),
                cmocka_unit_test(test_a_missed_run_runs_once),
                cmocka_unit_test(test_a_routine_waiting_its_turn_does_not_start_after_stop),
                cmocka_unit_test(test_at_most_4_jobs_at_once),
                cmocka_unit_test(test_a_hung_job_times_out),
                cmocka_unit_test(test_one_routine_at_a_time),
                cmocka_unit_test(test_a_hung_routine_times_out),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
