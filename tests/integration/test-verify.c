/* Integration tests for kernel/evolution/verify: the kernel's own checks of
 * an evolution's worktree, with a real PostgreSQL, real bwrap and the starter
 * organism (runs as the unprivileged account). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "base/fileio.h"
#include "base/priv.h"
#include "base/proc.h"
#include "config/config.h"
#include "evolution/verify.h"
#include "fsx/fsx.h"
#include "pg/pg.h"

static char seed_dir[64];
static char worktree[128];
static struct pg *g_pg;
static struct cfg *g_cfg;
static char checks[512];

static int setup(void **state) {
        if (priv_drop_if_root(NULL) < 0)
                return -1;
        snprintf(seed_dir, sizeof seed_dir, "/tmp/seed-test-verify-XXXXXX");
        if (!mkdtemp(seed_dir) || pg_start(seed_dir, &g_pg) < 0 || cfg_new_default(&g_cfg) < 0)
                return -1;
        g_cfg->evolution.command_timeout_seconds = 120;
        return 0;
}

static int teardown(void **state) {
        pg_stop(g_pg);
        cfg_free(g_cfg);
        rm_rf(seed_dir);
        return 0;
}

/* A fresh worktree holding the starter organism. */
static void fresh_worktree(void) {
        snprintf(worktree, sizeof worktree, "%s/.seed/worktrees/evo_00000000000000aa", seed_dir);
        rm_rf(worktree);
        assert_int_equal(mkdir_p(worktree, 0755), 0);
        char *cp[] = {"/bin/cp", "-r", SEED_SOURCE_ROOT "/organism", worktree, NULL};
        struct proc_result res = {0};
        assert_int_equal(proc_run(&(struct proc_opts){.argv = cp, .stdin_fd = -1, .out_fd = -1}, &res), 0);
        assert_int_equal(res.exit_code, 0);
        proc_result_done(&res);
        checks[0] = 0;
}

static void write_in(const char *rel, const char *text) {
        _cleanup_free_ char *p = path_join(worktree, rel);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0644), 0);
}

static void on_check(void *ud, const struct evo_check *c) {
        size_t n = strlen(checks);
        snprintf(checks + n, sizeof checks - n, "%s%s:%s", n ? " " : "", c->name, c->ok ? "ok" : "FAIL");
}

static int verify(struct evo_check **failed) {
        struct evo_verify_config c = {
                .seed_dir = seed_dir,
                .worktree = worktree,
                .evo_id = "evo_00000000000000aa",
                .cfg = g_cfg,
                .pg = g_pg,
                .bridge_path = SEED_BUILD_ROOT "/cmd/seed-bridge/seed-bridge",
                .on_check = on_check,
        };
        return evo_verify(&c, failed);
}

static void test_starter_organism_passes(void **state) {
        fresh_worktree();
        write_in("organism/migrations/0001_notes.sql", "CREATE TABLE notes (id serial PRIMARY KEY, body text);");
        struct evo_check *failed = NULL;
        int r = verify(&failed);
        if (failed)
                fail_msg("check %s failed: %s", failed->name, failed->output);
        assert_int_equal(r, 0);
        assert_string_equal(checks, "build:ok migrate:ok test:ok migrate:ok launch:ok healthz:ok root:ok");
}

static void test_build_failure_is_reported_with_its_output(void **state) {
        fresh_worktree();
        write_in("organism/Makefile", ".PHONY: build test\nbuild:\n\t@echo 'syntax error near line 3' >&2; exit 2\ntest:\n\ttrue\n");
        struct evo_check *failed = NULL;
        assert_int_equal(verify(&failed), -EIO);
        assert_string_equal(failed->name, "build");
        assert_non_null(strstr(failed->output, "syntax error near line 3"));
        assert_non_null(strstr(failed->output, "[exit code 2]"));
        assert_string_equal(checks, "build:FAIL");
        evo_check_free(failed);
}

static void test_bad_migration_is_reported(void **state) {
        fresh_worktree();
        write_in("organism/migrations/0001_bad.sql", "CREATE TABLE oops (;");
        struct evo_check *failed = NULL;
        assert_int_equal(verify(&failed), -EIO);
        assert_string_equal(failed->name, "migrate");
        assert_non_null(strstr(failed->output, "0001_bad.sql"));
        evo_check_free(failed);
}

static void test_symlinked_migration_is_refused(void **state) {
        fresh_worktree();
        _cleanup_free_ char *link = path_join(worktree, "organism/migrations/0001_x.sql");
        assert_int_equal(symlink("/etc/passwd", link), 0);
        struct evo_check *failed = NULL;
        assert_int_equal(verify(&failed), -EIO);
        assert_string_equal(failed->name, "migrate");
        if (!strstr(failed->output, "symlink"))
                fail_msg("unexpected: %s", failed->output);
        assert_null(strstr(failed->output, "root:x:0")); /* nothing of the host file leaks */
        evo_check_free(failed);
}

static void test_failing_tests_are_reported(void **state) {
        fresh_worktree();
        write_in("organism/Makefile", ".PHONY: build test\nbuild:\n\ttrue\ntest:\n\t@echo 'expected 200, got 500'; exit 1\n");
        struct evo_check *failed = NULL;
        int r = verify(&failed);
        if (r != -EIO)
                fail_msg("verify gave %d, checks: %s", r, checks);
        assert_string_equal(failed->name, "test");
        assert_non_null(strstr(failed->output, "expected 200, got 500"));
        assert_string_equal(checks, "build:ok migrate:ok test:FAIL");
        evo_check_free(failed);
}

static void test_app_that_never_gets_healthy(void **state) {
        fresh_worktree();
        write_in("organism/Makefile", ".PHONY: build test\nbuild:\n\ttrue\ntest:\n\ttrue\n");
        write_in("organism/bin/server", "#!/bin/sh\necho 'cannot bind: boom' >&2\nexit 3\n");
        _cleanup_free_ char *p = path_join(worktree, "organism/bin/server");
        assert_int_equal(chmod(p, 0755), 0);
        struct evo_check *failed = NULL;
        assert_int_equal(verify(&failed), -EIO);
        assert_string_equal(failed->name, "launch");
        assert_non_null(strstr(failed->output, "cannot bind: boom"));
        evo_check_free(failed);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_starter_organism_passes),
                cmocka_unit_test(test_build_failure_is_reported_with_its_output),
                cmocka_unit_test(test_bad_migration_is_reported),
                cmocka_unit_test(test_symlinked_migration_is_refused),
                cmocka_unit_test(test_failing_tests_are_reported),
                cmocka_unit_test(test_app_that_never_gets_healthy),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
