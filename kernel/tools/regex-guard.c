/* regex-guard.c — see regex-guard.h. The reader follows glibc's ERE syntax closely
 * enough to bound what regcomp() builds: atoms (a character, an escaped one,
 * a bracket expression, '.', '^', '$'), groups, '|', and the repetition
 * operators '*', '+', '?' and "{m}", "{m,}", "{m,n}". */
#include "tools/regex-guard.h"

#include <ctype.h>

/* Skips a bracket expression starting at p ('['); returns the byte after
 * its ']', or NULL if it does not end (regcomp will say so). */
static const char *skip_bracket(const char *p) {
        p++;
        if (*p == '^')
                p++;
        if (*p == ']')
                p++; /* a leading ']' is a member */
        while (*p && *p != ']') {
                if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
                        char close = p[1];
                        const char *e = p + 2;
                        while (*e && !(e[0] == close && e[1] == ']'))
                                e++;
                        if (!*e)
                                return NULL;
                        p = e + 2;
                } else
                        p++;
        }
        return *p == ']' ? p + 1 : NULL;
}

/* Reads an interval "{m}", "{m,}", "{m,n}" at p ('{'): the largest count it
 * copies its operand (n, or m when unbounded, at least 1) in *ret_copies
 * and the byte after '}'; NULL when it is not an interval. */
static const char *read_interval(const char *p, long *ret_copies) {
        long m = 0, n = -1;
        const char *q = p + 1;
        if (!isdigit((unsigned char)*q))
                return NULL;
        for (; isdigit((unsigned char)*q); q++)
                if ((m = m * 10 + (*q - '0')) > 1000000)
                        m = 1000000;
        if (*q == ',') {
                q++;
                if (isdigit((unsigned char)*q)) {
                        n = 0;
                        for (; isdigit((unsigned char)*q); q++)
                                if ((n = n * 10 + (*q - '0')) > 1000000)
                                        n = 1000000;
                }
        } else
                n = m;
        if (*q != '}')
                return NULL;
        long copies = n > m ? n : m;
        *ret_copies = copies < 1 ? 1 : copies;
        return q + 1;
}

struct level {
        long total; /* the alternatives' sizes so far, and the current one's */
        long last;  /* the size of the last atom or group, 0 if none */
        bool repeated; /* the last atom already carries a repetition */
};

static long add(long a, long b) {
        return a > TOOLS_REGEX_COST_MAX || b > TOOLS_REGEX_COST_MAX ? TOOLS_REGEX_COST_MAX + 1 : a + b;
}

static long mul(long a, long b) {
        return a > (TOOLS_REGEX_COST_MAX + 1) / (b > 0 ? b : 1) ? TOOLS_REGEX_COST_MAX + 1 : a * b;
}

long tools_regex_cost(const char *pattern, const char **ret_why) {
        struct level stack[TOOLS_REGEX_DEPTH_MAX + 1] = {{0}};
        size_t depth = 0;
        const char *p = pattern;
        while (*p) {
                struct level *l = &stack[depth];
                long copies = 0;
                const char *next = NULL;
                if (*p == '*' || *p == '+' || *p == '?') {
                        copies = *p == '?' ? 1 : 2; /* a+ is aa*; a* and a? keep one copy */
                        next = p + 1;
                } else if (*p == '{')
                        next = read_interval(p, &copies);
                if (next) { /* a repetition of the last atom */
                        if (l->repeated) {
                                *ret_why = "stacked repetitions (like a++ or a*{2}) are not allowed";
                                return -EINVAL;
                        }
                        if (l->last > 0) {
                                long grown = mul(l->last, copies);
                                l->total = add(l->total - l->last, grown);
                                l->last = grown;
                        }
                        l->repeated = true;
                        p = next;
                } else if (*p == '(') {
                        if (depth >= TOOLS_REGEX_DEPTH_MAX) {
                                *ret_why = "groups are nested too deeply";
                                return -EINVAL;
                        }
                        stack[++depth] = (struct level){0};
                        p++;
                } else if (*p == ')' && depth > 0) {
                        long size = add(stack[depth].total, 1);
                        depth--;
                        l = &stack[depth];
                        l->total = add(l->total, size);
                        l->last = size;
                        l->repeated = false;
                        p++;
                } else if (*p == '|') {
                        l->last = 0;
                        l->repeated = false;
                        p++;
                } else {
                        if (*p == '[') {
                                const char *e = skip_bracket(p);
                                p = e ? e : p + strlen(p);
                        } else if (*p == '\\' && p[1] >= '1' && p[1] <= '9') {
                                *ret_why = "back-references are not allowed (matching them can take exponential time)";
                                return -EINVAL;
                        } else if (*p == '\\' && p[1])
                                p += 2;
                        else
                                p++;
                        l->total = add(l->total, 1);
                        l->last = 1;
                        l->repeated = false;
                }
                if (l->total > TOOLS_REGEX_COST_MAX) {
                        *ret_why = "too large once its repetitions are expanded";
                        return -EINVAL;
                }
        }
        long total = 0;
        for (size_t i = 0; i <= depth; i++)
                total = add(total, stack[i].total);
        if (total > TOOLS_REGEX_COST_MAX) {
                *ret_why = "too large once its repetitions are expanded";
                return -EINVAL;
        }
        return total;
}

int tools_regex_compile(regex_t *re, const char *pattern, int flags, char *why_buf, size_t why_size,
                        const char **ret_why) {
        if (tools_regex_cost(pattern, ret_why) < 0)
                return -EINVAL;
        int e = regcomp(re, pattern, flags);
        if (e != 0) {
                regerror(e, re, why_buf, why_size);
                *ret_why = why_buf;
                return -EINVAL;
        }
        return 0;
}
