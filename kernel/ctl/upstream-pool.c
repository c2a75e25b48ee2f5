/* upstream-pool.c — see upstream-pool.h. */
#include "ctl/upstream-pool.h"

#include <sys/socket.h>

void ctl_upool_init(struct ctl_upool *p) {
        *p = (struct ctl_upool){0};
        pthread_mutex_init(&p->lock, NULL);
        for (size_t i = 0; i < CTL_UPOOL_MAX; i++)
                p->c[i].fd = -1;
}

void ctl_upool_on_close(struct ctl_upool *p, void (*on_close)(void *userdata, int fd), void *userdata) {
        p->on_close = on_close;
        p->userdata = userdata;
}

static void pool_close(struct ctl_upool *p, int fd) {
        if (p->on_close)
                p->on_close(p->userdata, fd);
        close(fd);
}

static void slot_close(struct ctl_upool *p, struct ctl_upool_conn *c) {
        if (c->fd >= 0)
                pool_close(p, c->fd);
        c->fd = -1;
}

void ctl_upool_watched(struct ctl_upool *p) {
        p->watched = true;
}

void ctl_upool_stirred(struct ctl_upool *p, int fd) {
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < CTL_UPOOL_MAX; i++)
                if (p->c[i].fd == fd)
                        slot_close(p, &p->c[i]);
        pthread_mutex_unlock(&p->lock);
}

void ctl_upool_close_all(struct ctl_upool *p) {
        pthread_mutex_lock(&p->lock);
        p->closed = true;
        for (size_t i = 0; i < CTL_UPOOL_MAX; i++)
                slot_close(p, &p->c[i]);
        pthread_mutex_unlock(&p->lock);
}

void ctl_upool_done(struct ctl_upool *p) {
        ctl_upool_close_all(p);
        pthread_mutex_destroy(&p->lock);
}

/* Still open, and nothing to read: the peer neither closed it nor sent
 * anything unasked (which would be taken for the next response). */
static bool quiet(int fd) {
        char b;
        ssize_t k;
        do
                k = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        while (k < 0 && errno == EINTR);
        return k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

int ctl_upool_take(struct ctl_upool *p, const char *path, int *ret_fd) {
        int64_t now = now_ms();
        for (;;) {
                struct ctl_upool_conn *best = NULL;
                pthread_mutex_lock(&p->lock);
                for (size_t i = 0; i < CTL_UPOOL_MAX; i++) {
                        struct ctl_upool_conn *c = &p->c[i];
                        if (c->fd < 0)
                                continue;
                        if (now - c->idle_since_ms >= CTL_UPOOL_IDLE_MS) {
                                slot_close(p, c);
                                continue;
                        }
                        if (streq(c->path, path) && (!best || c->idle_since_ms > best->idle_since_ms))
                                best = c;
                }
                int fd = best ? best->fd : -1;
                if (best)
                        best->fd = -1;
                pthread_mutex_unlock(&p->lock);
                if (fd < 0)
                        return -ENOENT;
                if (p->watched || quiet(fd)) {
                        *ret_fd = fd;
                        return 0;
                }
                pool_close(p, fd);
        }
}

void ctl_upool_put(struct ctl_upool *p, const char *path, int fd) {
        if (fd < 0)
                return;
        struct ctl_upool_conn *slot = NULL;
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < CTL_UPOOL_MAX && !slot && !p->closed; i++)
                if (p->c[i].fd < 0)
                        slot = &p->c[i];
        if (slot && path && strlen(path) < sizeof slot->path) {
                strcpy(slot->path, path);
                slot->fd = fd;
                slot->idle_since_ms = now_ms();
                fd = -1;
        }
        pthread_mutex_unlock(&p->lock);
        if (fd >= 0)
                pool_close(p, fd);
}

size_t ctl_upool_idle(struct ctl_upool *p) {
        size_t n = 0;
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < CTL_UPOOL_MAX; i++)
                n += p->c[i].fd >= 0;
        pthread_mutex_unlock(&p->lock);
        return n;
}
