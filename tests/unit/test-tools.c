/* Unit tests for kernel/tools: schemas, paths, classification, decisions,
 * limits, every handler against a temp worktree, and `run` in a real bwrap
 * sandbox (skipped with a reason where user namespaces are unavailable). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "base/priv.h"
#include "chat/chat.h"
#include "evolution/orchestrator.h"
#include "fsx/fsx.h"
#include "preview/preview.h"
#include "repo/repo.h"
#include "tools/regex-guard.h"
#include "tools/schema.h"
#include "tools/tools.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

static char root[256];     /* temp dir */
static char seed[512];     /* the worktree */
static int root_fd = -1;
static char *const evolvable[] = {"organism/", "knowledge/", "skills/", NULL};

/* --- fakes --- */

struct fake_cb {
        int ask_calls;
        int ask_answer; /* 1 approve, 0 deny, <0 fail */
        char *ask_args;
        enum tool_level ask_level;
        char *ask_tool;
        int owner_calls;
};
static struct fake_cb fake;

static void fake_reset(void) {
        free(fake.ask_args);
        free(fake.ask_tool);
        fake = (struct fake_cb){.ask_answer = 1};
}

static int fake_ask(struct tool_ctx *ctx, const struct tool *t, const char *args_json, enum tool_level level,
                    char **ret_approval_id) {
        fake.ask_calls++;
        free(fake.ask_args);
        free(fake.ask_tool);
        fake.ask_args = strdup(args_json);
        fake.ask_tool = strdup(t->name);
        fake.ask_level = level;
        /* A new approval every time it is asked, never one reused. */
        if (fake.ask_answer == 1)
                (void)xasprintf(ret_approval_id, "apr_%016x", (unsigned)fake.ask_calls);
        return fake.ask_answer;
}

static const struct tool_hooks hooks = {.ask = fake_ask};

/* The tool sets agents are given: every evolution phase's and the chat's. */
static const struct {
        const char *name;
        const struct tool *const *set;
} sets[] = {
        {"evolution", orch_tool_set},
        {"chat", chat_tool_set},
};

/* The context of a phase gets its set, as the orchestrator and the chat give
 * it; no userdata, so the chat's and the orchestrator's own tools answer
 * "not available" (their callers are tested with them). */
static struct tool_ctx make_ctx(enum tool_phase phase) {
        return (struct tool_ctx){
                .set = phase == TOOL_PHASE_CHAT ? chat_tool_set : orch_tool_set,
                .phase = phase,
                .root_fd = root_fd,
                .root_path = seed,
                .evolvable = evolvable,
                .decisions = {[TOOL_SAFE] = CFG_ALLOW, [TOOL_REVIEW] = CFG_ALLOW, [TOOL_DANGEROUS] = CFG_ASK},
                .hooks = &hooks,
        };
}

/* --- fixture --- */

static void write_in(const char *rel, const char *content) {
        _cleanup_free_ char *p = NULL, *dir = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        dir = strdup(p);
        *strrchr(dir, '/') = '\0';
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static char *read_in(const char *rel) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        char *data = NULL;
        if (read_file(p, 1 << 24, &data, NULL) < 0)
                return NULL;
        return data;
}

static bool exists_in(const char *rel) {
        _cleanup_free_ char *p = NULL;
        assert_true(xasprintf(&p, "%s/%s", seed, rel) >= 0);
        struct stat st;
        return lstat(p, &st) == 0;
}

static int setup(void **state) {
        char tmpl[] = "/tmp/utest-tools.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        snprintf(root, sizeof root, "%s", tmpl);
        snprintf(seed, sizeof seed, "%s/seed", root);
        write_in("organism/server.js", "const port = process.env.PORT;\nconsole.log('hello');\nlisten(port);\n");
        write_in("organism/lib/util.js", "export function add(a, b) { return a + b; }\n");
        write_in("kernel/main.c", "int main(void) { return 0; }\n");
        write_in("knowledge/self.yaml", "name: test\n");
        write_in("skills/deploy/SKILL.md", "---\nname: deploy\n---\nHow to deploy.\n");
        write_in(".seed/secrets/x", "top-secret\n");
        write_in("README.md", "Hello seed\n");
        _cleanup_free_ char *link = NULL, *dlink = NULL;
        assert_true(xasprintf(&link, "%s/organism/passwd", seed) >= 0);
        assert_int_equal(symlink("/etc/passwd", link), 0);
        assert_true(xasprintf(&dlink, "%s/organism/etc", seed) >= 0);
        assert_int_equal(symlink("/etc", dlink), 0);
        assert_int_equal(fsx_open_root(seed, &root_fd), 0);
        fake_reset();
        return 0;
}

static int teardown(void **state) {
        close(root_fd);
        rm_rf(root);
        fake_reset();
        return 0;
}

/* Calls a tool; asserts tools_call succeeded; caller frees the result. */
static struct tool_result call(struct tool_ctx *ctx, const char *name, const char *args) {
        struct tool_result r = {0};
        assert_int_equal(tools_call(ctx, name, args, &r), 0);
        assert_non_null(r.output);
        return r;
}

static void assert_contains(const char *s, const char *needle) {
        if (!s || !strstr(s, needle))
                fail_msg("expected \"%s\" in \"%s\"", needle, s ? s : "(null)");
}

/* --- schema --- */

static const char test_schema[] =
        "{\"type\":\"object\",\"properties\":{"
        "\"name\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":5},"
        "\"slug\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9-]{1,40}$\"},"
        "\"n\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":10},"
        "\"x\":{\"type\":\"number\",\"maximum\":1.5},"
        "\"flag\":{\"type\":\"boolean\"},"
        "\"color\":{\"type\":\"string\",\"enum\":[\"red\",\"blue\"]},"
        "\"list\":{\"type\":\"array\",\"maxItems\":2,\"items\":{\"type\":\"string\",\"maxLength\":3}},"
        "\"map\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}},"
        "\"free\":{\"type\":\"object\"}},"
        "\"required\":[\"name\"],\"additionalProperties\":false}";

static void test_schema_validation(void **state) {
        static const struct {
                const char *value;
                const char *error; /* NULL: valid */
        } cases[] = {
                {"{\"name\":\"ab\"}", NULL},
                {"{\"name\":\"héllo\"}", NULL}, /* 5 characters, 6 bytes */
                {"{\"name\":\"ab\",\"slug\":\"a-b-1\",\"n\":10,\"x\":1.5,\"flag\":true,\"color\":\"red\","
                 "\"list\":[\"a\",\"bcd\"],\"map\":{\"k\":1},\"free\":{\"any\":[1,{}]}}",
                 NULL},
                {"{}", "$: missing required property 'name'"},
                {"{\"name\":\"ab\",\"zzz\":1}", "$: unknown property 'zzz'"},
                {"{\"name\":5}", "$.name: expected string, got integer"},
                {"{\"name\":\"a\"}", "$.name: shorter than 2 characters"},
                {"{\"name\":\"abcdef\"}", "$.name: longer than 5 characters"},
                {"{\"name\":\"ab\",\"slug\":\"Bad Slug\"}", "$.slug: does not match ^[a-z0-9-]{1,40}$"},
                {"{\"name\":\"ab\",\"slug\":\"\"}", "$.slug: does not match"},
                {"{\"name\":\"ab\",\"n\":0}", "$.n: must be at least 1"},
                {"{\"name\":\"ab\",\"n\":11}", "$.n: must be at most 10"},
                {"{\"name\":\"ab\",\"n\":1.5}", "$.n: expected integer, got number"},
                {"{\"name\":\"ab\",\"n\":\"3\"}", "$.n: expected integer, got string"},
                {"{\"name\":\"ab\",\"x\":2}", "$.x: must be at most 1.5"},
                {"{\"name\":\"ab\",\"flag\":\"yes\"}", "$.flag: expected boolean, got string"},
                {"{\"name\":\"ab\",\"color\":\"green\"}", "$.color: must be one of \"red\", \"blue\""},
                {"{\"name\":\"ab\",\"list\":[\"a\",\"b\",\"c\"]}", "$.list: at most 2 items allowed, got 3"},
                {"{\"name\":\"ab\",\"list\":[\"a\",7]}", "$.list[1]: expected string, got integer"},
                {"{\"name\":\"ab\",\"list\":[\"abcd\"]}", "$.list[0]: longer than 3 characters"},
                {"{\"name\":\"ab\",\"list\":\"a\"}", "$.list: expected array, got string"},
                {"{\"name\":\"ab\",\"map\":{\"k\":\"v\"}}", "$.map.k: expected integer, got string"},
                {"{\"name\":\"ab\",\"name2\":null}", "unknown property 'name2'"},
                {"[1]", "$: expected object, got array"},
                {"{\"name\":\"a\\u0000b\"}", "NUL"},
        };
        json_t *schema = json_loads(test_schema, 0, NULL);
        assert_non_null(schema);
        _cleanup_free_ char *why = NULL;
        assert_int_equal(tools_schema_check(schema, &why), 0);
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                json_t *v = json_loads(cases[i].value, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
                assert_non_null(v);
                char *err = NULL;
                int r = tools_schema_validate(schema, v, &err);
                if (!cases[i].error) {
                        if (r != 0)
                                fail_msg("case %zu: unexpected error %s", i, err);
                } else {
                        assert_int_equal(r, -EINVAL);
                        assert_contains(err, cases[i].error);
                }
                free(err);
                json_decref(v);
        }
        json_decref(schema);
}

