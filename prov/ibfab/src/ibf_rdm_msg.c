/*
 * RDM messaging: sends, receives, tag matching, rendezvous (ibf_rdm.h).
 *
 * Sending: a message of at most eager_size bytes is copied behind its
 * header into the op's registered buffer, so the application needs no
 * registration and the buffer is free on return (which is what makes
 * fi_inject possible up to eager_size).  A larger one goes by rendezvous
 * (ibf_rdm_rndv.c).
 *
 * Receiving: each arrival lands in a bounce of the SRQ and is matched
 * against the posted receives of its kind (tagged or not) in posting
 * order; if none matches it waits in its bounce, in arrival order, for a
 * receive (or a peek) that does.
 *
 * Every op completes exactly once, after the last work request that names
 * it has completed, so its slot is never reused under the device.
 * Called with ep->lock held unless said otherwise.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm.h"

#define IBF_HDR sizeof(struct ibf_rdm_hdr)

static struct ibf_cq *ibf_rdm_op_cq(struct ibf_rdm_op *op)
{
	struct ibf_rdm_ep *ep = op->ep;
	int tx = op < ep->ops + ep->ntx;

	if (tx)
		return ep->tx_cq ? ep->tx_cq : ep->rx_cq;
	return ep->rx_cq ? ep->rx_cq : ep->tx_cq;
}

void ibf_rdm_unregister(struct ibf_rdm_op *op)
{
	while (op->nmr)
		ibv_dereg_mr(op->mr[--op->nmr]);
}

static void ibf_rdm_op_free(struct ibf_rdm_op *op)
{
	struct ibf_rdm_ep *ep = op->ep;

	op->state = IBF_RDM_FREE;
	if (op < ep->ops + ep->ntx) {
		op->next = ep->tx_free;
		ep->tx_free = op;
	} else {
		op->next = ep->rx_free;
		ep->rx_free = op;
	}
}

/* err: 0 or -FI_E*; the CQ reports it positive, as fi_cq_readerr does. */
static void ibf_rdm_multi_drain(struct ibf_rdm_ep *ep);

void ibf_rdm_complete(struct ibf_rdm_op *op, int err)
{
	ibf_rdm_unregister(op);
	if (err && !op->op.context && !op->op.user_comp) {
		/* An inject: it has no context to report an error with. */
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a send without "
			       "context failed: %s\n", fi_strerror(-err));
		ibf_rdm_op_free(op);
		return;
	}
	if (!err && !op->op.user_comp) {
		ibf_rdm_op_free(op);
		if (unlikely(op->ep->multi_waiting))
			ibf_rdm_multi_drain(op->ep);
		return;
	}
	op->op.err = -err;
	op->state = IBF_RDM_DONE;
	ibf_cq_soft_push(ibf_rdm_op_cq(op), &op->op);
}

/* The CQ has handed the completion out (CQ lock held, not ep->lock). */
void ibf_rdm_release(struct ibf_op *o)
{
	struct ibf_rdm_op *op = container_of(o, struct ibf_rdm_op, op);
	struct ibf_rdm_ep *ep = op->ep;

	ibf_lock_acquire(&ep->lock);
	ibf_rdm_op_free(op);
	if (unlikely(ep->multi_waiting))
		ibf_rdm_multi_drain(ep);
	ibf_lock_release(&ep->lock);
}

size_t ibf_rdm_iov_len(const struct iovec *iov, size_t count)
{
	size_t i, len = 0;

	for (i = 0; i < count; i++)
		len += iov[i].iov_len;
	return len;
}

