/* table.c — kernel/tools' own tools as data (SPEC §5), and the walks over a
 * tool set (the tables an agent is offered). Each entry: name, description
 * for the model, level (or a classifier computing it from the arguments),
 * JSON schema of the arguments, handler, the phases offering it, terminal. */
#include "tools/internal.h"
#include "base/buf.h"
#include "checks/checks.h"

#define P_PLAN TOOL_PHASE_PLAN
#define P_MUTATE TOOL_PHASE_MUTATE
#define P_REFLECT TOOL_PHASE_REFLECT
#define P_CHAT TOOL_PHASE_CHAT
#define STR_(x) #x
#define STRINGIFY(x) STR_(x)
#define P_READ (P_PLAN | P_MUTATE | P_REFLECT | P_CHAT | TOOL_PHASE_HEALTH)

#define NO_ARGS "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}"
#define PATH_PROP(what)                                                                                        \
        "\"path\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4096,\"description\":\"" what "\"}"

const struct tool tools_table[] = {
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
                .check = tools_check_write,
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
                .check = tools_check_write,
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
                .check = tools_check_write,
                .schema = "{\"type\":\"object\",\"properties\":{" PATH_PROP("file or directory relative to the repository root") "},"
                          "\"required\":[\"path\"],\"additionalProperties\":false}",
                .handler = tools_delete_path,
                .repo_path = true,
                .phases = P_MUTATE | P_REFLECT,
        },
        {
                .name = "run",
                .description = "Run a shell command (sh -c) in the sandbox, in /workspace (the repository). Only "
                               "organism/, knowledge/ and skills/ are writable; the package registries (and hosts "
                               "granted for evolutions) are reachable over HTTPS for installs; DATABASE_URL points at this evolution's scratch database. Returns the exit "
                               "status and the output (capped).",
                .level = TOOL_REVIEW,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"command\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":16384},"
                          "\"timeout_seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":86400,\"description\":\"default and maximum: the evolution's command timeout\"}},"
                          "\"required\":[\"command\"],\"additionalProperties\":false}",
                .handler = tools_run,
                .phases = P_MUTATE,
        },

        /* Ending a phase. */
        {
                .name = "submit_plan",
                .description = "Submit the plan and end planning. scope is a short slug for the commit "
                               "(lowercase letters, digits, '-'). A goal too large for one change: give goal and "
                               "its stages (2 to 6, in order) and plan only the first stage; the kernel keeps the "
                               "roadmap in knowledge/roadmap.md. checks: HTTP checks the kernel runs against the "
                               "launched app (e.g. {\"request\":\"http:POST /api/items\",\"status\":201,"
                               "\"send\":\"{\\\"name\\\":\\\"a\\\"}\",\"body_contains\":\"a\"}).",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":120},"
                          "\"scope\":{\"type\":\"string\",\"pattern\":\"^[a-z0-9-]{1,40}$\"},"
                          "\"summary\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4000},"
                          "\"steps\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":30,\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1000}},"
                          "\"risks\":{\"type\":\"array\",\"maxItems\":20,\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":1000}},"
                          "\"goal\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":" STRINGIFY(TOOLS_GOAL_MAX) ",\"description\":\"a goal too large for one "
                          "change: with stages, the kernel keeps a roadmap and this evolution does stage 1\"},"
                          "\"stages\":{\"type\":\"array\",\"minItems\":" STRINGIFY(TOOLS_STAGES_MIN) ",\"maxItems\":" STRINGIFY(TOOLS_STAGES_MAX) ",\"description\":\"the goal's stages in "
                          "order, each one evolution (this one is the first)\",\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":" STRINGIFY(TOOLS_STAGE_MAX) "}},"
                          "\"checks\":" CHECKS_SCHEMA "},"
                          "\"required\":[\"title\",\"scope\",\"summary\",\"steps\"],\"additionalProperties\":false}",
                .check = tools_check_plan,
                .handler = tools_submit_plan,
                .phases = P_PLAN,
                .terminal = true,
        },
        {
                .name = "finish",
                .description = "End the change: the kernel then builds, tests, launches and checks the app "
                               "(with the plan's checks and any you declare here). Summarise what you changed.",
                .level = TOOL_SAFE,
                .schema = "{\"type\":\"object\",\"properties\":{"
                          "\"summary\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":10000},"
                          "\"checks\":" CHECKS_SCHEMA "},"
                          "\"required\":[\"summary\"],\"additionalProperties\":false}",
                .check = tools_check_finish,
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

        TOOL_TABLE_END,
};

#define SET_FOREACH(t, set)                                                                                    \
        for (const struct tool *const *_tab = (set); _tab && *_tab; _tab++)                                    \
                for (const struct tool *t = *_tab; t->name; t++)

const struct tool *tools_find(const struct tool *const *set, const char *name) {
        SET_FOREACH(t, set)
                if (streq(t->name, name))
                        return t;
        return NULL;
}

bool tools_offered(const struct tool *t, enum tool_phase phase) {
        return (t->phases & (unsigned)phase) != 0;
}

int tools_defs(const struct tool *const *set, enum tool_phase phase, struct model_tool_def **ret, size_t *ret_n) {
        size_t n = 0;
        SET_FOREACH(t, set)
                n++;
        struct model_tool_def *defs = calloc(n ? n : 1, sizeof(*defs));
        if (!defs)
                return -ENOMEM;
        n = 0;
        SET_FOREACH(t, set)
                if (tools_offered(t, phase))
                        defs[n++] = (struct model_tool_def){t->name, t->description, t->schema};
        *ret = defs;
        *ret_n = n;
        return 0;
}

char *tools_terminal_names(const struct tool *const *set, enum tool_phase phase) {
        struct buf b = BUF_INIT(1024);
        size_t k = 0;
        SET_FOREACH(t, set)
                if (t->terminal && tools_offered(t, phase))
                        k++;
        size_t j = 0;
        SET_FOREACH(t, set) {
                if (!t->terminal || !tools_offered(t, phase))
                        continue;
                j++;
                const char *sep = j == 1 ? "" : j == k ? " or " : ", ";
                if (buf_printf(&b, "%s%s", sep, t->name) < 0) {
                        buf_free(&b);
                        return NULL;
                }
        }
        return b.data ? buf_steal(&b) : strdup("");
}
