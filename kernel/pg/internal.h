/* internal.h — what the pg module's files share: struct pg, and the role
 * and database work both kinds of server get (pg.c). Not for other modules:
 * they see only pg.h.
 *
 * A struct pg is one of two kinds behind the same interface:
 *   private   the Seed's own server (pg.c): initdb, a postmaster on a Unix
 *             socket in .seed/run, roles and databases under fixed names;
 *   external  a server named by database.url (external.c): the roles and
 *             databases are created there under a prefix of this Seed's
 *             own, and a relay (relay.c) listening in .seed/run is how
 *             sandboxes, which have no network, reach it.
 * Callers name roles and databases by their logical names ("organism",
 * PG_LIVE_DB, a scratch name); pg maps them to the names on the server. */
#pragma once

#include "pg/pg.h"

#include <pthread.h>

struct db;
struct pg_relay;

/* Roles the kernel manages; index 0 is the administrator (the private
 * server's superuser, or database.url's role). */
enum { ROLE_POSTGRES, ROLE_ORGANISM, ROLE_EVOLVER, ROLE_READER, ROLE_COUNT };
/* The logical names callers use: "postgres", "organism", "evolver", "reader". */
extern const char *const pg_role_names[ROLE_COUNT];

#define PG_PORT "5432"
#define PG_SOCKET_NAME "/.s.PGSQL." PG_PORT
#define PG_NAME_MAX 63 /* PostgreSQL's identifier limit (NAMEDATALEN - 1) */

struct pg {
        bool external;
        char *datadir, *rundir, *secretsdir, *logpath, *bindir;
        char *passwords[ROLE_COUNT]; /* [ROLE_POSTGRES] may be NULL for an external server */
        char *roles[ROLE_COUNT];     /* the names on the server */
        char *admin_db;              /* where the administrator connects ("postgres") */
        char *kernel_db, *live_db;   /* the names on the server */
        char *prefix;                /* of every name this Seed creates: "" or "<name>_<hex>_" */
        char **server;               /* conninfo keyword, value, ...: how to reach the server
                                      * (host, port, TLS), never user, password or dbname */
        bool admin_super;            /* the administrator is a superuser */
        struct pg_relay *relay;      /* external: the sandboxes' way to the server */
        /* private: the postmaster, and the thread copying its stderr into postgres.log */
        pid_t pid;
        pthread_t pump;
        bool pump_started;
        pthread_mutex_t live_lock;   /* held by whoever changes the live data (pg_live_lock) */
};

/* ---- shared by both kinds (pg.c) ---- */
/* .seed/run, .seed/secrets, .seed/logs (0700) and their paths in pg. */
int pg_setup_paths(const char *seed_dir, struct pg *pg);
/* Frees everything (the postmaster and the relay must be stopped). */
void pg_free(struct pg *pg);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pg *, pg_free)
/* A password kept in .seed/secrets (0600): read (-ENOENT if missing), write. */
int pg_secret_read(const char *path, char **ret);
int pg_secret_write(const char *path, const char *password);
/* Runs SQL text; logs what failed. */
int pg_sql(struct db *db, const char *what, const char *text);
/* Roles (with passwords and limits), the kernel and live databases, CONNECT
 * revoked from PUBLIC, then the kernel database's migrations. */
int pg_bootstrap(struct pg *pg);
/* The administrator's connection to its own database. */
int pg_admin_db(const struct pg *pg, struct db **ret);

/* ---- external.c ---- */
/* As the live database's owner: reader may read all of it (an external
 * server's reader gets no pg_read_all_data, which would reach every
 * database on a shared server that is open to PUBLIC). */
int pg_external_reader_grants(const struct pg *pg);

/* ---- relay.c ---- */
/* Listens on <rundir>/.s.PGSQL.5432 and carries each connection to the
 * server in pg->server, for this Seed's roles and databases only. */
int pg_relay_start(const struct pg *pg, struct pg_relay **ret);
/* Ends every connection and the listener. Accepts NULL. */
void pg_relay_stop(struct pg_relay *relay);
