/* Unit tests for kernel/schedule: "every" and cron schedules parsed and
 * bounded, the next due instant in UTC and in real time zones of the TZ
 * database across daylight-saving changes (a time that does not exist,
 * one that happens twice), and the scheduler itself on a fake clock: a run
 * missed during a downtime runs once, one run per job at a time, failures
 * counted and kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "base/json.h"
#include "schedule/schedule.h"

#include <pthread.h>
#include <unistd.h>

/* Seconds since the epoch of a UTC date and time. */
static int64_t utc(int y, int mo, int d, int h, int mi) {
        return sched_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60;
}

static int64_t next_of(const char *text, const char *tz, int64_t after) {
        struct sched_spec *s = NULL;
        _cleanup_free_ char *err = NULL;
        int r = sched_spec_parse(text, tz, &s, &err);
        if (r < 0)
                fail_msg("'%s' (%s) did not parse: %s", text, tz ? tz : "UTC", err ? err : "?");
        int64_t t = 0;
        assert_int_equal(sched_spec_next(s, after, &t), 0);
        sched_spec_free(s);
        return t;
}

static void assert_refused(const char *text, const char *tz, const char *says) {
        struct sched_spec *s = NULL;
        _cleanup_free_ char *err = NULL;
        int r = sched_spec_parse(text, tz, &s, &err);
        if (r >= 0)
                fail_msg("'%s' was accepted", text);
        assert_null(s);
        if (says && (!err || !strstr(err, says)))
                fail_msg("'%s': the error '%s' does not say '%s'", text, err ? err : "(none)", says);
}

static bool have_zone(const char *name) {
        _cleanup_free_ char *p = NULL;
        return xasprintf(&p, "%s/%s", SCHED_TZ_DIR, name) >= 0 && access(p, R_OK) == 0;
}

#define NEED_ZONE(z)                                                                     \
        do {                                                                             \
                if (!have_zone(z)) {                                                     \
                        print_message("no %s in %s (tzdata missing)\n", z, SCHED_TZ_DIR); \
                        skip();                                                          \
                }                                                                        \
        } while (0)

static void test_calendar(void **state) {
        (void)state;
        assert_int_equal(sched_days_from_civil(1970, 1, 1), 0);
        assert_int_equal(sched_days_from_civil(2000, 3, 1), 11017);
        int64_t y;
        int m, d;
        sched_civil_from_days(sched_days_from_civil(2028, 2, 29), &y, &m, &d);
        assert_true(y == 2028 && m == 2 && d == 29);
        sched_civil_from_days(-1, &y, &m, &d);
        assert_true(y == 1969 && m == 12 && d == 31);
        assert_int_equal(sched_weekday(0), 4);                                /* a Thursday */
        assert_int_equal(sched_weekday(sched_days_from_civil(2026, 12, 3)), 4); /* a Thursday too */
        assert_int_equal(sched_days_in_month(2100, 2), 28);
        assert_int_equal(sched_days_in_month(2000, 2), 29);
}

static void test_every(void **state) {
        (void)state;
        int64_t t = utc(2026, 12, 3, 6, 0);
        assert_int_equal(next_of("every 5m", NULL, t), t + 300);
        assert_int_equal(next_of("every 2 h", NULL, t), t + 7200);
        assert_int_equal(next_of("every 1d", "Europe/Paris", t), t + 86400); /* an interval knows no zone */
        assert_int_equal(next_of("every 366d", NULL, t), t + 366 * 86400);
        assert_refused("every 0m", NULL, "1 minute to 366 days");
        assert_refused("every 367d", NULL, "1 minute to 366 days");
        assert_refused("every 9999999m", NULL, "too large");
        assert_refused("every 5", NULL, "every N m");
        assert_refused("every 5x", NULL, "every N m");
        assert_refused("every m", NULL, "every N m");
        assert_refused("every 5 m later", NULL, "every N m");
        assert_refused("every -5m", NULL, NULL);
}

