/* TIOCSTI: push characters into a terminal's input queue, typing commands
 * into whatever shell reads that terminal. Tried on every terminal
 * the sandbox inherited (stdin/out/err, /dev/tty) and, to see whether the
 * ioctl itself is filtered, on a pty made here as the controlling terminal.
 * Breach: any TIOCSTI is accepted. */
#include "probe.h"
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>

int main(void) {
        char c = ' ';
        for (int fd = 0; fd <= 2; fd++)
                if (isatty(fd))
                        probe_try(ioctl(fd, TIOCSTI, &c) == 0, "TIOCSTI on inherited fd %d", fd);
        int tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
        probe_try(tty >= 0 && ioctl(tty, TIOCSTI, &c) == 0, "TIOCSTI on /dev/tty");
        if (tty >= 0)
                close(tty);
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
                probe_try(0, "posix_openpt");
                return probe_report("tiocsti");
        }
        const char *name = ptsname(m);
        pid_t child = fork();
        if (child == 0) {
                setsid();
                int s = open(name, O_RDWR);
                if (s < 0)
                        _exit(100);
                ioctl(s, TIOCSCTTY, 0);
                _exit(ioctl(s, TIOCSTI, &c) == 0 ? 0 : errno);
        }
        int status = 0;
        waitpid(child, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
        errno = code == 100 ? ENOENT : code;
        probe_try(code == 0, "TIOCSTI on a pty made in the sandbox (the ioctl is not filtered)");
        close(m);
        return probe_report("tiocsti");
}
