/* Unit tests for kernel/evolution's state machine (SPEC §4) and the words
 * about the owner's commits on main (owner.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/json.h"
#include "evolution/owner.h"
#include "evolution/roadmap.h"
#include "base/text.h"
#include "evolution/state.h"

static void test_names_round_trip(void **state) {
        for (int i = 0; i < _EVO_STATE_MAX; i++) {
                enum evo_state s;
                assert_int_equal(evo_state_from_name(evo_state_name((enum evo_state)i), &s), 0);
                assert_int_equal(s, i);
        }
        enum evo_state s;
        assert_int_equal(evo_state_from_name("bogus", &s), -EINVAL);
        assert_int_equal(evo_state_from_name(NULL, &s), -EINVAL);
        assert_string_equal(evo_state_name(_EVO_STATE_MAX), "unknown");
}

static void test_main_path(void **state) {
        static const enum evo_state path[] = {EVO_REQUESTED, EVO_PLANNING,  EVO_PLANNED,    EVO_MUTATING,
                                              EVO_BUILDING,  EVO_TESTING,   EVO_RUNNING,    EVO_OBSERVING,
                                              EVO_REFLECTING, EVO_READY,    EVO_APPLYING,   EVO_COMPLETE};
        for (size_t i = 0; i + 1 < sizeof path / sizeof path[0]; i++) {
                assert_true(evo_transition_allowed(path[i], path[i + 1], _EVO_STATE_MAX));
                /* no skipping ahead, no going back along the main path */
                if (i + 2 < sizeof path / sizeof path[0])
                        assert_false(evo_transition_allowed(path[i], path[i + 2], _EVO_STATE_MAX));
                if (path[i] != EVO_MUTATING) /* only repair edges go backwards, to mutating */
                        assert_false(evo_transition_allowed(path[i + 1], path[i], _EVO_STATE_MAX));
        }
        assert_true(evo_transition_allowed(EVO_APPLYING, EVO_ROLLED_BACK, _EVO_STATE_MAX));
        assert_false(evo_transition_allowed(EVO_READY, EVO_ROLLED_BACK, _EVO_STATE_MAX));
}

static void test_repair_loop(void **state) {
        assert_true(evo_transition_allowed(EVO_BUILDING, EVO_MUTATING, _EVO_STATE_MAX));
        assert_true(evo_transition_allowed(EVO_TESTING, EVO_MUTATING, _EVO_STATE_MAX));
        assert_true(evo_transition_allowed(EVO_RUNNING, EVO_MUTATING, _EVO_STATE_MAX));
        assert_true(evo_transition_allowed(EVO_OBSERVING, EVO_MUTATING, _EVO_STATE_MAX));
        assert_false(evo_transition_allowed(EVO_REFLECTING, EVO_MUTATING, _EVO_STATE_MAX));
        assert_false(evo_transition_allowed(EVO_APPLYING, EVO_MUTATING, _EVO_STATE_MAX));
}

static void test_any_active_state_can_fail_cancel_or_ask(void **state) {
        for (int i = 0; i < _EVO_STATE_MAX; i++) {
                enum evo_state s = (enum evo_state)i;
                bool final = evo_state_is_final(s);
                assert_int_equal(evo_transition_allowed(s, EVO_FAILED, _EVO_STATE_MAX), !final && s != EVO_FAILED);
                assert_int_equal(evo_transition_allowed(s, EVO_CANCELLED, _EVO_STATE_MAX),
                                 !final && s != EVO_CANCELLED);
                assert_int_equal(evo_transition_allowed(s, EVO_NEEDS_INPUT, _EVO_STATE_MAX),
                                 evo_state_is_active(s) && s != EVO_NEEDS_INPUT);
        }
}

static void test_needs_input_returns_to_what_it_interrupted(void **state) {
        assert_true(evo_transition_allowed(EVO_NEEDS_INPUT, EVO_MUTATING, EVO_MUTATING));
        assert_false(evo_transition_allowed(EVO_NEEDS_INPUT, EVO_BUILDING, EVO_MUTATING));
        assert_false(evo_transition_allowed(EVO_NEEDS_INPUT, EVO_PLANNING, _EVO_STATE_MAX));
        assert_true(evo_transition_allowed(EVO_NEEDS_INPUT, EVO_CANCELLED, EVO_MUTATING));
        assert_true(evo_transition_allowed(EVO_NEEDS_INPUT, EVO_FAILED, EVO_PLANNING));
}

