/* Unit tests for kernel/agent: the loop against a scripted fake model (which
 * records every request it is shown), real tools on a temp worktree, fake
 * orchestrator callbacks, and compaction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "chat/chat.h"
#include "evolution/orchestrator.h"
#include "fsx/fsx.h"

#include <jansson.h>
#include <sys/stat.h>

static char root[256];
static int root_fd = -1;
static char *const evolvable[] = {"organism/", "knowledge/", "skills/", NULL};

/* --- the fake model --- */

#define MAX_CALLS 4

struct step {
        const char *text;
        const char *calls[MAX_CALLS][2]; /* name, arguments */
        enum model_stop stop;            /* 0 (END) means: TOOL_CALLS when there are calls */
        bool fail;                       /* the call fails */
        int err;                         /* with fail: the error (0 = -EIO) */
        bool set_cancel;                 /* raise the cancel flag during this call */
        const char *unreadable;          /* model_response.unreadable_calls */
        bool from_text;                  /* model_response.calls_from_text */
};

struct fake_model {
        const struct step *steps;
        size_t n_steps, next;
        int requests;
        char *seen[64];          /* each request rendered as text */
        size_t seen_messages[64];
        size_t seen_tools[64];
        atomic_bool *cancel;
        const struct step *repeat; /* when the script runs out: this step forever */
};

static void render(struct buf *b, const struct model_request *req) {
        for (size_t i = 0; i < req->n_messages; i++) {
                const struct model_message *m = &req->messages[i];
                static const char *const roles[] = {"user", "assistant", "tool"};
                buf_printf(b, "[%s%s%s%s] %s\n", roles[m->role], m->tool_call_id ? " " : "",
                           m->tool_call_id ? m->tool_call_id : "", m->is_error ? " error" : "", m->text ? m->text : "");
                for (size_t k = 0; k < m->n_calls; k++)
                        buf_printf(b, "  call %s %s %s\n", m->calls[k].id, m->calls[k].name, m->calls[k].arguments);
        }
}

static int fake_complete(void *ud, const struct model_request *req, struct model_response *ret, char **ret_error) {
        struct fake_model *f = ud;
        int i = f->requests++;
        assert_true(i < 64);
        struct buf b = BUF_INIT(64 * 1024 * 1024);
        render(&b, req);
        f->seen[i] = buf_steal(&b);
        f->seen_messages[i] = req->n_messages;
        f->seen_tools[i] = req->n_tools;
        const struct step *s = f->next < f->n_steps ? &f->steps[f->next++] : f->repeat;
        assert_non_null(s);
        if (s->set_cancel)
                atomic_store(f->cancel, true);
        if (s->fail) {
                *ret_error = strdup("HTTP 500 from the provider");
                return s->err ? s->err : -EIO;
        }
        struct model_response r = {.message = {.role = MODEL_ROLE_ASSISTANT}, .calls_from_text = s->from_text};
        if (s->unreadable)
                r.unreadable_calls = strdup(s->unreadable);
        if (s->text)
                r.message.text = strdup(s->text);
        size_t n = 0;
        while (n < MAX_CALLS && s->calls[n][0])
                n++;
        if (n) {
                r.message.calls = calloc(n, sizeof(*r.message.calls));
                for (size_t k = 0; k < n; k++) {
                        char id[32];
                        snprintf(id, sizeof id, "c%d_%zu", i, k);
                        r.message.calls[k].id = strdup(id);
                        r.message.calls[k].name = strdup(s->calls[k][0]);
                        r.message.calls[k].arguments = strdup(s->calls[k][1]);
                }
                r.message.n_calls = n;
        }
        r.stop = s->stop ? s->stop : n ? MODEL_STOP_TOOL_CALLS : MODEL_STOP_END;
        r.usage.input_tokens = 10;
        *ret = r;
        return 0;
}

static void fake_free(struct fake_model *f) {
        for (int i = 0; i < f->requests && i < 64; i++)
                free(f->seen[i]);
}

/* --- events --- */

struct events {
        int count[7];
        struct buf log;
};

static void on_event(void *ud, enum agent_event kind, const char *json) {
        struct events *e = ud;
        e->count[kind]++;
        json_t *j = json_loads(json, 0, NULL);
        assert_non_null(j); /* always a JSON object */
        assert_true(json_is_object(j));
        json_decref(j);
        buf_printf(&e->log, "%s %s\n", agent_event_name(kind), json);
}

/* --- fake orchestrator --- */

static int ask_answer = 1;
static int asks;

static int fake_ask(struct tool_ctx *ctx, const struct tool *t, const char *args_json, enum tool_level level,
                    char **ret_approval_id) {
        asks++;
        if (ask_answer == 1)
                *ret_approval_id = strdup("apr_00000000000000a1");
        return ask_answer;
}

static const struct tool_hooks hooks = {.ask = fake_ask};

