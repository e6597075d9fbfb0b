/*
 * verbs-diff: sweeps the parameters of the create verbs and the shapes of post_send/post_recv on
 * rxe0 and prints one line per combination, "KEY<TAB>OUTCOME", in an order fixed by the seed. The
 * rig runs it once with the stock provider and once with rxe_rs and compares the two outputs
 * (tests/verbs/diff-compare.py).
 *
 *   verbs-diff SEED RANDOM_COUNT
 *
 * Each attribute goes over 0, 1, 2, 3, every power of two up to 2^31 with its neighbours, the
 * device's maximum - 1, maximum and maximum + 1, and INT_MAX/UINT_MAX, one attribute at a time
 * with the others at a small base; then RANDOM_COUNT combinations draw every attribute from those
 * values at once. Every object created is used once: a QP, CQ or SRQ carries one send and its
 * receive on a QP connected to itself (rxe loops it back), an MR is the source of a send.
 * OUTCOME is "ok ..." with what the provider reported back (caps, cqe) and how the use went, or
 * "err ERRNO".
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>

#define DATA_LEN (64 * 1024)
#define QKEY 0x11111111u
#define POLL_SECONDS 5.0

static struct loopback_dev dev;
static struct ibv_device_attr dattr;
static char *data;
static struct ibv_mr *data_mr;
static struct ibv_cq *helper_cq; /* the other CQ of a QP whose CQ is tested */
static uint64_t rng_state;
static unsigned long combinations;

/* Where a phase's time goes (stderr): its slowest combinations (QPs, CQs and SRQs), and for QPs
 * the time in each step. A case sets case_started when it starts and charges itself when done. */
#define SLOWEST 5
static double case_started;
static struct { double seconds; char key[256]; } slowest[SLOWEST];
enum qp_step { STEP_CREATE, STEP_CONNECT, STEP_TRAFFIC, STEP_DESTROY, STEPS };
static const char *const step_names[STEPS] = { "create", "connect", "traffic", "destroy" };
static double step_seconds[STEPS], step_mark_at;
static unsigned long big_count;
static double big_seconds, big_waited;

/*
 * Big queues. rxe allocates a queue's ring in the kernel (vmalloc, zeroed, mapped whole): slots
 * for the depth + 1 rounded up to a power of two, each up to 1 KB, so a QP near the device's
 * maximum depth holds up to a GB or two of a 2 GB guest for a moment, and that is most of a
 * sweep's time. The rig runs the stock and the rxe_rs sweeps at once; with VERBS_DIFF_LOCK naming
 * a file, a combination that asks for a queue deeper than BIG_DEPTH holds an exclusive flock on
 * it from its create to its destroy, so the two never hold big queues at the same time and a
 * create gets the memory it would get alone (the other holds at most small queues: BIG_DEPTH
 * slots of 1 KB, a few MB). A depth above the device's maximum is refused before anything is
 * allocated, and takes no lock. Without VERBS_DIFF_LOCK nothing is locked.
 */
#define BIG_DEPTH 4096u
static int big_lock_fd = -1;
static int big_held;

static void big_begin(uint64_t depth, uint64_t device_max)
{
	double asked = now_seconds();

	big_held = depth > BIG_DEPTH && depth <= device_max;
	if (big_held && big_lock_fd >= 0 && flock(big_lock_fd, LOCK_EX))
		die("flock VERBS_DIFF_LOCK: %s", strerror(errno));
	big_waited += now_seconds() - asked;
}

static void big_end(void)
{
	if (big_held && big_lock_fd >= 0 && flock(big_lock_fd, LOCK_UN))
		die("unlock VERBS_DIFF_LOCK: %s", strerror(errno));
}

/* Charges the time since the last mark to STEP. */
static void step_done(enum qp_step step)
{
	double now = now_seconds();

	step_seconds[step] += now - step_mark_at;
	step_mark_at = now;
}

static void charge(const char *key)
{
	double took = now_seconds() - case_started;
	int i = SLOWEST - 1;

	if (big_held) {
		big_count++;
		big_seconds += took;
	}
	if (took <= slowest[i].seconds)
		return;
	while (i > 0 && took > slowest[i - 1].seconds) {
		slowest[i] = slowest[i - 1];
		i--;
	}
	slowest[i].seconds = took;
	snprintf(slowest[i].key, sizeof(slowest[i].key), "%s", key);
}

/* A timed case's end: its time charged, the big lock released. */
static void case_end(const char *key)
{
	charge(key);
	big_end();
}

