/* scan.c — a worktree and a git tree as sorted lists of entries, read
 * without following symlinks; symlink-safe opening and removal. */
#include "repo/repo-internal.h"
#include "base/fileio.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* ---- entry lists -------------------------------------------------------- */

void repo_ents_free(struct repo_ents *e) {
        for (size_t i = 0; e && i < e->n; i++) {
                free(e->v[i].path);
                free(e->v[i].link);
        }
        if (e) {
                free(e->v);
                *e = (struct repo_ents){0};
        }
}

static int ents_push(struct repo_ents *e, const char *path, uint32_t mode) {
        if (e->n >= REPO_MAX_ENTRIES)
                return repo_err(-E2BIG, "more than %d files in the tree", REPO_MAX_ENTRIES);
        if (e->n == e->cap) {
                size_t nc = e->cap ? e->cap * 2 : 256;
                struct repo_ent *nv = realloc(e->v, nc * sizeof *nv);
                if (!nv)
                        return repo_err(-ENOMEM, "out of memory");
                e->v = nv;
                e->cap = nc;
        }
        char *p = strdup(path);
        if (!p)
                return repo_err(-ENOMEM, "out of memory");
        e->v[e->n++] = (struct repo_ent){.path = p, .mode = mode, .size = -1};
        return 0;
}

static int cmp_ent(const void *a, const void *b) {
        return strcmp(((const struct repo_ent *)a)->path, ((const struct repo_ent *)b)->path);
}

static void ents_sort(struct repo_ents *e) {
        if (e->n > 1)
                qsort(e->v, e->n, sizeof *e->v, cmp_ent);
}

/* Index of the first entry whose path is >= key. */
static size_t lower_bound(const struct repo_ents *e, const char *key) {
        size_t lo = 0, hi = e->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(e->v[mid].path, key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

struct repo_ent *repo_ents_find(const struct repo_ents *e, const char *path) {
        if (!e)
                return NULL;
        size_t i = lower_bound(e, path);
        return i < e->n && streq(e->v[i].path, path) ? &e->v[i] : NULL;
}

bool repo_ents_has_below(const struct repo_ents *e, const char *dir) {
        if (!e)
                return false;
        char key[REPO_MAX_PATH + 2];
        int k = snprintf(key, sizeof key, "%s/", dir);
        if (k < 0 || (size_t)k >= sizeof key)
                return false;
        size_t i = lower_bound(e, key);
        return i < e->n && startswith(e->v[i].path, key);
}

/* ---- trees -------------------------------------------------------------- */

static uint32_t norm_mode(git_filemode_t m) {
        switch (m) {
        case GIT_FILEMODE_BLOB_EXECUTABLE:
                return REPO_MODE_EXECUTABLE;
        case GIT_FILEMODE_LINK:
                return REPO_MODE_SYMLINK;
        case GIT_FILEMODE_COMMIT:
                return REPO_MODE_GITLINK;
        default:
                return REPO_MODE_FILE;
        }
}

struct tree_walk_ctx {
        struct repo_ents *out;
        int r;
};

static int tree_walk_cb(const char *root, const git_tree_entry *te, void *payload) {
        struct tree_walk_ctx *c = payload;
        git_object_t type = git_tree_entry_type(te);
        if (type == GIT_OBJECT_TREE)
                return 0;
        char path[REPO_MAX_PATH];
        int k = snprintf(path, sizeof path, "%s%s", root, git_tree_entry_name(te));
        if (k < 0 || (size_t)k >= sizeof path) {
                c->r = repo_err(-ENAMETOOLONG, "a path in the tree is too long");
                return -1;
        }
        if ((c->r = ents_push(c->out, path, norm_mode(git_tree_entry_filemode(te)))) < 0)
                return -1;
        struct repo_ent *e = &c->out->v[c->out->n - 1];
        git_oid_cpy(&e->oid, git_tree_entry_id(te));
        e->has_oid = true;
        return 0;
}

int repo_tree_ents(git_repository *repo, const git_tree *tree, struct repo_ents *ret) {
        struct repo_ents out = {0};
        struct tree_walk_ctx c = {.out = &out};
        (void)repo;
        int r = git_tree_walk(tree, GIT_TREEWALK_PRE, tree_walk_cb, &c);
        if (r < 0) {
                repo_ents_free(&out);
                return c.r < 0 ? c.r : repo_git_err(r, "cannot read a tree");
        }
        ents_sort(&out);
        *ret = out;
        return 0;
}

/* ---- symlink-safe opening ----------------------------------------------- */

static int open_by_components(int rootfd, const char *rel, int flags) {
        char buf[REPO_MAX_PATH];
        if (strlen(rel) >= sizeof buf)
                return -ENAMETOOLONG;
        strcpy(buf, rel);
        _cleanup_close_ int dfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0)
                return -errno;
        char *save = NULL, *next;
        char *comp = strtok_r(buf, "/", &save);
        while (comp) {
                next = strtok_r(NULL, "/", &save);
                if (streq(comp, ".")) {
                        comp = next;
                        continue;
                }
                if (!next) {
                        int fd = openat(dfd, comp, flags | O_NOFOLLOW | O_CLOEXEC);
                        return fd < 0 ? -errno : fd;
                }
                int nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (nfd < 0)
                        return -errno;
                closep(&dfd);
                dfd = nfd;
                comp = next;
        }
        return -EINVAL;
}

int repo_open_beneath(int rootfd, const char *rel, int flags) {
        if (!rel || !*rel || rel[0] == '/')
                return -EINVAL;
        /* ".." anywhere is refused outright. */
        for (const char *p = rel; (p = strstr(p, "..")); p += 2)
                if ((p == rel || p[-1] == '/') && (p[2] == 0 || p[2] == '/'))
                        return -EINVAL;
        struct open_how how = {
                .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof how);
        if (fd >= 0)
                return (int)fd;
        if (errno != ENOSYS && errno != EPERM)
                return -errno;
        /* Older kernels, or a seccomp profile without openat2: one component
         * at a time, each with O_NOFOLLOW. */
        return open_by_components(rootfd, rel, flags);
}

int repo_read_fd(int fd, size_t max, char **ret, size_t *ret_len) {
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t)st.st_size > max)
                return -EFBIG;
        return read_fd_bounded(fd, (size_t)st.st_size, max, ret, ret_len);
}

