/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM endpoints: life cycle (see ibf_rdm.h for the design).
 *
 * fi_endpoint binds and listens on an rdma_cm id, so fi_getname works at
 * once; fi_ep_bind records the AV and CQs; fi_enable makes the SRQ, the
 * operations and their registered buffers, posts the bounces and starts
 * the connection thread; fi_close stops the thread, disconnects every
 * peer, takes the endpoint's completions out of the CQs and frees it all.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibf_noops.h"
#include "ibf_rdm.h"

/* ---- AV: fi_addrs that go away ---- */

/* fi_av_remove took addr out of the endpoint's AV (av->eps_lock held). */
static void ibf_rdm_forget_addr(struct ibf_av_user *u, fi_addr_t addr)
{
	struct ibf_rdm_ep *ep = container_of(u, struct ibf_rdm_ep, av_user);

	ibf_lock_acquire(&ep->lock);
	if (addr < ep->npeers && ep->peers[addr]) {
		/* Another of the peer's fi_addrs, if any, is found again
		 * when next needed (ibf_rdm_conn_addr). */
		if (ep->peers[addr]->fi_addr == addr)
			ep->peers[addr]->fi_addr = FI_ADDR_NOTAVAIL;
		ep->peers[addr] = NULL;
		ibf_rdm_conns_reclaim_soon(&ep->as_conns);
	}
	ibf_lock_release(&ep->lock);
}

static void ibf_rdm_av_attach(struct ibf_rdm_ep *ep)
{
	ep->av_user = (struct ibf_av_user){ .forget = ibf_rdm_forget_addr };
	ibf_av_attach(ep->av, &ep->av_user);
}

static void ibf_rdm_av_detach(struct ibf_rdm_ep *ep)
{
	ibf_av_detach(ep->av, &ep->av_user);
}

/* ---- fi_ops ---- */

/* fi_ep_bind of what only an RDM endpoint takes (CQs and counters go
 * through ibf_ep_base_bind): its AV, and an EQ, which it accepts and
 * reports nothing to (connections are ibfab's business). */
static int ibf_rdm_bind_own(struct ibf_ep_base *b, struct fid *bfid,
			    uint64_t flags)
{
	struct ibf_rdm_ep *ep = container_of(b, struct ibf_rdm_ep, base);

	switch (bfid->fclass) {
	case FI_CLASS_AV:
		if (ep->av) {
			IBF_WARN(FI_LOG_EP_CTRL, "an AV is already bound\n");
			return -FI_EINVAL;
		}
		ep->av = container_of(bfid, struct ibf_av, av_fid.fid);
		ibf_ref_get(&ep->av->ref);
		ibf_rdm_av_attach(ep);
		return 0;
	case FI_CLASS_EQ:
		return 0;
	default:
		return -FI_ENOSYS;
	}
}

static struct ibf_cq *ibf_rdm_send_cq(struct ibf_rdm_ep *ep)
{
	return ep->base.tx_cq ? ep->base.tx_cq : ep->base.rx_cq;
}

static struct ibf_cq *ibf_rdm_recv_cq(struct ibf_rdm_ep *ep)
{
	return ep->base.rx_cq ? ep->base.rx_cq : ep->base.tx_cq;
}

static int ibf_rdm_channel_fd(const struct ibf_rdm_ep *ep)
{
	return ep->channel_cq ? ep->channel_cq->fd : -1;
}

