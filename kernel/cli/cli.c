#include "cli/cli.h"
#include "base/log.h"

struct cli_command {
        const char *name;
        const char *summary;
        int (*run)(int argc, char **argv);
};

static const struct cli_command commands[] = {
        {"new", "plant a new Seed in ./<name> and start it", cli_cmd_new},
        {"run", "build the Seed's kernel from its own source and start it", cli_cmd_run},
        {"stop", "stop a running Seed (gracefully; forced after 30 s)", cli_cmd_stop},
        {"restart", "restart a running Seed's kernel, adding or replacing secrets (-e)", cli_cmd_restart},
        {"status", "say whether the Seed runs, its generation, URL and organism", cli_cmd_status},
        {"login", "print a fresh one-time sign-in link (15 minutes, one use)", cli_cmd_login},
        {"evolve", "ask the running Seed to change itself, and follow the evolution", cli_cmd_evolve},
        {"generations", "list the Seed's generations, the live one marked", cli_cmd_generations},
        {"rollback", "make a new generation with generation N's files, and follow it", cli_cmd_rollback},
        {"backup", "back up the live data now (kept: the newest 10 taken by hand)", cli_cmd_backup},
        {"backups", "list the live data's backups with their kind, size, generation and time", cli_cmd_backups},
        {"restore", "replace the live data with a backup (today's is saved first)", cli_cmd_restore},
        {"doctor", "check this machine (and a Seed) for what a Seed needs, with fixes", cli_cmd_doctor},
};

static void cli_usage(FILE *f) {
        fputs("Usage: seed <command> [options]\n"
              "\n"
              "A Seed is a folder (a git repository) holding a kernel, an app it grows (the\n"
              "organism), and what it knows about itself. You talk to it in a browser.\n"
              "\n"
              "Commands:\n",
              f);
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
        fputs("\n"
              "Run 'seed <command> --help' for a command's options.\n"
              "\n"
              "Example:\n"
              "  seed new tasks -e OPENROUTER_API_KEY    # plant ./tasks, start it, print a sign-in link\n"
              "  cd tasks && seed status\n"
              "  seed evolve \"Become a todo app\"        # evolve from the terminal, following progress\n",
              f);
}

int cli_main(int argc, char **argv) {
        log_set_ident("seed");
        if (argc < 2) {
                cli_usage(stderr);
                return CLI_EXIT_USAGE;
        }
        if (streq(argv[1], "-h") || streq(argv[1], "--help") || streq(argv[1], "help")) {
                cli_usage(stdout);
                return CLI_EXIT_OK;
        }
        if (streq(argv[1], "--version")) {
                puts("seed 0.1.0");
                return CLI_EXIT_OK;
        }
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                if (streq(argv[1], commands[i].name))
                        return commands[i].run(argc - 1, argv + 1);
        fprintf(stderr, "seed: unknown command '%s'\n\n", argv[1]);
        cli_usage(stderr);
        return CLI_EXIT_USAGE;
}
