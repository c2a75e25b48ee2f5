#include "ctl/cookie.h"
#include "ctl/ctl.h"
#include "base/buf.h"
#include "base/crypto.h"

void ctl_api_token(const char *session_key, const char *cookie, char out[65]) {
        crypto_hmac_sha256_hex(session_key, strlen(session_key), cookie, strlen(cookie), out);
}

void ctl_cookie_name(const char *session_key, char out[32]) {
        static const char label[] = "seed session cookie name";
        char mac[SHA256_HEX_LEN + 1];
        crypto_hmac_sha256_hex(session_key, strlen(session_key), label, strlen(label), mac);
        snprintf(out, 32, "seed_%.8s", mac);
}

int ctl_cookie_header(const char *name, const char *value, long max_age, bool strict, char **ret) {
        return xasprintf(ret, "%s=%s; Path=/_seed; HttpOnly; SameSite=%s; Max-Age=%ld", name, value,
                         strict ? "Strict" : "Lax", max_age);
}

bool ctl_is_hex(const char *s, size_t n) {
        if (!s || strlen(s) != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* Iterates "a=b; c=d" pairs: fn gets the trimmed pair; stops when it returns < 0. */
static int cookie_each(const char *header, int (*fn)(const char *pair, size_t n, void *u),
                       void *u) {
        for (const char *p = header; p && *p;) {
                while (*p == ' ' || *p == '\t')
                        p++;
                size_t n = strcspn(p, ";");
                size_t m = n;
                while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t'))
                        m--;
                if (m > 0) {
                        int r = fn(p, m, u);
                        if (r < 0)
                                return r;
                }
                p += n;
                if (*p == ';')
                        p++;
        }
        return 0;
}

static bool pair_is(const char *pair, size_t n, const char *name) {
        size_t nl = strlen(name);
        return n > nl && pair[nl] == '=' && strncmp(pair, name, nl) == 0;
}

struct values_ctx {
        const char *name;
        size_t max;
        char **v;
        size_t n;
};

static int values_one(const char *pair, size_t n, void *u) {
        struct values_ctx *c = u;
        if (c->n >= c->max || !pair_is(pair, n, c->name))
                return 0;
        size_t nl = strlen(c->name);
        char value[2 * CTL_COOKIE_VALUE_BYTES + 1];
        if (n - nl - 1 != sizeof value - 1)
                return 0;
        memcpy(value, pair + nl + 1, sizeof value - 1);
        value[sizeof value - 1] = 0;
        if (!ctl_is_hex(value, sizeof value - 1))
                return 0;
        int r = strv_push(&c->v, value);
        secure_zero(value, sizeof value);
        if (r < 0)
                return r;
        c->n++;
        return 0;
}

/* Runs fn over the header's pairs into the strv at *v (made empty when
 * nothing is collected); on failure *v is freed. */
static int cookie_collect(const char *header, int (*fn)(const char *pair, size_t n, void *u), void *u,
                          char ***v, char ***ret) {
        int r = cookie_each(header, fn, u);
        if (r >= 0 && !*v && !(*v = calloc(1, sizeof(char *))))
                r = -ENOMEM;
        if (r < 0) {
                strv_free(*v);
                return r;
        }
        *ret = *v;
        return 0;
}

int ctl_cookie_values(const char *header, const char *name, size_t max, char ***ret) {
        struct values_ctx c = {.name = name, .max = max};
        return cookie_collect(header, values_one, &c, &c.v, ret);
}

struct strip_ctx {
        const char *name;
        struct buf out;
};

static int strip_one(const char *pair, size_t n, void *u) {
        struct strip_ctx *c = u;
        if (pair_is(pair, n, c->name) || (n == strlen(c->name) && strncmp(pair, c->name, n) == 0))
                return 0;
        int r = 0;
        if (c->out.len > 0)
                r = buf_puts(&c->out, "; ");
        if (r >= 0)
                r = buf_append(&c->out, pair, n);
        return r;
}

int ctl_cookie_strip(const char *header, const char *name, char **ret) {
        struct strip_ctx c = {.name = name, .out = BUF_INIT(1 << 20)};
        int r = cookie_each(header, strip_one, &c);
        if (r < 0) {
                buf_free(&c.out);
                return r;
        }
        *ret = c.out.len > 0 ? buf_steal(&c.out) : NULL;
        buf_free(&c.out);
        return 0;
}

/* RFC 6265's cookie-name: an RFC 7230 token. Only such names are echoed
 * back in a Set-Cookie. */
static bool cookie_name_ok(const char *s, size_t n) {
        if (n == 0 || n > CTL_FOREIGN_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (c <= 0x20 || c >= 0x7f || strchr("()<>@,;:\\\"/[]?={}", c))
                        return false;
        }
        return true;
}

bool ctl_cookie_is_ours(const char *name, size_t n, const char *ours) {
        static const char *const suffixes[] = {"", "_preview", "_badge"};
        size_t ol = strlen(ours);
        if (n < ol || strncmp(name, ours, ol) != 0)
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++)
                if (n - ol == strlen(suffixes[i]) && strncmp(name + ol, suffixes[i], n - ol) == 0)
                        return true;
        return false;
}

struct foreign_ctx {
        const char *ours;
        size_t max;
        char **v;
        size_t n;
};

static int foreign_one(const char *pair, size_t n, void *u) {
        struct foreign_ctx *c = u;
        const char *eq = memchr(pair, '=', n);
        size_t nl = eq ? (size_t)(eq - pair) : 0; /* no '=': a nameless cookie, left alone */
        while (nl > 0 && (pair[nl - 1] == ' ' || pair[nl - 1] == '\t'))
                nl--;
        if (c->n >= c->max || !cookie_name_ok(pair, nl) || ctl_cookie_is_ours(pair, nl, c->ours))
                return 0;
        for (size_t i = 0; i < c->n; i++)
                if (strlen(c->v[i]) == nl && strncmp(c->v[i], pair, nl) == 0)
                        return 0;
        _cleanup_free_ char *name = strndup(pair, nl);
        if (!name || strv_push(&c->v, name) < 0)
                return -ENOMEM;
        c->n++;
        return 0;
}

int ctl_cookie_foreign(const char *header, const char *ours, size_t max, char ***ret) {
        struct foreign_ctx c = {.ours = ours, .max = max};
        return cookie_collect(header, foreign_one, &c, &c.v, ret);
}

static bool is_wsp(char c) {
        return c == ' ' || c == '\t';
}

/* [*s, *s + *n) without SP and HTAB at either end. */
static void trim_wsp(const char **s, size_t *n) {
        while (*n > 0 && is_wsp(**s))
                (*s)++, (*n)--;
        while (*n > 0 && is_wsp((*s)[*n - 1]))
                (*n)--;
}

void ctl_set_cookie_name(const char *value, const char **ret_name, size_t *ret_len) {
        size_t pair = strcspn(value, ";");
        const char *eq = memchr(value, '=', pair);
        const char *name = value;
        size_t n = eq ? (size_t)(eq - value) : 0;
        trim_wsp(&name, &n);
        *ret_name = name;
        *ret_len = n;
}

bool ctl_set_cookie_sets(const char *value, const char *name) {
        const char *n;
        size_t len;
        ctl_set_cookie_name(value, &n, &len);
        if (len == 0) { /* sent back as its value: read by what precedes its first '=' */
                size_t pair = strcspn(value, ";");
                const char *eq = memchr(value, '=', pair);
                const char *v = eq ? eq + 1 : value;
                size_t rest = pair - (size_t)(v - value);
                const char *veq = memchr(v, '=', rest);
                n = v;
                len = veq ? (size_t)(veq - v) : rest;
                trim_wsp(&n, &len);
        }
        return len == strlen(name) && memcmp(n, name, len) == 0;
}
