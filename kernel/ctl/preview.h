/* preview.h — the owner's browser, and only it, sees the candidate of an
 * evolution at / while its preview runs (kernel/evolution/live-preview.h).
 *
 * The control plane (the owner's session) asks for a ticket: one use, 60 s,
 * bound to that session, kept as a hash. The browser opens it on the app's
 * origin (GET /_seed/preview/enter?t=…), which answers with a preview cookie
 * there (HttpOnly, SameSite=Lax, 12 h; a random value kept as a hash, bound
 * to the session and to that evolution) and sends it to /. While the
 * preview runs, a request to the organism carrying a valid preview cookie is
 * proxied to the candidate; everything else, every other browser, keeps the
 * live generation. GET /_seed/preview/leave drops the cookie. A grant ends
 * with the preview, with its session (signed out or revoked) and after 12 h.
 * The preview cookie never reaches an organism (the proxy strips it).
 *
 * The preview bar: the candidate's pages, in that browser only, get the
 * script /_seed/preview/bar.js (the proxy's injector, inject.h: top-level
 * HTML only, never on the admin origin). It asks GET /_seed/preview/state
 * — 200 {"evolution","generation"} for a browser with a live grant, 204 for
 * any other — and shows, in a closed shadow root, "Preview of generation N
 * — only you see this" with links: Apply, Ask for changes and Discard open
 * the control plane at the evolution (/_seed/#decide/<id>/<action>, which
 * the app's origin sends on to the control plane's), where the owner acts;
 * Leave preview is /_seed/preview/leave. The candidate is the organism and
 * shares the page: the bar holds no token and makes no acting request, and
 * what it asks, the candidate's own scripts may ask too (the id and the
 * generation number, nothing more). */
#pragma once

#include "base/base.h"
#include "ctl/grant.h"

struct ctl;
struct ctl_req;
struct ctl_resp;

#define CTL_PREVIEW_TICKET_TTL_MS (60 * 1000)
#define CTL_PREVIEW_MAX_AGE_S (12 * 3600)
#define CTL_PREVIEW_TICKETS 8
#define CTL_PREVIEW_GRANTS 16

struct ctl_preview {
        pthread_mutex_t lock;
        char evo[32];           /* "" = no preview */
        int generation;         /* the candidate's generation number */
        char *socket;           /* the candidate's bridge socket, or NULL */
        struct ctl_grant tickets[CTL_PREVIEW_TICKETS], grants[CTL_PREVIEW_GRANTS];
};

void ctl_preview_init(struct ctl_preview *p);
void ctl_preview_done(struct ctl_preview *p);

/* The preview cookie's name: the session cookie's + "_preview". */
int ctl_preview_cookie_name(const struct ctl *c, char *out, size_t n);

/* The candidate's socket for a request to the organism whose Cookie header
 * carries a valid preview grant (caller frees), or NULL: the live one. */
char *ctl_preview_socket_for(struct ctl *c, const struct ctl_req *q);

/* POST /_seed/api/preview/ticket (a browser session only): {"url",
 * "evolution"}; 409 without a preview. */
int ctl_preview_h_ticket(struct ctl_req *q, struct ctl_resp *resp);
/* GET /_seed/preview/enter?t=… and GET /_seed/preview/leave, on the app's origin. */
int ctl_preview_h_enter(struct ctl_req *q, struct ctl_resp *resp);
int ctl_preview_h_leave(struct ctl_req *q, struct ctl_resp *resp);
/* GET /_seed/preview/state and GET /_seed/preview/bar.js, on the app's
 * origin: the bar's question and the bar (see above). */
int ctl_preview_h_state(struct ctl_req *q, struct ctl_resp *resp);
int ctl_preview_h_bar(struct ctl_req *q, struct ctl_resp *resp);
/* A session ended (signed out, revoked): its grants go. */
void ctl_preview_forget_session(struct ctl *c, const char *session_id);
