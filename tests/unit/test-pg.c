/* Unit tests for kernel/pg's backups folder (backup.c): the file names, which
 * backup a rollback finds and which ones a prune keeps. Plain files stand in
 * for the dumps; taking and restoring real ones is tests/integration/test-pg.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/fileio.h"
#include "pg/pg.h"
#include "pg/wire.h"

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
        assert_int_equal(pg_backup_generation("daily-4-abc.dump"), 4);
        assert_int_equal(pg_backup_generation("manual-5-abc.dump"), 5);
        assert_int_equal(pg_backup_generation("restore-6-abc.dump"), 6);
        assert_int_equal(pg_backup_generation("weekly-6-abc.dump"), 0);
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
        size_t keep = pg_backup_kind_keep(PG_BACKUP_BEFORE_APPLY);
        assert_int_equal(keep, 10);
        for (int i = 0; i < (int)keep + 3; i++) {
                char name[64];
                snprintf(name, sizeof name, "gen-%d-%02x.dump", i + 1, i);
                put(name, 1000 + i);
        }
        put("manual-1-aa.dump", 1);  /* older than all of them, another kind */
        put("notes.txt", 1);
        /* gen-2-01 is spared: the backup a restore is about to read */
        assert_int_equal(pg_backup_prune(seed_dir, PG_BACKUP_BEFORE_APPLY, keep, "gen-2-01"), 0);
        assert_true(present("gen-2-01.dump"));
        assert_int_equal(pg_backup_prune(seed_dir, PG_BACKUP_BEFORE_APPLY, keep, NULL), 0);
        assert_false(present("gen-2-01.dump"));
        assert_false(present("gen-1-00.dump"));
        assert_false(present("gen-3-02.dump"));
        assert_true(present("gen-4-03.dump"));
        assert_true(present("gen-13-0c.dump"));
        assert_true(present("notes.txt"));        /* only backups are pruned */
        assert_true(present("manual-1-aa.dump")); /* and only of that kind */
        assert_int_equal(pg_backup_prune(seed_dir, PG_BACKUP_BEFORE_APPLY, 1, NULL), 0);
        assert_false(present("gen-12-0b.dump"));
        assert_found(0, "gen-13-0c.dump");
        assert_int_equal(pg_backup_prune(seed_dir, PG_BACKUP_KINDS, 1, NULL), -EINVAL);
}

static void test_kinds_listed_and_kept(void **state) {
        (void)state;
        /* Each kind keeps its own count: 7 daily, 10 manual, 5 before-restore. */
        static const struct {
                enum pg_backup_kind kind;
                const char *prefix;
                size_t keep;
        } kinds[] = {
                {PG_BACKUP_DAILY, "daily", 7},
                {PG_BACKUP_MANUAL, "manual", 10},
                {PG_BACKUP_BEFORE_RESTORE, "restore", 5},
        };
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                assert_int_equal(pg_backup_kind_keep(kinds[k].kind), kinds[k].keep);
                for (int i = 0; i < 12; i++) {
                        char name[64];
                        snprintf(name, sizeof name, "%s-2-%02x.dump", kinds[k].prefix, i);
                        put(name, 2000 + (time_t)k * 100 + i);
                }
                assert_int_equal(pg_backup_prune(seed_dir, kinds[k].kind, kinds[k].keep, NULL), 0);
        }
        struct pg_backup_info *v = NULL;
        size_t n = 0;
        assert_int_equal(pg_backup_list(seed_dir, &v, &n), 0);
        assert_int_equal(n, 7 + 10 + 5);
        /* Newest first: the last before-restore one. */
        assert_string_equal(v[0].id, "restore-2-0b");
        assert_int_equal(v[0].kind, PG_BACKUP_BEFORE_RESTORE);
        assert_string_equal(pg_backup_kind_name(v[0].kind), "before-restore");
        assert_int_equal(v[0].generation, 2);
        assert_int_equal(v[0].size, 1);
        assert_int_equal(v[0].time_ns, (int64_t)2211 * 1000000000);
        assert_string_equal(v[n - 1].id, "daily-2-05"); /* the oldest daily kept */
        free(v);
}