static void test_final_states_stay_final(void **state) {
        const enum evo_state finals[] = {EVO_COMPLETE, EVO_FAILED, EVO_CANCELLED, EVO_ROLLED_BACK};
        for (size_t f = 0; f < 4; f++) {
                assert_true(evo_state_is_final(finals[f]));
                assert_false(evo_state_is_active(finals[f]));
                for (int i = 0; i < _EVO_STATE_MAX; i++)
                        assert_false(evo_transition_allowed(finals[f], (enum evo_state)i, (enum evo_state)i));
        }
        assert_false(evo_state_is_active(EVO_REQUESTED));
        assert_true(evo_state_is_active(EVO_NEEDS_INPUT));
}

/* ---- the owner's commits on main (owner.h) ---- */

#define C1 "abc1234def5678901234567890abcdef12345678"

static void test_owner_texts(void **state) {
        struct evo_owner_view v = {.state = EVO_OWNER_FAILED, .seed_dir = "/srv/seeds/demo", .commit = C1,
                                   .subject = "Pick a model", .n_commits = 1, .generation = 3,
                                   .error = "the build failed:\n$ make -C organism build\n[exit code 2]"};
        char *text = NULL, *fix = NULL;
        assert_int_equal(evo_owner_text(&v, &text, &fix), 0);
        /* The fix names the very commands; as root the Seed's account runs them. */
        assert_non_null(strstr(fix, "git -C /srv/seeds/demo reset --hard seed/gen-3"));
        assert_true(startswith(fix, "Fix it and commit again, or revert: "));
        assert_true(startswith(text, "Your commit abc1234 'Pick a model' was not applied: the build failed:\n"));
        assert_non_null(strstr(text, "[exit code 2]\nGeneration 3 keeps serving. "));
        assert_true(endswith(text, fix));
        free(text);
        free(fix);

        v.state = EVO_OWNER_VERIFYING;
        v.n_commits = 3;
        v.evolution = "evo_0123456789abcdef";
        assert_int_equal(evo_owner_text(&v, &text, &fix), 0);
        assert_true(startswith(text, "Your commit abc1234 'Pick a model' (with 2 earlier commits) is being verified"));
        assert_non_null(strstr(text, "Generation 3 keeps serving until it becomes generation 4."));
        assert_non_null(strstr(fix, "evo_0123456789abcdef"));
        free(text);
        free(fix);

        v.state = EVO_OWNER_PENDING;
        v.subject = NULL;
        v.n_commits = 2;
        assert_int_equal(evo_owner_text(&v, &text, &fix), 0);
        assert_true(startswith(text, "Your commit abc1234 (with 1 earlier commit) is not a generation yet"));
        free(text);
        free(fix);

        v.state = EVO_OWNER_FAILED;
        v.restored = 5;
        v.error = "not healthy within 60 s";
        assert_int_equal(evo_owner_text(&v, &text, &fix), 0);
        assert_non_null(strstr(text, "was not kept: it was unhealthy once live: not healthy within 60 s"));
        assert_non_null(strstr(text, "Generation 5 (the files of generation 3) serves instead."));
        assert_non_null(strstr(fix, "show abc1234"));
        free(text);
        free(fix);

        v = (struct evo_owner_view){.state = EVO_OWNER_DIVERGED, .seed_dir = "/srv/my seeds/it's", .commit = C1,
                                    .generation = 2, .on_main = true};
        assert_int_equal(evo_owner_text(&v, &text, &fix), 0);
        assert_true(startswith(text, "main (abc1234) does not contain the live generation 2"));
        assert_non_null(strstr(fix, "git -C '/srv/my seeds/it'\\''s' reset --hard seed/gen-2"));
        assert_non_null(strstr(fix, "branch saved-abc1234 abc1234"));
        free(text);
        free(fix);
        v.on_main = false;
        assert_int_equal(evo_owner_text(&v, &text, &fix), 0);
        assert_true(startswith(text, "The Seed folder is not on branch main (HEAD is abc1234)."));
        assert_true(endswith(fix, "checkout main"));
        free(text);
        free(fix);
        v.state = (enum evo_owner_state)42;
        assert_int_equal(evo_owner_text(&v, &text, &fix), -EINVAL);
}