static void test_cron_refused(void **state) {
        (void)state;
        assert_refused("* * * *", NULL, "5 fields");
        assert_refused("* * * * * *", NULL, "5 fields");
        assert_refused("", NULL, "5 fields");
        assert_refused("60 * * * *", NULL, "out of range");
        assert_refused("* 24 * * *", NULL, "out of range");
        assert_refused("* * 0 * *", NULL, "out of range");
        assert_refused("* * 32 * *", NULL, "out of range");
        assert_refused("* * * 13 *", NULL, "out of range");
        assert_refused("* * * * 8", NULL, "out of range");
        assert_refused("*/0 * * * *", NULL, "step");
        assert_refused("*/61 * * * *", NULL, "step");
        assert_refused("5-1 * * * *", NULL, "range");
        assert_refused("1,,2 * * * *", NULL, "not a value");
        assert_refused("1;2 * * * *", NULL, "list");
        assert_refused("1, * * * *", NULL, NULL);
        assert_refused("a * * * *", NULL, "not a value");
        assert_refused("* * * foo *", NULL, "not a value");
        assert_refused("0 0 30 2 *", NULL, "no such day");
        assert_refused("0 0 31 4,6 *", NULL, "no such day");
        assert_refused("0 0 * * *", "Mars/Olympus_Mons", "time zone");
        assert_refused("0 0 * * *", "../../etc/passwd", "time zone");
        assert_refused("0 0 * * *", "/etc/localtime", "time zone");
        assert_refused("0 0 * * *", "zone.tab", "time zone");
        char longer[SCHED_SPEC_MAX + 8];
        memset(longer, '1', sizeof longer - 1);
        longer[sizeof longer - 1] = 0;
        assert_refused(longer, NULL, "at most");
}

static void test_cron_utc(void **state) {
        (void)state;
        /* Thursday 3 December 2026, 10:07. */
        int64_t t = utc(2026, 12, 3, 10, 7);
        assert_int_equal(next_of("*/15 * * * *", NULL, t), utc(2026, 12, 3, 10, 15));
        assert_int_equal(next_of("* * * * *", NULL, t), utc(2026, 12, 3, 10, 8));
        assert_int_equal(next_of("* * * * *", NULL, t + 30), utc(2026, 12, 3, 10, 8)); /* strictly after, whole minutes */
        assert_int_equal(next_of("7 10 * * *", NULL, t), utc(2026, 12, 4, 10, 7));      /* not the same minute */
        assert_int_equal(next_of("5,50 * * * *", NULL, t), utc(2026, 12, 3, 10, 50));
        assert_int_equal(next_of("10-30/10 * * * *", NULL, t), utc(2026, 12, 3, 10, 10));
        assert_int_equal(next_of("10-30/10 * * * *", NULL, utc(2026, 12, 3, 10, 30)), utc(2026, 12, 3, 11, 10));
        assert_int_equal(next_of("40/10 * * * *", NULL, t), utc(2026, 12, 3, 10, 40));
        assert_int_equal(next_of("0 9 * * 1-5", NULL, utc(2026, 12, 4, 10, 0)), utc(2026, 12, 7, 9, 0)); /* Fri → Mon */
        assert_int_equal(next_of("0 9 * * mon-fri", NULL, utc(2026, 12, 4, 10, 0)), utc(2026, 12, 7, 9, 0));
        assert_int_equal(next_of("0 0 * * 7", NULL, t), utc(2026, 12, 6, 0, 0)); /* 7: Sunday */
        assert_int_equal(next_of("0 0 * * 0", NULL, t), utc(2026, 12, 6, 0, 0));
        assert_int_equal(next_of("0 0 1 jan *", NULL, t), utc(2027, 1, 1, 0, 0));
        assert_int_equal(next_of("0 0 31 * *", NULL, utc(2027, 1, 31, 12, 0)), utc(2027, 3, 31, 0, 0));
        assert_int_equal(next_of("0 0 29 2 *", NULL, t), utc(2028, 2, 29, 0, 0));
        /* Both day fields restricted: either one (the 13th, or a Friday). */
        assert_int_equal(next_of("0 0 13 * 5", NULL, t), utc(2026, 12, 4, 0, 0));
        assert_int_equal(next_of("0 0 13 * 5", NULL, utc(2026, 12, 11, 1, 0)), utc(2026, 12, 13, 0, 0));
        /* Only the day of the week restricted: the 13th does not count. */
        assert_int_equal(next_of("0 0 * * 5", NULL, utc(2026, 12, 11, 1, 0)), utc(2026, 12, 18, 0, 0));
        /* Across a year end. */
        assert_int_equal(next_of("30 23 31 12 *", NULL, t), utc(2026, 12, 31, 23, 30));
        assert_int_equal(next_of("30 23 31 12 *", NULL, utc(2026, 12, 31, 23, 30)), utc(2027, 12, 31, 23, 30));
}