/* --- fixture --- */

static struct tool_ctx ctx;
static struct events ev;
static atomic_bool cancel_flag;

static int setup(void **state) {
        char tmpl[] = "/tmp/utest-agent.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(root, sizeof root, "%s", tmpl);
        _cleanup_free_ char *dir = NULL, *f = NULL;
        assert_true(xasprintf(&dir, "%s/organism", root) >= 0);
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_true(xasprintf(&f, "%s/organism/server.js", root) >= 0);
        assert_int_equal(write_file_atomic(f, "listen(8080);\n", 14, 0644), 0);
        assert_int_equal(fsx_open_root(root, &root_fd), 0);
        ctx = (struct tool_ctx){
                .set = orch_tool_set,
                .phase = TOOL_PHASE_PLAN,
                .root_fd = root_fd,
                .root_path = root,
                .evolvable = evolvable,
                .decisions = {[TOOL_SAFE] = CFG_ALLOW, [TOOL_REVIEW] = CFG_ALLOW, [TOOL_DANGEROUS] = CFG_ASK},
                .hooks = &hooks,
        };
        ev = (struct events){.log = BUF_INIT(64 * 1024 * 1024)};
        atomic_store(&cancel_flag, false);
        ask_answer = 1;
        asks = 0;
        return 0;
}

static int teardown(void **state) {
        close(root_fd);
        rm_rf(root);
        buf_free(&ev.log);
        return 0;
}

static struct agent_config config(struct fake_model *f) {
        f->cancel = &cancel_flag;
        return (struct agent_config){
                .complete = fake_complete,
                .complete_userdata = f,
                .system = "You are the Seed.",
                .purpose = "evolution",
                .reference = "evo_1",
                .tools = &ctx,
                .max_turns = 20,
                .on_event = on_event,
                .event_userdata = &ev,
                .cancel = &cancel_flag,
        };
}

static void assert_contains(const char *s, const char *needle) {
        if (!s || !strstr(s, needle))
                fail_msg("expected \"%s\" in \"%s\"", needle, s ? s : "(null)");
}

