/* conns.c — open connections per client. See conns.h. */
#include "ctl/conns.h"

#include <pthread.h>

struct conn_entry {
        struct ctl_client client;
        unsigned open;       /* 0: the entry is free */
        bool reported;       /* a refusal was reported since the client last had room */
};

struct ctl_conns {
        pthread_mutex_t lock;
        unsigned per_client;
        size_t max;
        struct conn_entry *v;
};

int ctl_conns_new(unsigned per_client, size_t max_clients, struct ctl_conns **ret) {
        if (per_client < 1 || max_clients < 1 || max_clients > 1000000)
                return -EINVAL;
        struct ctl_conns *t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->v = calloc(max_clients, sizeof *t->v);
        if (!t->v) {
                free(t);
                return -ENOMEM;
        }
        t->per_client = per_client;
        t->max = max_clients;
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

static struct conn_entry *find(struct ctl_conns *t, const struct ctl_client *c) {
        for (size_t i = 0; i < t->max; i++)
                if (t->v[i].open > 0 && ctl_client_eq(&t->v[i].client, c))
                        return &t->v[i];
        return NULL;
}

enum ctl_conns_verdict ctl_conns_check(struct ctl_conns *t, const struct ctl_client *c) {
        enum ctl_conns_verdict v = CTL_CONNS_OK;
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, c);
        if (e && e->open >= t->per_client) {
                v = e->reported ? CTL_CONNS_FULL : CTL_CONNS_FULL_FIRST;
                e->reported = true;
        }
        pthread_mutex_unlock(&t->lock);
        return v;
}

int ctl_conns_open(struct ctl_conns *t, const struct ctl_client *c) {
        int r = 0;
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, c);
        for (size_t i = 0; !e && i < t->max; i++)
                if (t->v[i].open == 0) {
                        e = &t->v[i];
                        *e = (struct conn_entry){.client = *c};
                }
        if (e)
                e->open++;
        else
                r = -ENOSPC;
        pthread_mutex_unlock(&t->lock);
        return r;
}

void ctl_conns_close(struct ctl_conns *t, const struct ctl_client *c) {
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, c);
        if (e) {
                e->open--;
                if (e->open <= t->per_client / 2) /* the flood has passed: report the next one */
                        e->reported = false;
        }
        pthread_mutex_unlock(&t->lock);
}

unsigned ctl_conns_count(struct ctl_conns *t, const struct ctl_client *c) {
        pthread_mutex_lock(&t->lock);
        struct conn_entry *e = find(t, c);
        unsigned n = e ? e->open : 0;
        pthread_mutex_unlock(&t->lock);
        return n;
}
