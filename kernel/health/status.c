/* status.c — an incident's statuses and the changes allowed between them, as
 * data (like kernel/evolution/state.c). The store checks every change
 * against health_transition_allowed(). See health.h. */
#include "health/health.h"

static const char *const names[_HEALTH_ST_MAX] = {
        [HEALTH_ST_OPEN] = "open",           [HEALTH_ST_DIAGNOSING] = "diagnosing",
        [HEALTH_ST_DIAGNOSED] = "diagnosed", [HEALTH_ST_FIXING] = "fixing",
        [HEALTH_ST_WATCHING] = "watching",   [HEALTH_ST_RESOLVED] = "resolved",
        [HEALTH_ST_IGNORED] = "ignored",
};

/* Every change but "ignored", which any status that has not ended may take
 * (the owner's Ignore), is an edge here. */
static const struct {
        enum health_status from, to;
        const char *why;
} edges[] = {
        {HEALTH_ST_OPEN, HEALTH_ST_DIAGNOSING, "a diagnosis starts"},
        {HEALTH_ST_DIAGNOSING, HEALTH_ST_DIAGNOSED, "the diagnosis was submitted"},
        {HEALTH_ST_DIAGNOSING, HEALTH_ST_OPEN, "the diagnosis failed or was cut short: tried again later"},
        {HEALTH_ST_OPEN, HEALTH_ST_FIXING, "the owner's Fix before any diagnosis"},
        {HEALTH_ST_DIAGNOSED, HEALTH_ST_FIXING, "the owner's Fix, or the automatic one"},
        {HEALTH_ST_FIXING, HEALTH_ST_WATCHING, "the fix's evolution completed"},
        {HEALTH_ST_FIXING, HEALTH_ST_DIAGNOSED, "the fix's evolution failed or was cancelled"},
        {HEALTH_ST_FIXING, HEALTH_ST_OPEN, "the fix's evolution could not be queued (Fix before any diagnosis)"},
        {HEALTH_ST_WATCHING, HEALTH_ST_RESOLVED, "30 minutes without the cause"},
        {HEALTH_ST_WATCHING, HEALTH_ST_OPEN, "the cause happened again after the fix"},
};

const char *health_status_name(enum health_status s) {
        return s >= 0 && s < _HEALTH_ST_MAX ? names[s] : "unknown";
}

int health_status_from_name(const char *name, enum health_status *ret) {
        for (int i = 0; name && i < _HEALTH_ST_MAX; i++)
                if (streq(names[i], name)) {
                        *ret = (enum health_status)i;
                        return 0;
                }
        return -EINVAL;
}

bool health_status_is_final(enum health_status s) { return s == HEALTH_ST_RESOLVED || s == HEALTH_ST_IGNORED; }

bool health_transition_allowed(enum health_status from, enum health_status to) {
        if (from < 0 || from >= _HEALTH_ST_MAX || to < 0 || to >= _HEALTH_ST_MAX || from == to ||
            health_status_is_final(from))
                return false;
        if (to == HEALTH_ST_IGNORED)
                return true;
        for (size_t i = 0; i < ARRAY_SIZE(edges); i++)
                if (edges[i].from == from && edges[i].to == to)
                        return true;
        return false;
}
