/* `seed new <name>`: plant a Seed — a copy of the kernel's own source tree
 * plus the starter organism, knowledge and skills, as a git repository whose
 * first commit "Initial seed" is tagged seed/gen-1 — then start it. */
#include "base/fileio.h"
#include "base/log.h"
#include "base/priv.h"
#include "cli/cli.h"
#include "config/config.h"
#include "repo/repo.h"
#include "secrets/secrets.h"

#include <getopt.h>
#include <regex.h>
#include <sys/stat.h>
#include <sys/wait.h>

static bool valid_name(const char *name) {
        regex_t re;
        if (regcomp(&re, "^[a-z][a-z0-9-]{0,40}$", REG_EXTENDED | REG_NOSUB) != 0)
                return false;
        bool ok = regexec(&re, name, 0, NULL, 0) == 0;
        regfree(&re);
        return ok;
}

/* Rewrites the top-level `key: value` line of a planted YAML file. */
static int set_yaml_line(const char *path, const char *prefix, const char *line) {
        _cleanup_free_ char *data = NULL;
        int r = read_file(path, 1 << 20, &data, NULL);
        if (r < 0)
                return r;
        size_t plen = strlen(prefix);
        char *at = NULL;
        for (char *p = data; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, prefix, plen) == 0) {
                        at = p;
                        break;
                }
        if (!at)
                return -ENOENT;
        char *eol = strchr(at, '\n');
        _cleanup_free_ char *out = NULL;
        if (xasprintf(&out, "%.*s%s%s", (int)(at - data), data, line, eol ? eol : "\n") < 0)
                return -ENOMEM;
        return write_file_atomic(path, out, strlen(out), 0644);
}

static int plant(const char *dir, const char *name, const char *addr) {
        const char *src = cli_source_dir();
        int r = cli_copy_source_tree(src, dir);
        if (r < 0)
                return r;
        _cleanup_free_ char *cfg = path_join(dir, "seed.yaml");
        _cleanup_free_ char *self = path_join(dir, "knowledge/self.yaml");
        _cleanup_free_ char *name_line = NULL, *slug_line = NULL;
        if (!cfg || !self || xasprintf(&name_line, "name: %s", name) < 0 || xasprintf(&slug_line, "slug: %s", name) < 0)
                return -ENOMEM;
        if ((r = set_yaml_line(cfg, "name:", name_line)) < 0)
                return log_error_errno(r, "cannot set the name in %s: %m", cfg);
        if (addr) {
                _cleanup_free_ char *addr_line = NULL;
                if (xasprintf(&addr_line, "  addr: %s", addr) < 0)
                        return -ENOMEM;
                if ((r = set_yaml_line(cfg, "  addr:", addr_line)) < 0)
                        return log_error_errno(r, "cannot set server.addr in %s: %m", cfg);
        }
        /* The identity starts with the name the owner gave (the header shows
         * it) until the Seed names itself. */
        if (path_exists(self) && (r = set_yaml_line(self, "slug:", slug_line)) < 0 && r != -ENOENT)
                return log_error_errno(r, "cannot set the slug in %s: %m", self);
        if (path_exists(self) && (r = set_yaml_line(self, "name:", name_line)) < 0 && r != -ENOENT)
                return log_error_errno(r, "cannot set the name in %s: %m", self);
        /* The planted seed.yaml must be valid before anything is committed. */
        _cleanup_(cfg_freep) struct cfg *c = NULL;
        _cleanup_free_ char *err = NULL;
        if ((r = cfg_load(cfg, &c, &err)) < 0) {
                log_error("%s", err ? err : "invalid seed.yaml");
                return r;
        }
        if ((r = repo_init_commit(dir, "Initial seed", "seed/gen-1", &err)) < 0) {
                log_error("%s", err ? err : "git failed");
                return r;
        }
        return 0;
}

static void new_usage(FILE *f) {
        fputs("Usage: seed new <name> [-e NAME[=VALUE]]... [--env-file FILE] [--no-run]\n"
              "                [--addr HOST:PORT] [--open] [--native]\n"
              "\n"
              "Plants a new Seed in ./<name>: a git repository holding the kernel's own source,\n"
              "a starter organism (\"I don't have a purpose yet\"), knowledge and skills, with\n"
              "one commit \"Initial seed\" tagged seed/gen-1. Then starts it in the background\n"
              "and prints a one-time sign-in link. Without the model key of seed.yaml's\n"
              "provider it says so in one line: pass it with -e, or lend one in the control\n"
              "plane (Settings), where the model can be chosen too.\n"
              "It starts like 'seed run': in a container of its own where podman or docker\n"
              "works (SEED_CONTAINER_ENGINE, SEED_MEMORY, SEED_CPUS, SEED_PIDS_LIMIT: see\n"
              "'seed run --help'), else on the host, saying why.\n"
              "\n"
              "  <name>             lowercase letters, digits and '-', starting with a letter\n"
              "  -e NAME[=VALUE]    pass a secret (e.g. OPENROUTER_API_KEY); kept only in memory\n"
              "  --env-file FILE    pass the secrets listed in FILE\n"
              "  --no-run           plant it, do not start it\n"
              "  --addr HOST:PORT   the address it listens on (written to seed.yaml)\n"
              "  --open             open the sign-in link in a browser\n"
              "  --native           run on the host, not in a container\n"
              "  -h, --help         show this help\n",
              f);
}

