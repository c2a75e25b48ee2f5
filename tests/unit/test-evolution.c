/* Unit tests for kernel/evolution's state machine (SPEC §4). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names_round_trip),
                cmocka_unit_test(test_main_path),
                cmocka_unit_test(test_repair_loop),
                cmocka_unit_test(test_any_active_state_can_fail_cancel_or_ask),
                cmocka_unit_test(test_needs_input_returns_to_what_it_interrupted),
                cmocka_unit_test(test_final_states_stay_final),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
