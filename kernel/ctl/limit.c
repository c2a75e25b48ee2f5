/* limit.c — client identity (IP, IPv6 /48, trusted proxies) and the sliding
 * window limiter of failed sign-ins. See limit.h. */
#include "ctl/limit.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <pthread.h>
#include <sys/socket.h>

const struct ctl_limits ctl_limits_default = {
        .per_client = CTL_FAIL_PER_CLIENT,
        .overall = CTL_FAIL_OVERALL,
        .window_ms = CTL_FAIL_WINDOW_MS,
        .max_clients = CTL_FAIL_MAX_CLIENTS,
};

/* ---- addresses ---- */

static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

int ctl_ip_parse(const char *s, size_t len, struct ctl_ip *ret) {
        char tmp[INET6_ADDRSTRLEN + 8];
        const char *port = NULL;
        while (len > 0 && (*s == ' ' || *s == '\t'))
                s++, len--;
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
                len--;
        if (len == 0 || len >= sizeof tmp)
                return -EINVAL;
        memcpy(tmp, s, len);
        tmp[len] = 0;
        char *addr = tmp;
        if (tmp[0] == '[') { /* "[v6]" or "[v6]:port" */
                char *close = strchr(tmp, ']');
                if (!close || (close[1] && close[1] != ':'))
                        return -EINVAL;
                *close = 0;
                addr = tmp + 1;
                port = close[1] ? close + 2 : NULL;
                if (!strchr(addr, ':'))
                        return -EINVAL; /* brackets hold IPv6 only */
        } else {
                char *colon = strchr(tmp, ':');
                if (colon && !strchr(colon + 1, ':')) { /* "v4:port" */
                        *colon = 0;
                        port = colon + 1;
                }
        }
        if (port && (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port)))
                return -EINVAL;
        struct in_addr a4;
        struct in6_addr a6;
        if (!strchr(addr, ':')) {
                if (inet_pton(AF_INET, addr, &a4) != 1)
                        return -EINVAL;
                *ret = (struct ctl_ip){.family = AF_INET};
                memcpy(ret->a, &a4, 4);
                return 0;
        }
        if (inet_pton(AF_INET6, addr, &a6) != 1)
                return -EINVAL;
        if (memcmp(&a6, v4_mapped, sizeof v4_mapped) == 0) {
                *ret = (struct ctl_ip){.family = AF_INET};
                memcpy(ret->a, (const uint8_t *)&a6 + 12, 4);
                return 0;
        }
        *ret = (struct ctl_ip){.family = AF_INET6};
        memcpy(ret->a, &a6, 16);
        return 0;
}

