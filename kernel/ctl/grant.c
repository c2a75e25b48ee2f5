/* One-time tickets and grants bound to the owner's session (see grant.h). */
#include "ctl/grant.h"
#include "ctl/cookie.h"
#include "base/crypto.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A free (or expired, or else the oldest) slot. */
static struct ctl_grant *slot(struct ctl_grant *g, size_t n, int64_t now) {
        struct ctl_grant *best = &g[0];
        for (size_t i = 0; i < n; i++) {
                if (!g[i].hash[0] || g[i].expires_ms <= now)
                        return &g[i];
                if (g[i].expires_ms < best->expires_ms)
                        best = &g[i];
        }
        return best;
}

struct ctl_grant *ctl_grant_find(struct ctl_grant *g, size_t n, const char *value, int64_t now_ms) {
        char h[65];
        crypto_sha256_hex(value, strlen(value), h);
        struct ctl_grant *hit = NULL;
        for (size_t i = 0; i < n; i++) /* every slot: the time does not say which matched */
                if (g[i].hash[0] && g[i].expires_ms > now_ms && crypto_streq_ct(g[i].hash, h))
                        hit = &g[i];
        return hit;
}

int ctl_grant_mint(struct ctl_grant *g, size_t n, const char *session, int64_t ttl_ms, int64_t now_ms, char **ret) {
        _cleanup_free_ char *value = NULL;
        int r = crypto_random_hex(CTL_COOKIE_VALUE_BYTES, &value);
        if (r < 0)
                return r;
        struct ctl_grant *s = slot(g, n, now_ms);
        crypto_sha256_hex(value, strlen(value), s->hash);
        snprintf(s->session, sizeof s->session, "%s", session);
        s->expires_ms = now_ms + ttl_ms;
        *ret = TAKE_PTR(value);
        return 0;
}

void ctl_grant_forget(struct ctl_grant *g, size_t n, const char *session) {
        for (size_t i = 0; i < n; i++)
                if (streq(g[i].session, session))
                        g[i] = (struct ctl_grant){0};
}
