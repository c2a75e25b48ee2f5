/* Integration tests for kernel/evolution/orchestrator: whole evolutions with
 * a real PostgreSQL, real bwrap, real git and the scripted model server
 * (tests/fakes/model_server.py) behind the real model client. The Seed folder
 * is planted like `seed new` does; no live organism (apply skips the
 * restart). Runs as the unprivileged account. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "base/fileio.h"
#include "base/priv.h"
#include "base/proc.h"
#include "config/config.h"
#include "db/db.h"
#include "evolution/orchestrator.h"
#include "evolution/roadmap.h"
#include "evolution/store.h"
#include "httpc/httpc.h"
#include "mind/mind.h"
#include "model/model.h"
#include "organism/organism.h"
#include "pg/pg.h"
#include "repo/repo.h"

#define SERVER SEED_SOURCE_ROOT "/tests/fakes/model_server.py"
#define BRIDGE SEED_BUILD_ROOT "/cmd/seed-bridge/seed-bridge"

static char tmp[64] = "/tmp/seed-orch-XXXXXX";
static char seed_dir[128];
static char base[128];
static pid_t server_pid;
static struct pg *g_pg;
static struct db *g_db;
static struct cfg *g_cfg;
static struct mind *g_mind;
static struct orchestrator *g_orch;
static struct organism *g_org;
static atomic_int restarts;
static atomic_int events;

/* ---- helpers ---- */

static void sleep_ms(int ms) {
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

static void run_cmd(char *const *argv, const char *cwd) {
        struct proc_result res = {0};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .cwd = cwd, .stdin_fd = -1, .out_fd = -1},
                                  &res),
                         0);
        if (res.exit_code != 0)
                fail_msg("%s failed: %s", argv[0], res.output ? res.output : "");
        proc_result_done(&res);
}

static char *find_python(void) {
        if (access("/usr/bin/python3", X_OK) == 0)
                return strdup("/usr/bin/python3");
        return strdup("/usr/local/bin/python3");
}

static json_t *control(const char *method, const char *path, const char *body) {
        char url[256];
        snprintf(url, sizeof url, "%s%s", base, path);
        char *headers[] = {"Content-Type: application/json", NULL};
        struct httpc_response res = {0};
        _cleanup_free_ char *err = NULL;
        int r = httpc_do(&(struct httpc_request){.method = method, .url = url, .headers = headers, .body = body,
                                                 .body_len = body ? strlen(body) : 0, .timeout_ms = 10000},
                         &res, &err);
        assert_int_equal(r, 0);
        assert_int_equal(res.status, 200);
        json_t *j = json_loads(res.body, 0, NULL);
        httpc_response_done(&res);
        assert_non_null(j);
        return j;
}

static void load_script(const char *script) { json_decref(control("POST", "/_script", script)); }

/* Whether any request the model server got contains needle. */
static bool requests_contain(const char *needle) {
        json_t *j = control("GET", "/_requests", NULL);
        char *s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        bool found = s && strstr(s, needle);
        free(s);
        return found;
}

static void on_event(void *userdata, const char *evo_id, const char *kind, const char *json) {
        atomic_fetch_add(&events, 1);
}

static void request_restart(void *userdata) { atomic_fetch_add(&restarts, 1); }

static void start_orch(void) {
        struct orch_config oc = {
                .seed_dir = seed_dir,
                .cfg = g_cfg,
                .kdb = g_db,
                .pg = g_pg,
                .mind = g_mind,
                .organism = g_org,
                .bridge_path = BRIDGE,
                .on_event = on_event,
                .request_restart = request_restart,
        };
        assert_int_equal(orch_start(&oc, &g_orch), 0);
}

static enum evo_state wait_final(const char *id, int timeout_ms) {
        int64_t deadline = now_ms() + timeout_ms;
        enum evo_state s = EVO_REQUESTED;
        for (;;) {
                assert_int_equal(evo_get_state(g_db, id, &s), 0);
                if (evo_state_is_final(s))
                        return s;
                if (now_ms() > deadline)
                        fail_msg("evolution %s still %s", id, evo_state_name(s));
                sleep_ms(50);
        }
}

/* The restart is requested just after the final state is stored: waits
 * (up to 10 s) for the count to reach want. */
static int wait_restarts(int want) {
        int64_t deadline = now_ms() + 10000;
        while (atomic_load(&restarts) < want && now_ms() < deadline)
                sleep_ms(10);
        return atomic_load(&restarts);
}

static char *evo_field(const char *id, const char *field) {
        _cleanup_free_ char *json = NULL;
        assert_int_equal(evo_get_json(g_db, id, true, 0, &json), 0);
        json_t *j = json_loads(json, 0, NULL);
        const char *v = json_string_value(json_object_get(j, field));
        char *r = v ? strdup(v) : NULL;
        json_decref(j);
        return r;
}

static void dump_events(const char *id) {
        _cleanup_free_ char *json = NULL;
        if (evo_get_json(g_db, id, true, 0, &json) >= 0)
                print_error("%s\n", json);
}

static enum evo_state run_evolution(const char *intent, char **ret_id) {
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, intent, NULL, &id), 0);
        enum evo_state s = wait_final(id, 240000);
        *ret_id = id;
        return s;
}

/* Waits for the first pending approval; returns its id. */
static char *wait_approval(const char *want_tool) {
        int64_t deadline = now_ms() + 60000;
        for (;;) {
                _cleanup_free_ char *json = NULL;
                assert_int_equal(evo_approvals_pending_json(g_db, &json), 0);
                json_t *j = json_loads(json, 0, NULL);
                json_t *a = json_is_array(j) ? json_array_get(j, 0) : json_array_get(json_object_get(j, "approvals"), 0);
                if (a) {
                        char *s = json_dumps(a, JSON_COMPACT);
                        assert_non_null(strstr(s, want_tool));
                        free(s);
                        char *id = strdup(json_string_value(json_object_get(a, "id")));
                        json_decref(j);
                        return id;
                }
                json_decref(j);
                if (now_ms() > deadline)
                        fail_msg("no approval appeared");
                sleep_ms(50);
        }
}

static int current_gen(void) {
        int g = 0;
        assert_int_equal(repo_current_generation(seed_dir, &g), 0);
        return g;
}

static bool seed_file_contains(const char *rel, const char *needle) {
        _cleanup_free_ char *p = path_join(seed_dir, rel), *text = NULL;
        if (read_file(p, 1 << 20, &text, NULL) < 0)
                return false;
        return strstr(text, needle) != NULL;
}

static bool worktree_exists(const char *id) {
        char p[300];
        snprintf(p, sizeof p, "%s/.seed/worktrees/%s", seed_dir, id);
        return path_exists(p);
}

/* The final state is stored before the evolution is cleaned up: waits (up
 * to 10 s) for its worktree to go. */
static bool worktree_gone(const char *id) {
        int64_t deadline = now_ms() + 10000;
        while (worktree_exists(id) && now_ms() < deadline)
                sleep_ms(20);
        return !worktree_exists(id);
}

