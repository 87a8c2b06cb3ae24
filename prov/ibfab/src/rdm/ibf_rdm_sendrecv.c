/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM fi_msg and fi_tagged: the API layer of the RDM engine (ibf_rdm.h).
 *
 * Each call checks its arguments and hands the rest to the protocol
 * (ibf_rdm_proto.h): a send to ibf_rdm_submit, which builds it and has
 * its connection send it; a receive to the matcher.  Peek and claim
 * (FI_PEEK, FI_CLAIM, FI_DISCARD) work on the messages the protocol
 * holds.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm.h"

static ssize_t ibf_rdm_send(struct ibf_rdm_ep *ep, const struct iovec *iov,
			    size_t count, fi_addr_t dest, uint64_t tag,
			    uint64_t data, uint64_t flags, void *context,
			    int tagged)
{
	struct ibf_rdm_req req;

	if (unlikely(ibf_rdm_iov_check(iov, count, ep->tx_iov_limit, &req.len,
				       "a send")))
		return -FI_EINVAL;
	if (unlikely((flags & FI_INJECT) && req.len > ep->inject_size)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "inject of %zu bytes: "
			       "inject_size is %zu\n", req.len, ep->inject_size);
		return -FI_EINVAL;
	}
	req.kind = IBF_RDM_REQ_SEND;
	req.dest = dest;
	req.context = context;
	req.op_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	req.flags = flags;
	req.iov = iov;
	req.desc = NULL;	/* an eager copy or an RTS: its own registration */
	req.count = count;
	req.data = data;
	req.send.tag = tag;
	req.send.tagged = tagged;
	return ibf_rdm_submit(&ep->as_proto, &req);
}

/*
 * FI_DIRECTED_RECV: the peer a receive from src wants (ep->lock held), or
 * 0 for any.  A peer inserted into the AV more than once (an MPI library
 * inserts a peer again for each communicator that names it) has as many
 * fi_addrs, and a message from it matches a receive naming any of them:
 * so a peer is its name, reached through its connection record, never an
 * fi_addr compared as a number.
 */
static int ibf_rdm_want(struct ibf_rdm_ep *ep, fi_addr_t src, uint64_t *want)
{
	struct ibf_rdm_conn *conn;
	int ret;

	*want = 0;
	if (!(ep->base.info->caps & FI_DIRECTED_RECV) || src == FI_ADDR_UNSPEC ||
	    src == FI_ADDR_NOTAVAIL)
		return 0;
	conn = likely(src < ep->npeers) ? ep->peers[src] : NULL;
	if (unlikely(!conn) && (ret = ibf_rdm_conn_get(&ep->as_conns, src,
						       &conn)))
		return ret;
	*want = conn->peer_key;
	return 0;
}

static ssize_t ibf_rdm_recv(struct ibf_rdm_ep *ep, const struct iovec *iov,
			    void **desc, size_t count, fi_addr_t src,
			    uint64_t tag, uint64_t ignore, uint64_t flags,
			    void *context, int tagged)
{
	struct ibf_rdm_op *r;
	uint64_t want;
	size_t len;
	int ret;

	if (unlikely(ibf_rdm_iov_check(iov, count, ep->rx_iov_limit, &len,
				       "a receive")))
		return -FI_EINVAL;
	if (tagged)
		flags &= ~FI_MULTI_RECV;	/* untagged receives only */
	if (unlikely((flags & FI_MULTI_RECV) && count != 1)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_MULTI_RECV takes "
			       "one buffer\n");
		return -FI_EINVAL;
	}
	if (unlikely(!ep->base.enabled))
		return -FI_EOPBADSTATE;
	ibf_lock_acquire(&ep->lock);
	ret = ibf_rdm_want(ep, src, &want);
	r = likely(!ret) ? ibf_rdm_rx_take(&ep->as_proto, iov, desc, count, want, tag,
					   ignore, flags, context, tagged) : NULL;
	if (likely(r))
		ibf_rdm_recv_post(&ep->as_proto, r);
	ibf_lock_release(&ep->lock);
	return r ? 0 : ret ? ret : -FI_EAGAIN;
}

