/* session-cache.h — browser sessions verified once, kept in memory: the
 * cookie's SHA-256 (never the cookie) → the session's public id, for at most
 * CTL_SESSION_CACHE_TTL_MS after the kernel DB last said it was live, and
 * never past its expiry. A miss (unknown, too old) asks the DB again
 * (db_session_touch, which also renews the session): so a session is renewed
 * as before (at most once a minute), and across kernel restarts, which start
 * with an empty cache, nothing is weaker than asking the DB every time.
 *
 * Revocation and sign-out take effect at once: they go through this kernel's
 * own API (routes.c; nothing else revokes a session, neither the CLI nor
 * another process), which calls ctl_session_cache_forget() once the DB row is
 * revoked. An answer the DB gave before a forget is never cached after it
 * (the epoch). A row revoked behind the kernel's back (by hand, in the DB)
 * stops working within the TTL.
 *
 * Bounded: CTL_SESSION_CACHE_SIZE entries; only sessions the DB confirmed
 * are cached (a stream of made-up cookies adds nothing), the least recently
 * verified is replaced. Thread-safe; nothing here logs. */
#pragma once

#include "base/base.h"
#include "base/crypto.h"

#include <pthread.h>

#define CTL_SESSION_CACHE_SIZE 64
#define CTL_SESSION_CACHE_TTL_MS 10000
#define CTL_SESSION_ID_MAX 64

struct ctl_session_cache_entry {
        bool used;
        char hash[SHA256_HEX_LEN + 1];       /* of the cookie value */
        char id[CTL_SESSION_ID_MAX + 1];     /* the public id */
        int64_t checked_ms;                  /* wall_ms() when the DB said it was live */
        int64_t expires_ms;                  /* its expiry then */
};

struct ctl_session_cache {
        pthread_mutex_t lock;
        uint64_t epoch;                      /* bumped by every forget */
        struct ctl_session_cache_entry e[CTL_SESSION_CACHE_SIZE];
};

void ctl_session_cache_init(struct ctl_session_cache *c);
/* Wipes every entry (and destroys the lock). */
void ctl_session_cache_done(struct ctl_session_cache *c);
/* The id of the live session whose cookie hashes to hash, copied into
 * ret_id, if it was verified less than the TTL before now and has not
 * expired; else -ENOENT. */
int ctl_session_cache_get(struct ctl_session_cache *c, const char *hash, int64_t now,
                          char ret_id[CTL_SESSION_ID_MAX + 1]);
/* Read before asking the DB; hand it to put. */
uint64_t ctl_session_cache_epoch(struct ctl_session_cache *c);
/* Remembers that the DB said, at now, that the session id (cookie hash
 * hash) lives until expires_ms. Nothing is kept when a forget happened since
 * epoch was read, or when id is too long. */
void ctl_session_cache_put(struct ctl_session_cache *c, const char *hash, const char *id, int64_t now,
                           int64_t expires_ms, uint64_t epoch);
/* Drops the session id (revoked, signed out), at once. */
void ctl_session_cache_forget(struct ctl_session_cache *c, const char *id);
