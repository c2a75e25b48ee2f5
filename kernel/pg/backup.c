/* The live data's backups in .seed/backups/: one pg_dump file each, named
 * <prefix>-<N>-<tag>.dump (prefix: its kind, N: the generation that was
 * live, tag: lowercase hex — the evolution's id before an apply, random
 * otherwise), kept by kind (backup_kinds[]: the oldest of a kind beyond its
 * count are pruned). The dump and restore themselves are pg_live_backup /
 * pg_live_restore (pg.c). */
#include "base/crypto.h"
#include "base/fileio.h"
#include "base/log.h"
#include "pg/internal.h"
#include "pg/pg.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

/* The kinds: what the file names start with, and how many are kept.
 * "gen" for before-apply is the name backups had before kinds existed. */
static const struct backup_kind {
        const char *name;
        const char *prefix;
        size_t keep;
} backup_kinds[PG_BACKUP_KINDS] = {
        [PG_BACKUP_BEFORE_APPLY] = {"before-apply", "gen", 10},
        [PG_BACKUP_DAILY] = {"daily", "daily", 7},
        [PG_BACKUP_MANUAL] = {"manual", "manual", 10},
        [PG_BACKUP_BEFORE_RESTORE] = {"before-restore", "restore", 5},
};

const char *pg_backup_kind_name(enum pg_backup_kind k) {
        return k >= 0 && k < PG_BACKUP_KINDS ? backup_kinds[k].name : NULL;
}

size_t pg_backup_kind_keep(enum pg_backup_kind k) {
        return k >= 0 && k < PG_BACKUP_KINDS ? backup_kinds[k].keep : 0;
}

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

/* Parses an id (a file name without ".dump"; with_suffix: with it). */
static int parse_name(const char *name, bool with_suffix, enum pg_backup_kind *ret_kind, int *ret_gen) {
        if (!name || strlen(name) >= PG_BACKUP_ID_MAX + (with_suffix ? 5 : 0))
                return -EINVAL;
        for (int k = 0; k < PG_BACKUP_KINDS; k++) {
                size_t pl = strlen(backup_kinds[k].prefix);
                if (strncmp(name, backup_kinds[k].prefix, pl) != 0 || name[pl] != '-')
                        continue;
                const char *p = name + pl + 1;
                if (*p < '1' || *p > '9')
                        return -EINVAL;
                long gen = 0;
                int digits = 0;
                for (; *p >= '0' && *p <= '9'; p++, digits++)
                        gen = gen * 10 + (*p - '0');
                if (digits > 9 || *p++ != '-')
                        return -EINVAL;
                size_t hex = strspn(p, "0123456789abcdef");
                if (hex == 0 || !streq(p + hex, with_suffix ? ".dump" : ""))
                        return -EINVAL;
                *ret_kind = (enum pg_backup_kind)k;
                *ret_gen = (int)gen;
                return 0;
        }
        return -EINVAL;
}

int pg_backup_generation(const char *name) {
        enum pg_backup_kind k;
        int gen = 0;
        return parse_name(name, true, &k, &gen) < 0 ? 0 : gen;
}

bool pg_backup_id_valid(const char *id) {
        enum pg_backup_kind k;
        int gen;
        return parse_name(id, false, &k, &gen) == 0;
}

/* The directory's backups, newest first (at most max: older names past
 * that are not seen). */
static size_t backups_list(DIR *d, struct pg_backup_info *v, size_t max) {
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d)) && n < max;) {
                struct stat st;
                enum pg_backup_kind kind;
                int gen;
                if (parse_name(e->d_name, true, &kind, &gen) < 0 ||
                    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                struct pg_backup_info *b = &v[n++];
                *b = (struct pg_backup_info){.kind = kind, .generation = gen, .size = st.st_size};
                snprintf(b->id, sizeof b->id, "%.*s", (int)(strlen(e->d_name) - 5), e->d_name);
                b->time_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        }
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && v[j].time_ns > v[j - 1].time_ns; j--) {
                        struct pg_backup_info t = v[j];
                        v[j] = v[j - 1];
                        v[j - 1] = t;
                }
        return n;
}

