/* spec.c — schedules as text: "every N m|h|d" and 5-field cron in a time
 * zone, parsed, bounded and turned into the next due instant. */
#include "schedule/schedule.h"

#include <ctype.h>

struct sched_spec {
        int64_t every_s; /* > 0: "every"; 0: cron */
        uint64_t field[5];
        bool dom_star, dow_star;
        struct sched_tz *tz; /* NULL: UTC */
};

/* The five cron fields: minute, hour, day of month, month, day of week. */
static const struct cron_field {
        const char *name;
        int min, max;
        const char *const *names; /* 3-letter names, from min */
} cron_fields[5] = {
        {"minute", 0, 59, NULL},
        {"hour", 0, 23, NULL},
        {"day of month", 1, 31, NULL},
        {"month", 1, 12, (const char *const[]){"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                               "nov", "dec", NULL}},
        {"day of week", 0, 7, (const char *const[]){"sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL}},
};

enum { F_MIN, F_HOUR, F_DOM, F_MON, F_DOW };

static const struct every_unit {
        char unit;
        int64_t seconds;
} every_units[] = {
        {'m', 60},
        {'h', 3600},
        {'d', 86400},
};

void sched_spec_free(struct sched_spec *s) {
        if (!s)
                return;
        sched_tz_free(s->tz);
        free(s);
}

/* A number or (fields with names) a 3-letter name; advances *p. */
static int field_value(const struct cron_field *f, const char **p, int *ret) {
        if (isdigit((unsigned char)**p)) {
                int v = 0, n = 0;
                for (; isdigit((unsigned char)**p); (*p)++)
                        if (++n > 2)
                                return -EINVAL;
                        else
                                v = v * 10 + (**p - '0');
                if (v < f->min || v > f->max)
                        return -ERANGE;
                *ret = v;
                return 0;
        }
        for (size_t i = 0; f->names && f->names[i]; i++)
                if (strncasecmp(*p, f->names[i], 3) == 0 && !isalpha((unsigned char)(*p)[3])) {
                        *p += 3;
                        *ret = f->min + (int)i;
                        return 0;
                }
        return -EINVAL;
}

/* One field: a comma list of *, N, N-M, each optionally /STEP. */
static int parse_field(const struct cron_field *f, const char *text, uint64_t *ret, char **ret_error) {
        uint64_t bits = 0;
        const char *p = text;
        for (;;) {
                int lo = f->min, hi = f->max, step = 1, k;
                bool range = false;
                if (*p == '*') {
                        p++;
                        range = true;
                } else {
                        if ((k = field_value(f, &p, &lo)) < 0)
                                return errorf(-EINVAL, ret_error, "%s '%s': %s", f->name, text,
                                              k == -ERANGE ? "a value is out of range" : "not a value");
                        hi = lo;
                        if (*p == '-') {
                                p++;
                                range = true;
                                if ((k = field_value(f, &p, &hi)) < 0 || hi < lo)
                                        return errorf(-EINVAL, ret_error, "%s '%s': a bad range", f->name, text);
                        }
                }
                if (*p == '/') {
                        p++;
                        if (!isdigit((unsigned char)*p))
                                return errorf(-EINVAL, ret_error, "%s '%s': a bad step", f->name, text);
                        step = 0;
                        for (int n = 0; isdigit((unsigned char)*p); p++)
                                if (++n > 2)
                                        return errorf(-EINVAL, ret_error, "%s '%s': a bad step", f->name, text);
                                else
                                        step = step * 10 + (*p - '0');
                        if (step < 1 || step > f->max - f->min + 1)
                                return errorf(-EINVAL, ret_error, "%s '%s': a bad step", f->name, text);
                        if (!range) /* "N/S": from N to the end */
                                hi = f->max;
                }
                for (int v = lo; v <= hi; v += step)
                        bits |= UINT64_C(1) << v;
                if (*p == 0)
                        break;
                if (*p++ != ',' || *p == 0)
                        return errorf(-EINVAL, ret_error, "%s '%s': not a list of values", f->name, text);
        }
        *ret = bits;
        return 0;
}

static int parse_every(const char *s, struct sched_spec *spec, char **ret_error) {
        const char *p = s + strlen("every");
        while (*p == ' ')
                p++;
        int64_t n = 0;
        int digits = 0;
        for (; isdigit((unsigned char)*p); p++)
                if (++digits > 6)
                        return errorf(-EINVAL, ret_error, "'%s': the number is too large", s);
                else
                        n = n * 10 + (*p - '0');
        while (*p == ' ')
                p++;
        const struct every_unit *u = NULL;
        for (size_t i = 0; i < ARRAY_SIZE(every_units); i++)
                if (p[0] == every_units[i].unit && p[1] == 0)
                        u = &every_units[i];
        if (digits == 0 || !u)
                return errorf(-EINVAL, ret_error, "'%s': write every N m, every N h or every N d", s);
        int64_t sec = n * u->seconds;
        if (sec < SCHED_EVERY_MIN_S || sec > SCHED_EVERY_MAX_S)
                return errorf(-ERANGE, ret_error, "'%s': the interval must be 1 minute to 366 days", s);
        spec->every_s = sec;
        return 0;
}

static int parse_cron(const char *s, struct sched_spec *spec, char **ret_error) {
        _cleanup_free_ char *copy = strdup(s);
        if (!copy)
                return -ENOMEM;
        char *save = NULL, *tok[6] = {0};
        size_t n = 0;
        for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
                if (n < ARRAY_SIZE(tok))
                        tok[n++] = t;
                else
                        break;
        if (n != 5)
                return errorf(-EINVAL, ret_error,
                              "'%s': a cron schedule has 5 fields (minute hour day-of-month month day-of-week)", s);
        for (size_t i = 0; i < 5; i++) {
                int r = parse_field(&cron_fields[i], tok[i], &spec->field[i], ret_error);
                if (r < 0)
                        return r;
        }
        if (spec->field[F_DOW] & (UINT64_C(1) << 7)) /* 7 is Sunday too */
                spec->field[F_DOW] = (spec->field[F_DOW] | 1) & ~(UINT64_C(1) << 7);
        spec->dom_star = tok[F_DOM][0] == '*';
        spec->dow_star = tok[F_DOW][0] == '*';
        /* A date that never comes (e.g. 30 2 or 31 4) would never run. */
        bool any = spec->dom_star || !spec->dow_star; /* else the day of the month alone decides */
        for (int m = 1; m <= 12 && !any; m++)
                if (spec->field[F_MON] & (UINT64_C(1) << m))
                        for (int d = 1; d <= sched_days_in_month(2000, m); d++)
                                any = any || (spec->field[F_DOM] & (UINT64_C(1) << d));
        if (!any)
                return errorf(-EINVAL, ret_error, "'%s': no such day ever comes", s);
        return 0;
}

int sched_spec_parse(const char *text, const char *tz, struct sched_spec **ret, char **ret_error) {
        if (!text || !ret)
                return -EINVAL;
        if (strlen(text) > SCHED_SPEC_MAX)
                return errorf(-EINVAL, ret_error, "a schedule is at most %d characters", SCHED_SPEC_MAX);
        _cleanup_(sched_spec_freep) struct sched_spec *s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        int r = startswith(text, "every") ? parse_every(text, s, ret_error) : parse_cron(text, s, ret_error);
        if (r < 0)
                return r;
        if (!strempty(tz) && !streq(tz, "UTC") && (r = sched_tz_load(tz, &s->tz)) < 0)
                return r == -ENOMEM ? r
                                    : errorf(-EINVAL, ret_error, "'%s' is not a time zone of the TZ database "
                                                                 "(e.g. Europe/Paris, America/New_York, UTC)", tz);
        *ret = TAKE_PTR(s);
        return 0;
}

const struct sched_tz *sched_spec_tz(const struct sched_spec *s) {
        return s ? s->tz : NULL;
}

/* ---- the next run ---- */

static bool has(uint64_t bits, int v) {
        return bits & (UINT64_C(1) << v);
}

static bool day_matches(const struct sched_spec *s, int64_t days, int dom) {
        bool d = has(s->field[F_DOM], dom), w = has(s->field[F_DOW], sched_weekday(days));
        if (s->dom_star || s->dow_star) /* one restricted: it decides (both *: both match) */
                return s->dom_star ? w : d;
        return d || w; /* both restricted: either (cron's rule) */
}

/* The first local time (seconds since the epoch as if UTC) strictly after
 * local that matches, or -ERANGE past SCHED_SEARCH_YEARS. */
static int next_local(const struct sched_spec *s, int64_t local, int64_t *ret) {
        int64_t start = (local / 60 - (local % 60 < 0) + 1) * 60; /* a whole minute, strictly after */
        int64_t day = start / 86400 - (start % 86400 < 0);
        int first_min = (int)((start - day * 86400) / 60);
        for (int64_t i = 0; i < SCHED_SEARCH_YEARS * 366; i++, day++, first_min = 0) {
                int64_t y;
                int m, d;
                sched_civil_from_days(day, &y, &m, &d);
                if (!has(s->field[F_MON], m) || !day_matches(s, day, d))
                        continue;
                for (int h = first_min / 60; h < 24; h++) {
                        if (!has(s->field[F_HOUR], h))
                                continue;
                        int mi0 = h == first_min / 60 ? first_min % 60 : 0;
                        for (int mi = mi0; mi < 60; mi++)
                                if (has(s->field[F_MIN], mi)) {
                                        *ret = day * 86400 + h * 3600 + mi * 60;
                                        return 0;
                                }
                }
        }
        return -ERANGE;
}

int sched_local_to_utc(const struct sched_tz *tz, int64_t local, int64_t *ret, enum sched_local *ret_kind) {
        /* Offsets change at most once within two days around any instant
         * of the TZ database's future (and its past we do not schedule). */
        int32_t before = sched_tz_offset(tz, local - 2 * 86400), after = sched_tz_offset(tz, local + 2 * 86400);
        int64_t u1 = local - before, u2 = local - after;
        bool v1 = sched_tz_offset(tz, u1) == before, v2 = sched_tz_offset(tz, u2) == after;
        if (v1 && v2 && u1 != u2) {
                *ret = u1 < u2 ? u1 : u2;
                *ret_kind = SCHED_LOCAL_AMBIGUOUS;
                return 0;
        }
        if (v1 || v2) {
                *ret = v1 ? u1 : u2;
                *ret_kind = SCHED_LOCAL_EXACT;
                return 0;
        }
        if (after <= before)
                return -EINVAL; /* neither, without a gap: not a zone we understand */
        /* A gap (clocks go forward): the instant it ends, found between
         * u2 (still before, at the old offset) and u1 (after). */
        int64_t lo = u2, hi = u1;
        while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                if (sched_tz_offset(tz, mid) == after)
                        hi = mid;
                else
                        lo = mid;
        }
        *ret = hi;
        *ret_kind = SCHED_LOCAL_SKIPPED;
        return 0;
}

int sched_spec_next(const struct sched_spec *s, int64_t after, int64_t *ret) {
        if (!s || !ret)
                return -EINVAL;
        if (s->every_s) {
                *ret = after + s->every_s;
                return 0;
        }
        int64_t local = after + sched_tz_offset(s->tz, after);
        for (int tries = 0; tries < 4 * 24 * 60; tries++) {
                int64_t l, u;
                enum sched_local kind;
                int r = next_local(s, local, &l);
                if (r < 0)
                        return r;
                if ((r = sched_local_to_utc(s->tz, l, &u, &kind)) < 0)
                        return r;
                /* An ambiguous time's first instant only; a skipped one's
                 * end of the gap, once. */
                if (u > after) {
                        *ret = u;
                        return 0;
                }
                local = l;
        }
        return -ERANGE;
}

int64_t sched_spec_every(const struct sched_spec *s) {
        return s ? s->every_s : 0;
}

int sched_spec_min_gap(const struct sched_spec *s, int64_t from, int samples, int64_t *ret) {
        if (!s || samples < 2 || !ret)
                return -EINVAL;
        if (s->every_s) {
                *ret = s->every_s;
                return 0;
        }
        int64_t prev = 0, t = from, gap = INT64_MAX;
        for (int i = 0; i < samples; i++) {
                int r = sched_spec_next(s, t, &t);
                if (r < 0)
                        return r;
                if (i && t - prev < gap)
                        gap = t - prev;
                prev = t;
        }
        *ret = gap;
        return 0;
}