static void test_owner_json(void **state) {
        struct evo_owner_view v = {.state = EVO_OWNER_FAILED, .seed_dir = "/s", .commit = C1, .subject = "x",
                                   .n_commits = 1, .generation = 3, .error = "the tests failed:\nboom",
                                   .evolution = "evo_0123456789abcdef"};
        json_t *o = NULL;
        assert_int_equal(evo_owner_json(&v, &o), 0);
        assert_string_equal(json_string_value(json_object_get(o, "state")), "failed");
        assert_string_equal(json_string_value(json_object_get(o, "commit")), C1);
        assert_string_equal(json_string_value(json_object_get(o, "subject")), "x");
        assert_string_equal(json_string_value(json_object_get(o, "error")), "the tests failed:\nboom");
        assert_int_equal(json_integer_value(json_object_get(o, "generation")), 3);
        assert_string_equal(json_string_value(json_object_get(o, "evolution")), "evo_0123456789abcdef");
        const char *text = json_string_value(json_object_get(o, "text"));
        const char *fix = json_string_value(json_object_get(o, "fix"));
        assert_non_null(text);
        assert_non_null(fix);
        assert_true(endswith(text, fix));
        json_decref(o);
        v.state = EVO_OWNER_VERIFYING;
        v.evolution = NULL;
        assert_int_equal(evo_owner_json(&v, &o), 0);
        assert_null(json_object_get(o, "error"));
        assert_null(json_object_get(o, "evolution"));
        json_decref(o);
}

static void test_owner_check_error_is_bounded(void **state) {
        char *e = NULL;
        assert_int_equal(evo_owner_check_error("build", "$ make -C organism build\nMakefile:2: *** oops.  Stop.\n"
                                                        "\n[exit code 2]\n",
                                               &e),
                         0);
        assert_string_equal(e, "the build failed:\n$ make -C organism build\nMakefile:2: *** oops.  Stop.\n\n"
                               "[exit code 2]");
        free(e);
        assert_int_equal(evo_owner_check_error("nope", NULL, &e), 0);
        assert_string_equal(e, "the check 'nope' failed:");
        free(e);

        /* Long output: its first and last lines, each cut; control bytes and
         * broken UTF-8 never reach a terminal or JSON. */
        struct buf b = BUF_INIT(1 << 20);
        for (int i = 0; i < 500; i++)
                assert_true(buf_printf(&b, "line %d \x1b[31mred\x1b[0m \xff\xfe %0300d\n", i, 0) >= 0);
        assert_int_equal(evo_owner_check_error("test", b.data, &e), 0);
        buf_free(&b);
        assert_true(strlen(e) <= 3072);
        assert_true(startswith(e, "the tests failed:\nline 0 "));
        assert_non_null(strstr(e, "\n…\n"));
        assert_non_null(strstr(e, "\nline 499 "));
        assert_null(strstr(e, "\nline 8 "));
        assert_non_null(strstr(e, "\nline 7 "));
        assert_null(strchr(e, '\x1b'));
        for (const unsigned char *p = (const unsigned char *)e; *p; p++)
                assert_true(*p != 0xff && *p != 0xfe && (*p >= 0x20 || *p == '\n'));
        json_t *j = json_string(e); /* valid UTF-8 */
        assert_non_null(j);
        json_decref(j);
        free(e);
}

/* The roadmap as the kernel writes it: a checklist with the first `done`
 * ticked; a stage's text stays on its line (a newline in it cannot forge a
 * ticked box); the next stage's intent holds the goal, what is done and this
 * stage; the chat's record says what is next, or that the goal is reached. */
