/* fsx.c — symlink-safe access to repository content beneath a directory fd.
 * See fsx.h for the rules; the short version: openat2 with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS for whole paths, openat with O_NOFOLLOW for single
 * components, and never a string path resolved from anywhere but an fd. */
#include "fsx/fsx.h"

#include "base/crypto.h"
#include "base/fileio.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* At most this many bytes of a path are shown in a message, each escaped to
 * at most 4 characters, plus "...". */
#define SHOW_MAX 128
#define ESC_SIZE (SHOW_MAX * 4 + 4)

/* ---- messages ------------------------------------------------------------ */

static void escape(const char *p, size_t len, char out[static ESC_SIZE]) {
        static const char hex[] = "0123456789abcdef";
        size_t o = 0, n = len < SHOW_MAX ? len : SHOW_MAX;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)p[i];
                if (c == '\\' || c == '\'') {
                        out[o++] = '\\';
                        out[o++] = (char)c;
                } else if (c == '\n' || c == '\t' || c == '\r' || c == 0) {
                        out[o++] = '\\';
                        out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : '0';
                } else if (c < 0x20 || c >= 0x7f) {
                        out[o++] = '\\';
                        out[o++] = 'x';
                        out[o++] = hex[c >> 4];
                        out[o++] = hex[c & 15];
                } else
                        out[o++] = (char)c;
        }
        if (n < len) {
                memcpy(out + o, "...", 3);
                o += 3;
        }
        out[o] = 0;
}

/* Sets *ret_error (if wanted) to the formatted message; returns r. */
#define fail(ret_error, r, ...) errorf((r), (ret_error), __VA_ARGS__)

/* The message for an operation on (normalised) path norm that failed with r. */
static int path_fail(char **ret_error, int r, const char *norm) {
        char esc[ESC_SIZE];
        escape(norm, strlen(norm), esc);
        switch (-r) {
        case ELOOP:
        case EXDEV:
                return fail(ret_error, -ELOOP, "'%s' is a symlink or leads outside the workspace", esc);
        case ENOENT:
                return fail(ret_error, r, "'%s' does not exist", esc);
        case ENOTDIR:
                return fail(ret_error, r, "'%s': part of the path is not a directory", esc);
        case EISDIR:
                return fail(ret_error, r, "'%s' is a directory", esc);
        case EACCES:
        case EPERM:
                return fail(ret_error, r, "'%s': permission denied", esc);
        case ENOMEM:
                return fail(ret_error, r, "out of memory");
        default:
                return fail(ret_error, r, "'%s': %s", esc, strerror(-r));
        }
}

const char *fsx_type_name(enum fsx_type t) {
        switch (t) {
        case FSX_FILE:
                return "file";
        case FSX_DIR:
                return "dir";
        case FSX_SYMLINK:
                return "symlink";
        default:
                return "other";
        }
}

static enum fsx_type type_of(mode_t m) {
        if (S_ISREG(m))
                return FSX_FILE;
        if (S_ISDIR(m))
                return FSX_DIR;
        if (S_ISLNK(m))
                return FSX_SYMLINK;
        return FSX_OTHER;
}

/* ---- paths --------------------------------------------------------------- */

/* ".git" in any case, ignoring trailing dots and spaces (NTFS and HFS+
 * ignore them, so git treats ".GIT. " as ".git" there too). */
static bool is_git_name(const char *c, size_t len) {
        while (len > 0 && (c[len - 1] == '.' || c[len - 1] == ' '))
                len--;
        return len == 4 && strncasecmp(c, ".git", 4) == 0;
}

/* ".seed" in any case: the kernel's folder, refused as a first component. */
static bool is_seed_name(const char *c, size_t len) {
        return len == 5 && strncasecmp(c, ".seed", 5) == 0;
}

