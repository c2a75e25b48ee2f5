/* watch.h — the private PostgreSQL's watchdog: a thread that checks every
 * second that the postmaster runs and starts it again when it died (killed,
 * out of memory, crashed), keeping what happened for the status and the
 * control plane. An external server is not ours to watch: no thread. */
#pragma once

#include "base/base.h"
#include "base/json.h"

struct pg;
struct pg_watch;

/* Starts watching pg (borrowed: stop the watch before pg_stop()).
 * *ret: caller stops and frees with pg_watch_stop(). */
int pg_watch_start(struct pg *pg, struct pg_watch **ret);
/* Ends the thread and frees. Accepts NULL. */
void pg_watch_stop(struct pg_watch *w);
/* {"state": "up" | "down", "restarts": n, "last_failure": "<what
 * happened, when, and whether it is running again>" (only once one
 * happened)}; *ret caller-owned. */
int pg_watch_json(struct pg_watch *w, json_t **ret);
/* Changes whenever what pg_watch_json() shows changes (a counter, never
 * going back; read before the JSON, a cache of it is exact while this stays
 * the same). No lock taken. 0 for NULL. */
uint64_t pg_watch_version(struct pg_watch *w);
/* Whether the server runs (true for an external one, or with w NULL). */
bool pg_watch_up(struct pg_watch *w);
