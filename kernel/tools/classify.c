/* classify.c — levels, decisions and the repository paths they are based on. */
#include "tools/internal.h"
#include "fsx/fsx.h"

char *const tools_reflect_dirs[] = {"knowledge/", "skills/", NULL};

static bool level_valid(enum tool_level l) {
        return l > TOOL_LEVEL_UNSET && l < _TOOL_LEVEL_MAX;
}

const char *tools_level_name(enum tool_level l) {
        switch (l) {
        case TOOL_SAFE:
                return "safe";
        case TOOL_REVIEW:
                return "review";
        case TOOL_DANGEROUS:
                return "dangerous";
        default:
                return "unknown";
        }
}

const char *tools_phase_name(enum tool_phase p) {
        switch (p) {
        case TOOL_PHASE_PLAN:
                return "plan";
        case TOOL_PHASE_MUTATE:
                return "mutate";
        case TOOL_PHASE_REFLECT:
                return "reflect";
        case TOOL_PHASE_CHAT:
                return "chat";
        case TOOL_PHASE_HEALTH:
                return "health";
        }
        return "unknown";
}

void tools_ctx_set_permissions(struct tool_ctx *ctx, const struct cfg *c) {
        ctx->decisions[TOOL_SAFE] = c->permissions.safe;
        ctx->decisions[TOOL_REVIEW] = c->permissions.review;
        ctx->decisions[TOOL_DANGEROUS] = c->permissions.dangerous;
}

enum cfg_decision tools_decide(const struct tool_ctx *ctx, enum tool_level l) {
        if (!level_valid(l))
                return CFG_DENY;
        return ctx->decisions[l];
}

int tools_normalize_path(const char *path, char **ret, char **ret_error) {
        _cleanup_free_ char *norm = NULL;
        int r = fsx_normalize(path, path ? strlen(path) : 0, &norm, ret_error);
        if (r < 0)
                return r;
        if (streq(norm, ".seed") || startswith(norm, ".seed/")) {
                if (ret_error && xasprintf(ret_error, "'%s' is inside .seed, which is off limits", norm) < 0)
                        *ret_error = NULL;
                return -EPERM;
        }
        *ret = TAKE_PTR(norm);
        return 0;
}

bool tools_path_in(const char *path, char *const *dirs) {
        for (size_t i = 0; dirs && dirs[i]; i++) {
                size_t n = strlen(dirs[i]);
                while (n > 0 && dirs[i][n - 1] == '/')
                        n--;
                if (n == 0)
                        continue;
                if (strncmp(path, dirs[i], n) == 0 && (path[n] == '\0' || path[n] == '/'))
                        return true;
        }
        return false;
}

int tools_classify_write(const struct tool_ctx *ctx, const struct tool *t, json_t *args, enum tool_level *ret) {
        _cleanup_free_ char *norm = NULL;
        int r = tools_normalize_path(tool_arg_str(args, "path"), &norm, NULL);
        if (r < 0)
                return r;
        /* Files that change how git reads the tree are kernel wherever they
         * are (the commit-time boundary check protects them too). */
        const char *base = strrchr(norm, '/') ? strrchr(norm, '/') + 1 : norm;
        bool git_control = streq(base, ".gitattributes") || streq(base, ".gitmodules");
        *ret = tools_path_in(norm, ctx->evolvable) && !git_control ? TOOL_REVIEW : TOOL_DANGEROUS;
        return 0;
}

int tools_classify(const struct tool_ctx *ctx, const struct tool *t, json_t *args, enum tool_level *ret) {
        if (!level_valid(t->level))
                return -EINVAL;
        if (!t->classify) {
                *ret = t->level;
                return 0;
        }
        enum tool_level l = TOOL_LEVEL_UNSET;
        int r = t->classify(ctx, t, args, &l);
        if (r < 0)
                return r;
        if (!level_valid(l))
                return -EINVAL;
        /* A computed level never goes below the table's. */
        *ret = l > t->level ? l : t->level;
        return 0;
}

int tools_check_write(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error) {
        const char *path = tool_arg_str(args, "path"); /* normalised by the call path */
        if (!path)
                return 0;
        size_t n = strlen(path);
        bool above = streq(path, ".") || (strncmp(TOOLS_ROADMAP_PATH, path, n) == 0 && TOOLS_ROADMAP_PATH[n] == '/');
        if (streq(path, TOOLS_ROADMAP_PATH) || above)
                return errorf(-EINVAL, ret_error,
                              "%s is the roadmap, which only the kernel writes (declare a goal and its stages in "
                              "submit_plan instead)%s",
                              TOOLS_ROADMAP_PATH, above ? "; this path holds it" : "");
        return 0;
}
