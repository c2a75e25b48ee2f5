/* policy.h — host patterns and the allowlist each door's policy reads:
 * the grants of each scope and the registries. Data only: not locked (the
 * proxy holds its lock around every call), no I/O, no logging. */
#pragma once

#include "egress/egress.h"

/* Checks pattern as egress_pattern_check() does and, when it may be
 * granted, writes its normalised form (lowercased, no trailing dot; "*."
 * kept) to *ret (caller frees): 0. Otherwise -EINVAL with *ret_error (may
 * be NULL; caller frees), or -ENOMEM. */
int egress_pattern_normalize(const char *pattern, char **ret, char **ret_error);
/* Whether a normalised pattern matches a normalised host: "api.x.com"
 * exactly that name, "*.x.com" a name with at least one more label. */
bool egress_pattern_match(const char *pattern, const char *host);

struct egress_allowlist {
        char **grants[2]; /* by enum egress_scope: normalised patterns, oldest first */
        char **registries;
};

/* Adds a pattern to a scope: 0 (also when it is there already), -EINVAL,
 * -E2BIG past EGRESS_PATTERNS_MAX, -ENOMEM. */
int egress_allowlist_grant(struct egress_allowlist *a, enum egress_scope s, const char *pattern);
/* Removes it: 0, -ENOENT when it was not granted, -EINVAL. */
int egress_allowlist_revoke(struct egress_allowlist *a, enum egress_scope s, const char *pattern);
/* Replaces the registries (patterns may be NULL: none): 0, or -EINVAL /
 * -E2BIG / -ENOMEM with nothing changed. */
int egress_allowlist_set_registries(struct egress_allowlist *a, char *const *patterns);
/* Whether a door of policy p may reach host (normalised). */
bool egress_allowlist_allows(const struct egress_allowlist *a, enum egress_policy p, const char *host);
/* The patterns p allows, registries first, each once; NULL-terminated
 * (caller frees with strv_free()). */
int egress_allowlist_list(const struct egress_allowlist *a, enum egress_policy p, char ***ret);
void egress_allowlist_done(struct egress_allowlist *a);
