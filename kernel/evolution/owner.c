/* owner.c — the owner's commits on main: the words that explain them and the
 * folder the live organism runs from meanwhile. See owner.h. */
#include "evolution/owner.h"
#include "base/buf.h"
#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "base/text.h"
#include "config/config.h"
#include "repo/repo.h"

#include <pwd.h>

#define LIVE_EXPORT ".seed/live"
#define ERROR_MAX 3072
#define ERROR_HEAD_LINES 8
#define ERROR_TAIL_LINES 6
#define ERROR_LINE_MAX 200

const char *evo_owner_state_name(enum evo_owner_state s) {
        static const char *const names[] = {
                [EVO_OWNER_PENDING] = "pending", [EVO_OWNER_VERIFYING] = "verifying",
                [EVO_OWNER_FAILED] = "failed",   [EVO_OWNER_DIVERGED] = "diverged",
        };
        return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "unknown";
}

/* What each step of verify.c means when it fails. */
static const struct {
        const char *check, *failed;
} check_words[] = {
        {"build", "the build failed"},
        {"migrate", "the migrations failed on a fresh database"},
        {"test", "the tests failed"},
        {"launch", "the app did not start healthy"},
        {"healthz", "the app's health check did not answer"},
        {"root", "the app's page / did not answer"},
};

/* `git -C <dir>` as the owner runs it: as the Seed's account when the kernel
 * runs as it (a Seed started by root), the folder quoted for a shell. */
