/* agent.c — the agent loop. See agent.h. */
#include "agent/agent.h"
#include "base/json.h"
#include "base/log.h"

#include <stdarg.h>
#include <time.h>

#define DEFAULT_MAX_TURNS 150
#define STATE_MESSAGES_MAX 100000
#define WAIT_STEP_MS 100 /* how often a wait looks at the cancel flag */

static const char nudge_max_tokens[] =
        "Your last reply was cut off by the output limit (max_tokens). Continue in smaller steps: split large "
        "files into several smaller ones or write them in parts, and keep each reply short.";

const char *agent_event_name(enum agent_event k) {
        switch (k) {
        case AGENT_EVENT_TEXT:
                return "agent_text";
        case AGENT_EVENT_TOOL_CALL:
                return "tool_call";
        case AGENT_EVENT_TOOL_RESULT:
                return "tool_result";
        case AGENT_EVENT_NOTE:
                return "note";
        case AGENT_EVENT_ERROR:
                return "error";
        case AGENT_EVENT_WAITING:
                return "waiting";
        case AGENT_EVENT_RESUMED:
                return "resumed";
        }
        return "unknown";
}

const char *agent_outcome_name(enum agent_outcome o) {
        switch (o) {
        case AGENT_TERMINAL:
                return "terminal";
        case AGENT_REPLIED:
                return "replied";
        case AGENT_TURN_LIMIT:
                return "turn_limit";
        case AGENT_CANCELLED:
                return "cancelled";
        case AGENT_FAILED:
                return "failed";
        }
        return "unknown";
}

void agent_state_init(struct agent_state *st) {
        *st = (struct agent_state){0};
}

void agent_state_done(struct agent_state *st) {
        if (!st)
                return;
        for (size_t i = 0; i < st->n_messages; i++)
                model_message_done(&st->messages[i]);
        free(st->messages);
        *st = (struct agent_state){0};
}

int agent_state_take(struct agent_state *st, struct model_message *msg) {
        if (st->n_messages >= STATE_MESSAGES_MAX)
                return -E2BIG;
        if (st->n_messages == st->cap) {
                size_t cap = st->cap ? st->cap * 2 : 32;
                struct model_message *m = realloc(st->messages, cap * sizeof(*m));
                if (!m)
                        return -ENOMEM;
                st->messages = m;
                st->cap = cap;
        }
        st->messages[st->n_messages++] = *msg;
        *msg = (struct model_message){0};
        return 0;
}

int agent_state_add(struct agent_state *st, const struct model_message *msg) {
        struct model_message copy;
        int r = model_message_copy(msg, &copy);
        if (r < 0)
                return r;
        r = agent_state_take(st, &copy);
        if (r < 0)
                model_message_done(&copy);
        return r;
}

int agent_state_add_user(struct agent_state *st, const char *text) {
        struct model_message m = {.role = MODEL_ROLE_USER, .text = strdup(text ? text : "")};
        if (!m.text)
                return -ENOMEM;
        int r = agent_state_take(st, &m);
        if (r < 0)
                model_message_done(&m);
        return r;
}

static int add_tool_result(struct agent_state *st, const char *id, const char *text, bool is_error) {
        struct model_message m = {
                .role = MODEL_ROLE_TOOL,
                .text = strdup(text),
                .tool_call_id = strdup(id),
                .is_error = is_error,
        };
        int r = m.text && m.tool_call_id ? agent_state_take(st, &m) : -ENOMEM;
        if (r < 0)
                model_message_done(&m);
        return r;
}

void agent_result_done(struct agent_result *r) {
        if (!r)
                return;
        free(r->tool);
        free(r->args);
        free(r->text);
        free(r->error);
        *r = (struct agent_result){0};
}

/* --- events --- */

static void emit(const struct agent_config *cfg, enum agent_event kind, json_t *obj_taken) {
        _cleanup_json_ json_t *obj = obj_taken;
        if (cfg->on_event && obj) {
                char *s = json_dumps(obj, JSON_COMPACT);
                if (s)
                        cfg->on_event(cfg->event_userdata, kind, s);
                free(s);
        }
}

static void emit_text(const struct agent_config *cfg, enum agent_event kind, const char *key, const char *text) {
        if (cfg->on_event)
                emit(cfg, kind, json_pack("{s:s}", key, text));
}

