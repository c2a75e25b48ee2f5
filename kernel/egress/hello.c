/* hello.c — a TLS ClientHello, reassembled from its handshake records, and
 * its one host_name. */
#include "egress/hello.h"
#include "egress/addr.h"

#define REC_HEADER 5
#define REC_HANDSHAKE 22
#define REC_PAYLOAD_MAX 16384 /* 2^14 (RFC 8446 §5.1) */
#define HS_CLIENT_HELLO 1
#define HS_HEADER 4
#define EXT_SERVER_NAME 0
#define SNI_HOST_NAME 0

static int fail(int r, const char **why, const char *text) {
        *why = text;
        return r;
}

/* A bounded reader over the reassembled message. */
struct rd {
        const uint8_t *p;
        size_t n;
        bool bad;
};

static uint32_t rd_uint(struct rd *r, size_t bytes) {
        if (r->bad || r->n < bytes) {
                r->bad = true;
                return 0;
        }
        uint32_t v = 0;
        for (size_t i = 0; i < bytes; i++)
                v = v << 8 | r->p[i];
        r->p += bytes;
        r->n -= bytes;
        return v;
}

/* Takes the next n bytes as a reader of their own. */
static struct rd rd_sub(struct rd *r, size_t n) {
        if (r->bad || r->n < n) {
                r->bad = true;
                return (struct rd){.bad = true};
        }
        struct rd s = {.p = r->p, .n = n};
        r->p += n;
        r->n -= n;
        return s;
}

/* Walks the records at data: fills msg (when not NULL) with up to want
 * bytes of handshake payload, and returns how many are there (<= want), or
 * -EBADMSG / -E2BIG. */
static ssize_t gather(const uint8_t *data, size_t len, uint8_t *msg, size_t want, const char **why) {
        size_t pos = 0, got = 0;
        while (got < want && pos + REC_HEADER <= len) {
                const uint8_t *h = data + pos;
                size_t n = (size_t)h[3] << 8 | h[4];
                if (h[0] != REC_HANDSHAKE)
                        return fail(-EBADMSG, why, (pos == 0 && (h[0] & 0x80)) ? "an SSLv2 hello, not TLS"
                                                                             : "not a TLS handshake record");
                if (h[1] != 3)
                        return fail(-EBADMSG, why, "not a TLS record version");
                if (n == 0 || n > REC_PAYLOAD_MAX)
                        return fail(-EBADMSG, why, "a TLS record of a length TLS forbids");
                pos += REC_HEADER;
                size_t have = len - pos < n ? len - pos : n;
                size_t take = want - got < have ? want - got : have;
                if (msg)
                        memcpy(msg + got, data + pos, take);
                got += take;
                pos += n;
        }
        if (pos > EGRESS_HELLO_RAW_MAX) /* counting the whole of the last record */
                return fail(-E2BIG, why, "the ClientHello's records are too large");
        return (ssize_t)got;
}

static int parse_server_name(struct rd ext, char sni[EGRESS_HOST_MAX + 1], bool *found, const char **why) {
        struct rd list = rd_sub(&ext, rd_uint(&ext, 2));
        if (ext.bad || ext.n != 0 || list.n == 0)
                return fail(-EBADMSG, why, "a malformed server_name extension");
        while (list.n > 0) {
                uint32_t type = rd_uint(&list, 1);
                struct rd name = rd_sub(&list, rd_uint(&list, 2));
                if (list.bad || name.n == 0)
                        return fail(-EBADMSG, why, "a malformed server_name extension");
                if (type != SNI_HOST_NAME)
                        return fail(-EBADMSG, why, "a server name of a type other than host_name");
                if (*found)
                        return fail(-EBADMSG, why, "more than one host_name");
                *found = true;
                char tmp[EGRESS_HOST_MAX + 2];
                if (name.n > EGRESS_HOST_MAX + 1)
                        return fail(-EINVAL, why, "a server name that is not a DNS host name");
                memcpy(tmp, name.p, name.n);
                tmp[name.n] = 0;
                if (memchr(name.p, 0, name.n) || egress_is_ip_literal(tmp))
                        return fail(-EINVAL, why, "a server name that is an IP address");
                if (egress_name_normalize(tmp, name.n, sni) < 0)
                        return fail(-EINVAL, why, "a server name that is not a DNS host name");
        }
        return 0;
}

