/* fuzz-ctl-http.c — the control plane's parsers of outside input (kernel/ctl).
 *
 * The first byte chooses what the rest is fed to:
 *   0  Host allowlist: "host\nallowed\nallowed…"
 *   1  Cookie header: values and stripping of the Seed's cookie
 *   2  the organism's response head: parse, framing, response-header policy
 *   3  chunked decoder, input and output split at fuzzer-chosen points
 *   4  request headers ("Name: value" lines) filtered into the forwarded head
 *   5  request path / query / target classification and percent-decoding
 *   6  JSON and HTML escaping of arbitrary bytes
 * Besides memory errors each mode checks the security-relevant promises of the
 * function (abort() on a violation): e.g. the Seed's cookie never survives
 * stripping, a forwarded head carries no bare CR/LF, and the chunked decoder's
 * result does not depend on how its input was split. */
#include "base/buf.h"
#include "base/text.h"
#include "ctl/cookie.h"
#include "ctl/guard.h"
#include "ctl/http.h"
#include "ctl/proxy-policy.h"

#include <ctype.h>
#include <stdint.h>
#include <strings.h>

#define COOKIE_NAME "seed_0123abcd"
#define CLI_TOKEN "cli-token-0123456789abcdef0123456789abcdef"

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

/* A NUL-terminated copy (embedded NULs end the string, as in a C API). */
static char *cstr(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        check(s);
        memcpy(s, data, size);
        s[size] = 0;
        return s;
}

/* Splits a copy of s at '\n' into a NULL-terminated vector of at most max
 * entries (borrowing into *ret_copy). */
static char **split_lines(const char *s, size_t max, char **ret_copy) {
        char *copy = strdup(s);
        check(copy);
        char **v = calloc(max + 1, sizeof(char *));
        check(v);
        size_t n = 0;
        for (char *p = copy; p && n < max;) {
                char *nl = strchr(p, '\n');
                if (nl)
                        *nl++ = 0;
                v[n++] = p;
                p = nl;
        }
        *ret_copy = copy;
        return v;
}

/* ---- 0: Host ------------------------------------------------------------ */

static bool host_chars_ok(const char *h) {
        for (; *h; h++)
                if (!(((unsigned char)*h < 0x80 && (isalnum((unsigned char)*h))) ||
                      strchr("-.:[]", *h)))
                        return false;
        return true;
}

static void fuzz_host(const char *s) {
        char *copy = NULL;
        char **v = split_lines(s, 8, &copy);
        const char *host = v[0] ? v[0] : "";
        char **extra = v[0] ? v + 1 : v;
        bool builtin = ctl_host_allowed(host, NULL);
        bool allowed = ctl_host_allowed(host, extra);
        bool organism = ctl_host_is_organism(host);
        /* Extra names only ever add. */
        check(!builtin || allowed);
        /* What passes is a plain host[:port]: nothing to smuggle. */
        if (allowed)
                check(*host && strlen(host) <= 300 && host_chars_ok(host));
        /* organism.localhost and its subdomains are *.localhost: allowed. */
        if (organism)
                check(builtin);
        /* Without extra names, only loopback names pass. */
        if (builtin) {
                size_t n = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":");
                check(n <= strlen(host));
                bool loop = (n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
                            (n == 9 && strncmp(host, "127.0.0.1", 9) == 0) ||
                            (n == 5 && strncmp(host, "[::1]", 5) == 0) ||
                            (n > 10 && strncasecmp(host + n - 10, ".localhost", 10) == 0);
                check(loop);
        }
        free(v);
        free(copy);
}

/* ---- 1: Cookie ---------------------------------------------------------- */

