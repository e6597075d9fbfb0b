/*
 * Which epoll_wait sleeper gets an edge-triggered event: the earlier one or the later one?
 * nd-shim's pump (nd-shim/src/nd2/pump.rs) counts on the later one (Linux queues exclusive
 * epoll waiters at the head), so that an application thread waiting in the shim, which goes to
 * sleep after the relay thread, is the thread a CQ event wakes. Prints the tally; asserts
 * nothing (under load the later thread may not be asleep yet when the event comes).
 *
 *   gcc -O2 -pthread -o /tmp/epoll-lifo tests/bench/epoll-lifo.c && /tmp/epoll-lifo
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int ep;
static int woke[2];

static void *sleeper(void *arg)
{
    struct epoll_event ev;
    if (epoll_wait(ep, &ev, 1, 300) > 0)
        woke[(intptr_t)arg]++;
    return NULL;
}

int main(void)
{
    int earlier = 0, later = 0, trials = 100;
    for (int i = 0; i < trials; i++) {
        ep = epoll_create1(0);
        int src = eventfd(0, EFD_NONBLOCK);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.u64 = 1};
        epoll_ctl(ep, EPOLL_CTL_ADD, src, &ev);
        woke[0] = woke[1] = 0;
        pthread_t first, second;
        pthread_create(&first, NULL, sleeper, (void *)0);
        usleep(20000);
        pthread_create(&second, NULL, sleeper, (void *)1);
        usleep(20000);
        uint64_t one = 1;
        if (write(src, &one, 8) != 8)
            return 1;
        pthread_join(first, NULL);
        pthread_join(second, NULL);
        earlier += woke[0];
        later += woke[1];
        close(src);
        close(ep);
    }
    printf("%d trials: the earlier sleeper got the event %d times, the later %d times\n", trials, earlier, later);
    return 0;
}
