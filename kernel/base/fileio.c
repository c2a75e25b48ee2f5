#include "base/fileio.h"

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>

int read_fd_bounded(int fd, size_t size_hint, size_t max, char **ret, size_t *ret_len) {
        if (max > SIZE_MAX / 2)
                max = SIZE_MAX / 2; /* keeps max + 1 and cap * 2 from overflowing */
        /* Sized for the file as it is now; it grows only if the file does
         * (or, like /proc files, reports no size). */
        size_t cap = (size_hint < max ? size_hint : max) + 1, len = 0;
        _cleanup_free_ char *data = malloc(cap);
        if (!data)
                return -ENOMEM;
        for (;;) {
                if (len + 1 == cap) {
                        /* Full: probe for EOF before growing, so a file of
                         * exactly max bytes is accepted. */
                        char probe;
                        ssize_t k = read(fd, &probe, 1);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0)
                                return -errno;
                        if (k == 0)
                                break;
                        if (len >= max)
                                return -EFBIG;
                        size_t ncap = cap < 4096 ? 4096 : cap * 2;
                        if (ncap > max + 1)
                                ncap = max + 1;
                        char *d = realloc(data, ncap);
                        if (!d)
                                return -ENOMEM;
                        data = d;
                        cap = ncap;
                        data[len++] = probe;
                        continue;
                }
                ssize_t k = read(fd, data + len, cap - 1 - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        data[len] = 0;
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(data);
        return 0;
}

int fd_wait_readable(int fd, int64_t deadline) {
        for (;;) {
                /* A passed deadline still looks once (timeout 0). */
                int64_t left = deadline == INT64_MAX ? -1 : deadline - now_ms();
                if (deadline != INT64_MAX && left < 0)
                        left = 0;
                struct pollfd pf = {.fd = fd, .events = POLLIN};
                int k = poll(&pf, 1, left < 0 ? -1 : left > INT_MAX ? INT_MAX : (int)left);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k > 0)
                        return 0;
                if (deadline != INT64_MAX && now_ms() >= deadline)
                        return -ETIMEDOUT;
        }
}

int read_file(const char *path, size_t max, char **ret, size_t *ret_len) {
        /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused
         * below); it is cleared again before reading. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
                return -errno;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        return read_fd_bounded(fd, (size_t)st.st_size, max, ret, ret_len);
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        if (xasprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
                return -ENOMEM;
        /* A fresh name each time (O_EXCL): concurrent writers of the same
         * path never share a temp file, and a stale one is never reused. */
        _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = 0;
        if (fchmod(fd, mode) < 0)
                r = -errno;
        const char *p = data;
        while (r == 0 && len > 0) {
                ssize_t k = write(fd, p, len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        break;
                }
                p += k;
                len -= (size_t)k;
        }
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int mkdir_mode(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        struct stat st;
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if ((st.st_mode & 07777) != mode && chmod(path, mode) < 0)
                return -errno;
        return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        (void)st;
        (void)ftw;
        int r = flag == FTW_DP ? rmdir(p) : unlink(p);
        return r < 0 && errno != ENOENT ? -1 : 0;
}

int rm_rf(const char *path) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
                return -errno;
        return 0;
}

char *path_join(const char *a, const char *b) {
        char *s = NULL;
        size_t la = strlen(a);
        bool slash = la > 0 && a[la - 1] == '/';
        while (*b == '/')
                b++;
        if (xasprintf(&s, "%s%s%s", a, slash ? "" : "/", b) < 0)
                return NULL;
        return s;
}

bool path_exists(const char *path) {
        struct stat st;
        return lstat(path, &st) == 0;
}

int path_abs(const char *path, char **ret) {
        char *p = realpath(path, NULL);
        if (!p)
                return -errno;
        *ret = p;
        return 0;
}
