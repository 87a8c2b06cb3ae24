/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Runtime parameters.  Each is defined with fi_param_define, so that
 * `fi_info -e` lists it as FI_IBFAB_<NAME>, and read once at load.
 */
#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "ibf.h"

struct ibf_params ibf_params;

static const struct ibf_params ibf_params_default = {
	.tx_size = 384,
	.rx_size = 384,
	.tx_iov_limit = 4,
	.rx_iov_limit = 4,
	.inline_size = 0,
	.cq_size = 1024,
	.iface = NULL,
	.device = NULL,
	.link_local = 0,
	.cm_timeout_ms = 2000,
	.min_rnr_timer = 8,
	.ack_timeout = 0,
	.retry_count = 6,
	.eager_size = 32768,
	.rdm_qp_depth = 256,
	.rdm_connect_ms = 10000,
	.rdm_unexp_max = 16384,
	.rdm_max_conns = 65536,
	.mr_cache_max = 1024,
	/* Unset: on every device with windows but Soft-RoCE, whose
	 * retransmitted reads can arrive after the answer that closed
	 * their window (ibf_rdm_windows_wanted, fi_ibfab(7)). */
	.rdm_rndv_windows = -1,
};

/*
 * The number parameters: a size_t (size) or an int (num) of ibf_params,
 * taken when in [min, max].
 */
struct ibf_num_param {
	const char *name;
	size_t *size;
	int *num;
	long long min, max;
	const char *help;
};

#define IBF_SIZE(name, field, min, max, help) \
	{ name, &ibf_params.field, NULL, min, max, help }
#define IBF_INT(name, field, min, max, help) \
	{ name, NULL, &ibf_params.field, min, max, help }

static const struct ibf_num_param ibf_num_params[] = {
	IBF_SIZE("tx_size", tx_size, 1, 1 << 20,
	  "Default transmit queue depth of an endpoint (default: 384)"),
	IBF_SIZE("rx_size", rx_size, 1, 1 << 20,
	  "Default receive queue depth of an endpoint (default: 384)"),
	IBF_SIZE("tx_iov_limit", tx_iov_limit, 1, 64,
	  "Default iov limit of a transmit (default: 4)"),
	IBF_SIZE("rx_iov_limit", rx_iov_limit, 1, 64,
	  "Default iov limit of a receive (default: 4)"),
	IBF_SIZE("inline_size", inline_size, 0, 1 << 16,
	  "Largest inject in bytes, sent inline; 0 means the device's limit (default: 0)"),
	IBF_SIZE("eager_size", eager_size, 64, 1 << 20,
	  "Rendezvous threshold of FI_EP_RDM endpoints (larger messages are "
	  "read by the receiver), and largest message of an FI_EP_MSG endpoint "
	  "opened with FI_TAGGED (default: 32768)"),
	IBF_SIZE("rdm_qp_depth", rdm_qp_depth, 8, 1 << 16,
	  "Send queue depth of each queue pair of an FI_EP_RDM endpoint, one "
	  "per peer: device memory spent per peer (default: 256)"),
	IBF_SIZE("rdm_connect_timeout", rdm_connect_ms, 0, 3600000,
	  "How long, in milliseconds, an FI_EP_RDM endpoint keeps trying to "
	  "connect to a peer where nothing listens yet, or whose address or "
	  "route cannot be resolved, with growing pauses, before the operations "
	  "waiting for it fail, and how long a request waits for its answer "
	  "(longer while the node's CM is slow); 0 tries once (default: 10000)"),
	IBF_SIZE("rdm_unexp_max", rdm_unexp_max, 0, 1 << 20,
	  "Eager buffers an FI_EP_RDM endpoint may add, beyond FI_IBFAB_RX_SIZE, "
	  "while messages wait for receives not posted yet; each costs "
	  "FI_IBFAB_EAGER_SIZE of registered memory, allocated the first time "
	  "the backlog reaches it and kept until the endpoint closes.  A peer "
	  "holding more than half of what the others leave is slowed: its "
	  "sends return -FI_EAGAIN until receives are posted (default: 16384)"),
	IBF_SIZE("rdm_max_conns", rdm_max_conns, 2, 65536,
	  "Connections an FI_EP_RDM endpoint keeps that peers asked for; at "
	  "the limit, a new peer's request closes the least recently used "
	  "idle one (nothing in flight or waiting on it), which reconnects "
	  "when used again (default: 65536)"),
	IBF_SIZE("mr_cache_max", mr_cache_max, 0, 1 << 20,
	  "Registrations of application buffers ibfab keeps per domain for its "
	  "own local use (large RDM receives and RMA from unregistered memory), "
	  "dropped when the memory is unmapped, remapped or discarded (the "
	  "kernel's userfaultfd tells); 0 registers per operation "
	  "(default: 1024)"),
	IBF_SIZE("cq_size", cq_size, 1, 1 << 22,
	  "Default completion queue size; it grows as endpoints are bound, within the device's limit (default: 1024)"),
	IBF_INT("cm_timeout", cm_timeout_ms, 1, 600000,
	  "Address and route resolution timeout in milliseconds "
	  "(default: 2000)"),
	IBF_INT("min_rnr_timer", min_rnr_timer, 1, 31,
	  "How long a peer waits before resending to an endpoint with no "
	  "receive posted, in the IB encoding: 1 (0.01 ms) to 31 (491 ms); 8 "
	  "is 0.12 ms (default: 8)"),
	IBF_INT("ack_timeout", ack_timeout, 0, 31,
	  "How long a queue pair waits for the peer's acknowledgement before "
	  "it sends again, in the IB encoding: 4.096 us times 2 to this "
	  "power, 1 to 31 (14 is 67 ms, 18 is 1.07 s); with "
	  "FI_IBFAB_RETRY_COUNT it bounds how long a send to a dead peer or "
	  "across a dead wire takes to fail; 0 keeps rdma_cm's choice (on RoCE "
	  "19, 2.1 s, with Linux 6.1; on InfiniBand the path's) (default: 0)"),
	IBF_INT("retry_count", retry_count, 0, 6,
	  "Times a queue pair sends again when no acknowledgement comes, "
	  "before the operation fails with a retry error and the connection "
	  "ends: 0 to 6 (7 would retry for ever on Soft-RoCE) (default: 6)"),
};
#define IBF_NUM_PARAMS (sizeof(ibf_num_params) / sizeof(ibf_num_params[0]))

