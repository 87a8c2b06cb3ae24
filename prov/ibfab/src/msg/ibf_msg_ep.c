/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_MSG endpoints: an RC queue pair on an rdma_cm id.
 *
 * Life of an endpoint: fi_endpoint makes (or, from a connection request,
 * takes) the id and binds or resolves its addresses, which fixes the
 * device; fi_ep_bind records the CQs and the EQ; fi_enable creates the QP
 * and the two rings of work request slots, each sized once, here; fi_connect
 * or fi_accept moves the id to the EQ's event channel and starts the
 * handshake (ibf_msg_cm.c); fi_close flushes the QP, takes its completions out
 * of the CQs and frees everything.
 *
 * Until it is moved to an EQ, an id is synchronous (librdmacm's own
 * channel), so address and route resolution can simply block.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_atomic_ops.h"
#include "ibf_msg_post.h"
#include "ibf_noops.h"
#include "ibf_rdmacm.h"

static uint32_t ibf_pow2_up(size_t n)
{
	uint32_t p = 1;

	while (p < n && p < (1u << 30))
		p <<= 1;
	return p;
}

static uint32_t ibf_pow2_down(size_t n)
{
	uint32_t p = 1;

	while ((size_t)p * 2 <= n && p < (1u << 30))
		p <<= 1;
	return p;
}

/* A ring of at least "want" slots the device can queue. */
static uint32_t ibf_ring_size(size_t want, int dev_max)
{
	uint32_t size = ibf_pow2_up(want ? want : 1);

	if (size > (uint32_t)dev_max)
		size = ibf_pow2_down(dev_max);
	return size;
}

static int ibf_ring_init(struct ibf_ring *r, uint32_t size)
{
	struct ibf_op *ops = calloc(size, sizeof(*ops));

	if (!ops)
		return -FI_ENOMEM;
	ibf_ring_set(r, ops, size);
	return 0;
}

/* Send queue slots for atomic answers: one per bounce (ibf_msg_tagged.c). */
static uint32_t ibf_ep_replies(const struct ibf_ep *ep)
{
	return ep->tag_mode && (ep->base.info->caps & FI_ATOMIC) ? ep->rx.size : 0;
}

int ibf_ep_create_qp(struct ibf_ep *ep)
{
	struct ibv_qp_init_attr attr = { 0 };
	int ret;

	attr.qp_type = IBV_QPT_RC;
	attr.send_cq = ibf_ep_send_cq(ep)->cq;
	attr.recv_cq = ibf_ep_recv_cq(ep)->cq;
	attr.cap.max_send_wr = ep->tx.size + ibf_ep_replies(ep);
	attr.cap.max_recv_wr = ep->srx ? 0 : ep->rx.size;
	attr.srq = ep->srx ? ep->srx->srq : NULL;
	attr.cap.max_send_sge = ep->tx_iov_limit;
	attr.cap.max_recv_sge = ep->rx_iov_limit;
	attr.cap.max_inline_data = ep->inject_size;
	attr.sq_sig_all = 0;	/* we choose which sends complete */
	if (ep->tagged)
		attr.cap.max_recv_sge = 1;	/* bounces: one buffer each */
	if (rdma_create_qp(ep->id, ep->base.domain->pd, &attr)) {
		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_create_qp (send %u, recv %u, sge "
			 "%zu/%zu, inline %zu): %s\n", ep->tx.size, ep->rx.size,
			 ep->tx_iov_limit, ep->rx_iov_limit, ep->inject_size,
			 fi_strerror(-ret));
		return ret;
	}
	if (ep->tagged && (ret = ibf_tagged_post_bounces(ep))) {
		rdma_destroy_qp(ep->id);
		return ret;
	}
	return 0;
}

/* Receives this endpoint can complete at once: its own, or the SRQ's. */
static int ibf_ep_rx_depth(const struct ibf_ep *ep)
{
	return ep->srx ? (int)ep->srx->size : (int)ep->rx.size;
}

/*
 * What the CQ hands this wing (struct ibf_cq_wc_hook): the completions of
 * tagged mode's bounces and atomic answers, and failed sends of its own
 * (op flags 0: framed mode's atomic requests and refusals), whose
 * operation fails instead while nothing is reported for the send itself.
 */
