/* priv.h — never running the Seed's processes as host uid 0.
 *
 * PostgreSQL refuses root and sandboxed code must never be root on the host,
 * so when a Seed is started by root the CLI (and the tests) switch the whole
 * process to an unprivileged system account, created on first use. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

#define PRIV_ACCOUNT "seed"

/* Ensures the system account exists (useradd) and returns its ids.
 * Must be called as root. */
int priv_ensure_account(uid_t *ret_uid, gid_t *ret_gid);
/* If running as root: ensure the account, chown each path in chown_paths
 * (recursively, not following symlinks; NULL-terminated, may be NULL) to it,
 * then drop to it for good (groups, gid, uid; verified). No-op otherwise.
 * Returns 1 if it dropped, 0 if not root. */
int priv_drop_if_root(char *const *chown_paths);
/* Whether a directory is reachable (search permission on every ancestor) by
 * uid/gid. Fills *ret_blocker with the first blocking ancestor (caller frees). */
int priv_path_reachable(const char *path, uid_t uid, gid_t gid, char **ret_blocker);
