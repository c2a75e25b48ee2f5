/* conns.h — how many connections each client holds open at once.
 *
 * A client that opens connections and never finishes a request holds each
 * one (and its thread) until the head timeout; without a cap one address
 * could take every connection the server has. A client is what limit.h says
 * (an IPv4 address, an IPv6 /48). Peers that may be trusted proxies are not
 * counted: behind them every client shares their address (see
 * ctl_proxies_trusts), so the proxy in front has to limit its own clients.
 *
 * The table holds one entry per client with a connection open; it is sized
 * for the server's connection limit, so it cannot fill while that limit
 * holds. Nothing here does I/O or logs; the table locks itself. */
#pragma once

#include "ctl/limit.h"

#define CTL_CONNS_PER_CLIENT 16

struct ctl_conns;

/* A table for at most max_clients clients with connections open (>= 1),
 * each allowed per_client of them (>= 1). */
int ctl_conns_new(unsigned per_client, size_t max_clients, struct ctl_conns **ret);
void ctl_conns_free(struct ctl_conns *t);

enum ctl_conns_verdict {
        CTL_CONNS_OK,          /* fewer than per_client open: accept */
        CTL_CONNS_FULL,        /* refuse; already reported for this client */
        CTL_CONNS_FULL_FIRST,  /* refuse; the first refusal since the client had room (log it) */
};

/* Before accepting a connection from c. Changes nothing but the "reported"
 * mark, which clears once the client is back under half its cap. */
enum ctl_conns_verdict ctl_conns_check(struct ctl_conns *t, const struct ctl_client *c);
/* Counts a connection that opened. -ENOSPC when the table is full: the
 * connection is then not counted, and must not be passed to
 * ctl_conns_close. */
int ctl_conns_open(struct ctl_conns *t, const struct ctl_client *c);
/* Uncounts a connection that ctl_conns_open counted. */
void ctl_conns_close(struct ctl_conns *t, const struct ctl_client *c);
/* How many connections c has open. */
unsigned ctl_conns_count(struct ctl_conns *t, const struct ctl_client *c);
