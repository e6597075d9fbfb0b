// SPDX-License-Identifier: MIT OR Apache-2.0
//
// LD_PRELOAD'ed by the rig into every process under test. It wraps ibv_get_device_list and
// ibv_open_device and, for each device a process lists or opens, appends one line to
// $RIG_PROVIDER_LOG:
//
//     <pid> <program> listed|opened <device> <provider name> <path of the provider library>
//
// libibverbs loads every configured provider into each process, so the mapped libraries do not say
// which one served a device. The verbs_device behind an ibv_device does: its `ops` points into the
// provider that claimed the device, and its first member is the provider's name. Both facts hold
// for every rdma-core release that has verbs_device (v13 on).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct provider_ops_head {
	const char *name;
};

struct verbs_device_head {
	struct ibv_device device;
	const struct provider_ops_head *ops;
};

extern char *program_invocation_short_name;

static void report(const char *event, struct ibv_device *device)
{
	const char *log_path = getenv("RIG_PROVIDER_LOG");
	const struct provider_ops_head *ops;
	Dl_info where = { 0 };
	char line[1024];
	int fd, len;

	if (!log_path || !device)
		return;
	ops = ((struct verbs_device_head *)device)->ops;
	if (!ops || !dladdr(ops, &where) || !where.dli_fname)
		where.dli_fname = "?";
	len = snprintf(line, sizeof(line), "%d %s %s %s %s %s\n", getpid(),
		       program_invocation_short_name, event, ibv_get_device_name(device),
		       ops && ops->name ? ops->name : "?", where.dli_fname);
	if (len <= 0 || (size_t)len >= sizeof(line))
		return;
	fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	/* One write per line: O_APPEND keeps lines of concurrent processes whole. */
	if (write(fd, line, (size_t)len) != len)
		perror("provider-probe: write");
	close(fd);
}

static void *real_symbol(const char *name)
{
	return dlvsym(RTLD_NEXT, name, "IBVERBS_1.1");
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	static struct ibv_device **(*real_list)(int *);
	struct ibv_device **list;
	int saved_errno;

	if (!real_list)
		real_list = (struct ibv_device * *(*)(int *))real_symbol("ibv_get_device_list");
	if (!real_list) {
		errno = ENOSYS;
		return NULL;
	}
	list = real_list(num_devices);
	saved_errno = errno;
	for (int i = 0; list && list[i]; i++)
		report("listed", list[i]);
	errno = saved_errno;
	return list;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	static struct ibv_context *(*real_open)(struct ibv_device *);
	struct ibv_context *context;
	int saved_errno;

	if (!real_open)
		real_open = (struct ibv_context * (*)(struct ibv_device *))real_symbol("ibv_open_device");
	if (!real_open) {
		errno = ENOSYS;
		return NULL;
	}
	context = real_open(device);
	saved_errno = errno;
	if (context)
		report("opened", device);
	errno = saved_errno;
	return context;
}
