/* json.h — the cleanup for jansson's json_t, the kernel's vocabulary.
 *
 * JSON (jansson's json_t) is what modules take and return: tool arguments,
 * model messages, API bodies. It is not wrapped; this header only adds the
 * cleanup attribute (see STYLE.md) so a function that owns a reference for its
 * scope writes
 *
 *         _cleanup_json_ json_t *o = json_object();
 *
 * and hands it on with TAKE_PTR(o) (to json_object_set_new(),
 * json_array_append_new() or a ret_ out-param, all of which take the
 * reference). Header only: include it from modules that depend on jansson. */
#pragma once

#include <jansson.h>

#include "base/base.h"

/* jansson's own json_decrefp() (jansson.h) accepts NULL and a NULL *p. */
#define _cleanup_json_ _cleanup_(json_decrefp)