/* The body of a ClientHello (after its 4-byte header). seen: 65536 bits. */
static int parse_client_hello(struct rd b, uint8_t *seen, char sni[EGRESS_HOST_MAX + 1], const char **why) {
        uint32_t version = rd_uint(&b, 2);
        (void)rd_sub(&b, 32); /* random */
        struct rd session = rd_sub(&b, rd_uint(&b, 1));
        struct rd suites = rd_sub(&b, rd_uint(&b, 2));
        struct rd compression = rd_sub(&b, rd_uint(&b, 1));
        if (b.bad || version >> 8 != 3 || session.n > 32 || suites.n < 2 || suites.n % 2 || compression.n < 1)
                return fail(-EBADMSG, why, "a malformed ClientHello");
        if (b.n == 0)
                return fail(-ENOENT, why, "a ClientHello without extensions, so without a server name");
        struct rd exts = rd_sub(&b, rd_uint(&b, 2));
        if (b.bad || b.n != 0)
                return fail(-EBADMSG, why, "a malformed ClientHello");
        bool found = false;
        while (exts.n > 0) {
                uint32_t type = rd_uint(&exts, 2);
                struct rd ext = rd_sub(&exts, rd_uint(&exts, 2));
                if (exts.bad)
                        return fail(-EBADMSG, why, "a malformed extension");
                if (seen[type / 8] & (1u << (type % 8)))
                        return fail(-EBADMSG, why, "an extension sent twice");
                seen[type / 8] |= (uint8_t)(1u << (type % 8));
                if (type == EXT_SERVER_NAME) {
                        int r = parse_server_name(ext, sni, &found, why);
                        if (r < 0)
                                return r;
                }
        }
        if (!found)
                return fail(-ENOENT, why, "no server name (SNI)");
        return 0;
}

int egress_hello_parse(const uint8_t *data, size_t len, char sni[EGRESS_HOST_MAX + 1], const char **why) {
        if (len > 0 && data[0] != REC_HANDSHAKE)
                return fail(-EBADMSG, why, (data[0] & 0x80) ? "an SSLv2 hello, not TLS" : "not a TLS handshake record");
        uint8_t head[HS_HEADER];
        ssize_t got = gather(data, len, head, HS_HEADER, why);
        if (got < 0)
                return (int)got;
        if (got < HS_HEADER)
                return len > EGRESS_HELLO_RAW_MAX ? fail(-E2BIG, why, "the ClientHello's records are too large")
                                                  : -EAGAIN;
        if (head[0] != HS_CLIENT_HELLO)
                return fail(-EBADMSG, why, "the first handshake message is not a ClientHello");
        size_t body = (size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3];
        if (HS_HEADER + body > EGRESS_HELLO_MAX)
                return fail(-E2BIG, why, "the ClientHello is too large");
        size_t want = HS_HEADER + body;
        /* Complete yet? Counting costs no copy. */
        got = gather(data, len, NULL, want, why);
        if (got < 0)
                return (int)got;
        if ((size_t)got < want)
                return len > EGRESS_HELLO_RAW_MAX ? fail(-E2BIG, why, "the ClientHello's records are too large")
                                                  : -EAGAIN;
        _cleanup_free_ uint8_t *msg = malloc(want + 65536 / 8);
        if (!msg)
                return fail(-ENOMEM, why, "out of memory");
        uint8_t *seen = msg + want;
        memset(seen, 0, 65536 / 8);
        (void)gather(data, len, msg, want, why);
        char name[EGRESS_HOST_MAX + 1];
        int r = parse_client_hello((struct rd){.p = msg + HS_HEADER, .n = body}, seen, name, why);
        if (r < 0)
                return r;
        memcpy(sni, name, strlen(name) + 1);
        return 0;
}
