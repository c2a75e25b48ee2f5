/* Integration tests of an evolution surviving a model and a provider having
 * a bad day (issue 14): whole evolutions through the real orchestrator,
 * agent loop and model client, with a real PostgreSQL, bwrap and git, against
 * the scripted model server (tests/fakes/model_server.py) in both wire
 * formats (openai-compatible, and anthropic pointed at the scripted server).
 *
 * Each class of misbehaviour appears alone (in the plan phase), in a burst of
 * three (before the change) and in a burst of five (before finish), then the
 * model behaves: the evolution completes and the generation holds the
 * change. A burst of five transient failures spends a call's whole retry
 * budget, so it also goes through "waiting for the model". Then: mixed
 * classes, tool calls written as text, an outage longer than the budget
 * (resumes when the server returns; fails after evolution.model_wait_seconds
 * with the reason), a permanent 401 (fails at once naming the fix) and a
 * cancel while waiting. The model requests each scenario took are printed as
 * TAP comments. Runs as the unprivileged account. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdatomic.h>

#include "base/buf.h"
#include "base/priv.h"
#include "config/config.h"
#include "db/db.h"
#include "evolution/orchestrator.h"
#include "evolution/store.h"
#include "mind/mind.h"
#include "pg/pg.h"
#include "repo/repo.h"

#include "model-server.h"

#define BRIDGE SEED_BUILD_ROOT "/cmd/seed-bridge/seed-bridge"
#define EVOLUTION_TIMEOUT_MS 240000

enum fmt { OPENAI, ANTHROPIC };
static const char *const fmt_names[] = {"openai-compatible", "anthropic"};

static char seed_dir[128];
static struct pg *g_pg;
static struct db *g_db;
static struct cfg *g_cfg;
static struct mind *g_mind;
static struct orchestrator *g_orch;
static enum fmt g_fmt = OPENAI;
static bool g_started;

/* ---- the Seed, the mind, the orchestrator ---- */

static void run_cmd(char *const *argv) {
        struct proc_result res = {0};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1}, &res), 0);
        if (res.exit_code != 0)
                fail_msg("%s failed: %s", argv[0], res.output ? res.output : "");
        proc_result_done(&res);
}

/* The mind for fmt (anthropic: the named provider, its requests sent to the
 * scripted server, with a lent key) and an orchestrator thinking with it. */
static void start(enum fmt fmt) {
        free(g_cfg->model.provider);
        free(g_cfg->model.name);
        free(g_cfg->model.base_url);
        char url[192];
        snprintf(url, sizeof url, "%s/v1", base);
        assert_non_null(g_cfg->model.provider = strdup(fmt_names[fmt]));
        assert_non_null(g_cfg->model.name = strdup("scripted"));
        assert_non_null(g_cfg->model.base_url = strdup(fmt == OPENAI ? url : ""));
        char messages[192];
        snprintf(messages, sizeof messages, "%s/v1/messages", base);
        assert_int_equal(mind_new(&(struct mind_config){.cfg = g_cfg, .backoff_base_ms = 10,
                                                        .endpoint_for_tests = fmt == ANTHROPIC ? messages : NULL},
                                  &g_mind),
                         0);
        if (fmt == ANTHROPIC) {
                _cleanup_free_ char *err = NULL;
                assert_int_equal(mind_lend_key(g_mind, "anthropic", "sk-ant-robust-test", &err), 0);
        }
        assert_true(mind_ready(g_mind));
        struct orch_config oc = {
                .seed_dir = seed_dir,
                .cfg = g_cfg,
                .kdb = g_db,
                .pg = g_pg,
                .mind = g_mind,
                .bridge_path = BRIDGE,
                .model_wait_interval_ms = 200,
        };
        assert_int_equal(orch_start(&oc, &g_orch), 0);
        g_fmt = fmt;
        g_started = true;
}

static void stop(void) {
        if (!g_started)
                return;
        orch_stop(g_orch);
        mind_free(g_mind);
        g_orch = NULL;
        g_mind = NULL;
        g_started = false;
}

