/*
 * verbs-disassociate: a program holding verbs objects while its device is removed
 * (`rdma link delete`). It opens DEVICE, creates a PD, an MR, a memory window, a CQ, an SRQ, an
 * RC QP (moved to INIT) and an AH, prints "ready" and waits up to SECONDS (20) for
 * IBV_EVENT_DEVICE_FATAL on the async event channel. Then it destroys every object and closes
 * the device: with RDMAV_ALLOW_DISASSOC_DESTROY set (libibverbs' switch), every destroy must
 * return 0, as libibverbs' own ibv_cmd_destroy_* make it for a device that is gone (the kernel
 * answers EIO). Exit 0 when every step did; 1 (with the step) otherwise.
 *
 * A kernel whose rxe cannot disassociate (no disassociate_ucontext: Linux 6.1's) sends no event:
 * `rdma link delete` waits until every program closed the device. The program then says so,
 * and its destroys (of live objects) must succeed all the same, after which the removal ends.
 *
 *   verbs-disassociate DEVICE [SECONDS]
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char buf[4096];

static void check_destroy(const char *what, int rc)
{
	if (rc)
		die("%s after the device was removed: %s (%d)", what, strerror(rc), rc);
	printf("%s: 0\n", what);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		die("usage: verbs-disassociate DEVICE [SECONDS]");
	int seconds = argc == 3 ? atoi(argv[2]) : 20;
	if (seconds <= 0)
		die("SECONDS is a positive number, not '%s'", argv[2]);
	if (!getenv("RDMAV_ALLOW_DISASSOC_DESTROY"))
		die("run with RDMAV_ALLOW_DISASSOC_DESTROY=1 (libibverbs' switch for destroys on a removed device)");

	struct loopback_dev dev;
	loopback_open(&dev, argv[1]);
	printf("provider %s\n", loopback_provider_path(&dev));

	struct ibv_mr *mr = ibv_reg_mr(dev.pd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
	struct ibv_mw *mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_1);
	struct ibv_cq *cq = ibv_create_cq(dev.ctx, 16, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(dev.pd, &sa);
	if (!mr || !mw || !cq || !srq)
		die("create: %s", strerror(errno));
	struct ibv_qp_init_attr qa = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(dev.pd, &qa);
	if (!qp)
		die("ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = LOOPBACK_PORT,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	if (ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("ibv_modify_qp INIT: %s", strerror(errno));
	struct ibv_ah_attr aa = {
		.is_global = 1,
		.grh = { .dgid = dev.gid, .sgid_index = (uint8_t)dev.gid_index, .hop_limit = 1 },
		.port_num = LOOPBACK_PORT,
	};
	struct ibv_ah *ah = ibv_create_ah(dev.pd, &aa);
	if (!ah)
		die("ibv_create_ah: %s", strerror(errno));

	printf("ready\n");
	fflush(stdout);

	int fatal = 0;
	while (!fatal) {
		struct pollfd pfd = { .fd = dev.ctx->async_fd, .events = POLLIN };
		int n = poll(&pfd, 1, seconds * 1000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("poll on the async fd: %s", strerror(errno));
		if (n == 0)
			break;
		struct ibv_async_event ev;
		if (ibv_get_async_event(dev.ctx, &ev))
			die("ibv_get_async_event: %s", strerror(errno));
		enum ibv_event_type type = ev.event_type;
		ibv_ack_async_event(&ev);
		printf("async event %s\n", ibv_event_type_str(type));
		fatal = type == IBV_EVENT_DEVICE_FATAL;
	}
	if (!fatal)
		printf("no IBV_EVENT_DEVICE_FATAL in %d s: this kernel's rxe does not disassociate a removed "
		       "device (the removal waits for this program to close it); destroying live objects\n",
		       seconds);

	check_destroy("ibv_destroy_qp", ibv_destroy_qp(qp));
	check_destroy("ibv_destroy_srq", ibv_destroy_srq(srq));
	check_destroy("ibv_destroy_ah", ibv_destroy_ah(ah));
	check_destroy("ibv_dealloc_mw", ibv_dealloc_mw(mw));
	check_destroy("ibv_dereg_mr", ibv_dereg_mr(mr));
	check_destroy("ibv_destroy_cq", ibv_destroy_cq(cq));
	check_destroy("ibv_dealloc_pd", ibv_dealloc_pd(dev.pd));
	check_destroy("ibv_close_device", ibv_close_device(dev.ctx));
	printf("every object freed%s\n", fatal ? " after IBV_EVENT_DEVICE_FATAL" : "");
	return 0;
}
