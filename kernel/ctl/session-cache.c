/* session-cache.c — see session-cache.h. */
#include "ctl/session-cache.h"

void ctl_session_cache_init(struct ctl_session_cache *c) {
        *c = (struct ctl_session_cache){0};
        pthread_mutex_init(&c->lock, NULL);
}

void ctl_session_cache_done(struct ctl_session_cache *c) {
        if (!c)
                return;
        secure_zero(c->e, sizeof c->e);
        pthread_mutex_destroy(&c->lock);
}

static bool fresh(const struct ctl_session_cache_entry *e, int64_t now) {
        return e->used && now >= e->checked_ms && now - e->checked_ms < CTL_SESSION_CACHE_TTL_MS &&
               now < e->expires_ms;
}

int ctl_session_cache_get(struct ctl_session_cache *c, const char *hash, int64_t now,
                          char ret_id[CTL_SESSION_ID_MAX + 1]) {
        int r = -ENOENT;
        if (!hash || strlen(hash) != SHA256_HEX_LEN)
                return r;
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < CTL_SESSION_CACHE_SIZE; i++) {
                struct ctl_session_cache_entry *e = &c->e[i];
                /* Both digests of SHA256_HEX_LEN: compared as they are. */
                if (!e->used || !crypto_memeq_ct(e->hash, hash, SHA256_HEX_LEN))
                        continue;
                if (fresh(e, now)) {
                        memcpy(ret_id, e->id, sizeof e->id);
                        r = 0;
                } else
                        secure_zero(e, sizeof *e);
                break;
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

uint64_t ctl_session_cache_epoch(struct ctl_session_cache *c) {
        pthread_mutex_lock(&c->lock);
        uint64_t e = c->epoch;
        pthread_mutex_unlock(&c->lock);
        return e;
}

void ctl_session_cache_put(struct ctl_session_cache *c, const char *hash, const char *id, int64_t now,
                           int64_t expires_ms, uint64_t epoch) {
        if (!hash || strlen(hash) != SHA256_HEX_LEN || !id || strlen(id) > CTL_SESSION_ID_MAX)
                return;
        pthread_mutex_lock(&c->lock);
        if (epoch == c->epoch) {
                /* The same cookie's entry, else a free one, else the least
                 * recently verified. */
                struct ctl_session_cache_entry *slot = NULL;
                for (size_t i = 0; i < CTL_SESSION_CACHE_SIZE && !slot; i++)
                        if (c->e[i].used && streq(c->e[i].hash, hash))
                                slot = &c->e[i];
                for (size_t i = 0; i < CTL_SESSION_CACHE_SIZE && !slot; i++)
                        if (!c->e[i].used)
                                slot = &c->e[i];
                if (!slot) {
                        slot = &c->e[0];
                        for (size_t i = 1; i < CTL_SESSION_CACHE_SIZE; i++)
                                if (c->e[i].checked_ms < slot->checked_ms)
                                        slot = &c->e[i];
                }
                *slot = (struct ctl_session_cache_entry){.used = true, .checked_ms = now, .expires_ms = expires_ms};
                memcpy(slot->hash, hash, sizeof slot->hash);
                snprintf(slot->id, sizeof slot->id, "%s", id);
        }
        pthread_mutex_unlock(&c->lock);
}

void ctl_session_cache_forget(struct ctl_session_cache *c, const char *id) {
        pthread_mutex_lock(&c->lock);
        c->epoch++;
        for (size_t i = 0; id && i < CTL_SESSION_CACHE_SIZE; i++)
                if (c->e[i].used && streq(c->e[i].id, id))
                        secure_zero(&c->e[i], sizeof c->e[i]);
        pthread_mutex_unlock(&c->lock);
}
