#include "evolution/store.h"
#include "base/crypto.h"
#include "base/json.h"
#include "base/log.h"
#include "db/db.h"


#define INTENT_MAX (16 * 1024)
#define EVENT_MAX (1024 * 1024)

static const char *const event_kinds[] = {"phase", "plan",     "tool_call",  "tool_result", "check",   "note",
                                          "error", "approval", "agent_text", "question",    "waiting", "resumed"};

/* The "waiting" field of an evolution under way: its last waiting event's
 * data while no resumed event came after it (the model cannot be reached
 * and the evolution waits it out), else null. */
#define WAITING_FIELD                                                                                                \
        "CASE WHEN state NOT IN ('complete', 'failed', 'cancelled', 'rolled_back') THEN "                            \
        "(SELECT CASE WHEN e.kind = 'waiting' THEN e.data END FROM evolution_events e "                              \
        "WHERE e.evolution_id = evolutions.id AND e.kind IN ('waiting', 'resumed') ORDER BY e.id DESC LIMIT 1) "     \
        "END AS waiting"


bool evo_event_kind_valid(const char *kind) {
        for (size_t i = 0; kind && i < ARRAY_SIZE(event_kinds); i++)
                if (streq(kind, event_kinds[i]))
                        return true;
        return false;
}

static int now_str(char out[32]) { return snprintf(out, 32, "%lld", (long long)wall_ms()); }

static int new_id(const char *prefix, char **ret) {
        _cleanup_free_ char *hex = NULL;
        int r = crypto_random_hex(8, &hex);
        if (r < 0)
                return r;
        return xasprintf(ret, "%s_%s", prefix, hex);
}

static int insert_event(struct db *db, const char *id, const char *kind, const char *data_json) {
        char now[32];
        now_str(now);
        const char *p[] = {id, now, kind, data_json};
        int r = db_execp(db, "INSERT INTO evolution_events (evolution_id, at, kind, data) VALUES ($1, $2, $3, $4)", 4,
                         p, NULL);
        return r < 0 ? r : 0;
}

int evo_event(struct db *db, const char *id, const char *kind, const char *data_json) {
        if (!evo_event_kind_valid(kind) || !data_json || strlen(data_json) > EVENT_MAX)
                return -EINVAL;
        _cleanup_json_ json_t *o = json_loads(data_json, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(o))
                return -EINVAL;
        return insert_event(db, id, kind, data_json);
}

int evo_create_new(struct db *db, const struct evo_new *n, char **ret_id) {
        const char *intent = n->intent, *kind = n->kind;
        if (strempty(intent) || strlen(intent) > INTENT_MAX || !kind ||
            (!streq(kind, "evolve") && !streq(kind, "rollback") && !streq(kind, "owner") && !streq(kind, "fix")) ||
            (n->owner_words && strlen(n->owner_words) > INTENT_MAX) ||
            (n->roadmap_id && (n->roadmap_stage < 0 || n->roadmap_stage >= 6)))
                return -EINVAL;
        _cleanup_free_ char *id = NULL;
        int r = new_id("evo", &id);
        if (r < 0)
                return r;
        char now[32], stage[16];
        now_str(now);
        snprintf(stage, sizeof stage, "%d", n->roadmap_stage);
        const char *p[] = {id, intent, kind, now, n->owner_words, n->roadmap_id, n->roadmap_id ? stage : NULL};
        r = db_execp(db,
                     "INSERT INTO evolutions (id, intent, kind, state, created_at, updated_at, owner_words, "
                     "roadmap_id, roadmap_stage) VALUES ($1, $2, $3, 'requested', $4, $4, $5, $6, $7::int)",
                     7, p, NULL);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *ev = json_pack("{s:s, s:s, s:s?}", "to", "requested", "intent", intent, "owner_words",
                                              n->owner_words);
        _cleanup_free_ char *data = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
        r = data ? insert_event(db, id, "phase", data) : -ENOMEM;
        if (r < 0)
                return r;
        *ret_id = TAKE_PTR(id);
        return 0;
}

int evo_create(struct db *db, const char *intent, const char *kind, char **ret_id) {
        return evo_create_new(db, &(struct evo_new){.intent = intent, .kind = kind}, ret_id);
}

