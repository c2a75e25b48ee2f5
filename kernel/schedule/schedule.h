/* schedule.h — the kernel's periodic work, in one scheduler.
 *
 * Schedules (spec.c): "every N m|h|d" (1 minute to 366 days) or 5-field
 * cron ("minute hour day-of-month month day-of-week": *, N, N-M, lists,
 * /STEP, month and weekday names, 0 and 7 both Sunday; when both day
 * fields are restricted either matches) in a time zone of the TZ database
 * (tz.c; NULL or "UTC": UTC). Across daylight-saving changes a local time
 * that does not exist runs once, at the end of the gap (the next valid
 * instant), and a local time that happens twice runs once, at its first.
 *
 * The scheduler (scheduler.c): jobs registered from a table (name, a
 * schedule or a next-due function, a handler), run on the scheduler's own
 * thread — one worker thread per run, so a long job delays no other and
 * never an HTTP request — one run per job at a time. Each job's last run
 * (start, end, outcome, error, consecutive failures) is kept in the kernel
 * database (table schedule_jobs, migration 0005); the next due instant is
 * computed from the last run, so a run missed while the kernel was down
 * runs once when it is back (not once per missed slot). A failure is
 * logged once, until the job succeeds again or fails differently. */
#pragma once

#include "base/base.h"
#include "base/json.h"

#include <time.h>

struct db;

#define SCHED_SPEC_MAX 128
#define SCHED_TZ_NAME_MAX 64
#define SCHED_TZ_DIR "/usr/share/zoneinfo"
#define SCHED_EVERY_MIN_S 60
#define SCHED_EVERY_MAX_S (366LL * 86400)
#define SCHED_SEARCH_YEARS 9 /* "0 0 29 2 1" may wait 8 years (1 year: -ERANGE would be wrong) */
#define SCHED_JOB_NAME_MAX 48
#define SCHED_JOBS_MAX 256
#define SCHED_ERROR_MAX 1024 /* a run's error as kept and shown */
#define SCHED_RETRY_S 600    /* a next-due job that failed is not due again sooner */

/* ---- time zones (tz.c) ---- */
struct sched_tz;
/* An Olson name ([A-Za-z0-9_+-/], each part starting with a letter or a
 * digit, at most SCHED_TZ_NAME_MAX): read from SCHED_TZ_DIR. -EINVAL bad
 * name or file, -ENOENT none. Caller frees with sched_tz_free. */
int sched_tz_load(const char *name, struct sched_tz **ret);
/* The same from a TZif file's bytes (tests, fuzzing). */
int sched_tz_parse(const char *name, const void *data, size_t len, struct sched_tz **ret);
bool sched_tz_name_valid(const char *name);
void sched_tz_free(struct sched_tz *z);
/* Seconds east of UTC at instant t (seconds since the epoch); NULL: UTC. */
int32_t sched_tz_offset(const struct sched_tz *z, int64_t t);
const char *sched_tz_name(const struct sched_tz *z);

/* Civil calendar arithmetic (proleptic Gregorian), no libc time zones. */
int64_t sched_days_from_civil(int64_t y, int m, int d);
void sched_civil_from_days(int64_t days, int64_t *ret_y, int *ret_m, int *ret_d);
int sched_weekday(int64_t days); /* 0 = Sunday */
int sched_days_in_month(int64_t y, int m);

/* A local time (seconds since the epoch as if UTC) as an instant in tz. */
enum sched_local {
        SCHED_LOCAL_EXACT,
        SCHED_LOCAL_AMBIGUOUS, /* happens twice: the first instant */
        SCHED_LOCAL_SKIPPED,   /* does not exist: the instant the gap ends */
};
int sched_local_to_utc(const struct sched_tz *tz, int64_t local, int64_t *ret, enum sched_local *ret_kind);

/* ---- schedules (spec.c) ---- */
struct sched_spec;
/* text: "every N m|h|d" (also "every Nm") or 5 cron fields; tz: an Olson
 * name, NULL or "UTC". *ret_error (caller frees) says what is wrong.
 * Caller frees *ret with sched_spec_free. */
