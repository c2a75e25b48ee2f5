/* `seed stop`, `seed status`, `seed login`: talking to a running Seed. */
#include "app/app.h"
#include "base/fileio.h"
#include "base/json.h"
#include "base/priv.h"
#include "cli/cli.h"
#include "evolution/owner.h"
#include "repo/repo.h"

#include <getopt.h>
#include <signal.h>
#include <time.h>

#define STOP_GRACE_MS (30 * 1000)

/* Talking to a Seed needs no privilege: as root, act as its account, so the
 * pids and files the Seed can write can never make us signal or read
 * something of root's. */
static int cli_drop_root(void) {
        int r = priv_drop_if_root(NULL);
        if (r < 0)
                fprintf(stderr, "seed: cannot switch to the account '%s'\n", PRIV_ACCOUNT);
        return r;
}

/* Parses the common [--dir D] [-h] options. Returns 1 when help was shown,
 * 0 to go on, negative on a usage error. Extra flags: "print". */
static int parse_common(int argc, char **argv, const char *usage, const char **ret_dir, bool *ret_print) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},
                {"print", no_argument, NULL, 'p'},
                {"help", no_argument, NULL, 'h'},
                {0},
        };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'd': *ret_dir = optarg; break;
                case 'p':
                        if (!ret_print)
                                goto bad;
                        *ret_print = true;
                        break;
                case 'h': fputs(usage, stdout); return 1;
                default: goto bad;
                }
        }
        if (optind == argc)
                return 0;
bad:
        fputs(usage, stderr);
        return -EINVAL;
}

/* Parses [--dir D] [--print] [-h], finds the Seed and drops root. Returns
 * -1 to go on (*ret_seed_dir set; caller frees), else the exit code. */
static int open_seed(int argc, char **argv, const char *usage, bool *ret_print, char **ret_seed_dir) {
        const char *dir = NULL;
        int r = parse_common(argc, argv, usage, &dir, ret_print);
        if (r != 0)
                return r > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        _cleanup_free_ char *seed_dir = NULL;
        if (cli_find_seed(dir, &seed_dir) < 0 || cli_drop_root() < 0)
                return CLI_EXIT_USAGE;
        *ret_seed_dir = TAKE_PTR(seed_dir);
        return -1;
}

static int read_pid(const char *seed_dir, const char *rel, pid_t *ret) {
        _cleanup_free_ char *p = path_join(seed_dir, rel), *data = NULL;
        if (!p)
                return -ENOMEM;
        int r = read_file(p, 64 * 1024, &data, NULL);
        if (r < 0)
                return r;
        long pid = 0;
        if (data[0] == '{') {
                _cleanup_json_ json_t *o = json_loads(data, 0, NULL);
                pid = o ? (long)json_integer_value(json_object_get(o, "pid")) : 0;
        } else {
                pid = strtol(data, NULL, 10);
        }
        if (pid <= 1)
                return -EBADMSG;
        *ret = (pid_t)pid;
        return 0;
}