static void test_roadmap_texts(void **state) {
        _cleanup_json_ json_t *m = json_pack("{s:s, s:[s, s, s]}", "goal", "A CRM", "stages", "Contacts",
                                             "Deals\n- [x] Stage 9: forged", "Reports");
        _cleanup_free_ char *md = NULL, *none = NULL, *intent = NULL, *next = NULL, *last = NULL;
        assert_int_equal(roadmap_markdown(m, 1, &md), 0);
        assert_non_null(strstr(md, "Goal: A CRM\n"));
        assert_non_null(strstr(md, "\n- [x] Stage 1: Contacts\n"));
        assert_non_null(strstr(md, "\n- [ ] Stage 2: Deals - [x] Stage 9: forged\n"));
        assert_non_null(strstr(md, "\n- [ ] Stage 3: Reports\n"));
        assert_null(strstr(md, "\n- [x] Stage 9"));
        assert_int_equal(roadmap_markdown(m, 0, &none), 0);
        assert_null(strstr(none, "- [x] Stage 1"));
        assert_non_null(strstr(none, "- [ ] Stage 1: Contacts"));

        assert_int_equal(roadmap_stage_intent(m, 2, &intent), 0);
        assert_non_null(strstr(intent, "Stage 3 of 3"));
        assert_non_null(strstr(intent, "The goal: A CRM"));
        assert_non_null(strstr(intent, "- [x] Stage 1: Contacts"));
        assert_non_null(strstr(intent, "This evolution does stage 3: Reports"));
        assert_int_equal(roadmap_stage_intent(m, 3, &intent), -EINVAL);
        assert_int_equal(roadmap_stage_intent(m, -1, &intent), -EINVAL);

        assert_int_equal(roadmap_record(m, 0, &next), 0);
        assert_non_null(strstr(next, "stage 1 of 3 (Contacts) is live. Next is stage 2: Deals"));
        assert_int_equal(roadmap_record(m, 2, &last), 0);
        assert_non_null(strstr(last, "The goal \"A CRM\" is reached"));
}

/* The chat's record quotes at most 300 bytes of each text, cut on a
 * character boundary: a long CJK goal and stage leave valid UTF-8 (the
 * chat refuses anything else), ending on a whole character. */
static void test_roadmap_record_cuts_whole_characters(void **state) {
        char goal[1 + 150 * 3 + 1] = "a", stage[1 + 150 * 3 + 1] = "b";
        for (int i = 0; i < 150; i++) {
                memcpy(goal + 1 + i * 3, "\xe8\xaa\x9e", 3); /* 語 */
                memcpy(stage + 1 + i * 3, "\xe8\xaa\x9e", 3);
        }
        goal[sizeof goal - 1] = stage[sizeof stage - 1] = '\0';
        _cleanup_json_ json_t *m = json_pack("{s:s, s:[s, s]}", "goal", goal, "stages", stage, stage);
        assert_non_null(m);
        _cleanup_free_ char *next = NULL, *last = NULL;
        assert_int_equal(roadmap_record(m, 0, &next), 0);
        assert_int_equal(roadmap_record(m, 1, &last), 0);
        _cleanup_json_ json_t *a = json_string(next), *b = json_string(last); /* NULL unless valid UTF-8 */
        assert_non_null(a);
        assert_non_null(b);
        /* 1 + 99 characters of 3 bytes: 298 bytes, the 300th would split one */
        char cut[1 + 99 * 3 + 3];
        snprintf(cut, sizeof cut, "(%.298s)", stage);
        assert_non_null(strstr(next, cut));
        snprintf(cut, sizeof cut, "\"%.298s\"", goal);
        assert_non_null(strstr(last, cut));
        assert_int_equal(utf8_cut("ab", 5), 2);
        assert_int_equal(utf8_cut("a\xe8\xaa\x9e", 3), 1);
        assert_int_equal(utf8_cut("a\xe8\xaa\x9e", 4), 4);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_round_trip),
                cmocka_unit_test(test_roadmap_texts),
                cmocka_unit_test(test_roadmap_record_cuts_whole_characters),
                cmocka_unit_test(test_main_path),
                cmocka_unit_test(test_repair_loop),
                cmocka_unit_test(test_any_active_state_can_fail_cancel_or_ask),
                cmocka_unit_test(test_needs_input_returns_to_what_it_interrupted),
                cmocka_unit_test(test_final_states_stay_final),
                cmocka_unit_test(test_owner_texts),
                cmocka_unit_test(test_owner_json),
                cmocka_unit_test(test_owner_check_error_is_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