/* Soft completion room in the user's CQs, and their progress of us. */
static int ibf_rdm_attach_cqs(struct ibf_rdm_ep *ep)
{
	struct ibf_cq *scq = ibf_rdm_send_cq(ep), *rcq = ibf_rdm_recv_cq(ep);
	int fd = ibf_rdm_channel_fd(ep), ret;

	ret = ibf_cq_soft_reserve(scq, ep->ntx);
	if (ret)
		return ret;
	ret = ibf_cq_soft_reserve(rcq, ep->nrx);
	if (ret)
		goto err_rsoft;
	ret = ibf_cq_add_ep(scq, &ep->hook, fd);
	if (ret)
		goto err_add;
	if (rcq != scq && (ret = ibf_cq_add_ep(rcq, &ep->hook, fd))) {
		ibf_cq_del_ep(scq, &ep->hook, fd);
		goto err_add;
	}
	ep->soft_reserved = 1;
	return 0;
err_add:
	ibf_cq_soft_unreserve(rcq, ep->nrx);
err_rsoft:
	ibf_cq_soft_unreserve(scq, ep->ntx);
	return ret;
}

/* The CQs stop progressing ep (their locks: no progress of it is under
 * way once this returns). */
static void ibf_rdm_unhook_cqs(struct ibf_rdm_ep *ep)
{
	struct ibf_cq *scq = ibf_rdm_send_cq(ep), *rcq = ibf_rdm_recv_cq(ep);
	int fd = ibf_rdm_channel_fd(ep);

	if (!ep->soft_reserved)
		return;
	ibf_cq_del_ep(scq, &ep->hook, fd);
	if (rcq != scq)
		ibf_cq_del_ep(rcq, &ep->hook, fd);
}

/* The CQs' room reserved for ep's completions goes back (drained). */
static void ibf_rdm_unreserve_cqs(struct ibf_rdm_ep *ep)
{
	struct ibf_cq *scq = ibf_rdm_send_cq(ep), *rcq = ibf_rdm_recv_cq(ep);

	if (!ep->soft_reserved)
		return;
	ibf_cq_soft_unreserve(rcq, ep->nrx);
	ibf_cq_soft_unreserve(scq, ep->ntx);
	ep->soft_reserved = 0;
}

/*
 * The endpoint's own CQ, which every QP of it completes to, sized so it
 * cannot overflow; with a completion channel if a user CQ can be waited on.
 */
static int ibf_rdm_hcq_open(struct ibf_rdm_ep *ep)
{
	/* Room for every op's completion, and the drains of dead QPs. */
	int size = (int)(ibf_rdm_sq_need(ep) + ep->nbounce) + IBF_RDM_DRAINS;

	if (ep->auto_progress || (ep->base.tx_cq && ep->base.tx_cq->channel) ||
	    (ep->base.rx_cq && ep->base.rx_cq->channel) || ibf_ep_base_cntr_waits(&ep->base) ||
	    ep->rma_event) {	/* a region's counter may sleep on us */
		ep->channel_cq = ibv_create_comp_channel(ep->base.domain->verbs);
		if (!ep->channel_cq)
			return ibf_errno_to_fi(errno);
		/* Events are taken until there are none: never block on it. */
		if (ibf_fd_set_nonblock(ep->channel_cq->fd))
			return -FI_EOTHER;
	}
	ep->hcq = ibv_create_cq(ep->base.domain->verbs, size, ep, ep->channel_cq, 0);
	ep->hcq_need = size;
	if (!ep->hcq) {
		IBF_WARN(FI_LOG_EP_CTRL, "ibv_create_cq(%d): %s\n", size,
			 strerror(errno));
		return ibf_errno_to_fi(errno);
	}
	return 0;
}

static void ibf_rdm_hcq_close(struct ibf_rdm_ep *ep)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (ep->channel_cq && !ibv_get_cq_event(ep->channel_cq, &ev_cq, &ev_ctx))
		ep->cq_events++;
	if (ep->hcq) {
		ibv_ack_cq_events(ep->hcq, ep->cq_events);
		ibv_destroy_cq(ep->hcq);
	}
	if (ep->channel_cq)
		ibv_destroy_comp_channel(ep->channel_cq);
}

