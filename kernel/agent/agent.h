/* agent.h — the agent loop (SPEC §4): send the conversation to the model, run
 * the tool calls it makes (kernel/tools: validated, classified, decided),
 * feed the results back, repeat until a terminal tool ends the phase.
 *
 *   - tool errors go back to the model as error results;
 *   - a reply cut off by max_tokens gets a "continue in smaller steps" nudge;
 *   - a turn that ends without a terminal tool is nudged (max_nudges times),
 *     except in chat (end_on_reply), where the reply ends the run;
 *   - malformed calls (unknown tool, arguments not JSON or not matching the
 *     schema) are error results that tell what was wrong and give the tool's
 *     schema (or, for an unknown tool, the phase's tools); a good call resets
 *     the count, and max_malformed of them in a row fail the run. A calls
 *     cut short by max_tokens is not counted (the cut gets its nudge);
 *   - a text answer is nudged, and so is text that looks like a tool call
 *     written as text but cannot be read (model_response.unreadable_calls),
 *     saying why; calls the model layer read from text run like any other;
 *   - max_turns model calls at most (counted in the state, across runs): every
 *     turn counts, whatever it held, so nothing loops forever;
 *   - a model call that fails with a transient error after the model's own
 *     retries (model_error_transient) is an outage, not a failure: with
 *     model_wait_ms, the loop emits "waiting" (reason, when it retries, when
 *     it gives up), retries every model_wait_interval_ms with the
 *     conversation as it was, emits "resumed" when the model answers, and
 *     fails only when model_wait_ms have passed since the first failure of
 *     that call, saying why. A permanent failure fails at once;
 *   - a cancellation flag is checked before every model call and tool call,
 *     during a model call and while waiting out an outage;
 *   - every request stays within context_budget bytes (seed.yaml
 *     model.context_chars): the system prompt and the tool definitions
 *     count, and when the conversation outgrows the rest it is compacted
 *     (see agent_compact): old tool output is trimmed first to its head and
 *     a note saying what was trimmed, then other long texts and arguments,
 *     then the oldest turns are dropped whole (a call is never separated
 *     from its result); the first message and the newest turn are never
 *     touched.
 * The caller owns the conversation (struct agent_state) and can keep it to
 * continue later (e.g. a repair after failed verification). */
#pragma once

#include "base/base.h"
#include "model/model.h"
#include "tools/tools.h"

#include <stdatomic.h>

enum agent_event {
        AGENT_EVENT_TEXT,        /* "agent_text": {"text"} */
        AGENT_EVENT_TOOL_CALL,   /* "tool_call": {"id","name","arguments"} (arguments: the parsed
                                  * object, or the raw text when it is not JSON) */
        AGENT_EVENT_TOOL_RESULT, /* "tool_result": {"id","name","is_error","output"[,"level","decision"]} */
        AGENT_EVENT_NOTE,        /* "note": {"text"} (nudges, compaction) */
        AGENT_EVENT_ERROR,       /* "error": {"error"} */
        AGENT_EVENT_WAITING,     /* "waiting": {"reason","retry_at","until","attempt"} (times: ms
                                  * since the epoch): the model is unreachable, the loop waits */
        AGENT_EVENT_RESUMED,     /* "resumed": {"waited_ms","attempts"}: the model answered again */
};
/* "agent_text", "tool_call", "tool_result", "note", "error", "waiting",
 * "resumed" (the kernel DB's event kinds). */
const char *agent_event_name(enum agent_event k);

/* A completion: the orchestrator passes a wrapper of model_complete(), tests
 * a fake. Fills *ret (caller of it frees with model_response_done()) or
 * returns negative with *ret_error (freed by the loop). */
typedef int (*agent_complete_fn)(void *userdata, const struct model_request *req, struct model_response *ret,
                                 char **ret_error);
/* json is a compact JSON object, borrowed for the call. */
typedef void (*agent_event_fn)(void *userdata, enum agent_event kind, const char *json);

