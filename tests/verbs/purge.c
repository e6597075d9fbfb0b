/*
 * verbs-purge: what a QP's CQ hands out after the QP is moved to RESET or destroyed, while the
 * CQ is in use. rxe_rs's rule (docs/provider-architecture.md, provider/src/cq/purge.rs): once
 * ibv_modify_qp(RESET) or ibv_destroy_qp returns, no poll that begins after it returns a
 * completion of that QP that was in the CQ then (mlx5's rule; the receive completions of an SRQ
 * QP excepted); an ibv_start_poll pair open meanwhile keeps its view and its ibv_end_poll drops
 * them. The stock rxe provider leaves them all in the CQ (the kernel's rxe does not touch a CQ
 * at RESET or destroy).
 *
 * Each round: QPs A and B on rxe1 (the client) share CQ X (ibv_create_cq_ex), each connected
 * to a QP on rxe0. B sends two messages (two send completions in X, the oldest), then A sends
 * one (a successful send completion) and posts four receives nobody sends to, and goes to ERR
 * (four flushed receive completions): five of A's in X. Then, by MODE:
 *
 *   reset-busy    another thread is inside ibv_start_poll .. ibv_end_poll on X (holding B's
 *                 first completion) while this thread moves A to RESET
 *   reset-self    this thread moves A to RESET from inside its own ibv_start_poll on X
 *   reset-td      as reset-busy, X on a parent domain with a thread domain (no lock): the
 *                 thread using X is mid-poll while another thread resets A (exit 2 if the
 *                 provider has no thread domains)
 *   destroy-busy  as reset-busy, A destroyed instead
 *   destroy       A destroyed, X idle
 *
 * then X is polled (ibv_poll_cq) until empty. Prints what was seen; exit 0 when none of A's five
 * came out and B's did (the purge rule), 3 when all five of A's did (the stock provider's
 * rule: they stay), 1 otherwise.
 *
 *   verbs-purge MODE ROUNDS
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MSG 64
#define A_RECVS 4

static struct loopback_dev client, server;
static struct ibv_cq *server_cq;
static struct ibv_mr *client_mr, *server_mr;
static char client_buf[MSG], server_buf[MSG * 8];
static struct ibv_cq_ex *x;
static sem_t opened, reset_done, closed;
static uint32_t pair_qp_num;
static uint64_t pair_wr_id;

static void wait_sem(sem_t *s)
{
	while (sem_wait(s) && errno == EINTR)
		;
}

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	return qp;
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, char *buf, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = MSG, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("ibv_post_recv: %s", strerror(errno));
}

static void post_send(struct ibv_qp *qp, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)client_buf, .length = MSG, .lkey = client_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send: %s", strerror(errno));
}

static void reap_server(int n)
{
	struct ibv_wc wc;
	for (int got = 0; got < n;) {
		int r = ibv_poll_cq(server_cq, 1, &wc);
		if (r < 0 || (r == 1 && wc.status != IBV_WC_SUCCESS))
			die("server completion: %d status %d", r, r == 1 ? (int)wc.status : -1);
		got += r;
	}
}

/* Opens a pair on X (ibv_start_poll until it has a completion) and records that completion's QP
 * number and wr_id in pair_qp_num and pair_wr_id. */
static void open_pair(void)
{
	struct ibv_poll_cq_attr pa = { 0 };
	int rc;
	while ((rc = ibv_start_poll(x, &pa)) == ENOENT)
		;
	if (rc)
		die("ibv_start_poll: %s", strerror(rc));
	pair_qp_num = ibv_wc_read_qp_num(x);
	pair_wr_id = x->wr_id;
}

/* Opens a pair on X (B's first completion), holds it across the main thread's reset, closes it. */
static void *holder(void *arg)
{
	(void)arg;
	open_pair();
	sem_post(&opened);
	wait_sem(&reset_done);
	ibv_end_poll(x);
	sem_post(&closed);
	return NULL;
}

