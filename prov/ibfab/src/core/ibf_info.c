/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Discovery and fi_getinfo.  An fi_info is offered for each (verbs device,
 * ACTIVE port, IP address) that librdmacm can bind: on InfiniBand an IPoIB
 * address, on RoCE an address whose GID is routable (IPv6 link-local ones
 * only with FI_IBFAB_LINK_LOCAL).  When nothing is usable, one warning says
 * why: no device, ports down, no address, or a memlock limit too low.
 */
#include "config.h"

#include <endian.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ibf.h"

/* One usable address with its device's limits. */
struct ibf_port_addr {
	struct ibf_dev_limits lim;
	struct sockaddr_storage addr;
};

/* Inline limits are found by creating a QP, so each device is probed once. */
struct ibf_inline_cache {
	char dev_name[64];
	uint32_t max_inline;
};
static struct ibf_inline_cache ibf_inline_cache[32];
static pthread_mutex_t ibf_inline_lock = PTHREAD_MUTEX_INITIALIZER;

void ibf_info_cleanup(void)
{
	pthread_mutex_lock(&ibf_inline_lock);
	memset(ibf_inline_cache, 0, sizeof(ibf_inline_cache));
	pthread_mutex_unlock(&ibf_inline_lock);
}

static uint32_t ibf_probe_inline(struct ibv_context *ctx)
{
	static const uint32_t tries[] = { 1024, 512, 256, 128, 64, 32 };
	struct ibv_qp_init_attr attr = { 0 };
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t found = 0;
	size_t i;

	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 1, NULL, NULL, 0) : NULL;
	for (i = 0; cq && i < sizeof(tries) / sizeof(tries[0]) && !found; i++) {
		memset(&attr, 0, sizeof(attr));
		attr.qp_type = IBV_QPT_RC;
		attr.send_cq = attr.recv_cq = cq;
		attr.cap.max_send_wr = attr.cap.max_recv_wr = 1;
		attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
		attr.cap.max_inline_data = tries[i];
		qp = ibv_create_qp(pd, &attr);
		if (qp) {
			found = attr.cap.max_inline_data;
			ibv_destroy_qp(qp);
		}
	}
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	return found;
}

static uint32_t ibf_max_inline(struct ibv_context *ctx, const char *name)
{
	uint32_t val = 0;
	size_t i;

	pthread_mutex_lock(&ibf_inline_lock);
	for (i = 0; i < sizeof(ibf_inline_cache) / sizeof(ibf_inline_cache[0]); i++) {
		struct ibf_inline_cache *c = &ibf_inline_cache[i];

		if (!c->dev_name[0]) {
			snprintf(c->dev_name, sizeof(c->dev_name), "%s", name);
			c->max_inline = ibf_probe_inline(ctx);
		}
		if (!strcmp(c->dev_name, name)) {
			val = c->max_inline;
			break;
		}
	}
	pthread_mutex_unlock(&ibf_inline_lock);
	return val;
}

static int ibf_query_limits(struct rdma_cm_id *id, struct ibf_dev_limits *lim)
{
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	union ibv_gid gid;
	const char *name = ibv_get_device_name(id->verbs->device);

	if (ibv_query_device(id->verbs, &dev) ||
	    ibv_query_port(id->verbs, id->port_num, &port))
		return -FI_ENODEV;
	if (port.state != IBV_PORT_ACTIVE) {
		IBF_INFO(FI_LOG_CORE, "%s port %u is not ACTIVE (%s)\n",
			 name, id->port_num, ibv_port_state_str(port.state));
		return -FI_ENODEV;
	}
	memset(lim, 0, sizeof(*lim));
	snprintf(lim->dev_name, sizeof(lim->dev_name), "%s", name);
	if (ibv_query_gid(id->verbs, id->port_num, 0, &gid))
		memset(&gid, 0, sizeof(gid));
	snprintf(lim->fabric_name, sizeof(lim->fabric_name), "IB-0x%016llx",
		 (unsigned long long)be64toh(gid.global.subnet_prefix));
	lim->port = id->port_num;
	lim->max_msg_sz = port.max_msg_sz;
	lim->max_qp_wr = dev.max_qp_wr;
	lim->max_sge = dev.max_sge;
	lim->max_cqe = dev.max_cqe;
	lim->max_cq = dev.max_cq;
	lim->max_qp = dev.max_qp;
	lim->max_mr = dev.max_mr;
	lim->max_srq = dev.max_srq;
	lim->max_inline = ibf_max_inline(id->verbs, name);
	lim->nic.vendor_id = dev.vendor_id;
	lim->nic.vendor_part_id = dev.vendor_part_id;
	lim->nic.hw_ver = dev.hw_ver;
	snprintf(lim->nic.fw_ver, sizeof(lim->nic.fw_ver), "%s", dev.fw_ver);
	lim->nic.active_mtu = (uint8_t)port.active_mtu;
	lim->nic.active_speed = port.active_speed;
	lim->nic.active_width = port.active_width;
	lim->nic.link_layer = port.link_layer;
	lim->nic.port_state = port.state;
	ibf_nic_sysfs(name, &lim->nic);
	return 0;
}

