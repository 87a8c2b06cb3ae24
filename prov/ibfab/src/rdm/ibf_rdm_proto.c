/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDM protocol: eager messages, arrivals, matching and progress
 * (ibf_rdm_proto.h; rendezvous is in ibf_rdm_rndv.c).
 * ep->lock held unless said otherwise.
 */
#include "config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm_proto.h"

/* ---- sending: the one entry of every send, RMA and atomic ---- */

/* An op for req, to its peer's connection (found, or its making started),
 * with what its completion will report; NULL and *ret if none. */
static struct ibf_rdm_op *ibf_rdm_tx_begin(struct ibf_rdm_ep_proto *ep,
					   const struct ibf_rdm_req *req,
					   ssize_t *ret)
{
	struct ibf_rdm_conn *conn;
	struct ibf_rdm_op *op;

	conn = likely(req->dest < ep->npeers) ? ep->peers[req->dest] : NULL;
	if (unlikely(!conn) && (*ret = ibf_rdm_conn_get(&ep->as_conns, req->dest, &conn)))
		return NULL;
	op = ibf_rdm_tx_get(&ep->as_ops);
	if (unlikely(!op)) {
		*ret = -FI_EAGAIN;
		return NULL;
	}
	op->conn = conn;
	ibf_rdm_conn_used(conn);
	op->op.context = req->context;
	op->op.flags = req->op_flags;
	op->op.len = req->len;
	op->op.buf = NULL;
	op->op.data = 0;
	op->op.tag = 0;
	op->op.user_comp = !(req->flags & IBF_RDM_NO_COMP) &&
			   (!ep->base.tx_selective || (req->flags & FI_COMPLETION));
	return op;
}

/* A message: its header, and the payload (eager) or an RTS with the
 * buffers registered (rendezvous). */
static int ibf_rdm_send_build(struct ibf_rdm_ep_proto *ep,
			      struct ibf_rdm_op *op,
			      const struct ibf_rdm_req *req)
{
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	uint8_t flags;

	hdr->tag = req->send.tag;
	hdr->data = req->data;
	flags = (req->send.tagged ? IBF_RDM_F_TAGGED : 0) |
		(req->flags & FI_REMOTE_CQ_DATA ? IBF_RDM_F_DATA : 0);
	op->read_err = 0;
	op->wr_kind = IBF_RDM_WR_SEND;
	if (req->len > ep->eager_size) {
		ibf_rdm_hdr_set(hdr, IBF_RDM_RTS, flags,
				ibf_rdm_key_gen(&ep->as_ops));
		return ibf_rdm_rts_build(ep, op, req->iov, req->count, req->len);
	}
	ibf_rdm_hdr_set(hdr, IBF_RDM_EAGER, flags,
			ibf_rdm_key_gen(&ep->as_ops));
	ibf_rdm_copy_from_iov(op->mem + IBF_RDM_HDR, req->iov, req->count);
	op->wire_len = (uint32_t)(IBF_RDM_HDR + req->len);
	op->tx_state = IBF_RDM_TX;
	return 0;
}

/* An RMA or an atomic (a message is built by ibf_rdm_send_build). */
static int ibf_rdm_req_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			     const struct ibf_rdm_req *req)
{
	switch (req->kind) {
	case IBF_RDM_REQ_SEND:
		break;		/* not here: ibf_rdm_submit builds it */
	case IBF_RDM_REQ_RMA:
		return ibf_rdm_rma_build(ep, op, req);
	case IBF_RDM_REQ_ATOMIC:
		ibf_rdm_atomic_build(ep, op, req);
		return 0;
	}
	assert(!"a request of no kind");
	return -FI_EINVAL;
}

/* Op, built from req, was sent: an RMA in parts posts its second part
 * now (posted, not queued, it cannot complete while we hold the lock),
 * and the endpoint counts what it started. */
