/* repo.c — opening repositories, errors, generations, history, tags, the
 * fast-forward of main and rollback commits. */
#include "repo/repo-internal.h"
#include "base/buf.h"
#include "base/fileio.h"

#include <limits.h>
#include <pthread.h>
#include <stdarg.h>

static pthread_once_t repo_once = PTHREAD_ONCE_INIT;

static void repo_global_init_once(void) {
        git_libgit2_init();
        /* Only the Seed's own .git/config counts: a global core.autocrlf,
         * core.filemode or excludesFile of whoever runs the kernel must not
         * change what is committed, checked out or seen by the boundary. */
        static const int levels[] = {GIT_CONFIG_LEVEL_SYSTEM, GIT_CONFIG_LEVEL_XDG,
                                     GIT_CONFIG_LEVEL_GLOBAL, GIT_CONFIG_LEVEL_PROGRAMDATA};
        for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
                (void)git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, levels[i], "");
}

void repo_global_init(void) { pthread_once(&repo_once, repo_global_init_once); }

/* ---- errors ------------------------------------------------------------ */

static _Thread_local char repo_error_text[1024];

const char *repo_last_error(void) { return repo_error_text; }

void repo_err_clear(void) { repo_error_text[0] = 0; }

int repo_err(int r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(repo_error_text, sizeof repo_error_text, fmt, ap);
        va_end(ap);
        return r < 0 ? r : -EIO;
}

static int git_code_to_errno(int code) {
        switch (code) {
        case GIT_ENOTFOUND:
        case GIT_EUNBORNBRANCH:
                return -ENOENT;
        case GIT_EEXISTS:
                return -EEXIST;
        case GIT_ECONFLICT:
        case GIT_ELOCKED:
        case GIT_EMODIFIED:
        case GIT_EUNCOMMITTED:
                return -EBUSY;
        case GIT_EINVALIDSPEC:
        case GIT_EINVALID:
        case GIT_EAMBIGUOUS:
                return -EINVAL;
        case GIT_EBAREREPO:
                return -ENOTDIR;
        case GIT_ENONFASTFORWARD:
                return -ENOTRECOVERABLE;
        case GIT_EOWNER:
                return -EPERM;
        default:
                return -EIO;
        }
}

