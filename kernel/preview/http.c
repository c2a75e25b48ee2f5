/* http.c — http_request: one request to the evolution's preview app through
 * organism_http() (kernel/organism), never an HTTP client of its own. */
#include "preview/preview-internal.h"
#include "organism/organism.h"

int preview_http_request(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct preview *p = ctx->preview;
        if (!p)
                return preview_unavailable(t, ret);
        if (!p->org)
                return result(ret, true, "http_request: no app is running (start it with start_app first)");
        struct organism_http_request req = {
                .method = json_string_value(json_object_get(args, "method")),
                .path = json_string_value(json_object_get(args, "path")),
                .headers = json_object_get(args, "headers"),
                .body = json_string_value(json_object_get(args, "body")),
        };
        _cleanup_free_ char *text = NULL, *err = NULL;
        int k = organism_http(organism_socket(p->org), &req, &text, &err);
        if (k == -ENOMEM)
                return k;
        if (k == -ECONNREFUSED)
                return result(ret, true, "http_request: %s (is it running? see app_logs)", err ? err : strerror(-k));
        if (k < 0)
                return result(ret, true, "http_request: %s", err ? err : strerror(-k));
        free(ret->output);
        ret->output = TAKE_PTR(text);
        ret->is_error = false;
        return 0;
}