static void ibf_rdm_req_sent(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			     const struct ibf_rdm_req *req)
{
	switch (req->kind) {
	case IBF_RDM_REQ_SEND:
		break;
	case IBF_RDM_REQ_RMA:
		if (unlikely(op->rma_split) && op->state == IBF_RDM_TX_RMA)
			ibf_rdm_rma_more(op);
		if (req->rma.wr_kind == IBF_RDM_WR_READ)
			ep->stats.reads++;
		else
			ep->stats.writes++;
		break;
	case IBF_RDM_REQ_ATOMIC:
		ep->stats.atomics++;
		break;
	}
}

ssize_t ibf_rdm_submit(struct ibf_rdm_ep_proto *ep,
		       const struct ibf_rdm_req *req)
{
	struct ibf_rdm_op *op;
	ssize_t ret;

	if (unlikely(!ep->base.enabled))
		return -FI_EOPBADSTATE;
	ibf_lock_acquire(&ep->lock);
	op = ibf_rdm_tx_begin(ep, req, &ret);
	if (unlikely(!op))
		goto out;
	/* A message, the usual request, is told apart once (a switch on
	 * the kind costs a chain of compares, twice). */
	ret = likely(req->kind == IBF_RDM_REQ_SEND) ?
	      ibf_rdm_send_build(ep, op, req) : ibf_rdm_req_build(ep, op, req);
	if (likely(!ret))
		ret = ibf_rdm_conn_send(op->conn, op);
	if (unlikely(ret)) {
		/* Nothing of it went: what the build registered goes back. */
		ibf_rdm_unregister(op);
		ibf_rdm_op_free(op);
	} else if (req->kind != IBF_RDM_REQ_SEND) {
		ibf_rdm_req_sent(ep, op, req);
	}
out:
	ibf_lock_release(&ep->lock);
	return ret;
}

/* ---- receiving ---- */

struct ibf_rdm_op *ibf_rdm_rx_take(struct ibf_rdm_ep_proto *ep,
				   const struct iovec *iov, void **desc,
				   size_t count, uint64_t want, uint64_t tag,
				   uint64_t ignore, uint64_t flags,
				   void *context, int tagged)
{
	struct ibf_rdm_op *r = ibf_rdm_rx_get(&ep->as_ops);
	size_t i;

	if (unlikely(!r))
		return NULL;
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
	r->op.user_comp = !ep->base.rx_selective || (flags & FI_COMPLETION);
	r->multi = !!(flags & FI_MULTI_RECV);
	r->mr_off = 0;
	r->nmr = 0;
	r->nmrc = 0;
	r->uncounted = 0;
	ibf_rdm_op_to(r, IBF_RDM_RX_POSTED);
	return r;
}

static struct ibf_mq *ibf_rdm_unexp_q(struct ibf_rdm_ep_proto *ep, int tagged)
{
	return tagged ? &ep->unexp_tag : &ep->unexp_msg;
}

struct ibf_rdm_op *ibf_rdm_unexp_find(struct ibf_rdm_ep_proto *ep,
				      const struct ibf_rdm_op *r)
{
	struct ibf_mq *unexp = ibf_rdm_unexp_q(ep, r->tagged);

	if (likely(ibf_mq_empty(unexp)))
		return NULL;
	return ibf_rdm_op_of(ibf_mq_unexp_match(unexp, r->me.tag, r->me.ignore,
						r->me.src));
}

void ibf_rdm_unexp_take(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b)
{
	ibf_mq_unexp_remove(ibf_rdm_unexp_q(ep, b->tagged), &b->me);
}

/*
 * Request b (ibf_rdm_request_begin) is over: it no longer counts in its
 * sender's share, and the sender's credit goes back unless it went back
 * while b was held.  A delivery settles it here, before giving b back; a
 * bounce the layer below releases is settled through
 * ibf_rdm_request_done.
 */
static inline __attribute__((always_inline)) void
ibf_rdm_request_settle(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b)
{
	struct ibf_rdm_conn *conn = b->conn;

	b->req = 0;
	conn->held--;
	ep->held--;
	if (b->credit_due) {
		b->credit_due = 0;
		ibf_rdm_credit_owe(conn, b->epoch, 1);
	}
}

/* ibf_rdm_deliver, written into the arrival of a message that matched a
 * posted receive (ibf_rdm_on_message): a frame less on every message. */
