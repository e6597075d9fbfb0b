/*
 * verbs-split-pairs: the verbs pairs opened on one thread and closed on another, as the verbs
 * contract allows ("one thread at a time", not "the same thread": Go without LockOSThread, JVM
 * virtual threads and async executors move a task between OS threads between two calls).
 *
 * An RC QP created with ibv_create_qp_ex (rxe1, the client) sends to one on rxe0 (the server),
 * both in this process. Each of N rounds: thread A calls ibv_wr_start and ibv_wr_send, thread B
 * sets the SGE and calls ibv_wr_complete; then thread A calls ibv_start_poll on the client's
 * ibv_cq_ex until it finds the send's completion, and thread B reads it and calls
 * ibv_end_poll. The threads take turns through semaphores, so only one of them is ever inside
 * the pair. Every round's completion must be the round's send, with success, seen once (a pair
 * whose close was ignored would keep the lock held, and the next ibv_start_poll would hang or
 * hand out the same completion again).
 *
 *   verbs-split-pairs N [td]   td: the client's QP and CQ on a parent domain with a thread
 *                              domain (no lock); exit 2 if the provider has no thread domains
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG 64

static struct loopback_dev client, server;
static struct ibv_cq_ex *client_cq;
static struct ibv_cq *server_cq;
static struct ibv_qp *cqp, *sqp;
static struct ibv_qp_ex *cqpx;
static struct ibv_mr *client_mr, *server_mr;
static char client_buf[MSG], server_buf[MSG];

/* Turns: A runs, posts to B's semaphore, waits on its own. */
static sem_t turn_a, turn_b;
static long rounds;
static uint64_t polled_wr_id;
static int polled_status = -1;

static void give(sem_t *to, sem_t *mine)
{
	sem_post(to);
	while (sem_wait(mine) && errno == EINTR)
		;
}

static void wait_turn(sem_t *mine)
{
	while (sem_wait(mine) && errno == EINTR)
		;
}

/* Thread B: closes what A opened. */
static void *closer(void *arg)
{
	(void)arg;
	for (long i = 0; i < rounds; i++) {
		wait_turn(&turn_b);
		ibv_wr_set_sge(cqpx, client_mr->lkey, (uintptr_t)client_buf, MSG);
		int rc = ibv_wr_complete(cqpx);
		if (rc)
			die("round %ld: ibv_wr_complete on the other thread: %s", i, strerror(rc));
		give(&turn_a, &turn_b);
		/* A found the completion with ibv_start_poll: read it here, then end the poll. */
		polled_wr_id = client_cq->wr_id;
		polled_status = client_cq->status;
		if (ibv_wc_read_opcode(client_cq) != IBV_WC_SEND)
			die("round %ld: opcode %d, not IBV_WC_SEND", i, ibv_wc_read_opcode(client_cq));
		ibv_end_poll(client_cq);
		sem_post(&turn_a);
	}
	return NULL;
}

static void post_recv(long i)
{
	struct ibv_sge sge = { .addr = (uintptr_t)server_buf, .length = MSG, .lkey = server_mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(sqp, &wr, &bad))
		die("ibv_post_recv: %s", strerror(errno));
}

