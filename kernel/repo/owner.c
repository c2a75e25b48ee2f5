/* owner.c — the owner's own commits on main: is main the live generation,
 * the owner's commits on top of it, or something that no longer contains it;
 * the commit that records the owner's commits as a generation; a plain
 * export of a generation's tree (what the live organism runs from while the
 * owner's commits are not a generation). */
#include "repo/repo-internal.h"
#include "base/buf.h"
#include "base/fileio.h"

#include <sys/stat.h>

#define OWNER_SUBJECT_MAX 200
#define OWNER_COUNT_MAX 1000

void repo_owner_change_done(struct repo_owner_change *c) {
        if (!c)
                return;
        free(c->subject);
        c->subject = NULL;
}

/* The newest seed/gen-N: number and commit. -ENOENT if there is none. */
static int newest_generation(const char *seed_dir, int *ret_n, char ret_commit[REPO_OID_HEX_LEN + 1]) {
        struct repo_generation *g = NULL;
        size_t n = 0;
        int r = repo_generations(seed_dir, &g, &n);
        if (r < 0)
                return r;
        if (n == 0) {
                repo_generations_free(g, n);
                return repo_err(-ENOENT, "the Seed has no generation (no seed/gen-N tag)");
        }
        *ret_n = g[n - 1].number;
        memcpy(ret_commit, g[n - 1].commit, REPO_OID_HEX_LEN + 1);
        repo_generations_free(g, n);
        return 0;
}

int repo_live_generation(const char *dir, int *ret) {
        char commit[REPO_OID_HEX_LEN + 1];
        int n = 0;
        int r = newest_generation(dir, &n, commit);
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

/* Counts the commits reachable from head but not from base (at most
 * OWNER_COUNT_MAX). */
static int count_on_top(git_repository *repo, const git_oid *head, const git_oid *base, size_t *ret) {
        _cleanup_(git_revwalk_freep) git_revwalk *walk = NULL;
        git_oid oid;
        size_t n = 0;
        int r;

        if ((r = git_revwalk_new(&walk, repo)) < 0 || (r = git_revwalk_push(walk, head)) < 0 ||
            (r = git_revwalk_hide(walk, base)) < 0)
                return repo_git_err(r, "cannot walk the commits on main");
        while (n < OWNER_COUNT_MAX && (r = git_revwalk_next(&oid, walk)) == 0)
                n++;
        if (r < 0 && r != GIT_ITEROVER)
                return repo_git_err(r, "cannot walk the commits on main");
        *ret = n;
        return 0;
}

/* HEAD's commit, and whether HEAD is the branch main. */
static int read_head(git_repository *repo, git_oid *ret, bool *ret_on_main) {
        _cleanup_(git_reference_freep) git_reference *head = NULL;
        int r = git_reference_lookup(&head, repo, "HEAD");
        if (r < 0)
                return repo_git_err(r, "cannot read HEAD");
        bool on_main = git_reference_type(head) == GIT_REFERENCE_SYMBOLIC &&
                       streq(git_reference_symbolic_target(head), "refs/heads/main");
        if ((r = git_reference_name_to_id(ret, repo, "HEAD")) < 0)
                return repo_git_err(r, "cannot resolve HEAD");
        *ret_on_main = on_main;
        return 0;
}

int repo_owner_change(const char *seed_dir, struct repo_owner_change *ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        struct repo_owner_change c = {0};
        git_oid head, gen;
        int r;

        repo_err_clear();
        if ((r = newest_generation(seed_dir, &c.generation, c.generation_commit)) < 0 ||
            (r = repo_open_seed(seed_dir, &repo, NULL)) < 0 || (r = read_head(repo, &head, &c.on_main)) < 0 ||
            (r = repo_parse_oid(c.generation_commit, &gen)) < 0)
                return r;
        repo_oid_hex(&head, c.head);
        if (git_oid_equal(&head, &gen)) {
                c.state = c.on_main ? REPO_OWNER_NONE : REPO_OWNER_DIVERGED;
                *ret = c;
                return 0;
        }
        r = git_graph_descendant_of(repo, &head, &gen);
        if (r < 0)
                return repo_git_err(r, "cannot relate HEAD to generation %d", c.generation);
        if (r == 0 || !c.on_main) {
                c.state = REPO_OWNER_DIVERGED;
                *ret = c;
                return 0;
        }
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        if ((r = git_commit_lookup(&commit, repo, &head)) < 0)
                return repo_git_err(r, "cannot read HEAD's commit");
        if ((r = count_on_top(repo, &head, &gen, &c.n_commits)) < 0)
                return r;
        const char *summary = git_commit_summary(commit);
        if (!(c.subject = repo_clean_line(summary ? summary : "", OWNER_SUBJECT_MAX)))
                return repo_err(-ENOMEM, "out of memory");
        c.state = REPO_OWNER_COMMITS;
        *ret = c;
        return 0;
}

int repo_owner_message(const char *subject, size_t n_commits, const char *evo_id, int from_gen, int to_gen,
                       const char *owner_oid_hex, char **ret) {
        _cleanup_free_ char *s = NULL;
        git_oid oid;
        int r;

        if (!repo_evo_id_valid(evo_id))
                return repo_err(-EINVAL, "invalid evolution id");
        if (from_gen < 1 || to_gen != from_gen + 1)
                return repo_err(-EINVAL, "invalid generations %d -> %d", from_gen, to_gen);
        if (n_commits < 1)
                return repo_err(-EINVAL, "no owner commit to record");
        if ((r = repo_parse_oid(owner_oid_hex, &oid)) < 0)
                return r;
        if (!(s = repo_clean_line(subject ? subject : "", OWNER_SUBJECT_MAX)))
                return repo_err(-ENOMEM, "out of memory");
        char more[48] = "";
        if (n_commits > 1)
                snprintf(more, sizeof more, " (and %zu more)", n_commits - 1);
        char hex[REPO_OID_HEX_LEN + 1];
        repo_oid_hex(&oid, hex); /* lower case, as git writes it */
        if (xasprintf(ret, "owner: %s%s\n\nEvolution: evo_%s\nGeneration: %d -> %d\nOwner-Commit: %s\n",
                      *s ? s : "(no subject)", more, evo_id, from_gen, to_gen, hex) < 0)
                return repo_err(-ENOMEM, "out of memory");
        return 0;
}

int repo_owner_commit(const char *seed_dir, const char *head_oid_hex, const char *message, char **ret_oid_hex) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_commit_freep) git_commit *parent = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        git_oid head, cur, oid;
        int r;

        repo_err_clear();
        if (strempty(message) || strlen(message) > 64 * 1024)
                return repo_err(-EINVAL, "the commit message is empty or too long");
        if ((r = repo_parse_oid(head_oid_hex, &head)) < 0 || (r = repo_open_seed(seed_dir, &repo, NULL)) < 0 ||
            (r = repo_main_head(repo, &cur)) < 0)
                return r;
        if (!git_oid_equal(&head, &cur))
                return repo_err(-ESTALE, "main moved on from %.12s", head_oid_hex);
        if ((r = git_commit_lookup(&parent, repo, &head)) < 0 || (r = git_commit_tree(&tree, parent)) < 0)
                return repo_git_err(r, "cannot read commit %s", head_oid_hex);
        if ((r = git_signature_now(&sig, "Seed", "seed@localhost")) < 0)
                return repo_git_err(r, "cannot make a signature");
        const git_commit *parents[] = {parent};
        /* No ref moves here: the apply fast-forwards main to it. */
        if ((r = git_commit_create(&oid, repo, NULL, sig, sig, NULL, message, tree, 1, parents)) < 0)
                return repo_git_err(r, "cannot create the owner's generation commit");
        return repo_oid_hex_dup(&oid, ret_oid_hex);
}