int repo_git_err(int code, const char *fmt, ...) {
        /* libgit2 says nothing of some failed writes (a blob's temporary
         * file on a full disk): then the storage error its last system call
         * left, which is the one the owner can act on. */
        int saved = errno;
        bool storage = saved == ENOSPC || saved == EDQUOT || saved == EROFS || saved == EIO;
        char what[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        const git_error *e = git_error_last();
        if ((!e || !e->message) && storage) {
                snprintf(repo_error_text, sizeof repo_error_text, "%s: %s", what, strerror(saved));
                return -saved;
        }
        snprintf(repo_error_text, sizeof repo_error_text, "%s: %s", what,
                 e && e->message ? e->message : "unknown git error");
        return git_code_to_errno(code);
}

/* ---- opening ----------------------------------------------------------- */

int repo_parse_oid(const char *hex, git_oid *ret) {
        if (!hex || strlen(hex) != REPO_OID_HEX_LEN || strspn(hex, "0123456789abcdefABCDEF") != REPO_OID_HEX_LEN)
                return repo_err(-EINVAL, "not a commit id: '%.64s'", hex ? hex : "(null)");
        if (git_oid_fromstr(ret, hex) < 0)
                return repo_err(-EINVAL, "not a commit id: '%s'", hex);
        return 0;
}

int repo_open_seed(const char *seed_dir, git_repository **ret, char **ret_root) {
        repo_global_init();
        _cleanup_free_ char *abs = NULL;
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        int r;

        if (!seed_dir)
                return repo_err(-EINVAL, "no Seed folder given");
        if ((r = path_abs(seed_dir, &abs)) < 0)
                return repo_err(r, "cannot resolve '%s': %s", seed_dir, strerror(-r));
        if ((r = git_repository_open_ext(&repo, abs, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) < 0)
                return repo_git_err(r, "cannot open the repository in '%s'", abs);
        if (git_repository_is_bare(repo) || git_repository_is_worktree(repo))
                return repo_err(-EINVAL, "'%s' is not the Seed's own repository", abs);
        *ret = TAKE_PTR(repo);
        if (ret_root)
                *ret_root = TAKE_PTR(abs);
        return 0;
}

/* "<seed>/.seed/worktrees/<name>" → seed and name (pointers into abs). */
static bool split_worktree_path(char *abs, char **ret_seed, const char **ret_name) {
        static const char marker[] = "/.seed/worktrees/";
        char *hit = NULL;
        for (char *p = strstr(abs, marker); p; p = strstr(p + 1, marker))
                hit = p;
        if (!hit)
                return false;
        const char *name = hit + strlen(marker);
        if (!*name || strchr(name, '/'))
                return false;
        *hit = 0;
        *ret_seed = abs;
        *ret_name = name;
        return true;
}

int repo_open(const char *dir, git_repository **ret, git_worktree **ret_wt, char **ret_root) {
        repo_global_init();
        _cleanup_free_ char *abs = NULL, *split = NULL, *wt_abs = NULL, *admin = NULL, *workdir = NULL;
        _cleanup_(git_repository_freep) git_repository *main_repo = NULL, *repo = NULL;
        _cleanup_(git_worktree_freep) git_worktree *wt = NULL;
        char *seed;
        const char *name;
        int r;

        if (!dir)
                return repo_err(-EINVAL, "no directory given");
        if ((r = path_abs(dir, &abs)) < 0)
                return repo_err(r, "cannot resolve '%s': %s", dir, strerror(-r));
        if (!(split = strdup(abs)))
                return repo_err(-ENOMEM, "out of memory");
        if (!split_worktree_path(split, &seed, &name)) {
                if ((r = repo_open_seed(abs, &repo, NULL)) < 0)
                        return r;
                if (ret_wt)
                        *ret_wt = NULL;
                *ret = TAKE_PTR(repo);
                if (ret_root)
                        *ret_root = TAKE_PTR(abs);
                return 0;
        }
        /* A worktree: found through the Seed's repository, never through the
         * worktree's own `.git` file, which sandboxed code could rewrite. */
        if ((r = repo_open_seed(seed, &main_repo, NULL)) < 0)
                return r;
        if ((r = git_worktree_lookup(&wt, main_repo, name)) < 0)
                return repo_git_err(r, "'%s' is not a worktree of the Seed", abs);
        if (path_abs(git_worktree_path(wt), &wt_abs) < 0 || !streq(wt_abs, abs))
                return repo_err(-EINVAL, "worktree '%s' is registered at another place", name);
        /* Not git_repository_open_from_worktree(): that reads the `.git`
         * file. The admin dir is the kernel's; its `gitdir` names the
         * working directory. */
        if (xasprintf(&admin, "%sworktrees/%s", git_repository_commondir(main_repo), name) < 0)
                return repo_err(-ENOMEM, "out of memory");
        if ((r = git_repository_open_ext(&repo, admin, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) < 0)
                return repo_git_err(r, "cannot open worktree '%s'", name);
        if (!git_repository_is_worktree(repo) || !git_repository_workdir(repo) ||
            path_abs(git_repository_workdir(repo), &workdir) < 0 || !streq(workdir, abs))
                return repo_err(-EINVAL, "worktree '%s' does not lead back to '%s'", name, abs);
        *ret = TAKE_PTR(repo);
        if (ret_wt)
                *ret_wt = TAKE_PTR(wt);
        if (ret_root)
                *ret_root = TAKE_PTR(abs);
        return 0;
}

int repo_lookup_tree(git_repository *repo, const char *oid_hex, git_commit **ret_commit, git_tree **ret_tree) {
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        git_oid oid;
        int r;

        if ((r = repo_parse_oid(oid_hex, &oid)) < 0)
                return r;
        if ((r = git_commit_lookup(&commit, repo, &oid)) < 0)
                return repo_git_err(r, "no commit %s", oid_hex);
        if ((r = git_commit_tree(&tree, commit)) < 0)
                return repo_git_err(r, "cannot read the tree of %s", oid_hex);
        if (ret_commit)
                *ret_commit = TAKE_PTR(commit);
        if (ret_tree)
                *ret_tree = TAKE_PTR(tree);
        return 0;
}

void repo_oid_hex(const git_oid *oid, char out[REPO_OID_HEX_LEN + 1]) {
        git_oid_tostr(out, REPO_OID_HEX_LEN + 1, oid);
}

int repo_oid_hex_dup(const git_oid *oid, char **ret) {
        char hex[REPO_OID_HEX_LEN + 1];
        repo_oid_hex(oid, hex);
        char *s = strdup(hex);
        if (!s)
                return repo_err(-ENOMEM, "out of memory");
        *ret = s;
        return 0;
}

/* ---- planting (the first generation) ------------------------------------ */

/* Turns libgit2's last error into -errno plus a message for the caller. */
static int git_fail(int code, const char *what, char **ret_error) {
        int r = repo_git_err(code, "%s", what);
        if (ret_error)
                (void)xasprintf(ret_error, "%s", repo_last_error());
        return r;
}

int repo_init_commit(const char *dir, const char *message, const char *tag, char **ret_error) {
        repo_global_init();
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

/* ---- generations ------------------------------------------------------- */

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

/* The Owner-Commit trailer of a generation's message (a 40-hex oid), or "". */
static void owner_trailer(const char *message, char out[REPO_OID_HEX_LEN + 1]) {
        git_message_trailer_array tr = {0};
        out[0] = 0;
        if (!message || git_message_trailers(&tr, message) < 0)
                return;
        for (size_t i = 0; i < tr.count; i++) {
                const char *v = tr.trailers[i].value;
                git_oid oid;
                if (streq(tr.trailers[i].key, "Owner-Commit") && repo_parse_oid(v, &oid) == 0)
                        repo_oid_hex(&oid, out);
        }
        git_message_trailer_array_free(&tr);
}

static int cmp_gen(const void *a, const void *b) {
        return ((const struct repo_generation *)a)->number - ((const struct repo_generation *)b)->number;
}

int repo_generations(const char *dir, struct repo_generation **ret, size_t *ret_n) {
        repo_global_init();
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        git_reference_iterator *it = NULL;
        struct repo_generation *gens = NULL;
        size_t n = 0;
        int r;

        if ((r = git_repository_open_ext(&repo, dir, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL)) < 0)
                return repo_git_err(r, "cannot open the repository in '%s'", dir);
        if ((r = git_reference_iterator_glob_new(&it, repo, "refs/tags/seed/gen-*")) < 0)
                return repo_git_err(r, "cannot list the generation tags");
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
                owner_trailer(git_commit_message(c), gens[n].owner_commit);
                n++;
        }
        git_reference_iterator_free(it);
        if (r != GIT_ITEROVER && r != 0) {
                repo_generations_free(gens, n);
                return r == -ENOMEM ? repo_err(r, "out of memory")
                                    : repo_git_err(r, "cannot read the generation tags");
        }
        if (n > 1)
                qsort(gens, n, sizeof(*gens), cmp_gen);
        *ret = gens;
        *ret_n = n;
        return 0;
}

int repo_current_generation(const char *dir, int *ret) {
        _cleanup_free_ char *head = NULL;
        struct repo_generation *gens = NULL;
        size_t n = 0;
        int r;

        if ((r = repo_head(dir, &head)) < 0)
                return r;
        if ((r = repo_generations(dir, &gens, &n)) < 0)
                return r;
        int best = -1;
        for (size_t i = 0; i < n; i++)
                if (streq(gens[i].commit, head) && gens[i].number > best)
                        best = gens[i].number;
        repo_generations_free(gens, n);
        if (best < 0)
                return repo_err(-ENOENT, "HEAD (%s) carries no seed/gen-N tag", head);
        *ret = best;
        return 0;
}

/* ---- history ------------------------------------------------------------ */

int repo_head(const char *dir, char **ret_oid_hex) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        git_oid head;
        int r;

        if ((r = repo_open(dir, &repo, NULL, NULL)) < 0)
                return r;
        if ((r = git_reference_name_to_id(&head, repo, "HEAD")) < 0)
                return repo_git_err(r, "cannot resolve HEAD");
        return repo_oid_hex_dup(&head, ret_oid_hex);
}

int repo_tracked_paths(const char *dir, char ***ret) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_ents_ struct repo_ents ents = {0};
        _cleanup_free_ char *head = NULL;
        int r;

        repo_err_clear();
        if ((r = repo_head(dir, &head)) < 0 || (r = repo_open(dir, &repo, NULL, NULL)) < 0 ||
            (r = repo_lookup_tree(repo, head, NULL, &tree)) < 0 || (r = repo_tree_ents(repo, tree, &ents)) < 0)
                return r;
        char **v = calloc(ents.n + 1, sizeof *v);
        if (!v)
                return repo_err(-ENOMEM, "out of memory");
        for (size_t i = 0; i < ents.n; i++)
                v[i] = TAKE_PTR(ents.v[i].path);
        *ret = v;
        return 0;
}

void repo_log_free(struct repo_log_entry *e, size_t n) {
        for (size_t i = 0; e && i < n; i++)
                free(e[i].summary);
        free(e);
}

int repo_log(const char *dir, size_t max, struct repo_log_entry **ret, size_t *ret_n) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_revwalk_freep) git_revwalk *walk = NULL;
        struct repo_log_entry *v = NULL;
        size_t n = 0;
        git_oid oid;
        int r;

        if (max > 1000)
                max = 1000;
        if ((r = repo_open(dir, &repo, NULL, NULL)) < 0)
                return r;
        if ((r = git_revwalk_new(&walk, repo)) < 0 ||
            (r = git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME)) < 0 ||
            (r = git_revwalk_push_head(walk)) < 0)
                return repo_git_err(r, "cannot walk the history");
        if (max > 0 && !(v = calloc(max, sizeof *v)))
                return repo_err(-ENOMEM, "out of memory");
        while (n < max && (r = git_revwalk_next(&oid, walk)) == 0) {
                _cleanup_(git_commit_freep) git_commit *c = NULL;
                if ((r = git_commit_lookup(&c, repo, &oid)) < 0)
                        break;
                const char *s = git_commit_summary(c);
                repo_oid_hex(&oid, v[n].oid);
                v[n].time = git_commit_time(c);
                if (!(v[n].summary = strdup(s ? s : ""))) {
                        repo_log_free(v, n);
                        return repo_err(-ENOMEM, "out of memory");
                }
                n++;
        }
        if (r < 0 && r != GIT_ITEROVER) {
                repo_log_free(v, n);
                return repo_git_err(r, "cannot walk the history");
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int repo_changed_paths(const char *dir, const char *from_oid_hex, const char *to_oid_hex, char ***ret_paths) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_tree_freep) git_tree *from = NULL, *to = NULL;
        _cleanup_(git_diff_freep) git_diff *diff = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        int r;

        if ((r = repo_open(dir, &repo, NULL, NULL)) < 0 || (r = repo_lookup_tree(repo, from_oid_hex, NULL, &from)) < 0 ||
            (r = repo_lookup_tree(repo, to_oid_hex, NULL, &to)) < 0)
                return r;
        git_diff_options opts;
        git_diff_options_init(&opts, GIT_DIFF_OPTIONS_VERSION);
        opts.flags |= GIT_DIFF_INCLUDE_TYPECHANGE;
        if ((r = git_diff_tree_to_tree(&diff, repo, from, to, &opts)) < 0)
                return repo_git_err(r, "cannot compare %s and %s", from_oid_hex, to_oid_hex);
        size_t nd = git_diff_num_deltas(diff);
        if (!(paths = calloc(1, sizeof(char *))))
                return repo_err(-ENOMEM, "out of memory");
        for (size_t i = 0; i < nd; i++) {
                const git_diff_delta *d = git_diff_get_delta(diff, i);
                const char *p = d->new_file.path ? d->new_file.path : d->old_file.path;
                if ((r = strv_push(&paths, p)) < 0)
                        return repo_err(r, "out of memory");
        }
        size_t n = strv_length(paths);
        if (n > 1)
                qsort(paths, n, sizeof(char *), cmp_str);
        *ret_paths = TAKE_PTR(paths);
        return (int)(n > INT_MAX ? INT_MAX : n);
}

