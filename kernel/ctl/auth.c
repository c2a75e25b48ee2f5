/* auth.c — one-time sign-in links and browser sessions, stored in the kernel
 * DB as SHA-256 hashes only: a leaked database grants nothing. */
#include "ctl/server.h"
#include "ctl/cookie.h"
#include "base/crypto.h"
#include "base/log.h"
#include "db/db.h"

#include <ctype.h>
#include <sys/socket.h>

#define LINK_TOKEN_BYTES 32      /* 256 bits */
#define SESSION_ID_BYTES 16
#define MAX_COOKIE_CANDIDATES 4  /* an organism may toss extra cookies of our name */
#define MAX_USER_AGENT 200
#define MAX_XFF_HEADERS 16       /* the last ones: the right-most entries are what counts */

static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;

int ctl_login_link_new(struct db *kdb, char **ret_token) {
        _cleanup_free_ char *token = NULL;
        char hash[SHA256_HEX_LEN + 1];
        int64_t now = wall_ms();
        int r;

        if (!kdb)
                return -EINVAL;
        pthread_mutex_lock(&link_lock);
        r = db_link_prune(kdb, now);
        if (r >= 0)
                r = db_link_count_live(kdb, now);
        if (r >= CTL_MAX_LIVE_LINKS) {
                log_warn("refusing a new sign-in link: %d links are live already (at most %d); "
                         "use one or wait until they expire",
                         r, CTL_MAX_LIVE_LINKS);
                r = -EMFILE;
                goto out;
        }
        if (r >= 0)
                r = crypto_random_hex(LINK_TOKEN_BYTES, &token);
        if (r >= 0) {
                crypto_sha256_hex(token, strlen(token), hash);
                r = db_link_insert(kdb, hash, now + CTL_LINK_TTL_MS);
        }
        if (r < 0) {
                log_error_errno(r, "could not create a sign-in link: %m");
                goto out;
        }
        *ret_token = TAKE_PTR(token);
        r = 0;
out:
        pthread_mutex_unlock(&link_lock);
        return r;
}

int ctl_link_consume(struct db *kdb, const char *token) {
        char hash[SHA256_HEX_LEN + 1];
        size_t n = token ? strlen(token) : 0;
        if (n < 32 || n > 256 || !ctl_is_hex(token, n))
                return -ENOENT;
        crypto_sha256_hex(token, n, hash);
        int r = db_link_consume(kdb, hash, wall_ms());
        if (r < 0 && r != -ENOENT)
                return log_error_errno(r, "could not check a sign-in link: %m");
        return r < 0 ? r : 0;
}

/* The User-Agent kept with a session (for the sessions list): printable
 * ASCII only, cut short. Caller frees. */
static char *clean_user_agent(const char *ua) {
        char *s = strndup(ua ? ua : "", MAX_USER_AGENT);
        for (char *p = s; p && *p; p++)
                if (!isprint((unsigned char)*p))
                        *p = '?';
        return s;
}

int ctl_session_new(struct db *kdb, const char *user_agent, char **ret_cookie, char **ret_id) {
        _cleanup_free_ char *cookie = NULL, *id = NULL, *ua = clean_user_agent(user_agent);
        char hash[SHA256_HEX_LEN + 1];
        int64_t now = wall_ms();
        int r;

        if (!ua)
                return -ENOMEM;
        r = crypto_random_hex(CTL_COOKIE_VALUE_BYTES, &cookie);
        if (r >= 0)
                r = crypto_random_hex(SESSION_ID_BYTES, &id);
        if (r < 0)
                return log_error_errno(r, "could not create a session: %m");
        crypto_sha256_hex(cookie, strlen(cookie), hash);
        r = db_session_insert(kdb, id, hash, ua, now, now + CTL_SESSION_MAX_AGE_S * 1000LL);
        if (r < 0)
                return log_error_errno(r, "could not store a session: %m");
        *ret_cookie = TAKE_PTR(cookie);
        *ret_id = TAKE_PTR(id);
        return 0;
}