int repo_export_generation(const char *seed_dir, int n, const char *dest_dir) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_object_freep) git_object *gen = NULL;
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_index_freep) git_index *empty = NULL;
        char spec[48];
        int r;

        repo_err_clear();
        if (n < 1)
                return repo_err(-EINVAL, "invalid generation %d", n);
        if (!dest_dir || dest_dir[0] != '/')
                return repo_err(-EINVAL, "the export folder must be an absolute path");
        if ((r = repo_open_seed(seed_dir, &repo, NULL)) < 0)
                return r;
        snprintf(spec, sizeof spec, "refs/tags/seed/gen-%d", n);
        if ((r = git_revparse_single(&gen, repo, spec)) < 0)
                return repo_git_err(r, "no generation %d", n);
        if ((r = git_object_peel((git_object **)&commit, gen, GIT_OBJECT_COMMIT)) < 0 ||
            (r = git_commit_tree(&tree, commit)) < 0)
                return repo_git_err(r, "cannot read generation %d", n);
        if (git_tree_entry_byname(tree, ".seed") || git_tree_entry_byname(tree, ".git"))
                return repo_err(-EPERM, "generation %d holds .seed or .git at its root", n);
        /* A fresh folder every time: whatever a build left there goes. */
        if ((r = repo_rm_tree(dest_dir)) < 0)
                return repo_err(r, "cannot clear '%s': %s", dest_dir, strerror(-r));
        if ((r = mkdir_mode(dest_dir, 0700)) < 0)
                return repo_err(r, "cannot create '%s': %s", dest_dir, strerror(-r));
        /* Against an empty baseline every file of the tree is created; the
         * Seed's own index and working tree are never touched. */
        if ((r = git_index_new(&empty)) < 0)
                return repo_git_err(r, "cannot create an index");
        git_checkout_options co;
        git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        co.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_DONT_UPDATE_INDEX | GIT_CHECKOUT_DONT_WRITE_INDEX;
        co.target_directory = dest_dir;
        co.baseline_index = empty;
        if ((r = git_checkout_tree(repo, (const git_object *)commit, &co)) < 0)
                return repo_git_err(r, "cannot write generation %d into '%s'", n, dest_dir);
        return 0;
}