static size_t count_of(const char *s, const char *needle) {
        size_t n = 0;
        for (const char *p = s; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* Every tool call in the conversation has exactly one result right after its
 * assistant message, and every result answers a call. */
static void assert_paired(const struct agent_state *st) {
        for (size_t i = 0; i < st->n_messages; i++) {
                const struct model_message *m = &st->messages[i];
                if (m->role == MODEL_ROLE_TOOL) {
                        /* Find the assistant message this result belongs to. */
                        size_t j = i;
                        while (j > 0 && st->messages[j].role == MODEL_ROLE_TOOL)
                                j--;
                        const struct model_message *a = &st->messages[j];
                        assert_int_equal(a->role, MODEL_ROLE_ASSISTANT);
                        bool found = false;
                        for (size_t k = 0; k < a->n_calls; k++)
                                found = found || streq(a->calls[k].id, m->tool_call_id);
                        if (!found)
                                fail_msg("result %s at %zu has no call", m->tool_call_id, i);
                }
                for (size_t k = 0; k < m->n_calls; k++) {
                        bool found = false;
                        for (size_t j = i + 1; j < st->n_messages && st->messages[j].role == MODEL_ROLE_TOOL; j++)
                                found = found || streq(st->messages[j].tool_call_id, m->calls[k].id);
                        if (!found)
                                fail_msg("call %s at %zu has no result", m->calls[k].id, i);
                }
        }
}

#define PLAN_OK "{\"title\":\"Todo app\",\"scope\":\"todo\",\"summary\":\"A todo list\",\"steps\":[\"write it\"]}"

/* --- tests --- */

static void test_plan_submit_ends(void **state) {
        const struct step steps[] = {
                {.text = "Let me look around.", .calls = {{"list_dir", "{\"path\":\"organism\"}"}}},
                {.calls = {{"read_file", "{\"path\":\"organism/server.js\"}"}}},
                {.text = "Here is the plan.", .calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "Become a todo app"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_string_equal(res.tool, "submit_plan");
        assert_contains(res.args, "\"scope\":\"todo\"");
        assert_string_equal(res.text, "Here is the plan.");
        assert_int_equal(res.turns, 3);
        assert_int_equal(st.turns, 3);
        assert_int_equal(f.requests, 3);
        /* The model saw the plan phase's tools and what the tools returned. */
        assert_true(f.seen_tools[0] >= 8);
        assert_contains(f.seen[1], "server.js  (14 bytes)");
        assert_contains(f.seen[2], "listen(8080);");
        assert_true(startswith(f.seen[0], "[user] Become a todo app\n"));
        /* user, (assistant, tool) x 3 */
        assert_int_equal(st.n_messages, 7);
        assert_paired(&st);
        assert_int_equal(ev.count[AGENT_EVENT_TOOL_CALL], 3);
        assert_int_equal(ev.count[AGENT_EVENT_TOOL_RESULT], 3);
        assert_int_equal(ev.count[AGENT_EVENT_TEXT], 2);
        assert_int_equal(ev.count[AGENT_EVENT_ERROR], 0);
        assert_contains(ev.log.data, "tool_call {\"id\":\"c0_0\",\"name\":\"list_dir\",\"arguments\":{\"path\":\"organism\"}}");
        assert_contains(ev.log.data, "\"level\":\"safe\",\"decision\":\"allow\"");
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_tool_error_fed_back(void **state) {
        const struct step steps[] = {
                {.calls = {{"submit_plan", "{\"title\":\"T\",\"scope\":\"Bad Scope\",\"summary\":\"s\",\"steps\":[\"x\"]}"}}},
                {.calls = {{"read_file", "{\"path\":\"organism/missing.js\"}"}}},
                {.calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        /* The next request shows the error, as an error result of that call. */
        assert_contains(f.seen[1], "[tool c0_0 error] invalid arguments for submit_plan: $.scope: does not match");
        assert_contains(f.seen[2], "[tool c1_0 error] read_file:");
        assert_contains(f.seen[2], "missing.js");
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_malformed_limit(void **state) {
        /* Eight malformed calls in a row (the default limit) fail the run. */
        const struct step steps[] = {
                {.calls = {{"read_file", "{\"path\": "}}},
                {.calls = {{"no_such_tool", "{}"}}},
                {.calls = {{"read_file", "{\"nope\":1}"}}},
        };
        const struct step again = {.calls = {{"read_file", "{\"path\": 7}"}}};
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps), .repeat = &again};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_FAILED);
        assert_contains(res.error, "8 malformed tool calls in a row");
        assert_int_equal(f.requests, 8);
        /* Each goes back with what was wrong and the tool's schema (or the tools). */
        assert_contains(f.seen[1], "not valid JSON");
        assert_contains(f.seen[1], "Call read_file again with arguments that match its JSON schema: {");
        assert_contains(f.seen[2], "unknown tool 'no_such_tool'; the tools of this phase are: ");
        assert_contains(f.seen[3], "invalid arguments for read_file");
        assert_contains(f.seen[3], "\"required\":[\"path\"]");
        assert_int_equal(ev.count[AGENT_EVENT_ERROR], 1);
        assert_paired(&st);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_malformed_reset_by_good_call(void **state) {
        /* Seven malformed, a good call, seven more: a good call resets the
         * count, and every turn counts against max_turns. */
        struct step steps[17] = {0};
        for (int i = 0; i < 15; i++)
                steps[i] = (struct step){.calls = {{"read_file", "{\"path\": \"organism"}}};
        steps[7] = (struct step){.calls = {{"list_dir", "{}"}}};
        steps[15] = (struct step){.calls = {{"read_file", "{\"path\":\"organism/server.js\"}"}, {"read_file", "{}"}}};
        steps[16] = (struct step){.calls = {{"submit_plan", PLAN_OK}}};
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        if (res.outcome != AGENT_TERMINAL)
                fail_msg("%s: %s", agent_outcome_name(res.outcome), res.error ? res.error : "");
        assert_int_equal(f.requests, 17);
        assert_int_equal(res.turns, 17);
        assert_paired(&st);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);

        /* The same run within fewer turns hits the turn limit. */
        struct fake_model g = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        cfg = config(&g);
        cfg.max_turns = 10;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TURN_LIMIT);
        assert_int_equal(g.requests, 10);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&g);
}

static void test_cut_calls_not_malformed(void **state) {
        /* Calls cut off by max_tokens are the cut's: nudged, never counted as
         * malformed, however many. */
        const struct step cut = {.calls = {{"submit_plan", "{\"title\":\"T\",\"sco"}}, .stop = MODEL_STOP_MAX_TOKENS};
        struct step steps[11];
        for (int i = 0; i < 10; i++)
                steps[i] = cut;
        steps[10] = (struct step){.calls = {{"submit_plan", PLAN_OK}}};
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_int_equal(f.requests, 11);
        assert_contains(f.seen[1], "not run: your reply was cut off by the output limit (max_tokens)");
        assert_true(endswith(f.seen[1], "keep each reply short.\n"));
        assert_paired(&st);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_unreadable_text_nudged(void **state) {
        const struct step steps[] = {
                {.text = "<tool_call>{\"name\": \"read_file\", \"arguments\": {</tool_call>",
                 .unreadable = "<tool_call> block 1 is not valid JSON (x at character 3)"},
                {.calls = {{"list_dir", "{}"}}, .from_text = true},
                {.calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_true(endswith(f.seen[1], "[user] Your reply looks like a tool call written as text, but it cannot be "
                                        "read: <tool_call> block 1 is not valid JSON (x at character 3). Call the "
                                        "tools through the tool-calling interface (or write exactly one JSON object "
                                        "{\"name\": \"<tool>\", \"arguments\": {...}} inside <tool_call></tool_call>); "
                                        "nothing in that reply was run.\n"));
        assert_contains(ev.log.data, "the model wrote 1 tool call as text; read as a call");
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_outage_waited_out(void **state) {
        /* Transient failures after the model's own retries: the loop waits
         * and retries with the same conversation, then goes on. */
        const struct step steps[] = {
                {.calls = {{"list_dir", "{}"}}},
                {.fail = true, .err = -EAGAIN},
                {.fail = true, .err = -ECONNREFUSED},
                {.fail = true, .err = -EBADMSG},
                {.calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        cfg.model_wait_ms = 600000;
        cfg.model_wait_interval_ms = 1;
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_int_equal(f.requests, 5);
        assert_int_equal(res.turns, 2); /* the retries are one turn */
        assert_int_equal(ev.count[AGENT_EVENT_WAITING], 3);
        assert_int_equal(ev.count[AGENT_EVENT_RESUMED], 1);
        assert_contains(ev.log.data, "waiting {\"reason\":\"HTTP 500 from the provider\",\"retry_at\":");
        assert_contains(ev.log.data, "\"attempts\":4");
        /* The same conversation each time. */
        assert_string_equal(f.seen[1], f.seen[4]);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_outage_bounded(void **state) {
        /* An outage longer than model_wait_ms fails, saying why. */
        const struct step down = {.fail = true, .err = -EAGAIN};
        struct fake_model f = {.repeat = &down};
        struct agent_config cfg = config(&f);
        cfg.model_wait_ms = 30;
        cfg.model_wait_interval_ms = 5;
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_FAILED);
        assert_contains(res.error, "the model could not be reached for ");
        assert_contains(res.error, "evolution.model_wait_seconds): HTTP 500 from the provider");
        assert_true(f.requests >= 2);
        assert_int_equal(ev.count[AGENT_EVENT_WAITING], f.requests - 1);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);

        /* A permanent refusal fails at once, without waiting. */
        const struct step refused = {.fail = true, .err = -EREMOTEIO};
        struct fake_model g = {.repeat = &refused};
        cfg = config(&g);
        cfg.model_wait_ms = 600000;
        ev.count[AGENT_EVENT_WAITING] = 0;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_FAILED);
        assert_int_equal(g.requests, 1);
        assert_int_equal(ev.count[AGENT_EVENT_WAITING], 0);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&g);

        /* Cancelled while the model is down: cancelled, not failed. */
        const struct step cancel_down = {.fail = true, .err = -EAGAIN, .set_cancel = true};
        struct fake_model h = {.repeat = &cancel_down};
        cfg = config(&h);
        cfg.model_wait_ms = 600000;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_CANCELLED);
        assert_int_equal(h.requests, 1);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&h);
}

static void test_malformed_two_then_good(void **state) {
        const struct step steps[] = {
                {.calls = {{"read_file", "not json"}}},
                {.calls = {{"write_file", "{\"path\":\"organism/x\",\"content\":\"x\"}"}}}, /* not offered in plan */
                {.calls = {{"list_dir", "{}"}}},
                {.calls = {{"read_file", "{}"}, {"bogus", "{}"}}},
                {.calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_int_equal(f.requests, 5);
        assert_contains(f.seen[1], "not valid JSON");
        assert_contains(f.seen[2], "does not offer the tool 'write_file'");
        assert_paired(&st);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_max_tokens_nudge(void **state) {
        const struct step steps[] = {
                {.text = "I will write a very long", .stop = MODEL_STOP_MAX_TOKENS},
                {.calls = {{"submit_plan", "{\"title\":\"T\",\"scope\":\"x\",\"summ"}}, .stop = MODEL_STOP_MAX_TOKENS},
                {.calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        /* The nudge is the last thing the model sees next. */
        assert_true(endswith(f.seen[1], "smaller steps: split large files into several smaller ones or write them in "
                                        "parts, and keep each reply short.\n"));
        assert_contains(f.seen[2], "[tool c1_0 error] not run: your reply was cut off by the output limit "
                                   "(max_tokens) before this call was complete (arguments of submit_plan are not "
                                   "valid JSON");
        assert_true(endswith(f.seen[2], "keep each reply short.\n"));
        assert_int_equal(count_of(f.seen[2], "continue in smaller steps") + count_of(f.seen[2], "Continue in smaller steps"), 2);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_no_tool_nudges(void **state) {
        /* Two turns without tools are nudged; the third succeeds. */
        const struct step steps[] = {
                {.text = "Thinking."},
                {.text = "Still thinking."},
                {.calls = {{"submit_plan", PLAN_OK}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_contains(f.seen[1], "[user] You ended your turn without calling a tool. Continue the work with the "
                                   "tools; when you are done, call submit_plan.");
        assert_int_equal(ev.count[AGENT_EVENT_NOTE], 2);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);

        /* AGENT_MAX_NUDGES + 1 in a row fail the run. */
        const struct step silent = {.text = "Done, I think."};
        struct fake_model g = {.repeat = &silent};
        cfg = config(&g);
        ctx.phase = TOOL_PHASE_MUTATE;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_FAILED);
        assert_contains(res.error, "without calling finish");
        assert_int_equal(g.requests, AGENT_MAX_NUDGES + 1);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&g);
}

static void test_chat_reply(void **state) {
        const struct step steps[] = {
                {.calls = {{"list_evolutions", "{}"}}},
                {.text = "There are no evolutions yet."},
        };
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        cfg.end_on_reply = true;
        cfg.purpose = "chat";
        ctx.phase = TOOL_PHASE_CHAT;
        ctx.set = chat_tool_set; /* as the chat gives it (no chat run: its own tools are not available) */
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "What is going on?"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_REPLIED);
        assert_string_equal(res.text, "There are no evolutions yet.");
        assert_null(res.tool);
        assert_contains(f.seen[1], "list_evolutions is not available in this phase");
        /* The conversation continues where it was. */
        assert_int_equal(agent_state_add_user(&st, "Thanks"), 0);
        const struct step more[] = {{.text = "You're welcome."}};
        struct fake_model g = {.steps = more, .n_steps = 1};
        cfg.complete_userdata = &g;
        agent_result_done(&res);
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_REPLIED);
        assert_contains(g.seen[0], "There are no evolutions yet.");
        assert_true(endswith(g.seen[0], "[user] Thanks\n"));
        assert_int_equal(st.turns, 3);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
        fake_free(&g);
}

static void test_turn_limit(void **state) {
        const struct step busy = {.calls = {{"list_dir", "{}"}}};
        struct fake_model f = {.repeat = &busy};
        struct agent_config cfg = config(&f);
        cfg.max_turns = 4;
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TURN_LIMIT);
        assert_contains(res.error, "turn limit (4 model calls)");
        assert_int_equal(f.requests, 4);
        assert_int_equal(res.turns, 4);
        assert_paired(&st);
        /* The limit is per conversation: another run gets no turn at all. */
        agent_result_done(&res);
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TURN_LIMIT);
        assert_int_equal(f.requests, 4);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_cancel(void **state) {
        /* Raised before the run: no model call at all. */
        struct fake_model f = {0};
        struct agent_config cfg = config(&f);
        atomic_store(&cancel_flag, true);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_CANCELLED);
        assert_int_equal(f.requests, 0);
        agent_result_done(&res);

        /* Raised while the model answers: its calls are not run, but answered. */
        atomic_store(&cancel_flag, false);
        const struct step steps[] = {
                {.calls = {{"list_dir", "{}"}}},
                {.calls = {{"write_file", "{\"path\":\"organism/x\",\"content\":\"x\"}"}, {"list_dir", "{}"}},
                 .set_cancel = true},
        };
        struct fake_model g = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        cfg = config(&g);
        ctx.phase = TOOL_PHASE_MUTATE;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_CANCELLED);
        assert_int_equal(g.requests, 2);
        assert_paired(&st);
        assert_string_equal(st.messages[st.n_messages - 1].text, "not run: cancelled");
        struct stat sb;
        _cleanup_free_ char *x = NULL;
        assert_true(xasprintf(&x, "%s/organism/x", root) >= 0);
        assert_int_not_equal(stat(x, &sb), 0);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&g);
}

static void test_terminal_then_more_calls(void **state) {
        const struct step steps[] = {
                {.calls = {{"submit_plan", PLAN_OK}, {"list_dir", "{}"}}},
        };
        struct fake_model f = {.steps = steps, .n_steps = 1};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_string_equal(res.tool, "submit_plan");
        assert_paired(&st);
        assert_string_equal(st.messages[st.n_messages - 1].text, "not run: the phase already ended");
        assert_int_equal(ev.count[AGENT_EVENT_TOOL_CALL], 1);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_model_failure(void **state) {
        const struct step steps[] = {{.fail = true}};
        struct fake_model f = {.steps = steps, .n_steps = 1};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_FAILED);
        assert_contains(res.error, "HTTP 500 from the provider");
        assert_contains(ev.log.data, "error {\"error\":\"the model call failed: HTTP 500 from the provider\"}");
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);

}

static void test_ask_denied_then_failure(void **state) {
        ctx.phase = TOOL_PHASE_MUTATE;
        const struct step s[] = {
                {.calls = {{"write_file", "{\"path\":\"kernel/x.c\",\"content\":\"x\"}"}}},
                {.calls = {{"write_file", "{\"path\":\"kernel/y.c\",\"content\":\"y\"}"}}},
        };
        struct fake_model f = {.steps = s, .n_steps = 1};
        struct agent_config cfg = config(&f);
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "intent"), 0);
        struct agent_result res;
        /* Denied: the model is told; then the owner's decision cannot be had. */
        ask_answer = 0;
        f.n_steps = 2;
        const struct step fail_step = {.calls = {{"write_file", "{\"path\":\"kernel/z.c\",\"content\":\"z\"}"}}};
        f.repeat = &fail_step;
        cfg.max_turns = 2;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TURN_LIMIT);
        assert_int_equal(asks, 2);
        assert_contains(f.seen[1], "[tool c0_0 error] denied by the owner");
        agent_result_done(&res);

        ask_answer = -ECANCELED;
        cfg.max_turns = 10;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_FAILED);
        assert_contains(res.error, "owner's decision on write_file could not be had");
        assert_paired(&st);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

