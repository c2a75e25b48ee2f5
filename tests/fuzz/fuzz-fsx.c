/* fuzz-fsx.c — kernel/fsx path validation and file access on arbitrary paths.
 *
 * Input: byte 0 picks the operation (low 3 bits) and, with bit 0x80, the
 * component walk instead of openat2; byte 1 holds flags (fsx_open's flags,
 * fsx_write's FSX_MODE_KEEP); the rest is the path, up to an optional 0xfe
 * byte after which come the bytes to write.
 *   0 validation only   1 fsx_read    2 fsx_write   3 fsx_delete
 *   4 fsx_mkdirs        5 fsx_list    6 fsx_stat    7 fsx_open (flags: byte 1)
 *
 * Each input runs in a fresh fixture:
 *   <tmp>/root/       the workspace, with links to outside, a hard link to
 *                     outside/secret, .git/config, .seed/control-token
 *                     (holding the secret too), ordinary files
 *   <tmp>/outside/    secret, dir/ — must never change, be read or listed
 * Checked every time: an accepted path's normalised form has no "..", ".git",
 * control character, NUL, leading, doubled or trailing slash; every message
 * is printable ASCII; the operation on the raw bytes fails exactly when the
 * path is refused; nothing outside the root changes; nothing read is the
 * secret. */
#include "base/fileio.h"
#include "fsx/fsx.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#define SECRET "fuzz-fsx outside secret\n"

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static char base[64], root_path[96], outside[96];
static int root_fd = -1;
static bool have_hardlink, root_dirty = true;

static void cleanup(void) {
        if (base[0])
                (void)rm_rf(base);
}

static void put(const char *dir, const char *rel, const char *content) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", dir, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        check(fd >= 0);
        check(fchmod(fd, 0644) == 0);
        check(write(fd, content, strlen(content)) == (ssize_t)strlen(content));
        close(fd);
}

static void init_once(void) {
        if (base[0])
                return;
        strcpy(base, "/tmp/seed-fuzz-fsx-XXXXXX");
        check(mkdtemp(base));
        atexit(cleanup);
        snprintf(root_path, sizeof root_path, "%s/root", base);
        snprintf(outside, sizeof outside, "%s/outside", base);
        check(mkdir(outside, 0755) == 0);
        char p[256];
        snprintf(p, sizeof p, "%s/dir", outside);
        check(mkdir(p, 0755) == 0);
        put(outside, "secret", SECRET);
}

/* A fresh workspace: links to outside (absolute, relative, dangling, to a
 * directory), a hard link to the secret, .git, ordinary content. */
