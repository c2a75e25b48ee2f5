/* pages.h — the small HTML pages the kernel writes itself (private, sign-in
 * link no longer valid, browser too old, too many attempts, "My body is
 * …") and the password sign-in form. Every interpolated
 * string is HTML-escaped; no inline script or style. */
#pragma once

#include "base/base.h"

/* A complete page: <title>title</title>, <h1>heading</h1>, then text as one
 * paragraph. refresh_s > 0 adds <meta http-equiv="refresh">. Caller frees. */
int ctl_page(const char *title, const char *heading, const char *text, int refresh_s,
             char **ret);

/* "This Seed is private" (= ctl_page_sign_in without the form). */
int ctl_page_private(const char *seed_name, char **ret);
enum {
        CTL_SIGN_IN_FORM = 1 << 0,     /* the password form */
        CTL_SIGN_IN_SAVEABLE = 1 << 1, /* ...which a password manager may save (own origin only) */
        CTL_SIGN_IN_REOPEN = 1 << 2,   /* a link to /_seed/ for a browser that held its cookie back */
};
/* The private page with the CTL_SIGN_IN_* parts in flags; message
 * (escaped; may be NULL) an alert above the text. Caller frees. */
int ctl_page_sign_in(const char *seed_name, unsigned flags, const char *message, char **ret);
/* "Signed in": moves on to /_seed/ by itself (a meta refresh, not a
 * redirect). Caller frees. */
int ctl_page_signed_in(char **ret);
/* Answers to a sign-in while limited: per client, or overall. */
int ctl_page_limited(bool overall, char **ret);
int ctl_page_password_off(char **ret);
int ctl_page_bad_form(char **ret);
int ctl_page_cross_origin(char **ret);
int ctl_page_link_invalid(char **ret);
int ctl_page_too_old(char **ret);
int ctl_page_not_navigation(char **ret);
int ctl_page_not_found(char **ret);
/* "My body is <state>", refreshing every 5 seconds. */
int ctl_page_body_state(const char *seed_name, const char *state, char **ret);