/* --- compaction --- */

static char *filler(char c, size_t n) {
        char *s = malloc(n + 1);
        memset(s, c, n);
        s[n] = '\0';
        return s;
}

/* first user message, then n turns of (assistant with a call, its big result),
 * with a user note in the middle. */
static void build_conversation(struct agent_state *st, int n) {
        agent_state_init(st);
        assert_int_equal(agent_state_add_user(st, "FIRST: become a todo app"), 0);
        for (int i = 0; i < n; i++) {
                struct model_message a = {.role = MODEL_ROLE_ASSISTANT};
                assert_true(xasprintf(&a.text, "turn %d", i) >= 0);
                a.calls = calloc(2, sizeof(*a.calls));
                a.n_calls = 2;
                for (int k = 0; k < 2; k++) {
                        assert_true(xasprintf(&a.calls[k].id, "id%d_%d", i, k) >= 0);
                        a.calls[k].name = strdup("write_file");
                        _cleanup_free_ char *content = filler('c', 3000);
                        json_t *args = json_pack("{s:s, s:s}", "path", "organism/a.js", "content", content);
                        a.calls[k].arguments = json_dumps(args, JSON_COMPACT);
                        json_decref(args);
                }
                assert_int_equal(agent_state_take(st, &a), 0);
                for (int k = 0; k < 2; k++) {
                        struct model_message t = {.role = MODEL_ROLE_TOOL, .text = filler('o', 5000)};
                        memcpy(t.text, "HEAD", 4);
                        memcpy(t.text + 4996, "TAIL", 4);
                        assert_true(xasprintf(&t.tool_call_id, "id%d_%d", i, k) >= 0);
                        assert_int_equal(agent_state_take(st, &t), 0);
                }
                if (i == n / 2)
                        assert_int_equal(agent_state_add_user(st, "a note from the kernel"), 0);
        }
}

