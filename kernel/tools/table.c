/* table.c — the tools as data (SPEC §5). Each entry: name, description for
 * the model, level (or a classifier computing it from the arguments), JSON
 * schema of the arguments, handler, the phases offering it, terminal. */
#include "tools/internal.h"
#include "base/buf.h"
#include "preview/preview.h"

#define P_PLAN TOOL_PHASE_PLAN
#define P_MUTATE TOOL_PHASE_MUTATE
#define P_REFLECT TOOL_PHASE_REFLECT
#define P_CHAT TOOL_PHASE_CHAT
#define P_READ (P_PLAN | P_MUTATE | P_REFLECT | P_CHAT)

#define NO_ARGS "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"
#define PATH_PROP(what)                                                                                        \
        "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"" what "\"}"

static const struct tool table[] = {
        /* Read-only: safe, offered everywhere. */
        {
                .name = "read_file",
                .description = "Read a text file of the repository. Paths are relative to the repository root "
                               "(e.g. organism/server.js). Long files: page with start_line and max_lines.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{" PATH_PROP("file path relative to the repository root") ","
                          "\"start_line\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"first line to return (default 1)\"},"
                          "\"max_lines\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20000,\"description\":\"how many lines (default: all)\"}},"
                          "\"required\":[\"path\"],\"additionalProperties\":false}",
                .handler = tools_read_file,
                .repo_path = true,
                .phases = P_READ,
        },
        {
                .name = "list_dir",
                .description = "List a directory of the repository (default: the root). Directories end in '/', "
                               "symbolic links in '@'. depth > 1 lists subdirectories too.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"path\":{\"type\":\"string\",\"maxLength\":4096,\"description\":\"directory relative to the repository root (default '.')\"},"
                          "\"depth\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":4,\"description\":\"levels to list (default 1)\"}},"
                          "\"additionalProperties\":false}",
                .handler = tools_list_dir,
                .repo_path = true,
                .phases = P_READ,
        },
        {
                .name = "search",
                .description = "Search the repository's text files for a string (or a POSIX extended regular "
                               "expression with regex=true), like grep -rn. Returns path:line: text.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"pattern\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":500},"
                          "\"path\":{\"type\":\"string\",\"maxLength\":4096,\"description\":\"directory or file to search (default: everything)\"},"
                          "\"regex\":{\"type\":\"boolean\",\"description\":\"pattern is a regular expression (default false: plain text)\"},"
                          "\"ignore_case\":{\"type\":\"boolean\"},"
                          "\"max_results\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":500,\"description\":\"default 100\"}},"
                          "\"required\":[\"pattern\"],\"additionalProperties\":false}",
                .handler = tools_search,
                .repo_path = true,
                .phases = P_READ,
        },
        {
                .name = "read_skill",
                .description = "Read skills/<name>/SKILL.md, a how-to the Seed wrote for itself.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"name\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9][a-z0-9_-]{0,63}$\"}},"
                          "\"required\":[\"name\"],\"additionalProperties\":false}",
                .handler = tools_read_skill,
                .phases = P_READ,
        },
        {
                .name = "git_log",
                .description = "The latest commits (generations) of this repository, newest first.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"max_count\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,\"description\":\"default 20\"}},"
                          "\"additionalProperties\":false}",
                .handler = tools_git,
                .phases = P_READ,
        },
        {
                .name = "git_status",
                .description = "Files changed in the working copy since the evolution started (added, modified, deleted).",
                .level = TOOL_SAFE,
                .schema = NO_ARGS,
                .handler = tools_git,
                .phases = P_READ,
        },
        {
                .name = "git_diff",
                .description = "The diff of the working copy against the evolution's base (optionally one path).",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"path\":{\"type\":\"string\",\"maxLength\":4096}},"
                          "\"additionalProperties\":false}",
                .handler = tools_git,
                .repo_path = true,
                .phases = P_READ,
        },

        /* Writes: review inside the evolvable dirs, dangerous elsewhere. */
        {
                .name = "write_file",
                .description = "Create or replace a file with the given content (parent directories are created). "
                               "Only organism/, knowledge/ and skills/ change freely; anything else needs the owner's "
                               "approval.",
                .level = TOOL_REVIEW,
                .classify = tools_classify_write,
                .schema = "{\"type\":\"object\",\"properties\":{" PATH_PROP("file path relative to the repository root") ","
                          "\"content\":{\"type\":\"string\",\"maxLength\":1048576}},"
                          "\"required\":[\"path\",\"content\"],\"additionalProperties\":false}",
                .handler = tools_write_file,
                .repo_path = true,
                .phases = P_MUTATE | P_REFLECT,
        },
        {
                .name = "edit_file",
                .description = "Replace exactly one occurrence of old_text with new_text in a file. old_text must "
                               "match the file exactly (whitespace included) and only once: include enough context.",
                .level = TOOL_REVIEW,
                .classify = tools_classify_write,
                .schema = "{\"type\":\"object\",\"properties\":{" PATH_PROP("file path relative to the repository root") ","
                          "\"old_text\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1048576},"
                          "\"new_text\":{\"type\":\"string\",\"maxLength\":1048576}},"
                          "\"required\":[\"path\",\"old_text\",\"new_text\"],\"additionalProperties\":false}",
                .handler = tools_edit_file,
                .repo_path = true,
                .phases = P_MUTATE | P_REFLECT,
        },
        {
                .name = "delete_path",
                .description = "Delete a file, or a directory with everything in it.",
                .level = TOOL_REVIEW,
                .classify = tools_classify_write,
                .schema = "{\"type\":\"object\",\"properties\":{" PATH_PROP("file or directory relative to the repository root") "},"
                          "\"required\":[\"path\"],\"additionalProperties\":false}",
                .handler = tools_delete_path,
                .repo_path = true,
                .phases = P_MUTATE | P_REFLECT,
        },
        {
                .name = "run",
                .description = "Run a shell command (sh -c) in the sandbox, in /workspace (the repository). Only "
                               "organism/, knowledge/ and skills/ are writable; the network is available for "
                               "installs; DATABASE_URL points at this evolution's scratch database. Returns the exit "
                               "status and the output (capped).",
                .level = TOOL_REVIEW,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":16384},"
                          "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400,\"description\":\"default and maximum: the evolution's command timeout\"}},"
                          "\"required\":[\"command\"],\"additionalProperties\":false}",
                .handler = tools_run,
                .phases = P_MUTATE,
        },

        /* The evolution's candidate app and its scratch database: handlers in kernel/preview. */
        {
                .name = "start_app",
                .description = "Build and start the organism from the working copy in its sandbox, against the "
                               "scratch database, replacing a running one.",
                .level = TOOL_REVIEW,
                .schema = NO_ARGS,
                .handler = preview_start_app,
                .phases = P_MUTATE,
        },
        {
                .name = "stop_app",
                .description = "Stop the app started with start_app.",
                .level = TOOL_SAFE,
                .schema = NO_ARGS,
                .handler = preview_stop_app,
                .phases = P_MUTATE,
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
                .phases = P_MUTATE,
        },
        {
                .name = "app_logs",
                .description = "The latest output of the app started with start_app.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"lines\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":5000,\"description\":\"default 200\"}},"
                          "\"additionalProperties\":false}",
                .handler = preview_app_logs,
                .phases = P_MUTATE,
        },
        {
                .name = "migrate",
                .description = "Apply organism/migrations to the scratch database.",
                .level = TOOL_REVIEW,
                .schema = NO_ARGS,
                .handler = preview_migrate,
                .phases = P_MUTATE,
        },
        {
                .name = "db_query",
                .description = "Run SQL on this evolution's scratch database (never live data).",
                .level = TOOL_REVIEW,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"sql\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":100000}},"
                          "\"required\":[\"sql\"],\"additionalProperties\":false}",
                .handler = preview_db_query,
                .phases = P_MUTATE,
        },
        {
                .name = "db_schema",
                .description = "Tables and columns of the scratch database.",
                .level = TOOL_SAFE,
                .schema = NO_ARGS,
                .handler = preview_db_schema,
                .phases = P_MUTATE,
        },

        /* Ending a phase, and the owner. */
        {
                .name = "ask_owner",
                .description = "Ask the owner a question and wait for the answer (at most 3 per evolution). Ask only "
                               "what you cannot reasonably decide yourself.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"question\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":2000}},"
                          "\"required\":[\"question\"],\"additionalProperties\":false}",
                .handler = tools_ask_owner,
                .phases = P_PLAN,
        },
        {
                .name = "submit_plan",
                .description = "Submit the plan and end planning. scope is a short slug for the commit "
                               "(lowercase letters, digits, '-').",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":120},"
                          "\"scope\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9-]{1,40}$\"},"
                          "\"summary\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4000},"
                          "\"steps\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":30,\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1000}},"
                          "\"risks\":{\"type\":\"array\",\"maxItems\":20,\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1000}}},"
                          "\"required\":[\"title\",\"scope\",\"summary\",\"steps\"],\"additionalProperties\":false}",
                .handler = tools_submit_plan,
                .phases = P_PLAN,
                .terminal = true,
        },
        {
                .name = "finish",
                .description = "End the change: the kernel then builds, tests, launches and checks the app. "
                               "Summarise what you changed.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"summary\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":10000}},"
                          "\"required\":[\"summary\"],\"additionalProperties\":false}",
                .handler = tools_finish,
                .phases = P_MUTATE,
                .terminal = true,
        },
        {
                .name = "submit_reflection",
                .description = "End the reflection with notes on what was learned (after updating knowledge/ and "
                               "skills/ as useful).",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"notes\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":20000}},"
                          "\"required\":[\"notes\"],\"additionalProperties\":false}",
                .handler = tools_submit_reflection,
                .phases = P_REFLECT,
                .terminal = true,
        },

        /* Chat. */
        {
                .name = "start_evolution",
                .description = "Start an evolution: the Seed changes itself to do what the intent says. Use it when "
                               "the owner asks for a change to the app or to the Seed.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"intent\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":10000}},"
                          "\"required\":[\"intent\"],\"additionalProperties\":false}",
                .handler = tools_start_evolution,
                .phases = P_CHAT,
        },
        {
                .name = "list_evolutions",
                .description = "The latest evolutions with their state.",
                .level = TOOL_SAFE,
                .schema = NO_ARGS,
                .handler = tools_list_evolutions,
                .phases = P_CHAT,
        },
};