static void ibf_copy_from_iov(uint8_t *dst, const struct iovec *iov,
			      size_t count)
{
	size_t i;

	for (i = 0; i < count; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}

/* Copy len bytes into the iovs; returns how many fitted. */
static size_t ibf_copy_to_iov(const struct iovec *iov, size_t count,
			      const uint8_t *src, size_t len)
{
	size_t i, n, done = 0;

	for (i = 0; i < count && done < len; i++) {
		n = IBF_MIN(iov[i].iov_len, len - done);
		memcpy(iov[i].iov_base, src + done, n);
		done += n;
	}
	return done;
}

/* ---- sending ---- */

static ssize_t ibf_rdm_send(struct ibf_rdm_ep *ep, const struct iovec *iov,
			    size_t count, fi_addr_t dest, uint64_t tag,
			    uint64_t data, uint64_t flags, void *context,
			    int tagged)
{
	struct ibf_rdm_conn *conn;
	struct ibf_rdm_hdr *hdr;
	struct ibf_rdm_op *op;
	size_t len;
	ssize_t ret;

	if (unlikely(count > ep->tx_iov_limit || (count && !iov))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%zu iovs: tx iov_limit "
			       "is %zu\n", count, ep->tx_iov_limit);
		return -FI_EINVAL;
	}
	len = ibf_rdm_iov_len(iov, count);
	if (unlikely((flags & FI_INJECT) && len > ep->inject_size)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "inject of %zu bytes: "
			       "inject_size is %zu\n", len, ep->inject_size);
		return -FI_EINVAL;
	}
	if (unlikely(!ep->enabled))
		return -FI_EOPBADSTATE;
	ibf_lock_acquire(&ep->lock);
	conn = likely(dest < ep->npeers) ? ep->peers[dest] : NULL;
	if (unlikely(!conn) && (ret = ibf_rdm_conn_get(ep, dest, &conn)))
		goto out;
	op = ibf_rdm_tx_get(ep);
	if (unlikely(!op)) {
		ret = -FI_EAGAIN;
		goto out;
	}
	hdr = (void *)op->mem;
	hdr->tag = tag;
	hdr->data = data;
	hdr->flags = (tagged ? IBF_RDM_F_TAGGED : 0) |
		     ((flags & FI_REMOTE_CQ_DATA) ? IBF_RDM_F_DATA : 0);
	op->conn = conn;
	op->read_err = 0;
	op->op.context = context;
	op->op.flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	op->op.len = len;
	op->op.buf = NULL;
	op->op.data = 0;
	op->op.tag = 0;
	op->op.user_comp = !(flags & IBF_RDM_NO_COMP) &&
			   (!ep->tx_selective || (flags & FI_COMPLETION));
	if (len <= ep->eager_size) {
		hdr->type = IBF_RDM_EAGER;
		ibf_copy_from_iov(op->mem + IBF_HDR, iov, count);
		op->wire_len = (uint32_t)(IBF_HDR + len);
		ret = 0;
	} else {
		ret = ibf_rdm_rts_build(ep, op, iov, count, len);
	}
	if (likely(!ret)) {
		ret = -FI_ENOTCONN;
		if (likely(__atomic_load_n(&conn->state, __ATOMIC_ACQUIRE) ==
			   IBF_CONN_CONNECTED))
			ret = ibf_rdm_post_built(conn, op);
		/* Not up, or it ended since we looked: queue and (re)connect. */
		if (ret == -FI_ENOTCONN)
			ret = ibf_rdm_conn_submit(conn, op);
	}
	if (unlikely(ret)) {
		ibf_rdm_unregister(op);
		ibf_rdm_op_free(op);
	}
out:
	ibf_lock_release(&ep->lock);
	return ret;
}

/* A send's own completion (or a flush): eager done, RTS half done. */
static void ibf_rdm_on_send(struct ibf_rdm_op *op, const struct ibv_wc *wc)
{
	int err = -ibf_wc_status_to_fi(wc->status);

	if (op->state == IBF_RDM_TX_RTS) {
		if (err) {
			op->state = IBF_RDM_TX;	/* a late FIN is ignored */
			ibf_rdm_complete(op, err);
		} else if (--op->reads_left == 0) {
			ibf_rdm_complete(op, op->read_err);
		}
		return;
	}
	ibf_rdm_complete(op, err);
}

/* ---- receiving ---- */

static struct ibf_rdm_op *ibf_rdm_of(struct ibf_mq_entry *e)
{
	return e ? container_of(e, struct ibf_rdm_op, me) : NULL;
}

/*
 * FI_DIRECTED_RECV: the peer a receive from src wants (ep->lock held), or
 * NULL for any.  A peer inserted into the AV more than once (an MPI library
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
	if (!(ep->info->caps & FI_DIRECTED_RECV) || src == FI_ADDR_UNSPEC ||
	    src == FI_ADDR_NOTAVAIL)
		return 0;
	conn = likely(src < ep->npeers) ? ep->peers[src] : NULL;
	if (unlikely(!conn) && (ret = ibf_rdm_conn_get(ep, src, &conn)))
		return ret;
	*want = conn->peer_key;
	return 0;
}

/* The first held message receive r takes, in arrival order, or NULL. */
static struct ibf_rdm_op *ibf_rdm_find(struct ibf_mq *unexp,
				       const struct ibf_rdm_op *r)
{
	return ibf_rdm_of(ibf_mq_unexp_match(unexp, r->me.tag, r->me.ignore,
					     r->me.src));
}

