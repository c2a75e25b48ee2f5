/* extensions.h — the admin screens an organism declares for the control
 * plane, in organism/control/extensions.json (seed 001 §"Control plane",
 * "Admin screens on their own origin"):
 *
 *   {"screens": [{"id": "orders", "title": "Orders", "path": "/admin/orders"}]}
 *
 * The file is code a model wrote, so everything in it is checked and bounded
 * here, and a bad part never costs the good ones: a malformed file gives no
 * screens and one error; a bad entry is left out with an error naming it
 * (screens[2].path: …) and the others are kept. The control plane frames each
 * screen from organism.localhost:<port><path>, never its own origin; path is
 * therefore a same-origin absolute path only (no scheme, no host, no "//" or
 * "\" that a browser reads as a host, no dot segments, never /_seed, no
 * control characters, even percent-encoded).
 *
 * Pure functions besides organism_extensions_read(), which reads the file
 * through fsx (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: a link to a host
 * file is refused, never read). */
#pragma once

#include "base/base.h"
#include "base/fswatch.h"
#include "fsx/fsx.h"

#include <pthread.h>

#define ORGANISM_EXT_FILE "organism/control/extensions.json"
#define ORGANISM_EXT_FILE_MAX (64 * 1024) /* bytes of the file */
#define ORGANISM_EXT_SCREENS_MAX 20       /* screens kept; more are refused */
#define ORGANISM_EXT_ID_MAX 40            /* [a-z0-9][a-z0-9-]* */
#define ORGANISM_EXT_TITLE_MAX 80         /* bytes of UTF-8, no control characters */
#define ORGANISM_EXT_PATH_MAX 512         /* bytes */
#define ORGANISM_EXT_ERRORS_MAX 10        /* messages kept; then one "and N more" */
#define ORGANISM_EXT_ERROR_MAX 300        /* bytes of one message (values in it are cut) */

struct organism_screen {
        char *id, *title, *path;
};

struct organism_extensions {
        struct organism_screen *screens;
        size_t n_screens;
        /* What was refused, one sentence each, NULL-terminated (never NULL
         * itself): the file's own problem, or one per refused entry. */
        char **errors;
};

void organism_extensions_free(struct organism_extensions *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct organism_extensions *, organism_extensions_free)

/* Whether id is a screen id: 1 to ORGANISM_EXT_ID_MAX of [a-z0-9-], not
 * starting with '-'. */
bool organism_screen_id_ok(const char *id);
/* Whether path (a NUL-terminated string) is a screen path (see above).
 * On false, *ret_why (static string) says why; ret_why may be NULL. */
bool organism_screen_path_ok(const char *path, const char **ret_why);

/* Parses len bytes of the file. Always succeeds unless memory runs out
 * (-ENOMEM): a malformed file is one error and no screens. Caller frees
 * with organism_extensions_free(). */
int organism_extensions_parse(const char *data, size_t len, struct organism_extensions **ret);

/* Reads ORGANISM_EXT_FILE beneath the directory fd root (the live Seed's
 * folder) and parses it. A missing file is no screens and no error; one
 * that cannot be read (a symlink, too large, not a regular file) is one
 * error. -ENOMEM only. Caller frees. */
int organism_extensions_read(int root, struct organism_extensions **ret);

/* One line for the Seed's status (the control plane's Status, `seed
 * status`): "2 shown" or "1 shown; 2 refused in
 * organism/control/extensions.json: <the first refusal>", for the folder
 * seed_dir. *ret is NULL when the organism declares nothing and nothing was
 * refused. 0 or -ENOMEM (a folder that cannot be opened is nothing). Caller
 * frees. */
int organism_extensions_status(const char *seed_dir, char **ret);

/* organism_extensions_status() for a status asked many times a second: the
 * file is read and parsed again only when a watch (base/fswatch.h) saw
 * something happen to it or on its way — the Seed's folder, organism/,
 * organism/control/ (a name made, removed, renamed; a chmod) and the file
 * itself (written, chmod, linked). The event is queued before the writer's
 * system call returns, so every change is seen by the next call. The
 * folder is opened once; the watches are added through it
 * (/proc/self/fd), so they are on what the read sees. Without inotify or
 * /proc every call reads. */
struct organism_ext_cache {
        bool ready;           /* initialised (done() on a zeroed one does nothing) */
        pthread_mutex_t lock;
        int root;             /* the Seed's folder, O_PATH; -1: none (no line) */
        struct fswatch *watch;
        uint64_t seen;        /* the watch's count before line was read; 0: nothing kept */
        char *line;           /* as organism_extensions_status() says it; may be NULL */
};

/* A folder that cannot be opened has no line, as above. The watch is the
 * caller's and outlives the cache. 0 or -ENOMEM. */
int organism_ext_cache_init(struct organism_ext_cache *c, const char *seed_dir, struct fswatch *watch);
void organism_ext_cache_done(struct organism_ext_cache *c);
/* Like organism_extensions_status(): *ret NULL or a line the caller frees.
 * changes is fswatch_changes() of the cache's watch, taken by the caller
 * for this call. 0 or -ENOMEM. Thread-safe. */
int organism_ext_cache_status(struct organism_ext_cache *c, uint64_t changes, char **ret);
