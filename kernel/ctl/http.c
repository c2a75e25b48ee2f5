#include "ctl/http.h"
#include "base/text.h"

#include <strings.h>

const char CTL_CSP[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                       "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                       "base-uri 'none'; form-action 'self'";

bool ctl_strcaseeq(const char *a, const char *b) {
        return a && b && strcasecmp(a, b) == 0;
}

#define HDRS_TEXT_MIN 1024

struct ctl_hdrs_text {
        struct ctl_hdrs_text *prev;
        size_t used, size;
        char data[];
};

/* n bytes of h's text, in its newest block or a new one (twice the size). */
static char *hdrs_text(struct ctl_hdrs *h, size_t n) {
        struct ctl_hdrs_text *t = h->text;
        if (!t || t->size - t->used < n) {
                size_t size = t ? t->size * 2 : HDRS_TEXT_MIN;
                if (size < n)
                        size = n;
                if (!(t = malloc(sizeof *t + size)))
                        return NULL;
                *t = (struct ctl_hdrs_text){.prev = h->text, .size = size};
                h->text = t;
        }
        char *p = t->data + t->used;
        t->used += n;
        return p;
}

int ctl_hdrs_addn(struct ctl_hdrs *h, const char *name, size_t nlen, const char *value, size_t vlen) {
        if (h->n >= CTL_MAX_HEADERS)
                return -E2BIG;
        if (nlen > SIZE_MAX / 2 - 2 || vlen > SIZE_MAX / 2)
                return -E2BIG;
        if (h->n == h->cap) {
                size_t cap = h->cap ? h->cap * 2 : 16;
                struct ctl_hdr *v = realloc(h->v, cap * sizeof *v);
                if (!v)
                        return -ENOMEM;
                h->v = v;
                h->cap = cap;
        }
        char *n = hdrs_text(h, nlen + vlen + 2);
        if (!n)
                return -ENOMEM;
        char *val = n + nlen + 1;
        memcpy(n, name, nlen);
        n[nlen] = 0;
        if (vlen)
                memcpy(val, value, vlen);
        val[vlen] = 0;
        h->v[h->n++] = (struct ctl_hdr){n, val};
        return 0;
}

int ctl_hdrs_add(struct ctl_hdrs *h, const char *name, const char *value) {
        value = value ? value : "";
        return ctl_hdrs_addn(h, name, strlen(name), value, strlen(value));
}

const char *ctl_hdrs_get(const struct ctl_hdrs *h, const char *name) {
        for (size_t i = 0; i < h->n; i++)
                if (ctl_strcaseeq(h->v[i].name, name))
                        return h->v[i].value;
        return NULL;
}

int ctl_hdr_line(struct buf *b, const char *name, const char *value) {
        int r = buf_puts(b, name);
        if (r >= 0)
                r = buf_append(b, ": ", 2);
        if (r >= 0)
                r = buf_puts(b, value);
        if (r >= 0)
                r = buf_append(b, "\r\n", 2);
        return r;
}

size_t ctl_hdrs_count(const struct ctl_hdrs *h, const char *name) {
        size_t k = 0;
        for (size_t i = 0; i < h->n; i++)
                if (ctl_strcaseeq(h->v[i].name, name))
                        k++;
        return k;
}

void ctl_hdrs_free(struct ctl_hdrs *h) {
        while (h->text) {
                struct ctl_hdrs_text *t = h->text;
                h->text = t->prev;
                free(t);
        }
        free(h->v);
        *h = (struct ctl_hdrs){0};
}

void ctl_resp_done(struct ctl_resp *r) {
        if (!r->body_static)
                free(r->body);
        if (r->stream.close)
                r->stream.close(r->stream.ctx);
        ctl_hdrs_free(&r->hdrs);
        *r = (struct ctl_resp){0};
}

void ctl_resp_take(struct ctl_resp *r, int status, const char *ctype, char *s) {
        if (!r->body_static)
                free(r->body);
        r->status = status;
        r->ctype = ctype;
        r->body = s;
        r->len = s ? strlen(s) : 0;
        r->body_static = false;
}

int ctl_resp_set(struct ctl_resp *r, int status, const char *ctype, const char *s) {
        char *d = strdup(s);
        if (!d)
                return -ENOMEM;
        ctl_resp_take(r, status, ctype, d);
        return 0;
}

int ctl_resp_error(struct ctl_resp *r, int status, const char *msg) {
        _cleanup_buf_ struct buf b = BUF_INIT(64 * 1024);
        int k = buf_puts(&b, "{\"error\":");
        if (k >= 0)
                k = ctl_json_string(&b, msg);
        if (k >= 0)
                k = buf_puts(&b, "}\n");
        if (k < 0)
                return k;
        ctl_resp_take(r, status, "application/json", buf_steal(&b));
        return 0;
}

bool ctl_csp_sandboxes(const char *csp) {
        if (!csp || strncasecmp(csp, "sandbox", 7) != 0)
                return false;
        const char *p = csp + 7;
        while (*p == ' ')
                p++;
        return *p == 0 || *p == ';'; /* "sandbox" with no allow-* token */
}

#define ADMIN_FRAME_SRC "; frame-src http://organism.localhost"

/* ADMIN_FRAME_SRC's origin, then nothing or ":" and a port (1 to 5 digits). */
static bool admin_frame_src_ok(const char *s) {
        if (!startswith(s, ADMIN_FRAME_SRC))
                return false;
        s += strlen(ADMIN_FRAME_SRC);
        if (*s == 0)
                return true;
        size_t digits = strspn(s + 1, "0123456789");
        return s[0] == ':' && digits >= 1 && digits <= 5 && s[1 + digits] == 0;
}

int ctl_csp_with_admin_frames(const char *admin_origin, char **ret) {
        char *csp = NULL;
        if (!admin_origin || xasprintf(&csp, "%s; frame-src %s", CTL_CSP, admin_origin) < 0)
                return admin_origin ? -ENOMEM : -EINVAL;
        if (!ctl_csp_frames_admin(csp)) {
                free(csp);
                return -EINVAL;
        }
        *ret = csp;
        return 0;
}

bool ctl_csp_frames_admin(const char *csp) {
        return csp && startswith(csp, CTL_CSP) && admin_frame_src_ok(csp + strlen(CTL_CSP));
}

int ctl_csp_framed_by(const char *framer, char **ret) {
        static const char none[] = "frame-ancestors 'none'";
        const char *at = strstr(CTL_CSP, none);
        if (!at || !framer || !startswith(framer, "http://") || strlen(framer) > 300 ||
            strpbrk(framer + 7, " ;,'\"/\\*") || !http_field_value_ok(framer))
                return -EINVAL;
        char *csp = NULL;
        if (xasprintf(&csp, "%.*sframe-ancestors %s%s", (int)(at - CTL_CSP), CTL_CSP, framer, at + strlen(none)) < 0)
                return -ENOMEM;
        *ret = csp;
        return 0;
}

int ctl_add_security_headers(struct ctl_hdrs *h) {
        static const char *const hs[][2] = {
                {"Content-Security-Policy", CTL_CSP},
                {"Cross-Origin-Opener-Policy", "same-origin"},
                {"X-Content-Type-Options", "nosniff"},
                {"Referrer-Policy", "no-referrer"},
                {"Cache-Control", "no-store"},
                {"X-Frame-Options", "DENY"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(hs); i++) {
                /* A handler may choose its own Referrer-Policy (the sign-in
                 * form's page: same-origin, so its POST carries a real Origin)
                 * and Cache-Control, and a CSP that sandboxes what it serves
                 * (the logo) or that is ours plus the admin screens' frame-src
                 * (the page); the rest is always ours. */
                const char *own = ctl_hdrs_get(h, hs[i][0]);
                if (own && (streq(hs[i][0], "Referrer-Policy") || streq(hs[i][0], "Cache-Control") ||
                            (streq(hs[i][0], "Content-Security-Policy") &&
                             (ctl_csp_sandboxes(own) || ctl_csp_frames_admin(own)) &&
                             ctl_hdrs_count(h, hs[i][0]) == 1)))
                        continue;
                int r = ctl_hdrs_add(h, hs[i][0], hs[i][1]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int ctl_html_escape(struct buf *b, const char *s) {
        for (; s && *s; s++) {
                const char *e = NULL;
                switch (*s) {
                case '&': e = "&amp;"; break;
                case '<': e = "&lt;"; break;
                case '>': e = "&gt;"; break;
                case '"': e = "&quot;"; break;
                case '\'': e = "&#39;"; break;
                }
                int r = e ? buf_puts(b, e) : buf_append(b, s, 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

int ctl_json_string_n(struct buf *b, const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *)s;
        int r = buf_puts(b, "\"");
        for (size_t i = 0; r >= 0 && i < n;) {
                unsigned char c = p[i];
                if (c == '"' || c == '\\') {
                        char e[2] = {'\\', (char)c};
                        r = buf_append(b, e, 2);
                        i++;
                } else if (c < 0x20 || c == 0x7f) {
                        switch (c) {
                        case '\n': r = buf_puts(b, "\\n"); break;
                        case '\r': r = buf_puts(b, "\\r"); break;
                        case '\t': r = buf_puts(b, "\\t"); break;
                        default: r = buf_printf(b, "\\u%04x", c); break;
                        }
                        i++;
                } else {
                        size_t k = utf8_seq(p + i, n - i);
                        if (k == 0) {
                                r = buf_puts(b, "\\ufffd");
                                i++;
                        } else {
                                /* Keep U+2028/2029 escaped for script contexts. */
                                if (k == 3 && p[i] == 0xe2 && p[i + 1] == 0x80 &&
                                    (p[i + 2] == 0xa8 || p[i + 2] == 0xa9))
                                        r = buf_printf(b, "\\u%04x", p[i + 2] == 0xa8 ? 0x2028 : 0x2029);
                                else
                                        r = buf_append(b, p + i, k);
                                i += k;
                        }
                }
        }
        if (r >= 0)
                r = buf_puts(b, "\"");
        return r;
}

int ctl_json_string(struct buf *b, const char *s) {
        return ctl_json_string_n(b, s ? s : "", s ? strlen(s) : 0);
}

int ctl_auth_bearer(const char *value, const char **ret_token, size_t *ret_len) {
        if (!value || strncasecmp(value, "Bearer", 6) != 0 || (value[6] && value[6] != ' ' && value[6] != '\t'))
                return -ENOENT;
        const char *t = value + 6;
        t += strspn(t, " \t");
        size_t n = strlen(t);
        while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
                n--;
        if (n == 0)
                return -EINVAL;
        *ret_token = t;
        *ret_len = n;
        return 0;
}

bool ctl_token_eq(const char *s, size_t n, const char *want) {
        size_t wl = strlen(want);
        unsigned char d = n != wl;
        for (size_t i = 0; i < wl; i++)
                d |= (unsigned char)(want[i] ^ (i < n ? s[i] : 0));
        return d == 0;
}
