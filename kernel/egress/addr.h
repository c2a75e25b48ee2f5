/* addr.h — what the proxy knows about addresses and names, as data: the
 * table behind egress_addr_class() (each row a CIDR block with its class and
 * why), and the name rules behind egress_name_internal() and
 * egress_is_ip_literal() (declared in egress.h). Pure functions, no state
 * beyond the table compiled once; thread-safe. */
#pragma once

#include "egress/egress.h"

/* Whether, and how, a block's addresses carry an IPv4 address that decides
 * their class. */
enum egress_embed {
        EGRESS_EMBED_NONE,
        EGRESS_EMBED_LAST32, /* the last 32 bits: IPv4-mapped (an IPv4 connection to them) */
};

struct egress_addr_rule {
        const char *cidr;             /* "10.0.0.0/8", "fc00::/7" */
        enum egress_addr_class class; /* an embedding block: EGRESS_ADDR_TRANSLATED */
        enum egress_embed embed;
        const char *why;
};

/* The table (static, borrowed). The longest block that holds an address
 * decides; an address in no block is public. */
const struct egress_addr_rule *egress_addr_rules(size_t *ret_n);

/* A block of the table, parsed: 0, or -EINVAL. ret_addr gets 4 or 16 bytes. */
int egress_cidr_parse(const char *cidr, int *ret_family, uint8_t ret_addr[16], unsigned *ret_prefix);

/* Normalises the len bytes at s as a DNS host name: labels of letters,
 * digits and inner hyphens, 1..63 bytes each, lowercased, one trailing dot
 * dropped, at most EGRESS_HOST_MAX bytes. Writes it to ret (NUL-terminated)
 * and returns 0, or -EINVAL (ret untouched). Says nothing about IP literals
 * ("127.1" is well-formed here) or internal names: check those too. */
int egress_name_normalize(const char *s, size_t len, char ret[EGRESS_HOST_MAX + 1]);

/* Why name is internal (a static text), or NULL when it is not. */
const char *egress_name_internal_why(const char *name);
