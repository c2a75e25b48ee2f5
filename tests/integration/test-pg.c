/* Integration tests for kernel/pg and kernel/db against a real private
 * PostgreSQL started in a temporary Seed folder. Runs as the unprivileged
 * 'seed' account (drops root first). The tests share one server and run in
 * order: later ones restart it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "db/db.h"
#include "pg/pg.h"

static char seed_dir[64];
static struct pg *g_pg;
/* The structs of "dead kernels" (never stopped or freed, as a killed kernel
 * leaves them): kept reachable here, so LeakSanitizer does not report them. */
static struct pg *abandoned[4];
static size_t n_abandoned;

static struct pg *abandon(struct pg *pg) {
        if (n_abandoned < ARRAY_SIZE(abandoned))
                abandoned[n_abandoned++] = pg;
        return pg;
}
static int root_refusal = 1; /* result of pg_start as root, or 1 if not tested */

#define HOUR_MS (3600LL * 1000)
#define DAY_MS (24 * HOUR_MS)

static void need_pg(void) {
        if (!g_pg)
                skip();
}

static int connect_as(const char *role, const char *dbname, struct db **ret, char **ret_error) {
        _cleanup_free_ char *ci = NULL;
        assert_int_equal(pg_conninfo(g_pg, role, dbname, &ci), 0);
        return db_connect_err(ci, ret, ret_error);
}

static struct db *must_connect(const char *role, const char *dbname) {
        struct db *db = NULL;
        _cleanup_free_ char *err = NULL;
        int r = connect_as(role, dbname, &db, &err);
        if (r < 0)
                fail_msg("%s -> %s: %s", role, dbname, err ? err : "?");
        return db;
}

static char *value(struct db *db, const char *sql) {
        char *v = NULL;
        int r = db_query_value(db, sql, 0, NULL, &v);
        if (r < 0)
                fail_msg("query '%s' failed: %d", sql, r);
        return v;
}

static char *path_in(const char *rel) {
        char *p = path_join(seed_dir, rel);
        assert_non_null(p);
        return p;
}

/* ---- start ---- */

static void test_refuses_root(void **state) {
        if (root_refusal == 1)
                skip(); /* not started as root: nothing to check */
        assert_int_equal(root_refusal, -EPERM);
}

static void test_rejects_bad_paths(void **state) {
        struct pg *pg = NULL;
        assert_int_equal(pg_start("relative/seed", &pg), -EINVAL);
        char longdir[160];
        memset(longdir, 'a', sizeof longdir);
        memcpy(longdir, "/tmp/", 5);
        longdir[sizeof longdir - 1] = 0;
        assert_int_equal(pg_start(longdir, &pg), -ENAMETOOLONG);
        assert_false(path_exists(longdir)); /* checked before anything is created */
        assert_null(pg);
}

static void test_start(void **state) {
        int64_t t0 = now_ms();
        int r = pg_start(seed_dir, &g_pg);
        assert_int_equal(r, 0);
        print_message("# first start (initdb + bootstrap) took %lld ms\n", (long long)(now_ms() - t0));
        assert_non_null(g_pg);
        assert_true(pg_pid(g_pg) > 1);
        assert_int_equal(kill(pg_pid(g_pg), 0), 0);
        _cleanup_free_ char *run = path_in(".seed/run");
        assert_string_equal(pg_socket_dir(g_pg), run);
        _cleanup_free_ char *sock = path_in(".seed/run/.s.PGSQL.5432");
        struct stat st;
        assert_int_equal(lstat(sock, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0700);
}

/* ---- no TCP ---- */

static bool has_inode(const unsigned long *v, size_t n, unsigned long ino) {
        for (size_t i = 0; i < n; i++)
                if (v[i] == ino)
                        return true;
        return false;
}

/* Counts LISTEN sockets in /proc/net/tcp{,6} on port 5432, or held by the
 * given socket inodes. */
static int tcp_listeners(const unsigned long *inodes, size_t n_inodes, int *ret_port5432) {
        int owned = 0, port = 0;
        const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
        for (size_t f = 0; f < 2; f++) {
                _cleanup_fclose_ FILE *fp = fopen(files[f], "re");
                if (!fp)
                        continue;
                char line[512];
                (void)fgets(line, sizeof line, fp); /* header */
                while (fgets(line, sizeof line, fp)) {
                        char local[128];
                        unsigned st = 0;
                        unsigned long ino = 0;
                        if (sscanf(line, " %*s %127s %*s %x %*s %*s %*s %*u %*u %lu", local, &st, &ino) != 3)
                                continue;
                        if (st != 0x0A)
                                continue;
                        const char *colon = strrchr(local, ':');
                        if (colon && strtoul(colon + 1, NULL, 16) == 5432)
                                port++;
                        if (has_inode(inodes, n_inodes, ino))
                                owned++;
                }
        }
        *ret_port5432 = port;
        return owned;
}

static size_t socket_inodes(pid_t pid, unsigned long *v, size_t max) {
        char dir[64];
        snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
        DIR *d = opendir(dir);
        assert_non_null(d);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < max) {
                char link[320], target[128];
                snprintf(link, sizeof link, "%s/%s", dir, de->d_name);
                ssize_t k = readlink(link, target, sizeof target - 1);
                if (k <= 0)
                        continue;
                target[k] = 0;
                unsigned long ino;
                if (sscanf(target, "socket:[%lu]", &ino) == 1)
                        v[n++] = ino;
        }
        closedir(d);
        return n;
}

static int port5432_before = -1;

static void test_no_tcp_listener(void **state) {
        need_pg();
        unsigned long inodes[256];
        size_t n = socket_inodes(pg_pid(g_pg), inodes, 256);
        assert_true(n >= 1); /* at least the Unix socket */
        int port = 0;
        assert_int_equal(tcp_listeners(inodes, n, &port), 0);
        assert_int_equal(port, port5432_before); /* nothing new listens on 5432 */

        _cleanup_(db_closep) struct db *db = must_connect("postgres", "postgres");
        _cleanup_free_ char *la = value(db, "SHOW listen_addresses");
        assert_string_equal(la, "");
        _cleanup_free_ char *perm = value(db, "SHOW unix_socket_permissions");
        assert_string_equal(perm, "0700");
        _cleanup_free_ char *enc = value(db, "SHOW password_encryption");
        assert_string_equal(enc, "scram-sha-256");
        /* Only local scram lines are in force. */
        _cleanup_free_ char *rules = value(db, "SELECT string_agg(type || ' ' || auth_method, ',') FROM pg_hba_file_rules");
        assert_string_equal(rules, "local scram-sha-256");
}