static uint64_t rnd(void)
{
	/* xorshift64*: enough to spread the draws, reproducible from the seed. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static void emit(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(const char *key, const char *fmt, ...)
{
	va_list ap;

	printf("%s\t", key);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	combinations++;
}

/* The values one attribute goes over (sorted, no repeats); returns how many. */
static int value_set(uint32_t max, uint32_t *out)
{
	uint32_t cand[128];
	int n = 0, i, j, k = 0;

	for (i = 0; i < 4; i++)
		cand[n++] = (uint32_t)i;
	for (i = 2; i < 32; i++) {
		cand[n++] = (1u << i) - 1;
		cand[n++] = 1u << i;
		cand[n++] = (1u << i) + 1;
	}
	cand[n++] = max ? max - 1 : 0;
	cand[n++] = max;
	cand[n++] = max + 1;
	cand[n++] = INT_MAX;
	cand[n++] = UINT32_MAX;
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			if (cand[j] < cand[i]) {
				uint32_t t = cand[i];
				cand[i] = cand[j];
				cand[j] = t;
			}
	for (i = 0; i < n; i++)
		if (k == 0 || out[k - 1] != cand[i])
			out[k++] = cand[i];
	return k;
}

static uint32_t pick(uint32_t max)
{
	uint32_t v[128];
	int n = value_set(max, v);

	/* Mostly inside the device's range, where objects get made. */
	if (rnd() % 4)
		return (uint32_t)(rnd() % ((uint64_t)max + 2));
	return v[rnd() % (uint64_t)n];
}

static const char *type_name(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC ? "RC" : t == IBV_QPT_UC ? "UC" : t == IBV_QPT_UD ? "UD" : "?";
}

/* ---- A QP connected to itself ---- */

static int self_connect(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	int mask, rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = LOOPBACK_PORT;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask = IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    (qp->qp_type == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
		mask = IBV_QP_ACCESS_FLAGS;
	}
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | mask);
	if (rc)
		return rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = qp->qp_num;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = dev.gid;
		a.ah_attr.grh.sgid_index = (uint8_t)dev.gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = LOOPBACK_PORT;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
	}
	rc = ibv_modify_qp(qp, &a, mask);
	if (rc)
		return rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

/* Polls CQ until N completions came (statuses appended to OUT) or POLL_SECONDS passed. */
static int collect(struct ibv_cq *cq, int n, char *out, size_t len)
{
	double end = now_seconds() + POLL_SECONDS;
	int got = 0;

	while (got < n) {
		struct ibv_wc wc;
		int r = ibv_poll_cq(cq, 1, &wc);

		if (r < 0)
			return snprintf(out, len, "poll=%d", r), -1;
		if (r == 0) {
			if (now_seconds() > end)
				return snprintf(out, len, "timeout(%d/%d)", got, n), -1;
			continue;
		}
		size_t used = strlen(out);
		snprintf(out + used, len - used, "%s%d", used ? "," : "", wc.status);
		got++;
	}
	return 0;
}

/* Takes whatever completions a failed or flushed use left, so none reaches the next case. */
static void drain(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
}

/*
 * One use of a QP: to RTS on itself, a receive (on its RQ or SRQ) and a send of 8 bytes, both
 * completed; a WRITE instead when it has no receive queue room. Writes the outcome into OUT.
 */
static void use_qp(struct ibv_qp *qp, struct ibv_srq *srq, const struct ibv_qp_cap *cap,
		   struct ibv_cq *scq, struct ibv_cq *rcq, char *out, size_t len)
{
	struct ibv_sge rsge = { (uintptr_t)data, 4096, data_mr->lkey };
	struct ibv_sge ssge = { (uintptr_t)data + 8192, 8, data_mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ssge, .num_sge = 1 }, *sbad;
	struct ibv_ah *ah = NULL;
	char st[64] = "";
	int rc, receive = 1;

