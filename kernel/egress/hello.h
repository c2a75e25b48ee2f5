/* hello.h — the first bytes of a tunnel: a TLS ClientHello (RFC 8446 §4.1.2,
 * RFC 5246 §7.4.1.2) and its server_name (RFC 6066 §3). Handshake records
 * are reassembled, bounded twice: the ClientHello message at most
 * EGRESS_HELLO_MAX bytes, the records carrying it at most
 * EGRESS_HELLO_RAW_MAX bytes with their headers. Pure: no I/O, no logging;
 * fuzzed (tests/fuzz/fuzz-egress-hello.c). */
#pragma once

#include "egress/egress.h"

#define EGRESS_HELLO_RAW_MAX (EGRESS_HELLO_MAX + 5 * 256) /* room for 256 record headers */

/* Judges the len bytes at data, the start of what the client sent after
 * the tunnel opened. Returns
 *   0         a complete, well-formed ClientHello with exactly one
 *             host_name, a DNS name: normalised into sni (lowercased, a
 *             trailing dot dropped);
 *   -EAGAIN   nothing wrong, but the ClientHello is not complete yet;
 *   -E2BIG    the ClientHello or its records pass the bounds;
 *   -EBADMSG  not a TLS handshake starting with a ClientHello, or malformed;
 *   -ENOENT   no server_name with a host_name;
 *   -EINVAL   the host_name is an IP address or not a DNS name;
 *   -ENOMEM;
 * and on failure *why, a static text (never any of the client's bytes).
 * Bytes after the ClientHello are not looked at. */
int egress_hello_parse(const uint8_t *data, size_t len, char sni[EGRESS_HOST_MAX + 1], const char **why);