static int ibf_rdm_enable(struct ibf_rdm_ep *ep)
{
	struct ibf_domain *dom = ep->base.domain;
	struct ibv_srq_init_attr srq_attr = { 0 };
	enum fi_threading threading = dom->info->domain_attr->threading;
	int ret;

	if (ep->base.enabled)
		return 0;
	if (!ep->av || (!ep->base.tx_cq && !ep->base.rx_cq)) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_enable: bind an AV and CQs to the "
			 "RDM endpoint first\n");
		return -FI_ENOAV;
	}
	/*
	 * Two CQs may be read at once by two threads, each progressing us;
	 * with FI_PROGRESS_AUTO our own thread progresses us too.
	 */
	ep->auto_progress = dom->info->domain_attr->data_progress == FI_PROGRESS_AUTO;
	if (ep->auto_progress || (threading != FI_THREAD_DOMAIN &&
	    ep->base.tx_cq && ep->base.rx_cq && ep->base.tx_cq != ep->base.rx_cq))
		ep->lock.enabled = 1;
	/* Decided for good: a CQ's read then takes the whole read through a
	 * hook that does not even test for a lock the level needs none of. */
	if (!ep->lock.enabled) {
		ep->hook.sole_read = ibf_rdm_sole_read_unlocked;
		ibf_cq_sole_ops_derive(&ep->sole_cq_ops, ibf_rdm_cq_read_unlocked);
		ep->hook.sole_ops = &ep->sole_cq_ops;
	}
	srq_attr.attr.max_wr = ep->nbounce;
	srq_attr.attr.max_sge = 1;
	ep->srq = ibv_create_srq(dom->pd, &srq_attr);
	if (!ep->srq) {
		IBF_WARN(FI_LOG_EP_CTRL, "ibv_create_srq(%u): %s\n", ep->nbounce,
			 strerror(errno));
		return ibf_errno_to_fi(errno);
	}
	ret = ibf_rdm_hcq_open(ep);
	if (ret)
		return ret;
	ret = ibf_rdm_ops_init(&ep->as_ops);
	if (ret)
		return ret;
	ret = ibf_rdm_attach_cqs(ep);
	if (ret)
		return ret;
	/* Counters progress us when read, and wake on our channel. */
	ret = ibf_ep_base_attach_cntrs(&ep->base, &ep->hook,
				       (const int[2]){ ibf_rdm_channel_fd(ep), -1 });
	if (ret)
		return ret;
	if (ep->rma_event) {
		ret = ibf_domain_event_ep_add(dom, &ep->hook,
					      ibf_rdm_channel_fd(ep));
		if (ret)
			return ret;
		ep->event_added = 1;
	}
	ret = ibf_rdm_bounces_post(&ep->as_ops);
	if (ret)
		return ret;
	ret = ibf_rdm_cm_start(&ep->as_conns);
	if (ret)
		return ret;
	if (ep->mw_ok && ibf_rdm_binder_open(&ep->binder, dom->pd,
					     ep->listen_id->port_num))
		ep->mw_ok = 0;		/* each send registers: said there */
	ep->base.enabled = 1;
	return 0;
}

static int ibf_rdm_enable_own(struct ibf_ep_base *b)
{
	return ibf_rdm_enable(container_of(b, struct ibf_rdm_ep, base));
}

static const struct ibf_ep_base_ops ibf_rdm_base_ops = {
	.name = "FI_EP_RDM",
	.binds = "CQs, counters, an AV, an EQ",
	.ncntr = IBF_CNTR_KINDS,
	.bind = ibf_rdm_bind_own,
	.enable = ibf_rdm_enable_own,
};

/*
 * Closing: the QPs are in the error state, so every send-side request
 * completes (flushed) into our CQ; wait for them, for at most a second,
 * then take our soft completions out of the user's CQs.
 */
static int ibf_rdm_never(const struct ibv_wc *wc, void *arg)
{
	return 0;
}

static int ibf_rdm_idle(void *arg)
{
	return 0;
}

