/*
 * verbs-stress: every work request completes exactly once, under load, through the queue pair
 * moved to error and the queue pair destroyed mid-flight (acceptance 3 of the provider issue).
 *
 * One process, two contexts: four RC pairs from rxe1 (client) to rxe0 (server). Client side:
 * pair 0 has three posting threads (post_send is thread-safe), pairs 1-3 one each; the four client
 * QPs share one CQ. Server side: the four QPs share another CQ; pairs 0 and 1 receive on their own
 * RQ, pairs 2 and 3 on one SRQ when the provider has SRQs (else on their own RQ, with a note).
 * A poller thread per side polls its CQ; the server's reposts a receive for each one completed.
 *
 * Each SEND carries its own wr_id as payload. Every WR (send or receive) takes a unique wr_id and a
 * state: posted -> completed (success or IBV_WC_WR_FLUSH_ERR) exactly once, or rejected by the post
 * call. A completion for a wr_id not in `posted` is a duplicate (or an unknown id). A receive's
 * payload marks its send delivered; a second delivery is a duplicate, and a send completed with
 * success but never delivered is lost.
 *
 * Mid-flight, while the threads post: pair 1's client QP goes to ERR (its outstanding and later
 * WRs must flush), then its thread stops, both its QPs are drained and destroyed, and its wr_ids
 * must never show up again. Near the end pair 0's client QP goes to ERR under its three threads.
 * At the end every QP goes to ERR and is drained; receives still in the SRQ when it is destroyed
 * are discarded by definition and counted apart. Prints the counts; exits 1 on any WR lost,
 * duplicated or completed with another status.
 *
 *   verbs-stress [SENDS]      (default 100000 sends; about as many receives)
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAIRS 4
#define POSTERS 6
#define SQ_DEPTH 128
#define RQ_DEPTH 256
#define SRQ_DEPTH 512
#define MSG_MAX 64
#define POLL_BATCH 16
#define DRAIN_SECONDS 30.0

enum kind { KIND_SEND = 1, KIND_RECV };

enum state {
	ST_FREE,
	ST_POSTED,
	ST_DONE,	/* completed with success */
	ST_FLUSHED,	/* completed with IBV_WC_WR_FLUSH_ERR */
	ST_BAD,		/* completed with another status */
	ST_REJECTED,	/* the post call refused it; it was never queued */
	ST_DISCARDED,	/* a receive still in the SRQ when the SRQ was destroyed */
};

struct meta {
	uint8_t state;	/* enum state, accessed atomically */
	uint8_t kind;
	uint8_t pair;
	uint8_t delivered; /* sends: how often a receive carried this wr_id */
	uint32_t slot;	/* receives: buffer slot */
};

struct pair {
	struct ibv_qp *cqp, *sqp; /* client (rxe1) and server (rxe0) ends */
	bool uses_srq;
	int sq_outstanding;	/* client sends posted, not yet completed */
	int rq_outstanding;	/* server receives on the own RQ, not yet completed */
	bool stop;		/* its posters stop early */
	bool destroyed;
};

struct poster {
	pthread_t thread;
	int index;
	int pair;
	long quota;
	long posted; /* attempts, rejected ones included */
	char *bufs; /* SQ_DEPTH * 2 message buffers of this thread, in the client MR */
};

static struct loopback_dev client, server;
static struct ibv_cq *client_cq, *server_cq;
static struct ibv_srq *srq;
static struct ibv_mr *client_mr, *server_mr;
static char *client_buf, *server_buf;
static struct pair pairs[PAIRS];
static struct poster posters[POSTERS];
static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER; /* held by the server poller per batch */

static struct meta *meta;
static uint64_t meta_cap;
static uint64_t next_id = 1;
static int srq_outstanding;
static long recv_slots_used;
static bool pollers_stop;
static bool stuck; /* a thread gave up waiting for completions: the run ends, and fails */

/* Totals, updated atomically. */
static long n_send_done, n_send_flushed, n_recv_done, n_recv_flushed, n_bad_status, n_duplicate,
	n_unknown, n_dup_delivery, n_bad_payload, n_recv_rejected, n_completions_after_destroy;