	out[0] = 0;
	rc = self_connect(qp);
	step_done(STEP_CONNECT);
	if (rc) {
		snprintf(out, len, "modify=%d", rc);
		return;
	}
	if (srq)
		rc = ibv_post_srq_recv(srq, &rwr, &rbad);
	else if (cap->max_recv_wr > 0)
		rc = ibv_post_recv(qp, &rwr, &rbad);
	else
		receive = 0;
	if (rc) {
		snprintf(out, len, "post_recv=%d", rc);
		return;
	}
	swr.opcode = receive || qp->qp_type == IBV_QPT_UD ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
	swr.send_flags = IBV_SEND_SIGNALED | (cap->max_inline_data >= 8 ? IBV_SEND_INLINE : 0);
	swr.wr.rdma.remote_addr = (uintptr_t)data + 16384;
	swr.wr.rdma.rkey = data_mr->rkey;
	if (qp->qp_type == IBV_QPT_UD) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = LOOPBACK_PORT };

		aa.grh.dgid = dev.gid;
		aa.grh.sgid_index = (uint8_t)dev.gid_index;
		aa.grh.hop_limit = 64;
		ah = ibv_create_ah(dev.pd, &aa);
		if (!ah) {
			snprintf(out, len, "create_ah=%d", errno);
			return;
		}
		swr.wr.ud.ah = ah;
		swr.wr.ud.remote_qpn = qp->qp_num;
		swr.wr.ud.remote_qkey = QKEY;
	}
	rc = ibv_post_send(qp, &swr, &sbad);
	if (rc)
		snprintf(out, len, "post_send=%d", rc);
	else if (collect(scq, 1, st, sizeof(st)) == 0 && (!receive || collect(rcq, 1, st, sizeof(st)) == 0))
		snprintf(out, len, "wc=%s", st);
	else
		snprintf(out, len, "%s", st);
	if (ah)
		ibv_destroy_ah(ah);
	drain(scq);
	drain(rcq);
}

/* ---- QPs ---- */

struct qp_case {
	int ex;
	enum ibv_qp_type type;
	int with_srq;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	uint32_t comp_mask; /* ex only: beside PD */
	uint32_t create_flags;
	uint64_t send_ops;
};

/* What ibv_qp_init_attr and ibv_qp_init_attr_ex (A) both carry of case C, the rest zero. */
#define QP_INIT_COMMON(a, c, cq, srq_)                                                          \
	do {                                                                                    \
		memset(&(a), 0, sizeof(a));                                                     \
		(a).qp_type = (c)->type;                                                        \
		(a).send_cq = (cq);                                                             \
		(a).recv_cq = (cq);                                                             \
		(a).srq = (srq_);                                                               \
		(a).cap = (c)->cap;                                                             \
		(a).sq_sig_all = (c)->sq_sig_all;                                               \
	} while (0)

static void qp_case(const struct qp_case *c)
{
	char key[256], use[128];
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp;
	struct ibv_qp_cap cap = c->cap;
	int err;

	snprintf(key, sizeof(key),
		 "qp%s %s srq=%d wr=%u/%u sge=%u/%u inline=%u sig_all=%d mask=%#x flags=%#x ops=%#" PRIx64,
		 c->ex ? "_ex" : "", type_name(c->type), c->with_srq, c->cap.max_send_wr, c->cap.max_recv_wr,
		 c->cap.max_send_sge, c->cap.max_recv_sge, c->cap.max_inline_data, c->sq_sig_all, c->comp_mask,
		 c->create_flags, c->send_ops);
	big_begin(c->cap.max_send_wr > c->cap.max_recv_wr ? c->cap.max_send_wr : c->cap.max_recv_wr,
		  (uint64_t)dattr.max_qp_wr);
	case_started = step_mark_at = now_seconds();
	if (c->with_srq) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };

		srq = ibv_create_srq(dev.pd, &sa);
		if (!srq)
			die("create_srq for %s: %s", key, strerror(errno));
	}
	if (c->ex) {
		struct ibv_qp_init_attr_ex a;

		QP_INIT_COMMON(a, c, helper_cq, srq);
		a.comp_mask = IBV_QP_INIT_ATTR_PD | c->comp_mask;
		a.pd = dev.pd;
		a.create_flags = c->create_flags;
		a.send_ops_flags = c->send_ops;
		qp = ibv_create_qp_ex(dev.ctx, &a);
		cap = a.cap;
	} else {
		struct ibv_qp_init_attr a;

		QP_INIT_COMMON(a, c, helper_cq, srq);
		qp = ibv_create_qp(dev.pd, &a);
		cap = a.cap;
	}
	err = errno;
	step_done(STEP_CREATE);
	if (!qp) {
		emit(key, "err %d", err);
	} else {
		use_qp(qp, srq, &cap, helper_cq, helper_cq, use, sizeof(use));
		step_done(STEP_TRAFFIC);
		emit(key, "ok cap=%u,%u,%u,%u,%u use=%s", cap.max_send_wr, cap.max_recv_wr, cap.max_send_sge,
		     cap.max_recv_sge, cap.max_inline_data, use);
		if (ibv_destroy_qp(qp))
			die("destroy_qp for %s", key);
	}
	if (srq && ibv_destroy_srq(srq))
		die("destroy_srq for %s", key);
	step_done(STEP_DESTROY);
	case_end(key);
}

