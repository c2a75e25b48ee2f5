/* supervisor-internal.h — shared by build.c and supervisor.c only. */
#pragma once

/* The fixed environment of kernel builds and of the kernel: nothing is taken
 * from the caller's (no CC, CFLAGS, PKG_CONFIG_PATH, secrets …). Static. */
extern char *const supervisor_fixed_env[];
/* The same with SEED_IN_CONTAINER=1: kernels inside the Seed's container. */
extern char *const supervisor_container_env[];