static void emit_call(const struct agent_config *cfg, const struct model_tool_call *c) {
        if (!cfg->on_event)
                return;
        json_t *args = c->arguments ? json_loads(c->arguments, JSON_DECODE_ANY, NULL) : NULL;
        if (!args)
                args = json_string(c->arguments ? c->arguments : "");
        if (!args) /* not UTF-8 */
                args = json_string("(unreadable arguments)");
        emit(cfg, AGENT_EVENT_TOOL_CALL, json_pack("{s:s, s:s, s:o}", "id", c->id, "name", c->name ? c->name : "",
                                                   "arguments", args));
}

static void emit_result(const struct agent_config *cfg, const struct model_tool_call *c, const struct tool_result *tr) {
        if (!cfg->on_event)
                return;
        json_t *o = json_pack("{s:s, s:s, s:b, s:s}", "id", c->id, "name", c->name ? c->name : "", "is_error",
                              tr->is_error, "output", tr->output ? tr->output : "");
        if (o && tr->classified) {
                json_object_set_new(o, "level", json_string(tools_level_name(tr->level)));
                json_object_set_new(o, "decision", json_string(cfg_decision_name(tr->decision)));
        }
        emit(cfg, AGENT_EVENT_TOOL_RESULT, o);
}

/* --- the loop --- */

struct run {
        const struct agent_config *cfg;
        struct agent_state *st;
        struct agent_result *res;
        int max_malformed;
        int malformed;    /* consecutive */
        bool cut;         /* the reply whose calls run was cut off by max_tokens */
        bool done;        /* the run has its outcome */
};

static bool cancelled(const struct agent_config *cfg) {
        return cfg->cancel && atomic_load(cfg->cancel);
}

static int finish(struct run *run, enum agent_outcome o, const char *fmt, ...) _printf_(3, 4);
static int finish(struct run *run, enum agent_outcome o, const char *fmt, ...) {
        run->res->outcome = o;
        run->done = true;
        if (!fmt)
                return 0;
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        int k = xvasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        free(run->res->error);
        run->res->error = s;
        if (o == AGENT_FAILED)
                emit_text(run->cfg, AGENT_EVENT_ERROR, "error", s);
        else
                emit_text(run->cfg, AGENT_EVENT_NOTE, "text", s);
        return 0;
}

