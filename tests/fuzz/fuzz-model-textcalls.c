/* Fuzz target: a model's reply text, as kernel/model reads tool calls
 * written in it (model_text_calls_parse). Found calls must be well formed
 * (an id, a tool-like name, arguments) and within the bound; an unreadable
 * call must come with a reason; plain text must leave nothing behind. */
#include <ctype.h>
#include <stdint.h>

#include "model/model-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0; /* the reply is a C string: what follows a NUL is not read */
        struct model_text_calls t = {0};
        char *why = NULL;
        int r = model_text_calls_parse(text, &t, &why);
        if (r == 1) {
                if (t.n == 0 || t.n > MODEL_MAX_TOOL_CALLS || why)
                        abort();
                for (size_t i = 0; i < t.n; i++) {
                        const struct model_tool_call *c = &t.calls[i];
                        if (!c->id || !c->name || !c->arguments || !startswith(c->id, "call_text_"))
                                abort();
                        size_t n = strlen(c->name);
                        if (n == 0 || n > 128)
                                abort();
                        for (const char *p = c->name; *p; p++)
                                if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
                                        abort();
                }
                if (t.rest && (!*t.rest || strlen(t.rest) > size))
                        abort();
        } else if (r == -EBADMSG) {
                if (!why || t.calls)
                        abort();
        } else if (r == 0) {
                if (why || t.calls || t.rest)
                        abort();
        } else if (r != -ENOMEM)
                abort();
        free(why);
        model_text_calls_done(&t);
        free(text);
        return 0;
}
