/* call.c — one tool call from the model's text to a capped result:
 * lookup, parse, validate, classify, decide, run, cap. */
#include "tools/internal.h"
#include "base/text.h"
#include "tools/schema.h"
#include "base/buf.h"
#include "base/log.h"

#include <stdarg.h>

void tool_result_done(struct tool_result *r) {
        if (!r)
                return;
        free(r->output);
        free(r->args);
        *r = (struct tool_result){0};
}

static int set_output(struct tool_result *ret, bool is_error, const char *fmt, va_list ap) {
        char *s = NULL;
        if (xvasprintf(&s, fmt, ap) < 0)
                return -ENOMEM;
        free(ret->output);
        ret->output = s;
        ret->is_error = is_error;
        return 0;
}

int tool_result_printf(struct tool_result *ret, bool is_error, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = set_output(ret, is_error, fmt, ap);
        va_end(ap);
        return r;
}

int tool_ok(struct tool_result *ret, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = set_output(ret, false, fmt, ap);
        va_end(ap);
        return r;
}

int tool_error(struct tool_result *ret, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = set_output(ret, true, fmt, ap);
        va_end(ap);
        return r;
}

int tool_take(struct tool_result *ret, char *output, bool is_error) {
        if (!output && !(output = strdup("")))
                return -ENOMEM;
        free(ret->output);
        ret->output = output;
        ret->is_error = is_error;
        return 0;
}

const char *tool_arg_str(json_t *args, const char *key) {
        return json_string_value(json_object_get(args, key));
}

int64_t tool_arg_int(json_t *args, const char *key, int64_t dflt) {
        json_t *v = json_object_get(args, key);
        return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

bool tool_arg_bool(json_t *args, const char *key, bool dflt) {
        json_t *v = json_object_get(args, key);
        return json_is_boolean(v) ? json_is_true(v) : dflt;
}

char *tools_cap_output(const char *s, size_t len, size_t cap) {
        if (cap == 0)
                cap = TOOLS_OUTPUT_CAP;
        /* Valid UTF-8 first (each bad byte becomes 3 bytes at most). */
        struct buf clean = BUF_INIT(len * 3 + 1);
        if (buf_append(&clean, "", 0) < 0)
                return NULL;
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t run = 0;
                while (i + run < len) {
                        size_t k = u[i + run] ? utf8_seq(u + i + run, len - i - run) : 0; /* NUL too */
                        if (k == 0)
                                break;
                        run += k;
                }
                if (run > 0 && buf_append(&clean, s + i, run) < 0)
                        goto oom;
                i += run;
                if (i < len) {
                        if (buf_append(&clean, "\xEF\xBF\xBD", 3) < 0)
                                goto oom;
                        i++;
                }
        }
        if (clean.len <= cap)
                return buf_steal(&clean);

        /* Head and tail, cut at character boundaries. */
        size_t head = cap / 2, tail_start = clean.len - (cap - head);
        while (head > 0 && ((unsigned char)clean.data[head] & 0xC0) == 0x80)
                head--;
        while (tail_start < clean.len && ((unsigned char)clean.data[tail_start] & 0xC0) == 0x80)
                tail_start++;
        struct buf out = BUF_INIT(cap + 256);
        if (buf_append(&out, clean.data, head) < 0 ||
            buf_printf(&out, "\n[… %zu bytes omitted: output capped at %zu characters, head and tail kept …]\n",
                       tail_start - head, cap) < 0 ||
            buf_append(&out, clean.data + tail_start, clean.len - tail_start) < 0) {
                buf_free(&out);
                goto oom;
        }
        buf_free(&clean);
        return buf_steal(&out);
oom:
        buf_free(&clean);
        return NULL;
}

/* Every character of s is a space (JSON whitespace). */
static bool blank(const char *s) {
        return !s || s[strspn(s, " \t\r\n")] == '\0';
}

