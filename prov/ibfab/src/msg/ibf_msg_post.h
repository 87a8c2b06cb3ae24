/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Posting work requests: the data path of FI_EP_MSG endpoints.
 *
 * Each post takes the next slot of a ring sized at fi_endpoint, so nothing
 * is allocated and no system call is made (ibv_post_send/recv ring the
 * doorbell from user space).  The lock is the one the threading level
 * asked for, which may be none.  Every send-side work request, the
 * application's and tagged mode's frames and answers, goes to the QP
 * through ibf_msg_post_send, which traces it at FI_LOG_LEVEL=debug.
 *
 * Signalling: a send is signalled when the caller wants its completion
 * or a counter counts it, and otherwise once every tx_signal_every posts, so that completions
 * keep retiring slots (a completion retires every slot before it) and the
 * ring can never fill with slots nothing will free.
 */
#ifndef IBF_POST_H
#define IBF_POST_H

#include <arpa/inet.h>

#include "ibf_msg.h"

/* Fill sge[] from iov/desc.  Inline data needs no key. */
static inline ssize_t ibf_fill_sge(struct ibv_sge *sge, const struct iovec *iov,
				   void **desc, size_t count, int need_key,
				   size_t *total)
{
	size_t i, len = 0;

	for (i = 0; i < count; i++) {
		if (unlikely(iov[i].iov_len > UINT32_MAX)) {
			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an iov of %zu "
				       "bytes: one verbs segment carries at most "
				       "4 GiB - 1\n", iov[i].iov_len);
			return -FI_EMSGSIZE;
		}
		sge[i].addr = (uintptr_t)iov[i].iov_base;
		sge[i].length = (uint32_t)iov[i].iov_len;
		sge[i].lkey = 0;
		len += iov[i].iov_len;
		if (need_key && iov[i].iov_len &&
		    unlikely(!desc || ibf_desc_lkey(desc[i], &sge[i].lkey))) {
			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "buffer %p has no "
				       "descriptor from fi_mr_desc: FI_MR_LOCAL "
				       "needs one for each iov\n", iov[i].iov_base);
			return -FI_EINVAL;
		}
	}
	*total = len;
	return 0;
}

/* Called with tx_lock held: does this send get IBV_SEND_SIGNALED? */
static inline int ibf_tx_signal(struct ibf_ep *ep, int comp)
{
	if (comp || ++ep->tx_unsignalled >= ep->tx_signal_every) {
		ep->tx_unsignalled = 0;
		return IBV_SEND_SIGNALED;
	}
	return 0;
}

