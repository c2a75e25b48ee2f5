/* Integration tests for kernel/evolution's store against a real private
 * PostgreSQL in a temporary Seed folder (runs as the unprivileged account). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>

#include "base/fileio.h"
#include "base/priv.h"
#include "db/db.h"
#include "evolution/store.h"
#include "pg/pg.h"

static char seed_dir[64];
static struct pg *g_pg;
static struct db *g_db;

static int setup(void **state) {
        if (priv_drop_if_root(NULL) < 0)
                return -1;
        snprintf(seed_dir, sizeof seed_dir, "/tmp/seed-test-evo-XXXXXX");
        if (!mkdtemp(seed_dir) || pg_start(seed_dir, &g_pg) < 0)
                return -1;
        _cleanup_free_ char *ci = NULL;
        if (pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci) < 0 || db_connect(ci, &g_db) < 0)
                return -1;
        return 0;
}

static int teardown(void **state) {
        db_close(g_db);
        pg_stop(g_pg);
        rm_rf(seed_dir);
        return 0;
}

static json_t *get(const char *id, bool events) {
        _cleanup_free_ char *s = NULL;
        assert_int_equal(evo_get_json(g_db, id, events, 0, &s), 0);
        json_t *o = json_loads(s, 0, NULL);
        assert_non_null(o);
        return o;
}

static void test_create_and_walk_the_main_path(void **state) {
        _cleanup_free_ char *id = NULL;
        assert_int_equal(evo_create(g_db, "Become a todo app", "evolve", &id), 0);
        assert_true(startswith(id, "evo_") && strlen(id) == 20);
        static const enum evo_state path[] = {EVO_PLANNING, EVO_PLANNED,    EVO_MUTATING, EVO_BUILDING,
                                              EVO_TESTING,  EVO_RUNNING,    EVO_OBSERVING, EVO_REFLECTING,
                                              EVO_READY,    EVO_APPLYING,   EVO_COMPLETE};
        for (size_t i = 0; i < sizeof path / sizeof path[0]; i++)
                assert_int_equal(evo_set_state(g_db, id, path[i], NULL, NULL), 0);
        json_t *o = get(id, true);
        assert_string_equal(json_string_value(json_object_get(o, "state")), "complete");
        assert_true(json_integer_value(json_object_get(o, "finished_at")) > 0);
        json_t *events = json_object_get(o, "events");
        assert_int_equal(json_array_size(events), 12); /* requested + 11 transitions */
        json_t *last = json_object_get(json_array_get(events, 11), "data");
        assert_string_equal(json_string_value(json_object_get(last, "from")), "applying");
        assert_string_equal(json_string_value(json_object_get(last, "to")), "complete");
        json_decref(o);
        /* final is final */
        _cleanup_free_ char *err = NULL;
        assert_int_equal(evo_set_state(g_db, id, EVO_FAILED, "late", &err), -EPERM);
        assert_string_equal(err, "an evolution cannot go from complete to failed");
}

static void test_refused_transition_changes_nothing(void **state) {
        _cleanup_free_ char *id = NULL, *err = NULL;
        assert_int_equal(evo_create(g_db, "x", "evolve", &id), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_TESTING, NULL, &err), -EPERM);
        assert_string_equal(err, "an evolution cannot go from requested to testing");
        enum evo_state s;
        assert_int_equal(evo_get_state(g_db, id, &s), 0);
        assert_int_equal(s, EVO_REQUESTED);
        assert_int_equal(evo_set_state(g_db, "evo_nope", EVO_PLANNING, NULL, NULL), -ENOENT);
}

static void test_needs_input_resumes(void **state) {
        _cleanup_free_ char *id = NULL;
        assert_int_equal(evo_create(g_db, "ask me", "evolve", &id), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_PLANNING, NULL, NULL), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_NEEDS_INPUT, "a question", NULL), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_MUTATING, NULL, NULL), -EPERM);
        assert_int_equal(evo_set_state(g_db, id, EVO_PLANNING, NULL, NULL), 0);
}

