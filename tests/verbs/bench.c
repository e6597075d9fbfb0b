/*
 * verbs-bench: the cost of one post_send + poll_cq pair on an RC QP from rxe1 to rxe0 (both ends in
 * this process), for whichever provider libibverbs loads. It prints figures; it tests nothing.
 *
 *   verbs-bench rate OP N            N signalled 8-byte RDMA WRITEs (or SENDs, or 4 KiB RDMA
 *                                    READs), each posted, then polled for until its completion:
 *                                    prints ops/s
 *   verbs-bench count write|send N   the same pair, but the completion is awaited through a CQ
 *                                    event, so each counted poll_cq finds exactly one completion;
 *                                    under valgrind --tool=callgrind --collect-atstart=no only the
 *                                    post_send and the poll_cq calls are collected (client requests),
 *                                    after a warm-up: total Ir / N is the user-space instructions
 *                                    per pair, deterministic, without empty polls
 *   verbs-bench count-td write|send N  the same, with the client's QP and CQ created on a parent
 *                                    domain with a thread domain (no lock on their data path);
 *                                    exits 3 when the provider has no thread domains
 *
 * OP: write, send, read (ibv_post_send on RC; read: 4 KiB from the server's buffer), wr-write (the WRITE by ibv_wr_start, ibv_wr_rdma_write,
 * ibv_wr_set_sge, ibv_wr_complete on a QP made by ibv_create_qp_ex), ud-send (a SEND on UD QPs,
 * through an AH), srq-recv (RC SENDs into the server's SRQ: the pair counted is the server's
 * ibv_post_srq_recv of one receive and the poll_cq that takes its completion, awaited through a
 * CQ event as the client's is; the client's post and poll are not counted).
 *   verbs-dump dump write|send N     (this file built with -DVERBS_BENCH_DUMP -rdynamic, build.sh's
 *                                    "dump") N pairs as in rate; at each POST_SEND doorbell (the
 *                                    provider's write() on the client's command fd, caught by this
 *                                    program's own write()) prints the non-zero
 *                                    8-byte words of every uverbs mapping: the rings as the kernel
 *                                    finds them, the WQE just written included
 *
 * SENDs need receives: the server keeps its RQ full, refilled in batches outside the measurement.
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define MSG 8
#define READ_LEN 4096 /* the bytes of one READ (read), from server_buf */
#define GRH 40 /* what a UD receive gets before the message */
#define QKEY 0x11111111
#define RQ_DEPTH 512
#define REFILL 256
#define WARMUP 1000

static struct loopback_dev client, server;
static struct ibv_cq *client_cq, *server_cq;
static struct ibv_comp_channel *channel, *server_channel;
static struct ibv_srq *srq;
static struct ibv_ah *ah;
static uint32_t server_qpn;
static struct ibv_pd *parent_domain;
static struct ibv_td *thread_domain;
static struct ibv_qp *cqp, *sqp;
static struct ibv_mr *client_mr, *server_mr;
static char client_buf[READ_LEN], server_buf[RQ_DEPTH * (GRH + MSG)];
static bool use_send, use_wr, use_ud, use_srq;
static long since_refill;

static void post_recvs(int n)
{
	size_t len = use_ud ? GRH + MSG : MSG;

	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)(server_buf + (size_t)(i % RQ_DEPTH) * len),
			.length = (uint32_t)len,
			.lkey = server_mr->lkey,
		};
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		int rc = use_srq ? ibv_post_srq_recv(srq, &wr, &bad) : ibv_post_recv(sqp, &wr, &bad);

		if (rc)
			die("post_recv: %s", strerror(rc));
	}
}

/* SENDs: after REFILL of them, take their receive completions and post as many receives. */
static void refill(void)
{
	struct ibv_wc wc[16];
	int got = 0, n;

	/* srq-recv: the counted loop takes each receive completion and posts one receive itself. */
	if (!use_send || use_srq || ++since_refill < REFILL)
		return;
	while (got < REFILL) {
		n = ibv_poll_cq(server_cq, 16, wc);
		if (n < 0)
			die("server poll_cq: %d", n);
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				die("receive completed with %s", ibv_wc_status_str(wc[i].status));
		got += n;
	}
	post_recvs(REFILL);
	since_refill = 0;
}

#ifdef VERBS_BENCH_DUMP
static bool dump_armed;
static unsigned dump_doorbell;

/* Prints the non-zero 8-byte words of each uverbs mapping (by order in /proc/self/maps, so that
 * two providers' dumps line up without their addresses). */