int repo_read_blob_at(const char *dir, const char *oid_hex, const char *path, size_t max, char **ret,
                      size_t *ret_len) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_object_freep) git_object *obj = NULL;
        git_tree_entry *entry = NULL;
        int r;

        repo_err_clear();
        if (strempty(path) || path[0] == '/')
                return repo_err(-EINVAL, "not a relative path: '%.64s'", path ? path : "");
        if ((r = repo_open(dir, &repo, NULL, NULL)) < 0 || (r = repo_lookup_tree(repo, oid_hex, NULL, &tree)) < 0)
                return r;
        if ((r = git_tree_entry_bypath(&entry, tree, path)) < 0)
                return repo_git_err(r, "no '%s' in %.12s", path, oid_hex);
        git_filemode_t mode = git_tree_entry_filemode(entry);
        if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE) {
                git_tree_entry_free(entry);
                return repo_err(-EINVAL, "'%s' in %.12s is not a regular file", path, oid_hex);
        }
        r = git_tree_entry_to_object(&obj, repo, entry);
        git_tree_entry_free(entry);
        if (r < 0)
                return repo_git_err(r, "cannot read '%s' in %.12s", path, oid_hex);
        const git_blob *blob = (const git_blob *)obj;
        git_object_size_t size = git_blob_rawsize(blob);
        if (size > max)
                return repo_err(-EFBIG, "'%s' in %.12s is larger than %zu bytes", path, oid_hex, max);
        char *data = malloc((size_t)size + 1);
        if (!data)
                return repo_err(-ENOMEM, "out of memory");
        memcpy(data, git_blob_rawcontent(blob), (size_t)size);
        data[size] = 0;
        *ret = data;
        if (ret_len)
                *ret_len = (size_t)size;
        return 0;
}