static void test_ids(void **state) {
        (void)state;
        assert_true(pg_backup_id_valid("gen-3-abc"));
        assert_true(pg_backup_id_valid("daily-12-0123456789ab"));
        assert_true(pg_backup_id_valid("manual-1-a"));
        assert_true(pg_backup_id_valid("restore-1-a"));
        assert_false(pg_backup_id_valid("gen-3-abc.dump"));
        assert_false(pg_backup_id_valid("weekly-3-abc"));
        assert_false(pg_backup_id_valid("manual-0-abc"));
        assert_false(pg_backup_id_valid("manual-01-abc"));
        assert_false(pg_backup_id_valid("manual-1-"));
        assert_false(pg_backup_id_valid("manual-1-../../x"));
        assert_false(pg_backup_id_valid("manual-1-ab/cd"));
        assert_false(pg_backup_id_valid("manual-1234567890-ab"));
        assert_false(pg_backup_id_valid(""));
        assert_false(pg_backup_id_valid(NULL));
        char longer[PG_BACKUP_ID_MAX + 8] = "manual-1-";
        memset(longer + 9, 'a', sizeof longer - 10);
        longer[sizeof longer - 1] = 0;
        assert_false(pg_backup_id_valid(longer));
        char *path = NULL;
        assert_int_equal(pg_backup_path(seed_dir, "manual-1-ab", &path), -ENOENT);
        assert_int_equal(pg_backup_path(seed_dir, "../x", &path), -EINVAL);
        put("manual-1-ab.dump", 5);
        assert_int_equal(pg_backup_path(seed_dir, "manual-1-ab", &path), 0);
        assert_true(endswith(path, "/.seed/backups/manual-1-ab.dump"));
        free(path);
        path = NULL;
        /* A symlink planted in the folder is not a backup. */
        _cleanup_free_ char *link = NULL;
        assert_int_equal(xasprintf(&link, "%s/.seed/backups/manual-1-cd.dump", seed_dir), 0);
        assert_int_equal(symlink("/etc/passwd", link), 0);
        assert_int_equal(pg_backup_path(seed_dir, "manual-1-cd", &path), -ENOENT);
        assert_null(path);
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
        assert_int_equal(pg_backup_take(fake, seed_dir, 1, NULL, &got), -EINVAL);
        assert_int_equal(pg_backup_take_kind(fake, seed_dir, PG_BACKUP_KINDS, 1, NULL, NULL, &got), -EINVAL);
        assert_int_equal(pg_backup_take_kind(fake, seed_dir, PG_BACKUP_MANUAL, 1, "xyz", NULL, &got), -EINVAL);
        assert_null(got);
}

/* ---- the relay's reading of the wire protocol (wire.c) ---- */

static const char *const who_users[] = {"s_1_organism", "s_1_evolver", "s_1_reader"};
static const struct pg_wire_who who = {.users = who_users, .n_users = 3, .db_prefix = "s_1_", .kernel_db = "s_1_kernel",
                                       .copy_prefix = "s_1_preview_"};

/* A startup packet of protocol 3.0 with the given key\0value\0 pairs. */
static size_t startup(unsigned char *out, const char *pairs, size_t pairs_len) {
        size_t n = 8 + pairs_len + 1;
        out[0] = n >> 24, out[1] = n >> 16, out[2] = n >> 8, out[3] = n;
        out[4] = 0, out[5] = 3, out[6] = 0, out[7] = 0;
        memcpy(out + 8, pairs, pairs_len);
        out[n - 1] = 0;
        return n;
}
#define STARTUP(buf, lit) startup(buf, lit, sizeof(lit) - 1)

