/* live-internal.h — shared by the files of kernel/live (not a public API). */
#pragma once

#include "live/live.h"

struct db;

struct live {
        struct live_config c;   /* its pointers borrowed */
};

/* A new connection to the live database as role ("reader" or "organism").
 * -ENOENT when there is no database; else db_connect_err()'s. *ret_error
 * (caller frees) says why. */
int live_connect(const struct live *l, const char *role, struct db **ret, char **ret_error);
