/* `seed generations`: the Seed's generations, newest first, the live one
 * marked. Asks the running kernel; reads git directly when it is not running. */
#include "base/json.h"
#include "base/priv.h"
#include "cli/cli.h"
#include "repo/repo.h"

#include <time.h>

/* An owner's generation (the owner's own commits) says so after its summary. */
static void print_row(bool current, long long number, const char *commit, long long t, const char *summary,
                      const char *owner_commit) {
        char when[32] = "?";
        time_t tt = (time_t)t;
        struct tm tm;
        if (localtime_r(&tt, &tm))
                strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        printf("%s %-4lld %.10s  %s  %s", current ? "*" : " ", number, commit ? commit : "?", when,
               summary ? summary : "");
        if (owner_commit && *owner_commit)
                printf("  [yours: %.10s]", owner_commit);
        printf("\n");
}

/* From the kernel's API. */
static int print_from_api(const char *seed_dir) {
        long status = 0;
        _cleanup_free_ char *body = NULL;
        int r = cli_api(seed_dir, "GET", "/_seed/api/generations", NULL, &status, &body);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *o = json_loads(body, 0, NULL);
        json_t *gens = json_object_get(o, "generations"), *g;
        if (status != 200 || !json_is_array(gens)) {
                const char *e = json_string_value(json_object_get(o, "error"));
                fprintf(stderr, "seed: cannot list generations: %s (HTTP %ld)\n", e ? e : "unexpected answer", status);
                return -EIO;
        }
        size_t i;
        json_array_foreach(gens, i, g)
                print_row(json_is_true(json_object_get(g, "current")),
                          (long long)json_integer_value(json_object_get(g, "number")),
                          json_string_value(json_object_get(g, "commit")),
                          (long long)json_integer_value(json_object_get(g, "time")),
                          json_string_value(json_object_get(g, "summary")),
                          json_string_value(json_object_get(g, "owner_commit")));
        return 0;
}

/* From git, when the kernel is not running. */
static int print_from_git(const char *seed_dir) {
        struct repo_generation *g = NULL;
        size_t n = 0;
        int cur = 0;
        int r = repo_generations(seed_dir, &g, &n);
        if (r < 0) {
                fprintf(stderr, "seed: cannot read the generations: %s\n", repo_last_error());
                return r;
        }
        if (repo_live_generation(seed_dir, &cur) < 0)
                cur = 0;
        for (size_t i = n; i > 0; i--)
                print_row(g[i - 1].number == cur, g[i - 1].number, g[i - 1].commit, g[i - 1].time, g[i - 1].summary,
                          g[i - 1].owner_commit);
        repo_generations_free(g, n);
        return 0;
}

int cli_cmd_generations(int argc, char **argv) {
        static const char usage[] = "Usage: seed generations [--dir DIR]\n"
                                    "\n"
                                    "Lists the Seed's generations (git tags seed/gen-N), newest first; the\n"
                                    "live one is marked with '*'. Your own commits on main, once the Seed\n"
                                    "verified them, are a generation 'owner: <subject>' marked [yours: <commit>].\n"
                                    "Go back to one with 'seed rollback N'.\n"
                                    "\n"
                                    "  --dir DIR   the Seed's folder (default: this folder or the nearest above)\n";
        const char *dir = NULL;
        int code = cli_args_dir_only(argc, argv, usage, &dir);
        if (code >= 0)
                return code;
        _cleanup_free_ char *seed_dir = NULL;
        if (cli_find_seed(dir, &seed_dir) < 0)
                return CLI_EXIT_USAGE;
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "seed: cannot switch to the account '%s'\n", PRIV_ACCOUNT);
                return CLI_EXIT_FAILURE;
        }
        int r = cli_seed_running(seed_dir) ? print_from_api(seed_dir) : print_from_git(seed_dir);
        return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
