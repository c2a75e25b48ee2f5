/* git.c — git_log, git_status, git_diff, read-only, through kernel/repo (the
 * only libgit2 user). Status and diff compare the working copy with the
 * evolution's base commit (ctx->base_oid; HEAD when unset). */
#include "tools/internal.h"
#include "base/buf.h"
#include "repo/repo.h"

#include <time.h>

#define DIFF_MAX (4 * 1024 * 1024)

static int repo_failed(struct tool_result *ret, const struct tool *t, int err) {
        const char *why = repo_last_error();
        return tool_error(ret, "%s failed: %s", t->name, !strempty(why) ? why : strerror(-err));
}

static int git_log(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct repo_log_entry *e = NULL;
        size_t n = 0;
        int r = repo_log(ctx->root_path, (size_t)tool_arg_int(args, "max_count", 20), &e, &n);
        if (r < 0)
                return repo_failed(ret, t, r);
        struct buf b = BUF_INIT(1024 * 1024);
        for (size_t i = 0; i < n && r >= 0; i++) {
                char when[32] = "";
                struct tm tm;
                time_t secs = (time_t)e[i].time;
                if (gmtime_r(&secs, &tm))
                        strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
                r = buf_printf(&b, "%.12s %s %s\n", e[i].oid, when, e[i].summary ? e[i].summary : "");
        }
        repo_log_free(e, n);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        return n == 0 ? tool_ok(ret, "no commits") : tool_take(ret, buf_steal(&b), false);
}

static int base_of(struct tool_ctx *ctx, char **ret) {
        if (ctx->base_oid) {
                char *s = strdup(ctx->base_oid);
                if (!s)
                        return -ENOMEM;
                *ret = s;
                return 0;
        }
        return repo_head(ctx->root_path, ret);
}

static int git_status(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *base = NULL;
        int r = base_of(ctx, &base);
        if (r < 0)
                return repo_failed(ret, t, r);
        struct repo_change *c = NULL;
        size_t n = 0;
        r = repo_boundary_changes(ctx->root_path, base, ctx->evolvable, &c, &n);
        if (r < 0)
                return repo_failed(ret, t, r);
        struct buf b = BUF_INIT(1024 * 1024);
        for (size_t i = 0; i < n && r >= 0; i++) {
                r = buf_printf(&b, "%-12s %s", repo_change_kind_to_string(c[i].kind), c[i].path);
                if (r >= 0 && c[i].old_path)
                        r = buf_printf(&b, " (from %s)", c[i].old_path);
                if (r >= 0 && c[i].ignored)
                        r = buf_puts(&b, " [ignored by .gitignore]");
                if (r >= 0 && c[i].protected)
                        r = buf_printf(&b, " [kernel: needs the owner's approval%s%s]", c[i].reason ? ": " : "",
                                       c[i].reason ? c[i].reason : "");
                if (r >= 0)
                        r = buf_puts(&b, "\n");
        }
        repo_changes_free(c, n);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        return n == 0 ? tool_ok(ret, "no changes") : tool_take(ret, buf_steal(&b), false);
}

/* Whether a "diff --git a/X b/Y" line names path (or something under it)
 * on either side. */
static bool header_names(const char *line, size_t len, const char *path) {
        static const char *const sides[] = {" a/", " b/"};
        for (size_t k = 0; k < ARRAY_SIZE(sides); k++) {
                _cleanup_free_ char *needle = NULL;
                if (xasprintf(&needle, "%s%s", sides[k], path) < 0)
                        return false;
                size_t nl = strlen(needle);
                for (const char *p = line; (p = memmem(p, (size_t)(line + len - p), needle, nl)); p++) {
                        const char *end = p + nl;
                        if (end == line + len || *end == ' ' || *end == '/' || *end == '\n')
                                return true;
                }
        }
        return false;
}

/* Keeps the sections of a unified patch about path. */
static int filter_patch(const char *patch, const char *path, char **ret) {
        struct buf b = BUF_INIT(DIFF_MAX + 1);
        if (buf_append(&b, "", 0) < 0)
                return -ENOMEM;
        bool keep = false;
        for (const char *p = patch; *p;) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
                if (startswith(p, "diff --git "))
                        keep = header_names(p, len, path);
                if (keep && buf_append(&b, p, len) < 0) {
                        buf_free(&b);
                        return -ENOMEM;
                }
                p += len;
        }
        *ret = buf_steal(&b);
        return 0;
}

static int git_diff(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        _cleanup_free_ char *norm = NULL, *why = NULL, *base = NULL, *patch = NULL;
        const char *path = tool_arg_str(args, "path");
        int r;
        if (!strempty(path)) {
                r = tools_normalize_path(path, &norm, &why);
                if (r < 0)
                        return tool_error(ret, "%s: %s", t->name, why ? why : "invalid path");
        }
        r = base_of(ctx, &base);
        if (r < 0)
                return repo_failed(ret, t, r);
        r = repo_diff(ctx->root_path, base, NULL, DIFF_MAX, &patch);
        if (r < 0)
                return repo_failed(ret, t, r);
        if (norm && !streq(norm, ".")) {
                char *filtered = NULL;
                r = filter_patch(patch, norm, &filtered);
                if (r < 0)
                        return r;
                free(patch);
                patch = filtered;
        }
        if (strempty(patch))
                return tool_ok(ret, "no differences");
        return tool_take(ret, TAKE_PTR(patch), false);
}

int tools_git(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->root_path)
                return tool_error(ret, "%s is not available in this phase", t->name);
        if (streq(t->name, "git_log"))
                return git_log(ctx, t, args, ret);
        if (streq(t->name, "git_status"))
                return git_status(ctx, t, args, ret);
        return git_diff(ctx, t, args, ret);
}
