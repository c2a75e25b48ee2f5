/* cli.h — the `seed` command line: plants, starts, stops and talks to a Seed.
 * Commands are a table (cli.c); each lives in its own file. */
#pragma once

#include "base/base.h"

#include <sys/types.h>

/* Exit codes. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_NOT_RUNNING 3

int cli_main(int argc, char **argv);

/* The commands (argv[0] is the command name). */
int cli_cmd_new(int argc, char **argv);
int cli_cmd_run(int argc, char **argv);
int cli_cmd_stop(int argc, char **argv);
int cli_cmd_status(int argc, char **argv);
int cli_cmd_login(int argc, char **argv);
int cli_cmd_evolve(int argc, char **argv);
int cli_cmd_rollback(int argc, char **argv);
int cli_cmd_generations(int argc, char **argv);
int cli_cmd_restart(int argc, char **argv);
int cli_cmd_doctor(int argc, char **argv);
int cli_cmd_backup(int argc, char **argv);
int cli_cmd_backups(int argc, char **argv);
int cli_cmd_restore(int argc, char **argv);

/* ---- shared by the commands ---- */
struct secrets;

struct cli_run_options {
        const char *seed_dir;      /* absolute */
        const char *addr;          /* NULL = seed.yaml */
        bool detach, open;
        bool native;               /* --native: on the host, never in a container */
        bool in_container;         /* --in-container: the supervisor inside the Seed's container */
        const char *published_ip;  /* the container's port is published there (the links' hint); NULL natively */
        struct secrets *secrets;   /* borrowed */
        char *const *hide_paths;   /* the env files' real paths: every sandbox hides them */
};
/* Builds the kernel from the Seed's own source and starts it (supervised):
 * in a container when an engine works (cli_run_container) unless o->native,
 * else on the host. */
int cli_run_seed(const struct cli_run_options *o);

/* ---- the container driver's CLI side (container.c) ---- */
/* What `seed run` wrote about the Seed's container (engine, name, image,
 * limits and whether each is in force), and the FIFO the secrets go through
 * to the supervisor inside. Relative to the Seed's folder. */
#define CLI_CONTAINER_STATE ".seed/container/container.json"
#define CLI_CONTAINER_FIFO ".seed/container/secrets.fifo"
/* cli_run_container's answer when no engine can run the Seed's container
 * (it printed why in one line): run natively. */
#define CLI_RUN_NATIVE (-1)
/* Runs the Seed in its container; an exit code, or CLI_RUN_NATIVE. */
int cli_run_container(const struct cli_run_options *o);
/* Stops the Seed's container if one runs (asked of the engine, by the name
 * derived from seed_dir, never from a file the Seed can write): 1 when it
 * stopped one, 0 when none runs, < 0 on error (printed). */
int cli_container_stop(const char *seed_dir);
/* Where the running container's port is published (CLI_CONTAINER_STATE's
 * publish_ip), when the Seed runs in one: -ENOENT otherwise. Caller frees. */
int cli_container_published_ip(const char *seed_dir, char **ret);
/* One line for `seed status` from CLI_CONTAINER_STATE. Caller frees. */
int cli_container_describe(const char *seed_dir, char **ret);
/* `seed run` on a Seed that runs already: says so (and that secrets given
 * were not applied); the exit code. */
int cli_run_already(const struct cli_run_options *o);
/* --addr, or seed.yaml's server.addr (printing why it cannot be read).
 * Caller frees. */
int cli_control_plane_addr(const struct cli_run_options *o, char **ret);
/* What `seed run` prints once the kernel answers (o->seed_dir, o->open):
 * the app's and the control plane's addresses, how to reach them from
 * another machine when the Seed listens beyond loopback, and a fresh
 * sign-in link (opened in a browser with o->open). */
void cli_announce(const struct cli_run_options *o);
/* -EINVAL (printed) when an --env-file lies inside the Seed's folder, where
 * sandboxes and git can read it. */
int cli_check_env_files(char *const *env_files, const char *seed_dir);

/* Arguments of a command that takes only [--dir DIR] and --help: -1 with
 * *ret_dir set (borrowed from argv; NULL when not given) to go on, or the
 * exit code to return (help printed: CLI_EXIT_OK; a bad argument:
 * CLI_EXIT_USAGE, usage printed to stderr). */
int cli_args_dir_only(int argc, char **argv, const char *usage, const char **ret_dir);
/* Finds the Seed folder: dir if given, else the current directory or the
 * nearest ancestor holding seed.yaml. Caller frees. */
int cli_find_seed(const char *dir, char **ret);
/* How the CLI reaches a running kernel (.seed/kernel.json and
 * .seed/control-token). */
struct cli_endpoint {
        char *url;         /* where to connect, e.g. "http://127.0.0.1:8080" */
        char *host;        /* the Host the control plane answers to ("seed.localhost:8080"), or NULL */
        char *control_url; /* what the owner opens, e.g. "http://seed.localhost:8080/_seed/" */
        char *token;       /* the CLI token (secret: wiped by cli_endpoint_done) */
        char *addr;        /* the address listened on ("0.0.0.0:8080"), or NULL (an older kernel) */
        pid_t pid;         /* the kernel's */
};
/* -ENOENT when the kernel is not running. Free with cli_endpoint_done(). */
int cli_kernel_endpoint(const char *seed_dir, struct cli_endpoint *ret);
void cli_endpoint_done(struct cli_endpoint *e);
/* Calls the kernel's API with the CLI token. Caller frees *ret_body. */
int cli_api(const char *seed_dir, const char *method, const char *path, const char *body,
            long *ret_status, char **ret_body);
/* The same, waiting up to timeout_ms (cli_api: 30 s) for the answer. */
int cli_api_timeout(const char *seed_dir, const char *method, const char *path, const char *body, int timeout_ms,
                    long *ret_status, char **ret_body);
/* Whether the Seed's supervisor holds its run lock. */
bool cli_seed_running(const char *seed_dir);
/* Finds the Seed at or above dir, drops root and checks that it runs
 * (printing why not): -1 to go on with *ret_seed_dir (caller frees), else
 * the exit code. */
int cli_open_running_seed(const char *dir, char **ret_seed_dir);
/* Prints the API's error for a refused call: "seed: <what>: <error> (HTTP n)". */
void cli_print_refusal(const char *what, long status, const char *body);
/* Asks the kernel for a fresh one-time sign-in link. Caller frees. */
int cli_login_link(const char *seed_dir, char **ret_url);
/* Overwrites "=VALUE" of "-e NAME=VALUE" arguments in place, so a secret does
 * not stay visible in /proc/<pid>/cmdline. */
void cli_scrub_arg(char *arg);
/* Handles -e (c == 'e') or --env-file: adds to s and scrubs the value from
 * argv/environ memory. Prints the error. */
/* -e / --env-file (c 'e' or 'f'); an env file's real path is added to *hide. */
int cli_parse_secret_opt(int c, const char *arg, struct secrets *s, char ***hide);
/* Opens url with xdg-open when a desktop session is there; else nothing. */
void cli_open_in_browser(const char *url);
/* Whether path (resolved) lies inside dir (absolute, resolved). */
bool cli_path_inside(const char *path, const char *dir);
/* Where `seed new` copies the kernel's source tree from. Borrowed. */
const char *cli_source_dir(void);
/* Copies the Seed source tree (top-level allowlist) from src into dst. */
int cli_copy_source_tree(const char *src, const char *dst);