static void use_format(enum fmt fmt) {
        if (g_started && g_fmt == fmt)
                return;
        stop();
        start(fmt);
}

static int setup(void **state) {
        if (priv_drop_if_root(NULL) < 0)
                return -1;
        start_server(state);
        snprintf(seed_dir, sizeof seed_dir, "%s/seed", tmp);
        assert_int_equal(mkdir_p(seed_dir, 0755), 0);
        char *cp[] = {"/bin/cp", "-r", SEED_SOURCE_ROOT "/organism", SEED_SOURCE_ROOT "/knowledge",
                      SEED_SOURCE_ROOT "/skills", seed_dir, NULL};
        run_cmd(cp);
        _cleanup_free_ char *k = path_join(seed_dir, "kernel"), *kf = path_join(seed_dir, "kernel/README.md"),
                            *gi = path_join(seed_dir, ".gitignore"), *sy = path_join(seed_dir, "seed.yaml");
        assert_int_equal(mkdir_p(k, 0755), 0);
        assert_int_equal(write_file_atomic(kf, "kernel stub\n", 12, 0644), 0);
        assert_int_equal(write_file_atomic(gi, "/.seed/\nnode_modules/\n", 22, 0644), 0);
        assert_int_equal(write_file_atomic(sy, "name: seed\n", 11, 0644), 0);
        _cleanup_free_ char *err = NULL, *ci = NULL;
        if (repo_init_commit(seed_dir, "Initial seed", "seed/gen-1", &err) < 0)
                fail_msg("repo_init_commit: %s", err ? err : "");
        assert_int_equal(pg_start(seed_dir, &g_pg), 0);
        assert_int_equal(pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci), 0);
        assert_int_equal(db_connect(ci, &g_db), 0);
        /* Evolutions here run to their end: no preview waiting for an owner. */
        assert_int_equal(evo_preview_set(g_db, false), 0);
        assert_int_equal(cfg_new_default(&g_cfg), 0);
        g_cfg->evolution.command_timeout_seconds = 120;
        g_cfg->model.max_tokens = 512;
        return 0;
}

static int teardown(void **state) {
        stop();
        db_close(g_db);
        pg_stop(g_pg);
        cfg_free(g_cfg);
        return stop_server(state);
}

/* ---- evolutions ---- */

static enum evo_state state_of(const char *id) {
        enum evo_state s = EVO_REQUESTED;
        assert_int_equal(evo_get_state(g_db, id, &s), 0);
        return s;
}

static enum evo_state wait_final(const char *id) {
        int64_t deadline = now_ms() + EVOLUTION_TIMEOUT_MS;
        for (enum evo_state s;; sleep_ms(50)) {
                if (evo_state_is_final(s = state_of(id)))
                        return s;
                if (now_ms() > deadline)
                        fail_msg("evolution %s still %s", id, evo_state_name(s));
        }
}

static json_t *evolution(const char *id, bool with_events) {
        _cleanup_free_ char *json = NULL;
        assert_int_equal(evo_get_json(g_db, id, with_events, 0, &json), 0);
        json_t *j = json_loads(json, 0, NULL);
        assert_non_null(j);
        return j;
}

static size_t count_events(const char *id, const char *kind) {
        json_t *e = evolution(id, true), *ev;
        size_t i, n = 0;
        json_array_foreach(json_object_get(e, "events"), i, ev)
                n += streq(json_string_value(json_object_get(ev, "kind")), kind);
        json_decref(e);
        return n;
}

static void dump_events(const char *id) {
        _cleanup_free_ char *json = NULL;
        if (evo_get_json(g_db, id, true, 0, &json) >= 0)
                print_error("%s\n", json);
}

static char *submit(const char *intent) {
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, intent, NULL, &id), 0);
        return id;
}

static bool seed_file_contains(const char *rel, const char *needle) {
        _cleanup_free_ char *p = path_join(seed_dir, rel), *text = NULL;
        return read_file(p, 1 << 20, &text, NULL) >= 0 && strstr(text, needle);
}

static bool worktree_exists(const char *id) {
        char p[300];
        snprintf(p, sizeof p, "%s/.seed/worktrees/%s", seed_dir, id);
        return path_exists(p);
}

