/* tls.c — the TLS client of tls.h over OpenSSL's libssl. */
#include "base/tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>

#define TLS_HANDSHAKE_MS 10000

struct tls {
        SSL_CTX *ctx;
        SSL *ssl;
};

int tls_mode_parse(const char *s, enum tls_mode *ret) {
        static const struct {
                const char *name;
                enum tls_mode mode;
        } modes[] = {
                {"disable", TLS_MODE_OFF},         {"allow", TLS_MODE_OFF},
                {"prefer", TLS_MODE_PREFER},       {"require", TLS_MODE_REQUIRE},
                {"verify-ca", TLS_MODE_VERIFY_CA}, {"verify-full", TLS_MODE_VERIFY_FULL},
        };
        for (size_t i = 0; s && i < ARRAY_SIZE(modes); i++)
                if (streq(s, modes[i].name)) {
                        *ret = modes[i].mode;
                        return 0;
                }
        return -EINVAL;
}

void tls_free(struct tls *t) {
        if (!t)
                return;
        if (t->ssl) {
                (void)SSL_shutdown(t->ssl);
                SSL_free(t->ssl);
        }
        SSL_CTX_free(t->ctx);
        free(t);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct tls *, tls_free)

static bool is_address(const char *host) {
        unsigned char buf[16];
        return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static void set_timeout(int fd, int ms) {
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int tls_client_start(int fd, const char *host, enum tls_mode mode, const char *rootcert, struct tls **ret) {
        if (fd < 0 || !host || mode == TLS_MODE_OFF || !ret)
                return -EINVAL;
        _cleanup_(tls_freep) struct tls *t = calloc(1, sizeof *t);
        if (!t || !(t->ctx = SSL_CTX_new(TLS_client_method())))
                return -ENOMEM;
        (void)SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
        bool verify = mode >= TLS_MODE_VERIFY_CA || (mode == TLS_MODE_REQUIRE && rootcert);
        if (verify) {
                int ok = rootcert ? SSL_CTX_load_verify_locations(t->ctx, rootcert, NULL)
                                  : SSL_CTX_set_default_verify_paths(t->ctx);
                if (ok != 1) {
                        ERR_clear_error();
                        return -ENOENT;
                }
                SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        }
        if (!(t->ssl = SSL_new(t->ctx)) || SSL_set_fd(t->ssl, fd) != 1)
                return -ENOMEM;
        bool addr = is_address(host);
        if (!addr && host[0] != '/' && SSL_set_tlsext_host_name(t->ssl, host) != 1)
                return -EINVAL;
        if (mode == TLS_MODE_VERIFY_FULL) {
                X509_VERIFY_PARAM *p = SSL_get0_param(t->ssl);
                if ((addr ? X509_VERIFY_PARAM_set1_ip_asc(p, host) : SSL_set1_host(t->ssl, host)) != 1)
                        return -EINVAL;
        }
        set_timeout(fd, TLS_HANDSHAKE_MS);
        int k = SSL_connect(t->ssl);
        set_timeout(fd, 0);
        if (k != 1) {
                ERR_clear_error();
                return -EPROTO;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

ssize_t tls_read(struct tls *t, void *buf, size_t len) {
        size_t n = 0;
        int k = SSL_read_ex(t->ssl, buf, len, &n);
        if (k == 1)
                return (ssize_t)n;
        int e = SSL_get_error(t->ssl, k);
        ERR_clear_error();
        return e == SSL_ERROR_ZERO_RETURN ? 0 : -EIO;
}

int tls_write_all(struct tls *t, const void *data, size_t len) {
        const char *p = data;
        while (len) {
                size_t n = 0;
                if (SSL_write_ex(t->ssl, p, len, &n) != 1) {
                        ERR_clear_error();
                        return -EIO;
                }
                p += n, len -= n;
        }
        return 0;
}

bool tls_pending(const struct tls *t) { return t && SSL_pending(t->ssl) > 0; }