/* The counter an operation of this opcode adds to, or NULL. */
static inline struct ibf_cntr *ibf_tx_cntr(const struct ibf_ep *ep,
					   enum ibv_wr_opcode opcode)
{
	if (opcode == IBV_WR_RDMA_READ)
		return ep->base.cntr[IBF_CNTR_READ];
	if (opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return ep->base.cntr[IBF_CNTR_WRITE];
	return ep->base.cntr[IBF_CNTR_SEND];
}

void ibf_msg_post_trace(struct ibf_ep *ep, const struct ibv_send_wr *wr);
void ibf_msg_post_recv_trace(const struct ibv_qp *qp,
			     const struct ibv_recv_wr *wr);

/*
 * The one post to a receive queue of the msg wing (its lock held): an
 * endpoint's QP (ring slots, tagged mode's bounces), or a shared receive
 * context's SRQ when srq is not NULL.  Traced at FI_LOG_LEVEL=debug when
 * *trace (the owner's post_trace); 0, or what the device's refusal means
 * (a full queue: -FI_EAGAIN).
 */
static inline int ibf_msg_post_recv(struct ibv_qp *qp, struct ibv_srq *srq,
				    const int *trace, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad;
	int ret;

	ret = srq ? ibv_post_srq_recv(srq, wr, &bad) :
		    ibv_post_recv(qp, wr, &bad);
	if (unlikely(ret))
		return ibf_errno_to_fi_retry(ret);
	/* Said once posted (the wr is still ours); the flag read only now,
	 * so nothing but qp and wr lives across the post. */
	if (unlikely(*trace))
		ibf_msg_post_recv_trace(qp, wr);
	return 0;
}

/*
 * The one post to the endpoint's send queue (tx_lock held): a ring slot's
 * work request (ibf_msg_tx_post) or a tagged-mode answer's.  Traced at
 * FI_LOG_LEVEL=debug; 0, or what the device's refusal means (a full
 * queue: -FI_EAGAIN).
 */
static inline int ibf_msg_post_send(struct ibf_ep *ep, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret;

	if (unlikely(ep->post_trace))
		ibf_msg_post_trace(ep, wr);
	ret = ibv_post_send(ep->id->qp, wr, &bad);
	if (likely(!ret))
		return 0;
	return ibf_errno_to_fi_retry(ret);
}

/* The send ring's next slot (tx_lock held) and *ret 0, or NULL and *ret
 * -FI_EAGAIN when the ring is full, -FI_EOPBADSTATE when there is no QP. */
static inline struct ibf_op *ibf_msg_tx_slot(struct ibf_ep *ep, ssize_t *ret)
{
	if (unlikely(!ibf_ring_free(&ep->tx) || !ep->id->qp)) {
		*ret = ep->id->qp ? -FI_EAGAIN : -FI_EOPBADSTATE;
		return NULL;
	}
	*ret = 0;
	return &ep->tx.ops[ep->tx.head & (ep->tx.size - 1)];
}

/* Post wr for op, the slot ibf_msg_tx_slot gave and the caller filled
 * (tx_lock held): signalled when its completion or counter needs it, or
 * the ring does; the ring moves on once it went. */
static inline ssize_t ibf_msg_tx_post(struct ibf_ep *ep, struct ibf_op *op,
				      struct ibv_send_wr *wr)
{
	int ret;

	wr->wr_id = (uintptr_t)op;
	wr->next = NULL;
	wr->send_flags |= ibf_tx_signal(ep, op->user_comp || op->cntr);
	ret = ibf_msg_post_send(ep, wr);
	if (likely(!ret))
		ep->tx.head++;
	return ret;
}

/* Post one send-side work request whose SGEs are filled (len bytes).
 * Inlined into each caller, so that its struct ibf_tx lives in registers
 * instead of being built on the stack and read back. */
static inline __attribute__((always_inline)) ssize_t
ibf_ep_post_tx_sge(struct ibf_ep *ep, const struct ibf_tx *tx,
		   struct ibv_sge *sge, size_t len, int inline_ok)
{
	struct ibv_send_wr wr;
	struct ibf_op *op;
	ssize_t ret;

	wr.sg_list = sge;
	wr.num_sge = (int)tx->count;
	wr.opcode = tx->opcode;
	wr.send_flags = (inline_ok ? IBV_SEND_INLINE : 0) |
			((tx->flags & FI_FENCE) ? IBV_SEND_FENCE : 0);
	wr.imm_data = htonl((uint32_t)tx->data);
	wr.wr.rdma.remote_addr = tx->remote_addr;
	wr.wr.rdma.rkey = (uint32_t)tx->rkey;

