/* text.h — the small text facts several modules check: UTF-8 sequences,
 * hex digits, HTTP tokens and field values; UTF-8 repair and redaction. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Length (1..4) of the valid UTF-8 sequence at s (n >= 1 bytes available),
 * or 0 if there is none. Strict, as jansson: no overlong forms, no
 * surrogates, nothing above U+10FFFF, no C0/C1 lead bytes. NUL is a valid
 * one-byte sequence: callers that refuse it check it themselves. */
size_t utf8_seq(const unsigned char *s, size_t n);
/* The length of s cut to at most max bytes without splitting a UTF-8
 * character: strlen(s) when it fits, else max less the continuation bytes
 * a cut at max would strand. */
size_t utf8_cut(const char *s, size_t max);

/* Copy of s with every byte of invalid UTF-8 replaced by U+FFFD. Caller
 * frees; NULL on OOM. */
char *text_utf8_sanitize(const char *s);
/* Copy of s with every occurrence of secret replaced by "[redacted]"
 * (secret NULL or empty: a plain copy). Caller frees; NULL on OOM. */
char *text_redact(const char *s, const char *secret);

/* The value of a hex digit (either case), or -1. */
int hex_digit(char c);

/* Percent-decodes len bytes of s ('+' is a space when plus_is_space) into a
 * new NUL-terminated string (caller frees). -EINVAL for a malformed escape
 * or a NUL (raw or %00), -ENOMEM. */
int percent_decode(const char *s, size_t len, bool plus_is_space, char **ret);

/* Whether s is a non-empty HTTP token (RFC 9110 §5.6.2: a method or a field
 * name): no spaces, tabs, quotes, separators or controls. */
bool http_token_ok(const char *s);
/* Whether s may be an HTTP field value: no control character (CR, LF, NUL,
 * DEL, …) other than tab. */
bool http_field_value_ok(const char *s);
