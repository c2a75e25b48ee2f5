/* worktree.c — an evolution's branch and linked worktree, and its commit. */
#include "repo/repo-internal.h"
#include "base/fileio.h"

#include <fcntl.h>
#include <sys/stat.h>

static int worktree_names(const char *evo_id, char name[80], char branch[96]) {
        if (!repo_evo_id_valid(evo_id))
                return repo_err(-EINVAL, "invalid evolution id");
        snprintf(name, 80, "evo_%s", evo_id);
        snprintf(branch, 96, "seed/evo_%s", evo_id);
        return 0;
}

int repo_worktree_add(const char *seed_dir, const char *evo_id, char **ret_path) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_commit_freep) git_commit *head = NULL;
        _cleanup_(git_reference_freep) git_reference *branch = NULL, *existing = NULL;
        _cleanup_(git_worktree_freep) git_worktree *wt = NULL;
        _cleanup_free_ char *root = NULL, *parent = NULL, *path = NULL;
        char name[80], bname[96];
        git_oid oid;
        int r;

        repo_err_clear();
        if ((r = worktree_names(evo_id, name, bname)) < 0 || (r = repo_open_seed(seed_dir, &repo, &root)) < 0)
                return r;
        if (xasprintf(&parent, "%s/.seed/worktrees", root) < 0 || xasprintf(&path, "%s/%s", parent, name) < 0)
                return repo_err(-ENOMEM, "out of memory");
        if (path_exists(path))
                return repo_err(-EEXIST, "the folder of worktree %s exists already", name);
        if (git_worktree_lookup(&wt, repo, name) == 0)
                return repo_err(-EEXIST, "worktree %s exists already", name);
        if (git_branch_lookup(&existing, repo, bname, GIT_BRANCH_LOCAL) == 0)
                return repo_err(-EEXIST, "branch %s exists already", bname);
        if ((r = git_reference_name_to_id(&oid, repo, "refs/heads/main")) < 0 ||
            (r = git_commit_lookup(&head, repo, &oid)) < 0)
                return repo_git_err(r, "cannot resolve main");
        if ((r = mkdir_p(parent, 0700)) < 0)
                return repo_err(r, "cannot create '%s': %s", parent, strerror(-r));
        if ((r = git_branch_create(&branch, repo, bname, head, 0)) < 0)
                return repo_git_err(r, "cannot create branch %s", bname);

        git_worktree_add_options opts;
        git_worktree_add_options_init(&opts, GIT_WORKTREE_ADD_OPTIONS_VERSION);
        opts.ref = branch;
        opts.checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
        if ((r = git_worktree_add(&wt, repo, name, path, &opts)) < 0) {
                r = repo_git_err(r, "cannot create worktree %s", name);
                (void)git_reference_delete(branch);
                return r;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* Whether a symbolic reference (HEAD, main, a generation's tag, any other)
 * reaches the commit only through branch full: deleting the branch would
 * leave it dangling. *ret_holder: its name (caller frees). */
static int symbolic_holder(git_repository *repo, const char *full, char **ret_holder) {
        git_reference_iterator *it = NULL;
        git_reference *ref = NULL;
        _cleanup_(git_reference_freep) git_reference *head = NULL;
        char *holder = NULL;
        bool oom = false;
        int r;
        /* HEAD first (not under refs/), then every reference */
        if (git_reference_lookup(&head, repo, "HEAD") == 0 && git_reference_type(head) == GIT_REFERENCE_SYMBOLIC)
                ref = TAKE_PTR(head);
        if ((r = git_reference_iterator_new(&it, repo)) < 0)
                return repo_git_err(r, "cannot list the references");
        for (;;) {
                if (!ref && (r = git_reference_next(&ref, it)) < 0)
                        break;
                const char *name = git_reference_name(ref);
                /* a chain of symbolic references, at most a few hops */
                _cleanup_(git_reference_freep) git_reference *hop = NULL;
                const char *target = git_reference_type(ref) == GIT_REFERENCE_SYMBOLIC
                                             ? git_reference_symbolic_target(ref)
                                             : NULL;
                for (int i = 0; target && i < 8 && !holder; i++) {
                        if (streq(target, full)) {
                                oom = !(holder = strdup(name));
                                break;
                        }
                        git_reference *next = NULL;
                        if (git_reference_lookup(&next, repo, target) < 0)
                                break;
                        git_reference_free(hop);
                        hop = next;
                        target = git_reference_type(hop) == GIT_REFERENCE_SYMBOLIC ? git_reference_symbolic_target(hop)
                                                                                   : NULL;
                }
                git_reference_free(ref);
                ref = NULL;
                if (holder || oom)
                        break;
        }
        git_reference_iterator_free(it);
        if (oom)
                return repo_err(-ENOMEM, "out of memory");
        if (!holder && r != GIT_ITEROVER)
                return repo_git_err(r, "cannot list the references");
        *ret_holder = holder;
        return 0;
}

int repo_evo_branches(const char *seed_dir, char ***ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_free_ char *root = NULL;
        _cleanup_strv_free_ char **out = NULL;
        git_reference_iterator *it = NULL;
        git_reference *ref;
        int r;

        repo_err_clear();
        if ((r = repo_open_seed(seed_dir, &repo, &root)) < 0)
                return r;
        if ((r = git_reference_iterator_glob_new(&it, repo, "refs/heads/seed/evo_*")) < 0)
                return repo_git_err(r, "cannot list the evolution branches");
        while ((r = git_reference_next(&ref, it)) == 0) {
                const char *id = git_reference_name(ref) + strlen("refs/heads/seed/evo_");
                bool oom = repo_evo_id_valid(id) && strv_push(&out, id) < 0;
                git_reference_free(ref);
                if (oom) {
                        git_reference_iterator_free(it);
                        return repo_err(-ENOMEM, "out of memory");
                }
        }
        git_reference_iterator_free(it);
        if (r != GIT_ITEROVER)
                return repo_git_err(r, "cannot list the evolution branches");
        *ret = TAKE_PTR(out);
        return 0;
}

int repo_worktree_remove(const char *seed_dir, const char *evo_id) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_worktree_freep) git_worktree *wt = NULL;
        _cleanup_(git_reference_freep) git_reference *branch = NULL;
        _cleanup_free_ char *root = NULL, *path = NULL, *admin = NULL;
        char name[80], bname[96];
        int r;

        repo_err_clear();
        if ((r = worktree_names(evo_id, name, bname)) < 0 || (r = repo_open_seed(seed_dir, &repo, &root)) < 0)
                return r;
        if (xasprintf(&path, "%s/.seed/worktrees/%s", root, name) < 0 ||
            xasprintf(&admin, "%sworktrees/%s", git_repository_commondir(repo), name) < 0)
                return repo_err(-ENOMEM, "out of memory");
        /* Our own removal first (no symlink followed, whatever modes the
         * sandbox left), then libgit2 forgets the worktree. */
        if ((r = repo_rm_tree(path)) < 0)
                return repo_err(r, "cannot remove '%s': %s", path, strerror(-r));
        if (git_worktree_lookup(&wt, repo, name) == 0) {
                git_worktree_prune_options po;
                git_worktree_prune_options_init(&po, GIT_WORKTREE_PRUNE_OPTIONS_VERSION);
                po.flags = GIT_WORKTREE_PRUNE_VALID | GIT_WORKTREE_PRUNE_LOCKED;
                if ((r = git_worktree_prune(wt, &po)) < 0)
                        return repo_git_err(r, "cannot prune worktree %s", name);
        }
        if ((r = repo_rm_tree(admin)) < 0)
                return repo_err(r, "cannot remove '%s': %s", admin, strerror(-r));
        r = git_branch_lookup(&branch, repo, bname, GIT_BRANCH_LOCAL);
        if (r == GIT_ENOTFOUND)
                return 0;
        _cleanup_free_ char *holder = NULL;
        if (r == 0 && (r = symbolic_holder(repo, git_reference_name(branch), &holder)) < 0)
                return r;
        if (holder)
                return repo_err(-EBUSY, "branch %s is kept: %s points at its commit only through it", bname, holder);
        /* git_reference_delete(), not git_branch_delete(): nothing of ours is
         * in the config to clean up, and libgit2 1.5's config regex path
         * leaks on every call. */
        if (r < 0 || (r = git_reference_delete(branch)) < 0)
                return repo_git_err(r, "cannot delete branch %s", bname);
        return 0;
}

