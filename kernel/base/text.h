/* text.h — the small text facts several modules check: UTF-8 sequences and
 * hex digits. */
#pragma once

#include <stddef.h>

/* Length (1..4) of the valid UTF-8 sequence at s (n >= 1 bytes available),
 * or 0 if there is none. Strict, as jansson: no overlong forms, no
 * surrogates, nothing above U+10FFFF, no C0/C1 lead bytes. NUL is a valid
 * one-byte sequence: callers that refuse it check it themselves. */
size_t utf8_seq(const unsigned char *s, size_t n);

/* The value of a hex digit (either case), or -1. */
int hex_digit(char c);
