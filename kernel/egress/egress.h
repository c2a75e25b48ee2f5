/* egress.h — the kernel's egress proxy: every sandbox's only way out.
 *
 * No sandbox has a network interface to the outside (only lo). A sandbox
 * that may go out gets a *door*: a listening TCP socket on
 * 127.0.0.1:EGRESS_PORT *inside the sandbox's own network namespace*,
 * created there by the kernel (kernel/sandbox) and handed to the proxy with
 * egress_door_open(). Whatever connects to a door is that sandbox, by
 * construction: the proxy never believes anything a client says about who
 * it is. Nothing inside the sandbox relays; the kernel accepts, checks and
 * splices itself. Clients find the door through HTTPS_PROXY.
 *
 * Every connection, whatever its door:
 *  - HTTP CONNECT "host:443" only (one request head of at most
 *    EGRESS_REQUEST_MAX bytes within EGRESS_REQUEST_TIMEOUT_MS); plain HTTP
 *    (absolute-form GET …), other methods and other ports are refused.
 *  - host: a DNS name of LDH labels (at most 253 bytes, lowercased, one
 *    trailing dot dropped); IP literals in every spelling (dotted, decimal,
 *    octal, hex, short forms, IPv6, zone ids, brackets) and internal names
 *    (egress_name_internal) are refused.
 *  - The door's policy must allow host: EGRESS_POLICY_LIVE (the live
 *    organism and previews) the grants of EGRESS_SCOPE_ORGANISM;
 *    EGRESS_POLICY_BUILD (evolution, build, test and install commands) the
 *    registries plus the grants of EGRESS_SCOPE_EVOLUTION. A pattern
 *    "api.x.com" matches that name; "*.x.com" matches its subdomains only.
 *  - host is resolved once, through the resolver (getaddrinfo, or the test
 *    seam): refused if *any* address is not public (egress_addr_class); then
 *    exactly one of those checked addresses is dialed
 *    (EGRESS_CONNECT_TIMEOUT_MS), never a second lookup.
 *  - After "HTTP/1.1 200 Connection established" the client's TLS
 *    ClientHello (records reassembled up to EGRESS_HELLO_MAX bytes, within
 *    EGRESS_HELLO_TIMEOUT_MS) must carry an SNI host_name equal to host:
 *    missing, different, an IP, oversized or slow → the tunnel is closed.
 *  - At most EGRESS_MAX_TUNNELS tunnels at once over all doors (the next is
 *    refused with 503); a tunnel holds its place from the moment its host
 *    passed the policy until it ends. At most EGRESS_MAX_PENDING more
 *    connections may still be sending their request head (the next is
 *    answered 503 at once). A tunnel with no byte either way for
 *    EGRESS_IDLE_MS ends.
 *  - Bytes are copied with splice(2), socket → pipe → socket.
 *  - Every refusal is answered (400 malformed, 405 not CONNECT, 403 by the
 *    rules or the policy, 408 head too slow, 502 cannot resolve or connect,
 *    503 too many, 504 connect timeout: each with a one-line reason and
 *    "Connection: close"; or a closed tunnel after the ClientHello), logged
 *    at most once a minute per door, host and reason, and kept: the newest
 *    EGRESS_REFUSALS_KEPT, with the host only when it is a well-formed name.
 *    Raw client bytes are never logged or kept.
 *
 * Thread-safe: grants, revocations and doors may change while tunnels run. */
#pragma once

#include "base/base.h"

struct sockaddr;
struct sockaddr_storage;

#define EGRESS_PORT 3128                 /* the door inside every sandbox that may go out */
#define EGRESS_MAX_TUNNELS 64
#define EGRESS_MAX_PENDING 64            /* connections still sending their request head */
#define EGRESS_IDLE_MS (5 * 60 * 1000)
#define EGRESS_CONNECT_TIMEOUT_MS 10000
#define EGRESS_REQUEST_MAX 8192
#define EGRESS_REQUEST_TIMEOUT_MS 10000
#define EGRESS_HELLO_MAX 16384
#define EGRESS_HELLO_TIMEOUT_MS 10000
#define EGRESS_REFUSALS_KEPT 50
#define EGRESS_HOST_MAX 253
#define EGRESS_PATTERNS_MAX 256          /* grants per scope, registries */
#define EGRESS_ADDRS_MAX 32              /* addresses of one name that are checked */

/* Whom a door serves. */
enum egress_policy {
        EGRESS_POLICY_LIVE,  /* the live organism and previews: hosts granted for the organism */
        EGRESS_POLICY_BUILD, /* evolution, build, test, install: registries + hosts granted for evolutions */
};

/* What a grant is for. */
enum egress_scope {
        EGRESS_SCOPE_ORGANISM,  /* the live organism (and previews) */
        EGRESS_SCOPE_EVOLUTION, /* evolution, build and test sandboxes */
};

struct egress;
struct egress_door;

struct egress_config {
        char *const *registries; /* host patterns BUILD doors may reach (copied); NULL: none */
};

/* Starts the proxy's thread(s). Caller frees with egress_free(). */
int egress_new(const struct egress_config *cfg, struct egress **ret);
/* Closes every door still open (those egress_door pointers are invalid
 * afterwards), ends every tunnel, joins the threads. Accepts NULL. */
void egress_free(struct egress *e);

/* The test seam: how names are resolved. fn writes at most max addresses
 * (AF_INET / AF_INET6 sockaddrs; the port is ignored) and their count, or
 * returns -errno (-ENOENT: no such name). NULL restores getaddrinfo() (of
 * the name made absolute, "host.", so no search domain ever applies; both
 * families; no AI_ADDRCONFIG). Tests swap it; nothing else does (no config,
 * no environment variable). */
