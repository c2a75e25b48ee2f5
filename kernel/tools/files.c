/* files.c — the file tools. Every access goes through fsx beneath the root
 * fd (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a symlink anywhere in a
 * path fails the call, with no check-then-use race. */
#include "tools/internal.h"
#include "base/buf.h"
#include "fsx/fsx.h"
#include "tools/regex-guard.h"

#include <regex.h>

#define READ_MAX (8 * 1024 * 1024)        /* read_file / edit_file */
#define LIST_DIR_MAX 2000                 /* entries read per directory */
#define LIST_OUT_MAX 1000                 /* entries shown by list_dir */
#define SEARCH_FILE_MAX (1024 * 1024)     /* larger files are skipped */
#define SEARCH_FILES_MAX 10000            /* files looked at */
#define SEARCH_BYTES_MAX (64 * 1024 * 1024) /* bytes read in all */
#define SEARCH_DEPTH_MAX 32
#define SEARCH_LINE_SHOWN 300             /* bytes of a matching line shown */
#define BINARY_PROBE 8192

/* Normalises args[key]; 1 ok (*ret_norm), 0 error written to ret. */
static int arg_path(json_t *args, const char *key, const char *dflt, const struct tool *t, char **ret_norm,
                    struct tool_result *ret) {
        const char *path = tool_arg_str(args, key);
        if (!path || !*path)
                path = dflt;
        _cleanup_free_ char *why = NULL;
        int r = tools_normalize_path(path, ret_norm, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                r = tool_error(ret, "%s: %s", t->name, why ? why : "invalid path");
                return r < 0 ? r : 0;
        }
        return 1;
}

/* Writes are limited to knowledge/ and skills/ while reflecting. */
static int writable(const struct tool_ctx *ctx, const struct tool *t, const char *norm, struct tool_result *ret) {
        if (ctx->phase != TOOL_PHASE_REFLECT || tools_path_in(norm, tools_reflect_dirs))
                return 1;
        int r = tool_error(ret, "%s: while reflecting only knowledge/ and skills/ can be changed, not '%s'", t->name,
                           norm);
        return r < 0 ? r : 0;
}

static int fsx_failed(struct tool_result *ret, const struct tool *t, int err, char *why) {
        int r = why ? tool_error(ret, "%s: %s", t->name, why) : tool_error(ret, "%s: %s", t->name, strerror(-err));
        free(why);
        return r;
}

static bool binary(const char *data, size_t len) {
        return memchr(data, '\0', len < BINARY_PROBE ? len : BINARY_PROBE) != NULL;
}

