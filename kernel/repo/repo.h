/* repo.h — the only libgit2 user: the Seed's own git repository, the
 * evolutions' worktrees, commits, tags, diffs and the kernel-boundary diff.
 *
 * Errors: every function returns >= 0 on success and -errno on failure. The
 * functions added for evolutions also keep a message for the caller, read
 * with repo_last_error() (per thread, like libgit2's git_error_last()); they
 * never log, the caller decides and logs once. libgit2's types and error
 * codes never leave this module: commits are named by 40-char hex oids.
 *
 * Nothing here runs the git CLI, hooks, filters or any other program.
 *
 * Reading an evolution's worktree (boundary check, diff, commit) never
 * follows a symlink: the tree is walked with directory fds and O_NOFOLLOW,
 * and files are reopened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS),
 * so sandboxed code that races us cannot make the kernel read a host file.
 * A worktree's `.git` file is never trusted to find the repository: a
 * worktree is recognised by its place, <seed>/.seed/worktrees/<name>, and
 * opened through the Seed's own repository. */
#pragma once

#include "base/base.h"
#include "base/fswatch.h"

#include <pthread.h>

#define REPO_OID_HEX_LEN 40

/* The message of the last failure of a repo_ function in this thread.
 * Borrowed; valid until the next repo_ call in this thread. "" if none. */
const char *repo_last_error(void);

/* Initialises a repository in dir (branch main), commits everything not
 * ignored by .gitignore as `message`, and tags it `tag`. On failure returns
 * -errno-style code and sets *ret_error (caller frees). */
int repo_init_commit(const char *dir, const char *message, const char *tag, char **ret_error);

struct repo_generation {
        int number;           /* N of seed/gen-N */
        char commit[41];      /* hex oid */
        char *summary;        /* first line of the commit message */
        int64_t time;         /* commit time, seconds since the epoch */
        char owner_commit[41];/* an owner's generation: its Owner-Commit trailer
                               * (the owner's newest commit it records), else "" */
};
void repo_generations_free(struct repo_generation *g, size_t n);
/* Every seed/gen-N tag, ascending by N. */
int repo_generations(const char *dir, struct repo_generation **ret, size_t *ret_n);
/* The highest N whose tag points at HEAD; -ENOENT if none does. */
int repo_current_generation(const char *dir, int *ret);
/* The live generation: the newest seed/gen-N (main is it, or the owner's
 * commits lie on top of it); -ENOENT if there is no generation. */
int repo_live_generation(const char *dir, int *ret);

/* ---- the owner's commits on main -------------------------------------- */

enum repo_owner_state {
        REPO_OWNER_NONE,     /* main is the newest generation's commit */
        REPO_OWNER_COMMITS,  /* main descends from it: the owner committed on top */
        REPO_OWNER_DIVERGED, /* main does not contain it (history rewritten, reset
                              * to an older commit), or HEAD is not the branch main */
};

struct repo_owner_change {
        enum repo_owner_state state;
        int generation;                        /* the newest seed/gen-N (the live one) */
        char generation_commit[REPO_OID_HEX_LEN + 1];
        char head[REPO_OID_HEX_LEN + 1];       /* HEAD's commit */
        bool on_main;                          /* HEAD is the branch main */
        char *subject;                         /* COMMITS: HEAD's summary as one line of at
                                                * most 200 bytes; else NULL. Owned. */
        size_t n_commits;                      /* COMMITS: commits on top (counted up to 1000) */
};
void repo_owner_change_done(struct repo_owner_change *c);
/* Where main stands against the newest generation. *ret is written only on
 * success; release it with repo_owner_change_done(). */
int repo_owner_change(const char *seed_dir, struct repo_owner_change *ret);

/* ---- what the status needs, without opening the repository per call ---- */

/* repo_live_generation() and repo_owner_change() of one Seed, read again
 * only when its refs may have moved — watches (base/fswatch.h) on .git
 * (HEAD, packed-refs), refs/heads (main), refs/tags and refs/tags/seed (the
 * generation tags) saw anything happen there: git writes a ref by renaming
 * a new file over it, and the event is queued before git returns, so a new
 * generation or an owner's commit is seen by the very next question — or
 * when REPO_REFS_CACHE_MAX_MS passed since the last read. Failures are
 * cached alike. Without inotify (a limit reached) every question reads.
 * Thread-safe. The caller owns the cache (repo_refs_cache_init/done) and
 * the watch, which may serve other caches too and outlives this one. */