static void test_failed_keeps_the_error_and_events_validate(void **state) {
        _cleanup_free_ char *id = NULL;
        assert_int_equal(evo_create(g_db, "break", "evolve", &id), 0);
        assert_int_equal(evo_event(g_db, id, "note", "{\"text\":\"hello\"}"), 0);
        assert_int_equal(evo_event(g_db, id, "bogus", "{}"), -EINVAL);
        assert_int_equal(evo_event(g_db, id, "note", "[1]"), -EINVAL);
        assert_int_equal(evo_event(g_db, id, "note", "{broken"), -EINVAL);
        assert_int_equal(evo_set_state(g_db, id, EVO_PLANNING, NULL, NULL), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_FAILED, "the build failed 4 times", NULL), 0);
        json_t *o = get(id, false);
        assert_string_equal(json_string_value(json_object_get(o, "error")), "the build failed 4 times");
        assert_null(json_object_get(o, "events"));
        json_decref(o);
        assert_int_equal(evo_create(g_db, "", "evolve", &id), -EINVAL);
        assert_int_equal(evo_create(g_db, "x", "other", &id), -EINVAL);
}

static void test_fifo_and_recovery(void **state) {
        /* Everything earlier has ended or is still requested; take them out of the way. */
        char *first = NULL, *second = NULL, *busy = NULL, *next = NULL;
        assert_true(evo_recover(g_db) >= 0); /* earlier tests left some under way */
        while (evo_next_requested(g_db, &next) == 0) {
                assert_int_equal(evo_set_state(g_db, next, EVO_CANCELLED, NULL, NULL), 0);
                free(next);
        }
        assert_int_equal(evo_create(g_db, "first", "evolve", &first), 0);
        assert_int_equal(evo_create(g_db, "second", "evolve", &second), 0);
        assert_int_equal(evo_next_requested(g_db, &next), 0);
        assert_string_equal(next, first);
        free(next);
        assert_int_equal(evo_create(g_db, "busy", "evolve", &busy), 0);
        assert_int_equal(evo_set_state(g_db, first, EVO_PLANNING, NULL, NULL), 0);
        assert_int_equal(evo_set_state(g_db, first, EVO_PLANNED, NULL, NULL), 0);
        assert_int_equal(evo_set_state(g_db, first, EVO_MUTATING, NULL, NULL), 0);
        char *apr = NULL;
        assert_int_equal(evo_approval_create(g_db, first, "tool", "write_file", "dangerous",
                                             "{\"path\":\"kernel/x\"}", &apr), 0);
        /* a kernel restart: the one under way fails, pending approvals expire */
        assert_int_equal(evo_recover(g_db), 1);
        json_t *o = get(first, false);
        assert_string_equal(json_string_value(json_object_get(o, "state")), "failed");
        assert_string_equal(json_string_value(json_object_get(o, "error")), "interrupted by a kernel restart");
        json_decref(o);
        char *st = NULL;
        assert_int_equal(evo_approval_state(g_db, apr, &st, NULL), 0);
        assert_string_equal(st, "expired");
        free(st);
        assert_int_equal(evo_approval_decide(g_db, apr, true, NULL), -EALREADY);
        /* the queued ones are untouched and still in order */
        assert_int_equal(evo_next_requested(g_db, &next), 0);
        assert_string_equal(next, second);
        free(next);
        /* The owner's commits are verified before anything queued earlier. */
        char *owner = NULL, *found = NULL;
        assert_int_equal(evo_find_requested(g_db, "owner", &found), -ENOENT);
        assert_int_equal(evo_create(g_db, "owner: Pick a model", "owner", &owner), 0);
        assert_int_equal(evo_next_requested(g_db, &next), 0);
        assert_string_equal(next, owner);
        free(next);
        assert_int_equal(evo_find_requested(g_db, "owner", &found), 0);
        assert_string_equal(found, owner);
        free(found);
        assert_int_equal(evo_find_requested(g_db, "evolve", &found), 0);
        assert_string_equal(found, second);
        free(found);
        assert_int_equal(evo_set_state(g_db, owner, EVO_BUILDING, NULL, NULL), 0);
        assert_int_equal(evo_next_requested(g_db, &next), 0);
        assert_string_equal(next, second);
        free(next);
        free(owner);
        free(first);
        free(second);
        free(busy);
        free(apr);
}