/* Whether message i of a equals message j of b (texts, calls, ids). */
static bool same_message(const struct model_message *a, const struct model_message *b) {
        if (a->role != b->role || !streq(a->text ? a->text : "", b->text ? b->text : "") || a->n_calls != b->n_calls ||
            !streq(a->tool_call_id ? a->tool_call_id : "", b->tool_call_id ? b->tool_call_id : ""))
                return false;
        for (size_t k = 0; k < a->n_calls; k++)
                if (!streq(a->calls[k].id, b->calls[k].id) || !streq(a->calls[k].arguments, b->calls[k].arguments))
                        return false;
        return true;
}

/* The newest turn (the last assistant message and what follows) is st's as it was in orig. */
static void assert_newest_turn_intact(const struct agent_state *st, const struct agent_state *orig) {
        size_t k = 0;
        while (k < orig->n_messages && orig->messages[orig->n_messages - 1 - k].role != MODEL_ROLE_ASSISTANT)
                k++;
        assert_true(st->n_messages > k + 1);
        for (size_t i = 0; i <= k; i++)
                assert_true(same_message(&st->messages[st->n_messages - 1 - i], &orig->messages[orig->n_messages - 1 - i]));
}

static void test_compaction_trims(void **state) {
        struct agent_state st, orig;
        build_conversation(&st, 10);
        build_conversation(&orig, 10);
        size_t before = agent_state_size(&st);
        assert_true(before > 150000);
        size_t budget = 80000, keep = 6;
        size_t saved = agent_compact(&st, budget, keep);
        assert_true(saved > 0);
        /* Within budget, down to its target (so that it happens seldom). */
        assert_true(agent_state_size(&st) <= budget / 100 * AGENT_COMPACT_TARGET_PCT);
        assert_int_equal(agent_state_size(&st), before - saved);
        /* No message dropped: trimming was enough. */
        assert_int_equal(st.n_messages, orig.n_messages);
        /* The first message and the last `keep` are intact. */
        assert_string_equal(st.messages[0].text, "FIRST: become a todo app");
        for (size_t i = st.n_messages - keep; i < st.n_messages; i++)
                assert_true(same_message(&st.messages[i], &orig.messages[i]));
        /* Old tool output: its head and a note saying what was trimmed. */
        assert_true(startswith(st.messages[2].text, "HEAD"));
        assert_false(endswith(st.messages[2].text, "TAIL"));
        assert_contains(st.messages[2].text, "[trimmed: 4700 more bytes of this write_file output");
        assert_true(strlen(st.messages[2].text) < 600);
        /* Old arguments are still JSON objects. */
        json_t *args = json_loads(st.messages[1].calls[0].arguments, 0, NULL);
        assert_true(json_is_object(args));
        assert_string_equal(json_string_value(json_object_get(args, "path")), "organism/a.js");
        assert_contains(json_string_value(json_object_get(args, "content")), "[trimmed ");
        json_decref(args);
        assert_paired(&st);
        /* Within budget: nothing to do. */
        assert_int_equal(agent_compact(&st, budget, keep), 0);
        agent_state_done(&st);
        agent_state_done(&orig);
}

