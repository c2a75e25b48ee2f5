/* backups.h — the owner's backups of the live data: taken by hand (the
 * control plane, `seed backup`) and daily (a scheduler job: when the newest
 * daily one is 23 hours old), listed, downloaded, restored.
 *
 * The files, their kinds and how many of each are kept are kernel/pg's
 * (.seed/backups, pg.h); an apply's own backups are taken by the
 * orchestrator. Only the kernel reads .seed/backups: no sandbox mounts it,
 * and a backup leaves it only through backups_open (the API's download).
 *
 * A restore: the data of today is saved first (a before-restore backup;
 * if that fails nothing changes), the app is stopped, the backup restored
 * in one transaction (pg_live_restore: the reader role's grants are made
 * again there), the organism's migrations run on it, and the app starts
 * again and must become healthy. If any step fails, the saved data is put
 * back and the app starts on it as before; the caller is told why.
 *
 * The live data has one changer at a time (pg_live_lock): a backup or a
 * restore asked for while another, or an apply, runs is refused (-EBUSY). */
#pragma once

#include "base/base.h"
#include "pg/pg.h"

struct cfg;
struct organism;

#define BACKUPS_DAILY_AGE_S (23 * 3600)
#define BACKUPS_HEALTH_TIMEOUT_MS 60000
#define BACKUPS_JOB_DAILY "backup-daily"

struct backups_config {
        const char *seed_dir;       /* absolute (copied) */
        const struct pg *pg;        /* the live data (borrowed); NULL: every call answers -ENODEV */
        struct organism *organism;  /* the live app (borrowed); NULL: none to stop or start */
        const char *migrations;     /* seed.yaml's organism.migrations (copied); NULL: none */
};

struct backups;

int backups_new(const struct backups_config *cfg, struct backups **ret);
void backups_free(struct backups *b);

/* {"backups": [{"id", "kind", "generation", "size", "time" (ms)}], newest
 * first, "kinds": [{"kind", "keep"}], "busy": bool}. Caller frees. */
int backups_list_json(struct backups *b, char **ret_json);
/* Takes a backup of kind PG_BACKUP_MANUAL or PG_BACKUP_DAILY now. wait:
 * wait for the live data to be free (the daily job) rather than -EBUSY.
 * *ret_id: the new backup's id (caller frees). -ENOSPC: the disk is full
 * (nothing is left behind). */
int backups_take(struct backups *b, enum pg_backup_kind kind, bool wait, char **ret_id);
/* Restores backup id (see above). -EINVAL not an id or not a backup file,
 * -ENOENT no such backup, -EBUSY the live data is being changed, -ENOSPC
 * today's data could not be saved (nothing changed), else the restore
 * failed and the saved data is back: *ret_error says what happened
 * (caller frees; may be set on success too: NULL). *ret_saved_id: the
 * before-restore backup's id (caller frees; NULL when none was taken). */
int backups_restore(struct backups *b, const char *id, char **ret_saved_id, char **ret_error);
/* Opens backup id for reading (O_RDONLY, O_NOFOLLOW, O_CLOEXEC): -EINVAL
 * not an id, -ENOENT no such backup. */
int backups_open(struct backups *b, const char *id, int *ret_fd, int64_t *ret_size);

/* The daily job, for the scheduler's table (userdata: the struct backups):
 * due when the newest daily backup is BACKUPS_DAILY_AGE_S old (now when
 * there is none). */
int backups_daily_due(void *userdata, int64_t last_run_s, int64_t now_s, int64_t *ret_due_s);
int backups_daily_run(void *userdata, char **ret_error);