static void fuzz_cookie(const char *header, uint8_t sel) {
        const char *name = (sel & 1) ? COOKIE_NAME : "a";
        size_t max = sel >> 4;
        char **values = NULL;
        int r = ctl_cookie_values(header, name, max, &values);
        check(r == 0 || r == -ENOMEM);
        if (r == 0) {
                check(values);
                check(strv_length(values) <= max);
                for (char **v = values; *v; v++) {
                        check(ctl_is_hex(*v, 2 * CTL_COOKIE_VALUE_BYTES));
                        check(strstr(header, *v));
                }
                strv_free(values);
        }

        char *kept = NULL;
        r = ctl_cookie_strip(header, name, &kept);
        check(r == 0 || r == -ENOMEM || r == -E2BIG);
        if (r < 0)
                return;
        if (kept) {
                check(*kept);
                check(strlen(kept) <= 2 * strlen(header));
                /* Nothing called name is left, and stripping again changes nothing. */
                char **left = NULL;
                check(ctl_cookie_values(kept, name, SIZE_MAX, &left) == 0);
                check(!left[0]);
                strv_free(left);
                char *again = NULL;
                check(ctl_cookie_strip(kept, name, &again) == 0);
                check(again && streq(again, kept));
                free(again);
                /* No pair is exactly name=… or name. */
                for (const char *p = kept; p;) {
                        size_t nl = strlen(name);
                        check(!(strncmp(p, name, nl) == 0 && (p[nl] == '=' || p[nl] == ';' || !p[nl])));
                        p = strstr(p, "; ");
                        if (p)
                                p += 2;
                }
                free(kept);
        }
}

/* ---- 2: response head --------------------------------------------------- */

static bool clean_field(const char *s) {
        for (; *s; s++)
                if (*s == '\r' || *s == '\n' || *s == 0x7f)
                        return false;
        return true;
}

/* [*s, *e) without SP and HTAB at either end. */
static void trim_sp(const char **s, const char **e) {
        while (*s < *e && (**s == ' ' || **s == '\t'))
                (*s)++;
        while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t'))
                (*e)--;
}

/* A reference reading of a Set-Cookie value, written apart from the one in
 * cookie.c: the browser's name and value (RFC 6265bis §5.6), then the name
 * the Cookie header it sends back is read as (a cookie with an empty name
 * goes back as its bare value). */
static bool sent_back_as(const char *sc, const char *name) {
        const char *pair_end = sc + strcspn(sc, ";");
        const char *eq = memchr(sc, '=', (size_t)(pair_end - sc));
        const char *n = sc, *ne = eq ? eq : sc, *v = eq ? eq + 1 : sc, *ve = pair_end;
        trim_sp(&n, &ne);
        trim_sp(&v, &ve);
        if (n == ne) { /* "value" in the Cookie header: its name is what precedes '=' */
                n = v;
                const char *veq = memchr(v, '=', (size_t)(ve - v));
                ne = veq ? veq : ve;
                trim_sp(&n, &ne);
        }
        return (size_t)(ne - n) == strlen(name) && memcmp(n, name, strlen(name)) == 0;
}

static void fuzz_response_head(const uint8_t *data, size_t size, uint8_t sel) {
        const char *head = (const char *)data;
        struct ctl_upstream u = {0};
        int r = ctl_proxy_parse_head(head, size, sel & 1, &u);
        size_t end = ctl_proxy_head_end(head, size);
        check(end <= size);
        if (r < 0) {
                check(r == -EBADMSG || r == -ENOMEM);
                check(u.hdrs.n == 0 && !u.hdrs.v);
                return;
        }
        /* A valid head ends at its first blank line. */
        check(end == size);
        check(u.status >= 100 && u.status <= 599);
        check(u.hdrs.n <= CTL_MAX_HEADERS);
        check(u.body == CTL_BODY_NONE || u.body == CTL_BODY_LENGTH || u.body == CTL_BODY_CHUNKED ||
              u.body == CTL_BODY_CLOSE);
        if (sel & 1)
                check(u.body == CTL_BODY_NONE);
        if (u.body == CTL_BODY_LENGTH)
                check(u.length < 1000000000000000000ULL);
        for (size_t i = 0; i < u.hdrs.n; i++) {
                check(u.hdrs.v[i].name[0] && clean_field(u.hdrs.v[i].name));
                check(!strchr(u.hdrs.v[i].name, ':') && !strchr(u.hdrs.v[i].name, ' '));
                check(clean_field(u.hdrs.v[i].value));
        }

        struct ctl_hdrs out = {0};
        bool preview = size & 1;
        r = ctl_proxy_response_headers(&u.hdrs, COOKIE_NAME, NULL, preview, &out);
        check(r == 0 || r == -E2BIG || r == -ENOMEM);
        if (r == 0) {
                check(ctl_hdrs_count(&out, "Vary") == 1);
                check(!preview || (ctl_hdrs_count(&out, "Cache-Control") == 1 &&
                                   streq(ctl_hdrs_get(&out, "Cache-Control"), "no-store")));
                check(ctl_hdrs_count(&out, "Cross-Origin-Opener-Policy") == 1);
                check(streq(ctl_hdrs_get(&out, "Cross-Origin-Opener-Policy"), "unsafe-none"));
                check(ctl_hdrs_count(&out, "Service-Worker-Allowed") == 0);
                check(ctl_hdrs_count(&out, "Clear-Site-Data") == 0);
                check(ctl_hdrs_count(&out, "Content-Length") == 0);
                check(ctl_hdrs_count(&out, "Transfer-Encoding") == 0);
                check(ctl_hdrs_count(&out, "Connection") == 0);
                for (size_t i = 0; i < out.n; i++) {
                        if (strcasecmp(out.v[i].name, "set-cookie") != 0)
                                continue;
                        check(!sent_back_as(out.v[i].value, COOKIE_NAME));
                }
        }
        ctl_hdrs_free(&out);
        ctl_upstream_done(&u);
        check(u.hdrs.n == 0 && !u.hdrs.v);
}