int ctl_ip_from_sockaddr(const struct sockaddr *sa, size_t len, struct ctl_ip *ret) {
        if (!sa || len < sizeof(sa_family_t))
                return -EINVAL;
        if (sa->sa_family == AF_INET) {
                if (len < sizeof(struct sockaddr_in))
                        return -EINVAL;
                *ret = (struct ctl_ip){.family = AF_INET};
                memcpy(ret->a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
                return 0;
        }
        if (sa->sa_family != AF_INET6)
                return -EAFNOSUPPORT;
        if (len < sizeof(struct sockaddr_in6))
                return -EINVAL;
        const uint8_t *a6 = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (memcmp(a6, v4_mapped, sizeof v4_mapped) == 0) {
                *ret = (struct ctl_ip){.family = AF_INET};
                memcpy(ret->a, a6 + 12, 4);
                return 0;
        }
        *ret = (struct ctl_ip){.family = AF_INET6};
        memcpy(ret->a, a6, 16);
        return 0;
}

/* Whether ip lies in the first prefix bits of net (same family). */
static bool ip_in(const struct ctl_ip *ip, const struct ctl_ip *net, unsigned prefix) {
        if (ip->family != net->family)
                return false;
        unsigned full = prefix / 8, rest = prefix % 8;
        if (memcmp(ip->a, net->a, full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        return (ip->a[full] & mask) == (net->a[full] & mask);
}

static void ip_mask(struct ctl_ip *ip, unsigned prefix) {
        size_t n = ip->family == AF_INET ? 4 : 16;
        for (size_t i = 0; i < 16; i++) {
                unsigned bits = prefix > i * 8 ? prefix - (unsigned)i * 8 : 0;
                if (i >= n || bits == 0)
                        ip->a[i] = 0;
                else if (bits < 8)
                        ip->a[i] &= (uint8_t)(0xff << (8 - bits));
        }
}

void ctl_client_from_ip(const struct ctl_ip *ip, struct ctl_client *ret) {
        struct ctl_client c = {.ip = *ip};
        ip_mask(&c.ip, ip->family == AF_INET ? 32 : 48);
        *ret = c;
}

bool ctl_client_eq(const struct ctl_client *a, const struct ctl_client *b) {
        return a->ip.family == b->ip.family && memcmp(a->ip.a, b->ip.a, sizeof a->ip.a) == 0;
}

void ctl_client_str(const struct ctl_client *c, char out[CTL_CLIENT_STRLEN]) {
        char s[INET6_ADDRSTRLEN];
        if (!inet_ntop(c->ip.family, c->ip.a, s, sizeof s))
                snprintf(s, sizeof s, "?");
        snprintf(out, CTL_CLIENT_STRLEN, "%s%s", s, c->ip.family == AF_INET6 ? "/48" : "");
}

/* ---- trusted proxies ---- */

static int cidr_parse(const char *s, size_t len, struct ctl_cidr *ret) {
        const char *slash = memchr(s, '/', len);
        struct ctl_cidr c = {0};
        int r = ctl_ip_parse(s, slash ? (size_t)(slash - s) : len, &c.ip);
        if (r < 0)
                return r;
        unsigned max = c.ip.family == AF_INET ? 32 : 128;
        c.prefix = max;
        if (slash) {
                char digits[4] = {0};
                size_t dl = len - (size_t)(slash - s) - 1;
                while (dl > 0 && slash[dl] == ' ')
                        dl--;
                if (dl == 0 || dl > 3)
                        return -EINVAL;
                memcpy(digits, slash + 1, dl);
                if (strspn(digits, "0123456789") != dl)
                        return -EINVAL;
                c.prefix = (unsigned)atoi(digits);
                if (c.prefix > max)
                        return -EINVAL;
        }
        ip_mask(&c.ip, c.prefix);
        *ret = c;
        return 0;
}

int ctl_proxies_parse(const char *spec, struct ctl_proxies *ret) {
        struct ctl_proxies p = {0};
        if (!spec)
                spec = "";
        if (strlen(spec) > 4096)
                return -EINVAL;
        const char *s = spec + strspn(spec, " \t");
        size_t len = strlen(s);
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
                len--;
        if (len == 0) {
                *ret = p;
                return 0;
        }
        if (strspn(s, "0123456789") == len) {
                if (len > 2 || atoi(s) < 1 || atoi(s) > CTL_MAX_PROXY_HOPS)
                        return -EINVAL;
                p.hops = (unsigned)atoi(s);
                *ret = p;
                return 0;
        }
        /* Entries between commas; an empty one (",,", a trailing ",") is an error. */
        for (const char *q = s, *end = s + len;;) {
                const char *comma = memchr(q, ',', (size_t)(end - q));
                size_t n = comma ? (size_t)(comma - q) : (size_t)(end - q);
                if (p.n >= CTL_MAX_PROXIES || cidr_parse(q, n, &p.v[p.n]) < 0)
                        return -EINVAL;
                p.n++;
                if (!comma)
                        break;
                q = comma + 1;
        }
        *ret = p;
        return 0;
}

bool ctl_proxies_any(const struct ctl_proxies *p) {
        return p && (p->hops > 0 || p->n > 0);
}

static bool proxy_listed(const struct ctl_proxies *p, const struct ctl_ip *ip) {
        for (size_t i = 0; i < p->n; i++)
                if (ip_in(ip, &p->v[i].ip, p->v[i].prefix))
                        return true;
        return false;
}

bool ctl_proxies_trusts(const struct ctl_proxies *p, const struct ctl_ip *peer) {
        return p && (p->hops > 0 || proxy_listed(p, peer));
}

/* Walks X-Forwarded-For entries from the right: the last header first,
 * each one's entries right to left. */
struct xff_walk {
        char *const *v;
        size_t n;     /* headers not yet finished */
        size_t end;   /* unread length of v[n - 1] */
        bool started;
};

/* The next entry (as s, len) or false at the start of the list. */
static bool xff_prev(struct xff_walk *w, const char **ret_s, size_t *ret_len) {
        for (;;) {
                if (w->n == 0)
                        return false;
                const char *h = w->v[w->n - 1];
                if (!w->started) {
                        w->end = h ? strlen(h) : 0;
                        w->started = true;
                }
                if (w->end == 0 || !h) {
                        w->n--;
                        w->started = false;
                        continue;
                }
                size_t start = w->end;
                while (start > 0 && h[start - 1] != ',')
                        start--;
                *ret_s = h + start;
                *ret_len = w->end - start;
                w->end = start > 0 ? start - 1 : 0;
                if (start == 0) {
                        w->n--;
                        w->started = false;
                }
                /* An empty entry (", ,") is skipped like the platforms do. */
                size_t k = strspn(*ret_s, " \t");
                if (k >= *ret_len)
                        continue;
                return true;
        }
}

int ctl_client_of(const struct ctl_proxies *p, const char *peer, char *const *xff, size_t n_xff,
                  struct ctl_client *ret) {
        struct ctl_ip cur;
        int r = ctl_ip_parse(peer ? peer : "", peer ? strlen(peer) : 0, &cur);
        if (r < 0)
                return r;
        struct xff_walk w = {.v = xff, .n = xff ? n_xff : 0};
        const char *s;
        size_t len;
        if (p && p->hops > 0) {
                for (unsigned i = 0; i < p->hops && xff_prev(&w, &s, &len); i++) {
                        struct ctl_ip next;
                        if (ctl_ip_parse(s, len, &next) < 0)
                                break;
                        cur = next;
                }
        } else if (p && p->n > 0 && proxy_listed(p, &cur)) {
                /* Bounded by the header's size, which the server caps. */
                while (xff_prev(&w, &s, &len)) {
                        struct ctl_ip next;
                        if (ctl_ip_parse(s, len, &next) < 0)
                                break;
                        cur = next;
                        if (!proxy_listed(p, &cur))
                                break;
                }
        }
        ctl_client_from_ip(&cur, ret);
        return 0;
}

/* ---- the limiter ---- */

struct client_entry {
        bool used;
        struct ctl_client key;
        unsigned nfails;                           /* its failure times, oldest first */
        unsigned pending;                          /* attempts between begin and end */
        int64_t last;                              /* last failure or attempt */
};

struct ctl_limiter {
        pthread_mutex_t lock;
        struct ctl_limits lim;
        struct client_entry *clients;              /* lim.max_clients of them */
        int64_t *fails;                            /* lim.per_client per client */
        int64_t *ring;                             /* every failure's time, oldest at head */
        size_t head, count;
        unsigned pending;
};

/* The failure times of entry e (lim.per_client places). */
static int64_t *entry_fails(const struct ctl_limiter *l, const struct client_entry *e) {
        return l->fails + (size_t)(e - l->clients) * l->lim.per_client;
}

int ctl_limiter_new(const struct ctl_limits *lim, struct ctl_limiter **ret) {
        if (!lim || lim->per_client < 1 || lim->per_client > CTL_FAIL_PER_CLIENT_MAX || lim->overall < 1 ||
            lim->overall > 1000000 || lim->window_ms <= 0 || lim->max_clients < 1 || lim->max_clients > 1000000)
                return -EINVAL;
        struct ctl_limiter *l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        l->lim = *lim;
        l->clients = calloc(lim->max_clients, sizeof *l->clients);
        l->fails = calloc(lim->max_clients, lim->per_client * sizeof *l->fails);
        l->ring = calloc(lim->overall, sizeof *l->ring);
        if (!l->clients || !l->fails || !l->ring) {
                free(l->clients);
                free(l->fails);
                free(l->ring);
                free(l);
                return -ENOMEM;
        }
        pthread_mutex_init(&l->lock, NULL);
        *ret = l;
        return 0;
}

void ctl_limiter_free(struct ctl_limiter *l) {
        if (!l)
                return;
        pthread_mutex_destroy(&l->lock);
        free(l->clients);
        free(l->fails);
        free(l->ring);
        free(l);
}

/* Drops what fell out of the window; a client with nothing left is forgotten. */
static void entry_prune(const struct ctl_limiter *l, struct client_entry *e, int64_t now) {
        int64_t *fails = entry_fails(l, e);
        unsigned k = 0;
        while (k < e->nfails && fails[k] <= now - l->lim.window_ms)
                k++;
        if (k > 0) {
                memmove(fails, fails + k, (e->nfails - k) * sizeof fails[0]);
                e->nfails -= k;
        }
        if (e->nfails == 0 && e->pending == 0)
                *e = (struct client_entry){0};
}

static void ring_prune(struct ctl_limiter *l, int64_t now) {
        while (l->count > 0 && l->ring[l->head] <= now - l->lim.window_ms) {
                l->head = (l->head + 1) % l->lim.overall;
                l->count--;
        }
}

static void ring_add(struct ctl_limiter *l, int64_t now) {
        if (l->count == l->lim.overall) { /* keep the newest: the limit holds just the same */
                l->head = (l->head + 1) % l->lim.overall;
                l->count--;
        }
        l->ring[(l->head + l->count) % l->lim.overall] = now;
        l->count++;
}

static struct client_entry *entry_find(struct ctl_limiter *l, const struct ctl_client *c, int64_t now) {
        for (size_t i = 0; i < l->lim.max_clients; i++) {
                struct client_entry *e = &l->clients[i];
                if (e->used && ctl_client_eq(&e->key, c)) {
                        entry_prune(l, e, now);
                        return e->used ? e : NULL;
                }
        }
        return NULL;
}

/* A new entry for c: a free slot, else the least recently active one that
 * has no attempt in flight. NULL only if every slot has one in flight. */
static struct client_entry *entry_add(struct ctl_limiter *l, const struct ctl_client *c, int64_t now) {
        struct client_entry *victim = NULL;
        for (size_t i = 0; i < l->lim.max_clients; i++) {
                struct client_entry *e = &l->clients[i];
                if (e->used)
                        entry_prune(l, e, now);
                if (!e->used) {
                        victim = e;
                        break;
                }
                if (e->pending == 0 && (!victim || e->last < victim->last))
                        victim = e;
        }
        if (victim)
                *victim = (struct client_entry){.used = true, .key = *c, .last = now};
        return victim;
}

static enum ctl_limit state_locked(struct ctl_limiter *l, const struct client_entry *e) {
        if (e && e->nfails + e->pending >= l->lim.per_client)
                return CTL_LIMIT_CLIENT;
        if (l->count + l->pending >= l->lim.overall)
                return CTL_LIMIT_OVERALL;
        return CTL_LIMIT_NONE;
}

static void entry_fail(struct ctl_limiter *l, struct client_entry *e, int64_t now) {
        int64_t *fails = entry_fails(l, e);
        if (e->nfails == l->lim.per_client) { /* keep the newest: the limit holds just the same */
                memmove(fails, fails + 1, (e->nfails - 1) * sizeof fails[0]);
                e->nfails--;
        }
        fails[e->nfails++] = now;
        e->last = now;
}

enum ctl_limit ctl_limiter_state(struct ctl_limiter *l, const struct ctl_client *c, int64_t now) {
        pthread_mutex_lock(&l->lock);
        ring_prune(l, now);
        enum ctl_limit s = state_locked(l, entry_find(l, c, now));
        pthread_mutex_unlock(&l->lock);
        return s;
}

enum ctl_limit ctl_limiter_begin(struct ctl_limiter *l, const struct ctl_client *c, int64_t now) {
        pthread_mutex_lock(&l->lock);
        ring_prune(l, now);
        struct client_entry *e = entry_find(l, c, now);
        enum ctl_limit s = state_locked(l, e);
        if (s == CTL_LIMIT_NONE && !e && !(e = entry_add(l, c, now)))
                s = CTL_LIMIT_OVERALL; /* every slot busy: cannot count, so refuse */
        if (s == CTL_LIMIT_NONE) {
                e->pending++;
                e->last = now;
                l->pending++;
        }
        pthread_mutex_unlock(&l->lock);
        return s;
}

enum ctl_limit ctl_limiter_end(struct ctl_limiter *l, const struct ctl_client *c, bool failed,
                               int64_t now) {
        pthread_mutex_lock(&l->lock);
        ring_prune(l, now);
        struct client_entry *e = entry_find(l, c, now); /* kept: it has an attempt in flight */
        if (l->pending > 0)
                l->pending--;
        if (e && e->pending > 0)
                e->pending--;
        if (failed) {
                ring_add(l, now);
                if (e)
                        entry_fail(l, e, now);
        } else if (e) {
                e->nfails = 0;
                entry_prune(l, e, now);
                if (!e->used)
                        e = NULL;
        }
        enum ctl_limit s = state_locked(l, e);
        pthread_mutex_unlock(&l->lock);
        return s;
}

enum ctl_limit ctl_limiter_fail(struct ctl_limiter *l, const struct ctl_client *c, int64_t now) {
        pthread_mutex_lock(&l->lock);
        ring_prune(l, now);
        struct client_entry *e = entry_find(l, c, now);
        /* A client already over its limit adds nothing to the overall
         * count: one address cannot lock every other one out. */
        bool limited = e && e->nfails + e->pending >= l->lim.per_client;
        if (!e)
                e = entry_add(l, c, now);
        if (!limited)
                ring_add(l, now);
        if (e)
                entry_fail(l, e, now);
        enum ctl_limit s = state_locked(l, e);
        pthread_mutex_unlock(&l->lock);
        return s;
}

size_t ctl_limiter_tracked(struct ctl_limiter *l, int64_t now) {
        size_t n = 0;
        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < l->lim.max_clients; i++) {
                if (l->clients[i].used)
                        entry_prune(l, &l->clients[i], now);
                n += l->clients[i].used;
        }
        pthread_mutex_unlock(&l->lock);
        return n;
}
