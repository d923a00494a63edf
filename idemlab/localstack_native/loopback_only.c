/* Loaded with LD_PRELOAD into native LocalStack and every process it starts (DynamoDB
 * Local's JVM, kinesis-local's node, Lambda environments): a socket bound to "any address"
 * is bound to loopback instead. Those helpers have no option of their own for it (DynamoDB
 * Local 2.x builds its Jetty server from the port alone; kinesis-local takes ports only),
 * and a learner's laptop must not offer an emulator that runs uploaded code to its network.
 *
 * A dual-stack IPv6 socket bound to "::" becomes "::ffff:127.0.0.1", so IPv4 clients of
 * 127.0.0.1 still reach it; an IPv6-only one becomes "::1".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_function)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *address, socklen_t length) {
    static bind_function system_bind;
    if (!system_bind) {
        system_bind = (bind_function)dlsym(RTLD_NEXT, "bind");
    }
    if (address && address->sa_family == AF_INET && length >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in ipv4;
        memcpy(&ipv4, address, sizeof ipv4);
        if (ipv4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            ipv4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return system_bind(fd, (const struct sockaddr *)&ipv4, sizeof ipv4);
        }
    }
    if (address && address->sa_family == AF_INET6 && length >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 ipv6;
        memcpy(&ipv6, address, sizeof ipv6);
        if (IN6_IS_ADDR_UNSPECIFIED(&ipv6.sin6_addr)) {
            int v6_only = 0;
            socklen_t size = sizeof v6_only;
            getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6_only, &size);
            if (v6_only) {
                ipv6.sin6_addr = in6addr_loopback;
            } else {
                inet_pton(AF_INET6, "::ffff:127.0.0.1", &ipv6.sin6_addr);
            }
            return system_bind(fd, (const struct sockaddr *)&ipv6, sizeof ipv6);
        }
    }
    return system_bind(fd, address, length);
}