int sched_spec_parse(const char *text, const char *tz, struct sched_spec **ret, char **ret_error);
void sched_spec_free(struct sched_spec *s);
static inline void sched_spec_freep(struct sched_spec **s) {
        sched_spec_free(*s);
}
/* The first due instant strictly after `after` (seconds since the epoch):
 * "every": after + N; cron: the next matching local minute. -ERANGE when
 * none comes within SCHED_SEARCH_YEARS. */
int sched_spec_next(const struct sched_spec *s, int64_t after, int64_t *ret);
/* The interval of an "every" schedule; 0 for cron. */
int64_t sched_spec_every(const struct sched_spec *s);
/* The shortest gap between the next `samples` runs after from (routines
 * must be 15 minutes apart). */
int sched_spec_min_gap(const struct sched_spec *s, int64_t from, int samples, int64_t *ret);
/* Borrowed; NULL for UTC. */
const struct sched_tz *sched_spec_tz(const struct sched_spec *s);

/* ---- the scheduler (scheduler.c) ---- */

/* A job. name: [a-z0-9_.-]{1,SCHED_JOB_NAME_MAX}, unique. Exactly one of
 * spec (borrowed; outlives the job) or next_due. next_due gets the last
 * run's start (0: never) and now, and says when the job is due next
 * (<= now: now; INT64_MAX: not for now — call sched_wake when that
 * changes); a negative return skips the job until sched_wake. Whatever it
 * says, a next-due job runs at most once a minute, and not within
 * SCHED_RETRY_S of a failed run. next_due is called with the scheduler's
 * lock held: it must be quick and call no sched_* function. run does the
 * work on a worker thread: >= 0 done, < 0 failed with *ret_error (caller —
 * the scheduler — frees; may be left NULL). */
struct sched_job {
        const char *name;
        const struct sched_spec *spec;
        int (*next_due)(void *userdata, int64_t last_run_s, int64_t now_s, int64_t *ret_due_s);
        int (*run)(void *userdata, char **ret_error);
        void *userdata;
};

/* Told after every run (from the worker thread): consecutive failures is 0
 * after a success. The doctor will count a job's failures here. */
typedef void (*sched_result_fn)(void *userdata, const char *job, int result, const char *error,
                                unsigned consecutive_failures);

struct sched_config {
        struct db *kdb;            /* kernel memory (borrowed); NULL: nothing is kept across restarts */
        sched_result_fn on_result; /* may be NULL */
        void *userdata;
        int64_t (*now_s)(void);    /* the clock (tests); NULL: the real one */
};

struct scheduler;

/* Jobs: a table ending with a zeroed entry (may be NULL); each is checked
 * and copied (the name is copied; spec and userdata stay borrowed). Their
 * last runs are read from kdb. Nothing runs before sched_start. */
int sched_new(const struct sched_config *cfg, const struct sched_job *jobs, struct scheduler **ret);
/* Adds one job (also while running): -EEXIST a job of that name exists,
 * -E2BIG past SCHED_JOBS_MAX, -EINVAL a bad entry. */
int sched_add(struct scheduler *s, const struct sched_job *job);
/* Removes a job; a run in progress finishes first (waits for it: never
 * call it from that job's own run). -ENOENT unknown. */
int sched_remove(struct scheduler *s, const char *name);
/* Starts the scheduler's thread. */
int sched_start(struct scheduler *s);
/* Runs a job now (its schedule goes on from this run): -ENOENT unknown,
 * -EBUSY it runs already. */
int sched_run_now(struct scheduler *s, const char *name);
/* Asks every next_due again (something it depends on changed). */
void sched_wake(struct scheduler *s);
/* Whether a job runs right now. */
bool sched_running(struct scheduler *s, const char *name);
/* Each job's name, next due, last run (start, end, result, error), runs,
 * consecutive failures, running — as a JSON array. Caller owns the
 * reference (json_decref). */
int sched_status_json(struct scheduler *s, json_t **ret);
/* Changes whenever what sched_status_json() shows changes (a counter,
 * never going back): a cache of it is exact while this stays the same,
 * when read before the JSON. No lock taken. 0 for NULL. */
uint64_t sched_status_version(struct scheduler *s);
/* Stops the thread and waits for every run to end. Frees. Accepts NULL. */
void sched_free(struct scheduler *s);
