/* fuzz-migrations.c — the organism's migrations as the kernel reads them
 * (kernel/organism/migrations.c, kernel/db): file names and contents the
 * model wrote into organism/migrations/, and the owner's database URL.
 *
 * The first byte chooses:
 *   even  the rest is a folder: lines "NAME" or "NAME\tSQL" (at most 16),
 *         each written as organism/migrations/NAME in a folder of the
 *         target's own (a NAME with '/', or that cannot be made, is left
 *         out), then loaded with organism_migrations_load();
 *   odd   the rest is a conninfo (keywords or a postgresql:// URL) for
 *         db_conninfo_parse().
 * Loaded migrations are sorted by version with no duplicate, each named
 * NNNN_name.sql as db_migration_parse_name() reads it, its version its
 * name's, its SQL the file's bytes without a NUL; a refusal explains
 * itself. A conninfo read is keyword/value pairs, none empty. */
#include "db/db.h"
#include "fsx/fsx.h"
#include "organism/migrations.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

#define MAX_FILES 16

static char dir[] = "/tmp/fuzz-migrations-XXXXXX";
static char mig[sizeof dir + 32];

static void empty_folder(void) {
        DIR *d = opendir(mig);
        check(d);
        struct dirent *e;
        while ((e = readdir(d)))
                if (!streq(e->d_name, ".") && !streq(e->d_name, ".."))
                        check(unlinkat(dirfd(d), e->d_name, 0) == 0);
        closedir(d);
}

static void remove_folder(void) {
        empty_folder();
        char path[sizeof mig];
        (void)rmdir(mig);
        snprintf(path, sizeof path, "%s/organism", dir);
        (void)rmdir(path);
        (void)rmdir(dir);
}

static void make_folder(void) {
        static bool made;
        if (made)
                return;
        check(mkdtemp(dir));
        char path[sizeof mig];
        snprintf(path, sizeof path, "%s/organism", dir);
        check(mkdir(path, 0755) == 0);
        snprintf(mig, sizeof mig, "%s/organism/migrations", dir);
        check(mkdir(mig, 0755) == 0);
        check(atexit(remove_folder) == 0);
        made = true;
}

static void put(const char *name, const char *sql, size_t len) {
        if (strchr(name, '/') || !*name || streq(name, ".") || streq(name, ".."))
                return;
        char path[sizeof mig + 256];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", mig, name) >= sizeof path)
                return;
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return; /* too long a name, … */
        check(write(fd, sql, len) == (ssize_t)len);
        close(fd);
}

static void folder(const char *text, size_t size) {
        make_folder();
        empty_folder();
        const char *p = text, *end = text + size;
        for (size_t i = 0; i < MAX_FILES && p < end; i++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                const char *line_end = nl ? nl : end;
                const char *tab = memchr(p, '\t', (size_t)(line_end - p));
                char *name = strndup(p, (size_t)((tab ? tab : line_end) - p));
                check(name);
                if (!memchr(p, 0, (size_t)((tab ? tab : line_end) - p)))
                        put(name, tab ? tab + 1 : "", tab ? (size_t)(line_end - tab - 1) : 0);
                free(name);
                p = nl ? nl + 1 : end;
        }
        int root = -1;
        check(fsx_open_root(dir, &root) == 0);
        struct db_migration *m = NULL;
        size_t n = 0;
        char *err = NULL;
        int r = organism_migrations_load(root, "organism/migrations", &m, &n, &err);
        close(root);
        if (r < 0) {
                check(r == -ENOMEM || (err && *err));
                free(err);
                return;
        }
        check(!err);
        for (size_t i = 0; i < n; i++) {
                int v = 0;
                check(db_migration_parse_name(m[i].name, &v) == 0 && v == m[i].version && v >= 1);
                check(m[i].sql && strlen(m[i].sql) == m[i].len);
                check(i == 0 || m[i - 1].version < m[i].version);
                const char *u = strchr(m[i].name, '_');
                check(u && u - m[i].name >= 4 && endswith(m[i].name, ".sql"));
        }
        char *again = NULL;
        check(db_migrations_validate(m, n, &again) == 0 && !again);
        organism_migrations_free(m, n);
}

static void conninfo(const char *text) {
        char **kv = NULL;
        int r = db_conninfo_parse(text, &kv);
        check(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r < 0) {
                check(!kv);
                return;
        }
        size_t n = strv_length(kv);
        check(n % 2 == 0);
        for (size_t i = 0; i < n; i++)
                check(*kv[i]);
        strv_free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        char *text = strndup((const char *)data + 1, size - 1);
        check(text);
        if (data[0] & 1)
                conninfo(text);
        else
                folder((const char *)data + 1, size - 1);
        free(text);
        return 0;
}
