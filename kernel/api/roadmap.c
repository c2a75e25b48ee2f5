/* roadmap.c (api) — GET roadmap, POST roadmap/continue. See roadmap.h. */
#include "api/roadmap.h"
#include "api/reply.h"
#include "base/json.h"
#include "base/log.h"
#include "evolution/orchestrator.h"
#include "evolution/roadmap.h"

int api_roadmap_h_get(struct db *kdb, const struct ctl_api_call *call, int *ret_status, char **ret_json) {
        _cleanup_free_ char *json = NULL, *md = NULL, *running = NULL;
        int r = roadmap_get_json(kdb, NULL, &json);
        if (r == -ENOENT)
                return api_reply(200, json_pack("{s:n, s:n, s:n, s:n}", "roadmap", "markdown", "next", "running"),
                                 ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not read the roadmap: %m");
        json_t *m = json_loads(json, 0, NULL);
        if (!m)
                return -ENOMEM;
        int done = (int)json_integer_value(json_object_get(m, "done"));
        json_t *stages = json_object_get(m, "stages");
        if ((r = roadmap_markdown(m, done, &md)) < 0) {
                json_decref(m);
                return r;
        }
        r = roadmap_running(kdb, json_string_value(json_object_get(m, "id")), &running);
        if (r < 0 && r != -ENOENT) {
                json_decref(m);
                return log_error_errno(r, "could not read the roadmap's evolutions: %m");
        }
        json_t *next = (size_t)done < json_array_size(stages)
                               ? json_pack("{s:i, s:O}", "stage", done + 1, "text", json_array_get(stages, (size_t)done))
                               : json_null();
        return api_reply(200, json_pack("{s:o, s:s, s:o, s:s?}", "roadmap", m, "markdown", md, "next", next, "running",
                                        running),
                         ret_status, ret_json);
}

int api_roadmap_h_continue(struct orchestrator *o, const struct ctl_api_call *call, int *ret_status,
                           char **ret_json) {
        _cleanup_free_ char *id = NULL, *why = NULL;
        int r = orch_continue_roadmap(o, &id, &why);
        if (r == -ENOENT || r == -EALREADY || r == -EBUSY)
                return api_reply_error(r == -ENOENT ? 404 : 409, why ? why : strerror(-r), ret_status, ret_json);
        if (r < 0)
                return log_error_errno(r, "could not continue the roadmap: %m");
        log_info("queued evolution %s: the roadmap's next stage (via %s)", id, call->via_cli ? "the CLI" : "the control plane");
        return api_reply(202, json_pack("{s:s}", "id", id), ret_status, ret_json);
}
