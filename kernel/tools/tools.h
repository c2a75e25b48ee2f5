/* tools.h — the agent's tools: tables of data (name, description, level,
 * JSON schema, handler, phases), argument validation, classification and the
 * owner's permissions (SPEC §5).
 *
 * The tools an agent is offered are a tool set: a NULL-terminated array of
 * tables, each owned by the module that implements its tools (tools_table
 * here: files, git, run and the terminal tools; preview_tools in
 * kernel/preview; the chat's in kernel/chat, the orchestrator's in
 * kernel/evolution). Whoever runs an agent composes its set and puts it in
 * the context; names are unique across the tables of a set.
 *
 * Every call goes through tools_call(): the tool is looked up in the set and must be
 * offered in the context's phase; its arguments are parsed and validated
 * against its schema BEFORE anything runs; a "path" argument is replaced by
 * its normalised form (tools_normalize_path), and a tool's own check may
 * refuse or normalise its arguments, so what is classified, shown to the
 * owner, approved and acted on is one and the same; the call is classified
 * (safe/review/dangerous, possibly from its arguments) and the level mapped by
 * seed.yaml's permissions to allow/ask/deny (a tool marked always_ask is
 * asked even where the level is allowed); only then does the handler run.
 * Anything wrong becomes an error result for the model, never a crash. The
 * classifier is advisory: the sandbox and fsx are the boundary. */
#pragma once

#include "base/base.h"
#include "config/config.h"
#include "model/model.h"
#include "sandbox/sandbox.h"

struct json_t;

#define TOOLS_OUTPUT_CAP 20000          /* chars of tool output the model sees (head + tail) */
#define TOOLS_DANGEROUS_INPUT_MAX 16384 /* dangerous calls with larger arguments are refused */
#define TOOLS_ARGS_MAX (2 * 1024 * 1024) /* arguments text of any call */

/* A staged goal in submit_plan (the roadmap, kernel/evolution/roadmap.h). */
#define TOOLS_GOAL_MAX 1000   /* bytes of the goal */
#define TOOLS_STAGES_MIN 2
#define TOOLS_STAGES_MAX 6
#define TOOLS_STAGE_MAX 500   /* bytes of one stage */
/* Written by the kernel only (the roadmap): the write tools refuse it and
 * any directory holding it, and the kernel puts its own content back before
 * every commit (so a shell command's write is undone too). */
#define TOOLS_ROADMAP_PATH "knowledge/roadmap.md"

/* Fail closed by construction: the zero value is no level, so a table entry
 * that names none is refused by tools_classify() (never run), not "safe". */
enum tool_level { TOOL_LEVEL_UNSET, TOOL_SAFE, TOOL_REVIEW, TOOL_DANGEROUS, _TOOL_LEVEL_MAX };

/* A phase is where a tool list is offered; a tool's `phases` is a mask. */
enum tool_phase {
        TOOL_PHASE_PLAN = 1 << 0,    /* read-only tools, ask_owner, submit_plan */
        TOOL_PHASE_MUTATE = 1 << 1,  /* + writes, run, app/db tools, finish */
        TOOL_PHASE_REFLECT = 1 << 2, /* reads; writes only in knowledge/ and skills/; submit_reflection */
        TOOL_PHASE_CHAT = 1 << 3,    /* reads, start_evolution, list_evolutions */
        TOOL_PHASE_HEALTH = 1 << 4,  /* the doctor's diagnosis (kernel/health): reads only, the
                                      * live data's reads, read_log, submit_diagnosis */
};

struct tool;
struct tool_ctx;

/* What a call produced. */
struct tool_result {
        char *output;     /* text for the model: valid UTF-8, capped; owned */
        bool is_error;    /* sent to the model as an error result */
        bool malformed;   /* unknown tool, not offered, arguments not JSON or not matching the schema */
        bool terminal;    /* a terminal tool succeeded: the phase ends */
        char *args;       /* the validated arguments re-serialised (compact JSON, "path"
                           * normalised); owned, may be NULL */
        bool classified;  /* level and decision below are meaningful */
        enum tool_level level;
        enum cfg_decision decision;
};
void tool_result_done(struct tool_result *r);

/* Every tool's handler, wherever it lives (kernel/tools, kernel/preview,
 * kernel/chat, kernel/evolution), has this one signature and reaches what it
 * acts on through ctx (ctx->preview, or ctx->userdata, which is the type the
 * owner of the set says). Handlers
 * fill ret->output (and is_error); a negative return is an unexpected
 * failure, reported to the model as "internal error". args is a validated
 * JSON object (jansson), borrowed. */