int fsx_normalize(const char *p, size_t len, char **ret_norm, char **ret_error) {
        char esc[ESC_SIZE];
        if (!p || len == 0)
                return fail(ret_error, -EINVAL, "the path is empty");
        escape(p, len, esc);
        if (len > FSX_PATH_MAX)
                return fail(ret_error, -ENAMETOOLONG, "'%s' is longer than %d bytes", esc,
                            FSX_PATH_MAX);
        if (memchr(p, 0, len))
                return fail(ret_error, -EINVAL, "'%s' contains a NUL byte", esc);
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)p[i];
                if (c < 0x20 || c == 0x7f)
                        return fail(ret_error, -EINVAL, "'%s' contains a control character", esc);
        }
        if (p[0] == '/')
                return fail(ret_error, -EINVAL,
                            "'%s' is an absolute path; give a path relative to the workspace", esc);

        _cleanup_free_ char *out = malloc(len + 2);
        if (!out)
                return fail(ret_error, -ENOMEM, "out of memory");
        size_t o = 0;
        for (size_t i = 0; i < len;) {
                size_t start = i;
                while (i < len && p[i] != '/')
                        i++;
                size_t clen = i - start;
                const char *c = p + start;
                if (i < len)
                        i++; /* the slash */
                if (clen == 0 || (clen == 1 && c[0] == '.'))
                        continue;
                if (clen == 2 && c[0] == '.' && c[1] == '.')
                        return fail(ret_error, -EINVAL,
                                    "'%s' contains '..'; paths must stay inside the workspace", esc);
                if (clen > FSX_NAME_MAX)
                        return fail(ret_error, -ENAMETOOLONG,
                                    "'%s' has a component longer than %d bytes", esc, FSX_NAME_MAX);
                if (is_git_name(c, clen))
                        return fail(ret_error, -EPERM, "'%s' is inside .git, which is off limits",
                                    esc);
                if (o == 0 && is_seed_name(c, clen))
                        return fail(ret_error, -EPERM,
                                    "'%s' is inside .seed, the kernel's private folder", esc);
                if (o > 0)
                        out[o++] = '/';
                memcpy(out + o, c, clen);
                o += clen;
        }
        if (o == 0)
                out[o++] = '.';
        out[o] = 0;
        if (ret_norm)
                *ret_norm = TAKE_PTR(out);
        return 0;
}

int fsx_check_path_len(const char *p, size_t len, char **ret_error) {
        return fsx_normalize(p, len, NULL, ret_error);
}

int fsx_check_path(const char *rel, char **ret_error) {
        return fsx_normalize(rel, rel ? strlen(rel) : 0, NULL, ret_error);
}

static int normalize(const char *rel, char **ret_norm, char **ret_error) {
        return fsx_normalize(rel, rel ? strlen(rel) : 0, ret_norm, ret_error);
}

/* Splits a normalised path (not ".") into its parent ("." for a top-level
 * name) and last component. Both point into storage the caller provides:
 * *ret_parent is norm itself, cut at the last slash. */
static void split_last(char *norm, const char **ret_parent, const char **ret_name) {
        char *slash = strrchr(norm, '/');
        if (!slash) {
                *ret_parent = ".";
                *ret_name = norm;
                return;
        }
        *slash = 0;
        *ret_parent = norm;
        *ret_name = slash + 1;
}

/* ---- opening beneath a root ---------------------------------------------- */

static atomic_int openat2_state;  /* 0 unknown, 1 available, -1 not */
static atomic_bool fallback_forced;

static bool use_openat2(void) {
        if (atomic_load(&fallback_forced))
                return false;
        int s = atomic_load(&openat2_state);
        if (s == 0) {
                struct open_how how = {
                        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                        .resolve = RESOLVE_NO_SYMLINKS,
                };
                long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof how);
                /* Anything but success (ENOSYS; EPERM from a seccomp filter)
                 * selects the walk, which is just as strict. */
                s = fd >= 0 ? 1 : -1;
                if (fd >= 0)
                        close((int)fd);
                atomic_store(&openat2_state, s);
        }
        return s > 0;
}

bool fsx_have_openat2(void) {
        return use_openat2();
}

void fsx_force_fallback(bool on) {
        atomic_store(&fallback_forced, on);
}