static int ibf_ep_wc_own(struct ibf_cq *cq, struct ibf_op *op,
			 const struct ibv_wc *wc)
{
	switch (op->kind) {
	case IBF_OP_BOUNCE:	/* match, queue a soft completion, or keep */
		ibf_tagged_on_bounce(cq, op, wc);
		return 1;
	case IBF_OP_REPLY:	/* an atomic's answer went */
		ibf_tagged_on_reply(op, wc);
		return 1;
	case IBF_OP_RING:
		if (op->flags || wc->status == IBV_WC_SUCCESS)
			return 0;
		ibf_msg_atomic_fail(op->context, ibf_wc_status_to_fi(wc->status));
		ibf_op_release(op);
		return 1;
	default:
		return 0;
	}
}

/* A multi-receive buffer took a message: FI_MULTI_RECV is reported only
 * with the message that releases it. */
static uint64_t ibf_ep_wc_multi_next(struct ibf_op *op, const struct ibv_wc *wc)
{
	return ibf_ep_multi_recv_next(op, wc->byte_len) ? 0 : FI_MULTI_RECV;
}

static const struct ibf_cq_wc_hook ibf_ep_wc_hook = {
	.own = ibf_ep_wc_own,
	.multi_next = ibf_ep_wc_multi_next,
};

/* Reserve CQ room for both rings, so no completion can overrun a CQ. */
static int ibf_ep_reserve_cqs(struct ibf_ep *ep)
{
	int ret;

	int tx = (int)(ep->tx.size + ibf_ep_replies(ep));

	ret = ibf_cq_reserve(ibf_ep_send_cq(ep), tx, &ibf_ep_wc_hook);
	if (ret)
		return ret;
	ret = ibf_cq_reserve(ibf_ep_recv_cq(ep), ibf_ep_rx_depth(ep),
			      &ibf_ep_wc_hook);
	if (ret)
		ibf_cq_unreserve(ibf_ep_send_cq(ep), tx);
	return ret;
}

static void ibf_ep_unreserve_cqs(struct ibf_ep *ep)
{
	ibf_cq_unreserve(ibf_ep_send_cq(ep), (int)(ep->tx.size + ibf_ep_replies(ep)));
	ibf_cq_unreserve(ibf_ep_recv_cq(ep), ibf_ep_rx_depth(ep));
}

/*
 * Counters and no CQ: the QP completes to a CQ of the endpoint's own,
 * which only counters read, with a channel if one of them sleeps.
 */
static int ibf_ep_open_own_cq(struct ibf_ep *ep)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fid_cq *cq;
	int ret;

	attr.wait_obj = ibf_ep_base_cntr_waits(&ep->base) ? FI_WAIT_FD :
			FI_WAIT_NONE;
	ret = ibf_cq_open(&ep->base.domain->domain_fid, &attr, &cq, NULL);
	if (ret)
		return ret;
	ep->own_cq = container_of(cq, struct ibf_cq, cq_fid);
	ep->own_cq->unread = 1;
	return 0;
}

/*
 * The endpoint's hook for its counters (struct ibf_progress): a counter
 * counts a completion when it leaves the device CQ, so progressing the
 * endpoint progresses its CQs, and it sleeps on their channels.
 */
static void ibf_ep_cntr_progress(struct ibf_progress *hook,
				 struct ibf_cq_sink *sink)
{
	struct ibf_ep *ep = container_of(hook, struct ibf_ep, cntr_hook);
	struct ibf_cq *scq = ibf_ep_send_cq(ep), *rcq = ibf_ep_recv_cq(ep);

	(void)sink;
	ibf_cq_progress(scq);
	if (rcq != scq)
		ibf_cq_progress(rcq);
}

/* 0 when the endpoint's CQs are armed with nothing new. */
static int ibf_ep_cntr_trywait(struct ibf_progress *hook)
{
	struct ibf_ep *ep = container_of(hook, struct ibf_ep, cntr_hook);
	struct ibf_cq *scq = ibf_ep_send_cq(ep), *rcq = ibf_ep_recv_cq(ep);
	int ret;

	ret = ibf_cq_cntr_trywait(scq);
	if (!ret && rcq != scq)
		ret = ibf_cq_cntr_trywait(rcq);
	return ret;
}