/* ---- commit messages and tags -------------------------------------------- */

bool repo_evo_id_valid(const char *evo_id) {
        size_t n = evo_id ? strlen(evo_id) : 0;
        if (n == 0 || n > 64)
                return false;
        return strspn(evo_id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* [a-z0-9-]{1,40}: letters lowered, anything else one '-', trimmed. */
static int clean_scope(const char *in, char out[41]) {
        size_t n = 0;
        for (const unsigned char *s = (const unsigned char *)in; *s && n < 40; s++) {
                unsigned char ch = *s;
                if (ch >= 'A' && ch <= 'Z')
                        ch = (unsigned char)(ch - 'A' + 'a');
                if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
                        out[n++] = (char)ch;
                else if (n > 0 && out[n - 1] != '-')
                        out[n++] = '-';
        }
        while (n > 0 && out[n - 1] == '-')
                n--;
        out[n] = 0;
        return n > 0 ? 0 : -EINVAL;
}

/* One line of at most max bytes: control characters become spaces, runs of
 * spaces collapse, cut on a UTF-8 character boundary. Caller frees. */
char *repo_clean_line(const char *in, size_t max) {
        char *out = malloc(max + 1);
        if (!out)
                return NULL;
        size_t n = 0;
        for (const unsigned char *s = (const unsigned char *)in; *s && n < max; s++) {
                unsigned char ch = *s < 0x20 || *s == 0x7f ? ' ' : *s;
                if (ch == ' ' && (n == 0 || out[n - 1] == ' '))
                        continue;
                out[n++] = (char)ch;
        }
        while (n > 0 && ((unsigned char)out[n - 1] & 0xc0) == 0x80)
                n--; /* a cut continuation byte: drop the partial character */
        if (n > 0 && ((unsigned char)out[n - 1] & 0xc0) == 0xc0)
                n--;
        while (n > 0 && out[n - 1] == ' ')
                n--;
        out[n] = 0;
        return out;
}

int repo_evolution_message(const char *scope, const char *title, const char *body, const char *evo_id,
                           int from_gen, int to_gen, char **ret) {
        char sc[41];
        _cleanup_free_ char *t = NULL;
        struct buf b = BUF_INIT(64 * 1024);
        int r;

        if (!scope || clean_scope(scope, sc) < 0)
                return repo_err(-EINVAL, "the evolution's scope is empty");
        if (!title || !(t = repo_clean_line(title, 200)))
                return repo_err(title ? -ENOMEM : -EINVAL, "the evolution has no title");
        if (!*t)
                return repo_err(-EINVAL, "the evolution's title is empty");
        if (!repo_evo_id_valid(evo_id))
                return repo_err(-EINVAL, "invalid evolution id");
        if (from_gen < 0 || to_gen <= from_gen)
                return repo_err(-EINVAL, "invalid generations %d -> %d", from_gen, to_gen);
        r = buf_printf(&b, "evolve(%s): %s\n\n", sc, t);
        if (r >= 0 && body) {
                /* The body without CRs, trailing blank space, or more than
                 * 16 KiB; it never reaches the trailer paragraph. */
                size_t len = 0, keep = 0;
                for (const char *s = body; *s && len < 16 * 1024; s++, len++)
                        if (!strchr(" \t\r\n", *s))
                                keep = len + 1;
                for (size_t i = 0; r >= 0 && i < keep; i++)
                        if (body[i] != '\r')
                                r = buf_append(&b, &body[i], 1);
                if (r >= 0 && keep > 0)
                        r = buf_puts(&b, "\n\n");
        }
        if (r >= 0)
                r = buf_printf(&b, "Evolution: evo_%s\nGeneration: %d -> %d\n", evo_id, from_gen, to_gen);
        if (r < 0) {
                buf_free(&b);
                return repo_err(r, "cannot build the commit message");
        }
        *ret = buf_steal(&b);
        return 0;
}

int repo_tag_generation(const char *seed_dir, const char *oid_hex, int n) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_object_freep) git_object *obj = NULL;
        char name[32];
        git_oid oid, tag_oid;
        int r;

        if (n < 1)
                return repo_err(-EINVAL, "invalid generation %d", n);
        if ((r = repo_parse_oid(oid_hex, &oid)) < 0 || (r = repo_open_seed(seed_dir, &repo, NULL)) < 0)
                return r;
        if ((r = git_object_lookup(&obj, repo, &oid, GIT_OBJECT_COMMIT)) < 0)
                return repo_git_err(r, "no commit %s", oid_hex);
        snprintf(name, sizeof name, "seed/gen-%d", n);
        if ((r = git_tag_create_lightweight(&tag_oid, repo, name, obj, 0)) < 0)
                return r == GIT_EEXISTS ? repo_err(-EEXIST, "tag %s exists already", name)
                                        : repo_git_err(r, "cannot create tag %s", name);
        return 0;
}

