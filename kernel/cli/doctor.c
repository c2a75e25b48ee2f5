/* `seed doctor`: runs the start-up checks (kernel/doctor's table) and
 * prints one line per check, "ok|FAIL|warn|info <name>: <detail>", with its
 * fix under any that does not pass. Exit 0 when every needed check passes,
 * 1 otherwise. As root it runs them as the Seed's account, as a Seed's
 * processes run (sandboxes never run as root). */
#include "base/fileio.h"
#include "base/priv.h"
#include "cli/cli.h"
#include "config/config.h"
#include "doctor/doctor.h"


static const char usage[] =
        "Usage: seed doctor [--dir DIR]\n"
        "\n"
        "Checks what a Seed needs on this machine: bubblewrap, user namespaces, the\n"
        "seccomp filter, PostgreSQL, the sandboxes' network and a container engine;\n"
        "and, given a Seed (--dir, or the folder you are in), its folder and\n"
        "seed.yaml. Prints one line per check with the fix for any that fails. Run\n"
        "as root, the checks run as the account 'seed', as a Seed does.\n"
        "Exit code 0 when every needed check passes, 1 otherwise.\n"
        "\n"
        "  --dir DIR    also check the Seed in DIR\n"
        "  -h, --help   show this help\n";

/* --dir, else the current folder when it is a Seed (quietly: none is fine). */
static int seed_dir_of(const char *dir, char **ret) {
        if (dir)
                return cli_find_seed(dir, ret);
        if (!path_exists("seed.yaml") || !path_exists("kernel"))
                return 0;
        return path_abs(".", ret);
}

int cli_cmd_doctor(int argc, char **argv) {
        const char *dir = NULL;
        int code = cli_args_dir_only(argc, argv, usage, &dir);
        if (code >= 0)
                return code;
        _cleanup_free_ char *seed_dir = NULL;
        if (seed_dir_of(dir, &seed_dir) < 0)
                return CLI_EXIT_USAGE;
        int dropped = priv_drop_if_root(NULL);
        if (dropped < 0) {
                fprintf(stderr, "seed: cannot switch to the account '%s'\n", PRIV_ACCOUNT);
                return CLI_EXIT_FAILURE;
        }
        if (dropped)
                printf("Checking as the account '%s' (a Seed's processes run as it):\n", PRIV_ACCOUNT);
        _cleanup_(cfg_freep) struct cfg *cfg = NULL;
        _cleanup_free_ char *cfg_path = seed_dir ? path_join(seed_dir, "seed.yaml") : NULL, *err = NULL;
        if (cfg_path)
                (void)cfg_load(cfg_path, &cfg, &err); /* the seed.yaml row says what is wrong */
        struct doctor_context x = {.seed_dir = seed_dir, .cfg = cfg};
        int failed = 0;
        for (size_t i = 0; i < doctor_n_checks; i++) {
                const struct doctor_check *k = &doctor_checks[i];
                if (k->per_seed && !seed_dir)
                        continue;
                struct doctor_result res = {0};
                if (doctor_run(k, &x, &res) < 0) {
                        printf("FAIL %s: the check itself failed (out of memory)\n", k->name);
                        failed++;
                        continue;
                }
                printf("%-4s %s: %s\n", doctor_status_name(res.status), k->name, res.detail);
                if (res.status == DOCTOR_FAIL || res.status == DOCTOR_WARN)
                        printf("     fix: %s\n", res.fix ? res.fix : k->fix);
                failed += res.status == DOCTOR_FAIL;
                doctor_result_done(&res);
        }
        if (!seed_dir)
                printf("(no Seed here: 'seed doctor --dir DIR' also checks a Seed's folder and seed.yaml)\n");
        printf("%s\n", failed ? "Some needed checks failed: a Seed cannot run its sandboxes or database here until "
                                "they are fixed."
                              : "Everything a Seed needs is here.");
        return failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
