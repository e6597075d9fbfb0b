/*
 * RC queue pairs between two local rxe devices (rxe1, the client, and rxe0, the server, on the
 * rig's veth pair), connected by hand with ibv_modify_qp: both ends live in one process, so no
 * out-of-band exchange and no rdma_cm. Shared by the tests/verbs programs.
 */
#ifndef VERBS_LOOPBACK_H
#define VERBS_LOOPBACK_H

#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

#define LOOPBACK_PORT 1

/* One opened device: its context, a PD, and the GID index of its RoCEv2 IPv4 address. */
struct loopback_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int gid_index;
	union ibv_gid gid;
};

/* Prints why and exits 1. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Opens device NAME, allocates its PD and finds the GID of its IPv4 address. */
void loopback_open(struct loopback_dev *dev, const char *name);
void loopback_close(struct loopback_dev *dev);

/* The two ends every two-device program opens: the client on rxe1, the server on rxe0. */
void loopback_open_pair(struct loopback_dev *client, struct loopback_dev *server);
void loopback_close_pair(struct loopback_dev *client, struct loopback_dev *server);

/*
 * A thread domain on DEV (*td) and a parent domain of DEV's PD with it (*parent), with CA (a CQ's
 * attributes) set to create the CQ in that parent domain: 0; or, when the provider has no thread
 * domains, 2 (the programs' exit status for it) with the reason printed. Dies on other failures.
 */
int loopback_thread_domain(struct loopback_dev *dev, struct ibv_td **td, struct ibv_pd **parent,
			   struct ibv_cq_init_attr_ex *ca);
/* The other end of loopback_thread_domain: the parent domain, then the thread domain freed. */
void loopback_free_thread_domain(struct ibv_td *td, struct ibv_pd *parent);

/* ibv_reg_mr of LEN bytes at BUF on DEV's PD with ACCESS; dies on failure. */
struct ibv_mr *loopback_reg_mr(struct loopback_dev *dev, void *buf, size_t len, int access);

/*
 * The initializer of a signalled work request of the one SGE at SGE with OPCODE, then what the
 * opcode needs (.wr.rdma = ..., .wr.ud = ...): a macro, so that verbs-bench's counted posts still
 * build the request in place.
 */
#define LOOPBACK_SEND_WR(wr_id_, opcode_, sge_, ...)                                               \
	{ .wr_id = (wr_id_), .sg_list = (sge_), .num_sge = 1, .opcode = (opcode_),                 \
	  .send_flags = IBV_SEND_SIGNALED, __VA_ARGS__ }

/*
 * Posts one signaled RDMA Write of LEN bytes from LOCAL (in LMR) to REMOTE (in RMR) on QP:
 * ibv_post_send's status.
 */
int loopback_post_write(struct ibv_qp *qp, uint64_t wr_id, void *local, uint32_t len,
			const struct ibv_mr *lmr, void *remote, const struct ibv_mr *rmr);

/* Takes two RC QPs in RESET to RTS, each one's peer the other. */
void loopback_connect(struct loopback_dev *a, struct ibv_qp *qa, struct loopback_dev *b,
		      struct ibv_qp *qb);

/* The library that serves DEV's context: the provider's post_send lives in it. */
const char *loopback_provider_path(const struct loopback_dev *dev);

double now_seconds(void);

#endif
