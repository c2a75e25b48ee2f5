#include "httpc/httpc.h"
#include "base/buf.h"

#include <curl/curl.h>
#include <pthread.h>

static pthread_once_t httpc_once = PTHREAD_ONCE_INIT;
static void httpc_global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata) {
        struct buf *b = userdata;
        size_t n = size * nmemb;
        return buf_append(b, data, n) < 0 ? 0 : n; /* 0 aborts the transfer */
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

        curl_easy_setopt(c, CURLOPT_URL, req->url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(req->timeout_ms ? req->timeout_ms : 30000));
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        if (req->body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
        }
        CURLcode cr = curl_easy_perform(c);
        int r = 0;
        if (cr != CURLE_OK) {
                if (ret_error)
                        (void)xasprintf(ret_error, "%s", cr == CURLE_WRITE_ERROR ? "response too large"
                                                                                 : curl_easy_strerror(cr));
                r = cr == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
                    : cr == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
                    : cr == CURLE_WRITE_ERROR      ? -E2BIG
                                                   : -EIO;
                buf_free(&body);
        } else {
                long status = 0;
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
                ret->status = status;
                ret->body_len = body.len;
                ret->body = buf_steal(&body);
        }
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(c);
        return r;
}

void httpc_response_done(struct httpc_response *r) {
        free(r->body);
        r->body = NULL;
}
