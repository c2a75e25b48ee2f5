#include "base/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <sys/random.h>

/* SHA-256 and HMAC fetched from the provider once: EVP_sha256() and HMAC()
 * fetch them again on every call, which cost more than hashing a token
 * (a control-plane request hashes a few). Never freed: they live as long as
 * the process. NULL if the fetch failed: the per-call functions then. */
static pthread_once_t fetch_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;
static EVP_MAC *hmac_mac;

static void fetch_algorithms(void) {
        sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
        hmac_mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

static const EVP_MD *sha256(void) {
        pthread_once(&fetch_once, fetch_algorithms);
        return sha256_md ? sha256_md : EVP_sha256();
}

int crypto_random(void *buf, size_t n) {
        uint8_t *p = buf;
        while (n > 0) {
                ssize_t k = getrandom(p, n, 0);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                n -= (size_t)k;
        }
        return 0;
}

void crypto_hex(const void *data, size_t len, char *out) {
        static const char digits[] = "0123456789abcdef";
        const uint8_t *p = data;
        for (size_t i = 0; i < len; i++) {
                out[2 * i] = digits[p[i] >> 4];
                out[2 * i + 1] = digits[p[i] & 15];
        }
        out[2 * len] = 0;
}

int crypto_random_hex(size_t nbytes, char **ret) {
        uint8_t raw[128];
        if (nbytes == 0 || nbytes > sizeof raw)
                return -EINVAL;
        int r = crypto_random(raw, nbytes);
        if (r < 0)
                return r;
        char *s = malloc(2 * nbytes + 1);
        if (!s)
                return -ENOMEM;
        crypto_hex(raw, nbytes, s);
        secure_zero(raw, sizeof raw);
        *ret = s;
        return 0;
}

void crypto_sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN + 1]) {
        unsigned char md[32];
        unsigned int mdlen = 0;
        EVP_Digest(data, len, md, &mdlen, sha256(), NULL);
        crypto_hex(md, 32, out);
}

/* A new HMAC-SHA-256 context keyed with key, or NULL. */
static EVP_MAC_CTX *hmac_new(const void *key, size_t keylen) {
        EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac_mac);
        OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                               OSSL_PARAM_construct_end()};
        if (ctx && !EVP_MAC_init(ctx, key, keylen, params)) {
                EVP_MAC_CTX_free(ctx);
                ctx = NULL;
        }
        return ctx;
}

/* The process's few HMAC keys (the session key, the owner key), each keyed
 * once: a call copies its context instead of fetching SHA-256 and hashing
 * the key's pads again (an API call of a browser checks one HMAC). Keys
 * past HMAC_KEYS_MAX, or longer than a slot holds, are keyed per call.
 * Never freed: they live as long as the process, like the fetches. */
#define HMAC_KEYS_MAX 4
#define HMAC_KEY_MAX 128
static struct hmac_key {
        size_t len;
        unsigned char key[HMAC_KEY_MAX];
        EVP_MAC_CTX *ctx;
} hmac_keys[HMAC_KEYS_MAX];
static pthread_mutex_t hmac_keys_lock = PTHREAD_MUTEX_INITIALIZER;

static EVP_MAC_CTX *hmac_keyed(const void *key, size_t keylen) {
        if (keylen > HMAC_KEY_MAX)
                return hmac_new(key, keylen);
        EVP_MAC_CTX *ctx = NULL;
        struct hmac_key *free_slot = NULL;
        pthread_mutex_lock(&hmac_keys_lock);
        for (size_t i = 0; i < HMAC_KEYS_MAX; i++) {
                struct hmac_key *k = &hmac_keys[i];
                if (!k->ctx) {
                        if (!free_slot)
                                free_slot = k;
                } else if (k->len == keylen && CRYPTO_memcmp(k->key, key, keylen) == 0) {
                        ctx = EVP_MAC_CTX_dup(k->ctx);
                        pthread_mutex_unlock(&hmac_keys_lock);
                        return ctx;
                }
        }
        if (free_slot && (free_slot->ctx = hmac_new(key, keylen))) {
                free_slot->len = keylen;
                memcpy(free_slot->key, key, keylen);
                ctx = EVP_MAC_CTX_dup(free_slot->ctx);
        }
        pthread_mutex_unlock(&hmac_keys_lock);
        return ctx ? ctx : hmac_new(key, keylen);
}

void crypto_hmac_forget(void) {
        pthread_mutex_lock(&hmac_keys_lock);
        for (size_t i = 0; i < HMAC_KEYS_MAX; i++) {
                EVP_MAC_CTX_free(hmac_keys[i].ctx); /* OpenSSL wipes the key it holds */
                secure_zero(&hmac_keys[i], sizeof hmac_keys[i]);
        }
        pthread_mutex_unlock(&hmac_keys_lock);
}

/* HMAC-SHA-256 with the MAC fetched once; false if that cannot be had. */
static bool hmac_fetched(const void *key, size_t keylen, const void *msg, size_t len, unsigned char md[32]) {
        pthread_once(&fetch_once, fetch_algorithms);
        if (!hmac_mac)
                return false;
        EVP_MAC_CTX *ctx = hmac_keyed(key, keylen);
        size_t mdlen = 0;
        bool ok = ctx && EVP_MAC_update(ctx, msg, len) && EVP_MAC_final(ctx, md, &mdlen, 32) && mdlen == 32;
        EVP_MAC_CTX_free(ctx);
        return ok;
}

void crypto_hmac_sha256_hex(const void *key, size_t keylen, const void *msg, size_t len,
                            char out[SHA256_HEX_LEN + 1]) {
        unsigned char md[32];
        unsigned int mdlen = 0;
        if (!hmac_fetched(key, keylen, msg, len, md))
                HMAC(EVP_sha256(), key, (int)keylen, msg, len, md, &mdlen);
        crypto_hex(md, 32, out);
        secure_zero(md, sizeof md);
}

bool crypto_memeq_ct(const void *a, const void *b, size_t n) {
        return CRYPTO_memcmp(a, b, n) == 0;
}

bool crypto_streq_ct(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        /* Compare digests so the time depends on neither input's content. */
        char da[SHA256_HEX_LEN + 1], db[SHA256_HEX_LEN + 1];
        crypto_sha256_hex(a, la, da);
        crypto_sha256_hex(b, lb, db);
        return CRYPTO_memcmp(da, db, SHA256_HEX_LEN) == 0 && la == lb;
}

int crypto_base64(const void *data, size_t len, char **ret) {
        if (len > 64u * 1024 * 1024)
                return -E2BIG;
        char *out = malloc(4 * ((len + 2) / 3) + 1);
        if (!out)
                return -ENOMEM;
        EVP_EncodeBlock((unsigned char *)out, data, (int)len);
        *ret = out;
        return 0;
}
