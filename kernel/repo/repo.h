/* repo.h — the only libgit2 user: the Seed's own git repository. */
#pragma once

#include "base/base.h"

/* Initialises a repository in dir (branch main), commits everything not
 * ignored by .gitignore as `message`, and tags it `tag`. On failure returns
 * -errno-style code and sets *ret_error (caller frees). */
int repo_init_commit(const char *dir, const char *message, const char *tag, char **ret_error);

struct repo_generation {
        int number;           /* N of seed/gen-N */
        char commit[41];      /* hex oid */
        char *summary;        /* first line of the commit message */
        int64_t time;         /* commit time, seconds since the epoch */
};
void repo_generations_free(struct repo_generation *g, size_t n);
/* Every seed/gen-N tag, ascending by N. */
int repo_generations(const char *dir, struct repo_generation **ret, size_t *ret_n);
/* The highest N whose tag points at HEAD; -ENOENT if none does. */
int repo_current_generation(const char *dir, int *ret);
