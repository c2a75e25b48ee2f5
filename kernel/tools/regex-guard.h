/* regex-guard.h — compiling a POSIX extended regular expression someone else wrote
 * (the model's search pattern, a schema's pattern) without letting it take
 * the kernel's memory or time.
 *
 * glibc's regcomp() copies a repeated sub-expression once per repetition,
 * so stacked or nested repetitions grow exponentially while compiling:
 * "a" followed by 20 '+' took 13 s and 700 MB, 25 runs out of memory (found
 * by fuzz-tool-schema under libFuzzer). Before compiling, the pattern is
 * read and refused when it stacks repetition operators (a++, a*{2}: POSIX
 * leaves their meaning undefined), when its size once repetitions are
 * copied out would exceed TOOLS_REGEX_COST_MAX, or when it has a
 * back-reference (\1, a glibc extension whose matching is exponential). Private to kernel/tools
 * (and its tests). */
#pragma once

#include "base/base.h"

#include <regex.h>

#define TOOLS_REGEX_COST_MAX 20000 /* sub-expression copies regcomp may make */
#define TOOLS_REGEX_DEPTH_MAX 64   /* nested groups */

/* The size of pattern once its bounded repetitions are copied out (an
 * estimate from above), or -EINVAL with a static reason in *ret_why when it
 * stacks repetitions, has a back-reference, nests groups deeper than TOOLS_REGEX_DEPTH_MAX or its
 * size exceeds TOOLS_REGEX_COST_MAX. Syntax errors are left to regcomp. */
long tools_regex_cost(const char *pattern, const char **ret_why);

/* tools_regex_cost(), then regcomp(re, pattern, flags). 0 (the caller
 * regfree()s re), or -EINVAL with *ret_why: the reason above, or regcomp's
 * own message in why_buf (of why_size bytes). */
int tools_regex_compile(regex_t *re, const char *pattern, int flags, char *why_buf, size_t why_size,
                        const char **ret_why);
