/* repo-internal.h — shared by the files of kernel/repo only; includes git2.h,
 * so it must never be included from outside this module. */
#pragma once

#include "repo/repo.h"

#include <git2.h>
#include <sys/types.h>

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_index *, git_index_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_signature *, git_signature_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_reference *, git_reference_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_worktree *, git_worktree_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_diff *, git_diff_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_patch *, git_patch_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_revwalk *, git_revwalk_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_odb *, git_odb_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_blob *, git_blob_free)

/* Limits on what a worktree may hold before we refuse to look at it. */
#define REPO_MAX_FILE (100u * 1024 * 1024)  /* one file committed or hashed */
#define REPO_MAX_ENTRIES 250000             /* files + symlinks in one tree */
#define REPO_MAX_DEPTH 128
#define REPO_MAX_PATH 4096
#define REPO_MAX_LINK 4096

void repo_global_init(void);

/* Sets the message repo_last_error() returns and returns r (negative). */
int repo_err(int r, const char *fmt, ...) _printf_(2, 3);
/* Same, appending libgit2's last error; maps the git error code to -errno. */
int repo_git_err(int code, const char *fmt, ...) _printf_(2, 3);
void repo_err_clear(void);

/* Opens dir without searching upwards. A dir at <seed>/.seed/worktrees/<name>
 * is opened as that linked worktree of <seed>'s repository (its `.git` file is
 * not trusted); *ret_wt (if not NULL) gets the worktree, or NULL for the Seed
 * folder itself. *ret_root gets the absolute working directory (caller frees). */
int repo_open(const char *dir, git_repository **ret, git_worktree **ret_wt, char **ret_root);
/* Opens the Seed's own repository; *ret_root (may be NULL) as above. */
int repo_open_seed(const char *seed_dir, git_repository **ret, char **ret_root);
int repo_parse_oid(const char *hex, git_oid *ret);
int repo_lookup_tree(git_repository *repo, const char *oid_hex, git_commit **ret_commit, git_tree **ret_tree);
void repo_oid_hex(const git_oid *oid, char out[REPO_OID_HEX_LEN + 1]);
int repo_oid_hex_dup(const git_oid *oid, char **ret);
/* main's commit; -EINVAL (with a message) when HEAD is not the branch main. */
int repo_main_head(git_repository *repo, git_oid *ret);
/* One line of at most max bytes: control characters become spaces, runs of
 * spaces collapse, cut on a UTF-8 character boundary. NULL on OOM; caller frees. */
char *repo_clean_line(const char *in, size_t max);

/* ---- scan.c: the working tree and trees as sorted lists of entries ---- */

struct repo_ent {
        char *path;
        uint32_t mode;          /* REPO_MODE_* */
        bool has_oid;
        git_oid oid;            /* known for tree entries, computed lazily for disk ones */
        int64_t size;           /* -1 when unknown */
        char *link;             /* symlink target when known */
        bool ignored;
        bool seen;
};

struct repo_ents {
        struct repo_ent *v;
        size_t n, cap;
        size_t pruned;          /* ignored untracked entries left out (prune mode) */
};
void repo_ents_free(struct repo_ents *e);
static inline void repo_ents_freep(struct repo_ents *e) { repo_ents_free(e); }
#define _cleanup_ents_ _cleanup_(repo_ents_freep)
struct repo_ent *repo_ents_find(const struct repo_ents *e, const char *path);
/* Whether any entry lies below dir ("a/b" → "a/b/…"). */
bool repo_ents_has_below(const struct repo_ents *e, const char *dir);

/* Every blob, symlink and gitlink of a tree, sorted by path. */
int repo_tree_ents(git_repository *repo, const git_tree *tree, struct repo_ents *ret);

enum repo_ignore_mode {
        REPO_IGNORE_KEEP,       /* list ignored entries too (the boundary) */
        REPO_IGNORE_PRUNE,      /* leave untracked ignored entries out (commit, diff) */
};
/* Walks the working tree below rootfd without following symlinks. Skips the
 * `.git` entry and a `.seed` directory at the root. `tracked` (may be NULL)
 * says which paths git already holds; repo is used for .gitignore. */
int repo_scan_workdir(int rootfd, git_repository *repo, const struct repo_ents *tracked,
                      enum repo_ignore_mode mode, struct repo_ents *ret);

/* Opens rel below rootfd, refusing any symlink on the way and `..`. */
int repo_open_beneath(int rootfd, const char *rel, int flags);
/* Reads a whole fd of at most max bytes (-EFBIG beyond). Caller frees. */
int repo_read_fd(int fd, size_t max, char **ret, size_t *ret_len);
/* The entry's oid: hashed from disk (rootfd) without writing any object. */
int repo_ent_oid(git_repository *repo, int rootfd, struct repo_ent *e, git_oid *ret);
/* The entry's size (odb header for tree entries). */
int repo_ent_size(git_repository *repo, struct repo_ent *e, int64_t *ret);
/* The symlink target of a tree entry (read from its blob) or disk entry. */
int repo_ent_link(git_repository *repo, struct repo_ent *e, const char **ret);
/* rm -rf below a path without following symlinks, making dirs writable. */
int repo_rm_tree(const char *path);

/* ---- boundary.c ---- */
/* Compares two entry lists into classified changes (no worktree admin check). */
int repo_compare(git_repository *repo, int rootfd, struct repo_ents *base, struct repo_ents *head,
                 char *const *evolvable, struct repo_change **ret, size_t *ret_n);
int repo_evolvable_valid(char *const *evolvable);
