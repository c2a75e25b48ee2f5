/* userfaultfd: a classic helper for kernel race exploits. Breach: an fd. */
#include "probe.h"
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/syscall.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

int main(void) {
        long fd = syscall(__NR_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
        probe_try(fd >= 0, "userfaultfd(UFFD_USER_MODE_ONLY)");
        if (fd >= 0)
                close((int)fd);
        fd = syscall(__NR_userfaultfd, O_CLOEXEC);
        probe_try(fd >= 0, "userfaultfd()");
        if (fd >= 0)
                close((int)fd);
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        probe_try(dev >= 0, "open /dev/userfaultfd");
        if (dev >= 0)
                close(dev);
        return probe_report("userfaultfd");
}