/* ---- committing ------------------------------------------------------------- */

static int blob_from_file(git_repository *repo, int rootfd, const char *path, git_oid *ret) {
        _cleanup_close_ int fd = repo_open_beneath(rootfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        git_writestream *ws = NULL;
        struct stat st;
        char chunk[65536];
        uint64_t total = 0;
        int r;

        if (fd < 0)
                return repo_err(fd, "cannot open '%s': %s", path, strerror(-fd));
        if (fstat(fd, &st) < 0)
                return repo_err(-errno, "cannot stat '%s': %m", path);
        if (!S_ISREG(st.st_mode))
                return repo_err(-EINVAL, "'%s' is no longer a regular file", path);
        /* a message libgit2 keeps from an earlier call must not pass for this
         * one's (it sets none on some failed writes: repo_git_err) */
        git_error_clear();
        if ((r = git_blob_create_from_stream(&ws, repo, NULL)) < 0)
                return repo_git_err(r, "cannot store '%s'", path);
        for (;;) {
                ssize_t k = read(fd, chunk, sizeof chunk);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = repo_err(-errno, "cannot read '%s': %m", path);
                        break;
                }
                if (k == 0)
                        break;
                total += (uint64_t)k;
                if (total > REPO_MAX_FILE) {
                        r = repo_err(-EFBIG, "'%s' is larger than %u MiB", path, REPO_MAX_FILE >> 20);
                        break;
                }
                if ((r = ws->write(ws, chunk, (size_t)k)) < 0) {
                        r = repo_git_err(r, "cannot store '%s'", path);
                        break;
                }
        }
        if (r < 0) {
                ws->free(ws);
                return r;
        }
        if ((r = git_blob_create_from_stream_commit(ret, ws)) < 0)
                return repo_git_err(r, "cannot store '%s'", path);
        return 0;
}