static void dump_uverbs_mappings(void)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned index = 0;

	if (!maps)
		return;
	printf("doorbell %u\n", dump_doorbell++);
	while (fgets(line, sizeof(line), maps)) {
		unsigned long start, end;
		const char *name = strstr(line, "/dev/infiniband/uverbs");

		if (!name || sscanf(line, "%lx-%lx", &start, &end) != 2 || !strstr(line, " r"))
			continue;
		printf(" map %u size %lu %s", index++, end - start, name);
		for (unsigned long off = 0; off + 8 <= end - start; off += 8) {
			uint64_t word = *(volatile const uint64_t *)(start + off);

			if (word)
				printf("  +%06lx %016lx\n", off, (unsigned long)word);
		}
	}
	fclose(maps);
	fflush(stdout);
}

/* Every write() of the process and its libraries comes here (-rdynamic): dump mode looks at the
 * rings when the provider rings the client's doorbell, before the kernel has read them. */
ssize_t write(int fd, const void *buf, size_t count)
{
	if (dump_armed && client.ctx && fd == client.ctx->cmd_fd) {
		dump_armed = false;
		dump_uverbs_mappings();
	}
	return syscall(SYS_write, fd, buf, count);
}
#else
static bool dump_armed;
#endif

/* The WRITE by ibv_wr_* (wr-write). */
static void post_one_wr(uint64_t id)
{
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(cqp);
	int rc;

	ibv_wr_start(qx);
	qx->wr_id = id;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, server_mr->rkey, (uintptr_t)server_buf);
	ibv_wr_set_sge(qx, client_mr->lkey, (uintptr_t)client_buf, MSG);
	rc = ibv_wr_complete(qx);
	if (rc)
		die("ibv_wr_complete: %s", strerror(rc));
}

/* A SEND on UD (ud-send). */
static void post_one_ud(uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)client_buf, .length = MSG, .lkey = client_mr->lkey };
	struct ibv_send_wr wr = LOOPBACK_SEND_WR(id, IBV_WR_SEND, &sge,
			.wr.ud = { .ah = ah, .remote_qpn = server_qpn, .remote_qkey = QKEY }), *bad;
	int rc = ibv_post_send(cqp, &wr, &bad);

	if (rc)
		die("post_send (UD): %s", strerror(rc));
}

/* One signalled RC request by ibv_post_send of one SGE from client_buf to or from server_buf. */
static inline void post_one_rdma(uint64_t id, enum ibv_wr_opcode opcode, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)client_buf, .length = len, .lkey = client_mr->lkey };
	struct ibv_send_wr wr = LOOPBACK_SEND_WR(id, opcode, &sge,
			.wr.rdma = { .remote_addr = (uintptr_t)server_buf, .rkey = server_mr->rkey }), *bad;
	int rc = ibv_post_send(cqp, &wr, &bad);

	if (rc)
		die("post_send: %s", strerror(rc));
}

/* A WRITE or SEND by ibv_post_send on RC. */
static void post_one_rc(uint64_t id)
{
	post_one_rdma(id, use_send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE, MSG);
}

/* A 4 KiB RDMA READ by ibv_post_send on RC (read). */
static void post_one_read(uint64_t id)
{
	post_one_rdma(id, IBV_WR_RDMA_READ, READ_LEN);
}

/* Chosen once in main: the counted code around the provider's is the same for every OP's kind. */
static void (*post_one)(uint64_t id) = post_one_rc;

static void check(const struct ibv_wc *wc, uint64_t id)
{
	if (wc->status != IBV_WC_SUCCESS || wc->wr_id != id)
		die("completion %lu: %s (wr_id %lu)", (unsigned long)id, ibv_wc_status_str(wc->status),
		    (unsigned long)wc->wr_id);
}

/* The busy loop: post, then poll until the completion is there. */
static void rate_loop(long n)
{
	struct ibv_wc wc;
	int got;

	for (long i = 0; i < n; i++) {
		post_one((uint64_t)i);
		do
			got = ibv_poll_cq(client_cq, 1, &wc);
		while (got == 0);
		if (got < 0)
			die("poll_cq: %d", got);
		check(&wc, (uint64_t)i);
		refill();
	}
}

/* STMT, which callgrind counts when COLLECT (collection toggled on before it and off after it). */
#define COUNTED(collect, stmt)                                                                     \
	do {                                                                                       \
		if (collect)                                                                       \
			CALLGRIND_TOGGLE_COLLECT;                                                  \
		stmt;                                                                              \
		if (collect)                                                                       \
			CALLGRIND_TOGGLE_COLLECT;                                                  \
	} while (0)

static void await_event(struct ibv_comp_channel *ch)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
		die("ibv_get_cq_event: %s", strerror(errno));
	ibv_ack_cq_events(ev_cq, 1);
}