static void ibf_ep_detach_cntrs(struct ibf_ep *ep)
{
	ibf_ep_base_detach_cntrs(&ep->base, &ep->cntr_hook);
}

/* Counters progress (and sleep on) the endpoint's CQs from now on; the
 * CQs keep what counters take out for fi_cq_read (reports). */
static int ibf_ep_attach_cntrs(struct ibf_ep *ep)
{
	struct ibf_cq *scq = ibf_ep_send_cq(ep), *rcq = ibf_ep_recv_cq(ep);
	int fd[2], ret;

	if (!ibf_ep_base_has_cntr(&ep->base))
		return 0;
	ret = ibf_cq_use_reports(scq);
	if (!ret && rcq != scq)
		ret = ibf_cq_use_reports(rcq);
	if (ret)
		return ret;
	/* The completion channels (-1: none, or the same CQ). */
	fd[0] = scq->channel ? scq->channel->fd : -1;
	fd[1] = rcq != scq && rcq->channel ? rcq->channel->fd : -1;
	ep->cntr_hook = (struct ibf_progress){ ibf_ep_cntr_progress,
					       ibf_ep_cntr_trywait };
	return ibf_ep_base_attach_cntrs(&ep->base, &ep->cntr_hook, fd);
}

static int ibf_ep_enable(struct ibf_ep *ep)
{
	int ret;

	if (ep->base.enabled)
		return 0;
	if (!ep->base.tx_cq && !ep->base.rx_cq && !ibf_ep_base_has_cntr(&ep->base)) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_enable: bind a CQ or a counter "
			 "first\n");
		return -FI_ENOCQ;
	}
	if (ep->srx && ep->base.cntr[IBF_CNTR_RECV]) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_enable: a receive counter on an "
			 "endpoint with a shared receive context is not "
			 "supported: count receives on a CQ\n");
		return -FI_ENOSYS;
	}
	if (!ep->base.tx_cq && !ep->base.rx_cq && !ep->own_cq &&
	    (ret = ibf_ep_open_own_cq(ep)))
		return ret;
	if (!ep->eq) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_enable: bind an EQ first: "
			 "connection events go there\n");
		return -FI_ENOEQ;
	}
	ret = ibf_ep_reserve_cqs(ep);
	if (ret)
		return ret;
	if (ep->tag_mode && (ret = ibf_tagged_init(ep)))
		goto unreserve;
	if ((ep->base.info->caps & FI_ATOMIC) && (ret = ibf_msg_atomic_init(ep)))
		goto untag;
	if ((ret = ibf_ep_attach_cntrs(ep)))
		goto untag;
	/* Without an address yet, the QP waits for fi_connect's resolution. */
	if (ep->id->verbs && (ret = ibf_ep_create_qp(ep)))
		goto detach;
	ep->base.enabled = 1;
	return 0;
detach:
	ibf_ep_detach_cntrs(ep);
untag:
	ibf_msg_atomic_fini(ep);
	ibf_tagged_fini(ep);
unreserve:
	ibf_ep_unreserve_cqs(ep);
	return ret;
}

/*
 * fi_ep_bind of what only an FI_EP_MSG endpoint takes (CQs and counters
 * go through ibf_ep_base_bind): its EQ, a shared receive context.
 */
