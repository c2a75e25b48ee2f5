/* Unit tests of the model layer: request bodies for both wire formats,
 * response parsing and stop mapping, bad responses, the retry policy, and
 * that the key never shows in an error. No network. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/text.h"
#include "model/model-internal.h"

#define KEY "sk-test-SECRET-0123456789abcdef"

/* ---- helpers ---- */

static void assert_json_eq(const char *got, const char *want) {
        json_error_t e;
        json_t *g = json_loads(got, 0, &e), *w = json_loads(want, 0, &e);
        assert_non_null(w); /* the test's own expectation parses */
        assert_non_null(g);
        if (!json_equal(g, w)) {
                char *ws = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS), *gs = json_dumps(g, JSON_COMPACT | JSON_SORT_KEYS);
                print_error("want %s\n got  %s\n", ws, gs);
                free(ws);
                free(gs);
                fail();
        }
        json_decref(g);
        json_decref(w);
}

static char *build(const struct model_wire *w, const struct model_request *req) {
        char *json = NULL, *err = NULL;
        int r = model_wire_build(w, req, &json, &err);
        if (r < 0)
                print_error("build failed: %s\n", err ? err : "?");
        assert_int_equal(r, 0);
        assert_null(err);
        return json;
}

/* A conversation with every kind of message. */
static struct model_tool_call calls[] = {
        {.id = "call_1", .name = "read_file", .arguments = "{\"path\":\"README.md\"}"},
        {.id = "call_2", .name = "run", .arguments = "{\"cmd\":\"make\"}"},
};
static const struct model_message convo[] = {
        {.role = MODEL_ROLE_USER, .text = "Make it blue."},
        {.role = MODEL_ROLE_ASSISTANT, .text = "Looking.", .calls = calls, .n_calls = 2},
        {.role = MODEL_ROLE_TOOL, .tool_call_id = "call_1", .text = "# Seed"},
        {.role = MODEL_ROLE_TOOL, .tool_call_id = "call_2", .text = "make: *** failed", .is_error = true},
        {.role = MODEL_ROLE_ASSISTANT, .text = "Done."},
        {.role = MODEL_ROLE_USER, .text = "Thanks"},
};
static const struct model_tool_def tools[] = {
        {.name = "read_file", .description = "Read a file",
         .parameters = "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}"},
        {.name = "finish", .description = "Finish", .parameters = NULL},
};
static const struct model_request convo_req = {
        .system = "You are a Seed.",
        .messages = convo,
        .n_messages = ARRAY_SIZE(convo),
        .tools = tools,
        .n_tools = ARRAY_SIZE(tools),
        .purpose = "chat",
};

/* ---- request building ---- */

static void test_openai_build(void **state) {
        const struct model_wire w = {.format = MODEL_FORMAT_OPENAI, .model = "m-1", .max_tokens = 1000};
        char *json = build(&w, &convo_req);
        assert_json_eq(json,
                "{\"model\":\"m-1\",\"max_tokens\":1000,\"messages\":["
                "{\"role\":\"system\",\"content\":\"You are a Seed.\"},"
                "{\"role\":\"user\",\"content\":\"Make it blue.\"},"
                "{\"role\":\"assistant\",\"content\":\"Looking.\",\"tool_calls\":["
                "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"README.md\\\"}\"}},"
                "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"run\",\"arguments\":\"{\\\"cmd\\\":\\\"make\\\"}\"}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"# Seed\"},"
                "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"Error: make: *** failed\"},"
                "{\"role\":\"assistant\",\"content\":\"Done.\"},"
                "{\"role\":\"user\",\"content\":\"Thanks\"}],"
                "\"tools\":["
                "{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"Read a file\","
                "\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}}},"
                "{\"type\":\"function\",\"function\":{\"name\":\"finish\",\"description\":\"Finish\","
                "\"parameters\":{\"type\":\"object\",\"properties\":{}}}}]}");
        free(json);
}

static void test_openai_build_variants(void **state) {
        /* Assistant calls without text: content null; raw invalid arguments kept as they are. */
        struct model_tool_call raw = {.id = "c9", .name = "run", .arguments = "{not json"};
        const struct model_message msgs[] = {
                {.role = MODEL_ROLE_USER, .text = "go"},
                {.role = MODEL_ROLE_ASSISTANT, .calls = &raw, .n_calls = 1},
                {.role = MODEL_ROLE_TOOL, .tool_call_id = "c9", .text = "bad arguments"},
        };
        const struct model_request req = {.messages = msgs, .n_messages = 3};
        const struct model_wire openrouter = {.format = MODEL_FORMAT_OPENAI, .model = "x/y", .max_tokens = 5,
                                              .usage_include = true};
        char *json = build(&openrouter, &req);
        assert_json_eq(json,
                "{\"model\":\"x/y\",\"max_tokens\":5,\"usage\":{\"include\":true},\"messages\":["
                "{\"role\":\"user\",\"content\":\"go\"},"
                "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c9\",\"type\":\"function\","
                "\"function\":{\"name\":\"run\",\"arguments\":\"{not json\"}}]},"
                "{\"role\":\"tool\",\"tool_call_id\":\"c9\",\"content\":\"bad arguments\"}]}");
        free(json);

        const struct model_wire openai = {.format = MODEL_FORMAT_OPENAI, .model = "gpt", .max_tokens = 7,
                                          .max_completion_tokens = true};
        json = build(&openai, &req);
        assert_non_null(strstr(json, "\"max_completion_tokens\":7"));
        assert_null(strstr(json, "\"max_tokens\""));
        assert_null(strstr(json, "\"usage\""));
        assert_null(strstr(json, "\"tools\""));
        free(json);
}

static void test_anthropic_build(void **state) {
        const struct model_wire w = {.format = MODEL_FORMAT_ANTHROPIC, .model = "claude", .max_tokens = 1000};
        char *json = build(&w, &convo_req);
        assert_json_eq(json,
                "{\"model\":\"claude\",\"max_tokens\":1000,\"system\":\"You are a Seed.\",\"messages\":["
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Make it blue.\"}]},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Looking.\"},"
                "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"read_file\",\"input\":{\"path\":\"README.md\"}},"
                "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"run\",\"input\":{\"cmd\":\"make\"}}]},"
                "{\"role\":\"user\",\"content\":["
                "{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":\"# Seed\"},"
                "{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\",\"content\":\"make: *** failed\",\"is_error\":true}]},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Done.\"}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Thanks\"}]}],"
                "\"tools\":["
                "{\"name\":\"read_file\",\"description\":\"Read a file\",\"input_schema\":{\"type\":\"object\","
                "\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}},"
                "{\"name\":\"finish\",\"description\":\"Finish\",\"input_schema\":{\"type\":\"object\",\"properties\":{}}}]}");
        free(json);
}


/* A picture with the owner's message (point and ask): after the text and
 * the page-data note, as a data: URL (OpenAI) or a base64 block (Anthropic). */
