/* fuzz-tool-schema.c — tool-argument schema validation (kernel/tools/schema.c)
 * on arbitrary model output. The first byte picks a tool of the agents' sets
 * (the evolution's and the chat's; its index modulo their number of tools); the rest is the arguments text, parsed as
 * tools_call() parses it. A value the schema accepts must be an object with
 * every required property; a refusal must say where ("$…: …"); the verdict
 * must not change when asked again. With the first byte's top bit set, the
 * rest is a schema instead: tools_schema_check() must accept or explain it,
 * and an accepted one must validate a few fixed values without crashing. */
#include "chat/chat.h"
#include "evolution/orchestrator.h"
#include "tools/schema.h"
#include "tools/tools.h"

#include <jansson.h>
#include <stdint.h>

static int verdict(json_t *schema, json_t *value) {
        char *err = NULL;
        int r = tools_schema_validate(schema, value, &err);
        if (r == 0 && err)
                abort();
        if (r == -EINVAL && (!err || err[0] != '$'))
                abort(); /* every refusal names the place */
        if (r < 0 && r != -EINVAL && r != -ENOMEM)
                abort();
        free(err);
        return r;
}

static void check_required(json_t *schema, json_t *value) {
        if (!json_is_object(value))
                abort();
        size_t i;
        json_t *name;
        json_array_foreach(json_object_get(schema, "required"), i, name)
                if (!json_object_get(value, json_string_value(name)))
                        abort();
}

static void fuzz_arguments(const struct tool *t, const char *text, size_t len) {
        json_t *schema = json_loads(t->schema, 0, NULL);
        if (!schema)
                abort(); /* the table's own schemas always parse */
        json_t *value = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
        if (value) {
                int r = verdict(schema, value);
                if (r == 0)
                        check_required(schema, value);
                if (r != -ENOMEM && verdict(schema, value) != r)
                        abort();
                json_decref(value);
        }
        json_decref(schema);
}

static void fuzz_schema(const char *text, size_t len) {
        json_t *schema = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        if (!schema)
                return;
        char *err = NULL;
        int r = tools_schema_check(schema, &err);
        if (r == -EINVAL && !err)
                abort();
        if (r == 0) {
                static const char *const values[] = {"{}", "{\"path\":\"a\"}", "[1,2,3]", "\"x\"", "12", "null",
                                                     "{\"a\":{\"b\":[true,1.5,\"c\"]}}"};
                for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
                        json_t *v = json_loads(values[i], JSON_DECODE_ANY, NULL);
                        (void)verdict(schema, v);
                        json_decref(v);
                }
        }
        free(err);
        json_decref(schema);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > TOOLS_ARGS_MAX)
                return 0;
        if (data[0] & 0x80) {
                fuzz_schema((const char *)data + 1, size - 1);
                return 0;
        }
        static const struct tool *all[128];
        static size_t n;
        if (n == 0) {
                const struct tool *const *const sets[] = {orch_tool_set, chat_tool_set};
                for (size_t k = 0; k < sizeof sets / sizeof *sets; k++)
                        for (const struct tool *const *tab = sets[k]; *tab; tab++)
                                for (const struct tool *t = *tab; t->name; t++) {
                                        bool seen = false;
                                        for (size_t i = 0; i < n; i++)
                                                seen = seen || all[i] == t;
                                        if (!seen && n < sizeof all / sizeof *all)
                                                all[n++] = t;
                                }
        }
        fuzz_arguments(all[data[0] % n], (const char *)data + 1, size - 1);
        return 0;
}
