/* detect.c — when reports become incidents: route normalisation, the 5xx
 * window per route, the crash window, a job's failures in a row, and the
 * causes open now. Memory only, no I/O, no clock of its own (the caller
 * passes the time), so every threshold is tested directly. See health.h. */
#include "health/health.h"

#include <ctype.h>
#include <stdio.h>

#define OPEN_MAX 256    /* causes tracked as open at once (the database holds the rest) */
#define METHOD_MAX 16

struct route_slot {
        char cause[HEALTH_CAUSE_MAX + 1]; /* "" unused */
        int64_t times[HEALTH_5XX_THRESHOLD]; /* the last 5xx answers, oldest first */
        size_t n;
        int64_t last;
        bool many; /* counted in HEALTH_5XX_MANY: each 5xx is an occurrence while it is open */
};

struct health_detect {
        struct route_slot routes[HEALTH_ROUTES_MAX];
        int64_t crashes[HEALTH_CRASH_GIVE_UP + 1]; /* the last crashes, oldest first */
        size_t n_crashes;
        char open[OPEN_MAX][HEALTH_CAUSE_MAX + 1];
        size_t n_open;
};

static const char *const kind_names[_HEALTH_KIND_MAX] = {
        [HEALTH_KIND_5XX] = "5xx", [HEALTH_KIND_CRASH] = "crash",
        [HEALTH_KIND_GAVE_UP] = "gave_up", [HEALTH_KIND_JOB] = "job",
};

const char *health_kind_name(enum health_kind k) {
        return k >= 0 && k < _HEALTH_KIND_MAX ? kind_names[k] : "unknown";
}

/* ---- routes ---- */

static bool all_digits(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!isdigit((unsigned char)s[i]))
                        return false;
        return n > 0;
}

static bool is_uuid(const char *s, size_t n) {
        if (n != 36)
                return false;
        for (size_t i = 0; i < n; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
                        return false;
        }
        return true;
}

/* A number, a UUID, hexadecimal of 8 or more, or 8 or more of
 * [A-Za-z0-9_-] with a digit in them ("evo_3fa1c2d4", "a1b2c3d4e5"). */
static bool is_id(const char *s, size_t n) {
        if (all_digits(s, n) || is_uuid(s, n))
                return true;
        if (n < 8)
                return false;
        bool digit = false, hex = true;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if (!isalnum(c) && c != '_' && c != '-')
                        return false;
                digit |= isdigit(c) != 0;
                hex &= isxdigit(c) != 0;
        }
        return digit || hex;
}

void health_route_normalise(const char *path, char *out, size_t size) {
        if (size < 2)
                return;
        size_t len = 0, segments = 0;
        const char *p = path && *path == '/' ? path : "/";
        size_t end = strcspn(p, "?#");
        out[0] = '\0';
        for (size_t i = 0; i < end;) {
                while (i < end && p[i] == '/')
                        i++;
                size_t j = i;
                while (j < end && p[j] != '/')
                        j++;
                if (j == i)
                        break;
                char seg[HEALTH_ROUTE_MAX + 1];
                size_t n = j - i;
                if (is_id(p + i, n))
                        n = (size_t)snprintf(seg, sizeof seg, ":id");
                else {
                        n = n > HEALTH_ROUTE_MAX ? HEALTH_ROUTE_MAX : n;
                        for (size_t k = 0; k < n; k++) {
                                unsigned char c = (unsigned char)p[i + k];
                                seg[k] = c > 0x20 && c < 0x7f ? (char)c : '~'; /* never '?' or '#': normalising twice changes nothing */
                        }
                        seg[n] = '\0';
                }
                bool room = segments < HEALTH_ROUTE_SEGMENTS && len + 1 + n <= HEALTH_ROUTE_MAX && len + 1 + n < size;
                if (!room) {
                        if (len + 4 < size)
                                len += (size_t)snprintf(out + len, size - len, "/…");
                        return;
                }
                out[len++] = '/';
                memcpy(out + len, seg, n);
                len += n;
                out[len] = '\0';
                segments++;
                i = j;
        }
        if (len == 0) {
                out[0] = '/';
                out[1] = '\0';
        } else if (end > 0 && p[end - 1] == '/' && len + 1 < size && len < HEALTH_ROUTE_MAX) {
                out[len++] = '/'; /* "/items/" stays apart from "/items" */
                out[len] = '\0';
        }
}

/* ---- open causes ---- */

static ssize_t open_find(const struct health_detect *d, const char *cause) {
        for (size_t i = 0; i < d->n_open; i++)
                if (streq(d->open[i], cause))
                        return (ssize_t)i;
        return -1;
}

void health_detect_mark_open(struct health_detect *d, const char *cause) {
        if (!d || strempty(cause) || strlen(cause) > HEALTH_CAUSE_MAX || open_find(d, cause) >= 0 ||
            d->n_open >= OPEN_MAX)
                return; /* past OPEN_MAX the database's unique index still keeps one per cause */
        snprintf(d->open[d->n_open++], HEALTH_CAUSE_MAX + 1, "%s", cause);
}

void health_detect_closed(struct health_detect *d, const char *cause) {
        if (!d || !cause)
                return;
        ssize_t i = open_find(d, cause);
        if (i < 0)
                return;
        d->n_open--;
        if ((size_t)i != d->n_open)
                memcpy(d->open[i], d->open[d->n_open], sizeof d->open[i]);
}

