/* addr.c — address classes as a table of CIDR blocks, IP literals in every
 * spelling, internal names. */
#include "egress/addr.h"
#include "base/text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <strings.h>

#define ROW(c, k, why_) {.cidr = c, .class = EGRESS_ADDR_##k, .why = why_}
#define EMBED(c, e, why_) {.cidr = c, .class = EGRESS_ADDR_TRANSLATED, .embed = EGRESS_EMBED_##e, .why = why_}

/* IANA's special-purpose registries (IPv4 and IPv6), smokescreen's list and
 * the blocks no public host can have. Blocks IANA marks globally reachable
 * but no HTTPS server sits in (anycast relays, AS112) are refused too. */
static const struct egress_addr_rule rules[] = {
        ROW("0.0.0.0/32", UNSPECIFIED, "the unspecified address: this host"),
        ROW("0.0.0.0/8", RESERVED, "\"this network\" (RFC 791): reaches this host on Linux"),
        ROW("10.0.0.0/8", PRIVATE, "private network (RFC 1918)"),
        ROW("100.64.0.0/10", CGNAT, "carrier-grade NAT, shared address space (RFC 6598)"),
        ROW("127.0.0.0/8", LOOPBACK, "loopback: this host"),
        ROW("169.254.0.0/16", LINK_LOCAL, "link-local (RFC 3927), where cloud metadata services answer"),
        ROW("172.16.0.0/12", PRIVATE, "private network (RFC 1918)"),
        ROW("192.0.0.0/24", RESERVED, "IETF protocol assignments (RFC 6890), DS-Lite, NAT64 discovery"),
        ROW("192.0.2.0/24", DOCUMENTATION, "TEST-NET-1 (RFC 5737)"),
        ROW("192.88.99.0/24", RESERVED, "the deprecated 6to4 relay anycast (RFC 7526)"),
        ROW("192.168.0.0/16", PRIVATE, "private network (RFC 1918)"),
        ROW("198.18.0.0/15", BENCHMARKING, "network benchmarking (RFC 2544)"),
        ROW("198.51.100.0/24", DOCUMENTATION, "TEST-NET-2 (RFC 5737)"),
        ROW("203.0.113.0/24", DOCUMENTATION, "TEST-NET-3 (RFC 5737)"),
        ROW("224.0.0.0/4", MULTICAST, "multicast"),
        ROW("233.252.0.0/24", DOCUMENTATION, "MCAST-TEST-NET (RFC 6676)"),
        ROW("240.0.0.0/4", RESERVED, "reserved for future use (RFC 1112)"),
        ROW("255.255.255.255/32", RESERVED, "limited broadcast"),

        ROW("::/128", UNSPECIFIED, "the unspecified address: this host"),
        ROW("::1/128", LOOPBACK, "loopback: this host"),
        ROW("::/96", TRANSLATED, "IPv4-compatible (deprecated, RFC 4291): no host has one"),
        EMBED("::ffff:0:0/96", LAST32, "IPv4-mapped: an IPv4 connection to the address it holds"),
        ROW("::ffff:0:0:0/96", TRANSLATED, "IPv4-translated (SIIT, RFC 2765): a translator decides where it leads"),
        ROW("64:ff9b::/96", TRANSLATED, "NAT64 (RFC 6052): a translator decides where it leads"),
        ROW("64:ff9b:1::/48", TRANSLATED, "NAT64 local-use prefix (RFC 8215): translated by a local gateway"),
        ROW("100::/64", RESERVED, "discard-only (RFC 6666)"),
        ROW("100:0:0:1::/64", RESERVED, "dummy prefix (RFC 9780)"),
        ROW("2001::/23", RESERVED, "IETF protocol assignments (RFC 2928)"),
        ROW("2001::/32", TRANSLATED, "Teredo (RFC 4380): a tunnel through a relay the proxy cannot see"),
        ROW("2001:2::/48", BENCHMARKING, "network benchmarking (RFC 5180)"),
        ROW("2001:db8::/32", DOCUMENTATION, "documentation (RFC 3849)"),
        ROW("2002::/16", TRANSLATED, "6to4 (RFC 3056): a tunnel through a relay the proxy cannot see"),
        ROW("3fff::/20", DOCUMENTATION, "documentation (RFC 9637)"),
        ROW("5f00::/16", RESERVED, "SRv6 segment identifiers (RFC 9602)"),
        ROW("fc00::/7", PRIVATE, "unique local addresses (RFC 4193)"),
        ROW("fe80::/10", LINK_LOCAL, "link-local"),
        ROW("fec0::/10", PRIVATE, "site-local (deprecated, RFC 3879)"),
        ROW("ff00::/8", MULTICAST, "multicast"),
        /* Global unicast is 2000::/3; nothing public lives outside it. */
        ROW("::/3", RESERVED, "outside IPv6 global unicast (2000::/3)"),
        ROW("4000::/2", RESERVED, "outside IPv6 global unicast (2000::/3)"),
        ROW("8000::/1", RESERVED, "outside IPv6 global unicast (2000::/3)"),
};