static int phase_tool_names(const struct tool *const *set, enum tool_phase phase, char **ret) {
        struct buf b = BUF_INIT(4096);
        for (const struct tool *const *tab = set; tab && *tab; tab++)
                for (const struct tool *t = *tab; t->name; t++)
                        if (tools_offered(t, phase) && buf_printf(&b, "%s%s", b.len ? ", " : "", t->name) < 0) {
                                buf_free(&b);
                                return -ENOMEM;
                        }
        char *s = b.data ? buf_steal(&b) : strdup("");
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* Parses and validates; on a problem fills ret as a malformed error. Returns
 * 1 with *ret_args when the arguments are good, 0 when ret holds the error. */
static int parse_args(const struct tool *t, const char *args_json, struct tool_result *ret, json_t **ret_args) {
        size_t alen = args_json ? strlen(args_json) : 0;
        ret->malformed = true;
        if (alen > TOOLS_ARGS_MAX)
                return tool_error(ret, "arguments of %s are too large (%zu bytes, at most %d): work in smaller steps",
                                  t->name, alen, TOOLS_ARGS_MAX);
        json_error_t jerr;
        _cleanup_json_ json_t *args = blank(args_json) ? json_object()
                                                       : json_loadb(args_json, alen,
                                                                    JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!args)
                return tool_error(ret, "arguments of %s are not valid JSON (line %d, column %d: %s); send one JSON object",
                                  t->name, jerr.line, jerr.column, jerr.text);
        if (!json_is_object(args))
                return tool_error(ret, "arguments of %s must be a JSON object", t->name);
        _cleanup_json_ json_t *schema = json_loads(t->schema, 0, &jerr);
        if (!schema) {
                log_error("tool %s: schema does not parse: %s", t->name, jerr.text);
                ret->malformed = false;
                return tool_error(ret, "internal error: the schema of %s is broken", t->name);
        }
        _cleanup_free_ char *why = NULL;
        if (tools_schema_validate(schema, args, &why) < 0)
                return tool_error(ret, "invalid arguments for %s: %s", t->name, why ? why : "does not match the schema");
        ret->malformed = false;
        *ret_args = TAKE_PTR(args);
        return 1;
}

/* Replaces a "path" argument with its normalised form, so that what is
 * classified, shown to the owner, approved and acted on is the same path.
 * 1 ok, 0 when ret holds the refusal. */
static int normalize_path_arg(const struct tool *t, json_t *args, struct tool_result *ret) {
        json_t *p = json_object_get(args, "path");
        if (!t->repo_path || !json_is_string(p) || json_string_length(p) == 0)
                return 1;
        _cleanup_free_ char *norm = NULL, *why = NULL;
        int r = tools_normalize_path(json_string_value(p), &norm, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                r = tool_error(ret, "%s: %s", t->name, why ? why : "invalid path");
                return r < 0 ? r : 0;
        }
        return json_object_set_new(args, "path", json_string(norm)) < 0 ? -ENOMEM : 1;
}

/* The tool's own check of its arguments (which may normalise them). 1 ok,
 * 0 when ret holds the refusal. */
static int check_args(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!t->check)
                return 1;
        _cleanup_free_ char *why = NULL;
        int r = t->check(ctx, t, args, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                r = tool_error(ret, "%s: %s", t->name, why ? why : "invalid arguments");
                return r < 0 ? r : 0;
        }
        return 1;
}

/* Applies the owner's policy. 1: go ahead (*ret_approval_id set when the
 * owner approved this very call); 0: ret holds the refusal; negative: the
 * ask failed (the call must not run). */
