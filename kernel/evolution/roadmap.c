/* roadmap.c — staged goals: the roadmaps table and the kernel's rendering of
 * knowledge/roadmap.md. See roadmap.h. */
#include "evolution/roadmap.h"
#include "base/buf.h"
#include "base/json.h"
#include "base/text.h"
#include "db/db.h"
#include "tools/tools.h"

#define RECORD_QUOTE_MAX 300 /* bytes of one text quoted in the chat's record */

static bool stages_valid(json_t *stages) {
        size_t n = json_array_size(stages), i;
        json_t *s;
        if (!json_is_array(stages) || n < TOOLS_STAGES_MIN || n > TOOLS_STAGES_MAX)
                return false;
        json_array_foreach(stages, i, s)
                if (!json_is_string(s) || json_string_length(s) < 1 || json_string_length(s) > TOOLS_STAGE_MAX)
                        return false;
        return true;
}

int roadmap_create(struct db *db, const char *id, const char *goal, json_t *stages) {
        if (!id || strempty(goal) || strlen(goal) > TOOLS_GOAL_MAX || !stages_valid(stages))
                return -EINVAL;
        _cleanup_free_ char *text = json_dumps(stages, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        char now[32];
        snprintf(now, sizeof now, "%lld", (long long)wall_ms());
        const char *p[] = {id, goal, text, now};
        int r = db_execp(db,
                         "WITH m AS (INSERT INTO roadmaps (id, goal, stages, created_at, updated_at) "
                         "VALUES ($1, $2, $3::jsonb, $4::bigint, $4::bigint) RETURNING id) "
                         "UPDATE evolutions SET roadmap_id = (SELECT id FROM m), roadmap_stage = 0 WHERE id = $1",
                         4, p, NULL);
        return r < 0 ? r : 0;
}

int roadmap_get_json(struct db *db, const char *id, char **ret_json) {
        const char *p[] = {id};
        _cleanup_free_ char *rows = NULL;
        int r = db_query_json(db,
                              id ? "SELECT id, goal, stages, done, created_at, updated_at FROM roadmaps WHERE id = $1"
                                 : "SELECT id, goal, stages, done, created_at, updated_at FROM roadmaps "
                                   "ORDER BY created_at DESC, id LIMIT 1",
                              id ? 1 : 0, id ? p : NULL, &rows);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *arr = json_loads(rows, 0, NULL);
        json_t *o = json_array_get(arr, 0);
        if (!o)
                return -ENOENT;
        char *s = json_dumps(o, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

int roadmap_stage_done(struct db *db, const char *id, int stage) {
        char st[16], now[32];
        snprintf(st, sizeof st, "%d", stage + 1);
        snprintf(now, sizeof now, "%lld", (long long)wall_ms());
        const char *p[] = {id, st, now};
        int r = db_execp(db,
                         "UPDATE roadmaps SET done = GREATEST(done, LEAST($2::int, jsonb_array_length(stages))), "
                         "updated_at = $3::bigint WHERE id = $1",
                         3, p, NULL);
        return r < 0 ? r : 0;
}

int roadmap_running(struct db *db, const char *id, char **ret_evo_id) {
        const char *p[] = {id};
        return db_query_value(db,
                              "SELECT id FROM evolutions WHERE roadmap_id = $1 AND state NOT IN "
                              "('complete', 'failed', 'cancelled', 'rolled_back') ORDER BY seq LIMIT 1",
                              1, p, ret_evo_id);
}

/* One line of text for a Markdown list item: line breaks become spaces. */
static int put_line(struct buf *b, const char *s) {
        for (; *s; s++)
                if (buf_append(b, (*s == '\n' || *s == '\r') ? " " : s, 1) < 0)
                        return -ENOMEM;
        return 0;
}

int roadmap_markdown(json_t *roadmap, int done, char **ret) {
        const char *goal = json_string_value(json_object_get(roadmap, "goal"));
        json_t *stages = json_object_get(roadmap, "stages"), *s;
        if (!goal || !json_is_array(stages))
                return -EINVAL;
        struct buf b = BUF_INIT(ROADMAP_MD_MAX);
        size_t i;
        int r = buf_puts(&b, "# Roadmap\n\n_Kept by the Seed's kernel: a stage is ticked once its evolution is "
                             "live. Evolutions cannot change this file._\n\nGoal: ");
        if (r >= 0)
                r = put_line(&b, goal);
        if (r >= 0)
                r = buf_puts(&b, "\n\n");
        json_array_foreach(stages, i, s) {
                if (r >= 0)
                        r = buf_printf(&b, "- [%c] Stage %zu: ", (int)i < done ? 'x' : ' ', i + 1);
                if (r >= 0)
                        r = put_line(&b, json_string_value(s) ?: "");
                if (r >= 0)
                        r = buf_puts(&b, "\n");
        }
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = buf_steal(&b);
        return *ret ? 0 : -ENOMEM;
}

int roadmap_stage_intent(json_t *roadmap, int stage, char **ret) {
        const char *goal = json_string_value(json_object_get(roadmap, "goal"));
        json_t *stages = json_object_get(roadmap, "stages"), *s;
        int n = (int)json_array_size(stages);
        if (!goal || stage < 0 || stage >= n)
                return -EINVAL;
        struct buf b = BUF_INIT(ROADMAP_MD_MAX);
        size_t i;
        int r = buf_printf(&b, "Stage %d of %d of the roadmap (knowledge/roadmap.md).\n\nThe goal: %s\n\n", stage + 1,
                           n, goal);
        if (r >= 0)
                r = buf_puts(&b, stage ? "Done so far (live):\n" : "Nothing is done yet.\n");
        json_array_foreach(stages, i, s) {
                const char *text = json_string_value(s) ?: "";
                if (r < 0)
                        break;
                if ((int)i < stage)
                        r = buf_printf(&b, "- [x] Stage %zu: %s\n", i + 1, text);
                else if ((int)i == stage)
                        r = buf_printf(&b, "\nThis evolution does stage %zu: %s\n", i + 1, text);
                else
                        r = buf_printf(&b, "%s- [ ] Stage %zu (later, not now): %s\n",
                                       (int)i == stage + 1 ? "\nStill to come after it:\n" : "", i + 1, text);
        }
        if (r >= 0)
                r = buf_puts(&b, "\nPlan and make only this stage; do not declare a new goal or stages.");
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = buf_steal(&b);
        return *ret ? 0 : -ENOMEM;
}

int roadmap_record(json_t *roadmap, int stage, char **ret) {
        const char *goal = json_string_value(json_object_get(roadmap, "goal"));
        json_t *stages = json_object_get(roadmap, "stages");
        int n = (int)json_array_size(stages);
        if (!goal || stage < 0 || stage >= n)
                return -EINVAL;
        /* Each text cut to RECORD_QUOTE_MAX bytes on a character boundary:
         * the record goes to the chat, which takes only valid UTF-8. */
        const char *done = json_string_value(json_array_get(stages, (size_t)stage)) ?: "";
        int nd = (int)utf8_cut(done, RECORD_QUOTE_MAX), ng = (int)utf8_cut(goal, RECORD_QUOTE_MAX);
        if (stage + 1 >= n)
                return xasprintf(ret, "Roadmap: stage %d of %d (%.*s) is live. The goal \"%.*s\" is reached: every "
                                      "stage is done.",
                                 stage + 1, n, nd, done, ng, goal) < 0
                               ? -ENOMEM
                               : 0;
        const char *next = json_string_value(json_array_get(stages, (size_t)stage + 1)) ?: "";
        int nn = (int)utf8_cut(next, RECORD_QUOTE_MAX);
        return xasprintf(ret, "Roadmap: stage %d of %d (%.*s) is live. Next is stage %d: %.*s. Continue the "
                              "roadmap (the Continue button, or ask) to start it.",
                         stage + 1, n, nd, done, stage + 2, nn, next) < 0
                       ? -ENOMEM
                       : 0;
}
