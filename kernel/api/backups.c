/* backups.c (api) — GET/POST backups, POST backups/{id}/restore, GET
 * backups/{id}/download. See backups.h. */
#include "api/backups.h"
#include "api/reply.h"
#include "backups/backups.h"
#include "base/json.h"
#include "base/log.h"

#define NO_BACKUPS "backups are not available: the Seed has no live database"
#define BUSY "the live data is being changed (an apply, a backup or a restore runs): try again when it is done"
#define DISK_FULL "the disk is full: no backup was taken and nothing was changed; free some space first"

/* The body: empty or a JSON object (nothing in it is needed). 1 when answered. */
static int body_empty_object(const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        int r = 0;
        if (call->body_len > API_BACKUPS_BODY_MAX)
                r = api_reply_error(413, "the body is too large (at most 1 KiB)", ret_status, ret_json);
        else if (call->body_len > 0) {
                _cleanup_json_ json_t *o = json_loadb(call->body, call->body_len, JSON_REJECT_DUPLICATES, NULL);
                if (!json_is_object(o))
                        r = api_reply_error(400, "the body must be a JSON object ({})", ret_status, ret_json);
                else
                        return 0;
        } else
                return 0;
        return r < 0 ? r : 1;
}

/* 1 and answered when the id is not one. */
static int check_id(const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (pg_backup_id_valid(call->param))
                return 0;
        int r = api_reply_error(400, "not a backup id (e.g. manual-3-0123456789ab)", ret_status, ret_json);
        return r < 0 ? r : 1;
}

int api_backups_h_list(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!b)
                return api_reply_error(503, NO_BACKUPS, ret_status, ret_json);
        char *json = NULL;
        int r = backups_list_json(b, &json);
        if (r < 0)
                return log_error_errno(r, "could not list the backups: %m");
        *ret_status = 200;
        *ret_json = json;
        return 0;
}

int api_backups_h_take(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!b)
                return api_reply_error(503, NO_BACKUPS, ret_status, ret_json);
        int r = body_empty_object(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        _cleanup_free_ char *id = NULL;
        r = backups_take(b, PG_BACKUP_MANUAL, false, &id);
        if (r == -EBUSY)
                return api_reply_error(409, BUSY, ret_status, ret_json);
        if (r == -ENOSPC)
                return api_reply_error(507, DISK_FULL, ret_status, ret_json);
        if (r == -ENODEV)
                return api_reply_error(503, NO_BACKUPS, ret_status, ret_json);
        if (r < 0)
                return api_reply_error(500, "the backup failed: see the kernel log", ret_status, ret_json);
        return api_reply(201, json_pack("{s:s}", "id", id), ret_status, ret_json);
}

int api_backups_h_restore(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        if (!b)
                return api_reply_error(503, NO_BACKUPS, ret_status, ret_json);
        int r = check_id(call, ret_status, ret_json);
        if (r == 0)
                r = body_empty_object(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        _cleanup_free_ char *saved = NULL, *error = NULL;
        r = backups_restore(b, call->param, &saved, &error);
        if (r == -ENOENT)
                return api_reply_error(404, "no backup has that id", ret_status, ret_json);
        if (r == -EBUSY)
                return api_reply_error(409, BUSY, ret_status, ret_json);
        if (r == -ENODEV)
                return api_reply_error(503, NO_BACKUPS, ret_status, ret_json);
        if (r == -EINVAL)
                return api_reply_error(422, error ? error : "not a backup", ret_status, ret_json);
        if (r < 0 && !saved) /* today's data could not be saved: nothing changed */
                return api_reply_error(r == -ENOSPC ? 507 : 500,
                                       error ? error : r == -ENOSPC ? DISK_FULL : "today's data could not be saved",
                                       ret_status, ret_json);
        if (r < 0)
                return api_reply(500, json_pack("{s:s, s:s}", "error", error ? error : "the restore failed", "saved",
                                                saved),
                                 ret_status, ret_json);
        return api_reply(200, json_pack("{s:s, s:s}", "restored", call->param, "saved", saved), ret_status, ret_json);
}

/* ---- the download: the file, read on the connection's thread ---- */

struct download {
        int fd;
        char disposition[128];
};

static ssize_t download_read(void *ctx, char *buf, size_t max) {
        struct download *d = ctx;
        ssize_t n;
        do
                n = read(d->fd, buf, max);
        while (n < 0 && errno == EINTR);
        return n > 0 ? n : -1;
}

static void download_close(void *ctx) {
        struct download *d = ctx;
        close(d->fd);
        free(d);
}

int api_backups_h_download(struct backups *b, const struct ctl_api_call *call, int *ret_status, char **ret_json,
                           struct ctl_stream *ret_stream) {
        if (!b)
                return api_reply_error(503, NO_BACKUPS, ret_status, ret_json);
        int r = check_id(call, ret_status, ret_json);
        if (r != 0)
                return r < 0 ? r : 0;
        int fd = -1;
        int64_t size = 0;
        r = backups_open(b, call->param, &fd, &size);
        if (r == -ENOENT)
                return api_reply_error(404, "no backup has that id", ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not open backup %s: %m", call->param);
        struct download *d = calloc(1, sizeof *d);
        if (!d) {
                close(fd);
                return -ENOMEM;
        }
        d->fd = fd;
        /* The id is [a-z0-9-] (checked): safe in a quoted filename. */
        snprintf(d->disposition, sizeof d->disposition, "attachment; filename=\"%s.dump\"", call->param);
        log_info("backup %s (%lld bytes) is downloaded %s", call->param, (long long)size,
                 call->via_cli ? "with the CLI token" : "by the owner's browser");
        *ret_stream = (struct ctl_stream){
                .content_type = "application/octet-stream",
                .disposition = d->disposition,
                .size = size > 0 ? (uint64_t)size : 0,
                .read = download_read,
                .close = download_close,
                .ctx = d,
        };
        return 0;
}
