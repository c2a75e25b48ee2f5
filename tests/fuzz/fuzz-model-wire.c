/* Fuzz target: a provider's response body, as kernel/model parses it.
 * The first byte picks the wire format (even: OpenAI-style, odd: Anthropic);
 * the rest is the body. A parsed response must be well formed; a refused one
 * must come with a message. Round trip: a parsed assistant message must be
 * accepted back in a request of the same format. */
#include <stdint.h>

#include "model/model-internal.h"
#include "model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
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