/* Waits until the evolution says it is waiting for the model; returns that
 * "waiting" object (caller json_decref()s). */
static json_t *wait_waiting(const char *id) {
        int64_t deadline = now_ms() + 60000;
        for (;; sleep_ms(50)) {
                json_t *e = evolution(id, false);
                json_t *w = json_object_get(e, "waiting");
                if (json_is_object(w)) {
                        json_incref(w);
                        json_decref(e);
                        return w;
                }
                json_decref(e);
                if (evo_state_is_final(state_of(id)) || now_ms() > deadline) {
                        dump_events(id);
                        fail_msg("evolution %s never waited for the model", id);
                }
        }
}

/* ---- scripts ---- */

#define FINISH "{\"tool_calls\": [{\"name\": \"finish\", \"arguments\": {\"summary\": \"done\"}}]}"
#define REFLECT "{\"tool_calls\": [{\"name\": \"submit_reflection\", \"arguments\": {\"notes\": \"learned\"}}]}"

/* The change: a file of its own per scenario, so each generation holds one. */
static char *edit_step(const char *slug) {
        char *s = NULL;
        assert_true(xasprintf(&s,
                              "{\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": "
                              "\"organism/robust-%s.txt\", \"content\": \"survived %s\\n\"}}]}",
                              slug, slug) >= 0);
        return s;
}

static char *plan_step(const char *slug) {
        char *s = NULL;
        assert_true(xasprintf(&s,
                              "{\"tool_calls\": [{\"name\": \"submit_plan\", \"arguments\": {\"title\": \"Robust %s\", "
                              "\"scope\": \"robust\", \"summary\": \"Survive %s.\", \"steps\": [\"write a note\"]}}]}",
                              slug, slug) >= 0);
        return s;
}

/* One class of misbehaviour (a script step), whether it is transient (a
 * failed attempt within a call's retry budget) and in which formats. */
struct scenario {
        const char *name;
        const char *step;
        bool transient;
        enum fmt fmt;
};

/* [bad, plan, bad×3, change, bad×5, finish, reflect] */
static char *class_script(const struct scenario *sc, const char *slug) {
        struct buf b = BUF_INIT(1 << 20);
        _cleanup_free_ char *plan = plan_step(slug), *edit = edit_step(slug);
        assert_int_equal(buf_printf(&b, "[%s, %s", sc->step, plan), 0);
        for (int i = 0; i < 3; i++)
                assert_int_equal(buf_printf(&b, ", %s", sc->step), 0);
        assert_int_equal(buf_printf(&b, ", %s", edit), 0);
        for (int i = 0; i < 5; i++)
                assert_int_equal(buf_printf(&b, ", %s", sc->step), 0);
        assert_int_equal(buf_printf(&b, ", " FINISH ", " REFLECT "]"), 0);
        return buf_steal(&b);
}

/* Runs the script to the end; returns the evolution's id. The evolution
 * must complete, its generation must hold the change, and the requests
 * are reported. */
static char *run_to_completion(const char *label, const char *slug, const char *script, int gen_before) {
        load_script(script);
        char *id = submit("Write a note and survive a bad day");
        enum evo_state s = wait_final(id);
        if (s != EVO_COMPLETE) {
                dump_events(id);
                print_server_log();
        }
        assert_int_equal(s, EVO_COMPLETE);
        int gen = 0;
        assert_int_equal(repo_current_generation(seed_dir, &gen), 0);
        assert_int_equal(gen, gen_before + 1);
        char rel[128], want[128];
        snprintf(rel, sizeof rel, "organism/robust-%s.txt", slug);
        snprintf(want, sizeof want, "survived %s", slug);
        assert_true(seed_file_contains(rel, want));
        json_t *st = control("GET", "/_state", NULL);
        assert_int_equal(json_integer_value(json_object_get(st, "remaining")), 0); /* every step was used */
        json_decref(st);
        print_message("# %s (%s): %zu model requests; waited for the model %zu times\n", label, fmt_names[g_fmt],
                      request_count(), count_events(id, "waiting"));
        return id;
}