static int ibf_ep_bind_own(struct ibf_ep_base *b, struct fid *bfid,
			   uint64_t flags)
{
	struct ibf_ep *ep = container_of(b, struct ibf_ep, base);

	switch (bfid->fclass) {
	case FI_CLASS_EQ:
		if (ep->eq)
			return -FI_EINVAL;
		ep->eq = container_of(bfid, struct ibf_eq, eq_fid.fid);
		ibf_ref_get(&ep->eq->ref);
		return 0;
	case FI_CLASS_SRX_CTX:
		if (ep->srx || ep->tag_mode)
			return -FI_EINVAL;
		ep->srx = container_of(bfid, struct ibf_srx, ep_fid.fid);
		if (ep->srx->domain != ep->base.domain) {
			ep->srx = NULL;
			return -FI_EINVAL;
		}
		ibf_ref_get(&ep->srx->ref);
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static int ibf_ep_enable_own(struct ibf_ep_base *b)
{
	return ibf_ep_enable(container_of(b, struct ibf_ep, base));
}

static const struct ibf_ep_base_ops ibf_ep_base_ops = {
	.name = "FI_EP_MSG",
	.binds = "CQs, counters, an EQ, a shared receive context",
	/* FI_REMOTE_READ and FI_REMOTE_WRITE counters are accepted and count
	 * nothing: RDMA to this endpoint completes in the peer's device
	 * alone (FI_RMA_EVENT is not offered on FI_EP_MSG). */
	.ncntr = IBF_CNTR_WRITE + 1,
	.bind = ibf_ep_bind_own,
	.enable = ibf_ep_enable_own,
};

/* What a closing MSG endpoint drains from one CQ. */
struct ibf_ep_drain {
	struct ibf_ep *ep;
	uint32_t qp_num;
	struct ibf_ring *r1, *r2;	/* rings completing here, or NULL */
	int soft;			/* its soft completions go here */
	int replies;			/* its atomic answers complete here */
	int marked;			/* the send queue's last WR is posted */
};

static int ibf_ring_empty(struct ibf_ring *r)
{
	return !r || r->head == __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
}

static int ibf_ep_drain_mine(const struct ibv_wc *wc, void *arg)
{
	return wc->qp_num == ((struct ibf_ep_drain *)arg)->qp_num;
}

static void ibf_ep_drain_drop(const struct ibv_wc *wc, void *arg)
{
	struct ibf_op *op = (struct ibf_op *)(uintptr_t)wc->wr_id;

	if (op->kind == IBF_OP_BOUNCE || op->kind == IBF_OP_REPLY)
		ibf_tagged_drop(op);
	else
		ibf_op_release(op);
}

/*
 * With the QP in the error state, one signalled send behind everything:
 * its flush retires the slots of sends before it that completed unsignalled
 * (they make no completion of their own, and the ring would never empty).
 * An empty send through the usual path; -FI_EAGAIN while the ring is full
 * (its signalled sends retire it).
 */
static int ibf_ep_post_marker(struct ibf_ep *ep)
{
	const struct ibf_tx marker = { .opcode = IBV_WR_SEND, .comp = 1 };

	return (int)ibf_ep_post_tx(ep, &marker);
}

static int ibf_ep_drain_busy(void *arg)
{
	struct ibf_ep_drain *d = arg;

	if (d->r1 == &d->ep->tx && !d->marked && !ibf_ring_empty(d->r1))
		d->marked = !ibf_ep_post_marker(d->ep);

	return !ibf_ring_empty(d->r1) || !ibf_ring_empty(d->r2) ||
	       (d->soft && d->ep->tagged && ibf_tagged_outstanding(d->ep)) ||
	       (d->replies && ibf_tagged_replying(d->ep));
}

static int ibf_ep_drain_soft(const struct ibf_cq_soft_entry *s, void *arg)
{
	struct ibf_ep_drain *d = arg;
	const struct ibf_op *op = s->hold;

	if (!op)
		return 0;	/* not an FI_EP_MSG endpoint's */
	return (d->soft && op->owner == d->ep) ||
	       (d->replies && op->kind == IBF_OP_MATOMIC && op->owner == d->ep);
}

static void ibf_ep_drain_cq(struct ibf_ep *ep, struct ibf_cq *cq,
			    struct ibf_ring *r1, struct ibf_ring *r2, int soft,
			    int replies)
{
	struct ibf_ep_drain arg = { ep, ep->id->qp->qp_num, r1, r2, soft,
				    replies, 0 };
	struct ibf_drain d = {
		.mine = ibf_ep_drain_mine,
		.drop = ibf_ep_drain_drop,
		.busy = ibf_ep_drain_busy,
		.soft_mine = ibf_ep_drain_soft,
		.arg = &arg,
	};

	ibf_cq_drain(cq, &d);
}

/* Flush the QP and take its completions out of the CQs before freeing. */
static void ibf_ep_flush(struct ibf_ep *ep)
{
	struct ibf_cq *scq = ibf_ep_send_cq(ep), *rcq = ibf_ep_recv_cq(ep);

	/* An SRQ's receives stay posted; only those already taken drain.
	 * Tagged mode's receives are its bounces, counted apart. */
	struct ibf_ring *rx = ep->srx || ep->tagged ? NULL : &ep->rx;

	ibf_qp_to_error(ep->id->qp);
	if (scq == rcq) {
		ibf_ep_drain_cq(ep, scq, &ep->tx, rx, 1, 1);
	} else {
		ibf_ep_drain_cq(ep, scq, &ep->tx, NULL, 0, 1);
		ibf_ep_drain_cq(ep, rcq, rx, NULL, 1, 0);
	}
}

static int ibf_ep_close(struct fid *fid)
{
	struct ibf_ep *ep = container_of(fid, struct ibf_ep, base.ep_fid.fid);
	int leak = 0;

	if (ep->id && ep->id->qp) {
		if (__atomic_load_n(&ep->state, __ATOMIC_ACQUIRE) == IBF_EP_CONNECTED)
			rdma_disconnect(ep->id);
		ibf_ep_flush(ep);
		/* A device that never flushed may still write into the rings. */
		leak = ep->tx.head != ep->tx.tail ||
		       (!ep->tagged && !ep->srx && ep->rx.head != ep->rx.tail) ||
		       (ep->tagged && (ibf_tagged_outstanding(ep) ||
				       ibf_tagged_replying(ep)));
		rdma_destroy_qp(ep->id);
	}
	if (ep->base.enabled) {
		ibf_ep_detach_cntrs(ep);
		ibf_ep_unreserve_cqs(ep);
		if (!leak) {
			ibf_msg_atomic_fini(ep);
			ibf_tagged_fini(ep);
		}
	}
	if (ep->own_cq && !leak)
		fi_close(&ep->own_cq->cq_fid.fid);
	if (ep->id)
		rdma_destroy_id(ep->id);
	if (ep->eq)
		ibf_ref_put(&ep->eq->ref);
	if (ep->srx)
		ibf_ref_put(&ep->srx->ref);
	if (leak) {
		IBF_WARN(FI_LOG_EP_CTRL, "the device did not flush every work "
			 "request; keeping the endpoint's rings allocated\n");
	} else {
		free(ep->tx.ops);
		free(ep->rx.ops);
	}
	free(ep->rx_wait);
	ibf_lock_fini(&ep->tx_lock);
	ibf_lock_fini(&ep->rx_lock);
	ibf_ep_base_close(&ep->base);
	free(ep);
	return 0;
}

static ssize_t ibf_ep_cancel(fid_t fid, void *context)
{
	struct ibf_ep *ep = container_of(fid, struct ibf_ep, base.ep_fid.fid);

	/* A posted verbs receive cannot be taken back; tagged mode's can. */
	if (ep->tag_mode)
		return ibf_tagged_cancel(ep, context);
	return -FI_ENOSYS;
}

static int ibf_ep_getopt(fid_t fid, int level, int optname, void *optval,
			 size_t *optlen)
{
	struct ibf_ep *ep = container_of(fid, struct ibf_ep, base.ep_fid.fid);

	if (level != FI_OPT_ENDPOINT)
		return -FI_ENOPROTOOPT;
	switch (optname) {
	case FI_OPT_MIN_MULTI_RECV:
		return ibf_getopt_size(optval, optlen, ep->min_multi_recv);
	case FI_OPT_CM_DATA_SIZE:
		return ibf_getopt_size(optval, optlen, IBF_CM_DATA_SIZE);
	default:
		return -FI_ENOPROTOOPT;
	}
}

static int ibf_ep_setopt(fid_t fid, int level, int optname, const void *optval,
			 size_t optlen)
{
	struct ibf_ep *ep = container_of(fid, struct ibf_ep, base.ep_fid.fid);

	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	ep->min_multi_recv = *(const size_t *)optval;
	return 0;
}

static ssize_t ibf_ep_tx_size_left(struct fid_ep *ep_fid)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ep->tx.ops ? (ssize_t)ibf_ring_free(&ep->tx) : -FI_EOPBADSTATE;
}

static ssize_t ibf_ep_rx_size_left(struct fid_ep *ep_fid)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ep->rx.ops ? (ssize_t)ibf_ring_free(&ep->rx) : -FI_EOPBADSTATE;
}

