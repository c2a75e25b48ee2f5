/* Unit tests for kernel/fsx: path validation, and reads, writes, deletes and
 * listings beneath a root fd that never follow a symlink, including while
 * another thread swaps a directory for a symlink to outside the root.
 *
 * Every fixture test runs twice: with openat2, and with the component walk
 * used on kernels without it (fsx_force_fallback). Each gets a fresh
 *   /tmp/seed-test-fsx-XXXXXX/{root/, outside/secret, elsewhere/}
 * where root is the workspace and the rest must never change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "fsx/fsx.h"

#define SECRET "SECRET CONTENT\n"

struct env {
        char base[64];
        char root_path[96];
        char outside[96];   /* base/outside, holds only "secret" */
        char elsewhere[96]; /* base/elsewhere, holds only "x" */
        int root;
};

static const bool MODE_OPENAT2 = false, MODE_WALK = true;

/* ---- host-side helpers (trusted paths) ----------------------------------- */

static void put(const char *dir, const char *rel, const char *content) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0644), 0);
}

static char *get(const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        char *data = NULL;
        if (read_file(p, 1 << 20, &data, NULL) < 0)
                return NULL;
        return data;
}

static bool host_lexists(const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        return path_exists(p);
}

static void host_mkdir(const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_int_equal(mkdir_p(p, 0755), 0);
}

static void host_symlink(const char *target, const char *dir, const char *rel) {
        _cleanup_free_ char *p = path_join(dir, rel);
        assert_int_equal(symlink(target, p), 0);
}

/* Entries in dir (not "." or ".."); names starting with prefix if given. */
static int count_entries(const char *dir, const char *prefix) {
        DIR *d = opendir(dir);
        assert_non_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") &&
                    (!prefix || startswith(de->d_name, prefix)))
                        n++;
        closedir(d);
        return n;
}

/* The places outside the root are exactly as the fixture made them. */
static void assert_outside_untouched(struct env *e) {
        assert_int_equal(count_entries(e->outside, NULL), 1);
        _cleanup_free_ char *s = get(e->outside, "secret");
        assert_non_null(s);
        assert_string_equal(s, SECRET);
        assert_int_equal(count_entries(e->elsewhere, NULL), 1);
        _cleanup_free_ char *x = get(e->elsewhere, "x");
        assert_non_null(x);
        assert_string_equal(x, "x");
        assert_int_equal(count_entries(e->base, NULL), 3);
}

#define assert_err(call, code, msg)                                            \
        do {                                                                   \
                _cleanup_free_ char *_err = NULL;                              \
                assert_int_equal((call), (code));                              \
                assert_non_null(_err);                                         \
                assert_string_equal(_err, (msg));                              \
        } while (0)

/* ---- fixture ------------------------------------------------------------- */

static int setup(void **state) {
        bool walk = *(const bool *)*state;
        fsx_force_fallback(walk);
        if (!walk && !fsx_have_openat2()) {
                fsx_force_fallback(false);
                skip(); /* this kernel has no openat2: only the walk can run */
        }
        struct env *e = calloc(1, sizeof *e);
        assert_non_null(e);
        strcpy(e->base, "/tmp/seed-test-fsx-XXXXXX");
        assert_non_null(mkdtemp(e->base));
        snprintf(e->root_path, sizeof e->root_path, "%s/root", e->base);
        snprintf(e->outside, sizeof e->outside, "%s/outside", e->base);
        snprintf(e->elsewhere, sizeof e->elsewhere, "%s/elsewhere", e->base);
        assert_int_equal(mkdir(e->root_path, 0755), 0);
        assert_int_equal(mkdir(e->outside, 0755), 0);
        assert_int_equal(mkdir(e->elsewhere, 0755), 0);
        put(e->outside, "secret", SECRET);
        put(e->elsewhere, "x", "x");
        assert_int_equal(fsx_open_root(e->root_path, &e->root), 0);
        *state = e;
        return 0;
}

static int teardown(void **state) {
        struct env *e = *state;
        fsx_force_fallback(false);
        close(e->root);
        assert_int_equal(rm_rf(e->base), 0);
        free(e);
        return 0;
}

/* ---- path validation ----------------------------------------------------- */

static void assert_norm(const char *in, const char *want) {
        _cleanup_free_ char *norm = NULL, *err = NULL;
        assert_int_equal(fsx_normalize(in, strlen(in), &norm, &err), 0);
        assert_null(err);
        assert_string_equal(norm, want);
        assert_int_equal(fsx_check_path(in, NULL), 0);
}