/* ---- 3: chunked --------------------------------------------------------- */

struct chunked_run {
        int r;            /* 1 done, 0 needs more, < 0 error */
        size_t consumed;  /* input bytes used up to done or the end */
        struct buf body;
};

/* Feeds in[0..len) in pieces of the given sizes (cycled), draining into an
 * output window of outcap bytes each call. */
static void chunked_run(const char *in, size_t len, const uint8_t *pieces, size_t npieces,
                        size_t outcap, struct chunked_run *ret) {
        struct ctl_chunked c = {0};
        char out[4096];
        size_t pos = 0, k = 0;
        *ret = (struct chunked_run){.body = BUF_INIT(1 << 20)};
        check(outcap >= 1 && outcap <= sizeof out);
        while (pos < len) {
                size_t piece = npieces ? (size_t)pieces[k++ % npieces] + 1 : len - pos;
                if (piece > len - pos)
                        piece = len - pos;
                size_t off = 0;
                for (;;) {
                        size_t used = 0, made = 0;
                        int r = ctl_chunked_decode(&c, in + pos + off, piece - off, out, outcap,
                                                   &used, &made);
                        if (r < 0) {
                                ret->r = r;
                                return;
                        }
                        check(used <= piece - off && made <= outcap && made <= used);
                        check(buf_append(&ret->body, out, made) == 0);
                        off += used;
                        if (r == 1) {
                                check(c.done);
                                ret->r = 1;
                                ret->consumed = pos + off;
                                return;
                        }
                        check(!c.done);
                        if (off == piece)
                                break;
                        /* Stopping early is only allowed with a full output window. */
                        check(made == outcap);
                }
                pos += piece;
        }
        ret->r = 0;
        ret->consumed = len;
}

static void fuzz_chunked(const uint8_t *data, size_t size) {
        if (size < 2)
                return;
        size_t npieces = data[0] % 9, outcap = 1 + data[1] % 32;
        data += 2;
        size -= 2;
        if (npieces > size)
                npieces = size;
        const uint8_t *pieces = data;
        data += npieces;
        size -= npieces;

        struct chunked_run whole, split;
        chunked_run((const char *)data, size, NULL, 0, 4096, &whole);
        chunked_run((const char *)data, size, pieces, npieces, outcap, &split);
        /* However the stream is cut, the outcome is the same. */
        check((whole.r < 0) == (split.r < 0));
        if (whole.r >= 0) {
                check(whole.r == split.r);
                check(whole.consumed == split.consumed);
                check(whole.body.len == split.body.len);
                check(whole.body.len == 0 || memcmp(whole.body.data, split.body.data, whole.body.len) == 0);
                check(whole.body.len <= whole.consumed);
        }
        buf_free(&whole.body);
        buf_free(&split.body);
}

/* ---- 4: request headers ------------------------------------------------- */

/* Whether [v, end) is "Bearer <token>": the scheme in any case, then SP or
 * HTAB, the token, and nothing after it but SP and HTAB. */
