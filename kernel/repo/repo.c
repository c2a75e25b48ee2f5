#include "repo/repo.h"
#include "base/log.h"

#include <git2.h>
#include <pthread.h>

static pthread_once_t repo_once = PTHREAD_ONCE_INIT;
static void repo_global_init(void) { git_libgit2_init(); }

DEFINE_TRIVIAL_CLEANUP_FUNC(git_repository *, git_repository_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_index *, git_index_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_tree *, git_tree_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_commit *, git_commit_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_object *, git_object_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_signature *, git_signature_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(git_reference *, git_reference_free)

/* Turns libgit2's last error into -EIO plus a message for the caller. */
static int git_fail(int code, const char *what, char **ret_error) {
        const git_error *e = git_error_last();
        if (ret_error)
                (void)xasprintf(ret_error, "%s: %s", what, e && e->message ? e->message : "unknown git error");
        return code == GIT_ENOTFOUND ? -ENOENT : -EIO;
}

int repo_init_commit(const char *dir, const char *message, const char *tag, char **ret_error) {
        pthread_once(&repo_once, repo_global_init);
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_index_freep) git_index *index = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        _cleanup_(git_object_freep) git_object *commit_obj = NULL;
        git_oid tree_oid, commit_oid, tag_oid;
        int r;

        git_repository_init_options opts;
        git_repository_init_options_init(&opts, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
        opts.flags = GIT_REPOSITORY_INIT_MKPATH | GIT_REPOSITORY_INIT_NO_REINIT;
        opts.initial_head = "main";
        if ((r = git_repository_init_ext(&repo, dir, &opts)) < 0)
                return git_fail(r, "cannot create the git repository", ret_error);
        if ((r = git_repository_index(&index, repo)) < 0)
                return git_fail(r, "cannot open the index", ret_error);
        char *all[] = {"*"};
        git_strarray spec = {all, 1};
        if ((r = git_index_add_all(index, &spec, GIT_INDEX_ADD_DEFAULT, NULL, NULL)) < 0 ||
            (r = git_index_write(index)) < 0 || (r = git_index_write_tree(&tree_oid, index)) < 0)
                return git_fail(r, "cannot stage the Seed's files", ret_error);
        if ((r = git_tree_lookup(&tree, repo, &tree_oid)) < 0)
                return git_fail(r, "cannot read the staged tree", ret_error);
        if ((r = git_signature_now(&sig, "Seed", "seed@localhost")) < 0)
                return git_fail(r, "cannot make a signature", ret_error);
        if ((r = git_commit_create(&commit_oid, repo, "HEAD", sig, sig, NULL, message, tree, 0, NULL)) < 0)
                return git_fail(r, "cannot commit", ret_error);
        if ((r = git_object_lookup(&commit_obj, repo, &commit_oid, GIT_OBJECT_COMMIT)) < 0)
                return git_fail(r, "cannot read the new commit", ret_error);
        if (tag && (r = git_tag_create_lightweight(&tag_oid, repo, tag, commit_obj, 0)) < 0)
                return git_fail(r, "cannot tag the commit", ret_error);
        return 0;
}

void repo_generations_free(struct repo_generation *g, size_t n) {
        for (size_t i = 0; g && i < n; i++)
                free(g[i].summary);
        free(g);
}

static int parse_gen_tag(const char *refname, int *ret) {
        const char *p = "refs/tags/seed/gen-";
        if (!startswith(refname, p))
                return -EINVAL;
        const char *s = refname + strlen(p);
        if (!*s || strlen(s) > 9 || *s == '0')
                return -EINVAL;
        int n = 0;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                n = n * 10 + (*s - '0');
        }
        *ret = n;
        return 0;
}

static int cmp_gen(const void *a, const void *b) {
        return ((const struct repo_generation *)a)->number - ((const struct repo_generation *)b)->number;
}

int repo_generations(const char *dir, struct repo_generation **ret, size_t *ret_n) {
        pthread_once(&repo_once, repo_global_init);
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        git_reference_iterator *it = NULL;
        struct repo_generation *gens = NULL;
        size_t n = 0;
        int r;

        if ((r = git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) < 0)
                return git_fail(r, "open", NULL);
        if ((r = git_reference_iterator_glob_new(&it, repo, "refs/tags/seed/gen-*")) < 0)
                return git_fail(r, "list tags", NULL);
        git_reference *ref;
        while ((r = git_reference_next(&ref, it)) == 0) {
                int num;
                _cleanup_(git_object_freep) git_object *obj = NULL;
                if (parse_gen_tag(git_reference_name(ref), &num) < 0 ||
                    git_reference_peel(&obj, ref, GIT_OBJECT_COMMIT) < 0) {
                        git_reference_free(ref);
                        continue;
                }
                git_reference_free(ref);
                struct repo_generation *ng = realloc(gens, (n + 1) * sizeof(*gens));
                if (!ng) {
                        r = -ENOMEM;
                        break;
                }
                gens = ng;
                const git_commit *c = (const git_commit *)obj;
                const char *summary = git_commit_summary((git_commit *)c);
                gens[n] = (struct repo_generation){.number = num, .time = git_commit_time(c),
                                                   .summary = strdup(summary ? summary : "")};
                git_oid_tostr(gens[n].commit, sizeof gens[n].commit, git_object_id(obj));
                n++;
        }
        git_reference_iterator_free(it);
        if (r != GIT_ITEROVER && r != 0) {
                repo_generations_free(gens, n);
                return r < 0 && r > -4096 && r != -ENOMEM ? -EIO : r;
        }
        if (n > 1)
                qsort(gens, n, sizeof(*gens), cmp_gen);
        *ret = gens;
        *ret_n = n;
        return 0;
}

int repo_current_generation(const char *dir, int *ret) {
        pthread_once(&repo_once, repo_global_init);
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        git_oid head;
        int r;
        if ((r = git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) < 0)
                return git_fail(r, "open", NULL);
        if ((r = git_reference_name_to_id(&head, repo, "HEAD")) < 0)
                return git_fail(r, "HEAD", NULL);
        struct repo_generation *gens = NULL;
        size_t n = 0;
        git_repository_free(TAKE_PTR(repo));
        if ((r = repo_generations(dir, &gens, &n)) < 0)
                return r;
        char hex[41];
        git_oid_tostr(hex, sizeof hex, &head);
        int best = -1;
        for (size_t i = 0; i < n; i++)
                if (streq(gens[i].commit, hex) && gens[i].number > best)
                        best = gens[i].number;
        repo_generations_free(gens, n);
        if (best < 0)
                return -ENOENT;
        *ret = best;
        return 0;
}
