/* Unit tests for kernel/repo: real libgit2 repositories in temp dirs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <ctype.h>
#include <dirent.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

/* Only to craft an index entry no file can make (a gitlink). */
#include <git2.h>

#include "base/buf.h"
#include "base/fileio.h"
#include "repo/repo.h"
#include "repo/repo-internal.h" /* repo_open_beneath() */

static char *ev[] = {"organism/", "knowledge/", "skills/", NULL};

static void put(const char *dir, const char *rel, const char *content) {
        _cleanup_free_ char *p = path_join(dir, rel);
        _cleanup_free_ char *parent = strdup(p);
        *strrchr(parent, '/') = 0;
        assert_int_equal(mkdir_p(parent, 0755), 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static char *slurp(const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        char *data = NULL;
        if (read_file(p, 1 << 20, &data, NULL) < 0)
                return NULL;
        return data;
}

static void link_at(const char *dir, const char *rel, const char *target) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_int_equal(symlink(target, p), 0);
}

static void unlink_at(const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_int_equal(unlink(p), 0);
}

static bool exists_at(const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        return path_exists(p);
}

static char *make_seed_dir(void) {
        char tmpl[] = "/tmp/seed-test-repo-XXXXXX";
        assert_non_null(mkdtemp(tmpl));
        char *dir = strdup(tmpl);
        _cleanup_free_ char *hidden = path_join(dir, ".seed");
        put(dir, ".gitignore", "/.seed/\n/build*/\n");
        put(dir, "seed.yaml", "name: t\n");
        assert_int_equal(mkdir_p(hidden, 0700), 0);
        put(dir, ".seed/secret", "x");
        return dir;
}

/* A planted Seed (generation 1) with a small kernel and organism. */
static char *make_seed(char **ret_base) {
        char *dir = make_seed_dir();
        put(dir, "kernel/app.c", "int main(void) { return 0; }\n");
        put(dir, "cmd/main.c", "/* cmd */\n");
        put(dir, "organism/index.html", "<h1>hello</h1>\nline 2\nline 3\n");
        put(dir, "organism/a.txt", "the file that moves\n");
        put(dir, "organism/run.sh", "#!/bin/sh\necho hi\n");
        put(dir, "knowledge/self.yaml", "name: t\n");
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", NULL), 0);
        assert_int_equal(repo_head(dir, ret_base), 0);
        return dir;
}

static struct repo_change *find(struct repo_change *c, size_t n, const char *path) {
        for (size_t i = 0; i < n; i++)
                if (streq(c[i].path, path))
                        return &c[i];
        return NULL;
}

/* ---- what existed before -------------------------------------------------- */

static void test_init_commit_and_generation(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        _cleanup_free_ char *err = NULL;
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", &err), 0);
        int gen = 0;
        assert_int_equal(repo_current_generation(dir, &gen), 0);
        assert_int_equal(gen, 1);

        struct repo_generation *g = NULL;
        size_t n = 0;
        assert_int_equal(repo_generations(dir, &g, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(g[0].number, 1);
        assert_string_equal(g[0].summary, "Initial seed");
        assert_int_equal(strlen(g[0].commit), 40);
        repo_generations_free(g, n);
        rm_rf(dir);
}

static void test_ignored_files_not_committed(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", NULL), 0);
        /* The object store must not contain the ignored file: look for its
         * path in the index file, which lists every tracked path. */
        _cleanup_free_ char *idx = path_join(dir, ".git/index");
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        assert_int_equal(read_file(idx, 1 << 20, &data, &len), 0);
        assert_null(memmem(data, len, ".seed/secret", 12));
        assert_non_null(memmem(data, len, "seed.yaml", 9));
        rm_rf(dir);
}

static void test_no_reinit(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        assert_int_equal(repo_init_commit(dir, "Initial seed", "seed/gen-1", NULL), 0);
        _cleanup_free_ char *err = NULL;
        assert_true(repo_init_commit(dir, "again", "seed/gen-1", &err) < 0);
        assert_non_null(err);
        rm_rf(dir);
}

static void test_not_a_repo(void **state) {
        int gen;
        assert_true(repo_current_generation("/nonexistent-seed-dir", &gen) < 0);
        assert_string_not_equal(repo_last_error(), "");
}

/* ---- worktrees and commits ----------------------------------------------------- */

static void test_worktree_lifecycle(void **state) {
        _cleanup_free_ char *base = NULL, *wt = NULL, *again = NULL, *oid = NULL, *head = NULL, *main_now = NULL;
        _cleanup_free_ char *seed = make_seed(&base);

        assert_int_equal(repo_worktree_add(seed, "t1", &wt), 0);
        assert_non_null(strstr(wt, "/.seed/worktrees/evo_t1"));
        assert_true(wt[0] == '/');
        _cleanup_free_ char *html = slurp(wt, "organism/index.html");
        assert_non_null(html);
        assert_non_null(strstr(html, "hello"));
        assert_int_equal(repo_head(wt, &head), 0);
        assert_string_equal(head, base);
        assert_true(exists_at(seed, ".git/worktrees/evo_t1"));
        assert_int_equal(repo_worktree_add(seed, "t1", &again), -EEXIST);
        assert_int_equal(repo_worktree_add(seed, "../x", &again), -EINVAL);

        /* A modification, a new file, a deletion, and ignored build output. */
        put(wt, "organism/index.html", "<h1>hello, world</h1>\nline 2\nline 3\n");
        put(wt, "organism/new.txt", "new\n");
        unlink_at(wt, "organism/run.sh");
        put(wt, "organism/.gitignore", "bin/\n");
        put(wt, "organism/bin/server", "ELF");
        assert_int_equal(repo_commit_worktree(wt, "evolve(t): one\n", &oid), 0);
        assert_int_equal(strlen(oid), 40);
        free(head);
        head = NULL;
        assert_int_equal(repo_head(wt, &head), 0);
        assert_string_equal(head, oid);
        assert_int_equal(repo_head(seed, &main_now), 0);
        assert_string_equal(main_now, base); /* main does not move */

        char **paths = NULL;
        assert_int_equal(repo_changed_paths(seed, base, oid, &paths), 4);
        assert_string_equal(paths[0], "organism/.gitignore");
        assert_string_equal(paths[1], "organism/index.html");
        assert_string_equal(paths[2], "organism/new.txt");
        assert_string_equal(paths[3], "organism/run.sh");
        strv_free(paths);

        /* Nothing left to commit. */
        _cleanup_free_ char *none = NULL;
        assert_int_equal(repo_commit_worktree(wt, "again", &none), -ENODATA);

        /* Removal, even with a directory the sandbox locked and a symlink to
         * a folder outside that must survive. */
        char outside[] = "/tmp/seed-test-outside-XXXXXX";
        assert_non_null(mkdtemp(outside));
        put(outside, "keep.txt", "keep");
        link_at(wt, "organism/out", outside);
        put(wt, "organism/locked/f", "x");
        _cleanup_free_ char *locked = path_join(wt, "organism/locked");
        assert_int_equal(chmod(locked, 0), 0);
        assert_int_equal(repo_worktree_remove(seed, "t1"), 0);
        assert_false(path_exists(wt));
        assert_false(exists_at(seed, ".git/worktrees/evo_t1"));
        assert_true(exists_at(outside, "keep.txt"));
        assert_int_equal(repo_worktree_remove(seed, "t1"), 0); /* idempotent */
        /* The branch is gone too: the same id can start again. */
        free(wt);
        wt = NULL;
        assert_int_equal(repo_worktree_add(seed, "t1", &wt), 0);
        assert_int_equal(repo_worktree_remove(seed, "t1"), 0);
        rm_rf(outside);
        rm_rf(seed);
}

static void test_message_trailers(void **state) {
        _cleanup_free_ char *m = NULL, *m2 = NULL, *m3 = NULL, *bad = NULL;
        assert_int_equal(repo_evolution_message("ui", "Add a todo list", "Adds a list.\n", "42", 1, 2, &m), 0);
        assert_string_equal(m, "evolve(ui): Add a todo list\n\nAdds a list.\n\nEvolution: evo_42\nGeneration: 1 -> 2\n");
        assert_int_equal(repo_evolution_message("UI Tweaks!", "two\nlines", NULL, "ab_c", 7, 8, &m2), 0);
        assert_string_equal(m2, "evolve(ui-tweaks): two lines\n\nEvolution: evo_ab_c\nGeneration: 7 -> 8\n");
        assert_int_equal(repo_evolution_message("!!", "t", NULL, "1", 1, 2, &bad), -EINVAL);
        assert_int_equal(repo_evolution_message("s", "  ", NULL, "1", 1, 2, &bad), -EINVAL);
        assert_int_equal(repo_evolution_message("s", "t", NULL, "no/slash", 1, 2, &bad), -EINVAL);
        assert_int_equal(repo_evolution_message("s", "t", NULL, "1", 2, 2, &bad), -EINVAL);
        assert_null(bad);

        /* The trailers survive a commit exactly, as git parses them. */
        _cleanup_free_ char *base = NULL, *wt = NULL, *oid = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        assert_int_equal(repo_worktree_add(seed, "42", &wt), 0);
        put(wt, "organism/todo.txt", "todo\n");
        assert_int_equal(repo_evolution_message("ui", "Add a todo list", "A body.", "42", 1, 2, &m3), 0);
        assert_int_equal(repo_commit_worktree(wt, m3, &oid), 0);
        git_libgit2_init();
        git_repository *r = NULL;
        git_commit *c = NULL;
        git_oid id;
        assert_int_equal(git_repository_open(&r, seed), 0);
        assert_int_equal(git_oid_fromstr(&id, oid), 0);
        assert_int_equal(git_commit_lookup(&c, r, &id), 0);
        assert_string_equal(git_commit_message(c), m3);
        git_message_trailer_array tr;
        assert_int_equal(git_message_trailers(&tr, git_commit_message(c)), 0);
        assert_int_equal(tr.count, 2);
        assert_string_equal(tr.trailers[0].key, "Evolution");
        assert_string_equal(tr.trailers[0].value, "evo_42");
        assert_string_equal(tr.trailers[1].key, "Generation");
        assert_string_equal(tr.trailers[1].value, "1 -> 2");
        git_message_trailer_array_free(&tr);
        git_commit_free(c);
        git_repository_free(r);
        git_libgit2_shutdown();
        assert_int_equal(repo_worktree_remove(seed, "42"), 0);
        rm_rf(seed);
}

static void test_tag_generation(void **state) {
        _cleanup_free_ char *base = NULL, *wt = NULL, *oid = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        assert_int_equal(repo_worktree_add(seed, "t", &wt), 0);
        put(wt, "organism/x.txt", "x\n");
        assert_int_equal(repo_commit_worktree(wt, "x", &oid), 0);
        assert_int_equal(repo_tag_generation(seed, oid, 2), 0);
        assert_int_equal(repo_tag_generation(seed, base, 2), -EEXIST);
        assert_non_null(strstr(repo_last_error(), "seed/gen-2"));
        assert_int_equal(repo_tag_generation(seed, oid, 0), -EINVAL);
        assert_int_equal(repo_tag_generation(seed, "not-an-oid", 3), -EINVAL);
        struct repo_generation *g = NULL;
        size_t n = 0;
        assert_int_equal(repo_generations(seed, &g, &n), 0);
        assert_int_equal(n, 2);
        assert_int_equal(g[1].number, 2);
        assert_string_equal(g[1].commit, oid);
        repo_generations_free(g, n);
        assert_int_equal(repo_worktree_remove(seed, "t"), 0);
        rm_rf(seed);
}

static void test_diff_bounded(void **state) {
        _cleanup_free_ char *base = NULL, *wt = NULL, *oid = NULL, *d = NULL, *d2 = NULL, *cut = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        assert_int_equal(repo_worktree_add(seed, "d", &wt), 0);
        put(wt, "organism/index.html", "<h1>hello</h1>\nline two\nline 3\n");
        put(wt, "organism/.gitignore", "bin/\n");
        put(wt, "organism/bin/server", "build output\n");
        link_at(wt, "organism/link", "index.html");
        link_at(wt, "organism/leak", "/etc/passwd");

        /* The working tree, as it would be committed (ignored output left out). */
        assert_int_equal(repo_diff(wt, base, NULL, 65536, &d), 0);
        assert_non_null(strstr(d, "diff --git a/organism/index.html b/organism/index.html\n"));
        assert_non_null(strstr(d, "--- a/organism/index.html\n+++ b/organism/index.html\n"));
        assert_non_null(strstr(d, "-line 2\n+line two\n"));
        assert_non_null(strstr(d, "new file mode 120000\n"));
        assert_null(strstr(d, "build output"));
        assert_non_null(strstr(d, "+/etc/passwd\n")); /* the link, never the file */
        assert_null(strstr(d, "root:"));
        assert_null(strstr(d, "[diff truncated]"));

        /* A change that keeps the file's size is hashed, not stored: still shown. */
        put(wt, "organism/same.txt", "one\n");
        _cleanup_free_ char *mid = NULL, *same = NULL;
        assert_int_equal(repo_commit_worktree(wt, "same size", &mid), 0);
        put(wt, "organism/same.txt", "two\n");
        assert_int_equal(repo_diff(wt, mid, NULL, 65536, &same), 0);
        assert_non_null(strstr(same, "-one\n+two\n"));

        /* Two commits: the same hunks. */
        assert_int_equal(repo_commit_worktree(wt, "c", &oid), 0);
        assert_int_equal(repo_diff(seed, base, oid, 65536, &d2), 0);
        assert_non_null(strstr(d2, "-line 2\n+line two\n"));
        assert_non_null(strstr(d2, "diff --git a/organism/link b/organism/link\n"));

        /* Bounded, with the marker. */
        struct buf big = BUF_INIT(1 << 20);
        for (int i = 0; i < 5000; i++)
                assert_int_equal(buf_printf(&big, "line %d\n", i), 0);
        put(wt, "organism/big.txt", big.data);
        buf_free(&big);
        assert_int_equal(repo_diff(wt, base, NULL, 300, &cut), 0);
        assert_true(strlen(cut) <= 300);
        assert_true(endswith(cut, "\n[diff truncated]\n"));
        _cleanup_free_ char *tiny = NULL;
        assert_int_equal(repo_diff(wt, base, NULL, 10, &tiny), -EINVAL);
        assert_int_equal(repo_worktree_remove(seed, "d"), 0);
        rm_rf(seed);
}

/* ---- the kernel boundary --------------------------------------------------- */

struct bcase {
        char *seed, *base, *wt;
        struct repo_change *c;
        size_t n;
};

static void bcase_start(struct bcase *b, const char *id) {
        *b = (struct bcase){0};
        b->seed = make_seed(&b->base);
        assert_int_equal(repo_worktree_add(b->seed, id, &b->wt), 0);
}

static void bcase_check(struct bcase *b) {
        repo_changes_free(b->c, b->n);
        b->c = NULL;
        b->n = 0;
        int r = repo_boundary_changes(b->wt, b->base, ev, &b->c, &b->n);
        if (r < 0)
                fail_msg("repo_boundary_changes: %d %s", r, repo_last_error());
}

static void bcase_end(struct bcase *b, const char *id) {
        repo_changes_free(b->c, b->n);
        assert_int_equal(repo_worktree_remove(b->seed, id), 0);
        rm_rf(b->seed);
        free(b->seed);
        free(b->base);
        free(b->wt);
}

/* Pins what the worktree holds at each path now (as an approved call would). */
struct pins {
        struct repo_pin *v;
        size_t n;
};

static void pin(struct bcase *b, struct pins *p, const char *path) {
        p->v = realloc(p->v, (p->n + 1) * sizeof *p->v);
        assert_non_null(p->v);
        int r = repo_pin_take(b->wt, path, &p->v[p->n]);
        if (r < 0)
                fail_msg("repo_pin_take %s: %d %s", path, r, repo_last_error());
        p->n++;
}

static int violations(struct bcase *b, struct pins *p, char **ret_text) {
        return repo_boundary_violations(b->c, b->n, p->v, p->n, ret_text);
}

/* One protected change at path of the given kind, and a violation naming it. */
static struct repo_change *expect_protected(struct bcase *b, const char *path, enum repo_change_kind kind) {
        struct repo_change *c = find(b->c, b->n, path);
        if (!c)
                fail_msg("no change reported at %s", path);
        assert_int_equal(c->kind, kind);
        assert_true(c->protected);
        assert_non_null(c->reason);
        _cleanup_free_ char *text = NULL;
        assert_true(repo_boundary_violations(b->c, b->n, NULL, 0, &text) >= 1);
        assert_non_null(strstr(text, path));
        assert_true(startswith(text, "kernel boundary violated: "));
        return c;
}

static void test_boundary_kernel_edit(void **state) {
        struct bcase b;
        bcase_start(&b, "b1");
        bcase_check(&b);
        assert_int_equal(b.n, 0); /* a fresh worktree is clean */
        put(b.wt, "kernel/app.c", "int main(void) { return 1; }\n");
        bcase_check(&b);
        assert_int_equal(b.n, 1);
        struct repo_change *c = expect_protected(&b, "kernel/app.c", REPO_CHANGE_MODIFIED);
        assert_string_equal(c->reason, "outside the evolvable directories");
        bcase_end(&b, "b1");
}

static void test_boundary_new_root_file(void **state) {
        struct bcase b;
        bcase_start(&b, "b2");
        put(b.wt, "go.work", "go 1.22\n");
        bcase_check(&b);
        struct repo_change *c = expect_protected(&b, "go.work", REPO_CHANGE_ADDED);
        assert_int_equal(c->new_mode, REPO_MODE_FILE);
        bcase_end(&b, "b2");
}

static void test_boundary_delete_in_cmd(void **state) {
        struct bcase b;
        bcase_start(&b, "b3");
        unlink_at(b.wt, "cmd/main.c");
        bcase_check(&b);
        assert_int_equal(b.n, 1);
        struct repo_change *c = expect_protected(&b, "cmd/main.c", REPO_CHANGE_DELETED);
        assert_int_equal(c->old_mode, REPO_MODE_FILE);
        assert_int_equal(c->new_mode, 0);
        bcase_end(&b, "b3");
}

static void test_boundary_rename_into_kernel(void **state) {
        struct bcase b;
        bcase_start(&b, "b4");
        _cleanup_free_ char *from = path_join(b.wt, "organism/a.txt"), *to = path_join(b.wt, "kernel/a.txt");
        assert_int_equal(rename(from, to), 0);
        bcase_check(&b);
        assert_int_equal(b.n, 1);
        struct repo_change *c = expect_protected(&b, "kernel/a.txt", REPO_CHANGE_RENAMED);
        assert_string_equal(c->old_path, "organism/a.txt");
        assert_true(c->new_protected);
        assert_false(c->old_protected);
        /* approving the protected side is enough */
        struct pins ok = {0};
        pin(&b, &ok, "kernel/a.txt");
        _cleanup_free_ char *text = NULL;
        assert_int_equal(violations(&b, &ok, &text), 0);
        assert_null(text);
        repo_pins_free(ok.v, ok.n);
        bcase_end(&b, "b4");
}

static void test_boundary_chmod_kernel(void **state) {
        struct bcase b;
        bcase_start(&b, "b5");
        _cleanup_free_ char *p = path_join(b.wt, "kernel/app.c");
        assert_int_equal(chmod(p, 0755), 0);
        bcase_check(&b);
        assert_int_equal(b.n, 1);
        struct repo_change *c = expect_protected(&b, "kernel/app.c", REPO_CHANGE_MODE_CHANGED);
        assert_int_equal(c->old_mode, REPO_MODE_FILE);
        assert_int_equal(c->new_mode, REPO_MODE_EXECUTABLE);
        bcase_end(&b, "b5");
}

static void test_boundary_symlinks(void **state) {
        struct bcase b;
        bcase_start(&b, "b6");
        link_at(b.wt, "organism/x", "../kernel/app.c");
        link_at(b.wt, "organism/y", "/etc/passwd");
        link_at(b.wt, "organism/z", "../../outside");
        link_at(b.wt, "organism/ok", "index.html");
        put(b.wt, "organism/sub/f", "f\n");
        link_at(b.wt, "organism/sub/up", "../index.html");
        link_at(b.wt, "organism/dot", ".");
        /* through organism/dot, "dot/../kernel" really is kernel/: refused */
        link_at(b.wt, "organism/tricky", "dot/../kernel");
        link_at(b.wt, "knowledge/other", "../organism/index.html");
        bcase_check(&b);
        struct repo_change *c = expect_protected(&b, "organism/x", REPO_CHANGE_ADDED);
        assert_true(c->symlink);
        assert_string_equal(c->link_target, "../kernel/app.c");
        assert_int_equal(c->new_mode, REPO_MODE_SYMLINK);
        assert_string_equal(c->reason, "a symlink leaving its evolvable directory");
        c = expect_protected(&b, "organism/y", REPO_CHANGE_ADDED);
        assert_string_equal(c->reason, "a symlink with an absolute target");
        expect_protected(&b, "organism/z", REPO_CHANGE_ADDED);
        expect_protected(&b, "organism/tricky", REPO_CHANGE_ADDED);
        expect_protected(&b, "knowledge/other", REPO_CHANGE_ADDED);
        const char *fine[] = {"organism/ok", "organism/sub/up", "organism/dot", "organism/sub/f"};
        for (size_t i = 0; i < ARRAY_SIZE(fine); i++) {
                c = find(b.c, b.n, fine[i]);
                assert_non_null(c);
                assert_false(c->protected);
                assert_null(c->reason);
        }
        /* a file turned into a symlink is a type change */
        unlink_at(b.wt, "organism/index.html");
        link_at(b.wt, "organism/index.html", "../seed.yaml");
        bcase_check(&b);
        expect_protected(&b, "organism/index.html", REPO_CHANGE_TYPE_CHANGED);
        bcase_end(&b, "b6");
}

static void test_boundary_ignored_files_are_seen(void **state) {
        struct bcase b;
        bcase_start(&b, "b7");
        /* The model's own .gitignore cannot hide its files ... */
        put(b.wt, "organism/.gitignore", "secret.txt\n");
        put(b.wt, "organism/secret.txt", "s\n");
        /* ... and a file in the kernel that the root .gitignore ignores is
         * still a change outside the evolvable dirs. */
        put(b.wt, "build-x/evil.o", "o\n");
        /* The sandbox's .seed mount point is not a change. */
        _cleanup_free_ char *dotseed = path_join(b.wt, ".seed");
        assert_int_equal(mkdir(dotseed, 0700), 0);
        put(b.wt, ".seed/junk", "j");
        bcase_check(&b);
        assert_int_equal(b.n, 3);
        struct repo_change *c = find(b.c, b.n, "organism/secret.txt");
        assert_non_null(c);
        assert_true(c->ignored);
        assert_false(c->protected);
        c = expect_protected(&b, "build-x/evil.o", REPO_CHANGE_ADDED);
        assert_true(c->ignored);
        assert_null(find(b.c, b.n, ".seed/junk"));
        bcase_end(&b, "b7");
}

static void test_boundary_gitattributes(void **state) {
        struct bcase b;
        bcase_start(&b, "b8");
        put(b.wt, "organism/.gitattributes", "* filter=evil\n");
        put(b.wt, "knowledge/deep/.gitmodules", "[submodule]\n");
        bcase_check(&b);
        struct repo_change *c = expect_protected(&b, "organism/.gitattributes", REPO_CHANGE_ADDED);
        assert_string_equal(c->reason, "a .gitattributes or .gitmodules file");
        expect_protected(&b, "knowledge/deep/.gitmodules", REPO_CHANGE_ADDED);
        bcase_end(&b, "b8");
}

static void test_boundary_gitlinks(void **state) {
        struct bcase b;
        bcase_start(&b, "b9");
        /* A gitlink only in the worktree's index. */
        git_libgit2_init();
        git_repository *r = NULL;
        git_index *idx = NULL;
        assert_int_equal(git_repository_open(&r, b.wt), 0);
        assert_int_equal(git_repository_index(&idx, r), 0);
        git_index_entry e = {0};
        e.path = "organism/sub";
        e.mode = GIT_FILEMODE_COMMIT;
        assert_int_equal(git_oid_fromstr(&e.id, b.base), 0);
        assert_int_equal(git_index_add(idx, &e), 0);
        assert_int_equal(git_index_write(idx), 0);
        git_index_free(idx);
        git_repository_free(r);
        git_libgit2_shutdown();
        /* A nested repository on disk. */
        put(b.wt, "organism/vendor/lib/.git/HEAD", "ref: refs/heads/main\n");
        put(b.wt, "organism/vendor/lib/code.c", "x\n");
        bcase_check(&b);
        struct repo_change *c = expect_protected(&b, "organism/sub", REPO_CHANGE_ADDED);
        assert_true(c->gitlink);
        assert_true(c->from_index);
        c = expect_protected(&b, "organism/vendor/lib", REPO_CHANGE_ADDED);
        assert_true(c->gitlink);
        assert_false(c->from_index);
        assert_null(find(b.c, b.n, "organism/vendor/lib/code.c"));
        bcase_end(&b, "b9");
}

static void test_boundary_worktree_gitfile(void **state) {
        struct bcase b;
        bcase_start(&b, "b10");
        put(b.wt, ".git", "gitdir: /tmp/somewhere-else\n");
        bcase_check(&b);
        struct repo_change *c = expect_protected(&b, ".git", REPO_CHANGE_MODIFIED);
        assert_true(c->never_approvable);
        struct pins all = {0};
        pin(&b, &all, ".git");
        _cleanup_free_ char *text = NULL;
        assert_int_equal(violations(&b, &all, &text), 1);
        repo_pins_free(all.v, all.n);
        bcase_end(&b, "b10");
}

static void test_boundary_gitdir_snapshot(void **state) {
        _cleanup_free_ char *base = NULL, *snap = NULL, *snap2 = NULL, *wt = NULL, *oid = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        char **paths = NULL;
        assert_int_equal(repo_gitdir_snapshot(seed, &snap), 0);
        assert_non_null(strstr(snap, "config\tf\t"));
        /* A whole evolution's git work changes none of it. */
        assert_int_equal(repo_worktree_add(seed, "g", &wt), 0);
        put(wt, "organism/n.txt", "n\n");
        assert_int_equal(repo_commit_worktree(wt, "n", &oid), 0);
        assert_int_equal(repo_tag_generation(seed, oid, 2), 0);
        assert_int_equal(repo_fast_forward_main(seed, oid), 0);
        assert_int_equal(repo_worktree_remove(seed, "g"), 0);
        assert_int_equal(repo_gitdir_changed(seed, snap, &paths), 0);
        assert_null(paths[0]);
        strv_free(paths);
        /* A new hook, a changed config, a removed info file. */
        put(seed, ".git/hooks/pre-commit", "#!/bin/sh\ncurl evil\n");
        _cleanup_free_ char *cfg = slurp(seed, ".git/config");
        _cleanup_free_ char *cfg2 = NULL;
        assert_int_equal(xasprintf(&cfg2, "%s[core]\n\thooksPath = /tmp\n", cfg), 0);
        put(seed, ".git/config", cfg2);
        bool had_exclude = exists_at(seed, ".git/info/exclude");
        if (had_exclude)
                unlink_at(seed, ".git/info/exclude");
        int n = repo_gitdir_changed(seed, snap, &paths);
        assert_int_equal(n, had_exclude ? 3 : 2);
        assert_string_equal(paths[0], ".git/config");
        assert_string_equal(paths[1], ".git/hooks/pre-commit");
        if (had_exclude)
                assert_string_equal(paths[2], ".git/info/exclude");
        _cleanup_free_ char *text = NULL;
        assert_int_equal(repo_boundary_message(paths, &text), 0);
        assert_string_equal(text, had_exclude ? "kernel boundary violated: .git/config, .git/hooks/pre-commit, .git/info/exclude"
                                              : "kernel boundary violated: .git/config, .git/hooks/pre-commit");
        strv_free(paths);
        /* Snapshots are comparable text. */
        assert_int_equal(repo_gitdir_snapshot(seed, &snap2), 0);
        assert_string_not_equal(snap, snap2);
        rm_rf(seed);
}

static void test_boundary_evolvable_only(void **state) {
        struct bcase b;
        bcase_start(&b, "b11");
        put(b.wt, "organism/index.html", "<h1>new</h1>\n");
        put(b.wt, "organism/app/main.js", "console.log(1)\n");
        unlink_at(b.wt, "organism/run.sh");
        put(b.wt, "knowledge/notes.md", "# notes\n");
        put(b.wt, "skills/x/SKILL.md", "---\nname: x\n---\n");
        _cleanup_free_ char *sh = path_join(b.wt, "organism/app/main.js");
        assert_int_equal(chmod(sh, 0755), 0);
        bcase_check(&b);
        assert_int_equal(b.n, 5);
        for (size_t i = 0; i < b.n; i++)
                assert_false(b.c[i].protected);
        assert_int_equal(find(b.c, b.n, "organism/run.sh")->kind, REPO_CHANGE_DELETED);
        assert_int_equal(find(b.c, b.n, "organism/app/main.js")->new_mode, REPO_MODE_EXECUTABLE);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(repo_boundary_violations(b.c, b.n, NULL, 0, &text), 0);
        assert_null(text);
        /* Sorted by path. */
        for (size_t i = 1; i < b.n; i++)
                assert_true(strcmp(b.c[i - 1].path, b.c[i].path) < 0);
        bcase_end(&b, "b11");
}

static void test_boundary_approvals_per_path(void **state) {
        struct bcase b;
        bcase_start(&b, "b12");
        put(b.wt, "kernel/app.c", "changed\n");
        put(b.wt, "cmd/main.c", "changed\n");
        put(b.wt, "cmd/other.c", "new\n");
        bcase_check(&b);
        assert_int_equal(b.n, 3);
        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL;
        struct pins one = {0}, none = {0}, all = {0};
        pin(&b, &one, "kernel/app.c");
        assert_int_equal(violations(&b, &one, &t1), 2);
        assert_string_equal(t1, "kernel boundary violated: cmd/main.c, cmd/other.c");
        assert_int_equal(violations(&b, &none, &t2), 3);
        assert_string_equal(t2, "kernel boundary violated: cmd/main.c, cmd/other.c, kernel/app.c");
        pin(&b, &all, "kernel/app.c");
        pin(&b, &all, "cmd/main.c");
        pin(&b, &all, "cmd/other.c");
        assert_int_equal(violations(&b, &all, &t3), 0);
        assert_null(t3);
        /* A pin is the content, not the path: what a later command writes
         * there, or a chmod, is a violation again. */
        put(b.wt, "cmd/main.c", "changed again\n");
        _cleanup_free_ char *p = path_join(b.wt, "kernel/app.c");
        assert_int_equal(chmod(p, 0755), 0);
        bcase_check(&b);
        assert_int_equal(violations(&b, &all, &t4), 2);
        assert_string_equal(t4, "kernel boundary violated: cmd/main.c, kernel/app.c");
        /* The latest pin of a path counts. */
        pin(&b, &all, "cmd/main.c");
        pin(&b, &all, "kernel/app.c");
        _cleanup_free_ char *t5 = NULL;
        assert_int_equal(violations(&b, &all, &t5), 0);
        repo_pins_free(one.v, one.n);
        repo_pins_free(all.v, all.n);
        bcase_end(&b, "b12");
}

static void test_boundary_pins_of_deletions(void **state) {
        struct bcase b;
        bcase_start(&b, "b14");
        struct pins early = {0}, gone = {0};
        /* Pinned while present, then deleted: not what was approved. */
        pin(&b, &early, "cmd/main.c");
        unlink_at(b.wt, "cmd/main.c");
        _cleanup_free_ char *kdir = path_join(b.wt, "kernel");
        unlink_at(b.wt, "kernel/app.c");
        assert_int_equal(rmdir(kdir), 0);
        bcase_check(&b);
        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL;
        assert_int_equal(violations(&b, &early, &t1), 2);
        /* A path pinned as gone covers its deletion; a directory pinned as
         * gone covers every deletion below it. */
        pin(&b, &gone, "cmd/main.c");
        pin(&b, &gone, "kernel");
        assert_int_equal(gone.v[1].mode, 0);
        assert_string_equal(gone.v[1].oid, "");
        assert_int_equal(violations(&b, &gone, &t2), 0);
        /* ...but not a new file that appears there. */
        put(b.wt, "kernel/new.c", "x\n");
        bcase_check(&b);
        assert_int_equal(violations(&b, &gone, &t3), 1);
        assert_string_equal(t3, "kernel boundary violated: kernel/new.c");
        /* A directory pins nothing; a symlink on the way is refused. */
        struct repo_pin p;
        assert_int_equal(repo_pin_take(b.wt, "organism", &p), -EISDIR);
        _cleanup_free_ char *ln = path_join(b.wt, "organism/ln");
        assert_int_equal(symlink("../kernel", ln), 0);
        assert_true(repo_pin_take(b.wt, "organism/ln/new.c", &p) < 0);
        repo_pins_free(early.v, early.n);
        repo_pins_free(gone.v, gone.n);
        bcase_end(&b, "b14");
}

static void test_boundary_between_commits(void **state) {
        struct bcase b;
        bcase_start(&b, "b13");
        put(b.wt, "kernel/app.c", "changed\n");
        put(b.wt, "organism/n.txt", "n\n");
        link_at(b.wt, "organism/l", "/etc/hostname");
        _cleanup_free_ char *oid = NULL;
        assert_int_equal(repo_commit_worktree(b.wt, "c", &oid), 0);
        struct repo_change *c = NULL;
        size_t n = 0;
        assert_int_equal(repo_boundary_changes_between(b.seed, b.base, oid, ev, &c, &n), 0);
        assert_int_equal(n, 3);
        assert_true(find(c, n, "kernel/app.c")->protected);
        assert_false(find(c, n, "organism/n.txt")->protected);
        /* the symlink was committed as a link, its target checked */
        struct repo_change *l = find(c, n, "organism/l");
        assert_int_equal(l->new_mode, REPO_MODE_SYMLINK);
        assert_string_equal(l->link_target, "/etc/hostname");
        assert_true(l->protected);
        repo_changes_free(c, n);
        /* after the commit, the worktree still shows the same three changes */
        bcase_check(&b);
        assert_int_equal(b.n, 3);
        bcase_end(&b, "b13");
}

static void test_boundary_bad_input(void **state) {
        struct bcase b;
        bcase_start(&b, "b14");
        char *bad_ev[] = {"../organism/", NULL};
        assert_int_equal(repo_boundary_changes(b.wt, b.base, bad_ev, &b.c, &b.n), -EINVAL);
        assert_int_equal(repo_boundary_changes(b.wt, "xyz", ev, &b.c, &b.n), -EINVAL);
        assert_true(repo_boundary_changes("/nonexistent/.seed/worktrees/evo_x", b.base, ev, &b.c, &b.n) < 0);
        assert_null(b.c);
        bcase_end(&b, "b14");
}

static void test_open_beneath_refuses_symlinks(void **state) {
        _cleanup_free_ char *dir = make_seed_dir();
        put(dir, "organism/real.txt", "real\n");
        link_at(dir, "organism/etc", "/etc");
        link_at(dir, "organism/file", "real.txt");
        _cleanup_close_ int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(root >= 0);
        int fd = repo_open_beneath(root, "organism/real.txt", O_RDONLY);
        assert_true(fd >= 0);
        close(fd);
        assert_true(repo_open_beneath(root, "organism/etc/hostname", O_RDONLY) < 0);
        assert_true(repo_open_beneath(root, "organism/file", O_RDONLY) < 0);
        assert_int_equal(repo_open_beneath(root, "organism/../seed.yaml", O_RDONLY), -EINVAL);
        assert_int_equal(repo_open_beneath(root, "/etc/hostname", O_RDONLY), -EINVAL);
        assert_int_equal(repo_open_beneath(root, "..", O_RDONLY), -EINVAL);
        rm_rf(dir);
}

/* ---- main: fast-forward and restore --------------------------------------------- */

static char *evolve(const char *seed, const char *id, const char *rel, const char *content) {
        _cleanup_free_ char *wt = NULL;
        char *oid = NULL;
        assert_int_equal(repo_worktree_add(seed, id, &wt), 0);
        put(wt, rel, content);
        assert_int_equal(repo_commit_worktree(wt, id, &oid), 0);
        assert_int_equal(repo_worktree_remove(seed, id), 0);
        return oid;
}

/* Boot recovery of an apply cut short between the fast-forward and the tag. */
static void test_undo_untagged(void **state) {
        _cleanup_free_ char *base = NULL, *msg = NULL, *oid = NULL, *wt = NULL, *head = NULL, *head2 = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        int gen = 0;
        assert_int_equal(repo_worktree_add(seed, "u1", &wt), 0);
        put(wt, "organism/index.html", "from u1\n");
        assert_int_equal(repo_evolution_message("s", "t", NULL, "u1", 1, 2, &msg), 0);
        assert_int_equal(repo_commit_worktree(wt, msg, &oid), 0);
        /* main has not moved: nothing to undo */
        assert_int_equal(repo_main_undo_untagged(seed, "evo_u1", &gen), 0);
        assert_int_equal(repo_fast_forward_main(seed, oid), 0);
        /* another evolution's commit, or no evolution id: left alone */
        assert_int_equal(repo_main_undo_untagged(seed, "evo_other", &gen), 0);
        assert_int_equal(repo_main_undo_untagged(seed, "u1", &gen), -EINVAL);
        assert_int_equal(repo_main_undo_untagged(seed, "evo_u1", &gen), 1);
        assert_int_equal(gen, 1);
        assert_int_equal(repo_head(seed, &head), 0);
        assert_string_equal(head, base);
        _cleanup_free_ char *html = slurp(seed, "organism/index.html");
        assert_string_equal(html, "<h1>hello</h1>\nline 2\nline 3\n");
        /* tagged, main is a generation: nothing to undo */
        assert_int_equal(repo_fast_forward_main(seed, oid), 0);
        assert_int_equal(repo_tag_generation(seed, oid, 2), 0);
        assert_int_equal(repo_main_undo_untagged(seed, "evo_u1", &gen), 0);
        assert_int_equal(repo_head(seed, &head2), 0);
        assert_string_equal(head2, oid);
        assert_int_equal(repo_worktree_remove(seed, "u1"), 0);
        (void)state;
}

static void test_fast_forward(void **state) {
        _cleanup_free_ char *base = NULL, *a = NULL, *b = NULL, *head = NULL, *wt = NULL, *c = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        put(seed, "build-1/out.o", "ignored\n");
        put(seed, "untracked.txt", "mine\n");

        /* Two evolutions from the same base. */
        a = evolve(seed, "a", "organism/index.html", "from a\n");
        assert_int_equal(repo_worktree_add(seed, "b", &wt), 0);
        put(wt, "organism/index.html", "from b\n");
        unlink_at(wt, "organism/a.txt");
        assert_int_equal(repo_commit_worktree(wt, "b", &b), 0);

        assert_int_equal(repo_fast_forward_main(seed, b), 0);
        assert_int_equal(repo_head(seed, &head), 0);
        assert_string_equal(head, b);
        _cleanup_free_ char *html = slurp(seed, "organism/index.html");
        assert_string_equal(html, "from b\n");
        assert_false(exists_at(seed, "organism/a.txt"));
        _cleanup_free_ char *secret = slurp(seed, ".seed/secret"), *ign = slurp(seed, "build-1/out.o"),
                            *mine = slurp(seed, "untracked.txt");
        assert_string_equal(secret, "x");
        assert_string_equal(ign, "ignored\n");
        assert_string_equal(mine, "mine\n");
        /* The index follows: the folder is clean against main. */
        struct repo_change *ch = NULL;
        size_t n = 0;
        assert_int_equal(repo_boundary_changes(seed, b, ev, &ch, &n), 0);
        for (size_t i = 0; i < n; i++)
                assert_true(ch[i].ignored || streq(ch[i].path, "untracked.txt"));
        repo_changes_free(ch, n);

        /* a does not descend from main any more. */
        assert_int_equal(repo_fast_forward_main(seed, a), -ENOTRECOVERABLE);
        assert_non_null(strstr(repo_last_error(), "not a fast-forward"));
        free(head);
        head = NULL;
        assert_int_equal(repo_head(seed, &head), 0);
        assert_string_equal(head, b);
        assert_int_equal(repo_fast_forward_main(seed, b), 0); /* already there */

        /* A file changed by hand in the folder is a conflict, not lost. */
        put(wt, "organism/index.html", "from b, again\n");
        assert_int_equal(repo_commit_worktree(wt, "b2", &c), 0);
        put(seed, "organism/index.html", "edited by the owner\n");
        assert_int_equal(repo_fast_forward_main(seed, c), -EBUSY);
        free(head);
        head = NULL;
        assert_int_equal(repo_head(seed, &head), 0);
        assert_string_equal(head, b);
        free(html);
        html = slurp(seed, "organism/index.html");
        assert_string_equal(html, "edited by the owner\n");
        assert_int_equal(repo_worktree_remove(seed, "b"), 0);
        rm_rf(seed);
}

static void test_restore_generation(void **state) {
        _cleanup_free_ char *base = NULL, *g2 = NULL, *g3 = NULL, *head = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        g2 = evolve(seed, "two", "organism/extra.txt", "gen 2\n");
        assert_int_equal(repo_tag_generation(seed, g2, 2), 0);
        assert_int_equal(repo_fast_forward_main(seed, g2), 0);
        assert_true(exists_at(seed, "organism/extra.txt"));
        int gen = 0;
        assert_int_equal(repo_current_generation(seed, &gen), 0);
        assert_int_equal(gen, 2);

        assert_int_equal(repo_restore_tree_commit(seed, 1, "rollback to generation 1\n", &g3), 0);
        assert_string_not_equal(g3, base);
        assert_int_equal(repo_head(seed, &head), 0);
        assert_string_equal(head, g3);
        char **paths = NULL;
        assert_int_equal(repo_changed_paths(seed, base, g3, &paths), 0); /* gen 1's tree */
        strv_free(paths);
        assert_int_equal(repo_changed_paths(seed, g2, g3, &paths), 1);
        assert_string_equal(paths[0], "organism/extra.txt");
        strv_free(paths);
        assert_false(exists_at(seed, "organism/extra.txt"));
        assert_true(exists_at(seed, ".seed/secret"));
        assert_int_equal(repo_tag_generation(seed, g3, 3), 0);

        struct repo_log_entry *log = NULL;
        size_t n = 0;
        assert_int_equal(repo_log(seed, 10, &log, &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(log[0].oid, g3);
        assert_string_equal(log[0].summary, "rollback to generation 1");
        assert_string_equal(log[2].oid, base);
        assert_true(log[0].time > 0);
        repo_log_free(log, n);
        assert_int_equal(repo_log(seed, 1, &log, &n), 0);
        assert_int_equal(n, 1);
        repo_log_free(log, n);

        _cleanup_free_ char *none = NULL;
        assert_int_equal(repo_restore_tree_commit(seed, 9, "x", &none), -ENOENT);
        assert_null(none);
        rm_rf(seed);
}

/* ---- the owner's commits on main ------------------------------------------ */

/* What the owner does with git: change a file and commit it on main (as
 * `git commit -a` would; libgit2 here instead of the git CLI). Caller frees. */
static char *owner_commit(const char *seed, const char *rel, const char *content, const char *message) {
        put(seed, rel, content);
        git_libgit2_init();
        git_repository *r = NULL;
        git_index *idx = NULL;
        git_tree *tree = NULL;
        git_commit *parent = NULL;
        git_signature *sig = NULL;
        git_oid tree_oid, parent_oid, oid;
        assert_int_equal(git_repository_open(&r, seed), 0);
        assert_int_equal(git_repository_index(&idx, r), 0);
        assert_int_equal(git_index_add_bypath(idx, rel), 0);
        assert_int_equal(git_index_write(idx), 0);
        assert_int_equal(git_index_write_tree(&tree_oid, idx), 0);
        assert_int_equal(git_tree_lookup(&tree, r, &tree_oid), 0);
        assert_int_equal(git_reference_name_to_id(&parent_oid, r, "HEAD"), 0);
        assert_int_equal(git_commit_lookup(&parent, r, &parent_oid), 0);
        assert_int_equal(git_signature_now(&sig, "Owner", "owner@example.org"), 0);
        const git_commit *parents[] = {parent};
        assert_int_equal(git_commit_create(&oid, r, "HEAD", sig, sig, NULL, message, tree, 1, parents), 0);
        char hex[41];
        git_oid_tostr(hex, sizeof hex, &oid);
        git_signature_free(sig);
        git_commit_free(parent);
        git_tree_free(tree);
        git_index_free(idx);
        git_repository_free(r);
        git_libgit2_shutdown();
        return strdup(hex);
}

/* Points a ref of the Seed (main, or HEAD detached) at a commit. */
static void set_ref(const char *seed, const char *name, const char *hex) {
        git_libgit2_init();
        git_repository *r = NULL;
        git_oid oid;
        assert_int_equal(git_repository_open(&r, seed), 0);
        assert_int_equal(git_oid_fromstr(&oid, hex), 0);
        if (streq(name, "HEAD"))
                assert_int_equal(git_repository_set_head_detached(r, &oid), 0);
        else {
                git_reference *ref = NULL;
                assert_int_equal(git_reference_create(&ref, r, name, &oid, 1, "test"), 0);
                git_reference_free(ref);
        }
        git_repository_free(r);
        git_libgit2_shutdown();
}

/* Renames every object folder of .git/objects (hide) or back. */
static void hide_objects(const char *seed, bool hide) {
        _cleanup_free_ char *objs = path_join(seed, ".git/objects");
        DIR *d = opendir(objs);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
                bool obj = strlen(e->d_name) == 2 && isxdigit((unsigned char)e->d_name[0]);
                bool hidden = strlen(e->d_name) == 3 && e->d_name[0] == 'h';
                if (hide ? !(obj || streq(e->d_name, "pack")) : !(hidden || streq(e->d_name, "hpack")))
                        continue;
                char to[300];
                snprintf(to, sizeof to, "%s", hide ? "h" : "");
                snprintf(to + strlen(to), sizeof to - strlen(to), "%s", hide ? e->d_name : e->d_name + 1);
                assert_int_equal(renameat(dirfd(d), e->d_name, dirfd(d), to), 0);
        }
        closedir(d);
}

/* The refs cache answers as repo_live_generation() and repo_owner_change()
 * would, at once after a new generation or an owner's commit, and without
 * reading the repository while its refs stand still. */
static void test_refs_cache(void **state) {
        _cleanup_free_ char *base = NULL, *c1 = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        struct fswatch watch;
        struct repo_refs_cache cache;
        struct repo_owner_change oc;
        int gen = 0;
        assert_int_equal(fswatch_init(&watch), 0);
        assert_int_equal(repo_refs_cache_init(&cache, seed, &watch), 0);
        assert_int_equal(repo_refs_cache_generation(&cache, &gen), 0);
        assert_int_equal(gen, 1);
        assert_int_equal(repo_refs_cache_owner_change(&cache, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_NONE);
        repo_owner_change_done(&oc);

        /* Served from memory: with the objects hidden (renamed inside
         * .git/objects, where no ref lives), a real read fails, the cache
         * still answers. */
        hide_objects(seed, true);
        assert_true(repo_owner_change(seed, &oc) < 0);
        assert_int_equal(repo_refs_cache_owner_change(&cache, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_NONE);
        repo_owner_change_done(&oc);
        hide_objects(seed, false);

        /* The owner commits: seen at once, subject and all. */
        c1 = owner_commit(seed, "seed.yaml", "name: t\n# mine\n", "Pick a model");
        assert_int_equal(repo_refs_cache_owner_change(&cache, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_COMMITS);
        assert_string_equal(oc.head, c1);
        assert_string_equal(oc.subject, "Pick a model");
        repo_owner_change_done(&oc);

        /* A new generation: seen at once. */
        _cleanup_free_ char *g2 = evolve(seed, "two", "organism/extra.txt", "gen 2\n");
        set_ref(seed, "refs/heads/main", g2);
        assert_int_equal(repo_tag_generation(seed, g2, 2), 0);
        assert_int_equal(repo_refs_cache_generation(&cache, &gen), 0);
        assert_int_equal(gen, 2);
        assert_int_equal(repo_refs_cache_owner_change(&cache, &oc), 0);
        assert_int_equal(oc.generation, 2);
        assert_string_equal(oc.generation_commit, g2);
        repo_owner_change_done(&oc);

        /* Invalidated: read again (and a failure is an answer too). */
        hide_objects(seed, true);
        repo_refs_cache_invalidate(&cache);
        assert_true(repo_refs_cache_owner_change(&cache, &oc) < 0);
        hide_objects(seed, false);
        repo_refs_cache_invalidate(&cache);
        assert_int_equal(repo_refs_cache_owner_change(&cache, &oc), 0);
        repo_owner_change_done(&oc);
        repo_refs_cache_done(&cache);

        /* Without inotify (its limits reached): every question reads. */
        fswatch_done(&watch);
        assert_int_equal(fswatch_init(&watch), 0);
        close(watch.fd);
        watch.fd = -1;
        assert_int_equal(repo_refs_cache_init(&cache, seed, &watch), 0);
        uint64_t v = repo_refs_cache_version(&cache, fswatch_changes(&watch));
        assert_true(repo_refs_cache_version(&cache, fswatch_changes(&watch)) > v);
        assert_int_equal(repo_refs_cache_generation(&cache, &gen), 0);
        assert_int_equal(gen, 2);
        hide_objects(seed, true);
        assert_true(repo_refs_cache_owner_change(&cache, &oc) < 0);
        hide_objects(seed, false);
        repo_refs_cache_done(&cache);
        fswatch_done(&watch);
        rm_rf(seed);
}

/* The version is read past the lock while nothing moved: the same number
 * while the refs stand, a new one at once after a commit or an
 * invalidation — also while other threads keep asking (and so draining the
 * watch) at the same time: a question that begins after a commit returned
 * never answers from before it. */
struct version_askers {
        struct fswatch *watch;
        struct repo_refs_cache *cache;
        atomic_bool stop;
};

static void *ask_versions(void *arg) {
        struct version_askers *a = arg;
        while (!atomic_load(&a->stop))
                (void)repo_refs_cache_version(a->cache, fswatch_changes(a->watch));
        return NULL;
}

static void test_refs_cache_version(void **state) {
        _cleanup_free_ char *base = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        struct fswatch watch;
        struct repo_refs_cache cache;
        assert_int_equal(fswatch_init(&watch), 0);
        assert_int_equal(repo_refs_cache_init(&cache, seed, &watch), 0);
#define VERSION() repo_refs_cache_version(&cache, fswatch_changes(&watch))
        uint64_t v = VERSION();
        assert_int_equal(VERSION(), v);
        assert_int_equal(VERSION(), v);
        repo_refs_cache_invalidate(&cache);
        uint64_t w = VERSION();
        assert_true(w != v);

        struct version_askers a = {.watch = &watch, .cache = &cache};
        pthread_t th[3];
        for (size_t i = 0; i < ARRAY_SIZE(th); i++)
                assert_int_equal(pthread_create(&th[i], NULL, ask_versions, &a), 0);
        for (int i = 0; i < 40; i++) {
                char content[64], msg[32];
                snprintf(content, sizeof content, "name: t\n# change %d\n", i);
                snprintf(msg, sizeof msg, "Change %d", i);
                uint64_t before = VERSION();
                free(owner_commit(seed, "seed.yaml", content, msg));
                uint64_t after = VERSION();
                if (after == before)
                        fail_msg("commit %d: the version did not move (%llu)", i, (unsigned long long)after);
        }
        atomic_store(&a.stop, true);
        for (size_t i = 0; i < ARRAY_SIZE(th); i++)
                pthread_join(th[i], NULL);
        struct repo_owner_change oc;
        assert_int_equal(repo_refs_cache_owner_change(&cache, &oc), 0);
        assert_string_equal(oc.subject, "Change 39");
        repo_owner_change_done(&oc);
        repo_refs_cache_done(&cache);
        fswatch_done(&watch);
#undef VERSION
        rm_rf(seed);
}

static void test_owner_change_detection(void **state) {
        _cleanup_free_ char *base = NULL, *c1 = NULL, *c2 = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        struct repo_owner_change oc;

        /* No change: main is generation 1. */
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_NONE);
        assert_int_equal(oc.generation, 1);
        assert_string_equal(oc.generation_commit, base);
        assert_string_equal(oc.head, base);
        assert_true(oc.on_main);
        assert_null(oc.subject);
        repo_owner_change_done(&oc);

        /* On top: the owner committed once, then again. */
        c1 = owner_commit(seed, "seed.yaml", "name: t\n# the owner's model\n", "Pick a model\n\nBecause.\n");
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_COMMITS);
        assert_int_equal(oc.generation, 1);
        assert_string_equal(oc.head, c1);
        assert_string_equal(oc.subject, "Pick a model");
        assert_int_equal(oc.n_commits, 1);
        repo_owner_change_done(&oc);
        c2 = owner_commit(seed, "organism/index.html", "<h1>mine</h1>\n", "Say\tmine");
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_COMMITS);
        assert_string_equal(oc.head, c2);
        assert_string_equal(oc.subject, "Say mine");
        assert_int_equal(oc.n_commits, 2);
        repo_owner_change_done(&oc);
        int live = 0;
        assert_int_equal(repo_live_generation(seed, &live), 0);
        assert_int_equal(live, 1);
        assert_int_equal(repo_current_generation(seed, &live), -ENOENT);

        /* Not on top: main reset to a commit that does not contain
         * generation 1 (an unrelated root commit stands in for rewritten
         * history), and HEAD detached from main. */
        set_ref(seed, "HEAD", base);
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_DIVERGED);
        assert_false(oc.on_main);
        repo_owner_change_done(&oc);
        git_libgit2_init();
        git_repository *r = NULL;
        git_reference *head = NULL;
        assert_int_equal(git_repository_open(&r, seed), 0);
        assert_int_equal(git_reference_symbolic_create(&head, r, "HEAD", "refs/heads/main", 1, "test"), 0);
        git_reference_free(head);
        git_repository_free(r);
        git_libgit2_shutdown();
        _cleanup_free_ char *g2 = evolve(seed, "two", "organism/extra.txt", "gen 2\n");
        set_ref(seed, "refs/heads/main", c2);
        assert_int_equal(repo_tag_generation(seed, g2, 2), 0); /* generation 2 is not in main */
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_DIVERGED);
        assert_true(oc.on_main);
        assert_int_equal(oc.generation, 2);
        assert_string_equal(oc.generation_commit, g2);
        assert_string_equal(oc.head, c2);
        assert_null(oc.subject);
        repo_owner_change_done(&oc);
        set_ref(seed, "refs/heads/main", base); /* reset to an older generation */
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_DIVERGED);
        repo_owner_change_done(&oc);


        struct repo_owner_change untouched = {.generation = 77};
        assert_true(repo_owner_change("/nonexistent-seed-dir", &untouched) < 0);
        assert_int_equal(untouched.generation, 77);
        rm_rf(seed);
}

static void test_owner_generation_commit(void **state) {
        _cleanup_free_ char *base = NULL, *c1 = NULL, *c2 = NULL, *msg = NULL, *oid = NULL, *stale = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        c1 = owner_commit(seed, "seed.yaml", "name: t\n# mine\n", "Pick a model");
        c2 = owner_commit(seed, "organism/index.html", "<h1>mine</h1>\n", "Say mine");

        _cleanup_free_ char *bad = NULL;
        assert_int_equal(repo_owner_message("x", 1, "a/b", 1, 2, c2, &bad), -EINVAL);
        assert_int_equal(repo_owner_message("x", 1, "ab", 1, 3, c2, &bad), -EINVAL);
        assert_int_equal(repo_owner_message("x", 0, "ab", 1, 2, c2, &bad), -EINVAL);
        assert_int_equal(repo_owner_message("x", 1, "ab", 1, 2, "nope", &bad), -EINVAL);
        assert_null(bad);
        _cleanup_free_ char *one = NULL;
        assert_int_equal(repo_owner_message("  ", 1, "ab", 4, 5, c1, &one), 0);
        assert_true(startswith(one, "owner: (no subject)\n\n"));
        assert_int_equal(repo_owner_message("Say mine", 2, "0123abcd", 1, 2, c2, &msg), 0);
        _cleanup_free_ char *want = NULL;
        assert_true(xasprintf(&want, "owner: Say mine (and 1 more)\n\nEvolution: evo_0123abcd\nGeneration: 1 -> 2\n"
                                     "Owner-Commit: %s\n", c2) >= 0);
        assert_string_equal(msg, want);

        /* A file as a commit holds it (the owner's seed.yaml, before it is a generation). */
        _cleanup_free_ char *yaml = NULL, *none = NULL;
        size_t ylen = 0;
        assert_int_equal(repo_read_blob_at(seed, c1, "seed.yaml", 1 << 20, &yaml, &ylen), 0);
        assert_string_equal(yaml, "name: t\n# mine\n");
        assert_int_equal(ylen, strlen(yaml));
        assert_int_equal(repo_read_blob_at(seed, base, "organism/nope", 1 << 20, &none, NULL), -ENOENT);
        assert_int_equal(repo_read_blob_at(seed, base, "organism", 1 << 20, &none, NULL), -EINVAL);
        assert_int_equal(repo_read_blob_at(seed, c1, "seed.yaml", 4, &none, NULL), -EFBIG);
        assert_int_equal(repo_read_blob_at(seed, c1, "/etc/passwd", 1 << 20, &none, NULL), -EINVAL);
        assert_null(none);

        /* An uncommitted edit in the folder survives recording and applying. */
        put(seed, "knowledge/self.yaml", "name: t\n# not committed\n");
        assert_int_equal(repo_owner_commit(seed, c2, msg, &oid), 0);
        _cleanup_free_ char *head = NULL;
        assert_int_equal(repo_head(seed, &head), 0);
        assert_string_equal(head, c2); /* no ref moved */
        char **paths = NULL;
        assert_int_equal(repo_changed_paths(seed, c2, oid, &paths), 0); /* the owner's tree, unchanged */
        strv_free(paths);

        /* The trailers as git reads them, and the parent. */
        git_libgit2_init();
        git_repository *r = NULL;
        git_commit *c = NULL;
        git_oid id;
        char parent[41];
        assert_int_equal(git_repository_open(&r, seed), 0);
        assert_int_equal(git_oid_fromstr(&id, oid), 0);
        assert_int_equal(git_commit_lookup(&c, r, &id), 0);
        assert_int_equal(git_commit_parentcount(c), 1);
        git_oid_tostr(parent, sizeof parent, git_commit_parent_id(c, 0));
        assert_string_equal(parent, c2);
        git_message_trailer_array tr;
        assert_int_equal(git_message_trailers(&tr, git_commit_message(c)), 0);
        assert_int_equal(tr.count, 3);
        assert_string_equal(tr.trailers[0].key, "Evolution");
        assert_string_equal(tr.trailers[0].value, "evo_0123abcd");
        assert_string_equal(tr.trailers[1].key, "Generation");
        assert_string_equal(tr.trailers[1].value, "1 -> 2");
        assert_string_equal(tr.trailers[2].key, "Owner-Commit");
        assert_string_equal(tr.trailers[2].value, c2);
        git_message_trailer_array_free(&tr);
        git_commit_free(c);
        git_repository_free(r);
        git_libgit2_shutdown();

        assert_int_equal(repo_tag_generation(seed, oid, 2), 0);
        assert_int_equal(repo_fast_forward_main(seed, oid), 0);
        _cleanup_free_ char *kept = slurp(seed, "knowledge/self.yaml");
        assert_string_equal(kept, "name: t\n# not committed\n");
        struct repo_owner_change oc;
        assert_int_equal(repo_owner_change(seed, &oc), 0);
        assert_int_equal(oc.state, REPO_OWNER_NONE);
        assert_int_equal(oc.generation, 2);
        repo_owner_change_done(&oc);
        struct repo_generation *g = NULL;
        size_t n = 0;
        assert_int_equal(repo_generations(seed, &g, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(g[0].owner_commit, "");
        assert_string_equal(g[1].owner_commit, c2);
        assert_string_equal(g[1].summary, "owner: Say mine (and 1 more)");
        repo_generations_free(g, n);

        /* Main moved on since: nothing is recorded. */
        assert_int_equal(repo_owner_commit(seed, c2, msg, &stale), -ESTALE);
        assert_null(stale);
        rm_rf(seed);
}

static void test_export_generation(void **state) {
        _cleanup_free_ char *base = NULL, *c1 = NULL, *idx_before = NULL, *idx_after = NULL;
        _cleanup_free_ char *seed = make_seed(&base);
        c1 = owner_commit(seed, "organism/index.html", "broken\n", "Break it");
        put(seed, "organism/a.txt", "dirty, not committed\n");
        size_t len_before = 0, len_after = 0;
        _cleanup_free_ char *idx = path_join(seed, ".git/index");
        assert_int_equal(read_file(idx, 1 << 20, &idx_before, &len_before), 0);

        _cleanup_free_ char *dest = path_join(seed, ".seed/live");
        put(seed, ".seed/live/junk/left.txt", "from an old build\n");
        assert_int_equal(repo_export_generation(seed, 1, dest), 0);
        _cleanup_free_ char *html = slurp(dest, "organism/index.html"), *a = slurp(dest, "organism/a.txt");
        assert_string_equal(html, "<h1>hello</h1>\nline 2\nline 3\n");
        assert_string_equal(a, "the file that moves\n");
        assert_true(exists_at(dest, "kernel/app.c"));
        assert_false(exists_at(dest, "junk"));
        assert_false(exists_at(dest, ".git"));
        assert_false(exists_at(dest, ".seed"));
        struct stat st;
        assert_int_equal(stat(dest, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);

        /* The Seed folder is as it was: its index, its committed and dirty files. */
        assert_int_equal(read_file(idx, 1 << 20, &idx_after, &len_after), 0);
        assert_int_equal(len_before, len_after);
        assert_memory_equal(idx_before, idx_after, len_before);
        _cleanup_free_ char *mine = slurp(seed, "organism/index.html"), *dirty = slurp(seed, "organism/a.txt");
        assert_string_equal(mine, "broken\n");
        assert_string_equal(dirty, "dirty, not committed\n");

        assert_int_equal(repo_export_generation(seed, 9, dest), -ENOENT);
        assert_int_equal(repo_export_generation(seed, 1, "relative/dir"), -EINVAL);
        rm_rf(seed);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_init_commit_and_generation),
                cmocka_unit_test(test_ignored_files_not_committed),
                cmocka_unit_test(test_no_reinit),
                cmocka_unit_test(test_not_a_repo),
                cmocka_unit_test(test_worktree_lifecycle),
                cmocka_unit_test(test_message_trailers),
                cmocka_unit_test(test_tag_generation),
                cmocka_unit_test(test_diff_bounded),
                cmocka_unit_test(test_boundary_kernel_edit),
                cmocka_unit_test(test_boundary_new_root_file),
                cmocka_unit_test(test_boundary_delete_in_cmd),
                cmocka_unit_test(test_boundary_rename_into_kernel),
                cmocka_unit_test(test_boundary_chmod_kernel),
                cmocka_unit_test(test_boundary_symlinks),
                cmocka_unit_test(test_boundary_ignored_files_are_seen),
                cmocka_unit_test(test_boundary_gitattributes),
                cmocka_unit_test(test_boundary_gitlinks),
                cmocka_unit_test(test_boundary_worktree_gitfile),
                cmocka_unit_test(test_boundary_gitdir_snapshot),
                cmocka_unit_test(test_boundary_evolvable_only),
                cmocka_unit_test(test_boundary_approvals_per_path),
                cmocka_unit_test(test_boundary_pins_of_deletions),
                cmocka_unit_test(test_boundary_between_commits),
                cmocka_unit_test(test_boundary_bad_input),
                cmocka_unit_test(test_open_beneath_refuses_symlinks),
                cmocka_unit_test(test_fast_forward),
                cmocka_unit_test(test_undo_untagged),
                cmocka_unit_test(test_restore_generation),
                cmocka_unit_test(test_owner_change_detection),
                cmocka_unit_test(test_refs_cache),
                cmocka_unit_test(test_refs_cache_version),
                cmocka_unit_test(test_owner_generation_commit),
                cmocka_unit_test(test_export_generation),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
