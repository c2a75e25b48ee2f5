/* provider-openai.c — the OpenAI chat-completions wire format (OpenAI,
 * OpenRouter, local OpenAI-compatible servers). */
#include "model/wire-json.h"
#include "base/crypto.h"

#include <math.h>

static int openai_tool_calls(const struct model_message *m, json_t *msg) {
        json_t *calls = json_array();
        int r = wire_set(msg, "tool_calls", calls);
        for (size_t i = 0; r >= 0 && i < m->n_calls; i++) {
                const struct model_tool_call *c = &m->calls[i];
                json_t *fn = json_object(), *call = json_object();
                r = wire_append(calls, call);
                if (r >= 0)
                        r = wire_set(call, "function", fn);
                else
                        json_decref(fn); /* not handed on (r < 0): a conditional hand-on */
                if (r >= 0)
                        r = wire_set(call, "id", wire_str(c->id));
                if (r >= 0)
                        r = wire_set(call, "type", json_string("function"));
                if (r >= 0)
                        r = wire_set(fn, "name", wire_str(c->name));
                if (r >= 0)
                        r = wire_set(fn, "arguments", wire_str(strempty(c->arguments) ? "{}" : c->arguments));
        }
        return r;
}

/* A user message with pictures: content parts, the text, the page-data note,
 * then each picture as a data: URL. */
static int openai_user_parts(const struct model_message *m, json_t *msg) {
        json_t *parts = json_array();
        int r = wire_set(msg, "content", parts);
        if (r >= 0 && !strempty(m->text))
                r = wire_append(parts, json_pack("{s:s, s:o}", "type", "text", "text", wire_str(m->text)));
        if (r >= 0)
                r = wire_append(parts, json_pack("{s:s, s:s}", "type", "text", "text", MODEL_IMAGE_NOTE));
        for (size_t i = 0; r >= 0 && i < m->n_images; i++) {
                _cleanup_free_ char *b64 = NULL, *url = NULL;
                r = crypto_base64(m->images[i].data, m->images[i].len, &b64);
                if (r >= 0 && xasprintf(&url, "data:%s;base64,%s", m->images[i].media_type, b64) < 0)
                        r = -ENOMEM;
                if (r >= 0)
                        r = wire_append(parts, json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url));
        }
        return r;
}

static int openai_message(const struct model_message *m, size_t idx, json_t *messages, char **ret_error) {
        json_t *msg = json_object();
        int r = wire_append(messages, msg);
        if (r < 0)
                return r;
        switch (m->role) {
        case MODEL_ROLE_USER:
                r = wire_set(msg, "role", json_string("user"));
                if (r >= 0 && m->n_images > 0)
                        return openai_user_parts(m, msg);
                if (r >= 0)
                        r = wire_set(msg, "content", wire_str(m->text));
                return r;
        case MODEL_ROLE_ASSISTANT:
                r = wire_set(msg, "role", json_string("assistant"));
                if (r >= 0)
                        r = wire_set(msg, "content",
                                     m->n_calls > 0 && strempty(m->text) ? json_null() : wire_str(m->text));
                if (r >= 0 && m->n_calls > 0)
                        r = openai_tool_calls(m, msg);
                return r;
        case MODEL_ROLE_TOOL: {
                if (strempty(m->tool_call_id)) {
                        (void)xasprintf(ret_error, "message %zu: tool result without a tool_call_id", idx);
                        return -EINVAL;
                }
                _cleanup_free_ char *text = NULL;
                if (m->is_error && xasprintf(&text, "Error: %s", m->text ? m->text : "") < 0)
                        return -ENOMEM;
                r = wire_set(msg, "role", json_string("tool"));
                if (r >= 0)
                        r = wire_set(msg, "tool_call_id", wire_str(m->tool_call_id));
                if (r >= 0)
                        r = wire_set(msg, "content", wire_str(text ? text : m->text));
                return r;
        }
        }
        (void)xasprintf(ret_error, "message %zu: unknown role", idx);
        return -EINVAL;
}

