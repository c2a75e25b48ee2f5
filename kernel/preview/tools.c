/* tools.c — kernel/preview's tools as data (SPEC §5): the evolution's
 * candidate app and its scratch database. Entries of a tool set like every
 * other table (see tools/tools.h); their handlers (preview.c, http.c,
 * scratch.c) get the evolution's struct preview through tool_ctx.preview. */
#include "preview/preview-internal.h"

#define NO_ARGS "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"

const struct tool preview_tools[] = {
        {
                .name = "start_app",
                .description = "Build and start the organism from the working copy in its sandbox, against the "
                               "scratch database, replacing a running one.",
                .level = TOOL_REVIEW,
                .schema = NO_ARGS,
                .handler = preview_start_app,
                .phases = TOOL_PHASE_MUTATE,
        },
        {
                .name = "stop_app",
                .description = "Stop the app started with start_app.",
                .level = TOOL_SAFE,
                .schema = NO_ARGS,
                .handler = preview_stop_app,
                .phases = TOOL_PHASE_MUTATE,
        },
        {
                .name = "http_request",
                .description = "Send an HTTP request to the app started with start_app (never the live one).",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"method\":{\"type\":\"string\",\"enum\":[\"GET\",\"HEAD\",\"POST\",\"PUT\",\"PATCH\",\"DELETE\"]},"
                          "\"path\":{\"type\":\"string\",\"pattern\":\"^/\",\"maxLength\":2048},"
                          "\"headers\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\",\"maxLength\":4096}},"
                          "\"body\":{\"type\":\"string\",\"maxLength\":1048576}},"
                          "\"required\":[\"method\",\"path\"],\"additionalProperties\":false}",
                .handler = preview_http_request,
                .phases = TOOL_PHASE_MUTATE,
        },
        {
                .name = "app_logs",
                .description = "The latest output of the app started with start_app.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"lines\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5000,\"description\":\"default 200\"}},"
                          "\"additionalProperties\":false}",
                .handler = preview_app_logs,
                .phases = TOOL_PHASE_MUTATE,
        },
        {
                .name = "migrate",
                .description = "Apply organism/migrations to the scratch database.",
                .level = TOOL_REVIEW,
                .schema = NO_ARGS,
                .handler = preview_migrate,
                .phases = TOOL_PHASE_MUTATE,
        },
        {
                .name = "db_query",
                .description = "Run SQL on this evolution's scratch database (never live data).",
                .level = TOOL_REVIEW,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"sql\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100000}},"
                          "\"required\":[\"sql\"],\"additionalProperties\":false}",
                .handler = preview_db_query,
                .phases = TOOL_PHASE_MUTATE,
        },
        {
                .name = "db_schema",
                .description = "Tables and columns of the scratch database.",
                .level = TOOL_SAFE,
                .schema = NO_ARGS,
                .handler = preview_db_schema,
                .phases = TOOL_PHASE_MUTATE,
        },

        TOOL_TABLE_END,
};