static int ibf_iface_wanted(const struct ifaddrs *ifa)
{
	if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) ||
	    (ifa->ifa_flags & IFF_LOOPBACK))
		return 0;
	if (ifa->ifa_addr->sa_family != AF_INET &&
	    ifa->ifa_addr->sa_family != AF_INET6)
		return 0;
	if (ibf_params.iface &&
	    strncmp(ifa->ifa_name, ibf_params.iface, strlen(ibf_params.iface)))
		return 0;
	if (!ibf_params.link_local && ibf_addr_is_link_local(ifa->ifa_addr))
		return 0;
	return 1;
}

/* Whether FI_IBFAB_DEVICE (names, commas between) lets name in. */
int ibf_device_wanted(const char *name)
{
	const char *p = ibf_params.device;
	size_t len = strlen(name);

	if (!p)
		return 1;
	while (*p) {
		size_t n = strcspn(p, ",");

		if (n == len && !strncmp(p, name, len))
			return 1;
		p += n + (p[n] == ',');
	}
	return 0;
}

/* Which device does this address belong to?  librdmacm knows. */
static int ibf_bind_probe(const struct sockaddr *addr, struct ibf_port_addr *pa)
{
	struct rdma_cm_id *id;
	int ret;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return -FI_ENODEV;
	ret = rdma_bind_addr(id, (struct sockaddr *)addr);
	if (ret || !id->verbs)
		ret = -FI_ENODEV;
	else
		ret = ibf_query_limits(id, &pa->lim);
	rdma_destroy_id(id);
	if (!ret && !ibf_device_wanted(pa->lim.dev_name))
		ret = -FI_ENODEV;
	if (!ret) {
		memset(&pa->addr, 0, sizeof(pa->addr));
		memcpy(&pa->addr, addr, ibf_addr_len(addr));
	}
	return ret;
}

static void ibf_explain_nothing(int ndev, int naddr)
{
	struct rlimit rl;

	if (!ndev)
		IBF_WARN(FI_LOG_CORE, "no RDMA device found: load the HCA driver, "
			 "or for Soft-RoCE: rdma link add rxe0 type rxe netdev <if>\n");
	else if (!naddr)
		IBF_WARN(FI_LOG_CORE, "%d RDMA device(s) but no ACTIVE port with an "
			 "IP address%s: bring the port up and give its netdev an "
			 "address (IPoIB on InfiniBand)\n", ndev,
			 ibf_params.iface ? " on FI_IBFAB_IFACE" :
			 ibf_params.device ? " on FI_IBFAB_DEVICE" : "");
	if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < (64 << 20) && geteuid() != 0)
		IBF_WARN(FI_LOG_CORE, "RLIMIT_MEMLOCK is %llu KiB: registering "
			 "memory will fail beyond it; raise it (ulimit -l "
			 "unlimited, or memlock in limits.conf)\n",
			 (unsigned long long)rl.rlim_cur >> 10);
}

/* All usable addresses.  Returns their count; *out is malloc'ed. */
static int ibf_discover(struct ibf_port_addr **out)
{
	struct ifaddrs *ifas, *ifa;
	struct ibv_context **devs;
	struct ibf_port_addr *pa = NULL, *tmp;
	int ndev = 0, n = 0, cap = 0;

	*out = NULL;
	devs = rdma_get_devices(&ndev);
	if (devs)
		rdma_free_devices(devs);
	if (ndev <= 0 || getifaddrs(&ifas)) {
		ibf_explain_nothing(ndev > 0 ? ndev : 0, 0);
		return 0;
	}
	for (ifa = ifas; ifa; ifa = ifa->ifa_next) {
		if (!ibf_iface_wanted(ifa))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			tmp = realloc(pa, cap * sizeof(*pa));
			if (!tmp)
				break;
			pa = tmp;
		}
		if (!ibf_bind_probe(ifa->ifa_addr, &pa[n]))
			n++;
	}
	freeifaddrs(ifas);
	if (!n) {
		free(pa);
		pa = NULL;
		ibf_explain_nothing(ndev, 0);
	}
	*out = pa;
	return n;
}

/*
 * The device and local address librdmacm would use to reach dst (from src
 * if given).  This is where a client without FI_SOURCE lands.
 */
static int ibf_route(const struct sockaddr *src, const struct sockaddr *dst,
		     struct sockaddr_storage *local)
{
	struct sockaddr_storage from;
	struct rdma_cm_id *id;
	char buf[80];
	int ret;

