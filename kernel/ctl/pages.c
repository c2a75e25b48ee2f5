#include "ctl/pages.h"
#include "ctl/http.h"
#include "base/buf.h"

/* A notice page; extra is trusted HTML (a constant of this file) put after
 * the text, message (escaped) an alert before it. */
static int page_build(const char *title, const char *heading, const char *text, const char *message,
                      const char *extra, int refresh_s, const char *refresh_url, char **ret) {
        _cleanup_buf_ struct buf b = BUF_INIT(256 * 1024);
        int r = buf_puts(&b, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        if (r >= 0 && refresh_s > 0)
                r = buf_printf(&b, "<meta http-equiv=\"refresh\" content=\"%d\">\n", refresh_s);
        if (r >= 0 && refresh_url) /* a path of this file's own, never from a request */
                r = buf_printf(&b, "<meta http-equiv=\"refresh\" content=\"0;url=%s\">\n", refresh_url);
        if (r >= 0)
                r = buf_puts(&b, "<link rel=\"stylesheet\" href=\"/_seed/public.css\">\n"
                                 "<link rel=\"icon\" href=\"/_seed/favicon.svg\" type=\"image/svg+xml\">\n<title>");
        if (r >= 0)
                r = ctl_html_escape(&b, title);
        if (r >= 0)
                r = buf_puts(&b, "</title>\n</head>\n<body class=\"notice\">\n<main>\n"
                                 "<div class=\"mark\" aria-hidden=\"true\"></div>\n<h1>");
        if (r >= 0)
                r = ctl_html_escape(&b, heading);
        if (r >= 0)
                r = buf_puts(&b, "</h1>\n");
        if (r >= 0 && message) {
                r = buf_puts(&b, "<p class=\"alert\" role=\"alert\">");
                if (r >= 0)
                        r = ctl_html_escape(&b, message);
                if (r >= 0)
                        r = buf_puts(&b, "</p>\n");
        }
        if (r >= 0)
                r = buf_puts(&b, "<p>");
        if (r >= 0)
                r = ctl_html_escape(&b, text);
        if (r >= 0)
                r = buf_puts(&b, "</p>\n");
        if (r >= 0 && extra)
                r = buf_puts(&b, extra);
        if (r >= 0)
                r = buf_puts(&b, "</main>\n</body>\n</html>\n");
        if (r < 0)
                return r;
        *ret = buf_steal(&b);
        return 0;
}

int ctl_page(const char *title, const char *heading, const char *text, int refresh_s,
             char **ret) {
        return page_build(title, heading, text, NULL, NULL, refresh_s, NULL, ret);
}

/* The password form: a same-origin POST navigation to /_seed/login, no
 * script. On the control plane's own origin a password manager may save and
 * fill it (no other code runs there). In the same-origin fallback
 * autocomplete is off: the organism shares the origin, and a password
 * manager would fill a saved password into its forms too. */
#define SIGN_IN_FORM(ac_user, ac_password, hint)                                                   \
        "<form class=\"sign-in\" method=\"post\" action=\"/_seed/login\">\n"                       \
        "<label for=\"user\">Username</label>\n"                                                    \
        "<input id=\"user\" name=\"user\" type=\"text\" autocomplete=\"" ac_user "\" "                \
        "autocapitalize=\"none\" spellcheck=\"false\" maxlength=\"128\" required>\n"                \
        "<label for=\"password\">Password</label>\n"                                                \
        "<input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"" ac_password    \
        "\" minlength=\"12\" maxlength=\"1024\" required>\n"                                         \
        "<button type=\"submit\">Sign in</button>\n"                                                \
        "</form>\n" hint

static const char form_saveable[] = SIGN_IN_FORM("username", "current-password", "");
static const char form_unsaveable[] = SIGN_IN_FORM(
        "off", "off",
        "<p class=\"hint\">Don't let the browser save this password: the app this Seed grows shares "
        "this address, and a saved password could be filled into the app's own forms.</p>\n");

/* After a link from another site the browser holds a SameSite=Strict
 * cookie back; a click here is a navigation of this origin's own. */
static const char reopen_link[] =
        "<p class=\"hint\">Signed in already? <a id=\"reopen\" href=\"/_seed/\">Open the control plane</a>: "
        "after a link from another site the browser holds your sign-in back until you do.</p>\n"
        "<script src=\"/_seed/reopen.js\"></script>\n";

int ctl_page_private(const char *seed_name, char **ret) {
        return ctl_page_sign_in(seed_name, 0, NULL, ret);
}

int ctl_page_sign_in(const char *seed_name, unsigned flags, const char *message, char **ret) {
        _cleanup_free_ char *title = NULL, *extra = NULL;
        bool form = flags & CTL_SIGN_IN_FORM;
        if (xasprintf(&title, "%s · private", strempty(seed_name) ? "seed" : seed_name) < 0 ||
            xasprintf(&extra, "%s%s",
                      !form ? "" : flags & CTL_SIGN_IN_SAVEABLE ? form_saveable : form_unsaveable,
                      flags & CTL_SIGN_IN_REOPEN ? reopen_link : "") < 0)
                return -ENOMEM;
        return page_build(title, "This Seed is private",
                          form ? "Only its owner can see the control plane. If this is your Seed, "
                                 "sign in, or run `seed login` and open the link it prints."
                               : "Only its owner can see the control plane. If this is your Seed, "
                                 "run `seed login` and open the link it prints.",
                          message, extra, 0, NULL, ret);
}

/* The answer to a good sign-in link: the cookie is set, and the page moves
 * on to /_seed/ by itself. Not a redirect: a link opened from elsewhere may
 * have come through a redirect from another site, and a SameSite=Strict
 * cookie is held back for the rest of such a chain; a refresh is a new
 * navigation of this origin's own. */
int ctl_page_signed_in(char **ret) {
        return page_build("Signed in", "Signed in", "Opening the control plane.", NULL,
                          "<p><a href=\"/_seed/\">Open the control plane</a></p>\n", 0, "/_seed/", ret);
}

int ctl_page_limited(bool overall, char **ret) {
        return ctl_page("Too many attempts", "Too many failed sign-ins",
                        overall ? "This Seed had too many failed sign-ins in the last 15 minutes, so no "
                                  "password is checked for now. Run `seed login` and open the link it "
                                  "prints; browsers that are signed in keep working."
                                : "There were too many failed sign-ins from your address in the last 15 "
                                  "minutes, so no password from it is checked for now. Try again later, "
                                  "or run `seed login` and open the link it prints.",
                        0, ret);
}

int ctl_page_password_off(char **ret) {
        return ctl_page("Sign-in", "Password sign-in is off",
                        "This Seed was started without an owner password (SEED_OWNER_PASSWORD, at "
                        "least 12 characters). Run `seed login` and open the link it prints.",
                        0, ret);
}

int ctl_page_cross_origin(char **ret) {
        return ctl_page("Sign-in", "Sign in from this Seed's own page",
                        "The sign-in form only accepts what is sent from /_seed/ at this same address.",
                        0, ret);
}

int ctl_page_bad_form(char **ret) {
        return ctl_page("Sign-in", "That sign-in form was incomplete",
                        "Send the username and the password from the form at /_seed/.", 0, ret);
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
