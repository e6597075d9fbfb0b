/*
 * round-trips.h: each exchange's round trip in a ping-pong's timed loop, and their statistics,
 * for tests/bench/nd2.sh's two ping-pong programs (C and C++, header only), so that both time
 * their exchanges the same way:
 *
 *   struct round_trips rt;
 *   round_trips_init(&rt, iterations);   before the loop: the stamps allocated and written once
 *   for (i = 0; i < iterations; i++) {
 *       round_trips_stamp(&rt, i);       first in exchange i, before its receive and send are posted
 *       ... the exchange, its answer checked ...
 *   }
 *   round_trips_stamp(&rt, iterations);  after the loop: the end of the last exchange
 *   round_trips_print(&rt, "client");
 *
 * One time stamp per exchange, as perftest's ib_send_lat takes one cycle count per iteration:
 * exchange i's round trip is stamp i + 1 - stamp i, so the round trips cover the whole loop and
 * add up to its time. On x86-64 a stamp is the time-stamp counter (rdtsc, as perftest), turned
 * into time by the CLOCK_MONOTONIC reads that stamps 0 and n also take: a clock read is a system
 * call where the clock has no vDSO (the rig's guests), and one per exchange would add a system
 * call to every exchange of both programs. Elsewhere a stamp is a CLOCK_MONOTONIC read. Nothing
 * is allocated in the loop. One line:
 *
 *   client latency per exchange: typical 52.3 us, min 41.0 us, p99 98.7 us, max 310.2 us
 *
 * typical: the median round trip (perftest's t_typical, but of the whole round trip, not halved);
 * p99: the nearest-rank 99th percentile (the smallest round trip that at least 99% of them do not
 * exceed); min and max of all of them (perftest leaves the two largest out of its t_max).
 */
#ifndef ROUND_TRIPS_H
#define ROUND_TRIPS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CALLGRIND_TOGGLE_COLLECT around the timed loop: valgrind's, or nothing where its header is missing. */
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_TOGGLE_COLLECT
#endif

struct round_trips {
    unsigned n;      /* exchanges */
    int64_t *stamps; /* n + 1 stamps (counter ticks or ns); then the n round trips, sorted */
    int64_t clock0;  /* CLOCK_MONOTONIC at stamps 0 and n, ns */
    int64_t clock1;
};

static inline int64_t round_trips_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t round_trips_ticks(void)
{
#if defined(__x86_64__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return (int64_t)((uint64_t)hi << 32 | lo);
#else
    return round_trips_clock();
#endif
}

static inline void round_trips_init(struct round_trips *r, unsigned n)
{
    r->n = n;
    r->stamps = (int64_t *)malloc(((size_t)n + 1) * sizeof *r->stamps);
    if (!r->stamps) {
        fprintf(stderr, "round_trips_init: no memory for %u stamps\n", n);
        exit(1);
    }
    /* Written once, so that no page is first touched in the loop. */
    memset(r->stamps, 0, ((size_t)n + 1) * sizeof *r->stamps);
}

static inline void round_trips_stamp(struct round_trips *r, unsigned i)
{
    if (i == r->n)
        r->stamps[i] = round_trips_ticks();
    if (i == 0 || i == r->n)
        *(i == 0 ? &r->clock0 : &r->clock1) = round_trips_clock();
    if (i < r->n)
        r->stamps[i] = round_trips_ticks();
}

static inline int round_trips_compare(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/*
 * Turns the stamps into the n round trips, sorted; then the median, min, nearest-rank 99th
 * percentile and max, in ns (n > 0).
 */
static inline void round_trips_stats(struct round_trips *r, double *typical, double *min, double *p99, double *max,
                                     unsigned *slowest)
{
    unsigned n = r->n;
    int64_t *d = r->stamps;
    /* ns per stamp unit: 1 where the stamps are clock reads. */
    double ticks = (double)(d[n] - d[0]), unit = ticks > 0 ? (double)(r->clock1 - r->clock0) / ticks : 1;
    *slowest = 0;
    for (unsigned i = 0; i < n; i++) {
        d[i] = d[i + 1] - d[i];
        if (d[i] > d[*slowest])
            *slowest = i;
    }
    qsort(d, n, sizeof *d, round_trips_compare);
    *typical = unit * (n % 2 ? (double)d[n / 2] : ((double)d[n / 2 - 1] + (double)d[n / 2]) / 2);
    *min = unit * (double)d[0];
    *p99 = unit * (double)d[((size_t)n * 99 + 99) / 100 - 1]; /* rank ceil(0.99 n), from 1 */
    *max = unit * (double)d[n - 1];
}

/* Prints the line above (nothing for no exchange) and frees the stamps. */
static inline void round_trips_print(struct round_trips *r, const char *who)
{
    double typical, min, p99, max;
    unsigned slowest;
    if (r->n > 0) {
        round_trips_stats(r, &typical, &min, &p99, &max, &slowest);
        printf("%s latency per exchange: typical %.1f us, min %.1f us, p99 %.1f us, max %.1f us (exchange %u of %u)\n",
               who, typical / 1e3, min / 1e3, p99 / 1e3, max / 1e3, slowest, r->n);
    }
    free(r->stamps);
    r->stamps = NULL;
}

#endif
