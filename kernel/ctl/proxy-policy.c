#include "ctl/proxy-policy.h"
#include "base/text.h"
#include "base/crypto.h"
#include "ctl/cookie.h"

#include <ctype.h>
#include <strings.h>

/* Whether name appears as a token in a comma-separated list. */
static bool list_has_token(const char *list, const char *name) {
        size_t nl = strlen(name);
        for (const char *p = list; p && *p;) {
                while (*p == ' ' || *p == '\t' || *p == ',')
                        p++;
                size_t n = strcspn(p, ",");
                size_t m = n;
                while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
                        m--;
                if (m == nl && m > 0 && strncasecmp(p, name, nl) == 0)
                        return true;
                p += n;
        }
        return false;
}

static bool is_hop_by_hop(const char *name, const char *connection) {
        static const char *const hop[] = {"connection", "keep-alive", "te", "trailer",
                                          "upgrade", "transfer-encoding"};
        for (size_t i = 0; i < ARRAY_SIZE(hop); i++)
                if (strcasecmp(name, hop[i]) == 0)
                        return true;
        return strncasecmp(name, "proxy-", 6) == 0 || list_has_token(connection, name);
}

static bool bearer_is(const char *value, const char *token) {
        const char *t;
        size_t n;
        return !strempty(token) && ctl_auth_bearer(value, &t, &n) >= 0 && ctl_token_eq(t, n, token);
}

/* A Content-Length value: plain decimal, 1 to 18 digits (no sign, spaces or
 * lists). */
static bool parse_length(const char *s, uint64_t *ret) {
        size_t k = strlen(s);
        if (k == 0 || k > 18 || strspn(s, "0123456789") != k)
                return false;
        *ret = strtoull(s, NULL, 10);
        return true;
}

