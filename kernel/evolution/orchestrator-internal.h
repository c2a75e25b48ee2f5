/* orchestrator-internal.h — pieces of the orchestrator shared between its files. */
#pragma once

#include "evolution/orchestrator.h"

/* The system prompt of an evolution: rules, knowledge/self.yaml, the skills
 * index and the last 15 generations, read from the Seed folder (seed_root:
 * an fsx root fd of it). NULL when out of memory; caller frees. */
char *orch_system_prompt(const char *seed_dir, int seed_root, char *const *evolvable, const struct pg *pg);