static void test_build_images(void **state) {
        static char png[] = "\x89PNG";
        struct model_image im = {.media_type = "image/png", .data = png, .len = 4};
        const struct model_message m = {.role = MODEL_ROLE_USER, .text = "Make this blue.", .images = &im, .n_images = 1};
        const struct model_request req = {.messages = &m, .n_messages = 1};
        const struct model_wire o = {.format = MODEL_FORMAT_OPENAI, .model = "m", .max_tokens = 10};
        char *json = build(&o, &req);
        assert_json_eq(json,
                "{\"model\":\"m\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":["
                "{\"type\":\"text\",\"text\":\"Make this blue.\"},"
                "{\"type\":\"text\",\"text\":\"" MODEL_IMAGE_NOTE "\"},"
                "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw==\"}}]}]}");
        free(json);
        const struct model_wire a = {.format = MODEL_FORMAT_ANTHROPIC, .model = "c", .max_tokens = 10};
        json = build(&a, &req);
        assert_json_eq(json,
                "{\"model\":\"c\",\"max_tokens\":10,\"messages\":[{\"role\":\"user\",\"content\":["
                "{\"type\":\"text\",\"text\":\"Make this blue.\"},"
                "{\"type\":\"text\",\"text\":\"" MODEL_IMAGE_NOTE "\"},"
                "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw==\"}}]}]}");
        free(json);
        /* A copy carries its own picture. */
        struct model_message c = {0};
        assert_int_equal(model_message_copy(&m, &c), 0);
        assert_int_equal(c.n_images, 1);
        assert_ptr_not_equal(c.images[0].data, im.data);
        assert_memory_equal(c.images[0].data, png, 4);
        model_message_done(&c);
}

static void test_anthropic_build_merges(void **state) {
        /* A user note after tool results joins their turn (results first); an
         * empty assistant turn is dropped; invalid arguments become {}. */
        struct model_tool_call raw = {.id = "t1", .name = "run", .arguments = "oops"};
        const struct model_message msgs[] = {
                {.role = MODEL_ROLE_USER, .text = "go"},
                {.role = MODEL_ROLE_ASSISTANT, .calls = &raw, .n_calls = 1},
                {.role = MODEL_ROLE_USER, .text = "also: hurry"},
                {.role = MODEL_ROLE_TOOL, .tool_call_id = "t1", .text = ""},
                {.role = MODEL_ROLE_ASSISTANT, .text = ""},
                {.role = MODEL_ROLE_USER, .text = "more"},
        };
        const struct model_request req = {.messages = msgs, .n_messages = ARRAY_SIZE(msgs)};
        const struct model_wire w = {.format = MODEL_FORMAT_ANTHROPIC, .model = "c", .max_tokens = 9};
        char *json = build(&w, &req);
        assert_json_eq(json,
                "{\"model\":\"c\",\"max_tokens\":9,\"messages\":["
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"go\"}]},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"run\",\"input\":{}}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\"},"
                "{\"type\":\"text\",\"text\":\"also: hurry\"},{\"type\":\"text\",\"text\":\"more\"}]}]}");
        free(json);
}

static void test_build_errors(void **state) {
        const struct model_tool_def bad_tool = {.name = "t", .parameters = "[1,2"};
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "x"};
        const struct model_message orphan = {.role = MODEL_ROLE_TOOL, .text = "x"};
        for (int f = 0; f < 2; f++) {
                const struct model_wire w = {.format = f ? MODEL_FORMAT_ANTHROPIC : MODEL_FORMAT_OPENAI, .model = "m",
                                             .max_tokens = 1};
                char *json = NULL, *err = NULL;
                assert_int_equal(model_wire_build(&w, &(struct model_request){.messages = &user, .n_messages = 1,
                                                                               .tools = &bad_tool, .n_tools = 1},
                                                  &json, &err),
                                 -EINVAL);
                assert_null(json);
                assert_non_null(err);
                assert_non_null(strstr(err, "tool 't'"));
                free(err);
                err = NULL;
                assert_int_equal(model_wire_build(&w, &(struct model_request){.messages = &orphan, .n_messages = 1},
                                                  &json, &err),
                                 -EINVAL);
                assert_non_null(strstr(err, "tool_call_id"));
                free(err);
        }
}

static void test_build_invalid_utf8(void **state) {
        const struct model_message m = {.role = MODEL_ROLE_USER, .text = "a\xff" "b\xc3"};
        const struct model_wire w = {.format = MODEL_FORMAT_OPENAI, .model = "m", .max_tokens = 1};
        char *json = build(&w, &(struct model_request){.messages = &m, .n_messages = 1});
        assert_non_null(strstr(json, "\"a\xef\xbf\xbd" "b\xef\xbf\xbd\""));
        free(json);
        char *s = text_utf8_sanitize("ok \xe2\x82\xac \xed\xa0\x80 \xc0\xaf");
        assert_string_equal(s, "ok \xe2\x82\xac \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd");
        free(s);
}

/* ---- response parsing ---- */

static int parse(enum model_format f, const char *body, struct model_response *res, char **err) {
        *err = NULL;
        return model_wire_parse(f, body, strlen(body), res, err);
}

