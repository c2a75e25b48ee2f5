/* agent.c — the agent loop. See agent.h. */
#include "agent/agent.h"
#include "base/json.h"
#include "base/log.h"

#include <stdarg.h>

#define DEFAULT_MAX_TURNS 150
#define DEFAULT_MAX_MALFORMED 3
#define DEFAULT_MAX_NUDGES 2
#define STATE_MESSAGES_MAX 100000

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
        run->malformed = tr.malformed ? run->malformed + 1 : 0;
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
        };
        run->st->turns++;
        run->res->turns++;
        return cfg->complete(cfg->complete_userdata, &req, ret, ret_error);
}

static int maybe_compact(struct run *run) {
        const struct agent_config *cfg = run->cfg;
        size_t budget = cfg->context_budget ? cfg->context_budget : AGENT_CONTEXT_BUDGET;
        size_t before = agent_state_size(run->st);
        if (before <= budget)
                return 0;
        size_t saved = agent_compact(run->st, budget, cfg->keep_last ? cfg->keep_last : AGENT_KEEP_LAST);
        _cleanup_free_ char *note = NULL;
        if (xasprintf(&note, "context compacted from %zu to %zu bytes", before, before - saved) < 0)
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
        int max_nudges = cfg->max_nudges > 0 ? cfg->max_nudges : DEFAULT_MAX_NUDGES;
        int r = maybe_compact(run);
        if (r < 0)
                return r;
        struct model_response resp = {0};
        _cleanup_free_ char *err = NULL;
        r = send(run, defs, n_defs, &resp, &err);
        if (r < 0)
                return finish(run, AGENT_FAILED, "the model call failed: %s", err ? err : strerror(-r));
        enum model_stop stop = resp.stop;
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
                for (size_t i = 0; i < n_calls && r >= 0; i++)
                        r = run_call(run, ai, i);
                if (r >= 0 && !run->done && stop == MODEL_STOP_MAX_TOKENS)
                        r = nudge(run, nudge_max_tokens);
                return r;
        }
        if (stop == MODEL_STOP_MAX_TOKENS)
                return nudge(run, nudge_max_tokens);
        if (cfg->end_on_reply)
                return finish(run, AGENT_REPLIED, NULL);
        if (*nudges >= max_nudges)
                return finish(run, AGENT_FAILED, "the model stopped %d times without calling %s", *nudges + 1,
                              terminal_names);
        (*nudges)++;
        _cleanup_free_ char *text = NULL;
        if (xasprintf(&text, "You ended your turn without calling a tool. Continue the work with the tools; when "
                             "you are done, call %s.",
                      terminal_names) < 0)
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
                .max_malformed = cfg->max_malformed > 0 ? cfg->max_malformed : DEFAULT_MAX_MALFORMED,
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