static struct fi_ops ibf_ep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_ep_close,
	.bind = ibf_ep_base_bind,
	.control = ibf_ep_base_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static struct fi_ops_ep ibf_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ibf_ep_cancel,
	.getopt = ibf_ep_getopt,
	.setopt = ibf_ep_setopt,
	.tx_ctx = (void *)ibf_no_ctx,
	.rx_ctx = (void *)ibf_no_ctx,
	.rx_size_left = ibf_ep_rx_size_left,
	.tx_size_left = ibf_ep_tx_size_left,
};

/*
 * The id the endpoint will use: a connection request's (the request is
 * freed only once fi_endpoint succeeds, so that a failed fi_endpoint leaves
 * it to fi_reject), a passive endpoint's bound one, or a new one.
 */
static int ibf_ep_take_id(struct ibf_ep *ep, const struct fi_info *info,
			  struct ibf_connreq **req)
{
	int ret;

	*req = NULL;
	if (info->handle && info->handle->fclass == FI_CLASS_CONNREQ) {
		*req = container_of(info->handle, struct ibf_connreq, fid);
		ep->id = (*req)->id;
		return 0;
	}
	if (info->handle && info->handle->fclass == FI_CLASS_PEP) {
		ep->id = ibf_pep_take_id(info->handle);
		if (!ep->id)
			return -FI_EINVAL;
		ep->id->context = &ep->owner;
	} else if (info->handle) {
		IBF_WARN(FI_LOG_EP_CTRL, "info->handle is neither a connection "
			 "request from FI_CONNREQ nor a passive endpoint\n");
		return -FI_EINVAL;
	} else if (rdma_create_id(NULL, &ep->id, &ep->owner, RDMA_PS_TCP)) {
		return ibf_errno_to_fi(errno);
	}
	if (info->dest_addr) {
		/* A passive endpoint's id is bound already. */
		ret = rdma_resolve_addr(ep->id, info->handle ? NULL : info->src_addr,
					info->dest_addr, ibf_params.cm_timeout_ms);
		if (!ret)
			ret = rdma_resolve_route(ep->id, ibf_params.cm_timeout_ms);
	} else if (info->src_addr && !info->handle) {
		ret = rdma_bind_addr(ep->id, info->src_addr);
	} else {
		ret = 0;
	}
	if (ret) {
		char buf[80];

		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_EP_CTRL, "cannot %s %s: %s\n",
			 info->dest_addr ? "reach" : "bind",
			 ibf_addr_str(info->dest_addr ? info->dest_addr : info->src_addr,
				      buf, sizeof(buf)), fi_strerror(-ret));
	}
	return ret;
}

