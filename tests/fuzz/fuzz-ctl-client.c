/* fuzz-ctl-client.c — who a request comes from: X-Forwarded-For values
 * (anyone's input) read behind SEED_TRUSTED_PROXIES (the owner's), by
 * kernel/ctl/limit.c.
 *
 * Input: "SPEC\nPEER\nXFF\nXFF...": the trusted-proxies setting, the peer
 * address and up to 8 X-Forwarded-For header values. Properties: parsing
 * never crashes or reads out of bounds; a setting that parses is either a
 * hop count within bounds or a list within bounds; whenever the peer parses
 * the client is one of the addresses offered (the peer's or an entry's),
 * masked to its /48 for IPv6; with no trusted proxy it is the peer's own;
 * and the client's text form is NUL-terminated within its buffer. */
#include "ctl/limit.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define MAX_XFF 8

static void check_client(const struct ctl_client *c) {
        char s[CTL_CLIENT_STRLEN];
        memset(s, 'x', sizeof s);
        ctl_client_str(c, s);
        if (!memchr(s, 0, sizeof s))
                abort();
        if (c->ip.family != AF_INET && c->ip.family != AF_INET6)
                abort();
        if (c->ip.family == AF_INET6)
                for (size_t i = 6; i < 16; i++)
                        if (c->ip.a[i])
                                abort(); /* an IPv6 client is its /48 */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size + 1);
        if (!buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = 0;
        char *lines[2 + MAX_XFF] = {0};
        size_t n = 0;
        for (char *p = buf; p && n < 2 + MAX_XFF; n++) {
                lines[n] = p;
                p = strchr(p, '\n');
                if (p)
                        *p++ = 0;
        }
        struct ctl_proxies proxies = {0};
        bool trusted = n > 0 && ctl_proxies_parse(lines[0], &proxies) == 0;
        if (trusted && (proxies.hops > CTL_MAX_PROXY_HOPS || proxies.n > CTL_MAX_PROXIES ||
                        (proxies.hops > 0 && proxies.n > 0)))
                abort();
        const char *peer = n > 1 ? lines[1] : "";
        char *const *xff = n > 2 ? lines + 2 : NULL;
        struct ctl_client c, plain;
        struct ctl_ip ip;
        bool peer_ok = ctl_ip_parse(peer, strlen(peer), &ip) == 0;
        int r = ctl_client_of(trusted ? &proxies : NULL, peer, xff, n > 2 ? n - 2 : 0, &c);
        if ((r == 0) != peer_ok)
                abort();
        if (r == 0) {
                check_client(&c);
                /* No trusted proxy: the peer itself, whatever the headers say. */
                if (ctl_client_of(NULL, peer, xff, n > 2 ? n - 2 : 0, &plain) != 0)
                        abort();
                struct ctl_client own;
                ctl_client_from_ip(&ip, &own);
                if (!ctl_client_eq(&plain, &own))
                        abort();
        }
        free(buf);
        return 0;
}
