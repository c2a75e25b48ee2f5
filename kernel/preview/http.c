/* http.c — http_request: the one HTTP client (kernel/httpc) over the
 * preview's bridge socket, never a parser of its own. */
#include "preview/preview-internal.h"
#include "base/buf.h"
#include "base/text.h"
#include "httpc/httpc.h"
#include "organism/organism.h"

#include <ctype.h>
#include <strings.h>

#define HTTP_TIMEOUT_MS (10 * 1000)
#define HTTP_CONNECT_TIMEOUT_MS 2000
#define HTTP_RESPONSE_MAX (1024 * 1024)      /* body bytes kept */
#define HTTP_HEADERS_MAX (64 * 1024)         /* header bytes shown */

/* httpc connects to the preview's bridge socket through its checked
 * directory (organism_socket_open()) and speaks only once this kernel is
 * the listener (organism_peer_check()). */
struct app_conn {
        const char *socket_path;
        int error;      /* the checks', or 0 */
};

static int app_check(void *userdata, int fd) {
        struct app_conn *cn = userdata;
        return (cn->error = organism_peer_check(fd, cn->socket_path));
}

/* Header lines the kernel sets itself, whatever the model asks. */
static bool header_is_kernels(const char *name) {
        static const char *const names[] = {"host", "connection", "content-length", "transfer-encoding", "expect"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (!strcasecmp(name, names[i]))
                        return true;
        return false;
}

/* The request's header lines: the model's (each name a token, each value
 * free of CR, LF and other controls; else -EINVAL and *ret_bad is the name,
 * borrowed from headers), then the kernel's. Caller frees *ret with strv_free. */
static int request_headers(json_t *headers, bool framed, bool has_body, char ***ret, const char **ret_bad) {
        _cleanup_strv_free_ char **l = NULL;
        bool has_type = false, has_accept = false;
        const char *name;
        json_t *v;
        json_object_foreach(headers, name, v) {
                const char *value = json_string_value(v);
                if (!http_token_ok(name) || !value || !http_field_value_ok(value)) {
                        *ret_bad = name;
                        return -EINVAL;
                }
                if (header_is_kernels(name))
                        continue;
                has_type = has_type || !strcasecmp(name, "content-type");
                has_accept = has_accept || !strcasecmp(name, "accept");
                if (strv_pushf(&l, "%s: %s", name, value) < 0)
                        return -ENOMEM;
        }
        /* "Name:" alone keeps curl from adding one of its own. */
        if (strv_pushf(&l, "Connection: close") < 0 || strv_pushf(&l, "Expect:") < 0 ||
            (!has_accept && strv_pushf(&l, "Accept:") < 0) ||
            (framed && !has_type && strv_pushf(&l, has_body ? "Content-Type: application/json" : "Content-Type:") < 0))
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

/* A path is sent as given: no spaces or controls that would split the request line. */
static bool path_ok(const char *path) {
        for (const char *s = path; *s; s++)
                if ((unsigned char)*s <= ' ' || *s == 127)
                        return false;
        return true;
}

/* What the model reads: the status line, the headers (names lower-cased, at
 * most HTTP_HEADERS_MAX bytes of them), a blank line, the body. */
static int response_text(const struct httpc_response *res, char **ret) {
        struct buf out = BUF_INIT(HTTP_RESPONSE_MAX + HTTP_HEADERS_MAX + 256);
        int k = buf_printf(&out, "%s\n", res->status_line);
        for (char **h = res->headers; k >= 0 && *h; h++) {
                if (out.len + strlen(*h) > HTTP_HEADERS_MAX)
                        break;
                size_t at = out.len;
                k = buf_printf(&out, "%s\n", *h);
                for (char *c = out.data + at; k >= 0 && *c && *c != ':'; c++)
                        *c = (char)tolower((unsigned char)*c);
        }
        if (k >= 0)
                k = buf_puts(&out, "\n");
        if (k >= 0 && res->body_len)
                k = buf_append(&out, res->body, res->body_len);
        if (k >= 0 && res->truncated)
                k = buf_puts(&out, "\n[response truncated at 1 MiB]");
        if (k < 0) {
                buf_free(&out);
                return -ENOMEM;
        }
        *ret = buf_steal(&out);
        return *ret ? 0 : -ENOMEM;
}

static int http_error(struct tool_result *ret, const char *method, const char *path, int r, const char *err,
                      const struct app_conn *cn) {
        if (r == -ENOMEM)
                return r;
        if (cn->error < 0 || r == -ECONNREFUSED)
                return result(ret, true, "http_request: cannot connect to the app: %s (is it running? see app_logs)",
                              strerror(-r));
        if (r == -ETIMEDOUT)
                return result(ret, true, "http_request: %s %s: no complete answer within 10 s", method, path);
        return result(ret, true, "http_request: %s %s: the app's answer is not HTTP (%s)", method, path,
                      err ? err : strerror(-r));
}

int preview_http_request(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        struct preview *p = ctx->preview;
        if (!p)
                return preview_unavailable(t, ret);
        if (!p->org)
                return result(ret, true, "http_request: no app is running (start it with start_app first)");
        const char *method = json_string_value(json_object_get(args, "method"));
        const char *path = json_string_value(json_object_get(args, "path"));
        const char *body = json_string_value(json_object_get(args, "body"));
        if (!http_token_ok(method) || !path || path[0] != '/')
                return result(ret, true, "http_request: method and an absolute path (\"/...\") are required");
        if (!path_ok(path))
                return result(ret, true, "http_request: the path must not contain spaces or control "
                                         "characters (percent-encode them)");
        bool framed = body || streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH");
        _cleanup_strv_free_ char **headers = NULL;
        const char *bad = NULL;
        int k = request_headers(json_object_get(args, "headers"), framed, body != NULL, &headers, &bad);
        if (k == -EINVAL)
                return result(ret, true, "http_request: header \"%s\" is not a valid header name and value", bad);
        _cleanup_free_ char *url = NULL, *err = NULL, *text = NULL;
        if (k < 0 || xasprintf(&url, "http://localhost%s", path) < 0)
                return -ENOMEM;
        struct app_conn cn = {.socket_path = organism_socket(p->org)};
        _cleanup_close_ int dirfd = -1;
        _cleanup_free_ char *sock = NULL;
        if ((k = organism_socket_open(cn.socket_path, &dirfd, &sock)) < 0) {
                cn.error = k;
                return http_error(ret, method, path, k, NULL, &cn);
        }
        struct httpc_response res = {0};
        k = httpc_do(&(struct httpc_request){.method = method, .url = url, .headers = headers,
                                             .body = framed ? (body ? body : "") : NULL,
                                             .body_len = body ? strlen(body) : 0,
                                             .timeout_ms = HTTP_TIMEOUT_MS, .max_response = HTTP_RESPONSE_MAX,
                                             .truncate = true, .connect_timeout_ms = HTTP_CONNECT_TIMEOUT_MS,
                                             .unix_socket = sock, .check_fn = app_check, .check_userdata = &cn},
                     &res, &err);
        if (k < 0)
                return http_error(ret, method, path, k, err, &cn);
        k = response_text(&res, &text);
        httpc_response_done(&res);
        if (k < 0)
                return k;
        free(ret->output);
        ret->output = TAKE_PTR(text);
        ret->is_error = false;
        return 0;
}