#define ATOMIC_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static uint64_t new_id(enum kind kind, int pair)
{
	uint64_t id = ATOMIC_ADD(&next_id, 1) - 1;

	if (id >= meta_cap)
		die("out of wr_ids (%" PRIu64 ")", meta_cap);
	meta[id].kind = (uint8_t)kind;
	meta[id].pair = (uint8_t)pair;
	STORE(&meta[id].state, ST_POSTED);
	return id;
}

static void post_recv_slot(int pair, uint32_t slot)
{
	bool to_srq = pairs[pair].uses_srq;
	uint64_t id = new_id(KIND_RECV, to_srq ? PAIRS : pair);
	struct ibv_sge sge = {
		.addr = (uintptr_t)(server_buf + (size_t)slot * MSG_MAX),
		.length = MSG_MAX,
		.lkey = server_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
	int rc;

	meta[id].slot = slot;
	if (to_srq)
		ATOMIC_ADD(&srq_outstanding, 1);
	else
		ATOMIC_ADD(&pairs[pair].rq_outstanding, 1);
	rc = to_srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(pairs[pair].sqp, &wr, &bad);
	if (rc) {
		if (bad != &wr)
			die("post_recv failed (%s) with bad_wr not pointing at the one WR", strerror(rc));
		STORE(&meta[id].state, ST_REJECTED);
		ATOMIC_ADD(&n_recv_rejected, 1);
		if (to_srq)
			ATOMIC_ADD(&srq_outstanding, -1);
		else
			ATOMIC_ADD(&pairs[pair].rq_outstanding, -1);
	}
}

/* Marks wr_id completed; returns its meta or NULL when it was not outstanding. */
static struct meta *complete(const struct ibv_wc *wc)
{
	uint8_t expected = ST_POSTED, to;
	struct meta *m;

	if (wc->wr_id == 0 || wc->wr_id >= LOAD(&next_id)) {
		ATOMIC_ADD(&n_unknown, 1);
		fprintf(stderr, "completion for unknown wr_id %" PRIu64 " (status %s)\n", wc->wr_id,
			ibv_wc_status_str(wc->status));
		return NULL;
	}
	m = &meta[wc->wr_id];
	if (wc->status == IBV_WC_SUCCESS)
		to = ST_DONE;
	else if (wc->status == IBV_WC_WR_FLUSH_ERR)
		to = ST_FLUSHED;
	else
		to = ST_BAD;
	if (!__atomic_compare_exchange_n(&m->state, &expected, to, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		ATOMIC_ADD(&n_duplicate, 1);
		fprintf(stderr, "wr_id %" PRIu64 " completed again (state was %u, status %s)\n",
			wc->wr_id, expected, ibv_wc_status_str(wc->status));
		return NULL;
	}
	if (m->pair < PAIRS && LOAD(&pairs[m->pair].destroyed))
		ATOMIC_ADD(&n_completions_after_destroy, 1);
	if (to == ST_BAD) {
		ATOMIC_ADD(&n_bad_status, 1);
		fprintf(stderr, "wr_id %" PRIu64 " completed with %s\n", wc->wr_id,
			ibv_wc_status_str(wc->status));
	}
	return m;
}

/* complete() of WC, which must be a completion of KIND if it is ours (dies saying WRONG otherwise). */
static struct meta *complete_kind(const struct ibv_wc *wc, enum kind kind, const char *wrong)
{
	struct meta *m = complete(wc);

	if (m && m->kind != kind)
		die("%s", wrong);
	return m;
}

static void *client_poller(void *arg)
{
	struct ibv_wc wc[POLL_BATCH];
	int i, n;

	(void)arg;
	while (!LOAD(&pollers_stop)) {
		n = ibv_poll_cq(client_cq, POLL_BATCH, wc);
		if (n < 0)
			die("client poll_cq: %d", n);
		if (n == 0)
			sched_yield();
		for (i = 0; i < n; i++) {
			struct meta *m = complete_kind(&wc[i], KIND_SEND, "a receive completed on the client CQ");

			if (!m)
				continue;
			if (wc[i].status == IBV_WC_SUCCESS)
				ATOMIC_ADD(&n_send_done, 1);
			else if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
				ATOMIC_ADD(&n_send_flushed, 1);
			ATOMIC_ADD(&pairs[m->pair].sq_outstanding, -1);
		}
	}
	return NULL;
}

static void on_receive(const struct ibv_wc *wc, struct meta *m)
{
	int pair = m->pair;

	if (pair == PAIRS)
		ATOMIC_ADD(&srq_outstanding, -1);
	else
		ATOMIC_ADD(&pairs[pair].rq_outstanding, -1);
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status == IBV_WC_WR_FLUSH_ERR)
			ATOMIC_ADD(&n_recv_flushed, 1);
		return;
	}
	ATOMIC_ADD(&n_recv_done, 1);
	if (wc->byte_len < sizeof(uint64_t) || wc->byte_len > MSG_MAX) {
		ATOMIC_ADD(&n_bad_payload, 1);
	} else {
		uint64_t sent;

		memcpy(&sent, server_buf + (size_t)m->slot * MSG_MAX, sizeof(sent));
		if (sent == 0 || sent >= LOAD(&next_id) || meta[sent].kind != KIND_SEND) {
			ATOMIC_ADD(&n_bad_payload, 1);
			fprintf(stderr, "receive %" PRIu64 " carries %" PRIu64 ", not a send's wr_id\n",
				wc->wr_id, sent);
		} else if (ATOMIC_ADD(&meta[sent].delivered, 1) > 1) {
			ATOMIC_ADD(&n_dup_delivery, 1);
			fprintf(stderr, "send %" PRIu64 " delivered again\n", sent);
		}
	}
	/* The slot is free again; an SRQ receive can go back whatever QP consumed it. */
	if (pair == PAIRS || !LOAD(&pairs[pair].stop))
		post_recv_slot(pair == PAIRS ? 2 : pair, m->slot);
}

