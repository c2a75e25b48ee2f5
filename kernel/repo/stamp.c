/* stamp.c — a fingerprint of the Seed's refs, and the live generation and
 * the owner's commits cached against it (see repo.h), so the status does
 * not open the repository on every call. */
#include "repo/repo-internal.h"

#include <fcntl.h>
#include <sys/stat.h>

static const char *const stamp_paths[REPO_STAMP_PATHS] = {
        ".git/HEAD", ".git/refs/heads/main", ".git/refs/heads", ".git/refs/tags/seed", ".git/packed-refs",
};

int repo_stamp_read(const char *seed_dir, struct repo_stamp *ret) {
        struct repo_stamp s = {0};
        _cleanup_close_ int dfd = open(seed_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        for (size_t i = 0; i < REPO_STAMP_PATHS; i++) {
                struct stat st;
                if (fstatat(dfd, stamp_paths[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        s.f[i].error = -errno;
                        continue;
                }
                s.f[i].ino = st.st_ino;
                s.f[i].size = (uint64_t)st.st_size;
                s.f[i].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
                s.f[i].ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
        }
        *ret = s;
        return 0;
}

bool repo_stamp_eq(const struct repo_stamp *a, const struct repo_stamp *b) {
        for (size_t i = 0; i < REPO_STAMP_PATHS; i++)
                if (a->f[i].error != b->f[i].error || a->f[i].ino != b->f[i].ino || a->f[i].size != b->f[i].size ||
                    a->f[i].mtime_ns != b->f[i].mtime_ns || a->f[i].ctime_ns != b->f[i].ctime_ns)
                        return false;
        return true;
}

int repo_refs_cache_init(struct repo_refs_cache *c, const char *seed_dir) {
        *c = (struct repo_refs_cache){0};
        if (!seed_dir || !(c->seed_dir = strdup(seed_dir)))
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
        c->valid = false;
        pthread_mutex_unlock(&c->lock);
}

/* Under c->lock: reads the repository again unless the refs stand still
 * and the last read is recent. */
static void refresh_locked(struct repo_refs_cache *c) {
        struct repo_stamp now_stamp;
        int64_t now = now_ms();
        bool have_stamp = repo_stamp_read(c->seed_dir, &now_stamp) >= 0;
        if (c->valid && have_stamp && now - c->read_ms < REPO_REFS_CACHE_MAX_MS && repo_stamp_eq(&now_stamp, &c->stamp))
                return;
        repo_owner_change_done(&c->oc);
        c->oc = (struct repo_owner_change){0};
        c->oc_r = repo_owner_change(c->seed_dir, &c->oc);
        if (c->oc_r >= 0) {
                c->gen_r = 0;
                c->gen = c->oc.generation;
        } else
                c->gen_r = repo_live_generation(c->seed_dir, &c->gen);
        c->stamp = now_stamp;
        c->read_ms = now;
        c->valid = have_stamp; /* without a stamp, every question reads again */
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
