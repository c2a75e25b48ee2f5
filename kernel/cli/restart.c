/* `seed restart`: the running Seed's kernel stopped gracefully and started
 * again by its supervisor, which keeps the port bound throughout, with the
 * secrets given added to the ones it holds (a name given again gets the new
 * value; the others are kept). The secrets travel over the supervisor's
 * control channel (kernel/supervisor/control.c), never in argv or the
 * environment. */
#include "base/priv.h"
#include "cli/cli.h"
#include "httpc/httpc.h"
#include "secrets/secrets.h"
#include "supervisor/supervisor.h"

#include <getopt.h>
#include <signal.h>
#include <time.h>

#define RESTART_TIMEOUT_MS (240 * 1000)

static void restart_usage(FILE *f) {
        fputs("Usage: seed restart [--dir DIR] [-e NAME[=VALUE]]... [--env-file FILE] [--open]\n"
              "\n"
              "Restarts the running Seed's kernel: it stops gracefully (forced after 30 s) and\n"
              "starts again at once with the secrets it had plus the ones given here (a name\n"
              "given again gets the new value). The port stays bound throughout. Then prints\n"
              "what 'seed run' prints, with a fresh sign-in link. Exit code 3 when the Seed\n"
              "is not running (start it with 'seed run').\n"
              "\n"
              "  --dir DIR          the Seed's folder (default: the one you are in)\n"
              "  -e NAME[=VALUE]    add or replace a secret (e.g. a model API key); without\n"
              "                     =VALUE it is taken from your environment\n"
              "  --env-file FILE    add or replace the secrets listed in FILE\n"
              "  --open             open the sign-in link in a browser\n"
              "  -h, --help         show this help\n",
              f);
}

/* Waits until a kernel other than old_pid answers /_seed/healthz. */
static int wait_restarted(const char *seed_dir, pid_t old_pid) {
        int64_t deadline = now_ms() + RESTART_TIMEOUT_MS;
        while (now_ms() < deadline) {
                if (!cli_seed_running(seed_dir))
                        return -ECHILD;
                _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
                _cleanup_free_ char *health = NULL;
                if (cli_kernel_endpoint(seed_dir, &e) == 0 && e.pid > 1 && e.pid != old_pid &&
                    xasprintf(&health, "%s/_seed/healthz", e.url) == 0) {
                        struct httpc_response res = {0};
                        if (httpc_do(&(struct httpc_request){.method = "GET", .url = health, .timeout_ms = 2000},
                                     &res, NULL) == 0) {
                                long st = res.status;
                                httpc_response_done(&res);
                                if (st == 200)
                                        return 0;
                        }
                }
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

static void print_what_changes(const struct secrets *s, pid_t old_pid) {
        size_t n = secrets_count(s);
        printf("Restarting the Seed (kernel pid %d) ", (int)old_pid);
        if (n == 0) {
                printf("with the secrets it has.\n");
        } else {
                printf("with %s", n == 1 ? "the secret " : "the secrets ");
                for (size_t i = 0; i < n; i++)
                        printf("%s%s", i ? ", " : "", secrets_name(s, i));
                printf(" given now; the others it has are kept.\n");
        }
        fflush(stdout);
}

static int restart(const struct cli_run_options *o) {
        pid_t old_pid = 0;
        _cleanup_free_ char *why = NULL;
        signal(SIGPIPE, SIG_IGN); /* a supervisor that hangs up is an error, not a kill */
        int r = supervisor_request_restart(o->seed_dir, o->secrets, o->hide_paths, &old_pid, &why);
        if (r == -ENOENT) {
                _cleanup_(cli_endpoint_done) struct cli_endpoint e = {0};
                if (cli_kernel_endpoint(o->seed_dir, &e) < 0)
                        fprintf(stderr, "seed: this Seed is still starting; try again once 'seed status' says it "
                                        "runs\n");
                else
                        fprintf(stderr, "seed: this Seed's supervisor takes no restart requests (it was started by "
                                        "an older seed); run 'seed stop', then 'seed run' with the secrets\n");
                return CLI_EXIT_FAILURE;
        }
        if (r == -EIO) {
                fprintf(stderr, "seed: the Seed refused the restart: %s\n", why ? why : "no reason given");
                return CLI_EXIT_FAILURE;
        }
        if (r < 0) {
                fprintf(stderr, "seed: cannot ask the Seed to restart: %s\n", strerror(-r));
                return CLI_EXIT_FAILURE;
        }
        print_what_changes(o->secrets, old_pid);
        r = wait_restarted(o->seed_dir, old_pid);
        if (r < 0) {
                fprintf(stderr, "seed: the Seed %s; see %s/.seed/logs/kernel.log and supervisor.log\n",
                        r == -ECHILD ? "stopped while restarting" : "did not come back in time", o->seed_dir);
                return CLI_EXIT_FAILURE;
        }
        cli_announce(o);
        return CLI_EXIT_OK;
}

int cli_cmd_restart(int argc, char **argv) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},  {"env", required_argument, NULL, 'e'},
                {"env-file", required_argument, NULL, 'f'}, {"open", no_argument, NULL, 'o'},
                {"help", no_argument, NULL, 'h'},       {0},
        };
        _cleanup_(secrets_freep) struct secrets *secrets = NULL;
        _cleanup_strv_free_ char **env_files = NULL, **hide = NULL;
        const char *dir = NULL;
        struct cli_run_options o = {0};
        if (secrets_new(&secrets) < 0)
                return CLI_EXIT_FAILURE;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "he:", longopts, NULL)) != -1) {
                switch (c) {
                case 'd': dir = optarg; break;
                case 'e':
                case 'f':
                        /* Read before dropping root: an env file may be root's alone. */
                        if (cli_parse_secret_opt(c, optarg, secrets, &hide) < 0)
                                return CLI_EXIT_USAGE;
                        if (c == 'f' && strv_push(&env_files, optarg) < 0)
                                return CLI_EXIT_FAILURE;
                        break;
                case 'o': o.open = true; break;
                case 'h': restart_usage(stdout); return CLI_EXIT_OK;
                default: restart_usage(stderr); return CLI_EXIT_USAGE;
                }
        }
        if (optind != argc) {
                restart_usage(stderr);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *seed_dir = NULL;
        if (cli_find_seed(dir, &seed_dir) < 0 || cli_check_env_files(env_files, seed_dir) < 0)
                return CLI_EXIT_USAGE;
        if (strv_length(hide) > SUPERVISOR_CONTROL_HIDE_MAX) {
                fprintf(stderr, "seed: at most %d env files\n", SUPERVISOR_CONTROL_HIDE_MAX);
                return CLI_EXIT_USAGE;
        }
        /* As root, act as the Seed's account, as `seed run` does. */
        if (priv_drop_if_root(NULL) < 0) {
                fprintf(stderr, "seed: cannot switch to the account '%s'\n", PRIV_ACCOUNT);
                return CLI_EXIT_FAILURE;
        }
        if (!cli_seed_running(seed_dir)) {
                fprintf(stderr, "seed: this Seed is not running; start it with 'seed run' (it takes -e and "
                                "--env-file too)\n");
                return CLI_EXIT_NOT_RUNNING;
        }
        o.seed_dir = seed_dir;
        o.secrets = secrets;
        o.hide_paths = hide;
        return restart(&o);
}