typedef int (*tool_handler_fn)(struct tool_ctx *ctx, const struct tool *t, struct json_t *args,
                               struct tool_result *ret);
/* Checks validated arguments beyond the schema, before anything is
 * classified, shown or asked, and may rewrite them into their normal form
 * (as the call path does with "path"): what the owner is shown and approves
 * is then what the handler acts on. 0 good; -EINVAL with *ret_error (caller
 * frees) for the model; -ENOMEM. */
typedef int (*tool_check_fn)(const struct tool_ctx *ctx, const struct tool *t, struct json_t *args, char **ret_error);
/* Computes the level from validated arguments (e.g. from a path). */
typedef int (*tool_classify_fn)(const struct tool_ctx *ctx, const struct tool *t, struct json_t *args,
                                enum tool_level *ret);

struct tool {
        const char *name;
        const char *description;
        enum tool_level level;        /* required (UNSET is refused); with classify, the floor */
        tool_classify_fn classify;    /* may be NULL */
        tool_check_fn check;          /* may be NULL */
        const char *schema;           /* JSON Schema text (an object schema; see schema.h) */
        tool_handler_fn handler;
        unsigned phases;              /* mask of enum tool_phase */
        bool terminal;                /* a successful call ends the phase */
        bool repo_path;               /* its "path" argument names a repository path */
        bool always_ask;              /* every dangerous call needs the owner's approval of that call,
                                       * whatever seed.yaml's permissions say (a policy of deny still
                                       * denies); a call its classifier finds less than dangerous is
                                       * decided as usual (SPEC §5 "asked every time") */
        bool live_data;               /* its result comes from the live data or the live app: the chat
                                       * names the call under an answer that used it (kernel/live) */
};

/* A table is an array of entries ended by one whose name is NULL
 * (TOOL_TABLE_END); a set is a NULL-terminated array of tables. */
#define TOOL_TABLE_END {.name = NULL}

/* The owner's approval of a call: not tools but the call path's hooks into
 * whoever runs the agent (the orchestrator; the chat sets none, so its "ask"
 * calls are denied). Either may be NULL. They are called from the agent's
 * thread with the context's userdata and may block. */
struct tool_hooks {
        /* Decision "ask": create a new approval for exactly this call (never
         * reuse one), show it in full, block until the owner decides.
         * Returns 1 approved (with *ret_approval_id, the approval's id, which
         * the call path frees), 0 denied, negative on failure (e.g. the
         * evolution was cancelled: the call is not run). NULL: "ask" calls
         * are denied. */
        int (*ask)(struct tool_ctx *ctx, const struct tool *t, const char *args_json, enum tool_level level,
                   char **ret_approval_id);
        /* After an approved call ran (successfully or not): e.g. to pin what
         * the approved write left at its path. A failure fails the call. */
        int (*approved_done)(struct tool_ctx *ctx, const struct tool *t, const char *args_json,
                             enum tool_level level);
        /* After every call whose handler ran (its result may be an error):
         * e.g. the chat keeps the live-data calls its answer used. */
        void (*ran)(struct tool_ctx *ctx, const struct tool *t, const char *args_json,
                    const struct tool_result *res);
};

struct live;
struct outbound;
struct preview;

/* Everything handlers need. Borrowed pointers stay valid while calls run.
 * One context per agent run (not shared between threads). */