void ibf_params_define(void)
{
	size_t i;

	for (i = 0; i < IBF_NUM_PARAMS; i++)
		fi_param_define(&ibf_prov, ibf_num_params[i].name,
				ibf_num_params[i].size ? FI_PARAM_SIZE_T : FI_PARAM_INT,
				"%s", ibf_num_params[i].help);
	fi_param_define(&ibf_prov, "device", FI_PARAM_STRING,
			"Use only these RDMA devices, by name, commas between "
			"(e.g. mlx5_0,mlx5_1); default: all");
	fi_param_define(&ibf_prov, "iface", FI_PARAM_STRING,
			"Use only network interfaces whose name starts with this "
			"(e.g. ib0 or eth); default: all");
	fi_param_define(&ibf_prov, "link_local", FI_PARAM_BOOL,
			"Also list IPv6 link-local addresses (RoCE: the "
			"non-routable GID) (default: no)");
	fi_param_define(&ibf_prov, "rdm_requested_keys", FI_PARAM_BOOL,
			"RDM with RMA or atomics: keys the application chooses "
			"and addresses from a region's start even when the hints "
			"also allow FI_MR_PROV_KEY | FI_MR_VIRT_ADDR (for programs "
			"that ask for both yet assume requested keys) (default: "
			"no, only when the hints allow neither)");
	fi_param_define(&ibf_prov, "rdm_rndv_windows", FI_PARAM_BOOL,
			"RDM: open a rendezvous send's buffer to its receiver "
			"through a memory window (type 1) over the buffer's "
			"cached registration, bound for that send on a queue "
			"pair of the endpoint's own and unbound when the "
			"receiver answers, where the device has windows; no "
			"means a registration per send, made and dropped with "
			"it (default: yes on a device that keeps a connection's "
			"packets in order, no on Soft-RoCE, where a wire that "
			"drops 2% of its packets failed 4 runs of 188 with "
			"them and with no warning; see fi_ibfab(7))");
}

/* FI_IBFAB_<NAME>, as fi_info -e shows it and a user sets it. */
static void ibf_param_env_name(const char *name, char *buf, size_t len)
{
	size_t i = (size_t)snprintf(buf, len, "FI_IBFAB_");

	for (; *name && i + 1 < len; name++)
		buf[i++] = (char)toupper((unsigned char)*name);
	buf[i] = '\0';
}

/* One number parameter, if set: taken when in range, else the default is
 * kept and the user told. */
static void ibf_num_param_load(const struct ibf_num_param *p)
{
	char env[64], given[24];
	long long v;
	size_t sv;
	int iv;

	if (p->size ? fi_param_get_size_t(&ibf_prov, p->name, &sv) :
		      fi_param_get_int(&ibf_prov, p->name, &iv))
		return;
	/* A size_t beyond LLONG_MAX is out of range too. */
	v = p->size ? (sv > LLONG_MAX ? -1 : (long long)sv) : iv;
	if (v >= p->min && v <= p->max) {
		if (p->size)
			*p->size = (size_t)v;
		else
			*p->num = (int)v;
		return;
	}
	/* The value as it was read, whatever its type. */
	if (p->size)
		snprintf(given, sizeof(given), "%zu", sv);
	else
		snprintf(given, sizeof(given), "%d", iv);
	ibf_param_env_name(p->name, env, sizeof(env));
	IBF_WARN(FI_LOG_CORE, "%s=%s is out of range [%lld, %lld]; using "
		 "%lld\n", env, given, p->min, p->max,
		 p->size ? (long long)*p->size : (long long)*p->num);
}

/*
 * Read every parameter; a value out of range keeps the default and says
 * so, rather than failing the whole provider.
 */
void ibf_params_load(void)
{
	size_t i;
	int iv;
	char *s;

	ibf_params = ibf_params_default;
	for (i = 0; i < IBF_NUM_PARAMS; i++)
		ibf_num_param_load(&ibf_num_params[i]);
	if (!fi_param_get_str(&ibf_prov, "iface", &s) && s && *s)
		ibf_params.iface = s;
	if (!fi_param_get_str(&ibf_prov, "device", &s) && s && *s)
		ibf_params.device = s;
	if (!fi_param_get_bool(&ibf_prov, "rdm_requested_keys", &iv))
		ibf_params.rdm_requested_keys = iv;
	if (!fi_param_get_bool(&ibf_prov, "rdm_rndv_windows", &iv))
		ibf_params.rdm_rndv_windows = !!iv;
	if (!fi_param_get_bool(&ibf_prov, "link_local", &iv))
		ibf_params.link_local = !!iv;
}