static int ibf_rdm_drain_soft(const struct ibf_cq_soft_entry *s, void *arg)
{
	struct ibf_rdm_ep *ep = arg;

	return s->room == &ep->tx_room || s->room == &ep->rx_room;
}

static void ibf_rdm_drain(struct ibf_rdm_ep *ep)
{
	struct ibf_cq *scq = ibf_rdm_send_cq(ep), *rcq = ibf_rdm_recv_cq(ep);
	struct ibf_drain d = {
		.mine = ibf_rdm_never,
		.busy = ibf_rdm_idle,
		.soft_mine = ibf_rdm_drain_soft,
		.arg = ep,
	};
	struct ibv_wc wc[IBF_CQ_BATCH];
	struct ibf_rdm_op *op;
	struct timespec deadline;
	int n, i;

	ibf_deadline(&deadline, 1000);
	while (__atomic_load_n(&ep->sq_posted, __ATOMIC_RELAXED) > 0 &&
	       ibf_ms_left(&deadline)) {
		n = ibv_poll_cq(ep->hcq, IBF_CQ_BATCH, wc);
		for (i = 0; i < n; i++) {
			op = container_of((struct ibf_op *)(uintptr_t)wc[i].wr_id,
					  struct ibf_rdm_op, op);
			if (!op->is_bounce || op->state != IBF_RDM_BOUNCE_POSTED)
				__atomic_sub_fetch(&ep->sq_posted, 1, __ATOMIC_RELAXED);
		}
	}
	ibf_cq_drain(scq, &d);
	if (rcq != scq)
		ibf_cq_drain(rcq, &d);
}

static void ibf_rdm_mq_fini(struct ibf_rdm_ep *ep)
{
	ibf_mq_fini(&ep->recv_msg);
	ibf_mq_fini(&ep->recv_tag);
	ibf_mq_fini(&ep->unexp_msg);
	ibf_mq_fini(&ep->unexp_tag);
}

static int ibf_rdm_close(struct fid *fid)
{
	struct ibf_rdm_ep *ep = container_of(fid, struct ibf_rdm_ep, base.ep_fid.fid);

	if (ep->stats.writes || ep->stats.reads || ep->stats.atomics ||
	    ep->stats.atomics_applied)
		IBF_INFO(FI_LOG_EP_CTRL, "endpoint closes: %llu RMA writes, "
			 "%llu RMA reads, %llu atomics sent, %llu atomics "
			 "applied for peers\n",
			 (unsigned long long)ep->stats.writes,
			 (unsigned long long)ep->stats.reads,
			 (unsigned long long)ep->stats.atomics,
			 (unsigned long long)ep->stats.atomics_applied);
	if (ep->stats.rndv)
		IBF_INFO(FI_LOG_EP_CTRL, "endpoint closes: %llu rendezvous "
			 "sends, %llu of them through memory windows (%llu "
			 "windows freed, not unbound)\n",
			 (unsigned long long)ep->stats.rndv,
			 (unsigned long long)ep->stats.rndv_windows,
			 (unsigned long long)ep->mw_freed);
	ibf_rdm_cm_stop(&ep->as_conns);	/* disconnects; QPs in the error state */
	/*
	 * Nothing else may progress ep from here on, before the drain polls
	 * its CQ alone: not its CQs, its counters or a region counter of the
	 * domain (FI_RMA_EVENT), read on another thread.
	 */
	ibf_rdm_unhook_cqs(ep);
	if (ep->event_added)
		ibf_domain_event_ep_del(ep->base.domain, &ep->hook);
	ibf_ep_base_detach_cntrs(&ep->base, &ep->hook);
	if (ep->soft_reserved)
		ibf_rdm_drain(ep);
	ibf_rdm_unreserve_cqs(ep);
	ibf_rdm_ops_windows_free(&ep->as_ops);	/* unbound, freed; binder gone */
	ibf_rdm_cm_destroy(&ep->as_conns);	/* QPs and ids */
	ibf_rdm_hcq_close(ep);
	if (ep->srq)
		ibv_destroy_srq(ep->srq);
	ibf_rdm_mq_fini(ep);
	ibf_rdm_ops_fini(&ep->as_ops);
	if (ep->av) {
		ibf_rdm_av_detach(ep);
		ibf_ref_put(&ep->av->ref);
	}
	free(ep->peers);
	pthread_mutex_destroy(&ep->cm_lock);
	ibf_lock_fini(&ep->lock);
	ibf_ep_base_close(&ep->base);
	free(ep);
	return 0;
}

