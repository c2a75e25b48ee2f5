/* health-internal.h — the doctor's state, shared by health.c (reports, the
 * worker, the incidents table) and diagnose.c (the read-only agent). */
#pragma once

#include "health/health.h"

#include <pthread.h>
#include <stdatomic.h>

#define HEALTH_PENDING_MAX 64 /* reports queued for the worker; past it they are dropped (logged once) */

struct health_pending {
        enum health_kind kind;
        enum health_verdict verdict;
        char cause[HEALTH_CAUSE_MAX + 1];
        char *detail;           /* what happened, one line (owned); may be NULL */
        int count;              /* occurrences it stands for (AGAIN reports of one cause coalesce) */
        int64_t at;
};

struct health {
        char *seed_dir;
        char *organism_log;
        char **redact;                  /* health_config.redact, copied (never NULL) */
        struct db *kdb;
        const struct cfg *cfg;
        struct mind *mind;
        struct spend *spend;
        struct live *live;
        void (*publish)(void *userdata, const char *kind, const char *json);
        void *userdata;
        int64_t (*now)(void);
        int tick_ms;

        pthread_mutex_t lock;           /* everything below */
        pthread_cond_t wake;            /* CLOCK_MONOTONIC */
        pthread_cond_t idle;
        struct health_detect *detect;
        struct health_pending pending[HEALTH_PENDING_MAX];
        size_t n_pending;
        bool dropped_logged;
        bool working;
        uint64_t passes;                /* the worker's passes over fixes and diagnoses */
        bool stop;
        struct orchestrator *orch;
        pthread_t thread;
        bool started;
        atomic_bool cancel;             /* a diagnosis stops at its next call */
};

/* Copy of at most max bytes of s, cut on a UTF-8 character boundary (the
 * database refuses half a character). Caller frees; NULL on OOM. */
char *health_cut(const char *s, size_t max);

/* Runs the diagnosis of the incident (its row as a JSON object) and fills
 * *ret_text (caller frees) with what the agent submitted; -EREMOTEIO with
 * *ret_error (caller frees) when it submitted none, -ECANCELED stopping. */
int health_diagnose(struct health *h, const char *id, const char *cause, const char *kind, const char *evidence,
                    char **ret_text, char **ret_error);