static const enum ibv_qp_type qp_types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };

static void sweep_qps(void)
{
	uint32_t v[128];
	int ex, t, srq, attr, i;

	for (ex = 0; ex < 2; ex++)
		for (t = 0; t < 3; t++)
			for (srq = 0; srq < 2; srq++)
				for (attr = 0; attr < 5; attr++) {
					uint32_t max = attr < 2 ? (uint32_t)dattr.max_qp_wr :
						       attr < 4 ? (uint32_t)dattr.max_sge : 1024;
					int n = value_set(max, v);

					if (srq && attr == 1)
						continue; /* the RQ's size means nothing with an SRQ */
					for (i = 0; i < n; i++) {
						struct qp_case c = { ex, qp_types[t], srq, { 4, 4, 1, 1, 0 }, 0, 0, 0, 0 };
						uint32_t *f[] = { &c.cap.max_send_wr, &c.cap.max_recv_wr, &c.cap.max_send_sge,
								  &c.cap.max_recv_sge, &c.cap.max_inline_data };

						*f[attr] = v[i];
						qp_case(&c);
					}
				}
	/* create_qp_ex's own fields. */
	static const uint32_t masks[] = { 0, IBV_QP_INIT_ATTR_CREATE_FLAGS, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					  IBV_QP_INIT_ATTR_XRCD, IBV_QP_INIT_ATTR_MAX_TSO_HEADER,
					  IBV_QP_INIT_ATTR_IND_TABLE, IBV_QP_INIT_ATTR_RX_HASH, 1u << 30 };
	for (t = 0; t < 3; t++) {
		for (i = 0; i < (int)(sizeof(masks) / sizeof(masks[0])); i++) {
			struct qp_case c = { 1, qp_types[t], 0, { 4, 4, 1, 1, 0 }, 0, masks[i], 0, 0 };

			qp_case(&c);
		}
		for (i = 0; i < 8; i++) {
			struct qp_case c = { 1, qp_types[t], 0, { 4, 4, 1, 1, 0 }, 0, IBV_QP_INIT_ATTR_CREATE_FLAGS,
					     1u << i, 0 };

			qp_case(&c);
		}
		for (i = 0; i <= 20; i++) {
			struct qp_case c = { 1, qp_types[t], 0, { 4, 4, 1, 1, 0 }, 0, IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
					     0, i == 20 ? UINT64_MAX : 1ull << i };

			qp_case(&c);
		}
	}
}

static void random_qp(void)
{
	struct qp_case c;

	memset(&c, 0, sizeof(c));
	c.ex = (int)(rnd() % 2);
	c.type = qp_types[rnd() % 3];
	c.with_srq = (int)(rnd() % 2);
	/* Queue depths up to a few hundred keep the random part quick: a queue near the device's
	 * maximum is hundreds of MB for the kernel to allocate and zero (seconds each under software
	 * emulation), and the one-at-a-time sweep already takes every depth to the maximum. One draw
	 * in 32 still comes from the whole value set. */
	c.cap.max_send_wr = rnd() % 32 ? (uint32_t)(rnd() % 300) : pick((uint32_t)dattr.max_qp_wr);
	c.cap.max_recv_wr = rnd() % 32 ? (uint32_t)(rnd() % 300) : pick((uint32_t)dattr.max_qp_wr);
	c.cap.max_send_sge = pick((uint32_t)dattr.max_sge);
	c.cap.max_recv_sge = pick((uint32_t)dattr.max_sge);
	c.cap.max_inline_data = rnd() % 2 ? pick(1024) : 0;
	c.sq_sig_all = (int)(rnd() % 2);
	qp_case(&c);
}

/* ---- CQs ---- */

