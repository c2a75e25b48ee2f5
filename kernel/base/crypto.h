/* crypto.h — randomness, hashes and MACs: OpenSSL's libcrypto (tls.c holds its TLS half). */
#pragma once

#include "base/base.h"

#define SHA256_HEX_LEN 64

/* Fills buf with n cryptographically random bytes. */
int crypto_random(void *buf, size_t n);
/* A fresh random token of nbytes bytes, lowercase hex. Caller frees. */
int crypto_random_hex(size_t nbytes, char **ret);
/* Lowercase hex of data into out (2*len+1 bytes). */
void crypto_hex(const void *data, size_t len, char *out);
/* SHA-256 of data as 64 hex chars + NUL in out. */
void crypto_sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1]);
/* HMAC-SHA-256(key, msg) as 64 hex chars + NUL in out. The first few keys
 * are kept, keyed, in memory until crypto_hmac_forget(). */
void crypto_hmac_sha256_hex(const void *key, size_t keylen, const void *msg, size_t len,
                            char out[SHA256_HEX_LEN + 1]);
/* Drops (and wipes) the keys kept by crypto_hmac_sha256_hex: when the
 * process is done with its secrets. Later calls work, keying anew. */
void crypto_hmac_forget(void);
/* Constant-time comparison of two strings of any lengths. */
bool crypto_streq_ct(const char *a, const char *b);
/* Standard base64 (RFC 4648, padded) of data; at most 64 MiB in. Caller frees. */
int crypto_base64(const void *data, size_t len, char **ret);
/* Constant-time comparison of n bytes (n itself is not hidden: for values
 * of a known length, e.g. two SHA-256 hex digests). */
bool crypto_memeq_ct(const void *a, const void *b, size_t n);