static struct fi_ops ibf_rdm_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_rdm_close,
	.bind = ibf_ep_base_bind,
	.control = ibf_ep_base_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static int ibf_rdm_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct ibf_rdm_ep *ep = container_of(fid, struct ibf_rdm_ep, base.ep_fid.fid);
	size_t room;

	if (!addrlen)
		return -FI_EINVAL;
	room = *addrlen;
	*addrlen = ep->namelen;
	if (!addr || room < ep->namelen)
		return -FI_ETOOSMALL;
	memcpy(addr, &ep->name, ep->namelen);
	return 0;
}

static int ibf_rdm_setname(fid_t fid, void *addr, size_t addrlen)
{
	IBF_WARN(FI_LOG_EP_CTRL, "fi_setname: an RDM endpoint's name is its "
		 "listening address; give it through fi_getinfo's src_addr\n");
	return -FI_ENOSYS;
}

static struct fi_ops_cm ibf_rdm_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = ibf_rdm_setname,
	.getname = ibf_rdm_getname,
	.getpeer = ibf_no_getpeer,
	.connect = ibf_no_connect,
	.listen = ibf_no_listen,
	.accept = ibf_no_accept,
	.reject = ibf_no_reject,
	.shutdown = ibf_no_shutdown,
	.join = ibf_no_join,
};

static ssize_t ibf_rdm_ep_cancel(fid_t fid, void *context)
{
	return ibf_rdm_recv_cancel(&container_of(fid, struct ibf_rdm_ep,
						 base.ep_fid.fid)->as_proto, context);
}

static int ibf_rdm_getopt(fid_t fid, int level, int optname, void *optval,
			  size_t *optlen)
{
	struct ibf_rdm_ep *ep = container_of(fid, struct ibf_rdm_ep, base.ep_fid.fid);

	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen)
		return -FI_EINVAL;
	return ibf_getopt_size(optval, optlen, ep->min_multi_recv);
}

static int ibf_rdm_setopt(fid_t fid, int level, int optname,
			  const void *optval, size_t optlen)
{
	struct ibf_rdm_ep *ep = container_of(fid, struct ibf_rdm_ep, base.ep_fid.fid);

	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t)) {
		IBF_WARN(FI_LOG_EP_CTRL, "FI_OPT_MIN_MULTI_RECV takes a size_t\n");
		return -FI_EINVAL;
	}
	ep->min_multi_recv = *(const size_t *)optval;
	return 0;
}

static struct fi_ops_ep ibf_rdm_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ibf_rdm_ep_cancel,
	.getopt = ibf_rdm_getopt,
	.setopt = ibf_rdm_setopt,
	.tx_ctx = (void *)ibf_no_ctx,
	.rx_ctx = (void *)ibf_no_ctx,
	.rx_size_left = ibf_no_size_left,
	.tx_size_left = ibf_no_size_left,
};

/*
 * The endpoint's CQ holds every request of it and each QP's send queue
 * every send-side one: halve the pools until both fit the device (rxe
 * allows 32767 CQ entries), rather than fail to open.
 */