/* The session of one cookie value: 0 with *ret_id (caller frees), -ENOENT,
 * or another -errno (logged). */
static int session_of(struct db *kdb, struct ctl_session_cache *cache, const char *value, int64_t now,
                      char **ret_id) {
        char hash[SHA256_HEX_LEN + 1], id[CTL_SESSION_ID_MAX + 1];
        crypto_sha256_hex(value, strlen(value), hash);
        if (ctl_session_cache_get(cache, hash, now, id) == 0) {
                char *d = strdup(id);
                if (!d)
                        return -ENOMEM;
                *ret_id = d;
                return 0;
        }
        uint64_t epoch = ctl_session_cache_epoch(cache);
        struct db_session s = {0};
        int r = db_session_touch(kdb, hash, now, now + CTL_SESSION_MAX_AGE_S * 1000LL, &s);
        if (r == -ENOENT)
                return r;
        if (r < 0)
                return log_error_errno(r, "could not look up a session: %m");
        ctl_session_cache_put(cache, hash, s.id, now, s.expires_at, epoch);
        *ret_id = TAKE_PTR(s.id);
        db_session_done(&s);
        return 0;
}

int ctl_session_find(struct db *kdb, struct ctl_session_cache *cache, const struct ctl_hdrs *hdrs,
                     const char *cookie_name, char **ret_cookie, char **ret_id) {
        size_t tried = 0;
        int64_t now = wall_ms();

        if (!kdb)
                return -ENOENT;
        for (size_t i = 0; i < hdrs->n && tried < MAX_COOKIE_CANDIDATES; i++) {
                if (!ctl_strcaseeq(hdrs->v[i].name, "Cookie"))
                        continue;
                _cleanup_strv_free_ char **values = NULL;
                int r = ctl_cookie_values(hdrs->v[i].value, cookie_name,
                                          MAX_COOKIE_CANDIDATES - tried, &values);
                if (r < 0)
                        return r;
                for (char **v = values; *v; v++, tried++) {
                        _cleanup_free_ char *id = NULL;
                        r = session_of(kdb, cache, *v, now, &id);
                        if (r == -ENOENT)
                                continue;
                        if (r < 0)
                                return r;
                        _cleanup_free_ char *cookie = strdup(*v);
                        if (!cookie)
                                return -ENOMEM;
                        *ret_id = TAKE_PTR(id);
                        *ret_cookie = TAKE_PTR(cookie);
                        return 0;
                }
                for (char **v = values; *v; v++)
                        secure_zero(*v, strlen(*v));
        }
        return -ENOENT;
}

int ctl_session_revoke(struct db *kdb, struct ctl_session_cache *cache, const char *id) {
        int r = db_session_revoke(kdb, id);
        /* After the DB: a lookup that read the row before this point is not
         * cached past it (session-cache.h, the epoch). */
        ctl_session_cache_forget(cache, id);
        return r;
}

void ctl_req_client(const struct ctl_req *q, struct ctl_client *ret) {
        char *xff[MAX_XFF_HEADERS];
        size_t n = 0;
        for (size_t i = 0; i < q->hdrs.n; i++) {
                if (!ctl_strcaseeq(q->hdrs.v[i].name, "X-Forwarded-For"))
                        continue;
                if (n == MAX_XFF_HEADERS) {
                        memmove(xff, xff + 1, (n - 1) * sizeof xff[0]);
                        n--;
                }
                xff[n++] = q->hdrs.v[i].value;
        }
        if (ctl_client_of(&q->ctl->proxies, q->client_ip, xff, n, ret) < 0) {
                /* Not an IP peer (never for TCP): one shared client, so the
                 * limits still hold. */
                struct ctl_ip none = {.family = AF_INET};
                ctl_client_from_ip(&none, ret);
        }
}
