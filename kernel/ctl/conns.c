/* conns.c — the connections' pools and head deadlines. See conns.h. */
#include "ctl/conns.h"

#include <pthread.h>

/* An id is (sequence << SLOT_BITS) | slot: found at once, never reused. */
#define SLOT_BITS 21
#define MAX_TOTAL (1u << (SLOT_BITS - 2))

struct conn_entry {
        uint64_t id;             /* 0: the entry is free */
        int fd;                  /* borrowed from libmicrohttpd: only shut down here */
        struct ctl_client client;
        bool capped;             /* counted per client */
        bool cut;                /* shut down, waiting for its close; in no pool */
        bool owner;              /* a request on it authenticated */
        bool flood;              /* its client's flood was reported (kept by the newest) */
        enum ctl_pool pool;
        uint64_t since;          /* when it entered its pool (a sequence): the oldest goes first */
        int64_t head_due_ms;     /* INT64_MAX while a request is in */
        uint64_t ticket;         /* its proxied request (pool == CTL_POOL_PROXIED) */
};

struct ctl_conns {
        pthread_mutex_t lock;
        struct ctl_conns_limits lim;
        ctl_conns_cut_fn cut;
        void *userdata;
        size_t cap;              /* entries: twice the total, as cut ones linger until closed */
        struct conn_entry *v;
        uint64_t seq;
        unsigned live, pool[CTL_POOL_N];
        bool anon_reported, total_reported, proxied_reported;
};

int ctl_conns_new(const struct ctl_conns_limits *lim, ctl_conns_cut_fn cut, void *userdata,
                  struct ctl_conns **ret) {
        if (!lim || !cut || lim->total < 3 || lim->total > MAX_TOTAL || lim->anon < 1 ||
            lim->anon_per_client < 1 || lim->proxied < 1 || lim->head_ms < 1 ||
            lim->anon + lim->proxied >= lim->total)
                return -EINVAL;
        struct ctl_conns *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->cap = 2 * (size_t)lim->total;
        t->v = calloc(t->cap, sizeof *t->v);
        if (!t->v) {
                free(t);
                return -ENOMEM;
        }
        t->lim = *lim;
        t->cut = cut;
        t->userdata = userdata;
        pthread_mutex_init(&t->lock, NULL);
        *ret = t;
        return 0;
}

void ctl_conns_free(struct ctl_conns *t) {
        if (!t)
                return;
        pthread_mutex_destroy(&t->lock);
        free(t->v);
        free(t);
}

/* The live entry of id, or NULL (closed, cut, or never counted). */
static struct conn_entry *find(struct ctl_conns *t, uint64_t id) {
        size_t slot = (size_t)(id & ((1u << SLOT_BITS) - 1));
        if (id == 0 || slot >= t->cap || t->v[slot].id != id || t->v[slot].cut)
                return NULL;
        return &t->v[slot];
}

static bool is_anon_of(const struct conn_entry *e, const struct ctl_client *c) {
        return e->id && !e->cut && e->pool == CTL_POOL_ANON &&
               (!c || (e->capped && ctl_client_eq(&e->client, c)));
}

static unsigned anon_count(struct ctl_conns *t, const struct ctl_client *c) {
        unsigned n = 0;
        for (size_t i = 0; i < t->cap; i++)
                n += is_anon_of(&t->v[i], c);
        return n;
}

/* The oldest anonymous connection (of c; NULL: of all), or NULL. */
static struct conn_entry *oldest_anon(struct ctl_conns *t, const struct ctl_client *c) {
        struct conn_entry *o = NULL;
        for (size_t i = 0; i < t->cap; i++)
                if (is_anon_of(&t->v[i], c) && (!o || t->v[i].since < o->since))
                        o = &t->v[i];
        return o;
}

/* Forgets the "reported" marks of pools that have room again (at most half
 * full), so the next flood is reported. */
static void rearm(struct ctl_conns *t) {
        if (t->pool[CTL_POOL_ANON] <= t->lim.anon / 2)
                t->anon_reported = false;
        if (t->live <= t->lim.total / 2)
                t->total_reported = false;
        if (t->pool[CTL_POOL_PROXIED] <= t->lim.proxied / 2)
                t->proxied_reported = false;
}

static void enter(struct ctl_conns *t, struct conn_entry *e, enum ctl_pool pool) {
        e->pool = pool;
        e->since = ++t->seq;
        t->pool[pool]++;
}

static void move(struct ctl_conns *t, struct conn_entry *e, enum ctl_pool pool) {
        t->pool[e->pool]--;
        enter(t, e, pool);
        rearm(t);
}

/* Out of its pool and of the live count. */
static void uncount(struct ctl_conns *t, struct conn_entry *e) {
        t->pool[e->pool]--;
        t->live--;
        rearm(t);
}

static void cut(struct ctl_conns *t, struct conn_entry *e) {
        uncount(t, e);
        e->cut = true;
        t->cut(t->userdata, e->fd);
}

/* Whether another anonymous connection of e's client carries the mark of a
 * reported flood. */
static bool flood_reported(struct ctl_conns *t, const struct conn_entry *e) {
        for (size_t i = 0; i < t->cap; i++)
                if (&t->v[i] != e && is_anon_of(&t->v[i], &e->client) && t->v[i].flood)
                        return true;
        return false;
}

/* Cuts the oldest anonymous connections while newcomer's client, the
 * anonymous pool or the total are over their caps. Returns what to report. */