static int openai_tools(const struct model_request *req, json_t *root, char **ret_error) {
        json_t *tools = json_array();
        int r = wire_set(root, "tools", tools);
        for (size_t i = 0; r >= 0 && i < req->n_tools; i++) {
                const struct model_tool_def *t = &req->tools[i];
                json_t *schema = NULL;
                r = wire_tool_schema(t, &schema, ret_error);
                if (r < 0)
                        return r;
                json_t *fn = json_object(), *tool = json_object();
                r = wire_append(tools, tool);
                if (r >= 0)
                        r = wire_set(tool, "type", json_string("function"));
                if (r >= 0)
                        r = wire_set(tool, "function", fn);
                else
                        json_decref(fn); /* not handed on (r < 0): a conditional hand-on */
                if (r >= 0)
                        r = wire_set(fn, "name", wire_str(t->name));
                if (r >= 0)
                        r = wire_set(fn, "description", wire_str(t->description));
                if (r >= 0)
                        r = wire_set(fn, "parameters", schema);
                else
                        json_decref(schema); /* not handed on (r < 0): a conditional hand-on */
        }
        return r;
}

/* A message's string content as one text part that is a breakpoint (as
 * OpenRouter takes them); messages without string content are left alone. */
static int mark_content(json_t *msg) {
        const char *text = wire_get_str(msg, "content");
        if (!text || !*text)
                return 0;
        json_t *parts = json_array();
        int r = parts ? wire_append(parts, json_pack("{s:s, s:s, s:o}", "type", "text", "text", text, "cache_control",
                                                     wire_cache_control()))
                      : -ENOMEM;
        if (r >= 0)
                return wire_set(msg, "content", parts); /* frees the string text points into */
        json_decref(parts); /* not handed on (r < 0) */
        return r;
}

/* The breakpoints (MODEL_CACHE_BREAKPOINTS): the system prompt (the tools
 * come before it in the cached prefix), the last message and the previous
 * request's last message. */
static int openai_cache(json_t *messages) {
        json_t *first = json_array_get(messages, 0);
        const char *role = wire_get_str(first, "role");
        int r = role && streq(role, "system") ? mark_content(first) : 0;
        size_t at[2];
        wire_cache_targets(messages, at);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(at); i++) {
                json_t *msg = at[i] != SIZE_MAX ? json_array_get(messages, at[i]) : NULL;
                role = wire_get_str(msg, "role");
                if (role && (streq(role, "user") || streq(role, "tool")))
                        r = mark_content(msg);
        }
        return r;
}

int openai_build(const struct model_wire *w, const struct model_request *req, json_t **ret, char **ret_error) {
        _cleanup_json_ json_t *root = json_object();
        json_t *messages = json_array();
        int r = root ? wire_set(root, "model", wire_str(w->model)) : -ENOMEM;
        if (r >= 0)
                r = wire_set(root, "messages", messages);
        else
                json_decref(messages); /* not handed on (r < 0): a conditional hand-on */
        if (r >= 0)
                r = wire_set(root, w->max_completion_tokens ? "max_completion_tokens" : "max_tokens",
                             json_integer(w->max_tokens));
        if (r >= 0 && !strempty(req->system)) {
                json_t *sys = json_object();
                r = wire_append(messages, sys);
                if (r >= 0)
                        r = wire_set(sys, "role", json_string("system"));
                if (r >= 0)
                        r = wire_set(sys, "content", wire_str(req->system));
        }
        for (size_t i = 0; r >= 0 && i < req->n_messages; i++)
                r = openai_message(&req->messages[i], i, messages, ret_error);
        if (r >= 0 && req->n_tools > 0)
                r = openai_tools(req, root, ret_error);
        if (r >= 0 && w->cache_control)
                r = openai_cache(messages);
        if (r >= 0 && w->usage_include)
                r = wire_set(root, "usage", json_pack("{s:b}", "include", 1));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(root);
        return 0;
}

