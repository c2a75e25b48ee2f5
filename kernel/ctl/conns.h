/* conns.h — the server's connections, in three pools, so that no kind of
 * client can take the room another kind needs.
 *
 * Every connection (over every listening socket: one table per struct ctl)
 * is in exactly one pool:
 *  - anonymous: no request on it has authenticated yet, and none is being
 *    proxied. Capped per client (an IPv4 address, an IPv6 /48, see limit.h)
 *    and in total. A connection entering the pool over a cap does not wait
 *    and is not refused: the OLDEST anonymous connection (of that client, or
 *    of all) is cut instead. A slowloris only cuts itself; a client that
 *    sends its request at once (the CLI, the owner's browser) gets through.
 *  - owner: a request on it carried the CLI token or a signed-in session.
 *    Bounded only by the total, which always leaves room for it: anonymous
 *    plus proxied caps stay below the total (ctl_conns_new checks it).
 *  - proxied: a request on it is being proxied to the organism (held
 *    organism answers must not lock out /_seed). Bounded; past the cap
 *    ctl_conns_proxy_begin refuses, and the caller answers 503 at once.
 *    When the request ends the connection goes back to the owner pool if it
 *    ever authenticated, else to the anonymous pool.
 * Besides, every connection's request head must be complete within head_ms
 * of the connection's start or of the end of its previous request (a total
 * deadline: a head trickled a byte at a time is cut too): ctl_conns_reap.
 *
 * Cutting means calling the cut function with the connection's socket, under
 * the table's lock: it shuts the socket down (never closes it; its owner,
 * libmicrohttpd, closes it after ctl_conns_close, so the fd cannot be reused
 * while the table holds it). A cut connection is in no pool and counts for
 * nothing, though it keeps its entry until ctl_conns_close.
 *
 * Connections are named by the id ctl_conns_open gives; an id that is closed
 * (or 0) is ignored by every call, so a late call cannot touch another
 * connection. Nothing here logs or reads a clock; the table locks itself. */
#pragma once

#include "ctl/limit.h"

#include <stdint.h>

#define CTL_ANON_PER_CLIENT 16

enum ctl_pool { CTL_POOL_ANON, CTL_POOL_OWNER, CTL_POOL_PROXIED, CTL_POOL_N };

struct ctl_conns_limits {
        unsigned total;            /* live connections in all (>= 3) */
        unsigned anon;             /* anonymous ones in all (>= 1) */
        unsigned anon_per_client;  /* anonymous ones per client (>= 1) */
        unsigned proxied;          /* proxied ones (>= 1); anon + proxied < total */
        int64_t head_ms;           /* the head deadline (>= 1) */
};

/* Shuts fd down (called under the table's lock; fd stays open). */
typedef void (*ctl_conns_cut_fn)(void *userdata, int fd);

struct ctl_conns;

/* cut and userdata are borrowed for the table's life. */
int ctl_conns_new(const struct ctl_conns_limits *lim, ctl_conns_cut_fn cut, void *userdata,
                  struct ctl_conns **ret);
void ctl_conns_free(struct ctl_conns *t);

/* Whether a new connection could be counted: false only when the total is
 * reached and no connection is anonymous (nothing to cut for it). */
bool ctl_conns_admit(struct ctl_conns *t);

/* What a call cut, the first time since the pool last had room (to log once
 * per flood): a client's own anonymous connections, anonymous ones in all,
 * the total. */
enum {
        CTL_CONNS_CUT_CLIENT = 1 << 0,
        CTL_CONNS_CUT_ANON = 1 << 1,
        CTL_CONNS_CUT_TOTAL = 1 << 2,
};

/* Counts a new connection on socket fd (borrowed), anonymous, its head due
 * by now_ms + head_ms, and cuts what the caps say. client NULL: not capped
 * per client (a peer that may be a trusted proxy: its clients share its
 * address). Returns the CTL_CONNS_CUT_* to report (>= 0) and *ret_id;
 * -ENOSPC when the table has no entry left (too many cut connections not yet
 * closed): then nothing is counted and the caller shuts fd down itself. */
int ctl_conns_open(struct ctl_conns *t, const struct ctl_client *client, int fd, int64_t now_ms,
                   uint64_t *ret_id);
/* The connection closed: uncounted, its id forgotten. */
void ctl_conns_close(struct ctl_conns *t, uint64_t id);

/* Its request head is complete: no head deadline until the request ends. */
void ctl_conns_head_done(struct ctl_conns *t, uint64_t id);
/* Its request ended: the next head is due by now_ms + head_ms. */
void ctl_conns_request_done(struct ctl_conns *t, uint64_t id, int64_t now_ms);
/* A request on it authenticated: it leaves the anonymous pool for good. */
void ctl_conns_authenticated(struct ctl_conns *t, uint64_t id);

/* A request on it is about to be proxied: moves it to the proxied pool and
 * fills *ret_ticket (for ctl_conns_proxy_end). -EBUSY when that pool is full
 * (*ret_report set the first time since it had room), -ENOENT for a closed
 * or cut connection: nothing changes. */
int ctl_conns_proxy_begin(struct ctl_conns *t, uint64_t id, uint64_t *ret_ticket, bool *ret_report);
/* The proxied request of that ticket ended (any other ticket is ignored):
 * back to the owner or the anonymous pool, cutting as ctl_conns_open does.
 * Returns the CTL_CONNS_CUT_* to report. */
int ctl_conns_proxy_end(struct ctl_conns *t, uint64_t id, uint64_t ticket);

/* Cuts every connection whose head deadline passed by now_ms. Returns how
 * many; *ret_next_ms is the next deadline (INT64_MAX if none). */
unsigned ctl_conns_reap(struct ctl_conns *t, int64_t now_ms, int64_t *ret_next_ms);

/* Live (not cut) connections in pool (CTL_POOL_N: any), of client (NULL:
 * any; a client counts only its capped connections). */
unsigned ctl_conns_count(struct ctl_conns *t, enum ctl_pool pool, const struct ctl_client *client);
