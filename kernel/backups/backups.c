/* backups.c — the owner's backups: taken, listed, opened for download and
 * restored with the app stopped and the saved data put back on failure.
 * See backups.h. */
#include "backups/backups.h"
#include "base/json.h"
#include "base/log.h"
#include "db/db.h"
#include "fsx/fsx.h"
#include "organism/migrations.h"
#include "organism/organism.h"
#include "repo/repo.h"

#include <fcntl.h>
#include <sys/stat.h>

struct backups {
        char *seed_dir;
        char *migrations;
        const struct pg *pg;
        struct organism *organism;
};

int backups_new(const struct backups_config *cfg, struct backups **ret) {
        if (!cfg || strempty(cfg->seed_dir) || !ret)
                return -EINVAL;
        struct backups *b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->pg = cfg->pg;
        b->organism = cfg->organism;
        b->seed_dir = strdup(cfg->seed_dir);
        b->migrations = cfg->migrations ? strdup(cfg->migrations) : NULL;
        if (!b->seed_dir || (cfg->migrations && !b->migrations)) {
                backups_free(b);
                return -ENOMEM;
        }
        *ret = b;
        return 0;
}

void backups_free(struct backups *b) {
        if (!b)
                return;
        free(b->seed_dir);
        free(b->migrations);
        free(b);
}

static void unlockp(const struct pg **pg) {
        if (*pg)
                pg_live_unlock(*pg);
}

/* The id of the backup at path (its file name without ".dump"). */
static int id_of(const char *path, char **ret) {
        const char *name = strrchr(path, '/');
        name = name ? name + 1 : path;
        size_t n = strlen(name);
        if (n < 6 || !endswith(name, ".dump"))
                return -EINVAL;
        char *id = strndup(name, n - 5);
        if (!id)
                return -ENOMEM;
        *ret = id;
        return 0;
}

