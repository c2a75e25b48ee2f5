/* run.c — a shell command of the evolution, in an evolution sandbox
 * (kernel/sandbox): the workspace read-only except the evolvable dirs, .seed/
 * hidden, a clean environment, the whole process group killed on timeout. */
#include "tools/internal.h"
#include "base/buf.h"
#include "base/log.h"

#define RUN_DEFAULT_TIMEOUT_MS (900 * 1000)

int tools_run(struct tool_ctx *ctx, const struct tool *t, json_t *args, struct tool_result *ret) {
        if (!ctx->sandbox)
                return tool_error(ret, "run is not available in this phase");
        int limit_ms = ctx->command_timeout_ms > 0 ? ctx->command_timeout_ms : RUN_DEFAULT_TIMEOUT_MS;
        int64_t asked_s = tool_arg_int(args, "timeout_seconds", 0);
        int timeout_ms = asked_s > 0 && asked_s * 1000 < limit_ms ? (int)(asked_s * 1000) : limit_ms;

        struct sandbox_spec spec = *ctx->sandbox;
        spec.profile = SANDBOX_EVOLUTION;
        spec.workspace_readonly = false;
        _cleanup_(sandbox_policy_freep) struct sandbox_policy *policy = NULL;
        int r = sandbox_policy_build(&spec, &policy);
        if (r < 0) {
                log_warn_errno(r, "run: cannot build the sandbox policy: %m");
                return tool_error(ret, "run: the sandbox could not be prepared (%s)", strerror(-r));
        }
        char *cmd[] = {"/bin/sh", "-c", (char *)tool_arg_str(args, "command"), NULL};
        struct proc_result res = {0};
        int64_t start = now_ms();
        r = sandbox_run(policy, cmd, timeout_ms, &res);
        if (r < 0) {
                log_warn_errno(r, "run: cannot start the sandbox: %m");
                return tool_error(ret, "run: the sandbox could not start (%s)", strerror(-r));
        }
        int64_t took = now_ms() - start;
        const char *out = res.output ? res.output : "";
        if (res.timed_out)
                r = tool_error(ret, "timed out after %d s (the whole process group was killed)\n%s", timeout_ms / 1000,
                               out);
        else
                r = tool_ok(ret, "exit status %d (%lld.%03lld s)\n%s", res.exit_code, (long long)(took / 1000),
                            (long long)(took % 1000), out);
        if (r >= 0 && res.exit_code != 0)
                ret->is_error = true;
        proc_result_done(&res);
        return r;
}
