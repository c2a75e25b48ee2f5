/* pg.h — the Seed's PostgreSQL, of one of two kinds behind this interface:
 *
 * private (pg_start): initdb into .seed/postgres on first start
 * (scram-sha-256, random superuser password in .seed/secrets, 0600),
 * listening only on a Unix socket in .seed/run (0700, no TCP), the roles
 * organism / evolver / reader, the kernel-memory and live databases, CONNECT
 * revoked from PUBLIC everywhere. Runs as the kernel's own (never root) uid.
 *
 * external (pg_start_external, for hosting: database.url or
 * SEED_DATABASE_URL): the same roles and databases, created on that server
 * by its role (which needs CREATEROLE and CREATEDB) under names prefixed
 * with the Seed's own ("<name>_<10 hex>_organism", kept in .seed/secrets)
 * so that Seeds sharing a server never meet; fresh random passwords in
 * .seed/secrets (0600). Sandboxes have no network: the kernel relays
 * connections from a Unix socket in .seed/run (what they see as
 * /run/postgresql) to the server, for this Seed's roles and databases only.
 *
 * Callers name roles and databases logically ("organism", PG_LIVE_DB, a
 * scratch name); conninfos and URLs carry the names on the server. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

#define PG_KERNEL_DB "seed_kernel"
#define PG_LIVE_DB "organism"

struct pg;

/* seed_dir: the Seed's folder (absolute). Initialises on first use, starts
 * the server (stopping a stale one left by a killed kernel), waits until it
 * accepts connections, and ensures roles and databases exist. */
int pg_start(const char *seed_dir, struct pg **ret);
/* An external server: url is a libpq conninfo or postgresql:// URL (never
 * logged; a password in it is used, password, when not NULL, overrides it),
 * name the Seed's (seed.yaml's name: the start of the prefix). Checks the
 * URL's role may create roles and databases (-EPERM, saying so, if not),
 * ensures the roles and databases, migrates the kernel database and starts
 * the relay. Runs as the kernel's own uid. */
struct pg_external {
        const char *seed_dir;
        const char *url;
        const char *password;
        const char *name;
};
int pg_start_external(const struct pg_external *x, struct pg **ret);
bool pg_is_external(const struct pg *pg);
/* The private server's watchdog, for one thread at a time (never beside
 * pg_stop()). pg_check(): 0 while the postmaster runs; -ESRCH when it is
 * not running (killed, out of memory, crashed: its leftover backends are
 * killed too), with *ret_why saying how it ended (caller frees).
 * pg_restart(): starts a postmaster that is not running and waits until it
 * accepts connections (up to 60 s); 0 also when it runs already.
 * An external server is not ours to watch: both return 0. */
int pg_check(struct pg *pg, char **ret_why);
int pg_restart(struct pg *pg);
/* Fast shutdown, waits up to 30 s, then SIGKILL (an external server: the
 * relay ends, the server is not ours to stop). Frees. Accepts NULL. */
void pg_stop(struct pg *pg);
/* The socket directory (.seed/run; the relay's socket for an external
 * server). Borrowed. */
const char *pg_socket_dir(const struct pg *pg);
/* A libpq conninfo for role ("postgres" = superuser or the external URL's
 * role, "organism", "evolver", "reader") and database, with its password.
 * Caller frees; never log it. -ENAMETOOLONG if a scratch name with the
 * prefix passes PostgreSQL's 63 bytes. */
int pg_conninfo(const struct pg *pg, const char *role, const char *dbname, char **ret);
/* The postgresql:// URL a sandbox uses (socket path as seen inside the
 * sandbox: /run/postgresql). Caller frees; never log it. */
int pg_sandbox_url(const struct pg *pg, const char *role, const char *dbname, char **ret);
pid_t pg_pid(const struct pg *pg);
/* Scratch databases for evolutions: (re)created empty, owned by role
 * evolver, CONNECT revoked from PUBLIC like every other database (a new
 * database would otherwise let every role connect), and any other role's
 * session that slipped in before the revoke is terminated. name matches
 * [a-z][a-z0-9_]{0,62} and is none of the kernel's own databases; -EINVAL
 * otherwise. Drop terminates the scratch database's sessions. */
int pg_scratch_create(const struct pg *pg, const char *name);
int pg_scratch_drop(const struct pg *pg, const char *name);
/* The scratch databases whose (logical) names start with start, e.g.
 * "evo_" (at boot: what a killed kernel left). *ret: a NULL-terminated
 * list, NULL when there is none; caller frees with strv_free(). */
int pg_scratch_list(const struct pg *pg, const char *start, char ***ret);
/* Live-data backups (.seed/backups/): a dump of the live database in
 * pg_dump's custom format, taken as its owner, written to path + ".tmp"
 * (0600) and renamed into place. */
int pg_live_backup(const struct pg *pg, const char *path);
/* Replaces the live database with the dump at path: its sessions are ended,
 * it is recreated empty (owned by organism, CONNECT revoked from PUBLIC and
 * granted to reader) and the dump is restored into it as organism, in one
 * transaction. */
int pg_live_restore(const struct pg *pg, const char *path);
/* ---- copies of the live data, for previews (the candidate generation on
 * a copy of the live data before it is applied) ----
 * A copy is a database and a role of the same name, PG_LIVE_COPY_PREFIX and
 * [a-z0-9_] (-EINVAL otherwise): the role logs in with a fresh random
 * password that is never written anywhere (the caller keeps it in memory
 * and wipes it with pg_live_copy_done), has the organism's limits and owns
 * the database, which PUBLIC may not connect to; it may not connect to any
 * other. The live data is dumped as organism and restored into the copy as
 * that role, unless the live database is over max_bytes: then the copy
 * starts empty (copied false) and the caller says so. A copy of that name
 * left by a killed kernel is dropped first. */
