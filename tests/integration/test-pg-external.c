/* Integration tests for an external PostgreSQL (kernel/pg external.c and
 * relay.c): a real server the test starts as the unprivileged account, on a
 * TCP port of 127.0.0.1, TLS only (hostssl; plain TCP is refused), with a
 * role that has CREATEROLE and CREATEDB and one that has not. Two Seeds of
 * the same name use it; the organism's sandbox (real bwrap, the live
 * profile: no network, only lo) reaches its database through the relay. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "db/db.h"
#include "pg/pg.h"
#include "sandbox/sandbox.h"
#include "../common/comment.h"

#define ADMIN_PASSWORD "hoster-pw-4f1c9a"

static char root[64];               /* the server's data, socket and log */
static char seed_a[96], seed_b[96]; /* two Seeds named "seed" */
static char *bindir;
static int port;
static bool server_up;
static char url[256];               /* without the password (as in seed.yaml) */
static char *no_bwrap;              /* why sandboxes cannot run here */
static struct pg *pg_a, *pg_b;

static int sh(const char *fmt, ...) _printf_(1, 2);
static int sh(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *cmd = NULL;
        int n = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -1;
        int st = system(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int free_port(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        close(fd);
        return ntohs(sa.sin_port);
}

/* A PostgreSQL server of the test's own: TLS on 127.0.0.1 only. */
static int server_start(void) {
        _cleanup_free_ char *why = NULL;
        if (pg_find_bindir(&bindir, &why) < 0 || (port = free_port()) < 0)
                return -1;
        if (sh("'%s/initdb' -D %s/data -U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 "
               "--no-instructions >%s/initdb.log 2>&1", bindir, root, root) != 0 ||
            sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/data/server.key -out %s/data/server.crt "
               "-subj /CN=localhost -days 2 >/dev/null 2>&1 && chmod 600 %s/data/server.key", root, root, root) != 0 ||
            sh("printf 'local all all trust\\nhostssl all all 127.0.0.1/32 scram-sha-256\\n' >%s/data/pg_hba.conf",
               root) != 0 ||
            sh("'%s/pg_ctl' -D %s/data -w -t 60 -l %s/server.log -o \"-c listen_addresses=127.0.0.1 -c port=%d "
               "-c unix_socket_directories=%s -c ssl=on\" start >/dev/null", bindir, root, root, port, root) != 0)
                return -1;
        server_up = true;
        if (sh("'%s/psql' -h %s -p %d -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 -c \"CREATE ROLE hoster LOGIN "
               "CREATEROLE CREATEDB PASSWORD '" ADMIN_PASSWORD "'; CREATE ROLE weak LOGIN PASSWORD '" ADMIN_PASSWORD
               "'\" >/dev/null", bindir, root, port) != 0)
                return -1;
        snprintf(url, sizeof url, "postgresql://hoster@127.0.0.1:%d/postgres?sslmode=require", port);
        return 0;
}

/* What the server's superuser sees (one value). Caller frees. */
static char *server_value(const char *sql) {
        _cleanup_free_ char *ci = NULL;
        assert_true(xasprintf(&ci, "host=%s port=%d dbname=postgres user=postgres", root, port) >= 0);
        _cleanup_(db_closep) struct db *db = NULL;
        assert_int_equal(db_connect(ci, &db), 0);
        char *v = NULL;
        assert_int_equal(db_query_value(db, sql, 0, NULL, &v), 0);
        return v;
}

static int connect_as(struct pg *pg, const char *role, const char *dbname, struct db **ret, char **ret_err) {
        _cleanup_free_ char *ci = NULL;
        int r = pg_conninfo(pg, role, dbname, &ci);
        if (r < 0)
                return r;
        return db_connect_err(ci, ret, ret_err);
}

static void need_server(void) {
        if (!server_up || !pg_a)
                skip();
}

/* ---- start ---- */

static void test_role_without_createrole_is_refused(void **state) {
        if (!server_up)
                skip();
        _cleanup_free_ char *weak = NULL;
        assert_true(xasprintf(&weak, "postgresql://weak@127.0.0.1:%d/postgres?sslmode=require", port) >= 0);
        struct pg *pg = NULL;
        assert_int_equal(pg_start_external(&(struct pg_external){.seed_dir = seed_a, .url = weak,
                                                                 .password = ADMIN_PASSWORD, .name = "seed"},
                                           &pg),
                         -EPERM);
        assert_null(pg);
        /* Nothing was created for it. */
        _cleanup_free_ char *n = server_value("SELECT count(*) FROM pg_roles WHERE rolname LIKE 'seed\\_%'");
        assert_string_equal(n, "0");
}

static void test_start(void **state) {
        if (!server_up)
                skip();
        assert_int_equal(pg_start_external(&(struct pg_external){.seed_dir = seed_a, .url = url,
                                                                 .password = ADMIN_PASSWORD, .name = "seed"},
                                           &pg_a),
                         0);
        assert_true(pg_is_external(pg_a));
        /* The password may also come in the URL (SEED_DATABASE_URL). */
        _cleanup_free_ char *with_pw = NULL;
        assert_true(xasprintf(&with_pw, "postgresql://hoster:" ADMIN_PASSWORD "@127.0.0.1:%d/postgres?sslmode=require",
                              port) >= 0);
        assert_int_equal(pg_start_external(&(struct pg_external){.seed_dir = seed_b, .url = with_pw, .name = "seed"},
                                           &pg_b),
                         0);
        /* The relay listens where sandboxes look for PostgreSQL. */
        _cleanup_free_ char *sock = path_join(seed_a, ".seed/run/.s.PGSQL.5432");
        struct stat st;
        assert_int_equal(lstat(sock, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0700);
}

/* Each Seed's roles and databases carry a prefix of its own; the kernel's
 * memory is migrated in its kernel database; passwords are fresh, 0600. */
static void test_names_and_secrets(void **state) {
        need_server();
        _cleanup_free_ char *pa = NULL, *pb = NULL;
        _cleanup_free_ char *fa = path_join(seed_a, ".seed/secrets/pg-prefix"), *fb = path_join(seed_b, ".seed/secrets/pg-prefix");
        assert_int_equal(read_file(fa, 128, &pa, NULL), 0);
        assert_int_equal(read_file(fb, 128, &pb, NULL), 0);
        pa[strcspn(pa, "\n")] = pb[strcspn(pb, "\n")] = 0;
        print_message("# prefixes: %s, %s\n", pa, pb);
        assert_true(startswith(pa, "seed_") && startswith(pb, "seed_"));
        assert_string_not_equal(pa, pb);
        _cleanup_free_ char *roles = server_value(
                "SELECT string_agg(rolname || ':' || rolsuper || rolcreatedb || rolcreaterole, ',' ORDER BY rolname) "
                "FROM pg_roles WHERE rolname LIKE 'seed\\_%'");
        print_message("# roles: %s\n", roles);
        char want[128];
        for (const char *const *r = (const char *const[]){"organism", "evolver", "reader", NULL}; *r; r++) {
                snprintf(want, sizeof want, "%s%s:falsefalsefalse", pa, *r);
                assert_non_null(strstr(roles, want));
                snprintf(want, sizeof want, "%s%s:falsefalsefalse", pb, *r);
                assert_non_null(strstr(roles, want));
                _cleanup_free_ char *file = NULL;
                snprintf(want, sizeof want, ".seed/secrets/pg-%s%s", pa, *r);
                file = path_join(seed_a, want);
                struct stat st;
                assert_int_equal(stat(file, &st), 0);
                assert_int_equal(st.st_mode & 0777, 0600);
        }
        _cleanup_free_ char *dbs = server_value(
                "SELECT string_agg(datname || ':' || pg_get_userbyid(datdba), ',' ORDER BY datname) FROM pg_database "
                "WHERE datname LIKE 'seed\\_%'");
        print_message("# databases: %s\n", dbs);
        snprintf(want, sizeof want, "%skernel:hoster", pa);
        assert_non_null(strstr(dbs, want));
        snprintf(want, sizeof want, "%slive:%sorganism", pa, pa);
        assert_non_null(strstr(dbs, want));
        /* CONNECT revoked from PUBLIC on both; reader may connect to live. */
        _cleanup_free_ char *q = NULL;
        assert_true(xasprintf(&q, "SELECT has_database_privilege('public', '%slive', 'CONNECT')::text || "
                                  "has_database_privilege('public', '%skernel', 'CONNECT')::text || "
                                  "has_database_privilege('%sreader', '%slive', 'CONNECT')::text || "
                                  "has_database_privilege('%sreader', '%skernel', 'CONNECT')::text",
                              pa, pa, pa, pa, pa, pa) >= 0);
        _cleanup_free_ char *acl = server_value(q);
        assert_string_equal(acl, "falsefalsetruefalse");
        /* The kernel's memory lives there. */
        _cleanup_(db_closep) struct db *k = NULL;
        assert_int_equal(connect_as(pg_a, "postgres", PG_KERNEL_DB, &k, NULL), 0);
        _cleanup_free_ char *n = NULL;
        assert_int_equal(db_query_value(k, "SELECT count(*) FROM kernel_migrations", 0, NULL, &n), 0);
        assert_true(atoi(n) >= 1);
}

/* The live database: organism writes, reader reads and cannot write, and
 * neither Seed's roles reach the other's databases. */
static void test_roles_and_isolation(void **state) {
        need_server();
        _cleanup_(db_closep) struct db *org = NULL, *rd = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(connect_as(pg_a, "organism", PG_LIVE_DB, &org, NULL), 0);
        assert_int_equal(db_exec(org, "CREATE TABLE notes (t text); INSERT INTO notes VALUES ('kept');"
                                      "CREATE SCHEMA app; CREATE TABLE app.items (n int); INSERT INTO app.items VALUES (7)",
                                 NULL),
                         0);
        assert_int_equal(connect_as(pg_a, "reader", PG_LIVE_DB, &rd, NULL), 0);
        _cleanup_free_ char *t = NULL, *n = NULL;
        assert_int_equal(db_query_value(rd, "SELECT t FROM notes", 0, NULL, &t), 0);
        assert_string_equal(t, "kept");
        assert_int_equal(db_query_value(rd, "SELECT n FROM app.items", 0, NULL, &n), 0);
        assert_string_equal(n, "7");
        assert_true(db_exec(rd, "INSERT INTO notes VALUES ('by-reader')", &err) < 0);
        print_comment("reader writing: ", err);
        free(err), err = NULL;
        assert_true(db_exec(rd, "CREATE TABLE mine (x int)", &err) < 0);
        free(err), err = NULL;
        /* The reader cannot reach the kernel's memory, nor evolver the live data. */
        struct db *x = NULL;
        assert_true(connect_as(pg_a, "reader", PG_KERNEL_DB, &x, NULL) < 0);
        assert_true(connect_as(pg_a, "evolver", PG_LIVE_DB, &x, NULL) < 0);
        assert_true(connect_as(pg_a, "organism", PG_KERNEL_DB, &x, NULL) < 0);
        /* Seed A's organism cannot open Seed B's live database. */
        _cleanup_free_ char *ci = NULL, *pb = NULL, *fb = path_join(seed_b, ".seed/secrets/pg-prefix"), *other = NULL;
        assert_int_equal(read_file(fb, 128, &pb, NULL), 0);
        pb[strcspn(pb, "\n")] = 0;
        assert_int_equal(pg_conninfo(pg_a, "organism", PG_LIVE_DB, &ci), 0);
        assert_true(xasprintf(&other, "%s dbname='%slive'", ci, pb) >= 0);
        assert_true(db_connect_err(other, &x, &err) < 0);
        print_comment("A organism -> B live: ", err);
}

/* Scratch databases are created under the prefix, owned by evolver. */
static void test_scratch(void **state) {
        need_server();
        assert_int_equal(pg_scratch_create(pg_a, "evo_0123456789abcdef_test"), 0);
        _cleanup_(db_closep) struct db *ev = NULL;
        struct db *x = NULL;
        assert_int_equal(connect_as(pg_a, "evolver", "evo_0123456789abcdef_test", &ev, NULL), 0);
        assert_int_equal(db_exec(ev, "CREATE TABLE t (x int)", NULL), 0);
        assert_true(connect_as(pg_a, "organism", "evo_0123456789abcdef_test", &x, NULL) < 0);
        assert_true(connect_as(pg_a, "reader", "evo_0123456789abcdef_test", &x, NULL) < 0);
        assert_int_equal(pg_scratch_drop(pg_a, "evo_0123456789abcdef_test"), 0);
        _cleanup_free_ char *n = server_value("SELECT count(*) FROM pg_database WHERE datname LIKE '%evo\\_0123%'");
        assert_string_equal(n, "0");
}

/* ---- the organism's sandbox, through the relay ---- */

static int sandboxed_url(const char *seed, struct pg *pg, const char *dburl, const char *script, char **ret_out) {
        struct sandbox_spec spec = {
                .profile = SANDBOX_LIVE,
                .seed_dir = seed,
                .workspace = seed,
                .workspace_readonly = true,
                .pg_socket_dir = pg_socket_dir(pg),
                .database_url = (char *)dburl,
        };
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *p = NULL;
        assert_int_equal(sandbox_policy_build(&spec, &p), 0);
        char *cmd[] = {"/bin/sh", "-c", (char *)script, NULL};
        struct proc_result res = {0};
        assert_int_equal(sandbox_run(p, cmd, 60000, &res), 0);
        print_comment("sandbox: ", res.output);
        if (ret_out)
                *ret_out = TAKE_PTR(res.output);
        int code = res.exit_code;
        proc_result_done(&res);
        return code;
}

static int sandboxed_in(const char *seed, struct pg *pg, const char *role, const char *dbname, const char *script,
                        char **ret_out) {
        _cleanup_free_ char *dburl = NULL;
        assert_int_equal(pg_sandbox_url(pg, role, dbname, &dburl), 0);
        return sandboxed_url(seed, pg, dburl, script, ret_out);
}

static int sandboxed(struct pg *pg, const char *role, const char *dbname, const char *script, char **ret_out) {
        return sandboxed_in(pg == pg_a ? seed_a : seed_b, pg, role, dbname, script, ret_out);
}

static void test_organism_sandbox_uses_its_database(void **state) {
        need_server();
        if (no_bwrap) {
                print_message("# skipped: %s\n", no_bwrap);
                skip();
        }
        _cleanup_free_ char *out = NULL;
        /* No network but lo inside; the database is a Unix socket away. */
        assert_int_equal(sandboxed(pg_a, "organism", PG_LIVE_DB,
                                   "psql \"$DATABASE_URL\" -qAt -v ON_ERROR_STOP=1 -c \"CREATE TABLE visits (n int); "
                                   "INSERT INTO visits VALUES (41), (1); SELECT sum(n) FROM visits\"",
                                   &out),
                         0);
        assert_non_null(strstr(out, "42"));
        /* What the sandbox wrote is on the external server. */
        _cleanup_(db_closep) struct db *rd = NULL;
        _cleanup_free_ char *sum = NULL;
        assert_int_equal(connect_as(pg_a, "reader", PG_LIVE_DB, &rd, NULL), 0);
        assert_int_equal(db_query_value(rd, "SELECT sum(n) FROM visits", 0, NULL, &sum), 0);
        assert_string_equal(sum, "42");
        /* The reader's URL reads and cannot write, from inside too. */
        free(out), out = NULL;
        assert_int_not_equal(sandboxed(pg_a, "reader", PG_LIVE_DB,
                                       "psql \"$DATABASE_URL\" -qAt -v ON_ERROR_STOP=1 -c \"SELECT sum(n) FROM visits\" "
                                       "-c \"INSERT INTO visits VALUES (1)\"",
                                       &out),
                         0);
        assert_non_null(strstr(out, "42"));
        assert_non_null(strstr(out, "permission denied"));
}

/* The relay carries this Seed's roles to this Seed's databases only: not
 * the administrator, not the kernel's memory, not the other Seed's. */
static void test_relay_refuses_what_is_not_the_seeds(void **state) {
        need_server();
        if (no_bwrap) {
                print_message("# skipped: %s\n", no_bwrap);
                skip();
        }
        _cleanup_free_ char *pb = NULL, *fb = path_join(seed_b, ".seed/secrets/pg-prefix");
        assert_int_equal(read_file(fb, 128, &pb, NULL), 0);
        pb[strcspn(pb, "\n")] = 0;
        /* One psql each: the administrator; the Seed's organism to its own
         * kernel database, to the other Seed's live one, to postgres. */
        const char *checks[][2] = {
                {"hoster", "postgres"},
                {NULL, "kernel"},  /* A's own kernel database */
                {NULL, "blive"},   /* B's live database */
                {NULL, "postgres"},
        };
        _cleanup_free_ char *pa = NULL, *fa = path_join(seed_a, ".seed/secrets/pg-prefix");
        assert_int_equal(read_file(fa, 128, &pa, NULL), 0);
        pa[strcspn(pa, "\n")] = 0;
        for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
                char user[96], db[96];
                snprintf(user, sizeof user, "%s", checks[i][0] ? checks[i][0] : "");
                if (!checks[i][0])
                        snprintf(user, sizeof user, "%sorganism", pa);
                if (streq(checks[i][1], "kernel"))
                        snprintf(db, sizeof db, "%skernel", pa);
                else if (streq(checks[i][1], "blive"))
                        snprintf(db, sizeof db, "%slive", pb);
                else
                        snprintf(db, sizeof db, "%s", checks[i][1]);
                _cleanup_free_ char *s = NULL, *o = NULL;
                assert_true(xasprintf(&s, "psql 'host=/run/postgresql user=%s dbname=%s' -qAt -c 'SELECT 1' 2>&1",
                                      user, db) >= 0);
                assert_int_not_equal(sandboxed(pg_a, "organism", PG_LIVE_DB, s, &o), 0);
                assert_non_null(strstr(o, "Seed's relay"));
        }
        /* A replication connection of the Seed's own role is refused too. */
        _cleanup_free_ char *s = NULL, *o = NULL;
        assert_true(xasprintf(&s, "psql \"$DATABASE_URL&replication=database\" -qAt -c 'IDENTIFY_SYSTEM' 2>&1") >= 0);
        assert_int_not_equal(sandboxed(pg_a, "organism", PG_LIVE_DB, s, &o), 0);
        assert_non_null(strstr(o, "replication"));
}

/* sslmode=verify-full with the server's certificate as the root: the kernel
 * (libpq) and the relay (base/tls.c) both check the chain and the name
 * (localhost) before anything reaches the server. With another root in the
 * file, the relay's next connection is refused before the server sees it. */
static void test_verify_full_through_the_relay(void **state) {
        need_server();
        if (no_bwrap) {
                print_message("# skipped: %s\n", no_bwrap);
                skip();
        }
        char seed_c[] = "/tmp/pgx-c-XXXXXX";
        assert_non_null(mkdtemp(seed_c));
        _cleanup_free_ char *u = NULL, *out = NULL;
        assert_int_equal(sh("cp %s/data/server.crt %s/root.crt", root, seed_c), 0);
        assert_true(xasprintf(&u, "postgresql://hoster@localhost:%d/postgres?sslmode=verify-full&sslrootcert=%s/root.crt",
                              port, seed_c) >= 0);
        struct pg *pg = NULL;
        assert_int_equal(pg_start_external(&(struct pg_external){.seed_dir = seed_c, .url = u,
                                                                 .password = ADMIN_PASSWORD, .name = "tls"},
                                           &pg),
                         0);
        int code = sandboxed_in(seed_c, pg, "organism", PG_LIVE_DB,
                                "psql \"$DATABASE_URL\" -qAt -c 'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()'",
                                &out);
        assert_int_equal(sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/other.key -out %s/root.crt "
                            "-subj /CN=localhost -days 2 >/dev/null 2>&1", seed_c, seed_c), 0);
        _cleanup_free_ char *refused = NULL;
        int code2 = sandboxed_in(seed_c, pg, "organism", PG_LIVE_DB, "psql \"$DATABASE_URL\" -qAt -c 'SELECT 1' 2>&1",
                                 &refused);
        pg_stop(pg);
        rm_rf(seed_c);
        assert_int_equal(code, 0);
        assert_non_null(strstr(out, "t"));
        assert_int_not_equal(code2, 0);
        assert_non_null(strstr(refused, "cannot reach the external PostgreSQL"));
}

