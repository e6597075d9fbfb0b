/*
 * A plain librdmacm peer for nd-conformance's cases that need "any other librdmacm user":
 * a program that is not nd-shim and does not cap its read limits to the other side.
 *
 *   plain-peer hold IP PORT      binds IP:PORT (0.0.0.0 for a wildcard holder) and listens;
 *                                prints "ready", holds the port until stdin closes.
 *   plain-peer accept IP PORT    listens on IP:PORT, accepts one connection offering the
 *                                device's maximum read limits whatever the REQ asked; prints
 *                                "ready" when listening, "established" when connected, and
 *                                exits after the peer disconnects.
 *   plain-peer connect IP PORT   connects to IP:PORT offering the device's maximum read
 *                                limits; prints "established", exits after the peer
 *                                disconnects.
 *
 * Exit status 0 on success; the reason on stderr otherwise. Output is line-buffered so the
 * driving program can read it as it happens.
 */
#define _GNU_SOURCE
#include "cm_peer.h"

#include <arpa/inet.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An RC QP on the id's device, and the device's read-limit maxima (what a peer that does not
 * cap itself offers). */
static int make_qp(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    struct ibv_device_attr attr;
    if (ibv_query_device(id->verbs, &attr))
        return fail("ibv_query_device");
    if (peer_rc_qp(id, NULL))
        return 1;
    memset(param, 0, sizeof *param);
    param->responder_resources = (uint8_t)(attr.max_qp_rd_atom > 255 ? 255 : attr.max_qp_rd_atom);
    param->initiator_depth = (uint8_t)(attr.max_qp_init_rd_atom > 255 ? 255 : attr.max_qp_init_rd_atom);
    param->retry_count = 7;
    param->rnr_retry_count = 7;
    fprintf(stderr, "plain-peer offers responder_resources %u initiator_depth %u\n", param->responder_resources,
            param->initiator_depth);
    return 0;
}

/* ESTABLISHED ("established" printed), then the peer's disconnect: the exit status. */
static int until_disconnected(struct rdma_event_channel *ch, struct rdma_cm_id *id)
{
    if (expect_event(ch, RDMA_CM_EVENT_ESTABLISHED))
        return 1;
    printf("established\n");
    if (expect_event(ch, RDMA_CM_EVENT_DISCONNECTED))
        return 1;
    rdma_disconnect(id);
    return 0;
}

int main(int argc, char **argv)
{
    struct peer p;
    peer_start(argc, argv, 4, "plain-peer hold|accept|connect IP PORT", 2, &p);
    const char *mode = argv[1];
    struct rdma_conn_param param;
    struct rdma_cm_event *ev;

    if (!strcmp(mode, "hold") || !strcmp(mode, "accept")) {
        if (peer_listen(p.id, &p.sin, 4))
            return 1;
        if (!strcmp(mode, "hold")) {
            char buf[64];
            while (read(0, buf, sizeof buf) > 0)
                ;
            return 0;
        }
        if (!(ev = next_event(p.ch, RDMA_CM_EVENT_CONNECT_REQUEST)))
            return 1;
        struct rdma_cm_id *conn = ev->id;
        fprintf(stderr, "plain-peer: REQ asks responder_resources %u initiator_depth %u\n",
                ev->param.conn.responder_resources, ev->param.conn.initiator_depth);
        rdma_ack_cm_event(ev);
        if (make_qp(conn, &param) || rdma_accept(conn, &param))
            return fail("rdma_accept");
        return until_disconnected(p.ch, conn);
    }
    if (!strcmp(mode, "connect")) {
        if (rdma_resolve_addr(p.id, NULL, (struct sockaddr *)&p.sin, 2000))
            return fail("rdma_resolve_addr");
        if (expect_event(p.ch, RDMA_CM_EVENT_ADDR_RESOLVED))
            return 1;
        if (rdma_resolve_route(p.id, 2000))
            return fail("rdma_resolve_route");
        if (expect_event(p.ch, RDMA_CM_EVENT_ROUTE_RESOLVED))
            return 1;
        if (make_qp(p.id, &param) || rdma_connect(p.id, &param))
            return fail("rdma_connect");
        return until_disconnected(p.ch, p.id);
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
