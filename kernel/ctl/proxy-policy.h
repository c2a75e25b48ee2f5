/* proxy-policy.h — what the reverse proxy to the organism forwards and what
 * it adds, as pure functions: request-header filtering (hop-by-hop headers,
 * the Seed's own cookie and tokens never reach the organism), parsing the
 * organism's response head, the response-header policy (COOP unsafe-none,
 * frame-ancestors 'none' — or only the control plane on the admin origin —,
 * no service workers, the Seed's cookie untouchable)
 * and a chunked-transfer decoder that accepts input split anywhere. */
#pragma once

#include "base/base.h"
#include "base/buf.h"
#include "ctl/http.h"

#define CTL_PROXY_MAX_HEAD (64 * 1024) /* upstream response head; larger → 502 */

enum ctl_body {
        CTL_BODY_NONE,
        CTL_BODY_LENGTH,
        CTL_BODY_CHUNKED,
        CTL_BODY_CLOSE, /* read until the upstream closes */
};

struct ctl_proxy_req {
        const char *method;
        const char *target;       /* raw request-target, origin-form */
        const char *host;         /* the (allowed) Host header */
        const char *client_ip;
        const char *cookie_name;  /* the Seed's session cookie: stripped */
        const char *preview_cookie_name; /* the owner's preview cookie (ctl/preview.h): stripped too; may be NULL */
        const char *cli_token;    /* "Authorization: Bearer <it>" is stripped; may be NULL */
        enum ctl_body body;       /* NONE, LENGTH or CHUNKED */
        uint64_t body_len;
        bool keep_alive;          /* the connection may carry another request
                                   * afterwards; else "Connection: close" */
};

/* The framing of a request body, decided from the same headers libmicrohttpd
 * reads it by (RFC 9112 §6): "Transfer-Encoding: chunked" → CTL_BODY_CHUNKED,
 * a Content-Length (several only if all equal) → CTL_BODY_LENGTH with
 * *ret_len, neither → CTL_BODY_NONE. -EBADMSG (answer 400) for both headers
 * at once, a Content-Length that is not plain decimal (1 to 18 digits), two
 * that differ, more than one Transfer-Encoding, or one that is not exactly
 * "chunked" — except chunked after other codings ("gzip, chunked"), which is
 * -EOPNOTSUPP (answer 501). Out-params are written only on success.
 * The organism never sees the client's framing headers: the proxy sends its
 * own (ctl_proxy_request_head). */
int ctl_request_framing(const struct ctl_hdrs *h, enum ctl_body *ret_body, uint64_t *ret_len);

/* Whether a request header is dropped before forwarding: names that are not
 * RFC 9110 tokens, names or values with control characters (CR, LF, NUL, …),
 * hop-by-hop headers (connection is the request's Connection header; the
 * names it lists are hop-by-hop too), the client's framing headers and the
 * Seed's own (X-Seed-Token, the CLI bearer token, X-Forwarded-*). */
bool ctl_proxy_drop_request_header(const char *name, const char *value, const char *connection,
                                   const char *cli_token);
/* Writes the request head sent to the organism into out. */
int ctl_proxy_request_head(const struct ctl_hdrs *in, const struct ctl_proxy_req *req,
                           struct buf *out);

/* Offset just past the blank line ending a response head, or 0 if the head
 * is not complete yet. */
size_t ctl_proxy_head_end(const char *data, size_t len);

struct ctl_upstream {
        int status;
        struct ctl_hdrs hdrs;
        enum ctl_body body;
        uint64_t length;          /* CTL_BODY_LENGTH */
        /* HTTP/1.1 without "Connection: close", and a body not framed by
         * the close: the connection may carry another request once this
         * body was read to its end. */
        bool keep_alive;
};
void ctl_upstream_done(struct ctl_upstream *u);
/* Parses a response head (status line, headers, blank line) and decides
 * the body framing (RFC 9112 §6.3). -EBADMSG on anything malformed. */
int ctl_proxy_parse_head(const char *head, size_t len, bool head_request,
                         struct ctl_upstream *ret);
/* The headers the browser gets from an organism response: the organism's
 * own (its CSP too: every CSP is enforced, so it can only add limits), minus
 * the dropped ones (a Set-Cookie for cookie_name, or for its "_preview" or
 * "_badge" cookies), plus COOP unsafe-none and a CSP of ours with
 * "frame-ancestors <framer>": 'none' when framer is NULL (every origin but
 * the admin one), else the one origin that may frame the page (the control
 * plane's, on organism.localhost).
 * The browser's cache must never show the candidate to the live app's
 * visitor nor the live app in a preview: every answer varies by Cookie
 * (entering or leaving a preview changes the preview cookie; the
 * organism's Vary is kept, merged), and an answer sent to a preview
 * (preview: true) is "Cache-Control: no-store", the organism's caching
 * headers dropped. */
int ctl_proxy_response_headers(const struct ctl_hdrs *up, const char *cookie_name, const char *framer, bool preview,
                               struct ctl_hdrs *out);

/* Incremental chunked-transfer decoder. */
struct ctl_chunked {
        int state;
        uint64_t remaining;
        size_t line;              /* bytes in the current size/trailer line */
        bool done;
};
/* Consumes input and writes decoded body bytes to out (at most outcap).
 * Returns 1 once the last chunk and trailers are read, 0 if more input is
 * needed (or out is full), -EBADMSG on a malformed stream. */
int ctl_chunked_decode(struct ctl_chunked *c, const char *in, size_t inlen, char *out,
                       size_t outcap, size_t *ret_consumed, size_t *ret_produced);