static void live_exec(const char *sql) {
        _cleanup_free_ char *ci = NULL, *err = NULL;
        _cleanup_(db_closep) struct db *live = NULL;
        assert_int_equal(pg_conninfo(g_pg, "organism", PG_LIVE_DB, &ci), 0);
        assert_int_equal(db_connect(ci, &live), 0);
        if (db_exec(live, sql, &err) < 0)
                fail_msg("live: %s: %s", sql, err ? err : "?");
}

static char *live_value(const char *sql) {
        _cleanup_free_ char *ci = NULL;
        _cleanup_(db_closep) struct db *live = NULL;
        assert_int_equal(pg_conninfo(g_pg, "organism", PG_LIVE_DB, &ci), 0);
        assert_int_equal(db_connect(ci, &live), 0);
        char *v = NULL;
        assert_int_equal(db_query_value(live, sql, 0, NULL, &v), 0);
        return v;
}

/* The newest backup (pg_backup_list: newest first): its id (or "" when
 * there is none) and the generation it was taken under. Counting files
 * would not do: each kind keeps its newest few. */
static void newest_backup(char ret_id[PG_BACKUP_ID_MAX], int *ret_gen) {
        _cleanup_free_ struct pg_backup_info *v = NULL;
        size_t n = 0;
        assert_int_equal(pg_backup_list(seed_dir, &v, &n), 0);
        snprintf(ret_id, PG_BACKUP_ID_MAX, "%s", n ? v[0].id : "");
        *ret_gen = n ? v[0].generation : 0;
}

/* ---- setup ---- */

static int setup(void **state) {
        if (priv_drop_if_root(NULL) < 0)
                return -1;
        if (!mkdtemp(tmp))
                return -1;
        snprintf(seed_dir, sizeof seed_dir, "%s/seed", tmp);
        assert_int_equal(mkdir_p(seed_dir, 0755), 0);
        char *cp[] = {"/bin/cp", "-r", SEED_SOURCE_ROOT "/organism", SEED_SOURCE_ROOT "/knowledge",
                      SEED_SOURCE_ROOT "/skills", seed_dir, NULL};
        run_cmd(cp, NULL);
        _cleanup_free_ char *k = path_join(seed_dir, "kernel"), *kf = path_join(seed_dir, "kernel/README.md"),
                            *gi = path_join(seed_dir, ".gitignore"), *sy = path_join(seed_dir, "seed.yaml");
        assert_int_equal(mkdir_p(k, 0755), 0);
        assert_int_equal(write_file_atomic(kf, "kernel stub\n", 12, 0644), 0);
        assert_int_equal(write_file_atomic(gi, "/.seed/\nnode_modules/\n", 22, 0644), 0);
        assert_int_equal(write_file_atomic(sy, "name: seed\n", 11, 0644), 0);
        _cleanup_free_ char *err = NULL;
        if (repo_init_commit(seed_dir, "Initial seed", "seed/gen-1", &err) < 0)
                fail_msg("repo_init_commit: %s", err ? err : "");

        /* The model server. */
        _cleanup_free_ char *python = find_python(), *port_file = path_join(tmp, "port"),
                            *log_path = path_join(tmp, "server.log");
        _cleanup_close_ int log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(log_fd >= 0);
        char *const argv[] = {python, SERVER, "--port-file", port_file, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1", NULL};
        assert_int_equal(proc_spawn(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = log_fd},
                                    &server_pid),
                         0);
        int64_t deadline = now_ms() + 15000;
        for (;;) {
                _cleanup_free_ char *text = NULL;
                if (read_file(port_file, 64, &text, NULL) >= 0 && atoi(text) > 0) {
                        snprintf(base, sizeof base, "http://127.0.0.1:%d", atoi(text));
                        break;
                }
                if (now_ms() > deadline)
                        fail_msg("the model server did not start");
                sleep_ms(20);
        }
        char url[160];
        snprintf(url, sizeof url, "%s/v1", base);
        free(err);
        err = NULL;

        assert_int_equal(pg_start(seed_dir, &g_pg), 0);
        _cleanup_free_ char *ci = NULL;
        assert_int_equal(pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci), 0);
        assert_int_equal(db_connect(ci, &g_db), 0);
        /* Evolutions here run to their end: no preview waiting for an owner. */
        assert_int_equal(evo_preview_set(g_db, false), 0);
        assert_int_equal(cfg_new_default(&g_cfg), 0);
        g_cfg->evolution.command_timeout_seconds = 120;
        g_cfg->evolution.max_repair_attempts = 2;
        /* The scripted server as the model, needing no key. */
        free(g_cfg->model.provider);
        free(g_cfg->model.name);
        free(g_cfg->model.base_url);
        assert_non_null(g_cfg->model.provider = strdup("openai-compatible"));
        assert_non_null(g_cfg->model.name = strdup("scripted-1"));
        assert_non_null(g_cfg->model.base_url = strdup(url));
        g_cfg->model.max_tokens = 512;
        assert_int_equal(mind_new(&(struct mind_config){.cfg = g_cfg, .backoff_base_ms = 10}, &g_mind), 0);
        assert_true(mind_ready(g_mind));
        start_orch();
        return 0;
}

static int teardown(void **state) {
        orch_stop(g_orch);
        mind_free(g_mind);
        db_close(g_db);
        pg_stop(g_pg);
        cfg_free(g_cfg);
        if (server_pid > 0) {
                proc_kill_group(server_pid, SIGTERM);
                if (proc_wait(server_pid, 5000) < 0) {
                        proc_kill_group(server_pid, SIGKILL);
                        proc_wait(server_pid, 5000);
                }
        }
        rm_rf(tmp);
        return 0;
}

/* ---- scripts ---- */

#define PLAN(title, scope)                                                                                          \
        "{\"tool_calls\": [{\"name\": \"submit_plan\", \"arguments\": {\"title\": \"" title "\", \"scope\": \"" scope \
        "\", \"summary\": \"" title " for the owner.\", \"steps\": [\"change it\"]}}]}"
#define CALL(name, args) "{\"tool_calls\": [{\"name\": \"" name "\", \"arguments\": " args "}]}"
#define FINISH CALL("finish", "{\"summary\": \"done\"}")
#define REFLECT CALL("submit_reflection", "{\"notes\": \"learned\"}")
#define GOOD_MAKEFILE "NODE ?= node\\n.PHONY: build test\\nbuild:\\n\\t$(NODE) --check bin/server\\ntest: build\\n\\t$(NODE) --test test/\\n"
#define BAD_MAKEFILE ".PHONY: build test\\nbuild:\\n\\t@echo 'makefile says: syntax error 42' >&2; exit 2\\ntest:\\n\\ttrue\\n"