/* Receive r takes the message held in bounce b. */
static void ibf_rdm_deliver(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
			    struct ibf_rdm_op *b)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	size_t copied;

	r->op.tag = b->op.tag;
	r->op.data = b->op.data;
	r->op.src = b->op.src;
	if (hdr->flags & IBF_RDM_F_DATA)
		r->op.flags |= FI_REMOTE_CQ_DATA;
	if (hdr->type == IBF_RDM_RTS) {
		ibf_rdm_read_start(ep, r, b);
		return;
	}
	copied = ibf_copy_to_iov(r->iov, r->count, b->mem + IBF_HDR, b->op.len);
	r->op.len = copied;
	r->op.olen = b->op.len - copied;
	ibf_rdm_bounce_post(ep, b);
	ibf_rdm_complete(r, r->op.olen ? -FI_ETRUNC : 0);
}

static struct ibf_rdm_op *ibf_rdm_rx_take(struct ibf_rdm_ep *ep,
					  const struct iovec *iov, void **desc,
					  size_t count,
					  uint64_t want,
					  uint64_t tag, uint64_t ignore,
					  uint64_t flags, void *context,
					  int tagged);

/*
 * A multi-receive buffer r takes the message in b (removed from wherever
 * it waited).  Each message is reported by an op of its own, a "carrier"
 * whose buffer is the message's place in r's; r stays posted until less
 * than FI_OPT_MIN_MULTI_RECV is left, and the carrier of the message that
 * fills it says FI_MULTI_RECV.  The caller made sure an op is free.
 */
static void ibf_rdm_deliver_multi(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
				  struct ibf_rdm_op *b)
{
	size_t take = IBF_MIN(b->op.len, r->iov[0].iov_len - r->mr_off);
	struct iovec iov = { (uint8_t *)r->iov[0].iov_base + r->mr_off, take };
	struct ibf_rdm_op *c;

	c = ibf_rdm_rx_take(ep, &iov, r->desc, 1, 0, 0, 0, 0,
			    r->op.context, 0);
	c->op.user_comp = r->op.user_comp;
	r->mr_off += take;
	if (r->iov[0].iov_len - r->mr_off < ep->min_multi_recv) {
		ibf_mq_posted_remove(&ep->recv_msg, &r->me);
		c->op.flags |= FI_MULTI_RECV;
		c->op.user_comp = 1;	/* the buffer's release is always told */
		ibf_rdm_op_free(r);
	}
	ibf_rdm_deliver(ep, c, b);
}

/*
 * Give the messages waiting for a multi-receive buffer (ep->multi_waiting)
 * the ops freed since, oldest first, so that none is overtaken by a later
 * arrival or left behind once ops are free again.  Not reentered: a
 * delivery may complete (and free) a silent op, which calls here.
 */
static void ibf_rdm_multi_drain(struct ibf_rdm_ep *ep)
{
	struct ibf_mq_entry *e, *next;
	struct ibf_rdm_op *b, *r;

	if (ep->multi_draining)
		return;
	ep->multi_draining = 1;
	for (e = ibf_mq_first(&ep->unexp_msg); e && ep->rx_free; e = next) {
		next = ibf_mq_next(e);
		b = ibf_rdm_of(e);
		r = ibf_rdm_of(ibf_mq_posted_match(&ep->recv_msg, e->tag, e->src));
		if (!r || !r->multi)
			continue;	/* waits for a receive, not for an op */
		ibf_mq_unexp_remove(&ep->unexp_msg, e);
		ibf_rdm_deliver_multi(ep, r, b);
	}
	ep->multi_waiting = e != NULL;	/* ran out of ops before the end */
	ep->multi_draining = 0;
}

void ibf_rdm_drop(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			 const char *why)
{
	ep->dropped++;
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an arrival dropped (%llu "
		       "so far): %s\n", (unsigned long long)ep->dropped, why);
	ibf_rdm_bounce_post(ep, b);
}

