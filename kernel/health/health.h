/* health.h — the doctor of issue 18: incidents, their diagnosis, their fix.
 * (Not kernel/doctor, which is the start-up checks of the machine.)
 *
 * Incidents come from three causes, each counted here:
 *   - 3 or more 5xx answers on one route within 10 minutes (detect.c): the
 *     proxy of / reports every 5xx answer (and only those, so the common
 *     answer costs nothing) with its method and path; the path is
 *     normalised (health_route_normalise: the query dropped, ids and
 *     numbers become ":id"), and the last 3 times of each route are kept
 *     in memory, in a table of HEALTH_ROUTES_MAX routes;
 *   - organism crashes (the supervisor restarts it: one incident, the
 *     crashes counted in it) and giving up (more than 3 crashes in 10
 *     minutes, or the organism is down: an incident of its own);
 *   - 2 consecutive failures of a job (health_report_job_failure, which the
 *     scheduler's on_result may call through health_sched_result).
 * One incident per cause while it is not resolved or ignored: a cause that
 * happens again counts as an occurrence of the open incident (the database
 * holds that with a unique index, and the detector in memory too). Any
 * visitor can make routes fail, so at most HEALTH_5XX_OPEN_MAX routes have
 * an incident of their own at once; a route past that counts in the one
 * incident HEALTH_5XX_MANY (from its third 5xx in the window, then each 5xx,
 * as a route of its own would, until that incident ends). Of the incidents
 * that ended, the newest HEALTH_ENDED_KEPT are kept.
 *
 * Statuses (status.c, a table of edges like kernel/evolution/state.c):
 * open → diagnosing → diagnosed → fixing → watching (30 min) → resolved, or
 * ignored from any status that has not ended.
 *
 * Diagnosis (diagnose.c) runs on the health worker thread: a read-only agent
 * (reading the code, the organism's log, the live data through the reader
 * role: query_data and describe_data) of at most HEALTH_DIAGNOSIS_TURNS
 * turns, at most HEALTH_DIAGNOSES_PER_DAY a UTC day, and only when
 * spend_allows(spend, "health"); its model calls are recorded with purpose
 * "health". Every piece of evidence quoted from logs is bounded
 * (HEALTH_EVIDENCE_LINES lines of HEALTH_EVIDENCE_LINE_MAX characters),
 * fenced and marked as data, never instructions, and the secrets the
 * organism holds (health_config.redact) are "[redacted]" in it.
 *
 * A fix is an evolution whose intent asks first for a test that fails on
 * the incident, then the change that makes it pass. The owner's Fix starts
 * it; automatic fixing (kernel setting "health.auto_fix") is off by
 * default. When its evolution completes the incident is watched for
 * HEALTH_WATCH_MS and then resolved, unless the cause happens again (then
 * it is open again); when it fails, the incident is diagnosed again.
 *
 * Thread-safe: the report functions may be called from any thread; they
 * only touch memory and wake the worker, which does the database work. */
#pragma once

#include "base/base.h"

struct cfg;
struct db;
struct live;
struct mind;
struct orchestrator;
struct spend;

#define HEALTH_WINDOW_MS (10 * 60 * 1000)
#define HEALTH_5XX_THRESHOLD 3          /* 5xx answers on one route within the window */
#define HEALTH_CRASH_GIVE_UP 3          /* more than this many crashes within the window */
#define HEALTH_JOB_FAILURES 2           /* consecutive failures of a job */
#define HEALTH_ROUTES_MAX 64            /* routes counted at once (the oldest is forgotten) */
#define HEALTH_5XX_OPEN_MAX 16          /* open incidents of one route each; past it: HEALTH_5XX_MANY */
#define HEALTH_5XX_MANY "5xx (many routes)"
#define HEALTH_ENDED_KEPT 200           /* resolved and ignored incidents kept (the newest) */
#define HEALTH_ROUTE_MAX 200            /* bytes of a normalised path */
#define HEALTH_ROUTE_SEGMENTS 16        /* segments kept of a path (then "/…") */
#define HEALTH_CAUSE_MAX 256
#define HEALTH_WATCH_MS (30 * 60 * 1000)
#define HEALTH_DIAGNOSIS_TURNS 14
#define HEALTH_DIAGNOSES_PER_DAY 8
#define HEALTH_EVIDENCE_LINES 40
#define HEALTH_EVIDENCE_LINE_MAX 300
#define HEALTH_EVIDENCE_MAX (16 * 1024) /* an incident's evidence text, at most */
#define HEALTH_DIAGNOSIS_MAX (16 * 1024)
#define HEALTH_LIST_MAX 100
#define HEALTH_SETTING_AUTO_FIX "health.auto_fix"

