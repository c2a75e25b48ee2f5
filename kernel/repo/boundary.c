/* boundary.c — what changed between a base commit and a worktree (or
 * another commit), and which of those changes cross the kernel boundary. */
#include "repo/repo-internal.h"
#include "base/buf.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>

static const char R_OUTSIDE[] = "outside the evolvable directories";
static const char R_GITDIR[] = "a path inside a .git directory";
static const char R_GITFILE[] = "a .gitattributes or .gitmodules file";
static const char R_GITLINK[] = "a gitlink or nested git repository";
static const char R_LINK_ABS[] = "a symlink with an absolute target";
static const char R_LINK_OUT[] = "a symlink leaving its evolvable directory";
static const char R_ADMIN[] = "the worktree's git administrative files";

const char *repo_change_kind_to_string(enum repo_change_kind k) {
        switch (k) {
        case REPO_CHANGE_ADDED:
                return "added";
        case REPO_CHANGE_MODIFIED:
                return "modified";
        case REPO_CHANGE_DELETED:
                return "deleted";
        case REPO_CHANGE_RENAMED:
                return "renamed";
        case REPO_CHANGE_MODE_CHANGED:
                return "mode-changed";
        case REPO_CHANGE_TYPE_CHANGED:
                return "type-changed";
        }
        return "unknown";
}

void repo_changes_free(struct repo_change *c, size_t n) {
        for (size_t i = 0; c && i < n; i++) {
                free(c[i].path);
                free(c[i].old_path);
                free(c[i].link_target);
        }
        free(c);
}

/* ---- classification -------------------------------------------------------- */

/* ".git", or what a case-insensitive or NTFS-minded git would take for it. */
static bool is_dotgit(const char *s, size_t n) {
        if (n >= 4 && strncasecmp(s, ".git", 4) == 0) {
                for (size_t i = 4; i < n; i++)
                        if (s[i] != '.' && s[i] != ' ')
                                return false;
                return true;
        }
        return n == 5 && strncasecmp(s, "git~1", 5) == 0;
}

static bool has_dotgit_component(const char *path) {
        for (const char *s = path; *s;) {
                size_t n = strcspn(s, "/");
                if (is_dotgit(s, n))
                        return true;
                s += n;
                while (*s == '/')
                        s++;
        }
        return false;
}

static bool is_git_special_file(const char *path) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        return strcasecmp(base, ".gitattributes") == 0 || strcasecmp(base, ".gitmodules") == 0;
}

static size_t ev_len(const char *ev) {
        size_t n = strlen(ev);
        while (n > 0 && ev[n - 1] == '/')
                n--;
        return n;
}

/* The evolvable dir path lies strictly below, or NULL. */
static const char *evolvable_of(const char *path, char *const *evolvable) {
        for (size_t i = 0; evolvable && evolvable[i]; i++) {
                size_t n = ev_len(evolvable[i]);
                if (n > 0 && strncmp(path, evolvable[i], n) == 0 && path[n] == '/' && path[n + 1])
                        return evolvable[i];
        }
        return NULL;
}

int repo_evolvable_valid(char *const *evolvable) {
        for (size_t i = 0; evolvable && evolvable[i]; i++) {
                const char *ev = evolvable[i];
                size_t n = ev_len(ev);
                if (i >= 64 || n == 0 || n >= REPO_MAX_PATH || ev[0] == '/')
                        return repo_err(-EINVAL, "invalid evolvable directory '%.100s'", ev);
                for (const char *s = ev; s < ev + n;) {
                        size_t k = strcspn(s, "/");
                        if (k > (size_t)(ev + n - s))
                                k = (size_t)(ev + n - s);
                        if (k == 0 || (k == 1 && s[0] == '.') || (k == 2 && s[0] == '.' && s[1] == '.') ||
                            is_dotgit(s, k) || (s == ev && k == 5 && strncmp(s, ".seed", 5) == 0))
                                return repo_err(-EINVAL, "invalid evolvable directory '%.100s'", ev);
                        s += k + 1;
                }
        }
        return 0;
}

