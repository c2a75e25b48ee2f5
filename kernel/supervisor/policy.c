/* What the supervisor does after each kernel's end: a table of rules, the
 * first match deciding, each with its reason. No processes here. */
#include "supervisor/supervisor.h"

#include "app/app.h"

const struct supervisor_rule supervisor_rules[] = {
        {SUPERVISOR_END_STOPPED, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_STOP,
         "the Seed was asked to stop"},
        {SUPERVISOR_END_EXITED, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_STOP,
         "the kernel stopped by itself"},
        {SUPERVISOR_END_RESTART, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_REBUILD,
         "exit 75: the kernel's source changed, so it is built again (the crash count starts over)"},
        {SUPERVISOR_END_BUILD_FAILED, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_FALL_BACK,
         "a source that does not build is not run: the last good kernel is"},
        {SUPERVISOR_END_ASKED, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_ANY, SUPERVISOR_START_AGAIN,
         "seed restart: the same kernel starts again at once with the secrets as they are now (the port stays "
         "bound)"},
        {SUPERVISOR_END_CRASHED, SUPERVISOR_YES, SUPERVISOR_YES, SUPERVISOR_ANY, SUPERVISOR_FALL_BACK,
         "a new build that dies within 60 s is not trusted: the last good kernel runs instead"},
        {SUPERVISOR_END_CRASHED, SUPERVISOR_YES, SUPERVISOR_NO, SUPERVISOR_ANY, SUPERVISOR_GIVE_UP,
         "a known good kernel that dies within 60 s would die again: restarting it cannot help"},
        {SUPERVISOR_END_CRASHED, SUPERVISOR_NO, SUPERVISOR_ANY, SUPERVISOR_YES, SUPERVISOR_RESTART,
         "a kernel that ran a minute crashed: restarted after a pause growing with each crash"},
        {SUPERVISOR_END_CRASHED, SUPERVISOR_NO, SUPERVISOR_ANY, SUPERVISOR_NO, SUPERVISOR_GIVE_UP,
         "it crashed again and again: a loop of restarts would only hide it"},
};
const size_t supervisor_n_rules = ARRAY_SIZE(supervisor_rules);

static bool matches(enum supervisor_match m, bool v) {
        return m == SUPERVISOR_ANY || (m == SUPERVISOR_YES) == v;
}

struct supervisor_decision supervisor_decide(const struct supervisor_outcome *o) {
        for (size_t i = 0; i < supervisor_n_rules; i++) {
                const struct supervisor_rule *r = &supervisor_rules[i];
                if (r->end != o->end || !matches(r->early, o->early) || !matches(r->fresh, o->fresh) ||
                    !matches(r->crashes_left, o->crashes < SUPERVISOR_MAX_CRASHES))
                        continue;
                struct supervisor_decision d = {.action = r->action, .why = r->why};
                if (d.action == SUPERVISOR_RESTART)
                        d.delay_ms = (o->crashes + 1) * SUPERVISOR_CRASH_PAUSE_MS;
                return d;
        }
        return (struct supervisor_decision){.action = SUPERVISOR_GIVE_UP, .why = "no rule for this end"};
}

enum supervisor_end supervisor_end_of_exit(int exit_code) {
        switch (exit_code) {
        case APP_EXIT_OK: return SUPERVISOR_END_EXITED;
        case APP_EXIT_RESTART: return SUPERVISOR_END_RESTART;
        default: return SUPERVISOR_END_CRASHED;
        }
}

const char *supervisor_action_name(enum supervisor_action a) {
        static const char *const names[] = {
                [SUPERVISOR_STOP] = "stop",         [SUPERVISOR_REBUILD] = "rebuild",
                [SUPERVISOR_FALL_BACK] = "fall back", [SUPERVISOR_RESTART] = "restart",
                [SUPERVISOR_GIVE_UP] = "give up",   [SUPERVISOR_START_AGAIN] = "start again",
        };
        return (unsigned)a < ARRAY_SIZE(names) ? names[a] : "?";
}