static inline __attribute__((always_inline)) void
ibf_rdm_deliver_here(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
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
	copied = ibf_copy_to_iov(r->iov, r->count, b->mem + IBF_RDM_HDR,
				     b->op.len);
	r->op.len = copied;
	r->op.olen = b->op.len - copied;
	/* Settled here, not by the layer below's call up (a call less on
	 * every message). */
	if (b->req)
		ibf_rdm_request_settle(ep, b);
	ibf_rdm_bounce_release(&ep->as_ops, b);
	ibf_rdm_complete(r, r->op.olen ? -FI_ETRUNC : 0);
}

void ibf_rdm_deliver(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
		     struct ibf_rdm_op *b)
{
	ibf_rdm_deliver_here(ep, r, b);
}

/*
 * A multi-receive buffer r takes the message in b (removed from wherever
 * it waited).  Each message is reported by an op of its own, a "carrier"
 * whose buffer is the message's place in r's; r stays posted until less
 * than FI_OPT_MIN_MULTI_RECV is left, and the carrier of the message that
 * fills it says FI_MULTI_RECV.  The caller made sure an op is free.
 */
static void ibf_rdm_deliver_multi(struct ibf_rdm_ep_proto *ep,
				  struct ibf_rdm_op *r,
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
static void ibf_rdm_multi_drain(struct ibf_rdm_ep_proto *ep)
{
	struct ibf_mq_entry *e, *next;
	struct ibf_rdm_op *b, *r;

	if (ep->multi_draining)
		return;
	ep->multi_draining = 1;
	for (e = ibf_mq_first(&ep->unexp_msg);
	     e && ibf_rdm_rx_any(&ep->as_ops); e = next) {
		next = ibf_mq_next(e);
		b = ibf_rdm_op_of(e);
		r = ibf_rdm_op_of(ibf_mq_posted_match(&ep->recv_msg, e->tag, e->src));
		if (!r || !r->multi)
			continue;	/* waits for a receive, not for an op */
		ibf_mq_unexp_remove(&ep->unexp_msg, e);
		ibf_rdm_deliver_multi(ep, r, b);
	}
	ep->multi_waiting = e != NULL;	/* ran out of ops before the end */
	ep->multi_draining = 0;
	ibf_rdm_freed_want(ep);
}

IBF_INLINE_HOT void
ibf_rdm_recv_post(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r)
{
	struct ibf_rdm_op *b;

	if (unlikely(r->multi)) {
		/* Take what waits, while the buffer has room and ops are free. */
		ibf_mq_post(&ep->recv_msg, &r->me);
		while (r->state == IBF_RDM_RX_POSTED &&
		       ibf_rdm_rx_any(&ep->as_ops) &&
		       (b = ibf_rdm_unexp_find(ep, r))) {
			ibf_rdm_unexp_take(ep, b);
			ibf_rdm_deliver_multi(ep, r, b);
		}
		if (!ibf_rdm_rx_any(&ep->as_ops) && r->state == IBF_RDM_RX_POSTED) {
			ep->multi_waiting = 1;	/* the rest as ops free */
			ibf_rdm_freed_want(ep);
		}
		return;
	}
	b = ibf_rdm_unexp_find(ep, r);
	if (b) {
		ibf_rdm_unexp_take(ep, b);
		ibf_rdm_deliver(ep, r, b);
	} else {
		ibf_mq_post(r->tagged ? &ep->recv_tag : &ep->recv_msg, &r->me);
	}
}

ssize_t ibf_rdm_recv_cancel(struct ibf_rdm_ep_proto *ep, void *context)
{
	struct ibf_mq *queues[2] = { &ep->recv_tag, &ep->recv_msg };
	struct ibf_mq_entry *e;
	struct ibf_rdm_op *r;
	int i;

	ibf_lock_acquire(&ep->lock);
	for (i = 0; i < 2; i++) {
		for (e = ibf_mq_first(queues[i]); e; e = ibf_mq_next(e)) {
			r = ibf_rdm_op_of(e);
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

/* ---- arrivals ---- */

/* A message in bounce b (its header checked): match it, or hold it. */
static void ibf_rdm_on_message(struct ibf_rdm_ep_proto *ep,
			       struct ibf_rdm_op *b)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_mq *posted;
	struct ibf_rdm_op *r;

	b->op.tag = hdr->tag;
	b->op.data = hdr->data;
	b->op.src = ibf_rdm_conn_addr(b->conn);
	b->tagged = !!(hdr->flags & IBF_RDM_F_TAGGED);
	b->me.tag = b->tagged ? hdr->tag : 0;
	b->me.ignore = 0;
	b->me.src = b->conn->peer_key;
	posted = b->tagged ? &ep->recv_tag : &ep->recv_msg;
	r = ibf_rdm_op_of(ibf_mq_posted_match(posted, b->me.tag, b->me.src));
	if (r && !r->multi) {
		ibf_mq_posted_remove(posted, &r->me);
		ibf_rdm_deliver_here(ep, r, b);
		return;
	}
	if (r && ibf_rdm_rx_any(&ep->as_ops) && likely(!ep->multi_waiting)) {
		ibf_rdm_deliver_multi(ep, r, b);
		return;
	}
	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_HELD);
	ibf_mq_park(ibf_rdm_unexp_q(ep, b->tagged), &b->me);
	if (r) {
		/* No op to report it, or older ones wait: behind them. */
		ep->multi_waiting = 1;
		ibf_rdm_freed_want(ep);
		ibf_rdm_multi_drain(ep);
	}
}

/* A failed receive: its QP is in error now, so the connection ends, as
 * for a failed send, and the next send reconnects. */
static void ibf_rdm_on_recv_error(struct ibf_rdm_ep_proto *ep,
				  struct ibf_rdm_op *b,
				  const struct ibv_wc *wc)
{
	struct ibf_rdm_conn *conn;

	if (wc->status != IBV_WC_WR_FLUSH_ERR) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a receive failed: "
			       "%s%s\n", ibv_wc_status_str(wc->status),
			       wc->status == IBV_WC_LOC_LEN_ERR ? " (the peer's "
			       "eager messages are larger: set FI_IBFAB_EAGER_SIZE "
			       "alike on every process)" : "");
		conn = ibf_rdm_qp_conn(&ep->as_conns, wc->qp_num);
		if (conn)
			ibf_rdm_conn_broken(conn, ibf_rdm_arrival_epoch(conn,
					    wc->qp_num), -ibf_wc_status_to_fi(wc->status));
	}
	ibf_rdm_bounce_release(&ep->as_ops, b);
}