static void test_compaction_outputs_first(void **state) {
        /* A budget that trimming some tool output meets: the oldest outputs
         * are trimmed, the newer ones and every argument untouched. */
        struct agent_state st, orig;
        build_conversation(&st, 10);
        build_conversation(&orig, 10);
        size_t before = agent_state_size(&st), budget = before - 1;
        agent_compact(&st, budget, 6);
        assert_true(agent_state_size(&st) <= budget / 100 * AGENT_COMPACT_TARGET_PCT);
        assert_int_equal(st.n_messages, orig.n_messages);
        size_t trimmed = 0, last_trimmed = 0, first_intact = SIZE_MAX;
        for (size_t i = 1; i < st.n_messages; i++) {
                const struct model_message *m = &st.messages[i];
                for (size_t k = 0; k < m->n_calls; k++) /* arguments: stage 2, not needed */
                        assert_string_equal(m->calls[k].arguments, orig.messages[i].calls[k].arguments);
                if (m->role != MODEL_ROLE_TOOL)
                        continue;
                if (strstr(m->text, "[trimmed: ")) {
                        trimmed++;
                        last_trimmed = i;
                } else if (first_intact == SIZE_MAX)
                        first_intact = i;
        }
        assert_true(trimmed > 0);
        assert_true(first_intact != SIZE_MAX);
        assert_true(last_trimmed < first_intact); /* oldest first */
        /* Once trimmed, an output stays as it is: never re-sent, never trimmed
         * again (the prefix a prompt cache holds stays the same). */
        _cleanup_free_ char *note = strdup(st.messages[2].text);
        struct model_message more = {.role = MODEL_ROLE_USER, .text = filler('n', 80000)};
        assert_int_equal(agent_state_take(&st, &more), 0);
        assert_true(agent_compact(&st, budget, 6) > 0);
        assert_string_equal(st.messages[2].text, note);
        assert_paired(&st);
        agent_state_done(&st);
        agent_state_done(&orig);
}