/* An RTS that the arrival's length holds whole, with sane segments. */
static int ibf_rdm_rts_fits(const struct ibf_rdm_op *b, uint32_t byte_len)
{
	const struct ibf_rdm_rts *rts = (const void *)(b->mem + IBF_HDR);
	uint64_t sum = 0;
	uint32_t i;

	if (byte_len < IBF_HDR + offsetof(struct ibf_rdm_rts, seg) ||
	    rts->nseg > IBF_RDM_IOV ||
	    byte_len < IBF_HDR + offsetof(struct ibf_rdm_rts, seg) +
		       rts->nseg * sizeof(rts->seg[0]))
		return 0;
	for (i = 0; i < rts->nseg; i++) {
		if (rts->seg[i].len > rts->len - sum)
			return 0;
		sum += rts->seg[i].len;
	}
	return sum == rts->len;
}

static void ibf_rdm_on_recv(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			    const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_mq *posted;
	struct ibf_rdm_op *r;

	if (unlikely(wc->status != IBV_WC_SUCCESS)) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a receive "
				       "failed: %s\n", ibv_wc_status_str(wc->status));
		ibf_rdm_bounce_post(ep, b);
		return;
	}
	if (unlikely(wc->byte_len < IBF_HDR)) {
		ibf_rdm_drop(ep, b, "shorter than a header");
		return;
	}
	/* The sender is whoever owns the QP it came in on, whatever the
	 * header says. */
	b->conn = ibf_rdm_qp_conn(ep, wc->qp_num);
	if (unlikely(!b->conn)) {
		ibf_rdm_drop(ep, b, "it came in on no connection of ours");
		return;
	}
	/* On an earlier QP of the connection: delivered all the same (its
	 * sender was told so), but of a life that has ended, whose
	 * rendezvous can no longer be read or answered. */
	b->epoch = __atomic_load_n(&b->conn->epoch, __ATOMIC_ACQUIRE);
	if (unlikely(wc->qp_num != __atomic_load_n(&b->conn->qp_num, __ATOMIC_ACQUIRE)))
		b->epoch--;
	switch (hdr->type) {
	case IBF_RDM_FIN:
		if (unlikely(wc->byte_len < IBF_HDR + sizeof(struct ibf_rdm_fin))) {
			ibf_rdm_drop(ep, b, "a FIN cut short");
			return;
		}
		ibf_rdm_on_fin(ep, b);
		return;
	case IBF_RDM_PING:
		ibf_rdm_bounce_post(ep, b);	/* being here was the answer */
		return;
	case IBF_RDM_EAGER:
		b->op.len = wc->byte_len - IBF_HDR;
		break;
	case IBF_RDM_RTS:
		if (unlikely(!ibf_rdm_rts_fits(b, wc->byte_len))) {
			ibf_rdm_drop(ep, b, "an RTS whose segments do not add "
				     "up to its length");
			return;
		}
		b->op.len = ((const struct ibf_rdm_rts *)(b->mem + IBF_HDR))->len;
		break;
	default:
		ibf_rdm_drop(ep, b, "unknown type");
		return;
	}
	b->op.tag = hdr->tag;
	b->op.data = hdr->data;
	b->op.src = ibf_rdm_conn_addr(b->conn);
	b->tagged = !!(hdr->flags & IBF_RDM_F_TAGGED);
	b->me.tag = b->tagged ? hdr->tag : 0;
	b->me.ignore = 0;
	b->me.src = b->conn->peer_key;
	posted = b->tagged ? &ep->recv_tag : &ep->recv_msg;
	r = ibf_rdm_of(ibf_mq_posted_match(posted, b->me.tag, b->me.src));
	if (r && !r->multi) {
		ibf_mq_posted_remove(posted, &r->me);
		ibf_rdm_deliver(ep, r, b);
		return;
	}
	if (r && ep->rx_free && likely(!ep->multi_waiting)) {
		ibf_rdm_deliver_multi(ep, r, b);
		return;
	}
	b->state = IBF_RDM_BOUNCE_HELD;
	ibf_mq_park(b->tagged ? &ep->unexp_tag : &ep->unexp_msg, &b->me);
	if (r) {
		/* No op to report it, or older ones wait: behind them. */
		ep->multi_waiting = 1;
		ibf_rdm_multi_drain(ep);
	}
}