static int round_(const char *mode, long i)
{
	int td_mode = !strcmp(mode, "reset-td");
	int busy = !strcmp(mode, "reset-busy") || td_mode || !strcmp(mode, "destroy-busy");
	int self = !strcmp(mode, "reset-self");
	int destroy = !strncmp(mode, "destroy", 7);
	struct ibv_td *td = NULL;
	struct ibv_pd *parent = NULL;
	struct ibv_cq_init_attr_ex ca = { .cqe = 64, .wc_flags = IBV_WC_EX_WITH_QP_NUM };

	if (td_mode && loopback_thread_domain(&client, &td, &parent, &ca))
		return 2;
	x = ibv_create_cq_ex(client.ctx, &ca);
	if (!x)
		die("ibv_create_cq_ex: %s", strerror(errno));
	struct ibv_qp *a = make_qp(client.pd, ibv_cq_ex_to_cq(x)), *b = make_qp(client.pd, ibv_cq_ex_to_cq(x));
	struct ibv_qp *pa_ = make_qp(server.pd, server_cq), *pb = make_qp(server.pd, server_cq);
	loopback_connect(&client, a, &server, pa_);
	loopback_connect(&client, b, &server, pb);
	uint32_t a_num = a->qp_num, b_num = b->qp_num;

	/* B's two send completions first, then A's send and its four flushed receives. */
	post_recv(pb, server_mr, server_buf, 1);
	post_recv(pb, server_mr, server_buf + MSG, 2);
	post_send(b, 0xb1);
	post_send(b, 0xb2);
	reap_server(2);
	usleep(100 * 1000);
	post_recv(pa_, server_mr, server_buf + 2 * MSG, 3);
	post_send(a, 0xa0);
	reap_server(1);
	for (int k = 1; k <= A_RECVS; k++)
		post_recv(a, client_mr, client_buf, 0xa0 + (uint64_t)k);
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	if (ibv_modify_qp(a, &err, IBV_QP_STATE))
		die("modify A to ERR: %s", strerror(errno));
	usleep(200 * 1000); /* the kernel's flush of A's receives */

	pthread_t t;
	if (busy && pthread_create(&t, NULL, holder, NULL))
		die("pthread_create");
	if (busy)
		wait_sem(&opened);
	if (self)
		open_pair();
	if (destroy) {
		if (ibv_destroy_qp(a))
			die("ibv_destroy_qp A: %s", strerror(errno));
	} else {
		struct ibv_qp_attr reset = { .qp_state = IBV_QPS_RESET };
		if (ibv_modify_qp(a, &reset, IBV_QP_STATE))
			die("modify A to RESET: %s", strerror(errno));
	}
	if (busy) {
		sem_post(&reset_done);
		wait_sem(&closed);
		pthread_join(t, NULL);
	}
	if (self)
		ibv_end_poll(x);
	if ((busy || self) && (pair_qp_num != b_num || pair_wr_id != 0xb1))
		die("the pair held qp %#x wr_id %#llx, not B's first", pair_qp_num, (unsigned long long)pair_wr_id);

	int seen_a = 0, seen_a_ok = 0, seen_b1 = 0, seen_b2 = 0, other = 0;
	struct ibv_wc wc[16];
	for (int idle = 0; idle < 3;) {
		int n = ibv_poll_cq(ibv_cq_ex_to_cq(x), 16, wc);
		if (n < 0)
			die("ibv_poll_cq: %d", n);
		if (n == 0) {
			idle++;
			usleep(20 * 1000);
			continue;
		}
		for (int k = 0; k < n; k++) {
			if (wc[k].qp_num == a_num) {
				seen_a++;
				seen_a_ok += wc[k].status == IBV_WC_SUCCESS;
			} else if (wc[k].qp_num == b_num && wc[k].wr_id == 0xb1 && wc[k].status == IBV_WC_SUCCESS) {
				seen_b1++;
			} else if (wc[k].qp_num == b_num && wc[k].wr_id == 0xb2 && wc[k].status == IBV_WC_SUCCESS) {
				seen_b2++;
			} else {
				other++;
			}
		}
	}
	printf("round %ld %s: after it returned, %d of A's %d completions (%d successful) came out; B's "
	       "second %s%s\n",
	       i, mode, seen_a, 1 + A_RECVS, seen_a_ok, seen_b2 == 1 ? "came out" : "MISSING",
	       other || seen_b1 != !(busy || self) ? ", and unexpected ones" : "");

	if (!destroy && ibv_destroy_qp(a))
		die("ibv_destroy_qp A: %s", strerror(errno));
	if (ibv_destroy_qp(b) || ibv_destroy_qp(pa_) || ibv_destroy_qp(pb) || ibv_destroy_cq(ibv_cq_ex_to_cq(x)))
		die("destroy: %s", strerror(errno));
	if (td_mode)
		loopback_free_thread_domain(td, parent);
	/* The server's flushed receive on A's peer (A is gone: its peer goes to error or stays). */
	struct ibv_wc drain[8];
	while (ibv_poll_cq(server_cq, 8, drain) > 0)
		;
	/* B's first came out of the pair, if there was one; here otherwise. */
	if (other || seen_b2 != 1 || seen_b1 != !(busy || self))
		return 1;
	if (seen_a == 0)
		return 0;
	return seen_a == 1 + A_RECVS ? 3 : 1;
}

int main(int argc, char **argv)
{
	long rounds;
	const char *modes[] = { "reset-busy", "reset-self", "reset-td", "destroy-busy", "destroy" };
	int known = 0;
	if (argc == 3)
		for (size_t k = 0; k < sizeof modes / sizeof *modes; k++)
			known |= !strcmp(argv[1], modes[k]);
	if (!known || (rounds = strtol(argv[2], NULL, 10)) <= 0)
		die("usage: verbs-purge reset-busy|reset-self|reset-td|destroy-busy|destroy ROUNDS");
	loopback_open(&client, "rxe1");
	loopback_open(&server, "rxe0");
	printf("provider %s\n", loopback_provider_path(&client));
	server_cq = ibv_create_cq(server.ctx, 64, NULL, NULL, 0);
	client_mr = ibv_reg_mr(client.pd, client_buf, MSG, IBV_ACCESS_LOCAL_WRITE);
	server_mr = ibv_reg_mr(server.pd, server_buf, sizeof server_buf, IBV_ACCESS_LOCAL_WRITE);
	if (!server_cq || !client_mr || !server_mr)
		die("set-up: %s", strerror(errno));
	sem_init(&opened, 0, 0);
	sem_init(&reset_done, 0, 0);
	sem_init(&closed, 0, 0);
	int first = -1, status = 0;
	for (long i = 0; i < rounds; i++) {
		int r = round_(argv[1], i);
		if (r == 2)
			return 2;
		if (first < 0)
			first = r;
		if (r != first || r == 1)
			status = 1;
	}
	if (status)
		printf("%s: the rounds disagree or broke both rules\n", argv[1]);
	else
		printf("%s: %ld rounds, %s\n", argv[1], rounds,
		       first == 0 ? "none of A's completions after the call (purged)"
				  : "all of A's completions still there (left in the CQ)");
	ibv_dereg_mr(client_mr);
	ibv_dereg_mr(server_mr);
	ibv_destroy_cq(server_cq);
	loopback_close(&client);
	loopback_close(&server);
	return status ? 1 : first;
}
