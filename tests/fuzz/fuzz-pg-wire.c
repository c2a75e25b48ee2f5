/* fuzz-pg-wire.c — the PostgreSQL relay's reading of the wire protocol
 * (kernel/pg/wire.c) on arbitrary bytes.
 *
 * The first byte chooses:
 *   even  the rest as a client's startup packet's parameters (key\0value\0
 *         pairs), framed as protocol 3.0 with its true length, so mutations
 *         reach the pairs' parser; every fourth input is taken raw instead;
 *   odd   the rest as a server message (type, length, body), its length word
 *         set true every other input, for the SASL offer's rewrite.
 * Every answer is one of the documented ones; an accepted startup names one
 * of the Seed's roles and none of the others' databases; a rewritten SASL
 * offer is well formed, no longer, and offers no SCRAM-SHA-256-PLUS. */
#include "pg/wire.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static const char *const users[] = {"s_1_organism", "s_1_evolver", "s_1_reader"};
static const struct pg_wire_who who = {.users = users, .n_users = 3, .db_prefix = "s_1_", .kernel_db = "s_1_kernel",
                                       .copy_prefix = "s_1_preview_"};
static uint8_t buf[PG_WIRE_STARTUP_MAX + 16];

static void put32(uint8_t *p, uint32_t v) {
        p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static void startup(const uint8_t *data, size_t n, bool raw) {
        size_t len = raw ? n : 8 + n + 1;
        if (len > sizeof buf)
                return;
        if (raw)
                memcpy(buf, data, n);
        else {
                put32(buf, (uint32_t)len);
                put32(buf + 4, 3u << 16);
                memcpy(buf + 8, data, n);
                buf[len - 1] = 0;
        }
        const char *why = NULL;
        int r = pg_wire_startup_check(buf, len, &who, &why);
        check(r == 0 || r == -EPERM || r == -EBADMSG);
        check(r == 0 ? why == NULL : why != NULL);
}

static void server_message(const uint8_t *data, size_t n, bool fix_length) {
        if (n > sizeof buf)
                return;
        memcpy(buf, data, n);
        if (fix_length && n >= 5)
                put32(buf + 1, (uint32_t)(n - 1));
        size_t out = 0;
        int r = pg_wire_drop_scram_plus(buf, n, &out);
        check(r == 0 || r == -EBADMSG);
        if (r < 0)
                return;
        check(out <= n && out >= 5);
        if (buf[0] == 'R' && out >= 9 && buf[5] == 0 && buf[6] == 0 && buf[7] == 0 && buf[8] == 10) {
                check(buf[out - 1] == 0);
                for (size_t i = 9; i < out - 1; i += strlen((char *)buf + i) + 1)
                        check(strcmp((char *)buf + i, "SCRAM-SHA-256-PLUS") != 0);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        if (data[0] % 2 == 0)
                startup(data + 1, size - 1, data[0] % 8 == 6);
        else
                server_message(data + 1, size - 1, data[0] % 4 == 1);
        return 0;
}