struct agent_config {
        agent_complete_fn complete;      /* required */
        void *complete_userdata;
        const char *system;              /* the system prompt, may be NULL; borrowed */
        const char *purpose;             /* "evolution", "chat", … (usage); borrowed */
        const char *reference;           /* e.g. the evolution id; borrowed, may be NULL */
        struct tool_ctx *tools;          /* the set and phase offered and what handlers need; borrowed */
        int max_turns;                   /* model calls per conversation (seed.yaml max_agent_turns); 0 = 150 */
        int max_tokens;                  /* per completion; 0 = the model config's */
        agent_event_fn on_event;         /* may be NULL */
        void *event_userdata;
        const atomic_bool *cancel;       /* may be NULL */
        bool end_on_reply;               /* chat: a turn without tool calls ends the run */
        size_t context_budget;           /* bytes a request holds: system prompt, tools and
                                          * conversation; 0 = AGENT_CONTEXT_BUDGET */
        size_t keep_last;                /* messages kept intact at the end; 0 = AGENT_KEEP_LAST */
        int max_malformed;               /* consecutive malformed calls; 0 = AGENT_MAX_MALFORMED */
        int max_nudges;                  /* turns without a tool call, in a row; 0 = AGENT_MAX_NUDGES */
        int64_t model_wait_ms;           /* how long an outage is waited out (seed.yaml
                                          * evolution.model_wait_seconds); 0 = not at all */
        int64_t model_wait_interval_ms;  /* between retries meanwhile; 0 = AGENT_WAIT_INTERVAL_MS */
};

#define AGENT_MAX_MALFORMED 8
#define AGENT_MAX_NUDGES 8
#define AGENT_WAIT_INTERVAL_MS 30000

#define AGENT_CONTEXT_BUDGET (300 * 1000)  /* seed.yaml model.context_chars' default */
#define AGENT_COMPACT_TARGET_PCT 75       /* compaction brings the conversation down to this much */
#define AGENT_KEEP_LAST 12
#define AGENT_TRIM_KEEP 400              /* head and tail bytes of trimmed text */

/* The conversation. Messages are owned (free with agent_state_done()). */
struct agent_state {
        struct model_message *messages;
        size_t n_messages, cap;
        int turns;                       /* model calls made so far */
};

void agent_state_init(struct agent_state *st);
void agent_state_done(struct agent_state *st);
/* Appends a user message (copied). */
int agent_state_add_user(struct agent_state *st, const char *text);
/* Appends a deep copy of msg. */
int agent_state_add(struct agent_state *st, const struct model_message *msg);
/* Appends msg, taking ownership of its contents (msg is zeroed). */
int agent_state_take(struct agent_state *st, struct model_message *msg);
/* Approximate size in bytes (what compaction measures). */
size_t agent_state_size(const struct agent_state *st);
/* When st is larger than budget bytes, compacts it to about
 * AGENT_COMPACT_TARGET_PCT of it (kernel/agent/compact.c says how): the
 * first message and the newest turn are never touched, the last keep_last
 * messages only when the rest was not enough. The budget holds unless those
 * alone exceed it. Returns the bytes saved. */
size_t agent_compact(struct agent_state *st, size_t budget, size_t keep_last);

enum agent_outcome {
        AGENT_TERMINAL,     /* a terminal tool was called: tool + args */
        AGENT_REPLIED,      /* end_on_reply: the model answered (text) */
        AGENT_TURN_LIMIT,   /* max_turns reached */
        AGENT_CANCELLED,    /* the cancel flag was set */
        AGENT_FAILED,       /* error says why: the model failed, too many malformed
                             * calls, no terminal tool after the nudges */
};
const char *agent_outcome_name(enum agent_outcome o);

struct agent_result {
        enum agent_outcome outcome;
        char *tool;         /* terminal tool's name, else NULL */
        char *args;         /* its validated arguments (JSON object text), else NULL */
        char *text;         /* the model's last text, may be NULL */
        char *error;        /* AGENT_FAILED / TURN_LIMIT / CANCELLED: what happened */
        int turns;          /* model calls made in this run */
};
void agent_result_done(struct agent_result *r);

/* Runs the loop on st (which must hold at least the first user message).
 * Returns 0 and fills *ret for every outcome above; negative only for bad
 * arguments or when out of memory. Caller frees *ret with
 * agent_result_done(). */
int agent_run(const struct agent_config *cfg, struct agent_state *st, struct agent_result *ret);