/*
 * Bounce b holds no eager message: what it holds is handled, and 1 is
 * returned if it is an RTS, for ibf_rdm_on_type to match as a message.
 * Apart, so that the usual arrival saves no registers for the rest.
 */
static int __attribute__((noinline))
ibf_rdm_on_control(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		   const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;

	switch (hdr->type) {
	case IBF_RDM_FIN:
		if (unlikely(wc->byte_len < IBF_RDM_HDR + sizeof(struct ibf_rdm_fin))) {
			ibf_rdm_drop(&ep->as_ops, b, "a FIN cut short");
			return 0;
		}
		ibf_rdm_on_fin(ep, b);
		return 0;
	case IBF_RDM_PING:
		ibf_rdm_bounce_release(&ep->as_ops, b);	/* being here was the answer */
		return 0;
	case IBF_RDM_WDATA:
		ibf_rdm_on_wdata(ep, b, wc);
		return 0;
	case IBF_RDM_RDONE:
		if (unlikely(wc->byte_len < IBF_RDM_HDR +
			     sizeof(struct ibf_rdm_rma_note))) {
			ibf_rdm_drop(&ep->as_ops, b, "a read notice cut short");
			return 0;
		}
		ibf_rdm_on_remote_event(ep, b, IBF_CNTR_REMOTE_READ);
		return 0;
	case IBF_RDM_ATOMIC:
		ibf_rdm_on_atomic(ep, b, wc->byte_len);
		return 0;
	case IBF_RDM_ATOMIC_RESP:
		ibf_rdm_on_atomic_resp(ep, b, wc->byte_len);
		return 0;
	case IBF_RDM_KEYQ:
		ibf_rdm_on_keyq(ep, b, wc->byte_len);
		return 0;
	case IBF_RDM_KEYR:
		ibf_rdm_on_keyr(ep, b, wc->byte_len);
		return 0;
	case IBF_RDM_RTS:
		if (unlikely(!ibf_rdm_rts_fits(b, wc->byte_len))) {
			ibf_rdm_drop(&ep->as_ops, b, "an RTS whose segments do not add "
				     "up to its length");
			return 0;
		}
		b->op.len = ((const struct ibf_rdm_rts *)(b->mem + IBF_RDM_HDR))->len;
		return 1;
	default:
		ibf_rdm_drop(&ep->as_ops, b, "unknown type");
		return 0;
	}
}

