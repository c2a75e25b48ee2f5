/* routines.h — routines and jobs (issue 18 "Routines and jobs"): the Seed's
 * own work on a schedule, run by kernel/schedule's one scheduler.
 *
 * A routine is a prompt the owner approved (the chat's create_routine,
 * dangerous, asked every time): on its schedule the prompt is run by an
 * agent with the chat's read-only tools only (the safe ones, offered in the
 * chat phase: reading files, describe_data, query_data, call_api with GET,
 * outbound_status; every other decision is deny and no approval is ever
 * asked), never start_evolution, for at most ROUTINES_RUN_TIMEOUT_MS (a
 * stopped run is recorded as failed, saying so), one
 * routine at a time. Before each run spend_allows(spend, "routine") is asked:
 * over the month's budget the run is recorded as skipped (the budget's notice
 * is posted once by kernel/spend). The model is asked to answer exactly
 * ROUTINES_QUIET when there is nothing to tell the owner: such an answer
 * (routines_quiet) is recorded as a quiet run; any other answer is posted in
 * the chat as the routine's report (cfg.post: a message of role "routine",
 * never the owner's words). At most ROUTINES_MAX routines; their runs are at
 * least ROUTINES_MIN_GAP_S apart.
 *
 * A job is declared by the organism in organism/routines.yaml
 * (routines_jobs_parse) and synced from the live workspace whenever the
 * organism becomes healthy (a deploy, a restart): a valid file replaces the
 * jobs, an invalid one changes nothing and its error is kept and shown. A
 * run is one request to the live organism's path through its socket
 * (organism_http), with the header ROUTINES_JOB_TOKEN_HEADER: the per-Seed
 * job token, which the organism gets in its environment as
 * ROUTINES_JOB_TOKEN_ENV so the app can tell the kernel's call from anyone
 * else's. A 2xx answer within ROUTINES_JOB_TIMEOUT_MS is a success (none by
 * then: a failed run, saying so); at most
 * ROUTINES_JOBS_AT_ONCE run at a time. Each failure is told to
 * cfg.on_job_failure with the count of failures in a row.
 *
 * Schedules are kernel/schedule's ("every N m|h|d" or 5-field cron, in a
 * time zone). The next run is computed from the last (kept by the scheduler
 * in schedule_jobs), so a run missed while the kernel was down runs once.
 * The last ROUTINES_RUNS_KEPT runs of each routine and job are kept (table
 * routine_runs, migration 0009).
 *
 * Thread-safe. */
#pragma once

#include "base/base.h"

struct cfg;
struct db;
struct live;
struct mind;
struct organism;
struct outbound;
struct scheduler;
struct spend;

#define ROUTINES_MAX 20
#define ROUTINES_MIN_GAP_S (15 * 60)
#define ROUTINES_GAP_SAMPLES 64              /* next runs the 15-minute rule looks at */
#define ROUTINES_NAME_MAX 48                 /* [a-z0-9][a-z0-9_-]* */
#define ROUTINES_JOB_NAME_MAX 44             /* "job.<name>" is its scheduler name (SCHED_JOB_NAME_MAX 48) */
#define ROUTINES_PROMPT_MAX 8000
#define ROUTINES_RUN_TIMEOUT_MS (30 * 60 * 1000)
#define ROUTINES_MAX_TURNS 20
#define ROUTINES_RUNS_KEPT 100
#define ROUTINES_REPORT_MAX (15 * 1024)      /* a report posted in the chat (cut past it) */
#define ROUTINES_QUIET "NOTHING_TO_REPORT"

#define ROUTINES_JOBS_FILE "organism/routines.yaml"
#define ROUTINES_JOBS_FILE_MAX (64 * 1024)
#define ROUTINES_JOBS_MAX 32
#define ROUTINES_JOB_PATH_MAX 512
#define ROUTINES_JOB_TIMEOUT_MS (5 * 60 * 1000)
#define ROUTINES_JOBS_AT_ONCE 4
#define ROUTINES_JOB_TOKEN_HEADER "X-Seed-Job-Token"
#define ROUTINES_JOB_TOKEN_ENV "SEED_JOB_TOKEN"
#define ROUTINES_ERROR_MAX 1024

/* ---- rules (rules.c): pure, for the tools, the API and tests ---- */

/* Whether a routine's answer means "nothing to report": ROUTINES_QUIET,
 * ignoring case, surrounding white space, Markdown emphasis or code marks
 * around it and one final full stop — and nothing else. */
bool routines_quiet(const char *answer);
/* A routine's or job's name: 1..ROUTINES_NAME_MAX of [a-z0-9_-], starting
 * with a letter or digit (a job's also at most ROUTINES_JOB_NAME_MAX). */
bool routines_name_valid(const char *name);
/* A schedule (kernel/schedule's text) in tz (NULL or "": UTC): -EINVAL with
 * *ret_error (caller frees) when it does not parse or, for a routine, when
 * two of its next ROUTINES_GAP_SAMPLES runs after now_s come less than
 * ROUTINES_MIN_GAP_S apart. */
int routines_schedule_check(const char *schedule, const char *tz, bool routine, int64_t now_s, char **ret_error);

