/* fuzz-schedule.c — kernel/schedule's parsers on arbitrary bytes.
 *
 * The first byte chooses:
 *   0  sched_spec_parse on the rest as a schedule (UTC); an accepted one
 *      must give next instants strictly after the last, a cron one on a
 *      whole minute
 *   1  sched_tz_parse on the rest as a TZif file; an accepted zone's
 *      offsets stay within a day and turning local times into instants
 *      never fails on them
 *   2  sched_tz_name_valid and sched_tz_load on the rest as a zone name: a
 *      name with ".." or a leading "/" is never accepted */
#include "schedule/schedule.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

static void spec(const char *text) {
        struct sched_spec *s = NULL;
        char *err = NULL;
        int r = sched_spec_parse(text, NULL, &s, &err);
        if (r < 0) {
                check(!s);
                free(err);
                return;
        }
        int64_t t = 1764748800; /* 2025-12-03 08:00 UTC */
        for (int i = 0; i < 8; i++) {
                int64_t next = 0;
                if (sched_spec_next(s, t, &next) < 0)
                        break;
                check(next > t);
                check(sched_spec_every(s) || next % 60 == 0);
                t = next;
        }
        sched_spec_free(s);
}

static void tzif(const uint8_t *data, size_t size) {
        struct sched_tz *z = NULL;
        if (sched_tz_parse("Fuzz/Zone", data, size, &z) < 0) {
                check(!z);
                return;
        }
        static const int64_t at[] = {-2208988800LL, 0, 1000000000, 1764748800, 4102444800LL, 7258118400LL};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
                int32_t off = sched_tz_offset(z, at[i]);
                check(off > -26 * 3600 && off < 26 * 3600);
                int64_t u;
                enum sched_local kind;
                (void)sched_local_to_utc(z, at[i], &u, &kind);
        }
        sched_tz_free(z);
}

static void zone_name(const char *name) {
        bool ok = sched_tz_name_valid(name);
        if (strstr(name, "..") || name[0] == '/')
                check(!ok);
        struct sched_tz *z = NULL;
        if (sched_tz_load(name, &z) == 0)
                sched_tz_free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 65536)
                return 0;
        uint8_t mode = data[0] % 3;
        data++;
        size--;
        if (mode == 1) {
                tzif(data, size);
                return 0;
        }
        char *text = strndup((const char *)data, size);
        if (!text)
                return 0;
        if (mode == 0)
                spec(text);
        else
                zone_name(text);
        free(text);
        return 0;
}