static void test_openai_parse(void **state) {
        struct model_response res = {0};
        char *err;
        assert_int_equal(parse(MODEL_FORMAT_OPENAI,
                               "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":\"Hi!\"},"
                               "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,"
                               "\"cost\":0.0042}}",
                               &res, &err),
                         0);
        assert_int_equal(res.message.role, MODEL_ROLE_ASSISTANT);
        assert_string_equal(res.message.text, "Hi!");
        assert_int_equal(res.message.n_calls, 0);
        assert_int_equal(res.stop, MODEL_STOP_END);
        assert_int_equal(res.usage.input_tokens, 12);
        assert_int_equal(res.usage.output_tokens, 3);
        assert_true(res.usage.cost_usd > 0.0041 && res.usage.cost_usd < 0.0043);
        assert_true(res.usage.cost_reported);
        model_response_done(&res);

        assert_int_equal(parse(MODEL_FORMAT_OPENAI,
                               "{\"choices\":[{\"message\":{\"content\":null,\"tool_calls\":["
                               "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"run\",\"arguments\":\"{bad json\"}},"
                               "{\"type\":\"function\",\"function\":{\"name\":\"read\",\"arguments\":{\"p\":1}}}]},"
                               "\"finish_reason\":\"tool_calls\"}]}",
                               &res, &err),
                         0);
        assert_null(res.message.text);
        assert_int_equal(res.message.n_calls, 2);
        assert_string_equal(res.message.calls[0].id, "call_a");
        assert_string_equal(res.message.calls[0].name, "run");
        assert_string_equal(res.message.calls[0].arguments, "{bad json"); /* raw, even when not JSON */
        assert_true(startswith(res.message.calls[1].id, "call_")); /* generated when missing */
        assert_string_equal(res.message.calls[1].arguments, "{\"p\":1}");
        assert_int_equal(res.stop, MODEL_STOP_TOOL_CALLS);
        assert_int_equal(res.usage.input_tokens, 0);
        assert_true(res.usage.cost_usd == 0);
        assert_false(res.usage.cost_reported); /* no usage.cost: unknown, not free */
        model_response_done(&res);

        /* A cost no call has (1e308 would overflow the month's sum): unknown. */
        assert_int_equal(parse(MODEL_FORMAT_OPENAI,
                               "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],"
                               "\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"cost\":1e308}}",
                               &res, &err),
                         0);
        assert_false(res.usage.cost_reported);
        assert_true(res.usage.cost_usd == 0);
        model_response_done(&res);

        /* Content as parts (some compatible servers). */
        assert_int_equal(parse(MODEL_FORMAT_OPENAI,
                               "{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                               "{\"type\":\"text\",\"text\":\"b\"}]},\"finish_reason\":\"stop\"}]}",
                               &res, &err),
                         0);
        assert_string_equal(res.message.text, "ab");
        model_response_done(&res);
}

static void test_openai_stop_mapping(void **state) {
        static const struct {
                const char *finish, *calls;
                enum model_stop want;
        } table[] = {
                {"\"stop\"", "", MODEL_STOP_END},
                {"\"length\"", "", MODEL_STOP_MAX_TOKENS},
                {"\"tool_calls\"", ",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]",
                 MODEL_STOP_TOOL_CALLS},
                /* servers that say "stop" (or nothing) while asking for tools */
                {"\"stop\"", ",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]",
                 MODEL_STOP_TOOL_CALLS},
                {"null", ",\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]",
                 MODEL_STOP_TOOL_CALLS},
                {"\"content_filter\"", "", MODEL_STOP_OTHER},
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                char body[512];
                snprintf(body, sizeof body, "{\"choices\":[{\"message\":{\"content\":\"x\"%s},\"finish_reason\":%s}]}",
                         table[i].calls, table[i].finish);
                struct model_response res = {0};
                char *err;
                assert_int_equal(parse(MODEL_FORMAT_OPENAI, body, &res, &err), 0);
                assert_int_equal(res.stop, table[i].want);
                model_response_done(&res);
        }
        /* max_tokens with nothing produced yet is still a response */
        struct model_response res = {0};
        char *err;
        assert_int_equal(parse(MODEL_FORMAT_OPENAI,
                               "{\"choices\":[{\"message\":{\"content\":null},\"finish_reason\":\"length\"}]}", &res,
                               &err),
                         0);
        assert_int_equal(res.stop, MODEL_STOP_MAX_TOKENS);
        model_response_done(&res);
}

static void test_anthropic_parse(void **state) {
        struct model_response res = {0};
        char *err;
        assert_int_equal(parse(MODEL_FORMAT_ANTHROPIC,
                               "{\"type\":\"message\",\"role\":\"assistant\",\"content\":["
                               "{\"type\":\"thinking\",\"thinking\":\"hmm\"},"
                               "{\"type\":\"text\",\"text\":\"Let me look.\"},"
                               "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{\"path\":\"a b\"}}],"
                               "\"stop_reason\":\"tool_use\",\"usage\":{\"input_tokens\":50,\"output_tokens\":7,"
                               "\"cache_read_input_tokens\":5}}",
                               &res, &err),
                         0);
        assert_string_equal(res.message.text, "Let me look.");
        assert_int_equal(res.message.n_calls, 1);
        assert_string_equal(res.message.calls[0].id, "toolu_1");
        assert_string_equal(res.message.calls[0].name, "read_file");
        assert_string_equal(res.message.calls[0].arguments, "{\"path\":\"a b\"}");
        assert_int_equal(res.stop, MODEL_STOP_TOOL_CALLS);
        assert_int_equal(res.usage.input_tokens, 55);
        assert_int_equal(res.usage.output_tokens, 7);
        model_response_done(&res);

        static const struct {
                const char *reason;
                enum model_stop want;
        } table[] = {
                {"\"end_turn\"", MODEL_STOP_END},       {"\"stop_sequence\"", MODEL_STOP_END},
                {"\"max_tokens\"", MODEL_STOP_MAX_TOKENS}, {"\"refusal\"", MODEL_STOP_OTHER},
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                char body[256];
                snprintf(body, sizeof body,
                         "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"stop_reason\":%s}", table[i].reason);
                assert_int_equal(parse(MODEL_FORMAT_ANTHROPIC, body, &res, &err), 0);
                assert_int_equal(res.stop, table[i].want);
                model_response_done(&res);
        }
        /* An empty turn is an empty text, not an error. */
        assert_int_equal(parse(MODEL_FORMAT_ANTHROPIC, "{\"content\":[],\"stop_reason\":\"end_turn\"}", &res, &err), 0);
        assert_string_equal(res.message.text, "");
        model_response_done(&res);
}

static void test_bad_responses(void **state) {
        static const struct {
                enum model_format f;
                const char *body;
                int want;
                const char *msg;
        } table[] = {
                {MODEL_FORMAT_OPENAI, "{\"choices\": [", -EBADMSG, "malformed response: invalid JSON"},
                {MODEL_FORMAT_OPENAI, "<html>502 Bad Gateway</html>", -EBADMSG, "malformed response"},
                {MODEL_FORMAT_OPENAI, "[1]", -EBADMSG, "not a JSON object"},
                {MODEL_FORMAT_OPENAI, "{}", -EBADMSG, "no choices"},
                {MODEL_FORMAT_OPENAI, "{\"choices\":[]}", -EBADMSG, "no choices"},
                {MODEL_FORMAT_OPENAI, "{\"choices\":[{\"finish_reason\":\"stop\"}]}", -EBADMSG, "no message"},
                {MODEL_FORMAT_OPENAI, "{\"choices\":[{\"message\":{\"content\":null},\"finish_reason\":\"stop\"}]}",
                 -EBADMSG, "neither content nor tool calls"},
                {MODEL_FORMAT_OPENAI,
                 "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"1\",\"function\":{\"arguments\":\"{}\"}}]}}]}",
                 -EBADMSG, "no function name"},
                {MODEL_FORMAT_OPENAI, "{\"error\":{\"message\":\"Upstream overloaded\",\"code\":502}}", -EAGAIN,
                 "provider error 502: Upstream overloaded"},
                {MODEL_FORMAT_OPENAI, "{\"error\":{\"message\":\"slow down\",\"code\":\"rate_limit_exceeded\"}}", -EAGAIN,
                 "slow down"},
                {MODEL_FORMAT_OPENAI, "{\"error\":{\"message\":\"No such model\",\"code\":400}}", -EREMOTEIO,
                 "provider error 400: No such model"},
                {MODEL_FORMAT_OPENAI, "{\"error\":\"plain\"}", -EREMOTEIO, "provider error: plain"},
                {MODEL_FORMAT_OPENAI,
                 "{\"choices\":[{\"error\":{\"message\":\"provider died\",\"code\":500},\"finish_reason\":\"error\"}]}",
                 -EAGAIN, "provider died"},
                {MODEL_FORMAT_ANTHROPIC, "{\"type\":\"message\"}", -EBADMSG, "no content"},
                {MODEL_FORMAT_ANTHROPIC, "{\"content\":[{\"text\":\"x\"}]}", -EBADMSG, "no type"},
                {MODEL_FORMAT_ANTHROPIC, "{\"content\":[{\"type\":\"tool_use\",\"id\":\"x\",\"input\":{}}]}", -EBADMSG,
                 "no name"},
                {MODEL_FORMAT_ANTHROPIC,
                 "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}", -EAGAIN,
                 "provider error overloaded_error: Overloaded"},
                {MODEL_FORMAT_ANTHROPIC,
                 "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}",
                 -EREMOTEIO, "invalid_request_error"},
                /* A reply that ended without a finish or stop reason was cut short (a
                 * provider's stream that ended early), unless it holds complete calls. */
                {MODEL_FORMAT_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"Let me wri\"}}]}", -EBADMSG,
                 "without a finish reason"},
                {MODEL_FORMAT_OPENAI, "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":null}]}",
                 -EBADMSG, "without a finish reason"},
                {MODEL_FORMAT_OPENAI,
                 "{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"1\",\"function\":{\"name\":\"f\","
                 "\"arguments\":\"{\\\"path\\\": \\\"org\"}}]}}]}",
                 -EBADMSG, "without a finish reason"},
                {MODEL_FORMAT_ANTHROPIC, "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"stop_reason\":null}",
                 -EBADMSG, "without a stop reason"},
                {MODEL_FORMAT_ANTHROPIC, "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}", -EBADMSG,
                 "without a stop reason"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                struct model_response res = {0};
                char *err;
                int r = parse(table[i].f, table[i].body, &res, &err);
                if (r != table[i].want || !err || !strstr(err, table[i].msg))
                        print_error("case %zu: r=%d err=%s\n", i, r, err ? err : "(null)");
                assert_int_equal(r, table[i].want);
                assert_non_null(err);
                assert_non_null(strstr(err, table[i].msg));
                assert_null(res.message.text); /* *ret untouched on failure */
                free(err);
        }
}