	ibf_lock_acquire(&ep->tx_lock);
	op = ibf_msg_tx_slot(ep, &ret);
	if (likely(op)) {
		op->context = tx->context;
		op->flags = tx->cq_flags;
		op->len = len;
		op->buf = NULL;
		op->user_comp = tx->comp;
		op->cntr = ibf_tx_cntr(ep, tx->opcode);
		ret = ibf_msg_tx_post(ep, op, &wr);
	}
	ibf_lock_release(&ep->tx_lock);
	return ret;
}

static inline ssize_t ibf_ep_post_tx(struct ibf_ep *ep, const struct ibf_tx *tx)
{
	struct ibv_sge sge[IBF_MAX_SGE];
	size_t len = 0;
	int inline_ok, ret;

	if (unlikely(tx->count > ep->tx_iov_limit)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%zu iovs, tx iov_limit "
			       "is %zu\n", tx->count, ep->tx_iov_limit);
		return -FI_EINVAL;
	}
	if (unlikely(ibf_iov_sum(tx->iov, tx->count, &len))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "iov lengths whose sum "
			       "wraps\n");
		return -FI_EINVAL;
	}
	/* Small sends and writes go inline: the buffer is free on return. */
	inline_ok = tx->opcode != IBV_WR_RDMA_READ && len <= ep->inject_size;
	if (unlikely((tx->flags & FI_INJECT) && !inline_ok)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "inject of %zu bytes, "
			       "inject_size is %zu\n", len, ep->inject_size);
		return -FI_EINVAL;
	}
	ret = ibf_fill_sge(sge, tx->iov, tx->desc, tx->count, !inline_ok, &len);
	if (unlikely(ret))
		return ret;
	return ibf_ep_post_tx_sge(ep, tx, sge, len, inline_ok);
}

/*
 * The fast path of a send, write or read of one buffer: fills *sge and
 * returns 1, *inl set when it goes inline (small enough, not a read: no
 * key needed, the buffer free on return), else with the key of its
 * descriptor.  0 when anything needs checking (several buffers, no or a
 * foreign descriptor, an oversized one, an inject too big to go inline):
 * then ibf_ep_post_tx checks and says what is wrong.  The caller builds
 * its struct ibf_tx in each branch, so that the fast one's never has its
 * address taken by a function not inlined, and the compiler keeps it in
 * registers.
 */
static inline __attribute__((always_inline)) int
ibf_tx_one(const struct ibf_ep *ep, size_t count, const struct iovec *iov,
	   void **desc, enum ibv_wr_opcode opcode, uint64_t flags,
	   struct ibv_sge *sge, int *inl)
{
	size_t len;

	if (unlikely(count != 1))
		return 0;
	len = iov[0].iov_len;
	sge->addr = (uintptr_t)iov[0].iov_base;
	sge->length = (uint32_t)len;
	sge->lkey = 0;
	*inl = len <= ep->inject_size && opcode != IBV_WR_RDMA_READ;
	if (*inl)
		return 1;
	return len <= UINT32_MAX && !(flags & FI_INJECT) && desc &&
	       !ibf_desc_lkey(desc[0], &sge->lkey);
}

/*
 * Post receive SGEs already filled to the QP (rx_lock held); buf is where
 * the data lands.
 */
static inline ssize_t ibf_ep_post_rx_wr(struct ibf_ep *ep, struct ibv_sge *sge,
					size_t count, size_t len, void *buf,
					void *context, int comp, uint64_t flags)
{
	struct ibv_recv_wr wr;
	struct ibf_op *op;
	int ret;

	wr.next = NULL;
	wr.sg_list = sge;
	wr.num_sge = (int)count;
	if (unlikely(!ibf_ring_free(&ep->rx) || !ep->id->qp))
		return ep->id->qp ? -FI_EAGAIN : -FI_EOPBADSTATE;
	op = &ep->rx.ops[ep->rx.head & (ep->rx.size - 1)];
	op->context = context;
	op->flags = FI_RECV | FI_MSG | (flags & FI_MULTI_RECV);
	op->len = len;
	op->buf = buf;
	op->user_comp = comp;
	op->cntr = ep->base.cntr[IBF_CNTR_RECV];
	op->lkey = count ? sge[0].lkey : 0;
	wr.wr_id = (uintptr_t)op;
	ret = ibf_msg_post_recv(ep->id->qp, NULL, &ep->post_trace, &wr);
	if (unlikely(ret))
		return ret;
	ep->rx.head++;
	/* Posted after the connection went down: make sure it flushes.  A
	 * disconnect racing this post changes the state first and moves the
	 * QP after (a system call later): if this load misses the change,
	 * that move finds the receive queued. */
	if (unlikely(__atomic_load_n(&ep->state, __ATOMIC_ACQUIRE) ==
		     IBF_EP_SHUTDOWN))
		ibf_ep_qp_to_error(ep);
	if (flags & FI_MULTI_RECV)
		ep->rx_multi_busy = 1;
	return 0;
}

