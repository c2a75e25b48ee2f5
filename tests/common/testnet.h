/* testnet.h — a private network for a test process, with public addresses
 * of its own, so that real sockets reach "the internet" without any
 * network: the proxy's tests and bench/egress dial 93.184.215.14:443 for
 * real, and it is a listener of the test.
 *
 *   int main(void) {
 *           char *why = NULL;
 *           if (testnet_enter(&why) < 0)   // first, while single-threaded
 *                   ...                     // tests that need it print "# SKIP <why>"
 *           priv_drop_if_root(NULL);        // then drop root as usual
 *           ... listen on TESTNET_V4:443, connect to it ...
 *
 * testnet_enter() moves the calling process into a new network namespace:
 * as root with unshare(CLONE_NEWNET); otherwise with
 * unshare(CLONE_NEWUSER|CLONE_NEWNET), mapping only its own uid and gid
 * (setgroups denied), so it stays the same account. There it brings lo up
 * (127.0.0.1, ::1), lets every account bind ports below 1024
 * (ip_unprivileged_port_start = 0, so a test that dropped root still listens
 * on 443) and puts the TESTNET_* addresses on lo (/32, /128) over
 * rtnetlink, without any external tool. Nothing outside the namespace is
 * reachable, and nothing of it is visible outside: the host's network is
 * never touched. testnet_add() puts more addresses on lo (private ones, to
 * stand in for internal services). It must run before any thread starts:
 * unshare() moves only the calling thread, and a user namespace needs a
 * single-threaded process.
 *
 * Header-only (static functions), for test and bench binaries. */
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* Public addresses the namespace has on lo (documentation-free ranges, so
 * that the proxy's address checks see them as the internet). */
#define TESTNET_V4 "93.184.215.14"
#define TESTNET_V4_B "93.184.215.15"
#define TESTNET_V4_C "93.184.215.16"
#define TESTNET_V4_D "93.184.215.17"
#define TESTNET_V6 "2606:4700::1111"
#define TESTNET_V6_B "2606:4700::2222"

static bool testnet_v6; /* whether the IPv6 addresses could be added */

static int testnet_write(const char *path, const char *text) {
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, text, strlen(text));
        int r = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
        close(fd);
        return r;
}

/* Adds addr ("a.b.c.d" or an IPv6 address) to lo as a /32 or /128. */
static int testnet_add(const char *addr) {
        unsigned char a[16];
        int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
        if (inet_pton(family, addr, a) != 1)
                return -EINVAL;
        size_t alen = family == AF_INET ? 4 : 16;
        struct {
                struct nlmsghdr nh;
                struct ifaddrmsg ifa;
                char attrs[64];
        } req;
        memset(&req, 0, sizeof req);
        req.nh.nlmsg_len = NLMSG_LENGTH(sizeof req.ifa);
        req.nh.nlmsg_type = RTM_NEWADDR;
        req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        req.nh.nlmsg_seq = 1;
        req.ifa.ifa_family = (unsigned char)family;
        req.ifa.ifa_prefixlen = (unsigned char)(alen * 8);
        req.ifa.ifa_flags = IFA_F_NODAD;
        req.ifa.ifa_scope = RT_SCOPE_UNIVERSE;
        req.ifa.ifa_index = if_nametoindex("lo");
        if (req.ifa.ifa_index == 0)
                return -errno;
        unsigned short types[] = {IFA_LOCAL, IFA_ADDRESS};
        for (size_t i = 0; i < 2; i++) {
                struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
                rta->rta_type = types[i];
                rta->rta_len = (unsigned short)RTA_LENGTH(alen);
                memcpy(RTA_DATA(rta), a, alen);
                req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
        }
        int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
        if (fd < 0)
                return -errno;
        struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
        int r = 0;
        if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0)
                r = -errno;
        char reply[1024];
        ssize_t n = r < 0 ? -1 : recv(fd, reply, sizeof reply, 0);
        if (r == 0 && n < 0)
                r = -errno;
        else if (r == 0) {
                struct nlmsghdr *h = (struct nlmsghdr *)reply;
                if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR)
                        r = -EIO;
                else
                        r = ((struct nlmsgerr *)NLMSG_DATA(h))->error; /* 0 or -errno */
        }
        close(fd);
        return r;
}

static int testnet_lo_up(void) {
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -errno;
        struct ifreq f;
        memset(&f, 0, sizeof f);
        snprintf(f.ifr_name, sizeof f.ifr_name, "lo");
        int r = ioctl(s, SIOCGIFFLAGS, &f);
        if (r == 0) {
                f.ifr_flags |= IFF_UP;
                r = ioctl(s, SIOCSIFFLAGS, &f);
        }
        r = r < 0 ? -errno : 0;
        close(s);
        return r;
}

/* Sets *why (malloc'd) and returns r. */
static int testnet_fail(char **why, int r, const char *step) {
        if (why && asprintf(why, "cannot make the test's private network: %s: %s", step, strerror(-r)) < 0)
                *why = NULL;
        return r;
}

static int testnet_enter(char **why) {
        int r;
        if (geteuid() == 0) {
                if (unshare(CLONE_NEWNET) < 0)
                        return testnet_fail(why, -errno, "unshare(CLONE_NEWNET)");
        } else {
                uid_t uid = getuid();
                gid_t gid = getgid();
                char map[64];
                if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0)
                        return testnet_fail(why, -errno, "unshare(CLONE_NEWUSER|CLONE_NEWNET) (no user namespaces?)");
                if ((r = testnet_write("/proc/self/setgroups", "deny")) < 0)
                        return testnet_fail(why, r, "/proc/self/setgroups");
                snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
                if ((r = testnet_write("/proc/self/uid_map", map)) < 0)
                        return testnet_fail(why, r, "/proc/self/uid_map");
                snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
                if ((r = testnet_write("/proc/self/gid_map", map)) < 0)
                        return testnet_fail(why, r, "/proc/self/gid_map");
        }
        if ((r = testnet_lo_up()) < 0)
                return testnet_fail(why, r, "bringing lo up");
        r = testnet_write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
        if (r < 0 && geteuid() == 0) /* as the namespace's creator the process may bind them anyway */
                return testnet_fail(why, r, "ip_unprivileged_port_start");
        const char *v4[] = {TESTNET_V4, TESTNET_V4_B, TESTNET_V4_C, TESTNET_V4_D};
        for (size_t i = 0; i < sizeof v4 / sizeof v4[0]; i++)
                if ((r = testnet_add(v4[i])) < 0)
                        return testnet_fail(why, r, "adding an address to lo");
        testnet_v6 = testnet_add(TESTNET_V6) == 0 && testnet_add(TESTNET_V6_B) == 0;
        return 0;
}