/* Whether a list of several codings ends with "chunked". */
static bool chunked_after_others(const char *list) {
        const char *p = strrchr(list, ',');
        if (!p)
                return false;
        p++;
        while (*p == ' ' || *p == '\t')
                p++;
        size_t n = strlen(p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                n--;
        return n == 7 && strncasecmp(p, "chunked", 7) == 0;
}

int ctl_request_framing(const struct ctl_hdrs *h, enum ctl_body *ret_body, uint64_t *ret_len) {
        const char *te = NULL;
        size_t n_te = 0;
        bool have_len = false;
        uint64_t len = 0;
        for (size_t i = 0; i < h->n; i++) {
                const struct ctl_hdr *e = &h->v[i];
                if (strcasecmp(e->name, "transfer-encoding") == 0) {
                        te = e->value;
                        n_te++;
                } else if (strcasecmp(e->name, "content-length") == 0) {
                        uint64_t v;
                        if (!parse_length(e->value, &v) || (have_len && v != len))
                                return -EBADMSG;
                        have_len = true;
                        len = v;
                }
        }
        if (n_te > 1 || (te && have_len))
                return -EBADMSG; /* RFC 9112 §6.1: a smuggling attempt until proven otherwise */
        if (te) {
                if (strcasecmp(te, "chunked") != 0)
                        return chunked_after_others(te) ? -EOPNOTSUPP : -EBADMSG;
                *ret_body = CTL_BODY_CHUNKED;
                *ret_len = 0;
                return 0;
        }
        *ret_body = have_len ? CTL_BODY_LENGTH : CTL_BODY_NONE;
        *ret_len = len;
        return 0;
}

bool ctl_proxy_drop_request_header(const char *name, const char *value, const char *connection,
                                   const char *cli_token) {
        static const char *const own[] = {"host", "content-length", "expect", "forwarded",
                                          "x-seed-token", "x-real-ip"};
        /* A field name is an RFC 9110 token (base/text): no spaces, tabs,
         * quotes or controls, so "Transfer-Encoding\t" cannot slip past the
         * exact-name checks. */
        if (!http_token_ok(name) || is_hop_by_hop(name, connection))
                return true;
        for (size_t i = 0; i < ARRAY_SIZE(own); i++)
                if (strcasecmp(name, own[i]) == 0)
                        return true;
        if (strncasecmp(name, "x-forwarded-", 12) == 0)
                return true;
        if (strcasecmp(name, "authorization") == 0 && bearer_is(value, cli_token))
                return true;
        /* Controls (CR, LF, …) and DEL, which RFC 9110 allows in no field
         * (a token, the name, has none). */
        return !http_field_value_ok(value);
}

int ctl_proxy_request_head(const struct ctl_hdrs *in, const struct ctl_proxy_req *req,
                           struct buf *out) {
        const char *connection = ctl_hdrs_get(in, "Connection");
        int r = buf_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", req->method, req->target,
                           req->host);
        for (size_t i = 0; r >= 0 && i < in->n; i++) {
                const struct ctl_hdr *h = &in->v[i];
                if (ctl_proxy_drop_request_header(h->name, h->value, connection, req->cli_token))
                        continue;
                if (strcasecmp(h->name, "cookie") == 0) {
                        /* The session, the preview and the badge's presence
                         * cookie never reach the organism (the badge's has
                         * Path=/_seed/, which is never proxied: stripped all
                         * the same). */
                        _cleanup_free_ char *kept = NULL, *kept2 = NULL;
                        char badge[96];
                        int k = snprintf(badge, sizeof badge, "%s_badge", req->cookie_name);
                        if (k < 0 || (size_t)k >= sizeof badge)
                                return -EINVAL;
                        r = ctl_cookie_strip(h->value, req->cookie_name, &kept);
                        if (r >= 0 && kept && req->preview_cookie_name) {
                                r = ctl_cookie_strip(kept, req->preview_cookie_name, &kept2);
                                free(kept);
                                kept = TAKE_PTR(kept2);
                        }
                        if (r >= 0 && kept) {
                                r = ctl_cookie_strip(kept, badge, &kept2);
                                free(kept);
                                kept = TAKE_PTR(kept2);
                        }
                        if (r >= 0 && kept)
                                r = buf_printf(out, "Cookie: %s\r\n", kept);
                        continue;
                }
                r = ctl_hdr_line(out, h->name, h->value);
        }
        if (r >= 0)
                r = buf_printf(out,
                               "X-Forwarded-For: %s\r\nX-Forwarded-Proto: http\r\n"
                               "X-Forwarded-Host: %s\r\n",
                               req->client_ip, req->host);
        if (r >= 0 && req->body == CTL_BODY_LENGTH)
                r = buf_printf(out, "Content-Length: %llu\r\n", (unsigned long long)req->body_len);
        else if (r >= 0 && req->body == CTL_BODY_CHUNKED)
                r = buf_puts(out, "Transfer-Encoding: chunked\r\n");
        if (r >= 0)
                r = buf_puts(out, req->keep_alive ? "\r\n" : "Connection: close\r\n\r\n");
        return r;
}

size_t ctl_proxy_head_end(const char *data, size_t len) {
        for (size_t i = 3; i < len; i++)
                if (data[i] == '\n' && data[i - 1] == '\r' && data[i - 2] == '\n' &&
                    data[i - 3] == '\r')
                        return i + 1;
        return 0;
}

void ctl_upstream_done(struct ctl_upstream *u) {
        ctl_hdrs_free(&u->hdrs);
        *u = (struct ctl_upstream){0};
}

static int parse_status_line(const char *line, size_t n, int *ret_status) {
        if (n < 12 || (strncmp(line, "HTTP/1.1 ", 9) != 0 && strncmp(line, "HTTP/1.0 ", 9) != 0))
                return -EBADMSG;
        if (!isdigit((unsigned char)line[9]) || !isdigit((unsigned char)line[10]) ||
            !isdigit((unsigned char)line[11]) || (n > 12 && line[12] != ' '))
                return -EBADMSG;
        int status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
        if (status < 100 || status > 599)
                return -EBADMSG;
        *ret_status = status;
        return 0;
}

