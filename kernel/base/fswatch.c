/* fswatch.c — the shared inotify queue (see fswatch.h). */
#include "base/fswatch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

int fswatch_init(struct fswatch *w) {
        *w = (struct fswatch){.ready = true, .changes = 1};
        pthread_mutex_init(&w->lock, NULL);
        w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        return 0;
}

void fswatch_done(struct fswatch *w) {
        if (!w || !w->ready)
                return;
        if (w->fd >= 0)
                close(w->fd);
        pthread_mutex_destroy(&w->lock);
        *w = (struct fswatch){.fd = -1};
}

int fswatch_add(struct fswatch *w, const char *path, uint32_t mask) {
        if (w->fd < 0)
                return -EBADF;
        /* IN_MASK_ADD: two caches watching one inode keep both masks. */
        return inotify_add_watch(w->fd, path, mask | IN_DONT_FOLLOW | IN_MASK_ADD) < 0 ? -errno : 0;
}

/* Whether events wait in the queue; an error counts as yes. */
static bool pending(int fd) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int k;
        do
                k = poll(&p, 1, 0);
        while (k < 0 && errno == EINTR);
        return k != 0;
}

uint64_t fswatch_changes(struct fswatch *w) {
        if (w->fd < 0)
                return atomic_fetch_add(&w->changes, 1) + 1;
        if (!pending(w->fd))
                return atomic_load(&w->changes);
        pthread_mutex_lock(&w->lock);
        /* Moved before the queue is drained: a question that finds it
         * empty meanwhile already sees the new count. */
        atomic_fetch_add(&w->changes, 1);
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        for (;;) {
                ssize_t k = read(w->fd, buf, sizeof buf);
                if (k > 0 || (k < 0 && errno == EINTR))
                        continue;
                break; /* empty (EAGAIN), or an error: the count moved anyway */
        }
        uint64_t v = atomic_load(&w->changes);
        pthread_mutex_unlock(&w->lock);
        return v;
}
