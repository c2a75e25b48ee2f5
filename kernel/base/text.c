/* text.c — see text.h. */
#include "base/text.h"
#include "base/base.h"
#include "base/buf.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

size_t utf8_seq(const unsigned char *s, size_t n) {
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t len;
        unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
        if (c >= 0xC2 && c <= 0xDF)
                len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
                len = 3;
                if (c == 0xE0)
                        lo = 0xA0; /* overlong */
                else if (c == 0xED)
                        hi = 0x9F; /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
                len = 4;
                if (c == 0xF0)
                        lo = 0x90; /* overlong */
                else if (c == 0xF4)
                        hi = 0x8F; /* above U+10FFFF */
        } else
                return 0; /* continuation bytes, C0, C1, F5.. */
        if (n < len || s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < len; i++)
                if ((s[i] & 0xC0) != 0x80)
                        return 0;
        return len;
}

size_t utf8_cut(const char *s, size_t max) {
        size_t n = strnlen(s, max + 1);
        if (n <= max)
                return n;
        n = max;
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
                n--;
        return n;
}

int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

bool http_token_ok(const char *s) {
        if (!s || !*s)
                return false;
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s))
                        return false;
        return true;
}

bool http_field_value_ok(const char *s) {
        for (; *s; s++)
                if (((unsigned char)*s < ' ' && *s != '\t') || *s == 127)
                        return false;
        return true;
}

int percent_decode(const char *s, size_t len, bool plus_is_space, char **ret) {
        char *out = malloc(len + 1), *o = out;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                int c = (unsigned char)s[i];
                if (c == '%') {
                        int hi = i + 1 < len ? hex_digit(s[i + 1]) : -1;
                        int lo = i + 2 < len ? hex_digit(s[i + 2]) : -1;
                        c = hi < 0 || lo < 0 ? 0 : hi * 16 + lo;
                        i += 2;
                } else if (c == '+' && plus_is_space)
                        c = ' ';
                if (c == 0) {
                        free(out);
                        return -EINVAL;
                }
                *o++ = (char)c;
        }
        *o = 0;
        *ret = out;
        return 0;
}

char *text_utf8_sanitize(const char *s) {
        size_t len = strlen(s);
        struct buf b = BUF_INIT(SIZE_MAX);
        const unsigned char *p = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_seq(p + i, len - i);
                int r = n ? buf_append(&b, p + i, n) : buf_append(&b, "\xef\xbf\xbd", 3);
                if (r < 0) {
                        buf_free(&b);
                        return NULL;
                }
                i += n ? n : 1;
        }
        return buf_steal(&b);
}

char *text_redact(const char *s, const char *secret) {
        if (strempty(secret))
                return strdup(s);
        struct buf b = BUF_INIT(SIZE_MAX);
        size_t sl = strlen(secret);
        for (const char *p = s;;) {
                const char *hit = strstr(p, secret);
                int r = buf_append(&b, p, hit ? (size_t)(hit - p) : strlen(p));
                if (r >= 0 && hit)
                        r = buf_puts(&b, "[redacted]");
                if (r < 0) {
                        buf_free(&b);
                        return NULL;
                }
                if (!hit)
                        break;
                p = hit + sl;
        }
        return buf_steal(&b);
}
