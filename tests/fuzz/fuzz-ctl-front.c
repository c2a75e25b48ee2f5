/* fuzz-ctl-front.c — the accept loop's choice of a connection's memory pool
 * from its first bytes (kernel/ctl/front.c), on arbitrary bytes. Besides
 * memory errors: a full buffer is never left waiting; a choice made on some
 * bytes does not change when more arrive (the loop looks again only while
 * it waits); a small pool is only chosen for a complete head with exactly
 * one Host, which is not the control plane's; without a control origin of
 * its own, every connection gets the large pool. */
#include "ctl/front.h"

#include <stdint.h>
#include <strings.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static size_t count_host_lines(const char *buf, size_t n) {
        size_t hosts = 0;
        for (size_t i = 0; i + 6 <= n; i++)
                if (buf[i] == '\n' && strncasecmp(buf + i + 1, "host:", 5) == 0)
                        hosts++;
        return hosts;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > CTL_FRONT_PEEK + 1)
                return 0;
        size_t split = data[0] % (size);
        const char *buf = (const char *)data + 1;
        size_t n = size - 1;
        if (split > n)
                split = n;
        const char *own = "seed.localhost";

        enum ctl_front_pool full = ctl_front_choose(buf, n, true, own);
        check(full != CTL_FRONT_WAIT);
        enum ctl_front_pool part = ctl_front_choose(buf, split, false, own);
        if (part != CTL_FRONT_WAIT) /* decided on fewer bytes: more change nothing */
                check(part == ctl_front_choose(buf, n, false, own) && part == full);
        enum ctl_front_pool now = ctl_front_choose(buf, n, false, own);
        check(now == CTL_FRONT_WAIT || now == full);
        if (full == CTL_FRONT_SMALL) {
                const char *end = memmem(buf, n, "\r\n\r\n", 4);
                check(end != NULL);
                check(count_host_lines(buf, (size_t)(end - buf) + 2) >= 1);
        }
        check(ctl_front_choose(buf, n, true, NULL) == CTL_FRONT_LARGE);
        check(ctl_front_choose(buf, n, true, "") == CTL_FRONT_LARGE);
        return 0;
}
