/* httpc.c — see httpc.h. libcurl is included here and nowhere else. */
#include "httpc/httpc.h"
#include "base/buf.h"
#include "base/text.h"

#include <curl/curl.h>
#include <pthread.h>
#include <strings.h>

#define HTTPC_MAX_HEADERS 100
#define HTTPC_MAX_HEADER_LINE 8192

static pthread_once_t httpc_once = PTHREAD_ONCE_INIT;
static void httpc_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

struct headers {
        char **lines;   /* NULL-terminated */
        size_t n;
        char *status_line;
        bool oom;
};

static void headers_reset(struct headers *h) {
        strv_free(h->lines);
        h->lines = NULL;
        h->n = 0;
        free(h->status_line);
        h->status_line = NULL;
}

struct body {
        struct buf b;
        bool truncate;   /* keep the head at the cap instead of failing */
        bool truncated;
        bool oom;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata) {
        struct body *bd = userdata;
        size_t n = size * nmemb;
        if (bd->truncate && n > bd->b.max - bd->b.len) {
                bd->truncated = true;
                bd->oom = buf_append(&bd->b, data, bd->b.max - bd->b.len) < 0;
                return 0; /* stop reading: the rest is never wanted */
        }
        return buf_append(&bd->b, data, n) < 0 ? 0 : n; /* 0 aborts the transfer */
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata) {
        struct headers *h = userdata;
        size_t n = size * nmemb, len = n;
        while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == '\n' || data[len - 1] == ' ' ||
                           data[len - 1] == '\t'))
                len--;
        /* A status line starts a new header block (after 1xx interim responses). */
        if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) {
                headers_reset(h);
                if (len <= HTTPC_MAX_HEADER_LINE && !(h->status_line = strndup(data, len))) {
                        h->oom = true;
                        return 0;
                }
                return n;
        }
        if (len == 0 || len > HTTPC_MAX_HEADER_LINE || h->n >= HTTPC_MAX_HEADERS || !memchr(data, ':', len))
                return n;
        if (strv_pushf(&h->lines, "%.*s", (int)len, data) < 0) {
                h->oom = true;
                return 0;
        }
        h->n++;
        return n;
}

struct progress {
        const struct httpc_request *req;
        bool aborted;
};

static int on_progress(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
        struct progress *p = userdata;
        if (p->req->abort_fn && p->req->abort_fn(p->req->abort_userdata)) {
                p->aborted = true;
                return 1;
        }
        return 0;
}

static int map_curl_error(CURLcode cr) {
        switch (cr) {
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                return -ECONNRESET;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
                return -EPROTO;
        case CURLE_WRITE_ERROR:
                return -E2BIG;
        case CURLE_ABORTED_BY_CALLBACK:
                return -ECANCELED;
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
                return -EINVAL;
        default:
                return -EIO;
        }
}

bool httpc_error_is_network(int r) {
        return r == -ETIMEDOUT || r == -ECONNREFUSED || r == -EHOSTUNREACH || r == -ECONNRESET || r == -EIO;
}

/* The caller's check_fn, run on the connected socket before the request. */
struct connect {
        const struct httpc_request *req;
        curl_socket_t fd;
        int error;      /* check_fn's, or 0 */
};

static int on_sockopt(void *userdata, curl_socket_t fd, curlsocktype purpose) {
        struct connect *cn = userdata;
        cn->fd = fd;
        return CURL_SOCKOPT_OK;
}

static int on_prereq(void *userdata, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port) {
        struct connect *cn = userdata;
        cn->error = cn->fd == CURL_SOCKET_BAD ? -ENOTCONN : cn->req->check_fn(cn->req->check_userdata, cn->fd);
        return cn->error < 0 ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}

/* A request's method and header lines are sent only if they are well formed:
 * a CR or LF in a line would start another header (or request). */
static int request_check(const struct httpc_request *req) {
        if (!req->url || !http_token_ok(req->method))
                return -EINVAL;
        for (char *const *h = req->headers; h && *h; h++)
                if (!http_field_value_ok(*h))
                        return -EINVAL;
        return 0;
}