static int enforce(struct ctl_conns *t, struct conn_entry *newcomer) {
        int report = 0;
        /* (no client can be over its cap while the pool in all is not: skip the scan) */
        while (newcomer->capped && t->pool[CTL_POOL_ANON] > t->lim.anon_per_client &&
               anon_count(t, &newcomer->client) > t->lim.anon_per_client) {
                if (!flood_reported(t, newcomer))
                        report |= CTL_CONNS_CUT_CLIENT;
                newcomer->flood = true; /* the newest keeps the mark */
                cut(t, oldest_anon(t, &newcomer->client));
        }
        while (t->pool[CTL_POOL_ANON] > t->lim.anon) {
                if (!t->anon_reported)
                        report |= CTL_CONNS_CUT_ANON;
                cut(t, oldest_anon(t, NULL));
                t->anon_reported = true;
        }
        while (t->live > t->lim.total && t->pool[CTL_POOL_ANON] > 0) {
                if (!t->total_reported)
                        report |= CTL_CONNS_CUT_TOTAL;
                cut(t, oldest_anon(t, NULL));
                t->total_reported = true;
        }
        return report;
}

bool ctl_conns_admit(struct ctl_conns *t) {
        pthread_mutex_lock(&t->lock);
        bool ok = t->live < t->lim.total || t->pool[CTL_POOL_ANON] > 0;
        pthread_mutex_unlock(&t->lock);
        return ok;
}

int ctl_conns_open(struct ctl_conns *t, const struct ctl_client *client, int fd, int64_t now_ms,
                   uint64_t *ret_id) {
        int r = -ENOSPC;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->cap; i++) {
                struct conn_entry *e = &t->v[i];
                if (e->id)
                        continue;
                *e = (struct conn_entry){
                        .id = (++t->seq << SLOT_BITS) | i,
                        .fd = fd,
                        .capped = client != NULL,
                        .head_due_ms = now_ms + t->lim.head_ms,
                };
                if (client)
                        e->client = *client;
                t->live++;
                enter(t, e, CTL_POOL_ANON);
                *ret_id = e->id;
                r = enforce(t, e);
                break;
        }
        pthread_mutex_unlock(&t->lock);
        return r;
}

void ctl_conns_close(struct ctl_conns *t, uint64_t id) {
        pthread_mutex_lock(&t->lock);
        size_t slot = (size_t)(id & ((1u << SLOT_BITS) - 1));
        if (id != 0 && slot < t->cap && t->v[slot].id == id) {
                struct conn_entry *e = &t->v[slot];
                if (!e->cut)
                        uncount(t, e);
                *e = (struct conn_entry){0};
        }
        pthread_mutex_unlock(&t->lock);
}

void ctl_conns_head_done(struct ctl_conns *t, uint64_t id) {
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, id);
        if (e)
                e->head_due_ms = INT64_MAX;
        pthread_mutex_unlock(&t->lock);
}

void ctl_conns_request_done(struct ctl_conns *t, uint64_t id, int64_t now_ms) {
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, id);
        if (e)
                e->head_due_ms = now_ms + t->lim.head_ms;
        pthread_mutex_unlock(&t->lock);
}

void ctl_conns_authenticated(struct ctl_conns *t, uint64_t id) {
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, id);
        if (e) {
                e->owner = true;
                if (e->pool == CTL_POOL_ANON)
                        move(t, e, CTL_POOL_OWNER);
        }
        pthread_mutex_unlock(&t->lock);
}

int ctl_conns_proxy_begin(struct ctl_conns *t, uint64_t id, uint64_t *ret_ticket, bool *ret_report) {
        int r = 0;
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, id);
        *ret_report = false;
        if (!e)
                r = -ENOENT;
        else if (e->pool == CTL_POOL_PROXIED || t->pool[CTL_POOL_PROXIED] >= t->lim.proxied) {
                r = -EBUSY;
                *ret_report = !t->proxied_reported;
                t->proxied_reported = true;
        } else {
                move(t, e, CTL_POOL_PROXIED);
                e->ticket = ++t->seq;
                *ret_ticket = e->ticket;
        }
        pthread_mutex_unlock(&t->lock);
        return r;
}

int ctl_conns_proxy_end(struct ctl_conns *t, uint64_t id, uint64_t ticket) {
        int report = 0;
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, id);
        if (e && e->pool == CTL_POOL_PROXIED && e->ticket == ticket) {
                move(t, e, e->owner ? CTL_POOL_OWNER : CTL_POOL_ANON);
                report = e->owner ? 0 : enforce(t, e);
        }
        pthread_mutex_unlock(&t->lock);
        return report;
}

unsigned ctl_conns_reap(struct ctl_conns *t, int64_t now_ms, int64_t *ret_next_ms) {
        unsigned n = 0;
        int64_t next = INT64_MAX;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->cap; i++) {
                struct conn_entry *e = &t->v[i];
                if (!e->id || e->cut)
                        continue;
                if (e->head_due_ms <= now_ms) {
                        cut(t, e);
                        n++;
                } else if (e->head_due_ms < next)
                        next = e->head_due_ms;
        }
        pthread_mutex_unlock(&t->lock);
        *ret_next_ms = next;
        return n;
}

unsigned ctl_conns_count(struct ctl_conns *t, enum ctl_pool pool, const struct ctl_client *client) {
        unsigned n = 0;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->cap; i++) {
                const struct conn_entry *e = &t->v[i];
                n += e->id && !e->cut && (pool == CTL_POOL_N || e->pool == pool) &&
                     (!client || (e->capped && ctl_client_eq(&e->client, client)));
        }
        pthread_mutex_unlock(&t->lock);
        return n;
}
