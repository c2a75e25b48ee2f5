/* external.c — an external PostgreSQL (database.url / SEED_DATABASE_URL),
 * for hosting: the kernel's memory, the live database, the scratch
 * databases and the roles organism / evolver / reader, all created there
 * by the URL's role under this Seed's prefix, and the relay that carries
 * sandboxes' connections to it. Talks SQL only through kernel/db. */
#include "pg/internal.h"
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/log.h"
#include "db/db.h"

#define PG_PREFIX_NAME_MAX 16 /* of the Seed's name in the prefix */
#define PG_PREFIX_ID_BYTES 5  /* 10 hex digits: Seeds of one name do not meet */
#define PG_CONNECT_TIMEOUT_MS 30000

/* "<name>_<10 hex>_": a-z, 0-9 and '_' only, so every name made with it is
 * a plain SQL identifier. */
static bool prefix_valid(const char *s) {
        size_t n = strlen(s);
        if (n < 3 || n > PG_PREFIX_NAME_MAX + 2 + 2 * PG_PREFIX_ID_BYTES || !(s[0] >= 'a' && s[0] <= 'z') ||
            s[n - 1] != '_')
                return false;
        return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* The Seed's prefix, made once from its name and a random id and kept in
 * .seed/secrets/pg-prefix: a later change of name keeps the data. */
static int load_prefix(struct pg *pg, const char *name) {
        _cleanup_free_ char *path = path_join(pg->secretsdir, "pg-prefix"), *s = NULL, *id = NULL;
        if (!path)
                return -ENOMEM;
        int r = pg_secret_read(path, &s);
        if (r >= 0) {
                if (!prefix_valid(s))
                        return log_error_errno(-EINVAL, "%s does not hold a database prefix", path);
                pg->prefix = TAKE_PTR(s);
                return 0;
        }
        if (r != -ENOENT)
                return r;
        char base[PG_PREFIX_NAME_MAX + 1];
        size_t n = 0;
        for (const char *p = name ? name : ""; *p && n < PG_PREFIX_NAME_MAX; p++)
                if ((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')
                        base[n++] = *p == '-' ? '_' : *p;
        base[n] = 0;
        if ((r = crypto_random_hex(PG_PREFIX_ID_BYTES, &id)) < 0 ||
            xasprintf(&s, "%s%s_%s_", n && base[0] >= 'a' ? "" : "seed", base, id) < 0)
                return r < 0 ? r : -ENOMEM;
        if (!prefix_valid(s))
                return log_error_errno(-EINVAL, "cannot make a database prefix of the Seed's name");
        if ((r = pg_secret_write(path, s)) < 0)
                return r;
        pg->prefix = TAKE_PTR(s);
        return 0;
}

/* How to reach the server: every option of the URL but user, password and
 * dbname, which each connection sets itself. The URL's password (unless one
 * was given apart) is the administrator's. */
static int take_url(struct pg *pg, const char *url, const char *password) {
        _cleanup_strv_free_ char **kv = NULL;
        int r = db_conninfo_parse(url, &kv);
        if (r < 0)
                return log_error_errno(r, "the external database's URL is not a PostgreSQL connection string "
                                          "(database.url or SEED_DATABASE_URL)");
        for (size_t i = 0; r >= 0 && kv[i] && kv[i + 1]; i += 2) {
                if (streq(kv[i], "password")) {
                        if (!password && !(pg->passwords[ROLE_POSTGRES] = strdup(kv[i + 1])))
                                r = -ENOMEM;
                } else if (streq(kv[i], "host") && strchr(kv[i + 1], ','))
                        r = log_error_errno(-EINVAL, "the external database's URL names several hosts: give one");
                else if (!streq(kv[i], "user") && !streq(kv[i], "dbname"))
                        r = strv_push(&pg->server, kv[i]) < 0 || strv_push(&pg->server, kv[i + 1]) < 0 ? -ENOMEM : 0;
                secure_zero(kv[i + 1], strlen(kv[i + 1]));
        }
        if (r >= 0 && password && !(pg->passwords[ROLE_POSTGRES] = strdup(password)))
                r = -ENOMEM;
        /* Never an empty list: libpq's defaults, said once. */
        if (r >= 0 && !pg->server && (strv_push(&pg->server, "port") < 0 || strv_push(&pg->server, PG_PORT) < 0))
                r = -ENOMEM;
        return r;
}

/* Who the URL's role is, and whether it may do what a Seed needs. */
static int check_admin(struct pg *pg, const char *url) {
        _cleanup_(db_closep) struct db *db = NULL;
        int r = db_connect_wait_password(url, pg->passwords[ROLE_POSTGRES], PG_CONNECT_TIMEOUT_MS, &db);
        if (r < 0)
                return log_error_errno(r, "cannot connect to the external PostgreSQL (database.url)");
        _cleanup_free_ char *json = NULL;
        r = db_query_json(db,
                          "SELECT current_user AS role, current_database() AS db, rolsuper AS super, "
                          "rolcreaterole AS createrole, rolcreatedb AS createdb "
                          "FROM pg_roles WHERE rolname = current_user",
                          0, NULL, &json);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *rows = json_loads(json, 0, NULL);
        json_t *row = json_array_get(rows, 0);
        const char *role = json_string_value(json_object_get(row, "role"));
        const char *dbname = json_string_value(json_object_get(row, "db"));
        if (!role || !dbname)
                return log_error_errno(-EIO, "the external PostgreSQL did not say who its role is");
        pg->admin_super = json_is_true(json_object_get(row, "super"));
        if (!pg->admin_super &&
            !(json_is_true(json_object_get(row, "createrole")) && json_is_true(json_object_get(row, "createdb"))))
                return log_error_errno(-EPERM, "the external PostgreSQL's role '%s' (database.url) needs CREATEROLE and "
                                               "CREATEDB to give this Seed roles and databases of its own: as a "
                                               "superuser there, run ALTER ROLE \"%s\" CREATEROLE CREATEDB",
                                       role, role);
        if (!(pg->roles[ROLE_POSTGRES] = strdup(role)) || !(pg->admin_db = strdup(dbname)))
                return -ENOMEM;
        return 0;
}

static int name_roles(struct pg *pg) {
        for (int i = ROLE_ORGANISM; i < ROLE_COUNT; i++)
                if (xasprintf(&pg->roles[i], "%s%s", pg->prefix, pg_role_names[i]) < 0)
                        return -ENOMEM;
        if (xasprintf(&pg->kernel_db, "%skernel", pg->prefix) < 0 || xasprintf(&pg->live_db, "%slive", pg->prefix) < 0)
                return -ENOMEM;
        return 0;
}

int pg_external_reader_grants(const struct pg *pg) {
        _cleanup_free_ char *ci = NULL, *stmt = NULL;
        int r = pg_conninfo(pg, "organism", PG_LIVE_DB, &ci);
        if (r < 0)
                return r;
        _cleanup_(db_closep) struct db *db = NULL;
        r = db_connect(ci, &db);
        secure_zero(ci, strlen(ci));
        if (r < 0)
                return r;
        /* The reader's name is ours (a plain identifier). What organism
         * makes from now on, and what it has made, in every schema of its. */
        const char *R = pg->roles[ROLE_READER];
        if (xasprintf(&stmt,
                      "ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO %s;"
                      "ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO %s;"
                      "ALTER DEFAULT PRIVILEGES GRANT SELECT ON SEQUENCES TO %s;"
                      "DO $$ DECLARE s name; BEGIN "
                      "FOR s IN SELECT nspname FROM pg_namespace WHERE pg_has_role(nspowner, 'USAGE') "
                      "AND nspname NOT LIKE 'pg\\_%%' AND nspname <> 'information_schema' LOOP "
                      "EXECUTE format('GRANT USAGE ON SCHEMA %%I TO %s', s); "
                      "EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %%I TO %s', s); "
                      "EXECUTE format('GRANT SELECT ON ALL SEQUENCES IN SCHEMA %%I TO %s', s); "
                      "END LOOP; END $$",
                      R, R, R, R, R, R) < 0)
                return -ENOMEM;
        return pg_sql(db, "letting reader read the live database", stmt);
}

int pg_start_external(const struct pg_external *x, struct pg **ret) {
        if (!x || strempty(x->url) || !ret)
                return -EINVAL;
        _cleanup_(pg_freep) struct pg *pg = calloc(1, sizeof(*pg));
        if (!pg)
                return -ENOMEM;
        pg->external = true;
        pthread_mutex_init(&pg->live_lock, NULL);
        int r = pg_setup_paths(x->seed_dir, pg);
        if (r < 0 || (r = take_url(pg, x->url, x->password)) < 0 || (r = check_admin(pg, x->url)) < 0 ||
            (r = load_prefix(pg, x->name)) < 0 || (r = name_roles(pg)) < 0)
                return r;
        _cleanup_free_ char *why = NULL;
        if (pg_find_bindir(&pg->bindir, &why) < 0)
                log_warn("%s: backups of the live data cannot be taken", why ? why : "no PostgreSQL programs");
        if ((r = pg_bootstrap(pg)) < 0 || (r = pg_relay_start(pg, &pg->relay)) < 0)
                return r;
        log_info("external PostgreSQL ready: role '%s', this Seed's databases and roles start with '%s'%s",
                 pg->roles[ROLE_POSTGRES], pg->prefix, pg->admin_super ? " (the role is a superuser)" : "");
        *ret = TAKE_PTR(pg);
        return 0;
}