/* One job of organism/routines.yaml. */
struct routines_job {
        char *name;      /* routines_name_valid, ≤ ROUTINES_JOB_NAME_MAX */
        char *method;    /* GET, POST, PUT, PATCH or DELETE (default POST) */
        char *path;      /* "/" then [A-Za-z0-9/._~%!$&'()*+,;=:@?-], ≤ ROUTINES_JOB_PATH_MAX */
        char *schedule;  /* kernel/schedule's text */
        char *tz;        /* time zone; "UTC" by default */
        size_t line;     /* where it is declared */
};
/* Parses and validates organism/routines.yaml:
 *   jobs:
 *     - name: nightly-digest
 *       path: /jobs/digest
 *       method: POST            # optional
 *       schedule: "0 7 * * *"
 *       tz: Europe/Lisbon       # optional
 * At most ROUTINES_JOBS_MAX jobs, names unique. -EINVAL with *ret_error
 * ("organism/routines.yaml:LINE:COL: …", caller frees) on any bad input:
 * then nothing is returned. An empty file has no jobs. Caller frees *ret
 * with routines_jobs_free(*ret, *ret_n). */
int routines_jobs_parse(const char *text, size_t len, int64_t now_s, struct routines_job **ret, size_t *ret_n,
                        char **ret_error);
void routines_jobs_free(struct routines_job *jobs, size_t n);

/* ---- routines and jobs (routines.c) ---- */

struct routines_config {
        const char *seed_dir;        /* the live Seed's folder (copied) */
        const struct cfg *cfg;       /* seed.yaml (borrowed) */
        struct db *kdb;              /* borrowed */
        struct scheduler *sched;     /* borrowed; routines and jobs are its jobs
                                      * "routine.<id>" and "job.<name>" */
        struct mind *mind;           /* borrowed; NULL: routine runs fail ("no model") */
        struct spend *spend;         /* borrowed; NULL: no budget */
        struct live *live;           /* borrowed; NULL: the live-data tools say "not available" */
        struct outbound *outbound;   /* borrowed; may be NULL */
        struct organism *organism;   /* the live one (borrowed); NULL: job runs fail */
        const char *job_token;       /* the per-Seed job token (copied; never logged) */
        /* Posts a routine's report in the chat as a message of role
         * "routine" (>= 0 posted). May be NULL: then reports are only kept
         * in the runs. Called from a scheduler worker, no lock held. */
        int (*post)(void *userdata, const char *routine_name, const char *text);
        /* Every failed job run, with how many failed in a row (the doctor
         * opens an incident at 2). May be NULL. From a scheduler worker. */
        void (*on_job_failure)(void *userdata, const char *job, const char *error, unsigned consecutive);
        void *userdata;
        /* Optional; 0 means the default (what the kernel uses; tests set
         * short ones). Negative: routines_new() says -EINVAL. */
        int job_timeout_ms;      /* a job's request; ROUTINES_JOB_TIMEOUT_MS */
        int routine_timeout_ms;  /* a routine's run; ROUTINES_RUN_TIMEOUT_MS */
};

struct routines;

/* Loads the routines and jobs kept in kdb and adds them to the scheduler. */
int routines_new(const struct routines_config *cfg, struct routines **ret);
/* Stops a routine run (at its next model or tool call) and removes every
 * scheduler job of ours (waiting for runs in progress). Accepts NULL. */
void routines_free(struct routines *r);

/* Whether a routine of these fields could be created now (before the
 * owner is asked): 0, or routines_create()'s errors with *ret_error. */
int routines_check(struct routines *r, const char *name, const char *prompt, const char *schedule, const char *tz,
                   char **ret_error);
/* Creates a routine (the owner approved exactly these fields as the call
 * approval_id). -EINVAL bad fields, -EEXIST that name exists, -E2BIG
 * ROUTINES_MAX exist: *ret_error (caller frees) says why. *ret_id: its id
 * (caller frees). */
int routines_create(struct routines *r, const char *name, const char *prompt, const char *schedule,
                    const char *tz, const char *approval_id, char **ret_id, char **ret_error);

/* {"routines": [{id, name, prompt, schedule, tz, paused, created_at,
 * running, last_run}], "jobs": [{name, method, path, schedule, tz, paused,
 * running, last_run}], "jobs_error": text or null, "max": ROUTINES_MAX}.
 * Caller frees. */
int routines_list_json(struct routines *r, char **ret_json);

enum routines_kind { ROUTINES_ROUTINE, ROUTINES_JOB };
/* kind "routine" or "job"; -EINVAL otherwise. */
int routines_kind_parse(const char *s, enum routines_kind *ret);
/* The runs of one, newest first (at most ROUTINES_RUNS_KEPT): [{id,
 * started_at, ended_at, outcome, text, error}]. -ENOENT unknown. */
int routines_runs_json(struct routines *r, enum routines_kind kind, const char *id, char **ret_json);
/* -ENOENT unknown. A resumed one runs at its next slot (not at once). */
int routines_set_paused(struct routines *r, enum routines_kind kind, const char *id, bool paused);
/* -ENOENT unknown, -EBUSY it runs already. */
int routines_run_now(struct routines *r, enum routines_kind kind, const char *id);
/* Deletes a routine with its runs (waits for a run in progress). -ENOENT
 * unknown; jobs: -EPERM (they are the organism's: change routines.yaml). */
int routines_delete(struct routines *r, enum routines_kind kind, const char *id);

/* Reads workspace/organism/routines.yaml (a missing file: no jobs) and
 * makes the jobs exactly those. Invalid: nothing changes, the error is kept
 * for routines_list_json and returned (-EINVAL). Logs its outcome. */
int routines_jobs_sync(struct routines *r, const char *workspace);
