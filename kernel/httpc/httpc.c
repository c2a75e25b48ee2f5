#include "httpc/httpc.h"
#include "base/buf.h"

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
        bool oom;
};

static void headers_reset(struct headers *h) {
        strv_free(h->lines);
        h->lines = NULL;
        h->n = 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata) {
        struct buf *b = userdata;
        size_t n = size * nmemb;
        return buf_append(b, data, n) < 0 ? 0 : n; /* 0 aborts the transfer */
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

int httpc_do(const struct httpc_request *req, struct httpc_response *ret, char **ret_error) {
        pthread_once(&httpc_once, httpc_global_init);
        CURL *c = curl_easy_init();
        if (!c)
                return -ENOMEM;
        struct curl_slist *hdrs = NULL;
        for (char *const *h = req->headers; h && *h; h++)
                hdrs = curl_slist_append(hdrs, *h);
        struct buf body = BUF_INIT(req->max_response ? req->max_response : 8u << 20);
        struct headers rh = {0};
        struct progress prog = {.req = req};

        curl_easy_setopt(c, CURLOPT_URL, req->url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
        /* A proxy would see a plain-http request's headers (e.g. a key): only
         * https, tunnelled end to end, may go through one. */
        if (startswith(req->url, "http://"))
                curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(req->timeout_ms > 0 ? req->timeout_ms : 30000));
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &rh);
        if (req->abort_fn) {
                curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
                curl_easy_setopt(c, CURLOPT_XFERINFODATA, &prog);
                curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        }
        if (req->body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
        }
        CURLcode cr = curl_easy_perform(c);
        int r = 0;
        if (cr == CURLE_WRITE_ERROR && rh.oom)
                r = -ENOMEM;
        else if (cr != CURLE_OK)
                r = map_curl_error(cr);
        if (r < 0) {
                if (ret_error)
                        (void)xasprintf(ret_error, "%s",
                                        r == -E2BIG        ? "response too large"
                                        : r == -ECANCELED ? "cancelled"
                                        : r == -ENOMEM    ? "out of memory"
                                                          : curl_easy_strerror(cr));
                buf_free(&body);
                headers_reset(&rh);
        } else {
                long status = 0;
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
                if (!rh.lines)
                        rh.lines = calloc(1, sizeof(char *));
                if (!rh.lines) {
                        buf_free(&body);
                        r = -ENOMEM;
                } else {
                        ret->status = status;
                        ret->body_len = body.len;
                        ret->body = buf_steal(&body);
                        if (!ret->body)
                                ret->body = strdup("");
                        ret->headers = TAKE_PTR(rh.lines);
                        if (!ret->body) {
                                strv_free(ret->headers);
                                ret->headers = NULL;
                                r = -ENOMEM;
                        }
                }
        }
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(c);
        return r;
}

void httpc_response_done(struct httpc_response *r) {
        free(r->body);
        r->body = NULL;
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