/* Every call gets an id (the result must name it). */
static int ensure_ids(struct model_message *m, int turn) {
        for (size_t i = 0; i < m->n_calls; i++) {
                if (!strempty(m->calls[i].id))
                        continue;
                free(m->calls[i].id);
                m->calls[i].id = NULL;
                if (xasprintf(&m->calls[i].id, "call_%d_%zu", turn, i) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* What a malformed call's result tells the model: what was wrong, and the
 * schema its arguments must match (an unknown tool's result already lists
 * the phase's tools). A call cut off by max_tokens is said to be cut. */
static int malformed_feedback(struct run *run, const struct model_tool_call *c, struct tool_result *tr) {
        const struct tool_ctx *tc = run->cfg->tools;
        const struct tool *t = c->name ? tools_find(tc->set, c->name) : NULL;
        char *text = NULL;
        int k;
        if (run->cut)
                k = xasprintf(&text, "not run: your reply was cut off by the output limit (max_tokens) before this "
                                     "call was complete (%s). Make it again, smaller.",
                              tr->output ? tr->output : "");
        else if (t && tools_offered(t, tc->phase))
                k = xasprintf(&text, "%s\nCall %s again with arguments that match its JSON schema: %s",
                              tr->output ? tr->output : "", t->name, t->schema);
        else
                return 0;
        if (k < 0)
                return -ENOMEM;
        free(tr->output);
        tr->output = text;
        return 0;
}

/* Runs the one call of the assistant message at index ai, i-th call. */
static int run_call(struct run *run, size_t ai, size_t i) {
        const struct agent_config *cfg = run->cfg;
        /* st->messages moves as results are added: re-read by index. */
        const struct model_tool_call *c = &run->st->messages[ai].calls[i];
        if (run->done) {
                const char *why = run->res->outcome == AGENT_TERMINAL ? "not run: the phase already ended"
                                  : run->res->outcome == AGENT_CANCELLED ? "not run: cancelled"
                                                                         : "not run: the run stopped";
                return add_tool_result(run->st, c->id, why, true);
        }
        if (cancelled(cfg)) {
                int r = finish(run, AGENT_CANCELLED, "cancelled");
                return r < 0 ? r : add_tool_result(run->st, c->id, "not run: cancelled", true);
        }
        emit_call(cfg, c);
        struct tool_result tr = {0};
        int r = tools_call(cfg->tools, c->name, c->arguments, &tr);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                /* The approval could not be had: the call did not run. */
                if (cancelled(cfg))
                        r = finish(run, AGENT_CANCELLED, "cancelled while waiting for the owner");
                else
                        r = finish(run, AGENT_FAILED, "the owner's decision on %s could not be had: %s",
                                   c->name ? c->name : "", strerror(-r));
                c = &run->st->messages[ai].calls[i];
                return r < 0 ? r : add_tool_result(run->st, c->id, "not run: no decision", true);
        }
        if (tr.malformed && (r = malformed_feedback(run, c, &tr)) < 0) {
                tool_result_done(&tr);
                return r;
        }
        /* A good call resets the count; a call cut off by max_tokens is the
         * cut's (nudged), not a malformed one. */
        if (!tr.malformed)
                run->malformed = 0;
        else if (!run->cut)
                run->malformed++;
        emit_result(cfg, c, &tr);
        char *id = strdup(c->id);
        r = id ? add_tool_result(run->st, id, tr.output, tr.is_error) : -ENOMEM;
        free(id);
        c = &run->st->messages[ai].calls[i];
        if (r >= 0 && tr.terminal) {
                run->res->tool = strdup(c->name);
                run->res->args = TAKE_PTR(tr.args);
                r = run->res->tool ? finish(run, AGENT_TERMINAL, NULL) : -ENOMEM;
        } else if (r >= 0 && run->malformed >= run->max_malformed)
                r = finish(run, AGENT_FAILED, "the model made %d malformed tool calls in a row; the last: %s",
                           run->malformed, tr.output);
        tool_result_done(&tr);
        return r;
}

static bool request_cancelled(void *userdata) {
        return cancelled(userdata);
}

/* Sleeps ms, or less when the cancel flag rises: -ECANCELED then. */
static int wait_cancellable(const struct agent_config *cfg, int64_t ms) {
        for (int64_t until = now_ms() + ms;;) {
                if (cancelled(cfg))
                        return -ECANCELED;
                int64_t left = until - now_ms();
                if (left <= 0)
                        return 0;
                int64_t step = left < WAIT_STEP_MS ? left : WAIT_STEP_MS;
                struct timespec ts = {step / 1000, (long)(step % 1000) * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* One model turn's call. A transient failure (the model's own retries
 * spent) is waited out for cfg->model_wait_ms since the first one, retried
 * every interval with the same conversation, and announced ("waiting",
 * then "resumed"). The turn counts once however many retries it took. On
 * failure *ret_error (caller frees) says why; -ECANCELED when cancelled. */
static int send(struct run *run, const struct model_tool_def *defs, size_t n_defs, struct model_response *ret,
                char **ret_error) {
        const struct agent_config *cfg = run->cfg;
        struct model_request req = {
                .system = cfg->system,
                .messages = run->st->messages,
                .n_messages = run->st->n_messages,
                .tools = defs,
                .n_tools = n_defs,
                .max_tokens = cfg->max_tokens,
                .purpose = cfg->purpose,
                .reference = cfg->reference,
                .cancelled = cfg->cancel ? request_cancelled : NULL,
                .cancel_userdata = (void *)cfg,
        };
        run->st->turns++;
        run->res->turns++;
        int64_t interval = cfg->model_wait_interval_ms > 0 ? cfg->model_wait_interval_ms : AGENT_WAIT_INTERVAL_MS;
        int64_t first_failure = 0, first_wall = 0;
        for (int attempt = 1;; attempt++) {
                _cleanup_free_ char *err = NULL;
                int r = cfg->complete(cfg->complete_userdata, &req, ret, &err);
                if (r >= 0) {
                        if (first_failure)
                                emit(cfg, AGENT_EVENT_RESUMED, json_pack("{s:I, s:i}", "waited_ms",
                                                                         (json_int_t)(now_ms() - first_failure),
                                                                         "attempts", attempt));
                        return r;
                }
                if (r == -ECANCELED || cancelled(cfg))
                        return -ECANCELED;
                if (!model_error_transient(r) || cfg->model_wait_ms <= 0) {
                        *ret_error = TAKE_PTR(err);
                        return r;
                }
                int64_t now = now_ms();
                if (!first_failure) {
                        first_failure = now;
                        first_wall = wall_ms();
                }
                int64_t left = first_failure + cfg->model_wait_ms - now;
                if (left <= 0) {
                        int64_t s = (now - first_failure + 500) / 1000;
                        (void)xasprintf(ret_error, "the model could not be reached for %lld s (%d tries; the limit is "
                                                   "evolution.model_wait_seconds): %s",
                                        (long long)s, attempt, err ? err : strerror(-r));
                        return r;
                }
                int64_t delay = interval < left ? interval : left;
                emit(cfg, AGENT_EVENT_WAITING,
                     json_pack("{s:s, s:I, s:I, s:i}", "reason", err ? err : strerror(-r), "retry_at",
                               (json_int_t)(wall_ms() + delay), "until",
                               (json_int_t)(first_wall + cfg->model_wait_ms), "attempt", attempt));
                if (wait_cancellable(cfg, delay) < 0)
                        return -ECANCELED;
        }
}

/* What the conversation may hold of a request's budget: the rest after the
 * system prompt and the tool definitions (at least a quarter of it). */
static size_t conversation_budget(const struct agent_config *cfg, const struct model_tool_def *defs, size_t n_defs) {
        size_t budget = cfg->context_budget ? cfg->context_budget : AGENT_CONTEXT_BUDGET;
        size_t fixed = cfg->system ? strlen(cfg->system) : 0;
        for (size_t i = 0; i < n_defs; i++)
                fixed += 32 + strlen(defs[i].name) + (defs[i].description ? strlen(defs[i].description) : 0) +
                         (defs[i].parameters ? strlen(defs[i].parameters) : 0);
        return fixed < budget / 4 * 3 ? budget - fixed : budget / 4;
}

static int maybe_compact(struct run *run, const struct model_tool_def *defs, size_t n_defs) {
        const struct agent_config *cfg = run->cfg;
        size_t budget = conversation_budget(cfg, defs, n_defs);
        size_t before = agent_state_size(run->st);
        if (before <= budget)
                return 0;
        size_t saved = agent_compact(run->st, budget, cfg->keep_last ? cfg->keep_last : AGENT_KEEP_LAST);
        _cleanup_free_ char *note = NULL;
        if (xasprintf(&note, "context compacted from %zu to %zu bytes (%zu for the conversation)", before,
                      before - saved, budget) < 0)
                return -ENOMEM;
        log_debug("%s", note);
        emit_text(cfg, AGENT_EVENT_NOTE, "text", note);
        return 0;
}

static int nudge(struct run *run, const char *text) {
        emit_text(run->cfg, AGENT_EVENT_NOTE, "text", text);
        return agent_state_add_user(run->st, text);
}

/* One model turn and its tool calls. */
static int turn(struct run *run, const struct model_tool_def *defs, size_t n_defs, const char *terminal_names,
                int *nudges) {
        const struct agent_config *cfg = run->cfg;
        int max_nudges = cfg->max_nudges > 0 ? cfg->max_nudges : AGENT_MAX_NUDGES;
        int r = maybe_compact(run, defs, n_defs);
        if (r < 0)
                return r;
        struct model_response resp = {0};
        _cleanup_free_ char *err = NULL;
        r = send(run, defs, n_defs, &resp, &err);
        if (r == -ECANCELED)
                return finish(run, AGENT_CANCELLED, "cancelled");
        if (r < 0)
                return finish(run, AGENT_FAILED, "the model call failed: %s", err ? err : strerror(-r));
        enum model_stop stop = resp.stop;
        _cleanup_free_ char *unreadable = TAKE_PTR(resp.unreadable_calls);
        _cleanup_free_ char *note = NULL;
        if (resp.calls_from_text && xasprintf(&note, "the model wrote %zu tool call%s as text; read as %s",
                                              resp.message.n_calls, resp.message.n_calls == 1 ? "" : "s",
                                              resp.message.n_calls == 1 ? "a call" : "calls") >= 0)
                emit_text(cfg, AGENT_EVENT_NOTE, "text", note);
        resp.message.role = MODEL_ROLE_ASSISTANT;
        r = ensure_ids(&resp.message, run->st->turns);
        if (r >= 0 && !strempty(resp.message.text)) {
                emit_text(cfg, AGENT_EVENT_TEXT, "text", resp.message.text);
                free(run->res->text);
                run->res->text = strdup(resp.message.text);
                if (!run->res->text)
                        r = -ENOMEM;
        }
        if (r >= 0)
                r = agent_state_take(run->st, &resp.message);
        model_response_done(&resp);
        if (r < 0)
                return r;

        size_t ai = run->st->n_messages - 1, n_calls = run->st->messages[ai].n_calls;
        if (n_calls > 0) {
                *nudges = 0;
                run->cut = stop == MODEL_STOP_MAX_TOKENS;
                for (size_t i = 0; i < n_calls && r >= 0; i++)
                        r = run_call(run, ai, i);
                run->cut = false;
                if (r >= 0 && !run->done && stop == MODEL_STOP_MAX_TOKENS)
                        r = nudge(run, nudge_max_tokens);
                return r;
        }
        if (stop == MODEL_STOP_MAX_TOKENS)
                return nudge(run, nudge_max_tokens);
        if (cfg->end_on_reply)
                return finish(run, AGENT_REPLIED, NULL);
        if (*nudges >= max_nudges)
                return finish(run, AGENT_FAILED, "the model stopped %d times in a row without calling %s%s%s",
                              *nudges + 1, terminal_names, unreadable ? "; the last reply held a tool call that "
                                                                        "cannot be read: " : "",
                              unreadable ? unreadable : "");
        (*nudges)++;
        _cleanup_free_ char *text = NULL;
        if (unreadable)
                r = xasprintf(&text, "Your reply looks like a tool call written as text, but it cannot be read: %s. "
                                     "Call the tools through the tool-calling interface (or write exactly one JSON "
                                     "object {\"name\": \"<tool>\", \"arguments\": {...}} inside <tool_call>"
                                     "</tool_call>); nothing in that reply was run.",
                              unreadable);
        else
                r = xasprintf(&text, "You ended your turn without calling a tool. Continue the work with the tools; "
                                     "when you are done, call %s.",
                              terminal_names);
        if (r < 0)
                return -ENOMEM;
        return nudge(run, text);
}

int agent_run(const struct agent_config *cfg, struct agent_state *st, struct agent_result *ret) {
        if (!cfg || !cfg->complete || !cfg->tools || !st || st->n_messages == 0 || !ret)
                return -EINVAL;
        struct agent_result res = {0};
        struct run run = {
                .cfg = cfg,
                .st = st,
                .res = &res,
                .max_malformed = cfg->max_malformed > 0 ? cfg->max_malformed : AGENT_MAX_MALFORMED,
        };
        int max_turns = cfg->max_turns > 0 ? cfg->max_turns : DEFAULT_MAX_TURNS;
        _cleanup_free_ struct model_tool_def *defs = NULL;
        size_t n_defs = 0;
        int r = tools_defs(cfg->tools->set, cfg->tools->phase, &defs, &n_defs);
        if (r < 0)
                return r;
        _cleanup_free_ char *terminal_names = tools_terminal_names(cfg->tools->set, cfg->tools->phase);
        if (!terminal_names)
                return -ENOMEM;
        if (!*terminal_names) {
                free(terminal_names);
                if (!(terminal_names = strdup("a tool")))
                        return -ENOMEM;
        }
        int nudges = 0;
        while (!run.done) {
                if (cancelled(cfg))
                        r = finish(&run, AGENT_CANCELLED, "cancelled");
                else if (st->turns >= max_turns)
                        r = finish(&run, AGENT_TURN_LIMIT, "the turn limit (%d model calls) was reached", max_turns);
                else
                        r = turn(&run, defs, n_defs, terminal_names, &nudges);
                if (r < 0) {
                        agent_result_done(&res);
                        return r;
                }
        }
        *ret = res;
        return 0;
}
