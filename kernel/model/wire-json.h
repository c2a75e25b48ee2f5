/* wire-json.h — jansson helpers shared by the model module's wire formats.
 * Only the model module's own .c files include this. */
#pragma once

#include "base/json.h"
#include "model/model-internal.h"

/* A JSON string of s (NULL = ""), invalid UTF-8 replaced. NULL on OOM. */
json_t *wire_str(const char *s);
/* obj[key] = v, taking v; -ENOMEM if v is NULL or the set fails. */
int wire_set(json_t *obj, const char *key, json_t *v);
/* Appends v to arr, taking v; -ENOMEM as above. */
int wire_append(json_t *arr, json_t *v);
/* The tool's parameters schema as JSON ({"type":"object"} when NULL);
 * -EINVAL with *ret_error when it is not a JSON object. */
int wire_tool_schema(const struct model_tool_def *t, json_t **ret, char **ret_error);
/* Describes an error object/string found in a response body (OpenAI's
 * {"error":{message,code,type}}, Anthropic's {"type":"error","error":{type,message}},
 * OpenRouter's choice-level errors) in *ret_error and returns -EAGAIN when
 * its code is retryable, else -EREMOTEIO. */
int wire_body_error(const json_t *err, char **ret_error);
/* A malformed-response error: -EBADMSG with *ret_error = "malformed response: <what>". */
int wire_malformed(char **ret_error, const char *fmt, ...) _printf_(2, 3);
/* A string value of obj[key], or NULL when missing or not a string. */
const char *wire_get_str(const json_t *obj, const char *key);
/* An integer of obj[key] (integer or real), or 0. */
int64_t wire_get_int(const json_t *obj, const char *key);
/* A token count of obj[key]: wire_get_int() clamped into 0..MODEL_TOKENS_MAX. */
int64_t wire_get_tokens(const json_t *obj, const char *key);
/* Whether msg holds tool calls and each one's arguments are a JSON object
 * (what a reply without a finish reason must hold to count as complete). */
bool wire_calls_complete(const struct model_message *msg);
/* Appends s to *acc (NULL at first). -ENOMEM on failure. */
int wire_text_append(char **acc, const char *s);

/* Prompt caching (MODEL_CACHE_BREAKPOINTS): a new {"type":"ephemeral"}. */
json_t *wire_cache_control(void);
/* Where the message breakpoints go in messages (a JSON array of objects with
 * a "role"): ret_idx[0] the last message, ret_idx[1] the last "user" or
 * "tool" message before the last "assistant" one; SIZE_MAX for none. */
void wire_cache_targets(const json_t *messages, size_t ret_idx[2]);

int openai_build(const struct model_wire *w, const struct model_request *req, json_t **ret, char **ret_error);
int openai_parse(const json_t *root, struct model_response *ret, char **ret_error);
int anthropic_build(const struct model_wire *w, const struct model_request *req, json_t **ret, char **ret_error);
int anthropic_parse(const json_t *root, struct model_response *ret, char **ret_error);
