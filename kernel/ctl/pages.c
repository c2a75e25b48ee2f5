#include "ctl/pages.h"
#include "ctl/http.h"
#include "base/buf.h"

int ctl_page(const char *title, const char *heading, const char *text, int refresh_s,
             char **ret) {
        _cleanup_buf_ struct buf b = BUF_INIT(256 * 1024);
        int r = buf_puts(&b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        if (r >= 0 && refresh_s > 0)
                r = buf_printf(&b, "<meta http-equiv=\"refresh\" content=\"%d\">\n", refresh_s);
        if (r >= 0)
                r = buf_puts(&b, "<link rel=\"stylesheet\" href=\"/_seed/public.css\">\n<title>");
        if (r >= 0)
                r = ctl_html_escape(&b, title);
        if (r >= 0)
                r = buf_puts(&b, "</title>\n</head>\n<body class=\"notice\">\n<main>\n"
                                 "<div class=\"mark\" aria-hidden=\"true\"></div>\n<h1>");
        if (r >= 0)
                r = ctl_html_escape(&b, heading);
        if (r >= 0)
                r = buf_puts(&b, "</h1>\n<p>");
        if (r >= 0)
                r = ctl_html_escape(&b, text);
        if (r >= 0)
                r = buf_puts(&b, "</p>\n</main>\n</body>\n</html>\n");
        if (r < 0)
                return r;
        *ret = buf_steal(&b);
        return 0;
}

int ctl_page_private(const char *seed_name, char **ret) {
        _cleanup_free_ char *title = NULL;
        if (xasprintf(&title, "%s · private", strempty(seed_name) ? "seed" : seed_name) < 0)
                return -ENOMEM;
        return ctl_page(title, "This Seed is private",
                        "Only its owner can see the control plane. If this is your Seed, "
                        "run `seed login` and open the link it prints.",
                        0, ret);
}

int ctl_page_link_invalid(char **ret) {
        return ctl_page("Sign-in link", "This sign-in link is no longer valid",
                        "A sign-in link works once, for 15 minutes. Run `seed login` for a new one.",
                        0, ret);
}

int ctl_page_too_old(char **ret) {
        return ctl_page("Browser too old", "This browser is too old",
                        "It does not send Fetch Metadata (Sec-Fetch-* headers), which the control "
                        "plane needs to keep other pages from using it. Please update it (Safari "
                        "16.4 or newer, or a current Firefox or Chromium).",
                        0, ret);
}

int ctl_page_not_navigation(char **ret) {
        return ctl_page("Open directly", "Open this page directly",
                        "This page is only served when you open it in the browser's address bar "
                        "or follow a link to it, never to scripts or frames.",
                        0, ret);
}

int ctl_page_not_found(char **ret) {
        return ctl_page("Not found", "Not found", "There is nothing at this address.", 0, ret);
}

int ctl_page_body_state(const char *seed_name, const char *state, char **ret) {
        _cleanup_free_ char *heading = NULL, *title = NULL;
        if (xasprintf(&heading, "My body is %s", state) < 0 ||
            xasprintf(&title, "%s · %s", strempty(seed_name) ? "seed" : seed_name, state) < 0)
                return -ENOMEM;
        return ctl_page(title, heading,
                        "The app this Seed grew is not answering right now. This page looks again "
                        "every 5 seconds.",
                        5, ret);
}
