/* mind.h — the model the Seed thinks with.
 *
 * The mind holds:
 *   - the choice: a provider and a model name. seed.yaml's is the default;
 *     one the owner makes in the control plane is kept as a kernel setting
 *     (kernel/db, key "mind.choice") and survives restarts. Only a choice
 *     whose probe call succeeded is kept.
 *   - the keys it may use: the start secrets (borrowed; the variable each
 *     provider reads is in kernel/model/providers.c, openai-compatible's is
 *     seed.yaml's model.api_key_env) and keys lent in the control plane: one
 *     per provider, in this process's memory only, wiped when replaced,
 *     forgotten or freed, gone at restart; never logged, never returned by
 *     anything here, never in a prompt or a sandbox. A lent key is used
 *     before the start key of the same provider.
 *   - the model built from them (kernel/model).
 *
 * Provider endpoints stay fixed in code: openai-compatible keeps its
 * base_url from seed.yaml only, and is offered only when seed.yaml has one,
 * so nothing done in the control plane can send a key to another host.
 *
 * Users (the orchestrator, the chat) hold the mind, never a model: each call
 * goes through mind_complete(), which holds a reference on the model it
 * started with, so a new choice or key takes effect for the next call while
 * a call in flight finishes. Every function is thread-safe. */
#pragma once

#include "base/base.h"
#include "base/json.h"
#include "model/model.h"

struct cfg;
struct db;
struct secrets;

#define MIND_KEY_MAX 4096                    /* bytes of a lent key */
#define MIND_MODELS_TTL_MS (5 * 60 * 1000)   /* a provider's list is cached this long, per key */
#define MIND_PROBE_TIMEOUT_MS 60000          /* the probe call, retries included */
#define MIND_PROBE_MAX_TOKENS 32
#define MIND_SETTING "mind.choice"           /* the kernel setting holding the choice */

/* Where the key of a provider comes from. */
enum mind_key_source {
        MIND_KEY_START,      /* a secret passed at start (-e NAME) */
        MIND_KEY_LENT,       /* lent in the control plane (until the kernel stops) */
        MIND_KEY_NONE,       /* needed, and there is none */
        MIND_KEY_NOT_NEEDED, /* openai-compatible without model.api_key_env */
};
/* "start", "lent", "none", "not_needed". */
const char *mind_key_source_name(enum mind_key_source s);

struct mind_config {
        const struct cfg *cfg;          /* seed.yaml (borrowed; outlives the mind) */
        const struct secrets *secrets;  /* the start secrets (borrowed; outlive the mind); NULL = none */
        struct db *kdb;                 /* keeps the choice (borrowed); NULL = choices are not kept */
        model_usage_fn usage_fn;        /* every call's tokens and cost; may be NULL */
        void *usage_userdata;
        int timeout_ms;                 /* per completion; 0 = the model's default (10 minutes) */
        int backoff_base_ms;            /* 0 = the model's default (tests use small values) */
        const char *endpoint_for_tests; /* TESTS ONLY: every model built posts here
                                         * (model_set_endpoint_for_tests), so a named
                                         * provider's wire format meets the scripted
                                         * server; the kernel never sets it */
};

struct mind;

/* Reads the kept choice (an invalid one is ignored, with a warning) and
 * builds the model. No key is not an error: the mind then says why it
 * cannot think (mind_why_not), logged once here. */
int mind_new(const struct mind_config *c, struct mind **ret);
/* Wipes every lent key. No call may be running. Accepts NULL. */
void mind_free(struct mind *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct mind *, mind_free)

/* One completion with the current model (see model_complete()). Without a
 * usable model: -ENOKEY and *ret_error = mind_why_not(). */
int mind_complete(struct mind *m, const struct model_request *req, struct model_response *ret, char **ret_error);

/* Whether a model is there to think with. */
bool mind_ready(struct mind *m);
/* NULL when ready; else why not, naming the real variable, e.g. "No model
 * key: the Seed cannot think yet. Start it with -e OPENROUTER_API_KEY (or
 * lend a key in Settings)." Caller frees. */
char *mind_why_not(struct mind *m);

/* What the mind is, never a key:
 *   {"provider", "model", "key_source", "key_env" (the variable, or null),
 *    "ready", "why_not" (null when ready)}
 * and with full also "default": {"provider", "model"} (seed.yaml's),
 * "chosen" (a kept choice overrides seed.yaml), "providers": [{"name",
 * "key_env", "key_source", "available"}] (openai-compatible is available
 * only with seed.yaml's model.base_url). Caller json_decref()s. */
int mind_status_json(struct mind *m, bool full, json_t **ret);
/* Changes whenever what mind_status_json() shows changes, in either view
 * (a counter, never going back; read before the JSON, a cache of it is
 * exact while this stays the same). The keys the Seed started with are read
 * once at start. No lock taken. 0 for NULL. */
uint64_t mind_status_version(struct mind *m);

/* Probes provider/model with the key it would use (a one-line prompt,
 * MIND_PROBE_MAX_TOKENS, one trivial tool, so a model without tool support
 * fails) and only on success keeps it as the choice, in the kernel DB, and
 * thinks with it. On failure *ret_error (caller frees; never the key):
 *   -EINVAL     an unknown or unavailable provider, a bad model name
 *   -ENOKEY     no key for that provider
 *   -EBUSY      another choice is being probed
 *   -EIO        it works but could not be kept (nothing changed)
 *   else        model_complete()'s error: the probe failed */
int mind_choose(struct mind *m, const char *provider, const char *model, char **ret_error);

/* Lends key (1..MIND_KEY_MAX printable ASCII without spaces) for provider,
 * replacing (and wiping) one lent before. -EINVAL with *ret_error for an
 * unknown or unavailable provider or a bad key (never quoted). */
int mind_lend_key(struct mind *m, const char *provider, const char *key, char **ret_error);
/* Forgets (wipes) the key lent for provider (NULL: every provider).
 * -EINVAL for an unknown provider. Returns how many keys were forgotten. */
int mind_forget_key(struct mind *m, const char *provider);

/* The models provider offers that take tools (model_list()), fetched with
 * the key it would use and cached MIND_MODELS_TTL_MS per provider and key:
 *   {"provider", "models": [{"id", "name", "tools", "context_length"}],
 *    "truncated", "fetched_at"}
 * Caller frees *ret_json. -EINVAL, -ENOKEY as mind_choose, else
 * model_list()'s error, with *ret_error (caller frees). */
int mind_models_json(struct mind *m, const char *provider, char **ret_json, char **ret_error);
