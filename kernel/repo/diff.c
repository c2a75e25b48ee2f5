/* diff.c — bounded unified patches between a commit and another commit or
 * a working tree. The change list is the boundary's own (repo_compare), so
 * the patch shows exactly what was classified; worktree files are read with
 * repo_open_beneath() and no .gitattributes is consulted. */
#include "repo/repo-internal.h"
#include "base/buf.h"

#include <fcntl.h>
#include <stdarg.h>

#define DIFF_TRUNCATED "\n[diff truncated]\n"
#define DIFF_SHOW_MAX (1024 * 1024) /* one side of one file shown as text */
#define DIFF_MAX_BYTES (64u * 1024 * 1024)

struct diff_out {
        struct buf b;
        bool full;
        const char *old_path, *new_path;
        bool file_lines_done;
};

static int put(struct diff_out *o, const char *s, size_t n) {
        if (o->full)
                return -E2BIG;
        if (buf_append(&o->b, s, n) < 0) {
                o->full = true;
                return -E2BIG;
        }
        return 0;
}

static int putf(struct diff_out *o, const char *fmt, ...) _printf_(2, 3);
static int putf(struct diff_out *o, const char *fmt, ...) {
        char *s = NULL;
        va_list ap;
        va_start(ap, fmt);
        int k = xvasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        int r = put(o, s, (size_t)k);
        free(s);
        return r;
}

static int line_cb(const git_diff_delta *d, const git_diff_hunk *h, const git_diff_line *l, void *payload) {
        struct diff_out *o = payload;
        (void)d;
        (void)h;
        int r = 0;
        switch (l->origin) {
        case GIT_DIFF_LINE_FILE_HDR:
                return 0; /* ours is written by print_header() */
        case GIT_DIFF_LINE_BINARY:
                r = putf(o, "Binary files %s%s and %s%s differ\n", o->old_path ? "a/" : "",
                         o->old_path ? o->old_path : "/dev/null", o->new_path ? "b/" : "",
                         o->new_path ? o->new_path : "/dev/null");
                return r < 0 ? 1 : 0;
        case GIT_DIFF_LINE_HUNK_HDR:
                if (!o->file_lines_done) {
                        o->file_lines_done = true;
                        r = putf(o, "--- %s%s\n+++ %s%s\n", o->old_path ? "a/" : "",
                                 o->old_path ? o->old_path : "/dev/null", o->new_path ? "b/" : "",
                                 o->new_path ? o->new_path : "/dev/null");
                }
                break;
        case GIT_DIFF_LINE_CONTEXT:
        case GIT_DIFF_LINE_ADDITION:
        case GIT_DIFF_LINE_DELETION: {
                char c = l->origin;
                r = put(o, &c, 1);
                break;
        }
        default:
                break;
        }
        if (r >= 0)
                r = put(o, l->content, l->content_len);
        return r < 0 ? 1 : 0;
}

static int print_header(struct diff_out *o, const struct repo_change *c) {
        const char *from = c->old_path ? c->old_path : c->path;
        int r = putf(o, "diff --git a/%s b/%s\n", from, c->path);
        if (r < 0)
                return r;
        switch (c->kind) {
        case REPO_CHANGE_ADDED:
                return putf(o, "new file mode %06o\n", c->new_mode);
        case REPO_CHANGE_DELETED:
                return putf(o, "deleted file mode %06o\n", c->old_mode);
        case REPO_CHANGE_RENAMED:
                if ((r = putf(o, "similarity index 100%%\nrename from %s\nrename to %s\n", c->old_path, c->path)) < 0)
                        return r;
                break;
        default:
                break;
        }
        if (c->old_mode != c->new_mode)
                return putf(o, "old mode %06o\nnew mode %06o\n", c->old_mode, c->new_mode);
        return 0;
}

/* One side's content: a blob (tree entry) or bytes read from the worktree. */
struct side {
        git_blob *blob;
        char *data;
        size_t len;
        bool too_big;
};

static void side_free(struct side *s) {
        git_blob_free(s->blob);
        free(s->data);
}