/* What a message in bounce b (its sender known) is.  One call of
 * ibf_rdm_on_message, so that the compiler writes it in here. */
static void ibf_rdm_on_type(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			    const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;

	if (likely(hdr->type == IBF_RDM_EAGER))		/* the usual, first */
		b->op.len = wc->byte_len - IBF_RDM_HDR;
	else if (!ibf_rdm_on_control(ep, b, wc))
		return;
	ibf_rdm_on_message(ep, b);
}

/* Whether a message of this type is a request, which takes a credit. */
static int ibf_rdm_type_is_request(uint8_t type)
{
	return type == IBF_RDM_EAGER || type == IBF_RDM_RTS ||
	       type == IBF_RDM_ATOMIC || type == IBF_RDM_WDATA ||
	       type == IBF_RDM_KEYQ;
}

/*
 * The most of the endpoint's eager buffers conn's peer may hold and still
 * be granted credits at once: half of what the other peers leave.  So one
 * peer can never take them all, nor can a few: each newcomer's share is
 * half of what is left, and the last half stays free.
 */
static uint32_t ibf_rdm_share(const struct ibf_rdm_ep_proto *ep,
			      const struct ibf_rdm_conn *conn)
{
	uint32_t pool = ep->nbounce + ep->extra_max;
	uint32_t others = ep->held - conn->held;

	return others < pool ? (pool - others) / 2 : 0;
}

/* A request came in b: it spends one of its sender's credits, or, with
 * none left, ends the sender's connection.  0, or -1 if b is gone. */
static int ibf_rdm_request_begin(struct ibf_rdm_ep_proto *ep,
				 struct ibf_rdm_op *b)
{
	struct ibf_rdm_conn *conn = b->conn;
	char buf[64];

	if (unlikely(ibf_rdm_request_arrived(conn, b->epoch))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%s sent more than "
			       "its credits allow (not ibfab's protocol): its "
			       "connection ends\n", ibf_addr_str((const void *)
			       &conn->name, buf, sizeof(buf)));
		ibf_rdm_conn_broken(conn, b->epoch, -FI_EIO);
		ibf_rdm_drop(&ep->as_ops, b, "a request beyond its sender's credits");
		return -1;
	}
	b->req = 1;
	b->credit_due = 1;
	conn->held++;
	ep->held++;
	return 0;
}

static void ibf_rdm_request_done(struct ibf_rdm_ep_ops *ops,
				 struct ibf_rdm_op *b)
{
	ibf_rdm_request_settle(ibf_rdm_proto_of_ops(ops), b);
}

