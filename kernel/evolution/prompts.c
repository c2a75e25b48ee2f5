/* prompts.c — the system prompt of an evolution: who the Seed is
 * (knowledge/self.yaml), its skills index, its recent generations, and the
 * rules of the phase. Everything read from the repository goes through fsx
 * (no symlinks) and is bounded. */
#include "evolution/orchestrator-internal.h"
#include "base/buf.h"
#include "base/json.h"
#include "config/config.h"
#include "db/db.h"
#include "fsx/fsx.h"
#include "pg/pg.h"
#include "repo/repo.h"

#include <sys/stat.h>

#define SELF_MAX (16 * 1024)
#define SKILL_FILE_MAX (256 * 1024)  /* a SKILL.md, as the control plane bounds it (API_SELF_FILE_MAX) */
#define SKILL_DESCRIPTION_MAX 500
#define SKILLS_MAX 60
#define GENERATIONS_SHOWN 15

static void add_self(struct buf *b, int root) {
        _cleanup_free_ char *text = NULL, *err = NULL;
        if (fsx_read(root, "knowledge/self.yaml", SELF_MAX, &text, NULL, &err) < 0) {
                (void)buf_puts(b, "(knowledge/self.yaml is missing or unreadable)\n");
                return;
        }
        (void)buf_printf(b, "```yaml\n%s\n```\n", text);
}

/* A skill's line: its name and its front matter's description (read as
 * the control plane reads it, cfg_front_matter()), cut to
 * SKILL_DESCRIPTION_MAX bytes. */
static void add_skill(struct buf *b, int root, const char *name) {
        static const char *const keys[] = {"description", NULL};
        _cleanup_free_ char *rel = NULL, *err = NULL, *text = NULL;
        char *desc[1] = {NULL};
        size_t len = 0;
        if (xasprintf(&rel, "skills/%s/SKILL.md", name) < 0)
                return;
        /* fsx_read: regular files only (a FIFO must not hang us), bounded. */
        if (fsx_read(root, rel, SKILL_FILE_MAX, &text, &len, &err) < 0)
                return;
        (void)cfg_front_matter(text, len, rel, keys, desc, NULL);
        size_t dlen = desc[0] ? strcspn(desc[0], "\n") : 0;
        (void)buf_printf(b, "- %s: %.*s (read it with read_skill)\n", name,
                         (int)(dlen > SKILL_DESCRIPTION_MAX ? SKILL_DESCRIPTION_MAX : dlen), desc[0] ? desc[0] : "");
        free(desc[0]);
}

static void add_skills(struct buf *b, int root) {
        _cleanup_(fsx_list_freep) struct fsx_list *l = NULL;
        _cleanup_free_ char *err = NULL;
        if (fsx_list(root, "skills", SKILLS_MAX, &l, &err) < 0 || l->n == 0) {
                (void)buf_puts(b, "(none yet)\n");
                return;
        }
        for (size_t i = 0; i < l->n; i++)
                if (l->entries[i].type == FSX_DIR)
                        add_skill(b, root, l->entries[i].name);
}

static void add_generations(struct buf *b, const char *seed_dir) {
        struct repo_generation *g = NULL;
        size_t n = 0;
        if (repo_generations(seed_dir, &g, &n) < 0 || n == 0) {
                (void)buf_puts(b, "(none)\n");
                return;
        }
        for (size_t i = n > GENERATIONS_SHOWN ? n - GENERATIONS_SHOWN : 0; i < n; i++)
                (void)buf_printf(b, "- generation %d: %.200s\n", g[i].number, g[i].summary ? g[i].summary : "");
        repo_generations_free(g, n);
}

/* The live database's tables and columns, read as role reader (it can read
 * everything and write nothing). Bounded; "(not available)" on any error. */
static void add_live_schema(struct buf *b, const struct pg *pg) {
        _cleanup_free_ char *ci = NULL, *rows = NULL;
        _cleanup_(db_closep) struct db *db = NULL;
        if (!pg || pg_conninfo(pg, "reader", PG_LIVE_DB, &ci) < 0 || db_connect_err(ci, &db, NULL) < 0 ||
            db_query_json(db,
                          "SELECT c.table_name AS t, string_agg(c.column_name || ' ' || c.data_type, ', ' "
                          "ORDER BY c.ordinal_position) AS cols FROM information_schema.columns c "
                          "WHERE c.table_schema = 'public' GROUP BY c.table_name ORDER BY c.table_name LIMIT 200",
                          0, NULL, &rows) < 0) {
                (void)buf_puts(b, "(not available)\n");
                goto out;
        }
        json_t *arr = json_loads(rows, 0, NULL);
        size_t i;
        json_t *row;
        json_array_foreach(arr, i, row)
                (void)buf_printf(b, "- %.100s(%.2000s)\n", json_string_value(json_object_get(row, "t")),
                                 json_string_value(json_object_get(row, "cols")));
        if (json_array_size(arr) == 0)
                (void)buf_puts(b, "(no tables yet)\n");
        json_decref(arr); /* plain: the goto out above jumps past arr (a cleanup would free an uninitialised pointer) */
out:
        if (ci)
                secure_zero(ci, strlen(ci));
}

char *orch_system_prompt(const char *seed_dir, int seed_root, char *const *evolvable, const struct pg *pg) {
        struct buf b = BUF_INIT(256 * 1024);
        (void)buf_puts(&b,
                       "You are the evolution agent of a Seed: a self-evolving application. The owner states an "
                       "intent; you plan a change, make it in a git worktree of the Seed, and the kernel verifies it "
                       "(build, migrate, test, launch, GET the health path and /) before it becomes a new "
                       "generation.\n\n"
                       "Rules:\n"
                       "- Phases: plan (read-only tools; ask_owner at most 3 times; end with submit_plan), mutate "
                       "(change files, run commands in the sandbox, end with finish), reflect (update knowledge/ "
                       "and skills/ only; end with submit_reflection).\n"
                       "- Only these directories evolve freely:");
        for (size_t i = 0; evolvable && evolvable[i]; i++)
                (void)buf_printf(&b, " %s", evolvable[i]);
        (void)buf_puts(&b, ". Everything else is the kernel: changing it needs the owner's approval, and an "
                           "unapproved change fails the evolution at commit.\n"
                           "- Make small, complete changes; keep the app's tests passing.\n"
                           "- Network: sandboxes reach the internet only through the kernel's egress proxy "
                           "(HTTPS_PROXY, HTTPS only). Your commands reach the package registries and hosts "
                           "granted for evolutions; the live app only hosts granted for it. outbound_status shows "
                           "what is granted and what was refused; if the change needs another host (or a secret "
                           "for the app, e.g. an API key), ask with request_outbound_access for exactly that, and "
                           "why. Never hard-code a secret: the app reads it from its environment.\n\n"
                           "## Who this Seed is (knowledge/self.yaml)\n");
        add_self(&b, seed_root);
        (void)buf_puts(&b, "\n## Skills\n");
        add_skills(&b, seed_root);
        (void)buf_puts(&b, "\n## Recent generations\n");
        add_generations(&b, seed_dir);
        (void)buf_puts(&b, "\n## Live database schema (read-only view; change it with migrations)\n");
        add_live_schema(&b, pg);
        return buf_steal(&b);
}