#define REPO_REFS_CACHE_MAX_MS 1000
struct repo_refs_cache {
        pthread_mutex_t lock;
        char *seed_dir;
        struct fswatch *watch;
        int64_t read_ms;
        int gen_r, gen;                        /* repo_live_generation's result */
        int oc_r;                              /* repo_owner_change's result */
        struct repo_owner_change oc;
        uint64_t reads;                        /* of the repository, so far */
        /* repo_refs_cache_version's way past the lock: the watch's count
         * taken before the last read (0 from the moment a refresh or an
         * invalidation begins, and while nothing is trusted), and the
         * copies of reads and read_ms it answers from, written while it
         * is 0. */
        _Atomic uint64_t seen;
        _Atomic uint64_t reads_seen;
        _Atomic int64_t read_ms_seen;
};
/* seed_dir is copied. */
int repo_refs_cache_init(struct repo_refs_cache *c, const char *seed_dir, struct fswatch *watch);
void repo_refs_cache_done(struct repo_refs_cache *c);
/* The live generation, as repo_live_generation() would say now. */
int repo_refs_cache_generation(struct repo_refs_cache *c, int *ret);
/* Where main stands, as repo_owner_change() would say now; *ret is a copy
 * (release it with repo_owner_change_done()), written only on success. */
int repo_refs_cache_owner_change(struct repo_refs_cache *c, struct repo_owner_change *ret);
/* The next question reads the repository again. */
void repo_refs_cache_invalidate(struct repo_refs_cache *c);
/* Says how many times the repository was read, reading it first if the
 * refs moved: while that stays the same, so do the answers above (a cache
 * of them is exact when it reads this first). changes is
 * fswatch_changes() of the cache's watch, taken by the caller for this
 * question (so one poll answers for every cache on the watch). While
 * nothing moved it takes no lock, so the status calls of many connections
 * do not queue behind each other. */
uint64_t repo_refs_cache_version(struct repo_refs_cache *c, uint64_t changes);

/* The message of the commit that records the owner's commits as a
 * generation, exactly:
 *   "owner: <subject>[ (and N more)]\n\nEvolution: evo_<id>\nGeneration: F -> T\n"
 *   "Owner-Commit: <owner_oid>\n"
 * The subject is made one line of at most 200 bytes; " (and N more)" when
 * n_commits > 1. -EINVAL for an invalid id or oid, n_commits 0 or T != F+1.
 * Caller frees *ret. */
int repo_owner_message(const char *subject, size_t n_commits, const char *evo_id, int from_gen, int to_gen,
                       const char *owner_oid_hex, char **ret);
/* A new commit whose tree is head's tree and whose parent is head (the
 * owner's commits stay as they are in history), with `message`. Moves no
 * ref: repo_fast_forward_main() then moves main to it. -ESTALE if main is no
 * longer head. Caller frees *ret_oid_hex. */
int repo_owner_commit(const char *seed_dir, const char *head_oid_hex, const char *message, char **ret_oid_hex);
/* Writes generation n's tree (its files as committed) into dest_dir, an
 * absolute path, after removing whatever was there (without following
 * symlinks); the folder is created 0700. The Seed folder's index and working
 * tree are not touched. -ENOENT if there is no generation n. */
int repo_export_generation(const char *seed_dir, int n, const char *dest_dir);

/* ---- commits, tags, history ------------------------------------------- */

/* The commit HEAD points at, of the Seed folder or of a worktree (its
 * branch). Caller frees *ret_oid_hex. */
int repo_head(const char *dir, char **ret_oid_hex);
/* Every path in HEAD's tree (files, symlinks, gitlinks; no directories),
 * sorted by strcmp. Caller frees with strv_free(). */
int repo_tracked_paths(const char *dir, char ***ret);