/* FI_PEEK, with FI_CLAIM or FI_DISCARD or neither. */
static ssize_t ibf_rdm_peek(struct ibf_rdm_ep *ep, const struct fi_msg_tagged *msg,
			    uint64_t flags)
{
	struct ibf_rdm_op *r, *b;
	uint64_t want;
	int ret;

	if ((flags & FI_CLAIM) && !msg->context) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_CLAIM needs a "
			       "struct fi_context as context\n");
		return -FI_EINVAL;
	}
	ibf_lock_acquire(&ep->lock);
	ret = ibf_rdm_want(ep, msg->addr, &want);
	r = !ret ? ibf_rdm_rx_take(&ep->as_proto, NULL, NULL, 0, want, msg->tag,
				   msg->ignore, FI_COMPLETION, msg->context, 1) :
		   NULL;
	if (!r) {
		ibf_lock_release(&ep->lock);
		return ret ? ret : -FI_EAGAIN;
	}
	r->op.user_comp = 1;
	r->uncounted = 1;	/* a peek moves no data */
	b = ibf_rdm_unexp_find(&ep->as_proto, r);
	if (!b) {
		ibf_rdm_complete(r, -FI_ENOMSG);
		ibf_lock_release(&ep->lock);
		return 0;
	}
	r->op.len = b->op.len;
	r->op.tag = b->op.tag;
	r->op.data = b->op.data;
	r->op.src = b->op.src;
	r->op.buf = NULL;
	if (((struct ibf_rdm_hdr *)b->mem)->flags & IBF_RDM_F_DATA)
		r->op.flags |= FI_REMOTE_CQ_DATA;
	if (flags & (FI_CLAIM | FI_DISCARD))
		ibf_rdm_unexp_take(&ep->as_proto, b);
	if (flags & FI_DISCARD) {
		ibf_rdm_discard(&ep->as_proto, b);
	} else if (flags & FI_CLAIM) {
		ibf_rdm_op_to(b, IBF_RDM_BOUNCE_CLAIMED);
		((struct fi_context *)msg->context)->internal[0] = b;
	}
	ibf_rdm_complete(r, 0);
	ibf_lock_release(&ep->lock);
	return 0;
}

/* FI_CLAIM without FI_PEEK: take (or discard) what a peek claimed. */
static ssize_t ibf_rdm_claim(struct ibf_rdm_ep *ep, const struct fi_msg_tagged *msg,
			     uint64_t flags)
{
	struct ibf_rdm_op *r, *b = msg->context ?
		((struct fi_context *)msg->context)->internal[0] : NULL;

	if (unlikely(msg->iov_count > ep->rx_iov_limit ||
		     (msg->iov_count && !msg->msg_iov))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_CLAIM with %zu "
			       "iovs: rx iov_limit is %zu\n", msg->iov_count,
			       ep->rx_iov_limit);
		return -FI_EINVAL;
	}
	ibf_lock_acquire(&ep->lock);
	/* Only a message a peek claimed, once: not one still unexpected,
	 * being read, or claimed and taken already (a stale context). */
	if (!b || !ibf_rdm_bounce_owned(&ep->as_ops,
					b) || b->state != IBF_RDM_BOUNCE_CLAIMED) {
		ibf_lock_release(&ep->lock);
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_CLAIM with a "
			       "context no FI_PEEK | FI_CLAIM filled (or one "
			       "whose message was claimed already)\n");
		return -FI_EINVAL;
	}
	r = ibf_rdm_rx_take(&ep->as_proto, msg->msg_iov, msg->desc,
			    msg->iov_count,
			    0, msg->tag, msg->ignore, flags,
			    msg->context, 1);
	if (!r) {
		ibf_lock_release(&ep->lock);
		return -FI_EAGAIN;
	}
	((struct fi_context *)msg->context)->internal[0] = NULL;
	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_HELD);	/* taken: this claim's now */
	if (flags & FI_DISCARD) {
		r->op.len = 0;
		r->op.tag = b->op.tag;
		r->op.src = b->op.src;
		ibf_rdm_discard(&ep->as_proto, b);
		ibf_rdm_complete(r, 0);
	} else {
		ibf_rdm_deliver(&ep->as_proto, r, b);
	}
	ibf_lock_release(&ep->lock);
	return 0;
}

/* ---- fi_ops_msg ---- */

static ssize_t ibf_rdm_m_recv(struct fid_ep *ep_fid, void *buf, size_t len,
			      void *desc, fi_addr_t src, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { buf, len };

	return ibf_rdm_recv(ep, &iov, &desc, 1, src, 0, 0, ep->base.rx_op_flags,
			    context, 0);
}

static ssize_t ibf_rdm_m_recvv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t src,
			       void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_recv(ep, iov, desc, count, src, 0, 0, ep->base.rx_op_flags,
			    context, 0);
}

static ssize_t ibf_rdm_m_recvmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
				 uint64_t flags)
{
	return ibf_rdm_recv(to_ibf_rdm_ep(ep_fid), msg->msg_iov, msg->desc,
			    msg->iov_count, msg->addr, 0, 0, flags,
			    msg->context, 0);
}

static ssize_t ibf_rdm_m_send(struct fid_ep *ep_fid, const void *buf, size_t len,
			      void *desc, fi_addr_t dest, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(ep, &iov, 1, dest, 0, 0, ep->base.tx_op_flags, context, 0);
}

static ssize_t ibf_rdm_m_sendv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t dest,
			       void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_send(ep, iov, count, dest, 0, 0, ep->base.tx_op_flags,
			    context, 0);
}

static ssize_t ibf_rdm_m_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
				 uint64_t flags)
{
	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), msg->msg_iov, msg->iov_count,
			    msg->addr, 0, msg->data, flags & ~IBF_RDM_NO_COMP,
			    msg->context, 0);
}

