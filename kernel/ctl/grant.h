#pragma once
/* One-time tickets and the grants they open (the badge's presence, the
 * owner's preview): a fixed table of slots, each the SHA-256 of a random
 * value handed to the owner's browser (never the value itself), bound to the
 * owner's session and expiring. The owner of the table (ctl/badge.c,
 * ctl/preview.c) holds its lock around every call. */

#include <stddef.h>
#include <stdint.h>

struct ctl_grant {
        char hash[65];    /* sha256 of the value (ticket or cookie), "" = free */
        char session[65]; /* the owner's session's public id */
        int64_t expires_ms;
};

/* The live entry of g whose hash is that of value, or NULL. */
struct ctl_grant *ctl_grant_find(struct ctl_grant *g, size_t n, const char *value, int64_t now_ms);
/* A new random value (hex, CTL_COOKIE_VALUE_BYTES) whose hash goes into a
 * free, expired or else the oldest slot of g, bound to session for ttl_ms.
 * *ret: the value, caller frees. */
int ctl_grant_mint(struct ctl_grant *g, size_t n, const char *session, int64_t ttl_ms, int64_t now_ms, char **ret);
/* Empties every slot of g bound to session. */
void ctl_grant_forget(struct ctl_grant *g, size_t n, const char *session);
