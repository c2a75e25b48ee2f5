/* model-internal.h — the model module's wire formats and retry policy, shared
 * by its own files and its tests. Nothing outside kernel/model and
 * tests/{unit,integration}/test-model.c includes this. */
#pragma once

#include "model/model.h"
#include "model/providers.h"

#define MODEL_MAX_RESPONSE (8u << 20)       /* response body cap */
#define MODEL_BACKOFF_CAP_MS 30000          /* one backoff never exceeds this */
#define MODEL_RETRY_AFTER_CAP_MS 60000      /* Retry-After is honoured up to this */
#define MODEL_MAX_TOOL_CALLS 256            /* per response */
#define MODEL_ERROR_EXCERPT 300             /* bytes of a provider's error text kept */
#define MODEL_TOKENS_MAX ((int64_t)1 << 40) /* a token count from a provider is clamped to this */

/* What a request body needs besides the conversation. */
struct model_wire {
        enum model_format format;
        const char *model;             /* the model's name */
        int max_tokens;                /* resolved (> 0) */
        bool usage_include;            /* OpenRouter: "usage":{"include":true} for the cost */
        bool max_completion_tokens;    /* OpenAI: send max_completion_tokens, not max_tokens */
        bool cache_control;            /* mark the stable prefix with cache_control breakpoints
                                        * (model_provider_caches): see MODEL_CACHE_BREAKPOINTS */
};

/* Prompt caching (Anthropic, natively and through OpenRouter): at most this
 * many {"type":"ephemeral"} breakpoints a request (Anthropic's limit), placed
 * on the end of the tool definitions (Anthropic format; in the OpenAI format
 * the tools come before the system prompt in the cached prefix, so its
 * breakpoint covers them), the system prompt, the last message, and the last
 * user or tool message before the last assistant turn (where the previous
 * request's last breakpoint was, so each request reads what the one before
 * wrote). Messages without content (an assistant turn of only tool calls in
 * the OpenAI format) take none. */
#define MODEL_CACHE_BREAKPOINTS 4

/* The provider's request body as compact JSON. Caller frees *ret_json.
 * -EINVAL with *ret_error (caller frees) for a conversation that cannot be
 * sent (bad tool schema, tool result without an id, …). */
int model_wire_build(const struct model_wire *w, const struct model_request *req, char **ret_json,
                     char **ret_error);

/* Parses a 2xx body into *ret (caller frees with model_response_done).
 * Failures, with *ret_error (caller frees):
 *   -EBADMSG    malformed JSON, or choices/message/content missing
 *   -EAGAIN     an error reported in the body with a retryable code
 *   -EREMOTEIO  an error reported in the body, not retryable */
int model_wire_parse(enum model_format fmt, const char *body, size_t len, struct model_response *ret,
                     char **ret_error);

/* Parses a provider's list of models: {"data": [{"id", "name" or
 * "display_name", "supported_parameters": [...], "context_length"}, …]} —
 * the one shape OpenRouter, OpenAI, Anthropic and OpenAI-compatible servers
 * share. Every model is kept (tools 0 for one whose supported_parameters
 * lack "tools"; 1 when it has it or tools_on_all; else -1); entries without
 * a valid id are skipped; at most MODEL_LIST_MAX (then truncated). *ret:
 * caller frees with model_list_done(). Failures, with *ret_error:
 *   -EBADMSG    malformed JSON, or no "data" list
 *   -EREMOTEIO  an error reported in the body */
int model_wire_parse_models(const char *body, size_t len, bool tools_on_all, struct model_list *ret,
                            char **ret_error);

/* A short, printable description of an error body (its error.message when it
 * is JSON, else an excerpt). Never NULL unless out of memory. Caller frees. */
char *model_wire_error_text(const char *body, size_t len);

/* Whether an HTTP status is retried: 408, 409, 429, 5xx. */
bool model_status_retryable(long status);
/* Whether an error code reported in a body is retried: a retryable status
 * (as a number or numeric string) or a known transient type
 * ("rate_limit_exceeded", "overloaded_error", "server_error", …). */
bool model_error_code_retryable(const char *code);
/* Full-jitter backoff after the failed attempt number attempt (1-based):
 * uniform in [0, min(MODEL_BACKOFF_CAP_MS, base_ms * 2^(attempt-1))], drawn
 * from rnd. */
int64_t model_backoff_ms(int attempt, int base_ms, uint64_t rnd);
/* A Retry-After header value in seconds (or retry-after-ms in ms when ms is
 * true) as milliseconds, capped at MODEL_RETRY_AFTER_CAP_MS; -1 if absent or
 * not a number (HTTP dates are ignored). */
int64_t model_retry_after_ms(const char *value, bool ms);

/* Tool calls written as text (see model_response.calls_from_text). */
struct model_text_calls {
        struct model_tool_call *calls;  /* ids "call_text_<hex>"; owned */
        size_t n;                       /* 1..MODEL_MAX_TOOL_CALLS */
        char *rest;                     /* the text around them, trimmed; NULL when none */
};
/* Reads tool calls a model wrote as text: each <tool_call>…</tool_call>
 * (the last may be left open; a fenced block inside is unwrapped) must hold
 * a call or a list of calls; without tags, each ```json (or bare ```) fenced
 * block that is a call counts, and other JSON blocks stay text; without
 * either, the whole reply when it is exactly a call. A call is a JSON object
 * with "name" (a tool's name: 1..128 of [A-Za-z0-9_.-]) and "arguments" (or
 * "parameters": an object, or a string kept raw), and no other keys than
 * "id" and "type". Returns 1 with *ret (caller frees with
 * model_text_calls_done), 0 when the text holds no call, -EBADMSG when it
 * looks like one that cannot be read (*ret_error says why; caller frees),
 * -ENOMEM. */
int model_text_calls_parse(const char *text, struct model_text_calls *ret, char **ret_error);
void model_text_calls_done(struct model_text_calls *t);


/* The endpoint this model posts to, and the one it lists models at (borrowed). */
const char *model_endpoint(const struct model *m);
const char *model_models_endpoint(const struct model *m);
