/* refs-cache.c — the live generation and where main stands, cached until
 * the Seed's refs move (see repo.h), so the status does not open the
 * repository on every call. */
#include "repo/repo-internal.h"
#include "base/fileio.h"

#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/inotify.h>

/* Where the refs that decide both live: HEAD and packed-refs in .git itself,
 * main, the generation tags; each folder's parent is watched too, so one
 * that does not exist (yet) is seen when it comes. */
static const char *const watched[] = {".git", ".git/refs", ".git/refs/heads", ".git/refs/tags", ".git/refs/tags/seed"};
#define WATCH_MASK                                                                                                 \
        (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | IN_MODIFY | IN_ATTRIB |          \
         IN_DELETE_SELF | IN_MOVE_SELF)

int repo_refs_cache_init(struct repo_refs_cache *c, const char *seed_dir) {
        *c = (struct repo_refs_cache){.inotify_fd = -1, .seq = 1};
        if (!seed_dir || !(c->seed_dir = strdup(seed_dir)))
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        /* Without inotify (a limit reached) every question reads again. */
        c->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        return 0;
}

void repo_refs_cache_done(struct repo_refs_cache *c) {
        if (!c || !c->seed_dir)
                return;
        repo_owner_change_done(&c->oc);
        if (c->inotify_fd >= 0)
                close(c->inotify_fd);
        free(c->seed_dir);
        pthread_mutex_destroy(&c->lock);
        *c = (struct repo_refs_cache){.inotify_fd = -1};
}

/* Under c->lock: from here the way past the lock is closed (seq odd). */
static void seq_close(struct repo_refs_cache *c) {
        uint64_t s = atomic_load(&c->seq);
        if (s % 2 == 0)
                atomic_store(&c->seq, s + 1);
}

void repo_refs_cache_invalidate(struct repo_refs_cache *c) {
        pthread_mutex_lock(&c->lock);
        seq_close(c);
        c->valid = false;
        pthread_mutex_unlock(&c->lock);
}

/* Whether anything happened in the watched folders since the last call
 * (the events are read and dropped; an overflow is something too). */
static bool refs_moved(int fd) {
        bool moved = false;
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                ssize_t k = read(fd, buf, sizeof buf);
                if (k > 0) {
                        moved = true;
                        continue;
                }
                if (k < 0 && errno == EINTR)
                        continue;
                return moved || !(k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        }
}

/* (Re)arms the watches: the same folder keeps its watch; one that was
 * replaced gets a new one; one that does not exist is watched through its
 * parent. False if one could not be watched otherwise (a limit, .git
 * missing): then nothing is trusted. */
static bool arm(struct repo_refs_cache *c) {
        bool all = true;
        for (size_t i = 0; i < ARRAY_SIZE(watched); i++) {
                _cleanup_free_ char *p = path_join(c->seed_dir, watched[i]);
                if (!p || (inotify_add_watch(c->inotify_fd, p, WATCH_MASK | IN_ONLYDIR | IN_DONT_FOLLOW) < 0 &&
                           (errno != ENOENT || i == 0)))
                        all = false;
        }
        return all;
}

/* Whether the watch has events waiting (they stay queued for
 * refresh_locked to drain); an error counts as yes. */
static bool watch_pending(int fd) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int k;
        do
                k = poll(&p, 1, 0);
        while (k < 0 && errno == EINTR);
        return k != 0;
}

/* Under c->lock: reads the repository again unless nothing moved since the
 * last read and it is recent. */
static void refresh_locked(struct repo_refs_cache *c) {
        int64_t now = now_ms();
        if (c->inotify_fd >= 0 && c->valid && now - c->read_ms < REPO_REFS_CACHE_MAX_MS && !watch_pending(c->inotify_fd))
                return; /* (the events stay queued until seq is closed below) */
        /* Closed before the watch is drained: a question that polled it
         * empty meanwhile sees seq move and asks under the lock. */
        seq_close(c);
        /* Armed (and drained) before reading: a change while we read is
         * seen by the next question. */
        bool trusted = c->inotify_fd >= 0 && arm(c);
        if (trusted)
                (void)refs_moved(c->inotify_fd);
        repo_owner_change_done(&c->oc);
        c->oc = (struct repo_owner_change){0};
        c->oc_r = repo_owner_change(c->seed_dir, &c->oc);
        if (c->oc_r >= 0) {
                c->gen_r = 0;
                c->gen = c->oc.generation;
        } else
                c->gen_r = repo_live_generation(c->seed_dir, &c->gen);
        c->read_ms = now;
        c->valid = trusted;
        c->reads++;
        atomic_store(&c->reads_seen, c->reads);
        atomic_store(&c->read_ms_seen, now);
        if (trusted) /* opened again: even */
                atomic_store(&c->seq, atomic_load(&c->seq) + 1);
}

uint64_t repo_refs_cache_version(struct repo_refs_cache *c) {
        /* Past the lock: what was read stands if the watch is quiet and
         * nobody began to drain it or invalidate meanwhile (seq the same
         * before and after; sequentially consistent atomics order the
         * poll between the two loads). */
        uint64_t s1 = atomic_load(&c->seq);
        if (s1 % 2 == 0 && now_ms() - atomic_load(&c->read_ms_seen) < REPO_REFS_CACHE_MAX_MS &&
            !watch_pending(c->inotify_fd)) {
                uint64_t v = atomic_load(&c->reads_seen);
                if (atomic_load(&c->seq) == s1)
                        return v;
        }
        pthread_mutex_lock(&c->lock);
        refresh_locked(c);
        uint64_t v = c->reads;
        pthread_mutex_unlock(&c->lock);
        return v;
}

int repo_refs_cache_generation(struct repo_refs_cache *c, int *ret) {
        pthread_mutex_lock(&c->lock);
        refresh_locked(c);
        int r = c->gen_r;
        if (r >= 0)
                *ret = c->gen;
        pthread_mutex_unlock(&c->lock);
        return r < 0 ? r : 0;
}

int repo_refs_cache_owner_change(struct repo_refs_cache *c, struct repo_owner_change *ret) {
        pthread_mutex_lock(&c->lock);
        refresh_locked(c);
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
