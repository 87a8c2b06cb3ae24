/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Domain: one verbs device and a protection domain.  The ibv_context comes
 * from librdmacm's device list, not ibv_open_device(), because rdma_cm ids
 * carry that same context: QPs made on it for a connection must live in a
 * PD of the context the id was resolved on.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_abi.h"
#include "ibf_atomic_ops.h"
#include "ibf_av.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"
#include "ibf_mr_cache.h"

/* ---- the registration cache's registrations: the domain's PD ---- */

static void *ibf_domain_cache_reg(void *ctx, void *addr, size_t len,
				  int access, uint32_t *lkey)
{
	struct ibf_domain *dom = ctx;
	struct ibv_mr *mr = ibv_reg_mr(dom->pd, addr, len, access);

	if (mr)
		*lkey = mr->lkey;
	return mr;
}

static void ibf_domain_cache_dereg(void *ctx, void *handle)
{
	(void)ctx;
	ibv_dereg_mr(handle);
}

static const struct ibf_mr_cache_ops ibf_domain_cache_ops = {
	.reg = ibf_domain_cache_reg,
	.dereg = ibf_domain_cache_dereg,
};

struct ibf_mr_cache *ibf_domain_mr_cache(struct ibf_domain *dom)
{
	struct ibf_mr_cache *c;
	int ret;

