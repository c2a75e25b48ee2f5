/* provider-anthropic.c — the Anthropic Messages wire format: a top-level
 * system prompt, content blocks (text, tool_use, tool_result), and strictly
 * alternating user/assistant turns. */
#include "model/wire-json.h"
#include "base/crypto.h"

static json_t *text_block(const char *text) {
        return json_pack("{s:s, s:o}", "type", "text", "text", wire_str(text));
}

/* Tool results first, then text: Anthropic's rule for a user turn. */
struct user_turn {
        json_t *results, *texts;
};

static int user_turn_flush(struct user_turn *u, json_t *messages) {
        if (json_array_size(u->results) + json_array_size(u->texts) == 0)
                return 0;
        if (json_array_extend(u->results, u->texts) < 0)
                return -ENOMEM;
        json_array_clear(u->texts);
        json_t *content = TAKE_PTR(u->results);
        u->results = json_array();
        int r = wire_append(messages, json_pack("{s:s, s:o}", "role", "user", "content", content));
        return r < 0 ? r : u->results ? 0 : -ENOMEM;
}

static json_t *tool_result_block(const struct model_message *m) {
        _cleanup_json_ json_t *b = json_pack("{s:s, s:o}", "type", "tool_result", "tool_use_id", wire_str(m->tool_call_id));
        if (b && !strempty(m->text) && wire_set(b, "content", wire_str(m->text)) < 0)
                return NULL;
        if (b && m->is_error && wire_set(b, "is_error", json_true()) < 0)
                return NULL;
        return TAKE_PTR(b);
}

/* The input object of a tool_use block: the arguments when they are a JSON
 * object, else {} (Anthropic only accepts objects there). */
static json_t *tool_input(const char *arguments) {
        if (!strempty(arguments)) {
                _cleanup_json_ json_t *j = json_loads(arguments, 0, NULL);
                if (json_is_object(j))
                        return TAKE_PTR(j);
        }
        return json_object();
}

static int assistant_turn(const struct model_message *m, json_t *messages) {
        if (strempty(m->text) && m->n_calls == 0)
                return 0; /* Anthropic refuses empty turns */
        json_t *content = json_array();
        int r = wire_append(messages, json_pack("{s:s, s:o}", "role", "assistant", "content", content));
        if (r >= 0 && !strempty(m->text))
                r = wire_append(content, text_block(m->text));
        for (size_t i = 0; r >= 0 && i < m->n_calls; i++) {
                const struct model_tool_call *c = &m->calls[i];
                r = wire_append(content, json_pack("{s:s, s:o, s:o, s:o}", "type", "tool_use", "id", wire_str(c->id),
                                                   "name", wire_str(c->name), "input", tool_input(c->arguments)));
        }
        return r;
}

/* The page-data note, then each picture as a base64 image block. */
static int image_blocks(const struct model_message *m, json_t *texts) {
        int r = wire_append(texts, text_block(MODEL_IMAGE_NOTE));
        for (size_t i = 0; r >= 0 && i < m->n_images; i++) {
                _cleanup_free_ char *b64 = NULL;
                r = crypto_base64(m->images[i].data, m->images[i].len, &b64);
                if (r >= 0)
                        r = wire_append(texts, json_pack("{s:s, s:{s:s, s:s, s:s}}", "type", "image", "source", "type",
                                                         "base64", "media_type", m->images[i].media_type, "data", b64));
        }
        return r;
}