/* ---- files ---- */

static void assert_mode(const char *rel, mode_t want) {
        _cleanup_free_ char *p = path_in(rel);
        struct stat st;
        if (lstat(p, &st) < 0)
                fail_msg("%s: %s", p, strerror(errno));
        if ((st.st_mode & 07777) != want)
                fail_msg("%s has mode %o, want %o", p, st.st_mode & 07777, want);
        assert_int_equal(st.st_uid, geteuid());
}

static void test_file_modes(void **state) {
        need_pg();
        assert_mode(".seed/secrets", 0700);
        assert_mode(".seed/run", 0700);
        assert_mode(".seed/postgres", 0700);
        assert_mode(".seed/secrets/postgres-password", 0600);
        assert_mode(".seed/secrets/pg-organism", 0600);
        assert_mode(".seed/secrets/pg-evolver", 0600);
        assert_mode(".seed/secrets/pg-reader", 0600);
        assert_mode(".seed/logs/postgres.log", 0600);
        /* Every file in secrets is 0600. */
        _cleanup_free_ char *sd = path_in(".seed/secrets");
        DIR *d = opendir(sd);
        assert_non_null(d);
        struct dirent *de;
        int files = 0;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char rel[300];
                snprintf(rel, sizeof rel, ".seed/secrets/%s", de->d_name);
                assert_mode(rel, 0600);
                files++;
        }
        closedir(d);
        assert_int_equal(files, 4);

        _cleanup_free_ char *hba_path = path_in(".seed/postgres/pg_hba.conf");
        _cleanup_free_ char *hba = NULL;
        assert_int_equal(read_file(hba_path, 65536, &hba, NULL), 0);
        assert_non_null(strstr(hba, "local all all scram-sha-256"));
        assert_null(strstr(hba, "host"));
        assert_null(strstr(hba, "trust"));

        /* Passwords are long random values, and differ per role. */
        _cleanup_free_ char *a = NULL, *b = NULL;
        _cleanup_free_ char *pa = path_in(".seed/secrets/postgres-password");
        _cleanup_free_ char *pb = path_in(".seed/secrets/pg-organism");
        assert_int_equal(read_file(pa, 1024, &a, NULL), 0);
        assert_int_equal(read_file(pb, 1024, &b, NULL), 0);
        assert_true(strlen(a) >= 33);
        assert_string_not_equal(a, b);
}

/* ---- roles and access ---- */

static void test_roles(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", "postgres");
        _cleanup_free_ char *roles = value(db,
                "SELECT string_agg(rolname || ':' || rolcanlogin || rolsuper || rolcreatedb || rolcreaterole "
                "|| rolbypassrls || rolreplication, ',' ORDER BY rolname) FROM pg_roles "
                "WHERE rolname IN ('organism', 'evolver', 'reader')");
        assert_string_equal(roles, "evolver:truefalsefalsefalsefalsefalse,organism:truefalsefalsefalsefalsefalse,"
                                   "reader:truefalsefalsefalsefalsefalse");
        _cleanup_free_ char *member = value(db, "SELECT pg_has_role('reader', 'pg_read_all_data', 'member')");
        assert_string_equal(member, "t");
        _cleanup_free_ char *owners = value(db,
                "SELECT string_agg(datname || ':' || pg_get_userbyid(datdba), ',' ORDER BY datname) FROM pg_database "
                "WHERE datname IN ('seed_kernel', 'organism')");
        assert_string_equal(owners, "organism:organism,seed_kernel:postgres");
        /* PUBLIC may connect to no database. */
        _cleanup_free_ char *open_dbs = value(db,
                "SELECT count(*) FROM pg_database d WHERE d.datallowconn AND EXISTS (SELECT 1 FROM "
                "aclexplode(coalesce(d.datacl, acldefault('d', d.datdba))) a WHERE a.grantee = 0)");
        assert_string_equal(open_dbs, "0");
}

/* The organism's and the evolver's roles carry limits: connections,
 * statement and idle-in-transaction timeouts, temp files. */
static void test_role_limits(void **state) {
        need_pg();
        static const char *const roles[][2] = {{"organism", PG_LIVE_DB}, {"evolver", PG_LIVE_DB}};
        for (size_t i = 0; i < ARRAY_SIZE(roles); i++) {
                _cleanup_(db_closep) struct db *db = NULL;
                _cleanup_free_ char *err = NULL;
                if (connect_as(roles[i][0], roles[i][1], &db, &err) < 0) {
                        /* evolver may not reach the live database: its own scratch ones */
                        assert_int_equal(pg_scratch_create(g_pg, "limits_probe"), 0);
                        db = must_connect(roles[i][0], "limits_probe");
                }
                _cleanup_free_ char *st = value(db, "SHOW statement_timeout");
                _cleanup_free_ char *idle = value(db, "SHOW idle_in_transaction_session_timeout");
                _cleanup_free_ char *temp = value(db, "SHOW temp_file_limit");
                assert_string_equal(st, "1min");
                assert_string_equal(idle, "1min");
                assert_string_equal(temp, "1GB");
                /* temp_file_limit is the superuser's to change. */
                _cleanup_free_ char *set_err = NULL;
                assert_true(db_exec(db, "SET temp_file_limit = -1", &set_err) < 0);
        }
        (void)pg_scratch_drop(g_pg, "limits_probe");
        _cleanup_(db_closep) struct db *su = must_connect("postgres", "postgres");
        _cleanup_free_ char *limits = value(su,
                "SELECT string_agg(rolname || ':' || rolconnlimit, ',' ORDER BY rolname) FROM pg_roles "
                "WHERE rolname IN ('organism', 'evolver')");
        assert_string_equal(limits, "evolver:20,organism:40");
}

static off_t file_size(const char *rel) {
        _cleanup_free_ char *p = path_in(rel);
        struct stat st;
        return stat(p, &st) == 0 ? st.st_size : 0;
}

/* Whether postgres.log holds needle, polled until deadline_ms (the log is
 * written by a thread). */