/* A table entry is complete: a well-formed, closed object schema, a handler,
 * phases, a description. */
static void check_entry(const struct tool *t) {
        json_t *s = json_loads(t->schema, 0, NULL);
        if (!s)
                fail_msg("%s: schema does not parse", t->name);
        char *err = NULL;
        if (tools_schema_check(s, &err) != 0)
                fail_msg("%s: %s", t->name, err);
        assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
        assert_true(json_is_false(json_object_get(s, "additionalProperties")));
        assert_non_null(t->handler);
        assert_true(t->phases != 0);
        assert_true(t->description && strlen(t->description) > 10);
        /* Asked every time: only of a dangerous tool whose level is fixed,
         * or of one whose classifier decides which calls are dangerous
         * (call_api: a GET is safe, the call path asks every other), and
         * every tool SPEC §5 says is asked every time is marked so. */
        static const char *const asked_every_time[] = {"request_outbound_access", "change_data", "call_api",
                                                       "create_routine"};
        if (t->always_ask && !t->classify)
                assert_int_equal(t->level, TOOL_DANGEROUS);
        for (size_t i = 0; i < ARRAY_SIZE(asked_every_time); i++)
                if (streq(t->name, asked_every_time[i]) && !t->always_ask)
                        fail_msg("%s: SPEC §5 says it is asked every time, but always_ask is not set", t->name);
        /* A tool taking a repository path says so (it is normalised and
         * checked); http_request's and call_api's are URL paths. */
        if (json_object_get(json_object_get(s, "properties"), "path") && !streq(t->name, "http_request") &&
            !streq(t->name, "call_api"))
                assert_true(t->repo_path);
        json_decref(s);
}

static void test_schema_check(void **state) {
        static const char *const bad[] = {
                "{\"type\":\"object\",\"propertys\":{}}",              /* typo: unknown keyword */
                "{\"type\":\"obj\"}",                                   /* unknown type */
                "{\"properties\":{}}",                                  /* no type */
                "{\"type\":\"object\",\"required\":[\"a\"]}",          /* required undeclared */
                "{\"type\":\"string\",\"pattern\":\"(\"}",             /* bad regex */
                "{\"type\":\"string\",\"maxLength\":-1}",
                "{\"type\":\"array\",\"items\":{\"type\":\"nope\"}}",
                "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"format\":\"x\"}}}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_t *s = json_loads(bad[i], 0, NULL);
                assert_non_null(s);
                char *err = NULL;
                assert_int_equal(tools_schema_check(s, &err), -EINVAL);
                assert_non_null(err);
                free(err);
                json_decref(s);
        }
        /* Every schema of every table of every set is well formed and closed. */
        for (size_t k = 0; k < ARRAY_SIZE(sets); k++)
                for (const struct tool *const *tab = sets[k].set; *tab; tab++)
                        for (const struct tool *t = *tab; t->name; t++)
                                check_entry(t);
}

/* --- table and phases --- */

/* A tool of any set. */
static const struct tool *find(const char *name) {
        const struct tool *t = tools_find(orch_tool_set, name);
        return t ? t : tools_find(chat_tool_set, name);
}

static bool offered(enum tool_phase p, const char *name) {
        return tools_offered(find(name), p);
}

static void test_phases(void **state) {
        assert_null(find("nope"));
        assert_null(tools_find(orch_tool_set, "start_evolution"));
        assert_null(tools_find(chat_tool_set, "ask_owner"));
        assert_null(tools_find(chat_tool_set, "db_query"));
        assert_true(offered(TOOL_PHASE_PLAN, "read_file"));
        assert_true(offered(TOOL_PHASE_PLAN, "submit_plan"));
        assert_true(offered(TOOL_PHASE_PLAN, "ask_owner"));
        assert_false(offered(TOOL_PHASE_PLAN, "write_file"));
        assert_false(offered(TOOL_PHASE_PLAN, "run"));
        assert_false(offered(TOOL_PHASE_PLAN, "finish"));
        assert_true(offered(TOOL_PHASE_MUTATE, "write_file"));
        assert_true(offered(TOOL_PHASE_MUTATE, "run"));
        assert_true(offered(TOOL_PHASE_MUTATE, "db_query"));
        assert_true(offered(TOOL_PHASE_MUTATE, "finish"));
        assert_false(offered(TOOL_PHASE_MUTATE, "submit_plan"));
        assert_true(offered(TOOL_PHASE_REFLECT, "write_file"));
        assert_true(offered(TOOL_PHASE_REFLECT, "submit_reflection"));
        assert_false(offered(TOOL_PHASE_REFLECT, "run"));
        assert_true(offered(TOOL_PHASE_CHAT, "start_evolution"));
        assert_true(offered(TOOL_PHASE_CHAT, "list_evolutions"));
        assert_true(offered(TOOL_PHASE_CHAT, "search"));
        assert_false(offered(TOOL_PHASE_CHAT, "write_file"));

        struct model_tool_def *defs = NULL;
        size_t n = 0;
        assert_int_equal(tools_defs(orch_tool_set, TOOL_PHASE_PLAN, &defs, &n), 0);
        bool plan = false;
        for (size_t i = 0; i < n; i++) {
                assert_true(offered(TOOL_PHASE_PLAN, defs[i].name));
                plan = plan || streq(defs[i].name, "submit_plan");
        }
        assert_true(plan);
        free(defs);

        _cleanup_free_ char *t1 = tools_terminal_names(orch_tool_set, TOOL_PHASE_MUTATE),
                               *t2 = tools_terminal_names(chat_tool_set, TOOL_PHASE_CHAT);
        assert_string_equal(t1, "finish");
        assert_string_equal(t2, "");
}

/* --- paths and classification --- */

static void test_normalize(void **state) {
        static const struct {
                const char *in, *out;
                int err;
        } cases[] = {
                {"organism/a.js", "organism/a.js", 0},
                {"./organism//a.js/", "organism/a.js", 0},
                {".", ".", 0},
                {"../x", NULL, -EINVAL},
                {"organism/../kernel/x", NULL, -EINVAL},
                {"/etc/passwd", NULL, -EINVAL},
                {"", NULL, -EINVAL},
                {".git/config", NULL, -EPERM},
                {"organism/.git/hooks", NULL, -EPERM},
                {".seed/secrets/x", NULL, -EPERM},
                {"./.seed", NULL, -EPERM},
                {"organism/.seed", "organism/.seed", 0},
                {"a\nb", NULL, -EINVAL},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *out = NULL, *why = NULL;
                int r = tools_normalize_path(cases[i].in, &out, &why);
                if (r != cases[i].err)
                        fail_msg("case %zu (%s): got %d, want %d", i, cases[i].in, r, cases[i].err);
                if (r == 0)
                        assert_string_equal(out, cases[i].out);
                else
                        assert_non_null(why);
                free(out);
                free(why);
        }
        assert_true(tools_path_in("organism", evolvable));
        assert_true(tools_path_in("organism/x/y", evolvable));
        assert_true(tools_path_in("skills/a", evolvable));
        assert_false(tools_path_in("organismx/a", evolvable));
        assert_false(tools_path_in("kernel/main.c", evolvable));
        assert_false(tools_path_in("README.md", evolvable));
        assert_false(tools_path_in(".", evolvable));
}

static enum tool_level classify(const char *tool, const char *args) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        json_t *a = json_loads(args, 0, NULL);
        assert_non_null(a);
        enum tool_level l = _TOOL_LEVEL_MAX;
        assert_int_equal(tools_classify(&ctx, find(tool), a, &l), 0);
        json_decref(a);
        return l;
}

/* What is wrong with a set, or NULL: an entry without an explicit level or a
 * schema, or a name used twice across its tables. Caller frees. */
static char *set_problem(const struct tool *const *set) {
        char *why = NULL;
        for (const struct tool *const *tab = set; *tab; tab++)
                for (const struct tool *t = *tab; t->name; t++) {
                        if (t->level <= TOOL_LEVEL_UNSET || t->level >= _TOOL_LEVEL_MAX ||
                            streq(tools_level_name(t->level), "unknown"))
                                return xasprintf(&why, "%s: no explicit level", t->name) < 0 ? NULL : why;
                        if (!t->schema || !*t->schema)
                                return xasprintf(&why, "%s: no schema", t->name) < 0 ? NULL : why;
                        if (tools_find(set, t->name) != t)
                                return xasprintf(&why, "%s: named twice", t->name) < 0 ? NULL : why;
                }
        return NULL;
}

static const struct tool fine_tools[] = {
        {.name = "read_file", .level = TOOL_SAFE, .schema = "{}"},
        TOOL_TABLE_END,
};
static const struct tool no_level_tools[] = {
        {.name = "forgot", .schema = "{}"},
        TOOL_TABLE_END,
};
static const struct tool no_schema_tools[] = {
        {.name = "forgot", .level = TOOL_SAFE},
        TOOL_TABLE_END,
};

/* Fail closed by construction: every tool of every table of every set (the
 * evolution phases': kernel/tools', kernel/preview's and the orchestrator's
 * tables; the chat's: kernel/tools' and kernel/chat's) names its level
 * explicitly and has a schema, and no name is used twice across the tables
 * of a set; an entry without a level is refused, never treated as safe. */