static int permit(struct tool_ctx *ctx, const struct tool *t, struct tool_result *ret, char **ret_approval_id) {
        size_t alen = ret->args ? strlen(ret->args) : 0;
        if (ret->level == TOOL_DANGEROUS && alen > TOOLS_DANGEROUS_INPUT_MAX) {
                int r = tool_error(ret, "refused: this %s call is dangerous and its input (%zu bytes) is over %d bytes, "
                                        "too large for the owner to review; make smaller changes",
                                   t->name, alen, TOOLS_DANGEROUS_INPUT_MAX);
                return r < 0 ? r : 0;
        }
        ret->decision = tools_decide(ctx, ret->level);
        if (t->always_ask && ret->level == TOOL_DANGEROUS && ret->decision == CFG_ALLOW)
                ret->decision = CFG_ASK; /* asked every time, whatever the policy allows */
        if (ret->decision == CFG_ALLOW)
                return 1;
        if (ret->decision == CFG_DENY) {
                int r = tool_error(ret, "denied by the owner's policy (%s calls are denied)", tools_level_name(ret->level));
                return r < 0 ? r : 0;
        }
        if (!ctx->hooks || !ctx->hooks->ask) {
                int r = tool_error(ret, "denied: this %s call needs the owner's approval and none can be asked here",
                                   tools_level_name(ret->level));
                return r < 0 ? r : 0;
        }
        _cleanup_free_ char *approval = NULL;
        int r = ctx->hooks->ask(ctx, t, ret->args, ret->level, &approval);
        if (r < 0)
                return r;
        if (r == 0) {
                r = tool_error(ret, "denied by the owner");
                return r < 0 ? r : 0;
        }
        *ret_approval_id = TAKE_PTR(approval);
        return 1;
}

static int run_handler(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        int r = t->handler(ctx, t, args, ret);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_warn_errno(r, "tool %s failed: %m", t->name);
                return tool_error(ret, "%s failed: internal error (%s)", t->name, strerror(-r));
        }
        if (!ret->output)
                return tool_take(ret, NULL, ret->is_error);
        return 0;
}

int tools_call(struct tool_ctx *ctx, const char *name, const char *args_json, struct tool_result *ret) {
        struct tool_result res = {0};
        _cleanup_json_ json_t *args = NULL;
        _cleanup_free_ char *approval = NULL;
        int r;
        const struct tool *t = name ? tools_find(ctx->set, name) : NULL;
        if (!t || !tools_offered(t, ctx->phase)) {
                _cleanup_free_ char *names = NULL;
                r = phase_tool_names(ctx->set, ctx->phase, &names);
                if (r < 0)
                        goto out;
                res.malformed = true;
                r = tool_error(&res, "%s tool '%.100s'; the tools of this phase are: %s",
                               t ? "this phase does not offer the" : "unknown", name ? name : "", names);
                goto done;
        }
        r = parse_args(t, args_json, &res, &args);
        if (r <= 0)
                goto done;
        r = normalize_path_arg(t, args, &res);
        if (r <= 0)
                goto done;
        r = check_args(ctx, t, args, &res);
        if (r <= 0)
                goto done;
        res.args = json_dumps(args, JSON_COMPACT);
        if (!res.args) {
                r = -ENOMEM;
                goto out;
        }
        r = tools_classify(ctx, t, args, &res.level);
        if (r < 0) {
                r = tool_error(&res, "%s: cannot classify the call: %s", t->name, strerror(-r));
                goto done;
        }
        res.classified = true;
        r = permit(ctx, t, &res, &approval);
        if (r <= 0)
                goto done;
        ctx->approval_id = approval; /* this call's approval only, for its handler */
        r = run_handler(ctx, t, args, &res);
        ctx->approval_id = NULL;
        if (r < 0)
                goto out;
        if (ctx->hooks && ctx->hooks->ran)
                ctx->hooks->ran(ctx, t, res.args, &res);
        if (res.decision == CFG_ASK && ctx->hooks && ctx->hooks->approved_done) {
                r = ctx->hooks->approved_done(ctx, t, res.args, res.level);
                if (r == -ENOMEM)
                        goto out;
                if (r < 0 && (r = tool_error(&res, "%s: the kernel could not record what was approved: %s",
                                             t->name, strerror(-r))) < 0)
                        goto out;
        }
        res.terminal = t->terminal && !res.is_error;
done:
        if (r < 0)
                goto out;
        char *capped = tools_cap_output(res.output ? res.output : "", res.output ? strlen(res.output) : 0,
                                        ctx->output_cap);
        if (!capped) {
                r = -ENOMEM;
                goto out;
        }
        free(res.output);
        res.output = capped;
        *ret = res;
        return 0;
out:
        tool_result_done(&res);
        return r;
}