/* A verbs completion of one of our ops (ep->lock held). */
static void ibf_rdm_on_wc(struct ibf_rdm_ep *ep, const struct ibv_wc *wc)
{
	struct ibf_rdm_op *op = container_of((struct ibf_op *)(uintptr_t)wc->wr_id,
					     struct ibf_rdm_op, op);

	if (op->is_bounce && op->state == IBF_RDM_BOUNCE_POSTED) {
		ibf_rdm_on_recv(ep, op, wc);
		return;
	}
	__atomic_sub_fetch(&ep->sq_posted, 1, __ATOMIC_RELAXED);
	ibf_rdm_credit_return(op);
	if (unlikely(wc->status != IBV_WC_SUCCESS &&
		     wc->status != IBV_WC_WR_FLUSH_ERR) && op->post_conn)
		ibf_rdm_conn_broken(op->post_conn, op->post_epoch,
				    -ibf_wc_status_to_fi(wc->status));
	if (unlikely(__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) == IBF_RDM_PROBE)) {
		__atomic_store_n(&op->state, IBF_RDM_FREE, __ATOMIC_RELEASE);
		return;		/* a PING: its outcome was all it had to say */
	}
	if (op->is_bounce)
		ibf_rdm_bounce_post(ep, op);	/* its FIN went */
	else if (op->state == IBF_RDM_RX_READ)
		ibf_rdm_on_read(ep, op, wc);
	else
		ibf_rdm_on_send(op, wc);
}

/*
 * Progress, from a read of either CQ: what the connection thread left, then
 * what the device has completed.  No system call unless the thread left
 * something.
 */
void ibf_rdm_progress(struct ibf_rdm_ep *ep)
{
	struct ibv_wc wc[IBF_CQ_BATCH];
	int n, i;

	if (unlikely(__atomic_load_n(&ep->cm_pending, __ATOMIC_ACQUIRE)))
		ibf_rdm_cm_deliver(ep);
	ibf_lock_acquire(&ep->lock);
	do {
		n = ibv_poll_cq(ep->hcq, IBF_CQ_BATCH, wc);
		for (i = 0; i < n; i++)
			ibf_rdm_on_wc(ep, &wc[i]);
	} while (n == IBF_CQ_BATCH);
	ibf_lock_release(&ep->lock);
}

/* FI_PROGRESS_AUTO, from the endpoint's thread when its CQ has an event. */
void ibf_rdm_auto_progress(struct ibf_rdm_ep *ep)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	unsigned n = 0;

	while (!ibv_get_cq_event(ep->channel_cq, &ev_cq, &ev_ctx))
		n++;
	ibf_lock_acquire(&ep->lock);
	ep->cq_events += n;
	ibf_lock_release(&ep->lock);
	ibf_rdm_progress(ep);
	ibv_req_notify_cq(ep->hcq, 0);
	ibf_rdm_progress(ep);	/* what came before the arming */
}

int ibf_rdm_trywait(struct ibf_rdm_ep *ep)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int ret = 0, n;

	if (__atomic_load_n(&ep->cm_pending, __ATOMIC_ACQUIRE))
		return -FI_EAGAIN;
	if (!ep->channel_cq)
		return -FI_EAGAIN;	/* nothing to sleep on: keep polling */
	ibf_lock_acquire(&ep->lock);
	while (!ibv_get_cq_event(ep->channel_cq, &ev_cq, &ev_ctx))
		ep->cq_events++;
	if (ep->cq_events >= 64) {
		ibv_ack_cq_events(ep->hcq, ep->cq_events);
		ep->cq_events = 0;
	}
	if (ibv_req_notify_cq(ep->hcq, 0)) {
		ret = -FI_EAGAIN;
	} else {
		/* Armed: what came before the arming raises nothing. */
		struct ibv_wc wc[IBF_CQ_BATCH];

		n = ibv_poll_cq(ep->hcq, IBF_CQ_BATCH, wc);
		for (int i = 0; i < n; i++)
			ibf_rdm_on_wc(ep, &wc[i]);
		if (n)
			ret = -FI_EAGAIN;
	}
	ibf_lock_release(&ep->lock);
	return ret;
}