static int load_side(git_repository *repo, int rootfd, struct repo_ent *e, struct side *ret) {
        int r;
        *ret = (struct side){0};
        if (!e || e->mode == REPO_MODE_GITLINK)
                return 0;
        if (e->has_oid) {
                r = git_blob_lookup(&ret->blob, repo, &e->oid);
                if (r == 0) {
                        ret->too_big = git_blob_rawsize(ret->blob) > DIFF_SHOW_MAX;
                        return 0;
                }
                /* A working-tree file is hashed to compare it, but its blob
                 * is not in the object store: read it from disk below. */
                if (r != GIT_ENOTFOUND || rootfd < 0)
                        return repo_git_err(r, "cannot read '%s'", e->path);
                ret->blob = NULL;
        }
        if (e->mode == REPO_MODE_SYMLINK) {
                if (!(ret->data = strdup(e->link ? e->link : "")))
                        return repo_err(-ENOMEM, "out of memory");
                ret->len = strlen(ret->data);
                return 0;
        }
        _cleanup_close_ int fd = repo_open_beneath(rootfd, e->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return repo_err(fd, "cannot open '%s': %s", e->path, strerror(-fd));
        r = repo_read_fd(fd, DIFF_SHOW_MAX, &ret->data, &ret->len);
        if (r == -EFBIG) {
                ret->too_big = true;
                return 0;
        }
        return r < 0 ? repo_err(r, "cannot read '%s': %s", e->path, strerror(-r)) : 0;
}

static int print_change(git_repository *repo, int rootfd, struct repo_ents *base, struct repo_ents *head,
                        const struct repo_change *c, struct diff_out *o) {
        const char *old_path = c->old_path ? c->old_path : c->path;
        struct repo_ent *oe = c->kind == REPO_CHANGE_ADDED ? NULL : repo_ents_find(base, old_path);
        struct repo_ent *ne = c->kind == REPO_CHANGE_DELETED ? NULL : repo_ents_find(head, c->path);
        struct side os = {0}, ns = {0};
        _cleanup_(git_patch_freep) git_patch *patch = NULL;
        int r;

        if ((r = print_header(o, c)) < 0)
                return r;
        if (c->kind == REPO_CHANGE_RENAMED || c->kind == REPO_CHANGE_MODE_CHANGED)
                return 0; /* same content */
        if (c->gitlink) {
                char hex[REPO_OID_HEX_LEN + 1];
                if (oe && oe->has_oid) {
                        git_oid_tostr(hex, sizeof hex, &oe->oid);
                        if ((r = putf(o, "-Subproject commit %s\n", hex)) < 0)
                                return r;
                }
                if (ne && ne->has_oid) {
                        git_oid_tostr(hex, sizeof hex, &ne->oid);
                        if ((r = putf(o, "+Subproject commit %s\n", hex)) < 0)
                                return r;
                }
                return 0;
        }
        /* The old side always comes from a tree; only the new one may be on disk. */
        if ((r = load_side(repo, -1, oe, &os)) < 0 || (r = load_side(repo, rootfd, ne, &ns)) < 0)
                goto out;
        o->old_path = oe ? oe->path : NULL;
        o->new_path = ne ? ne->path : NULL;
        o->file_lines_done = false;
        if (os.too_big || ns.too_big) {
                r = putf(o, "Binary files %s%s and %s%s differ (too large to show)\n", oe ? "a/" : "",
                         oe ? oe->path : "/dev/null", ne ? "b/" : "", ne ? ne->path : "/dev/null");
                goto out;
        }
        git_diff_options opts;
        git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
        if (ns.blob)
                r = git_patch_from_blobs(&patch, os.blob, NULL, ns.blob, NULL, &opts);
        else
                r = git_patch_from_blob_and_buffer(&patch, os.blob, NULL, ns.data, ns.len, NULL, &opts);
        if (r < 0) {
                r = repo_git_err(r, "cannot compare '%s'", c->path);
                goto out;
        }
        r = git_patch_print(patch, line_cb, o);
        r = o->full ? -E2BIG : r < 0 ? repo_git_err(r, "cannot print the patch of '%s'", c->path) : 0;
out:
        side_free(&os);
        side_free(&ns);
        return r;
}

int repo_diff(const char *dir, const char *base_oid_hex, const char *head_oid_hex, size_t max_bytes,
              char **ret_patch) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_tree_freep) git_tree *bt = NULL, *ht = NULL;
        _cleanup_ents_ struct repo_ents base = {0}, head = {0};
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int rootfd = -1;
        struct repo_change *ch = NULL;
        size_t nch = 0;
        int r;

        repo_err_clear();
        if (max_bytes < 64)
                return repo_err(-EINVAL, "a diff needs at least 64 bytes");
        if (max_bytes > DIFF_MAX_BYTES)
                max_bytes = DIFF_MAX_BYTES;
        if ((r = repo_open(dir, &repo, NULL, &root)) < 0 || (r = repo_lookup_tree(repo, base_oid_hex, NULL, &bt)) < 0 ||
            (r = repo_tree_ents(repo, bt, &base)) < 0)
                return r;
        if (head_oid_hex) {
                if ((r = repo_lookup_tree(repo, head_oid_hex, NULL, &ht)) < 0 ||
                    (r = repo_tree_ents(repo, ht, &head)) < 0)
                        return r;
        } else {
                if ((rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                        return repo_err(-errno, "cannot open '%s': %m", root);
                if ((r = repo_scan_workdir(rootfd, repo, &base, REPO_IGNORE_PRUNE, &head)) < 0)
                        return r;
        }
        if ((r = repo_compare(repo, rootfd, &base, &head, NULL, &ch, &nch)) < 0)
                return r;
        struct diff_out o = {.b = BUF_INIT(max_bytes - strlen(DIFF_TRUNCATED))};
        for (size_t i = 0; i < nch && r >= 0; i++)
                r = print_change(repo, rootfd, &base, &head, &ch[i], &o);
        repo_changes_free(ch, nch);
        if (r < 0 && !o.full) {
                buf_free(&o.b);
                return r;
        }
        if (o.full) {
                o.b.max = max_bytes;
                (void)buf_puts(&o.b, DIFF_TRUNCATED);
        }
        char *text = o.b.data ? buf_steal(&o.b) : strdup("");
        if (!text)
                return repo_err(-ENOMEM, "out of memory");
        *ret_patch = text;
        return 0;
}