/* (a) */
static void test_evolution_completes(void **state) {
        /* The live schema is part of what the model is shown. */
        live_exec("CREATE TABLE IF NOT EXISTS guestbook (id integer, note text)");
        load_script("[" PLAN("Greet warmly", "greeting") ","
                    CALL("edit_file", "{\"path\": \"organism/bin/server\", \"old_text\": \"This is a new Seed.\", "
                                      "\"new_text\": \"Hello from generation two.\"}") ","
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Greet the owner warmly", &id);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), 2);
        assert_true(seed_file_contains("organism/bin/server", "Hello from generation two."));
        /* The commit message and its trailers. */
        struct repo_generation *g = NULL;
        size_t n = 0;
        assert_int_equal(repo_generations(seed_dir, &g, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(g[1].summary, "evolve(greeting): Greet warmly");
        {
                _cleanup_free_ char *json = NULL;
                assert_int_equal(evo_get_json(g_db, id, false, 0, &json), 0);
                json_t *e = json_loads(json, 0, NULL);
                assert_int_equal(json_integer_value(json_object_get(e, "from_generation")), 1);
                assert_int_equal(json_integer_value(json_object_get(e, "to_generation")), 2);
                assert_string_equal(json_string_value(json_object_get(e, "commit_oid")), g[1].commit);
                assert_string_equal(json_string_value(json_object_get(e, "base_commit")), g[0].commit);
                json_decref(e);
        }
        char *git[] = {"/usr/bin/git", "-C", seed_dir, "log", "-1", "--format=%B", g[1].commit, NULL};
        struct proc_result res = {0};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = git, .envp = envp, .stdin_fd = -1, .out_fd = -1}, &res), 0);
        char want[128];
        snprintf(want, sizeof want, "Evolution: %s\nGeneration: 1 -> 2", id);
        if (!strstr(res.output, want))
                fail_msg("commit message: %s", res.output);
        proc_result_done(&res);
        repo_generations_free(g, n);
        assert_true(worktree_gone(id));
        assert_int_equal(atomic_load(&restarts), 0);
        assert_true(atomic_load(&events) > 10);
        assert_true(requests_contain("## Live database schema"));
        assert_true(requests_contain("guestbook(id integer, note text)"));
}