/* Fill a receive op from the caller's arguments. */
static struct ibf_rdm_op *ibf_rdm_rx_take(struct ibf_rdm_ep *ep,
					  const struct iovec *iov, void **desc,
					  size_t count,
					  uint64_t want,
					  uint64_t tag, uint64_t ignore,
					  uint64_t flags, void *context,
					  int tagged)
{
	struct ibf_rdm_op *r = ep->rx_free;
	size_t i;

	if (unlikely(!r))
		return NULL;
	ep->rx_free = r->next;
	for (i = 0; i < count; i++) {
		r->iov[i] = iov[i];
		r->desc[i] = desc ? desc[i] : NULL;
	}
	r->count = count;
	r->me.tag = tagged ? tag : 0;
	r->me.ignore = tagged ? ignore : ~0ull;	/* untagged: any tag */
	r->me.src = want;
	r->op.tag = tag;
	r->tagged = tagged;
	r->op.context = context;
	r->op.flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG);
	r->op.buf = count ? iov[0].iov_base : NULL;
	r->op.len = 0;
	r->op.olen = 0;
	r->op.data = 0;
	r->op.src = FI_ADDR_NOTAVAIL;
	r->op.user_comp = !ep->rx_selective || (flags & FI_COMPLETION);
	r->multi = !!(flags & FI_MULTI_RECV);
	r->mr_off = 0;
	r->nmr = 0;
	r->state = IBF_RDM_RX_POSTED;
	return r;
}

static ssize_t ibf_rdm_recv(struct ibf_rdm_ep *ep, const struct iovec *iov,
			    void **desc, size_t count, fi_addr_t src,
			    uint64_t tag, uint64_t ignore, uint64_t flags,
			    void *context, int tagged)
{
	struct ibf_rdm_op *r, *b;
	struct ibf_mq *unexp;
	uint64_t want;
	int ret;

	if (unlikely(count > ep->rx_iov_limit || (count && !iov))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%zu iovs: rx iov_limit "
			       "is %zu\n", count, ep->rx_iov_limit);
		return -FI_EINVAL;
	}
	if (tagged)
		flags &= ~FI_MULTI_RECV;	/* untagged receives only */
	if (unlikely((flags & FI_MULTI_RECV) && count != 1)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_MULTI_RECV takes "
			       "one buffer\n");
		return -FI_EINVAL;
	}
	if (unlikely(!ep->enabled))
		return -FI_EOPBADSTATE;
	ibf_lock_acquire(&ep->lock);
	ret = ibf_rdm_want(ep, src, &want);
	r = likely(!ret) ? ibf_rdm_rx_take(ep, iov, desc, count, want, tag,
					   ignore, flags, context, tagged) : NULL;
	if (unlikely(!r)) {
		ibf_lock_release(&ep->lock);
		return ret ? ret : -FI_EAGAIN;
	}
	unexp = tagged ? &ep->unexp_tag : &ep->unexp_msg;
	if (unlikely(r->multi)) {
		/* Take what waits, while the buffer has room and ops are free. */
		ibf_mq_post(&ep->recv_msg, &r->me);
		while (r->state == IBF_RDM_RX_POSTED && ep->rx_free &&
		       (b = ibf_rdm_find(unexp, r))) {
			ibf_mq_unexp_remove(unexp, &b->me);
			ibf_rdm_deliver_multi(ep, r, b);
		}
		if (!ep->rx_free && r->state == IBF_RDM_RX_POSTED)
			ep->multi_waiting = 1;	/* the rest as ops free */
		ibf_lock_release(&ep->lock);
		return 0;
	}
	b = unlikely(!ibf_mq_empty(unexp)) ? ibf_rdm_find(unexp, r) : NULL;
	if (b) {
		ibf_mq_unexp_remove(unexp, &b->me);
		ibf_rdm_deliver(ep, r, b);
	} else {
		ibf_mq_post(tagged ? &ep->recv_tag : &ep->recv_msg, &r->me);
	}
	ibf_lock_release(&ep->lock);
	return 0;
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
	r = !ret ? ibf_rdm_rx_take(ep, NULL, NULL, 0, want, msg->tag,
				   msg->ignore, FI_COMPLETION, msg->context, 1) :
		   NULL;
	if (!r) {
		ibf_lock_release(&ep->lock);
		return ret ? ret : -FI_EAGAIN;
	}
	r->op.user_comp = 1;
	b = ibf_rdm_find(&ep->unexp_tag, r);
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
		ibf_mq_unexp_remove(&ep->unexp_tag, &b->me);
	if (flags & FI_DISCARD)
		ibf_rdm_discard(ep, b);
	else if (flags & FI_CLAIM)
		((struct fi_context *)msg->context)->internal[0] = b;
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

	if (!b || b < ep->ops || b >= ep->ops + ep->ntx + ep->nrx + ep->nbounce ||
	    !b->is_bounce || b->state != IBF_RDM_BOUNCE_HELD) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_CLAIM with a "
			       "context no FI_PEEK | FI_CLAIM filled\n");
		return -FI_EINVAL;
	}
	if (unlikely(msg->iov_count > ep->rx_iov_limit ||
		     (msg->iov_count && !msg->msg_iov))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_CLAIM with %zu "
			       "iovs: rx iov_limit is %zu\n", msg->iov_count,
			       ep->rx_iov_limit);
		return -FI_EINVAL;
	}
	ibf_lock_acquire(&ep->lock);
	r = ibf_rdm_rx_take(ep, msg->msg_iov, msg->desc, msg->iov_count,
			    0, msg->tag, msg->ignore, flags,
			    msg->context, 1);
	if (!r) {
		ibf_lock_release(&ep->lock);
		return -FI_EAGAIN;
	}
	((struct fi_context *)msg->context)->internal[0] = NULL;
	if (flags & FI_DISCARD) {
		r->op.len = 0;
		r->op.tag = b->op.tag;
		r->op.src = b->op.src;
		ibf_rdm_discard(ep, b);
		ibf_rdm_complete(r, 0);
	} else {
		ibf_rdm_deliver(ep, r, b);
	}
	ibf_lock_release(&ep->lock);
	return 0;
}

