/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fi_send and fi_recv families on FI_EP_MSG endpoints. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ibf_msg_post.h"
#include "ibf_rdmacm.h"

/* ibf_msg_post_send's trace, for FI_LOG_LEVEL=debug (ep->post_trace). */
void __attribute__((noinline, cold))
ibf_msg_post_trace(struct ibf_ep *ep, const struct ibv_send_wr *wr)
{
	char who[32];

	snprintf(who, sizeof(who), "endpoint qp %u", ep->id->qp->qp_num);
	ibf_post_trace(who, wr, (int)ibf_ring_free(&ep->tx));
}

/* ibf_msg_post_recv's trace: an endpoint's QP, or an SRQ (qp NULL). */
void __attribute__((noinline, cold))
ibf_msg_post_recv_trace(const struct ibv_qp *qp, const struct ibv_recv_wr *wr)
{
	char who[32];

	if (qp)
		snprintf(who, sizeof(who), "endpoint qp %u", qp->qp_num);
	else
		snprintf(who, sizeof(who), "shared receive context");
	ibf_post_trace_recv(who, wr);
}

ssize_t ibf_ep_post_rx_buf(struct ibf_ep *ep, void *buf, size_t len,
			   void *desc, void *context, int comp, uint64_t flags)
{
	struct iovec iov = { buf, len };

	return ibf_ep_post_rx(ep, &iov, &desc, 1, context, comp, flags);
}

static ssize_t ibf_msg_recv(struct fid_ep *ep_fid, void *buf, size_t len,
			    void *desc, fi_addr_t src_addr, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_ep_post_rx_one(ep, buf, len, desc, context,
				  ibf_rx_wants_comp_dflt(ep),
				  ep->base.rx_op_flags);
}

static ssize_t ibf_msg_recvv(struct fid_ep *ep_fid, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src_addr,
			     void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_ep_post_rx(ep, iov, desc, count, context,
			      ibf_rx_wants_comp_dflt(ep),
			      ep->base.rx_op_flags);
}

static ssize_t ibf_msg_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
			       uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_ep_post_rx(ep, msg->msg_iov, msg->desc, msg->iov_count,
			      msg->context, ibf_rx_wants_comp(ep, flags), flags);
}

/* One send, as every call of the family describes it. */
static inline __attribute__((always_inline)) struct ibf_tx
ibf_send_tx(const struct iovec *iov, void **desc, size_t count, uint64_t data,
	    uint64_t flags, void *context, int comp)
{
	return (struct ibf_tx){
		.iov = iov,
		.desc = desc,
		.count = count,
		.opcode = (flags & FI_REMOTE_CQ_DATA) ? IBV_WR_SEND_WITH_IMM :
							IBV_WR_SEND,
		.data = data,
		.flags = flags,
		.cq_flags = FI_SEND | FI_MSG,
		.context = context,
		.comp = comp,
	};
}

static __attribute__((noinline)) ssize_t
ibf_send_general(struct ibf_ep *ep, const struct iovec *iov, void **desc,
		 size_t count, uint64_t data, uint64_t flags, void *context,
		 int comp)
{
	struct ibf_tx tx = ibf_send_tx(iov, desc, count, data, flags, context,
				       comp);

	return ibf_ep_post_tx(ep, &tx);
}

/* Inlined into each call of the family, so that its constants fold. */
static inline __attribute__((always_inline)) ssize_t
ibf_send(struct ibf_ep *ep, const struct iovec *iov, void **desc,
	 size_t count, uint64_t data, uint64_t flags, void *context, int comp)
{
	struct ibv_sge sge;
	int inl;

	if (likely(ibf_tx_one(ep, count, iov, desc, IBV_WR_SEND, flags, &sge,
			      &inl))) {
		struct ibf_tx tx = ibf_send_tx(iov, desc, count, data, flags,
					       context, comp);

		return ibf_ep_post_tx_sge(ep, &tx, &sge, iov[0].iov_len, inl);
	}
	return ibf_send_general(ep, iov, desc, count, data, flags, context,
				comp);
}

