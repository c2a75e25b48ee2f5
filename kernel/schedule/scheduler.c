/* scheduler.c — one thread that starts each due job on a worker thread of
 * its own, one run per job at a time, and keeps each job's last run in the
 * kernel database (schedule_jobs). See schedule.h. */
#include "schedule/schedule.h"
#include "base/json.h"
#include "base/log.h"
#include "db/db.h"

#include <pthread.h>
#include <stdatomic.h>

#define SCHED_POLL_S 60 /* at most this long between looks (clock jumps, next_due changes) */

struct job {
        char name[SCHED_JOB_NAME_MAX + 1];
        struct sched_job j;
        int64_t since;      /* when it was registered: the base of a job never run */
        int64_t last_start, last_end, due; /* seconds; 0: never */
        int last_result;
        char *last_error;
        char *logged_error; /* the failure logged last: not logged again */
        unsigned failures;
        int64_t runs;
        bool running, run_now, removed;
        struct scheduler *s;
};

struct scheduler {
        struct sched_config cfg;
        pthread_mutex_t lock;
        pthread_cond_t cond; /* the scheduler thread waits on it */
        pthread_cond_t idle; /* a run ended */
        struct job **jobs;
        size_t n;
        unsigned workers;
        /* Bumped under the lock with every change sched_status_json() shows
         * (read without it: sched_status_version()). */
        _Atomic uint64_t changes;
        bool started, stopping;
        pthread_t thread;
};

static int64_t now_of(const struct scheduler *s) {
        return s->cfg.now_s ? s->cfg.now_s() : (int64_t)time(NULL);
}

static bool name_valid(const char *name) {
        if (strempty(name) || strlen(name) > SCHED_JOB_NAME_MAX)
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("_.-", *p)))
                        return false;
        return true;
}

static void job_free(struct job *j) {
        if (!j)
                return;
        free(j->last_error);
        free(j->logged_error);
        free(j);
}

/* ---- kernel memory ---- */

static void job_load(struct scheduler *s, struct job *j) {
        if (!s->cfg.kdb)
                return;
        _cleanup_free_ char *json = NULL;
        const char *p[] = {j->name};
        int r = db_query_json(s->cfg.kdb,
                              "SELECT last_started_at, last_ended_at, last_result, last_error, failures, runs "
                              "FROM schedule_jobs WHERE name = $1",
                              1, p, &json);
        if (r < 0) {
                log_warn_errno(r, "cannot read job %s's last run: it is treated as never run: %m", j->name);
                return;
        }
        _cleanup_json_ json_t *rows = json_loads(json, 0, NULL);
        json_t *o = json_array_get(rows, 0);
        if (!o)
                return;
        j->last_start = json_integer_value(json_object_get(o, "last_started_at")) / 1000;
        j->last_end = json_integer_value(json_object_get(o, "last_ended_at")) / 1000;
        j->last_result = (int)json_integer_value(json_object_get(o, "last_result"));
        j->failures = (unsigned)json_integer_value(json_object_get(o, "failures"));
        j->runs = json_integer_value(json_object_get(o, "runs"));
        const char *e = json_string_value(json_object_get(o, "last_error"));
        j->last_error = e ? strndup(e, SCHED_ERROR_MAX) : NULL;
}

struct run_record {
        int64_t start, end;
        int result;
        const char *error;
        unsigned failures;
        int64_t runs;
};

static void job_store(struct scheduler *s, const char *name, const struct run_record *rec) {
        if (!s->cfg.kdb)
                return;
        char start[24], end[24], result[16], failures[16], runs[24];
        snprintf(start, sizeof start, "%lld", (long long)rec->start * 1000);
        snprintf(end, sizeof end, "%lld", (long long)rec->end * 1000);
        snprintf(result, sizeof result, "%d", rec->result);
        snprintf(failures, sizeof failures, "%u", rec->failures);
        snprintf(runs, sizeof runs, "%lld", (long long)rec->runs);
        const char *p[] = {name, start, end, result, rec->error, failures, runs};
        _cleanup_free_ char *err = NULL;
        int r = db_execp(s->cfg.kdb,
                         "INSERT INTO schedule_jobs (name, last_started_at, last_ended_at, last_result, last_error, "
                         "failures, runs) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO UPDATE SET "
                         "last_started_at = $2, last_ended_at = $3, last_result = $4, last_error = $5, "
                         "failures = $6, runs = $7",
                         7, p, &err);
        if (r < 0)
                log_limited(LOG_WARN, "sched-store", "cannot record job %s's run: %s", name, err ? err : "?");
}

/* ---- the runs ---- */