static void test_every_tool_has_level_and_schema(void **state) {
        for (size_t k = 0; k < ARRAY_SIZE(sets); k++) {
                size_t n = 0, tables = 0;
                for (const struct tool *const *tab = sets[k].set; *tab; tab++, tables++)
                        for (const struct tool *t = *tab; t->name; t++)
                                n++;
                _cleanup_free_ char *why = set_problem(sets[k].set);
                if (why)
                        fail_msg("%s set: %s", sets[k].name, why);
                assert_true(tables >= 2);
                assert_true(n >= (streq(sets[k].name, "evolution") ? 20 : 12));
        }
        /* The check itself fails on a bad set. */
        const struct tool *const dup[] = {tools_table, fine_tools, NULL}, *const unset[] = {no_level_tools, NULL},
                                 *const unschema[] = {no_schema_tools, NULL};
        _cleanup_free_ char *w1 = set_problem(dup), *w2 = set_problem(unset), *w3 = set_problem(unschema);
        assert_non_null(w1);
        assert_contains(w1, "read_file: named twice");
        assert_non_null(w2);
        assert_contains(w2, "forgot: no explicit level");
        assert_non_null(w3);
        assert_contains(w3, "forgot: no schema");
}

static int classify_unset(const struct tool_ctx *ctx, const struct tool *t, json_t *args, enum tool_level *ret) {
        *ret = TOOL_LEVEL_UNSET;
        return 0;
}

static void test_unset_level_refused(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        ctx.decisions[TOOL_LEVEL_UNSET] = CFG_ALLOW; /* whatever sits there, it is never consulted */
        json_t *a = json_object();
        enum tool_level l = TOOL_SAFE;
        struct tool forgot = {.name = "forgot", .schema = "{}"};
        assert_int_equal(tools_classify(&ctx, &forgot, a, &l), -EINVAL);
        assert_int_equal(l, TOOL_SAFE); /* untouched */
        struct tool computes_none = {.name = "none", .level = TOOL_SAFE, .classify = classify_unset};
        assert_int_equal(tools_classify(&ctx, &computes_none, a, &l), -EINVAL);
        assert_int_equal(tools_decide(&ctx, TOOL_LEVEL_UNSET), CFG_DENY);
        assert_int_equal(tools_decide(&ctx, _TOOL_LEVEL_MAX), CFG_DENY);
        json_decref(a);
}

