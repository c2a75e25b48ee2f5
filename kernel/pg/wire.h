/* wire.h — the few pieces of PostgreSQL's wire protocol the relay reads
 * (relay.c): a client's startup packet, checked against what this Seed's
 * sandboxes may open, and the server's offer of SASL mechanisms. Pure
 * functions over bounded buffers from outside (a sandbox, the server):
 * unit-tested and fuzzed (tests/fuzz/fuzz-pg-wire.c). */
#pragma once

#include "base/base.h"

#define PG_WIRE_STARTUP_MAX 10000 /* PostgreSQL's own MAX_STARTUP_PACKET_LENGTH */
#define PG_WIRE_CODE_CANCEL 80877102u
#define PG_WIRE_CODE_SSL 80877103u
#define PG_WIRE_CODE_GSSENC 80877104u

/* Who may pass: this Seed's roles and its previews' (names starting with
 * copy_prefix), and its databases (names starting with db_prefix) except its
 * kernel's. All borrowed. */
struct pg_wire_who {
        const char *const *users;
        size_t n_users;
        const char *copy_prefix;
        const char *db_prefix;
        const char *kernel_db;
};

/* A whole startup packet (length word included, len bytes): 0 when it is a
 * protocol-3 startup of one of who's users, for one of who's databases, not
 * for replication; -EPERM otherwise, -EBADMSG when malformed; *ret_why (a
 * static string) says why in both cases. */
int pg_wire_startup_check(const unsigned char *pkt, size_t len, const struct pg_wire_who *who, const char **ret_why);
/* A whole server message (type byte, length word, body; n bytes): when it is
 * AuthenticationSASL, SCRAM-SHA-256-PLUS is taken out of its list of
 * mechanisms, in place, and *ret_n is the new size; any other message is
 * left as it is. -EBADMSG when it is not well formed. */
int pg_wire_drop_scram_plus(unsigned char *msg, size_t n, size_t *ret_n);
