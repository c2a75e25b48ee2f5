/* drafts.c — the owner's point-and-ask pictures. See drafts.h. */
#include "ask/drafts.h"
#include "base/crypto.h"

#include <pthread.h>

struct ask_drafts {
        pthread_mutex_t lock;
        int64_t ttl_ms;
        struct ask_draft slot[ASK_DRAFTS_MAX]; /* id "" = free */
};

void ask_draft_done(struct ask_draft *d) {
        if (!d)
                return;
        free(d->data);
        *d = (struct ask_draft){0};
}

int ask_drafts_new(int64_t ttl_ms, struct ask_drafts **ret) {
        if (ttl_ms < 0 || ttl_ms > ASK_DRAFT_TTL_MS)
                return -EINVAL;
        struct ask_drafts *d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        pthread_mutex_init(&d->lock, NULL);
        d->ttl_ms = ttl_ms ? ttl_ms : ASK_DRAFT_TTL_MS;
        *ret = d;
        return 0;
}

void ask_drafts_free(struct ask_drafts *d) {
        if (!d)
                return;
        for (size_t i = 0; i < ASK_DRAFTS_MAX; i++)
                ask_draft_done(&d->slot[i]);
        pthread_mutex_destroy(&d->lock);
        free(d);
}

bool ask_draft_id_valid(const char *id) {
        return id && strlen(id) == ASK_DRAFT_ID_LEN && strspn(id, "0123456789abcdef") == ASK_DRAFT_ID_LEN;
}

/* Under lock: drops drafts past their ttl. */
static void expire(struct ask_drafts *d, int64_t now) {
        for (size_t i = 0; i < ASK_DRAFTS_MAX; i++)
                if (d->slot[i].id[0] && now - d->slot[i].created_ms >= d->ttl_ms)
                        ask_draft_done(&d->slot[i]);
}

int ask_drafts_add(struct ask_drafts *d, const void *data, size_t len, int64_t now_ms,
                   char ret_id[ASK_DRAFT_ID_LEN + 1]) {
        struct ask_image_info info;
        int r = ask_image_check(data, len, &info);
        if (r < 0)
                return r;
        _cleanup_free_ char *id = NULL;
        _cleanup_free_ void *copy = malloc(len);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, data, len);
        if ((r = crypto_random_hex(ASK_DRAFT_ID_LEN / 2, &id)) < 0)
                return r;
        pthread_mutex_lock(&d->lock);
        expire(d, now_ms);
        struct ask_draft *s = &d->slot[0];
        for (size_t i = 0; i < ASK_DRAFTS_MAX; i++) {
                if (!d->slot[i].id[0]) {
                        s = &d->slot[i];
                        break;
                }
                if (d->slot[i].created_ms < s->created_ms)
                        s = &d->slot[i];
        }
        ask_draft_done(s); /* free, or the oldest: pushed out */
        *s = (struct ask_draft){.info = info, .data = TAKE_PTR(copy), .len = len, .created_ms = now_ms};
        memcpy(s->id, id, ASK_DRAFT_ID_LEN + 1);
        pthread_mutex_unlock(&d->lock);
        memcpy(ret_id, id, ASK_DRAFT_ID_LEN + 1);
        return 0;
}

static int lookup(struct ask_drafts *d, const char *id, int64_t now_ms, bool take, struct ask_draft *ret) {
        if (!ask_draft_id_valid(id))
                return -ENOENT;
        int r = -ENOENT;
        pthread_mutex_lock(&d->lock);
        expire(d, now_ms);
        for (size_t i = 0; i < ASK_DRAFTS_MAX; i++) {
                struct ask_draft *s = &d->slot[i];
                if (!s->id[0] || !crypto_streq_ct(s->id, id))
                        continue;
                if (take) {
                        *ret = *s;
                        *s = (struct ask_draft){0};
                        r = 0;
                } else {
                        void *copy = malloc(s->len);
                        r = copy ? 0 : -ENOMEM;
                        if (copy) {
                                memcpy(copy, s->data, s->len);
                                *ret = *s;
                                ret->data = copy;
                        }
                }
                break;
        }
        pthread_mutex_unlock(&d->lock);
        return r;
}

int ask_drafts_get(struct ask_drafts *d, const char *id, int64_t now_ms, struct ask_draft *ret) {
        return lookup(d, id, now_ms, false, ret);
}

int ask_drafts_take(struct ask_drafts *d, const char *id, int64_t now_ms, struct ask_draft *ret) {
        return lookup(d, id, now_ms, true, ret);
}

size_t ask_drafts_count(struct ask_drafts *d, int64_t now_ms) {
        size_t n = 0;
        pthread_mutex_lock(&d->lock);
        expire(d, now_ms);
        for (size_t i = 0; i < ASK_DRAFTS_MAX; i++)
                n += d->slot[i].id[0] != 0;
        pthread_mutex_unlock(&d->lock);
        return n;
}