static void test_wire_startup(void **state) {
        (void)state;
        unsigned char p[256];
        const char *why = NULL;
        size_t n = STARTUP(p, "user\0s_1_organism\0database\0s_1_live\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), 0);
        assert_null(why);
        n = STARTUP(p, "user\0s_1_evolver\0database\0s_1_evo_x_test\0application_name\0psql\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), 0);
        /* A preview's role (a copy of the live data), into its own database. */
        n = STARTUP(p, "user\0s_1_preview_ab12\0database\0s_1_preview_ab12\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), 0);
        /* Not the Seed's roles (another Seed's preview, the bare prefix), databases, or the kernel's memory. */
        n = STARTUP(p, "user\0s_2_preview_ab12\0database\0s_1_live\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        n = STARTUP(p, "user\0s_1_preview_\0database\0s_1_live\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        n = STARTUP(p, "user\0hoster\0database\0s_1_live\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        assert_non_null(strstr(why, "roles"));
        n = STARTUP(p, "user\0s_1_organism\0database\0s_2_live\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        assert_non_null(strstr(why, "databases"));
        n = STARTUP(p, "user\0s_1_reader\0database\0s_1_kernel\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        n = STARTUP(p, "user\0s_1_organism\0database\0postgres\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        n = STARTUP(p, "user\0s_1_organism\0database\0s_1_live\0replication\0database\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        assert_non_null(strstr(why, "replication"));
        n = STARTUP(p, "user\0s_1_organism\0database\0s_1_live\0replication\0false\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), 0);
        /* No database: PostgreSQL takes the user's name, which is no database of ours. */
        n = STARTUP(p, "user\0s_1_organism\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), 0); /* s_1_organism has the prefix; */
        /* the server then finds no such database. A later duplicate key wins, as in PostgreSQL. */
        n = STARTUP(p, "user\0s_1_organism\0user\0hoster\0database\0s_1_live\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        /* Malformed: a key without a value, a length that lies, no final NUL,
         * another protocol, too long. */
        n = STARTUP(p, "user\0");
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EBADMSG);
        n = STARTUP(p, "user\0s_1_organism\0database\0s_1_live\0");
        assert_int_equal(pg_wire_startup_check(p, n - 1, &who, &why), -EBADMSG);
        p[n - 1] = 'x';
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EBADMSG);
        n = STARTUP(p, "user\0s_1_organism\0database\0s_1_live\0");
        p[5] = 2;
        assert_int_equal(pg_wire_startup_check(p, n, &who, &why), -EPERM);
        assert_non_null(strstr(why, "protocol 3"));
        assert_int_equal(pg_wire_startup_check(p, PG_WIRE_STARTUP_MAX + 1, &who, &why), -EBADMSG);
}

static void test_wire_scram_plus(void **state) {
        (void)state;
        /* AuthenticationSASL offering both mechanisms. */
        static const char body[] = "SCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0";
        unsigned char m[128] = {'R'};
        size_t n = 1 + 4 + 4 + sizeof(body) - 1 + 1;
        m[4] = (unsigned char)(n - 1);
        m[8] = 10;
        memcpy(m + 9, body, sizeof(body) - 1);
        size_t out = 0;
        assert_int_equal(pg_wire_drop_scram_plus(m, n, &out), 0);
        assert_int_equal(out, 1 + 4 + 4 + strlen("SCRAM-SHA-256") + 2);
        assert_int_equal(m[4], out - 1);
        assert_string_equal((char *)m + 9, "SCRAM-SHA-256");
        assert_int_equal(m[out - 1], 0);
        /* AuthenticationOk (0) passes untouched; a lying length does not. */
        unsigned char ok[9] = {'R', 0, 0, 0, 8, 0, 0, 0, 0};
        assert_int_equal(pg_wire_drop_scram_plus(ok, 9, &out), 0);
        assert_int_equal(out, 9);
        ok[4] = 9;
        assert_int_equal(pg_wire_drop_scram_plus(ok, 9, &out), -EBADMSG);
        /* A SASL list without its final NUL. */
        unsigned char bad[16] = {'R', 0, 0, 0, 12, 0, 0, 0, 10, 'A', 'B', 0, 'C'};
        assert_int_equal(pg_wire_drop_scram_plus(bad, 13, &out), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_generation_from_name),
                cmocka_unit_test(test_wire_startup),
                cmocka_unit_test(test_wire_scram_plus),
                cmocka_unit_test_setup_teardown(test_find_newest_of_a_generation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_prune_keeps_the_newest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_take_refuses_bad_names, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kinds_listed_and_kept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ids, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