static void test_zones(void **state) {
        (void)state;
        NEED_ZONE("Europe/Paris");
        NEED_ZONE("Australia/Sydney");
        NEED_ZONE("Asia/Kolkata");
        /* 09:00 in Paris: 08:00 UTC in winter, 07:00 UTC in summer. */
        assert_int_equal(next_of("0 9 * * *", "Europe/Paris", utc(2026, 12, 3, 10, 0)), utc(2026, 12, 4, 8, 0));
        assert_int_equal(next_of("0 9 * * *", "Europe/Paris", utc(2026, 7, 1, 0, 0)), utc(2026, 7, 1, 7, 0));
        /* The south's summer is in January: Sydney is UTC+11 then, +10 in July. */
        assert_int_equal(next_of("0 12 * * *", "Australia/Sydney", utc(2027, 1, 15, 0, 0)), utc(2027, 1, 15, 1, 0));
        assert_int_equal(next_of("0 12 * * *", "Australia/Sydney", utc(2027, 7, 15, 0, 0)), utc(2027, 7, 15, 2, 0));
        /* A half-hour zone; the local date is ahead of UTC's. */
        assert_int_equal(next_of("0 0 * * *", "Asia/Kolkata", utc(2026, 12, 3, 10, 0)), utc(2026, 12, 3, 18, 30));
        /* Far in the future, past the file's transitions: the footer's rule. */
        assert_int_equal(next_of("0 9 * * *", "Europe/Paris", utc(2090, 7, 1, 0, 0)), utc(2090, 7, 1, 7, 0));
        assert_int_equal(next_of("0 9 * * *", "Europe/Paris", utc(2090, 12, 1, 0, 0)), utc(2090, 12, 1, 8, 0));
        assert_int_equal(next_of("0 9 * * *", "UTC", utc(2090, 12, 1, 0, 0)), utc(2090, 12, 1, 9, 0));
}

/* America/New_York, 2026: clocks go forward on 8 March at 02:00 EST (07:00
 * UTC) to 03:00 EDT, and back on 1 November at 02:00 EDT (06:00 UTC) to
 * 01:00 EST. */
static void test_dst_gap(void **state) {
        (void)state;
        NEED_ZONE("America/New_York");
        const char *ny = "America/New_York";
        /* 02:30 does not exist on 8 March: it runs once, at 03:00 EDT, the next valid time. */
        int64_t t = next_of("30 2 * * *", ny, utc(2026, 3, 7, 12, 0));
        assert_int_equal(t, utc(2026, 3, 8, 7, 0));
        assert_int_equal(next_of("30 2 * * *", ny, t), utc(2026, 3, 9, 6, 30)); /* then 02:30 EDT again */
        /* Every quarter of the missing hour: still once, at its end. */
        t = next_of("*/15 2 * * *", ny, utc(2026, 3, 8, 6, 59));
        assert_int_equal(t, utc(2026, 3, 8, 7, 0));
        assert_int_equal(next_of("*/15 2 * * *", ny, t), utc(2026, 3, 9, 6, 0));
        /* What is around the gap is untouched. */
        assert_int_equal(next_of("59 1 * * *", ny, utc(2026, 3, 8, 0, 0)), utc(2026, 3, 8, 6, 59));
        assert_int_equal(next_of("0 3 * * *", ny, utc(2026, 3, 8, 0, 0)), utc(2026, 3, 8, 7, 0));
        enum sched_local kind;
        struct sched_tz *z = NULL;
        assert_int_equal(sched_tz_load(ny, &z), 0);
        assert_int_equal(sched_local_to_utc(z, utc(2026, 3, 8, 2, 30), &t, &kind), 0);
        assert_int_equal(kind, SCHED_LOCAL_SKIPPED);
        assert_int_equal(sched_local_to_utc(z, utc(2026, 11, 1, 1, 30), &t, &kind), 0);
        assert_int_equal(kind, SCHED_LOCAL_AMBIGUOUS);
        assert_int_equal(t, utc(2026, 11, 1, 5, 30));
        assert_int_equal(sched_local_to_utc(z, utc(2026, 6, 1, 12, 0), &t, &kind), 0);
        assert_int_equal(kind, SCHED_LOCAL_EXACT);
        assert_int_equal(sched_tz_offset(z, utc(2026, 3, 8, 6, 59)), -5 * 3600);
        assert_int_equal(sched_tz_offset(z, utc(2026, 3, 8, 7, 0)), -4 * 3600);
        assert_string_equal(sched_tz_name(z), ny);
        sched_tz_free(z);
}