static void test_too_many_tool_calls(void **state) {
        struct buf_like {
                char *s;
                size_t len;
        } b = {malloc(64 * 1024), 0};
        b.len += (size_t)sprintf(b.s, "{\"choices\":[{\"message\":{\"tool_calls\":[");
        for (int i = 0; i <= MODEL_MAX_TOOL_CALLS; i++)
                b.len += (size_t)sprintf(b.s + b.len, "%s{\"id\":\"%d\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}",
                                         i ? "," : "", i);
        strcpy(b.s + b.len, "]}}]}");
        struct model_response res = {0};
        char *err;
        assert_int_equal(parse(MODEL_FORMAT_OPENAI, b.s, &res, &err), -EBADMSG);
        assert_non_null(strstr(err, "tool calls"));
        free(err);
        free(b.s);
}

static void test_error_text(void **state) {
        char *t = model_wire_error_text("{\"error\":{\"message\":\"Invalid model\"}}", 37);
        assert_string_equal(t, "Invalid model");
        free(t);
        t = model_wire_error_text("", 0);
        assert_string_equal(t, "(empty body)");
        free(t);
        t = model_wire_error_text("line1\nline2\r\n", 13);
        assert_string_equal(t, "line1 line2");
        free(t);
        char big[2000];
        memset(big, 'x', sizeof big);
        t = model_wire_error_text(big, sizeof big);
        assert_int_equal(strlen(t), MODEL_ERROR_EXCERPT + 3);
        assert_true(endswith(t, "..."));
        free(t);
}

/* ---- retry policy ---- */

static void test_retry_table(void **state) {
        static const struct {
                long status;
                bool retry;
        } table[] = {
                {200, false}, {400, false}, {401, false}, {403, false}, {404, false}, {408, true},
                {409, true},  {413, false}, {422, false}, {429, true},  {500, true},  {502, true},
                {503, true},  {529, true},  {599, true},  {600, false}, {0, false},
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                if (model_status_retryable(table[i].status) != table[i].retry)
                        print_error("status %ld\n", table[i].status);
                assert_int_equal(model_status_retryable(table[i].status), table[i].retry);
        }
        assert_true(model_error_code_retryable("429"));
        assert_true(model_error_code_retryable("502"));
        assert_true(model_error_code_retryable("rate_limit_exceeded"));
        assert_true(model_error_code_retryable("overloaded_error"));
        assert_false(model_error_code_retryable("400"));
        assert_false(model_error_code_retryable("invalid_request_error"));
        assert_false(model_error_code_retryable("context_length_exceeded"));
        assert_false(model_error_code_retryable(""));
        assert_false(model_error_code_retryable(NULL));
}

static void test_backoff_bounds(void **state) {
        for (int attempt = 1; attempt <= 12; attempt++) {
                int64_t ceiling = 1000;
                for (int i = 1; i < attempt; i++)
                        ceiling = ceiling * 2 > MODEL_BACKOFF_CAP_MS ? MODEL_BACKOFF_CAP_MS : ceiling * 2;
                /* the extremes of the random input hit the bounds exactly */
                assert_int_equal(model_backoff_ms(attempt, 1000, (uint64_t)ceiling), ceiling);
                assert_int_equal(model_backoff_ms(attempt, 1000, 0), 0);
                int64_t max = 0;
                for (int k = 0; k < 2000; k++) {
                        uint64_t rnd;
                        assert_int_equal(crypto_random(&rnd, sizeof rnd), 0);
                        int64_t d = model_backoff_ms(attempt, 1000, rnd);
                        assert_true(d >= 0 && d <= ceiling);
                        if (d > max)
                                max = d;
                }
                assert_true(max >= ceiling * 9 / 10); /* full jitter spans the range */
        }
        assert_int_equal(model_backoff_ms(1, 0, 12345), 0);
        assert_int_equal(model_backoff_ms(1, 10, UINT64_MAX), UINT64_MAX % 11);
        assert_true(model_backoff_ms(1000, 1 << 30, UINT64_MAX) <= MODEL_BACKOFF_CAP_MS); /* no overflow */
}

static void test_retry_after(void **state) {
        assert_int_equal(model_retry_after_ms("3", false), 3000);
        assert_int_equal(model_retry_after_ms(" 2 ", false), 2000);
        assert_int_equal(model_retry_after_ms("1.5", false), 1500);
        assert_int_equal(model_retry_after_ms("0", false), 0);
        assert_int_equal(model_retry_after_ms("120", false), MODEL_RETRY_AFTER_CAP_MS);
        assert_int_equal(model_retry_after_ms("99999999999999999999", false), MODEL_RETRY_AFTER_CAP_MS);
        assert_int_equal(model_retry_after_ms("250", true), 250);
        assert_int_equal(model_retry_after_ms("Wed, 21 Oct 2015 07:28:00 GMT", false), -1);
        assert_int_equal(model_retry_after_ms("-1", false), -1);
        assert_int_equal(model_retry_after_ms("nan", false), -1);
        assert_int_equal(model_retry_after_ms("inf", false), -1);
        assert_int_equal(model_retry_after_ms("", false), -1);
        assert_int_equal(model_retry_after_ms(NULL, false), -1);
}

/* ---- configuration and the key ---- */

/* One table says every provider's endpoint and key variable: a named
 * provider has both, fixed in code; the one without an endpoint takes
 * model.base_url and model.api_key_env. */
/* ---- prompt caching ---- */

/* How many cache_control breakpoints a JSON value holds (each must be
 * {"type":"ephemeral"}). */
static size_t count_breakpoints(const json_t *v) {
        size_t n = 0, i;
        const char *key;
        json_t *x;
        if (json_is_object(v)) {
                json_object_foreach((json_t *)v, key, x) {
                        if (streq(key, "cache_control")) {
                                assert_true(json_is_object(x));
                                assert_string_equal(json_string_value(json_object_get(x, "type")), "ephemeral");
                                n++;
                        } else
                                n += count_breakpoints(x);
                }
        } else if (json_is_array(v))
                json_array_foreach((json_t *)v, i, x) n += count_breakpoints(x);
        return n;
}