/* NULL if the symlink at path (inside evolvable dir ev) may point at target:
 * relative, resolved lexically from the link's directory, staying in ev,
 * with every ".." before the first name. */
static const char *symlink_reason(const char *path, const char *target, const char *ev) {
        if (!*target)
                return R_LINK_OUT;
        if (target[0] == '/')
                return R_LINK_ABS;
        char res[2 * REPO_MAX_PATH];
        const char *slash = strrchr(path, '/');
        size_t len = slash ? (size_t)(slash - path) : 0;
        if (len >= sizeof res)
                return R_LINK_OUT;
        memcpy(res, path, len);
        res[len] = 0;
        bool named = false;
        for (const char *s = target; *s;) {
                size_t k = strcspn(s, "/");
                if (k == 2 && s[0] == '.' && s[1] == '.') {
                        if (named || len == 0)
                                return R_LINK_OUT;
                        char *up = strrchr(res, '/');
                        len = up ? (size_t)(up - res) : 0;
                        res[len] = 0;
                } else if (k > 0 && !(k == 1 && s[0] == '.')) {
                        named = true;
                        if (len + 1 + k + 1 > sizeof res)
                                return R_LINK_OUT;
                        if (len > 0)
                                res[len++] = '/';
                        memcpy(res + len, s, k);
                        len += k;
                        res[len] = 0;
                }
                s += k;
                while (*s == '/')
                        s++;
        }
        size_t n = ev_len(ev);
        if (len >= n && strncmp(res, ev, n) == 0 && (res[n] == 0 || res[n] == '/'))
                return NULL;
        return R_LINK_OUT;
}

/* Why one side of a change is protected; link is the symlink's target when
 * that side is a symlink whose target must be checked. */
static const char *side_reason(const char *path, uint32_t mode, const char *link, char *const *evolvable) {
        if (has_dotgit_component(path))
                return R_GITDIR;
        if (is_git_special_file(path))
                return R_GITFILE;
        if (mode == REPO_MODE_GITLINK)
                return R_GITLINK;
        const char *ev = evolvable_of(path, evolvable);
        if (!ev)
                return R_OUTSIDE;
        if (mode == REPO_MODE_SYMLINK)
                return symlink_reason(path, link ? link : "", ev);
        return NULL;
}

static void classify(struct repo_change *c, char *const *evolvable) {
        const char *old_r = NULL, *new_r = NULL;
        if (c->never_approvable) {
                c->protected = c->new_protected = true;
                c->reason = R_ADMIN;
                return;
        }
        if (c->kind != REPO_CHANGE_ADDED)
                old_r = side_reason(c->old_path ? c->old_path : c->path, c->old_mode, NULL, evolvable);
        if (c->kind != REPO_CHANGE_DELETED)
                new_r = side_reason(c->path, c->new_mode, c->link_target, evolvable);
        c->symlink = c->old_mode == REPO_MODE_SYMLINK || c->new_mode == REPO_MODE_SYMLINK;
        c->gitlink = c->old_mode == REPO_MODE_GITLINK || c->new_mode == REPO_MODE_GITLINK;
        if (c->kind == REPO_CHANGE_RENAMED) {
                c->old_protected = old_r != NULL;
                c->new_protected = new_r != NULL;
        } else
                c->new_protected = old_r || new_r; /* one path, `path` */
        c->protected = old_r || new_r;
        c->reason = new_r ? new_r : old_r;
}

/* ---- building the list ------------------------------------------------------ */

struct chlist {
        struct repo_change *v;
        size_t n, cap;
};

static void chlist_free(struct chlist *l) {
        repo_changes_free(l->v, l->n);
        *l = (struct chlist){0};
}

