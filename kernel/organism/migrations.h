/* migrations.h — the organism's SQL migrations (the organism's contract:
 * organism/migrations/NNNN_name.sql, applied in order, recorded in
 * ORGANISM_MIGRATIONS_TABLE of the database they change). */
#pragma once

#include "db/db.h"

#include <stddef.h>

#define ORGANISM_MIGRATIONS_TABLE "organism_migrations"

/* Reads the organism's migrations (NNNN_name.sql) from dir beneath the
 * worktree root fd, through fsx (no symlinks), sorted and validated. At most
 * 1000 files of at most 1 MiB. No dir: none (0). Caller frees with
 * organism_migrations_free. */
int organism_migrations_load(int root, const char *dir, struct db_migration **ret, size_t *ret_n, char **ret_error);
void organism_migrations_free(struct db_migration *m, size_t n);
/* Loads them (as above) and applies the new ones to the database conninfo
 * names, connected as the role it names; with none to load it does not
 * connect. The number applied, or -errno with *ret_error saying why. */
int organism_migrations_apply(int root, const char *dir, const char *conninfo, char **ret_error);