static bool is_symlink_at(int dirfd, const char *name) {
        struct stat st;
        return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* One component (no '/', never "." or ".."), not following a symlink. With
 * O_DIRECTORY a symlink gives ENOTDIR; that is reported as ELOOP, which is
 * what it is. */
static int open_one(int dirfd, const char *name, int flags, mode_t mode) {
        int fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0)
                return fd;
        int r = -errno;
        if (r == -ENOTDIR && is_symlink_at(dirfd, name))
                r = -ELOOP;
        return r;
}

static int open_openat2(int root, const char *norm, int flags, mode_t mode) {
        bool creating = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
        struct open_how how = {
                .flags = (uint64_t)(unsigned)(flags | O_NOFOLLOW | O_CLOEXEC),
                .mode = creating ? (mode & 0777) : 0,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        /* EAGAIN: a concurrent rename or mount during resolution; bounded. */
        for (int i = 0; i < 16; i++) {
                long fd = syscall(SYS_openat2, root, norm, &how, sizeof how);
                if (fd >= 0)
                        return (int)fd;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
        }
        return -EAGAIN;
}

/* The fallback: every intermediate component opened O_PATH|O_DIRECTORY|
 * O_NOFOLLOW relative to the previous one, the last with the caller's flags
 * and O_NOFOLLOW. */
static int open_walk(int root, const char *norm, int flags, mode_t mode) {
        _cleanup_close_ int cur = -1;
        const char *p = norm;
        for (;;) {
                int dir = cur >= 0 ? cur : root;
                const char *slash = strchr(p, '/');
                if (!slash)
                        return open_one(dir, p, flags, mode & 0777);
                char comp[FSX_NAME_MAX + 1];
                size_t n = (size_t)(slash - p);
                if (n == 0 || n > FSX_NAME_MAX)
                        return -EINVAL; /* normalised paths have neither */
                memcpy(comp, p, n);
                comp[n] = 0;
                int fd = open_one(dir, comp, O_PATH | O_DIRECTORY, 0);
                if (fd < 0)
                        return fd;
                closep(&cur);
                cur = fd;
                p = slash + 1;
        }
}

static int open_raw(int root, const char *norm, int flags, mode_t mode) {
        if (use_openat2()) {
                int r = open_openat2(root, norm, flags, mode);
                if (r != -ENOSYS)
                        return r;
                atomic_store(&openat2_state, -1);
        }
        return open_walk(root, norm, flags, mode);
}

/* Opens normalised norm beneath root. A final symlink opened with
 * O_DIRECTORY gives ENOTDIR from the kernel; it is reported as ELOOP. */
static int open_beneath(int root, const char *norm, int flags, mode_t mode) {
        int r = open_raw(root, norm, flags, mode);
        if (r == -ENOTDIR && (flags & O_DIRECTORY)) {
                int fd = open_raw(root, norm, O_PATH, 0);
                struct stat st;
                if (fd == -ELOOP)
                        r = -ELOOP;
                else if (fd >= 0) {
                        if (fstat(fd, &st) == 0 && S_ISLNK(st.st_mode))
                                r = -ELOOP;
                        close(fd);
                }
        }
        return r;
}

int fsx_open_root(const char *path, int *ret_fd) {
        int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

static int hardlink_fail(char **ret_error, const char *norm, uint64_t nlink) {
        char esc[ESC_SIZE];
        escape(norm, strlen(norm), esc);
        return fail(ret_error, -EMLINK,
                    "'%s' has %" PRIu64 " hard links; refusing it (it could be a link to a file "
                    "outside the workspace)",
                    esc, nlink);
}

int fsx_open(int root, const char *rel, int flags, mode_t mode, int *ret_fd, char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        /* O_TRUNC waits until the file is known not to be a hard link. */
        bool trunc = (flags & O_TRUNC) && !(flags & O_PATH);
        if (trunc && (flags & O_ACCMODE) == O_RDONLY)
                return fail(ret_error, -EINVAL, "O_TRUNC needs write access");
        _cleanup_close_ int fd = open_beneath(root, norm, trunc ? flags & ~O_TRUNC : flags, mode);
        if (fd < 0)
                return path_fail(ret_error, fd, norm);
        if (!(flags & O_PATH)) {
                struct stat st;
                if (fstat(fd, &st) < 0)
                        return path_fail(ret_error, -errno, norm);
                if (S_ISREG(st.st_mode) && st.st_nlink > 1)
                        return hardlink_fail(ret_error, norm, (uint64_t)st.st_nlink);
                if (trunc && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0)
                        return path_fail(ret_error, -errno, norm);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* ---- directories --------------------------------------------------------- */

/* mkdir -p of normalised norm beneath root, one component at a time; returns
 * an O_PATH fd of the last directory. */
static int mkdirs_fd(int root, const char *norm, mode_t mode) {
        if (streq(norm, "."))
                return open_one(root, ".", O_PATH | O_DIRECTORY, 0);
        _cleanup_close_ int cur = -1;
        const char *p = norm;
        while (*p) {
                int dir = cur >= 0 ? cur : root;
                const char *slash = strchr(p, '/');
                size_t n = slash ? (size_t)(slash - p) : strlen(p);
                char comp[FSX_NAME_MAX + 1];
                if (n == 0 || n > FSX_NAME_MAX)
                        return -EINVAL;
                memcpy(comp, p, n);
                comp[n] = 0;
                int fd = open_one(dir, comp, O_PATH | O_DIRECTORY, 0);
                if (fd == -ENOENT) {
                        if (mkdirat(dir, comp, mode & 0777) < 0 && errno != EEXIST)
                                return -errno;
                        /* Whatever is there now — our directory, or a link
                         * someone swapped in — is opened without following. */
                        fd = open_one(dir, comp, O_PATH | O_DIRECTORY, 0);
                }
                if (fd < 0)
                        return fd;
                closep(&cur);
                cur = fd;
                p = slash ? slash + 1 : p + n;
        }
        return TAKE_FD(cur);
}

int fsx_mkdirs(int root, const char *rel, mode_t mode, char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        int fd = mkdirs_fd(root, norm, mode);
        if (fd < 0)
                return path_fail(ret_error, fd, norm);
        close(fd);
        return 0;
}

/* ---- reading ------------------------------------------------------------- */

int fsx_read(int root, const char *rel, size_t max, char **ret_data, size_t *ret_len,
             char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        char esc[ESC_SIZE];
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        /* O_NONBLOCK: a FIFO must not make the kernel wait for a writer; it
         * is refused below, and the flag is cleared before reading. */
        _cleanup_close_ int fd = open_beneath(root, norm, O_RDONLY | O_NOCTTY | O_NONBLOCK, 0);
        if (fd < 0)
                return path_fail(ret_error, fd, norm);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return path_fail(ret_error, -errno, norm);
        escape(norm, strlen(norm), esc);
        if (S_ISDIR(st.st_mode))
                return path_fail(ret_error, -EISDIR, norm);
        if (!S_ISREG(st.st_mode))
                return fail(ret_error, -EINVAL, "'%s' is not a regular file", esc);
        if (st.st_nlink > 1)
                return hardlink_fail(ret_error, norm, (uint64_t)st.st_nlink);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return path_fail(ret_error, -errno, norm);
        if ((uint64_t)st.st_size > max)
                return fail(ret_error, -EFBIG, "'%s' is larger than %zu bytes", esc, max);
        size_t len = 0;
        _cleanup_free_ char *data = NULL;
        r = read_fd_bounded(fd, (size_t)st.st_size, max, &data, &len);
        if (r == -EFBIG)
                return fail(ret_error, r, "'%s' is larger than %zu bytes", esc, max);
        if (r < 0)
                return path_fail(ret_error, r, norm);
        if (ret_len)
                *ret_len = len;
        *ret_data = TAKE_PTR(data);
        return 0;
}

/* ---- writing ------------------------------------------------------------- */

static int write_all(int fd, const void *data, size_t len) {
        const char *p = data;
        while (len > 0) {
                ssize_t k = write(fd, p, len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO;
                p += k;
                len -= (size_t)k;
        }
        return 0;
}

/* Writes data to a fresh temp file in dirfd and renames it over name, without
 * an fsync (see fsx.h: a worktree a crash discards). On failure the temp file
 * is gone. */
static int replace_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode) {
        unsigned char rnd[8];
        char hex[2 * sizeof rnd + 1], tmp[32];
        int r = crypto_random(rnd, sizeof rnd);
        if (r < 0)
                return r;
        crypto_hex(rnd, sizeof rnd, hex);
        snprintf(tmp, sizeof tmp, ".fsx-%s.tmp", hex);

        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = write_all(fd, data, len);
        if (r >= 0 && fchmod(fd, mode & 0777) < 0)
                r = -errno;
        if (close(fd) < 0 && r >= 0 && errno != EINTR)
                r = -errno;
        if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
                r = -errno;
        if (r < 0)
                (void)unlinkat(dirfd, tmp, 0);
        return r;
}

int fsx_write(int root, const char *rel, const void *data, size_t len, mode_t mode,
              char **ret_error) {
        _cleanup_free_ char *norm = NULL, *shown = NULL;
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        if (streq(norm, "."))
                return fail(ret_error, -EISDIR, "'.' is the workspace itself, not a file");
        shown = strdup(norm);
        if (!shown)
                return fail(ret_error, -ENOMEM, "out of memory");
        const char *parent, *name;
        split_last(norm, &parent, &name);

        _cleanup_close_ int dfd = open_beneath(root, parent, O_PATH | O_DIRECTORY, 0);
        if (dfd == -ENOENT)
                dfd = mkdirs_fd(root, parent, 0755);
        if (dfd < 0)
                return path_fail(ret_error, dfd, shown);

        /* Never replace a symlink: the tool was asked to write through it,
         * and that is refused like every other link. (A link appearing after
         * this check would be replaced, not written through.) */
        struct stat st;
        bool exists = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (exists && S_ISLNK(st.st_mode))
                return path_fail(ret_error, -ELOOP, shown);
        if (mode == FSX_MODE_KEEP)
                mode = exists && S_ISREG(st.st_mode) ? (st.st_mode & 0777) : 0644;

        r = replace_at(dfd, name, data, len, mode);
        if (r < 0)
                return path_fail(ret_error, r, shown);
        return 0;
}

/* ---- deleting ------------------------------------------------------------ */

static int remove_at(int dirfd, const char *name, unsigned depth);

/* Empties the directory fd (owned; closed here). */
static int empty_dir(int fd, unsigned depth) {
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                r = -errno;
                        break;
                }
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = remove_at(dirfd(d), de->d_name, depth + 1);
                if (r == -ENOENT)
                        r = 0; /* gone meanwhile */
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

/* Removes name in dirfd: unlinks anything that is not a directory (links
 * included, never followed); a directory is opened O_NOFOLLOW, emptied and
 * removed. Entries added concurrently make it retry a few times. */
static int remove_at(int dirfd, const char *name, unsigned depth) {
        for (int attempt = 0; attempt < 4; attempt++) {
                if (unlinkat(dirfd, name, 0) == 0)
                        return 0;
                if (errno != EISDIR)
                        return -errno;
                if (depth >= FSX_DEPTH_MAX)
                        return -E2BIG;
                int fd = open_one(dirfd, name, O_RDONLY | O_DIRECTORY, 0);
                if (fd == -ELOOP || fd == -ENOTDIR)
                        continue; /* swapped for a link or file: unlink that */
                if (fd < 0)
                        return fd;
                int r = empty_dir(fd, depth);
                if (r < 0)
                        return r;
                if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0)
                        return 0;
                if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR)
                        return -errno;
        }
        return -ENOTEMPTY;
}

int fsx_delete(int root, const char *rel, char **ret_error) {
        _cleanup_free_ char *norm = NULL, *shown = NULL;
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        if (streq(norm, "."))
                return fail(ret_error, -EBUSY, "'.' is the workspace itself; it cannot be deleted");
        shown = strdup(norm);
        if (!shown)
                return fail(ret_error, -ENOMEM, "out of memory");
        const char *parent, *name;
        split_last(norm, &parent, &name);
        _cleanup_close_ int dfd = open_beneath(root, parent, O_PATH | O_DIRECTORY, 0);
        if (dfd < 0)
                return path_fail(ret_error, dfd, shown);
        r = remove_at(dfd, name, 0);
        if (r == -E2BIG) {
                char esc[ESC_SIZE];
                escape(shown, strlen(shown), esc);
                return fail(ret_error, r, "'%s' is nested more than %d directories deep", esc,
                            FSX_DEPTH_MAX);
        }
        if (r < 0)
                return path_fail(ret_error, r, shown);
        return 0;
}

/* ---- listing and stat ---------------------------------------------------- */

void fsx_list_free(struct fsx_list *l) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++)
                free(l->entries[i].name);
        free(l->entries);
        free(l);
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const struct fsx_entry *)a)->name, ((const struct fsx_entry *)b)->name);
}

