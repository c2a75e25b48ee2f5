/* request.c — the CONNECT request head (RFC 9110 §9.3.6, RFC 9112 §3):
 * request line, header fields, blank line; CRLF only, no obsolete folding,
 * no body, authority-form "host:443" only. */
#include "egress/request.h"
#include "egress/addr.h"

#include <strings.h>

#define TARGET_MAX (EGRESS_HOST_MAX + 64) /* a name, brackets, a port, some slack */

static int fail(int r, const char **why, const char *text) {
        *why = text;
        return r;
}

static bool tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool all_tchars(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!tchar(s[i]))
                        return false;
        return true;
}

/* A field value: visible ASCII, obs-text, spaces and tabs; no controls. */
static bool field_value_ok(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return false;
        }
        return true;
}

/* Bytes no head may hold anywhere: NUL, and LF without its CR. Checked on
 * what came so far, so a client speaking another protocol is told at once. */
static int check_bytes(const char *data, size_t len, const char **why) {
        if (memchr(data, 0, len))
                return fail(-EBADMSG, why, "a NUL byte in the request head");
        for (const char *p = data; (p = memchr(p, '\n', len - (size_t)(p - data))); p++)
                if (p == data || p[-1] != '\r')
                        return fail(-EBADMSG, why, "a line not ended by CRLF");
        return 0;
}

/* "443": 1..65535, digits only, no leading zero. */
static int parse_port(const char *s, size_t n) {
        if (n == 0 || n > 5 || s[0] == '0')
                return -1;
        int v = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v <= 65535 ? v : -1;
}

static int parse_target(const char *t, size_t n, struct egress_request *req, const char **why) {
        char host[TARGET_MAX + 1];
        size_t host_len;
        const char *colon;
        if (n == 0 || n > TARGET_MAX)
                return fail(-EBADMSG, why, "the target is not host:port");
        if (t[0] == '[') {
                const char *close = memchr(t, ']', n);
                if (!close || close + 1 == t + n || close[1] != ':')
                        return fail(-EBADMSG, why, "the target is not host:port");
                colon = close + 1;
        } else {
                colon = NULL;
                for (const char *p = t; p < t + n; p++)
                        if (*p == ':')
                                colon = p;
                if (!colon)
                        return fail(-EBADMSG, why, "the target has no port (authority-form is host:port)");
        }
        int port = parse_port(colon + 1, (size_t)(t + n - colon - 1));
        if (port < 0)
                return fail(-EBADMSG, why, "the target's port is not a number from 1 to 65535");
        req->port = port;
        host_len = (size_t)(colon - t);
        memcpy(host, t, host_len);
        host[host_len] = 0;
        if (egress_is_ip_literal(host))
                return fail(-EPERM, why, "an IP address, not a host name");
        if (egress_name_normalize(host, host_len, req->host) < 0)
                return fail(-EBADMSG, why, "the target is not a DNS host name");
        if (egress_name_internal(req->host))
                return fail(-EPERM, why, "an internal name");
        if (port != 443)
                return fail(-EPERM, why, "only port 443 (HTTPS)");
        return 0;
}

static int parse_request_line(const char *line, size_t n, struct egress_request *req, const char **why) {
        const char *sp1 = memchr(line, ' ', n);
        const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - line)) : NULL;
        if (!sp1 || !sp2 || memchr(sp2 + 1, ' ', n - (size_t)(sp2 + 1 - line)))
                return fail(-EBADMSG, why, "the request line is not METHOD SP TARGET SP VERSION");
        size_t method_len = (size_t)(sp1 - line), version_len = n - (size_t)(sp2 + 1 - line);
        const char *version = sp2 + 1;
        if (!all_tchars(line, method_len))
                return fail(-EBADMSG, why, "the method is not a token");
        if (version_len != 8 || (memcmp(version, "HTTP/1.1", 8) != 0 && memcmp(version, "HTTP/1.0", 8) != 0))
                return fail(-EBADMSG, why, "not HTTP/1.0 or HTTP/1.1");
        if (method_len != 7 || memcmp(line, "CONNECT", 7) != 0)
                return fail(-EOPNOTSUPP, why, "only CONNECT (HTTPS through the proxy); plain HTTP is refused");
        return parse_target(sp1 + 1, (size_t)(sp2 - sp1 - 1), req, why);
}

static int parse_field(const char *line, size_t n, const char **why) {
        if (line[0] == ' ' || line[0] == '\t')
                return fail(-EBADMSG, why, "a folded header line");
        const char *colon = memchr(line, ':', n);
        if (!colon || !all_tchars(line, (size_t)(colon - line)))
                return fail(-EBADMSG, why, "a header field is not name: value");
        size_t name_len = (size_t)(colon - line);
        const char *value = colon + 1;
        size_t value_len = n - name_len - 1;
        if (!field_value_ok(value, value_len))
                return fail(-EBADMSG, why, "a control character in a header value");
        while (value_len > 0 && (*value == ' ' || *value == '\t'))
                value++, value_len--;
        while (value_len > 0 && (value[value_len - 1] == ' ' || value[value_len - 1] == '\t'))
                value_len--;
        if (name_len == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0)
                return fail(-EBADMSG, why, "a CONNECT request with a body");
        if (name_len == 14 && strncasecmp(line, "Content-Length", 14) == 0 &&
            !(value_len == 1 && value[0] == '0'))
                return fail(-EBADMSG, why, "a CONNECT request with a body");
        return 0;
}

int egress_request_parse(const char *data, size_t len, struct egress_request *req, const char **why) {
        *req = (struct egress_request){0};
        size_t scan = len < EGRESS_REQUEST_MAX ? len : EGRESS_REQUEST_MAX;
        const char *end = memmem(data, scan, "\r\n\r\n", 4);
        size_t head_len = end ? (size_t)(end - data) + 4 : 0;
        int r = check_bytes(data, end ? head_len : scan, why);
        if (r < 0)
                return r;
        if (!end) {
                if (len >= EGRESS_REQUEST_MAX)
                        return fail(-E2BIG, why, "the request head is too large");
                return -EAGAIN;
        }
        const char *line = data, *line_end = memmem(line, head_len, "\r\n", 2);
        r = parse_request_line(line, (size_t)(line_end - line), req, why);
        if (r < 0)
                return r;
        size_t fields = 0;
        for (line = line_end + 2; line < end + 2; line = line_end + 2) {
                line_end = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
                if (line_end == line)
                        break;
                if (++fields > EGRESS_REQUEST_HEADERS_MAX)
                        return fail(-EBADMSG, why, "too many header fields");
                if ((r = parse_field(line, (size_t)(line_end - line), why)) < 0)
                        return r;
        }
        req->head_len = head_len;
        return 0;
}
