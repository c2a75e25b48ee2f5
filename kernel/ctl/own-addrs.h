/* own-addrs.h — the addresses of the kernel's own network namespace, for a
 * kernel that runs inside its Seed's container (seed-kernel --in-container).
 * There a connection from one of them (any loopback address included) comes
 * from inside the container — a sandbox's way out, a process the kernel
 * started, an escaped one — never from the owner, who arrives through the
 * port the engine publishes, from outside the container's namespace. The
 * control plane refuses those connections before they hold a thread
 * (server.c). Owned by ctl; no locking here: the caller serialises. */
#pragma once

#include "base/base.h"

#include <sys/socket.h>

#define CTL_OWN_ADDRS_MAX 64
/* Interfaces may gain addresses while the kernel runs: the list is read
 * again when it is older than this. */
#define CTL_OWN_ADDRS_REFRESH_MS 2000

struct ctl_own_addrs {
        /* 16 bytes each: IPv6, or IPv4 as an IPv4-mapped IPv6 address. */
        unsigned char addr[CTL_OWN_ADDRS_MAX][16];
        size_t n;
        int64_t loaded_ms; /* now_ms() of the last load; 0 = never */
};

/* Reads every address of every interface (getifaddrs) into *ret, stamped
 * with now. More than CTL_OWN_ADDRS_MAX: -E2BIG (the caller refuses every
 * connection rather than let one through unchecked). */
int ctl_own_addrs_load(struct ctl_own_addrs *ret, int64_t now);
/* Adds one IPv4 or IPv6 address (sockaddr_in / sockaddr_in6); other
 * families are ignored (0). -E2BIG when full. */
int ctl_own_addrs_add(struct ctl_own_addrs *a, const struct sockaddr *sa);
/* Whether peer is a loopback address (127.0.0.0/8, ::1, or their IPv4-mapped
 * forms) or one of a's. A peer of another family (or NULL) is not. */
bool ctl_own_addrs_match(const struct ctl_own_addrs *a, const struct sockaddr *peer);