	if (likely(__atomic_load_n(&dom->mr_cache_tried, __ATOMIC_ACQUIRE)))
		return dom->mr_cache;
	pthread_mutex_lock(&dom->mr_lock);
	if (!dom->mr_cache_tried && ibf_params.mr_cache_max) {
		ret = ibf_mr_cache_open(&c, &ibf_domain_cache_ops, dom,
					ibf_params.mr_cache_max);
		static int said;

		if (ret && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
			IBF_INFO(FI_LOG_MR, "no registration cache (%s): large "
				 "unregistered buffers are registered per "
				 "operation, which is slower\n", ret == -FI_ENOSYS ?
				 "userfaultfd is not available to this process" :
				 fi_strerror(-ret));
		else if (!ret)
			dom->mr_cache = c;
	}
	__atomic_store_n(&dom->mr_cache_tried, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&dom->mr_lock);
	return dom->mr_cache;
}

static int ibf_domain_close(struct fid *fid)
{
	struct ibf_domain *dom = container_of(fid, struct ibf_domain,
					      domain_fid.fid);
	int ret;

	if (ibf_ref_read(&dom->ref)) {
		IBF_WARN(FI_LOG_DOMAIN, "domain %s still has %d open object(s) "
			 "(MRs, CQs, endpoints): close them first\n",
			 dom->info->domain_attr->name, ibf_ref_read(&dom->ref));
		return -FI_EBUSY;
	}
	if (dom->mr_cache)
		ibf_mr_cache_close(dom->mr_cache);	/* before the PD */
	ret = ibv_dealloc_pd(dom->pd);
	if (ret) {
		IBF_WARN(FI_LOG_DOMAIN, "ibv_dealloc_pd: %s\n", strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	rdma_free_devices(dom->dev_list);
	pthread_mutex_destroy(&dom->mr_lock);
	pthread_mutex_destroy(&dom->event_lock);
	free(dom->event_eps);
	free(dom->mr_cntrs);
	ibf_ref_put(&dom->fabric->ref);
	fi_freeinfo(dom->info);
	free(dom);
	return 0;
}

static struct ibv_context *ibf_find_device(struct ibv_context **list,
					   const char *name)
{
	for (; list && *list; list++)
		if (!strcmp(ibv_get_device_name((*list)->device), name))
			return *list;
	return NULL;
}

static int ibf_domain_no_scalable_ep(struct fid_domain *domain,
				     struct fi_info *info, struct fid_ep **sep,
				     void *context)
{
	IBF_WARN(FI_LOG_DOMAIN, "scalable endpoints are not supported\n");
	return -FI_ENOSYS;
}


static int ibf_domain_no_stx(struct fid_domain *domain, struct fi_tx_attr *attr,
			     struct fid_stx **stx, void *context)
{
	IBF_WARN(FI_LOG_DOMAIN, "shared transmit contexts are not supported\n");
	return -FI_ENOSYS;
}

/* fi_query_atomic: what endpoints apply (ibf_atomic_ops.h). */
static int ibf_domain_query_atomic(struct fid_domain *domain,
				   enum fi_datatype datatype, enum fi_op op,
				   struct fi_atomic_attr *attr, uint64_t flags)
{
	enum ibf_atomic_kind kind = (flags & FI_COMPARE_ATOMIC) ? IBF_ATOMIC_COMPARE :
				    (flags & FI_FETCH_ATOMIC) ? IBF_ATOMIC_FETCH :
				    IBF_ATOMIC_PLAIN;

	(void)domain;
	if (!attr)
		return -FI_EINVAL;
	if ((flags & FI_TAGGED) || !ibf_atomic_valid(datatype, op, kind))
		return -FI_EOPNOTSUPP;
	attr->size = ibf_atomic_size(datatype);
	attr->count = ibf_atomic_max(ibf_params.eager_size, datatype,
					 kind == IBF_ATOMIC_COMPARE);
	return 0;
}

static int ibf_domain_no_collective(struct fid_domain *domain,
				    enum fi_collective_op coll,
				    struct fi_collective_attr *attr,
				    uint64_t flags)
{
	return -FI_ENOSYS;
}

static struct fi_ops ibf_domain_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_domain_close,
	.bind = ibf_no_bind,
	.control = ibf_no_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

/* fi_endpoint: the wing of the endpoint type asked for. */
static int ibf_domain_endpoint(struct fid_domain *domain, struct fi_info *info,
			       struct fid_ep **ep, void *context)
{
	if (info && ep && info->ep_attr && info->ep_attr->type == FI_EP_RDM)
		return ibf_wing_ops.rdm_ep_open(domain, info, ep, context);
	return ibf_wing_ops.msg_ep_open(domain, info, ep, context);
}

/* fi_srx_context: FI_EP_MSG's shared receive contexts. */
static int ibf_domain_srx_ctx(struct fid_domain *domain,
			      struct fi_rx_attr *attr, struct fid_ep **rx_ep,
			      void *context)
{
	return ibf_wing_ops.srx_open(domain, attr, rx_ep, context);
}

static struct fi_ops_domain ibf_domain_ops = {
	.size = sizeof(struct fi_ops_domain),
	.av_open = ibf_av_open,
	.cq_open = ibf_cq_open,
	.endpoint = ibf_domain_endpoint,
	.scalable_ep = ibf_domain_no_scalable_ep,
	.cntr_open = ibf_cntr_open,
	.poll_open = ibf_poll_open,
	.stx_ctx = ibf_domain_no_stx,
	.srx_ctx = ibf_domain_srx_ctx,
	.query_atomic = ibf_domain_query_atomic,
	.query_collective = ibf_domain_no_collective,
	.endpoint2 = NULL,
};

/*
 * Whether info asks for requested keys and offsets: RDM with RMA or
 * atomics, and an mr_mode with neither FI_MR_PROV_KEY nor FI_MR_VIRT_ADDR
 * (FI_MR_SCALABLE; not FI_MR_BASIC, nor 0 before 1.5, which is basic).
 */
static int ibf_domain_req_keys(const struct ibf_fabric *fab,
			       const struct fi_info *info)
{
	int mode = info->domain_attr->mr_mode;

	if (!info->ep_attr || info->ep_attr->type != FI_EP_RDM ||
	    !(info->caps & (FI_RMA | FI_ATOMIC)))
		return 0;
	if (mode == IBF_MR_SCALABLE)
		return 1;
	if (mode == IBF_MR_BASIC ||
	    (mode == IBF_MR_UNSPEC && !ibf_api_ge(fab->api_version, 1, 5)))
		return 0;
	return !(mode & (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR));
}

int ibf_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		    struct fid_domain **domain, void *context)
{
	struct ibf_fabric *fab = container_of(fabric, struct ibf_fabric, fabric_fid);
	struct ibf_domain *dom;
	int ndev, ret;

	if (!info || !info->domain_attr || !info->domain_attr->name || !domain) {
		IBF_WARN(FI_LOG_DOMAIN, "fi_domain needs an fi_info from "
			 "fi_getinfo naming the device\n");
		return -FI_EINVAL;
	}
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return -FI_ENOMEM;
	dom->info = fi_dupinfo(info);
	dom->dev_list = rdma_get_devices(&ndev);
	if (!dom->info || !dom->dev_list) {
		ret = -FI_ENOMEM;
		goto err;
	}
	dom->verbs = ibf_find_device(dom->dev_list, info->domain_attr->name);
	if (!dom->verbs) {
		IBF_WARN(FI_LOG_DOMAIN, "no RDMA device named %s: take the "
			 "domain name from fi_getinfo\n", info->domain_attr->name);
		ret = -FI_ENODEV;
		goto err;
	}
	if (ibv_query_device(dom->verbs, &dom->dev_attr)) {
		ret = ibf_errno_to_fi(errno);
		goto err;
	}
	dom->pd = ibv_alloc_pd(dom->verbs);
	if (!dom->pd) {
		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_DOMAIN, "ibv_alloc_pd on %s: %s\n",
			 info->domain_attr->name, fi_strerror(-ret));
		goto err;
	}
	dom->fabric = fab;
	dom->req_keys = ibf_domain_req_keys(fab, info);
	pthread_mutex_init(&dom->mr_lock, NULL);
	pthread_mutex_init(&dom->event_lock, NULL);
	dom->domain_fid.fid.fclass = FI_CLASS_DOMAIN;
	dom->domain_fid.fid.context = context;
	dom->domain_fid.fid.ops = &ibf_domain_fi_ops;
	dom->domain_fid.ops = &ibf_domain_ops;
	dom->domain_fid.mr = &ibf_mr_ops;
	ibf_ref_get(&fab->ref);
	*domain = &dom->domain_fid;
	return 0;
err:
	if (dom->dev_list)
		rdma_free_devices(dom->dev_list);
	fi_freeinfo(dom->info);
	free(dom);
	return ret;
}