static int chlist_add(struct chlist *l, enum repo_change_kind kind, const char *path, const char *old_path,
                      uint32_t old_mode, uint32_t new_mode, const char *link, struct repo_change **ret) {
        if (l->n == l->cap) {
                size_t nc = l->cap ? l->cap * 2 : 64;
                struct repo_change *nv = realloc(l->v, nc * sizeof *nv);
                if (!nv)
                        return repo_err(-ENOMEM, "out of memory");
                l->v = nv;
                l->cap = nc;
        }
        struct repo_change c = {.kind = kind, .old_mode = old_mode, .new_mode = new_mode};
        c.path = strdup(path);
        c.old_path = old_path ? strdup(old_path) : NULL;
        c.link_target = link ? strdup(link) : NULL;
        if (!c.path || (old_path && !c.old_path) || (link && !c.link_target)) {
                free(c.path);
                free(c.old_path);
                free(c.link_target);
                return repo_err(-ENOMEM, "out of memory");
        }
        l->v[l->n] = c;
        if (ret)
                *ret = &l->v[l->n];
        l->n++;
        return 0;
}

static int cmp_change(const void *a, const void *b) {
        return strcmp(((const struct repo_change *)a)->path, ((const struct repo_change *)b)->path);
}

static struct repo_change *chlist_find(struct chlist *l, const char *path) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->v[i].path, path) || (l->v[i].old_path && streq(l->v[i].old_path, path)))
                        return &l->v[i];
        return NULL;
}

enum type_class { T_FILE, T_LINK, T_GITLINK };

static enum type_class type_class(uint32_t mode) {
        return mode == REPO_MODE_SYMLINK ? T_LINK : mode == REPO_MODE_GITLINK ? T_GITLINK : T_FILE;
}

/* The new side's blob id, when already known (tree entries, hashed files). */
static void copy_oid(struct repo_change *c, const struct repo_ent *e) {
        if (e->has_oid && type_class(e->mode) != T_GITLINK)
                git_oid_tostr(c->new_oid, sizeof c->new_oid, &e->oid);
}

struct cmp_ctx {
        git_repository *repo;
        int rootfd;
};

static int same_content(struct cmp_ctx *x, struct repo_ent *a, struct repo_ent *b, bool *ret) {
        git_oid oa, ob;
        int64_t sa, sb;
        int r;

        if (type_class(a->mode) == T_GITLINK) {
                /* a nested repository on disk has no commit id to compare */
                *ret = !(a->has_oid && b->has_oid) || git_oid_equal(&a->oid, &b->oid);
                return 0;
        }
        if (type_class(a->mode) == T_FILE && !(a->has_oid && b->has_oid)) {
                if ((r = repo_ent_size(x->repo, a, &sa)) < 0 || (r = repo_ent_size(x->repo, b, &sb)) < 0)
                        return r;
                if (sa != sb) {
                        *ret = false;
                        return 0;
                }
        }
        if ((r = repo_ent_oid(x->repo, x->rootfd, a, &oa)) < 0 || (r = repo_ent_oid(x->repo, x->rootfd, b, &ob)) < 0)
                return r;
        *ret = git_oid_equal(&oa, &ob);
        return 0;
}

/* The symlink target of the new side, if it is a symlink. */
static int new_link(struct cmp_ctx *x, struct repo_ent *e, const char **ret) {
        *ret = NULL;
        if (e->mode != REPO_MODE_SYMLINK)
                return 0;
        return repo_ent_link(x->repo, e, ret);
}

/* A base gitlink that is an empty directory in the worktree is unchanged. */
static bool gitlink_dir_present(struct cmp_ctx *x, const char *path) {
        if (x->rootfd < 0)
                return false;
        _cleanup_close_ int fd = repo_open_beneath(x->rootfd, path, O_RDONLY | O_DIRECTORY);
        return fd >= 0;
}

static int pair_renames(struct cmp_ctx *x, struct repo_ents *base, struct repo_ents *head, size_t *added,
                        size_t nadded, size_t *deleted, size_t ndeleted, struct chlist *out) {
        int r;
        for (size_t i = 0; i < ndeleted; i++) {
                struct repo_ent *d = &base->v[deleted[i]];
                if (type_class(d->mode) == T_GITLINK)
                        continue;
                for (size_t j = 0; j < nadded; j++) {
                        if (added[j] == SIZE_MAX)
                                continue;
                        struct repo_ent *a = &head->v[added[j]];
                        if (type_class(a->mode) != type_class(d->mode))
                                continue;
                        bool same = false;
                        if ((r = same_content(x, d, a, &same)) < 0)
                                return r;
                        if (!same)
                                continue;
                        const char *link;
                        if ((r = new_link(x, a, &link)) < 0)
                                return r;
                        struct repo_change *c;
                        if ((r = chlist_add(out, REPO_CHANGE_RENAMED, a->path, d->path, d->mode, a->mode, link, &c)) < 0)
                                return r;
                        c->ignored = a->ignored;
                        copy_oid(c, a);
                        added[j] = SIZE_MAX;
                        deleted[i] = SIZE_MAX;
                        break;
                }
        }
        return 0;
}