static int current_gen(void) {
        int g = 0;
        assert_int_equal(repo_current_generation(seed_dir, &g), 0);
        return g;
}

static void test_class(void **state) {
        const struct scenario *sc = *state;
        use_format(sc->fmt);
        char slug[64];
        snprintf(slug, sizeof slug, "%s-%s", sc->fmt == OPENAI ? "oai" : "ant", sc->name);
        _cleanup_free_ char *script = class_script(sc, slug);
        _cleanup_free_ char *id = run_to_completion(sc->name, slug, script, current_gen());
        /* A burst of five transient failures spends a call's retry budget:
         * the evolution waited for the model and went on. Nothing else
         * makes it wait. */
        size_t waited = count_events(id, "waiting"), resumed = count_events(id, "resumed");
        if (sc->transient) {
                assert_true(waited >= 1);
                assert_true(resumed >= 1);
        } else {
                assert_int_equal(waited, 0);
                assert_int_equal(resumed, 0);
        }
}

/* Every class of the issue, in each format's own words. */
#define TRUNCATED "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": \"{\\\"path\\\": \\\"organism/bin/ser\"}]}"
#define WRONG_TYPE "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\": 42}}]}"
#define UNKNOWN "{\"tool_calls\": [{\"name\": \"read_files\", \"arguments\": {\"path\": \"organism\"}}]}"
#define TWO_ONE_BROKEN                                                                                              \
        "{\"tool_calls\": [{\"name\": \"list_dir\", \"arguments\": {\"path\": \"organism\"}}, {\"name\": "           \
        "\"read_file\", \"arguments\": {\"path\": 42}}]}"
#define TEXT "{\"text\": \"I think I should look at the files before I change anything.\"}"
#define LENGTH_TEXT "{\"text\": \"Here is the whole new file, line by line: 1, 2, 3, 4\", \"stop\": \"max_tokens\"}"
#define LENGTH_CALL                                                                                                 \
        "{\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": \"{\\\"path\\\": \\\"organism/big.txt\\\", "     \
        "\\\"content\\\": \\\"aaaa\"}], \"stop\": \"max_tokens\"}"
#define LENGTH_CALL_ANTHROPIC                                                                                       \
        "{\"tool_calls\": [{\"name\": \"write_file\", \"arguments\": {\"path\": \"organism/big.txt\"}}], "          \
        "\"stop\": \"max_tokens\"}"

static const struct scenario scenarios[] = {
        /* OpenAI style (openai-compatible) */
        {"empty-choices", "{\"empty\": true}", true, OPENAI},
        {"error-in-200", "{\"error_in_200\": {\"message\": \"upstream provider overloaded\", \"code\": 502}}", true, OPENAI},
        {"text-instead-of-call", TEXT, false, OPENAI},
        {"unknown-tool", UNKNOWN, false, OPENAI},
        {"truncated-arguments", TRUNCATED, false, OPENAI},
        {"length-cut-text", LENGTH_TEXT, false, OPENAI},
        {"length-cut-call", LENGTH_CALL, false, OPENAI},
        {"wrong-type-arguments", WRONG_TYPE, false, OPENAI},
        {"two-calls-one-broken", TWO_ONE_BROKEN, false, OPENAI},
        {"http-500", "{\"http_error\": 500}", true, OPENAI},
        {"http-429-retry-after", "{\"http_error\": 429, \"headers\": {\"Retry-After\": \"1\"}}", true, OPENAI},
        {"body-cut-short", "{\"text\": \"I will now submit the plan as asked.\", \"cut\": 40}", true, OPENAI},
        {"no-finish-reason", "{\"text\": \"Let me wri\", \"stop\": \"none\"}", true, OPENAI},
        {"unreadable-text-call", "{\"text\": \"<tool_call>{\\\"name\\\": \\\"list_dir\\\", \\\"arguments\\\": {</tool_call>\"}",
         false, OPENAI},
        /* Anthropic Messages */
        {"overloaded-529", "{\"http_error\": 529}", true, ANTHROPIC},
        {"overloaded-in-200", "{\"error_in_200\": {\"message\": \"Overloaded\", \"code\": \"overloaded_error\"}}", true,
         ANTHROPIC},
        {"empty-content", "{\"empty\": true}", false, ANTHROPIC},
        {"text-without-tool-use", TEXT, false, ANTHROPIC},
        {"unknown-tool", UNKNOWN, false, ANTHROPIC},
        {"max-tokens-text", LENGTH_TEXT, false, ANTHROPIC},
        {"max-tokens-tool-use", LENGTH_CALL_ANTHROPIC, false, ANTHROPIC},
        {"wrong-type-input", WRONG_TYPE, false, ANTHROPIC},
        {"two-calls-one-broken", TWO_ONE_BROKEN, false, ANTHROPIC},
        {"http-500", "{\"http_error\": 500}", true, ANTHROPIC},
        {"http-429-retry-after", "{\"http_error\": 429, \"headers\": {\"Retry-After\": \"1\"}}", true, ANTHROPIC},
        {"body-cut-short", "{\"text\": \"I will now submit the plan as asked.\", \"cut\": 40}", true, ANTHROPIC},
        {"no-stop-reason", "{\"text\": \"Let me wri\", \"stop\": \"none\"}", true, ANTHROPIC},
};

