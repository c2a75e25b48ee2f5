/* fuzz-routines.c — kernel/routines' parser of organism/routines.yaml (the
 * organism writes it: outside input) and its quiet-answer check, on
 * arbitrary bytes. An accepted file's jobs must each hold what the
 * validation promises: a valid name, a path starting with '/' without
 * controls or spaces, a known method, at most ROUTINES_JOBS_MAX of them;
 * a refused one returns nothing and an error naming the file. */
#include "routines/routines.h"

#include <stdint.h>

#define check(cond)                                                            \
        do {                                                                   \
                if (!(cond))                                                   \
                        abort();                                               \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 65536)
                return 0;
        struct routines_job *jobs = NULL;
        size_t n = 0;
        char *err = NULL;
        int r = routines_jobs_parse((const char *)data, size, 1764748800, &jobs, &n, &err);
        if (r < 0) {
                check(!jobs && n == 0);
                check(!err || strncmp(err, "organism/routines.yaml", 22) == 0);
                free(err);
        } else {
                check(n <= ROUTINES_JOBS_MAX && !err);
                for (size_t i = 0; i < n; i++) {
                        check(routines_name_valid(jobs[i].name));
                        check(jobs[i].path[0] == '/' && strlen(jobs[i].path) <= ROUTINES_JOB_PATH_MAX);
                        for (const char *p = jobs[i].path; *p; p++)
                                check((unsigned char)*p > ' ' && (unsigned char)*p < 0x7f);
                        check(jobs[i].method && jobs[i].tz && jobs[i].schedule);
                }
                routines_jobs_free(jobs, n);
        }
        char *text = strndup((const char *)data, size);
        if (text) {
                (void)routines_quiet(text);
                free(text);
        }
        return 0;
}
