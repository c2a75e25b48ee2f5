/* tools.c — the model's two tools of outbound access: request_outbound_access
 * (dangerous, asked every time) and outbound_status (safe). See outbound.h. */
#include "outbound/outbound.h"
#include "base/buf.h"
#include "tools/tools.h"

/* The arguments, checked and rewritten into their normal form (hosts
 * lowercased, without trailing dots, each once) before the owner sees them. */
static int check_request(const struct tool_ctx *ctx, const struct tool *t, json_t *args, char **ret_error) {
        if (!ctx->outbound)
                return errorf(-EINVAL, ret_error, "outbound access cannot be asked for here");
        struct outbound_request req;
        int r = outbound_request_check(ctx->outbound, args, &req, ret_error);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *norm = outbound_request_json(&req);
        outbound_request_done(&req);
        if (!norm || json_object_clear(args) < 0 || json_object_update(args, norm) < 0)
                return -ENOMEM;
        return 0;
}

static void describe_secrets(struct buf *b, const struct outbound_request *req, json_t *grant) {
        json_t *secrets = json_object_get(grant, "secrets");
        size_t i;
        json_t *s;
        json_array_foreach(secrets, i, s) {
                const char *name = json_string_value(json_object_get(s, "name"));
                (void)buf_printf(b, "%s%s%s", i ? ", " : "; secrets for the live organism: ", name,
                                 json_is_true(json_object_get(s, "available"))
                                         ? ""
                                         : " (not available: the owner must pass it with -e at the next start)");
        }
        if (json_array_size(secrets))
                (void)buf_puts(b, ". The live organism restarts with them as environment variables");
}

static int tool_request(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->outbound)
                return tool_result_printf(ret, true, "%s is not available here", t->name);
        /* Asked every time: the handler runs only for a call the owner
         * approved just now, and grants only what that approval showed. */
        if (!ctx->approval_id)
                return tool_result_printf(ret, true, "%s: not granted: the owner was not asked", t->name);
        struct outbound_request req;
        _cleanup_free_ char *why = NULL, *id = NULL;
        int r = outbound_request_check(ctx->outbound, args, &req, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return tool_result_printf(ret, true, "%s: %s", t->name, why ? why : "invalid request");
        r = outbound_grant(ctx->outbound, &req, ctx->approval_id, &id);
        if (r == -E2BIG)
                r = tool_result_printf(ret, true, "%s: the owner approved, but too many hosts are granted already; "
                                                  "ask the owner to revoke some in Settings", t->name);
        else if (r >= 0) {
                struct buf b = BUF_INIT(64 * 1024);
                _cleanup_json_ json_t *status = NULL;
                json_t *grant = NULL;
                if (outbound_json(ctx->outbound, &status) >= 0) {
                        size_t i;
                        json_t *g;
                        json_array_foreach(json_object_get(status, "grants"), i, g)
                                if (id && streq(json_string_value(json_object_get(g, "id")) ?: "", id))
                                        grant = g;
                }
                (void)buf_printf(&b, "The owner approved. Granted (%s): ", id ? id : "?");
                for (char **h = req.hosts; *h; h++)
                        (void)buf_printf(&b, "%s%s", h == req.hosts ? "" : ", ", *h);
                (void)buf_puts(&b, req.scope == OUTBOUND_FOR_ORGANISM
                                           ? " for the live organism (and previews), over HTTPS through HTTPS_PROXY"
                                           : " for evolution, build and test commands, over HTTPS through HTTPS_PROXY");
                describe_secrets(&b, &req, grant);
                (void)buf_puts(&b, ".");
                r = b.data ? tool_result_printf(ret, false, "%s", b.data) : -ENOMEM;
                buf_free(&b);
        }
        outbound_request_done(&req);
        return r;
}

static int tool_status(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->outbound)
                return tool_result_printf(ret, true, "%s is not available here", t->name);
        _cleanup_free_ char *text = NULL;
        int r = outbound_status_text(ctx->outbound, &text);
        if (r < 0)
                return r;
        return tool_result_printf(ret, false, "%s", text);
}

const struct tool outbound_tools[] = {
        {
                .name = "request_outbound_access",
                .description =
                        "Ask the owner for outbound HTTPS access. hosts: exact names (api.example.com) or "
                        "*.example.com for its subdomains; no IP addresses or internal names. for: \"organism\" (the "
                        "live app, which reaches them through HTTPS_PROXY) or \"evolutions\" (your run, build and "
                        "test commands, e.g. a download host that is not a package registry). secrets: names of "
                        "secrets the live app needs as environment variables (organism only; the owner passes their "
                        "values at start). reason: why. The owner sees exactly this request and approves or denies "
                        "it; exactly that is granted, and every call asks again. Ask only for what is needed; "
                        "outbound_status shows what is granted and what the proxy refused.",
                .level = TOOL_DANGEROUS,
                .always_ask = true,
                .check = check_request,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"hosts\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":16,"
                          "\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":254}},"
                          "\"for\":{\"type\":\"string\",\"enum\":[\"organism\",\"evolutions\"]},"
                          "\"secrets\":{\"type\":\"array\",\"maxItems\":16,"
                          "\"items\":{\"type\":\"string\",\"pattern\":\"^[A-Z][A-Z0-9_]{0,127}$\"}},"
                          "\"reason\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1000}},"
                          "\"required\":[\"hosts\",\"for\",\"reason\"],\"additionalProperties\":false}",
                .handler = tool_request,
                .phases = TOOL_PHASE_MUTATE | TOOL_PHASE_CHAT,
        },
        {
                .name = "outbound_status",
                .description = "What may be reached from the sandboxes: hosts granted for the live organism and for "
                               "evolutions (with their secrets' names), the package registries, and the connections "
                               "the egress proxy refused recently (host, which sandbox, why).",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
                .handler = tool_status,
                .phases = TOOL_PHASE_PLAN | TOOL_PHASE_MUTATE | TOOL_PHASE_REFLECT | TOOL_PHASE_CHAT,
        },
        TOOL_TABLE_END,
};
