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
 *   verbs-split-pairs N abba   N times: two threads each inside an ibv_start_poll of one CQ
 *                              move to RESET a QP of the CQ the other polls; both must return
 *                              (the stock provider takes no CQ lock there; a provider that
 *                              purges a reset QP's completions under the CQ lock would
 *                              deadlock, each waiting for the other's poll)
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

/* abba: a client QP on each of two CQs, each with one completion waiting. */
static struct ibv_cq_ex *abba_cq[2];
static struct ibv_qp *abba_qp[2], *abba_peer[2];
static pthread_barrier_t abba_barrier;

static void *abba_thread(void *arg)
{
	long me = (long)arg, other = 1 - me;
	struct ibv_poll_cq_attr pa = { 0 };
	int rc;

	while ((rc = ibv_start_poll(abba_cq[me], &pa)) == ENOENT)
		;
	if (rc)
		die("abba: ibv_start_poll: %s", strerror(rc));
	pthread_barrier_wait(&abba_barrier);
	/* Inside our poll of CQ me: reset the QP whose CQ the other thread is polling. */
	struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(abba_qp[other], &reset, IBV_QP_STATE))
		die("abba: ibv_modify_qp RESET: %s", strerror(errno));
	pthread_barrier_wait(&abba_barrier);
	ibv_end_poll(abba_cq[me]);
	return NULL;
}

static void abba_round(long i)
{
	struct ibv_cq_init_attr_ex cq_attr = { .cqe = 16, .wc_flags = IBV_WC_EX_WITH_BYTE_LEN };
	for (int k = 0; k < 2; k++) {
		abba_cq[k] = ibv_create_cq_ex(client.ctx, &cq_attr);
		if (!abba_cq[k])
			die("abba: ibv_create_cq_ex: %s", strerror(errno));
		struct ibv_qp_init_attr a = {
			.send_cq = ibv_cq_ex_to_cq(abba_cq[k]),
			.recv_cq = ibv_cq_ex_to_cq(abba_cq[k]),
			.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
			.sq_sig_all = 1,
		};
		abba_qp[k] = ibv_create_qp(client.pd, &a);
		a.send_cq = a.recv_cq = server_cq;
		abba_peer[k] = ibv_create_qp(server.pd, &a);
		if (!abba_qp[k] || !abba_peer[k])
			die("abba: ibv_create_qp: %s", strerror(errno));
		loopback_connect(&client, abba_qp[k], &server, abba_peer[k]);
		struct ibv_sge sge = { .addr = (uintptr_t)server_buf, .length = MSG, .lkey = server_mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *rbad;
		if (ibv_post_recv(abba_peer[k], &rwr, &rbad))
			die("abba: ibv_post_recv: %s", strerror(errno));
		struct ibv_sge ssge = { .addr = (uintptr_t)client_buf, .length = MSG, .lkey = client_mr->lkey };
		struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND }, *sbad;
		if (ibv_post_send(abba_qp[k], &swr, &sbad))
			die("abba: ibv_post_send: %s", strerror(errno));
		reap_server(1);
	}
	pthread_t t[2];
	for (long k = 0; k < 2; k++)
		if (pthread_create(&t[k], NULL, abba_thread, (void *)k))
			die("pthread_create");
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	for (int k = 0; k < 2; k++) {
		if (ibv_destroy_qp(abba_qp[k]) || ibv_destroy_qp(abba_peer[k]) ||
		    ibv_destroy_cq(ibv_cq_ex_to_cq(abba_cq[k])))
			die("abba round %ld: destroy: %s", i, strerror(errno));
	}
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 || (rounds = strtol(argv[1], NULL, 10)) <= 0 ||
	    (argc == 3 && strcmp(argv[2], "td") && strcmp(argv[2], "abba")))
		die("usage: verbs-split-pairs N [td|abba]");
	int use_td = argc == 3 && !strcmp(argv[2], "td");
	int abba = argc == 3 && !strcmp(argv[2], "abba");

	loopback_open_pair(&client, &server);
	printf("provider %s\n", loopback_provider_path(&client));

	if (abba) {
		server_cq = ibv_create_cq(server.ctx, 64, NULL, NULL, 0);
		client_mr = ibv_reg_mr(client.pd, client_buf, MSG, IBV_ACCESS_LOCAL_WRITE);
		server_mr = ibv_reg_mr(server.pd, server_buf, MSG, IBV_ACCESS_LOCAL_WRITE);
		if (!server_cq || !client_mr || !server_mr)
			die("abba: set-up: %s", strerror(errno));
		pthread_barrier_init(&abba_barrier, NULL, 2);
		for (long i = 0; i < rounds; i++)
			abba_round(i);
		printf("%ld rounds: two threads, each inside a poll of one CQ, reset a QP of the other's CQ; "
		       "both returned\n", rounds);
		return 0;
	}

	struct ibv_pd *qp_pd = client.pd;
	struct ibv_td *td = NULL;
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = 64,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
	};
	if (use_td && loopback_thread_domain(&client, &td, &qp_pd, &cq_attr))
		return 2;
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
	if (use_td)
		loopback_free_thread_domain(td, qp_pd);
	loopback_close_pair(&client, &server);
	return 0;
}
