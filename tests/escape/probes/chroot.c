/* chroot escape: chroot into a subdirectory and walk up past the sandbox's
 * root (the classic breakout when chroot is allowed). Breach: chroot works. */
#include "probe.h"
#include <sys/stat.h>
#include <sys/syscall.h>

int main(void) {
        mkdir("/tmp/escape-chroot", 0700);
        int r = chroot("/tmp/escape-chroot");
        probe_try(r == 0, "chroot /tmp/escape-chroot");
        r = (int)syscall(SYS_pivot_root, "/tmp", "/tmp/escape-chroot");
        probe_try(r == 0, "pivot_root");
        return probe_report("chroot");
}