typedef int (*egress_resolve_fn)(void *userdata, const char *host, struct sockaddr_storage *ret, size_t max,
                                 size_t *ret_n);
void egress_set_resolver(struct egress *e, egress_resolve_fn fn, void *userdata);

/* Timeouts for connections accepted from now on; idle_ms also for the
 * tunnels running, from the next time each wakes up. 0 leaves a field as it
 * is; egress_new() starts with the EGRESS_*_MS defaults. Tests lower them;
 * nothing else does. */
struct egress_timeouts {
        int idle_ms;    /* EGRESS_IDLE_MS */
        int connect_ms; /* EGRESS_CONNECT_TIMEOUT_MS */
        int request_ms; /* EGRESS_REQUEST_TIMEOUT_MS */
        int hello_ms;   /* EGRESS_HELLO_TIMEOUT_MS */
};
/* -EINVAL (nothing changed) for a negative field. */
int egress_set_timeouts(struct egress *e, const struct egress_timeouts *t);

/* Serves listen_fd (a listening TCP socket, taken in every case) with the
 * policy p. label names the sandbox in logs and refusals ("live",
 * "evolution evo_…"; copied, 1..64 bytes, no control characters). -EINVAL
 * for anything else (or a socket not listening), -ESHUTDOWN during
 * egress_free(). Caller closes the door with egress_door_close(), which
 * also ends the tunnels it opened (and the connections it accepted). */
int egress_door_open(struct egress *e, int listen_fd, enum egress_policy p, const char *label,
                     struct egress_door **ret);
void egress_door_close(struct egress_door *d);

/* Whether pattern ("api.x.com", "*.x.com") may be granted: 0, or -EINVAL
 * with *ret_error (caller frees; may be NULL) saying why (an IP literal, an
 * internal name, a single label, malformed, a bare "*"). */
int egress_pattern_check(const char *pattern, char **ret_error);
/* Grants / revokes one pattern for scope s (checked as above; kept
 * normalised: lowercase, no trailing dot). Granting what is granted is 0;
 * -E2BIG past EGRESS_PATTERNS_MAX. A revocation takes effect for new
 * connections at once and ends the open tunnels to hosts no remaining grant
 * (or registry) allows. Revoking what is not granted is -ENOENT. */
int egress_grant(struct egress *e, enum egress_scope s, const char *pattern);
int egress_revoke(struct egress *e, enum egress_scope s, const char *pattern);
/* Replaces the registry list (patterns as above, each checked; NULL or an
 * empty list: none): 0, or -EINVAL / -E2BIG with the list unchanged. Like a
 * revocation, it ends the open tunnels of BUILD doors it no longer allows. */
int egress_set_registries(struct egress *e, char *const *patterns);

/* The patterns a policy allows now (registries first for BUILD), NULL-
 * terminated. Caller frees with strv_free(). For `seed doctor` and Settings. */
int egress_allowed(struct egress *e, enum egress_policy p, char ***ret);

/* One kept refusal. */
struct egress_refusal {
        int64_t at_ms;                 /* wall clock */
        char host[EGRESS_HOST_MAX + 1]; /* "" when the request named no well-formed host */
        int port;                      /* as requested, 0 if none */
        char door[65];                 /* the door's label */
        const char *reason;            /* static text, e.g. "not approved" */
};
/* The kept refusals, newest first (at most EGRESS_REFUSALS_KEPT). Caller
 * frees *ret with free(). */
int egress_refusals(struct egress *e, struct egress_refusal **ret, size_t *ret_n);

/* Address classes (smokescreen's list and more): EGRESS_ADDR_PUBLIC or why
 * not. An IPv4-mapped address (::ffff:a.b.c.d) is judged by the IPv4
 * address it holds (a connection to it is an IPv4 one); IPv4-compatible,
 * SIIT, NAT64 (both prefixes), 6to4 and Teredo addresses are refused
 * whatever they embed: a translator or relay the proxy cannot see decides
 * where they lead. IPv6 outside global unicast (2000::/3) is reserved. The
 * table: kernel/egress/addr.c. */
enum egress_addr_class {
        EGRESS_ADDR_PUBLIC,
        EGRESS_ADDR_UNSPECIFIED,
        EGRESS_ADDR_LOOPBACK,
        EGRESS_ADDR_PRIVATE,      /* RFC 1918, ULA fc00::/7, site-local fec0::/10 */
        EGRESS_ADDR_LINK_LOCAL,   /* 169.254/16 (cloud metadata), fe80::/10 */
        EGRESS_ADDR_CGNAT,        /* 100.64/10 */
        EGRESS_ADDR_DOCUMENTATION,
        EGRESS_ADDR_BENCHMARKING, /* 198.18/15, 2001:2::/48 */
        EGRESS_ADDR_MULTICAST,
        EGRESS_ADDR_RESERVED,     /* 0/8, 240/4, broadcast, 192.0.0/24, IETF ranges, … */
        EGRESS_ADDR_TRANSLATED,   /* NAT64, 6to4, Teredo, SIIT, IPv4-compatible; IPv4-mapped of a non-public address */
};
enum egress_addr_class egress_addr_class(const struct sockaddr *sa);
const char *egress_addr_class_name(enum egress_addr_class c);

/* Whether name is internal (localhost, *.localhost, *.internal, *.local,
 * *.lan, *.home.arpa, *.test, *.invalid, *.example, a single label, …). */
bool egress_name_internal(const char *name);
/* Whether s is an IP address in any spelling inet_aton/inet_pton or a
 * browser would accept (with or without brackets, zone id, port). */
bool egress_is_ip_literal(const char *s);
