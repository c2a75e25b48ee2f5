/* probe.h — shared by the escape suite's native probes. Each probe is one
 * attempt that needs a system call the shell cannot make. It prints exactly
 * one line, "PROBE <name> BLOCKED|BREACH <detail>", and exits 0: BREACH when
 * the attempt got what it wanted, BLOCKED when every way it tried failed.
 * The suite (tests/escape/test_escape.py) writes these files into an
 * evolution's organism/ with write_file, compiles them inside the sandbox
 * with cc, runs them through the `run` tool and, in the live organism, from
 * its /probe route. Header-only on purpose: each probe is one cc call. */
#pragma once

#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char probe_detail[2048];
static int probe_breached;

/* Notes one try: ok = the try succeeded (a breach), else errno says why not. */
static void probe_try(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void probe_try(int ok, const char *fmt, ...) {
        int saved = errno;
        char what[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        size_t used = strlen(probe_detail);
        if (ok)
                probe_breached = 1;
        snprintf(probe_detail + used, sizeof probe_detail - used, "%s%s: %s", used ? "; " : "", what,
                 ok ? "SUCCEEDED" : strerror(saved));
}

static int probe_report(const char *name) {
        printf("PROBE %s %s %s\n", name, probe_breached ? "BREACH" : "BLOCKED", probe_detail);
        fflush(stdout);
        return 0;
}
