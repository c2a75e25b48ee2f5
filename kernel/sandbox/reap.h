/* reap.h — waiting for a child of ours to exit, woken by its pidfd rather
 * than by polling (a sandbox's start and end are on every command's path).
 * Used by sandbox.c and door.c. */
#pragma once

#include "base/base.h"
#include <sys/types.h>

/* Waits up to timeout_ms (< 0: forever) for our child pid to exit, reaps it
 * and returns its exit code (0-255, or 128+signal); -ETIMEDOUT if it is
 * still running (not reaped then). Falls back to proc_wait() without
 * pidfds. */
int sandbox_reap(pid_t pid, int timeout_ms);
