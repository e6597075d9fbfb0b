// SPDX-License-Identifier: MIT OR Apache-2.0
//
// LD_PRELOAD'ed by the rig into a perftest -R client. perftest -R makes two rdma_cm connections:
// one to exchange parameters, then the test's, and its server starts listening for the second only
// after the exchange. A client that gets there first is rejected (reason 8, nothing listens) and
// Debian's perftest (4.5-0.17 in Debian 12, 25.01 in 13 and sid) crashes in its retry, which reuses
// the cm ids it has just freed (fixed upstream in perftest 26.04, 3d9d8d0). That is a race between
// the two ends, not a fault of either provider; under emulation the client wins it often enough to
// fail runs.
//
// With RIG_CM_CONNECT_GATE=FILE, every rdma_connect after the process's first waits until FILE
// exists, which the rig creates once the server lists its second listener (open_connect_gate in
// tests/rig/guest/lib.sh), at most RIG_CM_CONNECT_GATE_WAIT seconds (60 by default); then it
// connects as usual. Without the variable it changes nothing. It does not link librdmacm: in a
// process that does not use it, rdma_connect is never called.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct rdma_cm_id;
struct rdma_conn_param;

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);

static void wait_for_gate(const char *gate)
{
	const char *limit = getenv("RIG_CM_CONNECT_GATE_WAIT");
	long tenths = (limit ? strtol(limit, NULL, 10) : 60) * 10;
	const struct timespec tenth = { .tv_nsec = 100 * 1000 * 1000 };

	for (long i = 0; i < tenths; i++) {
		if (access(gate, F_OK) == 0) {
			/* How often the race would have been lost shows in the client's log. */
			if (i > 0)
				fprintf(stderr, "cm-connect-gate: held the connection %ld ms for the server's listener\n",
					i * 100);
			return;
		}
		nanosleep(&tenth, NULL);
	}
	fprintf(stderr, "cm-connect-gate: %s did not appear; connecting anyway\n", gate);
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	static int (*real_connect)(struct rdma_cm_id *, struct rdma_conn_param *);
	static int calls;
	const char *gate = getenv("RIG_CM_CONNECT_GATE");
	int saved_errno = errno;

	if (!real_connect)
		real_connect = (int (*)(struct rdma_cm_id *, struct rdma_conn_param *))dlsym(RTLD_NEXT, "rdma_connect");
	if (!real_connect) {
		errno = ENOSYS;
		return -1;
	}
	if (gate && __atomic_fetch_add(&calls, 1, __ATOMIC_RELAXED) > 0)
		wait_for_gate(gate);
	errno = saved_errno;
	return real_connect(id, conn_param);
}
