/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM fi_rma: fi_read, fi_write, fi_writedata and their iov, msg and
 * inject forms, to any peer of the AV (self included).  The API layer of
 * the RDM engine (ibf_rdm.h): each call checks its arguments and hands
 * the request to ibf_rdm_submit (ibf_rdm_proto.h); how an RMA travels is
 * in ibf_rdm_rma.c.
 */
#include "config.h"

#include "ibf_rdm.h"

/* Written into each call below: a call less on every RMA. */
static inline __attribute__((always_inline))
ssize_t ibf_rdm_rma(struct ibf_rdm_ep *ep, int kind,
		    const struct iovec *iov, void **desc, size_t count,
		    fi_addr_t dest, const struct fi_rma_iov *rma,
		    uint64_t data, uint64_t flags, void *context)
{
	struct ibf_rdm_req req;

	if (unlikely(!rma)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "RMA with no remote iov\n");
		return -FI_EINVAL;
	}
	if (unlikely(ibf_rdm_iov_check(iov, count, ep->tx_iov_limit, &req.len,
				       "RMA")))
		return -FI_EINVAL;
	if (unlikely(req.len > rma->len || req.len > IBF_RDM_MAX_MSG_SIZE)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "RMA of %zu bytes to "
			       "a %zu-byte remote buffer (max_msg_size is "
			       "%llu)\n", req.len, rma->len, IBF_RDM_MAX_MSG_SIZE);
		return req.len > rma->len ? -FI_EINVAL : -FI_EMSGSIZE;
	}
	if (unlikely((flags & FI_INJECT) && req.len > ep->inject_size)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "inject of %zu bytes: "
			       "inject_size is %zu\n", req.len, ep->inject_size);
		return -FI_EINVAL;
	}
	if (unlikely(!(ep->base.info->caps & FI_RMA))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "RMA on an endpoint "
			       "opened without FI_RMA\n");
		return -FI_EOPNOTSUPP;
	}
	req.kind = IBF_RDM_REQ_RMA;
	req.dest = dest;
	req.context = context;
	req.op_flags = FI_RMA | (kind == IBF_RDM_WR_READ ? FI_READ : FI_WRITE);
	req.flags = flags;
	req.iov = iov;
	req.desc = desc;
	req.count = count;
	req.data = data;
	req.rma.wr_kind = kind;
	req.rma.addr = rma->addr;
	req.rma.key = rma->key;
	return ibf_rdm_submit(&ep->as_proto, &req);
}

static ssize_t ibf_rdm_read(struct fid_ep *ep_fid, void *buf, size_t len,
			    void *desc, fi_addr_t src, uint64_t addr,
			    uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_READ, &iov, &desc, 1, src, &rma, 0,
			   ep->base.tx_op_flags, context);
}

static ssize_t ibf_rdm_readv(struct fid_ep *ep_fid, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src,
			     uint64_t addr, uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct fi_rma_iov rma = { addr, ibf_rdm_iov_len(iov, count), key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_READ, iov, desc, count, src, &rma, 0,
			   ep->base.tx_op_flags, context);
}

/* One remote segment (rma_iov_limit 1). */
static int ibf_rdm_rma_msg_ok(const struct fi_msg_rma *msg)
{
	if (msg && msg->rma_iov_count == 1 && msg->rma_iov)
		return 1;
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "fi_readmsg/fi_writemsg "
		       "takes one remote iov (rma_iov_limit 1)\n");
	return 0;
}

static ssize_t ibf_rdm_readmsg(struct fid_ep *ep_fid,
			       const struct fi_msg_rma *msg, uint64_t flags)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	if (!ibf_rdm_rma_msg_ok(msg))
		return -FI_EINVAL;
	return ibf_rdm_rma(ep, IBF_RDM_WR_READ, msg->msg_iov, msg->desc,
			   msg->iov_count, msg->addr, msg->rma_iov, 0,
			   flags & ~FI_INJECT, msg->context);
}

static ssize_t ibf_rdm_write(struct fid_ep *ep_fid, const void *buf,
			     size_t len, void *desc, fi_addr_t dest,
			     uint64_t addr, uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE, &iov, &desc, 1, dest, &rma, 0,
			   ep->base.tx_op_flags, context);
}

static ssize_t ibf_rdm_writev(struct fid_ep *ep_fid, const struct iovec *iov,
			      void **desc, size_t count, fi_addr_t dest,
			      uint64_t addr, uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct fi_rma_iov rma = { addr, ibf_rdm_iov_len(iov, count), key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE, iov, desc, count, dest, &rma,
			   0, ep->base.tx_op_flags, context);
}

static ssize_t ibf_rdm_writemsg(struct fid_ep *ep_fid,
				const struct fi_msg_rma *msg, uint64_t flags)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	if (!ibf_rdm_rma_msg_ok(msg))
		return -FI_EINVAL;
	return ibf_rdm_rma(ep, (flags & FI_REMOTE_CQ_DATA) ?
			   IBF_RDM_WR_WRITE_DATA : IBF_RDM_WR_WRITE,
			   msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
			   msg->rma_iov, msg->data, flags, msg->context);
}

static ssize_t ibf_rdm_inject_write(struct fid_ep *ep_fid, const void *buf,
				    size_t len, fi_addr_t dest, uint64_t addr,
				    uint64_t key)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE, &iov, NULL, 1, dest, &rma, 0,
			   IBF_RDM_INJECT, NULL);
}

static ssize_t ibf_rdm_writedata(struct fid_ep *ep_fid, const void *buf,
				 size_t len, void *desc, uint64_t data,
				 fi_addr_t dest, uint64_t addr, uint64_t key,
				 void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE_DATA, &iov, &desc, 1, dest,
			   &rma, data, ep->base.tx_op_flags, context);
}

static ssize_t ibf_rdm_inject_writedata(struct fid_ep *ep_fid, const void *buf,
					size_t len, uint64_t data,
					fi_addr_t dest, uint64_t addr,
					uint64_t key)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE_DATA, &iov, NULL, 1, dest, &rma,
			   data, IBF_RDM_INJECT, NULL);
}

struct fi_ops_rma ibf_rdm_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = ibf_rdm_read,
	.readv = ibf_rdm_readv,
	.readmsg = ibf_rdm_readmsg,
	.write = ibf_rdm_write,
	.writev = ibf_rdm_writev,
	.writemsg = ibf_rdm_writemsg,
	.inject = ibf_rdm_inject_write,
	.writedata = ibf_rdm_writedata,
	.injectdata = ibf_rdm_inject_writedata,
};
