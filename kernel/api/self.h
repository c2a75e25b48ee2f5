/* self.h — the read-only /_seed/api routes the control plane shows besides
 * evolutions: who the Seed is, what it knows, its skills, its settings and
 * what its model calls cost (SPEC §7).
 *
 *   GET identity               knowledge/self.yaml's name, slug, tagline,
 *                              accent (only a valid #rrggbb), purpose; the
 *                              seed.yaml name; knowledge/logo.svg as a
 *                              data: URL for an <img> (or null)
 *   GET knowledge              every file under knowledge/ (path, type, size)
 *   GET knowledge?path=REL     one of them: {"path", "size", "content"}
 *                              (content null when it is not UTF-8 text)
 *   GET skills                 skills/<name>/SKILL.md front matter of each
 *   GET skills/{name}          one SKILL.md in full
 *   GET settings               seed.yaml without anything secret: never the
 *                              database URL (only whether one is set), the
 *                              model's base_url without user info or query
 *   GET usage                  model calls, tokens and cost by purpose and model
 *
 * Repository content is read only through fsx (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS beneath the live Seed's folder), each file bounded: a
 * knowledge/x.md that is a link to ~/.ssh/id_rsa is refused, never read.
 * The handlers know nothing of struct api: api.c's route table calls them
 * with what they read, so self.c depends on ctl's types only. */
#pragma once

#include "base/base.h"
#include "config/config.h"
#include "ctl/ctl.h"

struct db;

#define API_SELF_FILE_MAX (256 * 1024)  /* a note or skill shown in the control plane */
#define API_SELF_YAML_MAX CFG_SCALARS_MAX       /* knowledge/self.yaml */
#define API_SELF_VALUE_MAX CFG_SCALAR_VALUE_MAX /* one self.yaml / front matter value */
#define API_SELF_LIST_MAX 500           /* files listed under knowledge/, skills */
#define API_SELF_DEPTH_MAX 8            /* folders below knowledge/ walked */

/* Whether s is a CSS colour the UI may use as its accent: #rgb or #rrggbb. */
bool api_self_accent_valid(const char *s);

/* A model base_url fit to show: scheme://host[:port]/path, without user
 * info, query or fragment. Caller frees. */
int api_self_redact_url(const char *url, char **ret);

/* The JSON bodies of the routes above (caller frees). seed_dir is the live
 * Seed's folder. -ENOENT, -ELOOP, -EFBIG, -EINVAL … are the file's own
 * errors, which the handlers map to 4xx answers. */
int api_self_identity_json(const char *seed_dir, char **ret_json);
int api_self_knowledge_json(const char *seed_dir, char **ret_json);
int api_self_knowledge_file_json(const char *seed_dir, const char *rel, char **ret_json);
int api_self_skills_json(const char *seed_dir, char **ret_json);
int api_self_skill_json(const char *seed_dir, const char *name, char **ret_json);
int api_self_settings_json(const char *seed_dir, char **ret_json);
int api_self_usage_json(struct db *kdb, char **ret_json);

/* The route handlers: what api.c's entries of api_routes call, with the
 * live Seed's folder or the kernel-memory DB (borrowed). */
int api_self_h_identity(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_self_h_knowledge(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_self_h_skills(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_self_h_skill(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_self_h_settings(const char *seed_dir, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_self_h_usage(struct db *kdb, const struct ctl_api_call *call, int *ret_status, char **ret_json);