/* srq-recv: one receive posted to the SRQ and its completion polled, both counted; the SEND that
 * consumes it is posted and polled between them, not counted. */
static void srq_pair(long i, bool collect)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(server_buf + (size_t)(i % RQ_DEPTH) * MSG),
		.length = MSG,
		.lkey = server_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc;
	int rc, got;

	if (ibv_req_notify_cq(client_cq, 0) || ibv_req_notify_cq(server_cq, 0))
		die("ibv_req_notify_cq");
	COUNTED(collect, rc = ibv_post_srq_recv(srq, &wr, &bad));
	if (rc)
		die("post_srq_recv: %s", strerror(rc));
	post_one((uint64_t)i);
	await_event(channel);
	if (ibv_poll_cq(client_cq, 1, &wc) != 1)
		die("client poll_cq after the event");
	check(&wc, (uint64_t)i);
	await_event(server_channel);
	COUNTED(collect, got = ibv_poll_cq(server_cq, 1, &wc));
	if (got != 1)
		die("server poll_cq after the event returned %d", got);
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
		die("receive %ld: %s", i, ibv_wc_status_str(wc.status));
}

/* A UD QP from RESET to RTS. */
static void ud_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = LOOPBACK_PORT, .qkey = QKEY };
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);

	if (rc)
		die("modify_qp INIT (UD): %s", strerror(rc));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	if (rc)
		die("modify_qp RTR (UD): %s", strerror(rc));
	a.qp_state = IBV_QPS_RTS;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	if (rc)
		die("modify_qp RTS (UD): %s", strerror(rc));
}

/* One pair per iteration; under callgrind only the post and the one successful poll count. */
static void count_loop(long n, bool collect)
{
	struct ibv_wc wc;
	int got;

	for (long i = 0; i < n; i++) {
		if (use_srq) {
			srq_pair(i, collect);
			continue;
		}
		if (ibv_req_notify_cq(client_cq, 0))
			die("ibv_req_notify_cq");
		COUNTED(collect, post_one((uint64_t)i));
		await_event(channel);
		COUNTED(collect, got = ibv_poll_cq(client_cq, 1, &wc));
		if (got != 1)
			die("poll_cq after the event returned %d", got);
		check(&wc, (uint64_t)i);
		refill();
	}
}

