/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fi_write and fi_read families: RDMA WRITE (with immediate) and READ. */
#include "config.h"

#include "ibf_msg_post.h"

/* One RMA, as every call of the families describes it. */
static inline __attribute__((always_inline)) struct ibf_tx
ibf_rma_tx(enum ibv_wr_opcode opcode, const struct iovec *iov, void **desc,
	   size_t count, uint64_t addr, uint64_t key, uint64_t data,
	   uint64_t flags, void *context, int comp)
{
	return (struct ibf_tx){
		.iov = iov,
		.desc = desc,
		.count = count,
		.opcode = opcode,
		.remote_addr = addr,
		.rkey = key,
		.data = data,
		.flags = flags,
		.cq_flags = FI_RMA | (opcode == IBV_WR_RDMA_READ ? FI_READ : FI_WRITE),
		.context = context,
		.comp = comp,
	};
}

static __attribute__((noinline)) ssize_t
ibf_rma_general(struct ibf_ep *ep, enum ibv_wr_opcode opcode,
		const struct iovec *iov, void **desc, size_t count,
		uint64_t addr, uint64_t key, uint64_t data, uint64_t flags,
		void *context, int comp)
{
	struct ibf_tx tx = ibf_rma_tx(opcode, iov, desc, count, addr, key,
				      data, flags, context, comp);

	return ibf_ep_post_tx(ep, &tx);
}

/* Inlined into each call of the families, as ibf_send is. */
static inline __attribute__((always_inline)) ssize_t
ibf_rma(struct ibf_ep *ep, enum ibv_wr_opcode opcode, const struct iovec *iov,
	void **desc, size_t count, uint64_t addr, uint64_t key, uint64_t data,
	uint64_t flags, void *context, int comp)
{
	struct ibv_sge sge;
	int inl;

	if (unlikely(key > UINT32_MAX)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "key %#llx is not an "
			       "ibfab key (4 bytes, from fi_mr_key)\n",
			       (unsigned long long)key);
		return -FI_EINVAL;
	}
	if (likely(ibf_tx_one(ep, count, iov, desc, opcode, flags, &sge,
			      &inl))) {
		struct ibf_tx tx = ibf_rma_tx(opcode, iov, desc, count, addr,
					      key, data, flags, context, comp);

		return ibf_ep_post_tx_sge(ep, &tx, &sge, iov[0].iov_len, inl);
	}
	return ibf_rma_general(ep, opcode, iov, desc, count, addr, key, data,
			       flags, context, comp);
}

static enum ibv_wr_opcode ibf_write_opcode(uint64_t flags)
{
	return (flags & FI_REMOTE_CQ_DATA) ? IBV_WR_RDMA_WRITE_WITH_IMM :
					     IBV_WR_RDMA_WRITE;
}

static ssize_t ibf_rma_read(struct fid_ep *ep_fid, void *buf, size_t len,
			    void *desc, fi_addr_t src_addr, uint64_t addr,
			    uint64_t key, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { buf, len };

	return ibf_rma(ep, IBV_WR_RDMA_READ, &iov, &desc, 1, addr, key, 0,
		       ep->base.tx_op_flags, context, ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_rma_readv(struct fid_ep *ep_fid, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src_addr,
			     uint64_t addr, uint64_t key, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_rma(ep, IBV_WR_RDMA_READ, iov, desc, count, addr, key, 0,
		       ep->base.tx_op_flags, context, ibf_tx_wants_comp_dflt(ep));
}

/* One remote iov: verbs reads and writes one remote range. */
static int ibf_rma_check_msg(const struct fi_msg_rma *msg)
{
	if (unlikely(msg->rma_iov_count != 1)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "rma_iov_count %zu: "
			       "rma_iov_limit is 1\n", msg->rma_iov_count);
		return -FI_EINVAL;
	}
	return 0;
}

static ssize_t ibf_rma_readmsg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
			       uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	ssize_t ret = ibf_rma_check_msg(msg);

	if (ret)
		return ret;
	return ibf_rma(ep, IBV_WR_RDMA_READ, msg->msg_iov, msg->desc,
		       msg->iov_count, msg->rma_iov[0].addr, msg->rma_iov[0].key,
		       0, flags, msg->context, ibf_tx_wants_comp(ep, flags));
}

static ssize_t ibf_rma_write(struct fid_ep *ep_fid, const void *buf, size_t len,
			     void *desc, fi_addr_t dest_addr, uint64_t addr,
			     uint64_t key, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_rma(ep, IBV_WR_RDMA_WRITE, &iov, &desc, 1, addr, key, 0,
		       ep->base.tx_op_flags, context, ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_rma_writev(struct fid_ep *ep_fid, const struct iovec *iov,
			      void **desc, size_t count, fi_addr_t dest_addr,
			      uint64_t addr, uint64_t key, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_rma(ep, IBV_WR_RDMA_WRITE, iov, desc, count, addr, key, 0,
		       ep->base.tx_op_flags, context, ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_rma_writemsg(struct fid_ep *ep_fid, const struct fi_msg_rma *msg,
				uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	ssize_t ret = ibf_rma_check_msg(msg);

	if (ret)
		return ret;
	return ibf_rma(ep, ibf_write_opcode(flags), msg->msg_iov, msg->desc,
		       msg->iov_count, msg->rma_iov[0].addr, msg->rma_iov[0].key,
		       msg->data, flags, msg->context, ibf_tx_wants_comp(ep, flags));
}

static ssize_t ibf_rma_writedata(struct fid_ep *ep_fid, const void *buf,
				 size_t len, void *desc, uint64_t data,
				 fi_addr_t dest_addr, uint64_t addr, uint64_t key,
				 void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_rma(ep, IBV_WR_RDMA_WRITE_WITH_IMM, &iov, &desc, 1, addr, key,
		       data, ep->base.tx_op_flags | FI_REMOTE_CQ_DATA, context,
		       ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_rma_inject(struct fid_ep *ep_fid, const void *buf, size_t len,
			      fi_addr_t dest_addr, uint64_t addr, uint64_t key)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rma(to_ibf_ep(ep_fid), IBV_WR_RDMA_WRITE, &iov, NULL, 1, addr,
		       key, 0, FI_INJECT, NULL, 0);
}

static ssize_t ibf_rma_injectdata(struct fid_ep *ep_fid, const void *buf,
				  size_t len, uint64_t data, fi_addr_t dest_addr,
				  uint64_t addr, uint64_t key)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rma(to_ibf_ep(ep_fid), IBV_WR_RDMA_WRITE_WITH_IMM, &iov, NULL,
		       1, addr, key, data, FI_INJECT | FI_REMOTE_CQ_DATA, NULL, 0);
}

struct fi_ops_rma ibf_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = ibf_rma_read,
	.readv = ibf_rma_readv,
	.readmsg = ibf_rma_readmsg,
	.write = ibf_rma_write,
	.writev = ibf_rma_writev,
	.writemsg = ibf_rma_writemsg,
	.inject = ibf_rma_inject,
	.writedata = ibf_rma_writedata,
	.injectdata = ibf_rma_injectdata,
};