static json_t *build_json(const struct model_wire *w, const struct model_request *req) {
        char *s = build(w, req);
        json_t *j = json_loads(s, 0, NULL);
        free(s);
        assert_non_null(j);
        return j;
}

static void test_anthropic_cache_markers(void **state) {
        const struct model_wire w = {.format = MODEL_FORMAT_ANTHROPIC, .model = "claude", .max_tokens = 1000,
                                     .cache_control = true};
        char *json = build(&w, &convo_req);
        /* The last tool, the system prompt (now a block), the last turn, and
         * the tool results before the last assistant turn (the previous
         * request's last turn). */
        assert_json_eq(json,
                "{\"model\":\"claude\",\"max_tokens\":1000,"
                "\"system\":[{\"type\":\"text\",\"text\":\"You are a Seed.\",\"cache_control\":{\"type\":\"ephemeral\"}}],"
                "\"messages\":["
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Make it blue.\"}]},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Looking.\"},"
                "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"read_file\",\"input\":{\"path\":\"README.md\"}},"
                "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"run\",\"input\":{\"cmd\":\"make\"}}]},"
                "{\"role\":\"user\",\"content\":["
                "{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":\"# Seed\"},"
                "{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\",\"content\":\"make: *** failed\",\"is_error\":true,"
                "\"cache_control\":{\"type\":\"ephemeral\"}}]},"
                "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"Done.\"}]},"
                "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Thanks\",\"cache_control\":{\"type\":\"ephemeral\"}}]}],"
                "\"tools\":["
                "{\"name\":\"read_file\",\"description\":\"Read a file\",\"input_schema\":{\"type\":\"object\","
                "\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}},"
                "{\"name\":\"finish\",\"description\":\"Finish\",\"input_schema\":{\"type\":\"object\",\"properties\":{}},"
                "\"cache_control\":{\"type\":\"ephemeral\"}}]}");
        free(json);

        /* Never more than MODEL_CACHE_BREAKPOINTS, whatever the conversation;
         * fewer when there is no system prompt, no tools, one turn. */
        struct model_request req = convo_req;
        for (size_t n = 1; n <= ARRAY_SIZE(convo); n++) {
                req.n_messages = n;
                json_t *j = build_json(&w, &req);
                size_t k = count_breakpoints(j);
                assert_true(k >= 3 && k <= MODEL_CACHE_BREAKPOINTS);
                json_decref(j);
        }
        const struct model_request bare = {.messages = convo, .n_messages = 1};
        json_t *j = build_json(&w, &bare);
        assert_int_equal(count_breakpoints(j), 1);
        assert_true(json_is_null(json_object_get(j, "system")) || !json_object_get(j, "system"));
        json_decref(j);
}

static void test_openai_cache_markers(void **state) {
        const struct model_wire w = {.format = MODEL_FORMAT_OPENAI, .model = "anthropic/claude-sonnet-4",
                                     .max_tokens = 1000, .usage_include = true, .cache_control = true};
        json_t *j = build_json(&w, &convo_req);
        json_t *msgs = json_object_get(j, "messages");
        assert_int_equal(json_array_size(msgs), 1 + ARRAY_SIZE(convo));
        /* system, the tool result before "Done.", and the last user message take parts with a breakpoint */
        static const size_t marked[] = {0, 4, 6};
        for (size_t i = 0, k = 0; i < json_array_size(msgs); i++) {
                json_t *content = json_object_get(json_array_get(msgs, i), "content");
                if (k < ARRAY_SIZE(marked) && marked[k] == i) {
                        assert_true(json_is_array(content));
                        assert_int_equal(json_array_size(content), 1);
                        assert_int_equal(count_breakpoints(content), 1);
                        assert_string_equal(json_string_value(json_object_get(json_array_get(content, 0), "type")), "text");
                        k++;
                } else
                        assert_true(json_is_string(content) || json_is_null(content));
        }
        assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(json_array_get(msgs, 4),
                                                                                             "content"), 0), "text")),
                            "Error: make: *** failed");
        assert_int_equal(count_breakpoints(j), 3);
        json_decref(j);

        /* The breakpoint count stays within the limit for every prefix. */
        struct model_request req = convo_req;
        for (size_t n = 1; n <= ARRAY_SIZE(convo); n++) {
                req.n_messages = n;
                j = build_json(&w, &req);
                assert_true(count_breakpoints(j) <= MODEL_CACHE_BREAKPOINTS);
                json_decref(j);
        }

        /* Without the flag: plain strings, no breakpoint anywhere. */
        const struct model_wire plain = {.format = MODEL_FORMAT_OPENAI, .model = "gpt", .max_tokens = 10};
        j = build_json(&plain, &convo_req);
        assert_int_equal(count_breakpoints(j), 0);
        json_decref(j);
        const struct model_wire anthropic_plain = {.format = MODEL_FORMAT_ANTHROPIC, .model = "c", .max_tokens = 10};
        j = build_json(&anthropic_plain, &convo_req);
        assert_int_equal(count_breakpoints(j), 0);
        json_decref(j);
}

