/*
 * nd2-verbs-peer: a plain libibverbs/librdmacm peer (not nd-shim) for nd2-queue-pair's
 * token-order case, which starts it. It takes ND2's remote token as the ND2 documents give it,
 * in network byte order, and gives its own so.
 *
 *   nd2-verbs-peer IP PORT
 *
 * Listens on IP:PORT and prints "ready". The connection request's private data is the ND side's
 * buffer: address (8 bytes, big-endian) and GetRemoteToken's value (4 bytes, as it is: ntohl
 * gives the rkey). It accepts with its own buffer the same way (address, htonl(rkey)); its
 * buffer's first 256 bytes hold k * 13 + 77. Once connected it reads 1 KiB of the ND buffer,
 * writes it back at offset 2048 and sends "done" (5 bytes); then waits for the ND side to
 * disconnect and prints "ok". Exit status 0 on success; the reason on stderr otherwise.
 */
#define _GNU_SOURCE
#include "../nd-conformance/cm_peer.h"

#include <arpa/inet.h>
#include <endian.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Posts one signaled work request and waits for its completion. */
static int run(struct rdma_cm_id *id, struct ibv_send_wr *wr, const char *what)
{
    struct ibv_send_wr *bad;
    if (ibv_post_send(id->qp, wr, &bad))
        return fail(what);
    struct ibv_wc wc;
    int n;
    while ((n = ibv_poll_cq(id->send_cq, 1, &wc)) == 0)
        ;
    if (n < 0 || wc.status != IBV_WC_SUCCESS) {
        fprintf(stderr, "%s: completion status %d (%s)\n", what, n < 0 ? -1 : (int)wc.status,
                n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct peer p;
    peer_start(argc, argv, 3, "nd2-verbs-peer IP PORT", 1, &p);
    if (peer_listen(p.id, &p.sin, 1))
        return 1;
    struct rdma_cm_event *ev = next_event(p.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
    if (!ev)
        return 1;
    struct rdma_cm_id *id = ev->id;
    if (ev->param.conn.private_data_len < 12) {
        fprintf(stderr, "private data of %u bytes\n", ev->param.conn.private_data_len);
        return 1;
    }
    uint64_t nd_addr;
    uint32_t nd_token;
    memcpy(&nd_addr, ev->param.conn.private_data, 8);
    memcpy(&nd_token, (const char *)ev->param.conn.private_data + 8, 4);
    rdma_ack_cm_event(ev);
    nd_addr = be64toh(nd_addr);
    uint32_t nd_rkey = ntohl(nd_token);

    static unsigned char buf[4096];
    for (unsigned k = 0; k < 256; k++)
        buf[k] = (unsigned char)(k * 13 + 77);
    struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
    struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, sizeof buf,
                                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)
                           : NULL;
    if (!mr)
        return fail("ibv_reg_mr");
    if (peer_rc_qp(id, pd))
        return 1;
    unsigned char mine[12];
    uint64_t addr = htobe64((uint64_t)(uintptr_t)buf);
    uint32_t token = htonl(mr->rkey);
    memcpy(mine, &addr, 8);
    memcpy(mine + 8, &token, 4);
    struct rdma_conn_param param = {
        .private_data = mine,
        .private_data_len = sizeof mine,
        .responder_resources = 1,
        .initiator_depth = 1,
        .retry_count = 7,
        .rnr_retry_count = 7,
    };
    if (rdma_accept(id, &param))
        return fail("rdma_accept");
    if (expect_event(p.ch, RDMA_CM_EVENT_ESTABLISHED))
        return 1;
    fprintf(stderr, "nd2-verbs-peer: ND token 0x%08x, rkey 0x%08x; ours rkey 0x%08x\n", nd_token, nd_rkey, mr->rkey);

    struct ibv_sge sge = {.addr = (uintptr_t)(buf + 1024), .length = 1024, .lkey = mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED};
    wr.opcode = IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = nd_addr;
    wr.wr.rdma.rkey = nd_rkey;
    if (run(id, &wr, "RDMA Read with ntohl(token)"))
        return 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = nd_addr + 2048;
    if (run(id, &wr, "RDMA Write with ntohl(token)"))
        return 1;
    memcpy(buf + 3072, "done", 5);
    sge.addr = (uintptr_t)(buf + 3072);
    sge.length = 5;
    wr.opcode = IBV_WR_SEND;
    if (run(id, &wr, "Send"))
        return 1;
    if (expect_event(p.ch, RDMA_CM_EVENT_DISCONNECTED))
        return 1;
    rdma_disconnect(id);
    rdma_destroy_qp(id);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    rdma_destroy_id(id);
    rdma_destroy_id(p.id);
    rdma_destroy_event_channel(p.ch);
    printf("ok\n");
    return 0;
}
