/* state.h — the evolution state machine of SPEC §4, as data.
 *
 * Main path: requested → planning → planned → mutating → building → testing →
 * running → observing → reflecting → ready → applying → complete.
 * Verification failures (building/testing/running/observing) go back to
 * mutating for repair. Any active state can go to failed, cancelled or
 * needs_input; needs_input returns to the state it interrupted. An applied
 * generation that is unhealthy is rolled_back. */
#pragma once

#include "base/base.h"

enum evo_state {
        EVO_REQUESTED,
        EVO_PLANNING,
        EVO_PLANNED,
        EVO_MUTATING,
        EVO_BUILDING,
        EVO_TESTING,
        EVO_RUNNING,
        EVO_OBSERVING,
        EVO_REFLECTING,
        EVO_READY,
        EVO_APPLYING,
        EVO_COMPLETE,
        EVO_FAILED,
        EVO_NEEDS_INPUT,
        EVO_CANCELLED,
        EVO_ROLLED_BACK,
        _EVO_STATE_MAX,
};

const char *evo_state_name(enum evo_state s);
/* -EINVAL for an unknown name. */
int evo_state_from_name(const char *name, enum evo_state *ret);
/* Ended for good: complete, failed, cancelled, rolled_back. */
bool evo_state_is_final(enum evo_state s);
/* Work is under way (not final, not requested). needs_input counts. */
bool evo_state_is_active(enum evo_state s);
/* Whether from → to is allowed. For needs_input → X, resume must be the
 * state that needs_input interrupted (X must equal it, or be final). */
bool evo_transition_allowed(enum evo_state from, enum evo_state to, enum evo_state resume);
