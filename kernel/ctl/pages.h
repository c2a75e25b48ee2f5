/* pages.h — the small HTML pages the kernel writes itself (private, sign-in
 * link no longer valid, browser too old, "My body is …"). Every interpolated
 * string is HTML-escaped; no inline script or style. */
#pragma once

#include "base/base.h"

/* A complete page: <title>title</title>, <h1>heading</h1>, then text as one
 * paragraph. refresh_s > 0 adds <meta http-equiv="refresh">. Caller frees. */
int ctl_page(const char *title, const char *heading, const char *text, int refresh_s,
             char **ret);

int ctl_page_private(const char *seed_name, char **ret);
int ctl_page_link_invalid(char **ret);
int ctl_page_too_old(char **ret);
int ctl_page_not_navigation(char **ret);
int ctl_page_not_found(char **ret);
/* "My body is <state>", refreshing every 5 seconds. */
int ctl_page_body_state(const char *seed_name, const char *state, char **ret);
