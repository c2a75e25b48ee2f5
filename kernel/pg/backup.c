/* The live data's backups in .seed/backups/: one pg_dump file per replaced
 * generation, named gen-<N>-<tag>.dump (N: the generation that was live,
 * tag: the evolution's hex id), the newest PG_BACKUPS_KEPT kept. The dump
 * and restore themselves are pg_live_backup / pg_live_restore (pg.c). */
#include "base/fileio.h"
#include "base/log.h"
#include "pg/pg.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

/* .seed/backups (created 0700 if missing); caller frees. */
static int backups_dir(const char *seed_dir, char **ret) {
        _cleanup_free_ char *dir = path_join(seed_dir, ".seed/backups");
        if (!dir)
                return -ENOMEM;
        int k = mkdir_p(dir, 0700);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(dir);
        return 0;
}

int pg_backup_generation(const char *name) {
        int gen = 0, end = 0;
        if (!name || sscanf(name, "gen-%d-%*[0-9a-f].dump%n", &gen, &end) < 1 || end == 0 || name[end] || gen < 1)
                return 0;
        return gen;
}

/* The directory's backups, newest first (at most ARRAY_SIZE of the caller's
 * array: older names past that are not seen). */
struct backup_entry {
        char name[96];
        int64_t mtime;
};

static size_t backups_list(DIR *d, struct backup_entry *v, size_t max) {
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d)) && n < max;) {
                struct stat st;
                if (!pg_backup_generation(e->d_name) || strlen(e->d_name) >= sizeof v[0].name ||
                    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                snprintf(v[n].name, sizeof v[n].name, "%s", e->d_name);
                v[n++].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && v[j].mtime > v[j - 1].mtime; j--) {
                        struct backup_entry t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        return n;
}

#define BACKUPS_SCANNED 256

/* Drops the oldest backups beyond keep, or (ret_path) finds the newest one
 * taken while generation want_gen (0: any) was live. */
static int backups_scan(const char *seed_dir, int want_gen, size_t keep, bool prune, char **ret_path) {
        _cleanup_free_ char *dir = NULL;
        int k = backups_dir(seed_dir, &dir);
        if (k < 0)
                return k;
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        struct backup_entry v[BACKUPS_SCANNED];
        size_t n = backups_list(d, v, ARRAY_SIZE(v));
        for (size_t i = keep; prune && i < n; i++)
                (void)unlinkat(dirfd(d), v[i].name, 0);
        closedir(d);
        for (size_t i = 0; ret_path && i < n; i++)
                if (!want_gen || pg_backup_generation(v[i].name) == want_gen) {
                        *ret_path = path_join(dir, v[i].name);
                        return *ret_path ? 0 : -ENOMEM;
                }
        return ret_path ? -ENOENT : 0;
}

int pg_backup_find(const char *seed_dir, int gen, char **ret_path) {
        if (!seed_dir || gen < 0 || !ret_path)
                return -EINVAL;
        return backups_scan(seed_dir, gen, 0, false, ret_path);
}

int pg_backup_prune(const char *seed_dir, size_t keep) {
        if (!seed_dir)
                return -EINVAL;
        return backups_scan(seed_dir, 0, keep, true, NULL);
}

int pg_backup_take(const struct pg *pg, const char *seed_dir, int gen, const char *tag, char **ret_path) {
        if (!pg || !seed_dir || gen < 1 || !tag || !*tag || tag[strspn(tag, "0123456789abcdef")])
                return -EINVAL;
        _cleanup_free_ char *dir = NULL, *path = NULL;
        int k = backups_dir(seed_dir, &dir);
        if (k < 0)
                return k;
        if (xasprintf(&path, "%s/gen-%d-%s.dump", dir, gen, tag) < 0)
                return -ENOMEM;
        if ((k = pg_live_backup(pg, path)) < 0)
                return k;
        (void)pg_backup_prune(seed_dir, PG_BACKUPS_KEPT);
        *ret_path = TAKE_PTR(path);
        return 0;
}