/* (b) */
static void test_build_failure_is_repaired(void **state) {
        int before = current_gen();
        load_script("[" PLAN("Break then fix", "repair") ","
                    CALL("write_file", "{\"path\": \"organism/Makefile\", \"content\": \"" BAD_MAKEFILE "\"}") ","
                    FINISH ","
                    "{\"match\": \"makefile says: syntax error 42\", \"tool_calls\": [{\"name\": \"write_file\", "
                    "\"arguments\": {\"path\": \"organism/Makefile\", \"content\": \"" GOOD_MAKEFILE "# fixed\\n\"}}]},"
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Exercise a repair", &id);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_true(requests_contain("The kernel's check 'build' failed"));
        assert_true(requests_contain("makefile says: syntax error 42"));
        assert_int_equal(current_gen(), before + 1);
        assert_true(seed_file_contains("organism/Makefile", "# fixed"));
}

/* (c) */
static void test_repairs_exhausted(void **state) {
        int before = current_gen();
        load_script("[" PLAN("Always broken", "broken") ","
                    CALL("write_file", "{\"path\": \"organism/Makefile\", \"content\": \"" BAD_MAKEFILE "\"}") ","
                    FINISH "," FINISH "," FINISH "," FINISH "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Never works", &id);
        if (s != EVO_FAILED)
                dump_events(id);
        assert_int_equal(s, EVO_FAILED);
        _cleanup_free_ char *err = evo_field(id, "error");
        assert_non_null(err);
        assert_non_null(strstr(err, "'build' still fails"));
        assert_int_equal(current_gen(), before);
        assert_false(seed_file_contains("organism/Makefile", "syntax error 42"));
        assert_true(worktree_gone(id));
}

/* (d) deny */
static void test_kernel_write_denied(void **state) {
        int before = current_gen();
        load_script("[" PLAN("Touch the kernel", "kernel") ","
                    CALL("write_file", "{\"path\": \"kernel/x.txt\", \"content\": \"from the model\\n\"}") ","
                    "{\"match\": \"denied by the owner\", \"tool_calls\": [{\"name\": \"write_file\", \"arguments\": "
                    "{\"path\": \"knowledge/denied.md\", \"content\": \"the owner said no\\n\"}}]},"
                    FINISH "," REFLECT "]");
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Write to the kernel", NULL, &id), 0);
        _cleanup_free_ char *aid = wait_approval("kernel/x.txt");
        /* The approval is stored just before the state moves to needs_input
         * (ask_owner_decision): poll, as a slower build (ASan) shows. */
        enum evo_state st;
        int64_t deadline = now_ms() + 10000;
        do {
                assert_int_equal(evo_get_state(g_db, id, &st), 0);
                if (st != EVO_NEEDS_INPUT)
                        sleep_ms(20);
        } while (st != EVO_NEEDS_INPUT && now_ms() < deadline);
        assert_int_equal(st, EVO_NEEDS_INPUT);
        assert_int_equal(orch_decide(g_orch, aid, false, NULL), 0);
        assert_int_equal(orch_decide(g_orch, aid, true, NULL), -EALREADY);
        enum evo_state s = wait_final(id, 240000);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        assert_false(seed_file_contains("kernel/x.txt", "from the model"));
        assert_true(seed_file_contains("knowledge/denied.md", "the owner said no"));
        assert_int_equal(atomic_load(&restarts), 0);
        free(id);
}

/* (d) approve */
static void test_kernel_write_approved(void **state) {
        int before = current_gen();
        load_script("[" PLAN("Touch the kernel", "kernel") ","
                    CALL("write_file", "{\"path\": \"kernel/x.txt\", \"content\": \"from the model\\n\"}") ","
                    FINISH "," REFLECT "]");
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Write to the kernel", NULL, &id), 0);
        _cleanup_free_ char *aid = wait_approval("kernel/x.txt");
        assert_int_equal(orch_decide(g_orch, aid, true, NULL), 0);
        enum evo_state s = wait_final(id, 240000);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        assert_true(seed_file_contains("kernel/x.txt", "from the model"));
        assert_int_equal(wait_restarts(1), 1);
        free(id);
}

/* (e) */
static void test_shell_outside_evolvable(void **state) {
        int before = current_gen();
        load_script("[" PLAN("Sneak", "sneak") ","
                    CALL("run", "{\"command\": \"echo evil > kernel/evil.txt\"}") ","
                    CALL("run", "{\"command\": \"ln -s ../kernel organism/k && echo linked\"}") ","
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Write outside", &id);
        if (s != EVO_FAILED)
                dump_events(id);
        assert_int_equal(s, EVO_FAILED);
        _cleanup_free_ char *err = evo_field(id, "error");
        assert_non_null(err);
        if (!strstr(err, "kernel boundary violated: ") || !strstr(err, "organism/k"))
                fail_msg("error: %s", err);
        assert_true(requests_contain("Read-only file system"));
        assert_false(seed_file_contains("kernel/evil.txt", "evil"));
        assert_int_equal(current_gen(), before);
        assert_true(worktree_gone(id));
}

/* (i) */
static void test_cancel_while_waiting(void **state) {
        int before = current_gen();
        load_script("[" PLAN("Touch the kernel", "kernel") ","
                    CALL("write_file", "{\"path\": \"kernel/y.txt\", \"content\": \"y\\n\"}") "]");
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Wait forever", NULL, &id), 0);
        _cleanup_free_ char *aid = wait_approval("kernel/y.txt");
        assert_true(worktree_exists(id));
        assert_int_equal(orch_cancel(g_orch, id), 0);
        assert_int_equal(wait_final(id, 60000), EVO_CANCELLED);
        assert_int_equal(orch_cancel(g_orch, id), -EALREADY);
        assert_int_equal(orch_cancel(g_orch, "evo_0000000000000000"), -ENOENT);
        /* The worktree goes right after the state is stored. */
        int64_t deadline = now_ms() + 10000;
        while (worktree_exists(id) && now_ms() < deadline)
                sleep_ms(20);
        assert_true(worktree_gone(id));
        assert_int_equal(current_gen(), before);
        free(id);
}

/* No model key: fails at planning, naming the variable to pass. */
static void test_no_model(void **state) {
        orch_stop(g_orch);
        struct mind *m = g_mind;
        _cleanup_(cfg_freep) struct cfg *keyless = NULL;
        assert_int_equal(cfg_new_default(&keyless), 0); /* openrouter, and no secrets */
        assert_int_equal(mind_new(&(struct mind_config){.cfg = keyless}, &g_mind), 0);
        start_orch();
        _cleanup_free_ char *id = NULL;
        assert_int_equal(run_evolution("Anything", &id), EVO_FAILED);
        _cleanup_free_ char *err = evo_field(id, "error");
        assert_non_null(err);
        assert_string_equal(err, "No model key: the Seed cannot think yet. Start it with -e OPENROUTER_API_KEY (or lend "
                                 "a key in Settings).");
        orch_stop(g_orch);
        mind_free(g_mind);
        g_mind = m;
        start_orch();
}

/* Rollback to 1: a new generation with generation 1's tree. */
static void test_rollback(void **state) {
        int before = current_gen();
        int restarts_before = atomic_load(&restarts);
        char *id = NULL;
        assert_int_equal(orch_rollback(g_orch, 1, false, &id), 0);
        enum evo_state s = wait_final(id, 120000);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        assert_true(seed_file_contains("organism/bin/server", "This is a new Seed."));
        assert_false(seed_file_contains("kernel/x.txt", "from the model"));
        /* Generation 1 has no kernel/x.txt: the rollback changed the kernel,
         * so the kernel restarts into the restored source. */
        assert_int_equal(wait_restarts(restarts_before + 1), restarts_before + 1);
        free(id);
}

/* A question to the owner, then plan and apply approvals. */
static void test_question_and_approvals(void **state) {
        int before = current_gen();
        g_cfg->permissions.require_plan_approval = true;
        g_cfg->permissions.require_apply_approval = true;
        load_script("[" CALL("ask_owner", "{\"question\": \"Which colour?\"}") ","
                    "{\"match\": \"The owner answered: green\", \"tool_calls\": [{\"name\": \"submit_plan\", "
                    "\"arguments\": {\"title\": \"Green notes\", \"scope\": \"colour\", \"summary\": \"s\", "
                    "\"steps\": [\"x\"]}}]},"
                    CALL("write_file", "{\"path\": \"knowledge/colour.md\", \"content\": \"green\\n\"}") ","
                    FINISH "," REFLECT "]");
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Pick a colour", NULL, &id), 0);
        _cleanup_free_ char *q = wait_approval("Which colour?");
        assert_int_equal(orch_decide(g_orch, q, true, "green"), 0);
        _cleanup_free_ char *plan = wait_approval("Green notes");
        assert_int_equal(orch_decide(g_orch, plan, true, NULL), 0);
        _cleanup_free_ char *apply = wait_approval("from_generation");
        assert_int_equal(current_gen(), before); /* not applied before the approval */
        assert_int_equal(orch_decide(g_orch, apply, true, NULL), 0);
        enum evo_state s = wait_final(id, 240000);
        g_cfg->permissions.require_plan_approval = false;
        g_cfg->permissions.require_apply_approval = false;
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        assert_true(seed_file_contains("knowledge/colour.md", "green"));
        free(id);
}

/* A staged plan the owner refuses leaves no roadmap: nothing for
 * continue_roadmap to start. */
static void test_refused_staged_plan_keeps_no_roadmap(void **state) {
        g_cfg->permissions.require_plan_approval = true;
        load_script("[{\"tool_calls\": [{\"name\": \"submit_plan\", \"arguments\": {\"title\": \"Greeter\", "
                    "\"scope\": \"greeter\", \"summary\": \"s\", \"steps\": [\"x\"], \"goal\": \"A greeter\", "
                    "\"stages\": [\"Say hello\", \"Say goodbye\"]}}]}]");
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Become a greeter", NULL, &id), 0);
        _cleanup_free_ char *plan = wait_approval("A greeter");
        assert_int_equal(orch_decide(g_orch, plan, false, NULL), 0);
        enum evo_state s = wait_final(id, 60000);
        g_cfg->permissions.require_plan_approval = false;
        if (s != EVO_FAILED)
                dump_events(id);
        assert_int_equal(s, EVO_FAILED);
        _cleanup_free_ char *map = NULL, *err = evo_field(id, "error");
        assert_non_null(err);
        assert_non_null(strstr(err, "the owner did not approve the plan"));
        assert_int_equal(roadmap_get_json(g_db, id, &map), -ENOENT);
        assert_null(evo_field(id, "roadmap_id"));
        _cleanup_free_ char *evo_id = NULL, *why = NULL;
        assert_int_equal(orch_continue_roadmap(g_orch, &evo_id, &why), -ENOENT);
        free(id);
}

/* The owner's own knowledge/roadmap.md, larger than the kernel ever writes
 * one (ROADMAP_MD_MAX), committed on main: an ordinary evolution completes
 * and keeps it as it was. */
static void test_owner_roadmap_over_16k_is_kept(void **state) {
        int before = current_gen();
        _cleanup_free_ char *dir = path_join(seed_dir, "knowledge"), *file = path_join(seed_dir, "knowledge/roadmap.md");
        (void)mkdir(dir, 0755);
        size_t n = ROADMAP_MD_MAX + 4096;
        char *text = malloc(n + 1);
        assert_non_null(text);
        memset(text, 'r', n);
        for (size_t i = 79; i < n; i += 80)
                text[i] = '\n';
        const char *tail = "\nThe owner's own last line.\n";
        memcpy(text + n - strlen(tail), tail, strlen(tail));
        text[n] = 0;
        assert_int_equal(write_file_atomic(file, text, n, 0644), 0);
        free(text);
        char *add[] = {"/usr/bin/git", "-C", seed_dir, "add", "knowledge/roadmap.md", NULL};
        run_cmd(add, NULL);
        char *commit[] = {"/usr/bin/git", "-C", seed_dir, "-c", "user.name=Owner", "-c", "user.email=owner@example.com",
                          "commit", "-q", "-m", "My own roadmap", NULL};
        run_cmd(commit, NULL);
        load_script("[" PLAN("Notes", "notes") ","
                    CALL("write_file", "{\"path\": \"knowledge/notes.md\", \"content\": \"notes\\n\"}") ","
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Keep notes", &id);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_true(current_gen() > before); /* the owner's commit may become a generation of its own first */
        assert_true(seed_file_contains("knowledge/notes.md", "notes"));
        assert_true(seed_file_contains("knowledge/roadmap.md", "The owner's own last line."));
}

/* ask_owner is the orchestrator's own tool with its own limit: three
 * questions an evolution; the fourth is answered by the kernel (decide
 * yourself), not put to the owner. Each "match" step checks what the model
 * was told before it answers. */
#define ASK(q) CALL("ask_owner", "{\"question\": \"" q "\"}")
static void test_three_questions_at_most(void **state) {
        load_script("[" ASK("First?") ","
                    "{\"match\": \"The owner answered: one\", \"tool_calls\": [{\"name\": \"ask_owner\", "
                    "\"arguments\": {\"question\": \"Second?\"}}]},"
                    "{\"match\": \"The owner answered: two\", \"tool_calls\": [{\"name\": \"ask_owner\", "
                    "\"arguments\": {\"question\": \"Third?\"}}]},"
                    "{\"match\": \"The owner answered: three\", \"tool_calls\": [{\"name\": \"ask_owner\", "
                    "\"arguments\": {\"question\": \"Fourth?\"}}]},"
                    "{\"match\": \"already asked the owner 3 questions\", \"tool_calls\": [{\"name\": "
                    "\"submit_plan\", \"arguments\": {\"title\": \"Asked enough\", \"scope\": \"questions\", "
                    "\"summary\": \"s\", \"steps\": [\"x\"]}}]},"
                    CALL("write_file", "{\"path\": \"knowledge/answers.md\", \"content\": \"one two three\\n\"}") ","
                    FINISH "," REFLECT "]");
        char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Ask me things", NULL, &id), 0);
        static const char *const q[][2] = {{"First?", "one"}, {"Second?", "two"}, {"Third?", "three"}};
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *a = wait_approval(q[i][0]);
                assert_int_equal(orch_decide(g_orch, a, true, q[i][1]), 0);
        }
        enum evo_state s = wait_final(id, 240000);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE); /* the fourth never reached the owner */
        assert_true(seed_file_contains("knowledge/answers.md", "one two three"));
        free(id);
}

/* Boot recovery: an evolution under way when the kernel died is failed and
 * its worktree removed; the live generation is untouched. */
static void test_boot_recovery(void **state) {
        int before = current_gen();
        orch_stop(g_orch);
        g_orch = NULL;
        _cleanup_free_ char *id = NULL, *wt = NULL, *err = NULL;
        assert_int_equal(evo_create(g_db, "Interrupted", "evolve", &id), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_PLANNING, NULL, &err), 0);
        assert_int_equal(repo_worktree_add(seed_dir, id + 4, &wt), 0);
        assert_true(worktree_exists(id));
        start_orch();
        enum evo_state s;
        assert_int_equal(evo_get_state(g_db, id, &s), 0);
        assert_int_equal(s, EVO_FAILED);
        _cleanup_free_ char *e = evo_field(id, "error");
        assert_non_null(e);
        assert_non_null(strstr(e, "interrupted by a kernel restart"));
        assert_true(worktree_gone(id));
        assert_int_equal(current_gen(), before);
}

