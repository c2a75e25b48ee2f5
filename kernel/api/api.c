/* api.c — the routes under /_seed/api (evolutions, approvals, generations,
 * the chat, and self.c's) and the event hub behind GET /_seed/api/events.
 * See api.h. */
#include "api/api.h"
#include "ask/drafts.h"
#include "model/model.h"
#include "api/reply.h"
#include "api/roadmap.h"
#include "api/backups.h"
#include "api/outbound.h"
#include "api/mind.h"
#include "api/self.h"
#include "api/extensions.h"
#include "api/spend.h"
#include "api/routines.h"
#include "api/health.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "chat/chat.h"
#include "evolution/orchestrator.h"
#include "evolution/store.h"
#include "mind/mind.h"
#include "repo/repo.h"

#include <limits.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#define LIST_LIMIT 100
#define ANSWER_MAX (16 * 1024)

struct sse_sub {
        struct api *api;
        struct buf q;          /* queued bytes; q.data[off..len) not yet sent */
        size_t off;
        bool greeted, dropped;
        int64_t last_sent_ms;
};

struct api {
        char *seed_dir;
        char *refused;             /* why evolutions are refused here, or NULL */
        struct db *kdb;
        struct orchestrator *orch; /* atomic */
        struct mind *mind;         /* NULL: no model at all */
        struct chat *chat;
        struct outbound *outbound;
        struct ask_drafts *drafts; /* point and ask's pictures, or NULL */
        struct backups *backups;
        struct spend *spend;       /* NULL: spend routes answer 503 */
        struct routines *routines; /* NULL: routines routes answer 503 */
        struct health *health;     /* NULL: incident routes answer 503 */
        pthread_mutex_t lock;
        pthread_cond_t cond;       /* CLOCK_MONOTONIC; broadcast on publish and shutdown */
        struct sse_sub *subs[API_SSE_SUBSCRIBERS];
        bool stopping;
};

/* ---- ids and replies ---- */

bool api_id_valid(const char *s, const char *prefix) {
        if (!s || !prefix || !startswith(s, prefix))
                return false;
        const char *h = s + strlen(prefix);
        if (strlen(h) != 16)
                return false;
        for (; *h; h++)
                if (!((*h >= '0' && *h <= '9') || (*h >= 'a' && *h <= 'f')))
                        return false;
        return true;
}

/* Answers with JSON text the store produced (taken). */
static int reply_text(int status, char *json, int *ret_status, char **ret_json) {
        *ret_status = status;
        *ret_json = json;
        return 0;
}

/* {"<key>": <json text>} */
static int reply_wrapped(const char *key, char *json_text, int *ret_status, char **ret_json) {
        json_t *v = json_loads(json_text, 0, NULL);
        free(json_text);
        if (!v)
                return -EBADMSG;
        return api_reply(200, json_pack("{s:o}", key, v), ret_status, ret_json);
}

static struct orchestrator *api_orch(struct api *api) {
        return __atomic_load_n(&api->orch, __ATOMIC_ACQUIRE);
}

#define NO_ORCH "evolutions are not available: the orchestrator is not running"

/* 503: no orchestrator, with the start-up doctor's reason when there is one. */
static int no_orch(const struct api *api, int *ret_status, char **ret_json) {
        return api_reply_error(503, api->refused ? api->refused : NO_ORCH, ret_status, ret_json);
}

/* 409 when there is a mind that cannot think (returns 1): nothing is
 * created, and the owner reads why, with the variable to pass. */
static int no_mind(const struct api *api, int *ret_status, char **ret_json) {
        _cleanup_free_ char *why = api->mind ? mind_why_not(api->mind) : NULL;
        if (!why)
                return 0;
        int r = api_reply_error(409, why, ret_status, ret_json);
        return r < 0 ? r : 1;
}

