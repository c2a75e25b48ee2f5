/* fsx.h — every host-side read or write of repository content (file tools,
 * knowledge, skills, the logo, migrations, diffs) goes through here.
 *
 * Each function takes a root directory fd (the worktree, opened by the caller
 * with O_PATH|O_DIRECTORY, e.g. with fsx_open_root()) and a path relative to
 * it, usually chosen by the model or by code the model wrote. Paths are
 * resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS) plus O_NOFOLLOW: a symlink anywhere in the path —
 * intermediate or final — fails the operation at the moment of the call, so
 * there is no check-then-use race with sandboxed processes that create or
 * swap links. On kernels without openat2 (ENOSYS, or a seccomp filter that
 * refuses it with EPERM) the path is walked one component at a time with
 * openat(O_NOFOLLOW) on fds: still no symlink is ever followed.
 *
 * Paths (fsx_normalize):
 *   - refused: empty; absolute; any ".." component; a NUL byte (a C string
 *     cannot hold one: use fsx_check_path_len() for raw bytes); a control
 *     character (0x01–0x1f, 0x7f); ".git" as any component (compared without
 *     case and ignoring trailing dots and spaces, as git does on NTFS/HFS);
 *     ".seed" as the first component (the kernel's private folder: secrets,
 *     control token, PostgreSQL; the kernel reads its own files there with
 *     base/fileio.h, never on the model's behalf);
 *     more than FSX_PATH_MAX bytes; a component over FSX_NAME_MAX bytes.
 *   - normalised: "." components, duplicate slashes and a trailing slash are
 *     dropped, so "./organism//main.c/" names "organism/main.c". A path made
 *     only of "." components ("." or "./") names the root itself, spelled
 *     "."; reading operations (fsx_stat, fsx_list, fsx_open) accept it,
 *     writing ones (fsx_write, fsx_delete) refuse it.
 *   Callers that classify a path (evolvable or kernel) must classify the
 *   normalised form returned by fsx_normalize(), which is exactly what the
 *   other functions act on.
 *
 * Modes: permission bits are masked to 0777 (never setuid, setgid or sticky).
 *
 * Errors: every function returns >= 0 on success and -errno on failure. On
 * failure *ret_error (when ret_error is not NULL) is set to a one-line message
 * for the model or the owner, naming the path (escaped: control characters,
 * quotes, backslashes and non-ASCII bytes as \n, \', \\, \xNN; at most 128
 * bytes of it); the caller frees it. On -ENOMEM it may stay NULL. A symlink
 * or an escape gives -ELOOP and "'<path>' is a symlink or leads outside the
 * workspace". These functions never log: the caller decides.
 *
 * Hard links: openat2 cannot tell a hard link from any other file. Inside a
 * sandbox the only writable mounts are the evolvable directories (each its
 * own bind mount), and link(2) never crosses mounts (EXDEV), so sandboxed code
 * cannot link a host file into the workspace; fs.protected_hardlinks also
 * stops linking files the caller does not own. As defence in depth
 * fsx_open() and fsx_read() refuse a regular file with more than one link
 * (-EMLINK; O_TRUNC is applied only after that check), and fsx_write()
 * replaces the directory entry (rename), never the inode, so it cannot write
 * through a hard link either (the other name keeps its content).
 *
 * Renames: an fd is opened beneath the root at the moment of the call; a
 * directory moved elsewhere afterwards takes the fd with it. Sandboxes can
 * only rename within one evolvable directory's mount, so this cannot move
 * anything out of the workspace. */
#pragma once

#include "base/base.h"

#include <sys/types.h>

/* The longest accepted path: PATH_MAX minus its NUL, so every accepted path
 * can be handed to the kernel in one call. */
#define FSX_PATH_MAX 4095
#define FSX_NAME_MAX 255
/* fsx_delete() refuses directory trees nested deeper than this (each level
 * holds one fd while it is emptied). */
#define FSX_DEPTH_MAX 128
/* fsx_write(): keep an existing file's permission bits (0644 for a new file). */
#define FSX_MODE_KEEP ((mode_t)-1)

enum fsx_type {
        FSX_FILE,
        FSX_DIR,
        FSX_SYMLINK,
        FSX_OTHER, /* FIFO, socket, device */
};

/* "file", "dir", "symlink", "other". Static string. */
const char *fsx_type_name(enum fsx_type t);

