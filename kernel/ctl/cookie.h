/* cookie.h — the session cookie and the API token derived from it. Pure
 * functions (ctl_api_token and ctl_cookie_name are declared in ctl.h). */
#pragma once

#include "base/base.h"

#define CTL_SESSION_MAX_AGE_S (30 * 24 * 3600)
#define CTL_COOKIE_VALUE_BYTES 32 /* 256 random bits, sent as 64 hex chars */

#define CTL_FOREIGN_NAME_MAX 256 /* longer cookie names are never echoed back */

/* "name=value; Path=/_seed; HttpOnly; SameSite=Strict|Lax; Max-Age=N",
 * host-only (no Domain). Strict on the control plane's own origin, Lax in
 * the same-origin fallback. No Secure: the control plane is plain http on
 * localhost. Caller frees. */
int ctl_cookie_header(const char *name, const char *value, long max_age, bool strict, char **ret);
/* Whether name (n bytes) is one of the kernel's own cookies: ours (the
 * session's), ours + "_preview" (preview.h) or ours + "_badge" (badge.h). */
bool ctl_cookie_is_ours(const char *name, size_t n, const char *ours);
/* The distinct names of the cookies in a Cookie header other than the
 * kernel's own (ctl_cookie_is_ours), at most max of them, in order; only
 * names that are RFC 6265 tokens (so they can be echoed in a Set-Cookie that
 * expires them). NULL-terminated strv (possibly empty). Caller frees. */
int ctl_cookie_foreign(const char *header, const char *ours, size_t max, char ***ret);
/* The values of every cookie called name in a Cookie header that look like
 * a session value (64 lowercase hex chars), at most max of them, in order.
 * Returns a NULL-terminated strv (possibly empty). Caller frees. */
int ctl_cookie_values(const char *header, const char *name, size_t max, char ***ret);
/* The Cookie header without the pairs called name; *ret = NULL when nothing
 * is left. Caller frees. */
int ctl_cookie_strip(const char *header, const char *name, char **ret);
/* The name a Set-Cookie value gives its cookie, as browsers parse it
 * (RFC 6265bis §5.6): the name-value pair ends at the first ';'; without an
 * '=' the name is empty and the whole pair is the value; otherwise the name
 * is what precedes the first '='. SP and HTAB around name and value are
 * trimmed; quotes are part of the name. *ret_name points into value. */
void ctl_set_cookie_name(const char *value, const char **ret_name, size_t *ret_len);
/* Whether a Set-Cookie value would give the browser a cookie that it sends
 * back as name (compared as the Cookie header is read: by what precedes the
 * first '='). A cookie with an empty name is sent as its bare value, so
 * "=name=x" and "name" set name as well. */
bool ctl_set_cookie_sets(const char *value, const char *name);
/* Whether s is n lowercase hex characters. */
bool ctl_is_hex(const char *s, size_t n);