/* ---- lazily known facts about entries ------------------------------------ */

int repo_ent_size(git_repository *repo, struct repo_ent *e, int64_t *ret) {
        if (e->size < 0 && e->has_oid) {
                _cleanup_(git_odb_freep) git_odb *odb = NULL;
                size_t len;
                git_object_t type;
                int r;
                if ((r = git_repository_odb(&odb, repo)) < 0 || (r = git_odb_read_header(&len, &type, odb, &e->oid)) < 0)
                        return repo_git_err(r, "cannot read the object of '%s'", e->path);
                e->size = (int64_t)len;
        }
        if (e->size < 0)
                return repo_err(-EINVAL, "no size known for '%s'", e->path);
        *ret = e->size;
        return 0;
}

int repo_ent_link(git_repository *repo, struct repo_ent *e, const char **ret) {
        if (!e->link && e->has_oid) {
                _cleanup_(git_blob_freep) git_blob *blob = NULL;
                int r;
                if ((r = git_blob_lookup(&blob, repo, &e->oid)) < 0)
                        return repo_git_err(r, "cannot read the symlink '%s'", e->path);
                size_t len = (size_t)git_blob_rawsize(blob);
                if (len > REPO_MAX_LINK)
                        len = REPO_MAX_LINK;
                if (!(e->link = strndup(git_blob_rawcontent(blob), len)))
                        return repo_err(-ENOMEM, "out of memory");
        }
        if (!e->link)
                return repo_err(-EINVAL, "'%s' is not a symlink", e->path);
        *ret = e->link;
        return 0;
}

