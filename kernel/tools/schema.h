/* schema.h — the small subset of JSON Schema the tool table uses:
 *   type (object, string, integer, number, boolean, array; one name only),
 *   properties, required, additionalProperties (false, true or a schema),
 *   enum (of strings or integers), minLength/maxLength (in characters),
 *   pattern (POSIX extended regex, whole-string anchors written by the schema),
 *   items, minItems/maxItems, minimum/maximum (integers and numbers).
 * Anything else in a schema is an error, so a table typo cannot silently
 * turn a check off. Private to kernel/tools (and its tests). */
#pragma once

#include "base/base.h"

struct json_t;

/* Checks that a schema uses only the subset above and is well formed.
 * -EINVAL with *ret_error (caller frees) naming the first problem. */
int tools_schema_check(struct json_t *schema, char **ret_error);
/* Validates value against schema. 0 if it matches; -EINVAL with *ret_error
 * ("$.steps[2]: expected string, got integer"; caller frees) if not. Depth
 * and sizes are bounded (deeper than 32 levels is an error). */
int tools_schema_validate(struct json_t *schema, struct json_t *value, char **ret_error);
