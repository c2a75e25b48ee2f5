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
/* If running as root: ensure the account, hand each path in chown_paths
 * (NULL-terminated, may be NULL) to it with priv_chown_tree(), then drop to
 * it for good (groups, gid, uid; verified). No-op otherwise.
 * Returns 1 if it dropped, 0 if not root. */
int priv_drop_if_root(char *const *chown_paths);
/* Hands the tree at path to uid/gid unless its top directory already belongs
 * to uid. Never follows a symlink, never enters <path>/.seed, skips files
 * with more than one hard link. */
int priv_chown_tree(const char *path, uid_t uid, gid_t gid);
/* Whether a directory is reachable (search permission on every ancestor,
 * not the directory itself) by uid/gid. Fills *ret_blocker with the first blocking ancestor (caller frees). */
int priv_path_reachable(const char *path, uid_t uid, gid_t gid, char **ret_blocker);
