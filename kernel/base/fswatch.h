/* fswatch.h — one inotify queue that several caches of files share, so a
 * question asked many times a second ("did anything I read change?") costs
 * one poll for all of them.
 *
 * A cache adds watches on what it read, takes fswatch_changes() after
 * adding them and before reading, and keeps that count with what it read:
 * while fswatch_changes() still says the same, nothing watched changed
 * since. inotify queues an event before the writer's system call returns,
 * so a change made before a question is seen by that question. Any event on
 * any watch moves the count for every cache (they are few and rarely
 * change). Without inotify (its limits reached) every call gives a new
 * count, so nothing is ever kept. Watches are not removed: one on a file
 * or folder that goes away ends with it. Thread-safe. */
#pragma once

#include "base/base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct fswatch {
        bool ready;               /* initialised (done() on a zeroed one does nothing) */
        int fd;                   /* the inotify queue; -1: none, nothing is kept */
        pthread_mutex_t lock;     /* one drainer at a time */
        _Atomic uint64_t changes; /* never 0: a cache may use 0 for "nothing kept" */
};

/* 0; without inotify w->fd is -1 (not an error). */
int fswatch_init(struct fswatch *w);
void fswatch_done(struct fswatch *w);
/* Watches path (IN_DONT_FOLLOW: a final symlink is watched itself) for
 * mask. 0, or -errno (-ENOENT: nothing there; -EBADF: no queue). */
int fswatch_add(struct fswatch *w, const char *path, uint32_t mask);
/* How many times something watched changed: one poll when nothing is
 * queued, else the queue is drained and the count moves. */
uint64_t fswatch_changes(struct fswatch *w);