const struct egress_addr_rule *egress_addr_rules(size_t *ret_n) {
        *ret_n = ARRAY_SIZE(rules);
        return rules;
}

int egress_cidr_parse(const char *cidr, int *ret_family, uint8_t ret_addr[16], unsigned *ret_prefix) {
        const char *slash = strchr(cidr, '/');
        if (!slash || slash == cidr || (size_t)(slash - cidr) >= INET6_ADDRSTRLEN)
                return -EINVAL;
        char host[INET6_ADDRSTRLEN];
        memcpy(host, cidr, (size_t)(slash - cidr));
        host[slash - cidr] = 0;
        uint8_t a[16] = {0};
        int family = strchr(host, ':') ? AF_INET6 : AF_INET;
        if (inet_pton(family, host, a) != 1)
                return -EINVAL;
        unsigned bits = family == AF_INET ? 32 : 128, prefix = 0;
        const char *p = slash + 1;
        if (!*p || strlen(p) > 3)
                return -EINVAL;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                prefix = prefix * 10 + (unsigned)(*p - '0');
        }
        if (prefix > bits)
                return -EINVAL;
        /* No bits set past the prefix: a block is written as its start. */
        for (unsigned i = prefix; i < bits; i++)
                if (a[i / 8] & (0x80 >> (i % 8)))
                        return -EINVAL;
        *ret_family = family;
        memcpy(ret_addr, a, 16);
        *ret_prefix = prefix;
        return 0;
}

/* The table, parsed once. A row that does not parse makes every address
 * reserved: the table fails closed. */
struct block {
        int family;
        uint8_t addr[16];
        unsigned prefix;
};
static struct block blocks[ARRAY_SIZE(rules)];
static bool blocks_ok;
static pthread_once_t blocks_once = PTHREAD_ONCE_INIT;

static void blocks_compile(void) {
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++)
                if (egress_cidr_parse(rules[i].cidr, &blocks[i].family, blocks[i].addr, &blocks[i].prefix) < 0)
                        return;
        blocks_ok = true;
}

