/* migrations.c — the organism's SQL migrations (organism/migrations/
 * NNNN_name.sql): read beneath a worktree's root fd through fsx, sorted and
 * validated, for the scratch database of an evolution and for the live one. */
#include "organism/migrations.h"
#include "base/base.h"
#include "fsx/fsx.h"

#include <stdlib.h>

#define MIGRATIONS_MAX 1000
#define MIGRATION_MAX_BYTES (1024 * 1024)

void organism_migrations_free(struct db_migration *m, size_t n) {
        for (size_t i = 0; m && i < n; i++) {
                free((char *)m[i].name);
                free((char *)m[i].sql);
        }
        free(m);
}

static int cmp_migration(const void *a, const void *b) {
        const struct db_migration *x = a, *y = b;
        return (x->version > y->version) - (x->version < y->version);
}

int organism_migrations_load(int root, const char *dir, struct db_migration **ret, size_t *ret_n, char **ret_error) {
        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        int r = fsx_list(root, dir, MIGRATIONS_MAX + 1, &l, ret_error);
        if (r == -ENOENT) { /* no migrations folder: nothing to apply */
                if (ret_error) {
                        free(*ret_error);
                        *ret_error = NULL;
                }
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return r;
        if (l->truncated || l->n > MIGRATIONS_MAX) {
                (void)xasprintf(ret_error, "%s: more than %d migrations", dir, MIGRATIONS_MAX);
                return -E2BIG;
        }
        struct db_migration *m = calloc(l->n ? l->n : 1, sizeof(*m));
        size_t n = 0;
        if (!m)
                return -ENOMEM;
        for (size_t i = 0; i < l->n; i++) {
                const struct fsx_entry *e = &l->entries[i];
                if (!endswith(e->name, ".sql"))
                        continue; /* .gitkeep, README … */
                int version;
                if (e->type == FSX_SYMLINK) {
                        (void)xasprintf(ret_error, "%s/%s is a symlink: migrations must be regular files", dir,
                                        e->name);
                        r = -ELOOP;
                        break;
                }
                if (e->type != FSX_FILE || db_migration_parse_name(e->name, &version) < 0) {
                        (void)xasprintf(ret_error, "%s/%s: a migration must be a file named NNNN_name.sql", dir,
                                        e->name);
                        r = -EINVAL;
                        break;
                }
                _cleanup_free_ char *rel = NULL;
                char *sql = NULL;
                size_t len = 0;
                if (xasprintf(&rel, "%s/%s", dir, e->name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if ((r = fsx_read(root, rel, MIGRATION_MAX_BYTES, &sql, &len, ret_error)) < 0)
                        break;
                m[n++] = (struct db_migration){.version = version, .name = strdup(e->name), .sql = sql, .len = len};
                if (!m[n - 1].name) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r >= 0) {
                qsort(m, n, sizeof(*m), cmp_migration);
                r = db_migrations_validate(m, n, ret_error);
        }
        if (r < 0) {
                organism_migrations_free(m, n);
                return r;
        }
        *ret = m;
        *ret_n = n;
        return 0;
}

int organism_migrations_apply(int root, const char *dir, const char *conninfo, char **ret_error) {
        struct db_migration *m = NULL;
        size_t n = 0;
        int r = organism_migrations_load(root, dir, &m, &n, ret_error);
        if (r >= 0 && n > 0) {
                _cleanup_(db_closep) struct db *db = NULL;
                if ((r = db_connect_err(conninfo, &db, ret_error)) >= 0)
                        r = db_migrate(db, ORGANISM_MIGRATIONS_TABLE, m, n, ret_error);
        }
        organism_migrations_free(m, n);
        return r;
}
