/* watch.c — the private PostgreSQL's watchdog (watch.h). */
#include "pg/watch.h"
#include "base/log.h"
#include "pg/pg.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define WATCH_EVERY_MS 1000
#define WATCH_TEXT_MAX 256

struct pg_watch {
        struct pg *pg;
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stopping;
        /* under lock: what the status shows */
        bool down;
        int restarts;
        char last[WATCH_TEXT_MAX];
        _Atomic uint64_t changes; /* bumped under lock with each of them */
};

static void clock_text(char out[16]) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(out, 16, "%H:%M:%S UTC", &tm);
}

static void set_state(struct pg_watch *w, bool down, bool restarted, const char *fmt, ...) _printf_(4, 5);
static void set_state(struct pg_watch *w, bool down, bool restarted, const char *fmt, ...) {
        va_list ap;
        pthread_mutex_lock(&w->lock);
        w->down = down;
        if (restarted)
                w->restarts++;
        va_start(ap, fmt);
        vsnprintf(w->last, sizeof w->last, fmt, ap);
        va_end(ap);
        w->changes++;
        pthread_mutex_unlock(&w->lock);
}

/* Waits ms or until stopped; true when stopping. */
static bool pause_or_stop(struct pg_watch *w, int ms) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&w->lock);
        while (!w->stopping && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
                ;
        bool stop = w->stopping;
        pthread_mutex_unlock(&w->lock);
        return stop;
}

static void *watch_main(void *userdata) {
        struct pg_watch *w = userdata;
        while (!pause_or_stop(w, WATCH_EVERY_MS)) {
                _cleanup_free_ char *why = NULL;
                if (pg_check(w->pg, &why) == 0)
                        continue;
                char at[16];
                clock_text(at);
                set_state(w, true, false, "%s at %s; starting it again", why ? why : "PostgreSQL is down", at);
                int r = pg_restart(w->pg);
                if (r < 0) {
                        set_state(w, true, false, "%s at %s; it does not start again (%s), see .seed/logs/postgres.log; "
                                                  "retrying",
                                  why ? why : "PostgreSQL is down", at, strerror(-r));
                        (void)pause_or_stop(w, 5 * WATCH_EVERY_MS);
                        continue;
                }
                char back[16];
                clock_text(back);
                set_state(w, false, true, "%s at %s; it runs again since %s", why ? why : "PostgreSQL was down", at,
                          back);
        }
        return NULL;
}

int pg_watch_start(struct pg *pg, struct pg_watch **ret) {
        if (!pg || !ret)
                return -EINVAL;
        struct pg_watch *w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->pg = pg;
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&w->cond, &ca);
        pthread_condattr_destroy(&ca);
        if (!pg_is_external(pg)) {
                int k = pthread_create(&w->thread, NULL, watch_main, w);
                if (k != 0) {
                        pthread_cond_destroy(&w->cond);
                        pthread_mutex_destroy(&w->lock);
                        free(w);
                        return log_error_errno(-k, "cannot start the PostgreSQL watchdog: %m");
                }
        } else
                w->pg = NULL; /* nothing to watch */
        *ret = w;
        return 0;
}

void pg_watch_stop(struct pg_watch *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        if (w->pg)
                pthread_join(w->thread, NULL);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
}

int pg_watch_json(struct pg_watch *w, json_t **ret) {
        if (!w || !ret)
                return -EINVAL;
        pthread_mutex_lock(&w->lock);
        json_t *o = json_pack("{s:s, s:i}", "state", w->down ? "down" : "up", "restarts", w->restarts);
        if (o && w->last[0])
                json_object_set_new(o, "last_failure", json_string(w->last));
        pthread_mutex_unlock(&w->lock);
        if (!o)
                return -ENOMEM;
        *ret = o;
        return 0;
}

uint64_t pg_watch_version(struct pg_watch *w) {
        return w ? w->changes : 0;
}

bool pg_watch_up(struct pg_watch *w) {
        if (!w)
                return true;
        pthread_mutex_lock(&w->lock);
        bool up = !w->down;
        pthread_mutex_unlock(&w->lock);
        return up;
}