static void test_compaction_drops_whole_turns(void **state) {
        struct agent_state st, orig;
        build_conversation(&st, 30);
        build_conversation(&orig, 30);
        size_t keep = 5, budget = 12000;
        agent_compact(&st, budget, keep);
        assert_true(st.n_messages < orig.n_messages);
        assert_string_equal(st.messages[0].text, "FIRST: become a todo app");
        /* After the first message, a suffix of the original (its older output perhaps trimmed). */
        for (size_t i = 1; i < st.n_messages; i++) {
                const struct model_message *a = &st.messages[st.n_messages - i], *b = &orig.messages[orig.n_messages - i];
                assert_int_equal(a->role, b->role);
                assert_string_equal(a->tool_call_id ? a->tool_call_id : "", b->tool_call_id ? b->tool_call_id : "");
        }
        assert_newest_turn_intact(&st, &orig);
        /* After the first message comes an assistant turn, never an orphan result. */
        assert_int_equal(st.messages[1].role, MODEL_ROLE_ASSISTANT);
        assert_paired(&st);
        /* The newest turn is never cut, even if the budget cannot be met. */
        agent_compact(&st, 10, keep);
        assert_true(st.n_messages >= 4);
        assert_string_equal(st.messages[0].text, "FIRST: become a todo app");
        assert_newest_turn_intact(&st, &orig);
        assert_paired(&st);
        agent_state_done(&st);
        agent_state_done(&orig);
}

