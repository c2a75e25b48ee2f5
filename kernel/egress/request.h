/* request.h — the proxy's CONNECT request head: parsed strictly, bounded by
 * EGRESS_REQUEST_MAX. Pure: no I/O, no logging; fuzzed
 * (tests/fuzz/fuzz-egress-request.c). */
#pragma once

#include "egress/egress.h"

#define EGRESS_REQUEST_HEADERS_MAX 64 /* header fields in one head */

struct egress_request {
        char host[EGRESS_HOST_MAX + 1]; /* normalised; "" unless the target is a well-formed DNS name */
        int port;                       /* as requested; 0 when none could be read */
        size_t head_len;                /* bytes of the head with its blank line; 0 until complete */
};

/* Parses the request head at the start of the len bytes at data (what the
 * client sent so far; bytes after the head belong to the tunnel). Fills
 * *req as far as it could read (also on failure, for the refusal's record)
 * and returns:
 *   0            a complete head: CONNECT to a DNS name on port 443, HTTP/1.0
 *                or 1.1, well-formed header fields, no body;
 *   -EAGAIN      no complete head yet, nothing wrong so far;
 *   -E2BIG       no complete head within EGRESS_REQUEST_MAX bytes   (400)
 *   -EBADMSG     malformed                                         (400)
 *   -EOPNOTSUPP  a method other than CONNECT (plain HTTP)          (405)
 *   -EPERM       a port other than 443, an IP literal, an internal
 *                name                                              (403)
 * On every error but -EAGAIN *why is a static text saying why (never any
 * of the client's bytes). */
int egress_request_parse(const char *data, size_t len, struct egress_request *req, const char **why);
