/*
 * nd2-check.h: what every ND2 test program shares, C (nd2-bindio.c) and C++ (through
 * nd2-common.h) alike: the fatal checks, the IPv4 address parser and the clocks.
 */
#ifndef ND2_CHECK_H
#define ND2_CHECK_H

#include <ndsupport.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_HR(call)                                                                            \
    do {                                                                                          \
        HRESULT hr_ = (call);                                                                     \
        if (FAILED(hr_)) {                                                                        \
            fprintf(stderr, "%s:%d: %s failed: 0x%08x\n", __FILE__, __LINE__, #call, (unsigned)hr_); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

#define EXPECT(cond)                                                                              \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);                  \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

/* FAIL(fmt, ...): the file and line, the message, exit 1 (a case program's fatal check). */
#define FAIL(...)                                                                                 \
    do {                                                                                          \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                           \
        fprintf(stderr, __VA_ARGS__);                                                             \
        fprintf(stderr, "\n");                                                                    \
        exit(1);                                                                                  \
    } while (0)

/* inet_pton of `ip` (AF_INET or AF_INET6) into `addr`; exits on a bad address. */
static inline void nd2_pton(int family, const char *ip, void *addr)
{
    if (inet_pton(family, ip, addr) != 1) {
        fprintf(stderr, "bad %s address: %s\n", family == AF_INET ? "IPv4" : "IPv6", ip);
        exit(2);
    }
}

/* An IPv4 sockaddr_in from "a.b.c.d" and a port; exits on a bad address. */
static inline struct sockaddr_in nd2_ipv4(const char *ip, unsigned short port)
{
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    nd2_pton(AF_INET, ip, &sin.sin_addr);
    return sin;
}

/* CLOCK_MONOTONIC in microseconds: for the figures the programs print. */
static inline double nd2_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU time the whole process (every thread, the shim's included) has used, in microseconds. */
static inline double nd2_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

#endif /* ND2_CHECK_H */
