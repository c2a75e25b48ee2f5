/* Unit tests for kernel/db: the parts that need no server (migration names,
 * checksums, list validation, the embedded kernel migrations). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "base/crypto.h"
#include "base/fileio.h"
#include "db/db.h"

static struct db_migration mig(const char *name, const char *sql) {
        struct db_migration m = {.name = name, .sql = sql, .len = strlen(sql)};
        assert_int_equal(db_migration_parse_name(name, &m.version), 0);
        return m;
}

static void test_parse_name_accepts(void **state) {
        int v = -1;
        assert_int_equal(db_migration_parse_name("0001_init.sql", &v), 0);
        assert_int_equal(v, 1);
        assert_int_equal(db_migration_parse_name("0042_add_users_2.sql", &v), 0);
        assert_int_equal(v, 42);
        assert_int_equal(db_migration_parse_name("12345_many.sql", &v), 0);
        assert_int_equal(v, 12345);
        assert_int_equal(db_migration_parse_name("0007_x.sql", NULL), 0);
}

static void test_parse_name_rejects(void **state) {
        static const char *const bad[] = {
                "", "init.sql", "001_short.sql", "0001.sql", "0001_.sql", "0001_init", "0001_init.SQL",
                "0001_Init.sql", "0001-init.sql", "0001_in-it.sql", "0001_in it.sql", "0001_init.sql.bak",
                "0000_zero.sql", "../0001_init.sql", "0001_a/b.sql", "1234567890_too_big.sql", "x0001_init.sql",
                "0001_init.sql\n",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                int v = -7;
                if (db_migration_parse_name(bad[i], &v) != -EINVAL)
                        fail_msg("accepted '%s'", bad[i]);
                assert_int_equal(v, -7); /* untouched on failure */
        }
        assert_int_equal(db_migration_parse_name(NULL, NULL), -EINVAL);
        char longname[200];
        memset(longname, 'a', sizeof longname);
        memcpy(longname, "0001_", 5);
        strcpy(longname + sizeof longname - 5, ".sql");
        assert_int_equal(db_migration_parse_name(longname, NULL), -EINVAL);
}

static void test_checksum_stable(void **state) {
        struct db_migration a = mig("0001_a.sql", "CREATE TABLE t (x int);\n");
        struct db_migration b = mig("0002_b.sql", "CREATE TABLE t (x int);\n");
        struct db_migration c = mig("0001_a.sql", "CREATE TABLE t (x int); \n");
        char sa[65], sa2[65], sb[65], sc[65];
        db_migration_checksum(&a, sa);
        db_migration_checksum(&a, sa2);
        db_migration_checksum(&b, sb);
        db_migration_checksum(&c, sc);
        assert_int_equal(strlen(sa), 64);
        assert_string_equal(sa, sa2);
        assert_string_equal(sa, sb);    /* the text, not the name */
        assert_string_not_equal(sa, sc); /* one byte differs */
        /* A known value: sha256("") */
        struct db_migration e = {.name = "0001_e.sql", .sql = "", .len = 0, .version = 1};
        char se[65];
        db_migration_checksum(&e, se);
        assert_string_equal(se, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_validate_ok(void **state) {
        struct db_migration m[] = {mig("0001_a.sql", "select 1"), mig("0002_b.sql", "select 2"),
                                   mig("0010_c.sql", "select 3")};
        char *err = NULL;
        assert_int_equal(db_migrations_validate(m, 3, &err), 0);
        assert_null(err);
        assert_int_equal(db_migrations_validate(m, 0, &err), 0);
}

static void test_validate_rejects_duplicates(void **state) {
        struct db_migration m[] = {mig("0001_a.sql", "select 1"), mig("0001_b.sql", "select 2")};
        _cleanup_free_ char *err = NULL;
        assert_int_equal(db_migrations_validate(m, 2, &err), -EINVAL);
        assert_non_null(err);
        assert_non_null(strstr(err, "duplicate"));
        assert_non_null(strstr(err, "0001_b.sql"));
}

static void test_validate_rejects_out_of_order(void **state) {
        struct db_migration m[] = {mig("0002_b.sql", "select 2"), mig("0001_a.sql", "select 1")};
        _cleanup_free_ char *err = NULL;
        assert_int_equal(db_migrations_validate(m, 2, &err), -EINVAL);
        assert_non_null(strstr(err, "out of order"));
        assert_non_null(strstr(err, "0001_a.sql"));
}

static void test_validate_rejects_bad_entries(void **state) {
        /* Version field that disagrees with the name. */
        struct db_migration m1[] = {{.name = "0003_a.sql", .sql = "x", .len = 1, .version = 4}};
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;
        assert_int_equal(db_migrations_validate(m1, 1, &e1), -EINVAL);
        assert_non_null(strstr(e1, "0003_a.sql"));
        /* A NUL inside the text would be cut off by the server. */
        struct db_migration m2[] = {{.name = "0001_a.sql", .sql = "se\0lect", .len = 7, .version = 1}};
        assert_int_equal(db_migrations_validate(m2, 1, &e2), -EINVAL);
        assert_non_null(strstr(e2, "NUL"));
        /* A bad name. */
        struct db_migration m3[] = {{.name = "init.sql", .sql = "x", .len = 1, .version = 1}};
        assert_int_equal(db_migrations_validate(m3, 1, &e3), -EINVAL);
        assert_non_null(strstr(e3, "init.sql"));
        assert_int_equal(db_migrations_validate(m3, 1, NULL), -EINVAL);
}

static void test_kernel_migrations_valid(void **state) {
        struct db_migration *m = NULL;
        size_t n = 0;
        assert_int_equal(db_kernel_migrations(&m, &n), 0);
        assert_true(n >= 1);
        assert_string_equal(m[0].name, "0001_init.sql");
        assert_int_equal(m[0].version, 1);
        assert_non_null(strstr(m[0].sql, "signin_links"));
        assert_non_null(strstr(m[0].sql, "owner_sessions"));
        assert_int_equal(db_migrations_validate(m, n, NULL), 0);

        /* The embedded bytes are exactly the source files. */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL, *data = NULL;
                size_t len = 0;
                assert_int_equal(xasprintf(&path, "%s/kernel/db/migrations/%s", SEED_SOURCE_ROOT, m[i].name), 0);
                assert_int_equal(read_file(path, 1 << 20, &data, &len), 0);
                assert_int_equal(len, m[i].len);
                assert_memory_equal(data, m[i].sql, len);
        }
        free(m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_name_accepts),
                cmocka_unit_test(test_parse_name_rejects),
                cmocka_unit_test(test_checksum_stable),
                cmocka_unit_test(test_validate_ok),
                cmocka_unit_test(test_validate_rejects_duplicates),
                cmocka_unit_test(test_validate_rejects_out_of_order),
                cmocka_unit_test(test_validate_rejects_bad_entries),
                cmocka_unit_test(test_kernel_migrations_valid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