static int list_fd(int fd, bool top, size_t max, struct fsx_list *l) {
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return r;
        }
        int r = 0;
        size_t cap = 0;
        for (;;) {
                errno = 0;
                struct dirent *de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                r = -errno;
                        break;
                }
                const char *name = de->d_name;
                if (streq(name, ".") || streq(name, "..") || is_git_name(name, strlen(name)) ||
                    (top && is_seed_name(name, strlen(name))))
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* removed meanwhile */
                l->total++;
                if (l->n >= max) {
                        l->truncated = true;
                        continue;
                }
                if (l->n == cap) {
                        size_t ncap = cap ? cap * 2 : 16;
                        if (ncap > max)
                                ncap = max;
                        struct fsx_entry *e = reallocarray(l->entries, ncap, sizeof *e);
                        if (!e) {
                                r = -ENOMEM;
                                break;
                        }
                        l->entries = e;
                        cap = ncap;
                }
                char *copy = strdup(name);
                if (!copy) {
                        r = -ENOMEM;
                        break;
                }
                l->entries[l->n++] = (struct fsx_entry){
                        .name = copy,
                        .type = type_of(st.st_mode),
                        .size = (uint64_t)st.st_size,
                };
        }
        closedir(d);
        if (r >= 0 && l->n > 1)
                qsort(l->entries, l->n, sizeof *l->entries, entry_cmp);
        return r;
}