static ssize_t ibf_rdm_m_inject(struct fid_ep *ep_fid, const void *buf,
				size_t len, fi_addr_t dest)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), &iov, 1, dest, 0, 0,
			    IBF_RDM_INJECT, NULL, 0);
}

static ssize_t ibf_rdm_m_senddata(struct fid_ep *ep_fid, const void *buf,
				  size_t len, void *desc, uint64_t data,
				  fi_addr_t dest, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(ep, &iov, 1, dest, 0, data,
			    ep->base.tx_op_flags | FI_REMOTE_CQ_DATA, context, 0);
}

static ssize_t ibf_rdm_m_injectdata(struct fid_ep *ep_fid, const void *buf,
				    size_t len, uint64_t data, fi_addr_t dest)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), &iov, 1, dest, 0, data,
			    IBF_RDM_INJECT | FI_REMOTE_CQ_DATA, NULL, 0);
}

struct fi_ops_msg ibf_rdm_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ibf_rdm_m_recv,
	.recvv = ibf_rdm_m_recvv,
	.recvmsg = ibf_rdm_m_recvmsg,
	.send = ibf_rdm_m_send,
	.sendv = ibf_rdm_m_sendv,
	.sendmsg = ibf_rdm_m_sendmsg,
	.inject = ibf_rdm_m_inject,
	.senddata = ibf_rdm_m_senddata,
	.injectdata = ibf_rdm_m_injectdata,
};

/* ---- fi_ops_tagged ---- */

static ssize_t ibf_rdm_t_recv(struct fid_ep *ep_fid, void *buf, size_t len,
			      void *desc, fi_addr_t src, uint64_t tag,
			      uint64_t ignore, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { buf, len };

	return ibf_rdm_recv(ep, &iov, &desc, 1, src, tag, ignore,
			    ep->base.rx_op_flags, context, 1);
}

static ssize_t ibf_rdm_t_recvv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t src,
			       uint64_t tag, uint64_t ignore, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_recv(ep, iov, desc, count, src, tag, ignore,
			    ep->base.rx_op_flags, context, 1);
}

static ssize_t ibf_rdm_t_recvmsg(struct fid_ep *ep_fid,
				 const struct fi_msg_tagged *msg, uint64_t flags)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	if (unlikely(!msg))
		return -FI_EINVAL;
	if (unlikely(flags & FI_PEEK))
		return ibf_rdm_peek(ep, msg, flags);
	if (unlikely(flags & FI_CLAIM))
		return ibf_rdm_claim(ep, msg, flags);
	return ibf_rdm_recv(ep, msg->msg_iov, msg->desc, msg->iov_count,
			    msg->addr, msg->tag, msg->ignore, flags,
			    msg->context, 1);
}

static ssize_t ibf_rdm_t_send(struct fid_ep *ep_fid, const void *buf, size_t len,
			      void *desc, fi_addr_t dest, uint64_t tag,
			      void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(ep, &iov, 1, dest, tag, 0, ep->base.tx_op_flags,
			    context, 1);
}

static ssize_t ibf_rdm_t_sendv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t dest,
			       uint64_t tag, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_send(ep, iov, count, dest, tag, 0, ep->base.tx_op_flags,
			    context, 1);
}

static ssize_t ibf_rdm_t_sendmsg(struct fid_ep *ep_fid,
				 const struct fi_msg_tagged *msg, uint64_t flags)
{
	if (unlikely(!msg))
		return -FI_EINVAL;
	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), msg->msg_iov, msg->iov_count,
			    msg->addr, msg->tag, msg->data, flags & ~IBF_RDM_NO_COMP,
			    msg->context, 1);
}

static ssize_t ibf_rdm_t_inject(struct fid_ep *ep_fid, const void *buf,
				size_t len, fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), &iov, 1, dest, tag, 0,
			    IBF_RDM_INJECT, NULL, 1);
}

static ssize_t ibf_rdm_t_senddata(struct fid_ep *ep_fid, const void *buf,
				  size_t len, void *desc, uint64_t data,
				  fi_addr_t dest, uint64_t tag, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(ep, &iov, 1, dest, tag, data,
			    ep->base.tx_op_flags | FI_REMOTE_CQ_DATA, context, 1);
}

static ssize_t ibf_rdm_t_injectdata(struct fid_ep *ep_fid, const void *buf,
				    size_t len, uint64_t data, fi_addr_t dest,
				    uint64_t tag)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), &iov, 1, dest, tag, data,
			    IBF_RDM_INJECT | FI_REMOTE_CQ_DATA, NULL, 1);
}

struct fi_ops_tagged ibf_rdm_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ibf_rdm_t_recv,
	.recvv = ibf_rdm_t_recvv,
	.recvmsg = ibf_rdm_t_recvmsg,
	.send = ibf_rdm_t_send,
	.sendv = ibf_rdm_t_sendv,
	.sendmsg = ibf_rdm_t_sendmsg,
	.inject = ibf_rdm_t_inject,
	.senddata = ibf_rdm_t_senddata,
	.injectdata = ibf_rdm_t_injectdata,
};