static void test_check_path_accepts(void **state) {
        assert_norm("a", "a");
        assert_norm("organism/main.c", "organism/main.c");
        assert_norm("./organism//main.c/", "organism/main.c");
        assert_norm("knowledge/./notes/./x.md", "knowledge/notes/x.md");
        assert_norm(".", ".");
        assert_norm("./", ".");
        assert_norm(".//./", ".");
        assert_norm(".gitignore", ".gitignore");
        assert_norm("a/.github/workflows/x.yml", "a/.github/workflows/x.yml");
        assert_norm("...", "...");
        assert_norm("organism/.seed/x", "organism/.seed/x"); /* only the top-level .seed */
        assert_norm(".seeds", ".seeds");
        assert_norm("a..b/c..", "a..b/c..");
        assert_norm("café/naïve.md", "café/naïve.md");
        assert_norm("back\\slash", "back\\slash");

        /* The limits themselves are accepted. */
        char name[FSX_NAME_MAX + 1];
        memset(name, 'n', FSX_NAME_MAX);
        name[FSX_NAME_MAX] = 0;
        assert_int_equal(fsx_check_path(name, NULL), 0);
        char longest[FSX_PATH_MAX + 1];
        for (size_t i = 0; i < FSX_PATH_MAX; i++)
                longest[i] = i % 2 ? '/' : 'a';
        longest[FSX_PATH_MAX] = 0;
        assert_int_equal(fsx_check_path(longest, NULL), 0);
}

static void test_check_path_refuses(void **state) {
        assert_err(fsx_check_path("", &_err), -EINVAL, "the path is empty");
        assert_err(fsx_check_path(NULL, &_err), -EINVAL, "the path is empty");
        assert_err(fsx_check_path("/etc/passwd", &_err), -EINVAL,
                   "'/etc/passwd' is an absolute path; give a path relative to the workspace");
        assert_err(fsx_check_path("//x", &_err), -EINVAL,
                   "'//x' is an absolute path; give a path relative to the workspace");
        assert_err(fsx_check_path("..", &_err), -EINVAL,
                   "'..' contains '..'; paths must stay inside the workspace");
        assert_err(fsx_check_path("knowledge/../../etc/passwd", &_err), -EINVAL,
                   "'knowledge/../../etc/passwd' contains '..'; paths must stay inside the "
                   "workspace");
        assert_err(fsx_check_path("a/..", &_err), -EINVAL,
                   "'a/..' contains '..'; paths must stay inside the workspace");
        assert_err(fsx_check_path("./../x", &_err), -EINVAL,
                   "'./../x' contains '..'; paths must stay inside the workspace");
        assert_err(fsx_check_path(".git", &_err), -EPERM, "'.git' is inside .git, which is off limits");
        assert_err(fsx_check_path(".git/hooks/x", &_err), -EPERM,
                   "'.git/hooks/x' is inside .git, which is off limits");
        assert_err(fsx_check_path("a/.git/b", &_err), -EPERM,
                   "'a/.git/b' is inside .git, which is off limits");
        assert_err(fsx_check_path("./.git/", &_err), -EPERM,
                   "'./.git/' is inside .git, which is off limits");
        assert_err(fsx_check_path(".GIT/config", &_err), -EPERM,
                   "'.GIT/config' is inside .git, which is off limits");
        assert_err(fsx_check_path("a/.Git. /hooks", &_err), -EPERM,
                   "'a/.Git. /hooks' is inside .git, which is off limits");
        assert_err(fsx_check_path(".seed/secrets/postgres", &_err), -EPERM,
                   "'.seed/secrets/postgres' is inside .seed, the kernel's private folder");
        assert_err(fsx_check_path("./.SEED//control-token", &_err), -EPERM,
                   "'./.SEED//control-token' is inside .seed, the kernel's private folder");
        assert_err(fsx_check_path_len("a\0b", 3, &_err), -EINVAL, "'a\\0b' contains a NUL byte");
        assert_err(fsx_check_path_len("knowledge/x.md\0../../etc/passwd", 31, &_err), -EINVAL,
                   "'knowledge/x.md\\0../../etc/passwd' contains a NUL byte");
        assert_err(fsx_check_path("a\nb", &_err), -EINVAL, "'a\\nb' contains a control character");
        assert_err(fsx_check_path("\x1b[31mred", &_err), -EINVAL,
                   "'\\x1b[31mred' contains a control character");
        assert_err(fsx_check_path("del\x7f", &_err), -EINVAL,
                   "'del\\x7f' contains a control character");
        /* Quotes, backslashes and non-ASCII bytes are escaped in messages. */
        assert_err(fsx_check_path("it's\\/../x", &_err), -EINVAL,
                   "'it\\'s\\\\/../x' contains '..'; paths must stay inside the workspace");
        assert_err(fsx_check_path("caf\xc3\xa9/..", &_err), -EINVAL,
                   "'caf\\xc3\\xa9/..' contains '..'; paths must stay inside the workspace");
        assert_int_equal(fsx_check_path("../x", NULL), -EINVAL);

        /* Over-long: the path, and one component; shown cut at 128 bytes. */
        char shown[129];
        memset(shown, 'a', 128);
        shown[128] = 0;
        char want[512];
        _cleanup_free_ char *too_long = malloc(FSX_PATH_MAX + 2);
        memset(too_long, 'a', FSX_PATH_MAX + 1);
        too_long[FSX_PATH_MAX + 1] = 0;
        snprintf(want, sizeof want, "'%s...' is longer than 4095 bytes", shown);
        assert_err(fsx_check_path(too_long, &_err), -ENAMETOOLONG, want);
        char name[FSX_NAME_MAX + 4]; /* "d/", 256 bytes, NUL */
        name[0] = 'd';
        name[1] = '/';
        memset(name + 2, 'n', FSX_NAME_MAX + 1);
        name[FSX_NAME_MAX + 3] = 0;
        memset(shown, 'n', 128);
        shown[0] = 'd';
        shown[1] = '/';
        snprintf(want, sizeof want, "'%s...' has a component longer than 255 bytes", shown);
        assert_err(fsx_check_path(name, &_err), -ENAMETOOLONG, want);

        /* The other functions validate first and name the same error. */
        int root = -1;
        assert_int_equal(fsx_open_root("/tmp", &root), 0);
        assert_err(fsx_read(root, "../etc/passwd", 100, &(char *){NULL}, NULL, &_err), -EINVAL,
                   "'../etc/passwd' contains '..'; paths must stay inside the workspace");
        assert_err(fsx_write(root, ".git/hooks/pre-commit", "x", 1, 0755, &_err), -EPERM,
                   "'.git/hooks/pre-commit' is inside .git, which is off limits");
        assert_err(fsx_delete(root, "/etc", &_err), -EINVAL,
                   "'/etc' is an absolute path; give a path relative to the workspace");
        close(root);
}