/* Exit code of git -C seed_dir args... (at most 6 arguments). */
static int git_status(const char *a, const char *b, const char *c) {
        char *argv[] = {"/usr/bin/git", "-C", seed_dir, (char *)a, (char *)b, (char *)c, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1", NULL};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1}, &res),
                         0);
        int code = res.exit_code;
        proc_result_done(&res);
        return code;
}

static bool branch_exists(const char *id) {
        char ref[128];
        snprintf(ref, sizeof ref, "refs/heads/seed/%s", id);
        return git_status("show-ref", "--quiet", ref) == 0;
}

static bool database_exists(const char *name) {
        _cleanup_free_ char *ci = NULL, *v = NULL;
        _cleanup_(db_closep) struct db *admin = NULL;
        assert_int_equal(pg_conninfo(g_pg, "postgres", "postgres", &ci), 0);
        assert_int_equal(db_connect(ci, &admin), 0);
        const char *p[] = {name};
        assert_int_equal(db_query_value(admin, "SELECT count(*) FROM pg_database WHERE datname = $1", 1, p, &v), 0);
        return streq(v, "1");
}

static bool role_exists(const char *name) {
        _cleanup_free_ char *ci = NULL, *v = NULL;
        _cleanup_(db_closep) struct db *admin = NULL;
        assert_int_equal(pg_conninfo(g_pg, "postgres", "postgres", &ci), 0);
        assert_int_equal(db_connect(ci, &admin), 0);
        const char *p[] = {name};
        assert_int_equal(db_query_value(admin, "SELECT count(*) FROM pg_roles WHERE rolname = $1", 1, p, &v), 0);
        return streq(v, "1");
}

/* An ended evolution whose branch and scratch databases are left without a
 * worktree (a kernel killed between removing the worktree and the rest). */
static char *ended_with_leftovers(enum evo_state final) {
        char *id = NULL;
        _cleanup_free_ char *wt = NULL, *err = NULL, *admin = NULL, *test_db = NULL, *run_db = NULL;
        assert_int_equal(evo_create(g_db, "Left things behind", "evolve", &id), 0);
        assert_int_equal(evo_set_state(g_db, id, EVO_PLANNING, NULL, &err), 0);
        assert_int_equal(repo_worktree_add(seed_dir, id + 4, &wt), 0);
        /* the worktree and git's note of it gone, the branch left */
        assert_int_equal(rm_rf(wt), 0);
        assert_int_equal(xasprintf(&admin, "%s/.git/worktrees/%s", seed_dir, id), 0);
        assert_int_equal(rm_rf(admin), 0);
        assert_false(worktree_exists(id));
        assert_true(branch_exists(id));
        assert_int_equal(xasprintf(&test_db, "%s_test", id), 0);
        assert_int_equal(xasprintf(&run_db, "%s_run", id), 0);
        assert_int_equal(pg_scratch_create(g_pg, id), 0);
        assert_int_equal(pg_scratch_create(g_pg, test_db), 0);
        assert_int_equal(pg_scratch_create(g_pg, run_db), 0);
        assert_int_equal(evo_set_state(g_db, id, final, final == EVO_FAILED ? "it broke" : NULL, &err), 0);
        return id;
}

/* Boot removes what ended evolutions left, with or without a worktree:
 * branch, scratch databases, the preview's copy of the live data and its
 * role; never a branch a symbolic reference reaches the commit through;
 * live data, generations and main stay as they were. Idempotent. */