static void make_root(void) {
        if (!root_dirty)
                return;
        root_dirty = false;
        if (root_fd >= 0)
                close(root_fd);
        check(rm_rf(root_path) == 0);
        check(mkdir(root_path, 0755) == 0);
        char p[256], t[256];
        const char *dirs[] = {"knowledge", "organism", "organism/src", ".git", "skills", ".seed"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                snprintf(p, sizeof p, "%s/%s", root_path, dirs[i]);
                check(mkdir(p, 0755) == 0);
        }
        put(root_path, "knowledge/real.md", "real");
        put(root_path, "organism/src/main.c", "int main(void) { return 0; }\n");
        put(root_path, ".git/config", "[core]\n");
        put(root_path, ".seed/control-token", SECRET); /* the kernel's: never readable */
        /* Targets starting with '@' are relative to outside/. */
        struct {
                const char *target, *link;
        } links[] = {
                {"@/secret", "knowledge/x.md"},
                {"@", "skills/out"},
                {"../../outside/secret", "organism/rel"},
                {"../outside", "up"},
                {"@/nothing-here", "knowledge/dangling.md"},
                {"real.md", "knowledge/inside.md"},
                {"/proc/self/root", "organism/proc"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
                const char *tg = links[i].target;
                if (tg[0] == '@')
                        snprintf(t, sizeof t, "%s%s", outside, tg + 1);
                else
                        snprintf(t, sizeof t, "%s", tg);
                snprintf(p, sizeof p, "%s/%s", root_path, links[i].link);
                check(symlink(t, p) == 0);
        }
        snprintf(t, sizeof t, "%s/secret", outside);
        snprintf(p, sizeof p, "%s/hard", root_path);
        have_hardlink = link(t, p) == 0;
        check(fsx_open_root(root_path, &root_fd) == 0);
}

/* outside/ holds exactly secret (unchanged, one link or two with the
 * fixture's hard link) and an empty dir/; base holds exactly root/ and
 * outside/. */
static size_t count_entries(const char *dir) {
        DIR *d = opendir(dir);
        check(d);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void check_outside(void) {
        char p[256];
        check(count_entries(base) == 2);
        check(count_entries(outside) == 2);
        snprintf(p, sizeof p, "%s/dir", outside);
        check(count_entries(p) == 0);
        snprintf(p, sizeof p, "%s/secret", outside);
        struct stat st;
        check(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);
        char *data = NULL;
        check(read_file(p, 4096, &data, NULL) == 0);
        check(streq(data, SECRET));
        free(data);
        check(lstat(root_path, &st) == 0 && S_ISDIR(st.st_mode));
}

static bool is_git(const char *c, size_t n) {
        while (n > 0 && (c[n - 1] == '.' || c[n - 1] == ' '))
                n--;
        return n == 4 && strncasecmp(c, ".git", 4) == 0;
}

static void check_message(int r, const char *err) {
        if (r >= 0) {
                check(!err);
                return;
        }
        if (r == -ENOMEM && !err)
                return;
        check(err && *err);
        for (const unsigned char *p = (const unsigned char *)err; *p; p++)
                check(*p >= 0x20 && *p < 0x7f);
        check(strlen(err) < 1024);
}

/* The normalised form obeys every rule, and is what the raw bytes mean. */
static void check_normalized(const char *p, size_t len, const char *norm) {
        size_t n = strlen(norm);
        check(n > 0 && n <= len && n <= FSX_PATH_MAX);
        check(!memchr(p, 0, len));
        if (streq(norm, "."))
                return;
        check(norm[0] != '/' && norm[n - 1] != '/' && !strstr(norm, "//"));
        for (const char *c = norm; *c;) {
                size_t cl = strcspn(c, "/");
                check(cl > 0 && cl <= FSX_NAME_MAX);
                check(!(cl == 1 && c[0] == '.'));
                check(!(cl == 2 && c[0] == '.' && c[1] == '.'));
                check(!is_git(c, cl));
                check(!(c == norm && cl == 5 && strncasecmp(c, ".seed", 5) == 0));
                for (size_t i = 0; i < cl; i++)
                        check((unsigned char)c[i] >= 0x20 && c[i] != 0x7f);
                c += cl;
                if (*c == '/')
                        c++;
        }
        /* Normalising again changes nothing. */
        char *again = NULL;
        check(fsx_normalize(norm, n, &again, NULL) == 0);
        check(streq(again, norm));
        free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        init_once();
        uint8_t op = data[0] & 7, flagbyte = data[1];
        bool walk = data[0] & 0x80;
        data += 2;
        size -= 2;
        const uint8_t *sep = memchr(data, 0xfe, size);
        size_t plen = sep ? (size_t)(sep - data) : size;
        const uint8_t *content = sep ? sep + 1 : NULL;
        size_t clen = sep ? size - plen - 1 : 0;

        char *path = malloc(plen + 1);
        check(path);
        memcpy(path, data, plen);
        path[plen] = 0;

        /* Validation of the raw bytes. */
        char *norm = NULL, *err = NULL;
        int r = fsx_normalize(path, plen, &norm, &err);
        check_message(r, err);
        check(fsx_check_path_len(path, plen, NULL) == r);
        if (r >= 0)
                check_normalized(path, plen, norm);
        else
                check(!norm && (r == -EINVAL || r == -EPERM || r == -ENAMETOOLONG));
        free(norm);
        free(err);
        err = NULL;
        /* As a C string the path ends at its first NUL. */
        int r_c = fsx_check_path(path, NULL);
        if (!memchr(path, 0, plen))
                check(r_c == r);

        make_root();
        fsx_force_fallback(walk);
        char *got = NULL;
        size_t got_len = 0;
        struct fsx_list *l = NULL;
        struct fsx_stat st;
        int fd = -1;
        switch (op) {
        case 0:
                r = fsx_check_path(path, &err);
                break;
        case 1:
                r = fsx_read(root_fd, path, 1 << 16, &got, &got_len, &err);
                break;
        case 2:
                r = fsx_write(root_fd, path, content ? (const void *)content : "", clen,
                              (mode_t)(flagbyte & 1 ? FSX_MODE_KEEP : 0644), &err);
                break;
        case 3:
                r = fsx_delete(root_fd, path, &err);
                break;
        case 4:
                r = fsx_mkdirs(root_fd, path, 0755, &err);
                break;
        case 5:
                r = fsx_list(root_fd, path, 64, &l, &err);
                break;
        case 6:
                r = fsx_stat(root_fd, path, &st, &err);
                break;
        case 7: {
                static const int modes[] = {O_RDONLY, O_WRONLY, O_RDWR, O_PATH};
                int flags = modes[flagbyte & 3];
                if (flags != O_PATH) {
                        if (flagbyte & 4)
                                flags |= O_CREAT;
                        if (flagbyte & 8)
                                flags |= O_TRUNC;
                        if (flagbyte & 16)
                                flags |= O_DIRECTORY;
                        flags |= O_NONBLOCK;
                }
                r = fsx_open(root_fd, path, flags, 0644, &fd, &err);
                if (r >= 0 && (flagbyte & 32) && flags != O_PATH)
                        (void)write(fd, "w", 1);
                break;
        }
        }
        fsx_force_fallback(false);
        /* Only operations that may change the workspace make the next input
         * rebuild it. */
        root_dirty = op == 2 || op == 3 || op == 4 || op == 7;
        check_message(r, err);
        if (r_c < 0)
                check(r == r_c); /* a refused path never reaches the file system */
        if (got) {
                check(got_len <= (1 << 16));
                check(!(got_len == strlen(SECRET) && memcmp(got, SECRET, got_len) == 0));
        }
        if (l) {
                check(l->n <= 64 && l->n <= l->total);
                for (size_t i = 0; i < l->n; i++)
                        /* Never outside/'s listing ("secret" next to "dir"),
                         * never .git, never .seed. */
                        check(!streq(l->entries[i].name, "dir") &&
                              !streq(l->entries[i].name, ".seed") &&
                              !is_git(l->entries[i].name, strlen(l->entries[i].name)));
        }
        if (fd >= 0)
                close(fd);
        free(got);
        fsx_list_free(l);
        free(err);
        free(path);
        check_outside();
        (void)have_hardlink;
        return 0;
}
