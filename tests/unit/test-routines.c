/* Unit tests for kernel/routines' rules (rules.c): the quiet answer, names,
 * the 15-minute rule for routines, and organism/routines.yaml — a good file
 * and each kind of bad input, each refused with the line it is on and
 * nothing returned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "routines/routines.h"
#include "schedule/schedule.h"

#define NOW ((int64_t)1764748800) /* 2025-12-03 08:00 UTC */

static void test_quiet(void **state) {
        const char *quiet[] = {"NOTHING_TO_REPORT", "nothing_to_report", "  NOTHING_TO_REPORT\n", "**NOTHING_TO_REPORT**",
                               "`NOTHING_TO_REPORT`", "NOTHING_TO_REPORT.", "\tNothing_To_Report.\n\n"};
        for (size_t i = 0; i < ARRAY_SIZE(quiet); i++)
                if (!routines_quiet(quiet[i]))
                        fail_msg("'%s' should be quiet", quiet[i]);
        const char *loud[] = {NULL, "", "NOTHING TO REPORT", "NOTHING_TO_REPORT but the queue is long",
                              "Orders are down 40%. NOTHING_TO_REPORT", "NOTHING_TO_REPORT!", "NOTHING_TO_REPORTS",
                              "Nothing to report."};
        for (size_t i = 0; i < ARRAY_SIZE(loud); i++)
                if (routines_quiet(loud[i]))
                        fail_msg("'%s' should be a report", loud[i] ? loud[i] : "(null)");
}

static void test_names(void **state) {
        assert_true(routines_name_valid("daily-digest"));
        assert_true(routines_name_valid("a"));
        assert_true(routines_name_valid("0_check"));
        assert_false(routines_name_valid(""));
        assert_false(routines_name_valid("-x"));
        assert_false(routines_name_valid("Daily"));
        assert_false(routines_name_valid("a b"));
        assert_false(routines_name_valid("a/b"));
        char longer[ROUTINES_NAME_MAX + 2];
        memset(longer, 'a', sizeof longer - 1);
        longer[sizeof longer - 1] = 0;
        assert_false(routines_name_valid(longer));
        longer[ROUTINES_NAME_MAX] = 0;
        assert_true(routines_name_valid(longer));
}

static void assert_schedule(const char *text, const char *tz, bool routine, bool ok, const char *says) {
        _cleanup_free_ char *err = NULL;
        int r = routines_schedule_check(text, tz, routine, NOW, &err);
        if (ok && r < 0)
                fail_msg("'%s' refused: %s", text, err ? err : "?");
        if (!ok && r >= 0)
                fail_msg("'%s' accepted", text);
        if (!ok && (!err || !strstr(err, says)))
                fail_msg("'%s': error '%s' does not say '%s'", text, err ? err : "(none)", says);
}

static void test_fifteen_minutes(void **state) {
        assert_schedule("every 15m", NULL, true, true, NULL);
        assert_schedule("every 1h", "Europe/Lisbon", true, true, NULL);
        assert_schedule("0 7 * * *", "America/New_York", true, true, NULL);
        assert_schedule("*/15 * * * *", NULL, true, true, NULL);
        assert_schedule("every 14m", NULL, true, false, "at least 15 minutes apart");
        assert_schedule("*/5 * * * *", NULL, true, false, "at least 15 minutes apart");
        assert_schedule("0,10 * * * *", NULL, true, false, "at least 15 minutes apart");
        /* Jobs may run every minute. */
        assert_schedule("every 1m", NULL, false, true, NULL);
        assert_schedule("every 0m", NULL, false, false, "not valid");
        assert_schedule("61 * * * *", NULL, false, false, "not valid");
        assert_schedule("every 1h", "Mars/Olympus", false, false, "not valid");
}

static const char good[] = "# the organism's jobs\n"
                           "jobs:\n"
                           "  - name: nightly-digest\n"
                           "    path: /jobs/digest?kind=all\n"
                           "    schedule: \"0 7 * * *\"\n"
                           "    tz: Europe/Lisbon\n"
                           "  - name: ping\n"
                           "    method: GET\n"
                           "    path: /jobs/ping\n"
                           "    schedule: every 5m\n";

static void test_jobs_good(void **state) {
        struct routines_job *jobs = NULL;
        size_t n = 0;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(routines_jobs_parse(good, strlen(good), NOW, &jobs, &n, &err), 0);
        assert_int_equal(n, 2);
        assert_string_equal(jobs[0].name, "nightly-digest");
        assert_string_equal(jobs[0].method, "POST");
        assert_string_equal(jobs[0].path, "/jobs/digest?kind=all");
        assert_string_equal(jobs[0].schedule, "0 7 * * *");
        assert_string_equal(jobs[0].tz, "Europe/Lisbon");
        assert_int_equal(jobs[0].line, 3);
        assert_string_equal(jobs[1].method, "GET");
        assert_string_equal(jobs[1].tz, "UTC");
        assert_int_equal(jobs[1].line, 7);
        routines_jobs_free(jobs, n);
        /* The longest name: "job.<name>" is 48, what the scheduler takes. */
        const char *longest = "jobs:\n  - name: a2345678901234567890123456789012345678901234\n    path: /a\n"
                              "    schedule: every 1h\n";
        assert_int_equal(routines_jobs_parse(longest, strlen(longest), NOW, &jobs, &n, NULL), 0);
        assert_int_equal(strlen(jobs[0].name), ROUTINES_JOB_NAME_MAX);
        routines_jobs_free(jobs, n);
        /* Empty and null: no jobs. */
        const char *none[] = {"", "jobs:\n", "jobs: []\n", "# nothing yet\n"};
        for (size_t i = 0; i < ARRAY_SIZE(none); i++) {
                assert_int_equal(routines_jobs_parse(none[i], strlen(none[i]), NOW, &jobs, &n, NULL), 0);
                assert_int_equal(n, 0);
                routines_jobs_free(jobs, n);
        }
}