static bool bearer_of(const char *v, const char *end, const char *token) {
        if (end - v < 7 || strncasecmp(v, "Bearer", 6) != 0 || (v[6] != ' ' && v[6] != '\t'))
                return false;
        v += 6;
        trim_sp(&v, &end);
        return (size_t)(end - v) == strlen(token) && memcmp(v, token, strlen(token)) == 0;
}

static void fuzz_request_headers(const char *s, uint8_t sel) {
        char *copy = NULL;
        char **lines = split_lines(s, CTL_MAX_HEADERS + 8, &copy);
        struct ctl_hdrs in = {0};
        for (char **l = lines; *l; l++) {
                char *colon = strchr(*l, ':');
                if (!colon)
                        continue;
                *colon = 0;
                const char *v = colon + 1;
                v += strspn(v, " ");
                if (ctl_hdrs_add(&in, *l, v) < 0)
                        break;
                bool dropped = ctl_proxy_drop_request_header(*l, v, ctl_hdrs_get(&in, "Connection"),
                                                             CLI_TOKEN);
                /* Hop-by-hop and the Seed's own headers never pass. */
                if (strcasecmp(*l, "connection") == 0 || strcasecmp(*l, "host") == 0 ||
                    strcasecmp(*l, "x-seed-token") == 0 || strcasecmp(*l, "transfer-encoding") == 0 ||
                    strncasecmp(*l, "proxy-", 6) == 0 || strncasecmp(*l, "x-forwarded-", 12) == 0)
                        check(dropped);
        }
        struct ctl_proxy_req req = {
                .method = "GET",
                .target = "/x",
                .host = "localhost:8080",
                .client_ip = "127.0.0.1",
                .cookie_name = COOKIE_NAME,
                .cli_token = (sel & 1) ? CLI_TOKEN : NULL,
                .body = (enum ctl_body)(sel % 3),
                .body_len = sel,
        };
        struct buf out = BUF_INIT(4u << 20);
        int r = ctl_proxy_request_head(&in, &req, &out);
        check(r == 0 || r == -E2BIG || r == -ENOMEM);
        if (r == 0) {
                check(out.len >= 4 && memcmp(out.data + out.len - 4, "\r\n\r\n", 4) == 0);
                check(!memchr(out.data, 0, out.len));
                /* Every line is "X: Y" ending in CRLF: no bare CR or LF to
                 * split the head and smuggle a header or a request. */
                size_t hosts = 0;
                const char *p = out.data, *end = out.data + out.len - 2;
                bool first = true;
                while (p < end) {
                        const char *crlf = strstr(p, "\r\n");
                        check(crlf && crlf < end + 1);
                        size_t n = (size_t)(crlf - p);
                        check(!memchr(p, '\r', n) && !memchr(p, '\n', n));
                        if (!first) {
                                const char *colon = memchr(p, ':', n);
                                check(colon && colon > p);
                                size_t nl = (size_t)(colon - p);
                                if (nl == 4 && strncasecmp(p, "host", 4) == 0)
                                        hosts++;
                                check(!(nl == 12 && strncasecmp(p, "x-seed-token", 12) == 0));
                                check(!(nl == 17 && strncasecmp(p, "transfer-encoding", 17) == 0 &&
                                        req.body != CTL_BODY_CHUNKED));
                                if (nl == 6 && strncasecmp(p, "cookie", 6) == 0) {
                                        char *v = strndup(colon + 2, n - nl - 2), **left = NULL;
                                        check(v);
                                        check(ctl_cookie_values(v, COOKIE_NAME, SIZE_MAX, &left) == 0);
                                        check(!left[0]);
                                        strv_free(left);
                                        free(v);
                                }
                                if (req.cli_token && nl == 13 && strncasecmp(p, "authorization", 13) == 0)
                                        check(!bearer_of(colon + 2, crlf, CLI_TOKEN));
                                /* Names are HTTP tokens: no spaces or controls. */
                                for (const char *c = p; c < colon; c++)
                                        check((unsigned char)*c > 0x20 && (unsigned char)*c < 0x7f &&
                                              !strchr("\"(),/:;<=>?@[\\]{}", *c));
                        }
                        first = false;
                        p = crlf + 2;
                }
                check(hosts == 1);
        }
        buf_free(&out);
        ctl_hdrs_free(&in);
        free(lines);
        free(copy);
}

/* ---- 5: path and query -------------------------------------------------- */