int repo_compare(git_repository *repo, int rootfd, struct repo_ents *base, struct repo_ents *head,
                 char *const *evolvable, struct repo_change **ret, size_t *ret_n) {
        struct cmp_ctx x = {.repo = repo, .rootfd = rootfd};
        struct chlist out = {0};
        _cleanup_free_ size_t *added = NULL, *deleted = NULL;
        size_t nadded = 0, ndeleted = 0;
        int r = 0;

        if (!(added = calloc(head->n + 1, sizeof *added)) || !(deleted = calloc(base->n + 1, sizeof *deleted)))
                return repo_err(-ENOMEM, "out of memory");
        for (size_t i = 0; i < base->n; i++)
                base->v[i].seen = false;
        for (size_t i = 0; i < head->n && r >= 0; i++) {
                struct repo_ent *h = &head->v[i];
                struct repo_ent *b = repo_ents_find(base, h->path);
                if (!b) {
                        added[nadded++] = i;
                        continue;
                }
                b->seen = true;
                enum repo_change_kind kind;
                if (type_class(b->mode) != type_class(h->mode))
                        kind = REPO_CHANGE_TYPE_CHANGED;
                else {
                        bool same = false;
                        if ((r = same_content(&x, b, h, &same)) < 0)
                                break;
                        if (!same)
                                kind = REPO_CHANGE_MODIFIED;
                        else if (b->mode != h->mode)
                                kind = REPO_CHANGE_MODE_CHANGED;
                        else
                                continue;
                }
                const char *link;
                struct repo_change *c;
                if ((r = new_link(&x, h, &link)) < 0 ||
                    (r = chlist_add(&out, kind, h->path, NULL, b->mode, h->mode, link, &c)) < 0)
                        break;
                c->ignored = h->ignored;
                copy_oid(c, h);
        }
        for (size_t i = 0; i < base->n && r >= 0; i++)
                if (!base->v[i].seen &&
                    !(base->v[i].mode == REPO_MODE_GITLINK && gitlink_dir_present(&x, base->v[i].path)))
                        deleted[ndeleted++] = i;
        if (r >= 0 && nadded > 0 && ndeleted > 0)
                r = pair_renames(&x, base, head, added, nadded, deleted, ndeleted, &out);
        for (size_t i = 0; i < nadded && r >= 0; i++) {
                if (added[i] == SIZE_MAX)
                        continue;
                struct repo_ent *a = &head->v[added[i]];
                const char *link;
                struct repo_change *c;
                if ((r = new_link(&x, a, &link)) < 0 ||
                    (r = chlist_add(&out, REPO_CHANGE_ADDED, a->path, NULL, 0, a->mode, link, &c)) < 0)
                        break;
                c->ignored = a->ignored;
                copy_oid(c, a);
        }
        for (size_t i = 0; i < ndeleted && r >= 0; i++)
                if (deleted[i] != SIZE_MAX)
                        r = chlist_add(&out, REPO_CHANGE_DELETED, base->v[deleted[i]].path, NULL,
                                       base->v[deleted[i]].mode, 0, NULL, NULL);
        if (r < 0) {
                chlist_free(&out);
                return r;
        }
        for (size_t i = 0; i < out.n; i++)
                classify(&out.v[i], evolvable);
        if (out.n > 1)
                qsort(out.v, out.n, sizeof *out.v, cmp_change);
        *ret = out.v;
        *ret_n = out.n;
        return 0;
}

/* ---- the worktree's own git files --------------------------------------------- */