/* Whether the read tools show path (a file, or a directory when dir). */
static bool visible(const struct tool_ctx *ctx, const char *path, bool dir) {
        if (!ctx->tracked)
                return true;
        if (dir && streq(path, "."))
                return true;
        size_t lo = 0, hi = strv_length(ctx->tracked), plen = strlen(path);
        while (lo < hi) { /* the first tracked path >= path */
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(ctx->tracked[mid], path) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (!dir)
                return ctx->tracked[lo] && streq(ctx->tracked[lo], path);
        /* "dir/..." sorts after "dir" and "dir.x", "dir-x" (bytes below '/') */
        for (size_t i = lo; ctx->tracked[i] && strncmp(ctx->tracked[i], path, plen) == 0; i++) {
                char c = ctx->tracked[i][plen];
                if (c == '/')
                        return true;
                if (c > '/')
                        break;
        }
        return false;
}

static int not_committed(struct tool_result *ret, const struct tool *t, const char *path) {
        return tool_error(ret, "%s: '%s' is not part of the Seed's committed tree (only committed files can be read here)",
                          t->name, path);
}

static size_t count_lines(const char *data, size_t len) {
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                n += data[i] == '\n';
        return n + (len > 0 && data[len - 1] != '\n');
}

int tools_read_file(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL, *data = NULL;
        int r = arg_path(args, "path", NULL, t, &norm, ret);
        if (r <= 0)
                return r;
        if (!visible(ctx, norm, false))
                return not_committed(ret, t, norm);
        size_t len = 0;
        char *why = NULL;
        r = fsx_read(ctx->root_fd, norm, READ_MAX, &data, &len, &why);
        if (r == -EFBIG) {
                free(why);
                return tool_error(ret, "%s: '%s' is larger than %d bytes; look at parts of it with run (head, sed -n)",
                                  t->name, norm, READ_MAX);
        }
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        if (binary(data, len))
                return tool_error(ret, "%s: '%s' is a binary file (%zu bytes), not shown", t->name, norm, len);
        if (len == 0)
                return tool_ok(ret, "(empty file)");
        int64_t start = tool_arg_int(args, "start_line", 1), max = tool_arg_int(args, "max_lines", 0);
        if (start == 1 && max == 0)
                return tool_take(ret, TAKE_PTR(data), false);

        size_t total = count_lines(data, len);
        if ((size_t)start > total)
                return tool_error(ret, "%s: '%s' has %zu lines; start_line %lld is past the end", t->name, norm, total,
                                  (long long)start);
        const char *p = data, *end = data + len;
        for (int64_t l = 1; l < start; l++)
                p = memchr(p, '\n', (size_t)(end - p)) + 1;
        const char *q = p;
        int64_t shown = 0;
        while (q < end && (max == 0 || shown < max)) {
                const char *nl = memchr(q, '\n', (size_t)(end - q));
                q = nl ? nl + 1 : end;
                shown++;
        }
        return tool_ok(ret, "[lines %lld-%lld of %zu]\n%.*s", (long long)start, (long long)(start + shown - 1), total,
                       (int)(q - p), p);
}

int tools_read_skill(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        if (xasprintf(&path, "skills/%s/SKILL.md", tool_arg_str(args, "name")) < 0)
                return -ENOMEM;
        if (!visible(ctx, path, false))
                return not_committed(ret, t, path);
        size_t len = 0;
        char *why = NULL;
        int r = fsx_read(ctx->root_fd, path, READ_MAX, &data, &len, &why);
        if (r == -ENOENT) {
                free(why);
                return tool_error(ret, "read_skill: there is no skill '%s' (no %s)", tool_arg_str(args, "name"), path);
        }
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        if (binary(data, len))
                return tool_error(ret, "read_skill: %s is not text", path);
        return tool_take(ret, TAKE_PTR(data), false);
}

/* --- list_dir --- */

static const char *type_suffix(enum fsx_type type) {
        switch (type) {
        case FSX_DIR:
                return "/";
        case FSX_SYMLINK:
                return "@";
        case FSX_OTHER:
                return "|";
        default:
                return "";
        }
}

static int list_into(struct tool_ctx *ctx, const char *dir, const char *shown_prefix, int depth, struct buf *out,
                     size_t *count, bool *truncated, char **ret_why) {
        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        int r = fsx_list(ctx->root_fd, dir, LIST_DIR_MAX, &l, ret_why);
        if (r < 0)
                return r;
        if (l->truncated)
                *truncated = true;
        for (size_t i = 0; i < l->n; i++) {
                const struct fsx_entry *e = &l->entries[i];
                if (streq(dir, ".") && streq(e->name, ".seed"))
                        continue;
                _cleanup_free_ char *sub = NULL;
                if ((streq(dir, ".") ? xasprintf(&sub, "%s", e->name) : xasprintf(&sub, "%s/%s", dir, e->name)) < 0)
                        return -ENOMEM;
                if (!visible(ctx, sub, e->type == FSX_DIR))
                        continue;
                if (*count >= LIST_OUT_MAX) {
                        *truncated = true;
                        return 0;
                }
                (*count)++;
                if (e->type == FSX_FILE)
                        r = buf_printf(out, "%s%s  (%llu bytes)\n", shown_prefix, e->name, (unsigned long long)e->size);
                else
                        r = buf_printf(out, "%s%s%s\n", shown_prefix, e->name, type_suffix(e->type));
                if (r < 0)
                        return r;
                if (e->type != FSX_DIR || depth <= 1)
                        continue;
                _cleanup_free_ char *prefix = NULL;
                if (xasprintf(&prefix, "%s%s/", shown_prefix, e->name) < 0)
                        return -ENOMEM;
                char *why = NULL;
                r = list_into(ctx, sub, prefix, depth - 1, out, count, truncated, &why);
                free(why); /* a subdirectory that vanished or turned into a link is left out */
                if (r == -ENOMEM)
                        return r;
        }
        return 0;
}

int tools_list_dir(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL;
        int r = arg_path(args, "path", ".", t, &norm, ret);
        if (r <= 0)
                return r;
        _cleanup_buf_ struct buf out = BUF_INIT(4 * 1024 * 1024);
        size_t count = 0;
        bool truncated = false;
        char *why = NULL;
        if (!visible(ctx, norm, true))
                return not_committed(ret, t, norm);
        r = list_into(ctx, norm, "", (int)tool_arg_int(args, "depth", 1), &out, &count, &truncated, &why);
        if (r == -ENOMEM) {
                free(why);
                return r;
        }
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        if (count == 0)
                return tool_ok(ret, "(empty directory)");
        if (truncated && buf_printf(&out, "[listing truncated at %d entries]\n", LIST_OUT_MAX) < 0)
                return -ENOMEM;
        return tool_take(ret, buf_steal(&out), false);
}

/* --- search --- */

struct search {
        struct tool_ctx *ctx;
        const char *needle;
        bool use_regex, icase;
        regex_t re;
        size_t max_results, results, files, bytes;
        bool limited; /* a bound stopped the walk */
        struct buf out;
};

static bool line_matches(struct search *s, char *line) {
        if (s->use_regex)
                return regexec(&s->re, line, 0, NULL, 0) == 0;
        return (s->icase ? strcasestr(line, s->needle) : strstr(line, s->needle)) != NULL;
}

static int search_file(struct search *s, const char *path) {
        if (s->files >= SEARCH_FILES_MAX || s->bytes >= SEARCH_BYTES_MAX) {
                s->limited = true;
                return 0;
        }
        s->files++;
        _cleanup_free_ char *data = NULL, *why = NULL;
        size_t len = 0;
        int r = fsx_read(s->ctx->root_fd, path, SEARCH_FILE_MAX, &data, &len, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || binary(data, len)) /* too large, vanished, linked: skipped */
                return 0;
        s->bytes += len;
        size_t lineno = 0;
        for (char *p = data; p < data + len && s->results < s->max_results;) {
                char *nl = memchr(p, '\n', (size_t)(data + len - p));
                if (nl)
                        *nl = '\0';
                lineno++;
                if (line_matches(s, p)) {
                        s->results++;
                        size_t l = strlen(p);
                        r = buf_printf(&s->out, "%s:%zu: %.*s%s\n", path, lineno, (int)(l > SEARCH_LINE_SHOWN ? SEARCH_LINE_SHOWN : l),
                                       p, l > SEARCH_LINE_SHOWN ? " […]" : "");
                        if (r < 0)
                                return r;
                }
                p = nl ? nl + 1 : data + len;
        }
        return 0;
}

static int search_dir(struct search *s, const char *dir, int depth) {
        if (depth > SEARCH_DEPTH_MAX) {
                s->limited = true;
                return 0;
        }
        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        _cleanup_free_ char *why = NULL;
        int r = fsx_list(s->ctx->root_fd, dir, LIST_DIR_MAX, &l, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return 0;
        if (l->truncated)
                s->limited = true;
        for (size_t i = 0; i < l->n && s->results < s->max_results; i++) {
                const struct fsx_entry *e = &l->entries[i];
                if (e->type != FSX_FILE && e->type != FSX_DIR)
                        continue;
                if (streq(e->name, "node_modules") || (streq(dir, ".") && streq(e->name, ".seed")))
                        continue;
                _cleanup_free_ char *sub = NULL;
                if ((streq(dir, ".") ? xasprintf(&sub, "%s", e->name) : xasprintf(&sub, "%s/%s", dir, e->name)) < 0)
                        return -ENOMEM;
                if (!visible(s->ctx, sub, e->type == FSX_DIR))
                        continue;
                r = e->type == FSX_DIR ? search_dir(s, sub, depth + 1) : search_file(s, sub);
                if (r < 0)
                        return r;
        }
        return 0;
}

int tools_search(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL;
        int r = arg_path(args, "path", ".", t, &norm, ret);
        if (r <= 0)
                return r;
        struct search s = {
                .ctx = ctx,
                .needle = tool_arg_str(args, "pattern"),
                .use_regex = tool_arg_bool(args, "regex", false),
                .icase = tool_arg_bool(args, "ignore_case", false),
                .max_results = (size_t)tool_arg_int(args, "max_results", 100),
                .out = BUF_INIT(4 * 1024 * 1024),
        };
        if (s.use_regex) {
                char msg[256];
                const char *why = NULL;
                if (tools_regex_compile(&s.re, s.needle, REG_EXTENDED | REG_NOSUB | (s.icase ? REG_ICASE : 0), msg,
                                        sizeof msg, &why) < 0)
                        return tool_error(ret, "search: invalid regular expression: %s", why);
        }
        struct fsx_stat st;
        char *why = NULL;
        r = fsx_stat(ctx->root_fd, norm, &st, &why);
        if (r < 0) {
                r = fsx_failed(ret, t, r, why);
                goto out;
        }
        if (!visible(ctx, norm, st.type == FSX_DIR)) {
                r = not_committed(ret, t, norm);
                goto out;
        }
        if (st.type == FSX_DIR)
                r = search_dir(&s, norm, 0);
        else if (st.type == FSX_FILE)
                r = search_file(&s, norm);
        else {
                r = tool_error(ret, "search: '%s' is a %s", norm, fsx_type_name(st.type));
                goto out;
        }
        if (r < 0)
                goto out;
        if (s.results == 0)
                r = tool_ok(ret, "no matches%s", s.limited ? " (the search hit its size limits)" : "");
        else {
                if (s.results >= s.max_results)
                        r = buf_printf(&s.out, "[stopped at %zu results]\n", s.max_results);
                else if (s.limited)
                        r = buf_printf(&s.out, "[the search hit its size limits; narrow it with path]\n");
                if (r >= 0)
                        r = tool_take(ret, buf_steal(&s.out), false);
        }
out:
        if (s.use_regex)
                regfree(&s.re);
        buf_free(&s.out);
        return r;
}

/* --- writes --- */

int tools_write_file(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL;
        int r = arg_path(args, "path", NULL, t, &norm, ret);
        if (r <= 0)
                return r;
        r = writable(ctx, t, norm, ret);
        if (r <= 0)
                return r;
        json_t *content = json_object_get(args, "content");
        struct fsx_stat st;
        bool existed = fsx_stat(ctx->root_fd, norm, &st, NULL) >= 0;
        char *why = NULL;
        r = fsx_write(ctx->root_fd, norm, json_string_value(content), json_string_length(content), FSX_MODE_KEEP,
                      &why);
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        return tool_ok(ret, "%s %s (%zu bytes)", existed ? "replaced" : "created", norm, json_string_length(content));
}

int tools_edit_file(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL, *data = NULL;
        int r = arg_path(args, "path", NULL, t, &norm, ret);
        if (r <= 0)
                return r;
        r = writable(ctx, t, norm, ret);
        if (r <= 0)
                return r;
        size_t len = 0;
        char *why = NULL;
        r = fsx_read(ctx->root_fd, norm, READ_MAX, &data, &len, &why);
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        if (binary(data, len))
                return tool_error(ret, "edit_file: '%s' is a binary file", norm);
        json_t *jold = json_object_get(args, "old_text"), *jnew = json_object_get(args, "new_text");
        const char *old = json_string_value(jold), *new = json_string_value(jnew);
        size_t olen = json_string_length(jold), nlen = json_string_length(jnew);
        size_t matches = 0;
        const char *first = NULL;
        for (const char *p = data; (p = memmem(p, (size_t)(data + len - p), old, olen)); p++) {
                if (!first)
                        first = p;
                matches++;
        }
        if (matches == 0)
                return tool_error(ret, "edit_file: old_text was not found in '%s'; it must match the file exactly, "
                                       "whitespace included (read the file again)",
                                  norm);
        if (matches > 1)
                return tool_error(ret, "edit_file: old_text matches %zu places in '%s'; include more surrounding text "
                                       "so it matches exactly once",
                                  matches, norm);
        size_t at = (size_t)(first - data), newlen = len - olen + nlen;
        _cleanup_free_ char *edited = malloc(newlen + 1);
        if (!edited)
                return -ENOMEM;
        memcpy(edited, data, at);
        memcpy(edited + at, new, nlen);
        memcpy(edited + at + nlen, data + at + olen, len - at - olen);
        edited[newlen] = '\0';
        r = fsx_write(ctx->root_fd, norm, edited, newlen, FSX_MODE_KEEP, &why);
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        size_t line = 1;
        for (const char *p = data; p < first; p++)
                line += *p == '\n';
        return tool_ok(ret, "edited %s at line %zu (%zu bytes now)", norm, line, newlen);
}

int tools_delete_path(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL;
        int r = arg_path(args, "path", NULL, t, &norm, ret);
        if (r <= 0)
                return r;
        r = writable(ctx, t, norm, ret);
        if (r <= 0)
                return r;
        struct fsx_stat st;
        char *why = NULL;
        r = fsx_stat(ctx->root_fd, norm, &st, &why);
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        r = fsx_delete(ctx->root_fd, norm, &why);
        if (r < 0)
                return fsx_failed(ret, t, r, why);
        return tool_ok(ret, "deleted %s %s", fsx_type_name(st.type), norm);
}