/* ---- backups ---- */

static void test_backup_and_restore(void **state) {
        need_server();
        _cleanup_(db_closep) struct db *org = NULL;
        assert_int_equal(connect_as(pg_a, "organism", PG_LIVE_DB, &org, NULL), 0);
        assert_int_equal(db_exec(org, "CREATE TABLE IF NOT EXISTS notes (t text); DELETE FROM notes;"
                                      "INSERT INTO notes VALUES ('before')",
                                 NULL),
                         0);
        _cleanup_free_ char *path = NULL;
        assert_int_equal(pg_backup_take(pg_a, seed_a, 3, "abc123", &path), 0);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(db_exec(org, "INSERT INTO notes VALUES ('after'); CREATE TABLE later (x int)", NULL), 0);
        db_close(TAKE_PTR(org));
        assert_int_equal(pg_live_restore(pg_a, path), 0);
        assert_int_equal(connect_as(pg_a, "organism", PG_LIVE_DB, &org, NULL), 0);
        _cleanup_free_ char *all = NULL, *later = NULL;
        assert_int_equal(db_query_value(org, "SELECT string_agg(t, ',') FROM notes", 0, NULL, &all), 0);
        assert_string_equal(all, "before");
        assert_int_equal(db_query_value(org, "SELECT count(*) FROM pg_tables WHERE tablename = 'later'", 0, NULL, &later),
                         0);
        assert_string_equal(later, "0");
        /* The reader reads the restored data, and still cannot write. */
        _cleanup_(db_closep) struct db *rd = NULL;
        _cleanup_free_ char *t = NULL, *n = NULL;
        assert_int_equal(connect_as(pg_a, "reader", PG_LIVE_DB, &rd, NULL), 0);
        assert_int_equal(db_query_value(rd, "SELECT t FROM notes", 0, NULL, &t), 0);
        assert_string_equal(t, "before");
        assert_int_equal(db_query_value(rd, "SELECT n FROM app.items", 0, NULL, &n), 0);
        assert_string_equal(n, "7");
        assert_true(db_exec(rd, "DELETE FROM notes", NULL) < 0);
        /* CONNECT is still the reader's alone besides the owner. */
        _cleanup_free_ char *pa = NULL, *fa = path_join(seed_a, ".seed/secrets/pg-prefix"), *q = NULL;
        assert_int_equal(read_file(fa, 128, &pa, NULL), 0);
        pa[strcspn(pa, "\n")] = 0;
        assert_true(xasprintf(&q, "SELECT has_database_privilege('public', '%slive', 'CONNECT')::text", pa) >= 0);
        _cleanup_free_ char *pub = server_value(q);
        assert_string_equal(pub, "false");
}

