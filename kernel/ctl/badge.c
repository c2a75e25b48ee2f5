/* badge.c — the owner's badge and point and ask. See badge.h. */
#include "ctl/badge.h"
#include "ctl/ctl.h"
#include "ctl/cookie.h"
#include "ctl/grant.h"
#include "ctl/guard.h"
#include "ctl/server.h"
#include "ask/drafts.h"
#include "base/buf.h"
#include "base/crypto.h"
#include "base/json.h"
#include "base/log.h"
#include "db/db.h"

#include <ctype.h>
#include <pthread.h>

void ctl_badge_init(struct ctl *c) {
        struct ctl_badge *b = &c->badge;
        *b = (struct ctl_badge){.on = true};
        pthread_mutex_init(&b->lock, NULL);
        _cleanup_free_ char *v = NULL;
        int r = c->kdb ? db_setting_get(c->kdb, CTL_BADGE_SETTING, &v) : -ENOENT;
        if (r >= 0)
                b->on = !streq(v, "off");
        else if (r != -ENOENT)
                log_error_errno(r, "could not read whether the owner's badge is on (it stays on): %m");
}

void ctl_badge_done(struct ctl *c) {
        pthread_mutex_destroy(&c->badge.lock);
}

bool ctl_badge_on(struct ctl *c) {
        pthread_mutex_lock(&c->badge.lock);
        bool on = c->badge.on;
        pthread_mutex_unlock(&c->badge.lock);
        return on;
}

int ctl_badge_cookie_name(const struct ctl *c, char *out, size_t n) {
        int k = snprintf(out, n, "%s_badge", c->cookie_name);
        return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

bool ctl_badge_path_ok(const char *s) {
        static const char path_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                         "-._~!$&'()*+,;=:@%/";
        size_t n = s ? strlen(s) : 0;
        return n >= 1 && n <= CTL_BADGE_PATH_MAX && s[0] == '/' && s[1] != '/' && s[1] != '\\' &&
               strspn(s, path_chars) == n && !startswith(s, "/_seed");
}

void ctl_badge_forget_session(struct ctl *c, const char *session_id) {
        if (!c || !session_id)
                return;
        struct ctl_badge *b = &c->badge;
        pthread_mutex_lock(&b->lock);
        ctl_grant_forget(b->grants, CTL_BADGE_GRANTS, session_id);
        ctl_grant_forget(b->tickets, CTL_BADGE_TICKETS, session_id);
        pthread_mutex_unlock(&b->lock);
}

bool ctl_badge_present(struct ctl *c, const struct ctl_req *q) {
        const char *cookie = ctl_req_header(q, "Cookie");
        char name[64];
        if (!cookie || ctl_badge_cookie_name(c, name, sizeof name) < 0)
                return false;
        _cleanup_strv_free_ char **values = NULL;
        if (ctl_cookie_values(cookie, name, 4, &values) < 0)
                return false;
        bool yes = false;
        struct ctl_badge *b = &c->badge;
        pthread_mutex_lock(&b->lock);
        int64_t now = now_ms();
        for (char **v = values; b->on && v && *v && !yes; v++)
                yes = ctl_grant_find(b->grants, CTL_BADGE_GRANTS, *v, now) != NULL;
        pthread_mutex_unlock(&b->lock);
        return yes;
}

static int no_store(struct ctl_resp *resp) {
        return ctl_hdrs_add(&resp->hdrs, "Cache-Control", "no-store");
}

int ctl_badge_h_answer(struct ctl_req *q, struct ctl_resp *resp) {
        bool yes = ctl_badge_present(q->ctl, q);
        int r = ctl_resp_set(resp, yes ? 200 : 204, yes ? "text/plain; charset=utf-8" : NULL, yes ? "yes\n" : "");
        return r < 0 ? r : no_store(resp);
}

int ctl_badge_h_script(struct ctl_req *q, struct ctl_resp *resp) {
        if (!ctl_badge_on(q->ctl))
                return ctl_resp_set(resp, 404, "text/plain; charset=utf-8", "The owner's badge is off.\n");
        int r = ctl_static_file(strrchr(q->path, '/') + 1, resp);
        if (r == -ENOENT)
                return ctl_resp_set(resp, 404, "text/plain; charset=utf-8", "Not found\n");
        return r < 0 ? r : no_store(resp);
}

static int set_cookie(struct ctl_req *q, struct ctl_resp *resp, const char *value, long max_age) {
        char name[64];
        _cleanup_free_ char *header = NULL;
        if (ctl_badge_cookie_name(q->ctl, name, sizeof name) < 0 ||
            xasprintf(&header, "%s=%s; Path=/_seed/; HttpOnly; SameSite=Strict; Max-Age=%ld", name, value,
                      max_age) < 0)
                return -ENOMEM;
        return ctl_hdrs_add(&resp->hdrs, "Set-Cookie", header);
}

/* The value of key in a query string, if it is there (borrowed, raw). */
static const char *query_raw(const char *query, const char *key, size_t *ret_len) {
        size_t kl = strlen(key);
        for (const char *p = query; p && *p;) {
                size_t n = strcspn(p, "&");
                if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
                        *ret_len = n - kl - 1;
                        return p + kl + 1;
                }
                p += n + (p[n] == '&');
        }
        return NULL;
}