const struct tool *tools_table(size_t *ret_n) {
        *ret_n = ARRAY_SIZE(table);
        return table;
}

const struct tool *tools_find(const char *name) {
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (streq(table[i].name, name))
                        return &table[i];
        return NULL;
}

bool tools_offered(const struct tool *t, enum tool_phase phase) {
        return (t->phases & (unsigned)phase) != 0;
}

int tools_defs(enum tool_phase phase, struct model_tool_def **ret, size_t *ret_n) {
        struct model_tool_def *defs = calloc(ARRAY_SIZE(table), sizeof(*defs));
        if (!defs)
                return -ENOMEM;
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (tools_offered(&table[i], phase))
                        defs[n++] = (struct model_tool_def){table[i].name, table[i].description, table[i].schema};
        *ret = defs;
        *ret_n = n;
        return 0;
}

char *tools_terminal_names(enum tool_phase phase) {
        struct buf b = BUF_INIT(1024);
        size_t k = 0;
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (table[i].terminal && tools_offered(&table[i], phase))
                        k++;
        for (size_t i = 0, j = 0; i < ARRAY_SIZE(table); i++) {
                if (!table[i].terminal || !tools_offered(&table[i], phase))
                        continue;
                j++;
                const char *sep = j == 1 ? "" : j == k ? " or " : ", ";
                if (buf_printf(&b, "%s%s", sep, table[i].name) < 0) {
                        buf_free(&b);
                        return NULL;
                }
        }
        return b.data ? buf_steal(&b) : strdup("");
}
