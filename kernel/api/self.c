/* self.c — the read-only routes the control plane shows besides evolutions:
 * identity, knowledge, skills, settings and model usage. See self.h. */
#include "api/self.h"
#include "api/reply.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/log.h"
#include "base/text.h"
#include "config/config.h"
#include "db/db.h"
#include "fsx/fsx.h"

#include <ctype.h>
#include <fcntl.h>

#define SEED_YAML_MAX (1024 * 1024)
#define QUERY_VALUE_MAX (FSX_PATH_MAX * 3)
#define SKILL_NAME_MAX 100
#define USAGE_JSON_MAX (1024 * 1024)

/* ---- small text helpers ---- */

/* Valid UTF-8 without NUL bytes. */
static bool text_valid(const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < n;) {
                size_t k = p[i] ? utf8_seq(p + i, n - i) : 0;
                if (k == 0)
                        return false;
                i += k;
        }
        return true;
}

/* The percent-decoded value of name in a raw query string ('+' is a space).
 * -ENOENT if absent, -EINVAL if malformed or holding a NUL, -E2BIG if long. */
static int query_param(const char *query, const char *name, char **ret) {
        size_t nl = strlen(name);
        for (const char *p = query; p && *p;) {
                size_t len = strcspn(p, "&");
                if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
                        const char *v = p + nl + 1;
                        size_t vl = len - nl - 1;
                        if (vl > QUERY_VALUE_MAX)
                                return -E2BIG;
                        return percent_decode(v, vl, true, ret);
                }
                p += len + (p[len] == '&');
        }
        return -ENOENT;
}

bool api_self_accent_valid(const char *s) {
        if (!s || s[0] != '#' || (strlen(s) != 4 && strlen(s) != 7))
                return false;
        for (const char *p = s + 1; *p; p++)
                if (hex_digit(*p) < 0)
                        return false;
        return true;
}

int api_self_redact_url(const char *url, char **ret) {
        if (!url)
                return -EINVAL;
        const char *sep = strstr(url, "://");
        const char *auth = sep ? sep + 3 : url;
        size_t alen = strcspn(auth, "/?#");
        const char *at = NULL;
        for (const char *p = auth; p < auth + alen; p++)
                if (*p == '@')
                        at = p;
        const char *host = at ? at + 1 : auth;
        size_t rest = strcspn(auth + alen, "?#");
        char *out = NULL;
        if (xasprintf(&out, "%.*s%.*s%.*s", sep ? (int)(sep + 3 - url) : 0, url, (int)(auth + alen - host), host,
                      (int)rest, auth + alen) < 0)
                return -ENOMEM;
        *ret = out;
        return 0;
}

/* ---- reading the Seed's folder ---- */

/* Repository content beneath root, through fsx (no symlink anywhere);
 * root -1: the folder could not be opened. */
static bool is_file(int root, const char *rel) {
        struct fsx_stat st;
        return root >= 0 && fsx_stat(root, rel, &st, NULL) >= 0 && st.type == FSX_FILE;
}

static int read_at(int root, const char *rel, size_t max, char **ret, size_t *ret_len) {
        _cleanup_free_ char *err = NULL;
        return root < 0 ? -EBADF : fsx_read(root, rel, max, ret, ret_len, &err);
}

/* The same beneath the Seed's folder. */
static int read_beneath(const char *seed_dir, const char *rel, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int root = -1;
        int r = fsx_open_root(seed_dir, &root);
        return r < 0 ? r : read_at(root, rel, max, ret, ret_len);
}

