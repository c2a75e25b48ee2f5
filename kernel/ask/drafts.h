/* drafts.h — the pictures point and ask leaves for the owner (seed 001):
 * kept in the kernel's memory only, at most ASK_DRAFTS_MAX at once (a new
 * one pushes out the oldest), each for the store's ttl (30 minutes unless
 * server.ask_draft_seconds says less). A draft does nothing by itself: the
 * control plane shows it, and it becomes part of a chat message only when
 * the owner sends the ask with it (ask_drafts_take: one use). Every draft is
 * a checked PNG or JPEG (ask/image.h). Thread-safe; nothing here logs. */
#pragma once

#include "base/base.h"
#include "ask/image.h"

#define ASK_DRAFTS_MAX 8
#define ASK_DRAFT_TTL_MS (30 * 60 * 1000LL)
#define ASK_DRAFT_ID_LEN 32 /* hex: 128 random bits */

struct ask_drafts;

struct ask_draft {
        char id[ASK_DRAFT_ID_LEN + 1];
        struct ask_image_info info;
        void *data;               /* owned */
        size_t len;
        int64_t created_ms;
};
void ask_draft_done(struct ask_draft *d);

/* ttl_ms: 1 .. ASK_DRAFT_TTL_MS (0: ASK_DRAFT_TTL_MS). */
int ask_drafts_new(int64_t ttl_ms, struct ask_drafts **ret);
void ask_drafts_free(struct ask_drafts *d);

/* Whether id has the shape of a draft id (32 lowercase hex digits). */
bool ask_draft_id_valid(const char *id);

/* Checks and keeps a copy of the picture; *ret_id gets its id. Errors of
 * ask_image_check(), or -ENOMEM. */
int ask_drafts_add(struct ask_drafts *d, const void *data, size_t len, int64_t now_ms,
                   char ret_id[ASK_DRAFT_ID_LEN + 1]);
/* A copy of a live draft (the caller calls ask_draft_done), left in place
 * (get) or removed (take). -ENOENT when there is none: never made, pushed
 * out, taken, or older than the ttl. */
int ask_drafts_get(struct ask_drafts *d, const char *id, int64_t now_ms, struct ask_draft *ret);
int ask_drafts_take(struct ask_drafts *d, const char *id, int64_t now_ms, struct ask_draft *ret);
/* How many live drafts there are. */
size_t ask_drafts_count(struct ask_drafts *d, int64_t now_ms);