static int read_state(struct db *db, const char *id, enum evo_state *ret_state, enum evo_state *ret_resume) {
        const char *p[] = {id};
        _cleanup_free_ char *v = NULL;
        int r = db_query_value(db, "SELECT state || ' ' || coalesce(resume_state, '-') FROM evolutions WHERE id = $1",
                               1, p, &v);
        if (r < 0)
                return r;
        char *sp = strchr(v, ' ');
        if (!sp)
                return -EBADMSG;
        *sp = 0;
        if (evo_state_from_name(v, ret_state) < 0)
                return -EBADMSG;
        if (ret_resume && evo_state_from_name(sp + 1, ret_resume) < 0)
                *ret_resume = _EVO_STATE_MAX;
        return 0;
}

int evo_get_state(struct db *db, const char *id, enum evo_state *ret) { return read_state(db, id, ret, NULL); }

int evo_set_state(struct db *db, const char *id, enum evo_state to, const char *note, char **ret_error) {
        enum evo_state from, resume = _EVO_STATE_MAX;
        int r = read_state(db, id, &from, &resume);
        if (r < 0)
                return r;
        if (!evo_transition_allowed(from, to, resume)) {
                if (ret_error)
                        (void)xasprintf(ret_error, "an evolution cannot go from %s to %s", evo_state_name(from),
                                        evo_state_name(to));
                return -EPERM;
        }
        char now[32];
        now_str(now);
        const char *p[] = {id, evo_state_name(from), evo_state_name(to), now,
                           to == EVO_NEEDS_INPUT ? evo_state_name(from) : NULL,
                           to == EVO_FAILED ? note : NULL, evo_state_is_final(to) ? now : NULL};
        r = db_execp(db,
                     "UPDATE evolutions SET state = $3, updated_at = $4, resume_state = $5, "
                     "error = coalesce($6, error), finished_at = $7 WHERE id = $1 AND state = $2",
                     7, p, NULL);
        if (r < 0)
                return r;
        if (r == 0)
                return -EAGAIN;
        if (evo_state_is_final(to)) {
                /* An ended evolution waits for nothing: its pending approvals
                 * expire, so none can be decided (or mislead) later. */
                const char *pa[] = {id, now};
                if ((r = db_execp(db,
                                  "UPDATE approvals SET state = 'expired', decided_at = $2 "
                                  "WHERE evolution_id = $1 AND state = 'pending'",
                                  2, pa, NULL)) < 0)
                        return r;
        }
        _cleanup_json_ json_t *ev = json_pack("{s:s, s:s}", "from", evo_state_name(from), "to", evo_state_name(to));
        if (ev && note)
                json_object_set_new(ev, "note", json_string(note));
        _cleanup_free_ char *data = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
        return data ? insert_event(db, id, "phase", data) : -ENOMEM;
}

