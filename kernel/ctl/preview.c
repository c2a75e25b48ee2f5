/* preview.c — the owner's browser to the candidate while a preview runs.
 * See preview.h. */
#include "ctl/preview.h"
#include "ctl/ctl.h"
#include "ctl/cookie.h"
#include "ctl/grant.h"
#include "ctl/server.h"
#include "base/buf.h"
#include "base/crypto.h"
#include "base/log.h"

#include <pthread.h>

void ctl_preview_init(struct ctl_preview *p) {
        *p = (struct ctl_preview){0};
        pthread_mutex_init(&p->lock, NULL);
}

void ctl_preview_done(struct ctl_preview *p) {
        free(p->socket);
        p->socket = NULL;
        pthread_mutex_destroy(&p->lock);
}

int ctl_preview_cookie_name(const struct ctl *c, char *out, size_t n) {
        int k = snprintf(out, n, "%s_preview", c->cookie_name);
        return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

static void clear(struct ctl_grant *g, size_t n) {
        for (size_t i = 0; i < n; i++)
                g[i] = (struct ctl_grant){0};
}

void ctl_preview_set(struct ctl *c, const char *evo_id, int generation, const char *socket_path) {
        if (!c)
                return;
        char *copy = socket_path ? strdup(socket_path) : NULL;
        struct ctl_preview *p = &c->preview;
        pthread_mutex_lock(&p->lock);
        free(p->socket);
        p->socket = copy;
        snprintf(p->evo, sizeof p->evo, "%s", copy && evo_id ? evo_id : "");
        p->generation = copy ? generation : 0;
        /* A new preview, or none: every ticket and grant of the last one goes. */
        clear(p->tickets, CTL_PREVIEW_TICKETS);
        clear(p->grants, CTL_PREVIEW_GRANTS);
        pthread_mutex_unlock(&p->lock);
        if (socket_path && !copy)
                log_error("out of memory: the preview of %s cannot be routed", evo_id);
}

void ctl_preview_forget_session(struct ctl *c, const char *session_id) {
        if (!c || !session_id)
                return;
        struct ctl_preview *p = &c->preview;
        pthread_mutex_lock(&p->lock);
        ctl_grant_forget(p->grants, CTL_PREVIEW_GRANTS, session_id);
        ctl_grant_forget(p->tickets, CTL_PREVIEW_TICKETS, session_id);
        pthread_mutex_unlock(&p->lock);
}

/* Under lock: whether q's Cookie header carries a live grant of the
 * running preview. */
static bool granted(struct ctl *c, const struct ctl_req *q) {
        struct ctl_preview *p = &c->preview;
        const char *cookie = ctl_req_header(q, "Cookie");
        char name[64];
        if (!p->socket || !cookie || ctl_preview_cookie_name(c, name, sizeof name) < 0)
                return false;
        _cleanup_strv_free_ char **values = NULL;
        if (ctl_cookie_values(cookie, name, 4, &values) < 0)
                return false;
        int64_t now = now_ms();
        for (char **v = values; v && *v; v++)
                if (ctl_grant_find(p->grants, CTL_PREVIEW_GRANTS, *v, now))
                        return true;
        return false;
}

char *ctl_preview_socket_for(struct ctl *c, const struct ctl_req *q) {
        struct ctl_preview *p = &c->preview;
        char *socket = NULL;
        pthread_mutex_lock(&p->lock);
        if (granted(c, q))
                socket = strdup(p->socket);
        pthread_mutex_unlock(&p->lock);
        return socket;
}

int ctl_preview_h_state(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_preview *p = &c->preview;
        _cleanup_free_ char *json = NULL;
        int r = 0;
        pthread_mutex_lock(&p->lock);
        if (granted(c, q))
                r = xasprintf(&json, "{\"evolution\":\"%s\",\"generation\":%d}\n", p->evo, p->generation);
        pthread_mutex_unlock(&p->lock);
        if (r < 0)
                return -ENOMEM;
        if (json)
                ctl_resp_take(resp, 200, "application/json", TAKE_PTR(json));
        else
                r = ctl_resp_set(resp, 204, NULL, "");
        return r < 0 ? r : ctl_hdrs_add(&resp->hdrs, "Cache-Control", "no-store");
}

int ctl_preview_h_bar(struct ctl_req *q, struct ctl_resp *resp) {
        (void)q;
        int r = ctl_static_file("preview-bar.js", resp);
        return r < 0 ? r : ctl_hdrs_add(&resp->hdrs, "Cache-Control", "no-store");
}

int ctl_app_origin(const struct ctl_req *q, char **ret) {
        const struct ctl *c = q->ctl;
        const char *host = ctl_req_header(q, "Host");
        if (!c->control_host || !startswith(c->control_host, "seed."))
                return xasprintf(ret, "http://%s", host ? host : "localhost");
        const char *port = host ? strrchr(host, ':') : NULL;
        if (port && strchr(port, ']'))
                port = NULL;
        return xasprintf(ret, "http://%s%s", c->control_host + strlen("seed."), port ? port : "");
}

int ctl_preview_h_ticket(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_preview *p = &c->preview;
        if (!q->session_id)
                return ctl_resp_error(resp, 400, "a preview is for a browser: sign in to the control plane");
        _cleanup_free_ char *ticket = NULL, *origin = NULL, *json = NULL;
        char evo[32] = "";
        pthread_mutex_lock(&p->lock);
        int r = 0;
        if (p->socket) {
                snprintf(evo, sizeof evo, "%s", p->evo);
                r = ctl_grant_mint(p->tickets, CTL_PREVIEW_TICKETS, q->session_id, CTL_PREVIEW_TICKET_TTL_MS, now_ms(), &ticket);
        }
        pthread_mutex_unlock(&p->lock);
        if (r < 0)
                return r;
        if (!ticket)
                return ctl_resp_error(resp, 409, "no preview is running");
        if (ctl_app_origin(q, &origin) < 0 ||
            xasprintf(&json, "{\"url\":\"%s/_seed/preview/enter?t=%s\",\"evolution\":\"%s\"}\n", origin, ticket,
                      evo) < 0)
                return -ENOMEM;
        ctl_resp_take(resp, 200, "application/json", TAKE_PTR(json));
        return 0;
}

static int set_cookie(struct ctl_req *q, struct ctl_resp *resp, const char *value, long max_age) {
        char name[64];
        _cleanup_free_ char *header = NULL;
        if (ctl_preview_cookie_name(q->ctl, name, sizeof name) < 0 ||
            xasprintf(&header, "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=%ld", name, value, max_age) < 0)
                return -ENOMEM;
        return ctl_hdrs_add(&resp->hdrs, "Set-Cookie", header);
}

static int to_root(struct ctl_resp *resp, const char *text) {
        int r = ctl_resp_set(resp, 303, "text/plain; charset=utf-8", text);
        if (r >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "Location", "/");
        if (r >= 0)
                r = ctl_hdrs_add(&resp->hdrs, "Cache-Control", "no-store");
        return r;
}

int ctl_preview_h_enter(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_preview *p = &c->preview;
        /* The app's origin only: on the control plane's there is no organism. */
        if (c->control_host && ctl_req_on_control_host(q))
                return ctl_resp_set(resp, 404, "text/plain; charset=utf-8", "Not found\n");
        const char *t = q->query && startswith(q->query, "t=") ? q->query + 2 : NULL;
        if (!t || !ctl_is_hex(t, 2 * CTL_COOKIE_VALUE_BYTES))
                return ctl_resp_set(resp, 400, "text/plain; charset=utf-8", "This preview link is not valid.\n");
        _cleanup_free_ char *grant = NULL;
        int r = 0;
        pthread_mutex_lock(&p->lock);
        int64_t now = now_ms();
        struct ctl_grant *ticket = p->socket ? ctl_grant_find(p->tickets, CTL_PREVIEW_TICKETS, t, now) : NULL;
        if (ticket) {
                char session[65];
                snprintf(session, sizeof session, "%s", ticket->session);
                *ticket = (struct ctl_grant){0}; /* one use */
                r = ctl_grant_mint(p->grants, CTL_PREVIEW_GRANTS, session, CTL_PREVIEW_MAX_AGE_S * 1000LL, now_ms(), &grant);
        }
        pthread_mutex_unlock(&p->lock);
        if (r < 0)
                return r;
        if (!grant)
                return ctl_resp_set(resp, 410, "text/plain; charset=utf-8",
                                    "This preview link was used already, has expired, or the preview ended. Open "
                                    "the preview again from the control plane.\n");
        log_info("a browser of the owner's entered the preview");
        r = to_root(resp, "The preview\n");
        if (r >= 0)
                r = set_cookie(q, resp, grant, CTL_PREVIEW_MAX_AGE_S);
        secure_zero(grant, strlen(grant));
        return r;
}

int ctl_preview_h_leave(struct ctl_req *q, struct ctl_resp *resp) {
        struct ctl *c = q->ctl;
        struct ctl_preview *p = &c->preview;
        const char *cookie = ctl_req_header(q, "Cookie");
        char name[64];
        _cleanup_strv_free_ char **values = NULL;
        if (cookie && ctl_preview_cookie_name(c, name, sizeof name) >= 0 &&
            ctl_cookie_values(cookie, name, 4, &values) >= 0) {
                pthread_mutex_lock(&p->lock);
                int64_t now = now_ms();
                for (char **v = values; v && *v; v++) {
                        struct ctl_grant *g = ctl_grant_find(p->grants, CTL_PREVIEW_GRANTS, *v, now);
                        if (g)
                                *g = (struct ctl_grant){0};
                }
                pthread_mutex_unlock(&p->lock);
        }
        int r = to_root(resp, "The live app\n");
        return r < 0 ? r : set_cookie(q, resp, "", 0);
}