static void reap_server(long i)
{
	struct ibv_wc wc;
	int n;

	while ((n = ibv_poll_cq(server_cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i)
		die("round %ld: server completion n=%d status %d wr_id %llu", i, n, n > 0 ? (int)wc.status : -1,
		    (unsigned long long)wc.wr_id);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (rounds = strtol(argv[1], NULL, 10)) <= 0 ||
	    (argc == 3 && strcmp(argv[2], "td")))
		die("usage: verbs-split-pairs N [td]");
	int use_td = argc == 3;

	loopback_open(&client, "rxe1");
	loopback_open(&server, "rxe0");
	printf("provider %s\n", loopback_provider_path(&client));

	struct ibv_pd *qp_pd = client.pd;
	struct ibv_td *td = NULL;
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = 64,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
	};
	if (use_td) {
		struct ibv_td_init_attr td_attr = { 0 };
		td = ibv_alloc_td(client.ctx, &td_attr);
		if (!td) {
			printf("thread domain: ibv_alloc_td: %s (this provider has none)\n", strerror(errno));
			return 2;
		}
		struct ibv_parent_domain_init_attr pd_attr = { .pd = client.pd, .td = td };
		qp_pd = ibv_alloc_parent_domain(client.ctx, &pd_attr);
		if (!qp_pd)
			die("ibv_alloc_parent_domain: %s", strerror(errno));
		cq_attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
		cq_attr.parent_domain = qp_pd;
	}
	client_cq = ibv_create_cq_ex(client.ctx, &cq_attr);
	server_cq = ibv_create_cq(server.ctx, 64, NULL, NULL, 0);
	if (!client_cq || !server_cq)
		die("ibv_create_cq(_ex): %s", strerror(errno));
	client_mr = ibv_reg_mr(client.pd, client_buf, MSG, IBV_ACCESS_LOCAL_WRITE);
	server_mr = ibv_reg_mr(server.pd, server_buf, MSG, IBV_ACCESS_LOCAL_WRITE);
	if (!client_mr || !server_mr)
		die("ibv_reg_mr: %s", strerror(errno));

	struct ibv_qp_init_attr_ex ax = {
		.send_cq = ibv_cq_ex_to_cq(client_cq),
		.recv_cq = ibv_cq_ex_to_cq(client_cq),
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = qp_pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	cqp = ibv_create_qp_ex(client.ctx, &ax);
	struct ibv_qp_init_attr attr = {
		.send_cq = server_cq,
		.recv_cq = server_cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	sqp = ibv_create_qp(server.pd, &attr);
	if (!cqp || !sqp)
		die("ibv_create_qp(_ex): %s", strerror(errno));
	cqpx = ibv_qp_to_qp_ex(cqp);
	if (!cqpx)
		die("ibv_qp_to_qp_ex: NULL");
	loopback_connect(&client, cqp, &server, sqp);

	sem_init(&turn_a, 0, 0);
	sem_init(&turn_b, 0, 0);
	pthread_t b;
	if (pthread_create(&b, NULL, closer, NULL))
		die("pthread_create");

	for (long i = 0; i < rounds; i++) {
		post_recv(i);
		ibv_wr_start(cqpx);
		cqpx->wr_id = 0x5000 + (uint64_t)i;
		cqpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(cqpx);
		give(&turn_b, &turn_a); /* B sets the SGE and completes the batch */
		struct ibv_poll_cq_attr pa = { 0 };
		int rc;
		while ((rc = ibv_start_poll(client_cq, &pa)) == ENOENT)
			;
		if (rc)
			die("round %ld: ibv_start_poll: %s", i, strerror(rc));
		give(&turn_b, &turn_a); /* B reads the completion and ends the poll */
		if (polled_wr_id != 0x5000 + (uint64_t)i || polled_status != IBV_WC_SUCCESS)
			die("round %ld: completion wr_id %#llx status %d, expected %#llx, success", i,
			    (unsigned long long)polled_wr_id, polled_status, (unsigned long long)(0x5000 + i));
		reap_server(i);
	}
	pthread_join(b, NULL);
	/* Nothing is handed out twice. */
	struct ibv_poll_cq_attr pa = { 0 };
	int rc = ibv_start_poll(client_cq, &pa);
	if (rc != ENOENT)
		die("after the rounds: ibv_start_poll %d, expected ENOENT (a completion delivered again?)", rc);
	printf("%ld rounds%s: wr_start/wr_send on one thread, wr_complete on another; start_poll on one, "
	       "end_poll on another; every completion once\n",
	       rounds, use_td ? " on a thread domain" : "");

	if (ibv_destroy_qp(cqp) || ibv_destroy_qp(sqp) || ibv_destroy_cq(ibv_cq_ex_to_cq(client_cq)) ||
	    ibv_destroy_cq(server_cq) || ibv_dereg_mr(client_mr) || ibv_dereg_mr(server_mr))
		die("destroy: %s", strerror(errno));
	if (use_td && (ibv_dealloc_pd(qp_pd) || ibv_dealloc_td(td)))
		die("dealloc parent domain / td: %s", strerror(errno));
	loopback_close(&client);
	loopback_close(&server);
	return 0;
}