static void test_boot_removes_leftovers_without_worktree(void **state) {
        orch_stop(g_orch);
        g_orch = NULL;
        live_exec("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('live')");
        int gen = current_gen();
        _cleanup_free_ char *main_before = NULL, *main_after = NULL;
        assert_int_equal(repo_head(seed_dir, &main_before), 0);
        _cleanup_free_ char *failed = ended_with_leftovers(EVO_FAILED);
        _cleanup_free_ char *cancelled = ended_with_leftovers(EVO_CANCELLED);
        _cleanup_free_ char *held = ended_with_leftovers(EVO_FAILED);
        /* a preview's copy of the live data (database and role) */
        char copy_name[64];
        snprintf(copy_name, sizeof copy_name, PG_LIVE_COPY_PREFIX "%s", failed + 4);
        struct pg_live_copy copy = {0};
        assert_int_equal(pg_live_copy_create(g_pg, copy_name, PG_LIVE_COPY_MAX_BYTES, &copy), 0);
        pg_live_copy_done(&copy);
        assert_true(database_exists(copy_name) && role_exists(copy_name));
        /* a reference that reaches its commit only through held's branch */
        char target[128];
        snprintf(target, sizeof target, "refs/heads/seed/%s", held);
        assert_int_equal(git_status("symbolic-ref", "refs/tags/seed/through", target), 0);
        /* a branch of the owner's that only looks like an evolution's */
        assert_int_equal(git_status("branch", "seed/evo_try", NULL), 0);
        assert_true(branch_exists("evo_try"));

        start_orch();
        assert_true(branch_exists("evo_try"));
        const char *gone[] = {failed, cancelled};
        for (size_t i = 0; i < ARRAY_SIZE(gone); i++) {
                char db[96];
                assert_false(branch_exists(gone[i]));
                assert_false(database_exists(gone[i]));
                snprintf(db, sizeof db, "%s_test", gone[i]);
                assert_false(database_exists(db));
                snprintf(db, sizeof db, "%s_run", gone[i]);
                assert_false(database_exists(db));
        }
        assert_false(database_exists(copy_name));
        assert_false(role_exists(copy_name));
        /* kept: something points through it; its databases went */
        assert_true(branch_exists(held));
        assert_false(database_exists(held));
        /* live data, generations and main as they were */
        _cleanup_free_ char *v = live_value("SELECT v FROM kept");
        assert_string_equal(v, "live");
        assert_int_equal(current_gen(), gen);
        assert_int_equal(repo_head(seed_dir, &main_after), 0);
        assert_string_equal(main_before, main_after);
        /* a second boot finds nothing more to do, and the branch goes once
         * nothing points through it */
        orch_stop(g_orch);
        g_orch = NULL;
        assert_int_equal(git_status("symbolic-ref", "-d", "refs/tags/seed/through"), 0);
        start_orch();
        assert_false(branch_exists(held));
        assert_false(branch_exists(failed));
        assert_true(branch_exists("evo_try"));
        assert_int_equal(git_status("branch", "-D", "seed/evo_try"), 0);
        assert_int_equal(current_gen(), gen);
        live_exec("DROP TABLE kept");
}

/* A migration that cannot apply to the live data: the new generation is
 * not kept; the previous generation's tree is live again (as a new
 * generation) and the evolution ends rolled_back. */
/* The first migration applies, the second fails: the live data is put
 * back as it was before the new generation, with the old generation. */
static void test_live_migration_failure_rolls_back(void **state) {
        int before = current_gen();
        live_exec("CREATE TABLE clash (id int); INSERT INTO clash VALUES (7)");
        load_script("[" PLAN("Add a table", "clash") ","
                    CALL("write_file", "{\"path\": \"organism/migrations/0001_fine.sql\", "
                                       "\"content\": \"CREATE TABLE fine (id int);\\n\"}") ","
                    CALL("write_file", "{\"path\": \"organism/migrations/0002_clash.sql\", "
                                       "\"content\": \"CREATE TABLE clash (id serial PRIMARY KEY);\\n\"}") ","
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Add the clash table", &id);
        if (s != EVO_ROLLED_BACK)
                dump_events(id);
        assert_int_equal(s, EVO_ROLLED_BACK);
        assert_int_equal(current_gen(), before + 2);
        _cleanup_free_ char *p = path_join(seed_dir, "organism/migrations/0002_clash.sql");
        assert_false(path_exists(p));
        _cleanup_free_ char *fine = live_value("SELECT count(*) FROM pg_tables WHERE tablename = 'fine'"),
                            *kept = live_value("SELECT id FROM clash");
        assert_string_equal(fine, "0");
        assert_string_equal(kept, "7");
        live_exec("DROP TABLE clash");
}

/* rollback --with-data: the data comes back as it was backed up while that
 * generation was live; without a backup of it, the rollback fails. */
static void test_rollback_with_data(void **state) {
        live_exec("CREATE TABLE diary (entry text); INSERT INTO diary VALUES ('then')");
        int then = current_gen();
        char before_id[PG_BACKUP_ID_MAX], applied_id[PG_BACKUP_ID_MAX], restored_id[PG_BACKUP_ID_MAX];
        int taken_under = 0;
        newest_backup(before_id, &taken_under);
        load_script("[" PLAN("A note", "note") ","
                    CALL("write_file", "{\"path\": \"organism/NOTE.txt\", \"content\": \"later\\n\"}") ","
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL, *rb = NULL, *none = NULL;
        assert_int_equal(run_evolution("Leave a note", &id), EVO_COMPLETE);
        newest_backup(applied_id, &taken_under); /* the apply backed up what was live */
        assert_string_not_equal(applied_id, before_id);
        assert_int_equal(taken_under, then);
        live_exec("UPDATE diary SET entry = 'now'");
        assert_int_equal(orch_rollback(g_orch, then, true, &rb), 0);
        enum evo_state s = wait_final(rb, 120000);
        if (s != EVO_COMPLETE)
                dump_events(rb);
        assert_int_equal(s, EVO_COMPLETE);
        _cleanup_free_ char *entry = live_value("SELECT entry FROM diary");
        assert_string_equal(entry, "then");
        newest_backup(restored_id, &taken_under); /* today's data was kept first */
        assert_string_not_equal(restored_id, applied_id);
        int cur = current_gen();
        assert_int_equal(orch_rollback(g_orch, cur, true, &none), 0);
        assert_int_equal(wait_final(none, 120000), EVO_FAILED);
        _cleanup_free_ char *err = evo_field(none, "error");
        if (!err || !strstr(err, "no backup of generation"))
                fail_msg("error: %s", err ? err : "(none)");
        assert_int_equal(current_gen(), cur);
        live_exec("DROP TABLE diary");
}

/* Step whose request must contain `m` (the previous tool's result). */
#define MCALL(m, name, args)                                                                                        \
        "{\"match\": \"" m "\", \"tool_calls\": [{\"name\": \"" name "\", \"arguments\": " args "}]}"

/* Asks for changes on evo_id's preview as soon as it waits for the owner
 * (orch_preview_decide is -ENOENT until then); fails after 10 minutes. */
static void decide_when_previewing(const char *id, enum orch_preview_action action, const char *feedback) {
        int64_t deadline = now_ms() + 600000;
        for (;;) {
                int k = orch_preview_decide(g_orch, id, action, feedback);
                if (k == 0)
                        return;
                assert_int_equal(k, -ENOENT);
                enum evo_state s;
                assert_int_equal(evo_get_state(g_db, id, &s), 0);
                if (evo_state_is_final(s)) {
                        dump_events(id);
                        fail_msg("evolution %s ended %s before its preview", id, evo_state_name(s));
                }
                if (now_ms() > deadline)
                        fail_msg("evolution %s never reached its preview", id);
                sleep_ms(100);
        }
}

/* The owner asked for changes in the preview, then applied: one commit on
 * top of the previous generation, as an evolution without a second round
 * makes, with the second round's files. */
static void test_preview_changes_make_one_commit(void **state) {
        int before = current_gen();
        _cleanup_free_ char *start = NULL, *id = NULL, *parent = NULL;
        assert_int_equal(repo_head(seed_dir, &start), 0);
        assert_int_equal(evo_preview_set(g_db, true), 0);
        load_script("[" PLAN("Two rounds", "rounds") ","
                    CALL("write_file", "{\"path\": \"organism/ROUND.txt\", \"content\": \"first\\n\"}") ","
                    FINISH "," REFLECT ","
                    MCALL("asks for changes", "write_file", "{\"path\": \"organism/ROUND.txt\", \"content\": \"second\\n\"}") ","
                    FINISH "," REFLECT "]");
        assert_int_equal(orch_submit(g_orch, "Two rounds", NULL, &id), 0);
        decide_when_previewing(id, ORCH_PREVIEW_CHANGES, "Say second.");
        decide_when_previewing(id, ORCH_PREVIEW_APPLY, NULL);
        enum evo_state s = wait_final(id, 600000);
        assert_int_equal(evo_preview_set(g_db, false), 0);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        assert_true(seed_file_contains("organism/ROUND.txt", "second"));
        /* main's parent is the commit it was on before: one commit */
        char *argv[] = {"/usr/bin/git", "-C", seed_dir, "rev-parse", "main^", NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = argv, .envp = envp, .stdin_fd = -1, .out_fd = -1}, &res),
                         0);
        assert_int_equal(res.exit_code, 0);
        parent = strndup(res.output, strcspn(res.output, "\n"));
        proc_result_done(&res);
        assert_string_equal(parent, start);
        assert_true(worktree_gone(id));
}

