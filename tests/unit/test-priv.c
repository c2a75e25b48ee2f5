/* Unit tests for kernel/base/priv: handing a tree to the unprivileged account
 * must never reach outside it (symlinks, hard links, .seed/). Needs root to
 * change owners; otherwise each test is a skip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "base/priv.h"

#define OTHER_UID 43210
#define OTHER_GID 43210

static uid_t owner(const char *path) {
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        return st.st_uid;
}

static char *mk(const char *dir, const char *rel) {
        char *p = path_join(dir, rel);
        assert_non_null(p);
        return p;
}

static void test_chown_tree_stays_inside(void **state) {
        if (geteuid() != 0)
                skip();
        char tmpl[] = "/tmp/seed-test-priv-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *tree = mk(tmpl, "tree"), *outside = mk(tmpl, "outside"),
                            *outfile = mk(tmpl, "outside/secret"), *hard_target = mk(tmpl, "outside/hard"),
                            *sub = mk(tmpl, "tree/a/b"), *file = mk(tmpl, "tree/a/b/f"),
                            *slink = mk(tmpl, "tree/a/link"), *hard = mk(tmpl, "tree/a/hard"),
                            *dotseed = mk(tmpl, "tree/.seed"), *dotfile = mk(tmpl, "tree/.seed/x");
        assert_int_equal(mkdir_p(sub, 0755), 0);
        assert_int_equal(mkdir_p(outside, 0755), 0);
        assert_int_equal(mkdir_p(dotseed, 0700), 0);
        assert_int_equal(write_file_atomic(outfile, "s", 1, 0600), 0);
        assert_int_equal(write_file_atomic(hard_target, "h", 1, 0600), 0);
        assert_int_equal(write_file_atomic(file, "f", 1, 0644), 0);
        assert_int_equal(write_file_atomic(dotfile, "x", 1, 0600), 0);
        assert_int_equal(symlink(outside, slink), 0);
        assert_int_equal(link(hard_target, hard), 0);

        assert_int_equal(priv_chown_tree(tree, OTHER_UID, OTHER_GID), 0);
        assert_int_equal(owner(tree), OTHER_UID);
        assert_int_equal(owner(sub), OTHER_UID);
        assert_int_equal(owner(file), OTHER_UID);
        assert_int_equal(owner(slink), OTHER_UID);    /* the link itself */
        assert_int_equal(owner(outside), 0);         /* not what it points to */
        assert_int_equal(owner(outfile), 0);
        assert_int_equal(owner(hard_target), 0);     /* a hard link is left alone */
        assert_int_equal(owner(dotfile), 0);         /* .seed/ is never entered */

        /* Once the top belongs to the account, nothing is walked again. */
        assert_int_equal(lchown(file, 0, 0), 0);
        assert_int_equal(priv_chown_tree(tree, OTHER_UID, OTHER_GID), 0);
        assert_int_equal(owner(file), 0);
        rm_rf(tmpl);
}

static void test_chown_tree_refuses_a_symlinked_top(void **state) {
        if (geteuid() != 0)
                skip();
        char tmpl[] = "/tmp/seed-test-priv-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *real = mk(tmpl, "real"), *alias = mk(tmpl, "alias");
        assert_int_equal(mkdir(real, 0755), 0);
        assert_int_equal(symlink(real, alias), 0);
        int r = priv_chown_tree(alias, OTHER_UID, OTHER_GID);
        assert_true(r == -ELOOP || r == -ENOTDIR);
        assert_int_equal(owner(real), 0);
        rm_rf(tmpl);
}

static void test_reachable(void **state) {
        char tmpl[] = "/tmp/seed-test-priv-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        _cleanup_free_ char *inner = mk(tmpl, "inner");
        assert_int_equal(mkdir(inner, 0755), 0);
        assert_int_equal(chmod(tmpl, 0700), 0);
        _cleanup_free_ char *blocker = NULL;
        uid_t me = geteuid();
        /* The owner may pass; another uid may not. */
        assert_int_equal(priv_path_reachable(inner, me, getegid(), NULL), 1);
        assert_int_equal(priv_path_reachable(inner, me + 1, OTHER_GID, &blocker), 0);
        assert_string_equal(blocker, tmpl);
        assert_int_equal(chmod(tmpl, 0755), 0);
        assert_int_equal(priv_path_reachable(inner, me + 1, OTHER_GID, NULL), 1);
        /* The directory itself is not asked: a Seed's folder is 0700 until handed over. */
        assert_int_equal(chmod(inner, 0700), 0);
        assert_int_equal(priv_path_reachable(inner, me + 1, OTHER_GID, NULL), 1);
        rm_rf(tmpl);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_chown_tree_stays_inside),
                cmocka_unit_test(test_chown_tree_refuses_a_symlinked_top),
                cmocka_unit_test(test_reachable),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