/* The request body as a JSON object, or a 400 answer (returns 1). */
static int parse_body(const struct ctl_api_call *call, json_t **ret, int *ret_status, char **ret_json) {
        json_error_t err;
        _cleanup_json_ json_t *o = json_loadb(call->body, call->body_len, JSON_REJECT_DUPLICATES, &err);
        if (!json_is_object(o)) {
                int r = api_reply_error(400, "the body must be a JSON object", ret_status, ret_json);
                return r < 0 ? r : 1;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

/* An optional bounded string member: 1 = answered 400. */
static int body_string(json_t *o, const char *key, size_t max, bool required, const char **ret, int *ret_status,
                       char **ret_json) {
        json_t *v = json_object_get(o, key);
        char msg[128];
        if (!v && !required) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max ||
            strlen(json_string_value(v)) != json_string_length(v)) {
                snprintf(msg, sizeof msg, "\"%s\" must be a non-empty string of at most %zu bytes", key, max);
                int r = api_reply_error(400, msg, ret_status, ret_json);
                return r < 0 ? r : 1;
        }
        *ret = json_string_value(v);
        return 0;
}

/* ---- evolutions ---- */

static int h_list(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        char *rows = NULL;
        int r = evo_list_json(api->kdb, LIST_LIMIT, &rows);
        if (r < 0)
                return log_error_errno(r, "could not list evolutions: %m");
        return reply_wrapped("evolutions", rows, ret_status, ret_json);
}

static int h_submit(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        const char *intent = NULL;
        int r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        r = body_string(body, "intent", API_INTENT_MAX, true, &intent, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        if ((r = no_mind(api, ret_status, ret_json)) != 0)
                return r < 0 ? r : 0;
        _cleanup_free_ char *id = NULL;
        r = orch_submit(o, intent, NULL, &id);
        if (r == -EINVAL)
                return api_reply_error(400, "the intent was refused", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not queue an evolution: %m");
        log_info("queued evolution %s (via %s)", id, call->via_cli ? "the CLI" : "the control plane");
        return api_reply(202, json_pack("{s:s}", "id", id), ret_status, ret_json);
}

/* Checks call->param as an evolution id: 1 = answered 400. */
static int evo_param(const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (api_id_valid(call->param, "evo_"))
                return 0;
        int r = api_reply_error(400, "bad evolution id (evo_ and 16 hex digits)", ret_status, ret_json);
        return r < 0 ? r : 1;
}

/* The value of name in a query string ("a=1&b=2"), copied; -ENOENT if absent. */
static int query_value(const char *query, const char *name, char *out, size_t out_size) {
        size_t nl = strlen(name);
        for (const char *p = query; p && *p;) {
                size_t len = strcspn(p, "&");
                if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
                        size_t vl = len - nl - 1;
                        if (vl >= out_size)
                                return -E2BIG;
                        memcpy(out, p + nl + 1, vl);
                        out[vl] = 0;
                        return 0;
                }
                p += len + (p[len] == '&');
        }
        return -ENOENT;
}

static int parse_int64(const char *s, int64_t min, int64_t max, int64_t *ret) {
        if (!s || !*s || strlen(s) > 18)
                return -EINVAL;
        for (const char *p = s; *p; p++)
                if (*p < '0' || *p > '9')
                        return -EINVAL;
        long long v = strtoll(s, NULL, 10);
        if (v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

static int h_get(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        int r = evo_param(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        int64_t after = 0;
        char v[32];
        r = query_value(call->query, "after", v, sizeof v);
        if (r != -ENOENT && (r < 0 || parse_int64(v, 0, INT64_MAX, &after) < 0))
                return api_reply_error(400, "after must be an event id (a number)", ret_status, ret_json);
        char *json = NULL;
        r = evo_get_json(api->kdb, call->param, true, after, &json);
        if (r == -ENOENT)
                return api_reply_error(404, "no such evolution", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not read evolution %s: %m", call->param);
        return reply_text(200, json, ret_status, ret_json);
}

/* The worktree of an evolution, if it is there. Caller frees. */
static char *worktree_of(const struct api *api, const char *evo_id) {
        char *p = NULL;
        struct stat st;
        if (xasprintf(&p, "%s/.seed/worktrees/%s", api->seed_dir, evo_id) < 0)
                return NULL;
        if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
                free(p);
                return NULL;
        }
        return p;
}

static bool oid_valid(const char *s) {
        if (!s || strlen(s) != REPO_OID_HEX_LEN)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

/* The commit an evolution made, from its "committed" note (the store keeps
 * no commit column up to date), and the generation it became. */
static const char *committed_oid(json_t *evo, int *ret_gen) {
        const char *oid = NULL;
        json_t *ev;
        size_t i;
        json_array_foreach(json_object_get(evo, "events"), i, ev) {
                json_t *d = json_object_get(ev, "data");
                const char *c = json_string_value(json_object_get(d, "commit"));
                json_t *g = json_object_get(d, "generation");
                const char *kind = json_string_value(json_object_get(ev, "kind"));
                if (kind && streq(kind, "note") && oid_valid(c) && json_is_integer(g)) {
                        oid = c;
                        *ret_gen = (int)json_integer_value(g);
                }
        }
        return oid;
}

/* The commit of generation n, copied into out. */
static int generation_oid(const char *seed_dir, int n, char out[REPO_OID_HEX_LEN + 1]) {
        struct repo_generation *g = NULL;
        size_t count = 0;
        int r = repo_generations(seed_dir, &g, &count);
        if (r < 0)
                return r;
        r = -ENOENT;
        for (size_t i = 0; i < count; i++)
                if (g[i].number == n) {
                        memcpy(out, g[i].commit, REPO_OID_HEX_LEN + 1);
                        r = 0;
                }
        repo_generations_free(g, count);
        return r;
}

/* Where the change of an evolution is: its commit against the generation it
 * started from, else its worktree against the live commit (evolutions run
 * one at a time, so main has not moved since it began). */
static int diff_of(struct api *api, const char *id, json_t *evo, const char **ret_source, char **ret_patch) {
        char base[REPO_OID_HEX_LEN + 1];
        const char *b = json_string_value(json_object_get(evo, "base_commit"));
        const char *head = json_string_value(json_object_get(evo, "commit_oid"));
        int gen = 0;
        if (!oid_valid(head) && (head = committed_oid(evo, &gen)) && !oid_valid(b) && gen > 1) {
                if (generation_oid(api->seed_dir, gen - 1, base) < 0)
                        head = NULL;
                b = base;
        }
        if (oid_valid(b) && oid_valid(head)) {
                *ret_source = "commit";
                return repo_diff(api->seed_dir, b, head, API_DIFF_MAX, ret_patch);
        }
        _cleanup_free_ char *wt = worktree_of(api, id), *live = NULL;
        const char *st = json_string_value(json_object_get(evo, "state"));
        if (!wt || !st || streq(st, "complete") || streq(st, "failed") || streq(st, "cancelled") ||
            streq(st, "rolled_back")) {
                *ret_source = "none";
                return 0;
        }
        if (!oid_valid(b)) {
                int r = repo_head(api->seed_dir, &live);
                if (r < 0)
                        return r;
                b = live;
        }
        *ret_source = "worktree";
        return repo_diff(wt, b, NULL, API_DIFF_MAX, ret_patch);
}

static int h_diff(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        int r = evo_param(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        _cleanup_free_ char *json = NULL, *patch = NULL;
        r = evo_get_json(api->kdb, call->param, true, 0, &json);
        if (r == -ENOENT)
                return api_reply_error(404, "no such evolution", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not read evolution %s: %m", call->param);
        _cleanup_json_ json_t *e = json_loads(json, 0, NULL);
        const char *source = "none";
        r = diff_of(api, call->param, e, &source, &patch);
        if (r < 0) {
                log_warn_errno(r, "could not diff evolution %s: %s", call->param, repo_last_error());
                return api_reply_error(409, "the change of this evolution cannot be shown now", ret_status, ret_json);
        }
        return api_reply(200, json_pack("{s:s, s:s, s:s}", "id", call->param, "source", source, "diff", patch ? patch : ""),
                     ret_status, ret_json);
}

static int h_cancel(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        int r = evo_param(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        r = orch_cancel(o, call->param);
        if (r == -ENOENT)
                return api_reply_error(404, "no such evolution", ret_status, ret_json);
        if (r == -EALREADY)
                return api_reply_error(409, "this evolution has already ended", ret_status, ret_json);
        if (r == -EBUSY)
                return api_reply_error(409, "this evolution is applying its generation and can no longer be cancelled; "
                                        "roll back to the previous generation once it ends", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not cancel %s: %m", call->param);
        log_info("cancelled evolution %s", call->param);
        return api_reply(200, json_pack("{s:b}", "ok", 1), ret_status, ret_json);
}

/* The pending approval id as a JSON object (kind, evolution_id …), or NULL. */
static json_t *pending_approval(struct api *api, const char *apr_id, int *ret_r) {
        _cleanup_free_ char *rows = NULL;
        *ret_r = evo_approvals_pending_json(api->kdb, &rows);
        if (*ret_r < 0)
                return NULL;
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        json_t *row;
        size_t i;
        json_array_foreach(arr, i, row) {
                const char *id = json_string_value(json_object_get(row, "id"));
                if (id && streq(id, apr_id))
                        return json_incref(row);
        }
        return NULL;
}

/* Maps orch_decide's result to an answer. */
static int decided(int r, const char *apr_id, const char *what, int *ret_status, char **ret_json) {
        if (r == -ENOENT)
                return api_reply_error(404, "no such approval", ret_status, ret_json);
        if (r == -EALREADY)
                return api_reply_error(409, "this approval was already decided or has expired", ret_status,
                                   ret_json);
        if (r == -EINVAL)
                return api_reply_error(400, "a question takes an answer; any other approval takes approved: true or false",
                                   ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not decide approval %s: %m", apr_id);
        log_info("approval %s %s by the owner", apr_id, what);
        return api_reply(200, json_pack("{s:b}", "ok", 1), ret_status, ret_json);
}

/* POST evolutions/{id}/answer {"approval", "answer"} (a question) and
 * POST evolutions/{id}/decide {"approval", "approved"} (anything else): a
 * pending approval of that evolution; another evolution's is a 404. */
static int evolution_approval(void *ud, const struct ctl_api_call *call, bool is_answer, int *ret_status,
                              char **ret_json) {
        struct api *api = ud;
        int r = evo_param(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        const char *apr = NULL, *answer = NULL;
        r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        json_t *v = json_object_get(body, "approved");
        r = body_string(body, "approval", 64, true, &apr, ret_status, ret_json);
        if (r == 0 && is_answer)
                r = body_string(body, "answer", ANSWER_MAX, true, &answer, ret_status, ret_json);
        if (r == 0 && !is_answer && !json_is_boolean(v)) {
                r = api_reply_error(400, "\"approved\" must be true or false", ret_status, ret_json);
                r = r < 0 ? r : 1;
        }
        if (r == 0 && !api_id_valid(apr, "apr_")) {
                r = api_reply_error(400, "bad approval id (apr_ and 16 hex digits)", ret_status, ret_json);
                r = r < 0 ? r : 1;
        }
        if (r != 0)
                return r < 0 ? r : 0;
        bool approved = is_answer || json_is_true(v);
        _cleanup_json_ json_t *pending = pending_approval(api, apr, &r);
        const char *owner = json_string_value(json_object_get(pending, "evolution_id"));
        if (r >= 0 && pending && !(owner && streq(owner, call->param)))
                r = api_reply_error(404, "this evolution has no such approval", ret_status, ret_json);
        else if (r >= 0)
                r = decided(orch_decide(o, apr, approved, answer), apr,
                            is_answer ? "answered" : approved ? "approved" : "denied", ret_status, ret_json);
        return r;
}

static int h_answer(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return evolution_approval(ud, call, true, ret_status, ret_json);
}

/* POST evolutions/{id}/decide {"action": "apply"|"changes"|"discard",
 * "feedback"}: the owner's decision on the preview of that evolution
 * (orch_preview_decide). Without "action": an approval of it, above. */
static int preview_decide(struct api *api, const struct ctl_api_call *call, json_t *body, int *ret_status,
                          char **ret_json) {
        static const char *const actions[] = {[ORCH_PREVIEW_APPLY] = "apply", [ORCH_PREVIEW_CHANGES] = "changes",
                                              [ORCH_PREVIEW_DISCARD] = "discard"};
        const char *a = json_string_value(json_object_get(body, "action")), *feedback = NULL;
        enum orch_preview_action action = 0;
        for (size_t i = 1; a && i < ARRAY_SIZE(actions); i++)
                if (streq(a, actions[i]))
                        action = (enum orch_preview_action)i;
        const char *key;
        json_t *v;
        json_object_foreach(body, key, v)
                if (!streq(key, "action") && !streq(key, "feedback"))
                        return api_reply_error(400, "the body may hold only \"action\" and \"feedback\"",
                                               ret_status, ret_json);
        if (!action)
                return api_reply_error(400, "\"action\" must be apply, changes or discard", ret_status, ret_json);
        int r = body_string(body, "feedback", ORCH_FEEDBACK_MAX, action == ORCH_PREVIEW_CHANGES, &feedback,
                            ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        r = orch_preview_decide(o, call->param, action, feedback);
        if (r == -ENOENT)
                return api_reply_error(409, "this evolution has no preview waiting for your decision", ret_status,
                                       ret_json);
        if (r < 0)
                return log_error_errno(r, "could not decide the preview of %s: %m", call->param);
        log_info("the owner decided the preview of %s: %s", call->param, actions[action]);
        return api_reply(200, json_pack("{s:b, s:s}", "ok", 1, "action", actions[action]), ret_status, ret_json);
}

static int h_evo_decide(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        int r = evo_param(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        _cleanup_json_ json_t *body = NULL;
        r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        if (json_object_get(body, "action"))
                return preview_decide(ud, call, body, ret_status, ret_json);
        return evolution_approval(ud, call, false, ret_status, ret_json);
}

/* ---- approvals ---- */

static int h_approvals(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        char *rows = NULL;
        int r = evo_approvals_pending_json(api->kdb, &rows);
        if (r < 0)
                return log_error_errno(r, "could not list approvals: %m");
        return reply_wrapped("approvals", rows, ret_status, ret_json);
}

static int h_decide(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        if (!api_id_valid(call->param, "apr_"))
                return api_reply_error(400, "bad approval id (apr_ and 16 hex digits)", ret_status, ret_json);
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        int r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        json_t *v = json_object_get(body, "approved");
        bool ok = json_is_boolean(v);
        bool approved = json_is_true(v);
        if (!ok)
                return api_reply_error(400, "\"approved\" must be true or false", ret_status, ret_json);
        /* An evolution's approval wakes the orchestrator, a chat call's the chat. */
        r = orch_decide(o, call->param, approved, NULL);
        chat_approval_decided(api->chat);
        return decided(r, call->param, approved ? "approved" : "denied", ret_status, ret_json);
}

/* ---- generations ---- */

static int h_generations(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        struct repo_generation *g = NULL;
        size_t n = 0;
        int cur = 0;
        int r = repo_generations(api->seed_dir, &g, &n);
        if (r < 0)
                return log_error_errno(r, "could not list generations: %s", repo_last_error());
        if (repo_live_generation(api->seed_dir, &cur) < 0)
                cur = 0;
        _cleanup_json_ json_t *arr = json_array();
        bool ok = arr;
        for (size_t i = n; ok && i > 0; i--) {
                const struct repo_generation *e = &g[i - 1];
                /* owner: the owner's own commits, recorded as a generation. */
                json_t *o = json_pack("{s:i, s:s, s:s, s:I, s:b, s:b}", "number", e->number, "commit", e->commit,
                                      "summary", e->summary ? e->summary : "", "time", (json_int_t)e->time,
                                      "current", e->number == cur, "owner", e->owner_commit[0] != 0);
                if (o && e->owner_commit[0])
                        json_object_set_new(o, "owner_commit", json_string(e->owner_commit));
                ok = o && json_array_append_new(arr, o) == 0;
        }
        repo_generations_free(g, n);
        if (!ok)
                return -ENOMEM;
        json_t *res = cur > 0 ? json_pack("{s:o, s:i}", "generations", TAKE_PTR(arr), "current", cur)
                              : json_pack("{s:o, s:n}", "generations", TAKE_PTR(arr), "current");
        return api_reply(200, res, ret_status, ret_json);
}

static int h_rollback(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        int64_t n = 0;
        if (parse_int64(call->param, 1, INT_MAX, &n) < 0)
                return api_reply_error(400, "bad generation number", ret_status, ret_json);
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        struct repo_generation *g = NULL;
        size_t count = 0;
        bool known = false;
        int cur = 0;
        int r = repo_generations(api->seed_dir, &g, &count);
        if (r < 0)
                return log_error_errno(r, "could not list generations: %s", repo_last_error());
        for (size_t i = 0; i < count; i++)
                known = known || g[i].number == n;
        repo_generations_free(g, count);
        if (!known)
                return api_reply_error(404, "no such generation", ret_status, ret_json);
        if (repo_current_generation(api->seed_dir, &cur) == 0 && cur == n)
                return api_reply_error(409, "that generation is the live one", ret_status, ret_json);
        bool with_data = false;
        if (call->body_len > 0) {
                _cleanup_json_ json_t *body = NULL;
                if ((r = parse_body(call, &body, ret_status, ret_json)) != 0)
                        return r < 0 ? r : 0;
                json_t *w = json_object_get(body, "with_data");
                bool bad = (w && !json_is_boolean(w)) || json_object_size(body) > (w ? 1u : 0u);
                with_data = json_is_true(w);
                if (bad)
                        return api_reply_error(400, "the body may only hold \"with_data\": true or false", ret_status,
                                           ret_json);
        }
        _cleanup_free_ char *id = NULL;
        r = orch_rollback(o, (int)n, with_data, &id);
        if (r == -EINVAL || r == -ENOENT)
                return api_reply_error(400, "that generation cannot be restored", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not queue a rollback to generation %d: %m", (int)n);
        log_info("queued rollback %s to generation %d", id, (int)n);
        return api_reply(202, json_pack("{s:s}", "id", id), ret_status, ret_json);
}

/* ---- the event hub (Server-Sent Events) ---- */

static int64_t mono_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool kind_valid(const char *k) {
        if (!k || !*k || strlen(k) > 32)
                return false;
        for (; *k; k++)
                if (!((*k >= 'a' && *k <= 'z') || *k == '_'))
                        return false;
        return true;
}

/* Appends msg to a subscriber's queue, reclaiming what was sent; a full
 * queue drops the subscriber. Under api->lock. */
static void sub_push(struct sse_sub *s, const char *msg, size_t len) {
        if (s->dropped)
                return;
        if (s->off > 0) {
                memmove(s->q.data, s->q.data + s->off, s->q.len - s->off);
                s->q.len -= s->off;
                s->q.data[s->q.len] = 0;
                s->off = 0;
        }
        if (buf_append(&s->q, msg, len) < 0) {
                s->dropped = true;
                log_info("dropped an event stream subscriber that fell behind");
        }
}

void api_publish(struct api *api, const char *evo_id, const char *kind, const char *json) {
        if (!api || !kind_valid(kind))
                return;
        _cleanup_json_ json_t *o = json ? json_loads(json, 0, NULL) : NULL;
        if (!json_is_object(o)) {
                json_decref(o); /* not an object: replaced by {} before o is used */
                o = json_object();
        }
        if (evo_id)
                json_object_set_new(o, "evolution", json_string(evo_id));
        _cleanup_free_ char *data = json_dumps(o, JSON_COMPACT);
        _cleanup_free_ char *msg = NULL;
        if (!data || xasprintf(&msg, "event: %s\ndata: %s\n\n", kind, data) < 0)
                return;
        size_t len = strlen(msg);
        pthread_mutex_lock(&api->lock);
        for (size_t i = 0; i < ARRAY_SIZE(api->subs); i++)
                if (api->subs[i])
                        sub_push(api->subs[i], msg, len);
        pthread_cond_broadcast(&api->cond);
        pthread_mutex_unlock(&api->lock);
}

static ssize_t sub_copy(struct sse_sub *s, const char *data, size_t len, char *out, size_t max) {
        size_t n = len < max ? len : max;
        memcpy(out, data, n);
        s->last_sent_ms = mono_ms();
        return (ssize_t)n;
}

static ssize_t sse_read(void *ctx, char *out, size_t max) {
        static const char hello[] = ": connected\n\n", ping[] = ": ping\n\n";
        struct sse_sub *s = ctx;
        struct api *api = s->api;
        ssize_t n = -1;
        pthread_mutex_lock(&api->lock);
        if (!s->greeted) {
                s->greeted = true;
                n = sub_copy(s, hello, strlen(hello), out, max);
                goto out;
        }
        for (;;) {
                if (api->stopping || s->dropped)
                        break;
                if (s->q.len > s->off) {
                        n = sub_copy(s, s->q.data + s->off, s->q.len - s->off, out, max);
                        s->off += (size_t)n;
                        if (s->off == s->q.len) {
                                s->q.len = s->off = 0;
                                s->q.data[0] = 0;
                        }
                        break;
                }
                int64_t due = s->last_sent_ms + API_SSE_PING_MS;
                if (mono_ms() >= due) {
                        n = sub_copy(s, ping, strlen(ping), out, max);
                        break;
                }
                struct timespec ts = {.tv_sec = due / 1000, .tv_nsec = (due % 1000) * 1000000};
                pthread_cond_timedwait(&api->cond, &api->lock, &ts);
        }
out:
        pthread_mutex_unlock(&api->lock);
        return n;
}

static void sse_close(void *ctx) {
        struct sse_sub *s = ctx;
        struct api *api = s->api;
        pthread_mutex_lock(&api->lock);
        for (size_t i = 0; i < ARRAY_SIZE(api->subs); i++)
                if (api->subs[i] == s)
                        api->subs[i] = NULL;
        pthread_mutex_unlock(&api->lock);
        buf_free(&s->q);
        free(s);
}

static int h_events(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json,
                    struct ctl_stream *ret_stream) {
        struct api *api = ud;
        struct sse_sub *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        *s = (struct sse_sub){.api = api, .q = BUF_INIT(API_SSE_QUEUE_MAX), .last_sent_ms = mono_ms()};
        bool placed = false, stopping;
        pthread_mutex_lock(&api->lock);
        stopping = api->stopping;
        for (size_t i = 0; !stopping && !placed && i < ARRAY_SIZE(api->subs); i++)
                if (!api->subs[i]) {
                        api->subs[i] = s;
                        placed = true;
                }
        pthread_mutex_unlock(&api->lock);
        if (!placed) {
                free(s);
                return api_reply_error(503,
                                   stopping ? "the kernel is stopping"
                                            : "too many event streams are open (at most 16); close one",
                                   ret_status, ret_json);
        }
        *ret_stream = (struct ctl_stream){
                .content_type = "text/event-stream; charset=utf-8",
                .read = sse_read,
                .close = sse_close,
                .ctx = s,
        };
        return 0;
}

/* ---- the chat (kernel/chat) ---- */

static int h_messages(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        int64_t limit = CHAT_LIST_DEFAULT;
        char v[32];
        int r = query_value(call->query, "limit", v, sizeof v);
        if (r != -ENOENT && (r < 0 || parse_int64(v, 1, CHAT_LIST_MAX, &limit) < 0))
                return api_reply_error(400, "limit must be a number from 1 to 200", ret_status, ret_json);
        char *rows = NULL;
        r = chat_messages_json(api->kdb, (int)limit, &rows);
        if (r < 0)
                return log_error_errno(r, "could not list chat messages: %m");
        return reply_wrapped("messages", rows, ret_status, ret_json);
}

static int h_message(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        int r0 = no_mind(api, ret_status, ret_json);
        if (r0 != 0)
                return r0 < 0 ? r0 : 0;
        if (!chat_available(api->chat))
                return api_reply_error(503,
                                   "the chat is not available: no model is configured (start the Seed with the "
                                   "model's key, e.g. seed run -e OPENROUTER_API_KEY)",
                                   ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        const char *text = NULL;
        int r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        r = body_string(body, "text", CHAT_TEXT_MAX, true, &text, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        /* {"draft": id}: the picture point and ask left, sent with this text
         * and only now (a draft that is gone is said so, nothing is sent). */
        const char *draft_id = NULL;
        struct ask_draft draft = {0};
        json_t *dv = json_object_get(body, "draft");
        if (dv && !json_is_null(dv)) {
                draft_id = json_string_value(dv);
                if (!draft_id || !ask_draft_id_valid(draft_id))
                        return api_reply_error(400, "draft must be the id of a picture point and ask left", ret_status,
                                               ret_json);
                r = api->drafts ? ask_drafts_get(api->drafts, draft_id, now_ms(), &draft) : -ENOENT;
                if (r == -ENOENT)
                        return api_reply_error(410,
                                               "the picture is gone (sent already, pushed out by newer ones, or "
                                               "older than its time): point and ask again, or send without it",
                                               ret_status, ret_json);
                if (r < 0)
                        return r;
        }
        struct model_image image = {.media_type = draft.info.media_type, .data = draft.data, .len = draft.len};
        _cleanup_free_ char *error = NULL;
        char *json = NULL;
        r = chat_send(api->chat, api_orch(api), text, draft_id ? &image : NULL, &json, &error);
        ask_draft_done(&draft);
        if (r >= 0 && draft_id && ask_drafts_take(api->drafts, draft_id, now_ms(), &draft) >= 0) /* one use */
                ask_draft_done(&draft);
        if (r == -EBUSY)
                return api_reply_error(409, "busy: the Seed is answering another message", ret_status, ret_json);
        if (r == -ENODEV) /* the model went away since no_mind() */
                return api_reply_error(409, error ? error : "the chat is not available: no model is configured",
                                   ret_status, ret_json);
        if (r == -ECANCELED)
                return api_reply_error(503, "the kernel is stopping", ret_status, ret_json);
        if (r == -EREMOTEIO)
                return api_reply_error(502, error ? error : "the model did not answer", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "the chat failed: %m");
        return reply_text(200, json, ret_status, ret_json);
}

/* ---- the Seed itself (self.c), given what each handler reads ---- */

static int h_identity(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_self_h_identity(((struct api *)ud)->seed_dir, call, ret_status, ret_json);
}

static int h_knowledge(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_self_h_knowledge(((struct api *)ud)->seed_dir, call, ret_status, ret_json);
}

static int h_skills(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_self_h_skills(((struct api *)ud)->seed_dir, call, ret_status, ret_json);
}

static int h_skill(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_self_h_skill(((struct api *)ud)->seed_dir, call, ret_status, ret_json);
}

static int h_settings(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_self_h_settings(((struct api *)ud)->seed_dir, call, ret_status, ret_json);
}

static int h_extensions(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_extensions_h_list(((struct api *)ud)->seed_dir, call, ret_status, ret_json);
}

static int h_usage(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_self_h_usage(((struct api *)ud)->kdb, call, ret_status, ret_json);
}

/* ---- the owner's evolution settings ---- */

static int evolution_settings_reply(struct api *api, int *ret_status, char **ret_json) {
        bool preview = true;
        int r = evo_preview_enabled(api->kdb, &preview);
        if (r < 0)
                return log_error_errno(r, "could not read the evolution settings: %m");
        return api_reply(200, json_pack("{s:b}", "preview", preview), ret_status, ret_json);
}

static int h_evolution_settings(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return evolution_settings_reply(ud, ret_status, ret_json);
}

/* POST {"preview": true|false}: nothing else. */
static int h_evolution_settings_set(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        _cleanup_json_ json_t *body = NULL;
        int r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        json_t *v = json_object_get(body, "preview");
        if (!json_is_boolean(v) || json_object_size(body) != 1)
                return api_reply_error(400, "the body must be {\"preview\": true or false}", ret_status, ret_json);
        if ((r = evo_preview_set(api->kdb, json_is_true(v))) < 0)
                return log_error_errno(r, "could not change the evolution settings: %m");
        log_info("the owner turned the preview before apply %s", json_is_true(v) ? "on" : "off");
        return evolution_settings_reply(api, ret_status, ret_json);
}

/* ---- outbound access (api/outbound.c) ---- */

static int h_outbound(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_outbound_h_get(((struct api *)ud)->outbound, call, ret_status, ret_json);
}

static int h_outbound_grant(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_outbound_h_grant(((struct api *)ud)->outbound, call, ret_status, ret_json);
}

static int h_outbound_revoke(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_outbound_h_revoke(((struct api *)ud)->outbound, call, ret_status, ret_json);
}

/* ---- spend (api/spend.c) ---- */

static int h_spend(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_spend_h_get(((struct api *)ud)->spend, call, ret_status, ret_json);
}

static int h_spend_set(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_spend_h_set(((struct api *)ud)->spend, call, ret_status, ret_json);
}

/* ---- the doctor's incidents (api/health.c) ---- */

static int h_incidents(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_health_h_list(((struct api *)ud)->health, call, ret_status, ret_json);
}

static int h_incident(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_health_h_get(((struct api *)ud)->health, call, ret_status, ret_json);
}

static int h_incident_fix(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_health_h_fix(((struct api *)ud)->health, call, ret_status, ret_json);
}

static int h_incident_ignore(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_health_h_ignore(((struct api *)ud)->health, call, ret_status, ret_json);
}

static int h_health_settings(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_health_h_settings(((struct api *)ud)->health, call, ret_status, ret_json);
}

/* ---- the roadmap (api/roadmap.c) ---- */

static int h_roadmap(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_roadmap_h_get(((struct api *)ud)->kdb, call, ret_status, ret_json);
}

static int h_roadmap_continue(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        struct orchestrator *o = api_orch(api);
        if (!o)
                return no_orch(api, ret_status, ret_json);
        _cleanup_json_ json_t *body = NULL;
        int r = parse_body(call, &body, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        if ((r = no_mind(api, ret_status, ret_json)) != 0)
                return r < 0 ? r : 0;
        return api_roadmap_h_continue(o, call, ret_status, ret_json);
}

/* ---- the Seed's mind (api/mind.c) ---- */

#define NO_MIND "the model is not available in this kernel"

static int h_mind(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        if (!api->mind)
                return api_reply_error(503, NO_MIND, ret_status, ret_json);
        return api_mind_h_get(api->mind, call, ret_status, ret_json);
}

static int h_mind_models(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        if (!api->mind)
                return api_reply_error(503, NO_MIND, ret_status, ret_json);
        char provider[64];
        int r = query_value(call->query, "provider", provider, sizeof provider);
        if (r != -ENOENT && r < 0)
                return api_reply_error(400, "provider must be a provider's name", ret_status, ret_json);
        return api_mind_h_models(api->mind, r == -ENOENT ? NULL : provider, ret_status, ret_json);
}

static int h_mind_choose(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        if (!api->mind)
                return api_reply_error(503, NO_MIND, ret_status, ret_json);
        return api_mind_h_choose(api->mind, call, ret_status, ret_json);
}

static int h_mind_lend(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        if (!api->mind)
                return api_reply_error(503, NO_MIND, ret_status, ret_json);
        return api_mind_h_lend(api->mind, call, ret_status, ret_json);
}

static int h_mind_forget(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        struct api *api = ud;
        if (!api->mind)
                return api_reply_error(503, NO_MIND, ret_status, ret_json);
        return api_mind_h_forget(api->mind, call, ret_status, ret_json);
}

/* ---- the owner's backups (api/backups.h) ---- */

static int h_backups(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_backups_h_list(((struct api *)ud)->backups, call, ret_status, ret_json);
}

static int h_backup_take(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_backups_h_take(((struct api *)ud)->backups, call, ret_status, ret_json);
}

static int h_backup_restore(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_backups_h_restore(((struct api *)ud)->backups, call, ret_status, ret_json);
}

static int h_backup_download(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json,
                             struct ctl_stream *ret_stream) {
        return api_backups_h_download(((struct api *)ud)->backups, call, ret_status, ret_json, ret_stream);
}

/* ---- routines and jobs (api/routines.h) ---- */

#define ROUTINES_ROUTE(fn, kind, action)                                                                          \
        static int fn(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {              \
                return api_routines_h_act(((struct api *)ud)->routines, kind, action, call, ret_status, ret_json);\
        }
ROUTINES_ROUTE(h_routine_pause, ROUTINES_ROUTINE, API_ROUTINES_PAUSE)
ROUTINES_ROUTE(h_routine_resume, ROUTINES_ROUTINE, API_ROUTINES_RESUME)
ROUTINES_ROUTE(h_routine_run, ROUTINES_ROUTINE, API_ROUTINES_RUN)
ROUTINES_ROUTE(h_routine_delete, ROUTINES_ROUTINE, API_ROUTINES_DELETE)
ROUTINES_ROUTE(h_job_pause, ROUTINES_JOB, API_ROUTINES_PAUSE)
ROUTINES_ROUTE(h_job_resume, ROUTINES_JOB, API_ROUTINES_RESUME)
ROUTINES_ROUTE(h_job_run, ROUTINES_JOB, API_ROUTINES_RUN)

static int h_routines(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_routines_h_list(((struct api *)ud)->routines, call, ret_status, ret_json);
}

static int h_routine_runs(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_routines_h_runs(((struct api *)ud)->routines, ROUTINES_ROUTINE, call, ret_status, ret_json);
}

static int h_job_runs(void *ud, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        return api_routines_h_runs(((struct api *)ud)->routines, ROUTINES_JOB, call, ret_status, ret_json);
}

const struct ctl_api_route api_routes[] = {
        {"GET", "/_seed/api/evolutions", h_list, NULL},
        {"POST", "/_seed/api/evolutions", h_submit, NULL},
        {"GET", "/_seed/api/evolutions/*", h_get, NULL},
        {"GET", "/_seed/api/evolutions/*/diff", h_diff, NULL},
        {"POST", "/_seed/api/evolutions/*/cancel", h_cancel, NULL},
        {"POST", "/_seed/api/evolutions/*/answer", h_answer, NULL},
        {"POST", "/_seed/api/evolutions/*/decide", h_evo_decide, NULL},
        {"GET", "/_seed/api/roadmap", h_roadmap, NULL},
        {"POST", "/_seed/api/roadmap/continue", h_roadmap_continue, NULL},
        {"GET", "/_seed/api/approvals", h_approvals, NULL},
        {"POST", "/_seed/api/approvals/*", h_decide, NULL},
        {"GET", "/_seed/api/generations", h_generations, NULL},
        {"POST", "/_seed/api/generations/*/rollback", h_rollback, NULL},
        {"GET", "/_seed/api/events", NULL, h_events},
        {"GET", "/_seed/api/messages", h_messages, NULL},
        {"POST", "/_seed/api/messages", h_message, NULL},
        {"GET", "/_seed/api/identity", h_identity, NULL},
        {"GET", "/_seed/api/knowledge", h_knowledge, NULL},
        {"GET", "/_seed/api/skills", h_skills, NULL},
        {"GET", "/_seed/api/skills/*", h_skill, NULL},
        {"GET", "/_seed/api/settings", h_settings, NULL},
        {"GET", "/_seed/api/usage", h_usage, NULL},
        {"GET", "/_seed/api/extensions", h_extensions, NULL},
        {"GET", "/_seed/api/evolution-settings", h_evolution_settings, NULL},
        {"POST", "/_seed/api/evolution-settings", h_evolution_settings_set, NULL},
        {"GET", "/_seed/api/backups", h_backups, NULL},
        {"POST", "/_seed/api/backups", h_backup_take, NULL},
        {"POST", "/_seed/api/backups/*/restore", h_backup_restore, NULL},
        {"GET", "/_seed/api/backups/*/download", NULL, h_backup_download},
        {"GET", "/_seed/api/outbound", h_outbound, NULL},
        {"POST", "/_seed/api/outbound/grant", h_outbound_grant, NULL},
        {"POST", "/_seed/api/outbound/revoke", h_outbound_revoke, NULL},
        {"GET", "/_seed/api/mind", h_mind, NULL},
        {"GET", "/_seed/api/mind/models", h_mind_models, NULL},
        {"POST", "/_seed/api/mind", h_mind_choose, NULL},
        {"POST", "/_seed/api/mind/key", h_mind_lend, NULL},
        {"POST", "/_seed/api/mind/key/forget", h_mind_forget, NULL},
        {"GET", "/_seed/api/spend", h_spend, NULL},
        {"POST", "/_seed/api/spend", h_spend_set, NULL},
        {"GET", "/_seed/api/routines", h_routines, NULL},
        {"GET", "/_seed/api/routines/*/runs", h_routine_runs, NULL},
        {"POST", "/_seed/api/routines/*/pause", h_routine_pause, NULL},
        {"POST", "/_seed/api/routines/*/resume", h_routine_resume, NULL},
        {"POST", "/_seed/api/routines/*/run", h_routine_run, NULL},
        {"POST", "/_seed/api/routines/*/delete", h_routine_delete, NULL},
        {"GET", "/_seed/api/jobs/*/runs", h_job_runs, NULL},
        {"POST", "/_seed/api/jobs/*/pause", h_job_pause, NULL},
        {"POST", "/_seed/api/jobs/*/resume", h_job_resume, NULL},
        {"POST", "/_seed/api/jobs/*/run", h_job_run, NULL},
        {"GET", "/_seed/api/incidents", h_incidents, NULL},
        {"GET", "/_seed/api/incidents/*", h_incident, NULL},
        {"POST", "/_seed/api/incidents/*/fix", h_incident_fix, NULL},
        {"POST", "/_seed/api/incidents/*/ignore", h_incident_ignore, NULL},
        {"POST", "/_seed/api/health", h_health_settings, NULL},
        {0},
};

/* ---- lifetime ---- */

static void chat_publish(void *userdata, const char *kind, const char *json) {
        api_publish(userdata, NULL, kind, json);
}

int api_new(const struct api_config *cfg, struct api **ret) {
        if (!cfg || strempty(cfg->seed_dir) || !cfg->kdb)
                return -EINVAL;
        struct api *api = calloc(1, sizeof *api);
        if (!api || !(api->seed_dir = strdup(cfg->seed_dir))) {
                free(api);
                return -ENOMEM;
        }
        api->kdb = cfg->kdb;
        api->orch = cfg->orch;
        api->outbound = cfg->outbound;
        api->drafts = cfg->drafts;
        api->backups = cfg->backups;
        api->mind = cfg->mind;
        api->spend = cfg->spend;
        api->routines = cfg->routines;
        api->health = cfg->health;
        if (cfg->refused && xasprintf(&api->refused, "evolutions are refused on this host: %s", cfg->refused) < 0) {
                free(api->seed_dir);
                free(api);
                return -ENOMEM;
        }
        int r = chat_new(&(struct chat_config){.seed_dir = cfg->seed_dir, .cfg = cfg->cfg, .kdb = cfg->kdb,
                                               .mind = cfg->mind, .outbound = cfg->outbound,
                                               .live = cfg->live, .routines = cfg->routines,
                                               .publish = chat_publish, .userdata = api},
                         &api->chat);
        if (r < 0) {
                free(api->refused);
                free(api->seed_dir);
                free(api);
                return r;
        }
        pthread_mutex_init(&api->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&api->cond, &ca);
        pthread_condattr_destroy(&ca);
        *ret = api;
        return 0;
}

int api_kernel_message(struct api *api, const char *text) {
        if (!api)
                return -EAGAIN;
        return chat_kernel_message(api->chat, text);
}

int api_routine_message(struct api *api, const char *routine_name, const char *text) {
        if (!api)
                return -EAGAIN;
        return chat_routine_message(api->chat, routine_name, text);
}

void api_set_orchestrator(struct api *api, struct orchestrator *o) {
        if (api)
                __atomic_store_n(&api->orch, o, __ATOMIC_RELEASE);
}

void api_shutdown(struct api *api) {
        if (!api)
                return;
        chat_cancel(api->chat);
        pthread_mutex_lock(&api->lock);
        api->stopping = true;
        pthread_cond_broadcast(&api->cond);
        pthread_mutex_unlock(&api->lock);
}

void api_free(struct api *api) {
        if (!api)
                return;
        pthread_mutex_destroy(&api->lock);
        pthread_cond_destroy(&api->cond);
        chat_free(api->chat);
        free(api->seed_dir);
        free(api->refused);
        free(api);
}