/* Reads a small file below dirfd (no symlinks), trimmed of trailing space. */
static int read_small(int dirfd, const char *name, char **ret) {
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        char *s = NULL;
        size_t len = 0;
        int r = repo_read_fd(fd, 4096, &s, &len);
        if (r < 0)
                return r;
        while (len > 0 && strchr(" \t\r\n", s[len - 1]))
                s[--len] = 0;
        *ret = s;
        return 0;
}

static bool same_dir_path(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        while (la > 1 && a[la - 1] == '/')
                la--;
        while (lb > 1 && b[lb - 1] == '/')
                lb--;
        return la == lb && strncmp(a, b, la) == 0;
}

/* Whether path (absolute, or relative to base) names the directory want. */
static bool resolves_to(const char *base, const char *path, const char *want) {
        _cleanup_free_ char *joined = NULL, *a = NULL, *b = NULL;
        if (path[0] != '/' && xasprintf(&joined, "%s/%s", base, path) < 0)
                return false;
        a = realpath(joined ? joined : path, NULL);
        b = realpath(want, NULL);
        return a && b && streq(a, b);
}

/* The `.git` file must still point at the admin dir, and the admin dir at
 * the worktree and the common dir; no per-worktree config may appear. */
static int check_worktree_admin(git_repository *repo, git_worktree *wt, int rootfd, const char *root,
                                struct chlist *out) {
        const char *admin = git_repository_path(repo); /* .git/worktrees/<name>/ */
        const char *common = git_repository_commondir(repo);
        _cleanup_free_ char *gitfile = NULL, *want = NULL;
        _cleanup_close_ int afd = -1;
        struct stat st;
        struct repo_change *c;
        int r;

        bool bad = fstatat(rootfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
                   read_small(rootfd, ".git", &gitfile) < 0 || !startswith(gitfile, "gitdir: ") ||
                   !same_dir_path(gitfile + strlen("gitdir: "), admin);
        if (bad) {
                r = chlist_add(out, REPO_CHANGE_MODIFIED, ".git", NULL, REPO_MODE_FILE, REPO_MODE_FILE, NULL, &c);
                if (r < 0)
                        return r;
                c->never_approvable = true;
        }

        afd = open(admin, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (afd < 0)
                return repo_err(-errno, "cannot open the worktree's admin dir: %m");
        if (xasprintf(&want, "%s/.git", root) < 0)
                return repo_err(-ENOMEM, "out of memory");
        const char *names[] = {"gitdir", "commondir", "config.worktree"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                _cleanup_free_ char *content = NULL, *label = NULL;
                bool ok;
                if (i == 0)
                        ok = read_small(afd, names[i], &content) == 0 && same_dir_path(content, want);
                else if (i == 1)
                        ok = read_small(afd, names[i], &content) == 0 && resolves_to(admin, content, common);
                else
                        ok = fstatat(afd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
                if (ok)
                        continue;
                if (xasprintf(&label, ".git/worktrees/%s/%s", git_worktree_name(wt), names[i]) < 0)
                        return repo_err(-ENOMEM, "out of memory");
                r = chlist_add(out, REPO_CHANGE_MODIFIED, label, NULL, REPO_MODE_FILE, REPO_MODE_FILE, NULL, &c);
                if (r < 0)
                        return r;
                c->never_approvable = true;
        }
        return 0;
}

/* ---- what the index holds ----------------------------------------------------- */

static uint32_t delta_mode(uint32_t m) {
        switch (m) {
        case GIT_FILEMODE_UNREADABLE:
                return 0;
        case GIT_FILEMODE_BLOB_EXECUTABLE:
                return REPO_MODE_EXECUTABLE;
        case GIT_FILEMODE_LINK:
                return REPO_MODE_SYMLINK;
        case GIT_FILEMODE_COMMIT:
                return REPO_MODE_GITLINK;
        case GIT_FILEMODE_BLOB:
                return REPO_MODE_FILE;
        default:
                return m ? REPO_MODE_FILE : 0;
        }
}

/* Changes staged in the index that the working tree does not show (a
 * gitlink added to the index only, say). */
static int add_index_changes(git_repository *repo, git_tree *base, struct chlist *out) {
        _cleanup_(git_index_freep) git_index *index = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        git_diff_options opts;
        int r;

        if ((r = git_repository_index(&index, repo)) < 0 || (r = git_index_read(index, 1)) < 0)
                return repo_git_err(r, "cannot read the worktree's index");
        git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
        opts.flags |= GIT_DIFF_INCLUDE_TYPECHANGE;
        if ((r = git_diff_tree_to_index(&diff, repo, base, index, &opts)) < 0)
                return repo_git_err(r, "cannot compare the index with the base");
        size_t nd = git_diff_num_deltas(diff);
        for (size_t i = 0; i < nd; i++) {
                const git_diff_delta *d = git_diff_get_delta(diff, i);
                enum repo_change_kind kind;
                switch (d->status) {
                case GIT_DELTA_ADDED:
                        kind = REPO_CHANGE_ADDED;
                        break;
                case GIT_DELTA_DELETED:
                        kind = REPO_CHANGE_DELETED;
                        break;
                case GIT_DELTA_TYPECHANGE:
                        kind = REPO_CHANGE_TYPE_CHANGED;
                        break;
                case GIT_DELTA_UNMODIFIED:
                        continue;
                default:
                        kind = git_oid_equal(&d->old_file.id, &d->new_file.id) ? REPO_CHANGE_MODE_CHANGED
                                                                              : REPO_CHANGE_MODIFIED;
                        break;
                }
                const char *path = d->new_file.path ? d->new_file.path : d->old_file.path;
                if (chlist_find(out, path))
                        continue;
                uint32_t old_mode = kind == REPO_CHANGE_ADDED ? 0 : delta_mode(d->old_file.mode);
                uint32_t new_mode = kind == REPO_CHANGE_DELETED ? 0 : delta_mode(d->new_file.mode);
                _cleanup_free_ char *link = NULL;
                if (new_mode == REPO_MODE_SYMLINK) {
                        struct repo_ent e = {.path = (char *)path, .mode = new_mode, .has_oid = true,
                                             .oid = d->new_file.id, .size = -1};
                        const char *t;
                        /* a missing blob leaves the target empty: protected */
                        if (repo_ent_link(repo, &e, &t) == 0)
                                link = e.link;
                        else if (!(link = strdup("")))
                                return repo_err(-ENOMEM, "out of memory");
                }
                struct repo_change *c;
                if ((r = chlist_add(out, kind, path, NULL, old_mode, new_mode, link, &c)) < 0)
                        return r;
                c->from_index = true;
                if (new_mode == REPO_MODE_FILE || new_mode == REPO_MODE_EXECUTABLE || new_mode == REPO_MODE_SYMLINK)
                        git_oid_tostr(c->new_oid, sizeof c->new_oid, &d->new_file.id);
        }
        return 0;
}

/* ---- public entry points --------------------------------------------------------- */

/* A protected file or symlink on disk whose blob id is not known yet gets
 * hashed: pins are compared by content. */
static int hash_protected(git_repository *repo, int rootfd, struct repo_change *c) {
        if (!c->protected || c->new_oid[0] || c->kind == REPO_CHANGE_DELETED || c->never_approvable)
                return 0;
        if (c->new_mode != REPO_MODE_FILE && c->new_mode != REPO_MODE_EXECUTABLE && c->new_mode != REPO_MODE_SYMLINK)
                return 0;
        struct repo_ent e = {.path = c->path, .mode = c->new_mode, .link = c->link_target, .size = -1};
        git_oid oid;
        int r = repo_ent_oid(repo, rootfd, &e, &oid);
        if (r < 0) /* unreadable or too large: no pin can match it */
                return r == -ENOMEM ? r : 0;
        git_oid_tostr(c->new_oid, sizeof c->new_oid, &oid);
        return 0;
}


int repo_boundary_changes(const char *worktree_dir, const char *base_oid_hex, char *const *evolvable,
                          struct repo_change **ret_changes, size_t *ret_n) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_worktree_freep) git_worktree *wt = NULL;
        _cleanup_(git_tree_freep) git_tree *base_tree = NULL;
        _cleanup_free_ char *root = NULL;
        _cleanup_ents_ struct repo_ents base = {0}, head = {0};
        _cleanup_close_ int rootfd = -1;
        struct chlist out = {0};
        int r;

        repo_err_clear();
        if ((r = repo_evolvable_valid(evolvable)) < 0 || (r = repo_open(worktree_dir, &repo, &wt, &root)) < 0 ||
            (r = repo_lookup_tree(repo, base_oid_hex, NULL, &base_tree)) < 0 ||
            (r = repo_tree_ents(repo, base_tree, &base)) < 0)
                return r;
        if ((rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return repo_err(-errno, "cannot open '%s': %m", root);
        if ((r = repo_scan_workdir(rootfd, repo, &base, REPO_IGNORE_KEEP, &head)) < 0 ||
            (r = repo_compare(repo, rootfd, &base, &head, evolvable, &out.v, &out.n)) < 0)
                return r;
        out.cap = out.n;
        if (wt)
                r = check_worktree_admin(repo, wt, rootfd, root, &out);
        if (r >= 0)
                r = add_index_changes(repo, base_tree, &out);
        for (size_t i = 0; i < out.n; i++)
                classify(&out.v[i], evolvable);
        for (size_t i = 0; r >= 0 && i < out.n; i++)
                r = hash_protected(repo, rootfd, &out.v[i]);
        if (r < 0) {
                chlist_free(&out);
                return r;
        }
        if (out.n > 1)
                qsort(out.v, out.n, sizeof *out.v, cmp_change);
        *ret_changes = out.v;
        *ret_n = out.n;
        return 0;
}

int repo_boundary_changes_between(const char *dir, const char *base_oid_hex, const char *head_oid_hex,
                                  char *const *evolvable, struct repo_change **ret_changes, size_t *ret_n) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_tree_freep) git_tree *bt = NULL, *ht = NULL;
        _cleanup_ents_ struct repo_ents base = {0}, head = {0};
        struct repo_change *v = NULL;
        size_t n = 0;
        int r;

        repo_err_clear();
        if ((r = repo_evolvable_valid(evolvable)) < 0 || (r = repo_open(dir, &repo, NULL, NULL)) < 0 ||
            (r = repo_lookup_tree(repo, base_oid_hex, NULL, &bt)) < 0 ||
            (r = repo_lookup_tree(repo, head_oid_hex, NULL, &ht)) < 0 || (r = repo_tree_ents(repo, bt, &base)) < 0 ||
            (r = repo_tree_ents(repo, ht, &head)) < 0 ||
            (r = repo_compare(repo, -1, &base, &head, evolvable, &v, &n)) < 0)
                return r;
        if (n > 1)
                qsort(v, n, sizeof *v, cmp_change);
        *ret_changes = v;
        *ret_n = n;
        return 0;
}

void repo_pins_free(struct repo_pin *p, size_t n) {
        for (size_t i = 0; p && i < n; i++)
                free(p[i].path);
        free(p);
}

int repo_pin_take(const char *worktree_dir, const char *path, struct repo_pin *ret) {
        repo_err_clear();
        if (!worktree_dir || !path || !*path)
                return repo_err(-EINVAL, "no path to pin");
        _cleanup_close_ int rootfd = open(worktree_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rootfd < 0)
                return repo_err(-errno, "cannot open '%s': %m", worktree_dir);
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return repo_err(-ENOMEM, "out of memory");
        char *slash = strrchr(dir, '/');
        const char *name = slash ? slash + 1 : dir;
        _cleanup_close_ int dfd = -1;
        if (slash) {
                *slash = 0;
                dfd = repo_open_beneath(rootfd, dir, O_RDONLY | O_DIRECTORY);
        } else
                dfd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
        struct repo_pin p = {0};
        struct stat st;
        if (dfd < 0 && dfd != -ENOENT)
                return repo_err(dfd, "cannot open the directory of '%s': %s", path, strerror(-dfd));
        bool gone = dfd < 0;
        if (!gone && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return repo_err(-errno, "cannot stat '%s': %m", path);
                gone = true;
        }
        if (!gone) {
                if (S_ISDIR(st.st_mode))
                        return repo_err(-EISDIR, "'%s' is a directory", path);
                struct repo_ent e = {.path = (char *)path, .size = -1};
                char target[REPO_MAX_LINK + 1];
                if (S_ISLNK(st.st_mode)) {
                        ssize_t k = readlinkat(dfd, name, target, sizeof target);
                        if (k < 0 || (size_t)k > REPO_MAX_LINK)
                                return repo_err(k < 0 ? -errno : -ENAMETOOLONG, "cannot read the symlink '%s'", path);
                        target[k] = 0;
                        e.mode = REPO_MODE_SYMLINK;
                        e.link = target;
                } else if (S_ISREG(st.st_mode))
                        e.mode = (st.st_mode & S_IXUSR) ? REPO_MODE_EXECUTABLE : REPO_MODE_FILE;
                else
                        return repo_err(-EINVAL, "'%s' is neither a file nor a symlink", path);
                git_oid oid;
                int r = repo_ent_oid(NULL, rootfd, &e, &oid);
                if (r < 0)
                        return r;
                git_oid_tostr(p.oid, sizeof p.oid, &oid);
                p.mode = e.mode;
        }
        if (!(p.path = strdup(path)))
                return repo_err(-ENOMEM, "out of memory");
        *ret = p;
        return 0;
}

/* The latest pin for path: its own, or a "gone" pin of a directory above. */
static const struct repo_pin *pin_for(const char *path, const struct repo_pin *pins, size_t npins) {
        for (size_t i = npins; i-- > 0;) {
                const char *a = pins[i].path;
                size_t n = strlen(a);
                if (streq(a, path) || (pins[i].mode == 0 && strncmp(path, a, n) == 0 && path[n] == '/'))
                        return &pins[i];
        }
        return NULL;
}

/* Whether the side of x at path is exactly what its pin says. */
static bool pinned(const struct repo_change *x, const char *path, bool old_side, const struct repo_pin *pins,
                   size_t npins) {
        const struct repo_pin *p = pin_for(path, pins, npins);
        if (!p)
                return false;
        bool gone = old_side || x->kind == REPO_CHANGE_DELETED;
        if (p->mode == 0)
                return gone;
        return !gone && x->new_mode == p->mode && x->new_oid[0] && streq(x->new_oid, p->oid);
}

int repo_boundary_violations(const struct repo_change *c, size_t n, const struct repo_pin *pins, size_t npins,
                             char **ret_text) {
        _cleanup_strv_free_ char **bad = NULL;
        int r;

        for (size_t i = 0; i < n; i++) {
                const struct repo_change *x = &c[i];
                if (!x->protected)
                        continue;
                if (x->never_approvable) {
                        r = strv_push(&bad, x->path);
                } else if (x->kind == REPO_CHANGE_RENAMED) {
                        r = 0;
                        if (x->old_protected && !pinned(x, x->old_path, true, pins, npins))
                                r = strv_push(&bad, x->old_path);
                        if (r >= 0 && x->new_protected && !pinned(x, x->path, false, pins, npins))
                                r = strv_push(&bad, x->path);
                } else
                        r = pinned(x, x->path, false, pins, npins) ? 0 : strv_push(&bad, x->path);
                if (r < 0)
                        return repo_err(r, "out of memory");
        }
        size_t nb = strv_length(bad);
        if (nb == 0) {
                *ret_text = NULL;
                return 0;
        }
        if ((r = repo_boundary_message(bad, ret_text)) < 0)
                return r;
        return nb > INT32_MAX ? INT32_MAX : (int)nb;
}

int repo_boundary_message(char *const *paths, char **ret_text) {
        struct buf b = BUF_INIT(64 * 1024);
        size_t n = strv_length(paths);
        int r = buf_puts(&b, "kernel boundary violated: ");
        for (size_t i = 0; r >= 0 && i < n && i < 50; i++)
                r = buf_printf(&b, "%s%s", i ? ", " : "", paths[i]);
        if (r >= 0 && n > 50)
                r = buf_printf(&b, " and %zu more", n - 50);
        if (r < 0) {
                buf_free(&b);
                return repo_err(r, "cannot build the violation message");
        }
        *ret_text = buf_steal(&b);
        return 0;
}
