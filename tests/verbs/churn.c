/*
 * verbs-churn: every verbs object created and destroyed ROUNDS times over, and the process's
 * memory measured around each loop: what a provider keeps after a destroy shows as a resident
 * set or a mapping count that grows with the rounds. Each kind first runs ROUNDS / 10 rounds
 * (glibc's arenas and the provider's caches settle), then ROUNDS rounds between two readings
 * of VmRSS and of /proc/self/maps' line count.
 *
 * Kinds: device open/close (ROUNDS / 10: it maps and unmaps the context), PD, MR, MW (types 1
 * and 2), CQ, extended CQ, CQ on a completion channel, SRQ, RC QP moved to INIT, RC QP on an
 * SRQ, UD QP, extended QP with send ops, AH, thread domain and parent domain (where the provider
 * has them: the stock rxe provider has not, and says EOPNOTSUPP). One line per kind:
 *
 *   <kind>: <rounds> rounds in <s> s, RSS <before> -> <after> KiB, mappings <before> -> <after>
 *
 * A kind fails when its RSS grew by more than SLACK_KIB (default 256) or its mapping count by
 * more than 2 (a leaked queue ring is a mapping per round). Exit 0 when every kind passed.
 * Under valgrind (small ROUNDS) the same program shows what is definitely lost.
 *
 *   verbs-churn DEVICE ROUNDS [SLACK_KIB]
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf[4096];
static int failed;

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	if (!f)
		die("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static long mapping_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	long lines = 0;
	int c;
	if (!f)
		die("/proc/self/maps: %s", strerror(errno));
	while ((c = fgetc(f)) != EOF)
		lines += c == '\n';
	fclose(f);
	return lines;
}

struct churn {
	struct loopback_dev dev;
	const char *name;
	struct ibv_cq *cq; /* the QPs' and SRQ QP's CQ */
	struct ibv_srq *srq;
};

/* One round of a kind: creates its object(s) and destroys them; 0, or an errno for "not
 * supported by this provider" (the first round only). */
typedef int (*round_fn)(struct churn *c);

static void must(int ok, const char *what)
{
	if (!ok)
		die("%s: %s (%d)", what, strerror(errno), errno);
}

static void must_zero(int rc, const char *what)
{
	if (rc)
		die("%s: %s (%d)", what, strerror(rc), rc);
}

/* What a create call returned, when not NULL; dies with errno otherwise. */
static void *must_made(void *p, const char *what)
{
	must(p != NULL, what);
	return p;
}

/* As must_made, for a verb the provider may lack: NULL (errno EOPNOTSUPP or ENOSYS) when it does. */
static void *may_make(void *p, const char *what)
{
	if (!p && (errno == EOPNOTSUPP || errno == ENOSYS))
		return NULL;
	return must_made(p, what);
}

static int round_device(struct churn *c)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *device = NULL;
	must(list != NULL, "ibv_get_device_list");
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), c->name))
			device = list[i];
	must(device != NULL, "the device");
	struct ibv_context *ctx = must_made(ibv_open_device(device), "ibv_open_device");
	struct ibv_device_attr attr;
	must_zero(ibv_query_device(ctx, &attr), "ibv_query_device");
	must_zero(ibv_close_device(ctx), "ibv_close_device");
	ibv_free_device_list(list);
	return 0;
}

static int round_pd(struct churn *c)
{
	struct ibv_pd *pd = must_made(ibv_alloc_pd(c->dev.ctx), "ibv_alloc_pd");
	must_zero(ibv_dealloc_pd(pd), "ibv_dealloc_pd");
	return 0;
}

