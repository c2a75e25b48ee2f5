/* Unit tests for kernel/repo: a real libgit2 repository in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "repo/repo.h"

static char *make_seed_dir(void) {
        char tmpl[] = "/tmp/seed-test-repo-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *dir = strdup(tmpl);
        _cleanup_free_ char *gi = path_join(dir, ".gitignore");
        _cleanup_free_ char *f = path_join(dir, "seed.yaml");
        _cleanup_free_ char *hidden = path_join(dir, ".seed");
        _cleanup_free_ char *secret = path_join(dir, ".seed/secret");
        assert_int_equal(write_file_atomic(gi, "/.seed/\n", 8, 0644), 0);
        assert_int_equal(write_file_atomic(f, "name: t\n", 8, 0644), 0);
        assert_int_equal(mkdir_p(hidden, 0700), 0);
        assert_int_equal(write_file_atomic(secret, "x", 1, 0600), 0);
        return dir;
}

static void test_init_commit_and_generation(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        _cleanup_free_ char *err = NULL;
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", &err), 0);
        int gen = 0;
        assert_int_equal(repo_current_generation(dir, &gen), 0);
        assert_int_equal(gen, 1);

        struct repo_generation *g = NULL;
        size_t n = 0;
        assert_int_equal(repo_generations(dir, &g, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(g[0].number, 1);
        assert_string_equal(g[0].summary, "Initial seed");
        assert_int_equal(strlen(g[0].commit), 40);
        repo_generations_free(g, n);
        rm_rf(dir);
}

static void test_ignored_files_not_committed(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", NULL), 0);
        /* The object store must not contain the ignored file: look for its
         * path in the index file, which lists every tracked path. */
        _cleanup_free_ char *idx = path_join(dir, ".git/index");
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(idx, 1 << 20, &data, &len), 0);
        assert_null(memmem(data, len, ".seed/secret", 12));
        assert_non_null(memmem(data, len, "seed.yaml", 9));
        rm_rf(dir);
}

static void test_no_reinit(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", NULL), 0);
        _cleanup_free_ char *err = NULL;
        assert_true(repo_init_commit(dir, "again", "seed/gen-1", &err) < 0);
        assert_non_null(err);
        rm_rf(dir);
}

static void test_not_a_repo(void **state) {
        int gen;
        assert_true(repo_current_generation("/nonexistent-seed-dir", &gen) < 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_init_commit_and_generation),
                cmocka_unit_test(test_ignored_files_not_committed),
                cmocka_unit_test(test_no_reinit),
                cmocka_unit_test(test_not_a_repo),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