	/* Only the route matters: the source's port may be bound already. */
	if (src) {
		memset(&from, 0, sizeof(from));
		memcpy(&from, src, ibf_addr_len(src));
		ibf_addr_set_port((struct sockaddr *)&from, 0);
		src = (struct sockaddr *)&from;
	}
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP))
		return -FI_ENOMEM;
	ret = rdma_resolve_addr(id, (struct sockaddr *)src, (struct sockaddr *)dst,
				ibf_params.cm_timeout_ms);
	if (ret || !id->verbs) {
		IBF_INFO(FI_LOG_CORE, "no RDMA route to %s: %s\n",
			 ibf_addr_str(dst, buf, sizeof(buf)),
			 ret ? strerror(errno) : "not an RDMA device");
		rdma_destroy_id(id);
		return -FI_ENODATA;
	}
	memset(local, 0, sizeof(*local));
	memcpy(local, rdma_get_local_addr(id), ibf_addr_len(rdma_get_local_addr(id)));
	rdma_destroy_id(id);
	return 0;
}

struct ibf_addr_req {
	struct sockaddr_storage src, dst;
	int has_src, has_dst;
};

static int ibf_copy_hint_addr(const void *addr, size_t len,
			      struct sockaddr_storage *out)
{
	const struct sockaddr *sa = addr;

	if (!addr)
		return 0;
	if (len < sizeof(sa->sa_family) || !ibf_addr_len(sa) ||
	    len < ibf_addr_len(sa)) {
		IBF_WARN(FI_LOG_CORE, "hints address of length %zu is not a "
			 "sockaddr_in/in6: ibfab uses FI_SOCKADDR_IN/IN6\n", len);
		return -FI_EINVAL;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, addr, ibf_addr_len(sa));
	return 1;
}

/* Where node/service/FI_SOURCE and the hints' addresses point. */
static int ibf_addr_request(const char *node, const char *service,
			    uint64_t flags, const struct fi_info *hints,
			    struct ibf_addr_req *req)
{
	int family = AF_UNSPEC, ret;

	memset(req, 0, sizeof(*req));
	if (hints && hints->addr_format == FI_SOCKADDR_IN)
		family = AF_INET;
	else if (hints && hints->addr_format == FI_SOCKADDR_IN6)
		family = AF_INET6;
	if (node || service) {
		/* A service alone names a local port to listen on. */
		int source = (flags & FI_SOURCE) || !node;
		struct sockaddr_storage *ss = source ? &req->src : &req->dst;

		ret = ibf_addr_resolve(node, service, source, family, ss);
		if (ret)
			return ret;
		*(source ? &req->has_src : &req->has_dst) = 1;
	}
	if (hints && !req->has_src && hints->handle &&
	    hints->handle->fclass == FI_CLASS_PEP) {
		/* The passive endpoint's address is the source (fi_endpoint(3)). */
		size_t len = sizeof(req->src);

		ret = fi_getname(hints->handle, &req->src, &len);
		if (ret)
			return ret;
		req->has_src = 1;
	}
	if (hints && !req->has_src) {
		ret = ibf_copy_hint_addr(hints->src_addr, hints->src_addrlen, &req->src);
		if (ret < 0)
			return ret;
		req->has_src = ret;
	}
	if (hints && !req->has_dst) {
		ret = ibf_copy_hint_addr(hints->dest_addr, hints->dest_addrlen, &req->dst);
		if (ret < 0)
			return ret;
		req->has_dst = ret;
	}
	return 0;
}

/*
 * Is this address the one the request asks for?  With a destination and
 * no source, the one the route to it leaves from, unless the hints name a
 * domain (dom): then that domain's, which the caller chose (or which an
 * earlier answer named, passed back as hints; fi_multi_ep does that).
 */
static int ibf_addr_wanted(const struct ibf_port_addr *pa,
			   const struct ibf_addr_req *req,
			   const struct sockaddr_storage *route_local,
			   const char *dom)
{
	const struct sockaddr *addr = (const struct sockaddr *)&pa->addr;

	if (req->has_src) {
		const struct sockaddr *src = (const struct sockaddr *)&req->src;

		if (ibf_addr_is_any(src) ? src->sa_family != addr->sa_family :
		    !ibf_addr_same_host(src, addr))
			return 0;
	}
	if (req->has_dst && !req->has_src && dom && !strcmp(dom, pa->lim.dev_name))
		return addr->sa_family == req->dst.ss_family;
	if (req->has_dst)
		return ibf_addr_same_host((const struct sockaddr *)route_local, addr);
	return 1;
}