struct tool_ctx {
        const struct tool *const *set;   /* the tables offered (NULL-terminated); borrowed */
        enum tool_phase phase;           /* which of the set's tools are offered */
        int root_fd;                     /* the worktree (chat: the Seed), O_PATH or O_DIRECTORY */
        const char *root_path;           /* the same directory as a path (git tools) */
        char *const *tracked;            /* chat: the committed tree's paths, sorted by
                                          * strcmp. The read tools then see only these
                                          * and the directories above them, never an
                                          * untracked or ignored file such as a .env
                                          * kept in the Seed folder. NULL: everything */
        const char *base_oid;            /* the evolution's base commit (git_status,
                                          * git_diff); NULL = HEAD */
        char *const *evolvable;          /* "organism/", "knowledge/", "skills/" (NULL-terminated) */
        enum cfg_decision decisions[_TOOL_LEVEL_MAX]; /* seed.yaml permissions per level */
        const struct sandbox_spec *sandbox; /* run's spec template (profile forced to
                                             * SANDBOX_EVOLUTION); NULL: run unavailable */
        int command_timeout_ms;          /* run's limit; 0 = 900 s */
        size_t output_cap;               /* 0 = TOOLS_OUTPUT_CAP */
        struct preview *preview;         /* the evolution's candidate app and scratch database,
                                          * for the handlers of start_app … db_schema
                                          * (kernel/preview); NULL: they answer "not
                                          * available in this phase" */
        struct outbound *outbound;       /* the owner's outbound access, for request_outbound_access
                                          * and outbound_status (kernel/outbound); NULL: they
                                          * answer "not available" */
        struct live *live;               /* the live data and the live app, for query_data,
                                          * describe_data, change_data and call_api
                                          * (kernel/live); NULL: they answer "not available" */
        const struct tool_hooks *hooks;  /* may be NULL */
        const char *plan_checks;         /* the plan's declared checks (JSON array text, kernel/checks),
                                          * which finish weighs with its own; NULL: none */
        const char *approval_id;         /* set by the call path while the handler of a call the
                                          * owner approved runs (that approval's id), else NULL */
        void *userdata;                  /* the hooks' and the set's own handlers' (the
                                          * chat's: struct chat_run; the orchestrator's:
                                          * its struct run); NULL: those handlers answer
                                          * "not available in this phase" */
};

/* Sets ret->output (replacing any) to the formatted text and ret->is_error:
 * what a handler outside kernel/tools (kernel/preview's) answers with. 0 or
 * -ENOMEM. */
int tool_result_printf(struct tool_result *ret, bool is_error, const char *fmt, ...) _printf_(3, 4);

/* Fills the permissions of ctx from seed.yaml. */
void tools_ctx_set_permissions(struct tool_ctx *ctx, const struct cfg *c);

const char *tools_level_name(enum tool_level l);
const char *tools_phase_name(enum tool_phase p);

/* kernel/tools' own table (static data, TOOL_TABLE_END-terminated). */
extern const struct tool tools_table[];
/* The first tool of that name in the set's tables, or NULL. */
const struct tool *tools_find(const struct tool *const *set, const char *name);
bool tools_offered(const struct tool *t, enum tool_phase phase);
/* The set's tools of a phase as model definitions (pointing into the
 * tables), in table order. Caller frees *ret (the array only). */
int tools_defs(const struct tool *const *set, enum tool_phase phase, struct model_tool_def **ret, size_t *ret_n);
/* Names of the phase's terminal tools in the set, "a or b" (for nudges). Caller frees. */
char *tools_terminal_names(const struct tool *const *set, enum tool_phase phase);

/* Level of a call with validated arguments: -EINVAL if the table or the
 * classifier names no level (TOOL_LEVEL_UNSET or out of range). */
int tools_classify(const struct tool_ctx *ctx, const struct tool *t, struct json_t *args, enum tool_level *ret);
enum cfg_decision tools_decide(const struct tool_ctx *ctx, enum tool_level l);

/* The whole path of one call (see the top of this file). Returns 0 when
 * *ret is filled (including error results for the model), negative only when
 * out of memory or when the ask callback failed (-ECANCELED etc.: the call
 * did not run and the caller should stop). Caller frees with
 * tool_result_done(). */
int tools_call(struct tool_ctx *ctx, const char *name, const char *args_json, struct tool_result *ret);

/* Repository paths as the model gives them ("organism/app.js"), checked and
 * normalised by fsx_normalize() (relative, no "..", no .git, no control
 * characters; "." is the root) and, in addition, never inside the top-level
 * .seed/. This normalised form is what is classified and what fsx acts on.
 * -EINVAL/-ENAMETOOLONG bad path, -EPERM .git/.seed; *ret_error (may be
 * NULL) says why. Caller frees both. */
int tools_normalize_path(const char *path, char **ret, char **ret_error);
/* Whether a normalised path is inside (or is) one of the dirs. */
bool tools_path_in(const char *path, char *const *dirs);

/* Caps text for the model: valid UTF-8 (invalid bytes become U+FFFD), at
 * most cap bytes of content kept as head + tail with a marker in between.
 * Caller frees; NULL on OOM. */
char *tools_cap_output(const char *s, size_t len, size_t cap);