static int index_put(git_index *idx, const char *path, uint32_t mode, const git_oid *oid) {
        git_index_entry e = {0};
        e.path = path;
        e.mode = mode;
        git_oid_cpy(&e.id, oid);
        int r = git_index_add(idx, &e);
        return r < 0 ? repo_git_err(r, "cannot stage '%s'", path) : 0;
}

/* The tree of the working tree as `git add -A` would stage it. */
static int build_tree(git_repository *repo, int rootfd, struct repo_ents *tracked, git_oid *ret) {
        _cleanup_(git_index_freep) git_index *idx = NULL;
        _cleanup_ents_ struct repo_ents disk = {0};
        int r;

        if ((r = repo_scan_workdir(rootfd, repo, tracked, REPO_IGNORE_PRUNE, &disk)) < 0)
                return r;
        if ((r = git_index_new(&idx)) < 0)
                return repo_git_err(r, "cannot create an index");
        for (size_t i = 0; i < disk.n; i++) {
                struct repo_ent *e = &disk.v[i];
                git_oid oid;
                if (e->mode == REPO_MODE_SYMLINK) {
                        if ((r = git_blob_create_from_buffer(&oid, repo, e->link, strlen(e->link))) < 0)
                                return repo_git_err(r, "cannot store the symlink '%s'", e->path);
                } else if (e->mode == REPO_MODE_FILE || e->mode == REPO_MODE_EXECUTABLE) {
                        if ((r = blob_from_file(repo, rootfd, e->path, &oid)) < 0)
                                return r;
                } else
                        continue;
                if ((r = index_put(idx, e->path, e->mode, &oid)) < 0)
                        return r;
        }
        /* A gitlink git already holds stays while its (empty) dir does. */
        for (size_t i = 0; i < tracked->n; i++) {
                struct repo_ent *t = &tracked->v[i];
                if (t->mode != REPO_MODE_GITLINK || repo_ents_find(&disk, t->path) ||
                    repo_ents_has_below(&disk, t->path))
                        continue;
                _cleanup_close_ int fd = repo_open_beneath(rootfd, t->path, O_RDONLY | O_DIRECTORY);
                if (fd >= 0 && (r = index_put(idx, t->path, REPO_MODE_GITLINK, &t->oid)) < 0)
                        return r;
        }
        if ((r = git_index_write_tree_to(ret, idx, repo)) < 0)
                return repo_git_err(r, "cannot write the tree");
        return 0;
}

