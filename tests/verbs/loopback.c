#define _GNU_SOURCE
#include "loopback.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

double now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int loopback_thread_domain(struct loopback_dev *dev, struct ibv_td **td, struct ibv_pd **parent,
			   struct ibv_cq_init_attr_ex *ca)
{
	struct ibv_td_init_attr ta = { 0 };

	*td = ibv_alloc_td(dev->ctx, &ta);
	if (!*td) {
		printf("thread domain: ibv_alloc_td: %s (this provider has none)\n", strerror(errno));
		return 2;
	}
	struct ibv_parent_domain_init_attr pa = { .pd = dev->pd, .td = *td };
	*parent = ibv_alloc_parent_domain(dev->ctx, &pa);
	if (!*parent)
		die("ibv_alloc_parent_domain: %s", strerror(errno));
	ca->comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
	ca->parent_domain = *parent;
	return 0;
}

void loopback_free_thread_domain(struct ibv_td *td, struct ibv_pd *parent)
{
	if (ibv_dealloc_pd(parent) || ibv_dealloc_td(td))
		die("dealloc parent domain / td: %s", strerror(errno));
}

/* RoCEv2 carries IPv4 addresses as IPv4-mapped IPv6 GIDs (::ffff:a.b.c.d). */
static int is_ipv4_mapped(const union ibv_gid *gid)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(gid->raw, prefix, sizeof(prefix)) == 0;
}

void loopback_open(struct loopback_dev *dev, const char *name)
{
	struct ibv_device **list;
	struct ibv_port_attr port;
	int i, n;

	memset(dev, 0, sizeof(*dev));
	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list: %s", strerror(errno));
	for (i = 0; i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			dev->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!dev->ctx)
		die("cannot open %s", name);
	dev->pd = ibv_alloc_pd(dev->ctx);
	if (!dev->pd)
		die("ibv_alloc_pd on %s: %s", name, strerror(errno));
	if (ibv_query_port(dev->ctx, LOOPBACK_PORT, &port))
		die("ibv_query_port on %s", name);
	dev->gid_index = -1;
	for (i = 0; i < port.gid_tbl_len && dev->gid_index < 0; i++) {
		if (ibv_query_gid(dev->ctx, LOOPBACK_PORT, i, &dev->gid))
			continue;
		if (is_ipv4_mapped(&dev->gid))
			dev->gid_index = i;
	}
	if (dev->gid_index < 0)
		die("%s has no IPv4 GID", name);
}

void loopback_close(struct loopback_dev *dev)
{
	if (ibv_dealloc_pd(dev->pd))
		die("ibv_dealloc_pd");
	if (ibv_close_device(dev->ctx))
		die("ibv_close_device");
}

void loopback_open_pair(struct loopback_dev *client, struct loopback_dev *server)
{
	loopback_open(client, "rxe1");
	loopback_open(server, "rxe0");
}

void loopback_close_pair(struct loopback_dev *client, struct loopback_dev *server)
{
	loopback_close(client);
	loopback_close(server);
}

struct ibv_mr *loopback_reg_mr(struct loopback_dev *dev, void *buf, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(dev->pd, buf, len, access);

	if (!mr)
		die("ibv_reg_mr: %s", strerror(errno));
	return mr;
}

int loopback_post_write(struct ibv_qp *qp, uint64_t wr_id, void *local, uint32_t len,
			const struct ibv_mr *lmr, void *remote, const struct ibv_mr *rmr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lmr->lkey };
	struct ibv_send_wr wr = LOOPBACK_SEND_WR(wr_id, IBV_WR_RDMA_WRITE, &sge,
			.wr.rdma = { .remote_addr = (uintptr_t)remote, .rkey = rmr->rkey }), *bad = NULL;

	return ibv_post_send(qp, &wr, &bad);
}

static void to_rts(struct ibv_qp *qp, const struct loopback_dev *self,
		   const struct loopback_dev *peer, uint32_t peer_qpn)
{
	struct ibv_qp_attr attr;
	int rc;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = LOOPBACK_PORT;
	attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc)
		die("modify_qp INIT: %s", strerror(rc));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_1024;
	attr.dest_qp_num = peer_qpn;
	attr.rq_psn = 0;
	attr.max_dest_rd_atomic = 1;
	/* A short RNR timer: a receiver that runs dry costs little time. */
	attr.min_rnr_timer = 1;
	attr.ah_attr.is_global = 1;
	attr.ah_attr.grh.dgid = peer->gid;
	attr.ah_attr.grh.sgid_index = (uint8_t)self->gid_index;
	attr.ah_attr.grh.hop_limit = 64;
	attr.ah_attr.port_num = LOOPBACK_PORT;
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc)
		die("modify_qp RTR: %s", strerror(rc));

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTS;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7; /* infinite: a send waits for its receive instead of failing */
	attr.sq_psn = 0;
	attr.max_rd_atomic = 1;
	rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc)
		die("modify_qp RTS: %s", strerror(rc));
}

void loopback_connect(struct loopback_dev *a, struct ibv_qp *qa, struct loopback_dev *b,
		      struct ibv_qp *qb)
{
	to_rts(qa, a, b, qb->qp_num);
	to_rts(qb, b, a, qa->qp_num);
}

const char *loopback_provider_path(const struct loopback_dev *dev)
{
	Dl_info where;

	if (!dladdr((void *)dev->ctx->ops.post_send, &where) || !where.dli_fname)
		return "?";
	return where.dli_fname;
}