/* ---- copies of the live data (previews) ---- */

static char *count_on_server(const char *fmt, ...) _printf_(1, 2);
static char *count_on_server(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        _cleanup_free_ char *q = NULL;
        int n = vasprintf(&q, fmt, ap);
        va_end(ap);
        assert_true(n >= 0);
        return server_value(q);
}

/* A preview's copy lives under the Seed's prefix on the external server, is
 * reached by the candidate's sandbox through the relay with its own role,
 * is nobody else's, and drop_all removes this Seed's copies only. */
static void test_live_copy(void **state) {
        need_server();
        _cleanup_free_ char *pa = NULL, *fa = path_join(seed_a, ".seed/secrets/pg-prefix");
        assert_int_equal(read_file(fa, 128, &pa, NULL), 0);
        pa[strcspn(pa, "\n")] = 0;
        _cleanup_(pg_live_copy_done) struct pg_live_copy c = {0}, other = {0};
        assert_int_equal(pg_live_copy_create(pg_a, "preview_0a1b", PG_LIVE_COPY_MAX_BYTES, &c), 0);
        assert_true(c.copied);
        assert_int_equal(pg_live_copy_create(pg_b, "preview_0a1b", PG_LIVE_COPY_MAX_BYTES, &other), 0);
        _cleanup_free_ char *phys = NULL;
        assert_true(xasprintf(&phys, "%spreview_0a1b", pa) >= 0);
        _cleanup_free_ char *n = count_on_server("SELECT count(*) FROM pg_database WHERE datname = '%s'", phys);
        assert_string_equal(n, "1");
        _cleanup_free_ char *owner = count_on_server(
                "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '%s'", phys);
        assert_string_equal(owner, phys);
        /* The kernel reads it as the copy's role: the live data is there. */
        _cleanup_free_ char *ci = NULL, *t = NULL;
        _cleanup_(db_closep) struct db *db = NULL;
        assert_int_equal(pg_live_copy_conninfo(pg_a, &c, &ci), 0);
        assert_int_equal(db_connect(ci, &db), 0);
        assert_int_equal(db_query_value(db, "SELECT string_agg(t, ',') FROM notes", 0, NULL, &t), 0);
        assert_string_equal(t, "before");
        /* The organism's role may not connect to it. */
        struct db *x = NULL;
        _cleanup_free_ char *orgci = NULL, *cdb = NULL;
        assert_int_equal(pg_conninfo(pg_a, "organism", PG_LIVE_DB, &orgci), 0);
        orgci[strstr(orgci, "dbname=") - orgci] = 0;
        assert_true(xasprintf(&cdb, "%s dbname='%s'", orgci, phys) >= 0);
        assert_true(db_connect(cdb, &x) < 0);
        if (no_bwrap)
                print_message("# sandbox part skipped: %s\n", no_bwrap);
        else {
                _cleanup_free_ char *copy_url = NULL, *out = NULL;
                assert_int_equal(pg_live_copy_url(pg_a, &c, &copy_url), 0);
                assert_int_equal(sandboxed_url(seed_a, pg_a, copy_url,
                                               "psql \"$DATABASE_URL\" -qAt -v ON_ERROR_STOP=1 -c \"INSERT INTO notes "
                                               "VALUES ('preview')\" -c \"SELECT count(*) FROM notes\"",
                                               &out),
                                 0);
                assert_non_null(strstr(out, "2"));
        }
        /* drop_all: this Seed's copies only. */
        db_close(TAKE_PTR(db));
        assert_int_equal(pg_live_copy_drop_all(pg_a), 1);
        free(n);
        n = count_on_server("SELECT count(*) FROM pg_roles WHERE rolname = '%s'", phys);
        assert_string_equal(n, "0");
        free(n);
        n = server_value("SELECT count(*) FROM pg_database WHERE datname LIKE '%preview\\_0a1b'");
        assert_string_equal(n, "1");
        assert_int_equal(pg_live_copy_drop(pg_b, other.name), 0);
        free(n);
        n = server_value("SELECT count(*) FROM pg_roles WHERE rolname LIKE '%preview%'");
        assert_string_equal(n, "0");
}

