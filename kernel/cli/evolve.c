/* `seed evolve` and `seed rollback`: queue an evolution through the kernel's
 * API with the CLI token and follow it, printing its phases, tool calls,
 * checks, approvals it waits on and the result. */
#include "base/json.h"
#include "base/priv.h"
#include "cli/cli.h"

#include <getopt.h>
#include <limits.h>
#include <time.h>

#define INTENT_MAX (16 * 1024)
#define POLL_MS 300
#define UNREACHABLE_MAX_MS (180 * 1000) /* a kernel restarting into new source may take a while */
#define ARGS_SHOWN 80

/* Parses [--dir D] [-h] and the positional arguments (at least min, at most
 * max). Returns -1 to go on, else the exit code. */
/* with_data: where --with-data is allowed (rollback), else NULL. */
static int parse_args(int argc, char **argv, const char *usage, int min, int max, const char **ret_dir,
                      int *ret_first, bool *with_data) {
        static const struct option longopts[] = {
                {"dir", required_argument, NULL, 'd'},
                {"help", no_argument, NULL, 'h'},
                {"with-data", no_argument, NULL, 'w'},
                {0},
        };
        int c;
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
                switch (c) {
                case 'd': *ret_dir = optarg; break;
                case 'h': fputs(usage, stdout); return CLI_EXIT_OK;
                case 'w':
                        if (!with_data) {
                                fputs(usage, stderr);
                                return CLI_EXIT_USAGE;
                        }
                        *with_data = true;
                        break;
                default: fputs(usage, stderr); return CLI_EXIT_USAGE;
                }
        }
        int n = argc - optind;
        if (n < min || n > max) {
                fputs(usage, stderr);
                return CLI_EXIT_USAGE;
        }
        *ret_first = optind;
        return -1;
}

/* POSTs body to path and returns the "id" of a 202 answer. */
static int queue_call(const char *seed_dir, const char *path, const char *body, const char *what, char **ret_id) {
        long status = 0;
        _cleanup_free_ char *res = NULL;
        int r = cli_api(seed_dir, "POST", path, body, &status, &res);
        if (r < 0)
                return r;
        _cleanup_json_ json_t *o = json_loads(res, 0, NULL);
        const char *id = json_string_value(json_object_get(o, "id"));
        if (status != 202 || !id) {
                cli_print_refusal(what, status, res);
                return -EIO;
        }
        char *d = strdup(id);
        if (!d)
                return -ENOMEM;
        *ret_id = d;
        return 0;
}

static bool state_terminal(const char *s) {
        return s && (streq(s, "complete") || streq(s, "failed") || streq(s, "cancelled") || streq(s, "rolled_back"));
}

/* One line of at most n bytes: newlines become spaces, longer text ends in "…". */
static void print_short(const char *s, size_t n) {
        size_t i = 0;
        for (; s[i] && i < n; i++)
                putchar(s[i] == '\n' || s[i] == '\r' || s[i] == '\t' ? ' ' : s[i]);
        if (s[i])
                fputs("...", stdout);
}

static void print_tool_call(json_t *d) {
        const char *name = json_string_value(json_object_get(d, "name"));
        json_t *args = json_object_get(d, "arguments");
        _cleanup_free_ char *a = args ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        printf("  tool %s ", name ? name : "?");
        print_short(a ? a : "", ARGS_SHOWN);
        putchar('\n');
}

static void print_waiting(const char *kind, json_t *d) {
        const char *id = json_string_value(json_object_get(d, "id"));
        json_t *req = json_object_get(d, "request");
        if (streq(kind, "question")) {
                const char *q = json_string_value(json_object_get(req, "question"));
                printf("  ? question %s: ", id ? id : "?");
                print_short(q ? q : "", 500);
                printf("\n    waiting for your answer: answer it in the control plane ('seed login' opens it)\n");
                return;
        }
        const char *akind = json_string_value(json_object_get(d, "kind"));
        const char *tool = json_string_value(json_object_get(d, "tool"));
        _cleanup_free_ char *r = req ? json_dumps(req, JSON_COMPACT) : NULL;
        printf("  ! approval %s (%s%s%s): ", id ? id : "?", akind ? akind : "?", tool ? " " : "", tool ? tool : "");
        print_short(r ? r : "", 300);
        printf("\n    waiting for your decision: approve in the control plane ('seed login' opens it)\n");
}

/* A time in ms since the epoch as the local HH:MM:SS. */
static void format_clock(json_t *ms, char out[16]) {
        time_t t = json_is_integer(ms) ? (time_t)(json_integer_value(ms) / 1000) : 0;
        struct tm tm;
        if (!t || !localtime_r(&t, &tm) || strftime(out, 16, "%H:%M:%S", &tm) == 0)
                snprintf(out, 16, "?");
}