struct repo_log_entry {
        char oid[REPO_OID_HEX_LEN + 1];
        char *summary;        /* first line of the message */
        int64_t time;         /* commit time, seconds since the epoch */
};
void repo_log_free(struct repo_log_entry *e, size_t n);
/* Up to max (capped at 1000) commits reachable from HEAD, newest first. */
int repo_log(const char *dir, size_t max, struct repo_log_entry **ret, size_t *ret_n);

/* The content of the regular file at path (relative, '/'-separated) in a
 * commit's tree, NUL-terminated, at most max bytes (-EFBIG beyond); -ENOENT
 * if there is none, -EINVAL if it is not a regular file. Caller frees *ret. */
int repo_read_blob_at(const char *dir, const char *oid_hex, const char *path, size_t max, char **ret,
                      size_t *ret_len);

/* The paths that differ between two commits (both sides of a rename), sorted,
 * as a NULL-terminated strv the caller frees with strv_free(). Returns the
 * count. For "did this generation touch the kernel?" prefer
 * repo_boundary_changes_between(), which also says what is protected. */
int repo_changed_paths(const char *dir, const char *from_oid_hex, const char *to_oid_hex,
                       char ***ret_paths);

/* The commit message of an evolution, exactly:
 *   "evolve(<scope>): <title>\n\n<body>\n\nEvolution: evo_<id>\nGeneration: N -> M\n"
 * (the body paragraph is left out when body is NULL or empty). The scope is
 * lowered and reduced to [a-z0-9-] (at most 40 chars), the title to one line
 * of at most 200 bytes, the body to 16 KiB without CRs; -EINVAL if scope or
 * title is empty afterwards, the id is invalid (see repo_worktree_add) or
 * not 0 <= from_gen < to_gen. Caller frees *ret. */
int repo_evolution_message(const char *scope, const char *title, const char *body, const char *evo_id,
                           int from_gen, int to_gen, char **ret);

/* Creates the lightweight tag seed/gen-<n> at the commit; -EEXIST (and
 * nothing changed) if that tag exists already. n >= 1. */
int repo_tag_generation(const char *seed_dir, const char *oid_hex, int n);

/* Moves main to the commit if it descends from main's current commit
 * (-ENOTRECOVERABLE otherwise: main moved on, or the commit is unrelated),
 * and brings the Seed folder's index and working tree to it. The checkout
 * is SAFE: a file changed by hand in the folder is a conflict (-EBUSY,
 * nothing written) rather than overwritten; untracked and ignored files,
 * `.seed/` among them, are never touched. A commit whose tree holds `.seed`
 * or `.git` at its root is refused (-EPERM). A no-op when main is already
 * there. HEAD must be the branch main. */
int repo_fast_forward_main(const char *seed_dir, const char *oid_hex);

/* Boot recovery of an apply that a kernel restart cut short between moving
 * main and tagging the generation: when main is evo_id's ("evo_<id>", its
 * Evolution trailer) commit, right on top of the newest generation and
 * untagged, main goes back to that generation, checked out as
 * repo_fast_forward_main() does (a file changed by hand since is a conflict:
 * -EBUSY, nothing moved). 1 and *ret_gen (the generation main is back at)
 * when main moved back; 0 when there was nothing to undo. */
int repo_main_undo_untagged(const char *seed_dir, const char *evo_id, int *ret_gen);

/* Rollback: a new commit on main, child of main's current commit, whose
 * tree is generation n's tree (tag seed/gen-<n>), with `message`; then
 * checked out in the Seed folder as repo_fast_forward_main() does. The
 * caller tags it. Caller frees *ret_oid_hex. */
int repo_restore_tree_commit(const char *seed_dir, int gen_n, const char *message, char **ret_oid_hex);

/* ---- evolution worktrees ---------------------------------------------- */

/* evo_id is the <id> of evo_<id>: 1-64 chars of [A-Za-z0-9_-]. */
bool repo_evo_id_valid(const char *evo_id);

/* Creates branch seed/evo_<id> at main's commit and a linked worktree of it at
 * <seed>/.seed/worktrees/evo_<id> (files checked out). -EEXIST if the branch,
 * the worktree or the folder exists already (call repo_worktree_remove()
 * first). Caller frees *ret_path (absolute). */
