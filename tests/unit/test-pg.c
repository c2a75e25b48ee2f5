/* Unit tests for kernel/pg's backups folder (backup.c): the file names, which
 * backup a rollback finds and which ones a prune keeps. Plain files stand in
 * for the dumps; taking and restoring real ones is tests/integration/test-pg.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "pg/pg.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

static void test_generation_from_name(void **state) {
        (void)state;
        assert_int_equal(pg_backup_generation("gen-1-abc.dump"), 1);
        assert_int_equal(pg_backup_generation("gen-12-0123456789abcdef.dump"), 12);
        assert_int_equal(pg_backup_generation("gen-0-abc.dump"), 0);
        assert_int_equal(pg_backup_generation("gen--1-abc.dump"), 0);
        assert_int_equal(pg_backup_generation("gen-1-ABC.dump"), 0);
        assert_int_equal(pg_backup_generation("gen-1-abc.dump.tmp"), 0);
        assert_int_equal(pg_backup_generation("gen-1-.dump"), 0);
        assert_int_equal(pg_backup_generation("gen-1-abc.dum"), 0);
        assert_int_equal(pg_backup_generation("x-gen-1-abc.dump"), 0);
        assert_int_equal(pg_backup_generation(""), 0);
        assert_int_equal(pg_backup_generation(NULL), 0);
}

static char *seed_dir;

static int setup(void **state) {
        (void)state;
        char tmpl[] = "/tmp/seed-test-pg-XXXXXX";
        if (!mkdtemp(tmpl))
                return -1;
        seed_dir = strdup(tmpl);
        return seed_dir ? 0 : -1;
}

static int teardown(void **state) {
        (void)state;
        rm_rf(seed_dir);
        free(seed_dir);
        return 0;
}

/* A backup file written at second t (mtime), so order needs no sleeps. */
static void put(const char *name, time_t t) {
        _cleanup_free_ char *dir = path_join(seed_dir, ".seed/backups"), *p = path_join(dir, name);
        assert_int_equal(mkdir_p(dir, 0700), 0);
        assert_int_equal(write_file_atomic(p, "x", 1, 0600), 0);
        struct timespec ts[2] = {{t, 0}, {t, 0}};
        assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static bool present(const char *name) {
        _cleanup_free_ char *p = NULL;
        assert_int_equal(xasprintf(&p, "%s/.seed/backups/%s", seed_dir, name), 0);
        return access(p, F_OK) == 0;
}

static void assert_found(int gen, const char *name) {
        _cleanup_free_ char *got = NULL, *want = NULL;
        assert_int_equal(pg_backup_find(seed_dir, gen, &got), 0);
        assert_int_equal(xasprintf(&want, "%s/.seed/backups/%s", seed_dir, name), 0);
        assert_string_equal(got, want);
}

static void test_find_newest_of_a_generation(void **state) {
        (void)state;
        char *got = NULL;
        assert_int_equal(pg_backup_find(seed_dir, 1, &got), -ENOENT); /* the folder is made, empty */
        assert_null(got);
        put("gen-1-aa.dump", 1000);
        put("gen-1-bb.dump", 3000);
        put("gen-2-cc.dump", 2000);
        put("gen-3-dd.dump.tmp", 9000); /* not a backup */
        put("notes.txt", 9000);
        assert_found(1, "gen-1-bb.dump");
        assert_found(2, "gen-2-cc.dump");
        assert_found(0, "gen-1-bb.dump");
        assert_int_equal(pg_backup_find(seed_dir, 3, &got), -ENOENT);
        assert_int_equal(pg_backup_find(seed_dir, -1, &got), -EINVAL);
}

static void test_prune_keeps_the_newest(void **state) {
        (void)state;
        for (int i = 0; i < PG_BACKUPS_KEPT + 3; i++) {
                char name[64];
                snprintf(name, sizeof name, "gen-%d-%02x.dump", i + 1, i);
                put(name, 1000 + i);
        }
        put("notes.txt", 1);
        assert_int_equal(pg_backup_prune(seed_dir, PG_BACKUPS_KEPT), 0);
        assert_false(present("gen-1-00.dump"));
        assert_false(present("gen-3-02.dump"));
        assert_true(present("gen-4-03.dump"));
        assert_true(present("gen-23-16.dump"));
        assert_true(present("notes.txt")); /* only backups are pruned */
        assert_int_equal(pg_backup_prune(seed_dir, 1), 0);
        assert_false(present("gen-22-15.dump"));
        assert_found(0, "gen-23-16.dump");
}

static void test_take_refuses_bad_names(void **state) {
        (void)state;
        char *got = NULL;
        /* Checked before any PostgreSQL is needed: a name the scanner would
         * not recognise would never be found or pruned. */
        struct pg *fake = (struct pg *)1;
        assert_int_equal(pg_backup_take(fake, seed_dir, 1, "ABC", &got), -EINVAL);
        assert_int_equal(pg_backup_take(fake, seed_dir, 1, "../x", &got), -EINVAL);
        assert_int_equal(pg_backup_take(fake, seed_dir, 1, "", &got), -EINVAL);
        assert_int_equal(pg_backup_take(fake, seed_dir, 0, "abc", &got), -EINVAL);
        assert_int_equal(pg_backup_take(NULL, seed_dir, 1, "abc", &got), -EINVAL);
        assert_null(got);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_generation_from_name),
                cmocka_unit_test_setup_teardown(test_find_newest_of_a_generation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_prune_keeps_the_newest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_take_refuses_bad_names, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