static int parse_header_line(const char *line, size_t n, struct ctl_hdrs *h) {
        const char *colon = memchr(line, ':', n);
        if (!colon || colon == line)
                return -EBADMSG; /* also refuses obs-fold (leading whitespace) */
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1, *end = line + n;
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        int r = ctl_hdrs_addn(h, line, nl, v, (size_t)(end - v));
        if (r < 0)
                return r;
        /* The head holds no NUL (ctl_proxy_parse_head), so the copies are the
         * whole name and value: a token, and a value without controls (the
         * caller frees the list when one is not). */
        const struct ctl_hdr *e = &h->v[h->n - 1];
        return http_token_ok(e->name) && http_field_value_ok(e->value) ? 0 : -EBADMSG;
}

static int decide_body(struct ctl_upstream *u, bool head_request) {
        const char *te = NULL;
        bool have_len = false;
        uint64_t len = 0;
        for (size_t i = 0; i < u->hdrs.n; i++) {
                const struct ctl_hdr *h = &u->hdrs.v[i];
                if (strcasecmp(h->name, "transfer-encoding") == 0) {
                        if (te)
                                return -EBADMSG;
                        te = h->value;
                } else if (strcasecmp(h->name, "content-length") == 0) {
                        uint64_t v;
                        if (!parse_length(h->value, &v))
                                return -EBADMSG;
                        if (have_len && v != len)
                                return -EBADMSG;
                        have_len = true;
                        len = v;
                }
        }
        if (head_request || u->status < 200 || u->status == 204 || u->status == 304) {
                u->body = CTL_BODY_NONE;
        } else if (te) {
                if (strcasecmp(te, "chunked") != 0)
                        return -EBADMSG; /* other codings are not supported */
                u->body = CTL_BODY_CHUNKED;
        } else if (have_len) {
                u->body = CTL_BODY_LENGTH;
                u->length = len;
        } else
                u->body = CTL_BODY_CLOSE;
        return 0;
}

/* Whether a Connection header lists the "close" option (RFC 9112 §9.6). */
static bool connection_says_close(const struct ctl_hdrs *h) {
        for (size_t i = 0; i < h->n; i++) {
                if (strcasecmp(h->v[i].name, "connection") != 0)
                        continue;
                for (const char *s = h->v[i].value; *s;) {
                        s += strspn(s, " \t,");
                        size_t n = strcspn(s, " \t,");
                        if (n == 5 && strncasecmp(s, "close", 5) == 0)
                                return true;
                        s += n;
                }
        }
        return false;
}

int ctl_proxy_parse_head(const char *head, size_t len, bool head_request,
                         struct ctl_upstream *ret) {
        struct ctl_upstream u = {0};
        const char *p = head, *end = head + len;
        bool first = true, blank = false;
        int r = 0;
        if (len > CTL_PROXY_MAX_HEAD || memchr(head, 0, len))
                return -EBADMSG;
        while (r >= 0 && p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                if (!nl || nl == p || nl[-1] != '\r') {
                        r = -EBADMSG;
                        break;
                }
                size_t n = (size_t)(nl - 1 - p);
                if (n == 0) {
                        blank = true;
                        p = nl + 1;
                        break;
                }
                if (first)
                        r = parse_status_line(p, n, &u.status);
                else
                        r = parse_header_line(p, n, &u.hdrs);
                first = false;
                p = nl + 1;
        }
        if (r >= 0 && (!blank || first || p != end))
                r = -EBADMSG;
        if (r >= 0)
                r = decide_body(&u, head_request);
        if (r >= 0)
                u.keep_alive = strncmp(head, "HTTP/1.1 ", 9) == 0 && u.body != CTL_BODY_CLOSE &&
                               !connection_says_close(&u.hdrs);
        if (r < 0) {
                ctl_upstream_done(&u);
                return r == -ENOMEM ? r : -EBADMSG;
        }
        *ret = u;
        return 0;
}

