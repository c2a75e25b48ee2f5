/* extensions.h — GET /_seed/api/extensions: the admin screens the organism
 * declares in organism/control/extensions.json (organism/extensions.h), for
 * the control plane to list and frame from organism.localhost:<port><path>
 * (never its own origin):
 *
 *   {"file": "organism/control/extensions.json",
 *    "screens": [{"id", "title", "path"}, …],   checked and bounded
 *    "errors": ["screens[1] (\"b\"): path starts with '//' …", …]}
 *
 * A bad file or entry is an error in the answer (200), never a failed call:
 * the good screens are still listed. Owner only, like every API route (ctl:
 * the session cookie and its X-Seed-Token, or the CLI token). */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"

/* The body of the answer for the live Seed's folder seed_dir. Caller frees. */
int api_extensions_json(const char *seed_dir, char **ret_json);
/* The route handler: what api.c's entry of api_routes calls. */
int api_extensions_h_list(const char *seed_dir, const struct ctl_api_call *call, int *ret_status,
                          char **ret_json);