static void *server_poller(void *arg)
{
	struct ibv_wc wc[POLL_BATCH];
	int i, n;

	(void)arg;
	while (!LOAD(&pollers_stop)) {
		pthread_mutex_lock(&server_lock);
		n = ibv_poll_cq(server_cq, POLL_BATCH, wc);
		if (n < 0)
			die("server poll_cq: %d", n);
		for (i = 0; i < n; i++) {
			struct meta *m = complete_kind(&wc[i], KIND_RECV, "a send completed on the server CQ");

			if (m)
				on_receive(&wc[i], m);
		}
		pthread_mutex_unlock(&server_lock);
		if (n == 0)
			sched_yield();
	}
	return NULL;
}

static void *poster_main(void *arg)
{
	struct poster *p = arg;
	struct pair *pr = &pairs[p->pair];
	long k;

	for (k = 0; k < p->quota && !LOAD(&pr->stop); k++) {
		/* A send queue slot: at most SQ_DEPTH sends of this QP between post and completion. */
		int cur = LOAD(&pr->sq_outstanding);
		double deadline = 0;

		while (cur >= SQ_DEPTH || !__atomic_compare_exchange_n(&pr->sq_outstanding, &cur, cur + 1,
								       false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			if (LOAD(&pr->stop))
				return NULL;
			if (cur < SQ_DEPTH)
				continue;
			if (deadline == 0) {
				deadline = now_seconds() + DRAIN_SECONDS;
			} else if (now_seconds() > deadline) {
				fprintf(stderr, "thread %d: pair %d's %d sends did not complete in %.0f s\n",
					p->index, p->pair, cur, DRAIN_SECONDS);
				STORE(&stuck, true);
				return NULL;
			}
			sched_yield();
			cur = LOAD(&pr->sq_outstanding);
		}
		uint64_t id = new_id(KIND_SEND, p->pair);
		/* Completions of one RC QP come in order, so a buffer is free again after 2*SQ_DEPTH posts. */
		char *buf = p->bufs + (size_t)(k % (2 * SQ_DEPTH)) * MSG_MAX;
		uint32_t len = 8 + (uint32_t)(id % (MSG_MAX - 7));
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = client_mr->lkey };
		struct ibv_send_wr wr = LOOPBACK_SEND_WR(id, IBV_WR_SEND, &sge), *bad = NULL;
		int rc;

		if (id % 4 == 0)
			wr.send_flags |= IBV_SEND_INLINE;
		memset(buf, (int)(id & 0xff), len);
		memcpy(buf, &id, sizeof(id));
		rc = ibv_post_send(pr->cqp, &wr, &bad);
		if (rc) {
			if (bad != &wr)
				die("post_send failed (%s) with bad_wr not pointing at the one WR", strerror(rc));
			STORE(&meta[id].state, ST_REJECTED);
			ATOMIC_ADD(&pr->sq_outstanding, -1);
		}
		STORE(&p->posted, p->posted + 1);
	}
	return NULL;
}

