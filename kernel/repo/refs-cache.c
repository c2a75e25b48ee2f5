/* refs-cache.c — the live generation and where main stands, cached until
 * the Seed's refs move (see repo.h), so the status does not open the
 * repository on every call. */
#include "repo/repo-internal.h"
#include "base/fileio.h"

#include <sys/inotify.h>

/* Where the refs that decide both live: HEAD and packed-refs in .git itself,
 * main, the generation tags; each folder's parent is watched too, so one
 * that does not exist (yet) is seen when it comes. */
static const char *const watched[] = {".git", ".git/refs", ".git/refs/heads", ".git/refs/tags", ".git/refs/tags/seed"};
#define WATCH_MASK                                                                                                 \
        (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB |          \
         IN_DELETE_SELF | IN_MOVE_SELF)

int repo_refs_cache_init(struct repo_refs_cache *c, const char *seed_dir, struct fswatch *watch) {
        *c = (struct repo_refs_cache){.watch = watch};
        if (!seed_dir || !watch || !(c->seed_dir = strdup(seed_dir)))
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        return 0;
}

void repo_refs_cache_done(struct repo_refs_cache *c) {
        if (!c || !c->seed_dir)
                return;
        repo_owner_change_done(&c->oc);
        free(c->seed_dir);
        pthread_mutex_destroy(&c->lock);
        *c = (struct repo_refs_cache){0};
}

void repo_refs_cache_invalidate(struct repo_refs_cache *c) {
        pthread_mutex_lock(&c->lock);
        atomic_store(&c->seen, 0);
        pthread_mutex_unlock(&c->lock);
}

/* (Re)arms the watches: the same folder keeps its watch; one that was
 * replaced gets a new one; one that does not exist is watched through its
 * parent. False if one could not be watched otherwise (a limit, .git
 * missing, no inotify): then nothing is trusted. */
static bool arm(struct repo_refs_cache *c) {
        bool all = true;
        for (size_t i = 0; i < ARRAY_SIZE(watched); i++) {
                _cleanup_free_ char *p = path_join(c->seed_dir, watched[i]);
                int r = p ? fswatch_add(c->watch, p, WATCH_MASK | IN_ONLYDIR) : -ENOMEM;
                if (r < 0 && (r != -ENOENT || i == 0))
                        all = false;
        }
        return all;
}

/* Under c->lock: reads the repository again unless nothing moved since the
 * last read and it is recent. */
static void refresh_locked(struct repo_refs_cache *c, uint64_t changes) {
        int64_t now = now_ms();
        uint64_t seen = atomic_load(&c->seen);
        if (seen != 0 && seen == changes && now - c->read_ms < REPO_REFS_CACHE_MAX_MS)
                return;
        /* Closed first: a question past the lock that meanwhile finds the
         * count unchanged sees seen move and asks under the lock. */
        atomic_store(&c->seen, 0);
        /* Armed before the count is taken, and that before reading: a
         * change while we read moves the count for the next question. */
        bool trusted = arm(c);
        uint64_t before = fswatch_changes(c->watch);
        repo_owner_change_done(&c->oc);
        c->oc = (struct repo_owner_change){0};
        c->oc_r = repo_owner_change(c->seed_dir, &c->oc);
        if (c->oc_r >= 0) {
                c->gen_r = 0;
                c->gen = c->oc.generation;
        } else
                c->gen_r = repo_live_generation(c->seed_dir, &c->gen);
        c->read_ms = now;
        c->reads++;
        atomic_store(&c->reads_seen, c->reads);
        atomic_store(&c->read_ms_seen, now);
        if (trusted)
                atomic_store(&c->seen, before);
}

uint64_t repo_refs_cache_version(struct repo_refs_cache *c, uint64_t changes) {
        /* Past the lock: what was read stands if the count the caller took
         * is the one taken before that read, and nobody began a refresh or
         * an invalidation meanwhile (seen the same before and after;
         * sequentially consistent atomics order the loads). */
        uint64_t s = atomic_load(&c->seen);
        if (s != 0 && s == changes && now_ms() - atomic_load(&c->read_ms_seen) < REPO_REFS_CACHE_MAX_MS) {
                uint64_t v = atomic_load(&c->reads_seen);
                if (atomic_load(&c->seen) == s)
                        return v;
        }
        pthread_mutex_lock(&c->lock);
        refresh_locked(c, changes);
        uint64_t v = c->reads;
        pthread_mutex_unlock(&c->lock);
        return v;
}

int repo_refs_cache_generation(struct repo_refs_cache *c, int *ret) {
        uint64_t changes = fswatch_changes(c->watch);
        pthread_mutex_lock(&c->lock);
        refresh_locked(c, changes);
        int r = c->gen_r;
        if (r >= 0)
                *ret = c->gen;
        pthread_mutex_unlock(&c->lock);
        return r < 0 ? r : 0;
}

int repo_refs_cache_owner_change(struct repo_refs_cache *c, struct repo_owner_change *ret) {
        uint64_t changes = fswatch_changes(c->watch);
        pthread_mutex_lock(&c->lock);
        refresh_locked(c, changes);
        int r = c->oc_r;
        struct repo_owner_change copy = c->oc;
        copy.subject = NULL;
        if (r >= 0 && c->oc.subject && !(copy.subject = strdup(c->oc.subject)))
                r = -ENOMEM;
        pthread_mutex_unlock(&c->lock);
        if (r < 0)
                return r;
        *ret = copy;
        return 0;
}