/* Each bad input is refused with an error naming the file and the line. */
static void assert_bad(const char *text, const char *where, const char *says) {
        struct routines_job *jobs = (void *)1;
        size_t n = 99;
        _cleanup_free_ char *err = NULL;
        int r = routines_jobs_parse(text, strlen(text), NOW, &jobs, &n, &err);
        if (r != -EINVAL)
                fail_msg("accepted (%d):\n%s", r, text);
        assert_ptr_equal(jobs, (void *)1); /* nothing returned */
        assert_int_equal(n, 99);
        if (!err || !strstr(err, where) || !strstr(err, says))
                fail_msg("error '%s' should name '%s' and say '%s'", err ? err : "(none)", where, says);
}

#define JOB(extra) "jobs:\n  - name: a\n    path: /a\n    schedule: every 1h\n" extra

static void test_jobs_bad(void **state) {
        assert_bad("jobs: [\n", "organism/routines.yaml:", "syntax error");
        assert_bad("- a\n", "organism/routines.yaml:1:", "expected a mapping");
        assert_bad("tasks: []\n", "organism/routines.yaml:1:", "unknown key 'tasks'");
        assert_bad("jobs: 3\n", "organism/routines.yaml:1:", "must be a list");
        assert_bad("jobs:\n  - 3\n", "organism/routines.yaml:2:", "must be a mapping");
        assert_bad(JOB("    colour: red\n"), "organism/routines.yaml:5:", "unknown key 'colour'");
        assert_bad(JOB("    tz: [UTC]\n"), "organism/routines.yaml:5:", "must be a string");
        assert_bad("jobs:\n  - name: a\n    schedule: every 1h\n", "organism/routines.yaml:2:", "needs a name, a path");
        assert_bad("jobs:\n  - name: Bad Name\n    path: /a\n    schedule: every 1h\n", "organism/routines.yaml:2:",
                   "the name must be");
        /* "job.<name>" is the scheduler's name: at most 48, so a job's name at most 44 */
        assert_bad("jobs:\n  - name: a\n    path: /a\n    schedule: every 1h\n"
                   "  - name: a23456789012345678901234567890123456789012345\n    path: /a\n    schedule: every 1h\n",
                   "organism/routines.yaml:5:", "the name must be 1 to 44 of");
        assert_bad("jobs:\n  - name: a\n    path: jobs/a\n    schedule: every 1h\n", "organism/routines.yaml:2:",
                   "the path must start with '/'");
        assert_bad("jobs:\n  - name: a\n    path: /a b\n    schedule: every 1h\n", "organism/routines.yaml:2:",
                   "the path must");
        assert_bad("jobs:\n  - name: a\n    path: /a/../kernel\n    schedule: every 1h\n",
                   "organism/routines.yaml:2:", "the path must");
        assert_bad("jobs:\n  - name: a\n    path: \"/a\\r\\nX: y\"\n    schedule: every 1h\n",
                   "organism/routines.yaml:2:", "the path must");
        assert_bad(JOB("    method: TRACE\n"), "organism/routines.yaml:2:", "the method must be");
        assert_bad("jobs:\n  - name: a\n    path: /a\n    schedule: every 1 week\n", "organism/routines.yaml:2:",
                   "not valid");
        assert_bad(JOB("    tz: ../../etc/passwd\n"), "organism/routines.yaml:2:", "time zone");
        assert_bad(JOB("  - name: a\n    path: /b\n    schedule: every 2h\n"), "organism/routines.yaml:5:",
                   "declared above");
        assert_bad("jobs:\n  - &x\n    name: a\n", "organism/routines.yaml:2:", "anchors");
        assert_bad(JOB("    name: b\n"), "organism/routines.yaml:5:", "duplicate key 'name'");
        /* Bounded: at most ROUTINES_JOBS_MAX jobs, and the file's size. */
        char many[8192] = "jobs:\n";
        for (int i = 0; i <= ROUTINES_JOBS_MAX; i++)
                snprintf(many + strlen(many), sizeof many - strlen(many),
                         "  - {name: j%d, path: /j, schedule: every 1h}\n", i);
        assert_bad(many, "organism/routines.yaml:", "more than 32 entries");
        char *big = malloc(ROUTINES_JOBS_FILE_MAX + 2);
        assert_non_null(big);
        memset(big, '#', ROUTINES_JOBS_FILE_MAX + 1);
        big[ROUTINES_JOBS_FILE_MAX + 1] = 0;
        assert_bad(big, "organism/routines.yaml", "larger than");
        free(big);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_quiet),
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_fifteen_minutes),
                cmocka_unit_test(test_jobs_good),
                cmocka_unit_test(test_jobs_bad),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
