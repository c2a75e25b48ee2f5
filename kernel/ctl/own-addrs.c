/* The container's own addresses: see own-addrs.h. */
#include "ctl/own-addrs.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>

/* sa as 16 bytes (IPv4 → ::ffff:a.b.c.d); false for other families. */
static bool as_v6(const struct sockaddr *sa, unsigned char out[16]) {
        if (!sa)
                return false;
        if (sa->sa_family == AF_INET6) {
                memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
                return true;
        }
        if (sa->sa_family == AF_INET) {
                memset(out, 0, 10);
                out[10] = out[11] = 0xff;
                memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
                return true;
        }
        return false;
}

static bool is_loopback(const unsigned char a[16]) {
        static const unsigned char v6_loopback[16] = {[15] = 1};
        static const unsigned char v4_mapped[12] = {[10] = 0xff, [11] = 0xff};
        if (memcmp(a, v6_loopback, 16) == 0)
                return true;
        return memcmp(a, v4_mapped, 12) == 0 && a[12] == 127;
}

int ctl_own_addrs_add(struct ctl_own_addrs *a, const struct sockaddr *sa) {
        unsigned char v6[16];
        if (!as_v6(sa, v6))
                return 0;
        for (size_t i = 0; i < a->n; i++)
                if (memcmp(a->addr[i], v6, 16) == 0)
                        return 0;
        if (a->n >= CTL_OWN_ADDRS_MAX)
                return -E2BIG;
        memcpy(a->addr[a->n++], v6, 16);
        return 0;
}

int ctl_own_addrs_load(struct ctl_own_addrs *ret, int64_t now) {
        struct ifaddrs *list = NULL;
        if (getifaddrs(&list) < 0)
                return -errno;
        struct ctl_own_addrs a = {.loaded_ms = now};
        int r = 0;
        for (struct ifaddrs *i = list; i && r == 0; i = i->ifa_next)
                r = ctl_own_addrs_add(&a, i->ifa_addr);
        freeifaddrs(list);
        if (r < 0)
                return r;
        *ret = a;
        return 0;
}

bool ctl_own_addrs_match(const struct ctl_own_addrs *a, const struct sockaddr *peer) {
        unsigned char v6[16];
        if (!as_v6(peer, v6))
                return false;
        if (is_loopback(v6))
                return true;
        for (size_t i = 0; i < a->n; i++)
                if (memcmp(a->addr[i], v6, 16) == 0)
                        return true;
        return false;
}