static bool prefix_match(const uint8_t *a, const uint8_t *b, unsigned prefix) {
        unsigned full = prefix / 8, rest = prefix % 8;
        if (memcmp(a, b, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        return (a[full] & mask) == (b[full] & mask);
}

/* The longest block holding a (4 or 16 bytes), or NULL. */
static const struct egress_addr_rule *lookup(int family, const uint8_t *a) {
        const struct egress_addr_rule *best = NULL;
        unsigned best_prefix = 0;
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
                if (blocks[i].family != family || !prefix_match(a, blocks[i].addr, blocks[i].prefix))
                        continue;
                if (!best || blocks[i].prefix > best_prefix) {
                        best = &rules[i];
                        best_prefix = blocks[i].prefix;
                }
        }
        return best;
}

static enum egress_addr_class class_v4(const uint8_t a[4]) {
        const struct egress_addr_rule *r = lookup(AF_INET, a);
        return r ? r->class : EGRESS_ADDR_PUBLIC;
}

static enum egress_addr_class class_v6(const uint8_t a[16]) {
        const struct egress_addr_rule *r = lookup(AF_INET6, a);
        if (!r)
                return EGRESS_ADDR_PUBLIC;
        uint8_t v4[4];
        switch (r->embed) {
        case EGRESS_EMBED_NONE:
                return r->class;
        case EGRESS_EMBED_LAST32:
                memcpy(v4, a + 12, 4);
                break;
        }
        return class_v4(v4) == EGRESS_ADDR_PUBLIC ? EGRESS_ADDR_PUBLIC : EGRESS_ADDR_TRANSLATED;
}

enum egress_addr_class egress_addr_class(const struct sockaddr *sa) {
        (void)pthread_once(&blocks_once, blocks_compile);
        if (!sa || !blocks_ok)
                return EGRESS_ADDR_RESERVED;
        if (sa->sa_family == AF_INET)
                return class_v4((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr);
        if (sa->sa_family == AF_INET6)
                return class_v6(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr);
        return EGRESS_ADDR_RESERVED;
}

const char *egress_addr_class_name(enum egress_addr_class c) {
        static const char *const names[] = {
                [EGRESS_ADDR_PUBLIC] = "public",
                [EGRESS_ADDR_UNSPECIFIED] = "unspecified",
                [EGRESS_ADDR_LOOPBACK] = "loopback",
                [EGRESS_ADDR_PRIVATE] = "private",
                [EGRESS_ADDR_LINK_LOCAL] = "link-local",
                [EGRESS_ADDR_CGNAT] = "carrier-grade NAT",
                [EGRESS_ADDR_DOCUMENTATION] = "documentation",
                [EGRESS_ADDR_BENCHMARKING] = "benchmarking",
                [EGRESS_ADDR_MULTICAST] = "multicast",
                [EGRESS_ADDR_RESERVED] = "reserved",
                [EGRESS_ADDR_TRANSLATED] = "translated non-public",
        };
        return (unsigned)c < ARRAY_SIZE(names) && names[c] ? names[c] : "unknown";
}

/* ---- Names ---- */

static bool ldh(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int egress_name_normalize(const char *s, size_t len, char ret[EGRESS_HOST_MAX + 1]) {
        if (len > 0 && s[len - 1] == '.')
                len--;
        if (len == 0 || len > EGRESS_HOST_MAX)
                return -EINVAL;
        size_t label = 0;
        for (size_t i = 0; i <= len; i++) {
                if (i == len || s[i] == '.') {
                        if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
                                return -EINVAL;
                        label = 0;
                } else if (ldh(s[i]))
                        label++;
                else
                        return -EINVAL;
        }
        for (size_t i = 0; i < len; i++)
                ret[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        ret[len] = 0;
        return 0;
}

/* Special-use and private-use names: a name equal to one of these, or
 * ending in "." and one of these, is internal. */
static const struct {
        const char *suffix, *why;
} internal_suffixes[] = {
        {"localhost", "localhost (RFC 6761): this host"},
        {"localdomain", "the local domain of a host's own names"},
        {"local", "multicast DNS (RFC 6762)"},
        {"internal", "private use (ICANN), cloud-internal names"},
        {"intranet", "private use by convention"},
        {"private", "private use by convention"},
        {"corp", "private use by convention"},
        {"home", "private use by convention"},
        {"lan", "private use by convention"},
        {"home.arpa", "home networks (RFC 8375)"},
        {"arpa", "infrastructure and reverse lookups (in-addr.arpa, ip6.arpa)"},
        {"test", "testing (RFC 6761)"},
        {"invalid", "never a real name (RFC 6761)"},
        {"example", "documentation (RFC 6761)"},
        {"onion", "Tor (RFC 7686)"},
        {"alt", "non-DNS namespaces (RFC 9476)"},
};

const char *egress_name_internal_why(const char *name) {
        if (!name)
                return "no name";
        size_t len = strlen(name);
        if (len > 0 && name[len - 1] == '.')
                len--;
        if (len == 0)
                return "no name";
        for (size_t i = 0; i < ARRAY_SIZE(internal_suffixes); i++) {
                size_t n = strlen(internal_suffixes[i].suffix);
                if (n > len || strncasecmp(name + len - n, internal_suffixes[i].suffix, n) != 0)
                        continue;
                if (n == len || name[len - n - 1] == '.')
                        return internal_suffixes[i].why;
        }
        if (!memchr(name, '.', len))
                return "a single label, which local search domains complete";
        return NULL;
}

bool egress_name_internal(const char *name) {
        return egress_name_internal_why(name) != NULL;
}

/* Whether the last label of s (len bytes, no trailing dot) is a number as a
 * browser reads IPv4 parts: decimal, or 0x and hex digits (WHATWG URL "ends
 * in a number"). No top-level domain is one, so such a name is an address. */
static bool ends_in_number(const char *s, size_t len) {
        size_t start = len;
        while (start > 0 && s[start - 1] != '.')
                start--;
        const char *l = s + start;
        size_t n = len - start;
        if (n == 0)
                return false;
        if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
                for (size_t i = 2; i < n; i++)
                        if (hex_digit(l[i]) < 0)
                                return false;
                return true;
        }
        for (size_t i = 0; i < n; i++)
                if (l[i] < '0' || l[i] > '9')
                        return false;
        return true;
}

/* IPv6 with an optional zone ("%eth0", "%25eth0"). */
static bool is_v6(const char *s, size_t len) {
        char tmp[INET6_ADDRSTRLEN];
        const char *pct = memchr(s, '%', len);
        if (pct)
                len = (size_t)(pct - s);
        if (len == 0 || len >= sizeof tmp)
                return false;
        memcpy(tmp, s, len);
        tmp[len] = 0;
        struct in6_addr a;
        return inet_pton(AF_INET6, tmp, &a) == 1;
}

/* IPv4 in any spelling inet_aton (and so getaddrinfo) or a browser reads:
 * 127.1, 0x7f.1, 0177.0.0.1, 2130706433, 017700000001, a trailing dot. */
static bool is_v4(const char *s, size_t len) {
        if (len > 0 && s[len - 1] == '.')
                len--;
        if (len == 0 || len > 255)
                return false;
        char tmp[256];
        memcpy(tmp, s, len);
        tmp[len] = 0;
        struct in_addr a;
        return inet_aton(tmp, &a) != 0 || ends_in_number(s, len);
}

static bool all_digits(const char *s, size_t len) {
        if (len == 0)
                return false;
        for (size_t i = 0; i < len; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return true;
}

bool egress_is_ip_literal(const char *s) {
        if (!s)
                return false;
        size_t len = strlen(s);
        if (len == 0 || len > 1024)
                return false;
        if (s[0] == '[') {
                const char *close = memchr(s, ']', len);
                if (!close)
                        return false;
                const char *after = close + 1;
                size_t rest = len - (size_t)(after - s);
                if (rest > 0 && !(after[0] == ':' && all_digits(after + 1, rest - 1)))
                        return false;
                size_t n = (size_t)(close - s - 1);
                return is_v6(s + 1, n) || is_v4(s + 1, n);
        }
        if (is_v6(s, len) || is_v4(s, len))
                return true;
        /* host:port */
        const char *colon = strrchr(s, ':');
        if (colon && all_digits(colon + 1, len - (size_t)(colon + 1 - s)))
                return is_v4(s, (size_t)(colon - s)) || is_v6(s, (size_t)(colon - s));
        return false;
}