/* Every class mixed, transient and not, within calls and between them. */
static void mixed(enum fmt fmt) {
        use_format(fmt);
        const char *slug = fmt == OPENAI ? "oai-mixed" : "ant-mixed";
        _cleanup_free_ char *plan = plan_step(slug), *edit = edit_step(slug), *script = NULL;
        assert_true(xasprintf(&script,
                              "[{\"empty\": true}, {\"http_error\": 500}, " TEXT ", " UNKNOWN ", %s, "
                              "{\"http_error\": 429, \"headers\": {\"Retry-After\": \"1\"}}, " TRUNCATED ", "
                              "{\"error_in_200\": {\"message\": \"busy\", \"code\": 503}}, " WRONG_TYPE ", "
                              "{\"text\": \"cut\", \"cut\": 10}, " TWO_ONE_BROKEN ", %s, " LENGTH_TEXT ", "
                              "{\"text\": \"Let me wri\", \"stop\": \"none\"}, %s, {\"http_error\": 503}, "
                              "{\"http_error\": 502}, {\"http_error\": 500}, {\"http_error\": 504}, "
                              "{\"http_error\": 408}, " TEXT ", " FINISH ", {\"http_error\": 409}, " REFLECT "]",
                              plan, fmt == OPENAI ? LENGTH_CALL : LENGTH_CALL_ANTHROPIC, edit) >= 0);
        _cleanup_free_ char *id = run_to_completion("mixed", slug, script, current_gen());
        assert_true(count_events(id, "waiting") >= 1); /* the five 5xx/408 in a row */
}

static void test_mixed_openai(void **state) { mixed(OPENAI); }
static void test_mixed_anthropic(void **state) { mixed(ANTHROPIC); }

/* Local servers without native tool parsing: calls written as text, in each
 * shape, run like any other; one that cannot be read is nudged. */