static void ibf_rdm_clamp(struct ibf_rdm_ep *ep, const struct ibv_device_attr *da)
{
	size_t max_cqe = da->max_cqe > 0 ? (size_t)da->max_cqe : 4096;
	size_t max_wr = da->max_qp_wr > 0 ? (size_t)da->max_qp_wr : 4096;

	while ((ibf_rdm_sq_need(ep) + ep->nbounce + IBF_RDM_DRAINS > max_cqe ||
		ibf_rdm_sq_need(ep) + 1 > max_wr) &&
	       (ep->ntx > 16 || ep->nrx > 16 || ep->nbounce > 16)) {
		ep->ntx = IBF_MAX(ep->ntx / 2, 16);
		ep->nrx = IBF_MAX(ep->nrx / 2, 16);
		ep->nbounce = IBF_MAX(ep->nbounce / 2, 16);
		IBF_INFO(FI_LOG_EP_CTRL, "queues clamped to the device: %u sends, "
			 "%u receives, %u eager buffers\n", ep->ntx, ep->nrx,
			 ep->nbounce);
	}
}

/* Queue and buffer sizes from the fi_info, clamped to the device. */
static void ibf_rdm_size(struct ibf_rdm_ep *ep, const struct fi_info *info)
{
	const struct ibv_device_attr *da = &ep->base.domain->dev_attr;
	size_t tx = info->tx_attr && info->tx_attr->size ? info->tx_attr->size :
		    ibf_params.tx_size;
	size_t rx = info->rx_attr && info->rx_attr->size ? info->rx_attr->size :
		    IBF_RDM_RX_SIZE;

	ep->ntx = (uint32_t)IBF_MIN(tx, 16384);
	ep->nrx = (uint32_t)IBF_MIN(rx, 16384);
	/* Eager buffers: FI_IBFAB_RX_SIZE of them, however many receives. */
	ep->nbounce = (uint32_t)IBF_MIN(IBF_MIN(rx, ibf_params.rx_size),
					(size_t)(da->max_srq_wr ?
						 da->max_srq_wr : 256));
	ep->eager_size = ibf_params.eager_size;
	/* A slot: header, payload, and room for an RMA notice's note. */
	ep->note_off = sizeof(struct ibf_rdm_hdr) +
		       IBF_MAX(ep->eager_size, sizeof(struct ibf_rdm_rts));
	ep->slot = ep->note_off + sizeof(struct ibf_rdm_rma_note);
	ep->slot = (ep->slot + 63) & ~(size_t)63;
	ep->inject_size = info->tx_attr && info->tx_attr->inject_size ?
			  info->tx_attr->inject_size : ep->eager_size;
	if (ep->inject_size > ep->eager_size)
		ep->inject_size = ep->eager_size;
	ep->tx_iov_limit = IBF_MIN(info->tx_attr && info->tx_attr->iov_limit ?
				   info->tx_attr->iov_limit : IBF_RDM_IOV, IBF_RDM_IOV);
	ep->rx_iov_limit = IBF_MIN(info->rx_attr && info->rx_attr->iov_limit ?
				   info->rx_attr->iov_limit : IBF_RDM_IOV, IBF_RDM_IOV);
	ep->max_inline = 256;	/* a first guess; the first QP says */
	ep->min_multi_recv = IBF_MIN_MULTI_RECV;
	ep->rma_event = !!(info->caps & FI_RMA_EVENT);
	ep->atomic_target = !!(info->caps & FI_ATOMIC);
	/* Windows of type 1, bound on the endpoint's own QP at fi_enable. */
	ep->mw_ok = ibf_rdm_windows_wanted(ibf_params.rdm_rndv_windows, da);
	ep->base.tx_op_flags = info->tx_attr ?
			  info->tx_attr->op_flags & ~IBF_RDM_NO_COMP : 0;
	ep->base.rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
	ibf_rdm_clamp(ep, da);
	/*
	 * Every send is signalled, so a QP's send queue need hold only what
	 * is in flight to that one peer; posts beyond it wait for slots
	 * (conn->credits), so the queue, device memory spent per peer, can
	 * be far smaller than all the endpoint's operations.
	 */
	ep->sq_depth = (uint32_t)IBF_MIN(ibf_rdm_sq_need(ep), ibf_params.rdm_qp_depth);
}