static void test_compaction_budgets(void **state) {
        /* Over many budgets and tails: pairs kept, the budget kept (it always
         * can be here: the first message and the newest turn are small), the
         * newest turn and the first message never touched. */
        static const size_t budgets[] = {20000, 30000, 45000, 70000, 100000, 150000};
        static const size_t keeps[] = {1, 2, 3, 6, 12, 40};
        for (size_t b = 0; b < ARRAY_SIZE(budgets); b++)
                for (size_t k = 0; k < ARRAY_SIZE(keeps); k++) {
                        struct agent_state st, orig;
                        build_conversation(&st, 20);
                        build_conversation(&orig, 20);
                        /* a newest turn with small output */
                        struct model_message a = {.role = MODEL_ROLE_ASSISTANT, .text = strdup("last")};
                        a.calls = calloc(1, sizeof(*a.calls));
                        a.n_calls = 1;
                        a.calls[0] = (struct model_tool_call){strdup("idL"), strdup("list_dir"), strdup("{}")};
                        struct model_message t = {.role = MODEL_ROLE_TOOL, .text = strdup("a.txt"),
                                                  .tool_call_id = strdup("idL")};
                        assert_int_equal(agent_state_add(&orig, &a), 0);
                        assert_int_equal(agent_state_add(&orig, &t), 0);
                        assert_int_equal(agent_state_take(&st, &a), 0);
                        assert_int_equal(agent_state_take(&st, &t), 0);
                        agent_compact(&st, budgets[b], keeps[k]);
                        if (agent_state_size(&st) > budgets[b])
                                fail_msg("budget %zu keep %zu: %zu bytes", budgets[b], keeps[k], agent_state_size(&st));
                        assert_paired(&st);
                        assert_string_equal(st.messages[0].text, "FIRST: become a todo app");
                        assert_newest_turn_intact(&st, &orig);
                        agent_state_done(&st);
                        agent_state_done(&orig);
                }
}

static void test_compaction_in_loop(void **state) {
        /* Big tool results and a small budget: the model is shown trimmed history. */
        _cleanup_free_ char *big = filler('z', 30000);
        _cleanup_free_ char *path = NULL;
        assert_true(xasprintf(&path, "%s/organism/big.txt", root) >= 0);
        assert_int_equal(write_file_atomic(path, big, strlen(big), 0644), 0);
        const struct step read = {.calls = {{"read_file", "{\"path\":\"organism/big.txt\"}"}}};
        const struct step steps[] = {read, read, read, read, read, {.calls = {{"submit_plan", PLAN_OK}}}};
        struct fake_model f = {.steps = steps, .n_steps = ARRAY_SIZE(steps)};
        struct agent_config cfg = config(&f);
        cfg.context_budget = 50000;
        cfg.keep_last = 2;
        struct agent_state st;
        agent_state_init(&st);
        assert_int_equal(agent_state_add_user(&st, "FIRST"), 0);
        struct agent_result res;
        assert_int_equal(agent_run(&cfg, &st, &res), 0);
        assert_int_equal(res.outcome, AGENT_TERMINAL);
        assert_contains(f.seen[5], "more bytes of this read_file output");
        assert_true(strlen(f.seen[5]) < 50000);
        assert_true(startswith(f.seen[5], "[user] FIRST\n"));
        assert_contains(ev.log.data, "note {\"text\":\"context compacted from ");
        assert_paired(&st);
        agent_result_done(&res);
        agent_state_done(&st);
        fake_free(&f);
}

static void test_bad_arguments(void **state) {
        struct agent_result res;
        struct agent_state st;
        agent_state_init(&st);
        struct fake_model f = {0};
        struct agent_config cfg = config(&f);
        assert_int_equal(agent_run(&cfg, &st, &res), -EINVAL); /* no first message */
        cfg.complete = NULL;
        assert_int_equal(agent_state_add_user(&st, "x"), 0);
        assert_int_equal(agent_run(&cfg, &st, &res), -EINVAL);
        agent_state_done(&st);
        assert_string_equal(agent_event_name(AGENT_EVENT_TOOL_RESULT), "tool_result");
        assert_string_equal(agent_outcome_name(AGENT_TURN_LIMIT), "turn_limit");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_plan_submit_ends, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tool_error_fed_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_malformed_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_malformed_reset_by_good_call, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cut_calls_not_malformed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreadable_text_nudged, setup, teardown),
                cmocka_unit_test_setup_teardown(test_outage_waited_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_outage_bounded, setup, teardown),
                cmocka_unit_test_setup_teardown(test_malformed_two_then_good, setup, teardown),
                cmocka_unit_test_setup_teardown(test_max_tokens_nudge, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_tool_nudges, setup, teardown),
                cmocka_unit_test_setup_teardown(test_chat_reply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_turn_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminal_then_more_calls, setup, teardown),
                cmocka_unit_test_setup_teardown(test_model_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ask_denied_then_failure, setup, teardown),
                cmocka_unit_test(test_compaction_trims),
                cmocka_unit_test(test_compaction_drops_whole_turns),
                cmocka_unit_test(test_compaction_outputs_first),
                cmocka_unit_test(test_compaction_budgets),
                cmocka_unit_test_setup_teardown(test_compaction_in_loop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