int main(int argc, char **argv)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 64, .max_recv_wr = RQ_DEPTH, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	bool count, td, dump;
	long n;
	double t;

	if (argc != 4 || (strcmp(argv[1], "rate") && strcmp(argv[1], "count") && strcmp(argv[1], "count-td") &&
			   strcmp(argv[1], "dump")) ||
	    (strcmp(argv[2], "write") && strcmp(argv[2], "send") && strcmp(argv[2], "read") && strcmp(argv[2], "wr-write") &&
	     strcmp(argv[2], "ud-send") && strcmp(argv[2], "srq-recv")) ||
	    (n = atol(argv[3])) <= 0)
		die("usage: verbs-bench rate|count|count-td|dump write|send|read|wr-write|ud-send|srq-recv N");
	td = strcmp(argv[1], "count-td") == 0;
	count = td || strcmp(argv[1], "count") == 0;
	dump = strcmp(argv[1], "dump") == 0;
	use_wr = strcmp(argv[2], "wr-write") == 0;
	use_ud = strcmp(argv[2], "ud-send") == 0;
	use_srq = strcmp(argv[2], "srq-recv") == 0;
	use_send = use_ud || use_srq || strcmp(argv[2], "send") == 0;
	if (use_srq && !count)
		die("srq-recv: count mode only");
	if (use_wr)
		post_one = post_one_wr;
	else if (use_ud)
		post_one = post_one_ud;
	else if (strcmp(argv[2], "read") == 0)
		post_one = post_one_read;

	loopback_open_pair(&client, &server);
	client_mr = loopback_reg_mr(&client, client_buf, sizeof(client_buf), IBV_ACCESS_LOCAL_WRITE);
	server_mr = loopback_reg_mr(&server, server_buf, sizeof(server_buf),
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	channel = ibv_create_comp_channel(client.ctx);
	if (!channel)
		die("ibv_create_comp_channel: %s", strerror(errno));
	if (td) {
		struct ibv_td_init_attr td_attr = { 0 };
		struct ibv_parent_domain_init_attr pd_attr = { .pd = client.pd };
		struct ibv_cq_init_attr_ex cq_attr = {
			.cqe = 128,
			.channel = channel,
			.wc_flags = IBV_WC_STANDARD_FLAGS,
			.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
		};
		struct ibv_cq_ex *cq_ex;

		thread_domain = ibv_alloc_td(client.ctx, &td_attr);
		if (!thread_domain) {
			printf("count-td: ibv_alloc_td: %s\n", strerror(errno));
			return 3;
		}
		pd_attr.td = thread_domain;
		parent_domain = ibv_alloc_parent_domain(client.ctx, &pd_attr);
		if (!parent_domain)
			die("ibv_alloc_parent_domain: %s", strerror(errno));
		cq_attr.parent_domain = parent_domain;
		cq_ex = ibv_create_cq_ex(client.ctx, &cq_attr);
		client_cq = cq_ex ? ibv_cq_ex_to_cq(cq_ex) : NULL;
	} else {
		client_cq = ibv_create_cq(client.ctx, 128, NULL, channel, 0);
	}
	if (use_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = RQ_DEPTH, .max_sge = 1 } };

		server_channel = ibv_create_comp_channel(server.ctx);
		srq = ibv_create_srq(server.pd, &sa);
		if (!server_channel || !srq)
			die("ibv_create_comp_channel/ibv_create_srq: %s", strerror(errno));
	}
	server_cq = ibv_create_cq(server.ctx, RQ_DEPTH + 64, NULL, server_channel, 0);
	if (!client_cq || !server_cq)
		die("ibv_create_cq: %s", strerror(errno));
	if (use_ud)
		attr.qp_type = IBV_QPT_UD;
	attr.send_cq = attr.recv_cq = client_cq;
	if (use_wr) {
		struct ibv_qp_init_attr_ex ax = {
			.qp_type = attr.qp_type,
			.send_cq = client_cq,
			.recv_cq = client_cq,
			.cap = attr.cap,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = parent_domain ? parent_domain : client.pd,
			.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
		};

		cqp = ibv_create_qp_ex(client.ctx, &ax);
	} else {
		cqp = ibv_create_qp(parent_domain ? parent_domain : client.pd, &attr);
	}
	attr.send_cq = attr.recv_cq = server_cq;
	attr.srq = srq;
	sqp = ibv_create_qp(server.pd, &attr);
	if (!cqp || !sqp)
		die("ibv_create_qp: %s", strerror(errno));
	if (use_ud) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = LOOPBACK_PORT };

		aa.grh.dgid = server.gid;
		aa.grh.sgid_index = (uint8_t)client.gid_index;
		aa.grh.hop_limit = 64;
		ah = ibv_create_ah(client.pd, &aa);
		if (!ah)
			die("ibv_create_ah: %s", strerror(errno));
		server_qpn = sqp->qp_num;
		ud_to_rts(cqp);
		ud_to_rts(sqp);
	} else {
		loopback_connect(&client, cqp, &server, sqp);
	}
	if (use_send)
		post_recvs(use_srq ? RQ_DEPTH - 1 : RQ_DEPTH);

	if (dump) {
		struct ibv_wc wc;
		int got;

		for (long i = 0; i < n; i++) {
			dump_armed = true;
			post_one((uint64_t)i);
			dump_armed = false;
			do
				got = ibv_poll_cq(client_cq, 1, &wc);
			while (got == 0);
			if (got < 0)
				die("poll_cq: %d", got);
			check(&wc, (uint64_t)i);
		}
		printf("dump %s: %ld pairs (provider %s)\n", argv[2], n, loopback_provider_path(&client));
	} else if (count) {
		count_loop(WARMUP, false);
		count_loop(n, true);
		printf("%s %s: %ld pairs collected (provider %s)\n", argv[1], argv[2], n,
		       loopback_provider_path(&client));
	} else {
		rate_loop(WARMUP);
		t = now_seconds();
		rate_loop(n);
		t = now_seconds() - t;
		printf("rate %s: %ld pairs in %.3f s: %.0f ops/s (provider %s)\n", argv[2], n, t, n / t,
		       loopback_provider_path(&client));
	}

	if (ibv_destroy_qp(cqp) || ibv_destroy_qp(sqp) || (ah && ibv_destroy_ah(ah)) ||
	    (srq && ibv_destroy_srq(srq)) || ibv_destroy_cq(client_cq) || ibv_destroy_cq(server_cq) ||
	    (server_channel && ibv_destroy_comp_channel(server_channel)) || ibv_destroy_comp_channel(channel) ||
	    ibv_dereg_mr(client_mr) || ibv_dereg_mr(server_mr))
		die("teardown: %s", strerror(errno));
	if (parent_domain && (ibv_dealloc_pd(parent_domain) || ibv_dealloc_td(thread_domain)))
		die("teardown of the parent domain: %s", strerror(errno));
	loopback_close(&client);
	loopback_close(&server);
	return 0;
}
