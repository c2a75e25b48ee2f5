/* providers.c — see providers.h. */
#include "model/providers.h"
#include "base/buf.h"

/* The named providers' endpoints are constants: nothing in seed.yaml or the
 * control plane can send their keys anywhere else. OpenRouter's list says
 * which models take tools (supported_parameters); Anthropic's models all do;
 * OpenAI's list does not say (a probe call tells). Prompt caching with
 * cache_control breakpoints: Anthropic's models, natively and through
 * OpenRouter (which passes the breakpoints on for anthropic/ models); OpenAI caches
 * by itself and local servers know no such field. */
static const struct model_provider providers[] = {
        {.name = "openrouter", .format = MODEL_FORMAT_OPENAI, .usage_include = true, .cache_models = "anthropic/",
         .endpoint = "https://openrouter.ai/api/v1/chat/completions", .key_env = "OPENROUTER_API_KEY",
         .models_endpoint = "https://openrouter.ai/api/v1/models"},
        {.name = "openai", .format = MODEL_FORMAT_OPENAI, .max_completion_tokens = true,
         .endpoint = "https://api.openai.com/v1/chat/completions", .key_env = "OPENAI_API_KEY",
         .models_endpoint = "https://api.openai.com/v1/models"},
        {.name = "anthropic", .format = MODEL_FORMAT_ANTHROPIC, .tools_on_all = true, .cache_models = "",
         .endpoint = "https://api.anthropic.com/v1/messages", .key_env = "ANTHROPIC_API_KEY",
         .models_endpoint = "https://api.anthropic.com/v1/models?limit=1000"},
        /* model.base_url, model.api_key_env */
        {.name = "openai-compatible", .format = MODEL_FORMAT_OPENAI, .text_tool_calls = true},
};

const struct model_provider *model_providers(size_t *ret_n) {
        *ret_n = ARRAY_SIZE(providers);
        return providers;
}

const struct model_provider *model_provider_find(const char *name) {
        for (size_t i = 0; name && i < ARRAY_SIZE(providers); i++)
                if (streq(providers[i].name, name))
                        return &providers[i];
        return NULL;
}

bool model_provider_caches(const struct model_provider *p, const char *name) {
        return p && p->cache_models && name && strncmp(name, p->cache_models, strlen(p->cache_models)) == 0;
}

char *model_provider_names(const char *last) {
        struct buf b = BUF_INIT(1024);
        for (size_t i = 0; i < ARRAY_SIZE(providers); i++) {
                const char *sep = i == 0 ? "" : i + 1 == ARRAY_SIZE(providers) ? last : ", ";
                if (buf_printf(&b, "%s%s", sep, providers[i].name) < 0) {
                        buf_free(&b);
                        return NULL;
                }
        }
        return buf_steal(&b);
}