static void test_cache_providers(void **state) {
        /* Exactly Anthropic's models take breakpoints: natively, and through
         * OpenRouter; OpenAI, other OpenRouter models and local servers never. */
        static const struct {
                const char *provider, *model;
                bool caches;
        } table[] = {
                {"anthropic", "claude-sonnet-4-5", true},
                {"openrouter", "anthropic/claude-sonnet-4.5", true},
                {"openrouter", "openai/gpt-5", false},
                {"openrouter", "anthropicx/other", false},
                {"openrouter", "Anthropic/claude", false},
                {"openai", "gpt-5", false},
                {"openai", "anthropic/claude", false},
                {"openai-compatible", "anthropic/claude", false},
                {"openai-compatible", "scripted", false},
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                assert_int_equal(model_provider_caches(model_provider_find(table[i].provider), table[i].model),
                                 table[i].caches);
        assert_false(model_provider_caches(NULL, "anthropic/claude"));
        assert_false(model_provider_caches(model_provider_find("anthropic"), NULL));
}

static void test_cache_usage_parse(void **state) {
        struct model_response res = {0};
        char *err = NULL;
        /* Anthropic: input_tokens is the uncached rest */
        assert_int_equal(parse(MODEL_FORMAT_ANTHROPIC,
                               "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"stop_reason\":\"end_turn\","
                               "\"usage\":{\"input_tokens\":40,\"cache_creation_input_tokens\":300,"
                               "\"cache_read_input_tokens\":2000,\"output_tokens\":9}}",
                               &res, &err),
                         0);
        assert_int_equal(res.usage.input_tokens, 2340);
        assert_int_equal(res.usage.cache_read_tokens, 2000);
        assert_int_equal(res.usage.cache_write_tokens, 300);
        assert_int_equal(res.usage.output_tokens, 9);
        model_response_done(&res);
        /* OpenAI style (OpenAI, OpenRouter): within prompt_tokens */
        assert_int_equal(parse(MODEL_FORMAT_OPENAI,
                               "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],"
                               "\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":5,"
                               "\"prompt_tokens_details\":{\"cached_tokens\":800,\"cache_write_tokens\":150}}}",
                               &res, &err),
                         0);
        assert_int_equal(res.usage.input_tokens, 1000);
        assert_int_equal(res.usage.cache_read_tokens, 800);
        assert_int_equal(res.usage.cache_write_tokens, 150);
        model_response_done(&res);
        /* None reported: 0; nonsense clamped into 0..input */
        static const char *const odd[] = {
                "{\"prompt_tokens\":10}",
                "{\"prompt_tokens\":10,\"prompt_tokens_details\":null}",
                "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":-5,\"cache_write_tokens\":\"7\"}}",
                "{\"prompt_tokens\":10,\"prompt_tokens_details\":{\"cached_tokens\":99,\"cache_write_tokens\":99}}",
                "{\"prompt_tokens\":-3,\"prompt_tokens_details\":{\"cached_tokens\":4}}",
        };
        static const int64_t want_read[] = {0, 0, 0, 10, 0}, want_in[] = {10, 10, 10, 10, 0};
        for (size_t i = 0; i < ARRAY_SIZE(odd); i++) {
                char body[512];
                snprintf(body, sizeof body,
                         "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}],\"usage\":%s}", odd[i]);
                assert_int_equal(parse(MODEL_FORMAT_OPENAI, body, &res, &err), 0);
                assert_int_equal(res.usage.input_tokens, want_in[i]);
                assert_int_equal(res.usage.cache_read_tokens, want_read[i]);
                assert_int_equal(res.usage.cache_write_tokens, 0);
                model_response_done(&res);
        }
        assert_int_equal(parse(MODEL_FORMAT_ANTHROPIC,
                               "{\"content\":[],\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":1e300,"
                               "\"cache_read_input_tokens\":-1}}",
                               &res, &err),
                         0);
        assert_int_equal(res.usage.input_tokens, MODEL_TOKENS_MAX);
        assert_int_equal(res.usage.cache_read_tokens, 0);
        model_response_done(&res);
}

static void test_providers_table(void **state) {
        size_t n;
        const struct model_provider *p = model_providers(&n);
        assert_true(n >= 4);
        for (size_t i = 0; i < n; i++) {
                assert_true(p[i].name && p[i].name[0]);
                assert_ptr_equal(model_provider_find(p[i].name), &p[i]); /* unique */
                assert_true(!p[i].endpoint == !p[i].key_env);
                assert_true(!p[i].endpoint == !p[i].models_endpoint);
                if (p[i].endpoint) {
                        assert_true(startswith(p[i].endpoint, "https://"));
                        assert_true(startswith(p[i].models_endpoint, "https://"));
                        /* the list lives on the same host as the completions */
                        const char *h1 = p[i].endpoint + 8, *h2 = p[i].models_endpoint + 8;
                        size_t n1 = strcspn(h1, "/"), n2 = strcspn(h2, "/");
                        assert_true(n1 == n2 && strncmp(h1, h2, n1) == 0);
                }
        }
        assert_null(model_provider_find(NULL));
        assert_null(model_provider_find("nope"));
        assert_string_equal(model_provider_find("anthropic")->key_env, "ANTHROPIC_API_KEY");
        assert_int_equal(model_provider_find("anthropic")->format, MODEL_FORMAT_ANTHROPIC);
        char *names = model_provider_names(" or ");
        assert_string_equal(names, "openrouter, openai, anthropic or openai-compatible");
        free(names);
}


static void test_model_new(void **state) {
        struct model *m = NULL;
        char *err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "nope", .name = "x"}, &m, &err), -EINVAL);
        assert_non_null(strstr(err, "unknown model provider 'nope'"));
        free(err);
        err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openrouter", .name = "x"}, &m, &err), -ENOKEY);
        assert_non_null(strstr(err, "needs an API key"));
        free(err);
        err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "x",
                                                          .base_url = "ftp://host/v1"},
                                   &m, &err),
                         -EINVAL);
        assert_non_null(strstr(err, "model.base_url"));
        free(err);
        err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "x"}, &m, &err),
                         -EINVAL);
        free(err);
        err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai", .name = ""}, &m, &err), -EINVAL);
        free(err);
        err = NULL;
        /* a key that would inject a header is refused without being quoted */
        assert_int_equal(model_new(&(struct model_config){.provider = "openai", .name = "gpt",
                                                          .api_key = KEY "\r\nX-Evil: 1"},
                                   &m, &err),
                         -EINVAL);
        assert_null(strstr(err, KEY));
        free(err);
        err = NULL;
        assert_null(m);

        /* named providers' endpoints are constants: base_url cannot redirect a key */
        static const struct {
                const char *provider, *endpoint, *models;
        } named[] = {
                {"openrouter", "https://openrouter.ai/api/v1/chat/completions", "https://openrouter.ai/api/v1/models"},
                {"openai", "https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1/models"},
                {"anthropic", "https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/models?limit=1000"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(named); i++) {
                assert_int_equal(model_new(&(struct model_config){.provider = named[i].provider, .name = "m",
                                                                  .api_key = KEY,
                                                                  .base_url = "http://evil.example/v1"},
                                           &m, &err),
                                 0);
                assert_string_equal(model_endpoint(m), named[i].endpoint);
                assert_string_equal(model_models_endpoint(m), named[i].models);
                assert_string_equal(model_provider(m), named[i].provider);
                model_free(m);
                m = NULL;
        }
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "local",
                                                          .base_url = "http://127.0.0.1:11434/v1//"},
                                   &m, &err),
                         0);
        assert_string_equal(model_endpoint(m), "http://127.0.0.1:11434/v1/chat/completions");
        assert_string_equal(model_models_endpoint(m), "http://127.0.0.1:11434/v1/models");
        assert_string_equal(model_name(m), "local");
        assert_int_equal(model_set_endpoint_for_tests(m, "file:///etc/passwd"), -EINVAL);
        assert_int_equal(model_set_endpoint_for_tests(m, "http://127.0.0.1:1/v1/messages"), 0);
        assert_string_equal(model_endpoint(m), "http://127.0.0.1:1/v1/messages");
        assert_string_equal(model_models_endpoint(m), "http://127.0.0.1:1/v1/models");
        model_free(m);
}

/* The one list shape: OpenRouter's says which models take tools,
 * Anthropic's models all do, OpenAI's does not say. */
