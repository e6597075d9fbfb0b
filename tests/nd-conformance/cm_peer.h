/*
 * cm_peer.h: what the plain librdmacm peers (not nd-shim) share: tests/nd-conformance/plain_peer.c
 * and tests/nd2/nd2-verbs-peer.c. Each reports a failure on stderr and returns the exit status.
 */
#ifndef CM_PEER_H
#define CM_PEER_H

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* perror(what); exit status 1. */
static inline int fail(const char *what)
{
    perror(what);
    return 1;
}

/* The channel's next event, when it is `want` (the caller acknowledges it); NULL otherwise. */
static inline struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev)) {
        perror("rdma_get_cm_event");
        return NULL;
    }
    if (ev->event != want) {
        fprintf(stderr, "event %s (status %d), want %s\n", rdma_event_str(ev->event), ev->status,
                rdma_event_str(want));
        rdma_ack_cm_event(ev);
        return NULL;
    }
    return ev;
}

/* The channel's next event is `want`, acknowledged: 0; 1 otherwise. */
static inline int expect_event(struct rdma_event_channel *ch, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *ev = next_event(ch, want);
    if (!ev)
        return 1;
    rdma_ack_cm_event(ev);
    return 0;
}

/* "a.b.c.d" and a port number (the command line's words) into *sin: 0; 2 on a bad address. */
static inline int peer_address(const char *ip, const char *port, struct sockaddr_in *sin)
{
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
    if (inet_pton(AF_INET, ip, &at.sin_addr) != 1) {
        fprintf(stderr, "bad address %s\n", ip);
        return 2;
    }
    *sin = at;
    return 0;
}

/* An event channel and an RDMA_PS_TCP id on it: 0; 1 otherwise. */
static inline int open_id(struct rdma_event_channel **ch, struct rdma_cm_id **id)
{
    *ch = rdma_create_event_channel();
    if (!*ch || rdma_create_id(*ch, id, NULL, RDMA_PS_TCP))
        return fail("rdma_create_id");
    return 0;
}

/* A peer's address (its command line's IP and PORT) and its event channel and id. */
struct peer {
    struct sockaddr_in sin;
    struct rdma_event_channel *ch;
    struct rdma_cm_id *id;
};

/*
 * A peer's start: stdout line-buffered (the driving program reads it as it happens), argc checked
 * against `want` (else "usage: USAGE"), argv[ipAt] and argv[ipAt + 1] (IP, PORT) into p->sin, an
 * event channel and an id on it (p->ch, p->id). On failure the program exits: 2 for the command
 * line, 1 for the id.
 */
static inline void peer_start(int argc, char **argv, int want, const char *usage, int ipAt, struct peer *p)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != want) {
        fprintf(stderr, "usage: %s\n", usage);
        exit(2);
    }
    if (peer_address(argv[ipAt], argv[ipAt + 1], &p->sin))
        exit(2);
    if (open_id(&p->ch, &p->id))
        exit(1);
}

/* Bound to *sin and listening with `backlog`, "ready" printed: 0; 1 otherwise. */
static inline int peer_listen(struct rdma_cm_id *id, struct sockaddr_in *sin, int backlog)
{
    if (rdma_bind_addr(id, (struct sockaddr *)sin))
        return fail("rdma_bind_addr");
    if (rdma_listen(id, backlog))
        return fail("rdma_listen");
    printf("ready\n");
    return 0;
}

/* An RC QP on the id (4 deep each way, one SGE), in `pd` (NULL: the device's default PD): 0; 1
 * otherwise. */
static inline int peer_rc_qp(struct rdma_cm_id *id, struct ibv_pd *pd)
{
    struct ibv_qp_init_attr init = {
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (rdma_create_qp(id, pd, &init))
        return fail("rdma_create_qp");
    return 0;
}

#endif /* CM_PEER_H */