/* ---- moving main ------------------------------------------------------- */

/* Checks out commit `target` in the Seed folder and moves main from
 * `expected` to it. The caller has checked the ancestry. */
static int move_main(git_repository *repo, const git_oid *expected, const git_oid *target, const char *why) {
        _cleanup_(git_commit_freep) git_commit *commit = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_reference_freep) git_reference *ref = NULL;
        char hex[REPO_OID_HEX_LEN + 1];
        int r;

        repo_oid_hex(target, hex);
        if ((r = git_commit_lookup(&commit, repo, target)) < 0 || (r = git_commit_tree(&tree, commit)) < 0)
                return repo_git_err(r, "cannot read commit %s", hex);
        if (git_tree_entry_byname(tree, ".seed") || git_tree_entry_byname(tree, ".git"))
                return repo_err(-EPERM, "commit %s holds .seed or .git at its root; refusing to check it out", hex);

        git_checkout_options co;
        git_checkout_options_init(&co, GIT_CHECKOUT_OPTIONS_VERSION);
        /* SAFE: what the owner changed by hand is a conflict, not lost;
         * untracked and ignored files (.seed/) are left alone. */
        co.checkout_strategy = GIT_CHECKOUT_SAFE | GIT_CHECKOUT_DONT_OVERWRITE_IGNORED;
        if ((r = git_checkout_tree(repo, (const git_object *)commit, &co)) < 0)
                return repo_git_err(r, "cannot check out %s in the Seed folder", hex);
        if ((r = git_reference_create_matching(&ref, repo, "refs/heads/main", target, 1, expected, why)) < 0)
                return repo_git_err(r, "cannot move main to %s", hex);
        return 0;
}