int backups_list_json(struct backups *b, char **ret_json) {
        if (!b || !ret_json)
                return -EINVAL;
        _cleanup_free_ struct pg_backup_info *v = NULL;
        size_t n = 0;
        int r = pg_backup_list(b->seed_dir, &v, &n);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *o = json_object(), *list = json_array(), *kinds = json_array();
        if (!o || !list || !kinds)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (json_array_append_new(list, json_pack("{s:s, s:s, s:i, s:I, s:I}", "id", v[i].id, "kind",
                                                          pg_backup_kind_name(v[i].kind), "generation",
                                                          v[i].generation, "size", (json_int_t)v[i].size, "time",
                                                          (json_int_t)(v[i].time_ns / 1000000))) < 0)
                        return -ENOMEM;
        for (int k = 0; k < PG_BACKUP_KINDS; k++)
                if (json_array_append_new(kinds, json_pack("{s:s, s:I}", "kind", pg_backup_kind_name(k), "keep",
                                                           (json_int_t)pg_backup_kind_keep(k))) < 0)
                        return -ENOMEM;
        bool busy = false;
        if (b->pg) {
                busy = pg_live_trylock(b->pg) < 0;
                if (!busy)
                        pg_live_unlock(b->pg);
        }
        if (json_object_set(o, "backups", list) < 0 || json_object_set(o, "kinds", kinds) < 0 ||
            json_object_set_new(o, "busy", json_boolean(busy)) < 0)
                return -ENOMEM;
        char *text = json_dumps(o, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        *ret_json = text;
        return 0;
}

/* The generation that is live (a backup is named for it). */
static int live_generation(struct backups *b, int *ret) {
        int gen = 0;
        int r = repo_live_generation(b->seed_dir, &gen);
        if (r < 0 || gen < 1)
                return log_error_errno(r < 0 ? r : -ENOENT, "cannot tell which generation is live: %s",
                                       repo_last_error());
        *ret = gen;
        return 0;
}

/* Under the live lock. */
static int take_locked(struct backups *b, enum pg_backup_kind kind, char **ret_id) {
        int gen = 0;
        _cleanup_free_ char *path = NULL;
        int r = live_generation(b, &gen);
        if (r < 0)
                return r;
        if ((r = pg_backup_take_kind(b->pg, b->seed_dir, kind, gen, NULL, NULL, &path)) < 0)
                return r;
        return id_of(path, ret_id);
}

int backups_take(struct backups *b, enum pg_backup_kind kind, bool wait, char **ret_id) {
        if (!b || !ret_id || (kind != PG_BACKUP_MANUAL && kind != PG_BACKUP_DAILY))
                return -EINVAL;
        if (!b->pg)
                return -ENODEV;
        _cleanup_(unlockp) const struct pg *held = NULL;
        if (wait)
                pg_live_lock(b->pg);
        else if (pg_live_trylock(b->pg) < 0)
                return -EBUSY;
        held = b->pg;
        _cleanup_free_ char *id = NULL;
        int r = take_locked(b, kind, &id);
        if (r < 0)
                return log_error_errno(r, "the %s backup was not taken: %m", pg_backup_kind_name(kind));
        log_info("took a %s backup of the live data: %s", pg_backup_kind_name(kind), id);
        *ret_id = TAKE_PTR(id);
        return 0;
}

/* The organism's migrations, from the folder it runs from, on the live data. */
static int migrate(struct backups *b, char **ret_error) {
        if (strempty(b->migrations))
                return 0;
        const char *from = b->organism && organism_workspace(b->organism) ? organism_workspace(b->organism)
                                                                           : b->seed_dir;
        _cleanup_close_ int root = -1;
        int r = fsx_open_root(from, &root);
        if (r < 0)
                return r;
        _cleanup_free_ char *ci = NULL;
        if ((r = pg_conninfo(b->pg, "organism", PG_LIVE_DB, &ci)) < 0)
                return r;
        r = organism_migrations_apply(root, b->migrations, ci, ret_error);
        secure_zero(ci, strlen(ci));
        return r;
}

/* Starts the app (stopped by the restore) and waits until it is healthy. */
static int start_app(struct backups *b) {
        if (!b->organism)
                return 0;
        int r = organism_start(b->organism);
        return r < 0 ? r : organism_wait_ready(b->organism, BACKUPS_HEALTH_TIMEOUT_MS);
}

/* A pg_dump file in its custom format starts with "PGDMP". */
static int check_dump(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        char magic[5];
        if (fd < 0)
                return -errno;
        return read(fd, magic, sizeof magic) == (ssize_t)sizeof magic && memcmp(magic, "PGDMP", 5) == 0 ? 0 : -EINVAL;
}

/* Under the live lock, the app stopped: the backup in, or the saved data back. */
static int restore_stopped(struct backups *b, const char *id, const char *path, const char *saved, char **ret_error) {
        _cleanup_free_ char *merr = NULL;
        const char *why = NULL;
        int r = pg_live_restore(b->pg, path);
        if (r < 0)
                why = "the backup could not be restored (is the file damaged?)";
        else if ((r = migrate(b, &merr)) < 0)
                why = merr ? merr : "the app's migrations failed on the restored data";
        else if ((r = start_app(b)) < 0)
                why = r == -ETIMEDOUT ? "the app was not healthy within 60 s on the restored data"
                                      : "the app did not start on the restored data";
        if (!why)
                return 0;
        log_error("restoring backup %s failed: %s; putting the saved data back", id, why);
        if (b->organism)
                organism_stop(b->organism);
        int k = pg_live_restore(b->pg, saved);
        if (k < 0)
                log_error("the saved data (%s) could not be put back: it stays in .seed/backups", saved);
        else if ((k = start_app(b)) < 0)
                log_error_errno(k, "the app did not become healthy again after the saved data was put back: %m");
        (void)errorf(r, ret_error, "%s; %s", why,
                     k < 0 ? "the saved data could not all be put back: see the kernel log"
                           : "the data is back as it was and the app runs as before");
        return r;
}

int backups_restore(struct backups *b, const char *id, char **ret_saved_id, char **ret_error) {
        if (!b || !ret_saved_id || !ret_error)
                return -EINVAL;
        if (!b->pg)
                return -ENODEV;
        _cleanup_free_ char *path = NULL, *saved = NULL, *saved_id = NULL;
        int r = pg_backup_path(b->seed_dir, id, &path);
        if (r < 0)
                return r;
        if (check_dump(path) < 0)
                return errorf(-EINVAL, ret_error, "backup %s is not a PostgreSQL dump (damaged?): nothing was changed",
                              id);
        if (pg_live_trylock(b->pg) < 0)
                return -EBUSY;
        _cleanup_(unlockp) const struct pg *held = b->pg;
        /* Today's data first: without it nothing is changed. */
        int gen = 0;
        if ((r = live_generation(b, &gen)) < 0 ||
            (r = pg_backup_take_kind(b->pg, b->seed_dir, PG_BACKUP_BEFORE_RESTORE, gen, NULL, id, &saved)) < 0 ||
            (r = id_of(saved, &saved_id)) < 0)
                return errorf(r, ret_error, "today's data could not be saved first (%s): nothing was changed",
                              r == -ENOSPC ? "the disk is full" : strerror(-r));
        log_info("restoring backup %s: today's data is saved as %s; the app stops", id, saved_id);
        if (b->organism)
                organism_stop(b->organism);
        r = restore_stopped(b, id, path, saved, ret_error);
        *ret_saved_id = TAKE_PTR(saved_id);
        if (r < 0)
                return r;
        log_info("restored backup %s: the app runs on its data", id);
        return 0;
}

int backups_open(struct backups *b, const char *id, int *ret_fd, int64_t *ret_size) {
        if (!b || !ret_fd || !ret_size)
                return -EINVAL;
        _cleanup_free_ char *path = NULL;
        int r = pg_backup_path(b->seed_dir, id, &path);
        if (r < 0)
                return r;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                close(fd);
                return -ENOENT;
        }
        *ret_fd = fd;
        *ret_size = st.st_size;
        return 0;
}

/* ---- the daily job ---- */

int backups_daily_due(void *userdata, int64_t last_run_s, int64_t now_s, int64_t *ret_due_s) {
        struct backups *b = userdata;
        if (!b || !b->pg)
                return -ENODEV;
        _cleanup_free_ struct pg_backup_info *v = NULL;
        size_t n = 0;
        int r = pg_backup_list(b->seed_dir, &v, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) /* newest first */
                if (v[i].kind == PG_BACKUP_DAILY) {
                        *ret_due_s = v[i].time_ns / 1000000000 + BACKUPS_DAILY_AGE_S;
                        return 0;
                }
        *ret_due_s = now_s;
        return 0;
}

int backups_daily_run(void *userdata, char **ret_error) {
        _cleanup_free_ char *id = NULL;
        int r = backups_take(userdata, PG_BACKUP_DAILY, true, &id);
        if (r < 0)
                return errorf(r, ret_error, "the daily backup was not taken: %s",
                              r == -ENOSPC ? "the disk is full" : strerror(-r));
        return 0;
}