/* Routes with an incident of their own open now. */
static size_t open_routes(const struct health_detect *d) {
        size_t n = 0;
        for (size_t i = 0; i < d->n_open; i++)
                n += startswith(d->open[i], "5xx ") && !streq(d->open[i], HEALTH_5XX_MANY);
        return n;
}

/* A cause seen: AGAIN when it is open, else OPEN (and now it is). */
static enum health_verdict open_or_again(struct health_detect *d, const char *cause) {
        if (open_find(d, cause) >= 0)
                return HEALTH_AGAIN;
        health_detect_mark_open(d, cause);
        return HEALTH_OPEN;
}

int health_detect_new(struct health_detect **ret) {
        struct health_detect *d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

void health_detect_free(struct health_detect *d) { free(d); }

/* ---- 5xx ---- */

static struct route_slot *route_slot(struct health_detect *d, const char *cause) {
        struct route_slot *free_slot = NULL, *oldest = NULL;
        for (size_t i = 0; i < HEALTH_ROUTES_MAX; i++) {
                struct route_slot *s = &d->routes[i];
                if (!s->cause[0]) {
                        free_slot = free_slot ? free_slot : s;
                        continue;
                }
                if (streq(s->cause, cause))
                        return s;
                if (!oldest || s->last < oldest->last)
                        oldest = s;
        }
        /* a free slot, or the route seen longest ago is forgotten */
        struct route_slot *s = free_slot ? free_slot : oldest;
        *s = (struct route_slot){0};
        snprintf(s->cause, sizeof s->cause, "%s", cause);
        return s;
}

enum health_verdict health_detect_5xx(struct health_detect *d, const char *method, const char *path, int64_t now_ms,
                                      char *ret_cause) {
        char route[HEALTH_ROUTE_MAX + 1], m[METHOD_MAX + 1];
        size_t ml = 0;
        for (; method && method[ml] && ml < METHOD_MAX; ml++)
                m[ml] = isupper((unsigned char)method[ml]) ? method[ml] : '?';
        m[ml] = '\0';
        health_route_normalise(path, route, sizeof route);
        snprintf(ret_cause, HEALTH_CAUSE_MAX + 1, "5xx %s %s", ml ? m : "?", route);
        if (open_find(d, ret_cause) >= 0)
                return HEALTH_AGAIN;
        struct route_slot *s = route_slot(d, ret_cause);
        if (s->many) {
                if (open_find(d, HEALTH_5XX_MANY) >= 0) {
                        s->last = now_ms;
                        snprintf(ret_cause, HEALTH_CAUSE_MAX + 1, "%s", HEALTH_5XX_MANY);
                        return HEALTH_AGAIN;
                }
                s->many = false; /* that incident ended: the route counts anew */
        }
        /* forget what left the window, then add this one */
        size_t keep = 0;
        for (size_t i = 0; i < s->n; i++)
                if (now_ms - s->times[i] < HEALTH_WINDOW_MS)
                        s->times[keep++] = s->times[i];
        if (keep == HEALTH_5XX_THRESHOLD) {
                memmove(s->times, s->times + 1, (keep - 1) * sizeof s->times[0]);
                keep--;
        }
        s->times[keep++] = now_ms;
        s->n = keep;
        s->last = now_ms;
        if (s->n < HEALTH_5XX_THRESHOLD)
                return HEALTH_NOTHING;
        /* counted in the incident from now on: its own, or the many routes' one
         * (the slot remembers that one, so each 5xx counts there as here) */
        bool many = open_routes(d) >= HEALTH_5XX_OPEN_MAX;
        s->n = 0;
        s->many = many;
        if (many)
                snprintf(ret_cause, HEALTH_CAUSE_MAX + 1, "%s", HEALTH_5XX_MANY);
        else
                s->cause[0] = '\0'; /* the slot is free: open_find answers for the route */
        return open_or_again(d, ret_cause);
}

/* ---- crashes ---- */

enum health_verdict health_detect_crash(struct health_detect *d, int64_t now_ms, bool *ret_gave_up, char *ret_cause) {
        size_t keep = 0;
        for (size_t i = 0; i < d->n_crashes; i++)
                if (now_ms - d->crashes[i] < HEALTH_WINDOW_MS)
                        d->crashes[keep++] = d->crashes[i];
        if (keep == ARRAY_SIZE(d->crashes)) {
                memmove(d->crashes, d->crashes + 1, (keep - 1) * sizeof d->crashes[0]);
                keep--;
        }
        d->crashes[keep++] = now_ms;
        d->n_crashes = keep;
        *ret_gave_up = keep > HEALTH_CRASH_GIVE_UP && open_find(d, "gave_up") < 0;
        if (*ret_gave_up)
                health_detect_mark_open(d, "gave_up");
        snprintf(ret_cause, HEALTH_CAUSE_MAX + 1, "crash");
        return open_or_again(d, ret_cause);
}

enum health_verdict health_detect_down(struct health_detect *d, char *ret_cause) {
        snprintf(ret_cause, HEALTH_CAUSE_MAX + 1, "gave_up");
        return open_or_again(d, ret_cause);
}

enum health_verdict health_detect_job(struct health_detect *d, const char *job, int consecutive, char *ret_cause) {
        snprintf(ret_cause, HEALTH_CAUSE_MAX + 1, "job %.*s", HEALTH_CAUSE_MAX - 4, job ? job : "?");
        if (consecutive < HEALTH_JOB_FAILURES)
                return HEALTH_NOTHING;
        return open_or_again(d, ret_cause);
}