static int round_mr(struct churn *c)
{
	struct ibv_mr *mr = must_made(ibv_reg_mr(c->dev.pd, buf, sizeof(buf),
						 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
				      "ibv_reg_mr");
	must_zero(ibv_dereg_mr(mr), "ibv_dereg_mr");
	return 0;
}

static int round_mw(struct churn *c, enum ibv_mw_type type)
{
	struct ibv_mw *mw = must_made(ibv_alloc_mw(c->dev.pd, type), "ibv_alloc_mw");
	must_zero(ibv_dealloc_mw(mw), "ibv_dealloc_mw");
	return 0;
}

static int round_mw1(struct churn *c) { return round_mw(c, IBV_MW_TYPE_1); }
static int round_mw2(struct churn *c) { return round_mw(c, IBV_MW_TYPE_2); }

static int round_cq(struct churn *c)
{
	struct ibv_cq *cq = must_made(ibv_create_cq(c->dev.ctx, 64, NULL, NULL, 0), "ibv_create_cq");
	must_zero(ibv_destroy_cq(cq), "ibv_destroy_cq");
	return 0;
}

static int round_cq_ex(struct churn *c)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = 64,
		.wc_flags = IBV_WC_STANDARD_FLAGS,
	};
	struct ibv_cq_ex *cq = must_made(ibv_create_cq_ex(c->dev.ctx, &attr), "ibv_create_cq_ex");
	must_zero(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), "ibv_destroy_cq (extended)");
	return 0;
}

static int round_cq_channel(struct churn *c)
{
	struct ibv_comp_channel *channel = must_made(ibv_create_comp_channel(c->dev.ctx), "ibv_create_comp_channel");
	struct ibv_cq *cq = must_made(ibv_create_cq(c->dev.ctx, 64, NULL, channel, 0), "ibv_create_cq on a channel");
	must_zero(ibv_req_notify_cq(cq, 0), "ibv_req_notify_cq");
	must_zero(ibv_destroy_cq(cq), "ibv_destroy_cq");
	must_zero(ibv_destroy_comp_channel(channel), "ibv_destroy_comp_channel");
	return 0;
}

static int round_srq(struct churn *c)
{
	struct ibv_srq_init_attr attr = { .attr = { .max_wr = 64, .max_sge = 1 } };
	struct ibv_srq *srq = must_made(ibv_create_srq(c->dev.pd, &attr), "ibv_create_srq");
	must_zero(ibv_destroy_srq(srq), "ibv_destroy_srq");
	return 0;
}

static struct ibv_qp *create_qp(struct churn *c, enum ibv_qp_type type, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr attr = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.srq = srq,
		.cap = { .max_send_wr = 64, .max_recv_wr = srq ? 0 : 64, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = type,
	};
	return must_made(ibv_create_qp(c->dev.pd, &attr), "ibv_create_qp");
}

static int round_rc_qp(struct churn *c)
{
	struct ibv_qp *qp = create_qp(c, IBV_QPT_RC, NULL);
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = LOOPBACK_PORT,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	must_zero(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		  "ibv_modify_qp to INIT");
	must_zero(ibv_destroy_qp(qp), "ibv_destroy_qp");
	return 0;
}

static int round_rc_srq_qp(struct churn *c)
{
	must_zero(ibv_destroy_qp(create_qp(c, IBV_QPT_RC, c->srq)), "ibv_destroy_qp (on an SRQ)");
	return 0;
}

static int round_ud_qp(struct churn *c)
{
	must_zero(ibv_destroy_qp(create_qp(c, IBV_QPT_UD, NULL)), "ibv_destroy_qp (UD)");
	return 0;
}

static int round_qp_ex(struct churn *c)
{
	struct ibv_qp_init_attr_ex attr = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = c->dev.pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
	};
	struct ibv_qp *qp = must_made(ibv_create_qp_ex(c->dev.ctx, &attr), "ibv_create_qp_ex");
	must_zero(ibv_destroy_qp(qp), "ibv_destroy_qp (extended)");
	return 0;
}

static int round_ah(struct churn *c)
{
	struct ibv_ah_attr attr = {
		.is_global = 1,
		.grh = { .dgid = c->dev.gid, .sgid_index = (uint8_t)c->dev.gid_index, .hop_limit = 1 },
		.port_num = LOOPBACK_PORT,
	};
	struct ibv_ah *ah = must_made(ibv_create_ah(c->dev.pd, &attr), "ibv_create_ah");
	must_zero(ibv_destroy_ah(ah), "ibv_destroy_ah");
	return 0;
}

