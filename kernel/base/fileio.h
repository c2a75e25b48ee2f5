/* fileio.h — small file helpers for the kernel's own files (.seed/, config).
 * Repository content written or read on behalf of the model goes through fsx. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

/* Reads fd to its end, at most max bytes (-EFBIG if there is more), into a
 * NUL-terminated buffer first sized for size_hint (e.g. st_size; 0 when
 * unknown). The one bounded read loop: read_file, fsx and repo use it.
 * Caller frees *ret. ret_len may be NULL. */
int read_fd_bounded(int fd, size_t size_hint, size_t max, char **ret, size_t *ret_len);
/* Reads at most max bytes; -EFBIG if the file is larger. NUL-terminates.
 * Caller frees *ret. ret_len may be NULL. */
int read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* Waits until fd is readable (data, EOF or an error to read) or the
 * deadline (now_ms() time; INT64_MAX: none) has passed (a passed deadline
 * still looks once): 0, -ETIMEDOUT, or
 * poll's -errno (EINTR is retried). The one poll-with-deadline loop. */
int fd_wait_readable(int fd, int64_t deadline);
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