static void ibf_rdm_on_recv(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			    const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_rdm_conn *conn;

	if (unlikely(wc->status != IBV_WC_SUCCESS)) {
		ibf_rdm_on_recv_error(ep, b, wc);
		return;
	}
	/* The sender is whoever owns the QP it came in on, whatever the
	 * header says. */
	b->conn = conn = ibf_rdm_qp_conn(&ep->as_conns, wc->qp_num);
	if (unlikely(!conn)) {
		ibf_rdm_drop(&ep->as_ops, b, "it came in on no connection of ours");
		return;
	}
	ibf_rdm_conn_used(conn);
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		/* A write with a notice behind it: nothing in the bounce. */
		ibf_rdm_on_write_imm(ep, b, wc);
		return;
	}
	/* On an earlier QP of the connection: delivered all the same (its
	 * sender was told so), but of a life that has ended, whose
	 * rendezvous can no longer be read or answered. */
	b->epoch = ibf_rdm_arrival_epoch(conn, wc->qp_num);
	if (unlikely(wc->wc_flags & IBV_WC_WITH_IMM)) {
		/* A grant of credits: no bytes, the count in the immediate. */
		ibf_rdm_grant_arrived(conn, b->epoch, ntohl(wc->imm_data));
		ibf_rdm_bounce_release(&ep->as_ops, b);
		return;
	}
	if (unlikely(wc->byte_len < IBF_RDM_HDR)) {
		ibf_rdm_drop(&ep->as_ops, b, "shorter than a header");
		return;
	}
	if (unlikely(hdr->key_gen != conn->peer_key_gen))
		ibf_rdm_keys_forget(conn, hdr->key_gen);
	if (ibf_rdm_type_is_request(hdr->type) &&
	    unlikely(ibf_rdm_request_begin(ep, b)))
		return;
	ibf_rdm_on_type(ep, b, wc);
	/* A request still held (unexpected, being read, waiting): its
	 * credit goes back now while its sender holds no more than its
	 * share.  (Only a request's bounce has credit_due set, and a
	 * delivered one was released, which cleared it.) */
	if (b->credit_due && conn->held <= ibf_rdm_share(ep, conn)) {
		b->credit_due = 0;
		ibf_rdm_credit_owe(conn, b->epoch, 1);
	}
}

/* A send-side completion: an eager send, a FIN, a read, an RTS (or the
 * connection layer's PING or drain). */
static void ibf_rdm_on_sent(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			    const struct ibv_wc *wc)
{
	if (unlikely(ibf_rdm_send_done(op, wc->status)))
		return;		/* the connection layer's own */
	if (likely(op->state == IBF_RDM_TX)) {	/* an eager send: the usual */
		ibf_rdm_complete(op, -ibf_wc_status_to_fi(wc->status));
		return;
	}
	if (op->is_bounce) {
		ibf_rdm_bounce_release(&ep->as_ops, op);	/* its FIN went */
		return;
	}
	switch (op->state) {
	case IBF_RDM_TX_RMA:
		ibf_rdm_rma_sent(op, wc);
		break;
	case IBF_RDM_TX_ATOMIC:
		ibf_rdm_atomic_sent(op, -ibf_wc_status_to_fi(wc->status));
		break;
	case IBF_RDM_TX_KEYQ:
		ibf_rdm_keyq_sent(op, -ibf_wc_status_to_fi(wc->status));
		break;
	case IBF_RDM_RX_READ:
		ibf_rdm_on_read(ep, op, wc);
		break;
	case IBF_RDM_TX_RTS:
		ibf_rdm_rts_sent(op, -ibf_wc_status_to_fi(wc->status));
		break;
	default:	/* an eager send, as above */
		ibf_rdm_complete(op, -ibf_wc_status_to_fi(wc->status));
		break;
	}
}

/* A verbs completion of one of our ops.  Written into each of the two
 * progress loops below (the compiler would call it for each completion). */
static inline __attribute__((always_inline)) void
ibf_rdm_on_wc(struct ibf_rdm_ep_proto *ep, const struct ibv_wc *wc)
{
	struct ibf_rdm_op *op = container_of((struct ibf_op *)(uintptr_t)wc->wr_id,
					     struct ibf_rdm_op, op);

	ibf_tsan_acquire(op);	/* what its poster wrote (see ibf.h) */
	if (op->is_bounce && op->state == IBF_RDM_BOUNCE_POSTED) {
		ibf_rdm_bounce_arrived(&ep->as_ops);
		ibf_rdm_on_recv(ep, op, wc);
	} else {
		ibf_rdm_on_sent(ep, op, wc);
	}
}

/* ---- progress ---- */

static void ibf_rdm_op_freed(struct ibf_rdm_ep_ops *ops);

/*
 * ep->lock held, n device completions polled into wc (none if n <= 0):
 * each handed on, the device polled again while batches come back full,
 * then what waited on others.  Completions may go straight into sink.
 * Written into both of its callers, so that each has one frame.
 */