/* The model cannot be reached: the evolution waits it out, keeping its work. */
static void print_model_waiting(json_t *d) {
        const char *reason = json_string_value(json_object_get(d, "reason"));
        char at[16], until[16];
        format_clock(json_object_get(d, "retry_at"), at);
        format_clock(json_object_get(d, "until"), until);
        fputs("  waiting for the model: ", stdout);
        print_short(reason ? reason : "unreachable", 300);
        printf(", retrying at %s; gives up at %s (cancel it in the control plane)\n", at, until);
}

static void print_event(json_t *ev) {
        const char *kind = json_string_value(json_object_get(ev, "kind"));
        json_t *d = json_object_get(ev, "data");
        if (!kind)
                return;
        if (streq(kind, "phase")) {
                const char *to = json_string_value(json_object_get(d, "to"));
                const char *why = json_string_value(json_object_get(d, "note"));
                printf("[%s]%s", to ? to : "?", why ? " " : "");
                if (why)
                        print_short(why, 300);
                putchar('\n');
        } else if (streq(kind, "plan")) {
                const char *title = json_string_value(json_object_get(d, "title"));
                const char *summary = json_string_value(json_object_get(d, "summary"));
                printf("  plan: %s\n", title ? title : "(untitled)");
                if (summary) {
                        fputs("    ", stdout);
                        print_short(summary, 300);
                        putchar('\n');
                }
        } else if (streq(kind, "tool_call")) {
                print_tool_call(d);
        } else if (streq(kind, "tool_result")) {
                if (json_is_true(json_object_get(d, "is_error"))) {
                        const char *out = json_string_value(json_object_get(d, "output"));
                        fputs("    tool error: ", stdout);
                        print_short(out ? out : "", 200);
                        putchar('\n');
                }
        } else if (streq(kind, "check")) {
                const char *name = json_string_value(json_object_get(d, "name"));
                printf("  check %s %s\n", name ? name : "?", json_is_true(json_object_get(d, "ok")) ? "ok" : "FAIL");
        } else if (streq(kind, "approval") || streq(kind, "question")) {
                print_waiting(kind, d);
        } else if (streq(kind, "error")) {
                const char *e = json_string_value(json_object_get(d, "error"));
                fputs("  error: ", stdout);
                print_short(e ? e : "", 500);
                putchar('\n');
        } else if (streq(kind, "waiting")) {
                print_model_waiting(d);
        } else if (streq(kind, "resumed")) {
                json_t *w = json_object_get(d, "waited_ms");
                printf("  the model answers again (after %lld s); going on\n",
                       json_is_integer(w) ? (long long)(json_integer_value(w) + 500) / 1000 : 0LL);
        } else if (streq(kind, "note")) {
                const char *t = json_string_value(json_object_get(d, "text"));
                if (t) {
                        fputs("  note: ", stdout);
                        print_short(t, 200);
                        putchar('\n');
                }
                if (streq(json_string_value(json_object_get(d, "preview")) ?: "", "running"))
                        printf("  ! preview: try it from the control plane ('seed login'), then apply it, ask for "
                               "changes or discard it there\n");
        }
        /* agent_text: the model thinking aloud; left to the control plane. */
}

static void sleep_ms(long ms) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

/* Prints the result line; returns the exit code. */
static int print_result(json_t *e) {
        const char *state = json_string_value(json_object_get(e, "state"));
        const char *err = json_string_value(json_object_get(e, "error"));
        json_t *to = json_object_get(e, "to_generation");
        if (streq(state, "complete")) {
                if (json_is_integer(to))
                        printf("Result: complete: generation %lld is live.\n", (long long)json_integer_value(to));
                else
                        printf("Result: complete.\n");
                return CLI_EXIT_OK;
        }
        printf("Result: %s%s%s\n", state, err ? ": " : ".", err ? err : "");
        return CLI_EXIT_FAILURE;
}

/* Follows an evolution until it ends, printing its events. */
static int follow(const char *seed_dir, const char *id) {
        _cleanup_free_ char *path = NULL;
        long long after = 0;
        int64_t unreachable_since = 0;
        for (;;) {
                free(path);
                path = NULL;
                if (xasprintf(&path, "/_seed/api/evolutions/%s?after=%lld", id, after) < 0)
                        return CLI_EXIT_FAILURE;
                long status = 0;
                _cleanup_free_ char *body = NULL;
                int r = cli_api(seed_dir, "GET", path, NULL, &status, &body);
                if (r < 0 || status >= 500) {
                        /* The kernel may be restarting into new source (exit 75). */
                        if (!unreachable_since)
                                unreachable_since = now_ms();
                        if (now_ms() - unreachable_since > UNREACHABLE_MAX_MS) {
                                fprintf(stderr, "seed: lost the kernel for 3 minutes; see 'seed status'\n");
                                return CLI_EXIT_FAILURE;
                        }
                        sleep_ms(1000);
                        continue;
                }
                unreachable_since = 0;
                _cleanup_json_ json_t *e = json_loads(body, 0, NULL); /* released at each turn's end */
                if (status != 200 || !json_is_object(e)) {
                        cli_print_refusal("cannot follow the evolution", status, body);
                        return CLI_EXIT_FAILURE;
                }
                json_t *events = json_object_get(e, "events"), *ev;
                size_t i;
                json_array_foreach(events, i, ev) {
                        json_int_t eid = json_integer_value(json_object_get(ev, "id"));
                        if (eid > after)
                                after = eid;
                        print_event(ev);
                }
                fflush(stdout);
                const char *state = json_string_value(json_object_get(e, "state"));
                if (state_terminal(state) && json_array_size(events) == 0) {
                        return print_result(e);
                }
                if (json_array_size(events) == 0)
                        sleep_ms(POLL_MS);
        }
}