int repo_main_head(git_repository *repo, git_oid *ret) {
        _cleanup_(git_reference_freep) git_reference *head = NULL;
        int r;

        if ((r = git_reference_lookup(&head, repo, "HEAD")) < 0)
                return repo_git_err(r, "cannot read HEAD");
        if (git_reference_type(head) != GIT_REFERENCE_SYMBOLIC ||
            !streq(git_reference_symbolic_target(head), "refs/heads/main"))
                return repo_err(-EINVAL, "the Seed folder is not on branch main");
        if ((r = git_reference_name_to_id(ret, repo, "refs/heads/main")) < 0)
                return repo_git_err(r, "cannot resolve main");
        return 0;
}

int repo_fast_forward_main(const char *seed_dir, const char *oid_hex_in) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        git_oid target, cur;
        char cur_hex[REPO_OID_HEX_LEN + 1];
        int r;

        if ((r = repo_parse_oid(oid_hex_in, &target)) < 0 || (r = repo_open_seed(seed_dir, &repo, NULL)) < 0 ||
            (r = repo_main_head(repo, &cur)) < 0)
                return r;
        if (git_oid_equal(&target, &cur))
                return 0;
        repo_oid_hex(&cur, cur_hex);
        r = git_graph_descendant_of(repo, &target, &cur);
        if (r < 0)
                return repo_git_err(r, "cannot relate %s to main", oid_hex_in);
        if (r == 0)
                return repo_err(-ENOTRECOVERABLE, "not a fast-forward: %s does not descend from main (%s)",
                                oid_hex_in, cur_hex);
        return move_main(repo, &cur, &target, "seed: fast-forward main");
}

