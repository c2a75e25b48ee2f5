/* seed-kernel — the Seed's kernel daemon. All the work is in kernel/app. */
#include "app/app.h"

int main(int argc, char **argv) { return app_main(argc, argv); }