static int anthropic_messages(const struct model_request *req, json_t *messages, char **ret_error) {
        struct user_turn u = {json_array(), json_array()};
        int r = u.results && u.texts ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < req->n_messages; i++) {
                const struct model_message *m = &req->messages[i];
                switch (m->role) {
                case MODEL_ROLE_USER:
                        if (!strempty(m->text))
                                r = wire_append(u.texts, text_block(m->text));
                        if (r >= 0 && m->n_images > 0)
                                r = image_blocks(m, u.texts);
                        break;
                case MODEL_ROLE_TOOL:
                        if (strempty(m->tool_call_id)) {
                                (void)xasprintf(ret_error, "message %zu: tool result without a tool_call_id", i);
                                r = -EINVAL;
                        } else
                                r = wire_append(u.results, tool_result_block(m));
                        break;
                case MODEL_ROLE_ASSISTANT:
                        if (strempty(m->text) && m->n_calls == 0)
                                break;
                        r = user_turn_flush(&u, messages);
                        if (r >= 0)
                                r = assistant_turn(m, messages);
                        break;
                default:
                        (void)xasprintf(ret_error, "message %zu: unknown role", i);
                        r = -EINVAL;
                }
        }
        if (r >= 0)
                r = user_turn_flush(&u, messages);
        json_decref(u.results); /* struct members: no cleanup attribute */
        json_decref(u.texts);
        return r;
}

static int anthropic_tools(const struct model_request *req, json_t *root, char **ret_error) {
        json_t *tools = json_array();
        int r = wire_set(root, "tools", tools);
        for (size_t i = 0; r >= 0 && i < req->n_tools; i++) {
                const struct model_tool_def *t = &req->tools[i];
                json_t *schema = NULL;
                r = wire_tool_schema(t, &schema, ret_error);
                if (r >= 0)
                        r = wire_append(tools, json_pack("{s:o, s:o, s:o}", "name", wire_str(t->name), "description",
                                                         wire_str(t->description), "input_schema", schema));
        }
        return r;
}

/* Marks the last block of content (an array) as a breakpoint. */
static int mark_last_block(json_t *content) {
        size_t n = json_array_size(content);
        return n > 0 ? wire_set(json_array_get(content, n - 1), "cache_control", wire_cache_control()) : 0;
}

/* The breakpoints (MODEL_CACHE_BREAKPOINTS): the last tool, the system
 * prompt (as one text block), the last message and the previous request's. */
static int anthropic_cache(json_t *root) {
        json_t *tools = json_object_get(root, "tools");
        int r = mark_last_block(tools);
        const char *system = wire_get_str(root, "system");
        if (r >= 0 && system) {
                json_t *blocks = json_array();
                r = blocks ? wire_append(blocks, text_block(system)) : -ENOMEM;
                if (r >= 0)
                        r = mark_last_block(blocks);
                if (r >= 0)
                        r = wire_set(root, "system", blocks); /* frees the string system points into */
                else
                        json_decref(blocks); /* not handed on (r < 0) */
        }
        json_t *messages = json_object_get(root, "messages");
        size_t at[2];
        wire_cache_targets(messages, at);
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(at); i++)
                if (at[i] != SIZE_MAX)
                        r = mark_last_block(json_object_get(json_array_get(messages, at[i]), "content"));
        return r;
}

int anthropic_build(const struct model_wire *w, const struct model_request *req, json_t **ret, char **ret_error) {
        _cleanup_json_ json_t *root = json_object();
        json_t *messages = json_array();
        int r = root ? wire_set(root, "model", wire_str(w->model)) : -ENOMEM;
        if (r >= 0)
                r = wire_set(root, "max_tokens", json_integer(w->max_tokens));
        if (r >= 0 && !strempty(req->system))
                r = wire_set(root, "system", wire_str(req->system));
        if (r >= 0)
                r = wire_set(root, "messages", messages);
        else
                json_decref(messages); /* not handed on (r < 0): a conditional hand-on */
        if (r >= 0)
                r = anthropic_messages(req, messages, ret_error);
        if (r >= 0 && req->n_tools > 0)
                r = anthropic_tools(req, root, ret_error);
        if (r >= 0 && w->cache_control)
                r = anthropic_cache(root);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(root);
        return 0;
}

