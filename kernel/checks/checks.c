/* checks.c — the form of declared checks. See checks.h. */
#include "checks/checks.h"
#include "base/json.h"

#include <string.h>

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};

bool checks_is_write(const struct decl_check *c) {
        return !streq(c->method, "GET") && !streq(c->method, "HEAD");
}

static bool method_known(const char *m, size_t len) {
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
                if (strlen(methods[i]) == len && strncmp(methods[i], m, len) == 0)
                        return true;
        return false;
}

/* RFC 3986 path and query characters, '%' for escapes: nothing that could
 * split a request line or reach another host. */
static bool path_char_ok(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               strchr("-._~!$&'()*+,;=:@%/?", c) != NULL;
}

static bool has_control(const char *s) {
        for (; *s; s++)
                if ((unsigned char)*s < ' ' && *s != '\t' && *s != '\n' && *s != '\r')
                        return true;
        return false;
}

static void check_done(struct decl_check *c) {
        free(c->name);
        free(c->path);
        free(c->contains);
        free(c->send);
}

void checks_free(struct decl_check *c, size_t n) {
        for (size_t i = 0; c && i < n; i++)
                check_done(&c[i]);
        free(c);
}

/* One check; i (1-based) names it in errors. */
static int parse_one(json_t *o, size_t i, struct decl_check *ret, char **ret_error) {
        if (!json_is_object(o))
                return errorf(-EINVAL, ret_error, "check %zu: must be an object", i);
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v)
                if (!streq(key, "request") && !streq(key, "status") && !streq(key, "body_contains") &&
                    !streq(key, "send"))
                        return errorf(-EINVAL, ret_error, "check %zu: unknown field \"%.40s\"", i, key);
        const char *req = json_string_value(json_object_get(o, "request"));
        json_t *st = json_object_get(o, "status");
        json_t *contains = json_object_get(o, "body_contains"), *send = json_object_get(o, "send");
        if (!req)
                return errorf(-EINVAL, ret_error, "check %zu: \"request\" (\"http:<METHOD> <path>\") is required", i);
        if (strncmp(req, "http:", 5) != 0)
                return errorf(-EINVAL, ret_error, "check %zu: \"request\" must start with \"http:\" (e.g. \"http:GET /\")",
                              i);
        const char *m = req + 5, *sp = strchr(m, ' ');
        if (!sp || !method_known(m, (size_t)(sp - m)))
                return errorf(-EINVAL, ret_error,
                              "check %zu: the method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, followed by "
                              "one space and the path",
                              i);
        const char *path = sp + 1;
        size_t plen = strlen(path);
        if (path[0] != '/')
                return errorf(-EINVAL, ret_error, "check %zu: the path must start with '/'", i);
        if (plen > CHECKS_PATH_MAX)
                return errorf(-EINVAL, ret_error, "check %zu: the path is longer than %d bytes", i, CHECKS_PATH_MAX);
        for (const char *p = path; *p; p++)
                if (!path_char_ok(*p))
                        return errorf(-EINVAL, ret_error,
                                      "check %zu: the path may hold only URL path and query characters "
                                      "(percent-encode others)",
                                      i);
        if (!json_is_integer(st) || json_integer_value(st) < 100 || json_integer_value(st) > 599)
                return errorf(-EINVAL, ret_error, "check %zu: \"status\" must be an HTTP status (100 to 599)", i);
        if (contains && (!json_is_string(contains) || json_string_length(contains) < 1 ||
                         json_string_length(contains) > CHECKS_CONTAINS_MAX || has_control(json_string_value(contains))))
                return errorf(-EINVAL, ret_error, "check %zu: \"body_contains\" must be text of 1 to %d bytes", i,
                              CHECKS_CONTAINS_MAX);
        size_t mlen = (size_t)(sp - m);
        bool bodied = (mlen == 4 && !strncmp(m, "POST", 4)) || (mlen == 3 && !strncmp(m, "PUT", 3)) ||
                      (mlen == 5 && !strncmp(m, "PATCH", 5));
        if (send && (!json_is_string(send) || json_string_length(send) > CHECKS_SEND_MAX ||
                     strlen(json_string_value(send)) != json_string_length(send)))
                return errorf(-EINVAL, ret_error, "check %zu: \"send\" must be text of at most %d bytes", i,
                              CHECKS_SEND_MAX);
        if (send && !bodied)
                return errorf(-EINVAL, ret_error, "check %zu: \"send\" is only for POST, PUT and PATCH", i);
        struct decl_check c = {.status = (int)json_integer_value(st)};
        memcpy(c.method, m, mlen);
        c.method[mlen] = 0;
        if (!(c.name = strdup(req)) || !(c.path = strdup(path)) ||
            (contains && !(c.contains = strdup(json_string_value(contains)))) ||
            (send && !(c.send = strdup(json_string_value(send))))) {
                check_done(&c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

int checks_parse(json_t *arr, struct decl_check **ret, size_t *ret_n, char **ret_error) {
        if (!arr || json_is_null(arr)) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        if (!json_is_array(arr))
                return errorf(-EINVAL, ret_error, "\"checks\" must be an array");
        size_t n = json_array_size(arr);
        if (n > CHECKS_MAX)
                return errorf(-EINVAL, ret_error, "at most %d checks may be declared (%zu were)", CHECKS_MAX, n);
        struct decl_check *c = calloc(n ? n : 1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = parse_one(json_array_get(arr, i), i + 1, &c[i], ret_error);
                if (r < 0) {
                        checks_free(c, i);
                        return r;
                }
        }
        *ret = c;
        *ret_n = n;
        return 0;
}

int checks_parse_text(const char *json, struct decl_check **ret, size_t *ret_n, char **ret_error) {
        if (!json) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        _cleanup_json_ json_t *arr = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
        if (!arr)
                return errorf(-EINVAL, ret_error, "\"checks\" is not JSON");
        return checks_parse(arr, ret, ret_n, ret_error);
}
