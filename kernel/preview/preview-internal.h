/* preview-internal.h — shared by the files of kernel/preview (not a public API). */
#pragma once

#include "base/json.h"
#include "preview/preview.h"

struct organism;

struct preview {
        struct preview_config c;
        struct organism *org;    /* the running app, or NULL; owned */
        char *run_dir;           /* .seed/preview/<evo_id>-app; owned */
        char *log_path;          /* .seed/logs/preview-<evo_id>-app.log; owned */
};

/* Every answer to the model goes through tool_result_printf (kernel/tools). */
#define result tool_result_printf

/* What a handler answers when its context has no preview (ctx->preview
 * NULL): "<tool> is not available in this phase". 0 or -ENOMEM. */
int preview_unavailable(const struct tool *t, struct tool_result *ret);
