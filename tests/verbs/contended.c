/*
 * verbs-contended: THREADS threads share one RC QP (rxe1 to rxe0, both ends in this process) and
 * its one CQ. Each thread posts signalled 8-byte RDMA WRITEs and polls the shared CQ, counting
 * whichever completions it finds, until N completions were reaped in all; at most the send
 * queue's depth is outstanding. Both the send queue's lock and the CQ's lock are contended. It
 * prints figures; it tests nothing.
 *
 *   verbs-contended THREADS N       prints ops/s (N completions / wall time)
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MSG 8
#define SQ_DEPTH 64
#define POLL_BATCH 16

static struct loopback_dev client, server;
static struct ibv_cq *client_cq, *server_cq;
static struct ibv_qp *cqp, *sqp;
static struct ibv_mr *client_mr, *server_mr;
static char client_buf[MSG], server_buf[MSG];
static long total;
static atomic_long reserved;     /* posts handed out (at most total) */
static atomic_long completed;    /* completions reaped */
static atomic_int in_flight;     /* posted, not yet reaped (at most SQ_DEPTH) */

/* A token for one more outstanding WRITE, if the send queue has room and posts remain. */
static int take_post(void)
{
	int f = atomic_load(&in_flight);

	while (f < SQ_DEPTH)
		if (atomic_compare_exchange_weak(&in_flight, &f, f + 1)) {
			if (atomic_fetch_add(&reserved, 1) < total)
				return 1;
			atomic_fetch_sub(&reserved, 1);
			atomic_fetch_sub(&in_flight, 1);
			return 0;
		}
	return 0;
}

static void *worker(void *arg)
{
	uintptr_t me = (uintptr_t)arg;
	struct ibv_wc wc[POLL_BATCH];

	while (atomic_load(&completed) < total) {
		if (take_post()) {
			int rc = loopback_post_write(cqp, me, client_buf, MSG, client_mr, server_buf, server_mr);

			if (rc == ENOMEM) {
				/* The kernel has not consumed far enough yet: give the token back. */
				atomic_fetch_sub(&reserved, 1);
				atomic_fetch_sub(&in_flight, 1);
			} else if (rc) {
				die("post_send: %s", strerror(rc));
			}
		}
		int n = ibv_poll_cq(client_cq, POLL_BATCH, wc);

		if (n < 0)
			die("poll_cq: %d", n);
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die("completion: %s", ibv_wc_status_str(wc[i].status));
		if (n) {
			atomic_fetch_sub(&in_flight, n);
			atomic_fetch_add(&completed, n);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = SQ_DEPTH, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	pthread_t tid[64];
	long threads;
	double t;

	if (argc != 3 || (threads = atol(argv[1])) <= 0 || threads > 64 || (total = atol(argv[2])) <= 0)
		die("usage: verbs-contended THREADS(1..64) N");

	loopback_open_pair(&client, &server);
	client_mr = loopback_reg_mr(&client, client_buf, sizeof(client_buf), IBV_ACCESS_LOCAL_WRITE);
	server_mr = loopback_reg_mr(&server, server_buf, sizeof(server_buf),
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	client_cq = ibv_create_cq(client.ctx, 2 * SQ_DEPTH, NULL, NULL, 0);
	server_cq = ibv_create_cq(server.ctx, 16, NULL, NULL, 0);
	if (!client_cq || !server_cq)
		die("ibv_create_cq: %s", strerror(errno));
	attr.send_cq = attr.recv_cq = client_cq;
	cqp = ibv_create_qp(client.pd, &attr);
	attr.send_cq = attr.recv_cq = server_cq;
	sqp = ibv_create_qp(server.pd, &attr);
	if (!cqp || !sqp)
		die("ibv_create_qp: %s", strerror(errno));
	loopback_connect(&client, cqp, &server, sqp);

	t = now_seconds();
	for (long i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)i))
			die("pthread_create");
	for (long i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	t = now_seconds() - t;
	printf("contended %ld threads: %ld WRITEs in %.3f s: %.0f ops/s (provider %s)\n", threads, total, t,
	       total / t, loopback_provider_path(&client));

	if (ibv_destroy_qp(cqp) || ibv_destroy_qp(sqp) || ibv_destroy_cq(client_cq) ||
	    ibv_destroy_cq(server_cq) || ibv_dereg_mr(client_mr) || ibv_dereg_mr(server_mr))
		die("teardown: %s", strerror(errno));
	loopback_close_pair(&client, &server);
	return 0;
}
