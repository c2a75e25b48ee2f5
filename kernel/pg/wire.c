/* wire.c — the startup packet and the SASL offer, as wire.h says. */
#include "pg/wire.h"

#define PG_AUTH_SASL 10u

static uint32_t get32(const unsigned char *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put32(unsigned char *p, uint32_t v) {
        p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v;
}

static bool replication_off(const char *v) {
        return streq(v, "false") || streq(v, "0") || streq(v, "off") || streq(v, "no");
}

int pg_wire_startup_check(const unsigned char *pkt, size_t len, const struct pg_wire_who *who, const char **ret_why) {
        *ret_why = "malformed startup packet";
        if (!pkt || len < 9 || len > PG_WIRE_STARTUP_MAX || get32(pkt) != len || pkt[len - 1])
                return -EBADMSG;
        if (get32(pkt + 4) >> 16 != 3) {
                *ret_why = "the Seed's relay speaks protocol 3 only";
                return -EPERM;
        }
        const char *user = NULL, *database = NULL, *replication = NULL;
        size_t i = 8;
        while (pkt[i]) {
                /* key\0value\0 pairs; the packet ends with a NUL (checked above) */
                const char *key = (const char *)pkt + i;
                i += strlen(key) + 1;
                if (i >= len - 1)
                        return -EBADMSG;
                const char *value = (const char *)pkt + i;
                i += strlen(value) + 1;
                if (i > len - 1)
                        return -EBADMSG;
                if (streq(key, "user"))
                        user = value;
                else if (streq(key, "database"))
                        database = value;
                else if (streq(key, "replication"))
                        replication = value;
        }
        if (i != len - 1)
                return -EBADMSG;
        bool ours = false;
        for (size_t k = 0; user && k < who->n_users; k++)
                ours |= streq(user, who->users[k]);
        if (user && who->copy_prefix && startswith(user, who->copy_prefix) && user[strlen(who->copy_prefix)])
                ours = true;
        if (!ours) {
                *ret_why = "the Seed's relay carries only this Seed's own roles";
                return -EPERM;
        }
        const char *db = database && *database ? database : user; /* PostgreSQL's default */
        if (!startswith(db, who->db_prefix) || streq(db, who->kernel_db)) {
                *ret_why = "the Seed's relay carries connections to this Seed's own databases only";
                return -EPERM;
        }
        if (replication && !replication_off(replication)) {
                *ret_why = "the Seed's relay carries no replication connections";
                return -EPERM;
        }
        *ret_why = NULL;
        return 0;
}

int pg_wire_drop_scram_plus(unsigned char *msg, size_t n, size_t *ret_n) {
        if (!msg || n < 5 || get32(msg + 1) != n - 1 || n - 1 < 4)
                return -EBADMSG;
        if (msg[0] != 'R' || n < 9 || get32(msg + 5) != PG_AUTH_SASL) {
                *ret_n = n;
                return 0;
        }
        /* mechanisms: NUL-terminated names, then a NUL */
        size_t in = 9, out = 9;
        while (in < n && msg[in]) {
                const unsigned char *end = memchr(msg + in, 0, n - in);
                if (!end)
                        return -EBADMSG;
                size_t l = (size_t)(end - msg) - in + 1;
                if (!streq((const char *)msg + in, "SCRAM-SHA-256-PLUS")) {
                        memmove(msg + out, msg + in, l);
                        out += l;
                }
                in += l;
        }
        if (in != n - 1)
                return -EBADMSG;
        msg[out++] = 0;
        put32(msg + 1, (uint32_t)(out - 1));
        *ret_n = out;
        return 0;
}