static void cq_case(int ex, int cqe, uint64_t wc_flags, uint32_t comp_mask, uint32_t flags)
{
	char key[160], use[128];
	struct ibv_cq *cq;
	int err;

	snprintf(key, sizeof(key), "cq%s cqe=%d wc_flags=%#" PRIx64 " mask=%#x flags=%#x", ex ? "_ex" : "", cqe,
		 wc_flags, comp_mask, flags);
	big_begin((uint64_t)(int64_t)cqe, (uint64_t)dattr.max_cqe);
	case_started = now_seconds();
	if (ex) {
		struct ibv_cq_init_attr_ex a = {
			.cqe = (uint32_t)cqe, .wc_flags = wc_flags, .comp_mask = comp_mask, .flags = flags
		};
		struct ibv_cq_ex *cx;

		if (comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
			a.parent_domain = dev.pd; /* a plain PD: not a parent domain */
		cx = ibv_create_cq_ex(dev.ctx, &a);
		cq = cx ? ibv_cq_ex_to_cq(cx) : NULL;
	} else {
		cq = ibv_create_cq(dev.ctx, cqe, NULL, NULL, 0);
	}
	err = errno;
	if (!cq) {
		emit(key, "err %d", err);
		case_end(key);
		return;
	}
	/* Used as the send CQ of an RC QP on itself. */
	struct ibv_qp_init_attr qa = { .send_cq = cq, .recv_cq = helper_cq, .cap = { 4, 4, 1, 1, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &qa);

	if (!qp)
		snprintf(use, sizeof(use), "create_qp=%d", errno);
	else
		use_qp(qp, NULL, &qa.cap, cq, helper_cq, use, sizeof(use));
	emit(key, "ok cqe=%d use=%s", cq->cqe, use);
	if ((qp && ibv_destroy_qp(qp)) || ibv_destroy_cq(cq))
		die("destroy for %s", key);
	case_end(key);
}

static void sweep_cqs(void)
{
	uint32_t v[128];
	int n = value_set((uint32_t)dattr.max_cqe, v), i, ex;

	for (ex = 0; ex < 2; ex++) {
		for (i = 0; i < n; i++)
			cq_case(ex, (int)v[i], 0, 0, 0);
		cq_case(ex, -1, 0, 0, 0);
		cq_case(ex, INT_MIN, 0, 0, 0);
	}
	for (i = 0; i < 12; i++)
		cq_case(1, 16, 1ull << i, 0, 0);
	cq_case(1, 16, UINT64_MAX, 0, 0);
	cq_case(1, 16, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	cq_case(1, 16, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN);
	cq_case(1, 16, 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 7);
	cq_case(1, 16, 0, IBV_CQ_INIT_ATTR_MASK_PD, 0);
	cq_case(1, 16, 0, 1u << 7, 0);
}

/* ---- SRQs ---- */

static void srq_case(int ex, uint32_t max_wr, uint32_t max_sge, uint32_t limit, uint32_t mask, int type)
{
	char key[160], use[128];
	struct ibv_srq_attr got;
	struct ibv_srq *srq;
	int err;

	snprintf(key, sizeof(key), "srq%s wr=%u sge=%u limit=%u mask=%#x type=%d", ex ? "_ex" : "", max_wr,
		 max_sge, limit, mask, type);
	big_begin(max_wr, (uint64_t)dattr.max_srq_wr);
	case_started = now_seconds();
	if (ex) {
		struct ibv_srq_init_attr_ex a;

		memset(&a, 0, sizeof(a));
		a.attr.max_wr = max_wr;
		a.attr.max_sge = max_sge;
		a.attr.srq_limit = limit;
		a.comp_mask = mask;
		a.srq_type = type;
		a.pd = dev.pd;
		a.cq = helper_cq;
		srq = ibv_create_srq_ex(dev.ctx, &a);
		got = a.attr;
	} else {
		struct ibv_srq_init_attr a = { .attr = { max_wr, max_sge, limit } };

		srq = ibv_create_srq(dev.pd, &a);
		got = a.attr;
	}
	err = errno;
	if (!srq) {
		emit(key, "err %d", err);
		case_end(key);
		return;
	}
	struct ibv_qp_init_attr qa = { .send_cq = helper_cq, .recv_cq = helper_cq, .srq = srq,
				       .cap = { 4, 0, 1, 1, 0 }, .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &qa);

	if (!qp)
		snprintf(use, sizeof(use), "create_qp=%d", errno);
	else
		use_qp(qp, srq, &qa.cap, helper_cq, helper_cq, use, sizeof(use));
	emit(key, "ok attr=%u,%u use=%s", got.max_wr, got.max_sge, use);
	if ((qp && ibv_destroy_qp(qp)) || ibv_destroy_srq(srq))
		die("destroy for %s", key);
	case_end(key);
}

static void sweep_srqs(void)
{
	uint32_t v[128];
	int n, i, ex;

	for (ex = 0; ex < 2; ex++) {
		uint32_t mask = ex ? IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE : 0;

		n = value_set((uint32_t)dattr.max_srq_wr, v);
		for (i = 0; i < n; i++)
			srq_case(ex, v[i], 1, 0, mask, IBV_SRQT_BASIC);
		n = value_set((uint32_t)dattr.max_srq_sge, v);
		for (i = 0; i < n; i++)
			srq_case(ex, 16, v[i], 0, mask, IBV_SRQT_BASIC);
		n = value_set(64, v);
		for (i = 0; i < n; i++)
			srq_case(ex, 16, 1, v[i], mask, IBV_SRQT_BASIC);
	}
	srq_case(1, 16, 1, 0, IBV_SRQ_INIT_ATTR_PD, IBV_SRQT_BASIC);
	srq_case(1, 16, 1, 0, IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_BASIC);
	srq_case(1, 16, 1, 0, IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_XRC);
	srq_case(1, 16, 1, 0, IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE, IBV_SRQT_TM);
	srq_case(1, 16, 1, 0, IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | (1u << 7), IBV_SRQT_BASIC);
}

/* ---- MRs and MWs ---- */

static void mr_case(size_t offset, size_t length, int access)
{
	char key[160], use[128];
	struct ibv_mr *mr;
	int err;

	snprintf(key, sizeof(key), "reg_mr offset=%zu length=%zu access=%#x", offset, length, access);
	mr = ibv_reg_mr(dev.pd, data + offset, length, access);
	err = errno;
	if (!mr) {
		emit(key, "err %d", err);
		return;
	}
	/* The source of a send on an RC QP on itself. */
	struct ibv_qp_init_attr qa = { .send_cq = helper_cq, .recv_cq = helper_cq, .cap = { 4, 4, 1, 1, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &qa);
	struct ibv_sge rsge = { (uintptr_t)data, 4096, data_mr->lkey };
	struct ibv_sge ssge = { (uintptr_t)mr->addr, length < 64 ? (uint32_t)length : 64, mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *sbad;
	char st[64] = "";
	int rc;

	if (!qp) {
		snprintf(use, sizeof(use), "create_qp=%d", errno);
	} else if ((rc = self_connect(qp)) || (rc = ibv_post_recv(qp, &rwr, &rbad)) ||
		   (rc = ibv_post_send(qp, &swr, &sbad))) {
		snprintf(use, sizeof(use), "setup=%d", rc);
	} else if (collect(helper_cq, 2, st, sizeof(st)) == 0) {
		snprintf(use, sizeof(use), "wc=%s", st);
	} else {
		snprintf(use, sizeof(use), "%s", st);
	}
	drain(helper_cq);
	emit(key, "ok length=%zu use=%s", mr->length, use);
	if ((qp && ibv_destroy_qp(qp)) || ibv_dereg_mr(mr))
		die("destroy for %s", key);
}

static void sweep_mrs(void)
{
	static const size_t lengths[] = { 0, 1, 7, 8, 4095, 4096, 4097, DATA_LEN - 4096, DATA_LEN };
	static const size_t offsets[] = { 1, 4095, 4096 };
	static const int bits[] = { IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ,
				    IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_MW_BIND, IBV_ACCESS_ZERO_BASED,
				    IBV_ACCESS_ON_DEMAND, IBV_ACCESS_RELAXED_ORDERING, 1 << 28 };
	unsigned l, o, b;
	int a;

	for (a = 0; a < 32; a++) /* every combination of the first five bits */
		for (l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
			mr_case(0, lengths[l], a);
	for (b = 5; b < sizeof(bits) / sizeof(bits[0]); b++)
		mr_case(0, 4096, IBV_ACCESS_LOCAL_WRITE | bits[b]);
	for (o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++)
		for (l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
			if (offsets[o] + lengths[l] <= DATA_LEN)
				mr_case(offsets[o], lengths[l], IBV_ACCESS_LOCAL_WRITE);
}

static void sweep_mws(void)
{
	static const int types[] = { 0, IBV_MW_TYPE_1, IBV_MW_TYPE_2, 3, -1 };
	unsigned i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		char key[64];
		struct ibv_mw *mw;

		snprintf(key, sizeof(key), "alloc_mw type=%d", types[i]);
		mw = ibv_alloc_mw(dev.pd, (enum ibv_mw_type)types[i]);
		if (!mw) {
			emit(key, "err %d", errno);
			continue;
		}
		emit(key, "ok type=%d", mw->type);
		if (ibv_dealloc_mw(mw))
			die("dealloc_mw for %s", key);
	}
}

/* ---- post_send / post_recv shapes ---- */

/*
 * Two WRs on a fresh RC QP on itself (send 8, recv 16 deep, 4 SGEs, 64 bytes inline): a good
 * signaled SEND, then the shape. Printed: the return, which WR bad_wr names, and the statuses
 * of the send completions of what was accepted.
 */
static void send_shape(enum ibv_wr_opcode op, int num_sge, uint32_t sge_len, unsigned flags)
{
	char key[160], st[128] = "";
	struct ibv_qp_init_attr qa = { .send_cq = helper_cq, .recv_cq = helper_cq, .cap = { 8, 16, 4, 4, 64 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &qa);
	struct ibv_sge sges[8], rsge = { (uintptr_t)data, 4096, data_mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	struct ibv_send_wr wr[2], *bad = NULL;
	int i, rc, accepted;

	snprintf(key, sizeof(key), "post_send op=%d num_sge=%d len=%u flags=%#x", op, num_sge, sge_len, flags);
	if (!qp || self_connect(qp))
		die("helper QP for %s", key);
	for (i = 0; i < 4; i++)
		if (ibv_post_recv(qp, &rwr, &rbad))
			die("post_recv for %s", key);
	for (i = 0; i < 8; i++)
		sges[i] = (struct ibv_sge){ (uintptr_t)data + 8192 + 512 * i, sge_len, data_mr->lkey };
	memset(wr, 0, sizeof(wr));
	wr[0] = (struct ibv_send_wr){ .wr_id = 10, .next = &wr[1], .sg_list = sges, .num_sge = 1,
				      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	wr[0].sg_list = &rsge; /* 4096 bytes into the first receive */
	rsge.length = 8;
	wr[1] = (struct ibv_send_wr){ .wr_id = 11, .sg_list = sges, .num_sge = num_sge, .opcode = op,
				      .send_flags = flags | IBV_SEND_SIGNALED };
	wr[1].wr.rdma.remote_addr = (uintptr_t)data + 32768;
	wr[1].wr.rdma.rkey = data_mr->rkey;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr[1].wr.atomic.remote_addr = (uintptr_t)data + 32768;
		wr[1].wr.atomic.rkey = data_mr->rkey;
	}
	rc = ibv_post_send(qp, wr, &bad);
	accepted = rc == 0 ? 2 : bad == &wr[1] ? 1 : 0;
	rsge.length = 4096;
	collect(helper_cq, accepted, st, sizeof(st));
	emit(key, "rc=%d bad=%d wc=%s", rc, bad == &wr[0] ? 0 : bad == &wr[1] ? 1 : bad ? 9 : -1, st);
	if (ibv_destroy_qp(qp))
		die("destroy for %s", key);
	drain(helper_cq);
}

static void recv_shape(int num_sge, uint32_t sge_len)
{
	char key[96];
	struct ibv_qp_init_attr qa = { .send_cq = helper_cq, .recv_cq = helper_cq, .cap = { 4, 8, 1, 4, 0 },
				       .qp_type = IBV_QPT_RC };
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &qa);
	struct ibv_sge sges[8];
	struct ibv_recv_wr wr[2], *bad = NULL;
	int i, rc;

	snprintf(key, sizeof(key), "post_recv num_sge=%d len=%u", num_sge, sge_len);
	if (!qp)
		die("helper QP for %s", key);
	for (i = 0; i < 8; i++)
		sges[i] = (struct ibv_sge){ (uintptr_t)data + 512 * i, sge_len, data_mr->lkey };
	wr[0] = (struct ibv_recv_wr){ .wr_id = 1, .next = &wr[1], .sg_list = sges, .num_sge = 1 };
	wr[1] = (struct ibv_recv_wr){ .wr_id = 2, .sg_list = sges, .num_sge = num_sge };
	rc = ibv_post_recv(qp, wr, &bad);
	emit(key, "rc=%d bad=%d", rc, bad == &wr[0] ? 0 : bad == &wr[1] ? 1 : bad ? 9 : -1);
	if (ibv_destroy_qp(qp))
		die("destroy for %s", key);
}

static void sweep_posts(void)
{
	/* No IBV_WR_BIND_MW: the stock provider follows wr.bind_mw.mw without a check and a NULL
	 * one crashes it (SIGSEGV in rdma-core 44's rxe post_send). */
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND,
						  IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
						  IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
						  IBV_WR_LOCAL_INV, IBV_WR_SEND_WITH_INV,
						  IBV_WR_TSO, IBV_WR_DRIVER1, 99 };
	static const int sge_counts[] = { 0, 1, 2, 4, 5, 8, -1 };
	static const uint32_t lens[] = { 0, 1, 8, 64, 65, 4096 };
	static const unsigned flag_sets[] = { 0, IBV_SEND_INLINE, IBV_SEND_FENCE, IBV_SEND_SOLICITED,
					      IBV_SEND_IP_CSUM, 1u << 6 };
	unsigned o, s, l, f;

	for (o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (s = 0; s < sizeof(sge_counts) / sizeof(sge_counts[0]); s++)
			for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
				for (f = 0; f < sizeof(flag_sets) / sizeof(flag_sets[0]); f++) {
					int n = sge_counts[s];

					/* SGEs are 512 bytes apart: keep the longer ones to one. */
					if (n > 1 && lens[l] > 512)
						continue;
					send_shape(ops[o], n, lens[l], flag_sets[f]);
				}
	for (s = 0; s < sizeof(sge_counts) / sizeof(sge_counts[0]); s++)
		for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			recv_shape(sge_counts[s], lens[l]);
}

/* Each phase's count and time on stderr: where a run's time goes. */
static struct timespec phase_started;
static unsigned long phase_first;

static void phase_start(void)
{
	clock_gettime(CLOCK_MONOTONIC, &phase_started);
	phase_first = combinations;
	memset(slowest, 0, sizeof(slowest));
	memset(step_seconds, 0, sizeof(step_seconds));
	big_count = 0;
	big_seconds = big_waited = 0;
}

static void phase_end(const char *name)
{
	struct timespec now;
	int i;

	clock_gettime(CLOCK_MONOTONIC, &now);
	fprintf(stderr, "verbs-diff: %-9s %6lu combinations in %6.1f s\n", name, combinations - phase_first,
		(double)(now.tv_sec - phase_started.tv_sec) + (double)(now.tv_nsec - phase_started.tv_nsec) / 1e9);
	if (big_count)
		fprintf(stderr, "verbs-diff:   %lu with a queue deeper than %u: %.1f s, %.1f s waited for the lock\n",
			big_count, BIG_DEPTH, big_seconds, big_waited);
	if (step_seconds[STEP_CREATE] > 0) {
		fprintf(stderr, "verbs-diff:   QP steps:");
		for (i = 0; i < STEPS; i++)
			fprintf(stderr, " %s %.1f s", step_names[i], step_seconds[i]);
		fprintf(stderr, "\n");
	}
	for (i = 0; i < SLOWEST && slowest[i].seconds > 0; i++)
		fprintf(stderr, "verbs-diff:   %6.2f s %s\n", slowest[i].seconds, slowest[i].key);
}

static void phase(const char *name, void (*sweep)(void))
{
	phase_start();
	sweep();
	phase_end(name);
}

int main(int argc, char **argv)
{
	uint64_t seed;
	long random_count, i;

	if (argc != 3)
		die("usage: verbs-diff SEED RANDOM_COUNT");
	seed = strtoull(argv[1], NULL, 0);
	random_count = strtol(argv[2], NULL, 0);
	rng_state = seed ? seed : 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (getenv("VERBS_DIFF_LOCK")) {
		big_lock_fd = open(getenv("VERBS_DIFF_LOCK"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (big_lock_fd < 0)
			die("VERBS_DIFF_LOCK %s: %s", getenv("VERBS_DIFF_LOCK"), strerror(errno));
	}

	loopback_open(&dev, "rxe0");
	if (ibv_query_device(dev.ctx, &dattr))
		die("ibv_query_device");
	data = mmap(NULL, DATA_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (data == MAP_FAILED)
		die("mmap");
	data_mr = ibv_reg_mr(dev.pd, data, DATA_LEN,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				     IBV_ACCESS_REMOTE_ATOMIC);
	helper_cq = ibv_create_cq(dev.ctx, 256, NULL, NULL, 0);
	if (!data_mr || !helper_cq)
		die("setup: %s", strerror(errno));
	fprintf(stderr, "verbs-diff: provider %s, seed %" PRIu64 ", device max_qp_wr %d max_sge %d max_cqe %d "
			"max_srq_wr %d max_srq_sge %d\n",
		loopback_provider_path(&dev), seed, dattr.max_qp_wr, dattr.max_sge, dattr.max_cqe,
		dattr.max_srq_wr, dattr.max_srq_sge);

	phase("cq", sweep_cqs);
	phase("srq", sweep_srqs);
	phase("mr", sweep_mrs);
	phase("mw", sweep_mws);
	phase("post", sweep_posts);
	phase("qp", sweep_qps);
	phase_start();
	for (i = 0; i < random_count; i++)
		random_qp();
	phase_end("random qp");

	fprintf(stderr, "verbs-diff: %lu combinations\n", combinations);
	ibv_destroy_cq(helper_cq);
	ibv_dereg_mr(data_mr);
	loopback_close(&dev);
	return 0;
}
