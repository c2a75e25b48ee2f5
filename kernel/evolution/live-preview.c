/* live-preview.c — the candidate generation on a copy of the live data, for
 * the owner to try before it is applied. See live-preview.h. */
#include "evolution/live-preview.h"
#include "base/fileio.h"
#include "base/log.h"
#include "config/config.h"
#include "db/db.h"
#include "fsx/fsx.h"
#include "organism/migrations.h"
#include "organism/organism.h"
#include "pg/pg.h"

struct evo_live_preview {
        const struct pg *pg;
        struct pg_live_copy copy;
        struct organism *org;
        char *run_dir;
};

void evo_live_preview_stop(struct evo_live_preview *p) {
        if (!p)
                return;
        if (p->org) {
                organism_stop(p->org);
                organism_free(p->org);
        }
        if (p->copy.name && pg_live_copy_drop(p->pg, p->copy.name) < 0)
                log_warn("cannot drop %s, the preview's copy of the live data (it goes at the next start)",
                         p->copy.name);
        pg_live_copy_done(&p->copy);
        if (p->run_dir)
                (void)rm_rf(p->run_dir);
        free(p->run_dir);
        free(p);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct evo_live_preview *, evo_live_preview_stop)

const char *evo_live_preview_socket(const struct evo_live_preview *p) {
        return p && p->org ? organism_socket(p->org) : NULL;
}

/* The candidate's migrations on the copy, as the copy's own role. */
static int migrate_copy(const struct evo_live_preview_config *c, const struct evo_live_preview *p, char **ret_error) {
        _cleanup_close_ int root = -1;
        int r = fsx_open_root(c->worktree, &root);
        if (r < 0)
                return errorf(r, ret_error, "cannot open the candidate's worktree: %s", strerror(-r));
        _cleanup_free_ char *ci = NULL;
        if ((r = pg_live_copy_conninfo(c->pg, &p->copy, &ci)) < 0)
                return r;
        r = organism_migrations_apply(root, c->cfg->organism.migrations, ci, ret_error);
        secure_zero(ci, strlen(ci));
        return r < 0 ? r : 0;
}

static char *seed_path(const struct evo_live_preview_config *c, const char *rel) {
        return path_join(c->seed_dir, rel);
}

int evo_live_preview_start(const struct evo_live_preview_config *c, struct evo_live_preview **ret, char **ret_note,
                           char **ret_error) {
        if (!c || !c->pg || !c->worktree || !c->evo_id || !c->hex || !c->cfg)
                return -EINVAL;
        _cleanup_(evo_live_preview_stopp) struct evo_live_preview *p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->pg = c->pg;
        char name[64], rel[96], logrel[128], label[96];
        snprintf(name, sizeof name, PG_LIVE_COPY_PREFIX "%s", c->hex);
        int r = pg_live_copy_create(c->pg, name, PG_LIVE_COPY_MAX_BYTES, &p->copy);
        if (r < 0)
                return errorf(r, ret_error, "cannot copy the live data: %s", strerror(-r));
        _cleanup_free_ char *migrate_error = NULL;
        if ((r = migrate_copy(c, p, &migrate_error)) < 0)
                return errorf(r, ret_error, "migrating the copy of the live data failed: %s",
                              migrate_error ? migrate_error : strerror(-r));
        snprintf(rel, sizeof rel, ".seed/preview/%s-live", c->evo_id);
        snprintf(logrel, sizeof logrel, ".seed/logs/preview-%s-live.log", c->evo_id);
        snprintf(label, sizeof label, "preview %s", c->evo_id);
        _cleanup_free_ char *preview_dir = seed_path(c, ".seed/preview"), *log_path = seed_path(c, logrel);
        _cleanup_free_ char *cache = seed_path(c, ".seed/cache"), *url = NULL;
        if (!(p->run_dir = seed_path(c, rel)) || !preview_dir || !log_path || !cache)
                return -ENOMEM;
        (void)rm_rf(p->run_dir);
        if ((r = mkdir_mode(preview_dir, 0700)) < 0 || (r = mkdir_mode(p->run_dir, 0700)) < 0)
                return errorf(r, ret_error, "cannot create %s: %s", p->run_dir, strerror(-r));
        if ((r = pg_live_copy_url(c->pg, &p->copy, &url)) < 0)
                return r;
        struct organism_config oc = {
                .seed_dir = c->worktree,
                .egress = c->egress,
                .label = label,
                .build_cmd = c->cfg->organism.build,
                .run_cmd = c->cfg->organism.run,
                .health_path = c->cfg->organism.health,
                .port = c->cfg->organism.port,
                .database_url = url,
                .pg_socket_dir = pg_socket_dir(c->pg),
                .bridge_path = c->bridge_path,
                .run_dir = p->run_dir,
                .log_path = log_path,
                .cache_dir = cache,
                .health_timeout_ms = EVO_LIVE_PREVIEW_START_MS,
        };
        r = organism_new(&oc, &p->org);
        secure_zero(url, strlen(url));
        if (r < 0 || (r = organism_start(p->org)) < 0)
                return errorf(r, ret_error, "cannot start the candidate: %s", strerror(-r));
        if ((r = organism_wait_ready(p->org, EVO_LIVE_PREVIEW_START_MS + 30 * 1000)) < 0)
                return errorf(r, ret_error, "the candidate did not become healthy on the copy of the live data "
                                            "(%s; see %s)", r == -ETIMEDOUT ? "no answer within 90 s" : "it exited",
                              logrel);
        if (xasprintf(ret_note, p->copy.copied
                                        ? "the candidate runs on a copy of the live data (%lld bytes); only your "
                                          "browser sees it"
                                        : "the live data (%lld bytes) is over 512 MB: the candidate runs on fresh, "
                                          "empty data; only your browser sees it",
                      (long long)p->copy.live_bytes) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(p);
        return 0;
}
