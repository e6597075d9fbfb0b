/*
 * The kernel behaviour nd-shim's pump (nd-shim/src/nd2/pump.rs) counts on: one eventfd in two
 * epoll sets, both entries EPOLLEXCLUSIVE | EPOLLET, the "leader" set's entry added first. An
 * event wakes the leader set's sleeper if there is one, and then not the relay set's, whichever
 * thread went to sleep first. Prints the tally of who got the event, with the relay going to
 * sleep first and then last; asserts nothing (under load a thread may not be asleep yet when
 * the event comes).
 *
 *   gcc -O2 -pthread -o /tmp/epoll-priority tests/bench/epoll-priority.c && /tmp/epoll-priority
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int sets[2]; /* 0: leader, 1: relay */
static int woke[2];

static void *sleeper(void *arg)
{
    intptr_t which = (intptr_t)arg;
    struct epoll_event ev;
    if (epoll_wait(sets[which], &ev, 1, 300) > 0)
        woke[which]++;
    return NULL;
}

static void trial(int relay_first, int *leader_got, int *relay_got)
{
    int src = eventfd(0, EFD_NONBLOCK);
    for (int i = 0; i < 2; i++) {
        sets[i] = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET | EPOLLEXCLUSIVE, .data.u64 = 1};
        epoll_ctl(sets[i], EPOLL_CTL_ADD, src, &ev);
    }
    woke[0] = woke[1] = 0;
    pthread_t t[2];
    int order[2] = {relay_first ? 1 : 0, relay_first ? 0 : 1};
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[order[i]], NULL, sleeper, (void *)(intptr_t)order[i]);
        usleep(20000);
    }
    uint64_t one = 1;
    if (write(src, &one, 8) != 8)
        perror("write");
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    *leader_got += woke[0];
    *relay_got += woke[1];
    close(src);
    close(sets[0]);
    close(sets[1]);
}

int main(void)
{
    for (int relay_first = 1; relay_first >= 0; relay_first--) {
        int leader = 0, relay = 0;
        for (int i = 0; i < 50; i++)
            trial(relay_first, &leader, &relay);
        printf("relay asleep %s: 50 trials, the leader got the event %d times, the relay %d times\n",
               relay_first ? "first" : "last", leader, relay);
    }
    return 0;
}