int ctl_badge_h_enter(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_badge *b = &c->badge;
        size_t tl = 0;
        const char *t = query_raw(q->query, "t", &tl);
        _cleanup_free_ char *to = NULL, *ticket = t ? strndup(t, tl) : NULL;
        int r = ctl_query_get(q->query, "to", &to);
        if (r == -ENOMEM || (t && !ticket))
                return -ENOMEM;
        if (r < 0 && !(to = strdup("/")))
                return -ENOMEM;
        if (!ticket || !ctl_is_hex(ticket, 2 * CTL_COOKIE_VALUE_BYTES) || !ctl_badge_path_ok(to))
                return ctl_resp_set(resp, 400, "text/plain; charset=utf-8", "This link to the app is not valid.\n");
        _cleanup_free_ char *grant = NULL;
        int m = 0;
        pthread_mutex_lock(&b->lock);
        struct ctl_grant *tk = b->on ? ctl_grant_find(b->tickets, CTL_BADGE_TICKETS, ticket, now_ms()) : NULL;
        if (tk) {
                char session[65];
                snprintf(session, sizeof session, "%s", tk->session);
                *tk = (struct ctl_grant){0}; /* one use */
                m = ctl_grant_mint(b->grants, CTL_BADGE_GRANTS, session, CTL_BADGE_MAX_AGE_S * 1000LL, now_ms(), &grant);
        }
        pthread_mutex_unlock(&b->lock);
        secure_zero(ticket, strlen(ticket));
        if (m < 0)
                return m;
        r = ctl_resp_set(resp, 303, "text/plain; charset=utf-8", "The app\n");
        if (r >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "Location", to);
        if (r >= 0)
                r = no_store(resp);
        if (r >= 0 && grant) {
                log_info("a browser of the owner's has the badge on the app's origin");
                r = set_cookie(q, resp, grant, CTL_BADGE_MAX_AGE_S);
        }
        /* A used or expired ticket still leads to the app, only without the badge. */
        if (grant)
                secure_zero(grant, strlen(grant));
        return r;
}

