/* gitdir.c — a snapshot of the parts of the Seed's git dir that decide what
 * git runs or how it reads the tree (hooks, config, info/), to prove after an
 * evolution that nothing there changed. */
#include "repo/repo-internal.h"
#include "base/crypto.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#define SNAP_MAX_ENTRIES 10000
#define SNAP_MAX_DEPTH 16
#define SNAP_MAX_FILE (16u * 1024 * 1024)
#define SNAP_MAX_TEXT (8u * 1024 * 1024)

static const char *const snap_items[] = {"config", "hooks", "info"};

struct snap {
        char **lines;
        size_t n;
};

/* Path bytes that could break the line format are %XX-escaped. */
static int escape_path(const char *s, char **ret) {
        size_t n = strlen(s);
        char *out = malloc(3 * n + 1), *p = out;
        if (!out)
                return -ENOMEM;
        for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
                if (*c <= 0x20 || *c == '%' || *c == 0x7f)
                        p += sprintf(p, "%%%02X", *c);
                else
                        *p++ = (char)*c;
        }
        *p = 0;
        *ret = out;
        return 0;
}

static int snap_entry(struct snap *s, int dfd, const char *name, const char *rel, int depth) {
        struct stat st;
        char hash[SHA256_HEX_LEN + 1] = "-";
        char type = 'o';
        int r;

        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : repo_err(-errno, "cannot stat .git/%s: %m", rel);
        if (s->n >= SNAP_MAX_ENTRIES)
                return repo_err(-E2BIG, "more than %d entries in the git dir's hooks/config/info", SNAP_MAX_ENTRIES);
        if (S_ISREG(st.st_mode)) {
                type = 'f';
                _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (fd < 0)
                        return repo_err(-errno, "cannot open .git/%s: %m", rel);
                r = repo_read_fd(fd, SNAP_MAX_FILE, &data, &len);
                if (r == -EFBIG)
                        strcpy(hash, "too-large");
                else if (r < 0)
                        return repo_err(r, "cannot read .git/%s: %s", rel, strerror(-r));
                else
                        crypto_sha256_hex(data, len, hash);
        } else if (S_ISLNK(st.st_mode)) {
                type = 'l';
                char target[PATH_MAX];
                ssize_t k = readlinkat(dfd, name, target, sizeof target);
                if (k < 0)
                        return repo_err(-errno, "cannot read .git/%s: %m", rel);
                crypto_sha256_hex(target, (size_t)k, hash);
        } else if (S_ISDIR(st.st_mode))
                type = 'd';

        _cleanup_free_ char *esc = NULL;
        if (escape_path(rel, &esc) < 0 || strv_pushf(&s->lines, "%s\t%c\t%o\t%lld\t%s", esc, type,
                                                    (unsigned)(st.st_mode & 07777),
                                                    type == 'd' ? 0LL : (long long)st.st_size, hash) < 0)
                return repo_err(-ENOMEM, "out of memory");
        s->n++;
        if (type != 'd')
                return 0;
        if (depth >= SNAP_MAX_DEPTH)
                return repo_err(-ELOOP, "directories nested too deep in .git/%s", rel);
        int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
                return repo_err(-errno, "cannot open .git/%s: %m", rel);
        DIR *d = fdopendir(sub);
        if (!d) {
                r = -errno;
                close(sub);
                return repo_err(r, "cannot read .git/%s", rel);
        }
        struct dirent *de;
        r = 0;
        while (r >= 0 && (de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                char child[PATH_MAX];
                if ((size_t)snprintf(child, sizeof child, "%s/%s", rel, de->d_name) >= sizeof child) {
                        r = repo_err(-ENAMETOOLONG, "path too long in .git/%s", rel);
                        break;
                }
                r = snap_entry(s, dirfd(d), de->d_name, child, depth + 1);
        }
        closedir(d);
        return r;
}

static int cmp_line(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int take_snapshot(const char *seed_dir, struct snap *ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        struct snap s = {0};
        int r;

        if ((r = repo_open_seed(seed_dir, &repo, NULL)) < 0)
                return r;
        _cleanup_close_ int gfd = open(git_repository_commondir(repo), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gfd < 0)
                return repo_err(-errno, "cannot open the git dir: %m");
        for (size_t i = 0; i < ARRAY_SIZE(snap_items); i++)
                if ((r = snap_entry(&s, gfd, snap_items[i], snap_items[i], 0)) < 0) {
                        strv_free(s.lines);
                        return r;
                }
        if (s.n > 1)
                qsort(s.lines, s.n, sizeof(char *), cmp_line);
        *ret = s;
        return 0;
}

int repo_gitdir_snapshot(const char *seed_dir, char **ret) {
        struct snap s = {0};
        size_t total = 1;
        int r;

        repo_err_clear();
        if ((r = take_snapshot(seed_dir, &s)) < 0)
                return r;
        for (size_t i = 0; i < s.n; i++)
                total += strlen(s.lines[i]) + 1;
        char *text = malloc(total), *p = text;
        if (!text) {
                strv_free(s.lines);
                return repo_err(-ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < s.n; i++)
                p += sprintf(p, "%s\n", s.lines[i]);
        *p = 0;
        strv_free(s.lines);
        *ret = text;
        return 0;
}

/* The snapshot's lines, sorted (parsing a text that was stored elsewhere). */
static int parse_snapshot(const char *text, struct snap *ret) {
        struct snap s = {0};
        if (strlen(text) > SNAP_MAX_TEXT)
                return repo_err(-E2BIG, "the git dir snapshot is too large");
        for (const char *p = text; *p;) {
                size_t n = strcspn(p, "\n");
                if (n > 0) {
                        if (s.n >= SNAP_MAX_ENTRIES || strv_pushf(&s.lines, "%.*s", (int)n, p) < 0) {
                                strv_free(s.lines);
                                return repo_err(s.n >= SNAP_MAX_ENTRIES ? -E2BIG : -ENOMEM,
                                                "cannot read the git dir snapshot");
                        }
                        s.n++;
                }
                p += n;
                if (*p)
                        p++;
        }
        if (s.n > 1)
                qsort(s.lines, s.n, sizeof(char *), cmp_line);
        *ret = s;
        return 0;
}

static size_t key_len(const char *line) { return strcspn(line, "\t"); }

static int key_cmp(const char *a, const char *b) {
        size_t la = key_len(a), lb = key_len(b);
        int c = memcmp(a, b, la < lb ? la : lb);
        return c ? c : (la > lb) - (la < lb);
}

static int push_key(char ***paths, const char *line) {
        return strv_pushf(paths, ".git/%.*s", (int)key_len(line), line);
}

int repo_gitdir_changed(const char *seed_dir, const char *snapshot, char ***ret_paths) {
        struct snap old = {0}, cur = {0};
        _cleanup_strv_free_ char **paths = NULL;
        int r;

        repo_err_clear();
        if (!snapshot)
                return repo_err(-EINVAL, "no git dir snapshot given");
        if ((r = parse_snapshot(snapshot, &old)) < 0)
                return r;
        if ((r = take_snapshot(seed_dir, &cur)) < 0) {
                strv_free(old.lines);
                return r;
        }
        if (!(paths = calloc(1, sizeof(char *)))) {
                r = repo_err(-ENOMEM, "out of memory");
                goto out;
        }
        /* Lines sort by their path key first (a tab sorts before any path
         * byte that is not escaped), so a merge walk finds the differences. */
        size_t i = 0, j = 0;
        while (r >= 0 && (i < old.n || j < cur.n)) {
                int c = i >= old.n ? 1 : j >= cur.n ? -1 : key_cmp(old.lines[i], cur.lines[j]);
                if (c < 0)
                        r = push_key(&paths, old.lines[i++]);
                else if (c > 0)
                        r = push_key(&paths, cur.lines[j++]);
                else {
                        if (!streq(old.lines[i], cur.lines[j]))
                                r = push_key(&paths, cur.lines[j]);
                        i++;
                        j++;
                }
        }
        if (r < 0) {
                r = repo_err(-ENOMEM, "out of memory");
                goto out;
        }
        size_t n = strv_length(paths);
        *ret_paths = TAKE_PTR(paths);
        r = n > INT_MAX ? INT_MAX : (int)n;
out:
        strv_free(old.lines);
        strv_free(cur.lines);
        return r;
}