/* rx_lock held: keep a receive until the multi-receive buffer is released. */
ssize_t ibf_ep_rx_wait(struct ibf_ep *ep, struct ibv_sge *sge, size_t count,
		       size_t len, void *buf, void *context, int comp,
		       uint64_t flags);

static inline ssize_t ibf_ep_post_rx_sge(struct ibf_ep *ep, struct ibv_sge *sge,
					 size_t count, size_t len, void *buf,
					 void *context, int comp, uint64_t flags)
{
	ssize_t ret;

	ibf_lock_acquire(&ep->rx_lock);
	if (unlikely(ep->rx_multi_busy))
		ret = ibf_ep_rx_wait(ep, sge, count, len, buf, context, comp,
				     flags);
	else
		ret = ibf_ep_post_rx_wr(ep, sge, count, len, buf, context, comp,
					flags);
	ibf_lock_release(&ep->rx_lock);
	return ret;
}

/* flags: FI_MULTI_RECV, or 0. */
static inline ssize_t ibf_ep_post_rx(struct ibf_ep *ep, const struct iovec *iov,
				     void **desc, size_t count, void *context,
				     int comp, uint64_t flags)
{
	struct ibv_sge sge[IBF_MAX_SGE];
	size_t len;
	ssize_t ret;

	if (unlikely((flags & FI_MULTI_RECV) && (count != 1 || !ep->rx_wait))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_MULTI_RECV takes "
			       "one buffer, on an endpoint opened with the "
			       "FI_MULTI_RECV capability\n");
		return -FI_EINVAL;
	}
	/*
	 * An endpoint bound to a shared receive context has no receive queue
	 * of its own: what is posted to it goes to the shared one, where any
	 * of the context's endpoints may consume it.
	 */
	if (unlikely(ep->srx)) {
		if (flags & FI_MULTI_RECV)
			return -FI_EBADFLAGS;
		return ibf_srx_post(ep->srx, iov, desc, count, context);
	}
	if (unlikely(count > ep->rx_iov_limit)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%zu iovs: rx iov_limit "
			       "is %zu\n", count, ep->rx_iov_limit);
		return -FI_EINVAL;
	}
	ret = ibf_fill_sge(sge, iov, desc, count, 1, &len);
	if (unlikely(ret))
		return ret;
	return ibf_ep_post_rx_sge(ep, sge, count, len, count ? iov[0].iov_base : NULL,
				  context, comp, flags);
}

/* fi_recv's general path (ibf_msg_sendrecv.c), out of line so that the
 * fast one below keeps its arguments in registers. */
ssize_t ibf_ep_post_rx_buf(struct ibf_ep *ep, void *buf, size_t len,
			   void *desc, void *context, int comp, uint64_t flags);

/*
 * fi_recv's one registered buffer on an endpoint with a receive queue of
 * its own: no iov walk.  Anything else (shared receive context,
 * multi-receive, no or a foreign descriptor, an empty or oversized buffer)
 * takes the general path, which checks and says what is wrong.
 */
static inline ssize_t ibf_ep_post_rx_one(struct ibf_ep *ep, void *buf,
					 size_t len, void *desc, void *context,
					 int comp, uint64_t flags)
{
	struct ibv_sge sge;

	if (unlikely(ep->srx || (flags & FI_MULTI_RECV) || !len ||
		     len > UINT32_MAX || ibf_desc_lkey(desc, &sge.lkey)))
		return ibf_ep_post_rx_buf(ep, buf, len, desc, context, comp,
					  flags);
	sge.addr = (uintptr_t)buf;
	sge.length = (uint32_t)len;
	return ibf_ep_post_rx_sge(ep, &sge, 1, len, buf, context, comp, flags);
}

#endif /* IBF_POST_H */
