/*
 * verbs-privdrop: a program that changes its credentials after opening the device, as daemons
 * drop capabilities after start-up. It opens DEVICE, then drops CAP_IPC_LOCK (capset: from the
 * effective, permitted and inheritable sets) and from then on uses the device:
 *
 * - control: a write() command on the context's cmd_fd must now fail with EACCES (the kernel's
 *   uverbs_write refuses a process whose credentials changed since open), so the run really is
 *   in the state under test;
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
 *   verbs-privdrop DEVICE [HEADROOM_MIB]
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

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3)
		die("usage: verbs-privdrop DEVICE [HEADROOM_MIB]");
	rlim_t headroom = (rlim_t)(argc == 3 ? atoi(argv[2]) : 8) << 20;
	setvbuf(stdout, NULL, _IOLBF, 0);

	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[1]))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("cannot open %s", argv[1]);
	ibv_free_device_list(list);

	drop_ipc_lock();
	check_write_refused(ctx);

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd after the credential change: %s", strerror(errno));

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

	if (ibv_destroy_cq(qp.cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		die("cleanup: %s", strerror(errno));
	free(mr.buf);
	printf("ok\n");
	return 0;
}