static int dump(json_t *o_taken, char **ret_json) {
        _cleanup_json_ json_t *o = o_taken;
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

/* A string member, null when v is NULL or not UTF-8. */
static json_t *str_or_null(const char *v) {
        json_t *s = v ? json_string(v) : NULL;
        return s ? s : json_null();
}

int api_self_identity_json(const char *seed_dir, char **ret_json) {
        static const char *const keys[] = {"slug", "name", "tagline", "accent", "purpose", NULL};
        char *vals[5] = {0};
        _cleanup_free_ char *self = NULL, *seed_yaml = NULL;
        _cleanup_(cfg_freep) struct cfg *cfg = NULL;
        _cleanup_close_ int root = -1;
        size_t len = 0, yl = 0;
        (void)fsx_open_root(seed_dir, &root);
        _cleanup_free_ char *err = NULL;
        int r = read_at(root, "knowledge/self.yaml", API_SELF_YAML_MAX, &self, &len);
        if (r >= 0)
                r = cfg_scalars_parse(self, len, "knowledge/self.yaml", keys, vals, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0 && r != -ENOENT)
                log_info("knowledge/self.yaml is not readable (%s): the control plane shows defaults",
                         err ? err : strerror(-r));
        /* The logo itself is served by the control plane at /_seed/logo (with
         * Content-Security-Policy: sandbox), which checks it again. */
        bool logo = is_file(root, "knowledge/logo.svg") || is_file(root, "knowledge/logo.png");
        /* The name of the Seed itself (seed.yaml), for when self.yaml has none. */
        if (read_at(root, "seed.yaml", SEED_YAML_MAX, &seed_yaml, &yl) >= 0)
                (void)cfg_parse(seed_yaml, yl, "seed.yaml", &cfg, NULL);
        json_t *o = json_object();
        if (o) {
                json_object_set_new(o, "seed", str_or_null(cfg ? cfg->name : NULL));
                json_object_set_new(o, "slug", str_or_null(vals[0]));
                json_object_set_new(o, "name", str_or_null(vals[1]));
                json_object_set_new(o, "tagline", str_or_null(vals[2]));
                json_object_set_new(o, "accent", str_or_null(api_self_accent_valid(vals[3]) ? vals[3] : NULL));
                json_object_set_new(o, "purpose", str_or_null(vals[4]));
                json_object_set_new(o, "logo", str_or_null(logo ? "/_seed/logo" : NULL));
        }
        r = dump(o, ret_json);
        for (size_t i = 0; i < ARRAY_SIZE(vals); i++)
                free(vals[i]);
        return r;
}

/* Appends the files beneath dir (relative to knowledge/) to arr. */
static int walk(int root, const char *dir, size_t prefix, int depth, json_t *arr, bool *truncated) {
        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        _cleanup_free_ char *err = NULL;
        int r = fsx_list(root, dir, API_SELF_LIST_MAX, &l, &err);
        if (r < 0)
                return r;
        if (l->truncated)
                *truncated = true;
        for (size_t i = 0; i < l->n; i++) {
                const struct fsx_entry *e = &l->entries[i];
                _cleanup_free_ char *path = NULL;
                if (json_array_size(arr) >= API_SELF_LIST_MAX) {
                        *truncated = true;
                        return 0;
                }
                if (xasprintf(&path, "%s/%s", dir, e->name) < 0)
                        return -ENOMEM;
                if (e->type == FSX_DIR) {
                        if (depth >= API_SELF_DEPTH_MAX)
                                *truncated = true;
                        else if ((r = walk(root, path, prefix, depth + 1, arr, truncated)) == -ENOMEM)
                                return r;
                        /* A folder that went away or cannot be listed is left out. */
                        continue;
                }
                if (e->type != FSX_FILE && e->type != FSX_SYMLINK)
                        continue;
                json_t *name = json_string(path + prefix);
                if (!name) /* not UTF-8: cannot be named in JSON */
                        continue;
                json_t *o = json_pack("{s:o, s:s, s:I}", "path", name, "type", fsx_type_name(e->type), "size",
                                      (json_int_t)e->size);
                if (!o || json_array_append_new(arr, o) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int api_self_knowledge_json(const char *seed_dir, char **ret_json) {
        _cleanup_close_ int root = -1;
        int r = fsx_open_root(seed_dir, &root);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_array();
        bool truncated = false;
        if (!arr)
                return -ENOMEM;
        r = walk(root, "knowledge", strlen("knowledge/"), 0, arr, &truncated);
        if (r < 0 && r != -ENOENT)
                return r;
        return dump(json_pack("{s:o, s:b}", "files", TAKE_PTR(arr), "truncated", truncated), ret_json);
}

/* {"path", "size", "content"} of a file just read (content null unless text). */
static int file_json(const char *path, const char *data, size_t len, json_t *extra_taken, char **ret_json) {
        _cleanup_json_ json_t *extra = extra_taken;
        json_t *o = json_pack("{s:s, s:I, s:o}", "path", path, "size", (json_int_t)len, "content",
                              text_valid(data, len) ? json_stringn(data, len) : json_null());
        if (o && extra)
                json_object_update(o, extra);
        return dump(o, ret_json);
}

int api_self_knowledge_file_json(const char *seed_dir, const char *rel, char **ret_json) {
        _cleanup_free_ char *norm = NULL, *err = NULL, *full = NULL, *data = NULL;
        size_t len = 0;
        int r = fsx_normalize(rel, strlen(rel), &norm, &err);
        if (r < 0)
                return r;
        if (streq(norm, "."))
                return -EISDIR;
        if (xasprintf(&full, "knowledge/%s", norm) < 0)
                return -ENOMEM;
        r = read_beneath(seed_dir, full, API_SELF_FILE_MAX, &data, &len);
        if (r < 0)
                return r;
        return file_json(norm, data, len, NULL, ret_json);
}

/* A skill's folder name: letters, digits, '_', '-' and '.', not first. */
static bool skill_name_valid(const char *s) {
        if (!s || !*s || *s == '.' || strlen(s) > SKILL_NAME_MAX)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr("_-.", *s))
                        return false;
        return true;
}

static const char *const skill_keys[] = {"name", "description", NULL};

int api_self_skills_json(const char *seed_dir, char **ret_json) {
        _cleanup_close_ int root = -1;
        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        _cleanup_free_ char *err = NULL;
        int r = fsx_open_root(seed_dir, &root);
        if (r < 0)
                return r;
        r = fsx_list(root, "skills", API_SELF_LIST_MAX, &l, &err);
        _cleanup_json_ json_t *arr = json_array();
        if (!arr)
                return -ENOMEM;
        for (size_t i = 0; r >= 0 && i < l->n; i++) {
                const struct fsx_entry *e = &l->entries[i];
                if (e->type != FSX_DIR || !skill_name_valid(e->name))
                        continue;
                _cleanup_free_ char *p = NULL, *data = NULL, *ferr = NULL;
                char *vals[2] = {0};
                size_t len = 0;
                if (xasprintf(&p, "skills/%s/SKILL.md", e->name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                int k = fsx_read(root, p, API_SELF_FILE_MAX, &data, &len, &ferr);
                if (k >= 0)
                        k = cfg_front_matter(data, len, p, skill_keys, vals, NULL);
                json_t *o = json_pack("{s:s, s:o, s:o}", "name", e->name, "title", str_or_null(vals[0]),
                                      "description", str_or_null(vals[1]));
                free(vals[0]);
                free(vals[1]);
                if (o && k < 0)
                        json_object_set_new(o, "problem",
                                            json_string(k == -ENOENT ? "no SKILL.md front matter"
                                                        : k == -ELOOP ? "SKILL.md is a symlink (not read)"
                                                        : k == -EFBIG ? "SKILL.md is too large"
                                                        : k == -EINVAL ? "SKILL.md front matter is not valid YAML"
                                                                      : "SKILL.md is not readable"));
                if (!o || json_array_append_new(arr, o) < 0)
                        r = -ENOMEM;
        }
        if (r < 0 && r != -ENOENT)
                return r;
        return dump(json_pack("{s:o}", "skills", TAKE_PTR(arr)), ret_json);
}

int api_self_skill_json(const char *seed_dir, const char *name, char **ret_json) {
        if (!skill_name_valid(name))
                return -EINVAL;
        _cleanup_free_ char *p = NULL, *data = NULL;
        char *vals[2] = {0};
        size_t len = 0;
        if (xasprintf(&p, "skills/%s/SKILL.md", name) < 0)
                return -ENOMEM;
        int r = read_beneath(seed_dir, p, API_SELF_FILE_MAX, &data, &len);
        if (r < 0)
                return r;
        (void)cfg_front_matter(data, len, p, skill_keys, vals, NULL);
        json_t *extra = json_pack("{s:s, s:o, s:o}", "name", name, "title", str_or_null(vals[0]), "description",
                                  str_or_null(vals[1]));
        free(vals[0]);
        free(vals[1]);
        if (!extra)
                return -ENOMEM;
        return file_json(p, data, len, extra, ret_json);
}

static json_t *strv_json(char *const *v) {
        json_t *a = json_array();
        for (size_t i = 0; a && v && v[i]; i++)
                json_array_append_new(a, str_or_null(v[i]));
        return a;
}

int api_self_settings_json(const char *seed_dir, char **ret_json) {
        _cleanup_free_ char *text = NULL, *base_url = NULL, *err = NULL;
        _cleanup_(cfg_freep) struct cfg *c = NULL;
        size_t len = 0;
        int r = read_beneath(seed_dir, "seed.yaml", SEED_YAML_MAX, &text, &len);
        if (r < 0)
                return r;
        r = cfg_parse(text, len, "seed.yaml", &c, &err);
        if (r < 0)
                return r == -ENOMEM ? r : -EBADMSG;
        if (api_self_redact_url(c->model.base_url, &base_url) < 0)
                return -ENOMEM;
        /* Never the database URL (it may hold a password): only whether one is set. */
        json_t *o = json_pack(
                "{s:s, s:{s:s, s:o, s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:i, s:i}, s:{s:b}, s:{s:s},"
                " s:{s:s, s:s, s:s, s:i, s:s, s:s}, s:{s:i, s:i, s:i, s:i, s:i}, s:{s:s, s:s, s:s, s:b, s:b}, s:{s:o}}",
                "name", c->name,
                "server", "addr", c->server.addr, "allowed_hosts", strv_json(c->server.allowed_hosts),
                "control_host", c->server.control_host, "control_plane",
                *c->server.control_host ? "its own origin: cookies and pages never shared with the app"
                                        : "the app's origin (the same-origin fallback)",
                "model", "provider", c->model.provider, "name", c->model.name, "base_url", base_url, "api_key_env",
                c->model.api_key_env, "max_tokens", c->model.max_tokens, "context_chars", c->model.context_chars,
                "database", "external", !strempty(c->database.url),
                "sandbox", "driver", c->sandbox.driver,
                "organism", "build", c->organism.build, "test", c->organism.test, "run", c->organism.run, "port",
                c->organism.port, "health", c->organism.health, "migrations", c->organism.migrations,
                "evolution", "max_repair_attempts", c->evolution.max_repair_attempts, "max_agent_turns",
                c->evolution.max_agent_turns, "command_timeout_seconds", c->evolution.command_timeout_seconds,
                "model_wait_seconds", c->evolution.model_wait_seconds, "preview_wait_seconds",
                c->evolution.preview_wait_seconds,
                "permissions", "safe", cfg_decision_name(c->permissions.safe), "review",
                cfg_decision_name(c->permissions.review), "dangerous", cfg_decision_name(c->permissions.dangerous),
                "require_plan_approval", c->permissions.require_plan_approval, "require_apply_approval",
                c->permissions.require_apply_approval,
                "kernel", "evolvable", strv_json(c->kernel.evolvable));
        return dump(o, ret_json);
}

int api_self_usage_json(struct db *kdb, char **ret_json) {
        _cleanup_free_ char *rows = NULL;
        int r = db_usage_summary_json(kdb, USAGE_JSON_MAX, &rows);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        json_t *row;
        if (!json_is_array(arr))
                return -EBADMSG;
        json_int_t calls = 0, in = 0, cached = 0, uncached = 0, written = 0, out = 0, unknown = 0;
        double cost = 0;
        bool known = false; /* a cost is known for some call: else the total's is unknown too */
        size_t i;
        json_array_foreach(arr, i, row) {
                calls += json_integer_value(json_object_get(row, "calls"));
                in += json_integer_value(json_object_get(row, "input_tokens"));
                cached += json_integer_value(json_object_get(row, "cached_input_tokens"));
                uncached += json_integer_value(json_object_get(row, "uncached_input_tokens"));
                written += json_integer_value(json_object_get(row, "cache_write_tokens"));
                out += json_integer_value(json_object_get(row, "output_tokens"));
                unknown += json_integer_value(json_object_get(row, "unknown_cost_calls"));
                json_t *c = json_object_get(row, "cost_usd");
                if (json_is_number(c)) {
                        cost += json_number_value(c);
                        known = true;
                }
        }
        return dump(json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I}}", "usage", TAKE_PTR(arr), "total",
                              "calls", calls, "input_tokens", in, "cached_input_tokens", cached,
                              "uncached_input_tokens", uncached, "cache_write_tokens", written, "output_tokens", out,
                              "cost_usd", known || !calls ? json_real(cost) : json_null(), "unknown_cost_calls",
                              unknown),
                    ret_json);
}

/* ---- the handlers ---- */

static int reply_json(int r, char *json, const char *what, int *ret_status, char **ret_json) {
        switch (r) {
        case 0:
                *ret_status = 200;
                *ret_json = json;
                return 0;
        case -ENOENT:
        case -ENOTDIR: /* a part of the path is a file */
                return api_reply_error(404, "no such file", ret_status, ret_json);
        case -ELOOP:
        case -EXDEV:
                return api_reply_error(403, "this is a symlink or leads outside the Seed: it is not shown", ret_status,
                                   ret_json);
        case -EMLINK:
                return api_reply_error(403, "this file has several hard links: it is not shown", ret_status, ret_json);
        case -EPERM: /* fsx: .git anywhere, .seed first */
                return api_reply_error(403, "this path is off limits (.git, .seed)", ret_status, ret_json);
        case -EFBIG:
                return api_reply_error(413, "this file is too large to show here (over 256 KiB)", ret_status, ret_json);
        case -EISDIR:
                return api_reply_error(400, "this is a folder, not a file", ret_status, ret_json);
        case -EINVAL:
        case -ENAMETOOLONG:
                return api_reply_error(400, "bad path", ret_status, ret_json);
        case -EBADMSG:
                return api_reply_error(409, "seed.yaml is not valid: see the kernel log", ret_status, ret_json);
        default:
                return log_error_errno(r, "could not read %s: %m", what);
        }
}

int api_self_h_identity(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        char *json = NULL;
        int r = api_self_identity_json(seed_dir, &json);
        return reply_json(r, json, "the identity", ret_status, ret_json);
}

int api_self_h_knowledge(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        _cleanup_free_ char *path = NULL;
        char *json = NULL;
        int r = query_param(call->query, "path", &path);
        if (r == -ENOENT) {
                r = api_self_knowledge_json(seed_dir, &json);
                return reply_json(r, json, "knowledge/", ret_status, ret_json);
        }
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return api_reply_error(400, "path must be a percent-encoded relative path", ret_status, ret_json);
        r = api_self_knowledge_file_json(seed_dir, path, &json);
        return reply_json(r, json, "a knowledge file", ret_status, ret_json);
}

int api_self_h_skills(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        char *json = NULL;
        int r = api_self_skills_json(seed_dir, &json);
        return reply_json(r, json, "skills/", ret_status, ret_json);
}

int api_self_h_skill(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!skill_name_valid(call->param))
                return api_reply_error(400, "bad skill name", ret_status, ret_json);
        char *json = NULL;
        int r = api_self_skill_json(seed_dir, call->param, &json);
        return reply_json(r, json, "a skill", ret_status, ret_json);
}

int api_self_h_settings(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        char *json = NULL;
        int r = api_self_settings_json(seed_dir, &json);
        if (r == -EBADMSG)
                log_warn("seed.yaml does not parse: the settings cannot be shown");
        return reply_json(r, json, "seed.yaml", ret_status, ret_json);
}

int api_self_h_usage(struct db *kdb, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        char *json = NULL;
        int r = api_self_usage_json(kdb, &json);
        if (r < 0)
                return log_error_errno(r, "could not read the model usage: %m");
        *ret_status = 200;
        *ret_json = json;
        return 0;
}