/* Whether the message's Evolution trailer is evo_id ("evo_<id>"). */
static bool evolution_trailer_is(const char *message, const char *evo_id) {
        git_message_trailer_array tr = {0};
        bool is = false;
        if (!message || git_message_trailers(&tr, message) < 0)
                return false;
        for (size_t i = 0; i < tr.count; i++)
                is = is || (streq(tr.trailers[i].key, "Evolution") && streq(tr.trailers[i].value, evo_id));
        git_message_trailer_array_free(&tr);
        return is;
}

int repo_main_undo_untagged(const char *seed_dir, const char *evo_id, int *ret_gen) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_commit_freep) git_commit *head = NULL;
        _cleanup_(git_object_freep) git_object *live = NULL;
        struct repo_generation *g = NULL;
        size_t n = 0;
        git_oid cur;
        char spec[48];
        int r;

        repo_err_clear();
        if (!evo_id || !startswith(evo_id, "evo_") || !repo_evo_id_valid(evo_id + 4))
                return repo_err(-EINVAL, "invalid evolution id");
        if ((r = repo_generations(seed_dir, &g, &n)) < 0)
                return r;
        int newest = n > 0 ? g[n - 1].number : 0;
        repo_generations_free(g, n);
        if (newest < 1)
                return 0;
        if ((r = repo_open_seed(seed_dir, &repo, NULL)) < 0 || (r = repo_main_head(repo, &cur)) < 0)
                return r;
        if ((r = git_commit_lookup(&head, repo, &cur)) < 0)
                return repo_git_err(r, "cannot read main");
        snprintf(spec, sizeof spec, "refs/tags/seed/gen-%d^{commit}", newest);
        if ((r = git_revparse_single(&live, repo, spec)) < 0)
                return repo_git_err(r, "no generation %d", newest);
        const git_oid *live_oid = git_object_id(live);
        /* Only main = that evolution's commit, right on top of the live
         * generation and named by no generation: anything else is the
         * owner's (owner.h) or already consistent. */
        if (git_oid_equal(&cur, live_oid) || git_commit_parentcount(head) != 1 ||
            !git_oid_equal(git_commit_parent_id(head, 0), live_oid) ||
            !evolution_trailer_is(git_commit_message(head), evo_id))
                return 0;
        if ((r = move_main(repo, &cur, live_oid, "seed: undo an apply a kernel restart cut short")) < 0)
                return r;
        *ret_gen = newest;
        return 1;
}