static bool log_has(const char *needle, int deadline_ms) {
        for (int64_t end = now_ms() + deadline_ms;;) {
                _cleanup_free_ char *p = path_in(".seed/logs/postgres.log");
                _cleanup_free_ char *log = NULL;
                if (read_file(p, 64 << 20, &log, NULL) == 0 && strstr(log, needle))
                        return true;
                if (now_ms() >= end)
                        return false;
                struct timespec ts = {0, 20 * 1000000L};
                nanosleep(&ts, NULL);
        }
}

/* Failing statements of many megabytes (the organism's to send) put
 * neither their text nor their huge values into postgres.log. */
static void test_failing_statements_stay_out_of_the_log(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("organism", PG_LIVE_DB);
        size_t big = 4 << 20;
        _cleanup_free_ char *pad = malloc(big + 1);
        assert_non_null(pad);
        memset(pad, 'q', big);
        pad[big] = 0;
        off_t before = file_size(".seed/logs/postgres.log");
        for (int i = 0; i < 5; i++) {
                _cleanup_free_ char *stmt = NULL, *err = NULL;
                /* One error names a column (the statement is the big part),
                 * the other quotes the huge value itself. */
                if (i % 2 == 0)
                        assert_int_equal(xasprintf(&stmt, "SELECT no_such_column_%d, '%s'", i, pad), 0);
                else
                        assert_int_equal(xasprintf(&stmt, "SELECT '%d%s'::int", i, pad), 0);
                assert_true(db_exec(db, stmt, &err) < 0);
        }
        assert_true(log_has("no_such_column_4", 10000));
        assert_true(log_has("bytes not logged]", 10000));
        _cleanup_free_ char *p = path_in(".seed/logs/postgres.log");
        _cleanup_free_ char *log = NULL;
        assert_int_equal(read_file(p, 64 << 20, &log, NULL), 0);
        assert_null(strstr(log, "STATEMENT:"));
        off_t grown = file_size(".seed/logs/postgres.log") - before;
        print_message("# postgres.log grew %lld bytes for 5 failing statements of %zu bytes\n", (long long)grown,
                      big);
        assert_true(grown < 64 * 1024);
}

static void assert_denied(const char *role, const char *dbname) {
        struct db *db = NULL;
        _cleanup_free_ char *err = NULL;
        int r = connect_as(role, dbname, &db, &err);
        if (r >= 0) {
                db_close(db);
                fail_msg("%s could connect to %s", role, dbname);
        }
        assert_non_null(err);
        if (!strstr(err, "permission denied"))
                fail_msg("%s -> %s: unexpected error: %s", role, dbname, err);
}

static void test_access_control(void **state) {
        need_pg();
        assert_denied("organism", PG_KERNEL_DB);
        assert_denied("organism", "postgres");
        assert_denied("organism", "template1");
        assert_denied("evolver", PG_LIVE_DB);
        assert_denied("evolver", PG_KERNEL_DB);
        assert_denied("reader", PG_KERNEL_DB);
        assert_denied("reader", "postgres");

        /* A wrong password is refused. */
        _cleanup_free_ char *ci = NULL, *bad = NULL, *err = NULL;
        assert_int_equal(pg_conninfo(g_pg, "organism", PG_LIVE_DB, &ci), 0);
        assert_int_equal(xasprintf(&bad, "%s password=wrong", ci), 0);
        struct db *x = NULL;
        assert_true(db_connect_err(bad, &x, &err) < 0);
        assert_non_null(strstr(err, "password authentication failed"));
        assert_null(strstr(err, "wrong"));

        _cleanup_(db_closep) struct db *org = must_connect("organism", PG_LIVE_DB);
        _cleanup_free_ char *e1 = NULL;
        assert_int_equal(db_exec(org, "CREATE TABLE items (x int); INSERT INTO items VALUES (1), (2)", &e1), 0);

        _cleanup_(db_closep) struct db *rd = must_connect("reader", PG_LIVE_DB);
        _cleanup_free_ char *count = value(rd, "SELECT count(*) FROM items");
        assert_string_equal(count, "2");
        const char *writes[] = {"INSERT INTO items VALUES (3)", "UPDATE items SET x = 0", "DELETE FROM items",
                                "CREATE TABLE mine (y int)", "CREATE TEMP TABLE mine (y int)",
                                "CREATE SCHEMA s"};
        for (size_t i = 0; i < ARRAY_SIZE(writes); i++) {
                _cleanup_free_ char *e = NULL;
                assert_int_equal(db_exec(rd, writes[i], &e), -EIO);
                if (!e || !strstr(e, "permission denied"))
                        fail_msg("reader '%s': %s", writes[i], e ? e : "(no error)");
        }
        _cleanup_free_ char *still = value(org, "SELECT count(*) FROM items");
        assert_string_equal(still, "2");
        _cleanup_free_ char *e2 = NULL;
        assert_int_equal(db_exec(org, "DROP TABLE items", &e2), 0);

        /* The evolver can create (scratch) databases; the organism cannot. */
        _cleanup_(db_closep) struct db *su = must_connect("postgres", "postgres");
        _cleanup_free_ char *cd = value(su, "SELECT rolcreatedb FROM pg_roles WHERE rolname = 'organism'");
        assert_string_equal(cd, "f");
}

static void test_urls(void **state) {
        need_pg();
        _cleanup_free_ char *url = NULL, *pw = NULL, *ci = NULL, *want = NULL;
        _cleanup_free_ char *pwfile = path_in(".seed/secrets/pg-reader");
        assert_int_equal(read_file(pwfile, 1024, &pw, NULL), 0);
        pw[strcspn(pw, "\n")] = 0;
        assert_int_equal(pg_sandbox_url(g_pg, "reader", PG_LIVE_DB, &url), 0);
        assert_int_equal(xasprintf(&want, "postgresql://reader:%s@/organism?host=/run/postgresql", pw), 0);
        assert_string_equal(url, want);

        assert_int_equal(pg_conninfo(g_pg, "reader", "it's", &ci), 0);
        assert_non_null(strstr(ci, "dbname='it\\'s'"));
        assert_non_null(strstr(ci, "port='5432'"));
        char *none = NULL;
        assert_int_equal(pg_conninfo(g_pg, "admin", PG_LIVE_DB, &none), -EINVAL);
        assert_int_equal(pg_sandbox_url(g_pg, "nobody", PG_LIVE_DB, &none), -EINVAL);
        assert_null(none);
}

