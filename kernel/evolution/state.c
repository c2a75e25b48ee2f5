#include "evolution/state.h"

static const char *const names[_EVO_STATE_MAX] = {
        [EVO_REQUESTED] = "requested",     [EVO_PLANNING] = "planning",   [EVO_PLANNED] = "planned",
        [EVO_MUTATING] = "mutating",       [EVO_BUILDING] = "building",   [EVO_TESTING] = "testing",
        [EVO_RUNNING] = "running",         [EVO_OBSERVING] = "observing", [EVO_REFLECTING] = "reflecting",
        [EVO_READY] = "ready",             [EVO_APPLYING] = "applying",   [EVO_COMPLETE] = "complete",
        [EVO_FAILED] = "failed",           [EVO_NEEDS_INPUT] = "needs_input",
        [EVO_CANCELLED] = "cancelled",     [EVO_ROLLED_BACK] = "rolled_back",
};

/* The forward edges of the main path and the repair loop. The edges every
 * active state has (failed, cancelled, needs_input) are added by the code. */
static const struct {
        enum evo_state from, to;
} edges[] = {
        {EVO_REQUESTED, EVO_PLANNING},  {EVO_PLANNING, EVO_PLANNED},     {EVO_PLANNED, EVO_MUTATING},
        {EVO_MUTATING, EVO_BUILDING},   {EVO_BUILDING, EVO_TESTING},     {EVO_TESTING, EVO_RUNNING},
        {EVO_RUNNING, EVO_OBSERVING},   {EVO_OBSERVING, EVO_REFLECTING}, {EVO_REFLECTING, EVO_READY},
        {EVO_READY, EVO_APPLYING},      {EVO_APPLYING, EVO_COMPLETE},    {EVO_APPLYING, EVO_ROLLED_BACK},
        /* repair: a failed check goes back to the model */
        {EVO_BUILDING, EVO_MUTATING},   {EVO_TESTING, EVO_MUTATING},     {EVO_RUNNING, EVO_MUTATING},
        {EVO_OBSERVING, EVO_MUTATING},
        /* a rollback evolution restores a tree: no plan, no model */
        {EVO_REQUESTED, EVO_BUILDING},
        /* the owner tried the candidate in the preview and asked for changes */
        {EVO_READY, EVO_MUTATING},
};

const char *evo_state_name(enum evo_state s) {
        return s >= 0 && s < _EVO_STATE_MAX ? names[s] : "unknown";
}

int evo_state_from_name(const char *name, enum evo_state *ret) {
        for (int i = 0; name && i < _EVO_STATE_MAX; i++)
                if (streq(names[i], name)) {
                        *ret = (enum evo_state)i;
                        return 0;
                }
        return -EINVAL;
}

bool evo_state_is_final(enum evo_state s) {
        return s == EVO_COMPLETE || s == EVO_FAILED || s == EVO_CANCELLED || s == EVO_ROLLED_BACK;
}

bool evo_state_is_active(enum evo_state s) {
        return s > EVO_REQUESTED && s < _EVO_STATE_MAX && !evo_state_is_final(s);
}

bool evo_transition_allowed(enum evo_state from, enum evo_state to, enum evo_state resume) {
        if (from < 0 || from >= _EVO_STATE_MAX || to < 0 || to >= _EVO_STATE_MAX || from == to)
                return false;
        if (evo_state_is_final(from))
                return false;
        if (to == EVO_FAILED || to == EVO_CANCELLED)
                return true; /* any state that has not ended */
        if (from == EVO_NEEDS_INPUT)
                return to == resume && evo_state_is_active(resume) && resume != EVO_NEEDS_INPUT;
        if (to == EVO_NEEDS_INPUT)
                return evo_state_is_active(from);
        for (size_t i = 0; i < ARRAY_SIZE(edges); i++)
                if (edges[i].from == from && edges[i].to == to)
                        return true;
        return false;
}