int cli_cmd_new(int argc, char **argv) {
        static const struct option longopts[] = {
                {"env", required_argument, NULL, 'e'}, {"env-file", required_argument, NULL, 'f'},
                {"no-run", no_argument, NULL, 'n'},    {"addr", required_argument, NULL, 'a'},
                {"open", no_argument, NULL, 'o'},      {"help", no_argument, NULL, 'h'},
                {"native", no_argument, NULL, 'N'},    {0},
        };
        _cleanup_(secrets_freep) struct secrets *secrets = NULL;
        _cleanup_strv_free_ char **hide = NULL;
        bool no_run = false, open_link = false, native = false;
        const char *addr = NULL;
        if (secrets_new(&secrets) < 0)
                return CLI_EXIT_FAILURE;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "he:", longopts, NULL)) != -1) {
                switch (c) {
                case 'e':
                case 'f':
                        if (cli_parse_secret_opt(c, optarg, secrets, &hide) < 0)
                                return CLI_EXIT_USAGE;
                        break;
                case 'n': no_run = true; break;
                case 'a': addr = optarg; break;
                case 'o': open_link = true; break;
                case 'N': native = true; break;
                case 'h': new_usage(stdout); return CLI_EXIT_OK;
                default: new_usage(stderr); return CLI_EXIT_USAGE;
                }
        }
        if (optind != argc - 1) {
                new_usage(stderr);
                return CLI_EXIT_USAGE;
        }
        const char *name = argv[optind];
        if (!valid_name(name)) {
                fprintf(stderr, "seed: '%s' is not a valid Seed name: use lowercase letters, digits and '-', "
                                "starting with a letter (at most 41 characters)\n", name);
                return CLI_EXIT_USAGE;
        }
        if (addr) {
                _cleanup_free_ char *host = NULL;
                int port;
                if (cfg_split_addr(addr, &host, &port) < 0) {
                        fprintf(stderr, "seed: --addr '%s' is not HOST:PORT\n", addr);
                        return CLI_EXIT_USAGE;
                }
        }
        if (path_exists(name)) {
                fprintf(stderr, "seed: ./%s already exists; choose another name or remove it\n", name);
                return CLI_EXIT_FAILURE;
        }
        /* Only the Seed's account (and root) may enter: .git, seed.yaml and
         * the source are nobody else's to read. */
        if (mkdir(name, 0700) < 0) {
                fprintf(stderr, "seed: cannot create ./%s: %s\n", name, strerror(errno));
                return CLI_EXIT_FAILURE;
        }
        _cleanup_free_ char *dir = NULL;
        if (path_abs(name, &dir) < 0)
                return CLI_EXIT_FAILURE;
        /* Planted as the Seed's account; root stays root for the engine (a
         * rootful container engine), `seed run` drops it otherwise. */
        fflush(NULL);
        pid_t planter = fork();
        if (planter == 0) {
                char *chown_paths[] = {dir, NULL};
                if (priv_drop_if_root(chown_paths) < 0)
                        _exit(CLI_EXIT_FAILURE);
                int r = plant(dir, name, addr);
                if (r < 0)
                        fprintf(stderr, "seed: planting %s failed; nothing was kept\n", dir);
                fflush(NULL);
                _exit(r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK);
        }
        int status = 0;
        while (planter > 0 && waitpid(planter, &status, 0) < 0 && errno == EINTR)
                ;
        if (planter < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != CLI_EXIT_OK) {
                rm_rf(dir);
                return CLI_EXIT_FAILURE;
        }
        printf("Planted Seed '%s' in %s (generation 1).\n", name, dir);
        if (no_run) {
                printf("Start it with: cd %s && seed run\n", name);
                return CLI_EXIT_OK;
        }
        fflush(stdout);
        struct cli_run_options o = {.seed_dir = dir, .detach = true, .open = open_link, .native = native,
                                    .secrets = secrets, .hide_paths = hide};
        return cli_run_seed(&o);
}
