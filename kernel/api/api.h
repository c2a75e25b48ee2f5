/* api.h — every /_seed/api JSON route beyond ctl's own, as one table for
 * ctl_config.api_routes (SPEC §7), and the hub that streams every
 * orchestrator event to the API's Server-Sent Events subscribers.
 *
 *   GET  evolutions                  the newest first
 *   POST evolutions                  {"intent"} (≤ 16 KiB) → 202 {"id"}
 *   GET  evolutions/{id}[?after=N]   with its events (only those after event N)
 *   GET  evolutions/{id}/diff        the change against its base (≤ 1 MiB)
 *   POST evolutions/{id}/cancel
 *   POST evolutions/{id}/answer      {"approval": "apr_…", "answer"}   (a question)
 *   POST evolutions/{id}/decide      {"approval": "apr_…", "approved": bool}
 *   GET  approvals                   the pending ones, in full
 *   POST approvals/{id}              {"approved": bool}
 *   GET  generations                 newest first, the live one marked
 *   POST generations/{n}/rollback    → 202 {"id"}
 *   GET  events                      text/event-stream of every event
 *   GET  messages[?limit=N]          the chat, oldest first (chat/chat.h)
 *   POST messages                    {"text"} → the Seed's reply (chat/chat.h)
 *   GET  identity, knowledge, skills, settings, usage   the Seed itself (self.h)
 *   GET  extensions                  the organism's admin screens (api/extensions.h)
 *   GET  outbound, POST outbound/grant, outbound/revoke  outbound access (api/outbound.h)
 *   GET|POST mind, GET mind/models, POST mind/key[/forget]  its model (api/mind.h)
 *   GET|POST backups, POST backups/{id}/restore, GET backups/{id}/download
 *                                    the owner's backups (api/backups.h)
 *   GET|POST spend                   this month's spend and the budget (api/spend.h)
 *   GET incidents[/{id}], POST incidents/{id}/fix|ignore, POST health
 *                                    the doctor's incidents (api/health.h)
 *
 * Without a usable model (kernel/mind), POST evolutions and POST messages
 * answer 409 {"error": why, naming the variable to pass} and create nothing.
 *
 * ctl does the auth, same-origin, JSON and size rules; handlers validate
 * every id and body themselves. */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

struct cfg;
struct db;
struct mind;
struct orchestrator;
struct outbound;

#define API_INTENT_MAX (16 * 1024)
#define API_DIFF_MAX (1024 * 1024)
#define API_SSE_SUBSCRIBERS 16        /* leaves most of ctl's 32 reserved /_seed connections free */
#define API_SSE_QUEUE_MAX (1024 * 1024) /* bytes queued per subscriber; past it the subscriber is dropped */
#define API_SSE_PING_MS 15000

struct live;
struct backups;
struct spend;
struct routines;
struct health;

struct api_config {
        const char *seed_dir;           /* the live Seed's folder (copied) */
        struct db *kdb;                 /* kernel-memory DB (borrowed, outlives the api) */
        struct orchestrator *orch;      /* borrowed; NULL until api_set_orchestrator() */
        struct mind *mind;              /* the model evolutions and the chat think with (borrowed);
                                         * NULL: POST messages answers 503, mind routes 503 */
        const struct cfg *cfg;          /* seed.yaml (borrowed); NULL: POST messages answers 503 */
        struct outbound *outbound;      /* outbound access, for its routes and the chat's tools
                                         * (borrowed); NULL: they answer 503 */
        struct backups *backups;        /* the owner's backups (borrowed); NULL: their routes answer 503 */
        struct live *live;              /* the live data and app, for the chat's tools (borrowed);
                                         * NULL: they answer "not available" */
        struct spend *spend;            /* the month's spend and budget (borrowed); NULL: spend
                                         * routes answer 503 */
        struct routines *routines;      /* routines and jobs (borrowed), for their routes and the
                                         * chat's create_routine; NULL: routes answer 503 */
        struct health *health;          /* the doctor's incidents (borrowed); NULL: their routes
                                         * answer 503 */
        const char *refused;            /* the start-up doctor's message when sandboxes cannot
                                         * run here: evolutions are refused with it (copied) */
        struct ask_drafts *drafts;      /* point and ask's pictures (borrowed, may be NULL): POST
                                         * messages {"draft": id} sends one with the text */
};

struct api;
struct ask_drafts;

int api_new(const struct api_config *cfg, struct api **ret);
/* The orchestrator the routes drive (borrowed); NULL: they answer 503. */
void api_set_orchestrator(struct api *api, struct orchestrator *o);
/* Ends every event stream (call before ctl_stop, so no connection waits for
 * its next ping) and refuses new ones. */
void api_shutdown(struct api *api);
/* Frees; every stream must have ended (after ctl_stop). Accepts NULL. */
void api_free(struct api *api);

/* orch_config.on_event: queues "event: <kind>\ndata: {"evolution": id, …}"
 * (evo_id NULL: no "evolution" member, e.g. the chat's "message" events)
 * for every subscriber; one that has API_SSE_QUEUE_MAX bytes waiting is
 * dropped (its stream ends). Thread-safe; never blocks on a client. */
void api_publish(struct api *api, const char *evo_id, const char *kind, const char *json);

/* Posts text in the chat as a kernel message (chat_kernel_message());
 * -EAGAIN when api is NULL (not started yet, or stopped). */
int api_kernel_message(struct api *api, const char *text);
/* Posts a routine's report in the chat (chat_routine_message()); -EAGAIN
 * when api is NULL. */
int api_routine_message(struct api *api, const char *routine_name, const char *text);

/* The route table (ends with a zeroed entry); handlers take the struct
 * api * as userdata (ctl_config.api_userdata). */
extern const struct ctl_api_route api_routes[];

/* ^evo_[0-9a-f]{16}$ and ^apr_[0-9a-f]{16}$. */
bool api_id_valid(const char *s, const char *prefix);