static void move_to_error(struct ibv_qp *qp, const char *what)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);

	if (rc)
		die("modify_qp %s to ERR: %s", what, strerror(rc));
}

/* Waits until *counter is 0; false after DRAIN_SECONDS. */
static bool drain(int *counter, const char *what)
{
	double deadline = now_seconds() + DRAIN_SECONDS;

	while (LOAD(counter) != 0) {
		if (now_seconds() > deadline) {
			fprintf(stderr, "%s: %d WRs never completed\n", what, LOAD(counter));
			return false;
		}
		usleep(1000);
	}
	return true;
}

static struct ibv_qp *create_qp(struct loopback_dev *dev, struct ibv_cq *cq, struct ibv_srq *s)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = s,
		.cap = {
			.max_send_wr = SQ_DEPTH,
			.max_recv_wr = s ? 0 : RQ_DEPTH,
			.max_send_sge = 1,
			.max_recv_sge = 1,
			.max_inline_data = MSG_MAX,
		},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(dev->pd, &attr);

	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	return qp;
}

/* Its threads stop posting and the server stops reposting its receives. Under the server lock:
 * a poller batch in progress reposts before, none after. */
static void stop_pair(int i)
{
	pthread_mutex_lock(&server_lock);
	STORE(&pairs[i].stop, true);
	pthread_mutex_unlock(&server_lock);
}

static void destroy_pair(int i)
{
	STORE(&pairs[i].destroyed, true);
	if (ibv_destroy_qp(pairs[i].cqp))
		die("ibv_destroy_qp (client, pair %d): %s", i, strerror(errno));
	if (ibv_destroy_qp(pairs[i].sqp))
		die("ibv_destroy_qp (server, pair %d): %s", i, strerror(errno));
}