/* content: a string, null, or (some servers) an array of {"type":"text","text":…} parts. */
static int openai_content(const json_t *content, char **ret_text) {
        if (json_is_string(content))
                return (*ret_text = strdup(json_string_value(content))) ? 0 : -ENOMEM;
        if (!json_is_array(content))
                return 0;
        size_t i;
        json_t *part;
        json_array_foreach(content, i, part) {
                const char *t = wire_get_str(part, "text");
                if (t && wire_text_append(ret_text, t) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int openai_calls(const json_t *calls, struct model_message *msg, char **ret_error) {
        size_t n = json_array_size(calls);
        if (n == 0)
                return 0;
        if (n > MODEL_MAX_TOOL_CALLS)
                return wire_malformed(ret_error, "%zu tool calls (at most %d)", n, MODEL_MAX_TOOL_CALLS);
        msg->calls = calloc(n, sizeof *msg->calls);
        if (!msg->calls)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const json_t *c = json_array_get(calls, i);
                const json_t *fn = json_object_get(c, "function");
                const char *name = wire_get_str(fn, "name"), *id = wire_get_str(c, "id");
                if (!name || !*name)
                        return wire_malformed(ret_error, "tool call %zu has no function name", i);
                struct model_tool_call *tc = &msg->calls[msg->n_calls++];
                tc->name = strdup(name);
                const json_t *args = json_object_get(fn, "arguments");
                if (json_is_string(args))
                        tc->arguments = strdup(json_string_value(args));
                else if (args && !json_is_null(args))
                        tc->arguments = json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
                else
                        tc->arguments = strdup("");
                if (!strempty(id))
                        tc->id = strdup(id);
                else {
                        char *hex = NULL;
                        if (crypto_random_hex(8, &hex) >= 0 && xasprintf(&tc->id, "call_%s", hex) < 0)
                                tc->id = NULL;
                        free(hex);
                }
                if (!tc->name || !tc->arguments || !tc->id)
                        return -ENOMEM;
        }
        return 0;
}

static enum model_stop openai_stop(const char *finish) {
        if (!finish)
                return MODEL_STOP_END;
        if (streq(finish, "stop") || streq(finish, "end_turn"))
                return MODEL_STOP_END;
        if (streq(finish, "tool_calls") || streq(finish, "function_call"))
                return MODEL_STOP_TOOL_CALLS;
        if (streq(finish, "length"))
                return MODEL_STOP_MAX_TOKENS;
        return MODEL_STOP_OTHER;
}

int openai_parse(const json_t *root, struct model_response *res, char **ret_error) {
        const json_t *err = json_object_get(root, "error");
        if (err && !json_is_null(err))
                return wire_body_error(err, ret_error);
        const json_t *choices = json_object_get(root, "choices");
        if (!json_is_array(choices) || json_array_size(choices) == 0)
                return wire_malformed(ret_error, "no choices");
        const json_t *choice = json_array_get(choices, 0);
        err = json_object_get(choice, "error");
        if (err && !json_is_null(err))
                return wire_body_error(err, ret_error);
        const json_t *msg = json_object_get(choice, "message");
        if (!json_is_object(msg))
                return wire_malformed(ret_error, "the choice has no message");
        int r = openai_content(json_object_get(msg, "content"), &res->message.text);
        if (r >= 0)
                r = openai_calls(json_object_get(msg, "tool_calls"), &res->message, ret_error);
        if (r < 0)
                return r;
        const char *finish = wire_get_str(choice, "finish_reason");
        /* No finish reason: the reply ended early (a stream the provider cut),
         * unless it holds complete tool calls, which some servers send with none. */
        if (!finish && !wire_calls_complete(&res->message))
                return wire_malformed(ret_error, "the reply ended without a finish reason (cut short)");
        res->stop = openai_stop(finish);
        /* Some servers say "stop" while asking for tools: the calls decide. */
        if (res->message.n_calls > 0 && res->stop == MODEL_STOP_END)
                res->stop = MODEL_STOP_TOOL_CALLS;
        if (!res->message.text && res->message.n_calls == 0 && res->stop != MODEL_STOP_MAX_TOKENS)
                return wire_malformed(ret_error, "the message has neither content nor tool calls");
        const json_t *usage = json_object_get(root, "usage");
        const json_t *details = json_object_get(usage, "prompt_tokens_details");
        res->usage.input_tokens = wire_get_tokens(usage, "prompt_tokens");
        res->usage.output_tokens = wire_get_tokens(usage, "completion_tokens");
        /* within prompt_tokens: a provider that says more is clamped */
        int64_t in = res->usage.input_tokens, cached = wire_get_tokens(details, "cached_tokens"),
                written = wire_get_tokens(details, "cache_write_tokens");
        res->usage.cache_read_tokens = cached < in ? cached : in;
        res->usage.cache_write_tokens = written < in - res->usage.cache_read_tokens ? written
                                                                                     : in - res->usage.cache_read_tokens;
        const json_t *cost = json_object_get(usage, "cost");
        /* a call costs at most MODEL_COST_MAX_USD: a provider's 1e308 would
         * overflow the month's sum and pause autonomous work for good */
        if (json_is_number(cost) && json_number_value(cost) >= 0 && json_number_value(cost) <= MODEL_COST_MAX_USD) {
                res->usage.cost_usd = json_number_value(cost);
                res->usage.cost_reported = true;
        }
        return 0;
}