static int round_td(struct churn *c)
{
	struct ibv_td_init_attr attr = {};
	struct ibv_td *td = may_make(ibv_alloc_td(c->dev.ctx, &attr), "ibv_alloc_td");
	if (!td)
		return errno;
	must_zero(ibv_dealloc_td(td), "ibv_dealloc_td");
	return 0;
}

static int round_parent_domain(struct churn *c)
{
	struct ibv_parent_domain_init_attr attr = { .pd = c->dev.pd };
	struct ibv_pd *pd = may_make(ibv_alloc_parent_domain(c->dev.ctx, &attr), "ibv_alloc_parent_domain");
	if (!pd)
		return errno;
	must_zero(ibv_dealloc_pd(pd), "ibv_dealloc_pd (parent domain)");
	return 0;
}

static void churn(struct churn *c, const char *kind, round_fn round, int rounds, long slack_kib)
{
	int rc = round(c);
	if (rc) {
		printf("%s: not supported by this provider (%s)\n", kind, strerror(rc));
		return;
	}
	for (int i = 1; i < rounds / 10; i++)
		round(c);
	long rss_before = rss_kib(), maps_before = mapping_count();
	double started = now_seconds();
	for (int i = 0; i < rounds; i++)
		round(c);
	double seconds = now_seconds() - started;
	long rss_after = rss_kib(), maps_after = mapping_count();
	int grew = rss_after - rss_before > slack_kib || maps_after - maps_before > 2;
	printf("%s: %d rounds in %.1f s, RSS %ld -> %ld KiB, mappings %ld -> %ld%s\n", kind, rounds, seconds,
	       rss_before, rss_after, maps_before, maps_after, grew ? ": GREW" : "");
	failed |= grew;
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4)
		die("usage: verbs-churn DEVICE ROUNDS [SLACK_KIB]");
	int rounds = atoi(argv[2]);
	long slack_kib = argc == 4 ? atol(argv[3]) : 256;
	if (rounds < 10)
		die("ROUNDS is a number from 10 up, not '%s'", argv[2]);

	struct churn c = { .name = argv[1] };
	loopback_open(&c.dev, argv[1]);
	printf("provider %s\n", loopback_provider_path(&c.dev));
	c.cq = ibv_create_cq(c.dev.ctx, 256, NULL, NULL, 0);
	must(c.cq != NULL, "ibv_create_cq (the QPs')");
	struct ibv_srq_init_attr srq_attr = { .attr = { .max_wr = 64, .max_sge = 1 } };
	c.srq = ibv_create_srq(c.dev.pd, &srq_attr);
	must(c.srq != NULL, "ibv_create_srq (the QPs')");

	churn(&c, "device open/close", round_device, rounds / 10 < 10 ? 10 : rounds / 10, slack_kib);
	churn(&c, "PD", round_pd, rounds, slack_kib);
	churn(&c, "MR", round_mr, rounds, slack_kib);
	churn(&c, "MW type 1", round_mw1, rounds, slack_kib);
	churn(&c, "MW type 2", round_mw2, rounds, slack_kib);
	churn(&c, "CQ", round_cq, rounds, slack_kib);
	churn(&c, "CQ (extended)", round_cq_ex, rounds, slack_kib);
	churn(&c, "CQ on a completion channel", round_cq_channel, rounds, slack_kib);
	churn(&c, "SRQ", round_srq, rounds, slack_kib);
	churn(&c, "RC QP to INIT", round_rc_qp, rounds, slack_kib);
	churn(&c, "RC QP on an SRQ", round_rc_srq_qp, rounds, slack_kib);
	churn(&c, "UD QP", round_ud_qp, rounds, slack_kib);
	churn(&c, "QP (extended)", round_qp_ex, rounds, slack_kib);
	churn(&c, "AH", round_ah, rounds, slack_kib);
	churn(&c, "thread domain", round_td, rounds, slack_kib);
	churn(&c, "parent domain", round_parent_domain, rounds, slack_kib);

	must_zero(ibv_destroy_srq(c.srq), "ibv_destroy_srq (the QPs')");
	must_zero(ibv_destroy_cq(c.cq), "ibv_destroy_cq (the QPs')");
	loopback_close(&c.dev);
	printf("%s\n", failed ? "verbs-churn: memory grew" : "verbs-churn: flat");
	return failed;
}