/* Whether a Set-Cookie value would set one of the Seed's own cookies: the
 * session cookie, the owner's preview cookie or the badge's presence cookie
 * (the organism could otherwise drop or replace the owner's). */
static bool sets_a_seed_cookie(const char *value, const char *cookie_name) {
        static const char *const suffixes[] = {"", "_preview", "_badge"};
        for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++) {
                char name[96];
                int k = snprintf(name, sizeof name, "%s%s", cookie_name, suffixes[i]);
                if (k < 0 || (size_t)k >= sizeof name || ctl_set_cookie_sets(value, name))
                        return true;
        }
        return false;
}

/* The organism's Vary values, joined, plus Cookie (once): what the
 * browser's cache must key on. "*" stays "*". Caller frees *ret. */
static int vary_with_cookie(const struct ctl_hdrs *up, char **ret) {
        _cleanup_buf_ struct buf b = BUF_INIT(CTL_PROXY_MAX_HEAD + 16); /* within the head it came in */
        bool cookie = false;
        for (size_t i = 0; i < up->n; i++) {
                if (strcasecmp(up->v[i].name, "vary") != 0)
                        continue;
                if (strstr(up->v[i].value, "*"))
                        return (*ret = strdup("*")) ? 0 : -ENOMEM;
                /* Each comma-separated name, trimmed; Cookie remembered. */
                const char *v = up->v[i].value;
                while (*v) {
                        size_t n = strcspn(v, ",");
                        const char *s = v, *e = v + n;
                        while (s < e && (*s == ' ' || *s == '\t'))
                                s++;
                        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
                                e--;
                        if (e > s) {
                                cookie |= (size_t)(e - s) == 6 && strncasecmp(s, "cookie", 6) == 0;
                                if ((b.len && buf_puts(&b, ", ") < 0) || buf_append(&b, s, (size_t)(e - s)) < 0)
                                        return -ENOMEM;
                        }
                        v += n + (v[n] == ',');
                }
        }
        if (!cookie && ((b.len && buf_puts(&b, ", ") < 0) || buf_puts(&b, "Cookie") < 0))
                return -ENOMEM;
        *ret = buf_steal(&b);
        return 0;
}

int ctl_proxy_response_headers(const struct ctl_hdrs *up, const char *cookie_name, const char *framer, bool preview,
                               struct ctl_hdrs *out) {
        static const char *const drop[] = {
                "content-length",          /* MHD frames the body itself */
                "service-worker-allowed",  /* no service workers: one at / would control /_seed */
                "cross-origin-opener-policy", /* forced to unsafe-none below */
                "clear-site-data",         /* would sign the owner out of /_seed */
                "vary",                    /* merged with Cookie below */
        };
        static const char *const drop_in_preview[] = {"cache-control", "expires", "etag", "last-modified", "age"};
        const char *connection = ctl_hdrs_get(up, "Connection");
        for (size_t i = 0; i < up->n; i++) {
                const struct ctl_hdr *h = &up->v[i];
                bool skip = is_hop_by_hop(h->name, connection);
                for (size_t k = 0; !skip && k < ARRAY_SIZE(drop); k++)
                        skip = strcasecmp(h->name, drop[k]) == 0;
                for (size_t k = 0; !skip && preview && k < ARRAY_SIZE(drop_in_preview); k++)
                        skip = strcasecmp(h->name, drop_in_preview[k]) == 0;
                if (!skip && strcasecmp(h->name, "set-cookie") == 0)
                        skip = sets_a_seed_cookie(h->value, cookie_name);
                if (skip)
                        continue;
                int r = ctl_hdrs_add(out, h->name, h->value);
                if (r < 0)
                        return r;
        }
        _cleanup_free_ char *csp = NULL, *vary = NULL;
        if (xasprintf(&csp, "frame-ancestors %s", framer ? framer : "'none'") < 0)
                return -ENOMEM;
        int r = vary_with_cookie(up, &vary);
        if (r >= 0)
                r = ctl_hdrs_add(out, "Vary", vary);
        if (r >= 0 && preview)
                r = ctl_hdrs_add(out, "Cache-Control", "no-store");
        if (r >= 0)
                r = ctl_hdrs_add(out, "Cross-Origin-Opener-Policy", "unsafe-none");
        if (r >= 0)
                r = ctl_hdrs_add(out, "Content-Security-Policy", csp);
        return r;
}