/* When j is due next (under lock). */
static int64_t job_due(struct job *j, int64_t now) {
        if (j->run_now)
                return now;
        int64_t base = j->last_start ? j->last_start : j->since, due = INT64_MAX;
        int r;
        if (j->j.spec)
                r = sched_spec_next(j->j.spec, base, &due);
        else
                r = j->j.next_due(j->j.userdata, j->last_start, now, &due);
        if (r < 0)
                return INT64_MAX;
        /* A next-due function that still says "now" after a run (its work
         * failed, or it cannot tell) would run the job back to back. */
        if (!j->j.spec && j->last_start) {
                int64_t floor = j->last_result < 0 ? j->last_end + SCHED_RETRY_S : j->last_start + SCHED_EVERY_MIN_S;
                if (due < floor)
                        due = floor;
        }
        return due;
}

/* Logs a failure once: again only when it says something else. */
static void log_failure(struct job *j, int r, const char *error) {
        if (j->logged_error && streq(j->logged_error, error))
                return;
        free(j->logged_error);
        j->logged_error = strdup(error);
        log_error("job %s failed: %s (%s)", j->name, error, strerror(r < 0 ? -r : r));
}

static void *worker(void *arg) {
        struct job *j = arg;
        struct scheduler *s = j->s;
        _cleanup_free_ char *err = NULL;
        int r = j->j.run(j->j.userdata, &err);
        if (err && strlen(err) > SCHED_ERROR_MAX)
                err[SCHED_ERROR_MAX] = 0;
        if (r < 0 && strempty(err)) {
                free(err);
                err = strdup(strerror(-r));
        }

        pthread_mutex_lock(&s->lock);
        j->last_end = now_of(s);
        j->last_result = r < 0 ? r : 0;
        free(j->last_error);
        j->last_error = r < 0 && err ? strdup(err) : NULL;
        j->failures = r < 0 ? j->failures + 1 : 0;
        j->runs++;
        if (r < 0)
                log_failure(j, r, err ? err : "?");
        else if (j->logged_error) {
                log_info("job %s works again", j->name);
                free(j->logged_error);
                j->logged_error = NULL;
        }
        struct run_record rec = {.start = j->last_start, .end = j->last_end, .result = j->last_result,
                                 .error = j->last_error, .failures = j->failures, .runs = j->runs};
        _cleanup_free_ char *error_copy = rec.error ? strdup(rec.error) : NULL;
        rec.error = error_copy;
        unsigned failures = j->failures;
        j->due = job_due(j, j->last_end); /* for the status, until the loop looks again */
        s->changes++;
        pthread_mutex_unlock(&s->lock);

        job_store(s, j->name, &rec);
        if (s->cfg.on_result)
                s->cfg.on_result(s->cfg.userdata, j->name, r < 0 ? r : 0, error_copy, failures);

        pthread_mutex_lock(&s->lock);
        j->running = false;
        s->changes++;
        s->workers--;
        pthread_cond_broadcast(&s->cond);
        pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

/* Under lock: starts j's run on a worker thread. */
static int start_run(struct scheduler *s, struct job *j, int64_t now) {
        pthread_attr_t attr;
        pthread_t t;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        j->running = true;
        j->run_now = false;
        j->last_start = now;
        s->workers++;
        s->changes++;
        int r = -pthread_create(&t, &attr, worker, j);
        pthread_attr_destroy(&attr);
        if (r < 0) {
                j->running = false;
                s->workers--;
                return log_error_errno(r, "cannot start job %s: %m", j->name);
        }
        return 0;
}

static void *loop(void *arg) {
        struct scheduler *s = arg;
        pthread_mutex_lock(&s->lock);
        while (!s->stopping) {
                int64_t now = now_of(s), next = now + SCHED_POLL_S;
                for (size_t i = 0; i < s->n; i++) {
                        struct job *j = s->jobs[i];
                        if (j->running || j->removed)
                                continue;
                        int64_t due = job_due(j, now);
                        if (due != j->due)
                                s->changes++;
                        j->due = due;
                        if (j->due <= now)
                                (void)start_run(s, j, now);
                        else if (j->due < next)
                                next = j->due;
                }
                struct timespec ts = {.tv_sec = (time_t)(next - now + (int64_t)time(NULL))};
                pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

/* ---- the interface ---- */

static struct job *find(struct scheduler *s, const char *name) {
        for (size_t i = 0; name && i < s->n; i++)
                if (!s->jobs[i]->removed && streq(s->jobs[i]->name, name))
                        return s->jobs[i];
        return NULL;
}

int sched_add(struct scheduler *s, const struct sched_job *job) {
        if (!s || !job || !name_valid(job->name) || !job->run || (job->spec != NULL) == (job->next_due != NULL))
                return -EINVAL;
        struct job *j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        snprintf(j->name, sizeof j->name, "%s", job->name);
        j->j = *job;
        j->j.name = j->name;
        j->s = s;
        j->since = now_of(s);
        job_load(s, j);
        pthread_mutex_lock(&s->lock);
        int r = 0;
        if (find(s, j->name))
                r = -EEXIST;
        else if (s->n >= SCHED_JOBS_MAX)
                r = -E2BIG;
        else {
                struct job **v = realloc(s->jobs, (s->n + 1) * sizeof *v);
                if (!v)
                        r = -ENOMEM;
                else {
                        s->jobs = v;
                        s->jobs[s->n++] = j;
                        s->changes++;
                        j = NULL;
                        pthread_cond_broadcast(&s->cond);
                }
        }
        pthread_mutex_unlock(&s->lock);
        job_free(j);
        return r;
}

int sched_new(const struct sched_config *cfg, const struct sched_job *jobs, struct scheduler **ret) {
        if (!cfg || !ret)
                return -EINVAL;
        struct scheduler *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->cfg = *cfg;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        pthread_cond_init(&s->idle, NULL);
        for (const struct sched_job *e = jobs; e && e->name; e++) {
                int r = sched_add(s, e);
                if (r < 0) {
                        sched_free(s);
                        return log_error_errno(r, "cannot schedule job %s: %m", e->name);
                }
        }
        *ret = s;
        return 0;
}

int sched_start(struct scheduler *s) {
        if (!s || s->started)
                return -EINVAL;
        int r = -pthread_create(&s->thread, NULL, loop, s);
        if (r < 0)
                return log_error_errno(r, "cannot start the scheduler: %m");
        s->started = true;
        return 0;
}

int sched_remove(struct scheduler *s, const char *name) {
        if (!s)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        struct job *j = find(s, name);
        if (!j) {
                pthread_mutex_unlock(&s->lock);
                return -ENOENT;
        }
        j->removed = true;
        while (j->running)
                pthread_cond_wait(&s->idle, &s->lock);
        for (size_t i = 0; i < s->n; i++)
                if (s->jobs[i] == j) {
                        memmove(&s->jobs[i], &s->jobs[i + 1], (s->n - i - 1) * sizeof *s->jobs);
                        s->n--;
                        s->changes++;
                        break;
                }
        pthread_mutex_unlock(&s->lock);
        job_free(j);
        return 0;
}

int sched_run_now(struct scheduler *s, const char *name) {
        if (!s)
                return -EINVAL;
        pthread_mutex_lock(&s->lock);
        struct job *j = find(s, name);
        int r = !j ? -ENOENT : j->running || j->run_now ? -EBUSY : 0;
        if (r == 0) {
                j->run_now = true;
                pthread_cond_broadcast(&s->cond);
        }
        pthread_mutex_unlock(&s->lock);
        return r;
}

void sched_wake(struct scheduler *s) {
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

bool sched_running(struct scheduler *s, const char *name) {
        if (!s)
                return false;
        pthread_mutex_lock(&s->lock);
        struct job *j = find(s, name);
        bool running = j && j->running;
        pthread_mutex_unlock(&s->lock);
        return running;
}

uint64_t sched_status_version(struct scheduler *s) {
        return s ? s->changes : 0;
}

int sched_status_json(struct scheduler *s, json_t **ret) {
        if (!s || !ret)
                return -EINVAL;
        _cleanup_json_ json_t *a = json_array();
        if (!a)
                return -ENOMEM;
        pthread_mutex_lock(&s->lock);
        int r = 0;
        for (size_t i = 0; i < s->n && r == 0; i++) {
                struct job *j = s->jobs[i];
                json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:i, s:s?, s:I, s:i, s:b}", "name", j->name, "next_due",
                                      (json_int_t)(j->due == INT64_MAX ? 0 : j->due), "last_started_at",
                                      (json_int_t)j->last_start, "last_ended_at", (json_int_t)j->last_end, "last_result",
                                      j->last_result, "last_error", j->last_error, "runs", (json_int_t)j->runs,
                                      "failures", (int)j->failures, "running", j->running);
                if (!o || json_array_append_new(a, o) < 0)
                        r = -ENOMEM;
        }
        pthread_mutex_unlock(&s->lock);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

void sched_free(struct scheduler *s) {
        if (!s)
                return;
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (s->started)
                pthread_join(s->thread, NULL);
        pthread_mutex_lock(&s->lock);
        while (s->workers > 0)
                pthread_cond_wait(&s->idle, &s->lock);
        pthread_mutex_unlock(&s->lock);
        for (size_t i = 0; i < s->n; i++)
                job_free(s->jobs[i]);
        free(s->jobs);
        pthread_cond_destroy(&s->cond);
        pthread_cond_destroy(&s->idle);
        pthread_mutex_destroy(&s->lock);
        free(s);
}