static void test_dst_repeat(void **state) {
        (void)state;
        NEED_ZONE("America/New_York");
        const char *ny = "America/New_York";
        /* 01:30 happens twice on 1 November: it runs once, at the first (EDT). */
        int64_t t = next_of("30 1 * * *", ny, utc(2026, 10, 31, 12, 0));
        assert_int_equal(t, utc(2026, 11, 1, 5, 30));
        assert_int_equal(next_of("30 1 * * *", ny, t), utc(2026, 11, 2, 6, 30)); /* not 06:30 on the 1st */
        /* A kernel started during the second 01:00-02:00 does not run it again. */
        assert_int_equal(next_of("30 1 * * *", ny, utc(2026, 11, 1, 6, 10)), utc(2026, 11, 2, 6, 30));
        /* Every half hour: the repeated hour is not run twice. */
        t = next_of("*/30 * * * *", ny, utc(2026, 11, 1, 5, 30));
        assert_int_equal(t, utc(2026, 11, 1, 7, 0)); /* 02:00 EST */
        /* An interval ignores the clocks: 60 minutes are 60 minutes. */
        assert_int_equal(next_of("every 60m", ny, utc(2026, 11, 1, 5, 30)), utc(2026, 11, 1, 6, 30));
}

static void test_min_gap(void **state) {
        (void)state;
        struct sched_spec *s = NULL;
        int64_t gap = 0;
        assert_int_equal(sched_spec_parse("0,5 9 * * *", NULL, &s, NULL), 0);
        assert_int_equal(sched_spec_min_gap(s, utc(2026, 12, 3, 0, 0), 10, &gap), 0);
        assert_int_equal(gap, 300);
        sched_spec_free(s);
        assert_int_equal(sched_spec_parse("every 20m", NULL, &s, NULL), 0);
        assert_int_equal(sched_spec_min_gap(s, 0, 10, &gap), 0);
        assert_int_equal(gap, 1200);
        sched_spec_free(s);
}

static void test_tz_refuses_bad_files(void **state) {
        (void)state;
        struct sched_tz *z = NULL;
        assert_int_equal(sched_tz_parse("X", "", 0, &z), -EINVAL);
        assert_int_equal(sched_tz_parse("X", "TZif2", 5, &z), -EINVAL);
        unsigned char hdr[44] = "TZif2";
        hdr[20 + 12] = 0xff; /* a huge transition count */
        assert_int_equal(sched_tz_parse("X", hdr, sizeof hdr, &z), -EINVAL);
        assert_false(sched_tz_name_valid("Europe/../etc"));
        assert_false(sched_tz_name_valid("Europe//Paris"));
        assert_false(sched_tz_name_valid("-x"));
        assert_true(sched_tz_name_valid("America/Argentina/Buenos_Aires"));
        assert_true(sched_tz_name_valid("Etc/GMT+5"));
        if (have_zone("Europe/Paris")) { /* a real file cut short anywhere is refused */
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                assert_int_equal(read_file(SCHED_TZ_DIR "/Europe/Paris", 1 << 20, &data, &len), 0);
                for (size_t cut = 0; cut < len; cut += 97)
                        assert_int_equal(sched_tz_parse("Europe/Paris", data, cut, &z), -EINVAL);
                assert_int_equal(sched_tz_parse("Europe/Paris", data, len, &z), 0);
                sched_tz_free(z);
        }
}

/* ---- the scheduler on a fake clock ---- */

static int64_t fake_now;
static int64_t clock_fake(void) {
        return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST);
}

struct probe {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int runs, results;
        bool hold;      /* the run waits until released */
        int fail_with;  /* < 0: the run fails */
        unsigned last_failures;
};

static struct probe probe;

static int probe_run(void *userdata, char **ret_error) {
        struct probe *p = userdata;
        pthread_mutex_lock(&p->lock);
        p->runs++;
        pthread_cond_broadcast(&p->cond);
        while (p->hold)
                pthread_cond_wait(&p->cond, &p->lock);
        int r = p->fail_with;
        pthread_mutex_unlock(&p->lock);
        if (r < 0)
                *ret_error = strdup("the disk is full");
        return r;
}

static void probe_result(void *userdata, const char *job, int result, const char *error, unsigned failures) {
        (void)userdata;
        (void)job;
        (void)result;
        (void)error;
        pthread_mutex_lock(&probe.lock);
        probe.results++;
        probe.last_failures = failures;
        pthread_cond_broadcast(&probe.cond);
        pthread_mutex_unlock(&probe.lock);
}

