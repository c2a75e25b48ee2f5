/* tz.c — a time zone's UTC offset at any instant, read from the TZ
 * database (/usr/share/zoneinfo/<Olson name>, RFC 8536 TZif version 2 or
 * later): its 64-bit transitions, and past the last one the footer's POSIX
 * TZ rule (zic's "slim" files end their transitions early and leave the
 * future to that rule). No libc time-zone state is touched (TZ, tzset):
 * the kernel is threaded, and each schedule has a zone of its own. */
#include "schedule/schedule.h"
#include "base/fileio.h"

#include <ctype.h>
#include <fcntl.h>

#define TZ_FILE_MAX (256 * 1024)
#define TZ_TRANSITIONS_MAX 8192
#define TZ_TYPES_MAX 256
#define TZ_OFFSET_MAX (26 * 3600) /* RFC 8536: |utoff| < 25 h, rules up to 24:59:59 + 1 h */

struct tz_date {
        char kind;    /* 'J' (1..365, no Feb 29), 'n' (0..365), 'M' (month.week.day) */
        int m, w, d;  /* 'M': month 1-12, week 1-5 (5: the last), weekday 0-6 (Sunday 0); else d: the day */
        int32_t time; /* seconds after local midnight (may be negative or past 24 h) */
};

struct sched_tz {
        char name[SCHED_TZ_NAME_MAX + 1];
        size_t n;
        int64_t *at;       /* transitions, ascending */
        int32_t *off;      /* the offset from at[i] on */
        int32_t initial;   /* before at[0] (time type 0) */
        bool has_rule, rule_dst;
        int32_t std_off, dst_off; /* seconds east of UTC */
        struct tz_date start, end;
};

/* ---- civil calendar arithmetic (proleptic Gregorian, no libc) ---- */

