/* policy.c — host patterns ("api.x.com", "*.x.com"), the grants of each
 * scope, the registries, and which of them a door's policy reads. */
#include "egress/policy.h"
#include "egress/addr.h"

#include <libpsl.h>
#include <pthread.h>

/* The public suffix list: the newer of libpsl's built-in copy and Debian's
 * /usr/share/publicsuffix (package publicsuffix). Loaded once, never freed. */
static psl_ctx_t *public_suffixes;
static pthread_once_t public_suffixes_once = PTHREAD_ONCE_INIT;

static void load_public_suffixes(void) {
        public_suffixes = psl_latest(NULL);
}

/* Whether a wildcard over name would cover sites that different people
 * register ("co.uk", "github.io", "s3.amazonaws.com": ICANN and private
 * suffixes alike). Without a list, every name counts as one: a wildcard is
 * refused rather than judged blind. */
static bool is_public_suffix(const char *name) {
        pthread_once(&public_suffixes_once, load_public_suffixes);
        return !public_suffixes || psl_is_public_suffix2(public_suffixes, name, PSL_TYPE_ANY);
}

int egress_pattern_normalize(const char *pattern, char **ret, char **ret_error) {
        if (!pattern || !*pattern)
                return errorf(-EINVAL, ret_error, "an empty host pattern");
        size_t len = strlen(pattern);
        if (len > EGRESS_HOST_MAX + 1)
                return errorf(-EINVAL, ret_error, "a host pattern longer than %d bytes", EGRESS_HOST_MAX);
        bool wild = false;
        const char *base = pattern;
        if (streq(pattern, "*") || streq(pattern, "*."))
                return errorf(-EINVAL, ret_error, "'*' alone would allow every host");
        if (startswith(pattern, "*.")) {
                wild = true;
                base += 2;
        }
        if (strchr(base, '*'))
                return errorf(-EINVAL, ret_error, "'*' may only be the whole first label, as in '*.example.com'");
        if (egress_is_ip_literal(base))
                return errorf(-EINVAL, ret_error, "an IP address, not a host name");
        char name[EGRESS_HOST_MAX + 1];
        if (egress_name_normalize(base, strlen(base), name) < 0)
                return errorf(-EINVAL, ret_error,
                              "not a host name (letters, digits and hyphens in dot-separated labels)");
        const char *why = egress_name_internal_why(name);
        if (why)
                return errorf(-EINVAL, ret_error, "an internal name: %s", why);
        if (wild && strchr(name, '.') && is_public_suffix(name))
                return errorf(-EINVAL, ret_error,
                              "'%s' is a public suffix: '*.%s' would allow every site registered under it "
                              "(name the hosts, or a wildcard under one site, e.g. '*.example.%s')",
                              name, name, name);
        char *out = NULL;
        if (xasprintf(&out, "%s%s", wild ? "*." : "", name) < 0)
                return -ENOMEM;
        if (wild && strlen(out) > EGRESS_HOST_MAX) {
                free(out);
                return errorf(-EINVAL, ret_error, "a host pattern longer than %d bytes", EGRESS_HOST_MAX);
        }
        *ret = out;
        return 0;
}

int egress_pattern_check(const char *pattern, char **ret_error) {
        _cleanup_free_ char *n = NULL;
        return egress_pattern_normalize(pattern, &n, ret_error);
}

bool egress_pattern_match(const char *pattern, const char *host) {
        if (!startswith(pattern, "*."))
                return streq(pattern, host);
        const char *suffix = pattern + 1; /* ".x.com" */
        size_t hl = strlen(host), sl = strlen(suffix);
        return hl > sl && streq(host + hl - sl, suffix);
}

static ssize_t find(char *const *v, const char *pattern) {
        for (size_t i = 0; v && v[i]; i++)
                if (streq(v[i], pattern))
                        return (ssize_t)i;
        return -1;
}

static bool valid_scope(enum egress_scope s) {
        return s == EGRESS_SCOPE_ORGANISM || s == EGRESS_SCOPE_EVOLUTION;
}

int egress_allowlist_grant(struct egress_allowlist *a, enum egress_scope s, const char *pattern) {
        if (!valid_scope(s))
                return -EINVAL;
        _cleanup_free_ char *n = NULL;
        int r = egress_pattern_normalize(pattern, &n, NULL);
        if (r < 0)
                return r;
        if (find(a->grants[s], n) >= 0)
                return 0;
        if (strv_length(a->grants[s]) >= EGRESS_PATTERNS_MAX)
                return -E2BIG;
        return strv_push(&a->grants[s], n);
}

int egress_allowlist_revoke(struct egress_allowlist *a, enum egress_scope s, const char *pattern) {
        if (!valid_scope(s))
                return -EINVAL;
        _cleanup_free_ char *n = NULL;
        int r = egress_pattern_normalize(pattern, &n, NULL);
        if (r < 0)
                return r;
        ssize_t i = find(a->grants[s], n);
        if (i < 0)
                return -ENOENT;
        char **v = a->grants[s];
        free(v[i]);
        memmove(v + i, v + i + 1, (strv_length(v + i + 1) + 1) * sizeof(char *));
        return 0;
}

int egress_allowlist_set_registries(struct egress_allowlist *a, char *const *patterns) {
        _cleanup_strv_free_ char **v = NULL;
        for (size_t i = 0; patterns && patterns[i]; i++) {
                _cleanup_free_ char *n = NULL;
                int r = egress_pattern_normalize(patterns[i], &n, NULL);
                if (r < 0)
                        return r;
                if (find(v, n) >= 0)
                        continue;
                if (strv_length(v) >= EGRESS_PATTERNS_MAX)
                        return -E2BIG;
                if ((r = strv_push(&v, n)) < 0)
                        return r;
        }
        strv_free(a->registries);
        a->registries = TAKE_PTR(v);
        return 0;
}

static bool any_match(char *const *v, const char *host) {
        for (size_t i = 0; v && v[i]; i++)
                if (egress_pattern_match(v[i], host))
                        return true;
        return false;
}

bool egress_allowlist_allows(const struct egress_allowlist *a, enum egress_policy p, const char *host) {
        switch (p) {
        case EGRESS_POLICY_LIVE:
                return any_match(a->grants[EGRESS_SCOPE_ORGANISM], host);
        case EGRESS_POLICY_BUILD:
                return any_match(a->registries, host) || any_match(a->grants[EGRESS_SCOPE_EVOLUTION], host);
        }
        return false;
}

static int push_new(char ***v, char *const *from) {
        for (size_t i = 0; from && from[i]; i++) {
                if (find(*v, from[i]) >= 0)
                        continue;
                int r = strv_push(v, from[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int egress_allowlist_list(const struct egress_allowlist *a, enum egress_policy p, char ***ret) {
        _cleanup_strv_free_ char **v = calloc(1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        int r = 0;
        switch (p) {
        case EGRESS_POLICY_LIVE:
                r = push_new(&v, a->grants[EGRESS_SCOPE_ORGANISM]);
                break;
        case EGRESS_POLICY_BUILD:
                r = push_new(&v, a->registries);
                if (r >= 0)
                        r = push_new(&v, a->grants[EGRESS_SCOPE_EVOLUTION]);
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(v);
        return 0;
}

void egress_allowlist_done(struct egress_allowlist *a) {
        if (!a)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(a->grants); i++)
                strv_free(TAKE_PTR(a->grants[i]));
        strv_free(TAKE_PTR(a->registries));
}
