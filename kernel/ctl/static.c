/* static.c — the control-plane UI embedded from control/ (tools/embed.py). */
#include "ctl/server.h"
#include "base/embedded.h"

extern const struct embedded_file ctl_ui_files[];

static const char *content_type(const char *name) {
        if (endswith(name, ".html"))
                return "text/html; charset=utf-8";
        if (endswith(name, ".js"))
                return "text/javascript; charset=utf-8";
        if (endswith(name, ".css"))
                return "text/css; charset=utf-8";
        if (endswith(name, ".svg"))
                return "image/svg+xml";
        if (endswith(name, ".png"))
                return "image/png";
        return "application/octet-stream";
}

int ctl_static_file(const char *name, struct ctl_resp *resp) {
        const struct embedded_file *f = embedded_find(ctl_ui_files, name);
        if (!f)
                return -ENOENT;
        ctl_resp_take(resp, 200, content_type(name), (char *)f->data);
        resp->len = f->len;
        resp->body_static = true;
        return 0;
}

/* Replaces every {{KEY}} of tpl with the HTML-escaped value. */
static int render(const char *tpl, const char *const (*vars)[2], size_t n, struct buf *out) {
        const char *p = tpl;
        int r = 0;
        while (r >= 0 && *p) {
                const char *open = strstr(p, "{{");
                if (!open)
                        return buf_puts(out, p);
                r = buf_append(out, p, (size_t)(open - p));
                const char *close = strstr(open, "}}");
                if (r < 0 || !close)
                        return r < 0 ? r : -EINVAL;
                size_t kl = (size_t)(close - open - 2);
                size_t i;
                for (i = 0; i < n; i++)
                        if (strlen(vars[i][0]) == kl && strncmp(open + 2, vars[i][0], kl) == 0)
                                break;
                if (i == n)
                        return -EINVAL; /* an unknown placeholder is a bug in control/ */
                r = ctl_html_escape(out, vars[i][1]);
                p = close + 2;
        }
        return r;
}

int ctl_static_index(const char *seed_name, const char *token, const char *admin_origin, struct ctl_resp *resp) {
        const struct embedded_file *f = embedded_find(ctl_ui_files, "index.html");
        if (!f)
                return -ENOENT;
        const char *const vars[][2] = {{"SEED_NAME", seed_name}, {"SEED_TOKEN", token}, {"ADMIN_ORIGIN", admin_origin}};
        _cleanup_buf_ struct buf b = BUF_INIT(4 * 1024 * 1024);
        int r = render((const char *)f->data, vars, ARRAY_SIZE(vars), &b);
        if (r < 0)
                return r;
        ctl_resp_take(resp, 200, "text/html; charset=utf-8", buf_steal(&b));
        return 0;
}