int repo_worktree_rewind(const char *worktree_dir, const char *base_hex) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_reference_freep) git_reference *head = NULL, *moved = NULL;
        _cleanup_(git_commit_freep) git_commit *base = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_index_freep) git_index *index = NULL;
        _cleanup_free_ char *root = NULL;
        git_oid base_oid;
        int r;

        repo_err_clear();
        if (!base_hex || repo_parse_oid(base_hex, &base_oid) < 0)
                return repo_err(-EINVAL, "invalid commit id");
        if ((r = repo_open(worktree_dir, &repo, NULL, &root)) < 0)
                return r;
        if ((r = git_repository_head(&head, repo)) < 0)
                return repo_git_err(r, "cannot resolve HEAD");
        if (!git_reference_is_branch(head) || !startswith(git_reference_name(head), "refs/heads/seed/evo_"))
                return repo_err(-EINVAL, "HEAD is not an evolution's branch");
        const git_oid *tip = git_reference_target(head);
        if (git_oid_equal(tip, &base_oid))
                return 0;
        if (git_graph_descendant_of(repo, tip, &base_oid) != 1)
                return repo_err(-EINVAL, "the branch does not descend from %s", base_hex);
        if ((r = git_commit_lookup(&base, repo, &base_oid)) < 0 || (r = git_commit_tree(&tree, base)) < 0)
                return repo_git_err(r, "cannot read %s", base_hex);
        if ((r = git_reference_set_target(&moved, head, &base_oid, "seed: a new round starts from the base")) < 0)
                return repo_git_err(r, "cannot move the branch");
        if ((r = git_repository_index(&index, repo)) < 0 || (r = git_index_read_tree(index, tree)) < 0 ||
            (r = git_index_write(index)) < 0)
                return repo_git_err(r, "cannot reset the worktree's index");
        return 0;
}

int repo_commit_worktree(const char *worktree_dir, const char *message, char **ret_oid_hex) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_commit_freep) git_commit *parent = NULL;
        _cleanup_(git_tree_freep) git_tree *parent_tree = NULL, *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        _cleanup_(git_reference_freep) git_reference *head = NULL;
        _cleanup_(git_index_freep) git_index *wt_index = NULL;
        _cleanup_ents_ struct repo_ents tracked = {0};
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int rootfd = -1;
        char hex[REPO_OID_HEX_LEN + 1];
        git_oid parent_oid, tree_oid, oid;
        int r;

        repo_err_clear();
        if (strempty(message) || strlen(message) > 64 * 1024)
                return repo_err(-EINVAL, "the commit message is empty or longer than 64 KiB");
        if ((r = repo_open(worktree_dir, &repo, NULL, &root)) < 0)
                return r;
        if ((r = git_repository_head(&head, repo)) < 0)
                return repo_git_err(r, "cannot resolve HEAD");
        if (!git_reference_is_branch(head))
                return repo_err(-EINVAL, "HEAD is not a branch");
        git_oid_cpy(&parent_oid, git_reference_target(head));
        if ((r = git_commit_lookup(&parent, repo, &parent_oid)) < 0 || (r = git_commit_tree(&parent_tree, parent)) < 0)
                return repo_git_err(r, "cannot read HEAD");
        if ((r = repo_tree_ents(repo, parent_tree, &tracked)) < 0)
                return r;
        if ((rootfd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
                return repo_err(-errno, "cannot open '%s': %m", root);
        if ((r = build_tree(repo, rootfd, &tracked, &tree_oid)) < 0)
                return r;
        if (git_oid_equal(&tree_oid, git_tree_id(parent_tree)))
                return repo_err(-ENODATA, "nothing to commit");
        if ((r = git_tree_lookup(&tree, repo, &tree_oid)) < 0)
                return repo_git_err(r, "cannot read the new tree");
        if ((r = git_signature_now(&sig, "Seed", "seed@localhost")) < 0)
                return repo_git_err(r, "cannot make a signature");
        const git_commit *parents[] = {parent};
        /* Moves the branch only if it is still where we read it. */
        if ((r = git_commit_create(&oid, repo, git_reference_name(head), sig, sig, NULL, message, tree, 1, parents)) < 0)
                return repo_git_err(r, "cannot commit");
        /* The worktree's index follows, so git status there is clean. */
        if ((r = git_repository_index(&wt_index, repo)) < 0 || (r = git_index_read_tree(wt_index, tree)) < 0 ||
            (r = git_index_write(wt_index)) < 0)
                return repo_git_err(r, "committed, but cannot update the worktree's index");
        git_oid_tostr(hex, sizeof hex, &oid);
        char *s = strdup(hex);
        if (!s)
                return repo_err(-ENOMEM, "out of memory");
        *ret_oid_hex = s;
        return 0;
}
