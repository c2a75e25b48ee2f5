/* fuzz-egress-hello.c — the egress proxy's TLS ClientHello parser
 * (kernel/egress/hello.c) on arbitrary bytes.
 *
 * The first byte chooses:
 *   even  the rest as the start of a TLS stream, as a client sends it;
 *   odd   the rest as a ClientHello body, framed as a handshake message and
 *         split into records of (first byte / 2 + 1) bytes, so that the
 *         mutations reach the body's parser.
 * Every answer is one of the documented ones; an accepted server name is a
 * normalised DNS name, not an IP literal; -EAGAIN only within the raw
 * bound; bytes after an accepted ClientHello change nothing. */
#include "egress/addr.h"
#include "egress/hello.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static uint8_t framed[EGRESS_HELLO_RAW_MAX * 8 + 64];

static size_t frame(const uint8_t *body, size_t n, size_t per) {
        uint8_t msg[4 + 65536];
        if (n > 65535)
                n = 65535;
        msg[0] = 1;
        msg[1] = (uint8_t)(n >> 16);
        msg[2] = (uint8_t)(n >> 8);
        msg[3] = (uint8_t)n;
        memcpy(msg + 4, body, n);
        size_t len = 0;
        for (size_t off = 0; off < n + 4 && len + 5 + per <= sizeof framed; off += per) {
                size_t k = n + 4 - off < per ? n + 4 - off : per;
                uint8_t h[5] = {22, 3, 1, (uint8_t)(k >> 8), (uint8_t)k};
                memcpy(framed + len, h, 5);
                memcpy(framed + len + 5, msg + off, k);
                len += 5 + k;
        }
        return len;
}

static void judge(const uint8_t *data, size_t size) {
        char sni[EGRESS_HOST_MAX + 1];
        const char *why = NULL;
        int r = egress_hello_parse(data, size, sni, &why);
        check(r == 0 || r == -EAGAIN || r == -E2BIG || r == -EBADMSG || r == -ENOENT || r == -EINVAL ||
              r == -ENOMEM);
        if (r != 0 && r != -EAGAIN)
                check(why && *why && strlen(why) < 128);
        if (r == -EAGAIN)
                check(size <= EGRESS_HELLO_RAW_MAX);
        if (r != 0)
                return;
        size_t n = strlen(sni);
        char again[EGRESS_HOST_MAX + 1];
        check(n > 0 && n <= EGRESS_HOST_MAX);
        check(egress_name_normalize(sni, n, again) == 0 && streq(again, sni));
        check(!egress_is_ip_literal(sni));
        /* Bytes after it are not looked at. */
        static uint8_t more[EGRESS_HELLO_RAW_MAX * 8 + 128];
        memcpy(more, data, size);
        memset(more + size, 0xee, 64);
        char sni2[EGRESS_HOST_MAX + 1];
        check(egress_hello_parse(more, size + 64, sni2, &why) == 0 && streq(sni, sni2));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        uint8_t mode = data[0];
        data++;
        size--;
        if (size > EGRESS_HELLO_RAW_MAX * 8)
                return 0;
        if (mode % 2 == 0)
                judge(data, size);
        else
                judge(framed, frame(data, size, (size_t)mode / 2 + 1));
        return 0;
}
