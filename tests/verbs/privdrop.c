/*
 * verbs-privdrop: a program that changes its credentials after opening the device, as daemons
 * drop capabilities after start-up. It opens DEVICE, then drops CAP_IPC_LOCK (capset: from the
 * effective, permitted and inheritable sets) and from then on uses the device:
 *
 * - control: a write() command on the context's cmd_fd must now fail with EACCES (the kernel's
 *   uverbs_write refuses a process whose credentials changed since open), so the run really is
 *   in the state under test;
 * - posts: two RC QPs on DEVICE, connected to each other, and a CQ. With POSTS "ok", a SEND and
 *   its receive must complete (the data arrived), then a list of 64 signalled RDMA WRITEs, more
 *   than the send queue holds (rxe rounds it up from the 8 asked for to a power of two less one),
 *   must stop at ENOMEM with bad_wr the first that did not fit, at least as many posted as the
 *   QP's max_send_wr; every WRITE posted must complete with success and its data arrive, and the
 *   refused one must then post and complete. With POSTS "EACCES" the SEND's ibv_post_send must fail with EACCES: the
 *   provider rings its doorbell with a write() (the stock rxe provider does); that is printed;
 * - MRs: RLIMIT_MEMLOCK (soft) is lowered to 1 MiB and 64 KiB MRs are registered until one
 *   fails: exactly 16 fit, the 17th must fail with ENOMEM (without CAP_IPC_LOCK the pinned pages
 *   count against the limit), never EACCES; one is deregistered and one more must register;
 * - CQs, then QPs (RC, on one CQ): RLIMIT_AS (soft) is set to the address space in use plus
 *   HEADROOM MiB (8) and objects are created until one fails, which must be ENOMEM (the rings'
 *   mmap or the provider's allocation), never EACCES; one is destroyed and one more must be
 *   created; then all are destroyed (every destroy must succeed) and the limit is put back.
 *
 * Prints one line per kind with the counts and the error. Exit 0 when every step did, 1 (with
 * the step) otherwise. Must start with CAP_IPC_LOCK (the rig runs it as root).
 *
 *   verbs-privdrop DEVICE ok|EACCES [HEADROOM_MIB]
 */
#define _GNU_SOURCE
#include "loopback.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MR_SIZE (64 * 1024)
#define MR_LIMIT (1024 * 1024)
#define MAX_OBJS 200000

static void *objs[MAX_OBJS];

static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data))
		die("capget: %s", strerror(errno));
	if (!(data[0].effective & (1u << CAP_IPC_LOCK)))
		die("CAP_IPC_LOCK is not effective to begin with: run as root");
	data[0].effective &= ~(1u << CAP_IPC_LOCK);
	data[0].permitted &= ~(1u << CAP_IPC_LOCK);
	data[0].inheritable &= ~(1u << CAP_IPC_LOCK);
	if (syscall(SYS_capset, &hdr, data))
		die("capset: %s", strerror(errno));
	if (syscall(SYS_capget, &hdr, data) || (data[0].effective & (1u << CAP_IPC_LOCK)))
		die("CAP_IPC_LOCK is still effective after capset");
	printf("CAP_IPC_LOCK dropped after opening the device\n");
}

/* A QUERY_DEVICE write() command: the kernel must refuse it now (EACCES). */
static void check_write_refused(struct ibv_context *ctx)
{
	struct {
		uint32_t command;
		uint16_t in_words, out_words;
		uint64_t response;
	} cmd = { .command = 1 /* IB_USER_VERBS_CMD_QUERY_DEVICE */, .in_words = 4, .out_words = 44 };
	static char resp[176];
	cmd.response = (uintptr_t)resp;
	ssize_t n = write(ctx->cmd_fd, &cmd, sizeof(cmd));
	if (n >= 0 || errno != EACCES)
		die("control: a write() command after the credential change returned %zd (%s), not "
		    "EACCES: the case does not test what it should",
		    n, n < 0 ? strerror(errno) : "success");
	printf("control: write() on cmd_fd now fails with EACCES\n");
}