/* A restart finds its roles, passwords and data again; a stop leaves the
 * server running and removes the relay's socket. */
static void test_restart_and_stop(void **state) {
        need_server();
        pg_stop(pg_a);
        pg_a = NULL;
        _cleanup_free_ char *sock = path_join(seed_a, ".seed/run/.s.PGSQL.5432");
        assert_false(path_exists(sock));
        assert_int_equal(pg_start_external(&(struct pg_external){.seed_dir = seed_a, .url = url,
                                                                 .password = ADMIN_PASSWORD, .name = "renamed"},
                                           &pg_a),
                         0);
        _cleanup_(db_closep) struct db *org = NULL;
        _cleanup_free_ char *t = NULL;
        assert_int_equal(connect_as(pg_a, "organism", PG_LIVE_DB, &org, NULL), 0);
        assert_int_equal(db_query_value(org, "SELECT t FROM notes", 0, NULL, &t), 0);
        assert_string_equal(t, "before");
}

static int group_setup(void **state) {
        (void)state;
        snprintf(root, sizeof root, "/tmp/pgx-XXXXXX");
        snprintf(seed_a, sizeof seed_a, "/tmp/pgx-a-XXXXXX");
        snprintf(seed_b, sizeof seed_b, "/tmp/pgx-b-XXXXXX");
        if (!mkdtemp(root) || !mkdtemp(seed_a) || !mkdtemp(seed_b))
                return -1;
        if (server_start() < 0) {
                print_message("# the test's PostgreSQL server did not start; see %s\n", root);
                _cleanup_free_ char *log = NULL, *lp = path_join(root, "server.log");
                if (lp && read_file(lp, 8192, &log, NULL) >= 0)
                        print_comment("server.log: ", log);
        }
        if (sandbox_check(&no_bwrap) >= 0) {
                free(no_bwrap);
                no_bwrap = NULL;
        }
        return 0;
}

static int group_teardown(void **state) {
        (void)state;
        pg_stop(pg_a);
        pg_stop(pg_b);
        if (server_up)
                (void)sh("'%s/pg_ctl' -D %s/data -m fast -w stop >/dev/null 2>&1", bindir, root);
        rm_rf(seed_a);
        rm_rf(seed_b);
        rm_rf(root);
        free(bindir);
        free(no_bwrap);
        return 0;
}

int main(void) {
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "cannot drop root\n");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_role_without_createrole_is_refused),
                cmocka_unit_test(test_start),
                cmocka_unit_test(test_names_and_secrets),
                cmocka_unit_test(test_roles_and_isolation),
                cmocka_unit_test(test_scratch),
                cmocka_unit_test(test_organism_sandbox_uses_its_database),
                cmocka_unit_test(test_relay_refuses_what_is_not_the_seeds),
                cmocka_unit_test(test_verify_full_through_the_relay),
                cmocka_unit_test(test_backup_and_restore),
                cmocka_unit_test(test_live_copy),
                cmocka_unit_test(test_restart_and_stop),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