/* Waits (on the probe's condition, never a sleep) until field reaches n. */
static void wait_for(int *field, int n) {
        pthread_mutex_lock(&probe.lock);
        while (*field < n)
                pthread_cond_wait(&probe.cond, &probe.lock);
        pthread_mutex_unlock(&probe.lock);
}

static json_t *job_status(struct scheduler *s, const char *name) {
        json_t *a = NULL, *o;
        assert_int_equal(sched_status_json(s, &a), 0);
        size_t i;
        json_array_foreach(a, i, o) if (streq(json_string_value(json_object_get(o, "name")), name)) {
                json_incref(o);
                json_decref(a);
                return o;
        }
        json_decref(a);
        fail_msg("no job %s", name);
        return NULL;
}

/* What the status' cache relies on: the JSON never changes without the
 * version (read before it) changing too. p keeps the last pair seen. */
struct seen {
        uint64_t version;
        char *json;
        int changes; /* JSON changes seen so far */
};

static void check_version(struct scheduler *s, struct seen *p) {
        uint64_t v = sched_status_version(s);
        json_t *a = NULL;
        assert_int_equal(sched_status_json(s, &a), 0);
        char *text = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        assert_non_null(text);
        if (p->json && !streq(p->json, text)) {
                assert_true(v != p->version);
                p->changes++;
        }
        free(p->json);
        p->json = text;
        p->version = v;
}

static int setup_probe(void **state) {
        (void)state;
        pthread_mutex_init(&probe.lock, NULL);
        pthread_cond_init(&probe.cond, NULL);
        probe.runs = probe.results = 0;
        probe.hold = false;
        probe.fail_with = 0;
        return 0;
}

static void test_missed_run_runs_once(void **state) {
        (void)state;
        struct sched_spec *daily = NULL;
        assert_int_equal(sched_spec_parse("0 3 * * *", NULL, &daily, NULL), 0);
        fake_now = utc(2026, 11, 30, 12, 0); /* Monday noon: registered */
        const struct sched_job jobs[] = {{.name = "nightly", .spec = daily, .run = probe_run, .userdata = &probe}, {0}};
        struct scheduler *s = NULL;
        assert_int_equal(sched_new(&(struct sched_config){.on_result = probe_result, .now_s = clock_fake}, jobs, &s), 0);
        /* The kernel was down until Thursday 10:00: Tuesday's, Wednesday's
         * and Thursday's 03:00 were missed. One run now, then Friday. */
        fake_now = utc(2026, 12, 3, 10, 0);
        assert_int_equal(sched_start(s), 0);
        wait_for(&probe.results, 1);
        json_t *o = job_status(s, "nightly");
        assert_int_equal(json_integer_value(json_object_get(o, "runs")), 1);
        assert_int_equal(json_integer_value(json_object_get(o, "last_started_at")), utc(2026, 12, 3, 10, 0));
        assert_int_equal(json_integer_value(json_object_get(o, "next_due")), utc(2026, 12, 4, 3, 0));
        json_decref(o);
        sched_free(s);
        assert_int_equal(probe.runs, 1);
        sched_spec_free(daily);
}