/* Nobody decides: after evolution.preview_wait_seconds the preview is
 * discarded (its copy of the live data and sandbox gone), the evolution
 * cancelled saying why, and the next one runs. */
static void test_preview_expires_without_a_decision(void **state) {
        int before = current_gen();
        _cleanup_free_ char *id = NULL, *next = NULL;
        assert_int_equal(evo_preview_set(g_db, true), 0);
        g_cfg->evolution.preview_wait_seconds = 3;
        load_script("[" PLAN("Undecided", "undecided") ","
                    CALL("write_file", "{\"path\": \"organism/UNDECIDED.txt\", \"content\": \"maybe\\n\"}") ","
                    FINISH "," REFLECT "]");
        assert_int_equal(orch_submit(g_orch, "Undecided", NULL, &id), 0);
        enum evo_state s = wait_final(id, 600000);
        assert_int_equal(evo_preview_set(g_db, false), 0);
        g_cfg->evolution.preview_wait_seconds = 43200;
        if (s != EVO_CANCELLED)
                dump_events(id);
        assert_int_equal(s, EVO_CANCELLED);
        /* said in its said: the phase's note, the preview's end */
        _cleanup_free_ char *said = NULL;
        assert_int_equal(evo_get_json(g_db, id, true, 0, &said), 0);
        if (!strstr(said, "discarded: the owner did not decide on the preview within 3 seconds") ||
            !strstr(said, "\"expired\""))
                fail_msg("said: %s", said);
        assert_int_equal(orch_preview_decide(g_orch, id, ORCH_PREVIEW_APPLY, NULL), -ENOENT);
        assert_int_equal(current_gen(), before);
        assert_false(seed_file_contains("organism/UNDECIDED.txt", "maybe"));
        char copy[64];
        snprintf(copy, sizeof copy, PG_LIVE_COPY_PREFIX "%s", id + 4);
        assert_false(database_exists(copy));
        assert_false(role_exists(copy));
        assert_true(worktree_gone(id));
        /* the queue moves on */
        load_script("[" PLAN("After", "after") ","
                    CALL("write_file", "{\"path\": \"organism/AFTER.txt\", \"content\": \"after\\n\"}") ","
                    FINISH "," REFLECT "]");
        assert_int_equal(run_evolution("After", &next), EVO_COMPLETE);
}

/* The app and scratch-database tools of the mutate phase: a migration the
 * model wrote, applied to the scratch database and queried; the schema; the
 * preview app started (and restarted), asked over HTTP, its log read,
 * stopped; started again and left running, so the end of the evolution must
 * stop it. The database tools reach only evo_<id> as evolver. */