struct fsx_stat {
        enum fsx_type type;
        uint64_t size;     /* bytes; for a symlink the length of its target */
        mode_t mode;       /* permission bits only (& 07777) */
        uint64_t nlink;
        int64_t mtime_ms;
        /* What tells one version of a file from another (a cache key):
         * any write, chmod, link or rename moves the ctime. */
        uint64_t dev, ino;
        int64_t mtime_ns, ctime_ns; /* since the epoch */
};

struct fsx_entry {
        char *name; /* one component, owned by the list */
        enum fsx_type type;
        uint64_t size;
};

struct fsx_list {
        struct fsx_entry *entries; /* sorted by name (bytewise) */
        size_t n;
        size_t total;   /* entries in the directory; > n when truncated */
        bool truncated; /* more than max entries: n == max, which ones is unspecified */
};

void fsx_list_free(struct fsx_list *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct fsx_list *, fsx_list_free)

/* Validates and normalises raw bytes p[0..len) (see above). On success
 * *ret_norm is the normalised path ("." for the root); caller frees. */
int fsx_normalize(const char *p, size_t len, char **ret_norm, char **ret_error);
/* Validation only, of len bytes (which may contain a NUL: refused). */
int fsx_check_path_len(const char *p, size_t len, char **ret_error);
/* Validation of a C string (which by construction holds no NUL byte). */
int fsx_check_path(const char *rel, char **ret_error);

/* Opens a trusted directory (the worktree; its own path may contain links)
 * as a root fd: O_PATH|O_DIRECTORY|O_CLOEXEC. */
int fsx_open_root(const char *path, int *ret_fd);

/* Opens rel beneath root with flags | O_NOFOLLOW | O_CLOEXEC; mode is used
 * only with O_CREAT/O_TMPFILE. With O_PATH a final symlink is opened itself
 * (as O_PATH|O_NOFOLLOW does); otherwise a final symlink is -ELOOP. Without
 * O_PATH a regular file with several hard links is -EMLINK (and not
 * truncated). O_TRUNC needs write access (-EINVAL). A FIFO blocks unless the
 * caller passes O_NONBLOCK. Caller closes *ret_fd. */
int fsx_open(int root, const char *rel, int flags, mode_t mode, int *ret_fd, char **ret_error);

/* Reads a regular file of at most max bytes (-EFBIG if larger). FIFOs,
 * devices, sockets and directories are refused without blocking (-EINVAL,
 * -EISDIR), as are files with several hard links (-EMLINK). *ret_data is
 * NUL-terminated (the content may hold NULs too: use *ret_len); caller
 * frees. ret_len may be NULL. */
int fsx_read(int root, const char *rel, size_t max, char **ret_data, size_t *ret_len,
             char **ret_error);

/* Replaces rel atomically with data (a reader sees the old content or the
 * new, whole): a temp file in the same directory (opened beneath root;
 * missing parents are created with mkdirat on fds, 0755), renameat. Not
 * flushed to disk (no fsync): its callers (the file tools) write an
 * evolution's worktree, which a crash of the kernel or the machine discards
 * whole (boot recovery fails the evolution and removes its worktree); what
 * lasts is the commit made from it. An existing symlink at rel is refused
 * (-ELOOP), an existing directory gives -EISDIR; on any failure the temp file
 * is removed (only a crash between the two steps can leave a
 * ".fsx-<hex>.tmp" behind). mode & 0777 is applied (not masked by umask), or
 * FSX_MODE_KEEP. */
int fsx_write(int root, const char *rel, const void *data, size_t len, mode_t mode,
              char **ret_error);

/* Removes a file, a symlink (the link, never its target) or a directory
 * tree. Nothing is followed: every step is fd-relative and O_NOFOLLOW; links
 * inside the tree are unlinked. -ENOENT if rel does not exist. */
int fsx_delete(int root, const char *rel, char **ret_error);

/* Lists directory rel: at most max entries (name, type, size, without
 * following links); "." and ".." and any ".git" entry are left out, and
 * ".seed" in the root. */
int fsx_list(int root, const char *rel, size_t max, struct fsx_list **ret, char **ret_error);

/* Describes rel without following a final symlink (reported as FSX_SYMLINK);
 * a symlink among its parents is -ELOOP. */
int fsx_stat(int root, const char *rel, struct fsx_stat *ret, char **ret_error);

/* mkdir -p beneath root with mkdirat on fds; existing directories are kept.
 * A symlink among the components is -ELOOP, a file -ENOTDIR. */
int fsx_mkdirs(int root, const char *rel, mode_t mode, char **ret_error);

/* Whether openat2 is being used (false: the component walk). */
bool fsx_have_openat2(void);
/* Tests only: force the component walk even where openat2 exists. */
void fsx_force_fallback(bool on);