static int tool_use(const json_t *block, size_t i, struct model_message *msg, char **ret_error) {
        const char *name = wire_get_str(block, "name"), *id = wire_get_str(block, "id");
        if (!name || !*name)
                return wire_malformed(ret_error, "tool_use block %zu has no name", i);
        struct model_tool_call *tc = &msg->calls[msg->n_calls++];
        tc->name = strdup(name);
        const json_t *input = json_object_get(block, "input");
        if (json_is_string(input)) /* not what Anthropic sends, but keep raw text raw */
                tc->arguments = strdup(json_string_value(input));
        else if (input)
                tc->arguments = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
        else
                tc->arguments = strdup("{}");
        if (!strempty(id))
                tc->id = strdup(id);
        else {
                char *hex = NULL;
                if (crypto_random_hex(8, &hex) >= 0 && xasprintf(&tc->id, "toolu_%s", hex) < 0)
                        tc->id = NULL;
                free(hex);
        }
        return tc->name && tc->arguments && tc->id ? 0 : -ENOMEM;
}

static enum model_stop anthropic_stop(const char *reason) {
        if (!reason || streq(reason, "end_turn") || streq(reason, "stop_sequence"))
                return MODEL_STOP_END;
        if (streq(reason, "tool_use"))
                return MODEL_STOP_TOOL_CALLS;
        if (streq(reason, "max_tokens"))
                return MODEL_STOP_MAX_TOKENS;
        return MODEL_STOP_OTHER;
}

int anthropic_parse(const json_t *root, struct model_response *res, char **ret_error) {
        const json_t *err = json_object_get(root, "error");
        const char *type = wire_get_str(root, "type");
        if ((err && !json_is_null(err)) || (type && streq(type, "error")))
                return wire_body_error(err ? err : root, ret_error);
        const json_t *content = json_object_get(root, "content");
        if (!json_is_array(content))
                return wire_malformed(ret_error, "no content");
        size_t n = json_array_size(content), n_tools = 0, i;
        const json_t *block;
        json_array_foreach(content, i, block) {
                const char *bt = wire_get_str(block, "type");
                n_tools += bt && streq(bt, "tool_use");
        }
        if (n_tools > MODEL_MAX_TOOL_CALLS)
                return wire_malformed(ret_error, "%zu tool calls (at most %d)", n_tools, MODEL_MAX_TOOL_CALLS);
        if (n_tools > 0 && !(res->message.calls = calloc(n_tools, sizeof *res->message.calls)))
                return -ENOMEM;
        res->message.text = strdup("");
        if (!res->message.text)
                return -ENOMEM;
        for (i = 0; i < n; i++) {
                block = json_array_get(content, i);
                const char *bt = wire_get_str(block, "type");
                int r = 0;
                if (!bt)
                        return wire_malformed(ret_error, "content block %zu has no type", i);
                if (streq(bt, "text")) {
                        const char *t = wire_get_str(block, "text");
                        r = t ? wire_text_append(&res->message.text, t) : 0;
                } else if (streq(bt, "tool_use"))
                        r = tool_use(block, i, &res->message, ret_error);
                /* thinking and other blocks are not part of the conversation we keep */
                if (r < 0)
                        return r;
        }
        if (n_tools > 0 && !*res->message.text) {
                free(res->message.text);
                res->message.text = NULL;
        }
        const char *reason = wire_get_str(root, "stop_reason");
        /* No stop reason: the message ended early (a stream the provider
         * cut), unless it holds complete tool calls. */
        if (!reason && !wire_calls_complete(&res->message))
                return wire_malformed(ret_error, "the message ended without a stop reason (cut short)");
        res->stop = anthropic_stop(reason);
        if (res->message.n_calls > 0 && res->stop == MODEL_STOP_END)
                res->stop = MODEL_STOP_TOOL_CALLS;
        const json_t *usage = json_object_get(root, "usage");
        int64_t uncached = wire_get_tokens(usage, "input_tokens");
        res->usage.cache_write_tokens = wire_get_tokens(usage, "cache_creation_input_tokens");
        res->usage.cache_read_tokens = wire_get_tokens(usage, "cache_read_input_tokens");
        res->usage.input_tokens = uncached + res->usage.cache_write_tokens + res->usage.cache_read_tokens;
        res->usage.output_tokens = wire_get_tokens(usage, "output_tokens");
        return 0;
}