static void test_approvals_are_decided_once(void **state) {
        _cleanup_free_ char *id = NULL, *apr = NULL, *q = NULL, *st = NULL, *ans = NULL, *pending = NULL;
        assert_int_equal(evo_create(g_db, "approvals", "evolve", &id), 0);
        assert_int_equal(evo_approval_create(g_db, id, "tool", "run", "review", "{\"command\":\"make\"}", &apr), 0);
        assert_int_equal(evo_approval_create(g_db, id, "question", NULL, NULL, "{\"question\":\"Which colour?\"}", &q),
                         0);
        assert_int_equal(evo_approval_create(g_db, id, "bogus", NULL, NULL, "{}", &st), -EINVAL);
        assert_int_equal(evo_approvals_pending_json(g_db, &pending), 0);
        assert_non_null(strstr(pending, apr));
        assert_non_null(strstr(pending, "Which colour?"));
        /* An answer never approves a call, and a question needs an answer. */
        assert_int_equal(evo_approval_decide(g_db, apr, true, ""), -EINVAL);
        assert_int_equal(evo_approval_decide(g_db, q, true, NULL), -EINVAL);
        assert_int_equal(evo_approval_state(g_db, apr, &st, NULL), 0);
        assert_string_equal(st, "pending");
        free(TAKE_PTR(st));
        assert_int_equal(evo_approval_decide(g_db, apr, false, NULL), 0);
        assert_int_equal(evo_approval_decide(g_db, apr, true, NULL), -EALREADY);
        assert_int_equal(evo_approval_state(g_db, apr, &st, NULL), 0);
        assert_string_equal(st, "denied");
        free(TAKE_PTR(st));
        assert_int_equal(evo_approval_decide(g_db, q, true, "green"), 0);
        assert_int_equal(evo_approval_state(g_db, q, &st, &ans), 0);
        assert_string_equal(st, "answered");
        assert_string_equal(ans, "green");
        assert_int_equal(evo_approval_decide(g_db, "apr_nope", true, NULL), -ENOENT);
        /* When the evolution ends, what it still waited for expires. */
        _cleanup_free_ char *late = NULL, *late_state = NULL;
        assert_int_equal(evo_approval_create(g_db, id, "tool", "run", "review", "{}", &late), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_CANCELLED, NULL, NULL), 0);
        assert_int_equal(evo_approval_state(g_db, late, &late_state, NULL), 0);
        assert_string_equal(late_state, "expired");
        assert_int_equal(evo_approval_decide(g_db, late, true, NULL), -EALREADY);
}

static void test_list(void **state) {
        _cleanup_free_ char *s = NULL;
        assert_int_equal(evo_list_json(g_db, 2, &s), 0);
        json_t *arr = json_loads(s, 0, NULL);
        assert_int_equal(json_array_size(arr), 2);
        json_decref(arr);
        assert_int_equal(evo_list_json(g_db, 0, &s), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_create_and_walk_the_main_path),
                cmocka_unit_test(test_refused_transition_changes_nothing),
                cmocka_unit_test(test_needs_input_resumes),
                cmocka_unit_test(test_failed_keeps_the_error_and_events_validate),
                cmocka_unit_test(test_fifo_and_recovery),
                cmocka_unit_test(test_approvals_are_decided_once),
                cmocka_unit_test(test_list),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