static void test_scratch_databases(void **state) {
        need_pg();
        assert_int_equal(pg_scratch_create(g_pg, "evo_test1"), 0);
        {
                _cleanup_(db_closep) struct db *ev = must_connect("evolver", "evo_test1");
                _cleanup_free_ char *e = NULL;
                assert_int_equal(db_exec(ev, "CREATE TABLE t (x int); INSERT INTO t VALUES (1)", &e), 0);
        }
        assert_denied("organism", "evo_test1");
        assert_denied("reader", "evo_test1");
        /* Re-creating empties it. */
        assert_int_equal(pg_scratch_create(g_pg, "evo_test1"), 0);
        {
                _cleanup_(db_closep) struct db *ev = must_connect("evolver", "evo_test1");
                _cleanup_free_ char *n = value(ev, "SELECT count(*) FROM pg_tables WHERE tablename = 't'");
                assert_string_equal(n, "0");
                /* Dropping while the evolver is still connected works. */
                assert_int_equal(pg_scratch_drop(g_pg, "evo_test1"), 0);
        }
        assert_int_equal(pg_scratch_drop(g_pg, "evo_test1"), 0); /* already gone */
        const char *bad[] = {PG_LIVE_DB, PG_KERNEL_DB, "postgres", "template1", "Evo", "evo-1", "evo;drop", "",
                             "1evo"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_int_equal(pg_scratch_create(g_pg, bad[i]), -EINVAL);
                assert_int_equal(pg_scratch_drop(g_pg, bad[i]), -EINVAL);
        }
        /* The live database is untouched. */
        struct db *db = must_connect("organism", PG_LIVE_DB);
        db_close(db);
}

/* ---- live-data backups ---- */

