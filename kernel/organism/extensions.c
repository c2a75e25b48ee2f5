/* extensions.c — organism/control/extensions.json: the admin screens an
 * organism declares, checked and bounded. See extensions.h. */
#include "organism/extensions.h"
#include "base/json.h"
#include "base/text.h"
#include "fsx/fsx.h"

#include <ctype.h>
#include <sys/inotify.h>

/* Characters a screen path may hold as they are: RFC 3986's unreserved and
 * sub-delims, ':' '@' '/', '%' (escapes, checked), '?' and '#'. No space,
 * control, '\', quote, '<', '>', '`', '{', '}', '|', '^' or 8-bit byte. */
static bool path_char_ok(unsigned char c) {
        return isalnum(c) || (c && strchr("-._~!$&'()*+,;=:@/%?#", c));
}

bool organism_screen_id_ok(const char *id) {
        size_t n = id ? strlen(id) : 0;
        if (n == 0 || n > ORGANISM_EXT_ID_MAX || id[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(id[i] >= 'a' && id[i] <= 'z') && !(id[i] >= '0' && id[i] <= '9') && id[i] != '-')
                        return false;
        return true;
}

static bool has_dot_segment(const char *p) {
        for (const char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
                size_t n = strcspn(s + 1, "/");
                if ((n == 1 && s[1] == '.') || (n == 2 && s[1] == '.' && s[2] == '.'))
                        return true;
        }
        return false;
}

static bool is_seed_path(const char *p) {
        return startswith(p, "/_seed") && (p[6] == 0 || p[6] == '/');
}

/* Every %HH well formed and none a control character (%00-%1F, %7F). */
static bool escapes_ok(const char *p) {
        for (; *p; p++) {
                if (*p != '%')
                        continue;
                int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
                if (hi < 0 || lo < 0)
                        return false;
                int v = hi * 16 + lo;
                if (v < 0x20 || v == 0x7f)
                        return false;
                p += 2;
        }
        return true;
}

bool organism_screen_path_ok(const char *path, const char **ret_why) {
        const char *why = NULL;
        size_t n = path ? strlen(path) : 0;
        _cleanup_free_ char *decoded = NULL;
        if (n == 0 || path[0] != '/')
                why = "must be an absolute path on the app's origin, starting with '/' (no scheme, no host)";
        else if (n > ORGANISM_EXT_PATH_MAX)
                why = "is longer than 512 bytes";
        else if (path[1] == '/')
                why = "starts with '//', which a browser reads as another host";
        for (size_t i = 0; !why && i < n; i++)
                if (!path_char_ok((unsigned char)path[i]))
                        why = "has a character a URL path may not hold as it is (a space, a control character, "
                              "'\\', a quote, '<', '>' or a non-ASCII byte)";
        if (!why && !escapes_ok(path))
                why = "has a malformed percent-escape or one of a control character";
        if (!why) {
                size_t pl = strcspn(path, "?#");
                int r = percent_decode(path, pl, false, &decoded);
                if (r < 0)
                        why = "has a malformed percent-escape";
                else if (has_dot_segment(decoded))
                        why = "has '.' or '..' segments";
                else if (is_seed_path(decoded) || is_seed_path(path))
                        why = "is the control plane's (/_seed), never an admin screen";
        }
        if (why && ret_why)
                *ret_why = why;
        return !why;
}

/* The length of the UTF-8 sequence at p (valid, from jansson) and whether
 * it is a control or a direction character: C0, DEL, C1, U+2028/9, the
 * bidirectional marks, embeddings, overrides and isolates. */
static bool title_char_bad(const unsigned char *p, size_t left, size_t *ret_len) {
        size_t k = utf8_seq(p, left);
        *ret_len = k ? k : 1;
        if (k == 0 || p[0] < 0x20 || p[0] == 0x7f)
                return true;
        if (k == 2 && p[0] == 0xc2 && p[1] < 0xa0)
                return true; /* U+0080..U+009F */
        if (k == 3 && p[0] == 0xe2 && p[1] == 0x80)
                return p[2] == 0x8e || p[2] == 0x8f || (p[2] >= 0xa8 && p[2] <= 0xae);
        if (k == 3 && p[0] == 0xe2 && p[1] == 0x81)
                return p[2] >= 0xa6 && p[2] <= 0xa9;
        return false;
}

static const char *title_problem(const char *t) {
        size_t n = strlen(t);
        if (n == 0 || strspn(t, " ") == n)
                return "is empty";
        if (n > ORGANISM_EXT_TITLE_MAX)
                return "is longer than 80 bytes";
        for (size_t i = 0, k = 0; i < n; i += k)
                if (title_char_bad((const unsigned char *)t + i, n - i, &k))
                        return "has a control or text-direction character";
        return NULL;
}

/* ---- the errors, bounded ---- */

struct errs {
        char **v;
        size_t n, dropped;
};

static int err_add(struct errs *e, const char *fmt, ...) _printf_(2, 3);
static int err_add(struct errs *e, const char *fmt, ...) {
        if (e->n >= ORGANISM_EXT_ERRORS_MAX) {
                e->dropped++;
                return 0;
        }
        char msg[ORGANISM_EXT_ERROR_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        int r = strv_push(&e->v, msg);
        if (r < 0)
                return r;
        e->n++;
        return 0;
}

/* Hands the messages over: a NULL-terminated list, empty when none. */
static int err_finish(struct errs *e, char ***ret) {
        int r = 0;
        if (e->dropped > 0)
                r = strv_pushf(&e->v, "… and %zu more problem%s", e->dropped, e->dropped == 1 ? "" : "s");
        if (r >= 0 && !e->v && !(e->v = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r < 0) {
                strv_free(e->v);
                return r;
        }
        *ret = e->v;
        return 0;
}

/* jansson's message may quote the input: printable ASCII of it only, cut. */
static void clean_text(const char *in, char *out, size_t cap) {
        size_t o = 0;
        for (; in && *in && o + 1 < cap && o < 120; in++)
                out[o++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
        out[o] = 0;
}

/* ---- parsing ---- */

void organism_extensions_free(struct organism_extensions *e) {
        if (!e)
                return;
        for (size_t i = 0; i < e->n_screens; i++) {
                free(e->screens[i].id);
                free(e->screens[i].title);
                free(e->screens[i].path);
        }
        free(e->screens);
        strv_free(e->errors);
        free(e);
}

static const char *str_member(json_t *o, const char *key) {
        json_t *v = json_object_get(o, key);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool id_taken(const struct organism_extensions *x, const char *id) {
        for (size_t i = 0; i < x->n_screens; i++)
                if (streq(x->screens[i].id, id))
                        return true;
        return false;
}

/* One entry of "screens": added to x, or refused with an error. */
static int parse_entry(json_t *o, size_t i, struct organism_extensions *x, struct errs *e) {
        if (!json_is_object(o))
                return err_add(e, "screens[%zu] is not an object with id, title and path", i);
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
                if (!streq(key, "id") && !streq(key, "title") && !streq(key, "path"))
                        return err_add(e, "screens[%zu] has a key other than id, title and path", i);
        }
        const char *id = str_member(o, "id"), *title = str_member(o, "title"), *path = str_member(o, "path");
        const char *why = NULL;
        if (!organism_screen_id_ok(id))
                return err_add(e, "screens[%zu].id must be 1 to %d of a-z, 0-9 and '-' (not first)", i,
                               ORGANISM_EXT_ID_MAX);
        if (id_taken(x, id))
                return err_add(e, "screens[%zu] (\"%s\"): another screen has this id", i, id);
        if (!title)
                return err_add(e, "screens[%zu] (\"%s\"): title must be a string", i, id);
        if ((why = title_problem(title)))
                return err_add(e, "screens[%zu] (\"%s\"): title %s", i, id, why);
        if (!path)
                return err_add(e, "screens[%zu] (\"%s\"): path must be a string", i, id);
        if (!organism_screen_path_ok(path, &why))
                return err_add(e, "screens[%zu] (\"%s\"): path %s", i, id, why);
        struct organism_screen s = {strdup(id), strdup(title), strdup(path)};
        if (!s.id || !s.title || !s.path) {
                free(s.id);
                free(s.title);
                free(s.path);
                return -ENOMEM;
        }
        x->screens[x->n_screens++] = s;
        return 0;
}

static int parse_doc(json_t *doc, struct organism_extensions *x, struct errs *e) {
        if (!json_is_object(doc))
                return err_add(e, ORGANISM_EXT_FILE ": must be an object {\"screens\": [...]}");
        const char *key;
        json_t *v;
        bool other = false;
        json_object_foreach(doc, key, v) other |= !streq(key, "screens");
        int r = other ? err_add(e, ORGANISM_EXT_FILE ": keys other than \"screens\" are ignored") : 0;
        json_t *arr = json_object_get(doc, "screens");
        if (r < 0 || !arr)
                return r;
        if (!json_is_array(arr))
                return err_add(e, ORGANISM_EXT_FILE ": \"screens\" must be a list");
        size_t n = json_array_size(arr), take = n < ORGANISM_EXT_SCREENS_MAX ? n : ORGANISM_EXT_SCREENS_MAX;
        x->screens = calloc(take ? take : 1, sizeof *x->screens);
        if (!x->screens)
                return -ENOMEM;
        for (size_t i = 0; i < take && r >= 0; i++)
                r = parse_entry(json_array_get(arr, i), i, x, e);
        if (r >= 0 && n > take)
                r = err_add(e, "only the first %d screens are shown: %zu more left out", ORGANISM_EXT_SCREENS_MAX,
                            n - take);
        return r;
}

int organism_extensions_parse(const char *data, size_t len, struct organism_extensions **ret) {
        _cleanup_(organism_extensions_freep) struct organism_extensions *x = calloc(1, sizeof *x);
        struct errs e = {0};
        int r;
        if (!x)
                return -ENOMEM;
        if (len > ORGANISM_EXT_FILE_MAX) {
                r = err_add(&e, ORGANISM_EXT_FILE ": larger than %d KiB", ORGANISM_EXT_FILE_MAX / 1024);
        } else {
                json_error_t jerr;
                _cleanup_json_ json_t *doc = json_loadb(data ? data : "", len, JSON_REJECT_DUPLICATES, &jerr);
                char text[ORGANISM_EXT_ERROR_MAX];
                if (!doc)
                        clean_text(jerr.text, text, sizeof text);
                r = doc ? parse_doc(doc, x, &e)
                        : err_add(&e, ORGANISM_EXT_FILE ":%d:%d: not JSON: %s", jerr.line, jerr.column, text);
        }
        if (r < 0) {
                strv_free(e.v);
                return r;
        }
        r = err_finish(&e, &x->errors);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}

/* Why fsx_read refused the file, in the owner's words. */
static const char *read_refusal(int r) {
        switch (r) {
        case -EFBIG:
                return "larger than 64 KiB";
        case -ELOOP:
                return "a symbolic link on its path (never followed)";
        case -EISDIR:
                return "a directory";
        case -EMLINK:
                return "a file with several hard links";
        case -EINVAL:
                return "not a regular file";
        default:
                return strerror(-r);
        }
}

int organism_extensions_read(int root, struct organism_extensions **ret) {
        _cleanup_free_ char *data = NULL, *err = NULL;
        size_t len = 0;
        int r = fsx_read(root, ORGANISM_EXT_FILE, ORGANISM_EXT_FILE_MAX, &data, &len, &err);
        if (r >= 0 || r == -ENOMEM)
                return r < 0 ? r : organism_extensions_parse(data, len, ret);
        _cleanup_(organism_extensions_freep) struct organism_extensions *x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        /* No file (or no organism/control/): no screens, nothing wrong. */
        if (r == -ENOENT || r == -ENOTDIR)
                x->errors = calloc(1, sizeof(char *));
        else
                (void)strv_pushf(&x->errors, ORGANISM_EXT_FILE ": not read: %s", read_refusal(r));
        if (!x->errors)
                return -ENOMEM;
        *ret = TAKE_PTR(x);
        return 0;
}

/* The status line of what was read (see extensions.h); NULL when there is
 * nothing to say. 0 or -ENOMEM. */
static int status_line(const struct organism_extensions *x, char **ret) {
        char *line = NULL;
        int r = 0;
        size_t bad = x ? strv_length(x->errors) : 0;
        if (x && bad == 0 && x->n_screens > 0)
                r = xasprintf(&line, "%zu shown", x->n_screens);
        else if (x && bad > 0)
                r = xasprintf(&line, "%zu shown; %zu problem%s in " ORGANISM_EXT_FILE ": %s", x->n_screens, bad,
                              bad == 1 ? "" : "s", x->errors[0]);
        if (r < 0)
                return -ENOMEM;
        *ret = line;
        return 0;
}

static int status_of_root(int root, char **ret) {
        _cleanup_(organism_extensions_freep) struct organism_extensions *x = NULL;
        int r = root < 0 ? 0 : organism_extensions_read(root, &x);
        return r < 0 ? r : status_line(x, ret);
}

int organism_extensions_status(const char *seed_dir, char **ret) {
        _cleanup_close_ int root = -1;
        if (fsx_open_root(seed_dir, &root) < 0)
                root = -1;
        return status_of_root(root, ret);
}

int organism_ext_cache_init(struct organism_ext_cache *c, const char *seed_dir, struct fswatch *watch) {
        *c = (struct organism_ext_cache){.ready = true, .root = -1, .watch = watch};
        pthread_mutex_init(&c->lock, NULL);
        if (fsx_open_root(seed_dir, &c->root) < 0)
                c->root = -1;
        return 0;
}

void organism_ext_cache_done(struct organism_ext_cache *c) {
        if (!c || !c->ready)
                return;
        if (c->root >= 0)
                close(c->root);
        free(c->line);
        pthread_mutex_destroy(&c->lock);
        *c = (struct organism_ext_cache){0};
}

/* What is watched on the way to the file, beneath the folder, and for
 * what: a folder for its names (and its own mode), the file for its
 * content and mode. One that does not exist is seen coming through its
 * parent. */
#define EXT_DIR_MASK                                                                                              \
        (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
#define EXT_FILE_MASK (IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)
static const struct {
        const char *rel;
        uint32_t mask;
} ext_watched[] = {
        {".", EXT_DIR_MASK},
        {"organism", EXT_DIR_MASK},
        {"organism/control", EXT_DIR_MASK | IN_MODIFY | IN_CLOSE_WRITE},
        {ORGANISM_EXT_FILE, EXT_FILE_MASK},
};

/* (Re)arms the watches. False if one that exists could not be watched
 * (a limit, no inotify, no /proc): then nothing is kept. */
static bool ext_arm(struct organism_ext_cache *c) {
        bool all = true;
        for (size_t i = 0; i < ARRAY_SIZE(ext_watched); i++) {
                char p[64 + sizeof ORGANISM_EXT_FILE];
                snprintf(p, sizeof p, "/proc/self/fd/%d/%s", c->root, ext_watched[i].rel);
                int r = fswatch_add(c->watch, p, ext_watched[i].mask);
                if (r < 0 && (r != -ENOENT || i == 0))
                        all = false;
        }
        return all;
}

int organism_ext_cache_status(struct organism_ext_cache *c, uint64_t changes, char **ret) {
        if (c->root < 0) {
                *ret = NULL;
                return 0;
        }
        int r = 0;
        char *line = NULL;
        pthread_mutex_lock(&c->lock);
        if (c->seen != 0 && c->seen == changes) {
                if (c->line && !(line = strdup(c->line)))
                        r = -ENOMEM;
                goto done;
        }
        /* Armed before the count is taken, and that before reading: a
         * change while we read moves the count for the next call. */
        c->seen = 0;
        bool trusted = ext_arm(c);
        uint64_t before = fswatch_changes(c->watch);
        if ((r = status_of_root(c->root, &line)) < 0)
                goto done;
        free(c->line);
        c->line = NULL;
        if (line && !(c->line = strdup(line)))
                goto done; /* answered, not kept */
        c->seen = trusted ? before : 0;
done:
        pthread_mutex_unlock(&c->lock);
        if (r >= 0)
                *ret = line;
        return r;
}