int64_t sched_days_from_civil(int64_t y, int m, int d) {
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

void sched_civil_from_days(int64_t z, int64_t *ret_y, int *ret_m, int *ret_d) {
        z += 719468;
        int64_t era = (z >= 0 ? z : z - 146096) / 146097;
        int64_t doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        int64_t mp = (5 * doy + 2) / 153;
        int d = (int)(doy - (153 * mp + 2) / 5 + 1);
        int m = (int)(mp < 10 ? mp + 3 : mp - 9);
        *ret_y = yoe + era * 400 + (m <= 2);
        *ret_m = m;
        *ret_d = d;
}

static int64_t floor_div(int64_t a, int64_t b) {
        return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

int sched_weekday(int64_t days) { /* 1970-01-01 was a Thursday (4) */
        return (int)(((days % 7) + 11) % 7);
}

static bool leap_year(int64_t y) {
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int sched_days_in_month(int64_t y, int m) {
        static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        return m == 2 && leap_year(y) ? 29 : days[m - 1];
}

/* The local seconds (since the epoch, as if UTC) a rule's date starts in year y. */
static int64_t rule_local(const struct tz_date *r, int64_t y) {
        int64_t day;
        if (r->kind == 'J')
                day = sched_days_from_civil(y, 1, 1) + r->d - 1 + (leap_year(y) && r->d >= 60);
        else if (r->kind == 'n')
                day = sched_days_from_civil(y, 1, 1) + r->d;
        else {
                int64_t first = sched_days_from_civil(y, r->m, 1);
                int dom = 1 + (r->d - sched_weekday(first) + 7) % 7 + (r->w - 1) * 7;
                while (dom > sched_days_in_month(y, r->m))
                        dom -= 7;
                day = first + dom - 1;
        }
        return day * 86400 + r->time;
}

static int32_t rule_offset(const struct sched_tz *z, int64_t t) {
        if (!z->rule_dst)
                return z->std_off;
        int64_t y;
        int m, d;
        sched_civil_from_days(floor_div(t + z->std_off, 86400), &y, &m, &d);
        int64_t start = rule_local(&z->start, y) - z->std_off; /* given in standard time */
        int64_t end = rule_local(&z->end, y) - z->dst_off;     /* given in daylight time */
        bool dst = start < end ? t >= start && t < end : !(t >= end && t < start);
        return dst ? z->dst_off : z->std_off;
}

int32_t sched_tz_offset(const struct sched_tz *z, int64_t t) {
        if (!z)
                return 0;
        if (z->n == 0 || t < z->at[0])
                return z->n == 0 && z->has_rule ? rule_offset(z, t) : z->initial;
        if (t >= z->at[z->n - 1] && z->has_rule)
                return rule_offset(z, t);
        size_t lo = 0, hi = z->n; /* the last at[i] <= t */
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                if (z->at[mid] <= t)
                        lo = mid;
                else
                        hi = mid;
        }
        return z->off[lo];
}

const char *sched_tz_name(const struct sched_tz *z) {
        return z ? z->name : "UTC";
}

/* ---- the POSIX TZ footer ---- */

static bool parse_num(const char **p, int max_digits, int *ret) {
        int v = 0, n = 0;
        while (isdigit((unsigned char)**p) && n < max_digits) {
                v = v * 10 + (**p - '0');
                (*p)++;
                n++;
        }
        if (n == 0 || isdigit((unsigned char)**p))
                return false;
        *ret = v;
        return true;
}

/* [+-]hh[:mm[:ss]], hours up to 167 (RFC 8536's extension). */
static bool parse_hms(const char **p, int32_t *ret) {
        int sign = 1, h = 0, m = 0, s = 0;
        if (**p == '+' || **p == '-')
                sign = *(*p)++ == '-' ? -1 : 1;
        if (!parse_num(p, 3, &h) || h > 167)
                return false;
        if (**p == ':' && (++*p, !parse_num(p, 2, &m) || m > 59))
                return false;
        if (**p == ':' && (++*p, !parse_num(p, 2, &s) || s > 59))
                return false;
        *ret = sign * (h * 3600 + m * 60 + s);
        return true;
}

static bool parse_abbr(const char **p) {
        const char *s = *p;
        if (*s == '<') {
                const char *e = strchr(s, '>');
                if (!e || e - s < 4)
                        return false;
                *p = e + 1;
                return true;
        }
        while (isalpha((unsigned char)**p))
                (*p)++;
        return *p - s >= 3;
}

static bool parse_date(const char **p, struct tz_date *ret) {
        struct tz_date r = {.time = 7200};
        if (**p == 'M') {
                (*p)++;
                r.kind = 'M';
                if (!parse_num(p, 2, &r.m) || r.m < 1 || r.m > 12 || *(*p)++ != '.' || !parse_num(p, 1, &r.w) ||
                    r.w < 1 || r.w > 5 || *(*p)++ != '.' || !parse_num(p, 1, &r.d) || r.d > 6)
                        return false;
        } else if (**p == 'J') {
                (*p)++;
                r.kind = 'J';
                if (!parse_num(p, 3, &r.d) || r.d < 1 || r.d > 365)
                        return false;
        } else {
                r.kind = 'n';
                if (!parse_num(p, 3, &r.d) || r.d > 365)
                        return false;
        }
        if (**p == '/' && (++*p, !parse_hms(p, &r.time)))
                return false;
        *ret = r;
        return true;
}

/* std offset [dst [offset] ,start[/time],end[/time]]; an empty footer
 * (no rule) is fine. */
static int parse_footer(struct sched_tz *z, const char *s) {
        if (!*s)
                return 0;
        const char *p = s;
        int32_t std = 0, dst;
        if (!parse_abbr(&p) || !parse_hms(&p, &std))
                return -EINVAL;
        z->std_off = -std; /* POSIX counts west of Greenwich */
        z->has_rule = true;
        if (!*p)
                return 0;
        if (!parse_abbr(&p))
                return -EINVAL;
        z->dst_off = z->std_off + 3600;
        if (*p && *p != ',') {
                if (!parse_hms(&p, &dst))
                        return -EINVAL;
                z->dst_off = -dst;
        }
        if (*p++ != ',' || !parse_date(&p, &z->start) || *p++ != ',' || !parse_date(&p, &z->end) || *p)
                return -EINVAL;
        z->rule_dst = true;
        return 0;
}

/* ---- TZif ---- */

static uint32_t be32(const unsigned char *p) {
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p) {
        return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_counts {
        uint32_t isut, isstd, leap, time, type, chars;
};

static int tzif_header(const unsigned char *d, size_t len, size_t off, struct tzif_counts *ret) {
        if (len < off + 44 || memcmp(d + off, "TZif", 4) != 0)
                return -EINVAL;
        const unsigned char *c = d + off + 20;
        *ret = (struct tzif_counts){be32(c), be32(c + 4), be32(c + 8), be32(c + 12), be32(c + 16), be32(c + 20)};
        if (ret->time > TZ_TRANSITIONS_MAX || ret->type < 1 || ret->type > TZ_TYPES_MAX || ret->chars > 4096 ||
            ret->leap > 1024 || (ret->isut && ret->isut != ret->type) || (ret->isstd && ret->isstd != ret->type))
                return -EINVAL;
        return 0;
}

int sched_tz_parse(const char *name, const void *data, size_t len, struct sched_tz **ret) {
        const unsigned char *d = data;
        struct tzif_counts c;
        if (!name || strlen(name) > SCHED_TZ_NAME_MAX || !data || tzif_header(d, len, 0, &c) < 0 || d[4] < '2')
                return -EINVAL;
        size_t v1 = (size_t)c.time * 5 + (size_t)c.type * 6 + c.chars + (size_t)c.leap * 8 + c.isstd + c.isut;
        size_t h2 = 44 + v1;
        if (tzif_header(d, len, h2, &c) < 0)
                return -EINVAL;
        size_t p = h2 + 44;
        size_t need = (size_t)c.time * 9 + (size_t)c.type * 6 + c.chars + (size_t)c.leap * 12 + c.isstd + c.isut;
        if (len < p + need + 2)
                return -EINVAL;
        _cleanup_free_ struct sched_tz *z = calloc(1, sizeof *z);
        if (!z)
                return -ENOMEM;
        snprintf(z->name, sizeof z->name, "%s", name);
        const unsigned char *times = d + p, *idx = times + (size_t)c.time * 8, *types = idx + c.time;
        int32_t offs[TZ_TYPES_MAX];
        for (uint32_t i = 0; i < c.type; i++) {
                offs[i] = (int32_t)be32(types + i * 6);
                if (offs[i] <= -TZ_OFFSET_MAX || offs[i] >= TZ_OFFSET_MAX)
                        return -EINVAL;
        }
        z->initial = offs[0];
        if (c.time && (!(z->at = calloc(c.time, sizeof *z->at)) || !(z->off = calloc(c.time, sizeof *z->off)))) {
                free(z->at);
                return -ENOMEM;
        }
        z->n = c.time;
        int r = 0;
        for (uint32_t i = 0; i < c.time && r == 0; i++) {
                z->at[i] = be64(times + (size_t)i * 8);
                if (idx[i] >= c.type || (i && z->at[i] <= z->at[i - 1]))
                        r = -EINVAL;
                else
                        z->off[i] = offs[idx[i]];
        }
        /* The footer: "\n<POSIX TZ>\n" right after the v2 data. */
        const char *f = (const char *)d + p + need;
        size_t flen = len - p - need;
        const char *nl = flen > 1 && f[0] == '\n' ? memchr(f + 1, '\n', flen - 1) : NULL;
        char rule[128];
        if (r == 0 && (!nl || (size_t)(nl - f - 1) >= sizeof rule))
                r = -EINVAL;
        if (r == 0) {
                memcpy(rule, f + 1, (size_t)(nl - f - 1));
                rule[nl - f - 1] = 0;
                r = parse_footer(z, rule);
        }
        if (r == 0 && z->has_rule &&
            (z->std_off <= -TZ_OFFSET_MAX || z->std_off >= TZ_OFFSET_MAX || z->dst_off <= -TZ_OFFSET_MAX ||
             z->dst_off >= TZ_OFFSET_MAX))
                r = -EINVAL;
        if (r < 0) {
                free(z->at);
                free(z->off);
                return r;
        }
        *ret = TAKE_PTR(z);
        return 0;
}

bool sched_tz_name_valid(const char *name) {
        if (strempty(name) || strlen(name) > SCHED_TZ_NAME_MAX || name[0] == '/')
                return false;
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && !strchr("_+-/", *p))
                        return false;
        /* Every component starts with a letter or a digit (no "..", no "-x"). */
        for (const char *p = name; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL)
                if (!isalnum((unsigned char)*p))
                        return false;
        return true;
}

int sched_tz_load(const char *name, struct sched_tz **ret) {
        if (!sched_tz_name_valid(name))
                return -EINVAL;
        _cleanup_free_ char *path = NULL, *data = NULL;
        size_t len = 0;
        if (xasprintf(&path, "%s/%s", SCHED_TZ_DIR, name) < 0)
                return -ENOMEM;
        int r = read_file(path, TZ_FILE_MAX, &data, &len);
        if (r < 0)
                return r == -ENOMEM ? r : -ENOENT;
        return sched_tz_parse(name, data, len, ret);
}

void sched_tz_free(struct sched_tz *z) {
        if (!z)
                return;
        free(z->at);
        free(z->off);
        free(z);
}