static int git_command(const char *seed_dir, char **ret) {
        struct passwd pw, *res = NULL;
        char pwbuf[4096];
        bool as_seed = getpwuid_r(geteuid(), &pw, pwbuf, sizeof pwbuf, &res) == 0 && res &&
                       streq(res->pw_name, PRIV_ACCOUNT);
        struct buf b = BUF_INIT(8192);
        int r = buf_printf(&b, "%sgit -C ", as_seed ? "sudo -u " PRIV_ACCOUNT " " : "");
        const char *d = seed_dir ? seed_dir : ".";
        bool plain = strspn(d, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-") == strlen(d);
        if (r >= 0 && plain)
                r = buf_puts(&b, d);
        else if (r >= 0) {
                r = buf_puts(&b, "'");
                for (const char *p = d; r >= 0 && *p; p++)
                        r = *p == '\'' ? buf_puts(&b, "'\\''") : buf_append(&b, p, 1);
                if (r >= 0)
                        r = buf_puts(&b, "'");
        }
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = buf_steal(&b);
        return *ret ? 0 : -ENOMEM;
}

/* "Your commit abc1234 'subject' (with 2 earlier commits)". */
static int who(const struct evo_owner_view *v, char **ret) {
        char more[64] = "";
        if (v->n_commits > 1)
                snprintf(more, sizeof more, " (with %zu earlier commit%s)", v->n_commits - 1,
                         v->n_commits == 2 ? "" : "s");
        return xasprintf(ret, "Your commit %.7s%s%s%s%s", v->commit ? v->commit : "?",
                         strempty(v->subject) ? "" : " '", strempty(v->subject) ? "" : v->subject,
                         strempty(v->subject) ? "" : "'", more);
}

int evo_owner_text(const struct evo_owner_view *v, char **ret_text, char **ret_fix) {
        _cleanup_free_ char *git = NULL, *w = NULL, *fix = NULL, *text = NULL;
        const char *c = v->commit ? v->commit : "?";
        int n = v->generation, r;

        if ((r = git_command(v->seed_dir, &git)) < 0 || (r = who(v, &w)) < 0)
                return r;
        switch (v->state) {
        case EVO_OWNER_PENDING:
                r = xasprintf(&fix, "Ask for an evolution, or restart the Seed, to verify it now.");
                if (r >= 0)
                        r = xasprintf(&text, "%s is not a generation yet: the Seed verifies it before the next "
                                             "evolution or when it starts again. Generation %d keeps serving until "
                                             "then. %s",
                                      w, n, fix);
                break;
        case EVO_OWNER_VERIFYING:
                r = xasprintf(&fix, "Nothing to do: follow it in the evolutions%s%s.", v->evolution ? ", " : "",
                              v->evolution ? v->evolution : "");
                if (r >= 0)
                        r = xasprintf(&text, "%s is being verified like an evolution (seed.yaml, build, migrate, "
                                             "test, launch, health). Generation %d keeps serving until it becomes "
                                             "generation %d.",
                                      w, n, n + 1);
                break;
        case EVO_OWNER_FAILED:
                if (v->restored > 0) {
                        r = xasprintf(&fix, "Fix it and commit again on top of generation %d (your commit stays in "
                                            "the history: %s show %.7s).",
                                      v->restored, git, c);
                        if (r >= 0)
                                r = xasprintf(&text, "%s was not kept: it was unhealthy once live: %s\nGeneration "
                                                     "%d (the files of generation %d) serves instead. %s",
                                              w, v->error ? v->error : "?", v->restored, n, fix);
                        break;
                }
                r = xasprintf(&fix, "Fix it and commit again, or revert: %s reset --hard seed/gen-%d", git, n);
                if (r >= 0)
                        r = xasprintf(&text, "%s was not applied: %s\nGeneration %d keeps serving. %s", w,
                                      v->error ? v->error : "?", n, fix);
                break;
        case EVO_OWNER_DIVERGED:
                if (!v->on_main) {
                        r = xasprintf(&fix, "%s checkout main", git);
                        if (r >= 0)
                                r = xasprintf(&text, "The Seed folder is not on branch main (HEAD is %.7s). "
                                                     "Generation %d keeps serving, and evolutions wait until it "
                                                     "is: %s",
                                              c, n, fix);
                        break;
                }
                r = xasprintf(&fix, "%s branch saved-%.7s %.7s; %s reset --hard seed/gen-%d", git, c, c, git, n);
                if (r >= 0)
                        r = xasprintf(&text, "main (%.7s) does not contain the live generation %d: its history was "
                                             "rewritten or reset. Generation %d keeps serving, and evolutions wait "
                                             "until main contains it again. Keep your commits on a branch and put "
                                             "main back on generation %d: %s",
                                      c, n, n, n, fix);
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return -ENOMEM;
        *ret_text = TAKE_PTR(text);
        *ret_fix = TAKE_PTR(fix);
        return 0;
}

int evo_owner_json(const struct evo_owner_view *v, json_t **ret) {
        _cleanup_free_ char *text = NULL, *fix = NULL;
        int r = evo_owner_text(v, &text, &fix);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:s, s:s, s:s}", "commit", v->commit ? v->commit : "",
                                             "subject", v->subject ? v->subject : "", "commits",
                                             (json_int_t)v->n_commits, "generation", v->generation, "state",
                                             evo_owner_state_name(v->state), "fix", fix, "text", text);
        if (!o)
                return -ENOMEM;
        if (v->state == EVO_OWNER_FAILED && json_object_set_new(o, "error", json_string(v->error ? v->error : "")) < 0)
                return -ENOMEM;
        if (v->evolution && json_object_set_new(o, "evolution", json_string(v->evolution)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(o);
        return 0;
}

/* Appends one line of output: valid UTF-8, control characters (but tabs) as
 * spaces, at most ERROR_LINE_MAX bytes. */
static int put_line(struct buf *b, const char *s, size_t len) {
        int r = 0;
        size_t done = 0;
        for (size_t i = 0; r >= 0 && i < len && done < ERROR_LINE_MAX;) {
                const unsigned char *p = (const unsigned char *)s + i;
                size_t k = utf8_seq(p, len - i);
                if (k == 0 || *p == 0) {
                        r = buf_puts(b, "?");
                        k = 1;
                } else if (k == 1 && (*p < 0x20 || *p == 0x7f))
                        r = buf_puts(b, *p == '\t' ? "\t" : " ");
                else
                        r = buf_append(b, p, k);
                i += k;
                done += k;
        }
        if (r >= 0 && len > ERROR_LINE_MAX)
                r = buf_puts(b, "…");
        return r < 0 ? r : buf_puts(b, "\n");
}

int evo_owner_check_error(const char *check, const char *output, char **ret) {
        const char *failed = NULL;
        for (size_t i = 0; check && i < ARRAY_SIZE(check_words); i++)
                if (streq(check, check_words[i].check))
                        failed = check_words[i].failed;
        struct buf b = BUF_INIT(16 * 1024);
        int r = failed ? buf_printf(&b, "%s:\n", failed) : buf_printf(&b, "the check '%.40s' failed:\n", check ? check : "?");
        /* The lines of the output, the last one without its newline. */
        const char *out = output ? output : "";
        size_t n_lines = 0;
        for (const char *p = out; *p; n_lines++) {
                const char *nl = strchr(p, '\n');
                p = nl ? nl + 1 : p + strlen(p);
        }
        size_t i = 0;
        for (const char *p = out; r >= 0 && *p; i++) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t)(nl - p) : strlen(p);
                bool head = i < ERROR_HEAD_LINES, tail = n_lines > ERROR_HEAD_LINES + ERROR_TAIL_LINES
                                                             ? i >= n_lines - ERROR_TAIL_LINES
                                                             : true;
                if (head || tail)
                        r = put_line(&b, p, len);
                else if (i == ERROR_HEAD_LINES)
                        r = buf_puts(&b, "…\n");
                p = nl ? nl + 1 : p + len;
        }
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        /* Trailing newlines go; the whole is bounded. */
        while (b.len > 0 && b.data[b.len - 1] == '\n')
                b.data[--b.len] = 0;
        if (b.len > ERROR_MAX) {
                size_t cut = ERROR_MAX;
                while (cut > 0 && ((unsigned char)b.data[cut] & 0xc0) == 0x80)
                        cut--;
                b.data[cut] = 0;
                b.len = cut;
        }
        char *s = buf_steal(&b);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int evo_owner_live_workspace(const char *seed_dir, char **ret_path) {
        struct repo_owner_change oc;
        _cleanup_free_ char *live = path_join(seed_dir, LIVE_EXPORT);
        char *path = NULL;
        if (!live)
                return -ENOMEM;
        if (repo_owner_change(seed_dir, &oc) < 0) {
                log_warn("cannot tell whether main is the live generation (%s): the organism runs from the Seed "
                         "folder",
                         repo_last_error());
                path = strdup(seed_dir);
        } else {
                if (oc.state == REPO_OWNER_NONE)
                        path = strdup(seed_dir);
                else if (repo_export_generation(seed_dir, oc.generation, live) < 0) {
                        log_error("main is not generation %d, but it cannot be exported to %s (%s): the organism "
                                  "runs from the Seed folder",
                                  oc.generation, LIVE_EXPORT, repo_last_error());
                        path = strdup(seed_dir);
                } else {
                        log_info("main (%.7s) is not a generation: the organism runs generation %d from %s", oc.head,
                                 oc.generation, LIVE_EXPORT);
                        path = TAKE_PTR(live);
                }
                repo_owner_change_done(&oc);
        }
        if (!path)
                return -ENOMEM;
        *ret_path = path;
        return 0;
}

int evo_owner_live_config(const char *seed_dir, struct cfg **ret) {
        struct repo_owner_change oc;
        _cleanup_free_ char *yaml = NULL, *err = NULL;
        size_t len = 0;
        int r = repo_owner_change(seed_dir, &oc);
        if (r < 0)
                return r;
        if (oc.state == REPO_OWNER_NONE)
                r = -ENOENT;
        else if ((r = repo_read_blob_at(seed_dir, oc.generation_commit, "seed.yaml", 1024 * 1024, &yaml, &len)) < 0)
                log_error("cannot read generation %d's seed.yaml: %s", oc.generation, repo_last_error());
        else if ((r = cfg_parse(yaml, len, "seed.yaml", ret, &err)) < 0)
                log_error("generation %d's seed.yaml does not load either: %s", oc.generation, err ? err : "?");
        else
                log_warn("main (%.7s) is not a generation yet and its seed.yaml does not load: the kernel runs with "
                         "generation %d's until it is fixed",
                         oc.head, oc.generation);
        repo_owner_change_done(&oc);
        return r;
}
