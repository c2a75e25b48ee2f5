/* providers.h — the model providers as one table of data: name, wire format,
 * endpoints (completions and the models list) and the secret holding the key. kernel/model speaks to them,
 * kernel/config validates model.provider against them and kernel/app reads
 * the key they name: adding a provider is one row in providers.c. A library
 * of its own (base only), so config can use it without libcurl or jansson. */
#pragma once

#include "base/base.h"

enum model_format { MODEL_FORMAT_OPENAI, MODEL_FORMAT_ANTHROPIC };

struct model_provider {
        const char *name;            /* model.provider in seed.yaml */
        enum model_format format;
        const char *endpoint;        /* a constant; NULL: <model.base_url>/chat/completions,
                                      * with the key (optional) from model.api_key_env */
        const char *key_env;         /* the secret holding the key (always needed), or NULL
                                      * exactly when endpoint is NULL */
        const char *models_endpoint; /* GET: the models it offers; NULL exactly when endpoint is
                                      * NULL (<model.base_url>/models) */
        bool tools_on_all;           /* every model it lists takes tools (its list does not say) */
        bool usage_include;          /* OpenRouter reports the cost when asked */
        bool max_completion_tokens;  /* OpenAI's current name for max_tokens */
        bool text_tool_calls;        /* its models may write tool calls as text (local servers
                                      * without native tool parsing): read them as calls */
        const char *cache_models;    /* prompt caching: the models that take cache_control
                                      * breakpoints — "" all of them, else the names starting
                                      * with this prefix; NULL none (never sent) */
};

/* Whether p's model called name takes cache_control breakpoints. */
bool model_provider_caches(const struct model_provider *p, const char *name);

/* The table (static data, borrowed). */
const struct model_provider *model_providers(size_t *ret_n);
/* The provider called name, or NULL (also for a NULL name). Borrowed. */
const struct model_provider *model_provider_find(const char *name);
/* The names, "a, b, c<last>d" (e.g. last " or "), for messages. Caller
 * frees; NULL when out of memory. */
char *model_provider_names(const char *last);