static void test_app_and_db_tools(void **state) {
        int before = current_gen();
        /* A table only the live database has. */
        live_exec("CREATE TABLE live_only_secret (v text); INSERT INTO live_only_secret VALUES ('live-data-xyz')");
        load_script("[" PLAN("Notes table", "notes") ","
                    CALL("write_file", "{\"path\": \"organism/migrations/0001_notes.sql\", \"content\": "
                                       "\"CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);\\n"
                                       "INSERT INTO notes (body) VALUES ('hello-row');\\n\"}") ","
                    CALL("migrate", "{}") ","
                    MCALL("Applied 1 new migration", "db_query", "{\"sql\": \"SELECT id, body FROM notes;\"}") ","
                    MCALL("hello-row", "db_query",
                          "{\"sql\": \"SELECT current_database() AS db, current_user AS who\"}") ","
                    MCALL("evolver", "db_query", "{\"sql\": \"INSERT INTO notes (body) VALUES ('second-row')\"}") ","
                    MCALL("OK: 1 row affected", "db_query", "{\"sql\": \"SELECT v FROM live_only_secret\"}") ","
                    MCALL("does not exist", "db_schema", "{}") ","
                    MCALL("table notes", "start_app", "{}") ","
                    MCALL("is running and healthy", "start_app", "{}") ","
                    MCALL("is restarted and healthy", "http_request", "{\"method\": \"GET\", \"path\": \"/healthz\"}") ","
                    MCALL("HTTP/1.1 200 OK", "http_request", "{\"method\": \"GET\", \"path\": \"/\"}") ","
                    MCALL("This is a new Seed.", "http_request",
                          "{\"method\": \"POST\", \"path\": \"/nope\", \"body\": \"{}\"}") ","
                    MCALL("HTTP/1.1 404", "app_logs", "{\"lines\": 5}") ","
                    MCALL("organism listening on", "stop_app", "{}") ","
                    MCALL("The app is stopped.", "http_request", "{\"method\": \"GET\", \"path\": \"/\"}") ","
                    MCALL("no app is running", "start_app", "{}") ","
                    "{\"match\": \"is running and healthy\", \"tool_calls\": [{\"name\": \"finish\", "
                    "\"arguments\": {\"summary\": \"done\"}}]}," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        enum evo_state s = run_evolution("Keep notes", &id);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(current_gen(), before + 1);
        /* What the model saw. */
        assert_true(requests_contain("Applied 1 new migration to the scratch database"));
        assert_true(requests_contain("0001_notes.sql"));
        assert_true(requests_contain("[{\\\"id\\\":1,\\\"body\\\":\\\"hello-row\\\"}]"));
        char want[160];
        snprintf(want, sizeof want, "[{\\\"db\\\":\\\"%s\\\",\\\"who\\\":\\\"evolver\\\"}]", id);
        if (!requests_contain(want))
                fail_msg("db_query did not run on %s as evolver", id);
        assert_true(requests_contain("relation \\\"live_only_secret\\\" does not exist"));
        assert_false(requests_contain("live-data-xyz"));
        assert_true(requests_contain("  body text not null"));
        assert_true(requests_contain("HTTP/1.1 200 OK"));
        assert_true(requests_contain("{\\\"ok\\\":true}"));
        assert_true(requests_contain("content-type: text/html"));
        /* The live database got the migration at apply, never db_query's row. */
        _cleanup_free_ char *live_rows = live_value("SELECT string_agg(body, ',' ORDER BY id) FROM notes");
        assert_string_equal(live_rows, "hello-row");
        /* The evolution's end stopped the app left running (before its
         * worktree went). */
        assert_true(worktree_gone(id));
        snprintf(want, sizeof want, "%s/.seed/preview/%s-app", seed_dir, id);
        assert_false(path_exists(want));
}

/* GET path from the live organism over its bridge socket. */
static char *live_get(const char *path) {
        int fd = -1;
        assert_int_equal(organism_connect(organism_socket(g_org), 2000, &fd), 0);
        char req[256];
        int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
        assert_int_equal(write(fd, req, n), n);
        struct buf_s {
                char d[65536];
                size_t len;
        } *b = calloc(1, sizeof *b);
        ssize_t k;
        while (b->len < sizeof b->d - 1 && (k = read(fd, b->d + b->len, sizeof b->d - 1 - b->len)) > 0)
                b->len += (size_t)k;
        close(fd);
        char *r = strdup(b->d);
        free(b);
        return r;
}

/* With a live organism: apply restarts it and the new generation serves. */
static void test_live_organism_serves_new_generation(void **state) {
        _cleanup_free_ char *live_url = NULL, *run_dir = path_join(seed_dir, ".seed/organism"),
                            *log_path = path_join(seed_dir, ".seed/logs/organism.log"),
                            *logs = path_join(seed_dir, ".seed/logs");
        assert_int_equal(mkdir_p(run_dir, 0700), 0);
        assert_int_equal(mkdir_p(logs, 0700), 0);
        assert_int_equal(pg_sandbox_url(g_pg, "organism", PG_LIVE_DB, &live_url), 0);
        struct organism_config oc = {
                .seed_dir = seed_dir,
                .build_cmd = g_cfg->organism.build,
                .run_cmd = g_cfg->organism.run,
                .health_path = g_cfg->organism.health,
                .port = g_cfg->organism.port,
                .database_url = live_url,
                .pg_socket_dir = pg_socket_dir(g_pg),
                .bridge_path = BRIDGE,
                .run_dir = run_dir,
                .log_path = log_path,
        };
        assert_int_equal(organism_new(&oc, &g_org), 0);
        assert_int_equal(organism_start(g_org), 0);
        assert_int_equal(organism_wait_ready(g_org, 60000), 0);
        orch_stop(g_orch);
        start_orch();
        /* The new generation takes 2 s to start listening, so applying it
         * lasts long enough to try cancelling it. */
        load_script("[" PLAN("Live greeting", "live") ","
                    CALL("edit_file", "{\"path\": \"organism/bin/server\", \"old_text\": \"This is a new Seed.\", "
                                      "\"new_text\": \"Served live by the new generation.\"}") ","
                    CALL("edit_file", "{\"path\": \"organism/bin/server\", \"old_text\": \"'use strict';\", "
                                      "\"new_text\": \"'use strict';\\nAtomics.wait(new Int32Array(new "
                                      "SharedArrayBuffer(4)), 0, 0, 2000);\"}") ","
                    FINISH "," REFLECT "]");
        _cleanup_free_ char *id = NULL;
        assert_int_equal(orch_submit(g_orch, "Change the live greeting", NULL, &id), 0);
        /* Once main moves a cancel is refused: the generation ends live or
         * rolled back, never half-applied and labelled cancelled. */
        enum evo_state s = EVO_REQUESTED;
        int64_t deadline = now_ms() + 240000;
        while (s != EVO_APPLYING && !evo_state_is_final(s) && now_ms() < deadline) {
                sleep_ms(20);
                assert_int_equal(evo_get_state(g_db, id, &s), 0);
        }
        assert_int_equal(s, EVO_APPLYING);
        assert_int_equal(orch_cancel(g_orch, id), -EBUSY);
        s = wait_final(id, 120000);
        if (s != EVO_COMPLETE)
                dump_events(id);
        assert_int_equal(s, EVO_COMPLETE);
        assert_int_equal(organism_state(g_org), ORGANISM_RUNNING);
        _cleanup_free_ char *page = live_get("/");
        if (!strstr(page, "Served live by the new generation."))
                fail_msg("live page: %.400s", page);
        orch_stop(g_orch);
        organism_stop(g_org);
        organism_free(g_org);
        g_org = NULL;
        start_orch();
}

int main(void) {
        if (getenv("ORCH_TEST_FILTER")) /* e.g. "test_refused*": one test (those needing no earlier ones) */
                cmocka_set_test_filter(getenv("ORCH_TEST_FILTER"));
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_evolution_completes),
                cmocka_unit_test(test_build_failure_is_repaired),
                cmocka_unit_test(test_repairs_exhausted),
                cmocka_unit_test(test_kernel_write_denied),
                cmocka_unit_test(test_kernel_write_approved),
                cmocka_unit_test(test_shell_outside_evolvable),
                cmocka_unit_test(test_cancel_while_waiting),
                cmocka_unit_test(test_no_model),
                cmocka_unit_test(test_rollback),
                cmocka_unit_test(test_question_and_approvals),
                cmocka_unit_test(test_refused_staged_plan_keeps_no_roadmap),
                cmocka_unit_test(test_owner_roadmap_over_16k_is_kept),
                cmocka_unit_test(test_three_questions_at_most),
                cmocka_unit_test(test_boot_recovery),
                cmocka_unit_test(test_boot_removes_leftovers_without_worktree),
                cmocka_unit_test(test_preview_changes_make_one_commit),
                cmocka_unit_test(test_preview_expires_without_a_decision),
                cmocka_unit_test(test_live_migration_failure_rolls_back),
                cmocka_unit_test(test_rollback_with_data),
                cmocka_unit_test(test_app_and_db_tools),
                cmocka_unit_test(test_live_organism_serves_new_generation),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