/*
 * Whether the endpoint's data path takes ep->lock.  Reading a CQ or a
 * counter progresses the endpoints bound to it, so the lock is needed
 * wherever such a read may run on another thread than the endpoint's own
 * calls: under FI_THREAD_ENDPOINT (and FID, SAFE), where CQs and counters
 * are the application's to read from any thread; under
 * FI_THREAD_COMPLETION only for an FI_RMA_EVENT endpoint, which a region
 * counter of the domain progresses though nothing associates it with the
 * endpoint (fi_domain(3) has the application serialize an endpoint with
 * its own CQs and counters).  FI_THREAD_DOMAIN serializes everything.
 */
static int ibf_rdm_lock_needed(enum fi_threading threading, int rma_event)
{
	if (threading == FI_THREAD_DOMAIN)
		return 0;
	if (threading == FI_THREAD_COMPLETION)
		return rma_event;
	return 1;
}

int ibf_rdm_ep_open(struct fid_domain *domain_fid, struct fi_info *info,
		    struct fid_ep **ep_fid, void *context)
{
	struct ibf_domain *dom = to_ibf_domain(domain_fid);
	struct ibf_rdm_ep *ep;
	int ret;

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -FI_ENOMEM;
	ep->base.domain = dom;
	ep->base.ops = &ibf_rdm_base_ops;
	ep->hook = (struct ibf_progress){ ibf_rdm_progress, ibf_rdm_trywait,
					  ibf_rdm_sole_read };
	ep->up = &ibf_rdm_proto_upcalls;
	ep->stop_fd = -1;
	ep->wake_fd = -1;
	ibf_lock_init(&ep->lock, ibf_rdm_lock_needed(dom->info->domain_attr->threading,
						     !!(info->caps & FI_RMA_EVENT)));
	pthread_mutex_init(&ep->cm_lock, NULL);
	ep->base.info = fi_dupinfo(info);
	if (!ep->base.info) {
		ret = -FI_ENOMEM;
		goto err;
	}
	ibf_rdm_size(ep, info);
	/* Buckets: one per receive or eager buffer there can be. */
	if (ibf_mq_init(&ep->recv_msg, ep->nrx) || ibf_mq_init(&ep->recv_tag, ep->nrx) ||
	    ibf_mq_init(&ep->unexp_msg, ep->nbounce) ||
	    ibf_mq_init(&ep->unexp_tag, ep->nbounce)) {
		ret = -FI_ENOMEM;
		goto err;
	}
	ep->base.ep_fid.fid.fclass = FI_CLASS_EP;
	ep->base.ep_fid.fid.context = context;
	ep->base.ep_fid.fid.ops = &ibf_rdm_fi_ops;
	ep->base.ep_fid.ops = &ibf_rdm_ep_ops;
	ep->base.ep_fid.cm = &ibf_rdm_cm_ops;
	ep->base.ep_fid.msg = &ibf_rdm_msg_ops;
	ep->base.ep_fid.tagged = &ibf_rdm_tagged_ops;
	ep->base.ep_fid.rma = &ibf_rdm_rma_ops;
	ep->base.ep_fid.atomic = &ibf_rdm_atomic_ops;
	ibf_ref_get(&dom->ref);
	ret = ibf_rdm_cm_listen(&ep->as_conns, info);
	if (ret) {
		ibf_rdm_close(&ep->base.ep_fid.fid);
		return ret;
	}
	*ep_fid = &ep->base.ep_fid;
	return 0;
err:
	ibf_rdm_mq_fini(ep);
	fi_freeinfo(ep->base.info);
	pthread_mutex_destroy(&ep->cm_lock);
	ibf_lock_fini(&ep->lock);
	free(ep);
	return ret;
}