static void request_setup(CURL *c, const struct httpc_request *req, struct curl_slist *hdrs) {
        curl_easy_setopt(c, CURLOPT_URL, req->url);
        if (streq(req->method, "HEAD"))
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L); /* else curl waits for a body */
        else
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
        /* A proxy would see a plain-http request's headers (e.g. a key): only
         * https, tunnelled end to end, may go through one. */
        if (startswith(req->url, "http://") || req->unix_socket)
                curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(req->timeout_ms > 0 ? req->timeout_ms : 30000));
        if (req->connect_timeout_ms > 0)
                curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)req->connect_timeout_ms);
        if (req->unix_socket)
                curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
        if (req->body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
        }
}

/* Moves what arrived into *ret (on success only). */
static int response_take(CURL *c, struct body *bd, struct headers *rh, struct httpc_response *ret) {
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        size_t len = bd->b.len;
        _cleanup_free_ char *body = buf_steal(&bd->b), *line = rh->status_line ? TAKE_PTR(rh->status_line)
                                                                                : strdup("");
        char **lines = rh->lines ? TAKE_PTR(rh->lines) : calloc(1, sizeof(char *));
        if (!body || !line || !lines) {
                strv_free(lines);
                return -ENOMEM;
        }
        *ret = (struct httpc_response){.status = status, .body_len = len, .truncated = bd->truncated};
        ret->body = TAKE_PTR(body);
        ret->status_line = TAKE_PTR(line);
        ret->headers = lines;
        return 0;
}

static int map_result(CURLcode cr, const struct body *bd, const struct headers *rh, const struct connect *cn) {
        if (cr == CURLE_OK)
                return 0;
        if (cn->error < 0)
                return cn->error;
        if (cr == CURLE_WRITE_ERROR && (rh->oom || bd->oom))
                return -ENOMEM;
        if (cr == CURLE_WRITE_ERROR && bd->truncated)
                return 0; /* the head was kept on purpose */
        return map_curl_error(cr);
}

int httpc_do(const struct httpc_request *req, struct httpc_response *ret, char **ret_error) {
        int r = request_check(req);
        if (r < 0) {
                if (ret_error)
                        (void)xasprintf(ret_error, "invalid method or header line");
                return r;
        }
        pthread_once(&httpc_once, httpc_global_init);
        CURL *c = curl_easy_init();
        if (!c)
                return -ENOMEM;
        struct curl_slist *hdrs = NULL;
        for (char *const *h = req->headers; h && *h; h++)
                hdrs = curl_slist_append(hdrs, *h);
        struct body bd = {.b = BUF_INIT(req->max_response ? req->max_response : 8u << 20), .truncate = req->truncate};
        struct headers rh = {0};
        struct progress prog = {.req = req};
        struct connect cn = {.req = req, .fd = CURL_SOCKET_BAD};

        request_setup(c, req, hdrs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &bd);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &rh);
        if (req->abort_fn) {
                curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
                curl_easy_setopt(c, CURLOPT_XFERINFODATA, &prog);
                curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        }
        if (req->check_fn) {
                curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, on_sockopt);
                curl_easy_setopt(c, CURLOPT_SOCKOPTDATA, &cn);
                curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, on_prereq);
                curl_easy_setopt(c, CURLOPT_PREREQDATA, &cn);
        }
        CURLcode cr = curl_easy_perform(c);
        r = map_result(cr, &bd, &rh, &cn);
        if (r >= 0)
                r = response_take(c, &bd, &rh, ret);
        else if (ret_error)
                (void)xasprintf(ret_error, "%s",
                                r == -E2BIG        ? "response too large"
                                : r == -ECANCELED ? "cancelled"
                                : r == -ENOMEM    ? "out of memory"
                                : cn.error < 0    ? strerror(-cn.error)
                                                  : curl_easy_strerror(cr));
        buf_free(&bd.b);
        headers_reset(&rh);
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(c);
        return r;
}

void httpc_response_done(struct httpc_response *r) {
        free(r->body);
        r->body = NULL;
        free(r->status_line);
        r->status_line = NULL;
        strv_free(r->headers);
        r->headers = NULL;
}

const char *httpc_response_header(const struct httpc_response *r, const char *name) {
        size_t nl = strlen(name);
        for (char **l = r->headers; l && *l; l++)
                if (strncasecmp(*l, name, nl) == 0 && (*l)[nl] == ':') {
                        const char *v = *l + nl + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        return v;
                }
        return NULL;
}
