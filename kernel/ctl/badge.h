/* badge.h — the owner's badge on the organism's pages, and point and ask
 * (seed 001, "The owner's badge").
 *
 * The control plane's session cookie is host-only and SameSite=Strict on its
 * own origin (seed.localhost): it never reaches the organism's origin, where
 * the badge runs. So the badge has an owner-presence signal of its own there,
 * which grants nothing else:
 *  - The control plane (a signed-in browser session) asks for a ticket (POST
 *    /_seed/api/badge/ticket): one use, 60 s, bound to that session, kept as
 *    a hash. "Open the app" opens it as a top-level navigation on the app's
 *    origin (GET /_seed/badge/enter?t=…&to=/path), which answers with the
 *    presence cookie (<session cookie>_badge: a random value kept as a hash,
 *    bound to the session; HttpOnly, SameSite=Strict, Path=/_seed/, 12 h) and
 *    sends the browser on to the path.
 *  - The presence cookie authorizes exactly three things on the app's origin:
 *    the yes of GET /_seed/badge, the Seed's logo for the badge, and leaving
 *    a picture at POST /_seed/ask-draft. It opens no page, no API call and
 *    no chat message; it ends with its session (signed out or revoked), after
 *    12 h, and the proxy never lets the organism set or see it.
 *  - GET /_seed/badge answers 200 (this is the owner's browser, the badge is
 *    on) or 204 (anything else), with no body worth reading and never a
 *    token. The organism's own scripts can ask the same question: seed 001
 *    accepts that price.
 *
 * The switch (Settings, kernel_settings "control.badge", on by default):
 * off, /_seed/badge answers 204 to everyone, badge.js is 404, no draft is
 * taken and the proxy adds nothing to any page (ctl_badge_on). */
#pragma once

#include "base/base.h"
#include "ctl/grant.h"

struct ctl;
struct ctl_req;
struct ctl_resp;

#define CTL_BADGE_TICKET_TTL_MS (60 * 1000)
#define CTL_BADGE_MAX_AGE_S (12 * 3600)
#define CTL_BADGE_TICKETS 8
#define CTL_BADGE_GRANTS 16
#define CTL_BADGE_SETTING "control.badge"
#define CTL_BADGE_PATH_MAX 200 /* the path "Open the app" and #ask= carry */

struct ctl_badge {
        pthread_mutex_t lock;
        bool on;                /* the switch, read once at start and kept here */
        struct ctl_grant tickets[CTL_BADGE_TICKETS], grants[CTL_BADGE_GRANTS];
};

/* Reads the switch from kernel memory (a failure keeps it on and is logged). */
void ctl_badge_init(struct ctl *c);
void ctl_badge_done(struct ctl *c);

/* Whether the badge is on (the proxy asks on every page). Thread-safe. */
bool ctl_badge_on(struct ctl *c);
/* Whether the request carries a live presence cookie and the badge is on. */
bool ctl_badge_present(struct ctl *c, const struct ctl_req *q);
/* The presence cookie's name: the session cookie's + "_badge". */
int ctl_badge_cookie_name(const struct ctl *c, char *out, size_t n);
/* A session ended (signed out, revoked): its tickets and cookies go. */
void ctl_badge_forget_session(struct ctl *c, const char *session_id);
/* Whether s is a path "Open the app" or #ask= may carry: "/" then URL path
 * characters only, at most CTL_BADGE_PATH_MAX bytes, never "//…" (another
 * host) or /_seed. */
bool ctl_badge_path_ok(const char *s);

/* Route handlers (routes.c's table says who may call them). */
int ctl_badge_h_answer(struct ctl_req *q, struct ctl_resp *resp);      /* GET /_seed/badge */
int ctl_badge_h_script(struct ctl_req *q, struct ctl_resp *resp);      /* GET /_seed/badge.js, …/screenshot.js */
int ctl_badge_h_enter(struct ctl_req *q, struct ctl_resp *resp);       /* GET /_seed/badge/enter */
int ctl_badge_h_ticket(struct ctl_req *q, struct ctl_resp *resp);      /* POST /_seed/api/badge/ticket */
int ctl_badge_h_settings(struct ctl_req *q, struct ctl_resp *resp);    /* GET /_seed/api/badge */
int ctl_badge_h_settings_set(struct ctl_req *q, struct ctl_resp *resp); /* POST /_seed/api/badge */
int ctl_badge_h_draft_put(struct ctl_req *q, struct ctl_resp *resp);   /* POST /_seed/ask-draft */
int ctl_badge_h_draft_get(struct ctl_req *q, struct ctl_resp *resp);   /* GET /_seed/api/ask-drafts/<id> */