static inline __attribute__((always_inline)) void
ibf_rdm_progress_polled(struct ibf_rdm_ep_proto *ep, struct ibf_cq_sink *sink,
			struct ibv_wc *wc, int n)
{
	int i;

	while (n > 0) {
		ep->sink = sink;
		for (i = 0; i < n; i++)
			ibf_rdm_on_wc(ep, &wc[i]);
		ep->sink = NULL;
		if (n < IBF_CQ_BATCH)
			break;
		n = ibv_poll_cq(ep->hcq, IBF_CQ_BATCH, wc);
	}
	/* Receive ops a CQ reader made room for since: what waited for one
	 * (a multi-receive's messages, remote CQ data) goes on.  One load
	 * when there are none. */
	if (unlikely(__atomic_load_n(&ep->rx_room.returned, __ATOMIC_RELAXED))) {
		ibf_rdm_rx_reclaim(&ep->as_ops);
		ibf_rdm_op_freed(&ep->as_ops);
	}
	/* Bounces kept by messages no receive has taken yet: replaced, a
	 * batch at a time. */
	if (unlikely(ibf_rdm_srq_short(&ep->as_ops)))
		ibf_rdm_bounce_refill(&ep->as_ops);
}

/*
 * From a read of either CQ, or a counter's: what the connection thread
 * left, then what the device has completed.  No system call unless the
 * thread left something.  Takes ep->lock.
 */
void ibf_rdm_progress(struct ibf_progress *hook, struct ibf_cq_sink *sink)
{
	struct ibf_rdm_ep_proto *ep = container_of(hook, struct ibf_rdm_ep_proto, hook);
	struct ibv_wc wc[IBF_CQ_BATCH];

	if (unlikely(__atomic_load_n(&ep->cm_pending, __ATOMIC_ACQUIRE)))
		ibf_rdm_cm_deliver(&ep->as_conns);
	ibf_lock_acquire(&ep->lock);
	ibf_rdm_progress_polled(ep, sink, wc,
				ibv_poll_cq(ep->hcq, IBF_CQ_BATCH, wc));
	ibf_lock_release(&ep->lock);
}

/*
 * The whole fi_cq_read of a CQ this endpoint alone feeds (struct
 * ibf_progress's sole_read): progress as above, in the reader's own
 * frame, then what the CQ itself holds, under the CQ's lock only if it
 * holds something.  An application spinning on its CQ runs this and the
 * CQ's jump here (fabtests/run-instr: 118 instructions an empty read
 * at FI_THREAD_DOMAIN, against 150 through the CQ's own read and a call
 * of ibf_rdm_progress; 140 at FI_THREAD_SAFE, the endpoint's lock
 * alone).  locked: the endpoint's lock may be needed (ep->lock says);
 * 0 only where the threading level needs none.
 */
static inline __attribute__((always_inline)) ssize_t
ibf_rdm_sole_read_as(struct ibf_progress *hook, struct ibf_cq *cq, void *buf,
		     size_t count, fi_addr_t *src, int locked)
{
	struct ibf_rdm_ep_proto *ep = container_of(hook, struct ibf_rdm_ep_proto, hook);
	struct ibv_wc wc[IBF_CQ_BATCH];
	/* Filled at once: the arguments go to the stack across the poll
	 * anyway, and set up later they were copied from there into the
	 * sink for each read that found something. */
	struct ibf_cq_sink sink = { cq, buf, src, count, 0 };
	int polled;

	if (unlikely(__atomic_load_n(&ep->cm_pending, __ATOMIC_ACQUIRE)))
		ibf_rdm_cm_deliver(&ep->as_conns);
	if (locked)
		ibf_lock_acquire(&ep->lock);
	polled = ibv_poll_cq(ep->hcq, IBF_CQ_BATCH, wc);
	/* The tests ibf_rdm_progress_polled ends with, first here. */
	if (polled > 0 ||
	    unlikely(__atomic_load_n(&ep->rx_room.returned, __ATOMIC_RELAXED)) ||
	    unlikely(ibf_rdm_srq_short(&ep->as_ops)))
		ibf_rdm_progress_polled(ep, &sink, wc, polled);
	if (locked)
		ibf_lock_release(&ep->lock);
	return ibf_cq_progressed(sink.cq, sink.buf, sink.count, sink.src,
				 sink.n, 0);
}