int repo_ent_oid(git_repository *repo, int rootfd, struct repo_ent *e, git_oid *ret) {
        int r;
        (void)repo;
        if (e->has_oid) {
                git_oid_cpy(ret, &e->oid);
                return 0;
        }
        if (e->mode == REPO_MODE_SYMLINK && e->link) {
                if ((r = git_odb_hash(&e->oid, e->link, strlen(e->link), GIT_OBJECT_BLOB)) < 0)
                        return repo_git_err(r, "cannot hash '%s'", e->path);
        } else if ((e->mode == REPO_MODE_FILE || e->mode == REPO_MODE_EXECUTABLE) && rootfd >= 0) {
                _cleanup_close_ int fd = repo_open_beneath(rootfd, e->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
                _cleanup_free_ char *data = NULL;
                size_t len = 0;
                if (fd < 0)
                        return repo_err(fd, "cannot open '%s': %s", e->path, strerror(-fd));
                if ((r = repo_read_fd(fd, REPO_MAX_FILE, &data, &len)) < 0)
                        return repo_err(r, "cannot read '%s': %s", e->path, strerror(-r));
                if ((r = git_odb_hash(&e->oid, data, len, GIT_OBJECT_BLOB)) < 0)
                        return repo_git_err(r, "cannot hash '%s'", e->path);
                e->size = (int64_t)len;
        } else
                return repo_err(-EINVAL, "no content known for '%s'", e->path);
        e->has_oid = true;
        git_oid_cpy(ret, &e->oid);
        return 0;
}

/* ---- the working tree ---------------------------------------------------- */

struct scan_ctx {
        git_repository *repo;
        const struct repo_ents *tracked;
        enum repo_ignore_mode mode;
        struct repo_ents *out;
        char path[REPO_MAX_PATH];
};

static int is_ignored(struct scan_ctx *c, const char *rel, bool dir, bool *ret) {
        *ret = false;
        if (!c->repo)
                return 0;
        char p[REPO_MAX_PATH + 2];
        snprintf(p, sizeof p, "%s%s", rel, dir ? "/" : "");
        int ign = 0, r = git_ignore_path_is_ignored(&ign, c->repo, p);
        if (r < 0)
                return repo_git_err(r, "cannot read the ignore rules for '%s'", rel);
        *ret = ign == 1;
        return 0;
}

static int scan_dir(struct scan_ctx *c, int dfd, size_t plen, int depth, bool parent_ignored);

static int scan_one(struct scan_ctx *c, int dfd, const char *name, size_t plen, int depth, bool parent_ignored) {
        struct stat st;
        bool root = plen == 0, ignored = parent_ignored, tracked;
        int r;

        if (root && streq(name, ".git"))
                return 0; /* the worktree's .git file: checked on its own */
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : repo_err(-errno, "cannot stat '%s%s': %m", c->path, name);
        if (root && streq(name, ".seed") && S_ISDIR(st.st_mode))
                return 0; /* the kernel's own, never part of a tree */
        size_t nlen = strlen(name);
        if (plen + nlen + 2 > sizeof c->path)
                return repo_err(-ENAMETOOLONG, "path too long below '%.200s'", c->path);
        memcpy(c->path + plen, name, nlen + 1);
        const char *rel = c->path;
        bool dir = S_ISDIR(st.st_mode);
        tracked = repo_ents_find(c->tracked, rel) || (dir && repo_ents_has_below(c->tracked, rel));
        if (!ignored && !tracked && c->repo && (r = is_ignored(c, rel, dir, &ignored)) < 0)
                return r;
        if (ignored && !tracked && c->mode == REPO_IGNORE_PRUNE) {
                c->out->pruned++;
                return 0;
        }
        if (dir) {
                _cleanup_close_ int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        return errno == ENOENT ? 0 : repo_err(-errno, "cannot open '%s': %m", rel);
                struct stat gst;
                if (fstatat(sub, ".git", &gst, AT_SYMLINK_NOFOLLOW) == 0) {
                        /* A nested repository: git would record a gitlink. */
                        if (c->mode == REPO_IGNORE_PRUNE)
                                return 0;
                        if ((r = ents_push(c->out, rel, REPO_MODE_GITLINK)) < 0)
                                return r;
                        c->out->v[c->out->n - 1].ignored = ignored;
                        return 0;
                }
                if (depth + 1 > REPO_MAX_DEPTH)
                        return repo_err(-ELOOP, "directories nested deeper than %d at '%.200s'", REPO_MAX_DEPTH, rel);
                c->path[plen + nlen] = '/';
                c->path[plen + nlen + 1] = 0;
                r = scan_dir(c, TAKE_FD(sub), plen + nlen + 1, depth + 1, ignored);
                c->path[plen] = 0;
                return r;
        }
        if (S_ISREG(st.st_mode)) {
                if ((r = ents_push(c->out, rel, (st.st_mode & S_IXUSR) ? REPO_MODE_EXECUTABLE : REPO_MODE_FILE)) < 0)
                        return r;
                c->out->v[c->out->n - 1].size = (int64_t)st.st_size;
                c->out->v[c->out->n - 1].ignored = ignored && !tracked;
        } else if (S_ISLNK(st.st_mode)) {
                char target[REPO_MAX_LINK + 1];
                ssize_t k = readlinkat(dfd, name, target, sizeof target);
                if (k < 0)
                        return errno == ENOENT ? 0 : repo_err(-errno, "cannot read the symlink '%s': %m", rel);
                if ((size_t)k > REPO_MAX_LINK)
                        return repo_err(-ENAMETOOLONG, "the symlink '%s' is too long", rel);
                target[k] = 0;
                if ((r = ents_push(c->out, rel, REPO_MODE_SYMLINK)) < 0)
                        return r;
                struct repo_ent *e = &c->out->v[c->out->n - 1];
                e->ignored = ignored && !tracked;
                e->size = k;
                if (!(e->link = strdup(target)))
                        return repo_err(-ENOMEM, "out of memory");
        }
        /* fifos, sockets, devices: git cannot hold them */
        c->path[plen] = 0;
        return 0;
}

/* Takes ownership of fd. c->path holds the dir's path with a trailing '/'
 * (empty at the root). */
static int scan_dir(struct scan_ctx *c, int fd, size_t plen, int depth, bool parent_ignored) {
        DIR *d = fdopendir(fd);
        if (!d) {
                int r = -errno;
                close(fd);
                return repo_err(r, "cannot read the directory '%s': %s", c->path, strerror(-r));
        }
        int r = 0;
        struct dirent *de;
        errno = 0;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if ((r = scan_one(c, dirfd(d), de->d_name, plen, depth, parent_ignored)) < 0)
                        break;
                c->path[plen] = 0;
                errno = 0;
        }
        if (r == 0 && errno != 0)
                r = repo_err(-errno, "cannot read the directory '%s': %m", c->path);
        closedir(d);
        return r;
}

