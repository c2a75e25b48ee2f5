/* http.h — small HTTP data types shared inside the ctl module: a header
 * list, a response under construction, and escaping for HTML and JSON.
 * Nothing here knows libmicrohttpd, so all of it is unit-testable. */
#pragma once

#include "base/base.h"
#include "base/buf.h"
#include "ctl/ctl.h"

/* A list of headers; names and values are owned copies, kept together in
 * a few blocks of text (a request's or an answer's headers cost two
 * allocations, not two per header: the proxy builds three lists a request). */
struct ctl_hdrs {
        struct ctl_hdr {
                char *name;
                char *value;
        } *v;
        size_t n, cap;
        struct ctl_hdrs_text *text; /* the newest block; each links the one before */
};

#define CTL_MAX_HEADERS 256

int ctl_hdrs_add(struct ctl_hdrs *h, const char *name, const char *value);
/* The same with lengths: name[0, nlen) and value[0, vlen), which need no NUL. */
int ctl_hdrs_addn(struct ctl_hdrs *h, const char *name, size_t nlen, const char *value, size_t vlen);
/* The first value of a header (case-insensitive name), or NULL. Borrowed. */
const char *ctl_hdrs_get(const struct ctl_hdrs *h, const char *name);
/* How many headers carry this name. */
size_t ctl_hdrs_count(const struct ctl_hdrs *h, const char *name);
/* Appends the header line "name: value\r\n" to b (no formatting pass). */
int ctl_hdr_line(struct buf *b, const char *name, const char *value);
void ctl_hdrs_free(struct ctl_hdrs *h);

/* A response built by a handler; server.c turns it into an MHD response. */
struct ctl_resp {
        int status;
        const char *ctype;        /* static string; NULL = no body type */
        char *body;               /* owned unless body_static */
        size_t len;
        bool body_static;
        struct ctl_hdrs hdrs;     /* extra headers */
        struct ctl_stream stream; /* streamed body instead of body, when stream.read is set */
};
void ctl_resp_done(struct ctl_resp *r);
/* Sets the body to a copy of s (or takes ownership with _take). */
int ctl_resp_set(struct ctl_resp *r, int status, const char *ctype, const char *s);
void ctl_resp_take(struct ctl_resp *r, int status, const char *ctype, char *s);
/* {"error": msg} with the given status. */
int ctl_resp_error(struct ctl_resp *r, int status, const char *msg);

/* The headers every /_seed response carries (CSP, COOP, nosniff, …). A
 * Referrer-Policy or Cache-Control already in h is kept instead of ours, and
 * so is one Content-Security-Policy that ctl_csp_sandboxes() or that
 * ctl_csp_frames_admin() accepts. */
int ctl_add_security_headers(struct ctl_hdrs *h);
/* Whether a CSP starts with a bare "sandbox" directive (no allow-* tokens:
 * no script, no forms, no popups, an opaque origin). */
bool ctl_csp_sandboxes(const char *csp);
extern const char CTL_CSP[];
/* CTL_CSP plus "frame-src <admin_origin>": the control plane's page, which
 * frames the organism's admin screens from admin_origin
 * ("http://organism.localhost[:port]") and from nowhere else. -EINVAL for
 * any other origin. Caller frees. */
int ctl_csp_with_admin_frames(const char *admin_origin, char **ret);
/* Whether csp is exactly what ctl_csp_with_admin_frames() makes. */
bool ctl_csp_frames_admin(const char *csp);
/* CTL_CSP with "frame-ancestors <framer>" instead of 'none' (framer: one
 * origin, "http://host[:port]"): the kernel's own pages on the organism's
 * admin origin, which the control plane frames. -EINVAL for anything that
 * is not one plain origin. Caller frees. */
int ctl_csp_framed_by(const char *framer, char **ret);

/* Appends s HTML-escaped (& < > " ') to b. */
int ctl_html_escape(struct buf *b, const char *s);
/* Appends s as a quoted JSON string; invalid UTF-8 becomes U+FFFD. */
int ctl_json_string(struct buf *b, const char *s);
int ctl_json_string_n(struct buf *b, const char *s, size_t len);

/* The token of an Authorization value in the Bearer scheme (RFC 6750:
 * "Bearer", case-insensitive, then SP/HTAB, then the token; SP and HTAB
 * around the token are dropped). -ENOENT for any other scheme (Basic,
 * Digest, …: not the CLI's), -EINVAL for Bearer without a token. *ret_token
 * points into value. */
int ctl_auth_bearer(const char *value, const char **ret_token, size_t *ret_len);
/* Constant-time (for a given want length) comparison of the n bytes at s
 * with the string want. */
bool ctl_token_eq(const char *s, size_t n, const char *want);

/* Case-insensitive equality / prefix. */
bool ctl_strcaseeq(const char *a, const char *b);