ssize_t ibf_rdm_sole_read(struct ibf_progress *hook, struct ibf_cq *cq,
			  void *buf, size_t count, fi_addr_t *src)
{
	return ibf_rdm_sole_read_as(hook, cq, buf, count, src, 1);
}

/* The same for an endpoint that needs no lock (ibf_rdm_ep_enable chooses):
 * not even the test of whether it does, 8 instructions an empty read and
 * 13 a message at FI_THREAD_DOMAIN. */
ssize_t ibf_rdm_sole_read_unlocked(struct ibf_progress *hook, struct ibf_cq *cq,
				   void *buf, size_t count, fi_addr_t *src)
{
	return ibf_rdm_sole_read_as(hook, cq, buf, count, src, 0);
}

/* And fi_cq_read itself, from the CQ's read table (ibf_rdm_enable sets
 * hook.sole_ops where the endpoint needs no lock): no jump through the
 * CQ's own read to the one above: 8 instructions an empty read, 16 an
 * 8-byte message (fabtests/run-instr, FI_THREAD_DOMAIN). */
ssize_t ibf_rdm_cq_read_unlocked(struct fid_cq *cq_fid, void *buf, size_t count)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);

	if (unlikely(ibf_cq_read_args_bad(buf, count)))
		return -FI_EINVAL;
	return ibf_rdm_sole_read_as(__atomic_load_n(&cq->sole, __ATOMIC_RELAXED),
				    cq, buf, count, NULL, 0);
}

/* FI_PROGRESS_AUTO, from the endpoint's thread when its CQ has an event. */
static void ibf_rdm_auto_progress(struct ibf_rdm_ep_conns *conns)
{
	struct ibf_rdm_ep_proto *ep = ibf_rdm_proto_of(conns);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	unsigned n = 0;

	while (!ibv_get_cq_event(ep->channel_cq, &ev_cq, &ev_ctx))
		n++;
	ibf_lock_acquire(&ep->lock);
	ep->cq_events += n;
	ibf_lock_release(&ep->lock);
	ibf_rdm_progress(&ep->hook, NULL);
	ibv_req_notify_cq(ep->hcq, 0);
	ibf_rdm_progress(&ep->hook, NULL);	/* what came before the arming */
}

int ibf_rdm_trywait(struct ibf_progress *hook)
{
	struct ibf_rdm_ep_proto *ep = container_of(hook, struct ibf_rdm_ep_proto, hook);
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

/* ---- what the layers below report ---- */

static void __attribute__((noinline, cold))
ibf_rdm_op_freed_drain(struct ibf_rdm_ep_proto *ep)
{
	if (ep->multi_waiting)
		ibf_rdm_multi_drain(ep);
	if (ep->wdata_wait.head != NULL)
		ibf_rdm_wdata_drain(ep);
	ibf_rdm_freed_want(ep);
}

/* Called for an op freed while something waits for ops (freed_wanted),
 * and for receive ops reclaimed: two loads unless something still waits
 * (the drains apart, so this needs no registers saved). */
static void ibf_rdm_op_freed(struct ibf_rdm_ep_ops *ops)
{
	struct ibf_rdm_ep_proto *ep = ibf_rdm_proto_of_ops(ops);

	if (unlikely(ibf_rdm_ops_awaited(ep)))
		ibf_rdm_op_freed_drain(ep);
}

static void ibf_rdm_conns_ended(struct ibf_rdm_ep_conns *conns)
{
	ibf_rdm_rndv_fail_ended(ibf_rdm_proto_of(conns));
}

const struct ibf_rdm_upcalls ibf_rdm_proto_upcalls = {
	.slots_freed = ibf_rdm_unstall,
	.conns_ended = ibf_rdm_conns_ended,
	.op_freed = ibf_rdm_op_freed,
	.progress = ibf_rdm_auto_progress,
	.request_done = ibf_rdm_request_done,
};