int repo_restore_tree_commit(const char *seed_dir, int gen_n, const char *message, char **ret_oid_hex) {
        _cleanup_(git_repository_freep) git_repository *repo = NULL;
        _cleanup_(git_object_freep) git_object *gen = NULL;
        _cleanup_(git_commit_freep) git_commit *parent = NULL;
        _cleanup_(git_tree_freep) git_tree *tree = NULL;
        _cleanup_(git_signature_freep) git_signature *sig = NULL;
        char spec[48];
        git_oid cur, oid;
        int r;

        if (gen_n < 1)
                return repo_err(-EINVAL, "invalid generation %d", gen_n);
        if (strempty(message) || strlen(message) > 64 * 1024)
                return repo_err(-EINVAL, "the commit message is empty or too long");
        if ((r = repo_open_seed(seed_dir, &repo, NULL)) < 0 || (r = repo_main_head(repo, &cur)) < 0)
                return r;
        snprintf(spec, sizeof spec, "refs/tags/seed/gen-%d", gen_n);
        if ((r = git_revparse_single(&gen, repo, spec)) < 0)
                return repo_git_err(r, "no generation %d", gen_n);
        if ((r = git_object_peel((git_object **)&tree, gen, GIT_OBJECT_TREE)) < 0)
                return repo_git_err(r, "cannot read generation %d's tree", gen_n);
        if ((r = git_commit_lookup(&parent, repo, &cur)) < 0)
                return repo_git_err(r, "cannot read main");
        if ((r = git_signature_now(&sig, "Seed", "seed@localhost")) < 0)
                return repo_git_err(r, "cannot make a signature");
        const git_commit *parents[] = {parent};
        if ((r = git_commit_create(&oid, repo, NULL, sig, sig, NULL, message, tree, 1, parents)) < 0)
                return repo_git_err(r, "cannot create the restoring commit");
        if ((r = move_main(repo, &cur, &oid, "seed: restore a generation")) < 0)
                return r;
        return repo_oid_hex_dup(&oid, ret_oid_hex);
}