static void test_models_parse(void **state) {
        struct model_list l = {0};
        char *err = NULL;
        const char *openrouter =
                "{\"data\":[{\"id\":\"a/tools\",\"name\":\"A: Tools\",\"context_length\":200000,"
                "\"supported_parameters\":[\"max_tokens\",\"tools\"]},"
                "{\"id\":\"b/no-tools\",\"name\":\"B\\u0007\\nbell\",\"supported_parameters\":[\"max_tokens\"]},"
                "{\"id\":\"\"},{\"id\":\"bad\\nid\"},{\"name\":\"no id\"},7,"
                "{\"id\":\"c/unsaid\"}]}";
        assert_int_equal(model_wire_parse_models(openrouter, strlen(openrouter), false, &l, &err), 0);
        assert_int_equal(l.n, 3);
        assert_false(l.truncated);
        assert_string_equal(l.models[0].id, "a/tools");
        assert_string_equal(l.models[0].name, "A: Tools");
        assert_int_equal(l.models[0].tools, 1);
        assert_int_equal(l.models[0].context_length, 200000);
        assert_string_equal(l.models[1].id, "b/no-tools");
        assert_string_equal(l.models[1].name, "B  bell"); /* control characters are not shown */
        assert_int_equal(l.models[1].tools, 0);
        assert_string_equal(l.models[2].id, "c/unsaid");
        assert_null(l.models[2].name);
        assert_int_equal(l.models[2].tools, -1);
        model_list_done(&l);

        const char *anthropic = "{\"data\":[{\"type\":\"model\",\"id\":\"claude-x\",\"display_name\":\"Claude X\"}],"
                                "\"has_more\":false}";
        assert_int_equal(model_wire_parse_models(anthropic, strlen(anthropic), true, &l, &err), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.models[0].name, "Claude X");
        assert_int_equal(l.models[0].tools, 1);
        model_list_done(&l);

        static const struct {
                const char *body;
                int r;
                const char *err;
        } bad[] = {
                {"not json", -EBADMSG, "malformed response: invalid JSON"},
                {"[]", -EBADMSG, "not a JSON object"},
                {"{\"object\":\"list\"}", -EBADMSG, "no \"data\" list"},
                {"{\"error\":{\"message\":\"Incorrect API key\",\"code\":\"invalid_api_key\"}}", -EREMOTEIO,
                 "Incorrect API key"},
                {"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}", -EREMOTEIO,
                 "busy"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                assert_int_equal(model_wire_parse_models(bad[i].body, strlen(bad[i].body), false, &l, &err), bad[i].r);
                assert_non_null(strstr(err, bad[i].err));
                free(err);
                err = NULL;
        }

        /* Bounded: at most MODEL_LIST_MAX models are kept, and ids at most MODEL_ID_MAX bytes. */
        struct buf b = BUF_INIT(SIZE_MAX);
        assert_int_equal(buf_puts(&b, "{\"data\":["), 0);
        for (int i = 0; i < MODEL_LIST_MAX + 5; i++)
                assert_int_equal(buf_printf(&b, "%s{\"id\":\"m%d\"}", i ? "," : "", i), 0);
        assert_int_equal(buf_printf(&b, "]}"), 0);
        assert_int_equal(model_wire_parse_models(b.data, b.len, false, &l, &err), 0);
        assert_int_equal(l.n, MODEL_LIST_MAX);
        assert_true(l.truncated);
        model_list_done(&l);
        buf_free(&b);
        char longid[MODEL_ID_MAX + 40];
        memset(longid, 'x', sizeof longid);
        longid[sizeof longid - 1] = 0;
        _cleanup_free_ char *one = NULL;
        assert_int_equal(xasprintf(&one, "{\"data\":[{\"id\":\"%s\"},{\"id\":\"ok\"}]}", longid), 0);
        assert_int_equal(model_wire_parse_models(one, strlen(one), false, &l, &err), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.models[0].id, "ok");
        model_list_done(&l);
}

static void test_redact(void **state) {
        char *s = text_redact("a " KEY " b " KEY, KEY);
        assert_string_equal(s, "a [redacted] b [redacted]");
        free(s);
        s = text_redact("nothing", NULL);
        assert_string_equal(s, "nothing");
        free(s);
}

/* A loopback port with nothing listening (connection refused, no network). */
static int closed_port(void) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        close(fd);
        return ntohs(sa.sin_port);
}

static void test_key_never_in_errors(void **state) {
        struct model *m = NULL;
        char *err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai", .name = "gpt", .api_key = KEY,
                                                          .max_attempts = 2, .backoff_base_ms = 1},
                                   &m, &err),
                         0);
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/chat/completions", closed_port());
        assert_int_equal(model_set_endpoint_for_tests(m, url), 0);
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "hi " KEY};
        struct model_response res = {0};

        /* network failure, retried: the error names the problem, not the key */
        int r = model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1}, &res, &err);
        assert_true(r == -ECONNREFUSED);
        assert_non_null(err);
        assert_non_null(strstr(err, "openai: "));
        assert_non_null(strstr(err, "2 attempts"));
        assert_null(strstr(err, KEY));
        free(err);
        err = NULL;

        /* an error that would quote the key is redacted */
        const struct model_tool_def t = {.name = KEY, .parameters = "nope"};
        r = model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1, .tools = &t, .n_tools = 1},
                           &res, &err);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(err, "tool '[redacted]'"));
        assert_null(strstr(err, KEY));
        free(err);
        model_free(m);
}

static bool always(void *userdata) {
        (*(int *)userdata)++;
        return true;
}

static void test_cancel(void **state) {
        struct model *m = NULL;
        char *err = NULL;
        assert_int_equal(model_new(&(struct model_config){.provider = "openai-compatible", .name = "x",
                                                          .base_url = "http://127.0.0.1:1"},
                                   &m, &err),
                         0);
        int polls = 0;
        const struct model_message user = {.role = MODEL_ROLE_USER, .text = "hi"};
        struct model_response res = {0};
        assert_int_equal(model_complete(m, &(struct model_request){.messages = &user, .n_messages = 1,
                                                                   .cancelled = always, .cancel_userdata = &polls},
                                        &res, &err),
                         -ECANCELED);
        assert_true(polls >= 1);
        assert_non_null(strstr(err, "cancelled"));
        free(err);
        model_free(m);
}

static void test_message_copy(void **state) {
        struct model_message copy;
        assert_int_equal(model_message_copy(&convo[1], &copy), 0);
        assert_int_equal(copy.role, MODEL_ROLE_ASSISTANT);
        assert_string_equal(copy.text, "Looking.");
        assert_int_equal(copy.n_calls, 2);
        assert_ptr_not_equal(copy.calls, convo[1].calls);
        assert_string_equal(copy.calls[1].arguments, "{\"cmd\":\"make\"}");
        assert_ptr_not_equal(copy.calls[1].arguments, calls[1].arguments);
        model_message_done(&copy);
        assert_null(copy.text);
        assert_int_equal(copy.n_calls, 0);
        model_message_done(&copy); /* twice is fine */

        assert_int_equal(model_message_copy(&convo[3], &copy), 0);
        assert_string_equal(copy.tool_call_id, "call_2");
        assert_true(copy.is_error);
        assert_null(copy.calls);
        model_message_done(&copy);
}

/* ---- tool calls written as text ---- */

