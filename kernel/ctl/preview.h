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
 * The preview cookie never reaches an organism (the proxy strips it). */
#pragma once

#include "base/base.h"

struct ctl;
struct ctl_req;
struct ctl_resp;

#define CTL_PREVIEW_TICKET_TTL_MS (60 * 1000)
#define CTL_PREVIEW_MAX_AGE_S (12 * 3600)
#define CTL_PREVIEW_TICKETS 8
#define CTL_PREVIEW_GRANTS 16

struct ctl_preview_grant {
        char hash[65];          /* sha256 of the cookie value (ticket or grant), "" = free */
        char session[65];       /* the owner's session's public id */
        int64_t expires_ms;
};

struct ctl_preview {
        pthread_mutex_t lock;
        char evo[32];           /* "" = no preview */
        char *socket;           /* the candidate's bridge socket, or NULL */
        struct ctl_preview_grant tickets[CTL_PREVIEW_TICKETS], grants[CTL_PREVIEW_GRANTS];
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
/* A session ended (signed out, revoked): its grants go. */
void ctl_preview_forget_session(struct ctl *c, const char *session_id);