static void test_classify(void **state) {
        assert_int_equal(classify("write_file", "{\"path\":\"organism/x.js\",\"content\":\"\"}"), TOOL_REVIEW);
        assert_int_equal(classify("write_file", "{\"path\":\"./knowledge/notes.md\",\"content\":\"\"}"), TOOL_REVIEW);
        assert_int_equal(classify("write_file", "{\"path\":\"kernel/x.c\",\"content\":\"\"}"), TOOL_DANGEROUS);
        assert_int_equal(classify("write_file", "{\"path\":\"newroot.txt\",\"content\":\"\"}"), TOOL_DANGEROUS);
        assert_int_equal(classify("write_file", "{\"path\":\"organismx/a\",\"content\":\"\"}"), TOOL_DANGEROUS);
        /* git control files are the kernel's even inside an evolvable dir */
        assert_int_equal(classify("write_file", "{\"path\":\"organism/.gitattributes\",\"content\":\"\"}"),
                         TOOL_DANGEROUS);
        assert_int_equal(classify("edit_file", "{\"path\":\"skills/a/.gitmodules\",\"old_text\":\"a\",\"new_text\":\"b\"}"),
                         TOOL_DANGEROUS);
        assert_int_equal(classify("write_file", "{\"path\":\"organism/gitattributes.txt\",\"content\":\"\"}"),
                         TOOL_REVIEW);
        assert_int_equal(classify("edit_file", "{\"path\":\"seed.yaml\",\"old_text\":\"a\",\"new_text\":\"b\"}"),
                         TOOL_DANGEROUS);
        assert_int_equal(classify("edit_file", "{\"path\":\"skills/a/SKILL.md\",\"old_text\":\"a\",\"new_text\":\"b\"}"),
                         TOOL_REVIEW);
        assert_int_equal(classify("delete_path", "{\"path\":\"organism/lib\"}"), TOOL_REVIEW);
        assert_int_equal(classify("delete_path", "{\"path\":\"kernel\"}"), TOOL_DANGEROUS);
        assert_int_equal(classify("read_file", "{\"path\":\"kernel/main.c\"}"), TOOL_SAFE);
        assert_int_equal(classify("run", "{\"command\":\"ls\"}"), TOOL_REVIEW);
        assert_int_equal(classify("db_query", "{\"sql\":\"select 1\"}"), TOOL_REVIEW);
        assert_int_equal(classify("stop_app", "{}"), TOOL_SAFE);
        assert_int_equal(classify("submit_plan", "{}"), TOOL_SAFE);

        /* A path that escapes is refused before anything runs (fsx's check). */
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        struct tool_result r = call(&ctx, "delete_path", "{\"path\":\"../x\"}");
        assert_true(r.is_error);
        assert_false(r.classified);
        assert_contains(r.output, "'..'");
        tool_result_done(&r);
        r = call(&ctx, "write_file", "{\"path\":\".git/config\",\"content\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, ".git");
        tool_result_done(&r);
        r = call(&ctx, "write_file", "{\"path\":\".seed/secrets/x\",\"content\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, ".seed");
        tool_result_done(&r);
        r = call(&ctx, "read_file", "{\"path\":\".seed/secrets/x\"}");
        assert_true(r.is_error);
        assert_null(strstr(r.output, "top-secret"));
        tool_result_done(&r);
        assert_int_equal(fake.ask_calls, 0);
        _cleanup_free_ char *content = read_in(".seed/secrets/x");
        assert_string_equal(content, "top-secret\n");
}

/* --- decisions --- */

/* A tool asked every time: its handler sees the approval of its own call. */
static char *seen_approvals[4];
static int seen_n;
static int always_handler(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (seen_n < 4)
                seen_approvals[seen_n++] = ctx->approval_id ? strdup(ctx->approval_id) : NULL;
        return tool_result_printf(ret, false, "ran");
}
static int upper_check(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error) {
        const char *v = json_string_value(json_object_get(args, "v"));
        if (streq(v, "bad"))
                return errorf(-EINVAL, ret_error, "v: 'bad' is refused");
        return json_object_set_new(args, "v", json_string("NORMAL")) < 0 ? -ENOMEM : 0;
}
static const struct tool always_tools[] = {
        {
                .name = "always",
                .description = "a dangerous tool asked every time",
                .level = TOOL_DANGEROUS,
                .always_ask = true,
                .check = upper_check,
                .schema = "{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"string\"}},"
                          "\"additionalProperties\":false}",
                .handler = always_handler,
                .phases = TOOL_PHASE_CHAT,
        },
        TOOL_TABLE_END,
};

static void test_always_ask(void **state) {
        fake_reset();
        const struct tool *const set[] = {always_tools, NULL};
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_CHAT);
        ctx.set = set;
        /* Even where seed.yaml allows dangerous calls, each call is asked,
         * with the normalised arguments, and its handler gets that very
         * approval: a new one every time, never an earlier one. */
        ctx.decisions[TOOL_DANGEROUS] = CFG_ALLOW;
        seen_n = 0;
        for (int i = 1; i <= 2; i++) {
                struct tool_result r = call(&ctx, "always", "{\"v\":\"x\"}");
                assert_false(r.is_error);
                assert_int_equal(r.decision, CFG_ASK);
                assert_int_equal(fake.ask_calls, i);
                assert_string_equal(fake.ask_args, "{\"v\":\"NORMAL\"}");
                tool_result_done(&r);
        }
        assert_int_equal(seen_n, 2);
        assert_non_null(seen_approvals[0]);
        assert_non_null(seen_approvals[1]);
        assert_string_not_equal(seen_approvals[0], seen_approvals[1]);
        assert_null(ctx.approval_id); /* only while its handler runs */
        /* Denied: the handler never runs. */
        fake.ask_answer = 0;
        struct tool_result r = call(&ctx, "always", "{\"v\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "denied by the owner");
        assert_int_equal(seen_n, 2);
        tool_result_done(&r);
        /* Its own check refuses before anything is asked. */
        int asked = fake.ask_calls;
        r = call(&ctx, "always", "{\"v\":\"bad\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "always: v: 'bad' is refused");
        assert_int_equal(fake.ask_calls, asked);
        tool_result_done(&r);
        /* A policy of deny still denies, without asking. */
        ctx.decisions[TOOL_DANGEROUS] = CFG_DENY;
        fake.ask_answer = 1;
        r = call(&ctx, "always", "{\"v\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "denied by the owner's policy");
        assert_int_equal(fake.ask_calls, asked);
        tool_result_done(&r);
        /* The real request_outbound_access is checked before it is asked:
         * without outbound access here, nothing reaches the owner. */
        ctx = make_ctx(TOOL_PHASE_CHAT);
        r = call(&ctx, "request_outbound_access", "{\"hosts\":[\"api.example.com\"],\"for\":\"organism\",\"reason\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "cannot be asked for here");
        assert_int_equal(fake.ask_calls, asked);
        tool_result_done(&r);
        for (int i = 0; i < seen_n; i++)
                free(seen_approvals[i]);
}

/* call_api (kernel/live): a GET is safe and decided as usual; every other
 * method is dangerous and asked every time, whatever the policy; a
 * dangerous one over 16 KB is refused before anyone is asked. Without the
 * live app here, an approved call answers "not available". */
static void test_call_api_levels(void **state) {
        fake_reset();
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_CHAT);
        ctx.decisions[TOOL_DANGEROUS] = CFG_ALLOW;
        struct tool_result r = call(&ctx, "call_api", "{\"method\":\"GET\",\"path\":\"/items\"}");
        assert_int_equal(r.level, TOOL_SAFE);
        assert_int_equal(r.decision, CFG_ALLOW);
        assert_int_equal(fake.ask_calls, 0);
        assert_contains(r.output, "call_api is not available here");
        tool_result_done(&r);
        r = call(&ctx, "call_api", "{\"method\":\"POST\",\"path\":\"/items\",\"body\":\"{}\"}");
        assert_int_equal(r.level, TOOL_DANGEROUS);
        assert_int_equal(r.decision, CFG_ASK);
        assert_int_equal(fake.ask_calls, 1);
        assert_string_equal(fake.ask_tool, "call_api");
        assert_string_equal(fake.ask_args, "{\"method\":\"POST\",\"path\":\"/items\",\"body\":\"{}\"}");
        tool_result_done(&r);
        /* A GET carries no body: refused before it is classified or asked. */
        r = call(&ctx, "call_api", "{\"method\":\"GET\",\"path\":\"/x\",\"body\":\"a\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "a GET has no body");
        assert_int_equal(fake.ask_calls, 1);
        tool_result_done(&r);
        /* change_data: asked every time; 17 KB is refused unasked. */
        r = call(&ctx, "change_data", "{\"sql\":\"DELETE FROM t\"}");
        assert_int_equal(r.decision, CFG_ASK);
        assert_int_equal(fake.ask_calls, 2);
        tool_result_done(&r);
        char *big = malloc(17 * 1024 + 64);
        assert_non_null(big);
        int n = sprintf(big, "{\"sql\":\"UPDATE t SET v = '");
        memset(big + n, 'x', 17 * 1024);
        strcpy(big + n + 17 * 1024, "'\"}");
        r = call(&ctx, "change_data", big);
        assert_true(r.is_error);
        assert_contains(r.output, "too large for the owner to review");
        assert_int_equal(fake.ask_calls, 2);
        tool_result_done(&r);
        free(big);
}

static void test_decisions(void **state) {
        fake_reset();
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        /* review → allow: runs without asking. */
        struct tool_result r = call(&ctx, "write_file", "{\"path\":\"organism/new.txt\",\"content\":\"one\"}");
        assert_false(r.is_error);
        assert_true(r.classified);
        assert_int_equal(r.level, TOOL_REVIEW);
        assert_int_equal(r.decision, CFG_ALLOW);
        assert_int_equal(fake.ask_calls, 0);
        tool_result_done(&r);
        _cleanup_free_ char *c1 = read_in("organism/new.txt");
        assert_string_equal(c1, "one");

        /* dangerous → ask → approved: the owner saw exactly this call. */
        fake.ask_answer = 1;
        r = call(&ctx, "write_file", "{\"path\":\"kernel/new.c\",\"content\":\"approved\"}");
        assert_false(r.is_error);
        assert_int_equal(r.decision, CFG_ASK);
        assert_int_equal(fake.ask_calls, 1);
        assert_string_equal(fake.ask_tool, "write_file");
        assert_int_equal(fake.ask_level, TOOL_DANGEROUS);
        assert_string_equal(fake.ask_args, "{\"path\":\"kernel/new.c\",\"content\":\"approved\"}");
        tool_result_done(&r);
        _cleanup_free_ char *c2 = read_in("kernel/new.c");
        assert_string_equal(c2, "approved");

        /* The owner sees, and approves, the normalised path that is acted on. */
        r = call(&ctx, "write_file", "{\"path\":\"./kernel//n.c/\",\"content\":\"n\"}");
        assert_false(r.is_error);
        assert_string_equal(fake.ask_args, "{\"path\":\"kernel/n.c\",\"content\":\"n\"}");
        assert_string_equal(r.args, fake.ask_args);
        tool_result_done(&r);
        assert_true(exists_in("kernel/n.c"));
        fake.ask_calls--;

        /* ask → denied: nothing written. */
        fake.ask_answer = 0;
        r = call(&ctx, "write_file", "{\"path\":\"kernel/denied.c\",\"content\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "denied by the owner");
        assert_int_equal(fake.ask_calls, 2);
        tool_result_done(&r);
        assert_false(exists_in("kernel/denied.c"));

        /* ask fails (e.g. the evolution was cancelled): the caller is told, nothing runs. */
        fake.ask_answer = -ECANCELED;
        struct tool_result rr = {0};
        assert_int_equal(tools_call(&ctx, "write_file", "{\"path\":\"kernel/c.c\",\"content\":\"x\"}", &rr),
                         -ECANCELED);
        assert_null(rr.output);
        assert_false(exists_in("kernel/c.c"));

        /* deny by policy. */
        ctx.decisions[TOOL_REVIEW] = CFG_DENY;
        r = call(&ctx, "write_file", "{\"path\":\"organism/denied.txt\",\"content\":\"x\"}");
        assert_true(r.is_error);
        assert_string_equal(r.output, "denied by the owner's policy (review calls are denied)");
        tool_result_done(&r);
        assert_false(exists_in("organism/denied.txt"));

        /* ask with no one to ask: denied. */
        ctx.decisions[TOOL_REVIEW] = CFG_ASK;
        ctx.hooks = NULL;
        r = call(&ctx, "delete_path", "{\"path\":\"organism/new.txt\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "approval");
        tool_result_done(&r);
        assert_true(exists_in("organism/new.txt"));

        /* The permissions come from seed.yaml. */
        struct cfg *c = NULL;
        assert_int_equal(cfg_new_default(&c), 0);
        tools_ctx_set_permissions(&ctx, c);
        assert_int_equal(tools_decide(&ctx, TOOL_SAFE), CFG_ALLOW);
        assert_int_equal(tools_decide(&ctx, TOOL_REVIEW), CFG_ALLOW);
        assert_int_equal(tools_decide(&ctx, TOOL_DANGEROUS), CFG_ASK);
        assert_int_equal(tools_decide(&ctx, (enum tool_level)7), CFG_DENY);
        cfg_free(c);
        fake_reset();
}

static char *json_with_content(const char *path, size_t n) {
        char *big = malloc(n + 1);
        memset(big, 'a', n);
        big[n] = '\0';
        json_t *o = json_pack("{s:s, s:s}", "path", path, "content", big);
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        free(big);
        return s;
}

static void test_dangerous_too_large(void **state) {
        fake_reset();
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        _cleanup_free_ char *big = json_with_content("kernel/big.c", 17 * 1024);
        struct tool_result r = call(&ctx, "write_file", big);
        assert_true(r.is_error);
        assert_contains(r.output, "refused");
        assert_contains(r.output, "16384");
        assert_int_equal(fake.ask_calls, 0); /* never even shown */
        tool_result_done(&r);
        assert_false(exists_in("kernel/big.c"));
        /* Just under the limit is asked. */
        _cleanup_free_ char *small = json_with_content("kernel/small.c", 16 * 1024 - 64);
        r = call(&ctx, "write_file", small);
        assert_false(r.is_error);
        assert_int_equal(fake.ask_calls, 1);
        tool_result_done(&r);
        /* The same size inside organism/ (review) is fine. */
        _cleanup_free_ char *ok = json_with_content("organism/big.txt", 17 * 1024);
        r = call(&ctx, "write_file", ok);
        assert_false(r.is_error);
        tool_result_done(&r);
        assert_true(exists_in("organism/big.txt"));
        fake_reset();
}

/* --- output cap --- */

static void test_output_cap(void **state) {
        /* Short and valid: unchanged. */
        _cleanup_free_ char *s1 = tools_cap_output("héllo\n", 7, 0);
        assert_string_equal(s1, "héllo\n");
        /* Invalid UTF-8 and NUL become U+FFFD. */
        _cleanup_free_ char *s2 = tools_cap_output("a\xff" "b\0c\xc3", 6, 0);
        assert_string_equal(s2, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD");
        /* Surrogates and overlong forms are invalid too. */
        _cleanup_free_ char *s3 = tools_cap_output("\xed\xa0\x80\xc0\xaf", 5, 0);
        assert_null(strstr(s3, "\xed\xa0"));
        json_t *j = json_string(s3);
        assert_non_null(j);
        json_decref(j);

        /* Long: head + marker + tail within the cap. */
        size_t n = 50000;
        char *big = malloc(n);
        for (size_t i = 0; i < n; i++)
                big[i] = (char)('a' + i % 26);
        memcpy(big, "HEAD", 4);
        memcpy(big + n - 4, "TAIL", 4);
        _cleanup_free_ char *c = tools_cap_output(big, n, 0);
        free(big);
        assert_true(strlen(c) <= TOOLS_OUTPUT_CAP + 200);
        assert_true(strlen(c) >= TOOLS_OUTPUT_CAP);
        assert_true(startswith(c, "HEAD"));
        assert_true(endswith(c, "TAIL"));
        assert_contains(c, "30000 bytes omitted");

        /* Multi-byte characters are never cut. */
        size_t m = 30000;
        char *u = malloc(m * 2);
        for (size_t i = 0; i < m; i++)
                memcpy(u + 2 * i, "é", 2);
        _cleanup_free_ char *cu = tools_cap_output(u, m * 2, 1001);
        free(u);
        j = json_string(cu);
        assert_non_null(j); /* valid UTF-8 */
        json_decref(j);

        /* Through a tool: a long file is capped. */
        char *lines = malloc(60001);
        memset(lines, 'x', 60000);
        lines[60000] = '\0';
        for (size_t i = 99; i < 60000; i += 100)
                lines[i] = '\n';
        write_in("organism/long.txt", lines);
        free(lines);
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "read_file", "{\"path\":\"organism/long.txt\"}");
        assert_false(r.is_error);
        assert_true(strlen(r.output) < TOOLS_OUTPUT_CAP + 200);
        assert_contains(r.output, "omitted");
        tool_result_done(&r);
        ctx.output_cap = 100;
        r = call(&ctx, "read_file", "{\"path\":\"organism/long.txt\"}");
        assert_true(strlen(r.output) < 300);
        tool_result_done(&r);
}

/* --- malformed calls --- */

static void test_malformed(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "no_such_tool", "{}");
        assert_true(r.is_error && r.malformed);
        assert_contains(r.output, "unknown tool 'no_such_tool'");
        assert_contains(r.output, "submit_plan");
        tool_result_done(&r);

        r = call(&ctx, "write_file", "{\"path\":\"organism/x\",\"content\":\"x\"}");
        assert_true(r.is_error && r.malformed);
        assert_contains(r.output, "does not offer");
        tool_result_done(&r);
        assert_false(exists_in("organism/x"));

        r = call(&ctx, "read_file", "{\"path\": \"organism/server.js\"");
        assert_true(r.is_error && r.malformed);
        assert_contains(r.output, "not valid JSON");
        tool_result_done(&r);

        r = call(&ctx, "read_file", "[\"organism/server.js\"]");
        assert_true(r.is_error && r.malformed);
        assert_contains(r.output, "must be a JSON object");
        tool_result_done(&r);

        r = call(&ctx, "read_file", "{\"path\":\"a\",\"path\":\"b\"}");
        assert_true(r.is_error && r.malformed);
        tool_result_done(&r);

        r = call(&ctx, "read_file", "{\"file\":\"organism/server.js\"}");
        assert_true(r.is_error && r.malformed);
        assert_contains(r.output, "invalid arguments for read_file: $: missing required property 'path'");
        tool_result_done(&r);

        /* Empty arguments are an empty object (models send "" for no-argument tools). */
        ctx.phase = TOOL_PHASE_CHAT;
        ctx.set = chat_tool_set;
        r = call(&ctx, "list_evolutions", "");
        assert_false(r.malformed);
        assert_true(r.classified); /* its handler ran (and, without a chat, says so) */
        assert_contains(r.output, "not available in this phase");
        tool_result_done(&r);
        r = call(&ctx, "list_evolutions", NULL);
        assert_false(r.malformed);
        assert_true(r.classified);
        tool_result_done(&r);
        ctx.set = orch_tool_set;

        /* A good call is not malformed. */
        r = call(&ctx, "read_file", "{\"path\":\"README.md\"}");
        assert_false(r.malformed);
        assert_string_equal(r.output, "Hello seed\n");
        tool_result_done(&r);
}

/* --- file handlers --- */

static void test_read_file(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "read_file", "{\"path\":\"organism/server.js\"}");
        assert_false(r.is_error);
        assert_string_equal(r.output, "const port = process.env.PORT;\nconsole.log('hello');\nlisten(port);\n");
        tool_result_done(&r);

        r = call(&ctx, "read_file", "{\"path\":\"organism/server.js\",\"start_line\":2,\"max_lines\":1}");
        assert_false(r.is_error);
        assert_string_equal(r.output, "[lines 2-2 of 3]\nconsole.log('hello');\n");
        tool_result_done(&r);

        r = call(&ctx, "read_file", "{\"path\":\"organism/server.js\",\"start_line\":9}");
        assert_true(r.is_error);
        assert_contains(r.output, "has 3 lines");
        tool_result_done(&r);

        r = call(&ctx, "read_file", "{\"path\":\"organism/missing.js\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "read_file:");
        tool_result_done(&r);

        /* Symlinks are refused, final or intermediate: nothing of /etc leaks. */
        r = call(&ctx, "read_file", "{\"path\":\"organism/passwd\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "symlink");
        assert_null(strstr(r.output, "root:"));
        tool_result_done(&r);
        r = call(&ctx, "read_file", "{\"path\":\"organism/etc/passwd\"}");
        assert_true(r.is_error);
        assert_null(strstr(r.output, "root:"));
        tool_result_done(&r);

        r = call(&ctx, "read_file", "{\"path\":\"organism\"}");
        assert_true(r.is_error);
        tool_result_done(&r);

        _cleanup_free_ char *bin = NULL;
        assert_true(xasprintf(&bin, "%s/organism/bin.dat", seed) >= 0);
        assert_int_equal(write_file_atomic(bin, "ab\0cd", 5, 0644), 0);
        r = call(&ctx, "read_file", "{\"path\":\"organism/bin.dat\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "binary");
        tool_result_done(&r);

        r = call(&ctx, "read_skill", "{\"name\":\"deploy\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "How to deploy.");
        tool_result_done(&r);
        r = call(&ctx, "read_skill", "{\"name\":\"nope\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "no skill 'nope'");
        tool_result_done(&r);
        r = call(&ctx, "read_skill", "{\"name\":\"../kernel\"}");
        assert_true(r.is_error && r.malformed);
        tool_result_done(&r);
}

static void test_list_dir(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "list_dir", "{}");
        assert_false(r.is_error);
        assert_contains(r.output, "organism/\n");
        assert_contains(r.output, "kernel/\n");
        assert_contains(r.output, "README.md  (11 bytes)\n");
        assert_null(strstr(r.output, ".seed")); /* hidden */
        assert_null(strstr(r.output, "server.js")); /* depth 1 */
        tool_result_done(&r);

        r = call(&ctx, "list_dir", "{\"path\":\"organism\",\"depth\":2}");
        assert_false(r.is_error);
        assert_contains(r.output, "server.js  (");
        assert_contains(r.output, "lib/\n");
        assert_contains(r.output, "lib/util.js  (");
        assert_contains(r.output, "passwd@\n");
        assert_contains(r.output, "etc@\n");
        assert_null(strstr(r.output, "hosts")); /* the link to /etc is not entered */
        tool_result_done(&r);

        r = call(&ctx, "list_dir", "{\"path\":\"organism/etc\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "list_dir", "{\"path\":\"nope\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "list_dir", "{\"depth\":9}");
        assert_true(r.is_error && r.malformed);
        tool_result_done(&r);
}

static void test_search(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "search", "{\"pattern\":\"port\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "organism/server.js:1: const port = process.env.PORT;");
        assert_contains(r.output, "organism/server.js:3: listen(port);");
        assert_null(strstr(r.output, "top-secret"));
        tool_result_done(&r);

        r = call(&ctx, "search", "{\"pattern\":\"top-secret\"}");
        assert_false(r.is_error);
        assert_string_equal(r.output, "no matches");
        tool_result_done(&r);

        r = call(&ctx, "search", "{\"pattern\":\"^export .*add\",\"regex\":true}");
        assert_contains(r.output, "organism/lib/util.js:1:");
        tool_result_done(&r);

        r = call(&ctx, "search", "{\"pattern\":\"HELLO\",\"ignore_case\":true,\"path\":\"organism\"}");
        assert_contains(r.output, "organism/server.js:2:");
        assert_null(strstr(r.output, "README"));
        tool_result_done(&r);

        r = call(&ctx, "search", "{\"pattern\":\"o\",\"max_results\":2}");
        assert_contains(r.output, "[stopped at 2 results]");
        tool_result_done(&r);

        r = call(&ctx, "search", "{\"pattern\":\"(\",\"regex\":true}");
        assert_true(r.is_error);
        assert_contains(r.output, "invalid regular expression");
        tool_result_done(&r);

        /* Patterns whose compiling alone would take the kernel's memory
         * (glibc copies each repetition: a+++…, nested counts) are refused
         * before regcomp, as are back-references (found by
         * fuzz-tool-schema: "a" and 30 '+' ran out of 2 GB). */
        const char *costly[] = {"{\"pattern\":\"a++++++++++++++++++++++++++++++\",\"regex\":true}",
                                "{\"pattern\":\"((a{255}){255}){255}\",\"regex\":true}",
                                "{\"pattern\":\"(x*)*\\\\1\",\"regex\":true}"};
        for (size_t i = 0; i < ARRAY_SIZE(costly); i++) {
                r = call(&ctx, "search", costly[i]);
                assert_true(r.is_error);
                assert_contains(r.output, "invalid regular expression");
                tool_result_done(&r);
        }

        /* Links are not followed: /etc/passwd is never searched. */
        r = call(&ctx, "search", "{\"pattern\":\"root:\"}");
        assert_string_equal(r.output, "no matches");
        tool_result_done(&r);
}

static void test_regex_cost(void **state) {
        const char *why = NULL;
        const char *fine[] = {"^export .*add", "[a-z]+_[0-9]{2,4}", "(foo|bar)+baz?", "[]a]*\\+x{3}", "a{100}",
                              "x{0,}", "[[:alpha:]]+", "\\(\\)*", "(a(b(c)*)*)*"};
        for (size_t i = 0; i < ARRAY_SIZE(fine); i++) {
                why = NULL;
                if (tools_regex_cost(fine[i], &why) < 0)
                        fail_msg("'%s' refused: %s", fine[i], why);
        }
        assert_int_equal(tools_regex_cost("a", &why), 1);
        assert_int_equal(tools_regex_cost("a{10}", &why), 10);
        assert_int_equal(tools_regex_cost("(ab){10}", &why), 30);
        const char *bad[] = {"a++", "a*+", "a{2}{3}", "a?*", "(a{200}){200}", "((a{100}){100}){100}", "(a)\\1",
                             "x{20001}"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                why = NULL;
                if (tools_regex_cost(bad[i], &why) != -EINVAL || !why)
                        fail_msg("'%s' accepted", bad[i]);
        }
        char deep[TOOLS_REGEX_DEPTH_MAX + 2];
        memset(deep, '(', sizeof deep - 1);
        deep[sizeof deep - 1] = 0;
        assert_int_equal(tools_regex_cost(deep, &why), -EINVAL);
        /* A schema's pattern goes through the same check. */
        json_t *schema = json_loads("{\"type\":\"string\",\"pattern\":\"]++++++++++++++++++++++++++++++1$\"}", 0, NULL);
        char *err = NULL;
        assert_int_equal(tools_schema_check(schema, &err), -EINVAL);
        assert_non_null(strstr(err, "stacked repetitions"));
        free(err);
        json_decref(schema);
}

/* The chat reads only the committed tree: an untracked .env in the Seed
 * folder, or an untracked file next to tracked ones, is never shown. */
static void test_tracked_only(void **state) {
        write_in(".env", "OPENAI_API_KEY=sk-canary\n");
        write_in("organism/notes.txt", "port secrets\n");
        char *tracked[] = {"README.md", "organism/lib/util.js", "organism/server.js", "skills/deploy/SKILL.md", NULL};
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_CHAT);
        ctx.tracked = tracked;
        struct tool_result r = call(&ctx, "read_file", "{\"path\":\".env\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "not part of the Seed's committed tree");
        assert_null(strstr(r.output, "canary"));
        tool_result_done(&r);
        r = call(&ctx, "read_file", "{\"path\":\"organism/notes.txt\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "read_file", "{\"path\":\"organism/server.js\"}");
        assert_false(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "read_skill", "{\"name\":\"deploy\"}");
        assert_false(r.is_error);
        tool_result_done(&r);

        r = call(&ctx, "list_dir", "{\"depth\":3}");
        assert_false(r.is_error);
        assert_contains(r.output, "README.md  (");
        assert_contains(r.output, "organism/lib/util.js  (");
        assert_null(strstr(r.output, ".env"));
        assert_null(strstr(r.output, "notes.txt"));
        assert_null(strstr(r.output, "kernel/")); /* nothing committed below it here */
        assert_null(strstr(r.output, "passwd"));
        tool_result_done(&r);
        r = call(&ctx, "list_dir", "{\"path\":\"kernel\"}");
        assert_true(r.is_error);
        tool_result_done(&r);

        r = call(&ctx, "search", "{\"pattern\":\"port\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "organism/server.js:1:");
        assert_null(strstr(r.output, "notes.txt"));
        tool_result_done(&r);
        r = call(&ctx, "search", "{\"pattern\":\"canary\",\"path\":\".env\"}");
        assert_true(r.is_error);
        assert_null(strstr(r.output, "sk-canary"));
        tool_result_done(&r);
}

static void test_write_edit_delete(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        struct tool_result r = call(&ctx, "write_file", "{\"path\":\"organism/deep/new/file.txt\",\"content\":\"a\\nb\\n\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "created organism/deep/new/file.txt");
        tool_result_done(&r);
        _cleanup_free_ char *c1 = read_in("organism/deep/new/file.txt");
        assert_string_equal(c1, "a\nb\n");
        r = call(&ctx, "write_file", "{\"path\":\"organism/deep/new/file.txt\",\"content\":\"c\"}");
        assert_contains(r.output, "replaced");
        tool_result_done(&r);

        /* Writing through a symlink is refused; the target is untouched. */
        r = call(&ctx, "write_file", "{\"path\":\"organism/passwd\",\"content\":\"pwned\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "write_file", "{\"path\":\"organism/etc/x\",\"content\":\"pwned\"}");
        assert_true(r.is_error);
        tool_result_done(&r);

        /* edit_file: exactly one match. */
        r = call(&ctx, "edit_file", "{\"path\":\"organism/server.js\",\"old_text\":\"console.log('hello');\","
                                   "\"new_text\":\"console.log('hi');\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "line 2");
        tool_result_done(&r);
        _cleanup_free_ char *c2 = read_in("organism/server.js");
        assert_string_equal(c2, "const port = process.env.PORT;\nconsole.log('hi');\nlisten(port);\n");

        r = call(&ctx, "edit_file", "{\"path\":\"organism/server.js\",\"old_text\":\"nothing like this\",\"new_text\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "not found");
        tool_result_done(&r);
        r = call(&ctx, "edit_file", "{\"path\":\"organism/server.js\",\"old_text\":\"port\",\"new_text\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "matches 2 places");
        tool_result_done(&r);
        _cleanup_free_ char *c3 = read_in("organism/server.js");
        assert_string_equal(c2, c3); /* unchanged by the failures */
        r = call(&ctx, "edit_file", "{\"path\":\"organism/server.js\",\"old_text\":\"\",\"new_text\":\"x\"}");
        assert_true(r.malformed);
        tool_result_done(&r);
        r = call(&ctx, "edit_file", "{\"path\":\"organism/passwd\",\"old_text\":\"root\",\"new_text\":\"x\"}");
        assert_true(r.is_error);
        tool_result_done(&r);

        /* delete_path: a file, a tree, a link (never its target), a missing path. */
        r = call(&ctx, "delete_path", "{\"path\":\"organism/deep\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "deleted dir organism/deep");
        tool_result_done(&r);
        assert_false(exists_in("organism/deep"));
        r = call(&ctx, "delete_path", "{\"path\":\"organism/deep\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "delete_path", "{\"path\":\"organism/etc\"}");
        assert_false(r.is_error);
        tool_result_done(&r);
        assert_false(exists_in("organism/etc"));
        assert_true(path_exists("/etc/passwd"));
        r = call(&ctx, "delete_path", "{\"path\":\".\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
}

static void test_reflect_limits(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_REFLECT);
        struct tool_result r = call(&ctx, "write_file", "{\"path\":\"organism/x.txt\",\"content\":\"x\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "only knowledge/ and skills/");
        tool_result_done(&r);
        assert_false(exists_in("organism/x.txt"));
        r = call(&ctx, "write_file", "{\"path\":\"skills/testing/SKILL.md\",\"content\":\"---\\nname: testing\\n---\\n\"}");
        assert_false(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "edit_file", "{\"path\":\"knowledge/self.yaml\",\"old_text\":\"test\",\"new_text\":\"tasks\"}");
        assert_false(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "delete_path", "{\"path\":\"organism/server.js\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        assert_true(exists_in("organism/server.js"));
        r = call(&ctx, "run", "{\"command\":\"true\"}");
        assert_true(r.malformed);
        tool_result_done(&r);
        r = call(&ctx, "submit_reflection", "{\"notes\":\"learned things\"}");
        assert_true(r.terminal);
        assert_string_equal(r.args, "{\"notes\":\"learned things\"}");
        tool_result_done(&r);
}

/* --- terminal, owner, chat and app tools --- */

static void test_terminal_tools(void **state) {
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "submit_plan",
                                    "{\"title\":\"Todo app\",\"scope\":\"todo-app\",\"summary\":\"s\","
                                    "\"steps\":[\"one\",\"two\"],\"risks\":[]}");
        assert_false(r.is_error);
        assert_true(r.terminal);
        assert_contains(r.args, "\"scope\":\"todo-app\"");
        assert_contains(r.output, "Todo app");
        tool_result_done(&r);

        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"Todo App!\",\"summary\":\"s\",\"steps\":[\"x\"]}");
        assert_true(r.is_error);
        assert_false(r.terminal);
        assert_contains(r.output, "$.scope: does not match");
        tool_result_done(&r);
        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"x\",\"summary\":\"s\",\"steps\":[]}");
        assert_true(r.is_error);
        assert_contains(r.output, "$.steps: needs at least 1 items");
        tool_result_done(&r);

        ctx.phase = TOOL_PHASE_MUTATE;
        r = call(&ctx, "finish", "{\"summary\":\"done\"}");
        assert_true(r.terminal);
        tool_result_done(&r);
        r = call(&ctx, "finish", "{}");
        assert_false(r.terminal);
        assert_true(r.malformed);
        tool_result_done(&r);
}

/* ask_owner is the orchestrator's (its handler, its limit of 3 per
 * evolution and the question flow are tested through the orchestrator): here
 * it is an entry of the evolution's set like any other, validated and
 * classified, and without an evolution run in the context not available. */
static void test_ask_owner(void **state) {
        fake_reset();
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_PLAN);
        struct tool_result r = call(&ctx, "ask_owner", "{\"question\":\"?\"}");
        assert_false(r.malformed);
        assert_true(r.classified);
        assert_int_equal(r.level, TOOL_SAFE);
        assert_true(r.is_error);
        assert_contains(r.output, "not available");
        tool_result_done(&r);
        r = call(&ctx, "ask_owner", "{\"question\":\"\"}");
        assert_true(r.malformed);
        tool_result_done(&r);
        ctx.phase = TOOL_PHASE_MUTATE;
        r = call(&ctx, "ask_owner", "{\"question\":\"?\"}");
        assert_true(r.malformed);
        tool_result_done(&r);
        fake_reset();
}

static void test_chat_and_app_tools(void **state) {
        fake_reset();
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_CHAT);
        struct tool_result r = call(&ctx, "start_evolution", "{\"intent\":\"Become a todo app\"}");
        assert_false(r.malformed);
        assert_true(r.classified);
        assert_true(r.is_error); /* no chat run in the context */
        assert_contains(r.output, "not available in this phase");
        tool_result_done(&r);
        r = call(&ctx, "start_evolution", "{\"intent\":\"\"}");
        assert_true(r.malformed);
        tool_result_done(&r);

        /* The app and database tools are entries of kernel/preview's table,
         * in the evolution's set, like every other: validated against their schema, classified by their level,
         * then their handler (kernel/preview) runs. Without a preview in the
         * context they are not available. */
        static const struct {
                const char *name, *args;
                enum tool_level level;
                const char *with_preview; /* what the handler says with an idle preview and no database */
        } app[] = {
                {"start_app", "{}", TOOL_REVIEW, "no scratch database"},
                {"stop_app", "{}", TOOL_SAFE, "no app is running"},
                {"http_request", "{\"method\":\"GET\",\"path\":\"/healthz\",\"headers\":{\"Accept\":\"*/*\"}}",
                 TOOL_SAFE, "no app is running"},
                {"app_logs", "{\"lines\":10}", TOOL_SAFE, "no log yet"},
                {"migrate", "{}", TOOL_REVIEW, "this evolution has none"},
                {"db_query", "{\"sql\":\"select 1\"}", TOOL_REVIEW, "this evolution has none"},
                {"db_schema", "{}", TOOL_SAFE, "this evolution has none"},
        };
        ctx.phase = TOOL_PHASE_MUTATE;
        ctx.set = orch_tool_set;
        for (size_t i = 0; i < ARRAY_SIZE(app); i++) {
                r = call(&ctx, app[i].name, app[i].args);
                assert_false(r.malformed);
                assert_true(r.classified);
                assert_int_equal(r.level, app[i].level);
                assert_true(r.is_error);
                assert_contains(r.output, "not available in this phase");
                tool_result_done(&r);
        }
        r = call(&ctx, "http_request", "{\"method\":\"TRACE\",\"path\":\"/\"}");
        assert_true(r.malformed);
        tool_result_done(&r);
        r = call(&ctx, "http_request", "{\"method\":\"GET\",\"path\":\"http://evil/\"}");
        assert_true(r.malformed);
        tool_result_done(&r);
        r = call(&ctx, "db_query", "{\"sql\":\"\"}");
        assert_true(r.malformed);
        tool_result_done(&r);

        /* With a preview (no app started, no database), each handler reaches
         * it through the call's context. */
        struct cfg *c = NULL;
        assert_int_equal(cfg_new_default(&c), 0);
        struct preview *pv = NULL;
        assert_int_equal(preview_new(&(struct preview_config){.seed_dir = root, .worktree = seed, .root_fd = root_fd,
                                                              .evo_id = "evo_test", .cfg = c},
                                     &pv),
                         0);
        ctx.preview = pv;
        for (size_t i = 0; i < ARRAY_SIZE(app); i++) {
                r = call(&ctx, app[i].name, app[i].args);
                assert_true(r.is_error);
                assert_contains(r.output, app[i].with_preview);
                tool_result_done(&r);
        }
        preview_free(pv);
        cfg_free(c);
        ctx.preview = NULL;

        ctx.hooks = NULL;
        ctx.phase = TOOL_PHASE_CHAT;
        ctx.set = chat_tool_set;
        r = call(&ctx, "list_evolutions", "{}");
        assert_true(r.is_error);
        assert_contains(r.output, "not available in this phase");
        tool_result_done(&r);
        fake_reset();
}

/* --- git tools --- */

static void test_git_tools(void **state) {
        /* A Seed repository at generation 1 and an evolution's worktree of it. */
        char tmpl[] = "/tmp/utest-tools-git.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *dir = NULL, *f = NULL, *err = NULL, *wt = NULL, *base = NULL;
        assert_true(xasprintf(&dir, "%s/organism", tmpl) >= 0);
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_true(xasprintf(&f, "%s/organism/app.txt", tmpl) >= 0);
        assert_int_equal(write_file_atomic(f, "one\n", 4, 0644), 0);
        if (repo_init_commit(tmpl, "seed: generation 1", "seed/gen-1", &err) < 0)
                fail_msg("repo_init_commit: %s", err);
        assert_int_equal(repo_worktree_add(tmpl, "t1", &wt), 0);
        assert_int_equal(repo_head(wt, &base), 0);
        int fd = -1;
        assert_int_equal(fsx_open_root(wt, &fd), 0);
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        ctx.root_fd = fd;
        ctx.root_path = wt;
        ctx.base_oid = base;

        struct tool_result r = call(&ctx, "git_log", "{\"max_count\":5}");
        assert_false(r.is_error);
        assert_contains(r.output, "seed: generation 1");
        assert_true(strncmp(r.output, base, 12) == 0);
        tool_result_done(&r);

        r = call(&ctx, "git_status", "{}");
        assert_false(r.is_error);
        assert_string_equal(r.output, "no changes");
        tool_result_done(&r);

        r = call(&ctx, "write_file", "{\"path\":\"organism/app.txt\",\"content\":\"two and more\\n\"}");
        tool_result_done(&r);
        r = call(&ctx, "write_file", "{\"path\":\"organism/new.txt\",\"content\":\"new\\n\"}");
        tool_result_done(&r);
        r = call(&ctx, "write_file", "{\"path\":\"kernel/k.c\",\"content\":\"k\\n\"}"); /* approved by the fake */
        tool_result_done(&r);

        r = call(&ctx, "git_status", "{}");
        if (r.is_error)
                fail_msg("git_status: %s", r.output);
        assert_contains(r.output, "organism/app.txt");
        assert_contains(r.output, "organism/new.txt");
        assert_contains(r.output, "kernel/k.c [kernel: needs the owner's approval");
        assert_null(strstr(r.output, "organism/new.txt [kernel"));
        tool_result_done(&r);

        r = call(&ctx, "git_diff", "{}");
        if (r.is_error)
                fail_msg("git_diff: %s", r.output);
        assert_contains(r.output, "-one");
        assert_contains(r.output, "+two and more");
        assert_contains(r.output, "+new");
        tool_result_done(&r);

        r = call(&ctx, "git_diff", "{\"path\":\"./organism/new.txt\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "+new");
        assert_null(strstr(r.output, "+two"));
        assert_null(strstr(r.output, "k.c"));
        tool_result_done(&r);
        r = call(&ctx, "git_diff", "{\"path\":\"organism\"}");
        assert_contains(r.output, "+new");
        assert_contains(r.output, "+two");
        assert_null(strstr(r.output, "k.c"));
        tool_result_done(&r);
        r = call(&ctx, "git_diff", "{\"path\":\"organism/ne\"}");
        assert_string_equal(r.output, "no differences");
        tool_result_done(&r);

        r = call(&ctx, "git_diff", "{\"path\":\"../x\"}");
        assert_true(r.is_error);
        tool_result_done(&r);

        ctx.root_path = NULL;
        r = call(&ctx, "git_log", "{}");
        assert_true(r.is_error);
        assert_contains(r.output, "not available");
        tool_result_done(&r);
        close(fd);
        assert_int_equal(repo_worktree_remove(tmpl, "t1"), 0);
        rm_rf(tmpl);
}

/* Issue 19 "Reach": the roadmap is the kernel's (no write tool reaches it or
 * a directory holding it); a goal comes with 2..6 stages; declared checks
 * are validated; finish is refused while a declared write check expects 2xx
 * and nothing under organism/ changed, and taken once something did. */
static void test_reach_tools(void **state) {
        char tmpl[] = "/tmp/utest-tools-reach.XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *dir = NULL, *f = NULL, *err = NULL, *wt = NULL, *base = NULL;
        assert_true(xasprintf(&dir, "%s/organism", tmpl) >= 0);
        assert_int_equal(mkdir_p(dir, 0755), 0);
        assert_true(xasprintf(&f, "%s/organism/app.txt", tmpl) >= 0);
        assert_int_equal(write_file_atomic(f, "one\n", 4, 0644), 0);
        if (repo_init_commit(tmpl, "seed: generation 1", "seed/gen-1", &err) < 0)
                fail_msg("repo_init_commit: %s", err);
        assert_int_equal(repo_worktree_add(tmpl, "r1", &wt), 0);
        assert_int_equal(repo_head(wt, &base), 0);
        int fd = -1;
        assert_int_equal(fsx_open_root(wt, &fd), 0);
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        ctx.root_fd = fd;
        ctx.root_path = wt;
        ctx.base_oid = base;

        static const char *const refused[] = {
                "{\"path\":\"knowledge/roadmap.md\",\"content\":\"- [x] all\"}",
                "{\"path\":\"./knowledge//roadmap.md\",\"content\":\"x\"}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
                struct tool_result r = call(&ctx, "write_file", refused[i]);
                assert_true(r.is_error);
                assert_contains(r.output, "only the kernel writes");
                tool_result_done(&r);
        }
        struct tool_result r = call(&ctx, "edit_file", "{\"path\":\"knowledge/roadmap.md\",\"old_text\":\"a\",\"new_text\":\"b\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "only the kernel writes");
        tool_result_done(&r);
        r = call(&ctx, "delete_path", "{\"path\":\"knowledge\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "this path holds it");
        tool_result_done(&r);
        r = call(&ctx, "write_file", "{\"path\":\"knowledge/roadmap.md.bak\",\"content\":\"x\"}");
        assert_false(r.is_error);
        tool_result_done(&r);
        _cleanup_free_ char *rp = NULL;
        assert_true(xasprintf(&rp, "%s/knowledge/roadmap.md", wt) >= 0);
        assert_int_equal(access(rp, F_OK), -1);

        /* the plan: a goal with its stages, validated */
        ctx.phase = TOOL_PHASE_PLAN;
        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],"
                                      "\"goal\":\"G\",\"stages\":[\"a\",\"b\",\"c\"],"
                                      "\"checks\":[{\"request\":\"http:POST /items\",\"status\":201}]}");
        assert_false(r.is_error);
        assert_true(r.terminal);
        tool_result_done(&r);
        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],\"goal\":\"G\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "a goal needs its stages (2 to 6)");
        tool_result_done(&r);
        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],"
                                      "\"goal\":\"G\",\"stages\":[\"a\"]}");
        assert_true(r.is_error);
        assert_contains(r.output, "$.stages: needs at least 2 items");
        tool_result_done(&r);
        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],"
                                      "\"goal\":\"G\",\"stages\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\"]}");
        assert_true(r.is_error);
        assert_contains(r.output, "$.stages");
        tool_result_done(&r);
        /* the schema counts characters, the roadmap bytes: a goal or a stage
         * within the characters but over the bytes is refused by the call */
        {
                _cleanup_free_ char *cjk = NULL, *args = NULL;
                struct buf b = BUF_INIT(1 << 16);
                for (int i = 0; i < 400; i++)
                        assert_int_equal(buf_puts(&b, "\xe8\xaa\x9e"), 0); /* 語: 400 characters, 1200 bytes */
                assert_non_null(cjk = buf_steal(&b));
                assert_true(xasprintf(&args, "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],"
                                             "\"goal\":\"%s\",\"stages\":[\"a\",\"b\"]}", cjk) >= 0);
                r = call(&ctx, "submit_plan", args);
                assert_true(r.is_error);
                assert_contains(r.output, "the goal is 1200 bytes of UTF-8: at most 1000");
                tool_result_done(&r);
                free(args);
                cjk[300 * 3] = '\0'; /* 300 characters, 900 bytes: a fine goal, too long a stage */
                assert_true(xasprintf(&args, "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],"
                                             "\"goal\":\"%s\",\"stages\":[\"a\",\"%s\"]}", cjk, cjk) >= 0);
                r = call(&ctx, "submit_plan", args);
                assert_true(r.is_error);
                assert_contains(r.output, "stage 2 is 900 bytes of UTF-8: at most 500");
                tool_result_done(&r);
        }
        r = call(&ctx, "submit_plan", "{\"title\":\"T\",\"scope\":\"t\",\"summary\":\"s\",\"steps\":[\"x\"],"
                                      "\"checks\":[{\"request\":\"http:TRACE /\",\"status\":200}]}");
        assert_true(r.is_error);
        assert_contains(r.output, "check 1: the method must be one of GET, HEAD, POST, PUT, PATCH, DELETE");
        tool_result_done(&r);

        /* finish: the plan's write check expects 2xx and nothing changed under organism/ */
        ctx.phase = TOOL_PHASE_MUTATE;
        ctx.plan_checks = "[{\"request\":\"http:POST /items\",\"status\":201}]";
        r = call(&ctx, "finish", "{\"summary\":\"done\"}");
        assert_true(r.is_error);
        assert_false(r.terminal);
        assert_contains(r.output, "nothing under organism/ changed");
        tool_result_done(&r);
        /* a finish's own write check weighs the same; a 4xx one does not */
        ctx.plan_checks = NULL;
        r = call(&ctx, "finish", "{\"summary\":\"d\",\"checks\":[{\"request\":\"http:PUT /x\",\"status\":204}]}");
        assert_true(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "finish", "{\"summary\":\"d\",\"checks\":[{\"request\":\"http:DELETE /x\",\"status\":404}]}");
        assert_false(r.is_error);
        assert_true(r.terminal);
        tool_result_done(&r);
        ctx.plan_checks = "[{\"request\":\"http:POST /items\",\"status\":201}]";
        r = call(&ctx, "write_file", "{\"path\":\"organism/items.txt\",\"content\":\"items\\n\"}");
        assert_false(r.is_error);
        tool_result_done(&r);
        r = call(&ctx, "finish", "{\"summary\":\"done\"}");
        if (r.is_error)
                fail_msg("finish: %s", r.output);
        assert_true(r.terminal);
        tool_result_done(&r);
        close(fd);
        assert_int_equal(repo_worktree_remove(tmpl, "r1"), 0);
        rm_rf(tmpl);
}

/* --- run, in a real sandbox --- */

static void test_run(void **state) {
        char *msg = NULL;
        if (sandbox_check(&msg) < 0) {
                print_message("# skipped: %s\n", msg ? msg : "bubblewrap unavailable");
                free(msg);
                skip();
        }
        free(msg);
        struct sandbox_spec spec = {
                .seed_dir = seed,
                .workspace = seed,
                .evolvable = evolvable,
        };
        struct tool_ctx ctx = make_ctx(TOOL_PHASE_MUTATE);
        ctx.sandbox = &spec;
        ctx.command_timeout_ms = 60000;

        struct tool_result r = call(&ctx, "run", "{\"command\":\"cat organism/lib/util.js; echo out > organism/made.txt; exit 3\"}");
        assert_true(r.is_error);
        assert_true(startswith(r.output, "exit status 3 ("));
        assert_contains(r.output, "export function add");
        assert_int_equal(r.level, TOOL_REVIEW);
        tool_result_done(&r);
        _cleanup_free_ char *made = read_in("organism/made.txt");
        assert_string_equal(made, "out\n");

        /* The workspace outside the evolvable dirs is read-only; .seed is hidden. */
        r = call(&ctx, "run", "{\"command\":\"echo x > kernel/x.c\"}");
        assert_true(r.is_error);
        tool_result_done(&r);
        assert_false(exists_in("kernel/x.c"));
        r = call(&ctx, "run", "{\"command\":\"cat .seed/secrets/x\"}");
        assert_true(r.is_error);
        assert_null(strstr(r.output, "top-secret"));
        tool_result_done(&r);

        r = call(&ctx, "run", "{\"command\":\"echo ok\"}");
        assert_false(r.is_error);
        assert_contains(r.output, "exit status 0");
        assert_contains(r.output, "\nok\n");
        tool_result_done(&r);

        /* Output is capped for the model. */
        r = call(&ctx, "run", "{\"command\":\"head -c 100000 /dev/zero | tr '\\\\0' y\"}");
        assert_false(r.is_error);
        assert_true(strlen(r.output) < TOOLS_OUTPUT_CAP + 200);
        assert_contains(r.output, "omitted");
        tool_result_done(&r);

        /* The timeout kills it (asked for 1 s, well under the evolution's limit). */
        int64_t start = now_ms();
        r = call(&ctx, "run", "{\"command\":\"sleep 30\",\"timeout_seconds\":1}");
        assert_true(r.is_error);
        assert_contains(r.output, "timed out after 1 s");
        assert_true(now_ms() - start < 20000);
        tool_result_done(&r);

        ctx.sandbox = NULL;
        r = call(&ctx, "run", "{\"command\":\"true\"}");
        assert_true(r.is_error);
        assert_contains(r.output, "not available");
        tool_result_done(&r);
}

int main(void) {
        int r = priv_drop_if_root(NULL);
        if (r < 0) {
                fprintf(stderr, "cannot drop root: %s\n", strerror(-r));
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_schema_validation),
                cmocka_unit_test(test_schema_check),
                cmocka_unit_test(test_phases),
                cmocka_unit_test(test_normalize),
                cmocka_unit_test(test_every_tool_has_level_and_schema),
                cmocka_unit_test_setup_teardown(test_unset_level_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_classify, setup, teardown),
                cmocka_unit_test_setup_teardown(test_decisions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_always_ask, setup, teardown),
                cmocka_unit_test_setup_teardown(test_call_api_levels, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dangerous_too_large, setup, teardown),
                cmocka_unit_test_setup_teardown(test_output_cap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_dir, setup, teardown),
                cmocka_unit_test_setup_teardown(test_search, setup, teardown),
                cmocka_unit_test(test_regex_cost),
                cmocka_unit_test_setup_teardown(test_tracked_only, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_edit_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reflect_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminal_tools, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ask_owner, setup, teardown),
                cmocka_unit_test_setup_teardown(test_chat_and_app_tools, setup, teardown),
                cmocka_unit_test_setup_teardown(test_git_tools, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reach_tools, setup, teardown),
                cmocka_unit_test_setup_teardown(test_run, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