static void test_text_tool_calls(void **state) {
        use_format(OPENAI);
        const char *slug = "oai-text-calls";
        _cleanup_free_ char *script = NULL;
        assert_true(xasprintf(&script,
                              "[{\"text\": \"<tool_call>\\n{\\\"name\\\": \\\"list_dir\\\", \\\"arguments\\\": "
                              "{\\\"path\\\": \\\"organism\\\"}}\\n</tool_call>\"},"
                              " {\"text\": \"Planning now.\\n```json\\n{\\\"name\\\": \\\"submit_plan\\\", "
                              "\\\"arguments\\\": {\\\"title\\\": \\\"Robust %s\\\", \\\"scope\\\": \\\"robust\\\", "
                              "\\\"summary\\\": \\\"Text calls.\\\", \\\"steps\\\": [\\\"write\\\"]}}\\n```\","
                              " \"match\": \"call_text_\"},"
                              " {\"text\": \"{\\\"name\\\": \\\"write_file\\\", \\\"arguments\\\": {\\\"path\\\": "
                              "\\\"organism/robust-%s.txt\\\", \\\"content\\\": \\\"survived %s\\\\n\\\"}}\"},"
                              " {\"text\": \"<tool_call>{\\\"name\\\": \\\"finish\\\", \\\"arguments\\\": {</tool_call>\"},"
                              " {\"match\": \"cannot be read\", \"text\": \"<tool_call>{\\\"name\\\": \\\"finish\\\", "
                              "\\\"arguments\\\": {\\\"summary\\\": \\\"done\\\"}}</tool_call>\"}, " REFLECT "]",
                              slug, slug, slug) >= 0);
        _cleanup_free_ char *id = run_to_completion("text-tool-calls", slug, script, current_gen());
        json_t *e = evolution(id, true);
        _cleanup_free_ char *s = json_dumps(e, JSON_COMPACT);
        json_decref(e);
        assert_non_null(strstr(s, "the model wrote 1 tool call as text; read as a call"));
}

/* An outage longer than a call's retry budget: the evolution says it waits
 * for the model, keeps its worktree, and resumes when the server returns. */
static void outage_resumes(enum fmt fmt, const char *mode) {
        use_format(fmt);
        const char *slug = fmt == OPENAI ? "oai-outage" : "ant-outage";
        _cleanup_free_ char *plan = plan_step(slug), *edit = edit_step(slug), *script = NULL;
        assert_true(xasprintf(&script, "[%s, {\"outage\": {\"ms\": 3000, \"mode\": \"%s\"}}, %s, " FINISH ", " REFLECT "]",
                              plan, mode, edit) >= 0);
        load_script(script);
        int before = current_gen();
        _cleanup_free_ char *id = submit("Write a note through an outage");
        json_t *w = wait_waiting(id);
        const char *reason = json_string_value(json_object_get(w, "reason"));
        assert_non_null(reason);
        print_message("# outage (%s, %s): waiting for the model: %s\n", fmt_names[fmt], mode, reason);
        assert_true(json_integer_value(json_object_get(w, "retry_at")) > 0);
        assert_true(json_integer_value(json_object_get(w, "until")) > json_integer_value(json_object_get(w, "retry_at")));
        json_decref(w);
        assert_true(worktree_exists(id)); /* its work is kept meanwhile */
        assert_int_equal(state_of(id), EVO_MUTATING);
        enum evo_state s = wait_final(id);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        char rel[128];
        snprintf(rel, sizeof rel, "organism/robust-%s.txt", slug);
        assert_true(seed_file_contains(rel, "survived"));
        assert_true(count_events(id, "resumed") == 1);
        json_t *e = evolution(id, false);
        assert_true(json_is_null(json_object_get(e, "waiting")));
        json_decref(e);
        print_message("# outage (%s, %s, 3 s): %zu model requests; waited for the model %zu times\n", fmt_names[fmt],
                      mode, request_count(), count_events(id, "waiting"));
}

static void test_outage_resumes_openai(void **state) { outage_resumes(OPENAI, "503"); }
static void test_outage_resumes_anthropic(void **state) { outage_resumes(ANTHROPIC, "refuse"); }

/* An outage longer than evolution.model_wait_seconds: it fails, saying why. */
static void outage_fails(enum fmt fmt) {
        use_format(fmt);
        const char *slug = fmt == OPENAI ? "oai-down" : "ant-down";
        _cleanup_free_ char *plan = plan_step(slug), *script = NULL;
        assert_true(xasprintf(&script, "[%s, {\"outage\": {\"ms\": 600000}}]", plan) >= 0);
        load_script(script);
        g_cfg->evolution.model_wait_seconds = 2; /* read when the phase starts; the worker is idle now */
        _cleanup_free_ char *id = submit("Write a note while the provider is down");
        enum evo_state s = wait_final(id);
        g_cfg->evolution.model_wait_seconds = 900;
        assert_int_equal(s, EVO_FAILED);
        json_t *e = evolution(id, false);
        const char *err = json_string_value(json_object_get(e, "error"));
        if (!err || !strstr(err, "the model could not be reached for") ||
            !strstr(err, "evolution.model_wait_seconds") || !strstr(err, "503"))
                fail_msg("error: %s", err ? err : "(none)");
        print_message("# outage past the bound (%s): %zu model requests; failed: %s\n", fmt_names[fmt], request_count(),
                      err);
        json_decref(e);
        assert_true(count_events(id, "waiting") >= 2);
        load_script("[]"); /* the server comes back */
}

