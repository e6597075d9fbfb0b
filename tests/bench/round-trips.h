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
 * One CLOCK_MONOTONIC read per exchange, as perftest's ib_send_lat takes one cycle count per
 * iteration: exchange i's round trip is stamp i + 1 - stamp i, so the round trips cover the whole
 * loop, the clock reads included, and add up to its time. A clock read is a system call where
 * the clock has no vDSO (the rig's guests): one more per exchange in the counts of
 * thread-counts.h, in both programs alike. Nothing is allocated in the loop. One line:
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

struct round_trips {
    unsigned n;      /* exchanges */
    int64_t *stamps; /* n + 1 CLOCK_MONOTONIC stamps, ns; then the n round trips, sorted */
};

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
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r->stamps[i] = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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
static inline void round_trips_stats(struct round_trips *r, double *typical, double *min, double *p99, double *max)
{
    unsigned n = r->n;
    int64_t *d = r->stamps;
    for (unsigned i = 0; i < n; i++)
        d[i] = d[i + 1] - d[i];
    qsort(d, n, sizeof *d, round_trips_compare);
    *typical = n % 2 ? (double)d[n / 2] : ((double)d[n / 2 - 1] + (double)d[n / 2]) / 2;
    *min = (double)d[0];
    *p99 = (double)d[((size_t)n * 99 + 99) / 100 - 1]; /* rank ceil(0.99 n), from 1 */
    *max = (double)d[n - 1];
}

/* Prints the line above (nothing for no exchange) and frees the stamps. */
static inline void round_trips_print(struct round_trips *r, const char *who)
{
    double typical, min, p99, max;
    if (r->n > 0) {
        round_trips_stats(r, &typical, &min, &p99, &max);
        printf("%s latency per exchange: typical %.1f us, min %.1f us, p99 %.1f us, max %.1f us\n", who,
               typical / 1e3, min / 1e3, p99 / 1e3, max / 1e3);
    }
    free(r->stamps);
    r->stamps = NULL;
}

#endif
