/* rules.c — what a routine and a job may be: names, schedules, the quiet
 * answer, organism/routines.yaml. See routines.h. */
#include "routines/routines.h"
#include "base/log.h"
#include "config/config.h"
#include "schedule/schedule.h"

#include <ctype.h>

/* The scheduler names entries "job.<name>" and "routine.<id>" (id: a
 * bigint, at most 19 digits): both must fit its limit. */
_Static_assert(sizeof "job." - 1 + ROUTINES_JOB_NAME_MAX <= SCHED_JOB_NAME_MAX, "a job's scheduler name fits");
_Static_assert(sizeof "routine." - 1 + 19 <= SCHED_JOB_NAME_MAX, "a routine's scheduler name fits");

bool routines_quiet(const char *answer) {
        if (!answer)
                return false;
        const char *p = answer, *e = answer + strlen(answer);
        /* White space and the marks Markdown wraps a word in, either side. */
        while (p < e && (isspace((unsigned char)*p) || *p == '*' || *p == '_' || *p == '`'))
                p++;
        while (e > p && (isspace((unsigned char)e[-1]) || e[-1] == '*' || e[-1] == '_' || e[-1] == '`'))
                e--;
        if (e > p && e[-1] == '.')
                e--;
        size_t n = strlen(ROUTINES_QUIET);
        return (size_t)(e - p) == n && strncasecmp(p, ROUTINES_QUIET, n) == 0;
}

bool routines_name_valid(const char *name) {
        if (!name || !*name || strlen(name) > ROUTINES_NAME_MAX || !isalnum((unsigned char)name[0]))
                return false;
        for (const char *p = name; *p; p++)
                if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '_'))
                        return false;
        return true;
}

int routines_schedule_check(const char *schedule, const char *tz, bool routine, int64_t now_s, char **ret_error) {
        _cleanup_(sched_spec_freep) struct sched_spec *s = NULL;
        _cleanup_free_ char *why = NULL;
        int r = sched_spec_parse(schedule ? schedule : "", strempty(tz) ? NULL : tz, &s, &why);
        if (r < 0) {
                if (ret_error)
                        (void)xasprintf(ret_error, "the schedule '%.*s' is not valid: %s", SCHED_SPEC_MAX,
                                        schedule ? schedule : "", why ? why : strerror(-r));
                return -EINVAL;
        }
        if (!routine)
                return 0;
        int64_t gap = 0;
        r = sched_spec_min_gap(s, now_s, ROUTINES_GAP_SAMPLES, &gap);
        if (r < 0 || gap < ROUTINES_MIN_GAP_S) {
                if (ret_error)
                        (void)xasprintf(ret_error,
                                        "the schedule '%s' runs %s: routines run at least %d minutes apart",
                                        schedule, r < 0 ? "too rarely to check" : "more often than that",
                                        ROUTINES_MIN_GAP_S / 60);
                return -EINVAL;
        }
        return 0;
}

/* ---- organism/routines.yaml ---- */

enum { K_NAME, K_PATH, K_METHOD, K_SCHEDULE, K_TZ, _K_MAX };
static const char *const job_keys[] = {
        [K_NAME] = "name", [K_PATH] = "path", [K_METHOD] = "method", [K_SCHEDULE] = "schedule", [K_TZ] = "tz", NULL,
};
static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};

static bool path_valid(const char *p) {
        if (!p || p[0] != '/' || strlen(p) > ROUTINES_JOB_PATH_MAX || strstr(p, "//") || strstr(p, "/../") ||
            endswith(p, "/.."))
                return false;
        for (; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("/._~%!$&'()*+,;=:@?-", *p))
                        return false;
        return true;
}

static bool method_valid(const char *m) {
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                if (streq(m, methods[i]))
                        return true;
        return false;
}