int evo_set_plan(struct db *db, const char *id, const char *title, const char *scope, const char *plan_json) {
        if (!title || strlen(title) > 200 || !scope || strlen(scope) > 40)
                return -EINVAL;
        const char *p[] = {id, title, scope, plan_json};
        int r = db_execp(db, "UPDATE evolutions SET title = $2, scope = $3, plan = $4 WHERE id = $1", 4, p, NULL);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

int evo_set_generation(struct db *db, const char *id, const char *base_oid, const char *commit_oid, int from_gen,
                       int to_gen) {
        char from[16], to[16];
        snprintf(from, sizeof from, "%d", from_gen);
        snprintf(to, sizeof to, "%d", to_gen);
        const char *p[] = {id, base_oid, commit_oid, from, to};
        int r = db_execp(db,
                         "UPDATE evolutions SET base_commit = $2, commit_oid = $3, from_generation = $4::integer, "
                         "to_generation = $5::integer WHERE id = $1",
                         5, p, NULL);
        return r < 0 ? r : r == 0 ? -ENOENT : 0;
}

int evo_count_repair(struct db *db, const char *id) {
        const char *p[] = {id};
        _cleanup_free_ char *v = NULL;
        int r = db_query_value(db,
                               "UPDATE evolutions SET repair_attempts = repair_attempts + 1 WHERE id = $1 "
                               "RETURNING repair_attempts",
                               1, p, &v);
        return r < 0 ? r : atoi(v);
}

int evo_get_json(struct db *db, const char *id, bool with_events, int64_t after_event_id, char **ret_json) {
        const char *p[] = {id};
        _cleanup_free_ char *rows = NULL;
        int r = db_query_json(db,
                              "SELECT id, intent, kind, state, resume_state, title, scope, plan, base_commit, "
                              "commit_oid, from_generation, to_generation, repair_attempts, error, created_at, "
                              "updated_at, finished_at, owner_words, roadmap_id, roadmap_stage, " WAITING_FIELD
                              " FROM evolutions WHERE id = $1",
                              1, p, &rows);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        json_t *o = json_array_get(arr, 0); /* borrowed from arr */
        if (!o)
                return -ENOENT;
        if (with_events) {
                char after[32];
                snprintf(after, sizeof after, "%lld", (long long)after_event_id);
                const char *pe[] = {id, after};
                _cleanup_free_ char *events = NULL;
                r = db_query_json(db,
                                  "SELECT id, at, kind, data FROM evolution_events WHERE evolution_id = $1 AND id > $2 "
                                  "ORDER BY id",
                                  2, pe, &events);
                if (r < 0)
                        return r;
                json_object_set_new(o, "events", json_loads(events, 0, NULL));
                /* what its model calls took: input cached and not, output, cost */
                _cleanup_free_ char *usage = NULL;
                r = db_usage_reference_json(db, id, &usage);
                if (r < 0)
                        return r;
                json_object_set_new(o, "usage", json_loads(usage, 0, NULL));
        }
        char *s = json_dumps(o, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

int evo_list_json(struct db *db, int limit, char **ret_json) {
        if (limit < 1 || limit > 500)
                return -EINVAL;
        char lim[16];
        snprintf(lim, sizeof lim, "%d", limit);
        const char *p[] = {lim};
        return db_query_json(db,
                             "SELECT id, intent, kind, state, title, scope, from_generation, to_generation, error, "
                             "created_at, updated_at, finished_at, owner_words, roadmap_id, roadmap_stage, " WAITING_FIELD
                             " FROM evolutions ORDER BY seq DESC LIMIT $1",
                             1, p, ret_json);
}

int evo_next_requested(struct db *db, char **ret_id) {
        return db_query_value(db,
                              "SELECT id FROM evolutions WHERE state = 'requested' "
                              "ORDER BY (kind = 'owner') DESC, seq LIMIT 1",
                              0, NULL, ret_id);
}

int evo_find_requested(struct db *db, const char *kind, char **ret_id) {
        const char *p[] = {kind};
        return db_query_value(db,
                              "SELECT id FROM evolutions WHERE state = 'requested' AND kind = $1 ORDER BY seq LIMIT 1",
                              1, p, ret_id);
}

int evo_ids_in_state(struct db *db, enum evo_state st, char ***ret_ids) {
        _cleanup_free_ char *rows = NULL;
        const char *p[] = {evo_state_name(st)};
        int r = db_query_json(db, "SELECT id FROM evolutions WHERE state = $1 ORDER BY seq", 1, p, &rows);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        _cleanup_strv_free_ char **ids = NULL;
        size_t i;
        json_t *row;
        json_array_foreach(arr, i, row) {
                const char *id = json_string_value(json_object_get(row, "id"));
                if (id && (r = strv_push(&ids, id)) < 0)
                        return r;
        }
        *ret_ids = TAKE_PTR(ids);
        return 0;
}

int evo_recover(struct db *db) {
        _cleanup_free_ char *ids = NULL;
        int r = db_query_json(db,
                              "SELECT id, state FROM evolutions WHERE state NOT IN "
                              "('requested', 'complete', 'failed', 'cancelled', 'rolled_back')",
                              0, NULL, &ids);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_loads(ids, 0, NULL);
        size_t i;
        json_t *row;
        int n = 0;
        json_array_foreach(arr, i, row) {
                const char *id = json_string_value(json_object_get(row, "id"));
                if (id && evo_set_state(db, id, EVO_FAILED, "interrupted by a kernel restart", NULL) == 0)
                        n++;
        }
        char now[32];
        now_str(now);
        const char *p[] = {now};
        r = db_execp(db, "UPDATE approvals SET state = 'expired', decided_at = $1 WHERE state = 'pending'", 1, p, NULL);
        if (r < 0)
                return r;
        if (n > 0)
                log_info("boot recovery: %d interrupted evolution(s) marked failed", n);
        return n;
}

int evo_approval_create(struct db *db, const char *evo_id, const char *kind, const char *tool, const char *level,
                        const char *request_json, char **ret_id) {
        static const char *const kinds[] = {"tool", "plan", "apply", "question"};
        bool ok = false;
        for (size_t i = 0; kind && i < ARRAY_SIZE(kinds); i++)
                ok = ok || streq(kind, kinds[i]);
        if (!ok || !request_json)
                return -EINVAL;
        _cleanup_free_ char *id = NULL;
        int r = new_id("apr", &id);
        if (r < 0)
                return r;
        char now[32];
        now_str(now);
        const char *p[] = {id, evo_id, kind, tool, level, request_json, now};
        r = db_execp(db,
                     "INSERT INTO approvals (id, evolution_id, kind, tool, level, request, created_at) "
                     "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                     7, p, NULL);
        if (r < 0)
                return r;
        *ret_id = TAKE_PTR(id);
        return 0;
}

int evo_approval_expire(struct db *db, const char *id) {
        char now[32];
        now_str(now);
        const char *p[] = {id, now};
        int r = db_execp(db, "UPDATE approvals SET state = 'expired', decided_at = $2 WHERE id = $1 AND state = 'pending'",
                         2, p, NULL);
        return r < 0 ? r : r == 1 ? 0 : -EALREADY;
}

int evo_approval_decide(struct db *db, const char *id, bool approved, const char *answer) {
        char now[32];
        now_str(now);
        const char *state = answer ? "answered" : approved ? "approved" : "denied";
        /* A question takes an answer and nothing else; every other kind takes
         * a yes or no: an answer can never approve a call. */
        const char *p[] = {id, state, answer, now, answer ? "true" : "false"};
        int r = db_execp(db,
                         "UPDATE approvals SET state = $2, answer = $3, decided_at = $4 "
                         "WHERE id = $1 AND state = 'pending' AND (kind = 'question') = $5::boolean",
                         5, p, NULL);
        if (r < 0)
                return r;
        if (r == 1)
                return 0;
        _cleanup_free_ char *cur = NULL;
        if (evo_approval_state(db, id, &cur, NULL) < 0)
                return -ENOENT;
        return streq(cur, "pending") ? -EINVAL : -EALREADY;
}

int evo_approval_state(struct db *db, const char *id, char **ret_state, char **ret_answer) {
        const char *p[] = {id};
        _cleanup_free_ char *rows = NULL;
        int r = db_query_json(db, "SELECT state, answer FROM approvals WHERE id = $1", 1, p, &rows);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        json_t *o = json_array_get(arr, 0);
        const char *st = json_string_value(json_object_get(o, "state"));
        const char *ans = json_string_value(json_object_get(o, "answer"));
        r = -ENOENT;
        if (st) {
                *ret_state = strdup(st);
                if (ret_answer)
                        *ret_answer = ans ? strdup(ans) : NULL;
                r = *ret_state ? 0 : -ENOMEM;
        }
        return r;
}

int evo_approvals_pending_json(struct db *db, char **ret_json) {
        return db_query_json(db,
                             "SELECT id, evolution_id, kind, tool, level, request, created_at FROM approvals "
                             "WHERE state = 'pending' ORDER BY created_at",
                             0, NULL, ret_json);
}

/* ---- the owner's evolution settings ---- */

int evo_preview_enabled(struct db *db, bool *ret) {
        _cleanup_free_ char *v = NULL;
        int r = db_setting_get(db, EVO_SETTING_PREVIEW, &v);
        if (r == -ENOENT) {
                *ret = true; /* on by default */
                return 0;
        }
        if (r < 0)
                return r;
        *ret = !streq(v, "off");
        return 0;
}

int evo_preview_set(struct db *db, bool on) {
        return db_setting_set(db, EVO_SETTING_PREVIEW, on ? "on" : "off");
}
