/* seed — the command line. All the work is in kernel/cli. */
#include "cli/cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