int pg_backup_list(const char *seed_dir, struct pg_backup_info **ret, size_t *ret_n) {
        if (!seed_dir || !ret || !ret_n)
                return -EINVAL;
        _cleanup_free_ char *dir = NULL;
        int k = backups_dir(seed_dir, &dir);
        if (k < 0)
                return k;
        _cleanup_free_ struct pg_backup_info *v = calloc(PG_BACKUPS_SCANNED, sizeof *v);
        if (!v)
                return -ENOMEM;
        DIR *d = opendir(dir);
        if (!d)
                return -errno;
        size_t n = backups_list(d, v, PG_BACKUPS_SCANNED);
        closedir(d);
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

int pg_backup_find(const char *seed_dir, int gen, char **ret_path) {
        if (!seed_dir || gen < 0 || !ret_path)
                return -EINVAL;
        _cleanup_free_ struct pg_backup_info *v = NULL;
        size_t n = 0;
        int k = pg_backup_list(seed_dir, &v, &n);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n; i++)
                if (!gen || v[i].generation == gen)
                        return pg_backup_path(seed_dir, v[i].id, ret_path);
        return -ENOENT;
}

int pg_backup_prune(const char *seed_dir, enum pg_backup_kind kind, size_t keep, const char *spare_id) {
        if (!seed_dir || kind < 0 || kind >= PG_BACKUP_KINDS)
                return -EINVAL;
        _cleanup_free_ char *dir = NULL;
        int k = backups_dir(seed_dir, &dir);
        if (k < 0)
                return k;
        _cleanup_free_ struct pg_backup_info *v = NULL;
        size_t n = 0;
        if ((k = pg_backup_list(seed_dir, &v, &n)) < 0)
                return k;
        size_t seen = 0;
        for (size_t i = 0; i < n; i++) {
                if (v[i].kind != kind || ++seen <= keep || (spare_id && streq(v[i].id, spare_id)))
                        continue;
                _cleanup_free_ char *p = NULL;
                if (xasprintf(&p, "%s/%s.dump", dir, v[i].id) < 0)
                        return -ENOMEM;
                (void)unlink(p);
        }
        return 0;
}

int pg_backup_path(const char *seed_dir, const char *id, char **ret_path) {
        if (!seed_dir || !ret_path || !pg_backup_id_valid(id))
                return -EINVAL;
        _cleanup_free_ char *dir = NULL, *path = NULL;
        int k = backups_dir(seed_dir, &dir);
        if (k < 0)
                return k;
        if (xasprintf(&path, "%s/%s.dump", dir, id) < 0)
                return -ENOMEM;
        struct stat st;
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -ENOENT;
        *ret_path = TAKE_PTR(path);
        return 0;
}

int pg_backup_take_kind(const struct pg *pg, const char *seed_dir, enum pg_backup_kind kind, int gen,
                        const char *tag, const char *spare_id, char **ret_path) {
        if (!pg || !seed_dir || kind < 0 || kind >= PG_BACKUP_KINDS || gen < 1 ||
            (tag && (!*tag || strlen(tag) > 32 || tag[strspn(tag, "0123456789abcdef")])))
                return -EINVAL;
        _cleanup_free_ char *dir = NULL, *path = NULL, *random = NULL;
        int k = backups_dir(seed_dir, &dir);
        if (k < 0)
                return k;
        if (!tag && (k = crypto_random_hex(6, &random)) < 0)
                return k;
        if (xasprintf(&path, "%s/%s-%d-%s.dump", dir, backup_kinds[kind].prefix, gen, tag ? tag : random) < 0)
                return -ENOMEM;
        if ((k = pg_live_backup(pg, path)) < 0)
                return k;
        (void)pg_backup_prune(seed_dir, kind, backup_kinds[kind].keep, spare_id);
        *ret_path = TAKE_PTR(path);
        return 0;
}

int pg_backup_take(const struct pg *pg, const char *seed_dir, int gen, const char *tag, char **ret_path) {
        if (!tag)
                return -EINVAL;
        return pg_backup_take_kind(pg, seed_dir, PG_BACKUP_BEFORE_APPLY, gen, tag, NULL, ret_path);
}

/* ---- who changes the live data ---- */

/* The lock is the one thing of a const struct pg that changes. */
static pthread_mutex_t *live_lock(const struct pg *pg) {
        return (pthread_mutex_t *)&pg->live_lock;
}

void pg_live_lock(const struct pg *pg) {
        if (pg)
                pthread_mutex_lock(live_lock(pg));
}

int pg_live_trylock(const struct pg *pg) {
        if (!pg)
                return -EINVAL;
        return pthread_mutex_trylock(live_lock(pg)) == 0 ? 0 : -EBUSY;
}

void pg_live_unlock(const struct pg *pg) {
        if (pg)
                pthread_mutex_unlock(live_lock(pg));
}
