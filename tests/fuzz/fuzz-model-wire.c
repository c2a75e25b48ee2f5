/* Fuzz target: a provider's response body, as kernel/model parses it.
 * The first byte picks the parser: bit 1 clear, a completion (bit 0: even
 * OpenAI-style, odd Anthropic); bit 1 set, a list of models (bit 0: the
 * provider says every model takes tools). The rest is the body. With bit 2
 * set, the rest is a Retry-After header's value instead (bit 0: the
 * retry-after-ms one), which must be absent (-1) or within the cap. A parsed
 * response must be well formed; a refused one must come with a message.
 * Round trip: a parsed assistant message must be accepted back in a request
 * of the same format. */
#include <stdint.h>

#include "model/model-internal.h"
#include "model/model.h"

/* A parsed list holds only valid ids, within the bounds. */
static void fuzz_models(const char *body, size_t len, bool tools_on_all) {
        struct model_list l = {0};
        char *err = NULL;
        int r = model_wire_parse_models(body, len, tools_on_all, &l, &err);
        if (r < 0 && r != -ENOMEM && !err)
                abort();
        if (r >= 0) {
                if (l.n > MODEL_LIST_MAX)
                        abort();
                for (size_t i = 0; i < l.n; i++) {
                        size_t n = strlen(l.models[i].id);
                        if (n == 0 || n > MODEL_ID_MAX || l.models[i].tools < -1 || l.models[i].tools > 1)
                                abort();
                        if (tools_on_all && l.models[i].tools == -1)
                                abort();
                        for (const char *p = l.models[i].id; *p; p++)
                                if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
                                        abort();
                }
        }
        free(err);
        model_list_done(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        if (data[0] & 4) {
                char *value = strndup((const char *)data + 1, size - 1);
                if (!value)
                        return 0;
                int64_t ms = model_retry_after_ms(value, data[0] & 1);
                if (ms < -1 || ms > MODEL_RETRY_AFTER_CAP_MS)
                        abort();
                free(value);
                return 0;
        }
        if (data[0] & 2) {
                char *list = malloc(size);
                if (!list)
                        return 0;
                memcpy(list, data + 1, size - 1);
                list[size - 1] = 0;
                fuzz_models(list, size - 1, data[0] & 1);
                free(list);
                return 0;
        }
        enum model_format fmt = (data[0] & 1) ? MODEL_FORMAT_ANTHROPIC : MODEL_FORMAT_OPENAI;
        char *body = malloc(size);
        if (!body)
                return 0;
        memcpy(body, data + 1, size - 1);
        body[size - 1] = 0;
        struct model_response res = {0};
        char *err = NULL;
        int r = model_wire_parse(fmt, body, size - 1, &res, &err);
        if (r < 0) {
                if (r != -ENOMEM && !err)
                        abort(); /* every refusal explains itself */
        } else {
                if (res.message.role != MODEL_ROLE_ASSISTANT)
                        abort();
                for (size_t i = 0; i < res.message.n_calls; i++)
                        if (!res.message.calls[i].name || !res.message.calls[i].arguments)
                                abort();
                /* What we parsed can be sent back in the next request. */
                struct model_message user = {.role = MODEL_ROLE_USER, .text = "go on"};
                struct model_message conv[2] = {user, res.message};
                struct model_request req = {.messages = conv, .n_messages = 2, .purpose = "fuzz"};
                struct model_wire w = {.format = fmt, .model = "m", .max_tokens = 16};
                char *json = NULL, *berr = NULL;
                (void)model_wire_build(&w, &req, &json, &berr);
                free(json);
                free(berr);
        }
        free(err);
        model_response_done(&res);
        free(body);
        return 0;
}