static void test_text_calls(void **state) {
        static const struct {
                const char *text;
                int want;             /* 1 calls, 0 plain text, -EBADMSG unreadable */
                const char *names;    /* the calls' names, joined by ',' */
                const char *args0;    /* the first call's arguments */
                const char *rest;     /* the text kept around them (NULL: none) */
                const char *why;      /* a part of the reason for -EBADMSG */
        } table[] = {
                /* Hermes / Qwen tags */
                {"<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>", 1, "read_file",
                 "{\"path\":\"a\"}", NULL, NULL},
                {"Let me look.\n<tool_call>{\"name\":\"read_file\",\"arguments\":{\"path\":\"a\"}}</tool_call>\n"
                 "<tool_call>{\"name\":\"list_dir\",\"arguments\":{}}</tool_call>",
                 1, "read_file,list_dir", "{\"path\":\"a\"}", "Let me look.", NULL},
                /* the last tag left open; a fence inside a tag; "parameters"; a list */
                {"<tool_call>{\"name\":\"finish\",\"arguments\":{\"summary\":\"done\"}}", 1, "finish",
                 "{\"summary\":\"done\"}", NULL, NULL},
                {"<tool_call>\n```json\n{\"name\":\"finish\",\"parameters\":{\"summary\":\"x\"}}\n```\n</tool_call>", 1,
                 "finish", "{\"summary\":\"x\"}", NULL, NULL},
                {"<tool_call>[{\"name\":\"a\",\"arguments\":{}},{\"name\":\"b\",\"arguments\":\"{\\\"k\\\":1}\"}]</tool_call>",
                 1, "a,b", "{}", NULL, NULL},
                /* a string of arguments is kept raw (validated later like any call) */
                {"<tool_call>{\"name\":\"run\",\"arguments\":\"{bad\"}</tool_call>", 1, "run", "{bad", NULL, NULL},
                /* fenced json */
                {"I will write it:\n```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"o/x\", "
                 "\"content\": \"hi\"}}\n```\nThen test.",
                 1, "write_file", "{\"path\":\"o/x\",\"content\":\"hi\"}", "I will write it:\n\nThen test.", NULL},
                {"```\n{\"name\":\"list_dir\",\"arguments\":{\"path\":\".\"},\"type\":\"function\"}\n```", 1, "list_dir",
                 "{\"path\":\".\"}", NULL, NULL},
                /* the whole reply is one call */
                {"  {\"name\": \"finish\", \"arguments\": {\"summary\": \"ok\"}}  ", 1, "finish", "{\"summary\":\"ok\"}",
                 NULL, NULL},
                /* plain answers: prose, other JSON, other code */
                {"I am done with the change.", 0, NULL, NULL, NULL, NULL},
                {"The package:\n```json\n{\"name\": \"app\", \"version\": \"1.0.0\"}\n```", 0, NULL, NULL, NULL, NULL},
                {"```js\nconst x = {\"name\": 1, \"arguments\": 2};\n```", 0, NULL, NULL, NULL, NULL},
                {"{\"status\": \"ok\"}", 0, NULL, NULL, NULL, NULL},
                {"[1, 2, 3]", 0, NULL, NULL, NULL, NULL},
                {"```json\n{not json at all}\n```", 0, NULL, NULL, NULL, NULL},
                {"", 0, NULL, NULL, NULL, NULL},
                /* looks like a call and cannot be read: never guessed */
                {"<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"</tool_call>", -EBADMSG, NULL, NULL,
                 NULL, "<tool_call> block 1 is not valid JSON"},
                {"<tool_call>please read the file</tool_call>", -EBADMSG, NULL, NULL, NULL, "not valid JSON"},
                {"<tool_call>{\"tool\": \"read_file\"}</tool_call>", -EBADMSG, NULL, NULL, NULL, "not a tool call"},
                {"done</tool_call>", -EBADMSG, NULL, NULL, NULL, "no <tool_call> before it"},
                {"```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"x\",}}\n```", -EBADMSG, NULL, NULL, NULL,
                 "fenced block 1 is not valid JSON"},
                {"{\"name\": \"finish\", \"arguments\": {}} and then more", -EBADMSG, NULL, NULL, NULL,
                 "the reply is not valid JSON"},
                {"<tool_call>{\"name\": \"rm -rf /\", \"arguments\": {}}</tool_call>", -EBADMSG, NULL, NULL, NULL,
                 "not a tool's name"},
                {"<tool_call>{\"name\": \"run\", \"arguments\": [1]}</tool_call>", -EBADMSG, NULL, NULL, NULL,
                 "arguments are not a JSON object"},
                {"<tool_call>{\"name\": \"run\", \"arguments\": {}, \"extra\": 1}</tool_call>", -EBADMSG, NULL, NULL, NULL,
                 "keys besides"},
                {"```json\n[{\"name\": \"a\", \"arguments\": {}}, 3]\n```", -EBADMSG, NULL, NULL, NULL, "mixes"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                struct model_text_calls t = {0};
                char *why = NULL;
                int r = model_text_calls_parse(table[i].text, &t, &why);
                if (r != table[i].want)
                        print_error("case %zu: r=%d why=%s\n", i, r, why ? why : "(null)");
                assert_int_equal(r, table[i].want);
                if (r == -EBADMSG) {
                        assert_non_null(why);
                        if (!strstr(why, table[i].why))
                                fail_msg("case %zu: %s", i, why);
                        assert_null(t.calls);
                        free(why);
                        continue;
                }
                assert_null(why);
                if (r == 0) {
                        assert_int_equal(t.n, 0);
                        continue;
                }
                char names[256] = "";
                for (size_t k = 0; k < t.n; k++) {
                        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? "," : "", t.calls[k].name);
                        assert_true(startswith(t.calls[k].id, "call_text_"));
                }
                assert_string_equal(names, table[i].names);
                assert_string_equal(t.calls[0].arguments, table[i].args0);
                if (table[i].rest)
                        assert_string_equal(t.rest, table[i].rest);
                else
                        assert_null(t.rest);
                model_text_calls_done(&t);
        }
        /* At most MODEL_MAX_TOOL_CALLS. */
        char *many = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&many, &len);
        for (int i = 0; i <= MODEL_MAX_TOOL_CALLS; i++)
                fprintf(f, "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>");
        fclose(f);
        struct model_text_calls t = {0};
        char *why = NULL;
        assert_int_equal(model_text_calls_parse(many, &t, &why), -EBADMSG);
        assert_non_null(strstr(why, "more than"));
        free(why);
        free(many);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_openai_build),
                cmocka_unit_test(test_openai_build_variants),
                cmocka_unit_test(test_anthropic_build),
                cmocka_unit_test(test_build_images),
                cmocka_unit_test(test_anthropic_build_merges),
                cmocka_unit_test(test_build_errors),
                cmocka_unit_test(test_build_invalid_utf8),
                cmocka_unit_test(test_openai_parse),
                cmocka_unit_test(test_openai_stop_mapping),
                cmocka_unit_test(test_anthropic_parse),
                cmocka_unit_test(test_bad_responses),
                cmocka_unit_test(test_too_many_tool_calls),
                cmocka_unit_test(test_error_text),
                cmocka_unit_test(test_retry_table),
                cmocka_unit_test(test_backoff_bounds),
                cmocka_unit_test(test_retry_after),
                cmocka_unit_test(test_model_new),
                cmocka_unit_test(test_redact),
                cmocka_unit_test(test_key_never_in_errors),
                cmocka_unit_test(test_cancel),
                cmocka_unit_test(test_message_copy),
                cmocka_unit_test(test_providers_table),
                cmocka_unit_test(test_models_parse),
                cmocka_unit_test(test_text_calls),
                cmocka_unit_test(test_anthropic_cache_markers),
                cmocka_unit_test(test_openai_cache_markers),
                cmocka_unit_test(test_cache_providers),
                cmocka_unit_test(test_cache_usage_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