/*
 * The FIFO of receives that wait for a multi-receive buffer: one block,
 * the entries first, then rx_iov_limit SGEs for each (not IBF_MAX_SGE:
 * every FI_EP_MSG endpoint may receive into multi-receive buffers).
 */
static int ibf_ep_rx_wait_init(struct ibf_ep *ep)
{
	struct ibv_sge *sge;
	uint32_t i;

	ep->rx_wait = calloc(ep->rx.size, sizeof(*ep->rx_wait) +
			     ep->rx_iov_limit * sizeof(*sge));
	if (!ep->rx_wait)
		return -FI_ENOMEM;
	sge = (struct ibv_sge *)(ep->rx_wait + ep->rx.size);
	for (i = 0; i < ep->rx.size; i++)
		ep->rx_wait[i].sge = sge + i * ep->rx_iov_limit;
	return 0;
}

static void ibf_ep_size(struct ibf_ep *ep, const struct fi_info *info)
{
	const struct ibv_device_attr *dev = &ep->base.domain->dev_attr;
	size_t tx = info->tx_attr && info->tx_attr->size ? info->tx_attr->size :
		    ibf_params.tx_size;
	size_t rx = info->rx_attr && info->rx_attr->size ? info->rx_attr->size :
		    ibf_params.rx_size;

	ep->tx.size = ibf_ring_size(tx, dev->max_qp_wr);
	ep->rx.size = ibf_ring_size(rx, dev->max_qp_wr);
	ep->tx_signal_every = IBF_MAX(ep->tx.size / 2, 1);
	ep->post_trace = ibf_post_trace_on();	/* once: not per post */
	ep->tx_iov_limit = info->tx_attr && info->tx_attr->iov_limit ?
			   info->tx_attr->iov_limit : ibf_params.tx_iov_limit;
	ep->rx_iov_limit = info->rx_attr && info->rx_attr->iov_limit ?
			   info->rx_attr->iov_limit : ibf_params.rx_iov_limit;
	ep->tx_iov_limit = IBF_MIN(IBF_MIN(ep->tx_iov_limit, (size_t)dev->max_sge),
				   IBF_MAX_SGE);
	ep->rx_iov_limit = IBF_MIN(IBF_MIN(ep->rx_iov_limit, (size_t)dev->max_sge),
				   IBF_MAX_SGE);
	ep->inject_size = info->tx_attr ? info->tx_attr->inject_size : 0;
	ep->base.tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
	ep->base.rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ep->min_multi_recv = IBF_MIN_MULTI_RECV;
}