int repo_worktree_add(const char *seed_dir, const char *evo_id, char **ret_path);

/* Removes the worktree folder (without following symlinks, whatever modes
 * the sandbox left), its administrative dir under .git/worktrees/ and the
 * branch seed/evo_<id>. Idempotent: what is already gone is not an error.
 * The generations' tags keep the commits alive. A branch that a symbolic
 * reference (HEAD, main, a generation's tag) points through is kept:
 * -EBUSY, the worktree removed, the message naming that reference. */
int repo_worktree_remove(const char *seed_dir, const char *evo_id);
/* The ids of the evolution branches seed/evo_<id> there are (at boot: what a
 * killed kernel left, worktree or not). *ret: NULL-terminated, NULL when
 * there is none; caller frees with strv_free(). */
int repo_evo_branches(const char *seed_dir, char ***ret);

/* `git add -A && git commit` on the worktree's branch, read symlink-safely:
 * every file, symlink, new file and deletion of the working tree, where an
 * untracked path that .gitignore ignores is left out (tracked ones are
 * always taken) and so is anything that is not a regular file or symlink
 * (nested git repositories included). The worktree's index is updated to
 * the new commit. -ENODATA if nothing changed, -EFBIG for a file over 100
 * MiB. message: at most 64 KiB. Caller frees *ret_oid_hex. */
int repo_commit_worktree(const char *worktree_dir, const char *message, char **ret_oid_hex);

/* Moves the worktree's evolution branch back to base_hex (an ancestor of
 * its tip: -EINVAL otherwise) and its index to base's tree; the working
 * tree stays as it is. The next repo_commit_worktree() then makes one
 * commit from base, whatever was committed on the branch in between (an
 * evolution that went another round). */
int repo_worktree_rewind(const char *worktree_dir, const char *base_hex);

/* A unified patch (git's format) from base to head, or, when head_oid_hex is
 * NULL, from base to the working tree of dir (the Seed folder or a worktree)
 * as repo_commit_worktree() would commit it. At most max_bytes (>= 64) long:
 * a longer patch is cut and ends with "\n[diff truncated]\n". Caller frees
 * *ret_patch. */
int repo_diff(const char *dir, const char *base_oid_hex, const char *head_oid_hex, size_t max_bytes,
              char **ret_patch);

/* ---- the kernel boundary ---------------------------------------------- */

enum repo_change_kind {
        REPO_CHANGE_ADDED,
        REPO_CHANGE_MODIFIED,       /* content changed (the mode may have too) */
        REPO_CHANGE_DELETED,
        REPO_CHANGE_RENAMED,        /* same content, new path (exact renames) */
        REPO_CHANGE_MODE_CHANGED,   /* same content, e.g. chmod +x */
        REPO_CHANGE_TYPE_CHANGED,   /* e.g. file -> symlink */
};
const char *repo_change_kind_to_string(enum repo_change_kind k);

/* git modes as they appear in the fields below. */
#define REPO_MODE_FILE       0100644u
#define REPO_MODE_EXECUTABLE 0100755u
#define REPO_MODE_SYMLINK    0120000u
#define REPO_MODE_GITLINK    0160000u

struct repo_change {
        char *path;                /* relative, '/'-separated; the new path of a rename */
        char *old_path;            /* renames only, else NULL */
        enum repo_change_kind kind;
        uint32_t old_mode, new_mode; /* REPO_MODE_*, 0 for the missing side */
        char *link_target;         /* the new side is a symlink: its target, else NULL */
        bool symlink;              /* either side is a symlink */
        bool gitlink;              /* either side is a gitlink or a nested git repository */
        bool ignored;              /* an untracked addition .gitignore keeps out of commits */
        bool from_index;           /* seen only in the worktree's index, not on disk */
        bool protected;            /* needs the owner's approval (see below) */
        bool old_protected;        /* renames: the old path is protected */
        bool new_protected;        /* the path (new side) is protected */
        bool never_approvable;     /* git administrative files: always a violation */
        const char *reason;        /* static text: why protected, NULL if not */
        char new_oid[REPO_OID_HEX_LEN + 1]; /* the new side's blob id (hex) when it is a
                                         * file or symlink: always for protected
                                         * changes, else "" */
};
void repo_changes_free(struct repo_change *c, size_t n);