int repo_scan_workdir(int rootfd, git_repository *repo, const struct repo_ents *tracked,
                      enum repo_ignore_mode mode, struct repo_ents *ret) {
        struct repo_ents out = {0};
        struct scan_ctx c = {.repo = repo, .tracked = tracked, .mode = mode, .out = &out};
        int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return repo_err(-errno, "cannot open the working tree: %m");
        int r = scan_dir(&c, fd, 0, 0, false);
        if (r < 0) {
                repo_ents_free(&out);
                return r;
        }
        ents_sort(&out);
        *ret = out;
        return 0;
}

/* ---- removal --------------------------------------------------------------- */

/* Makes a directory we own searchable and writable without following a
 * symlink put in its place: chmod through an O_PATH fd's /proc link. */
static void make_dir_writable(int dfd, const char *name) {
        _cleanup_close_ int pfd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0)
                return;
        char p[64];
        snprintf(p, sizeof p, "/proc/self/fd/%d", pfd);
        (void)chmod(p, 0700);
}

static int rm_below(int dfd, int depth) {
        DIR *d = fdopendir(dfd);
        if (!d) {
                close(dfd);
                return -errno;
        }
        int r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                struct stat st;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        if (depth > 4 * REPO_MAX_DEPTH) {
                                r = -ELOOP;
                                break;
                        }
                        make_dir_writable(dirfd(d), de->d_name);
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                int k = rm_below(sub, depth + 1);
                                if (k < 0 && r == 0)
                                        r = k;
                        }
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = -errno;
        }
        closedir(d);
        return r;
}

int repo_rm_tree(const char *path) {
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
        (void)chmod(path, 0700); /* ours, checked not to be a link just above */
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = rm_below(fd, 0);
        if (rmdir(path) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}
