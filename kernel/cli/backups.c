/* `seed backup`, `seed backups`, `seed restore ID`: the live data's
 * backups, through the running kernel's API (api/backups.h). */
#include "base/json.h"
#include "base/priv.h"
#include "cli/cli.h"

#include <getopt.h>
#include <time.h>
#include <unistd.h>

#define RESTORE_TIMEOUT_MS (5 * 60 * 1000) /* a dump, a restore, migrations and a health wait */
#define BACKUP_TIMEOUT_MS (5 * 60 * 1000)

static void human_size(int64_t n, char *out, size_t size) {
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = (double)n;
        size_t u = 0;
        while (v >= 1024 && u + 1 < ARRAY_SIZE(units)) {
                v /= 1024;
                u++;
        }
        snprintf(out, size, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

static void format_time(int64_t ms, char *out, size_t size) {
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        if (!localtime_r(&t, &tm) || !strftime(out, size, "%Y-%m-%d %H:%M", &tm))
                snprintf(out, size, "?");
}

/* GET backups as JSON; prints why it failed. */
static int fetch_list(const char *seed_dir, json_t **ret) {
        long status = 0;
        _cleanup_free_ char *body = NULL;
        int r = cli_api(seed_dir, "GET", "/_seed/api/backups", NULL, &status, &body);
        if (r < 0)
                return r;
        json_t *o = json_loads(body, 0, NULL);
        if (status != 200 || !json_is_array(json_object_get(o, "backups"))) {
                cli_print_refusal("cannot list the backups", status, body);
                json_decref(o);
                return -EIO;
        }
        *ret = o;
        return 0;
}

static void print_backup(json_t *b) {
        char size[32], when[32];
        human_size(json_integer_value(json_object_get(b, "size")), size, sizeof size);
        format_time(json_integer_value(json_object_get(b, "time")), when, sizeof when);
        printf("%-28s %-15s %-5lld %-10s %s\n", json_string_value(json_object_get(b, "id")),
               json_string_value(json_object_get(b, "kind")),
               (long long)json_integer_value(json_object_get(b, "generation")), size, when);
}

int cli_cmd_backups(int argc, char **argv) {
        static const char usage[] = "Usage: seed backups [--dir DIR]\n"
                                    "\n"
                                    "Lists the live data's backups (in the Seed's .seed/backups/), newest first:\n"
                                    "id, kind, the generation that was live, size and time. Kinds and how many\n"
                                    "of each are kept: before-apply 10 (taken before every apply and rollback),\n"
                                    "daily 7 (when the newest is 23 hours old), manual 10 ('seed backup', the\n"
                                    "control plane), before-restore 5 (today's data, saved by 'seed restore').\n"
                                    "\n"
                                    "  --dir DIR   the Seed's folder (default: this folder or the nearest above)\n"
                                    "\n"
                                    "Exit codes: 0 listed, 1 failed, 2 usage, 3 the Seed is not running.\n";
        const char *dir = NULL;
        int code = cli_args_dir_only(argc, argv, usage, &dir);
        if (code >= 0)
                return code;
        _cleanup_free_ char *seed_dir = NULL;
        if ((code = cli_open_running_seed(dir, &seed_dir)) >= 0)
                return code;
        _cleanup_json_ json_t *o = NULL;
        if (fetch_list(seed_dir, &o) < 0)
                return CLI_EXIT_FAILURE;
        json_t *list = json_object_get(o, "backups"), *b;
        if (json_array_size(list) == 0) {
                printf("No backups yet. Take one with 'seed backup'.\n");
                return CLI_EXIT_OK;
        }
        printf("%-28s %-15s %-5s %-10s %s\n", "ID", "KIND", "GEN", "SIZE", "TAKEN");
        size_t i;
        json_array_foreach(list, i, b) print_backup(b);
        return CLI_EXIT_OK;
}

int cli_cmd_backup(int argc, char **argv) {
        static const char usage[] = "Usage: seed backup [--dir DIR]\n"
                                    "\n"
                                    "Backs up the live data now (a 'manual' backup; the newest 10 are kept)\n"
                                    "and prints its id. Restore it with 'seed restore ID'.\n"
                                    "\n"
                                    "  --dir DIR   the Seed's folder (default: this folder or the nearest above)\n"
                                    "\n"
                                    "Exit codes: 0 taken, 1 failed (e.g. another backup, a restore or an apply\n"
                                    "runs, or the disk is full), 2 usage, 3 the Seed is not running.\n";
        const char *dir = NULL;
        int code = cli_args_dir_only(argc, argv, usage, &dir);
        if (code >= 0)
                return code;
        _cleanup_free_ char *seed_dir = NULL, *body = NULL;
        if ((code = cli_open_running_seed(dir, &seed_dir)) >= 0)
                return code;
        long status = 0;
        if (cli_api_timeout(seed_dir, "POST", "/_seed/api/backups", "{}", BACKUP_TIMEOUT_MS, &status, &body) < 0)
                return CLI_EXIT_FAILURE;
        _cleanup_json_ json_t *o = json_loads(body, 0, NULL);
        const char *id = json_string_value(json_object_get(o, "id"));
        if (status != 201 || !id) {
                cli_print_refusal("the backup was not taken", status, body);
                return CLI_EXIT_FAILURE;
        }
        printf("Backed up the live data as %s.\n", id);
        return CLI_EXIT_OK;
}

/* Asks on the terminal; false unless the owner types yes. */
static bool confirm(json_t *b) {
        char size[32], when[32], line[16];
        human_size(json_integer_value(json_object_get(b, "size")), size, sizeof size);
        format_time(json_integer_value(json_object_get(b, "time")), when, sizeof when);
        printf("This replaces ALL of the live data with backup %s (%s, taken %s while\n"
               "generation %lld was live, %s). The data written since is lost from the app;\n"
               "today's data is saved first as a before-restore backup. The app stops\n"
               "during the restore.\n"
               "Type 'yes' to restore: ",
               json_string_value(json_object_get(b, "id")), json_string_value(json_object_get(b, "kind")), when,
               (long long)json_integer_value(json_object_get(b, "generation")), size);
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
                return false;
        line[strcspn(line, "\n")] = 0;
        return streq(line, "yes") || streq(line, "y");
}

int cli_cmd_restore(int argc, char **argv) {
        static const char usage[] =
                "Usage: seed restore [--dir DIR] [--yes] ID\n"
                "\n"
                "Replaces the live data with backup ID (see 'seed backups'). Today's data is\n"
                "saved first (a before-restore backup), the app is stopped, the backup is\n"
                "restored in one transaction, the app's migrations run on it and the app\n"
                "starts again. If any of that fails, the saved data is put back and the app\n"
                "runs as before. Asks to confirm unless --yes.\n"
                "\n"
                "  --dir DIR   the Seed's folder (default: this folder or the nearest above)\n"
                "  --yes       do not ask (needed when stdin is not a terminal)\n"
                "\n"
                "Exit codes: 0 restored, 1 failed (the data is as it was), 2 usage or not\n"
                "confirmed, 3 the Seed is not running.\n";
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},
                {"yes", no_argument, NULL, 'y'},
                {"help", no_argument, NULL, 'h'},
                {0},
        };
        const char *dir = NULL;
        bool yes = false;
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "hy", longopts, NULL)) != -1)
                switch (c) {
                case 'd': dir = optarg; break;
                case 'y': yes = true; break;
                case 'h': fputs(usage, stdout); return CLI_EXIT_OK;
                default: fputs(usage, stderr); return CLI_EXIT_USAGE;
                }
        if (argc - optind != 1) {
                fputs(usage, stderr);
                return CLI_EXIT_USAGE;
        }
        const char *id = argv[optind];
        if (strlen(id) > 64 || id[strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-")]) {
                fprintf(stderr, "seed: '%s' is not a backup id (see 'seed backups')\n", id);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *seed_dir = NULL, *path = NULL, *body = NULL;
        int code = cli_open_running_seed(dir, &seed_dir);
        if (code >= 0)
                return code;
        _cleanup_json_ json_t *o = NULL;
        if (fetch_list(seed_dir, &o) < 0)
                return CLI_EXIT_FAILURE;
        json_t *b = NULL, *e;
        size_t i;
        json_array_foreach(json_object_get(o, "backups"), i, e) if (streq(json_string_value(json_object_get(e, "id")), id))
                b = e;
        if (!b) {
                fprintf(stderr, "seed: there is no backup %s (see 'seed backups')\n", id);
                return CLI_EXIT_FAILURE;
        }
        if (!yes && !isatty(STDIN_FILENO)) {
                fprintf(stderr, "seed: a restore replaces the live data: confirm it with --yes\n");
                return CLI_EXIT_USAGE;
        }
        if (!yes && !confirm(b)) {
                fprintf(stderr, "seed: not restored\n");
                return CLI_EXIT_USAGE;
        }
        long status = 0;
        if (xasprintf(&path, "/_seed/api/backups/%s/restore", id) < 0 ||
            cli_api_timeout(seed_dir, "POST", path, "{}", RESTORE_TIMEOUT_MS, &status, &body) < 0)
                return CLI_EXIT_FAILURE;
        _cleanup_json_ json_t *a = json_loads(body, 0, NULL);
        const char *saved = json_string_value(json_object_get(a, "saved"));
        if (status != 200) {
                cli_print_refusal("the restore failed", status, body);
                if (saved)
                        fprintf(stderr, "seed: today's data is kept as backup %s\n", saved);
                return CLI_EXIT_FAILURE;
        }
        printf("Restored %s; the app runs on its data. Today's data was saved as %s.\n", id, saved ? saved : "?");
        return CLI_EXIT_OK;
}
