/* reply.h — how every /_seed/api handler answers: a status and a JSON body
 * ({"error": "..."} for errors, SPEC §7). Internal to kernel/api. */
#pragma once

#include "base/json.h"

/* Answers status with o (taken, also on failure); *ret_json is the caller's.
 * -ENOMEM when o is NULL or cannot be written. */
int api_reply(int status, json_t *o_taken, int *ret_status, char **ret_json);
/* Answers status with {"error": msg}. */
int api_reply_error(int status, const char *msg, int *ret_status, char **ret_json);
