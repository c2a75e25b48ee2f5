/* tlshello.h — hand-built TLS ClientHello bytes for tests and benches: with
 * a given server name (or none, or two), padded to a size, split into
 * handshake records of a given size. The message is what a TLS 1.3 client
 * sends (version, random, session id, suites, compression, extensions);
 * only its framing and server_name matter to the proxy.
 *
 * Header-only (static functions), for test and bench binaries. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct tlshello {
        const char *sni;       /* the host_name; NULL: no server_name extension */
        const char *sni2;      /* a second host_name in the same extension, or NULL */
        unsigned sni_type;     /* the name's type (0: host_name) */
        size_t pad;            /* bytes of a padding extension (21); 0: none */
        size_t record_max;     /* payload bytes per record; 0: 16384 */
        bool dup_extension;    /* send supported_versions twice */
};

static size_t tlshello_put(uint8_t *out, size_t at, size_t max, const void *data, size_t n) {
        if (out && n <= max && at <= max - n)
                memcpy(out + at, data, n);
        return at + n;
}

static size_t tlshello_u16(uint8_t *out, size_t at, size_t max, size_t v) {
        uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
        return tlshello_put(out, at, max, b, 2);
}

/* The handshake message (header and body) into msg: its length (the
 * message is complete only when that is <= max). */
static size_t tlshello_message(const struct tlshello *o, uint8_t *msg, size_t max) {
        static const uint8_t fixed[] = {
                0x03, 0x03, /* legacy_version */
                1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                29, 30, 31, 32, /* random */
                0,              /* session id */
                0, 6, 0x13, 0x01, 0x13, 0x02, 0x13, 0x03, /* cipher suites */
                1, 0, /* compression: null */
        };
        static const uint8_t versions[] = {0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04};
        static const uint8_t groups[] = {0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x1d};
        size_t at = 4;
        at = tlshello_put(msg, at, max, fixed, sizeof fixed);
        size_t ext_len_at = at;
        at += 2;
        if (o->sni) {
                size_t n1 = strlen(o->sni), n2 = o->sni2 ? strlen(o->sni2) : 0;
                size_t list = 3 + n1 + (o->sni2 ? 3 + n2 : 0);
                at = tlshello_u16(msg, at, max, 0); /* server_name */
                at = tlshello_u16(msg, at, max, list + 2);
                at = tlshello_u16(msg, at, max, list);
                uint8_t type = (uint8_t)o->sni_type;
                at = tlshello_put(msg, at, max, &type, 1);
                at = tlshello_u16(msg, at, max, n1);
                at = tlshello_put(msg, at, max, o->sni, n1);
                if (o->sni2) {
                        type = 0;
                        at = tlshello_put(msg, at, max, &type, 1);
                        at = tlshello_u16(msg, at, max, n2);
                        at = tlshello_put(msg, at, max, o->sni2, n2);
                }
        }
        at = tlshello_put(msg, at, max, versions, sizeof versions);
        if (o->dup_extension)
                at = tlshello_put(msg, at, max, versions, sizeof versions);
        at = tlshello_put(msg, at, max, groups, sizeof groups);
        if (o->pad) {
                at = tlshello_u16(msg, at, max, 21);
                at = tlshello_u16(msg, at, max, o->pad);
                for (size_t i = 0; i < o->pad; i++) {
                        uint8_t z = 0;
                        at = tlshello_put(msg, at, max, &z, 1);
                }
        }
        size_t body = at - 4, exts = at - ext_len_at - 2;
        if (at <= max) {
                msg[0] = 1; /* ClientHello */
                msg[1] = (uint8_t)(body >> 16);
                msg[2] = (uint8_t)(body >> 8);
                msg[3] = (uint8_t)body;
                msg[ext_len_at] = (uint8_t)(exts >> 8);
                msg[ext_len_at + 1] = (uint8_t)exts;
        }
        return at;
}

/* The records carrying the message into out: their length (complete only
 * when <= max), or 0 when the message itself passes 64 KiB. Not
 * thread-safe (one static scratch buffer). */
static size_t tlshello_build(const struct tlshello *o, uint8_t *out, size_t max) {
        static uint8_t msg[1 << 16];
        size_t len = tlshello_message(o, msg, sizeof msg);
        if (len > sizeof msg)
                return 0;
        size_t per = o->record_max ? o->record_max : 16384, at = 0;
        for (size_t off = 0; off < len; off += per) {
                size_t n = len - off < per ? len - off : per;
                uint8_t h[5] = {22, 3, 1, (uint8_t)(n >> 8), (uint8_t)n};
                at = tlshello_put(out, at, max, h, 5);
                at = tlshello_put(out, at, max, msg + off, n);
        }
        return at;
}