int main(int argc, char **argv)
{
	long total_sends = argc > 1 ? atol(argv[1]) : 100000;
	struct ibv_srq_init_attr srq_attr = { .attr = { .max_wr = SRQ_DEPTH, .max_sge = 1 } };
	pthread_t cpoll, spoll;
	long lost = 0, undelivered = 0, discarded = 0, posted_sends = 0, rejected_sends = 0;
	long per_state[ST_DISCARDED + 1] = { 0 }, posted_at_err[PAIRS] = { 0 };
	long pair_sends[PAIRS][ST_DISCARDED + 1] = { { 0 } };
	double started;
	size_t recv_slots;
	bool drained = true;
	uint64_t id;
	int i;

	if (total_sends < 1000)
		die("usage: verbs-stress [SENDS >= 1000]");
	setvbuf(stdout, NULL, _IOLBF, 0);
	loopback_open_pair(&client, &server);
	printf("provider: client %s, server %s\n", loopback_provider_path(&client),
	       loopback_provider_path(&server));

	/* Every send gets at most one receive; receives left posted add the queue depths. */
	meta_cap = 2 * (uint64_t)total_sends + PAIRS * RQ_DEPTH + SRQ_DEPTH + 16;
	meta = calloc(meta_cap, sizeof(*meta));
	recv_slots = PAIRS * RQ_DEPTH + SRQ_DEPTH;
	client_buf = calloc(POSTERS, 2 * SQ_DEPTH * MSG_MAX);
	server_buf = calloc(recv_slots, MSG_MAX);
	if (!meta || !client_buf || !server_buf)
		die("out of memory");
	client_mr = ibv_reg_mr(client.pd, client_buf, (size_t)POSTERS * 2 * SQ_DEPTH * MSG_MAX,
			       IBV_ACCESS_LOCAL_WRITE);
	server_mr = ibv_reg_mr(server.pd, server_buf, recv_slots * MSG_MAX, IBV_ACCESS_LOCAL_WRITE);
	if (!client_mr || !server_mr)
		die("ibv_reg_mr: %s", strerror(errno));
	client_cq = ibv_create_cq(client.ctx, PAIRS * SQ_DEPTH + 64, NULL, NULL, 0);
	server_cq = ibv_create_cq(server.ctx, (int)recv_slots + 64, NULL, NULL, 0);
	if (!client_cq || !server_cq)
		die("ibv_create_cq: %s", strerror(errno));

	srq = ibv_create_srq(server.pd, &srq_attr);
	if (srq)
		printf("SRQ: pairs 2 and 3 receive on one SRQ (%d receives)\n", SRQ_DEPTH);
	else
		printf("note: ibv_create_srq failed (%s); the SRQ part is skipped, pairs 2 and 3 "
		       "receive on their own RQ\n", strerror(errno));

	for (i = 0; i < PAIRS; i++) {
		pairs[i].uses_srq = srq && i >= 2;
		pairs[i].cqp = create_qp(&client, client_cq, NULL);
		pairs[i].sqp = create_qp(&server, server_cq, pairs[i].uses_srq ? srq : NULL);
		loopback_connect(&client, pairs[i].cqp, &server, pairs[i].sqp);
		if (!pairs[i].uses_srq)
			for (int k = 0; k < RQ_DEPTH; k++)
				post_recv_slot(i, (uint32_t)recv_slots_used++);
	}
	if (srq)
		for (int k = 0; k < SRQ_DEPTH; k++)
			post_recv_slot(2, (uint32_t)recv_slots_used++);

	/* Half the sends on pair 0's three threads, the rest spread over pairs 1-3. */
	for (i = 0; i < POSTERS; i++) {
		posters[i].index = i;
		posters[i].pair = i < 3 ? 0 : i - 2;
		posters[i].quota = total_sends / POSTERS;
		posters[i].bufs = client_buf + (size_t)i * 2 * SQ_DEPTH * MSG_MAX;
	}
	printf("plan: %ld sends, %d pairs, %d posting threads (3 on pair 0)\n", total_sends, PAIRS, POSTERS);

	started = now_seconds();
	if (pthread_create(&cpoll, NULL, client_poller, NULL) ||
	    pthread_create(&spoll, NULL, server_poller, NULL))
		die("pthread_create");
	for (i = 0; i < POSTERS; i++)
		if (pthread_create(&posters[i].thread, NULL, poster_main, &posters[i]))
			die("pthread_create");

	/* Pair 1 to ERR halfway through its thread's run; the thread goes on posting for a while,
	 * then stops, and both QPs are drained and destroyed. */
	while (LOAD(&posters[3].posted) < posters[3].quota / 2 && !LOAD(&stuck))
		usleep(1000);
	move_to_error(pairs[1].cqp, "pair 1 client");
	posted_at_err[1] = LOAD(&posters[3].posted);
	printf("[%.1f s] pair 1 client QP -> ERR after %ld posts, %d sends outstanding\n",
	       now_seconds() - started, posted_at_err[1], LOAD(&pairs[1].sq_outstanding));
	while (LOAD(&posters[3].posted) < posters[3].quota * 3 / 4 && !LOAD(&stuck))
		usleep(1000);
	stop_pair(1);
	pthread_join(posters[3].thread, NULL);
	drained &= drain(&pairs[1].sq_outstanding, "pair 1 client sends");
	move_to_error(pairs[1].sqp, "pair 1 server");
	drained &= drain(&pairs[1].rq_outstanding, "pair 1 server receives");
	destroy_pair(1);
	printf("[%.1f s] pair 1 drained and destroyed (its thread posted %ld of %ld)\n",
	       now_seconds() - started, posters[3].posted, posters[3].quota);

	/* Pair 0 to ERR under its three threads, late in their run. */
	while (LOAD(&posters[0].posted) + LOAD(&posters[1].posted) + LOAD(&posters[2].posted) <
	       (posters[0].quota + posters[1].quota + posters[2].quota) * 9 / 10 && !LOAD(&stuck))
		usleep(1000);
	move_to_error(pairs[0].cqp, "pair 0 client");
	posted_at_err[0] = LOAD(&posters[0].posted) + LOAD(&posters[1].posted) + LOAD(&posters[2].posted);
	printf("[%.1f s] pair 0 client QP -> ERR after %ld posts, %d sends outstanding, 3 threads posting\n",
	       now_seconds() - started, posted_at_err[0], LOAD(&pairs[0].sq_outstanding));

	for (i = 0; i < POSTERS; i++)
		if (i != 3)
			pthread_join(posters[i].thread, NULL);
	printf("[%.1f s] all threads done posting\n", now_seconds() - started);

	/* The end: every QP to ERR, everything outstanding flushes. */
	for (i = 0; i < PAIRS; i++) {
		if (pairs[i].destroyed)
			continue;
		drained &= drain(&pairs[i].sq_outstanding, "client sends");
		stop_pair(i);
		move_to_error(pairs[i].cqp, "client");
		move_to_error(pairs[i].sqp, "server");
	}
	for (i = 0; i < PAIRS; i++)
		if (!pairs[i].destroyed)
			drained &= drain(&pairs[i].rq_outstanding, "server receives");
	/* A last look for stray completions, then the pollers stop. */
	usleep(300000);
	STORE(&pollers_stop, true);
	pthread_join(cpoll, NULL);
	pthread_join(spoll, NULL);
	printf("[%.1f s] drained\n", now_seconds() - started);

	for (i = 0; i < PAIRS; i++)
		if (!pairs[i].destroyed)
			destroy_pair(i);
	if (srq && ibv_destroy_srq(srq))
		die("ibv_destroy_srq: %s", strerror(errno));
	if (ibv_destroy_cq(client_cq) || ibv_destroy_cq(server_cq))
		die("ibv_destroy_cq: %s", strerror(errno));
	if (ibv_dereg_mr(client_mr) || ibv_dereg_mr(server_mr))
		die("ibv_dereg_mr");
	loopback_close_pair(&client, &server);

	for (id = 1; id < next_id; id++) {
		struct meta *m = &meta[id];

		if (m->state == ST_POSTED && m->kind == KIND_RECV && m->pair == PAIRS) {
			m->state = ST_DISCARDED;
		} else if (m->state == ST_POSTED) {
			lost++;
			if (lost <= 10)
				fprintf(stderr, "wr_id %" PRIu64 " (%s, pair %u) never completed\n", id,
					m->kind == KIND_SEND ? "send" : "receive", m->pair);
		}
		if (m->kind == KIND_SEND && m->state == ST_DONE && m->delivered == 0) {
			undelivered++;
			if (undelivered <= 10)
				fprintf(stderr, "send %" PRIu64 " completed with success, never received\n", id);
		}
		if (m->kind == KIND_SEND) {
			pair_sends[m->pair][m->state]++;
			posted_sends++;
			rejected_sends += m->state == ST_REJECTED;
		}
		per_state[m->state]++;
	}
	discarded = per_state[ST_DISCARDED];

	printf("work requests: %" PRIu64 " (%ld sends, %" PRIu64 " receives) in %.1f s\n", next_id - 1,
	       posted_sends, next_id - 1 - (uint64_t)posted_sends, now_seconds() - started);
	printf("  sends:    %ld success, %ld flushed, %ld rejected at post\n", n_send_done,
	       n_send_flushed, rejected_sends);
	printf("  receives: %ld success, %ld flushed, %ld rejected at post, %ld discarded with the SRQ\n",
	       n_recv_done, n_recv_flushed, n_recv_rejected, discarded);
	for (i = 0; i < PAIRS; i++)
		printf("  pair %d sends: %ld success, %ld flushed, %ld rejected%s\n", i,
		       pair_sends[i][ST_DONE], pair_sends[i][ST_FLUSHED], pair_sends[i][ST_REJECTED],
		       i == 0 ? " (ERR under 3 threads)" : i == 1 ? " (ERR, then destroyed)" : "");
	printf("  per thread posted:");
	for (i = 0; i < POSTERS; i++)
		printf(" %ld", posters[i].posted);
	printf("\n");
	printf("  lost %ld, duplicated %ld, unknown %ld, other status %ld, duplicate deliveries %ld, "
	       "bad payloads %ld, successful sends never received %ld, completions after destroy %ld\n",
	       lost, n_duplicate, n_unknown, n_bad_status, n_dup_delivery, n_bad_payload, undelivered,
	       n_completions_after_destroy);
	if (lost || n_duplicate || n_unknown || n_bad_status || n_dup_delivery || n_bad_payload ||
	    undelivered || n_completions_after_destroy || !drained || stuck) {
		printf("FAIL\n");
		return 1;
	}
	printf("PASS: every work request completed exactly once\n");
	return 0;
}
