/* container.h — the container driver of `seed run` (seed 001 §Sandboxing):
 * a Seed runs in one unprivileged container of podman or docker, as its
 * owner's uid, with every capability dropped, no-new-privileges, a read-only
 * root, the Seed's own seccomp.json and memory, CPU and process limits; the
 * kernel's supervisor (`seed run --native`) runs inside it and bubblewrap
 * nests inside that.
 *
 * Three parts:
 *   engine.c  finding an engine that works (SEED_CONTAINER_ENGINE, else
 *             podman then docker; `info` and a trial run), running its
 *             commands, the container's name;
 *   image.c   the image: built from the Seed's Dockerfile with no build
 *             context, tagged by the Dockerfile's content hash, over a Debian
 *             base made from the mirror when the engine has none;
 *   run.c     the limits (SEED_MEMORY, SEED_CPUS, SEED_PIDS_LIMIT), the
 *             hardened `run` command line (a table of flags), start, stop,
 *             wait, and reading the limits back from the container's cgroup.
 * Nothing here reads or writes the Seed's folder: the CLI (kernel/cli/
 * container.c) does that as the Seed's account and hands the files' contents
 * over; this module only talks to the engine (as root for rootful engines). */
#pragma once

#include "base/base.h"

#include <sys/types.h>

enum container_kind { CONTAINER_PODMAN, CONTAINER_DOCKER };

struct container_engine {
        enum container_kind kind;
        char *path;    /* the engine's executable; owned */
        bool rootless; /* runs without root: on cgroup v1 it ignores memory and pids limits */
};
void container_engine_done(struct container_engine *e);
/* "podman" or "docker"; static. */
const char *container_kind_name(enum container_kind k);

/* Finds an engine that works: SEED_CONTAINER_ENGINE (podman|docker) chooses
 * (none: never a container; the CLI checks that first), else podman, then
 * docker. Works = its `info` succeeds. -ENOENT when none
 * does, with *ret_why (caller frees) saying why in one line. Nothing logs. */
int container_engine_detect(struct container_engine *ret, char **ret_why);

/* Runs the engine with args (NULL-terminated, without argv[0]); stdin from
 * in_fd (-1: /dev/null). The output (merged, bounded) goes to *ret_output
 * when given (caller frees), else to out_fd when >= 0. Returns the exit code
 * (>= 0) or -errno when it could not run. */
int container_engine_exec(const struct container_engine *e, char *const *args, int in_fd, int out_fd,
                          int timeout_ms, char **ret_output);

/* Why an engine's command failed, in one line of at most n - 1 bytes: the
 * last line of its output that says "Error" (podman's "Error: ...",
 * docker's "Error response from daemon: ..."), else its last line that is
 * not empty. Engines print warnings before the error (podman's "Resource
 * limits are not supported ... on cgroups V1 rootless systems"), so the
 * first line is often not the reason. Pure. */
void container_reason(const char *output, char *out, size_t n);

/* The container of the Seed at seed_dir: "seed-<folder name>-<8 hex of the
 * path's SHA-256>", a valid engine name whatever the folder is called.
 * Caller frees. */
int container_name(const char *seed_dir, char **ret);

/* ---- the image (image.c) ---- */

/* The image's tag for a Dockerfile: "localhost/seed:<16 hex of its SHA-256>".
 * Caller frees. */
int container_image_tag(const char *dockerfile, size_t len, char **ret);
/* Makes sure the image for dockerfile (its content; at most 64 KiB) exists:
 * a cached one (by tag) is used as is. Otherwise its FROM image is made from
 * the Debian mirror when the engine lacks it (podman, with mmdebstrap), then
 * the image is built without a build context. Progress lines go to stderr
 * (prefixed "seed: "). *ret_tag: caller frees. -EIO when a step failed (its
 * output's tail printed). */
int container_image_ensure(const struct container_engine *e, const char *dockerfile, size_t len, char **ret_tag);

/* ---- limits and the container (run.c) ---- */

struct container_limits {
        char memory[32];        /* as given to the engine, e.g. "8g" */
        uint64_t memory_bytes;
        char cpus[16];          /* e.g. "1" or "1.5" */
        uint64_t cpus_millis;   /* cpus x 1000 */
        long pids;
};
/* From SEED_MEMORY (default 8g), SEED_CPUS (default half the cores, at
 * least 1) and SEED_PIDS_LIMIT (default 4096). A bad value: -EINVAL with
 * *ret_error naming the variable (caller frees). */
int container_limits_from_env(struct container_limits *ret, char **ret_error);

/* What the limits in force in a running container are, read back from its
 * cgroup (v1 or v2). A limit that is not in force is 0. */
struct container_cgroup {
        uint64_t memory_bytes;
        uint64_t cpus_millis;
        long pids;
};

struct container_run {
        const char *name;        /* container_name() */
        const char *image;       /* the tag */
        const char *seed_dir;    /* host path, mounted at /seed */
        const char *seed_binary; /* host path of `seed`, mounted read-only at /usr/local/bin/seed */
        const char *profile;     /* path of the seccomp profile (a private copy of the Seed's seccomp.json) */
        const char *passwd, *group; /* docker only: files naming the owner (podman adds it itself) */
        uid_t uid;               /* the Seed's owner: never 0 */
        gid_t gid;
        const char *publish_ip;  /* where the port is published on the host, e.g. "127.0.0.1" */
        int port;                /* the same port inside */
        const struct container_limits *limits;
};
/* The engine's arguments for `run` (without argv[0]); a strv, caller frees.
 * Exported so tests check the flags themselves. */
int container_run_args(const struct container_engine *e, const struct container_run *o, char ***ret);
/* Starts the container (detached, removed when it ends). On failure
 * *ret_error holds the engine's words (caller frees). */
int container_start(const struct container_engine *e, const struct container_run *o, char **ret_error);
/* Whether the container runs. */
bool container_running(const struct container_engine *e, const char *name);
/* Asks it to stop (SIGTERM to the supervisor inside, which gives the kernel
 * 30 s), and kills it after grace_s. */
int container_stop(const struct container_engine *e, const char *name, int grace_s);
/* Waits for it to end; returns its exit code. */
int container_wait(const struct container_engine *e, const char *name);
/* Reads the limits in force from the container's cgroup. */
int container_read_cgroup(const struct container_engine *e, const char *name, struct container_cgroup *ret);
