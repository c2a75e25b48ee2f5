/* fileio.h — small file helpers for the kernel's own files (.seed/, config).
 * Repository content written or read on behalf of the model goes through fsx. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

/* Reads at most max bytes; -EFBIG if the file is larger. NUL-terminates.
 * Caller frees *ret. ret_len may be NULL. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* Writes via a temp file + rename, creating it with mode (e.g. 0600). */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* mkdir -p; existing directories are left as they are. */
int mkdir_p(const char *path, mode_t mode);
/* Creates dir if missing and forces its mode (e.g. 0700). */
int mkdir_mode(const char *path, mode_t mode);
/* rm -rf without following symlinks. Missing path is not an error. */
int rm_rf(const char *path);
/* Joins two path parts with one '/'. Caller frees. NULL on OOM. */
char *path_join(const char *a, const char *b);
bool path_exists(const char *path);
/* Absolute, normalised form of path (must exist). Caller frees. */
int path_abs(const char *path, char **ret);
