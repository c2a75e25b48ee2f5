/* tls.h — a TLS client over a connected socket, for the kernel's own
 * connections that must speak TLS themselves (the PostgreSQL relay to an
 * external server). OpenSSL's TLS half; crypto.c holds its hashes. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

/* libpq's sslmode, as the relay honours it: disable and allow connect in
 * plain text; prefer uses TLS when the server offers it; require insists on
 * TLS (verifying the chain only when a root certificate is given, as libpq
 * does); verify-ca verifies the chain; verify-full also the host name. */
enum tls_mode { TLS_MODE_OFF, TLS_MODE_PREFER, TLS_MODE_REQUIRE, TLS_MODE_VERIFY_CA, TLS_MODE_VERIFY_FULL };
int tls_mode_parse(const char *s, enum tls_mode *ret);

struct tls;
/* Handshakes over fd (borrowed, blocking, connected) within 10 s. host is
 * sent as SNI (unless an address) and checked in verify-full; rootcert is a
 * PEM file of trusted roots, NULL for the system's. Logs nothing; -EPROTO
 * on a failed handshake or verification. */
int tls_client_start(int fd, const char *host, enum tls_mode mode, const char *rootcert, struct tls **ret);
/* > 0 bytes read, 0 at the end, -errno. */
ssize_t tls_read(struct tls *t, void *buf, size_t len);
int tls_write_all(struct tls *t, const void *data, size_t len);
/* Decrypted bytes are waiting that a poll on the socket would not show. */
bool tls_pending(const struct tls *t);
/* Sends close_notify when it can; does not close fd. Accepts NULL. */
void tls_free(struct tls *t);