static ssize_t ibf_msg_send(struct fid_ep *ep_fid, const void *buf, size_t len,
			    void *desc, fi_addr_t dest_addr, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_send(ep, &iov, &desc, 1, 0, ep->base.tx_op_flags, context,
			ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_msg_sendv(struct fid_ep *ep_fid, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t dest_addr,
			     void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_send(ep, iov, desc, count, 0, ep->base.tx_op_flags, context,
			ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_msg_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
			       uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_send(ep, msg->msg_iov, msg->desc, msg->iov_count, msg->data,
			flags, msg->context, ibf_tx_wants_comp(ep, flags));
}

static ssize_t ibf_msg_senddata(struct fid_ep *ep_fid, const void *buf,
				size_t len, void *desc, uint64_t data,
				fi_addr_t dest_addr, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_send(ep, &iov, &desc, 1, data,
			ep->base.tx_op_flags | FI_REMOTE_CQ_DATA, context,
			ibf_tx_wants_comp_dflt(ep));
}

/* Injects go inline and never complete. */
static ssize_t ibf_msg_inject(struct fid_ep *ep_fid, const void *buf,
			      size_t len, fi_addr_t dest_addr)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_send(to_ibf_ep(ep_fid), &iov, NULL, 1, 0, FI_INJECT, NULL, 0);
}

static ssize_t ibf_msg_injectdata(struct fid_ep *ep_fid, const void *buf,
				  size_t len, uint64_t data, fi_addr_t dest_addr)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_send(to_ibf_ep(ep_fid), &iov, NULL, 1, data,
			FI_INJECT | FI_REMOTE_CQ_DATA, NULL, 0);
}

ssize_t ibf_ep_rx_wait(struct ibf_ep *ep, struct ibv_sge *sge, size_t count,
		       size_t len, void *buf, void *context, int comp,
		       uint64_t flags)
{
	struct ibf_rx_wait *w;

	if (ep->rx_wait_count + (ep->rx.head - ep->rx.tail) >= ep->rx.size)
		return -FI_EAGAIN;
	w = &ep->rx_wait[(ep->rx_wait_first + ep->rx_wait_count) &
			 (ep->rx.size - 1)];
	memcpy(w->sge, sge, count * sizeof(*sge));
	w->count = (uint32_t)count;
	w->len = len;
	w->buf = buf;
	w->context = context;
	w->comp = comp;
	w->flags = flags;
	ep->rx_wait_count++;
	return 0;
}

/*
 * The multi-receive buffer was released (rx_lock held): post what waited,
 * in order, up to the next multi-receive buffer.  A receive the QP will
 * not take now (it was disconnected) stays; closing drops it.
 */
static void ibf_ep_rx_wait_post(struct ibf_ep *ep)
{
	struct ibf_rx_wait *w;

	ep->rx_multi_busy = 0;
	while (ep->rx_wait_count && !ep->rx_multi_busy) {
		w = &ep->rx_wait[ep->rx_wait_first];
		if (ibf_ep_post_rx_wr(ep, w->sge, w->count, w->len, w->buf,
				      w->context, w->comp, w->flags))
			break;
		ep->rx_wait_first = (ep->rx_wait_first + 1) & (ep->rx.size - 1);
		ep->rx_wait_count--;
	}
}

int ibf_ep_multi_recv_next(struct ibf_op *op, uint32_t byte_len)
{
	struct ibf_ep *ep = container_of(op->ring, struct ibf_ep, rx);
	size_t rest = op->len > byte_len ? op->len - byte_len : 0;
	struct ibv_sge sge = {
		.addr = (uintptr_t)op->buf + byte_len,
		.length = (uint32_t)rest,
		.lkey = op->lkey,	/* the rest is under the same key */
	};
	int released;

	ibf_lock_acquire(&ep->rx_lock);
	/* Cannot post the rest (queue full): release the buffer early. */
	released = rest < ep->min_multi_recv ||
		   ibf_ep_post_rx_wr(ep, &sge, 1, rest, (char *)op->buf + byte_len,
				     op->context, op->user_comp, FI_MULTI_RECV);
	if (released)
		ibf_ep_rx_wait_post(ep);
	ibf_lock_release(&ep->rx_lock);
	return released;
}

struct fi_ops_msg ibf_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ibf_msg_recv,
	.recvv = ibf_msg_recvv,
	.recvmsg = ibf_msg_recvmsg,
	.send = ibf_msg_send,
	.sendv = ibf_msg_sendv,
	.sendmsg = ibf_msg_sendmsg,
	.inject = ibf_msg_inject,
	.senddata = ibf_msg_senddata,
	.injectdata = ibf_msg_injectdata,
};
