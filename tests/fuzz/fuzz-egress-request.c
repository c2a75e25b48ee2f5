/* fuzz-egress-request.c — the egress proxy's CONNECT head parser
 * (kernel/egress/request.c) on arbitrary bytes.
 *
 * Every answer is one of the documented ones; an accepted head is a
 * CONNECT to a normalised DNS name (not an IP literal, not internal) on
 * port 443, ends in CRLF CRLF within EGRESS_REQUEST_MAX, and is accepted
 * the same way when the bytes after it are cut off; a host kept on failure
 * is a normalised name too (never raw client bytes); the reason is short
 * printable ASCII. */
#include "egress/addr.h"
#include "egress/request.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static void check_host(const char *host) {
        size_t n = strlen(host);
        check(n <= EGRESS_HOST_MAX);
        if (n == 0)
                return;
        char again[EGRESS_HOST_MAX + 1];
        check(egress_name_normalize(host, n, again) == 0);
        check(streq(again, host));
}

static void check_why(const char *why) {
        check(why && *why && strlen(why) < 128);
        for (const char *p = why; *p; p++)
                check(*p >= 0x20 && *p < 0x7f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct egress_request req;
        const char *why = NULL;
        int r = egress_request_parse((const char *)data, size, &req, &why);
        check(r == 0 || r == -EAGAIN || r == -E2BIG || r == -EBADMSG || r == -EOPNOTSUPP || r == -EPERM);
        check_host(req.host);
        check(req.port >= 0 && req.port <= 65535);
        if (r != 0 && r != -EAGAIN)
                check_why(why);
        if (r == -EAGAIN)
                check(size < EGRESS_REQUEST_MAX);
        if (r != 0)
                return 0;
        check(req.head_len >= 4 && req.head_len <= size && req.head_len <= EGRESS_REQUEST_MAX);
        check(!memcmp(data + req.head_len - 4, "\r\n\r\n", 4));
        check(!memchr(data, 0, req.head_len));
        check(req.port == 443 && *req.host);
        check(!egress_is_ip_literal(req.host) && !egress_name_internal(req.host));
        check(startswith((const char *)data, "CONNECT "));
        struct egress_request again;
        check(egress_request_parse((const char *)data, req.head_len, &again, &why) == 0);
        check(streq(again.host, req.host) && again.head_len == req.head_len);
        check(egress_request_parse((const char *)data, req.head_len - 1, &again, &why) != 0);
        return 0;
}
