/* http.c — one HTTP request to an organism (the live one or a preview) over
 * its bridge socket, through the one HTTP client (kernel/httpc), never a
 * parser of its own. See organism.h "organism_http". */
#include "organism/organism.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/text.h"
#include "httpc/httpc.h"

#include <ctype.h>
#include <strings.h>

/* httpc connects to the bridge socket through its checked directory
 * (organism_socket_open()) and speaks only once this kernel is the listener
 * (organism_peer_check()). */
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

/* The request's header lines: the caller's (each name a token, each value
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

/* The status line, the headers (names lower-cased, at most
 * ORGANISM_HTTP_HEADERS_MAX bytes of them), a blank line, the body. */
static int response_text(const struct httpc_response *res, char **ret) {
        struct buf out = BUF_INIT(ORGANISM_HTTP_RESPONSE_MAX + ORGANISM_HTTP_HEADERS_MAX + 256);
        int k = buf_printf(&out, "%s\n", res->status_line);
        for (char **h = res->headers; k >= 0 && *h; h++) {
                if (out.len + strlen(*h) > ORGANISM_HTTP_HEADERS_MAX)
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

int organism_http(const char *socket_path, const struct organism_http_request *req, char **ret_text,
                  char **ret_error) {
        if (!socket_path || !req)
                return -EINVAL;
        if (!http_token_ok(req->method) || !req->path || req->path[0] != '/')
                return errorf(-EINVAL, ret_error, "method and an absolute path (\"/...\") are required");
        if (!path_ok(req->path))
                return errorf(-EINVAL, ret_error,
                              "the path must not contain spaces or control characters (percent-encode them)");
        const char *method = req->method, *body = req->body;
        bool framed = body || streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH");
        _cleanup_strv_free_ char **headers = NULL;
        const char *bad = NULL;
        int k = request_headers(req->headers, framed, body != NULL, &headers, &bad);
        if (k == -EINVAL)
                return errorf(-EINVAL, ret_error, "header \"%s\" is not a valid header name and value", bad);
        _cleanup_free_ char *url = NULL, *err = NULL, *text = NULL;
        if (k < 0 || xasprintf(&url, "http://localhost%s", req->path) < 0)
                return -ENOMEM;
        struct app_conn cn = {.socket_path = socket_path};
        _cleanup_close_ int dirfd = -1;
        _cleanup_free_ char *sock = NULL;
        if ((k = organism_socket_open(socket_path, &dirfd, &sock)) < 0)
                return errorf(-ECONNREFUSED, ret_error, "cannot connect to the app: %s", strerror(-k));
        int timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : ORGANISM_HTTP_TIMEOUT_MS;
        struct httpc_response res = {0};
        k = httpc_do(&(struct httpc_request){.method = method, .url = url, .headers = headers,
                                             .body = framed ? (body ? body : "") : NULL,
                                             .body_len = body ? strlen(body) : 0,
                                             .timeout_ms = timeout_ms,
                                             .max_response = ORGANISM_HTTP_RESPONSE_MAX, .truncate = true,
                                             .connect_timeout_ms = ORGANISM_HTTP_CONNECT_TIMEOUT_MS,
                                             .unix_socket = sock, .check_fn = app_check, .check_userdata = &cn},
                     &res, &err);
        if (k == -ENOMEM)
                return k;
        if (k < 0 && (cn.error < 0 || k == -ECONNREFUSED))
                return errorf(-ECONNREFUSED, ret_error, "cannot connect to the app: %s", strerror(-k));
        if (k == -ETIMEDOUT)
                return errorf(-ETIMEDOUT, ret_error, "%s %s: no complete answer within %d s", method, req->path,
                              timeout_ms / 1000);
        if (k < 0)
                return errorf(-EPROTO, ret_error, "%s %s: the app's answer is not HTTP (%s)", method, req->path,
                              err ? err : strerror(-k));
        k = response_text(&res, &text);
        httpc_response_done(&res);
        if (k < 0)
                return k;
        *ret_text = TAKE_PTR(text);
        return 0;
}