int fsx_list(int root, const char *rel, size_t max, struct fsx_list **ret, char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        int fd = open_beneath(root, norm, O_RDONLY | O_DIRECTORY, 0);
        if (fd < 0)
                return path_fail(ret_error, fd, norm);
        _cleanup_(fsx_list_freep) struct fsx_list *l = calloc(1, sizeof *l);
        if (!l) {
                close(fd);
                return fail(ret_error, -ENOMEM, "out of memory");
        }
        r = list_fd(fd, streq(norm, "."), max, l);
        if (r < 0)
                return path_fail(ret_error, r, norm);
        *ret = TAKE_PTR(l);
        return 0;
}

int fsx_stat(int root, const char *rel, struct fsx_stat *ret, char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        int r = normalize(rel, &norm, ret_error);
        if (r < 0)
                return r;
        /* O_PATH|O_NOFOLLOW: a final symlink is opened itself, not followed. */
        _cleanup_close_ int fd = open_beneath(root, norm, O_PATH, 0);
        if (fd < 0)
                return path_fail(ret_error, fd, norm);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return path_fail(ret_error, -errno, norm);
        *ret = (struct fsx_stat){
                .type = type_of(st.st_mode),
                .size = (uint64_t)st.st_size,
                .mode = st.st_mode & 07777,
                .nlink = (uint64_t)st.st_nlink,
                .mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000,
                .dev = (uint64_t)st.st_dev,
                .ino = (uint64_t)st.st_ino,
                .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                .ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec,
        };
        return 0;
}