ssize_t ibf_rdm_cancel(struct ibf_rdm_ep *ep, void *context)
{
	struct ibf_mq *queues[2] = { &ep->recv_tag, &ep->recv_msg };
	struct ibf_mq_entry *e;
	struct ibf_rdm_op *r;
	int i;

	ibf_lock_acquire(&ep->lock);
	for (i = 0; i < 2; i++) {
		for (e = ibf_mq_first(queues[i]); e; e = ibf_mq_next(e)) {
			r = ibf_rdm_of(e);
			if (r->op.context != context)
				continue;
			ibf_mq_posted_remove(queues[i], e);
			r->op.len = 0;
			ibf_rdm_complete(r, -FI_ECANCELED);
			ibf_lock_release(&ep->lock);
			return 0;
		}
	}
	ibf_lock_release(&ep->lock);
	return -FI_ENOENT;
}

/* ---- fi_ops_msg ---- */

static ssize_t ibf_rdm_m_recv(struct fid_ep *ep_fid, void *buf, size_t len,
			      void *desc, fi_addr_t src, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { buf, len };

	return ibf_rdm_recv(ep, &iov, &desc, 1, src, 0, 0, ep->rx_op_flags,
			    context, 0);
}

static ssize_t ibf_rdm_m_recvv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t src,
			       void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_recv(ep, iov, desc, count, src, 0, 0, ep->rx_op_flags,
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

	return ibf_rdm_send(ep, &iov, 1, dest, 0, 0, ep->tx_op_flags, context, 0);
}

static ssize_t ibf_rdm_m_sendv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t dest,
			       void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_send(ep, iov, count, dest, 0, 0, ep->tx_op_flags,
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
			    ep->tx_op_flags | FI_REMOTE_CQ_DATA, context, 0);
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
			    ep->rx_op_flags, context, 1);
}

static ssize_t ibf_rdm_t_recvv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t src,
			       uint64_t tag, uint64_t ignore, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_recv(ep, iov, desc, count, src, tag, ignore,
			    ep->rx_op_flags, context, 1);
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

	return ibf_rdm_send(ep, &iov, 1, dest, tag, 0, ep->tx_op_flags,
			    context, 1);
}

static ssize_t ibf_rdm_t_sendv(struct fid_ep *ep_fid, const struct iovec *iov,
			       void **desc, size_t count, fi_addr_t dest,
			       uint64_t tag, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	return ibf_rdm_send(ep, iov, count, dest, tag, 0, ep->tx_op_flags,
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
			    ep->tx_op_flags | FI_REMOTE_CQ_DATA, context, 1);
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