static void fuzz_path_query(const char *s, uint8_t sel) {
        const char *q = strchr(s, '?');
        char *path = strndup(s, q ? (size_t)(q - s) : strlen(s));
        check(path);
        int kind = ctl_path_classify(path);
        check(kind == CTL_PATH_SEED || kind == CTL_PATH_ORGANISM || kind == -EINVAL ||
              kind == -ENOMEM);
        char *decoded = NULL;
        int r = percent_decode(path, strlen(path), false, &decoded);
        if (kind >= 0) {
                check(r == 0);
                check(strlen(decoded) <= strlen(path));
                bool seed_raw = strncmp(path, "/_seed", 6) == 0 && (!path[6] || path[6] == '/');
                bool seed_dec = strncmp(decoded, "/_seed", 6) == 0 && (!decoded[6] || decoded[6] == '/');
                /* What the organism gets never decodes to /_seed, and /_seed
                 * is never reached by an encoded name. */
                check(seed_raw == seed_dec);
                check((kind == CTL_PATH_SEED) == seed_raw);
                check(!strstr(decoded, "/../") && !strstr(decoded, "/./"));
                check(!endswith(decoded, "/..") && !endswith(decoded, "/."));
        }
        if (r == 0)
                free(decoded);

        if (ctl_target_is_clean(s))
                for (const char *p = s; *p; p++)
                        check((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f);
        if (q) {
                const char *keys[] = {"token", "next", "a", ""};
                char *v = NULL;
                r = ctl_query_get(q + 1, keys[sel % 4], &v);
                check(r == 0 || r == -ENOENT || r == -EINVAL || r == -ENOMEM);
                if (r == 0) {
                        check(v && strlen(v) <= strlen(q));
                        free(v);
                }
                (void)ctl_query_has_token(q + 1);
        }
        (void)ctl_content_type_is_json(s);
        (void)ctl_method_changes_state(s);
        (void)ctl_fetch_nav(s, (sel & 1) ? "navigate" : NULL, s);
        (void)ctl_check_same_origin(s, s, "localhost", sel & 2);
        free(path);
}

/* ---- 6: escaping -------------------------------------------------------- */

static bool valid_utf8(const unsigned char *p, size_t n) {
        for (size_t i = 0; i < n;) {
                unsigned char c = p[i];
                size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
                             (c & 0xf8) == 0xf0 ? 4 : 0;
                if (!len || i + len > n)
                        return false;
                for (size_t k = 1; k < len; k++)
                        if ((p[i + k] & 0xc0) != 0x80)
                                return false;
                i += len;
        }
        return true;
}

static void fuzz_escape(const uint8_t *data, size_t size) {
        struct buf j = BUF_INIT(16u << 20);
        check(ctl_json_string_n(&j, (const char *)data, size) == 0);
        check(j.data && j.len >= 2 && j.data[0] == '"' && j.data[j.len - 1] == '"');
        check(valid_utf8((const unsigned char *)j.data, j.len));
        for (size_t i = 1; i + 1 < j.len; i++) {
                unsigned char c = (unsigned char)j.data[i];
                check(c >= 0x20 && c != 0x7f);
                if (c == '\\')
                        i++; /* the escaped character */
                else
                        check(c != '"');
        }
        check(!memmem(j.data, j.len, "\xe2\x80\xa8", 3) && !memmem(j.data, j.len, "\xe2\x80\xa9", 3));
        buf_free(&j);

        char *s = cstr(data, size);
        struct buf h = BUF_INIT(16u << 20);
        check(ctl_html_escape(&h, s) == 0);
        if (h.data)
                check(!strpbrk(h.data, "<>\"'"));
        buf_free(&h);
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        uint8_t mode = data[0] % 7, sel = data[1];
        data += 2;
        size -= 2;
        char *s = cstr(data, size);
        switch (mode) {
        case 0:
                fuzz_host(s);
                break;
        case 1:
                fuzz_cookie(s, sel);
                break;
        case 2:
                fuzz_response_head(data, size, sel);
                break;
        case 3:
                fuzz_chunked(data, size);
                break;
        case 4:
                fuzz_request_headers(s, sel);
                break;
        case 5:
                fuzz_path_query(s, sel);
                break;
        case 6:
                fuzz_escape(data, size);
                break;
        }
        free(s);
        return 0;
}