int cli_cmd_evolve(int argc, char **argv) {
        static const char usage[] =
                "Usage: seed evolve [--dir DIR] \"<intent>\"\n"
                "\n"
                "Asks the running Seed to change itself: the intent becomes an evolution\n"
                "(plan, change, build, test, run, reflect, commit, apply). Follows it and\n"
                "prints its phases, tool calls, checks and the result. When it waits for\n"
                "an approval or an answer, decide in the control plane ('seed login').\n"
                "When the model cannot be reached, it says so (\"waiting for the model:\n"
                "<reason>, retrying at ...\") and waits, keeping its work, for\n"
                "evolution.model_wait_seconds of seed.yaml before it fails.\n"
                "Ctrl-C stops following; the evolution goes on.\n"
                "\n"
                "  --dir DIR   the Seed's folder (default: this folder or the nearest above)\n"
                "\n"
                "Exit codes: 0 complete, 1 failed, cancelled or rolled back, 2 usage,\n"
                "3 the Seed is not running.\n";
        const char *dir = NULL;
        int first = 0;
        int code = parse_args(argc, argv, usage, 1, INT_MAX, &dir, &first, NULL);
        if (code >= 0)
                return code;
        _cleanup_free_ char *intent = NULL;
        for (int i = first; i < argc; i++) {
                char *n = NULL;
                if (xasprintf(&n, "%s%s%s", intent ? intent : "", intent ? " " : "", argv[i]) < 0)
                        return CLI_EXIT_FAILURE;
                free(intent);
                intent = n;
        }
        if (strempty(intent) || strlen(intent) > INTENT_MAX) {
                fprintf(stderr, "seed: the intent must be 1 to %d bytes\n", INTENT_MAX);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *seed_dir = NULL, *id = NULL;
        if ((code = cli_open_running_seed(dir, &seed_dir)) >= 0)
                return code;
        _cleanup_json_ json_t *o = json_pack("{s:s}", "intent", intent);
        _cleanup_free_ char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!body) {
                fprintf(stderr, "seed: the intent must be UTF-8 text\n");
                return CLI_EXIT_USAGE;
        }
        if (queue_call(seed_dir, "/_seed/api/evolutions", body, "the Seed refused the evolution", &id) < 0)
                return CLI_EXIT_FAILURE;
        printf("Evolution %s queued.\n", id);
        fflush(stdout);
        return follow(seed_dir, id);
}

int cli_cmd_rollback(int argc, char **argv) {
        static const char usage[] =
                "Usage: seed rollback [--dir DIR] [--with-data] <generation>\n"
                "\n"
                "Makes a new generation whose files are those of <generation> (see\n"
                "'seed generations'), through an evolution that is built, tested and\n"
                "applied like any other. Follows it and prints the result.\n"
                "The live data stays as it is (migrations are not reversed) unless\n"
                "--with-data is given.\n"
                "\n"
                "  --dir DIR     the Seed's folder (default: this folder or the nearest above)\n"
                "  --with-data   also bring back the live data as it was backed up while\n"
                "                <generation> was live (the data written since is lost;\n"
                "                today's data is backed up first, in .seed/backups/)\n"
                "\n"
                "Exit codes: 0 complete, 1 failed, cancelled or rolled back, 2 usage,\n"
                "3 the Seed is not running.\n";
        const char *dir = NULL;
        int first = 0;
        bool with_data = false;
        int code = parse_args(argc, argv, usage, 1, 1, &dir, &first, &with_data);
        if (code >= 0)
                return code;
        const char *arg = argv[first];
        char *end = NULL;
        errno = 0;
        long n = strtol(arg, &end, 10);
        if (errno || !end || *end || end == arg || n < 1 || n > INT_MAX || arg[0] == '+' || arg[0] == ' ') {
                fprintf(stderr, "seed: '%s' is not a generation number\n", arg);
                return CLI_EXIT_USAGE;
        }
        _cleanup_free_ char *seed_dir = NULL, *id = NULL, *path = NULL;
        if ((code = cli_open_running_seed(dir, &seed_dir)) >= 0)
                return code;
        if (xasprintf(&path, "/_seed/api/generations/%ld/rollback", n) < 0)
                return CLI_EXIT_FAILURE;
        if (queue_call(seed_dir, path, with_data ? "{\"with_data\": true}" : "{}", "the Seed refused the rollback",
                       &id) < 0)
                return CLI_EXIT_FAILURE;
        printf("Rollback to generation %ld queued as %s.\n", n, id);
        fflush(stdout);
        return follow(seed_dir, id);
}