static void test_outage_fails_openai(void **state) { outage_fails(OPENAI); }
static void test_outage_fails_anthropic(void **state) { outage_fails(ANTHROPIC); }

/* A permanent refusal is not waited out: one request, and the fix named. */
static void unauthorized(enum fmt fmt, const char *fix) {
        use_format(fmt);
        load_script("[{\"http_error\": 401, \"body\": {\"error\": {\"message\": \"Incorrect API key provided\"}}}]");
        _cleanup_free_ char *id = submit("Write a note with a bad key");
        assert_int_equal(wait_final(id), EVO_FAILED);
        json_t *e = evolution(id, false);
        const char *err = json_string_value(json_object_get(e, "error"));
        if (!err || !strstr(err, "HTTP 401") || !strstr(err, fix) || !strstr(err, "(1 attempt)"))
                fail_msg("error: %s", err ? err : "(none)");
        print_message("# 401 (%s): %zu model request; failed: %s\n", fmt_names[fmt], request_count(), err);
        json_decref(e);
        assert_int_equal(request_count(), 1);
        assert_int_equal(count_events(id, "waiting"), 0);
}

static void test_401_openai(void **state) { unauthorized(OPENAI, "check the variable model.api_key_env names"); }
static void test_401_anthropic(void **state) {
        unauthorized(ANTHROPIC, "check ANTHROPIC_API_KEY (restart the Seed with -e ANTHROPIC_API_KEY");
}

/* Cancel works while it waits for the model. */
static void test_cancel_while_waiting(void **state) {
        use_format(OPENAI);
        _cleanup_free_ char *plan = plan_step("oai-cancel"), *script = NULL;
        assert_true(xasprintf(&script, "[%s, {\"outage\": {\"ms\": 600000, \"mode\": \"refuse\"}}]", plan) >= 0);
        load_script(script);
        _cleanup_free_ char *id = submit("Write a note and be cancelled");
        json_decref(wait_waiting(id));
        assert_int_equal(orch_cancel(g_orch, id), 0);
        assert_int_equal(wait_final(id), EVO_CANCELLED);
        print_message("# cancel while waiting (%s): %zu model requests\n", fmt_names[OPENAI], request_count());
        load_script("[]");
}

int main(void) {
        struct CMUnitTest tests[ARRAY_SIZE(scenarios) + 16];
        size_t n = 0;
        static char names[ARRAY_SIZE(scenarios)][96];
        for (size_t i = 0; i < ARRAY_SIZE(scenarios); i++) {
                snprintf(names[i], sizeof names[i], "%s: %s", fmt_names[scenarios[i].fmt], scenarios[i].name);
                tests[n++] = (struct CMUnitTest){.name = names[i], .test_func = test_class,
                                                 .initial_state = (void *)&scenarios[i]};
        }
        const struct CMUnitTest more[] = {
                cmocka_unit_test(test_mixed_openai),
                cmocka_unit_test(test_text_tool_calls),
                cmocka_unit_test(test_outage_resumes_openai),
                cmocka_unit_test(test_outage_fails_openai),
                cmocka_unit_test(test_401_openai),
                cmocka_unit_test(test_cancel_while_waiting),
                cmocka_unit_test(test_mixed_anthropic),
                cmocka_unit_test(test_outage_resumes_anthropic),
                cmocka_unit_test(test_outage_fails_anthropic),
                cmocka_unit_test(test_401_anthropic),
        };
        for (size_t i = 0; i < ARRAY_SIZE(more); i++)
                tests[n++] = more[i];
        return _cmocka_run_group_tests("robust", tests, n, setup, teardown);
}