/* Sets the soft limit; returns the one it replaced. */
static rlim_t set_soft(int resource, rlim_t soft)
{
	struct rlimit r;
	if (getrlimit(resource, &r))
		die("getrlimit: %s", strerror(errno));
	rlim_t old = r.rlim_cur;
	r.rlim_cur = soft;
	if (setrlimit(resource, &r))
		die("setrlimit(%d, %llu): %s", resource, (unsigned long long)soft, strerror(errno));
	return old;
}

/* The address space in use, from /proc/self/statm (pages). */
static rlim_t vm_size(void)
{
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (!f || fscanf(f, "%lu", &pages) != 1)
		die("cannot read /proc/self/statm");
	fclose(f);
	return (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
}

typedef void *(*create_fn)(void *arg);
typedef int (*destroy_fn)(void *obj);

/*
 * Creates objects until one fails; checks the error (ENOMEM, never EACCES), frees one, creates
 * one more, frees all. Returns how many were created before the failure.
 */
static int exhaust(const char *kind, create_fn create, destroy_fn destroy, void *arg, int expect)
{
	int n = 0, err = 0;
	for (;;) {
		if (n == MAX_OBJS)
			die("%s: %d created without a failure", kind, n);
		errno = 0;
		objs[n] = create(arg);
		if (!objs[n]) {
			err = errno;
			break;
		}
		n++;
	}
	if (err == EACCES)
		die("%s: %d created, then EACCES: the provider sent a write() after the credential "
		    "change",
		    kind, n);
	if (err != ENOMEM)
		die("%s: %d created, then errno %d (%s), not ENOMEM", kind, n, err, strerror(err));
	if (n == 0)
		die("%s: not even one could be created", kind);
	if (expect && n != expect)
		die("%s: %d created before ENOMEM, not %d", kind, n, expect);
	int rc = destroy(objs[--n]);
	if (rc)
		die("%s: destroying one: %s", kind, strerror(rc));
	errno = 0;
	objs[n] = create(arg);
	if (!objs[n])
		die("%s: after freeing one, creating again failed: %s", kind, strerror(errno));
	int created = n + 1;
	for (int i = created - 1; i >= 0; i--) {
		rc = destroy(objs[i]);
		if (rc)
			die("%s: destroying %d of %d: %s", kind, i + 1, created, strerror(rc));
	}
	printf("%s: %d created, then ENOMEM; after freeing one, created again; all %d destroyed\n",
	       kind, created, created);
	return created;
}

struct mr_arg {
	struct ibv_pd *pd;
	char *buf;
	int next;
};

static void *create_mr(void *p)
{
	struct mr_arg *a = p;
	/* Each MR its own pages: at most MR_LIMIT / MR_SIZE + 2 of them are ever asked for. */
	char *at = a->buf + (size_t)(a->next++ % (MR_LIMIT / MR_SIZE + 2)) * MR_SIZE;
	return ibv_reg_mr(a->pd, at, MR_SIZE, IBV_ACCESS_LOCAL_WRITE);
}

static int destroy_mr(void *mr)
{
	return ibv_dereg_mr(mr);
}

static void *create_cq(void *ctx)
{
	return ibv_create_cq(ctx, 1, NULL, NULL, 0);
}

static int destroy_cq(void *cq)
{
	return ibv_destroy_cq(cq);
}

struct qp_arg {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static void *create_qp(void *p)
{
	struct qp_arg *a = p;
	struct ibv_qp_init_attr init = {
		.send_cq = a->cq,
		.recv_cq = a->cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	return ibv_create_qp(a->pd, &init);
}

static int destroy_qp(void *qp)
{
	return ibv_destroy_qp(qp);
}

#define POST_BUF 4096
#define POST_LEN 64

/* Polls CQ until N completions came (10 s at most) into WC. */
static void poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, const char *what)
{
	int got = 0;
	double deadline = now_seconds() + 10;
	while (got < n) {
		int rc = ibv_poll_cq(cq, n - got, wc + got);
		if (rc < 0)
			die("post: polling for %s: ibv_poll_cq returned %d", what, rc);
		got += rc;
		if (!rc && now_seconds() > deadline)
			die("post: %s: %d of %d completions in 10 s", what, got, n);
	}
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			die("post: %s: completion %d (wr_id %llu): %s", what, i, (unsigned long long)wc[i].wr_id,
			    ibv_wc_status_str(wc[i].status));
}

static struct ibv_qp *post_qp(struct ibv_pd *pd, struct ibv_cq *cq, uint32_t *max_send_wr)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	if (!qp)
		die("post: ibv_create_qp: %s", strerror(errno));
	*max_send_wr = init.cap.max_send_wr;
	return qp;
}

/*
 * Posts after the credential change: a SEND and its receive, then a send queue filled with
 * RDMA WRITEs to ENOMEM, all completed and polled, then one more (POSTS "ok"); or the SEND's
 * post refused with EACCES (POSTS "EACCES").
 */
static void post_after_drop(struct loopback_dev *dev, struct ibv_pd *pd, int expect_eacces)
{
	char *src, *dst;
	if (posix_memalign((void **)&src, 4096, POST_BUF) || posix_memalign((void **)&dst, 4096, POST_BUF))
		die("posix_memalign");
	for (int i = 0; i < POST_BUF; i++)
		src[i] = (char)(i * 7 + 1);
	memset(dst, 0, POST_BUF);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, POST_BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dmr =
		ibv_reg_mr(pd, dst, POST_BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!smr || !dmr)
		die("post: ibv_reg_mr: %s", strerror(errno));
	struct ibv_cq *cq = ibv_create_cq(dev->ctx, 256, NULL, NULL, 0);
	if (!cq)
		die("post: ibv_create_cq: %s", strerror(errno));
	uint32_t cap, cap_b;
	struct ibv_qp *a = post_qp(pd, cq, &cap), *b = post_qp(pd, cq, &cap_b);
	loopback_connect(dev, a, dev, b);
	if (cap >= POST_BUF / POST_LEN)
		die("post: a send queue of %u work requests: more than the test's list fills", cap);

	struct ibv_sge rsge = { .addr = (uintptr_t)dst, .length = POST_LEN, .lkey = dmr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1000, .sg_list = &rsge, .num_sge = 1 }, *bad_rwr;
	int rc = ibv_post_recv(b, &rwr, &bad_rwr);
	if (rc)
		die("post: ibv_post_recv: %s", strerror(rc));
	struct ibv_sge ssge = { .addr = (uintptr_t)src, .length = POST_LEN, .lkey = smr->lkey };
	struct ibv_send_wr swr = { .wr_id = 1001,
				   .sg_list = &ssge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	rc = ibv_post_send(a, &swr, &bad);
	if (expect_eacces) {
		if (rc != EACCES)
			die("post: ibv_post_send after the credential change returned %d (%s), not EACCES", rc,
			    strerror(rc));
		printf("post: ibv_post_send after the credential change fails with EACCES (the provider "
		       "rings its doorbell with a write(), which the kernel refuses)\n");
	} else {
		if (rc)
			die("post: ibv_post_send after the credential change: %s", strerror(rc));
		struct ibv_wc wc[2 * (POST_BUF / POST_LEN)];
		poll_n(cq, wc, 2, "the SEND and its receive");
		if (memcmp(src, dst, POST_LEN))
			die("post: the SEND's data did not arrive");

		/* More WRITEs than the send queue holds, in one list. */
		enum { LIST = POST_BUF / POST_LEN };
		struct ibv_sge sges[LIST];
		struct ibv_send_wr wrs[LIST];
		memset(dst, 0, POST_BUF);
		for (uint32_t i = 0; i < LIST; i++) {
			sges[i] = (struct ibv_sge){ .addr = (uintptr_t)(src + i * POST_LEN),
						    .length = POST_LEN,
						    .lkey = smr->lkey };
			wrs[i] = (struct ibv_send_wr){ .wr_id = i,
						       .next = i + 1 < LIST ? &wrs[i + 1] : NULL,
						       .sg_list = &sges[i],
						       .num_sge = 1,
						       .opcode = IBV_WR_RDMA_WRITE,
						       .send_flags = IBV_SEND_SIGNALED };
			wrs[i].wr.rdma.remote_addr = (uintptr_t)(dst + i * POST_LEN);
			wrs[i].wr.rdma.rkey = dmr->rkey;
		}
		rc = ibv_post_send(a, wrs, &bad);
		if (rc != ENOMEM || !bad || bad < wrs + cap || bad >= wrs + LIST)
			die("post: %d WRITEs on a send queue of at least %u: returned %d (%s), bad_wr %td, "
			    "not ENOMEM at %u or later",
			    LIST, cap, rc, strerror(rc), bad ? bad - wrs : -1, cap);
		uint32_t posted = (uint32_t)(bad - wrs);
		poll_n(cq, wc, (int)posted, "the WRITEs that filled the send queue");
		for (uint32_t i = 0; i < posted; i++)
			if (wc[i].opcode != IBV_WC_RDMA_WRITE || wc[i].wr_id != i)
				die("post: WRITE completion %u: opcode %d, wr_id %llu", i, wc[i].opcode,
				    (unsigned long long)wc[i].wr_id);
		if (memcmp(src, dst, posted * POST_LEN))
			die("post: the WRITEs' data did not arrive");
		/* The queue is free again: the one refused now posts and completes. */
		wrs[posted].next = NULL;
		rc = ibv_post_send(a, &wrs[posted], &bad);
		if (rc)
			die("post: a WRITE after the queue drained: %s", strerror(rc));
		poll_n(cq, wc, 1, "the WRITE after the queue drained");
		if (memcmp(src + posted * POST_LEN, dst + posted * POST_LEN, POST_LEN))
			die("post: the last WRITE's data did not arrive");
		printf("post: a SEND and its receive completed; %u WRITEs filled the send queue "
		       "(max_send_wr %u), the next got ENOMEM; all %u completed; then it posted and "
		       "completed\n",
		       posted, cap, posted);
	}
	if (ibv_destroy_qp(a) || ibv_destroy_qp(b) || ibv_destroy_cq(cq) || ibv_dereg_mr(smr) ||
	    ibv_dereg_mr(dmr))
		die("post: cleanup: %s", strerror(errno));
	free(src);
	free(dst);
}

int main(int argc, char **argv)
{
	if (argc < 3 || argc > 4 || (strcmp(argv[2], "ok") && strcmp(argv[2], "EACCES")))
		die("usage: verbs-privdrop DEVICE ok|EACCES [HEADROOM_MIB]");
	int expect_eacces = !strcmp(argv[2], "EACCES");
	rlim_t headroom = (rlim_t)(argc == 4 ? atoi(argv[3]) : 8) << 20;
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* The device, a PD and the GID of its IPv4 address, before the credential change. */
	struct loopback_dev dev;
	loopback_open(&dev, argv[1]);
	struct ibv_context *ctx = dev.ctx;

	drop_ipc_lock();
	check_write_refused(ctx);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd after the credential change: %s", strerror(errno));

	post_after_drop(&dev, pd, expect_eacces);

	struct mr_arg mr = { .pd = pd };
	if (posix_memalign((void **)&mr.buf, 4096, (MR_LIMIT / MR_SIZE + 2) * MR_SIZE))
		die("posix_memalign");
	memset(mr.buf, 0, (MR_LIMIT / MR_SIZE + 2) * MR_SIZE);
	rlim_t memlock = set_soft(RLIMIT_MEMLOCK, MR_LIMIT);
	exhaust("MR", create_mr, destroy_mr, &mr, MR_LIMIT / MR_SIZE);
	set_soft(RLIMIT_MEMLOCK, memlock);

	/* The objects' table and the QP phase's CQ exist before the limit. */
	struct qp_arg qp = { .pd = pd, .cq = ibv_create_cq(ctx, 16, NULL, NULL, 0) };
	if (!qp.cq)
		die("ibv_create_cq: %s", strerror(errno));
	memset(objs, 0, sizeof(objs));

	rlim_t as = set_soft(RLIMIT_AS, vm_size() + headroom);
	exhaust("CQ", create_cq, destroy_cq, ctx, 0);
	set_soft(RLIMIT_AS, as);

	set_soft(RLIMIT_AS, vm_size() + headroom);
	exhaust("QP", create_qp, destroy_qp, &qp, 0);
	set_soft(RLIMIT_AS, as);

	if (ibv_destroy_cq(qp.cq) || ibv_dealloc_pd(pd))
		die("cleanup: %s", strerror(errno));
	loopback_close(&dev);
	free(mr.buf);
	printf("ok\n");
	return 0;
}