int ibf_ep_open(struct fid_domain *domain_fid, struct fi_info *info,
		struct fid_ep **ep_fid, void *context)
{
	struct ibf_domain *dom = to_ibf_domain(domain_fid);
	struct ibf_connreq *req = NULL;
	struct ibf_ep *ep;
	int ret;

	if (!info || !ep_fid || (info->ep_attr && info->ep_attr->type != FI_EP_MSG &&
				 info->ep_attr->type != FI_EP_UNSPEC)) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_endpoint needs an FI_EP_MSG info "
			 "from fi_getinfo or FI_CONNREQ\n");
		return -FI_EINVAL;
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->base.domain = dom;
	ep->base.ops = &ibf_ep_base_ops;
	ep->owner.on_event = ibf_ep_on_cm_event;
	ibf_lock_init(&ep->tx_lock, ibf_threading_needs_lock(dom->info->domain_attr->threading));
	ibf_lock_init(&ep->rx_lock, ep->tx_lock.enabled);
	ep->base.info = fi_dupinfo(info);
	if (!ep->base.info) {
		ret = -FI_ENOMEM;
		goto err;
	}
	ibf_ep_size(ep, info);
	ret = ibf_ep_take_id(ep, info, &req);
	if (ret)
		goto err;
	if (ep->id->verbs && ep->id->verbs != dom->verbs) {
		IBF_WARN(FI_LOG_EP_CTRL, "the endpoint's address is on %s, the "
			 "domain is %s: open the domain from this fi_info\n",
			 ibv_get_device_name(ep->id->verbs->device),
			 dom->info->domain_attr->name);
		ret = -FI_EINVAL;
		goto err;
	}
	ret = ibf_ring_init(&ep->tx, ep->tx.size);
	if (!ret)
		ret = ibf_ring_init(&ep->rx, ep->rx.size);
	if (ret)
		goto err;
	if (info->caps & FI_MULTI_RECV) {
		ret = ibf_ep_rx_wait_init(ep);
		if (ret)
			goto err;
	}
	ep->base.ep_fid.fid.fclass = FI_CLASS_EP;
	ep->base.ep_fid.fid.context = context;
	ep->base.ep_fid.fid.ops = &ibf_ep_fi_ops;
	ep->base.ep_fid.ops = &ibf_ep_ops;
	ep->base.ep_fid.cm = &ibf_ep_cm_ops;
	ep->base.ep_fid.msg = &ibf_msg_ops;
	ep->base.ep_fid.rma = &ibf_rma_ops;
	ep->base.ep_fid.tagged = &ibf_no_tagged_ops;
	/* Refused without FI_ATOMIC. */
	ep->base.ep_fid.atomic = &ibf_msg_atomic_ops;
	if (info->caps & (FI_TAGGED | FI_ATOMIC)) {
		/* Messages framed, received into bounces: see ibf_msg_tagged.c. */
		ep->tag_mode = 1;	/* its state is set up at fi_enable */
		ep->base.ep_fid.msg = &ibf_tagged_msg_ops;
	}
	if (info->caps & FI_TAGGED)
		ep->base.ep_fid.tagged = &ibf_tagged_ops;
	if (req) {
		/* The endpoint consumes the request (fi_reject would free it). */
		ep->id->context = &ep->owner;
		free(req);
	}
	ibf_ref_get(&dom->ref);
	*ep_fid = &ep->base.ep_fid;
	return 0;
err:
	if (ep->id && !req)
		rdma_destroy_id(ep->id);
	free(ep->tx.ops);
	free(ep->rx.ops);
	free(ep->rx_wait);
	fi_freeinfo(ep->base.info);
	free(ep);
	return ret;
}
