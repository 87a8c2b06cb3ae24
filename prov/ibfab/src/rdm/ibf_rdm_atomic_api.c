/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM fi_atomic: the RDM wing's port for the core's fi_ops_atomic
 * (ibf_atomic_ops.h), which has already turned each call into checked
 * struct ibf_atomic_args.  The API layer of the RDM engine (ibf_rdm.h):
 * what the endpoint can take is checked here, and the request handed to
 * ibf_rdm_submit (ibf_rdm_proto.h); how it travels and is applied is in
 * ibf_rdm_atomic.c.
 */
#include "config.h"

#include "ibf_atomic_ops.h"
#include "ibf_rdm.h"

static ssize_t ibf_rdm_atomic_post(struct fid_ep *ep_fid,
				   const struct ibf_atomic_args *a,
				   fi_addr_t dest, uint64_t flags, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct ibf_rdm_req req;
	ssize_t ret;

	ret = ibf_atomic_args_check(a, ep->tx_iov_limit, ep->eager_size,
				    &req.count);
	if (unlikely(ret))
		return ret;
	if (unlikely(!(ep->base.info->caps & FI_ATOMIC))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic on an "
			       "endpoint opened without FI_ATOMIC\n");
		return -FI_EOPNOTSUPP;
	}
	req.kind = IBF_RDM_REQ_ATOMIC;
	req.dest = dest;
	req.context = context;
	req.op_flags = FI_ATOMIC |
		       (a->kind == IBF_ATOMIC_PLAIN ? FI_WRITE : FI_READ);
	req.flags = flags;
	req.len = req.count * ibf_atomic_size(a->dt);
	req.iov = NULL;		/* the operands are in a */
	req.desc = NULL;
	req.data = 0;
	req.atomic = a;
	return ibf_rdm_submit(&ep->as_proto, &req);
}

static uint64_t ibf_rdm_atomic_op_flags(struct fid_ep *ep_fid)
{
	return to_ibf_rdm_ep(ep_fid)->base.tx_op_flags;
}

static size_t ibf_rdm_atomic_eager(struct fid_ep *ep_fid)
{
	return to_ibf_rdm_ep(ep_fid)->eager_size;
}

const struct ibf_atomic_port ibf_rdm_atomic_port = {
	.post = ibf_rdm_atomic_post,
	.tx_op_flags = ibf_rdm_atomic_op_flags,
	.eager_size = ibf_rdm_atomic_eager,
	.inject_flags = IBF_RDM_INJECT,
};