/* The request's JSON object body, or NULL (not JSON, not an object). */
static json_t *body_object(const struct ctl_req *q) {
        json_t *j = q->body.data ? json_loadb(q->body.data, q->body.len, JSON_REJECT_DUPLICATES, NULL) : NULL;
        if (j && !json_is_object(j)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* POST {} or {"to": "/path"}: {"url"} to open as a top-level navigation;
 * with the badge on it carries a ticket. */
int ctl_badge_h_ticket(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_badge *b = &c->badge;
        if (!q->session_id)
                return ctl_resp_error(resp, 400, "the badge is for a browser: sign in to the control plane");
        _cleanup_free_ char *ticket = NULL, *origin = NULL, *json = NULL;
        _cleanup_json_ json_t *body = body_object(q);
        json_t *tv = body ? json_object_get(body, "to") : NULL;
        const char *to = tv ? json_string_value(tv) : "/";
        if (!body || json_object_size(body) > (tv ? 1u : 0u))
                return ctl_resp_error(resp, 400, "the body must be {} or {\"to\": \"/a/path\"}");
        if (!ctl_badge_path_ok(to))
                return ctl_resp_error(resp, 400, "to must be a path of the app: \"/\" and path characters, at most 200");
        int r = 0;
        pthread_mutex_lock(&b->lock);
        if (b->on)
                r = ctl_grant_mint(b->tickets, CTL_BADGE_TICKETS, q->session_id, CTL_BADGE_TICKET_TTL_MS, now_ms(), &ticket);
        pthread_mutex_unlock(&b->lock);
        if (r < 0)
                return r;
        if (ctl_app_origin(q, &origin) < 0)
                return -ENOMEM;
        /* to is a path: its '&', '=', '+' and '%' are percent-encoded in the query */
        char to_q[CTL_BADGE_PATH_MAX * 3 + 1];
        size_t w = 0;
        for (const char *p = to; *p; p++)
                if (isalnum((unsigned char)*p) || strchr("-._~/", *p))
                        to_q[w++] = *p;
                else
                        w += (size_t)snprintf(to_q + w, sizeof to_q - w, "%%%02X", (unsigned char)*p);
        to_q[w] = 0;
        r = ticket ? xasprintf(&json, "{\"url\":\"%s/_seed/badge/enter?t=%s&to=%s\",\"badge\":true}\n", origin, ticket,
                               to_q)
                   : xasprintf(&json, "{\"url\":\"%s%s\",\"badge\":false}\n", origin, to);
        if (ticket)
                secure_zero(ticket, strlen(ticket));
        if (r < 0)
                return -ENOMEM;
        ctl_resp_take(resp, 200, "application/json", TAKE_PTR(json));
        return 0;
}

static int settings_reply(struct ctl *c, struct ctl_resp *resp) {
        return ctl_resp_set(resp, 200, "application/json", ctl_badge_on(c) ? "{\"on\":true}\n" : "{\"on\":false}\n");
}

int ctl_badge_h_settings(struct ctl_req *q, struct ctl_resp *resp) {
        return settings_reply(q->ctl, resp);
}

/* POST {"on": true|false}: nothing else. */
int ctl_badge_h_settings_set(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        _cleanup_json_ json_t *body = body_object(q);
        json_t *v = body ? json_object_get(body, "on") : NULL;
        if (!json_is_boolean(v) || json_object_size(body) != 1)
                return ctl_resp_error(resp, 400, "the body must be {\"on\": true or false}");
        bool on = json_is_true(v);
        int r = db_setting_set(c->kdb, CTL_BADGE_SETTING, on ? "on" : "off");
        if (r < 0)
                return log_error_errno(r, "could not switch the owner's badge: %m");
        pthread_mutex_lock(&c->badge.lock);
        c->badge.on = on;
        pthread_mutex_unlock(&c->badge.lock);
        log_info("the owner turned the badge on the app's pages %s", on ? "on" : "off");
        return settings_reply(c, resp);
}

int ctl_badge_h_draft_put(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        if (!c->drafts)
                return ctl_resp_error(resp, 503, "point and ask is not available in this kernel");
        char id[ASK_DRAFT_ID_LEN + 1];
        int r = ask_drafts_add(c->drafts, q->body.data, q->body.len, now_ms(), id);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_limited(LOG_INFO, q->client_ip, "refused an ask draft: %s (client %s)", ask_image_refusal(r),
                            q->client_ip);
                return ctl_resp_error(resp, r == -E2BIG ? 413 : 415, ask_image_refusal(r));
        }
        _cleanup_free_ char *json = NULL;
        if (xasprintf(&json, "{\"id\":\"%s\"}\n", id) < 0)
                return -ENOMEM;
        ctl_resp_take(resp, 201, "application/json", TAKE_PTR(json));
        return no_store(resp);
}

int ctl_badge_h_draft_get(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ask_draft d = {0};
        int r = c->drafts ? ask_drafts_get(c->drafts, q->param, now_ms(), &d) : -ENOENT;
        if (r == -ENOENT)
                return ctl_resp_error(resp, 404, "no such draft: it was sent, pushed out, or is older than 30 minutes");
        if (r < 0)
                return r;
        ctl_resp_take(resp, 200, d.info.media_type, TAKE_PTR(d.data));
        resp->len = d.len;
        ask_draft_done(&d);
        r = ctl_hdrs_add(&resp->hdrs, "Content-Security-Policy", "sandbox; default-src 'none'");
        return r < 0 ? r : no_store(resp);
}
