/* mind.h (api) — the /_seed/api routes of the Seed's mind (kernel/mind):
 *
 *   GET  mind                    what it thinks with, where the key comes from,
 *                                the providers: mind_status_json(full)
 *   GET  mind/models?provider=P  P's models that take tools (cached); P
 *                                defaults to the current provider
 *   POST mind                    {"provider", "model"}: probed, then kept
 *   POST mind/key                {"provider", "key"}: lent until the kernel
 *                                stops; never echoed
 *   POST mind/key/forget         {"provider"} (or {} for every provider)
 *
 * Answers: 200 with the mind (GET mind's body; forget adds "forgotten"),
 * 400 bad input, 409 no key ({"error": why, naming the variable}) or a probe
 * already running, 502 the provider's error (bounded, never the key).
 * Nothing here logs or returns a key. The handlers know nothing of struct
 * api: api.c's route table calls them with the mind (borrowed). */
#pragma once

#include "base/base.h"
#include "ctl/ctl.h"
#include "mind/mind.h"

#define API_MIND_BODY_MAX (MIND_KEY_MAX + 1024)  /* a lend request */
#define API_MIND_ERROR_MAX 1000                  /* bytes of a provider's error shown */

int api_mind_h_get(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json);
/* provider: from the query (NULL: the current one). */
int api_mind_h_models(struct mind *m, const char *provider, int *ret_status, char **ret_json);
int api_mind_h_choose(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_mind_h_lend(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json);
int api_mind_h_forget(struct mind *m, const struct ctl_api_call *call, int *ret_status, char **ret_json);