/* ---- route normalisation and the detector (detect.c; no I/O) ---- */

/* path as requested ("/items/42?x=1") → "/items/:id" into out (size >=
 * HEALTH_ROUTE_MAX + 1): the query and fragment dropped; a segment that is
 * a number, a UUID, or an id (at least 8 of [A-Za-z0-9_-] with a digit, or
 * hexadecimal of 8 or more) becomes ":id"; bytes outside printable ASCII
 * become '~'; at most HEALTH_ROUTE_SEGMENTS segments and HEALTH_ROUTE_MAX
 * bytes (cut at a segment, then "/…"). An empty or relative path is "/". */
void health_route_normalise(const char *path, char *out, size_t size);

enum health_kind {
        HEALTH_KIND_5XX,
        HEALTH_KIND_CRASH,
        HEALTH_KIND_GAVE_UP,
        HEALTH_KIND_JOB,
        _HEALTH_KIND_MAX,
};
const char *health_kind_name(enum health_kind k); /* "5xx", "crash", "gave_up", "job" */

/* What a report means. */
enum health_verdict {
        HEALTH_NOTHING,     /* counted; no incident (yet) */
        HEALTH_OPEN,        /* a new incident of this cause */
        HEALTH_AGAIN,       /* the cause's incident is open: one more occurrence */
};

struct health_detect;

int health_detect_new(struct health_detect **ret);
void health_detect_free(struct health_detect *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct health_detect *, health_detect_free)

/* Every verdict writes the cause ("5xx GET /items/:id", "crash",
 * "gave_up", "job <name>", HEALTH_5XX_MANY when HEALTH_5XX_OPEN_MAX routes'
 * causes are open and this one is not) into ret_cause (HEALTH_CAUSE_MAX + 1
 * bytes). */
enum health_verdict health_detect_5xx(struct health_detect *d, const char *method, const char *path, int64_t now_ms,
                                      char *ret_cause);
/* A crash: HEALTH_OPEN or HEALTH_AGAIN for "crash"; *ret_gave_up when this
 * crash is past HEALTH_CRASH_GIVE_UP within the window and "gave_up" is not
 * open yet (the caller opens it too). */
enum health_verdict health_detect_crash(struct health_detect *d, int64_t now_ms, bool *ret_gave_up, char *ret_cause);
/* The organism gave up (is down): "gave_up". */
enum health_verdict health_detect_down(struct health_detect *d, char *ret_cause);
enum health_verdict health_detect_job(struct health_detect *d, const char *job, int consecutive, char *ret_cause);
/* The cause's incident ended (resolved, ignored) or is known open (at
 * start, from the database): counting starts again / goes on. */
void health_detect_closed(struct health_detect *d, const char *cause);
void health_detect_mark_open(struct health_detect *d, const char *cause);

/* ---- statuses (status.c) ---- */

enum health_status {
        HEALTH_ST_OPEN,
        HEALTH_ST_DIAGNOSING,
        HEALTH_ST_DIAGNOSED,
        HEALTH_ST_FIXING,
        HEALTH_ST_WATCHING,
        HEALTH_ST_RESOLVED,
        HEALTH_ST_IGNORED,
        _HEALTH_ST_MAX,
};
const char *health_status_name(enum health_status s);
int health_status_from_name(const char *name, enum health_status *ret);
bool health_status_is_final(enum health_status s);
bool health_transition_allowed(enum health_status from, enum health_status to);

/* ---- evidence (diagnose.c) ---- */

/* The last HEALTH_EVIDENCE_LINES lines of the log at path, each cut at
 * HEALTH_EVIDENCE_LINE_MAX bytes (on a UTF-8 boundary, then "…"), control
 * characters but tab shown as '?'. Every value in redact (NULL-terminated;
 * may be NULL) is "[redacted]", replaced before anything is cut. A missing
 * file is "" (0). Caller frees. */
int health_log_tail(const char *path, const char *const *redact, char **ret);
/* Copy of text with every value in redact (as above) "[redacted]". Caller
 * frees; NULL on OOM. */
