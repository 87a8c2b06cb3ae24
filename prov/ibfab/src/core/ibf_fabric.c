/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Fabric: an RDMA network.  It owns the EQs and the domains opened on it. */
#include "config.h"

#include <stdlib.h>

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"

static int ibf_fabric_close(struct fid *fid)
{
	struct ibf_fabric *fab = container_of(fid, struct ibf_fabric, fabric_fid.fid);

	if (ibf_ref_read(&fab->ref)) {
		IBF_WARN(FI_LOG_FABRIC, "fabric still has %d open domain(s) or "
			 "EQ(s): close them first\n", ibf_ref_read(&fab->ref));
		return -FI_EBUSY;
	}
	free(fab);
	return 0;
}

/*
 * fi_trywait: 0 when every object is empty and armed, so that the caller
 * may block on their fds; -FI_EAGAIN when one has something to read.
 */
static int ibf_fabric_trywait(struct fid_fabric *fabric, struct fid **fids,
			      int count)
{
	int i, ret;

	for (i = 0; i < count; i++) {
		switch (fids[i]->fclass) {
		case FI_CLASS_CQ:
			ret = ibf_cq_trywait(container_of(fids[i], struct ibf_cq,
							  cq_fid.fid));
			break;
		case FI_CLASS_EQ:
			ret = ibf_eq_trywait(container_of(fids[i], struct ibf_eq,
							  eq_fid.fid));
			break;
		case FI_CLASS_CNTR:
			ret = ibf_cntr_trywait(container_of(fids[i], struct ibf_cntr,
							    cntr_fid.fid));
			break;
		default:
			IBF_WARN(FI_LOG_FABRIC, "fi_trywait on fid class %zu: "
				 "ibfab waits on CQs, EQs and counters\n",
				 fids[i]->fclass);
			return -FI_EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int ibf_fabric_wait_open(struct fid_fabric *fabric,
				struct fi_wait_attr *attr,
				struct fid_wait **waitset)
{
	IBF_WARN(FI_LOG_FABRIC, "wait sets are not supported: use FI_WAIT_FD "
		 "and fi_control(FI_GETWAIT) with poll or epoll\n");
	return -FI_ENOSYS;
}

static struct fi_ops ibf_fabric_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_fabric_close,
	.bind = ibf_no_bind,
	.control = ibf_no_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

/* fi_passive_ep: FI_EP_MSG's listener. */
static int ibf_fabric_passive_ep(struct fid_fabric *fabric, struct fi_info *info,
				 struct fid_pep **pep, void *context)
{
	return ibf_wing_ops.pep_open(fabric, info, pep, context);
}

static struct fi_ops_fabric ibf_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric),
	.domain = ibf_domain_open,
	.passive_ep = ibf_fabric_passive_ep,
	.eq_open = ibf_eq_open,
	.wait_open = ibf_fabric_wait_open,
	.trywait = ibf_fabric_trywait,
	.domain2 = NULL,
};

int ibf_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		    void *context)
{
	struct ibf_fabric *fab;

	if (!attr || !fabric) {
		IBF_WARN(FI_LOG_FABRIC, "fi_fabric needs attributes from fi_getinfo\n");
		return -FI_EINVAL;
	}
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return -FI_ENOMEM;
	/* The structs the application hands in and gets back are this
	 * version's (ibf_abi.h); 0 means ours. */
	fab->api_version = attr->api_version;
	fab->fabric_fid.fid.fclass = FI_CLASS_FABRIC;
	fab->fabric_fid.fid.context = context;
	fab->fabric_fid.fid.ops = &ibf_fabric_fi_ops;
	fab->fabric_fid.ops = &ibf_fabric_ops;
	*fabric = &fab->fabric_fid;
	return 0;
}