enum {
        CH_SIZE,
        CH_EXT,
        CH_SIZE_LF,
        CH_DATA,
        CH_DATA_CR,
        CH_DATA_LF,
        CH_TRAILER_START,
        CH_TRAILER,
        CH_TRAILER_LF,
        CH_FINAL_LF,
        CH_DONE,
};

#define CH_MAX_LINE 4096

int ctl_chunked_decode(struct ctl_chunked *c, const char *in, size_t inlen, char *out,
                       size_t outcap, size_t *ret_consumed, size_t *ret_produced) {
        size_t i = 0, o = 0;
        int r = 0;
        while (i < inlen && c->state != CH_DONE) {
                char ch = in[i];
                if (c->state == CH_DATA) {
                        size_t n = inlen - i;
                        if (n > c->remaining)
                                n = (size_t)c->remaining;
                        if (n > outcap - o)
                                n = outcap - o;
                        if (n == 0)
                                break; /* out is full */
                        memcpy(out + o, in + i, n);
                        o += n;
                        i += n;
                        c->remaining -= n;
                        if (c->remaining == 0)
                                c->state = CH_DATA_CR;
                        continue;
                }
                i++;
                switch (c->state) {
                case CH_SIZE: {
                        int v = hex_digit(ch);
                        if (v >= 0 && c->line < 15) {
                                c->remaining = c->remaining * 16 + (uint64_t)v;
                                c->line++;
                        } else if (c->line > 0 && (ch == ';' || ch == ' ' || ch == '\t'))
                                c->state = CH_EXT;
                        else if (c->line > 0 && ch == '\r')
                                c->state = CH_SIZE_LF;
                        else
                                r = -EBADMSG;
                        break;
                }
                case CH_EXT:
                        if (ch == '\r')
                                c->state = CH_SIZE_LF;
                        else if (ch == '\n' || ++c->line > CH_MAX_LINE)
                                r = -EBADMSG;
                        break;
                case CH_SIZE_LF:
                        if (ch != '\n')
                                r = -EBADMSG;
                        else
                                c->state = c->remaining ? CH_DATA : CH_TRAILER_START;
                        c->line = 0;
                        break;
                case CH_DATA_CR:
                        c->state = CH_DATA_LF;
                        if (ch != '\r')
                                r = -EBADMSG;
                        break;
                case CH_DATA_LF:
                        c->state = CH_SIZE;
                        c->remaining = 0;
                        c->line = 0;
                        if (ch != '\n')
                                r = -EBADMSG;
                        break;
                case CH_TRAILER_START:
                        if (ch == '\r')
                                c->state = CH_FINAL_LF;
                        else if (ch == '\n')
                                r = -EBADMSG;
                        else
                                c->state = CH_TRAILER;
                        break;
                case CH_TRAILER:
                        if (ch == '\r')
                                c->state = CH_TRAILER_LF;
                        else if (ch == '\n' || ++c->line > 16 * CH_MAX_LINE)
                                r = -EBADMSG;
                        break;
                case CH_TRAILER_LF:
                        c->state = CH_TRAILER_START;
                        if (ch != '\n')
                                r = -EBADMSG;
                        break;
                case CH_FINAL_LF:
                        if (ch != '\n')
                                r = -EBADMSG;
                        c->state = CH_DONE;
                        break;
                }
                if (r < 0)
                        return r;
        }
        *ret_consumed = i;
        *ret_produced = o;
        c->done = c->state == CH_DONE;
        return c->done ? 1 : 0;
}