static void test_live_backup_and_restore(void **state) {
        need_pg();
        _cleanup_free_ char *dir = path_in(".seed/backups"), *path = path_in(".seed/backups/gen-1-test.dump"),
                            *missing = path_in(".seed/backups/none.dump"), *tmp = NULL;
        assert_int_equal(mkdir_p(dir, 0700), 0);
        {
                _cleanup_(db_closep) struct db *db = must_connect("organism", PG_LIVE_DB);
                _cleanup_free_ char *e = NULL;
                assert_int_equal(db_exec(db, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('kept')", &e), 0);
        }
        assert_int_equal(pg_live_backup(g_pg, path), 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_true(st.st_size > 0);
        assert_true(asprintf(&tmp, "%s.tmp", path) > 0);
        assert_int_equal(access(tmp, F_OK), -1);
        _cleanup_(db_closep) struct db *held = must_connect("organism", PG_LIVE_DB);
        {
                _cleanup_free_ char *e = NULL;
                assert_int_equal(db_exec(held, "DROP TABLE notes; CREATE TABLE later (x int)", &e), 0);
        }
        /* Restoring ends the live sessions (held) and brings the data back. */
        assert_int_equal(pg_live_restore(g_pg, path), 0);
        {
                _cleanup_(db_closep) struct db *db = must_connect("organism", PG_LIVE_DB);
                _cleanup_free_ char *v = value(db, "SELECT body FROM notes");
                assert_string_equal(v, "kept");
                _cleanup_free_ char *n = value(db, "SELECT count(*) FROM pg_tables WHERE tablename = 'later'");
                assert_string_equal(n, "0");
                _cleanup_free_ char *e = NULL;
                assert_int_equal(db_exec(db, "DROP TABLE notes", &e), 0);
        }
        /* Access rules survive the re-creation. */
        assert_denied("evolver", PG_LIVE_DB);
        struct db *rd = must_connect("reader", PG_LIVE_DB);
        db_close(rd);
        /* No passfile is left behind; a missing backup is an error that keeps the live database. */
        const char *dirs[] = {".seed/run", ".seed/secrets"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                _cleanup_free_ char *where = path_in(dirs[i]);
                DIR *d = opendir(where);
                assert_non_null(d);
                for (struct dirent *e; (e = readdir(d));)
                        assert_false(startswith(e->d_name, ".pgpass"));
                closedir(d);
        }
        assert_true(pg_live_restore(g_pg, missing) < 0);
        struct db *db = must_connect("organism", PG_LIVE_DB);
        db_close(db);
}

/* ---- migrations ---- */

static void test_kernel_migration_recorded(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        _cleanup_free_ struct db_migration *m = NULL;
        size_t n = 0;
        assert_int_equal(db_kernel_migrations(&m, &n), 0);
        char sum[65];
        db_migration_checksum(&m[0], sum);
        _cleanup_free_ char *rec = value(db, "SELECT name || ' ' || checksum FROM kernel_migrations WHERE version = 1");
        _cleanup_free_ char *want = NULL;
        assert_int_equal(xasprintf(&want, "0001_init.sql %s", sum), 0);
        assert_string_equal(rec, want);
        _cleanup_free_ char *err = NULL;
        assert_int_equal(db_migrate(db, DB_KERNEL_MIGRATIONS_TABLE, m, n, &err), 0);
        assert_null(err);
}

static void test_query_json(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        _cleanup_free_ char *count = value(db, "SELECT count(*) FROM kernel_migrations");
        _cleanup_free_ struct db_migration *m = NULL;
        size_t n = 0;
        assert_int_equal(db_kernel_migrations(&m, &n), 0);
        char want[16];
        snprintf(want, sizeof want, "%zu", n);
        assert_string_equal(count, want); /* every kernel migration is applied */
        const char *params[] = {"evo_json1", "it's \"quoted\""};
        assert_int_equal(db_execp(db,
                                  "INSERT INTO evolutions (id, intent, state, created_at, updated_at) "
                                  "VALUES ($1, $2, 'requested', 1, 1)",
                                  2, params, NULL),
                         1);
        _cleanup_free_ char *json = NULL;
        assert_int_equal(db_query_json(db, "SELECT id, intent, state FROM evolutions WHERE id = $1", 1, params, &json),
                         0);
        assert_string_equal(json, "[{\"id\":\"evo_json1\",\"intent\":\"it's \\\"quoted\\\"\",\"state\":\"requested\"}]");
        free(json);
        json = NULL;
        assert_int_equal(db_query_json(db, "SELECT id FROM evolutions WHERE id = 'none'", 0, NULL, &json), 0);
        assert_string_equal(json, "[]");
        assert_int_equal(db_execp(db, "DELETE FROM evolutions WHERE id = $1", 1, params, NULL), 1);
        /* Bounded by the server: a big result never reaches us. */
        free(json);
        json = NULL;
        const char *thousand[] = {"1000"};
        assert_int_equal(db_query_json_max(db, "SELECT repeat('x', $1::int) AS v", 1, thousand, 100, &json), -E2BIG);
        assert_null(json);
        assert_int_equal(db_query_json_max(db, "SELECT repeat('x', $1::int) AS v", 1, thousand, 4096, &json), 0);
        assert_int_equal(strlen(json), 1000 + strlen("[{\"v\":\"\"}]"));
}

static void test_migration_changed_is_error(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        struct db_migration m[] = {
                {.version = 1, .name = "0001_t.sql", .sql = "CREATE TABLE mt1 (x int);"},
                {.version = 2, .name = "0002_u.sql", .sql = "CREATE TABLE mt2 (x int);"},
        };
        for (size_t i = 0; i < 2; i++)
                m[i].len = strlen(m[i].sql);
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;
        assert_int_equal(db_migrate(db, "test_migrations", m, 1, &e1), 1);
        assert_int_equal(db_migrate(db, "test_migrations", m, 1, &e1), 0);

        m[0].sql = "CREATE TABLE mt1 (x bigint);";
        m[0].len = strlen(m[0].sql);
        assert_int_equal(db_migrate(db, "test_migrations", m, 2, &e2), -EIO);
        assert_non_null(e2);
        assert_true(startswith(e2, "migration 0001_t.sql was changed after it was applied (checksum "));
        /* Nothing after it was applied. */
        _cleanup_free_ char *t = value(db, "SELECT count(*) FROM pg_tables WHERE tablename = 'mt2'");
        assert_string_equal(t, "0");
        assert_int_equal(db_migrate(db, "bad-name", m, 1, &e3), -EINVAL);
}

static void test_migration_failure_rolls_back(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        struct db_migration m[] = {
                {.version = 1, .name = "0001_ok.sql", .sql = "CREATE TABLE fr1 (x int);"},
                {.version = 2, .name = "0002_bad.sql", .sql = "CREATE TABLE fr2 (x int); INSERT INTO nope VALUES (1);"},
        };
        for (size_t i = 0; i < 2; i++)
                m[i].len = strlen(m[i].sql);
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;
        assert_int_equal(db_migrate(db, "test_migrations_fail", m, 2, &e1), -EIO);
        assert_non_null(e1);
        assert_non_null(strstr(e1, "0002_bad.sql"));
        assert_non_null(strstr(e1, "\"nope\" does not exist"));
        _cleanup_free_ char *t = value(db, "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables "
                                           "WHERE tablename IN ('fr1', 'fr2')");
        assert_string_equal(t, "fr1");
        _cleanup_free_ char *rec = value(db, "SELECT string_agg(name, ',') FROM test_migrations_fail");
        assert_string_equal(rec, "0001_ok.sql");
        /* The connection is usable afterwards, and the fixed file applies. */
        m[1].sql = "CREATE TABLE fr2 (x int);";
        m[1].len = strlen(m[1].sql);
        assert_int_equal(db_migrate(db, "test_migrations_fail", m, 2, &e2), 1);

        /* A migration may not commit halfway. */
        struct db_migration c[] = {{.version = 1, .name = "0001_commit.sql", .sql = "CREATE TABLE fr3 (x int); COMMIT;"}};
        c[0].len = strlen(c[0].sql);
        assert_int_equal(db_migrate(db, "test_migrations_commit", c, 1, &e3), -EIO);
        assert_non_null(strstr(e3, "0001_commit.sql"));
        assert_non_null(strstr(e3, "transaction"));
}

struct migrate_job {
        const struct db_migration *m;
        size_t n;
        int result;
};

static void *migrate_thread(void *arg) {
        struct migrate_job *j = arg;
        struct db *db = NULL;
        _cleanup_free_ char *ci = NULL, *err = NULL;
        j->result = -1000;
        if (pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci) < 0 || db_connect_err(ci, &db, NULL) < 0)
                return NULL;
        j->result = db_migrate(db, "test_migrations_race", j->m, j->n, &err);
        if (j->result < 0)
                fprintf(stderr, "# migrate_thread: %s\n", err ? err : "?");
        db_close(db);
        return NULL;
}

static void test_migrate_concurrent(void **state) {
        need_pg();
        static const char *const names[] = {"0001_a.sql", "0002_b.sql", "0003_c.sql", "0004_d.sql", "0005_e.sql"};
        struct db_migration m[5];
        char sqls[5][128];
        for (int i = 0; i < 5; i++) {
                snprintf(sqls[i], sizeof sqls[i], "SELECT pg_sleep(0.02); CREATE TABLE race_%d (x int);", i);
                m[i] = (struct db_migration){.version = i + 1, .name = names[i], .sql = sqls[i], .len = strlen(sqls[i])};
        }
        struct migrate_job jobs[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
                jobs[i] = (struct migrate_job){.m = m, .n = 5};
                assert_int_equal(pthread_create(&th[i], NULL, migrate_thread, &jobs[i]), 0);
        }
        int total = 0;
        for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                assert_true(jobs[i].result >= 0);
                total += jobs[i].result;
        }
        assert_int_equal(total, 5);
}

/* ---- sign-in links ---- */

struct consume_job {
        const char *hash;
        int64_t now;
        int result;
};

static void *consume_thread(void *arg) {
        struct consume_job *j = arg;
        struct db *db = NULL;
        _cleanup_free_ char *ci = NULL;
        j->result = -1000;
        if (pg_conninfo(g_pg, "postgres", PG_KERNEL_DB, &ci) < 0 || db_connect_err(ci, &db, NULL) < 0)
                return NULL;
        j->result = db_link_consume(db, j->hash, j->now);
        db_close(db);
        return NULL;
}

static void test_links(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        int64_t now = wall_ms();
        assert_int_equal(db_link_count_live(db, now), 0);
        assert_int_equal(db_link_insert(db, "h-live", now + 15 * 60 * 1000), 0);
        assert_int_equal(db_link_insert(db, "h-expired", now - 1), 0);
        assert_int_equal(db_link_insert(db, "h-race", now + 15 * 60 * 1000), 0);
        assert_int_equal(db_link_count_live(db, now), 2);
        assert_true(db_link_insert(db, "h-live", now + 1000) < 0); /* duplicate */

        assert_int_equal(db_link_consume(db, "h-live", now), 0);
        assert_int_equal(db_link_consume(db, "h-live", now), -ENOENT);
        assert_int_equal(db_link_consume(db, "h-expired", now), -ENOENT);
        assert_int_equal(db_link_consume(db, "h-unknown", now), -ENOENT);
        assert_int_equal(db_link_consume(db, "", now), -ENOENT);
        /* Expiry is strict: a link is dead at its expiry time. */
        assert_int_equal(db_link_consume(db, "h-race", now + 15 * 60 * 1000), -ENOENT);
        assert_int_equal(db_link_count_live(db, now), 1);

        /* Many consumers at once: exactly one wins. */
        struct consume_job jobs[8];
        pthread_t th[8];
        for (int i = 0; i < 8; i++) {
                jobs[i] = (struct consume_job){.hash = "h-race", .now = now};
                assert_int_equal(pthread_create(&th[i], NULL, consume_thread, &jobs[i]), 0);
        }
        int won = 0;
        for (int i = 0; i < 8; i++) {
                pthread_join(th[i], NULL);
                if (jobs[i].result == 0)
                        won++;
                else
                        assert_int_equal(jobs[i].result, -ENOENT);
        }
        assert_int_equal(won, 1);
        assert_int_equal(db_link_count_live(db, now), 0);
        assert_int_equal(db_link_prune(db, now), 3);
        assert_int_equal(db_link_prune(db, now), 0);
}

/* ---- model usage ---- */

static void test_model_usage(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        _cleanup_free_ char *err = NULL, *json = NULL;
        assert_int_equal(db_exec(db, "DELETE FROM model_usage", NULL), 0);
        struct db_usage u = {.at = 1000, .purpose = "evolution", .reference = "e1", .model = "m-1",
                             .input_tokens = 10, .output_tokens = 3, .cost_source = "provider", .cost_usd = 0.25,
                             .cache_write_tokens = 8};
        assert_int_equal(db_usage_insert(db, &u, &err), 0);
        u.at = 2000, u.input_tokens = 5, u.output_tokens = 1, u.cost_source = "prices", u.cost_usd = 0.5,
        u.cache_read_tokens = 4, u.cache_write_tokens = 0;
        assert_int_equal(db_usage_insert(db, &u, &err), 0);
        u.at = 2500, u.cost_source = NULL, u.cost_usd = 9; /* unknown: stored as NULL, not 9 and not 0 */
        assert_int_equal(db_usage_insert(db, &u, &err), 0);
        u.cache_read_tokens = -1; /* refused before it reaches the table */
        assert_int_equal(db_usage_insert(db, &u, &err), -EINVAL);
        u = (struct db_usage){.at = 1500, .input_tokens = 1}; /* no purpose, reference, model or cost */
        assert_int_equal(db_usage_insert(db, &u, &err), 0);
        u.cost_source = "guess";
        assert_int_equal(db_usage_insert(db, &u, &err), -EINVAL);
        u.cost_source = "prices", u.cost_usd = -1;
        assert_int_equal(db_usage_insert(db, &u, &err), -EINVAL);
        assert_int_equal(db_usage_summary_json(db, 65536, &json), 0);
        assert_non_null(strstr(json, "\"purpose\":\"evolution\",\"model\":\"m-1\",\"calls\":3,\"input_tokens\":20,"
                                     "\"cached_input_tokens\":8,\"uncached_input_tokens\":12,\"cache_write_tokens\":8,"
                                     "\"output_tokens\":5,\"cost_usd\":0.75,\"unknown_cost_calls\":1,\"last_at\":2500"));
        assert_non_null(strstr(json, "\"purpose\":\"unknown\",\"model\":\"\",\"calls\":1,\"input_tokens\":1,"
                                     "\"cached_input_tokens\":0,\"uncached_input_tokens\":1,\"cache_write_tokens\":0,"
                                     "\"output_tokens\":0,\"cost_usd\":null,\"unknown_cost_calls\":1"));
        free(TAKE_PTR(json));
        /* per reference (an evolution): one object, 0s when it made no calls */
        assert_int_equal(db_usage_reference_json(db, "e1", &json), 0);
        assert_string_equal(json, "{\"calls\":3,\"input_tokens\":20,\"cached_input_tokens\":8,\"uncached_input_tokens\":12,"
                                  "\"cache_write_tokens\":8,\"output_tokens\":5,\"cost_usd\":0.75,\"unknown_cost_calls\":1}");
        free(TAKE_PTR(json));
        assert_int_equal(db_usage_reference_json(db, "e-none", &json), 0);
        assert_string_equal(json, "{\"calls\":0,\"input_tokens\":0,\"cached_input_tokens\":0,\"uncached_input_tokens\":0,"
                                  "\"cache_write_tokens\":0,\"output_tokens\":0,\"cost_usd\":0,\"unknown_cost_calls\":0}");
        free(TAKE_PTR(json));
        double c = -1;
        assert_int_equal(db_usage_cost_between(db, 0, 2001, &c), 0);
        assert_true(c > 0.749 && c < 0.751);
        assert_int_equal(db_usage_cost_between(db, 1001, 2000, &c), 0);
        assert_true(c == 0);
        assert_int_equal(db_usage_summary_json(db, 16, &json), -E2BIG);
        assert_int_equal(db_exec(db, "DELETE FROM model_usage", NULL), 0);
}

/* ---- settings ---- */

static void test_settings(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        _cleanup_free_ char *v = NULL;
        assert_int_equal(db_exec(db, "DELETE FROM kernel_settings", NULL), 0);
        assert_int_equal(db_setting_get(db, "mind.model", &v), -ENOENT);
        assert_int_equal(db_setting_set(db, "mind.model", "first"), 0);
        assert_int_equal(db_setting_set(db, "mind.model", "it's \"second\"; DROP TABLE x"), 0); /* replaced, as data */
        assert_int_equal(db_setting_get(db, "mind.model", &v), 0);
        assert_string_equal(v, "it's \"second\"; DROP TABLE x");
        /* Keys are checked; values are bounded. */
        assert_int_equal(db_setting_set(db, "Mind Model", "x"), -EINVAL);
        assert_int_equal(db_setting_set(db, "", "x"), -EINVAL);
        assert_int_equal(db_setting_get(db, "a'b", &v), -EINVAL);
        char big[DB_SETTING_VALUE_MAX + 2];
        memset(big, 'v', sizeof big - 1);
        big[sizeof big - 1] = 0;
        assert_int_equal(db_setting_set(db, "mind.model", big), -E2BIG);
        big[DB_SETTING_VALUE_MAX] = 0;
        assert_int_equal(db_setting_set(db, "mind.model", big), 0);
        free(TAKE_PTR(v));
        assert_int_equal(db_setting_get(db, "mind.model", &v), 0);
        assert_int_equal(strlen(v), DB_SETTING_VALUE_MAX);
        assert_int_equal(db_exec(db, "DELETE FROM kernel_settings", NULL), 0);
}

/* ---- sessions ---- */

static void test_sessions(void **state) {
        need_pg();
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        int64_t now = wall_ms();
        assert_int_equal(db_session_insert(db, "s1", "hash-1", "Mozilla/5.0\x01\n\xc3\xa9", now, now + 30 * DAY_MS), 0);
        assert_int_equal(db_session_insert(db, "s2", "hash-2", NULL, now + 5, now + 30 * DAY_MS), 0);
        assert_int_equal(db_session_insert(db, "s3", "hash-3", "old", now - 2 * DAY_MS, now - 1), 0);
        assert_true(db_session_insert(db, "s4", "hash-1", "dup", now, now + DAY_MS) < 0); /* hash unique */

        struct db_session s = {0};
        int64_t later = now + HOUR_MS;
        assert_int_equal(db_session_touch(db, "hash-1", later, later + 30 * DAY_MS, &s), 0);
        assert_string_equal(s.id, "s1");
        assert_int_equal(s.created_at, now);
        assert_int_equal(s.last_used_at, later);
        assert_int_equal(s.expires_at, later + 30 * DAY_MS);
        assert_string_equal(s.user_agent, "Mozilla/5.0????");
        db_session_done(&s);
        assert_null(s.id);
        assert_int_equal(db_session_touch(db, "hash-2", now + 10, now + 30 * DAY_MS, NULL), 0);
        /* Within a minute of its renewal a session is only read. */
        assert_int_equal(db_session_touch(db, "hash-1", later + 59000, later + 59000 + 30 * DAY_MS, &s), 0);
        assert_int_equal(s.last_used_at, later);
        assert_int_equal(s.expires_at, later + 30 * DAY_MS);
        db_session_done(&s);
        assert_int_equal(db_session_touch(db, "hash-1", later + 60000, later + 60000 + 30 * DAY_MS, &s), 0);
        assert_int_equal(s.last_used_at, later + 60000);
        db_session_done(&s);

        assert_int_equal(db_session_touch(db, "hash-3", now, now + DAY_MS, NULL), -ENOENT); /* expired */
        assert_int_equal(db_session_touch(db, "hash-x", now, now + DAY_MS, NULL), -ENOENT);

        struct db_session *list = NULL;
        size_t n = 0;
        assert_int_equal(db_session_list(db, now, &list, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(list[0].id, "s2"); /* newest first */
        assert_string_equal(list[1].id, "s1");
        assert_int_equal(list[1].expires_at, later + 60000 + 30 * DAY_MS);
        assert_string_equal(list[0].user_agent, "");
        for (size_t i = 0; i < n; i++)
                db_session_done(&list[i]);
        free(list);

        assert_int_equal(db_session_revoke(db, "s1"), 0);
        assert_int_equal(db_session_revoke(db, "s1"), -ENOENT);
        assert_int_equal(db_session_revoke(db, "nope"), -ENOENT);
        assert_int_equal(db_session_touch(db, "hash-1", now + 20, now + 30 * DAY_MS, NULL), -ENOENT);
        assert_int_equal(db_session_list(db, now, &list, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(list[0].id, "s2");
        db_session_done(&list[0]);
        free(list);

        assert_int_equal(db_session_prune(db, wall_ms() + 1), 2); /* s1 revoked, s3 expired */
}

/* ---- restarts ---- */

static ino_t inode_of(const char *rel) {
        _cleanup_free_ char *p = path_in(rel);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        return st.st_ino;
}

static char *read_rel(const char *rel) {
        _cleanup_free_ char *p = path_in(rel);
        char *s = NULL;
        assert_int_equal(read_file(p, 4096, &s, NULL), 0);
        return s;
}

static char *read_rel_big(const char *rel) {
        _cleanup_free_ char *p = path_in(rel);
        char *s = NULL;
        assert_int_equal(read_file(p, 16 << 20, &s, NULL), 0);
        return s;
}

static void assert_marker(const char *hash) {
        _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
        const char *p[] = {hash};
        _cleanup_free_ char *v = NULL;
        assert_int_equal(db_query_value(db, "SELECT hash FROM signin_links WHERE hash = $1", 1, p, &v), 0);
        assert_string_equal(v, hash);
}

static void test_restart_reuses_data(void **state) {
        need_pg();
        {
                _cleanup_(db_closep) struct db *db = must_connect("postgres", PG_KERNEL_DB);
                assert_int_equal(db_link_insert(db, "marker-1", wall_ms() + DAY_MS), 0);
        }
        ino_t version_ino = inode_of(".seed/postgres/PG_VERSION");
        _cleanup_free_ char *pw = read_rel(".seed/secrets/postgres-password");
        _cleanup_free_ char *pw_org = read_rel(".seed/secrets/pg-organism");
        pid_t old = pg_pid(g_pg);
        struct db *survivor = must_connect("postgres", PG_KERNEL_DB);

        int64_t t0 = now_ms();
        pg_stop(g_pg);
        g_pg = NULL;
        print_message("# stop took %lld ms\n", (long long)(now_ms() - t0));
        assert_int_equal(kill(old, 0), -1);
        assert_int_equal(errno, ESRCH);
        _cleanup_free_ char *pidfile = path_in(".seed/postgres/postmaster.pid");
        assert_false(path_exists(pidfile));

        t0 = now_ms();
        assert_int_equal(pg_start(seed_dir, &g_pg), 0);
        print_message("# restart took %lld ms\n", (long long)(now_ms() - t0));
        assert_marker("marker-1");
        assert_int_equal(inode_of(".seed/postgres/PG_VERSION"), version_ino); /* no new initdb */
        _cleanup_free_ char *pw2 = read_rel(".seed/secrets/postgres-password");
        _cleanup_free_ char *pw_org2 = read_rel(".seed/secrets/pg-organism");
        assert_string_equal(pw, pw2);
        assert_string_equal(pw_org, pw_org2); /* role passwords are set on creation only */
        struct db *db = must_connect("organism", PG_LIVE_DB);
        db_close(db);

        /* A handle from before the restart: the call that finds the
         * connection dead fails, the next one reconnects. */
        _cleanup_free_ char *v1 = NULL, *v2 = NULL;
        (void)db_query_value(survivor, "SELECT 1", 0, NULL, &v1);
        assert_int_equal(db_query_value(survivor, "SELECT 2", 0, NULL, &v2), 0);
        assert_string_equal(v2, "2");
        db_close(survivor);
}

/* A kernel that dies leaves its PostgreSQL running: a new struct (as a new
 * kernel would have) must stop that one and come up. */
static void test_stale_postmaster_same_process(void **state) {
        need_pg();
        struct pg *old = abandon(TAKE_PTR(g_pg)); /* deliberately never stopped or freed */
        pid_t old_pid = pg_pid(old);
        assert_int_equal(pg_start(seed_dir, &g_pg), 0);
        assert_true(pg_pid(g_pg) != old_pid);
        assert_true(kill(old_pid, 0) < 0 && errno == ESRCH); /* stopped and reaped */
        assert_marker("marker-1");
}

/* The same, with the kernel process really gone: a child process starts
 * PostgreSQL and exits without stopping it. */
static void test_stale_postmaster_killed_kernel(void **state) {
        need_pg();
        struct pg *old = abandon(TAKE_PTR(g_pg)); /* the child stops this one as stale */
        pid_t old_pid = pg_pid(old);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
                struct pg *pg = NULL;
                _exit(pg_start(seed_dir, &pg) == 0 && pg_pid(pg) > 1 ? 0 : 1);
        }
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(waitpid(old_pid, &status, 0), old_pid); /* our old child, stopped by the other */

        _cleanup_free_ char *pidfile = read_rel(".seed/postgres/postmaster.pid");
        pid_t orphan = (pid_t)strtol(pidfile, NULL, 10);
        assert_true(orphan > 1);
        assert_int_equal(kill(orphan, 0), 0);

        assert_int_equal(pg_start(seed_dir, &g_pg), 0);
        assert_true(pg_pid(g_pg) != orphan);
        assert_marker("marker-1");
}

/* PostgreSQL that exits during start-up: a quick, clear error (not the 60 s
 * deadline), nothing left running, and a later start works again. */
static void test_start_failure_reported(void **state) {
        need_pg();
        pg_stop(TAKE_PTR(g_pg));
        _cleanup_free_ char *conf = path_in(".seed/postgres/postgresql.conf");
        _cleanup_free_ char *orig = NULL;
        size_t len = 0;
        assert_int_equal(read_file(conf, 1 << 20, &orig, &len), 0);
        _cleanup_free_ char *broken = NULL;
        assert_int_equal(xasprintf(&broken, "%sno_such_setting_here = 1\n", orig), 0);
        assert_int_equal(write_file_atomic(conf, broken, strlen(broken), 0600), 0);

        struct pg *pg = NULL;
        int64_t t0 = now_ms();
        assert_int_equal(pg_start(seed_dir, &pg), -EIO);
        assert_null(pg);
        assert_true(now_ms() - t0 < 30000);
        _cleanup_free_ char *pidfile = path_in(".seed/postgres/postmaster.pid");
        assert_false(path_exists(pidfile));
        _cleanup_free_ char *log = read_rel_big(".seed/logs/postgres.log");
        assert_non_null(strstr(log, "no_such_setting_here"));

        assert_int_equal(write_file_atomic(conf, orig, len, 0600), 0);
        assert_int_equal(pg_start(seed_dir, &g_pg), 0);
        assert_marker("marker-1");
}

static int group_setup(void **state) {
        snprintf(seed_dir, sizeof seed_dir, "/tmp/seed-test-pg-XXXXXX");
        if (!mkdtemp(seed_dir))
                return -1;
        int port = 0;
        (void)tcp_listeners(NULL, 0, &port);
        port5432_before = port;
        return 0;
}

static int group_teardown(void **state) {
        pg_stop(g_pg);
        g_pg = NULL;
        rm_rf(seed_dir);
        return 0;
}

int main(void) {
        if (geteuid() == 0) {
                /* Before dropping: pg_start as root must refuse, creating nothing. */
                pid_t child = fork();
                if (child == 0) {
                        struct pg *pg = NULL;
                        int r = pg_start("/nonexistent-seed-root-check", &pg);
                        _exit(r == -EPERM && !path_exists("/nonexistent-seed-root-check") ? 0 : 1);
                }
                int status = 0;
                if (child > 0 && waitpid(child, &status, 0) == child)
                        root_refusal = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? -EPERM : -EIO;
        }
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "cannot drop root\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_refuses_root),
                cmocka_unit_test(test_rejects_bad_paths),
                cmocka_unit_test(test_start),
                cmocka_unit_test(test_no_tcp_listener),
                cmocka_unit_test(test_file_modes),
                cmocka_unit_test(test_roles),
                cmocka_unit_test(test_role_limits),
                cmocka_unit_test(test_failing_statements_stay_out_of_the_log),
                cmocka_unit_test(test_access_control),
                cmocka_unit_test(test_urls),
                cmocka_unit_test(test_scratch_databases),
                cmocka_unit_test(test_live_backup_and_restore),
                cmocka_unit_test(test_kernel_migration_recorded),
                cmocka_unit_test(test_query_json),
                cmocka_unit_test(test_migration_changed_is_error),
                cmocka_unit_test(test_migration_failure_rolls_back),
                cmocka_unit_test(test_migrate_concurrent),
                cmocka_unit_test(test_links),
                cmocka_unit_test(test_sessions),
                cmocka_unit_test(test_model_usage),
                cmocka_unit_test(test_settings),
                cmocka_unit_test(test_restart_reuses_data),
                cmocka_unit_test(test_stale_postmaster_same_process),
                cmocka_unit_test(test_stale_postmaster_killed_kernel),
                cmocka_unit_test(test_start_failure_reported),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