/* Every change between the base commit's tree and the worktree as it is on
 * disk, plus anything staged in the worktree's index that disk does not show.
 *
 * Decision on ignored files: the working tree is compared with the base tree
 * directly, ignored files included (flagged `ignored`), so a .gitignore the
 * model wrote cannot hide a change; only a real `.seed/` directory and the
 * `.git` file at the root are skipped. Fifos, sockets and devices are not
 * listed (git cannot hold them). A directory holding a `.git` entry is
 * listed as a gitlink (nested repository) and not entered.
 *
 * Protected (needs approval): a path not under an evolvable dir (e.g.
 * "organism/"; a new root file too); any .gitattributes or .gitmodules; any
 * path with a `.git` component; any gitlink; a new or changed symlink whose
 * target is absolute, empty, or leaves the link's evolvable dir. Targets are
 * resolved lexically from the link's directory, and a `..` after a name
 * ("a/../b") is refused too: through a link to "." it would climb further
 * than it reads. Renames are reported once with both paths and are
 * protected when either side is. For a linked worktree, a changed `.git`
 * file or a changed gitdir/commondir/config.worktree in its admin dir is a
 * git administrative change: protected and never approvable. The main git
 * dir's hooks/config/info are checked with repo_gitdir_snapshot().
 *
 * The list is sorted by path. Caller frees with repo_changes_free(). */
int repo_boundary_changes(const char *worktree_dir, const char *base_oid_hex, char *const *evolvable,
                          struct repo_change **ret_changes, size_t *ret_n);

/* The same classification for two commits (what a commit really contains):
 * run it on the new commit after repo_commit_worktree() and before tagging,
 * so nothing written between the check and the commit slips through. */
int repo_boundary_changes_between(const char *dir, const char *base_oid_hex, const char *head_oid_hex,
                                  char *const *evolvable, struct repo_change **ret_changes,
                                  size_t *ret_n);

/* What the owner approved at a protected path: its state right after the
 * approved call ran. A protected change passes the commit-time check only
 * if its new side is exactly that (same blob and mode, or gone), so a later
 * command cannot swap in other content under an approved path. */
struct repo_pin {
        char *path;
        char oid[REPO_OID_HEX_LEN + 1]; /* "" when the path was gone: then every
                                     * deletion below it is covered too */
        uint32_t mode;              /* REPO_MODE_*, 0 when gone */
};
void repo_pins_free(struct repo_pin *p, size_t n);
/* Reads the state of path (relative, no symlinks followed on the way) in a
 * worktree. A directory pins nothing (-EISDIR). */
int repo_pin_take(const char *worktree_dir, const char *path, struct repo_pin *ret);

/* The protected changes not covered by a pin, as
 * "kernel boundary violated: <path>, <path>" (the first 50 paths, then
 * "and N more"). The latest pin of a path counts. A rename needs each of its
 * protected sides pinned (the old one as gone). Returns the number of
 * violating paths; *ret_text is set (caller frees) when > 0, else NULL. */
int repo_boundary_violations(const struct repo_change *c, size_t n, const struct repo_pin *pins, size_t npins,
                             char **ret_text);

/* "kernel boundary violated: a, b" for a list of paths (NULL-terminated). */
int repo_boundary_message(char *const *paths, char **ret_text);

/* A snapshot (text; store it with the evolution) of the names, types, modes,
 * sizes and sha256 of everything under the Seed's .git/hooks, .git/config
 * and .git/info. Caller frees *ret. */
int repo_gitdir_snapshot(const char *seed_dir, char **ret);
/* The paths (".git/hooks/pre-commit", …) that differ from the snapshot:
 * added, removed or changed. Any is a boundary violation, never approvable.
 * Returns the count; *ret_paths is a NULL-terminated strv (caller frees). */
int repo_gitdir_changed(const char *seed_dir, const char *snapshot, char ***ret_paths);
