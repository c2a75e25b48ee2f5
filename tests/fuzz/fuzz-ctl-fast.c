/* fuzz-ctl-fast.c — the fast path's reading of a request head
 * (kernel/ctl/fast.c), on arbitrary bytes. Besides memory errors: with
 * nothing more to come it never waits; what it takes as its own is one
 * whole head and nothing after it, ended by the first blank line, with
 * every line ended by CRLF (so libmicrohttpd, which also reads bare LFs,
 * finds the same end), a GET of a visible-ASCII target, exactly one Host,
 * no framing header, and headers without control characters; what it
 * hands over leaves no headers behind. */
#include "ctl/fast.h"

#include <stdint.h>
#include <strings.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 16 * 1024 + 1)
                return 0;
        bool full = data[0] & 1;
        const char *buf = (const char *)data + 1;
        size_t n = size - 1;
        struct ctl_hdrs h = {0};
        struct ctl_fast_head head;
        enum ctl_fast_verdict v = ctl_fast_parse(buf, n, full, &head, &h);
        if (full)
                check(v != CTL_FAST_WAIT);
        if (v != CTL_FAST_OURS) {
                check(h.n == 0);
                ctl_hdrs_free(&h);
                return 0;
        }
        check(head.len == n && n >= 4 && memcmp(buf, "GET /", 5) == 0);
        const char *end = memmem(buf, n, "\r\n\r\n", 4);
        check(end && (size_t)(end - buf) + 4 == n);
        for (size_t i = 0; i < n; i++)
                if (buf[i] == '\n')
                        check(i > 0 && buf[i - 1] == '\r');
                else if (buf[i] == '\r')
                        check(i + 1 < n && buf[i + 1] == '\n');
        check(head.target == buf + 4 && head.target_len >= 1 && head.target_len <= CTL_FAST_TARGET_MAX);
        for (size_t i = 0; i < head.target_len; i++)
                check(head.target[i] > 0x20 && head.target[i] < 0x7f);
        check(ctl_hdrs_count(&h, "Host") == 1);
        check(!ctl_hdrs_get(&h, "Content-Length") && !ctl_hdrs_get(&h, "Transfer-Encoding"));
        for (size_t i = 0; i < h.n; i++) {
                check(h.v[i].name[0] != 0 && !strpbrk(h.v[i].name, " \t\r\n:"));
                for (const char *p = h.v[i].value; *p; p++)
                        check(*p == '\t' || (unsigned char)*p >= 0x20);
                check(!strchr(h.v[i].value, 0x7f));
        }
        ctl_hdrs_free(&h);
        return 0;
}