static struct fi_info *ibf_info_for(const struct ibf_port_addr *pa,
				    const struct ibf_addr_req *req,
				    uint32_t version, const struct fi_info *hints,
				    int rdm, char *why, size_t why_len)
{
	const struct sockaddr *src = (const struct sockaddr *)&pa->addr;
	struct fi_info *info;
	size_t len;

	info = rdm ? ibf_info_template_rdm(&pa->lim, src) :
		     ibf_info_template(&pa->lim, src);
	if (!info)
		return NULL;
	if (ibf_info_match(info, version, hints, why, why_len))
		goto drop;
	info->nic = ibf_nic_new(&pa->lim.nic, pa->lim.dev_name, src);
	if (!info->nic)
		goto drop;
	ibf_info_narrow(info, version, hints);
	if (hints && hints->handle && hints->handle->fclass == FI_CLASS_PEP)
		info->handle = hints->handle;
	if (req->has_src)
		ibf_addr_set_port(info->src_addr,
				  ibf_addr_port((const struct sockaddr *)&req->src));
	if (req->has_dst) {
		len = ibf_addr_len((const struct sockaddr *)&req->dst);
		info->dest_addr = malloc(len);
		if (!info->dest_addr)
			goto drop;
		memcpy(info->dest_addr, &req->dst, len);
		info->dest_addrlen = len;
	}
	return info;
drop:
	fi_freeinfo(info);
	return NULL;
}

/* Why each entry fi_getinfo tried was refused: said when none matched. */
#define IBF_REFUSALS 16
struct ibf_refusals {
	char line[IBF_REFUSALS][320];
	int n, more;
};

static void ibf_refusal_add(struct ibf_refusals *r, int rdm,
			    const struct ibf_port_addr *pa, const char *why)
{
	char addr[64];

	if (r->n == IBF_REFUSALS) {
		r->more++;
		return;
	}
	snprintf(r->line[r->n++], sizeof(r->line[0]), "%s on %s (%s): %s",
		 rdm ? "FI_EP_RDM" : "FI_EP_MSG", pa->lim.dev_name,
		 ibf_addr_str((const struct sockaddr *)&pa->addr, addr, sizeof(addr)),
		 why);
}

static void ibf_refusals_log(const struct ibf_refusals *r)
{
	int i;

	if (!r->n) {
		IBF_INFO(FI_LOG_CORE, "no match: no RDMA address matches "
			 "node/service or the hints' addresses\n");
		return;
	}
	for (i = 0; i < r->n; i++)
		IBF_INFO(FI_LOG_CORE, "no match: %s\n", r->line[i]);
	if (r->more)
		IBF_INFO(FI_LOG_CORE, "no match: and %d entries more\n", r->more);
}

int ibf_getinfo(uint32_t version, const char *node, const char *service,
		uint64_t flags, const struct fi_info *hints,
		struct fi_info **info)
{
	struct fi_info *head = NULL, **tail = &head, *cur;
	struct sockaddr_storage route_local;
	struct ibf_refusals refusals = { .n = 0 };
	struct ibf_addr_req req;
	struct ibf_port_addr *pa;
	char why[256];
	int n, i, ret, rdm;

	*info = NULL;
	if (flags & IBF_CORE_PROV_ONLY) {
		/*
		 * A utility provider (ofi_rxm) looking for a core to layer its
		 * RDM endpoints on: ibfab's own RDM endpoints do that job, and
		 * one RDM path per device is what FI_PROVIDER=ibfab should give.
		 */
		IBF_INFO(FI_LOG_CORE, "not offered as a core under a utility "
			 "provider: ibfab has native FI_EP_RDM endpoints\n");
		return -FI_ENODATA;
	}
	ret = ibf_addr_request(node, service, flags, hints, &req);
	if (ret)
		return ret == -FI_EINVAL ? -FI_EINVAL : -FI_ENODATA;
	n = ibf_discover(&pa);
	if (!n)
		return -FI_ENODATA;
	if (req.has_dst) {
		ret = ibf_route(req.has_src ? (struct sockaddr *)&req.src : NULL,
				(struct sockaddr *)&req.dst, &route_local);
		if (ret)
			goto out;
	}
	/* RDM entries first: what a caller without an ep_type wants most. */
	for (rdm = 1; rdm >= 0; rdm--) {
		for (i = 0; i < n; i++) {
			if (!ibf_addr_wanted(&pa[i], &req, &route_local,
					     hints && hints->domain_attr ?
					     hints->domain_attr->name : NULL))
				continue;
			why[0] = 0;
			cur = ibf_info_for(&pa[i], &req, version, hints, rdm,
					   why, sizeof(why));
			if (!cur) {
				if (why[0])
					ibf_refusal_add(&refusals, rdm, &pa[i], why);
				continue;
			}
			*tail = cur;
			tail = &cur->next;
		}
	}
	if (!head) {
		ibf_refusals_log(&refusals);
		ret = -FI_ENODATA;
	}
out:
	free(pa);
	*info = head;
	return ret;
}
