/* outbound.h — the owner's outbound access (SPEC §8, seed 001 "Outbound
 * access"): the grants, the secrets they give the live organism, the
 * registries evolutions may reach, what the egress proxy refused, and the two
 * tools the model asks and looks with.
 *
 * A grant is exactly what the owner approved: host patterns ("api.x.com",
 * "*.x.com": each one egress_pattern_check() accepts, lowercased, without a
 * trailing dot), what they are for (the live organism and previews, or
 * evolution, build, test and install commands), the names of secrets the
 * live organism gets (organism grants only), a reason, when, and by whom:
 * the owner in Settings ("owner") or the approval of one
 * request_outbound_access call ("apr_…"). Grants are kept in the kernel DB
 * (db/grants.h) and loaded into the proxy at start, one egress_grant() per
 * pattern. Revoking marks the row (kept for history) and revokes at the
 * proxy each of its patterns that no other active grant of that scope holds:
 * new connections are refused at once and open tunnels end.
 *
 * request_outbound_access is dangerous and asked every time (always_ask,
 * whatever seed.yaml's permissions say; a policy of deny still denies): its
 * arguments are checked and normalised before the owner sees them, so what
 * the owner approves is what is granted, a new grant referring to that
 * approval. An earlier approval is never reused: every call is a new
 * approval.
 *
 * Secrets: only the live organism gets them, only those an active organism
 * grant names and only when they were passed at start (struct secrets).
 * Names are UPPER_SNAKE, at most OUTBOUND_SECRET_NAME_MAX bytes, never
 * SEED_*, a model provider's key variable (providers.c, model.api_key_env)
 * or a variable the sandbox sets itself (sandbox_fixed_env_names). A grant or
 * revocation that changes what the live organism gets calls on_env, and the
 * app restarts the live organism with outbound_organism_env().
 *
 * Thread-safe: the API, the chat and the orchestrator call in from their
 * threads. */
#pragma once

#include "base/base.h"
#include "base/json.h"
#include "tools/tools.h"

struct cfg;
struct db;
struct egress;
struct outbound;
struct registries;
struct secrets;

#define OUTBOUND_HOSTS_MAX 16         /* patterns in one grant */
#define OUTBOUND_SECRETS_MAX 16       /* secret names in one grant */
#define OUTBOUND_REASON_MAX 1000      /* bytes */
#define OUTBOUND_SECRET_NAME_MAX 128
#define OUTBOUND_GRANTS_MAX 200       /* active grants */
#define OUTBOUND_REVOKED_SHOWN 20     /* revoked grants listed for history */

enum outbound_for {
        OUTBOUND_FOR_ORGANISM,   /* the live organism and previews */
        OUTBOUND_FOR_EVOLUTIONS, /* evolution, build, test and install commands */
};
const char *outbound_for_name(enum outbound_for f); /* "organism", "evolutions" */

/* A request, checked and normalised (outbound_request_parse). Owned. */
struct outbound_request {
        char **hosts;            /* 1..OUTBOUND_HOSTS_MAX patterns, each once, NULL-terminated */
        enum outbound_for scope;
        char **secrets;          /* 0..OUTBOUND_SECRETS_MAX names, each once, NULL-terminated; never NULL */
        char *reason;            /* "" when none */
};
void outbound_request_done(struct outbound_request *r);

/* Whether name may be granted as a secret: 0, or -EINVAL with *ret_error
 * (caller frees; may be NULL) saying why. api_key_env: seed.yaml's
 * model.api_key_env (may be NULL or ""). */
int outbound_secret_name_check(const char *name, const char *api_key_env, char **ret_error);
/* One host pattern, normalised into *ret (caller frees) when it may be
 * granted, else -EINVAL with *ret_error. */
int outbound_pattern_normalize(const char *pattern, char **ret, char **ret_error);

/* Reads {"hosts": [...], "for": "organism"|"evolutions", "secrets"?: [...],
 * "reason"?: "..."} (no other member). -EINVAL with *ret_error naming the
 * bad field ("hosts[1]: '10.0.0.1' is an IP address"; caller frees),
 * -ENOMEM. Secrets are only for the organism. */
int outbound_request_parse(json_t *obj, const char *api_key_env, struct outbound_request *ret, char **ret_error);
/* outbound_request_parse() with the configuration o was made with. */
int outbound_request_check(struct outbound *o, json_t *obj, struct outbound_request *ret, char **ret_error);
/* The request as JSON (the normalised form), with "reason" only when set.
 * NULL when out of memory. */
json_t *outbound_request_json(const struct outbound_request *r);

struct outbound_config {
        struct db *kdb;                 /* borrowed; required */
        struct egress *egress;          /* borrowed; NULL: grants are kept, nothing is enforced (tests) */
        const struct secrets *secrets;  /* passed at start (borrowed); NULL: none */
        const struct cfg *cfg;          /* model.api_key_env, egress.registries (borrowed); required */
        /* What the live organism gets changed (from the granting thread;
         * no lock held): restart it with outbound_organism_env(). */
        void (*on_env)(void *userdata);
        void *userdata;
};

struct outbound;

/* Loads the active grants into the proxy (a pattern the proxy refuses now is
 * logged and skipped) and gives it seed.yaml's egress.registries until the
 * discovery (outbound_discover_registries) is done. Caller frees. */
int outbound_new(const struct outbound_config *cfg, struct outbound **ret);
/* Joins the discovery thread (at most one client's time). Accepts NULL. */
void outbound_free(struct outbound *o);

/* Starts asking the machine's package clients (kernel/registries) in a
 * thread of its own; the proxy gets the list when it is ready. */
int outbound_discover_registries(struct outbound *o);
/* Sets the registries (copied) and gives the proxy their hosts. */
int outbound_set_registries(struct outbound *o, const struct registries *r);

/* Grants exactly req, by "owner" or an approval id ("apr_…"). *ret_id:
 * "grt_<16 hex>" (caller frees; may be NULL). -E2BIG past
 * OUTBOUND_GRANTS_MAX or the proxy's pattern limit; -EINVAL for a bad by.
 * Nothing is kept when it fails. */
int outbound_grant(struct outbound *o, const struct outbound_request *req, const char *by, char **ret_id);
/* Revokes an active grant: -ENOENT when there is none of that id. */
int outbound_revoke(struct outbound *o, const char *id);

/* The live organism's extra environment: NAME=VALUE for every secret an
 * active organism grant names that was passed at start. Caller frees with
 * outbound_env_free() (which wipes the values). */
int outbound_organism_env(struct outbound *o, char ***ret);
void outbound_env_free(char **env);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, outbound_env_free)

/* GET /_seed/api/outbound: {"grants": [active, oldest first, each with
 * "secrets": [{"name", "available"}]], "revoked": [the newest
 * OUTBOUND_REVOKED_SHOWN], "refused": [{"host", "port", "door", "reason",
 * "at"}], "registries": [{"host", "from"}], "registry_notes": [...],
 * "registries_pending": bool}. */
int outbound_json(struct outbound *o, json_t **ret);
/* The same, as text for the model (outbound_status). Caller frees. */
int outbound_status_text(struct outbound *o, char **ret);

/* The tools: request_outbound_access (dangerous, always asked) and
 * outbound_status (safe); their handlers reach the outbound through
 * tool_ctx.outbound. Static data, TOOL_TABLE_END-terminated. */
extern const struct tool outbound_tools[];