int cli_cmd_stop(int argc, char **argv) {
        static const char usage[] = "Usage: seed stop [--dir DIR]\n"
                                    "\n"
                                    "Stops the running Seed: the kernel stops the organism and PostgreSQL\n"
                                    "cleanly. If it has not stopped after 30 s it is killed. A Seed in its\n"
                                    "container is stopped through the engine (as root for a rootful one).\n";
        const char *dir = NULL;
        int r = parse_common(argc, argv, usage, &dir, NULL);
        if (r != 0)
                return r > 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        _cleanup_free_ char *seed_dir = NULL;
        if (cli_find_seed(dir, &seed_dir) < 0)
                return CLI_EXIT_USAGE;
        /* A Seed in its container is stopped by the engine (as root for a
         * rootful one): its supervisor's pid means nothing out here. */
        r = cli_container_stop(seed_dir);
        if (r != 0) {
                if (r > 0)
                        printf("Stopped.\n");
                return r > 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
        }
        if (cli_drop_root() < 0)
                return CLI_EXIT_USAGE;
        pid_t sup = 0;
        if (!cli_seed_running(seed_dir) || read_pid(seed_dir, ".seed/supervisor.pid", &sup) < 0) {
                printf("This Seed is not running.\n");
                return CLI_EXIT_OK;
        }
        if (kill(sup, SIGTERM) < 0 && errno != ESRCH) {
                fprintf(stderr, "seed: cannot signal the Seed (pid %d): %s\n", (int)sup, strerror(errno));
                return CLI_EXIT_FAILURE;
        }
        int64_t deadline = now_ms() + STOP_GRACE_MS + 5000;
        while (cli_seed_running(seed_dir) && now_ms() < deadline) {
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        if (!cli_seed_running(seed_dir)) {
                printf("Stopped.\n");
                return CLI_EXIT_OK;
        }
        /* Forced: the supervisor, the kernel, and PostgreSQL if it is still up. */
        pid_t kernel = 0, postmaster = 0;
        (void)read_pid(seed_dir, APP_STATE_FILE, &kernel);
        (void)read_pid(seed_dir, ".seed/postgres/postmaster.pid", &postmaster);
        kill(sup, SIGKILL);
        if (kernel > 1)
                kill(kernel, SIGKILL);
        if (postmaster > 1)
                kill(postmaster, SIGQUIT);
        printf("The Seed did not stop within 30 s; it was killed.\n");
        return CLI_EXIT_OK;
}

/* The owner's commits on main while the Seed is not running: it verifies
 * them when it starts. */
static void print_owner_change_from_git(const char *seed_dir) {
        struct repo_owner_change oc;
        if (repo_owner_change(seed_dir, &oc) < 0)
                return;
        struct evo_owner_view v = {
                .state = oc.state == REPO_OWNER_DIVERGED ? EVO_OWNER_DIVERGED : EVO_OWNER_PENDING,
                .seed_dir = seed_dir, .commit = oc.head, .subject = oc.subject, .n_commits = oc.n_commits,
                .generation = oc.generation, .on_main = oc.on_main,
        };
        _cleanup_free_ char *text = NULL, *fix = NULL;
        if (oc.state != REPO_OWNER_NONE && evo_owner_text(&v, &text, &fix) >= 0)
                printf("\n%s\n", text);
        repo_owner_change_done(&oc);
}

int cli_cmd_status(int argc, char **argv) {
        static const char usage[] = "Usage: seed status [--dir DIR]\n"
                                    "\n"
                                    "Says whether the Seed is running, its generation, URL and the state of\n"
                                    "its organism, the admin screens it declares (and what of\n"
                                    "organism/control/extensions.json was refused), and what became of your\n"
                                    "own commits on main (verified, failed and why, how to fix or revert).\n"
                                    "Exit code 0 when running, 3 when not.\n";
        _cleanup_free_ char *seed_dir = NULL;
        int code = open_seed(argc, argv, usage, NULL, &seed_dir);
        if (code >= 0)
                return code;
        int gen = 0;
        bool has_gen = repo_live_generation(seed_dir, &gen) == 0;
        if (!cli_seed_running(seed_dir)) {
                printf("Seed:        %s\nRunning:     no\n", seed_dir);
                if (has_gen)
                        printf("Generation:  %d\n", gen);
                print_owner_change_from_git(seed_dir);
                return CLI_EXIT_NOT_RUNNING;
        }
        long status = 0;
        _cleanup_free_ char *body = NULL;
        if (cli_api(seed_dir, "GET", "/_seed/api/status", NULL, &status, &body) < 0 || status != 200) {
                printf("Seed:        %s\nRunning:     starting (the kernel does not answer yet)\n", seed_dir);
                return CLI_EXIT_OK;
        }
        _cleanup_json_ json_t *o = json_loads(body, 0, NULL);
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *url = json_string_value(json_object_get(o, "url"));
        const char *control = json_string_value(json_object_get(o, "control_url"));
        const char *org = json_string_value(json_object_get(json_object_get(o, "organism"), "state"));
        json_int_t g = json_integer_value(json_object_get(o, "generation"));
        printf("Seed:        %s (%s)\nRunning:     yes\nGeneration:  %lld\nApp:         %s\nControl:     %s\n"
               "Organism:    %s\n",
               name ? name : "?", seed_dir, (long long)g, url ? url : "?", control ? control : "?",
               org ? org : "?");
        _cleanup_free_ char *driver = NULL;
        printf("Driver:      %s\n", cli_container_describe(seed_dir, &driver) == 0 ? driver : "native (on the host)");
        json_t *mind = json_object_get(o, "mind");
        const char *model = json_string_value(json_object_get(mind, "model"));
        const char *provider = json_string_value(json_object_get(mind, "provider"));
        const char *source = json_string_value(json_object_get(mind, "key_source"));
        if (model && provider && source)
                printf("Model:       %s via %s (key: %s)\n", model, provider,
                       streq(source, "start")  ? "passed at start"
                       : streq(source, "lent") ? "lent in the control plane"
                       : streq(source, "none") ? "none"
                                               : "not needed");
        const char *why = json_string_value(json_object_get(mind, "why_not"));
        if (why)
                printf("Warning:     %s\n", why);
        const char *screens = json_string_value(json_object_get(o, "admin_screens"));
        if (screens)
                printf("Admin:       %s\n", screens);
        const char *doctor = json_string_value(json_object_get(o, "doctor"));
        if (doctor)
                printf("Warning:     %s\n", doctor);
        /* The private PostgreSQL: down now, or the last time it died. */
        json_t *pgw = json_object_get(o, "postgres");
        const char *pg_state = json_string_value(json_object_get(pgw, "state"));
        const char *pg_last = json_string_value(json_object_get(pgw, "last_failure"));
        if (pg_state && streq(pg_state, "down"))
                printf("Database:    down: %s\n", pg_last ? pg_last : "?");
        else if (pg_last)
                printf("Database:    up (%s)\n", pg_last);
        /* The kernel's own words about the owner's commits on main. */
        const char *owner = json_string_value(json_object_get(json_object_get(o, "owner_change"), "text"));
        if (owner)
                printf("\n%s\n", owner);
        return CLI_EXIT_OK;
}

int cli_cmd_login(int argc, char **argv) {
        static const char usage[] = "Usage: seed login [--dir DIR] [--print]\n"
                                    "\n"
                                    "Asks the running Seed for a fresh one-time sign-in link (one use, valid\n"
                                    "15 minutes) and opens it in a browser if one is available.\n"
                                    "\n"
                                    "  --print   only print the link\n";
        bool print = false;
        _cleanup_free_ char *seed_dir = NULL, *link = NULL;
        int code = open_seed(argc, argv, usage, &print, &seed_dir);
        if (code >= 0)
                return code;
        if (!cli_seed_running(seed_dir)) {
                fprintf(stderr, "seed: this Seed is not running; start it with 'seed run'\n");
                return CLI_EXIT_NOT_RUNNING;
        }
        if (cli_login_link(seed_dir, &link) < 0)
                return CLI_EXIT_FAILURE;
        printf("%s\n", link);
        fflush(stdout);
        if (!print)
                cli_open_in_browser(link);
        return CLI_EXIT_OK;
}