void routines_jobs_free(struct routines_job *jobs, size_t n) {
        for (size_t i = 0; jobs && i < n; i++) {
                free(jobs[i].name);
                free(jobs[i].method);
                free(jobs[i].path);
                free(jobs[i].schedule);
                free(jobs[i].tz);
        }
        free(jobs);
}

/* Checks record rec (line) and moves its values into *job. */
static int job_take(struct cfg_record *rec, struct routines_job *all, size_t n, int64_t now_s,
                    struct routines_job *job, char **ret_error) {
        char **v = rec->values;
        _cleanup_free_ char *why = NULL;
        const char *bad = NULL;
        if (!v[K_NAME] || !v[K_PATH] || !v[K_SCHEDULE])
                bad = "a job needs a name, a path and a schedule";
        else if (!routines_name_valid(v[K_NAME]) || strlen(v[K_NAME]) > ROUTINES_JOB_NAME_MAX) {
                if (xasprintf(&why, "the name must be 1 to %d of a-z, 0-9, '-' and '_', starting with a letter or "
                                    "digit", ROUTINES_JOB_NAME_MAX) < 0)
                        return -ENOMEM;
                bad = why;
        }
        else if (!path_valid(v[K_PATH]))
                bad = "the path must start with '/' and hold only URL path and query characters (at most 512, no "
                      "'//' or '..')";
        else if (v[K_METHOD] && !method_valid(v[K_METHOD]))
                bad = "the method must be GET, POST, PUT, PATCH or DELETE";
        else if (v[K_TZ] && !sched_tz_name_valid(v[K_TZ]))
                bad = "the time zone is not a valid name";
        else if (routines_schedule_check(v[K_SCHEDULE], v[K_TZ], false, now_s, &why) < 0)
                bad = why ? why : "the schedule is not valid";
        for (size_t i = 0; !bad && i < n; i++)
                if (streq(all[i].name, v[K_NAME]))
                        bad = "a job of that name is declared above";
        if (bad)
                return xasprintf(ret_error, "%s:%zu: %s", ROUTINES_JOBS_FILE, rec->line, bad) < 0 ? -ENOMEM
                                                                                                   : -EINVAL;
        *job = (struct routines_job){
                .name = TAKE_PTR(v[K_NAME]),
                .path = TAKE_PTR(v[K_PATH]),
                .schedule = TAKE_PTR(v[K_SCHEDULE]),
                .method = v[K_METHOD] ? TAKE_PTR(v[K_METHOD]) : strdup("POST"),
                .tz = v[K_TZ] ? TAKE_PTR(v[K_TZ]) : strdup("UTC"),
                .line = rec->line,
        };
        return job->method && job->tz ? 0 : -ENOMEM;
}

int routines_jobs_parse(const char *text, size_t len, int64_t now_s, struct routines_job **ret, size_t *ret_n,
                        char **ret_error) {
        struct cfg_record *recs = NULL;
        size_t n = 0;
        _cleanup_free_ char *err = NULL;
        if (len > ROUTINES_JOBS_FILE_MAX) {
                if (ret_error)
                        (void)xasprintf(ret_error, "%s: larger than %d KiB", ROUTINES_JOBS_FILE,
                                        ROUTINES_JOBS_FILE_MAX / 1024);
                return -EINVAL;
        }
        int r = cfg_records_parse(text, len, ROUTINES_JOBS_FILE, "jobs", job_keys, ROUTINES_JOBS_MAX, &recs, &n,
                                  &err);
        if (r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(err);
                return r;
        }
        struct routines_job *jobs = calloc(n + 1, sizeof *jobs);
        size_t got = 0;
        r = jobs ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < n; i++)
                if ((r = job_take(&recs[i], jobs, got, now_s, &jobs[got], &err)) >= 0 || jobs[got].name)
                        got++;
        cfg_records_free(recs, n);
        if (r < 0) {
                routines_jobs_free(jobs, got);
                if (ret_error)
                        *ret_error = TAKE_PTR(err);
                return r;
        }
        *ret = jobs;
        *ret_n = got;
        return 0;
}