static void test_open_root_and_switch(void **state) {
        int fd = -1;
        assert_int_equal(fsx_open_root("/etc/passwd", &fd), -ENOTDIR);
        assert_int_equal(fd, -1);
        assert_int_equal(fsx_open_root("/tmp", &fd), 0);
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        fsx_force_fallback(true);
        assert_false(fsx_have_openat2());
        fsx_force_fallback(false);
        print_message("# openat2 %s on this kernel\n",
                      fsx_have_openat2() ? "is available" : "is NOT available (walk only)");
}

/* ---- reads and writes ---------------------------------------------------- */

static void test_read_write(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *err = NULL, *data = NULL;
        size_t len = 0;

        assert_int_equal(fsx_write(e->root, "knowledge/notes/a.md", "hello", 5, 0644, &err), 0);
        assert_null(err);
        _cleanup_free_ char *host = get(e->root_path, "knowledge/notes/a.md");
        assert_string_equal(host, "hello");
        assert_int_equal(fsx_read(e->root, "./knowledge//notes/a.md", 100, &data, &len, &err), 0);
        assert_int_equal(len, 5);
        assert_string_equal(data, "hello");
        free(TAKE_PTR(data));

        /* Replacing keeps the mode with FSX_MODE_KEEP; an explicit mode is
         * applied exactly, whatever the umask. */
        _cleanup_free_ char *p = path_join(e->root_path, "knowledge/notes/a.md");
        assert_int_equal(chmod(p, 0750), 0);
        assert_int_equal(fsx_write(e->root, "knowledge/notes/a.md", "bye", 3, FSX_MODE_KEEP, &err),
                         0);
        struct fsx_stat st;
        assert_int_equal(fsx_stat(e->root, "knowledge/notes/a.md", &st, &err), 0);
        assert_int_equal(st.type, FSX_FILE);
        assert_int_equal(st.size, 3);
        assert_int_equal(st.mode, 0750);
        assert_int_equal(st.nlink, 1);
        mode_t old = umask(077);
        assert_int_equal(fsx_write(e->root, "knowledge/notes/a.md", "bye!", 4, 0644, &err), 0);
        assert_int_equal(fsx_write(e->root, "new.txt", "", 0, FSX_MODE_KEEP, &err), 0);
        umask(old);
        assert_int_equal(fsx_stat(e->root, "knowledge/notes/a.md", &st, &err), 0);
        assert_int_equal(st.mode, 0644);
        assert_int_equal(fsx_stat(e->root, "new.txt", &st, &err), 0);
        assert_int_equal(st.mode, 0644);
        assert_int_equal(st.size, 0);

        /* Empty file; bounds. */
        assert_int_equal(fsx_read(e->root, "new.txt", 0, &data, &len, &err), 0);
        assert_int_equal(len, 0);
        assert_string_equal(data, "");
        free(TAKE_PTR(data));
        assert_int_equal(fsx_read(e->root, "knowledge/notes/a.md", 4, &data, NULL, &err), 0);
        assert_string_equal(data, "bye!");
        free(TAKE_PTR(data));
        assert_err(fsx_read(e->root, "knowledge/notes/a.md", 3, &data, &len, &_err), -EFBIG,
                   "'knowledge/notes/a.md' is larger than 3 bytes");
        assert_null(data);

        /* Binary content with NULs round-trips. */
        const char bin[] = {'a', 0, 'b', 0, (char)0xff};
        assert_int_equal(fsx_write(e->root, "organism/bin", bin, sizeof bin, 0644, &err), 0);
        assert_int_equal(fsx_read(e->root, "organism/bin", 100, &data, &len, &err), 0);
        assert_int_equal(len, sizeof bin);
        assert_memory_equal(data, bin, sizeof bin);
        free(TAKE_PTR(data));

        /* Errors name the path. */
        assert_err(fsx_read(e->root, "knowledge", 100, &data, &len, &_err), -EISDIR,
                   "'knowledge' is a directory");
        assert_err(fsx_read(e->root, "nope.md", 100, &data, &len, &_err), -ENOENT,
                   "'nope.md' does not exist");
        assert_err(fsx_read(e->root, "new.txt/x", 100, &data, &len, &_err), -ENOTDIR,
                   "'new.txt/x': part of the path is not a directory");
        assert_err(fsx_write(e->root, ".", "x", 1, 0644, &_err), -EISDIR,
                   "'.' is the workspace itself, not a file");
        assert_err(fsx_write(e->root, "./", "x", 1, 0644, &_err), -EISDIR,
                   "'.' is the workspace itself, not a file");

        /* fsx_open: plain flags work, fds are close-on-exec. */
        int fd = -1;
        assert_int_equal(fsx_open(e->root, "new.txt", O_RDONLY, 0, &fd, &err), 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
        assert_int_equal(fsx_open(e->root, "organism/c.txt", O_WRONLY | O_CREAT | O_EXCL, 0600,
                                  &fd, &err), 0);
        assert_int_equal(write(fd, "c", 1), 1);
        close(fd);
        assert_true(host_lexists(e->root_path, "organism/c.txt"));
        fd = -1;
        assert_err(fsx_open(e->root, "organism/c.txt", O_WRONLY | O_CREAT | O_EXCL, 0600, &fd,
                            &_err),
                   -EEXIST, "'organism/c.txt': File exists");
        assert_int_equal(fd, -1);
        assert_int_equal(fsx_open(e->root, "organism/c.txt", O_WRONLY | O_TRUNC, 0, &fd, &err), 0);
        close(fd);
        struct fsx_stat cst;
        assert_int_equal(fsx_stat(e->root, "organism/c.txt", &cst, NULL), 0);
        assert_int_equal(cst.size, 0);
        assert_int_equal(fsx_open(e->root, ".", O_RDONLY | O_DIRECTORY, 0, &fd, &err), 0);
        close(fd);

        /* No temp file left anywhere. */
        _cleanup_free_ char *notes = path_join(e->root_path, "knowledge/notes");
        assert_int_equal(count_entries(notes, NULL), 1);
        assert_int_equal(count_entries(e->root_path, ".fsx-"), 0);
        assert_outside_untouched(e);
}

static void test_symlinked_file(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *secret = path_join(e->outside, "secret");
        _cleanup_free_ char *fresh = path_join(e->outside, "fresh");
        char *data = NULL;
        host_mkdir(e->root_path, "knowledge");
        put(e->root_path, "knowledge/real.md", "real");
        host_symlink(secret, e->root_path, "knowledge/x.md");
        host_symlink("../../outside/secret", e->root_path, "knowledge/rel.md");
        host_symlink("real.md", e->root_path, "knowledge/inside.md");
        host_symlink(fresh, e->root_path, "knowledge/dangling.md");
        host_symlink("/proc/self/root/etc/passwd", e->root_path, "knowledge/proc.md");

        assert_err(fsx_read(e->root, "knowledge/x.md", 1 << 20, &data, NULL, &_err), -ELOOP,
                   "'knowledge/x.md' is a symlink or leads outside the workspace");
        assert_err(fsx_read(e->root, "knowledge/rel.md", 1 << 20, &data, NULL, &_err), -ELOOP,
                   "'knowledge/rel.md' is a symlink or leads outside the workspace");
        /* Even a link that stays inside is refused: no link is followed. */
        assert_err(fsx_read(e->root, "knowledge/inside.md", 1 << 20, &data, NULL, &_err), -ELOOP,
                   "'knowledge/inside.md' is a symlink or leads outside the workspace");
        assert_err(fsx_read(e->root, "knowledge/proc.md", 1 << 20, &data, NULL, &_err), -ELOOP,
                   "'knowledge/proc.md' is a symlink or leads outside the workspace");
        assert_null(data);

        /* Writes neither go through a link nor replace it. */
        assert_err(fsx_write(e->root, "knowledge/x.md", "pwned", 5, 0644, &_err), -ELOOP,
                   "'knowledge/x.md' is a symlink or leads outside the workspace");
        assert_err(fsx_write(e->root, "knowledge/dangling.md", "pwned", 5, 0644, &_err), -ELOOP,
                   "'knowledge/dangling.md' is a symlink or leads outside the workspace");
        int fd = -1;
        assert_err(fsx_open(e->root, "knowledge/dangling.md", O_WRONLY | O_CREAT, 0644, &fd,
                            &_err),
                   -ELOOP, "'knowledge/dangling.md' is a symlink or leads outside the workspace");
        assert_err(fsx_open(e->root, "knowledge/x.md", O_RDONLY, 0, &fd, &_err), -ELOOP,
                   "'knowledge/x.md' is a symlink or leads outside the workspace");
        assert_err(fsx_open(e->root, "knowledge/x.md", O_RDONLY | O_DIRECTORY, 0, &fd, &_err),
                   -ELOOP, "'knowledge/x.md' is a symlink or leads outside the workspace");
        assert_err(fsx_mkdirs(e->root, "knowledge/dangling.md", 0755, &_err), -ELOOP,
                   "'knowledge/dangling.md' is a symlink or leads outside the workspace");
        assert_int_equal(fd, -1);
        assert_false(host_lexists(e->outside, "fresh"));
        struct stat st;
        _cleanup_free_ char *lp = path_join(e->root_path, "knowledge/x.md");
        assert_int_equal(lstat(lp, &st), 0);
        assert_true(S_ISLNK(st.st_mode));

        /* O_PATH opens the link itself, as O_PATH|O_NOFOLLOW does. */
        assert_int_equal(fsx_open(e->root, "knowledge/x.md", O_PATH, 0, &fd, NULL), 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        close(fd);
        struct fsx_stat fst;
        assert_int_equal(fsx_stat(e->root, "knowledge/x.md", &fst, NULL), 0);
        assert_int_equal(fst.type, FSX_SYMLINK);
        assert_int_equal(fst.size, strlen(secret));
        assert_outside_untouched(e);
}

static void test_symlinked_parent(void **state) {
        struct env *e = *state;
        char *data = NULL;
        struct fsx_list *l = NULL;
        struct fsx_stat st;
        host_symlink(e->elsewhere, e->root_path, "organism");
        host_mkdir(e->root_path, "a");
        host_symlink("../../elsewhere", e->root_path, "a/b");

        assert_err(fsx_read(e->root, "organism/x", 100, &data, NULL, &_err), -ELOOP,
                   "'organism/x' is a symlink or leads outside the workspace");
        assert_err(fsx_write(e->root, "organism/new", "n", 1, 0644, &_err), -ELOOP,
                   "'organism/new' is a symlink or leads outside the workspace");
        assert_err(fsx_write(e->root, "organism/x", "n", 1, 0644, &_err), -ELOOP,
                   "'organism/x' is a symlink or leads outside the workspace");
        assert_err(fsx_write(e->root, "organism/sub/new", "n", 1, 0644, &_err), -ELOOP,
                   "'organism/sub/new' is a symlink or leads outside the workspace");
        assert_err(fsx_write(e->root, "a/b/c/d", "n", 1, 0644, &_err), -ELOOP,
                   "'a/b/c/d' is a symlink or leads outside the workspace");
        assert_err(fsx_mkdirs(e->root, "organism/sub", 0755, &_err), -ELOOP,
                   "'organism/sub' is a symlink or leads outside the workspace");
        assert_err(fsx_delete(e->root, "organism/x", &_err), -ELOOP,
                   "'organism/x' is a symlink or leads outside the workspace");
        assert_err(fsx_list(e->root, "organism", 100, &l, &_err), -ELOOP,
                   "'organism' is a symlink or leads outside the workspace");
        assert_err(fsx_list(e->root, "a/b/", 100, &l, &_err), -ELOOP,
                   "'a/b' is a symlink or leads outside the workspace");
        assert_err(fsx_stat(e->root, "organism/x", &st, &_err), -ELOOP,
                   "'organism/x' is a symlink or leads outside the workspace");
        int fd = -1;
        assert_err(fsx_open(e->root, "organism/x", O_PATH, 0, &fd, &_err), -ELOOP,
                   "'organism/x' is a symlink or leads outside the workspace");
        assert_null(data);
        assert_null(l);
        assert_int_equal(fd, -1);
        assert_int_equal(fsx_stat(e->root, "organism", &st, NULL), 0);
        assert_int_equal(st.type, FSX_SYMLINK);
        assert_outside_untouched(e);
        assert_false(host_lexists(e->root_path, "a/b/c"));
}

static void test_hardlink(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *secret = path_join(e->outside, "secret");
        _cleanup_free_ char *link_path = path_join(e->root_path, "h.md");
        if (link(secret, link_path) < 0) {
                /* protected_hardlinks as a non-owner, or another mount. */
                print_message("# link(2) refused (%s): nothing to test\n", strerror(errno));
                skip();
        }
        /* openat2 cannot see that h.md is also outside/secret: fsx_read
         * refuses any file with several links instead. */
        char *data = NULL;
        assert_err(fsx_read(e->root, "h.md", 100, &data, NULL, &_err), -EMLINK,
                   "'h.md' has 2 hard links; refusing it (it could be a link to a file "
                   "outside the workspace)");
        assert_null(data);
        /* fsx_open too, before truncating anything; O_PATH still works. */
        int fd = -1;
        assert_err(fsx_open(e->root, "h.md", O_WRONLY | O_TRUNC, 0, &fd, &_err), -EMLINK,
                   "'h.md' has 2 hard links; refusing it (it could be a link to a file "
                   "outside the workspace)");
        assert_err(fsx_open(e->root, "h.md", O_RDONLY, 0, &fd, &_err), -EMLINK,
                   "'h.md' has 2 hard links; refusing it (it could be a link to a file "
                   "outside the workspace)");
        assert_err(fsx_open(e->root, "h.md", O_RDONLY | O_TRUNC, 0, &fd, &_err), -EINVAL,
                   "O_TRUNC needs write access");
        assert_int_equal(fd, -1);
        assert_int_equal(fsx_open(e->root, "h.md", O_PATH, 0, &fd, NULL), 0);
        close(fd);
        assert_outside_untouched(e);
        struct fsx_stat st;
        assert_int_equal(fsx_stat(e->root, "h.md", &st, NULL), 0);
        assert_int_equal(st.nlink, 2);
        /* A write replaces the directory entry: the shared inode (the
         * outside file) is untouched. */
        assert_int_equal(fsx_write(e->root, "h.md", "new", 3, FSX_MODE_KEEP, NULL), 0);
        assert_int_equal(fsx_read(e->root, "h.md", 100, &data, NULL, NULL), 0);
        assert_string_equal(data, "new");
        free(data);
        assert_outside_untouched(e);
}

static void test_atomic_failure_leaves_no_temp(void **state) {
        struct env *e = *state;
        host_mkdir(e->root_path, "organism/d/sub");
        host_mkdir(e->root_path, "organism/empty");
        put(e->root_path, "organism/file", "f");
        /* The temp file is written, then renameat fails (EISDIR): it is
         * removed again. */
        assert_err(fsx_write(e->root, "organism/d", "x", 1, 0644, &_err), -EISDIR,
                   "'organism/d' is a directory");
        assert_err(fsx_write(e->root, "organism/empty", "x", 1, 0644, &_err), -EISDIR,
                   "'organism/empty' is a directory");
        assert_err(fsx_write(e->root, "organism/file/x", "x", 1, 0644, &_err), -ENOTDIR,
                   "'organism/file/x': part of the path is not a directory");
        _cleanup_free_ char *org = path_join(e->root_path, "organism");
        assert_int_equal(count_entries(org, NULL), 3);
        assert_int_equal(count_entries(org, ".fsx-"), 0);
        _cleanup_free_ char *f = get(e->root_path, "organism/file");
        assert_string_equal(f, "f");
        assert_outside_untouched(e);
}

static void test_delete(void **state) {
        struct env *e = *state;
        _cleanup_free_ char *secret = path_join(e->outside, "secret");
        host_mkdir(e->root_path, "organism/t/sub/deeper");
        put(e->root_path, "organism/t/a", "a");
        put(e->root_path, "organism/t/sub/b", "b");
        host_symlink(e->outside, e->root_path, "organism/t/dirlink");
        host_symlink(secret, e->root_path, "organism/t/sub/filelink");
        host_symlink(e->elsewhere, e->root_path, "organism/t/sub/deeper/up");
        host_symlink(secret, e->root_path, "knowledge-link.md");
        _cleanup_free_ char *fifo = path_join(e->root_path, "organism/t/fifo");
        assert_int_equal(mkfifo(fifo, 0644), 0);

        /* A tree with links to outside: the links go, their targets stay. */
        assert_int_equal(fsx_delete(e->root, "organism/t", NULL), 0);
        assert_false(host_lexists(e->root_path, "organism/t"));
        assert_true(host_lexists(e->root_path, "organism"));
        /* A link itself is deleted, not its target. */
        assert_int_equal(fsx_delete(e->root, "knowledge-link.md", NULL), 0);
        assert_false(host_lexists(e->root_path, "knowledge-link.md"));
        assert_outside_untouched(e);

        put(e->root_path, "organism/f", "f");
        assert_int_equal(fsx_delete(e->root, "organism/f", NULL), 0);
        assert_false(host_lexists(e->root_path, "organism/f"));
        assert_err(fsx_delete(e->root, "organism/f", &_err), -ENOENT,
                   "'organism/f' does not exist");
        assert_err(fsx_delete(e->root, "missing/f", &_err), -ENOENT, "'missing/f' does not exist");
        assert_err(fsx_delete(e->root, ".", &_err), -EBUSY,
                   "'.' is the workspace itself; it cannot be deleted");

        /* Bounded depth: deeper than FSX_DEPTH_MAX is refused, not recursed. */
        char deep[2 * (FSX_DEPTH_MAX + 2) + 1] = "";
        for (int i = 0; i < FSX_DEPTH_MAX + 2; i++)
                strcat(deep, i ? "/d" : "d");
        assert_int_equal(fsx_mkdirs(e->root, deep, 0755, NULL), 0);
        assert_err(fsx_delete(e->root, "d", &_err), -E2BIG,
                   "'d' is nested more than 128 directories deep");
        deep[2 * 3 - 1] = 0; /* "d/d/d" */
        assert_int_equal(fsx_delete(e->root, deep, NULL), 0);
        assert_int_equal(fsx_delete(e->root, "d", NULL), 0);
        assert_false(host_lexists(e->root_path, "d"));
        assert_outside_untouched(e);
}

static void test_list_and_stat(void **state) {
        struct env *e = *state;
        put(e->root_path, "a", "abc");
        host_mkdir(e->root_path, "b");
        host_mkdir(e->root_path, ".git/hooks");
        put(e->root_path, ".GIT", "gitdir: elsewhere");
        host_mkdir(e->root_path, ".seed/secrets");
        host_mkdir(e->root_path, "b/.seed");
        host_symlink(e->outside, e->root_path, "c");
        _cleanup_free_ char *fifo = path_join(e->root_path, "f");
        assert_int_equal(mkfifo(fifo, 0644), 0);

        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        assert_int_equal(fsx_list(e->root, ".", 100, &l, NULL), 0);
        assert_int_equal(l->n, 4);
        assert_int_equal(l->total, 4);
        assert_false(l->truncated);
        const char *names[] = {"a", "b", "c", "f"};
        enum fsx_type types[] = {FSX_FILE, FSX_DIR, FSX_SYMLINK, FSX_OTHER};
        for (size_t i = 0; i < 4; i++) {
                assert_string_equal(l->entries[i].name, names[i]);
                assert_int_equal(l->entries[i].type, types[i]);
        }
        assert_int_equal(l->entries[0].size, 3);
        assert_int_equal(l->entries[2].size, strlen(e->outside));
        assert_string_equal(fsx_type_name(l->entries[3].type), "other");
        fsx_list_free(TAKE_PTR(l));

        assert_int_equal(fsx_list(e->root, "", 2, &l, NULL), -EINVAL);
        assert_int_equal(fsx_list(e->root, "./", 2, &l, NULL), 0);
        assert_int_equal(l->n, 2);
        assert_int_equal(l->total, 4);
        assert_true(l->truncated);
        fsx_list_free(TAKE_PTR(l));
        assert_int_equal(fsx_list(e->root, "b", 0, &l, NULL), 0);
        assert_int_equal(l->n, 0);
        assert_int_equal(l->total, 1);
        assert_true(l->truncated);
        fsx_list_free(TAKE_PTR(l));
        /* .seed is hidden only at the top. */
        assert_int_equal(fsx_list(e->root, "b", 10, &l, NULL), 0);
        assert_int_equal(l->n, 1);
        assert_string_equal(l->entries[0].name, ".seed");
        fsx_list_free(TAKE_PTR(l));
        assert_err(fsx_list(e->root, "a", 10, &l, &_err), -ENOTDIR,
                   "'a': part of the path is not a directory");
        assert_err(fsx_list(e->root, "c", 10, &l, &_err), -ELOOP,
                   "'c' is a symlink or leads outside the workspace");
        assert_null(l);

        /* A FIFO is refused at once, without waiting for a writer. */
        char *data = NULL;
        assert_err(fsx_read(e->root, "f", 100, &data, NULL, &_err), -EINVAL,
                   "'f' is not a regular file");

        struct fsx_stat st;
        assert_int_equal(fsx_stat(e->root, ".", &st, NULL), 0);
        assert_int_equal(st.type, FSX_DIR);
        assert_int_equal(fsx_stat(e->root, "b", &st, NULL), 0);
        assert_int_equal(st.type, FSX_DIR);
        assert_int_equal(fsx_stat(e->root, "a", &st, NULL), 0);
        assert_int_equal(st.type, FSX_FILE);
        assert_int_equal(st.size, 3);
        assert_int_equal(st.mode, 0644);
        assert_true(st.mtime_ms > 0);
        assert_int_equal(fsx_stat(e->root, "f", &st, NULL), 0);
        assert_int_equal(st.type, FSX_OTHER);
        assert_err(fsx_stat(e->root, "zz", &st, &_err), -ENOENT, "'zz' does not exist");
        assert_outside_untouched(e);
}

static void test_mkdirs(void **state) {
        struct env *e = *state;
        assert_int_equal(fsx_mkdirs(e->root, "skills/x/y", 0755, NULL), 0);
        assert_int_equal(fsx_mkdirs(e->root, "skills/x/y/", 0755, NULL), 0);
        assert_int_equal(fsx_mkdirs(e->root, ".", 0755, NULL), 0);
        assert_true(host_lexists(e->root_path, "skills/x/y"));
        put(e->root_path, "skills/file", "f");
        assert_err(fsx_mkdirs(e->root, "skills/file/z", 0755, &_err), -ENOTDIR,
                   "'skills/file/z': part of the path is not a directory");
        host_symlink(e->elsewhere, e->root_path, "skills/x/link");
        assert_err(fsx_mkdirs(e->root, "skills/x/link/z", 0755, &_err), -ELOOP,
                   "'skills/x/link/z' is a symlink or leads outside the workspace");
        assert_outside_untouched(e);
}

/* ---- the race ------------------------------------------------------------ */

#define RACE_ITERATIONS 600

struct race {
        int root;
        atomic_bool stop;
        atomic_ulong swaps;
};

/* Swaps root/d (a directory) and root/d_swap (a symlink to outside) as fast
 * as it can, until told to stop. */
static void *swapper(void *p) {
        struct race *r = p;
        while (!atomic_load(&r->stop)) {
                if (renameat2(r->root, "d", r->root, "d_swap", RENAME_EXCHANGE) < 0)
                        break;
                atomic_fetch_add(&r->swaps, 1);
        }
        return NULL;
}

/* Waits until the swapper has swapped at least once more than seen, so the
 * loop below races it instead of the scheduler (on one CPU a new thread may
 * not run before a short loop ends). */
static bool race_wait_swap(struct race *r, unsigned long seen) {
        int64_t deadline = now_ms() + 10000;
        while (atomic_load(&r->swaps) <= seen && now_ms() < deadline)
                sched_yield();
        return atomic_load(&r->swaps) > seen;
}

static void test_race_swap_dir_for_symlink(void **state) {
        struct env *e = *state;
        host_mkdir(e->root_path, "d");
        host_symlink(e->outside, e->root_path, "d_swap");
        if (renameat2(e->root, "d", e->root, "d_swap", RENAME_EXCHANGE) < 0) {
                print_message("# RENAME_EXCHANGE unsupported (%s)\n", strerror(errno));
                skip();
        }
        struct race r = {.root = e->root};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, swapper, &r), 0);
        assert_true(race_wait_swap(&r, 0));
        unsigned ok = 0, refused = 0, other = 0;
        for (int i = 0; i < RACE_ITERATIONS; i++) {
                if (i % 64 == 63) /* let the swapper in, on one CPU too */
                        assert_true(race_wait_swap(&r, atomic_load(&r.swaps)));
                char rel[64];
                char *data = NULL;
                struct fsx_list *l = NULL;
                int results[5];
                snprintf(rel, sizeof rel, "d/s%d/f", i % 8);
                results[0] = fsx_write(e->root, "d/secret", "pwned", 5, 0644, NULL);
                results[1] = fsx_write(e->root, rel, "pwned", 5, 0644, NULL);
                results[2] = fsx_read(e->root, "d/secret", 100, &data, NULL, NULL);
                results[3] = fsx_delete(e->root, "d/secret", NULL);
                results[4] = fsx_list(e->root, "d", 100, &l, NULL);
                if (data)
                        /* Only ever our own write, never the outside file. */
                        assert_string_equal(data, "pwned");
                free(data);
                if (l)
                        for (size_t k = 0; k < l->n; k++)
                                assert_false(streq(l->entries[k].name, "secret") &&
                                             l->entries[k].size == strlen(SECRET));
                fsx_list_free(l);
                for (size_t k = 0; k < ARRAY_SIZE(results); k++) {
                        if (results[k] >= 0)
                                ok++;
                        else if (results[k] == -ELOOP || results[k] == -ENOENT ||
                                 results[k] == -ENOTDIR)
                                refused++;
                        else
                                other++;
                }
        }
        atomic_store(&r.stop, true);
        assert_int_equal(pthread_join(t, NULL), 0);
        print_message("# race: %lu swaps; %u operations succeeded inside, %u refused, %u other\n",
                      atomic_load(&r.swaps), ok, refused, other);
        assert_int_equal(ok + refused + other, 5 * RACE_ITERATIONS);
        assert_int_equal(other, 0);
        assert_outside_untouched(e);
        /* Whatever was written landed beneath the root. */
        assert_int_equal(count_entries(e->root_path, ".fsx-"), 0);
}

#define BOTH(f)                                                                \
        {#f " [openat2]", f, setup, teardown, (void *)&MODE_OPENAT2},          \
        {#f " [walk]", f, setup, teardown, (void *)&MODE_WALK}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_check_path_accepts),
                cmocka_unit_test(test_check_path_refuses),
                cmocka_unit_test(test_open_root_and_switch),
                BOTH(test_read_write),
                BOTH(test_symlinked_file),
                BOTH(test_symlinked_parent),
                BOTH(test_hardlink),
                BOTH(test_atomic_failure_leaves_no_temp),
                BOTH(test_delete),
                BOTH(test_list_and_stat),
                BOTH(test_mkdirs),
                BOTH(test_race_swap_dir_for_symlink),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