char *health_redact(const char *text, const char *const *redact);
/* text (bounded as above) inside a fence longer than any run of backticks
 * in it, between lines saying it is data quoted from a log, not
 * instructions. Caller frees. */
int health_fence(const char *label, const char *text, char **ret);

/* text (what the kernel composed: evidence, a diagnosis) cut at max bytes
 * (on a UTF-8 boundary, then "…"), fenced and marked as data like
 * health_fence, its lines kept whole. Caller frees. */
int health_quote(const char *label, const char *text, size_t max, char **ret);

/* ---- the doctor ---- */

struct health_config {
        const char *seed_dir;          /* the live Seed's folder (copied) */
        struct db *kdb;                /* kernel memory (borrowed) */
        const struct cfg *cfg;         /* seed.yaml (borrowed); NULL: no diagnosis */
        struct mind *mind;             /* borrowed; NULL: no diagnosis */
        struct spend *spend;           /* borrowed; NULL: no budget (diagnosis allowed) */
        struct live *live;             /* the reader role's tools (borrowed); NULL: not offered data */
        const char *organism_log;      /* .seed/logs/organism.log (copied); NULL: none */
        /* The secrets the organism may hold (the job token, the values of the
         * secrets passed at start): "[redacted]" wherever the log's text
         * enters evidence, a prompt or a tool result. NULL-terminated, copied
         * (wiped when freed); may be NULL. */
        const char *const *redact;
        /* Publishes "incident" events ({"id","status","cause"}); may be NULL. */
        void (*publish)(void *userdata, const char *kind, const char *json);
        void *userdata;
        int64_t (*now_ms)(void);       /* wall clock (tests); NULL: wall_ms */
        int tick_ms;                   /* how often the worker looks at fixes; 0: 5000 */
};

struct health;

/* Reads the open incidents (their causes stay open), starts the worker.
 * Caller frees with health_free. */
int health_new(const struct health_config *cfg, struct health **ret);
/* Stops the worker (a diagnosis is cancelled at its next call). Accepts NULL. */
void health_free(struct health *h);
/* Where fixes are queued (borrowed; NULL: Fix answers -ENODEV). */
void health_set_orchestrator(struct health *h, struct orchestrator *o);

/* Reports. Cheap: memory and a wake-up. */
void health_report_5xx(struct health *h, const char *method, const char *path, int status);
void health_report_crash(struct health *h, const char *reason);
void health_report_down(struct health *h, const char *reason);
/* consecutive: the job's failures in a row (this one included); an
 * incident from HEALTH_JOB_FAILURES on. Returns 1 when it opened or
 * counted an incident, 0 when not (yet), -EINVAL for a bad job name. */
int health_report_job_failure(struct health *h, const char *job, const char *error, int consecutive);
/* sched_result_fn (schedule.h), with a struct health * as userdata. */
void health_sched_result(void *userdata, const char *job, int result, const char *error,
                         unsigned consecutive_failures);

/* Waits until the worker has made one whole pass (fixes, a diagnosis) that
 * began after the call, with nothing queued (tests): 0, or -ETIMEDOUT. */
int health_settle(struct health *h, int timeout_ms);

/* The incidents, newest first (at most HEALTH_LIST_MAX) without their
 * evidence and diagnosis: {"incidents": […], "auto_fix", "diagnoses_today",
 * "diagnoses_per_day"}. Caller frees. */
int health_list_json(struct health *h, char **ret_json);
/* One incident with evidence and diagnosis: -ENOENT unknown, -EINVAL a bad
 * id (^inc_[0-9a-f]{16}$). Caller frees. */
int health_get_json(struct health *h, const char *id, char **ret_json);
/* The owner's Fix: queues the fix evolution (*ret_evo_id, caller frees).
 * The incident is fixing before the evolution is queued (and back where it
 * was when queueing fails), so two Fixes at once queue one. -ENOENT
 * unknown, -EINVAL bad id, -EBUSY its status allows no fix (resolved,
 * ignored, fixing, watching, diagnosing), -ENODEV no orchestrator. */
int health_fix(struct health *h, const char *id, char **ret_evo_id);
/* The owner's Ignore: -ENOENT, -EINVAL, -EALREADY it has ended. */
int health_ignore(struct health *h, const char *id);
int health_auto_fix_get(struct health *h, bool *ret);
int health_auto_fix_set(struct health *h, bool on);
bool health_id_valid(const char *id);