#define PG_LIVE_COPY_PREFIX "preview_"
#define PG_LIVE_COPY_MAX_BYTES (512LL * 1024 * 1024)
struct pg_live_copy {
        char *name;             /* the database's and the role's */
        char *password;         /* the role's; never log it */
        bool copied;            /* the live data is in it (else it is empty) */
        int64_t live_bytes;     /* the live database's size when it was made */
};
void pg_live_copy_done(struct pg_live_copy *c);
int pg_live_copy_create(const struct pg *pg, const char *name, int64_t max_bytes, struct pg_live_copy *ret);
/* The copy's postgresql:// URL as a sandbox sees it / a libpq conninfo for
 * the kernel. Caller frees; never log them. */
int pg_live_copy_url(const struct pg *pg, const struct pg_live_copy *c, char **ret);
int pg_live_copy_conninfo(const struct pg *pg, const struct pg_live_copy *c, char **ret);
/* Drops the copy's database (ending its sessions) and role. */
int pg_live_copy_drop(const struct pg *pg, const char *name);
/* Drops every copy (at boot: what a killed kernel left); how many. */
int pg_live_copy_drop_all(const struct pg *pg);
/* ---- the backups' folder (backup.c): .seed/backups/<prefix>-<N>-<hex>.dump ----
 * A backup's id is its file name without ".dump"; N is the generation that
 * was live when it was taken. Each kind keeps its newest few (before-apply
 * 10, daily 7, manual 10, before-restore 5); the oldest beyond are pruned
 * when one of that kind is taken. */
enum pg_backup_kind {
        PG_BACKUP_BEFORE_APPLY,   /* "gen-": before an apply or a rollback moves main */
        PG_BACKUP_DAILY,          /* "daily-" */
        PG_BACKUP_MANUAL,         /* "manual-": the owner's */
        PG_BACKUP_BEFORE_RESTORE, /* "restore-": today's data, saved before a restore */
        PG_BACKUP_KINDS,
};
#define PG_BACKUP_ID_MAX 64
#define PG_BACKUPS_SCANNED 256 /* a listing sees at most this many */
struct pg_backup_info {
        char id[PG_BACKUP_ID_MAX];
        enum pg_backup_kind kind;
        int generation;
        int64_t size;    /* bytes */
        int64_t time_ns; /* when it was taken (its file's mtime), ns since the epoch */
};
/* "before-apply", "daily", "manual", "before-restore"; NULL out of range. */
const char *pg_backup_kind_name(enum pg_backup_kind k);
size_t pg_backup_kind_keep(enum pg_backup_kind k);
/* Backs up the live data while generation gen is live with
 * pg_live_backup, then drops the oldest of that kind beyond its count.
 * tag: lowercase hex (at most 32), or NULL for a random one. spare_id
 * (or NULL) is never pruned: the backup a restore is about to read. *ret_path
 * (caller frees) is the dump's path. -EINVAL for a bad kind, gen or tag,
 * -ENOSPC when the disk is full (nothing is left behind). */
int pg_backup_take_kind(const struct pg *pg, const char *seed_dir, enum pg_backup_kind kind, int gen,
                        const char *tag, const char *spare_id, char **ret_path);
/* A before-apply backup, tag the evolution's id (lowercase hex). */
int pg_backup_take(const struct pg *pg, const char *seed_dir, int gen, const char *tag, char **ret_path);
/* Every backup, newest first (at most PG_BACKUPS_SCANNED). Caller frees *ret. */
int pg_backup_list(const char *seed_dir, struct pg_backup_info **ret, size_t *ret_n);
/* The newest backup (of any kind) taken while generation gen was live
 * (gen 0: any), or -ENOENT. *ret_path caller-freed. Restore it with
 * pg_live_restore. */
int pg_backup_find(const char *seed_dir, int gen, char **ret_path);
/* The file of backup id: -EINVAL not an id, -ENOENT none. Caller frees. */
int pg_backup_path(const char *seed_dir, const char *id, char **ret_path);
/* Deletes all but the newest keep backups of a kind, never spare_id (or NULL). */
int pg_backup_prune(const char *seed_dir, enum pg_backup_kind kind, size_t keep, const char *spare_id);
/* The generation a backup's file name says it was taken under, or 0 when
 * name is not a backup's (<prefix>-<N>-<hex>.dump, N >= 1). */
int pg_backup_generation(const char *name);
/* Whether id is a backup's id (checked before any path is made of it). */
bool pg_backup_id_valid(const char *id);
/* The live data is changed by one at a time: an apply holds this lock
 * while it backs up, migrates and restarts (pg_live_lock waits), a
 * restore or a backup the owner asked for takes it only if it is free
 * (pg_live_trylock: -EBUSY). NULL pg: nothing to hold. */
void pg_live_lock(const struct pg *pg);
int pg_live_trylock(const struct pg *pg);
void pg_live_unlock(const struct pg *pg);
/* Where Debian's PostgreSQL server binaries are: <root>/<major>/bin. */
#define PG_BINDIR_ROOT "/usr/lib/postgresql"
/* Finds the newest PostgreSQL server binaries (initdb, postgres): *ret is
 * their directory. Else -errno and *ret_error says what is missing. Both
 * the caller's to free. Does not log. */
int pg_find_bindir(char **ret, char **ret_error);
