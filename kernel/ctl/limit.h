/* limit.h — who a client is and how many failed sign-ins it may make.
 *
 * A client is its IP address; IPv6 addresses are grouped by their /48 (what
 * one site usually gets), so an attacker cannot walk a prefix. Behind proxies
 * named in SEED_TRUSTED_PROXIES the client is read from X-Forwarded-For;
 * otherwise that header is ignored, since anyone can send it.
 *
 * The limiter counts failed sign-ins (a wrong password, a bad, used or
 * expired sign-in link) in a sliding window: at most 5 per client and 1000
 * overall in any 15 minutes. Memory is bounded: at most CTL_FAIL_MAX_CLIENTS
 * clients are tracked; when full, the one whose last failure is oldest is
 * forgotten. Since that table is larger than the overall limit plus the
 * connection limit, only clients without a failure inside the window are
 * ever forgotten. Nothing here does I/O or logs; the limiter locks itself. */
#pragma once

#include "base/base.h"

#define CTL_FAIL_WINDOW_MS (15 * 60 * 1000LL)
#define CTL_FAIL_PER_CLIENT 5
#define CTL_FAIL_OVERALL 1000
#define CTL_FAIL_MAX_CLIENTS 4096
#define CTL_FAIL_PER_CLIENT_MAX 64 /* the largest per_client a limiter accepts */

/* An IP address: IPv4 in a[0..4), IPv6 in a[0..16). IPv4-mapped IPv6
 * (::ffff:a.b.c.d) is held as IPv4. */
struct ctl_ip {
        int family; /* AF_INET or AF_INET6 */
        uint8_t a[16];
};

/* "1.2.3.4", "2001:db8::1", "[2001:db8::1]", and either with a port
 * ("1.2.3.4:80", "[::1]:80") as X-Forwarded-For entries may carry; spaces
 * around it are ignored. -EINVAL otherwise. */
int ctl_ip_parse(const char *s, size_t len, struct ctl_ip *ret);

/* The address of a socket peer (AF_INET or AF_INET6; IPv4-mapped IPv6 as
 * IPv4). -EAFNOSUPPORT for any other family, -EINVAL if len is too short. */
struct sockaddr;
int ctl_ip_from_sockaddr(const struct sockaddr *sa, size_t len, struct ctl_ip *ret);

/* The client an address belongs to: itself for IPv4, its /48 for IPv6. */
struct ctl_client {
        struct ctl_ip ip; /* masked */
};
void ctl_client_from_ip(const struct ctl_ip *ip, struct ctl_client *ret);
bool ctl_client_eq(const struct ctl_client *a, const struct ctl_client *b);
#define CTL_CLIENT_STRLEN 64
/* "203.0.113.7" or "2001:db8:1::/48", for logs. */
void ctl_client_str(const struct ctl_client *c, char out[CTL_CLIENT_STRLEN]);

/* SEED_TRUSTED_PROXIES: either how many proxies are in front ("1" behind a
 * platform's ingress: the connecting peer is trusted whoever it is), or a
 * comma-separated list of the proxies' addresses and CIDR ranges
 * ("127.0.0.1, 10.0.0.0/8, 2001:db8::/32"): X-Forwarded-For is read only when
 * the peer is one of them. */
#define CTL_MAX_PROXIES 32
#define CTL_MAX_PROXY_HOPS 16
struct ctl_proxies {
        unsigned hops; /* count form; 0 in list form */
        size_t n;      /* list form */
        struct ctl_cidr {
                struct ctl_ip ip;
                unsigned prefix;
        } v[CTL_MAX_PROXIES];
};
/* NULL or blank: no proxy (X-Forwarded-For ignored). -EINVAL on anything
 * malformed (*ret is then left alone). */
int ctl_proxies_parse(const char *spec, struct ctl_proxies *ret);
bool ctl_proxies_any(const struct ctl_proxies *p);
/* Whether a peer may be one of the trusted proxies: in count form every
 * peer may be (the ingress in front is whoever connects), in list form
 * the listed ones. */
bool ctl_proxies_trusts(const struct ctl_proxies *p, const struct ctl_ip *peer);

/* The client of a request from peer (the connecting address, as text) with
 * the given X-Forwarded-For header values (in order; each may hold several
 * comma-separated entries). Without a trusted proxy: the peer. Count form:
 * the hops-th entry from the right (the left-most if there are fewer). List
 * form, when the peer is listed: the right-most entry that is not listed
 * (the left-most if all are). An entry that does not parse stops the walk at
 * the last good hop. -EINVAL if peer itself does not parse. */
int ctl_client_of(const struct ctl_proxies *p, const char *peer, char *const *xff, size_t n_xff,
                  struct ctl_client *ret);

/* ---- the failure limiter ---- */

struct ctl_limits {
        unsigned per_client;   /* 1..CTL_FAIL_PER_CLIENT_MAX */
        unsigned overall;      /* >= 1 */
        int64_t window_ms;     /* > 0 */
        size_t max_clients;    /* >= 1 */
};
/* The limits seed 001 asks for. */
extern const struct ctl_limits ctl_limits_default;

enum ctl_limit {
        CTL_LIMIT_NONE,    /* go on */
        CTL_LIMIT_CLIENT,  /* this client had per_client failures in the window */
        CTL_LIMIT_OVERALL, /* everyone together had overall failures in the window */
};

struct ctl_limiter;

int ctl_limiter_new(const struct ctl_limits *lim, struct ctl_limiter **ret);
void ctl_limiter_free(struct ctl_limiter *l);

/* Before a password is checked. When the client or everyone is limited,
 * answers so and counts nothing: the password must then not be checked at
 * all. Otherwise reserves an attempt, which counts as a failure (so parallel
 * attempts cannot pass the limit) until ctl_limiter_end. */
enum ctl_limit ctl_limiter_begin(struct ctl_limiter *l, const struct ctl_client *c, int64_t now);
/* Ends an attempt that ctl_limiter_begin let through: failed records the
 * failure; a success forgets the client's failures. Returns the client's
 * state afterwards (CTL_LIMIT_CLIENT when that failure was its last allowed
 * one), so the caller can log when a client becomes limited. */
enum ctl_limit ctl_limiter_end(struct ctl_limiter *l, const struct ctl_client *c, bool failed,
                               int64_t now);
/* Records a failure that was checked without a reservation (a bad sign-in
 * link); returns the state afterwards as ctl_limiter_end does. A client
 * that is limited already keeps its place in the window but adds nothing to
 * the overall count. */
enum ctl_limit ctl_limiter_fail(struct ctl_limiter *l, const struct ctl_client *c, int64_t now);
/* The state for c right now, changing nothing. */
enum ctl_limit ctl_limiter_state(struct ctl_limiter *l, const struct ctl_client *c, int64_t now);
/* How many clients have a failure in the window or an attempt in flight. */
size_t ctl_limiter_tracked(struct ctl_limiter *l, int64_t now);
