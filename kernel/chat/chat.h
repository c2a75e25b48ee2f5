/* chat.h — the owner's chat with the Seed (SPEC "Chat and API"): one
 * conversation, kept in the kernel DB's messages table, answered by the chat
 * agent (phase chat: read-only tools, start_evolution, list_evolutions,
 * outbound_status and request_outbound_access, and the live data's
 * query_data, describe_data, change_data and call_api: kernel/live).
 *
 * An answer that used the live data names the calls it came from: every
 * live-data call that succeeded (tool.live_data) is listed under the reply,
 * as stored and shown ("Live data used: …", each call's arguments in full),
 * and in the reply's "sources".
 *
 * A chat call that needs the owner's approval (request_outbound_access, asked
 * every time) creates an approval of no evolution (evolution/store.h),
 * published as an "approval" event, and the owner's message waits for the
 * decision (POST /_seed/api/approvals/{id}) for at most
 * CHAT_APPROVAL_WAIT_MS; then the approval expires and the call is denied.
 *
 * Roles: "owner" (the owner's words), "seed" (the chat agent's replies),
 * "kernel" (records the kernel posts, chat_kernel_message()) and "routine"
 * (a routine's report, chat_routine_message()).
 *
 * create_routine (dangerous, asked every time) creates a routine of
 * kernel/routines with exactly the fields the owner approved.
 *
 * kernel/api (api.c) serves it as
 *   GET  /_seed/api/messages[?limit=N]  the last N (1..200, default 50), oldest first
 *   POST /_seed/api/messages            {"text"} (≤ 16 KiB) → {"reply", "evolutions", "id",
 *                                        "sources": [{"tool", "arguments"}]}
 * One chat runs at a time; every stored message is published as an event of
 * kind "message". */
#pragma once

#include "base/base.h"

struct cfg;
struct db;
struct mind;
struct orchestrator;
struct live;
struct outbound;
struct routines;
struct tool;
struct model_image;

#define CHAT_TEXT_MAX (16 * 1024)
#define CHAT_HISTORY 20          /* stored messages the agent sees */
#define CHAT_LIST_MAX 200
#define CHAT_LIST_DEFAULT 50
#define CHAT_MAX_TURNS 20        /* model calls per owner message */
#define CHAT_APPROVAL_WAIT_MS (10 * 60 * 1000) /* how long a call waits for the owner */

struct chat_config {
        const char *seed_dir;        /* the live Seed's folder (copied) */
        const struct cfg *cfg;       /* seed.yaml (borrowed); NULL: the chat is unavailable */
        struct db *kdb;              /* borrowed */
        struct mind *mind;           /* the model it thinks with (borrowed); NULL: unavailable */
        struct outbound *outbound;   /* borrowed; NULL: the outbound tools answer "not available" */
        struct live *live;           /* the live data and app (borrowed); NULL: query_data,
                                      * describe_data, change_data and call_api answer "not available" */
        struct routines *routines;   /* borrowed; NULL: create_routine answers "not available" */
        /* Every stored message: kind "message", {"id","role","text","evolution_id","at"}. */
        void (*publish)(void *userdata, const char *kind, const char *json);
        void *userdata;
};

/* The chat agent's tool set (NULL-terminated tables, see tools/tools.h):
 * kernel/tools' table, kernel/outbound's, kernel/live's and the chat's own
 * (start_evolution, list_evolutions, whose handlers take the owner message's
 * run from tool_ctx.userdata). Static data. */
extern const struct tool *const chat_tool_set[];

struct chat;

int chat_new(const struct chat_config *cfg, struct chat **ret);
/* Stops a running chat at its next model or tool call (kernel stopping). */
void chat_cancel(struct chat *c);
/* An approval was decided: a call waiting for one looks at once. */
void chat_approval_decided(struct chat *c);
/* Accepts NULL; no chat may be running. */
void chat_free(struct chat *c);
/* Whether a model is there to answer (mind_ready()). */
bool chat_available(const struct chat *c);

/* Stores text (1..CHAT_TEXT_MAX bytes) as a message of role "kernel" — a
 * record from the kernel itself (e.g. the spend budget's notice), neither
 * the owner's words nor the Seed's — and publishes it. The chat agent sees
 * it framed as such a record. Thread-safe (it does not wait for a running
 * chat). */
int chat_kernel_message(struct chat *c, const char *text);

/* Stores a routine's report as a message of role "routine" (text 1..
 * CHAT_TEXT_MAX bytes; routine_name names it) and publishes it. The chat
 * agent sees it framed as the routine's report, never as the owner's words.
 * Thread-safe. */
int chat_routine_message(struct chat *c, const char *routine_name, const char *text);

/* The last limit messages (1..CHAT_LIST_MAX), oldest first, as a JSON array. */
int chat_messages_json(struct db *db, int limit, char **ret_json);

/* Stores the owner's text, runs the chat agent (o: where start_evolution
 * queues; NULL: it says evolutions are unavailable), stores its reply.
 * *ret_json: {"id": reply id, "reply", "evolutions": [ids started],
 * "sources": [the live-data calls the reply used: {"tool", "arguments"}]}.
 * -ENODEV no model (*ret_error says why), -EBUSY another chat is running, -EREMOTEIO the agent
 * failed (*ret_error says why; caller frees), -ECANCELED stopping. */
int chat_send(struct chat *c, struct orchestrator *o, const char *text, const struct model_image *image,
              char **ret_json, char **ret_error);
/* image (borrowed, may be NULL): a picture the owner sent with the text (point
 * and ask's draft); it goes to the model with this turn only, marked as page
 * data (MODEL_IMAGE_NOTE), and the stored message ends with this mark. */
#define CHAT_PICTURE_MARK "[with a picture of the page]"