static void test_one_run_at_a_time(void **state) {
        (void)state;
        fake_now = utc(2026, 12, 3, 10, 0);
        struct sched_spec *hourly = NULL;
        assert_int_equal(sched_spec_parse("every 1h", NULL, &hourly, NULL), 0);
        struct scheduler *s = NULL;
        assert_int_equal(sched_new(&(struct sched_config){.on_result = probe_result, .now_s = clock_fake}, NULL, &s), 0);
        struct seen seen = {0};
        check_version(s, &seen);
        assert_int_equal(sched_add(s, &(struct sched_job){.name = "slow", .spec = hourly, .run = probe_run,
                                                          .userdata = &probe}),
                         0);
        check_version(s, &seen);
        assert_int_equal(sched_add(s, &(struct sched_job){.name = "slow", .spec = hourly, .run = probe_run}), -EEXIST);
        assert_int_equal(sched_add(s, &(struct sched_job){.name = "Bad Name", .spec = hourly, .run = probe_run}), -EINVAL);
        assert_int_equal(sched_add(s, &(struct sched_job){.name = "neither", .run = probe_run}), -EINVAL);
        assert_int_equal(sched_start(s), 0);
        probe.hold = true;
        assert_int_equal(sched_run_now(s, "slow"), 0);
        assert_int_equal(sched_run_now(s, "nope"), -ENOENT);
        wait_for(&probe.runs, 1);
        assert_true(sched_running(s, "slow"));
        check_version(s, &seen);
        assert_int_equal(sched_run_now(s, "slow"), -EBUSY); /* it runs: not a second time beside it */
        pthread_mutex_lock(&probe.lock);
        probe.hold = false;
        pthread_cond_broadcast(&probe.cond);
        pthread_mutex_unlock(&probe.lock);
        wait_for(&probe.results, 1);
        /* Failures are counted in a row and kept with their error. */
        probe.fail_with = -ENOSPC;
        for (int i = 2; i <= 3; i++) {
                int k;
                while ((k = sched_run_now(s, "slow")) == -EBUSY) /* the first run's worker is ending */
                        sched_wake(s);
                assert_int_equal(k, 0);
                wait_for(&probe.results, i);
                check_version(s, &seen);
        }
        assert_int_equal(probe.last_failures, 2);
        json_t *o = job_status(s, "slow");
        assert_int_equal(json_integer_value(json_object_get(o, "failures")), 2);
        assert_int_equal(json_integer_value(json_object_get(o, "last_result")), -ENOSPC);
        assert_string_equal(json_string_value(json_object_get(o, "last_error")), "the disk is full");
        assert_int_equal(json_integer_value(json_object_get(o, "next_due")), utc(2026, 12, 3, 11, 0));
        json_decref(o);
        assert_int_equal(sched_remove(s, "slow"), 0);
        check_version(s, &seen);
        assert_true(seen.changes >= 5); /* added, running, two failures, removed */
        uint64_t still = seen.version; /* nothing happens: the same version */
        check_version(s, &seen);
        assert_true(seen.version == still);
        free(seen.json);
        assert_int_equal(sched_remove(s, "slow"), -ENOENT);
        sched_free(s);
        sched_spec_free(hourly);
}

static int due_now(void *userdata, int64_t last_run_s, int64_t now_s, int64_t *ret_due_s) {
        *ret_due_s = now_s; /* always due: the scheduler must not run it back to back */
        return 0;
}

static void test_next_due_is_not_run_back_to_back(void **state) {
        (void)state;
        fake_now = utc(2026, 12, 3, 10, 0);
        struct scheduler *s = NULL;
        assert_int_equal(sched_new(&(struct sched_config){.on_result = probe_result, .now_s = clock_fake}, NULL, &s), 0);
        assert_int_equal(sched_add(s, &(struct sched_job){.name = "eager", .next_due = due_now, .run = probe_run,
                                                          .userdata = &probe}),
                         0);
        probe.fail_with = -EIO;
        assert_int_equal(sched_start(s), 0);
        wait_for(&probe.results, 1);
        json_t *o = job_status(s, "eager");
        /* Failed: not again for SCHED_RETRY_S. */
        assert_int_equal(json_integer_value(json_object_get(o, "next_due")), fake_now + SCHED_RETRY_S);
        json_decref(o);
        probe.fail_with = 0;
        int k;
        while ((k = sched_run_now(s, "eager")) == -EBUSY) /* the first run's worker is ending */
                sched_wake(s);
        assert_int_equal(k, 0); /* the owner's "run now" is not held back */
        wait_for(&probe.results, 2);
        o = job_status(s, "eager");
        /* Worked: not again within a minute. */
        assert_int_equal(json_integer_value(json_object_get(o, "next_due")), fake_now + SCHED_EVERY_MIN_S);
        assert_int_equal(json_integer_value(json_object_get(o, "runs")), 2);
        json_decref(o);
        sched_free(s);
        assert_int_equal(probe.runs, 2);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_calendar),
                cmocka_unit_test(test_every),
                cmocka_unit_test(test_cron_refused),
                cmocka_unit_test(test_cron_utc),
                cmocka_unit_test(test_zones),
                cmocka_unit_test(test_dst_gap),
                cmocka_unit_test(test_dst_repeat),
                cmocka_unit_test(test_min_gap),
                cmocka_unit_test(test_tz_refuses_bad_files),
                cmocka_unit_test_setup(test_missed_run_runs_once, setup_probe),
                cmocka_unit_test_setup(test_one_run_at_a_time, setup_probe),
                cmocka_unit_test_setup(test_next_due_is_not_run_back_to_back, setup_probe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
