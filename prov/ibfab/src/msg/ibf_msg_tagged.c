/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Tagged mode of FI_EP_MSG endpoints (opened with FI_TAGGED).
 *
 * RC delivers a message into whatever receive is posted next, so tags
 * cannot be matched by the device.  In tagged mode every message, tagged or
 * not, travels as [struct ibf_tag_hdr][payload] and lands in a bounce
 * buffer of the endpoint's own; the matcher (ibf_match.h, the one RDM
 * endpoints use) matches it against the posted receives, in posting order,
 * and it is copied out.  A message nobody has asked for yet stays in its
 * bounce (unexpected) until a receive matches it; a peer that sends more
 * than there are bounces waits (RNR).  Messages
 * are at most FI_IBFAB_EAGER_SIZE bytes, as max_msg_size says.
 *
 * Completions of matched receives are made here, not by the device: they
 * go to the CQ's soft ring, the receive's slot staying taken until read.
 *
 * Framed mode also carries atomics (FI_ATOMIC; ibf_msg_atomic.c): a request
 * (IBF_HDR_ATOMIC) is applied when its bounce completes and answered
 * (IBF_HDR_ATOMIC_RESP) straight from that bounce, by a send of the
 * bounce's own reply slot (so the answer needs no send slot of the
 * application's); the bounce is posted again when the answer's send
 * completes.  The send queue has room for an answer per bounce.
 *
 * Locking: ep->rx_lock guards the lists and the free receive slots; the CQ
 * calls in with its own lock held and takes rx_lock inside it; posting
 * takes rx_lock, drops it, then the CQ's lock: never the other way round.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_atomic_ops.h"
#include "ibf_match.h"
#include "ibf_msg_post.h"

#define IBF_TAGGED_IOV 4

/* A connected endpoint has one peer: its key in the matcher. */
#define IBF_TAGGED_PEER 1

struct ibf_urecv {		/* beside its ibf_op */
	struct iovec iov[IBF_TAGGED_IOV];
	size_t count;
	int tagged;
	struct ibf_mq_entry me;	/* posted: its tag, ignore bits, the peer */
};

struct ibf_tagged {
	struct ibf_ep *ep;
	struct ibf_cq *rcq;	/* where receives complete */
	size_t slot;		/* header + eager payload */
	/* Bounces: the receive buffers the device fills. */
	uint32_t nbounce;
	uint8_t *rx_mem;
	struct ibv_mr *rx_mr;
	struct ibf_op *bounce;
	struct ibf_mq_entry *held;	/* a bounce's, while it is unexpected */
	int posted;		/* bounces in the RQ; atomic */
	/* FI_ATOMIC: each bounce's answer send (kind IBF_OP_REPLY). */
	struct ibf_op *reply;
	int replying;		/* answers in the send queue; atomic */
	int gone;		/* a bounce flushed: the connection is gone;
				 * under rx_lock */
	/* One send buffer per send queue slot. */
	uint8_t *tx_mem;
	struct ibv_mr *tx_mr;
	/* The application's receives. */
	uint32_t nurecv;
	struct ibf_op *urecv;
	struct ibf_urecv *ext;
	int *urecv_next;	/* links of the free list */
	int free_head;
	/* Posted receives and unexpected messages: [0] untagged, [1] tagged. */
	struct ibf_mq posted_q[2], unexp_q[2];
	int reserved;		/* soft ring room taken in rcq */
};

static uint8_t *ibf_bounce_mem(struct ibf_tagged *t, struct ibf_op *b)
{
	return t->rx_mem + (size_t)(b - t->bounce) * t->slot;
}

/* Called with rx_lock held: the first posted receive for hdr, unposted. */
static int ibf_match_posted(struct ibf_tagged *t, const struct ibf_tag_hdr *hdr)
{
	int tagged = !!(hdr->flags & IBF_HDR_TAGGED);
	struct ibf_mq *q = &t->posted_q[tagged];
	struct ibf_mq_entry *e;

	e = ibf_mq_posted_match(q, tagged ? hdr->tag : 0, IBF_TAGGED_PEER);
	if (!e)
		return -1;
	ibf_mq_posted_remove(q, e);
	return (int)(container_of(e, struct ibf_urecv, me) - t->ext);
}

/* Called with rx_lock held: hold bounce i, whose message no receive took. */
static void ibf_hold(struct ibf_tagged *t, int i)
{
	const struct ibf_tag_hdr *hdr = (const void *)ibf_bounce_mem(t, &t->bounce[i]);
	int tagged = !!(hdr->flags & IBF_HDR_TAGGED);

	t->held[i].tag = tagged ? hdr->tag : 0;
	t->held[i].ignore = 0;
	t->held[i].src = IBF_TAGGED_PEER;
	ibf_mq_park(&t->unexp_q[tagged], &t->held[i]);
}

/* Called with rx_lock held: the first unexpected message for receive r,
 * taken out. */
static int ibf_match_unexpected(struct ibf_tagged *t, int r)
{
	const struct ibf_mq_entry *me = &t->ext[r].me;
	struct ibf_mq *q = &t->unexp_q[t->ext[r].tagged];
	struct ibf_mq_entry *e;

	if (ibf_mq_empty(q))
		return -1;
	e = ibf_mq_unexp_match(q, me->tag, me->ignore, me->src);
	if (!e)
		return -1;
	ibf_mq_unexp_remove(q, e);
	return (int)(e - t->held);
}

static int ibf_bounce_post(struct ibf_tagged *t, struct ibf_op *b)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)ibf_bounce_mem(t, b),
		.length = (uint32_t)t->slot,
		.lkey = t->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)b, .sg_list = &sge,
				  .num_sge = 1 };
	int ret;

	__atomic_add_fetch(&t->posted, 1, __ATOMIC_RELAXED);
	ret = ibf_msg_post_recv(t->ep->id->qp, NULL, &t->ep->post_trace, &wr);
	if (ret) {
		__atomic_sub_fetch(&t->posted, 1, __ATOMIC_RELAXED);
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "cannot post a receive "
			       "buffer again: %s\n", fi_strerror(-ret));
	}
	return ret;
}

void ibf_frame_parse(const void *mem, size_t len, struct ibf_frame *f)
{
	struct ibf_tag_hdr hdr;

	memset(f, 0, sizeof(*f));
	f->kind = IBF_FRAME_DROP;
	if (len < sizeof(hdr)) {
		f->why = "shorter than a header";
		return;
	}
	memcpy(&hdr, mem, sizeof(hdr));
	f->flags = hdr.flags;
	f->payload = (const uint8_t *)mem + sizeof(hdr);
	f->len = len - sizeof(hdr);
	if (hdr.flags & ~IBF_HDR_KNOWN) {
		f->why = "flags ibfab does not send";
	} else if (hdr.flags & IBF_HDR_ATOMIC) {
		f->kind = hdr.flags == IBF_HDR_ATOMIC ? IBF_FRAME_ATOMIC : IBF_FRAME_DROP;
		f->why = "an atomic request with other flags";
	} else if (hdr.flags & IBF_HDR_ATOMIC_RESP) {
		f->kind = hdr.flags == IBF_HDR_ATOMIC_RESP ? IBF_FRAME_ATOMIC_RESP :
			  IBF_FRAME_DROP;
		f->why = "an atomic answer with other flags";
	} else {
		f->kind = IBF_FRAME_MSG;
		f->tag = (hdr.flags & IBF_HDR_TAGGED) ? hdr.tag : 0;
		f->data = hdr.data;
	}
	if (f->kind != IBF_FRAME_DROP)
		f->why = NULL;
}

/* Copy a message from its bounce into receive r, and say what happened. */
static void ibf_deliver(struct ibf_tagged *t, int r, struct ibf_op *b)
{
	const uint8_t *mem = ibf_bounce_mem(t, b);
	const struct ibf_tag_hdr *hdr = (const void *)mem;
	struct ibf_urecv *x = &t->ext[r];
	struct ibf_op *op = &t->urecv[r];
	size_t plen = b->len - sizeof(*hdr), done;

	done = ibf_copy_to_iov(x->iov, x->count, mem + sizeof(*hdr), plen);
	op->flags = FI_RECV | ((hdr->flags & IBF_HDR_TAGGED) ? FI_TAGGED : FI_MSG) |
		    ((hdr->flags & IBF_HDR_DATA) ? FI_REMOTE_CQ_DATA : 0);
	op->len = done;
	op->buf = x->count ? x->iov[0].iov_base : NULL;
	op->data = hdr->data;
	op->tag = hdr->tag;
	op->olen = plen - done;
	op->err = plen > done ? FI_ETRUNC : 0;
}

/* The answer in bounce b (its header rewritten) goes back to the peer. */
static void ibf_tagged_reply(struct ibf_tagged *t, struct ibf_op *b, size_t len)
{
	struct ibf_op *r = &t->reply[b - t->bounce];
	struct ibv_sge sge = {
		.addr = (uintptr_t)ibf_bounce_mem(t, b),
		.length = (uint32_t)len,
		.lkey = t->rx_mr->lkey,
	};
	struct ibv_send_wr wr = { .wr_id = (uintptr_t)r, .sg_list = &sge,
				  .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	int ret;

	if (len <= t->ep->inject_size)
		wr.send_flags |= IBV_SEND_INLINE;
	__atomic_add_fetch(&t->replying, 1, __ATOMIC_RELAXED);
	ibf_lock_acquire(&t->ep->tx_lock);
	ret = ibf_msg_post_send(t->ep, &wr);
	ibf_lock_release(&t->ep->tx_lock);
	if (ret) {
		__atomic_sub_fetch(&t->replying, 1, __ATOMIC_RELAXED);
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "cannot send an "
			       "atomic's answer: %s\n", fi_strerror(-ret));
		ibf_bounce_post(t, b);
	}
}

static size_t ibf_fill_refusal(void *dst, const void *arg)
{
	struct ibf_atomic_req *req = dst;

	*req = *(const struct ibf_atomic_req *)arg;
	req->status = -FI_EOPNOTSUPP;
	return sizeof(*req);
}

/*
 * An atomic request to an endpoint opened without FI_ATOMIC: refused, in
 * an answer from an ordinary send slot (there are no reply slots), so
 * the peer's atomic completes in error rather than never.
 */
static void ibf_tagged_refuse_atomic(struct ibf_tagged *t, struct ibf_op *b)
{
	struct ibf_tag_hdr *hdr = (void *)ibf_bounce_mem(t, b);
	struct ibf_tag_hdr resp = { .flags = IBF_HDR_ATOMIC_RESP };

	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "refused an atomic: this "
		       "endpoint was opened without FI_ATOMIC (its peer was "
		       "not)\n");
	if (ibf_tagged_send_frame(t->ep, &resp, ibf_fill_refusal, hdr + 1, 0,
				  NULL, 0, NULL))
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "no send slot to "
			       "refuse it: the peer's atomic waits\n");
	ibf_bounce_post(t, b);
}

/* A bounce holding an atomic request or answer (framed mode, FI_ATOMIC). */
static void ibf_tagged_on_atomic(struct ibf_tagged *t, struct ibf_op *b)
{
	struct ibf_tag_hdr *hdr = (void *)ibf_bounce_mem(t, b);
	size_t plen = b->len - sizeof(*hdr);

	if (hdr->flags & IBF_HDR_ATOMIC_RESP) {
		ibf_msg_atomic_on_answer(t->ep, hdr + 1, plen);
		ibf_bounce_post(t, b);
		return;
	}
	if (plen < sizeof(struct ibf_atomic_req)) {
		ibf_bounce_post(t, b);	/* cut short: no cookie to answer */
		return;
	}
	if (!t->reply) {
		ibf_tagged_refuse_atomic(t, b);
		return;
	}
	plen = ibf_atomic_serve(t->ep->base.domain, hdr + 1, plen,
				ibf_params.eager_size);
	hdr->flags = IBF_HDR_ATOMIC_RESP;
	ibf_tagged_reply(t, b, sizeof(*hdr) + plen);
}

/* Receive r (unposted) completes with FI_ECANCELED, having received nothing. */
static void ibf_urecv_fail(struct ibf_tagged *t, int r)
{
	struct ibf_op *op = &t->urecv[r];

	op->flags = FI_RECV | (t->ext[r].tagged ? FI_TAGGED : FI_MSG);
	op->len = 0;
	op->buf = t->ext[r].count ? t->ext[r].iov[0].iov_base : NULL;
	op->data = 0;
	op->olen = 0;
	op->err = FI_ECANCELED;
	ibf_cq_soft_push(t->rcq, op);
}

/* Called with rx_lock held: take out a posted receive (untagged ones
 * first), or -1. */
static int ibf_unpost_any(struct ibf_tagged *t)
{
	struct ibf_mq_entry *e;
	int k;

	for (k = 0; k < 2; k++) {
		e = ibf_mq_first(&t->posted_q[k]);
		if (e) {
			ibf_mq_posted_remove(&t->posted_q[k], e);
			return (int)(container_of(e, struct ibf_urecv, me) - t->ext);
		}
	}
	return -1;
}

/*
 * The first flushed bounce: the connection is gone, and every message that
 * came before it has been taken (the device completes a QP's receives in
 * order).  Receives still posted would wait for ever: they complete with
 * FI_ECANCELED, as plain mode's flushed receives do, and so do those posted
 * from now on that no held message matches.  Atomics waiting for answers
 * wait in vain too.
 */
static void ibf_tagged_gone(struct ibf_tagged *t)
{
	int first, r;

	ibf_lock_acquire(&t->ep->rx_lock);
	first = !t->gone;
	t->gone = 1;
	ibf_lock_release(&t->ep->rx_lock);
	if (!first)
		return;
	for (;;) {
		ibf_lock_acquire(&t->ep->rx_lock);
		r = ibf_unpost_any(t);
		ibf_lock_release(&t->ep->rx_lock);
		if (r < 0)
			break;
		ibf_urecv_fail(t, r);
	}
	if (t->ep->matomic)
		ibf_msg_atomic_fail_all(t->ep, FI_ECONNABORTED);
}

void ibf_tagged_on_reply(struct ibf_op *r, const struct ibv_wc *wc)
{
	struct ibf_tagged *t = ibf_op_ep(r)->tagged;

	__atomic_sub_fetch(&t->replying, 1, __ATOMIC_RELAXED);
	if (wc->status != IBV_WC_WR_FLUSH_ERR)
		ibf_bounce_post(t, &t->bounce[r - t->reply]);
}

void ibf_tagged_on_bounce(struct ibf_cq *cq, struct ibf_op *b,
			  const struct ibv_wc *wc)
{
	struct ibf_tagged *t = ibf_op_ep(b)->tagged;
	struct ibf_frame f;
	int r;

	__atomic_sub_fetch(&t->posted, 1, __ATOMIC_RELAXED);
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			ibf_bounce_post(t, b);	/* a bad message: drop it */
		else
			ibf_tagged_gone(t);
		return;
	}
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
		/* A writedata: its completion holds the bounce until read. */
		b->context = NULL;
		b->flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
		b->len = 0;
		b->buf = NULL;
		b->data = ntohl(wc->imm_data);
		b->tag = 0;
		b->err = 0;
		/* It consumed a receive of the peer's: counted as one. */
		b->cntr = t->ep->base.cntr[IBF_CNTR_RECV];
		ibf_cq_soft_push(cq, b);
		return;
	}
	b->len = wc->byte_len;
	ibf_frame_parse(ibf_bounce_mem(t, b), b->len, &f);
	if (unlikely(f.kind == IBF_FRAME_DROP)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "dropped a peer's "
			       "message: %s (not ibfab's framing)\n", f.why);
		ibf_bounce_post(t, b);
		return;
	}
	if (unlikely(f.kind != IBF_FRAME_MSG)) {
		ibf_tagged_on_atomic(t, b);
		return;
	}
	ibf_lock_acquire(&t->ep->rx_lock);
	r = ibf_match_posted(t, (const void *)ibf_bounce_mem(t, b));
	if (r < 0)
		ibf_hold(t, (int)(b - t->bounce));
	ibf_lock_release(&t->ep->rx_lock);
	if (r < 0)
		return;
	ibf_deliver(t, r, b);
	ibf_bounce_post(t, b);
	ibf_cq_soft_push(cq, &t->urecv[r]);
}

void ibf_tagged_release(struct ibf_op *op)
{
	struct ibf_tagged *t = ibf_op_ep(op)->tagged;
	int i;

	if (op->kind == IBF_OP_BOUNCE) {
		op->cntr = NULL;	/* a writedata's: counted at its push */
		ibf_bounce_post(t, op);
		return;
	}
	i = (int)(op - t->urecv);
	ibf_lock_acquire(&t->ep->rx_lock);
	t->urecv_next[i] = t->free_head;
	t->free_head = i;
	ibf_lock_release(&t->ep->rx_lock);
}

void ibf_tagged_drop(struct ibf_op *op)
{
	if (op->kind == IBF_OP_REPLY)
		__atomic_sub_fetch(&ibf_op_ep(op)->tagged->replying, 1, __ATOMIC_RELAXED);
	else
		__atomic_sub_fetch(&ibf_op_ep(op)->tagged->posted, 1, __ATOMIC_RELAXED);
}

int ibf_tagged_outstanding(struct ibf_ep *ep)
{
	return ep->tagged ? __atomic_load_n(&ep->tagged->posted, __ATOMIC_RELAXED) : 0;
}

int ibf_tagged_replying(struct ibf_ep *ep)
{
	return ep->tagged ? __atomic_load_n(&ep->tagged->replying, __ATOMIC_RELAXED) : 0;
}

/* Called with rx_lock held: unpost the receive with this context. */
static int ibf_unpost_context(struct ibf_tagged *t, struct ibf_mq *q,
			      void *context)
{
	struct ibf_mq_entry *e;
	int i;

	for (e = ibf_mq_first(q); e; e = ibf_mq_next(e)) {
		i = (int)(container_of(e, struct ibf_urecv, me) - t->ext);
		if (t->urecv[i].context == context) {
			ibf_mq_posted_remove(q, e);
			return i;
		}
	}
	return -1;
}

/*
 * fi_cancel: a receive still waiting for its message completes with
 * FI_ECANCELED.  Receives are the provider's own in tagged mode, so they
 * can be taken back; returns -FI_ENOENT for one that is gone.
 */
ssize_t ibf_tagged_cancel(struct ibf_ep *ep, void *context)
{
	struct ibf_tagged *t = ep->tagged;
	int r;

	if (!t)
		return -FI_ENOENT;
	ibf_lock_acquire(&ep->rx_lock);
	r = ibf_unpost_context(t, &t->posted_q[1], context);
	if (r < 0)
		r = ibf_unpost_context(t, &t->posted_q[0], context);
	ibf_lock_release(&ep->rx_lock);
	if (r < 0)
		return -FI_ENOENT;
	ibf_urecv_fail(t, r);
	return 0;
}

static ssize_t ibf_tagged_recv(struct ibf_ep *ep, const struct iovec *iov,
			       size_t count, uint64_t tag, uint64_t ignore,
			       int tagged, void *context, uint64_t flags,
			       int comp)
{
	struct ibf_tagged *t = ep->tagged;
	struct ibf_urecv *x;
	size_t i;
	int r, u, gone;

	if (unlikely(!t))
		return -FI_EOPBADSTATE;
	if (unlikely(count > IBF_TAGGED_IOV || (count && !iov))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%zu iovs: tagged mode "
			       "takes %d\n", count, IBF_TAGGED_IOV);
		return -FI_EINVAL;
	}
	if (unlikely(flags & (FI_MULTI_RECV | FI_PEEK | FI_CLAIM | FI_DISCARD))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_MULTI_RECV, FI_PEEK, "
			       "FI_CLAIM and FI_DISCARD are not supported on "
			       "FI_EP_MSG\n");
		return -FI_EBADFLAGS;
	}
	ibf_lock_acquire(&ep->rx_lock);
	r = t->free_head;
	if (unlikely(r < 0)) {
		ibf_lock_release(&ep->rx_lock);
		return -FI_EAGAIN;
	}
	t->free_head = t->urecv_next[r];
	x = &t->ext[r];
	for (i = 0; i < count; i++)
		x->iov[i] = iov[i];
	x->count = count;
	x->tagged = tagged;
	x->me.tag = tagged ? tag : 0;
	x->me.ignore = tagged ? ignore : ~0ull;	/* untagged: any message */
	x->me.src = IBF_TAGGED_PEER;
	t->urecv[r].context = context;
	t->urecv[r].tag = tag;
	t->urecv[r].cntr = ep->base.cntr[IBF_CNTR_RECV];
	t->urecv[r].user_comp = comp;
	u = ibf_match_unexpected(t, r);
	gone = u < 0 && t->gone;
	if (u < 0 && !gone)
		ibf_mq_post(&t->posted_q[tagged], &x->me);
	ibf_lock_release(&ep->rx_lock);
	if (u >= 0) {
		ibf_deliver(t, r, &t->bounce[u]);
		ibf_bounce_post(t, &t->bounce[u]);
		ibf_cq_soft_push(t->rcq, &t->urecv[r]);
	} else if (gone) {
		ibf_urecv_fail(t, r);	/* nothing will ever come */
	}
	return 0;
}

/* What a framed message carries: iov's bytes. */
struct ibf_iov_src {
	const struct iovec *iov;
	size_t count;
};

static size_t ibf_fill_iov(void *dst, const void *arg)
{
	const struct ibf_iov_src *src = arg;
	size_t i, len = 0;

	for (i = 0; i < src->count; len += src->iov[i].iov_len, i++)
		memcpy((uint8_t *)dst + len, src->iov[i].iov_base,
		       src->iov[i].iov_len);
	return len;
}

static ssize_t ibf_tagged_send(struct ibf_ep *ep, const struct iovec *iov,
			       size_t count, uint64_t tag, uint64_t data,
			       uint64_t flags, int tagged, void *context, int comp)
{
	struct ibf_iov_src src = { iov, count };
	struct ibf_tag_hdr hdr = {
		.tag = tag,
		.data = (uint32_t)data,
		.flags = (tagged ? IBF_HDR_TAGGED : 0) |
			 ((flags & FI_REMOTE_CQ_DATA) ? IBF_HDR_DATA : 0),
	};
	size_t len = 0;

	if (unlikely(!ep->tagged))
		return -FI_EOPBADSTATE;
	if (unlikely(count > ep->tx_iov_limit || ibf_iov_sum(iov, count, &len) ||
		     len > ibf_params.eager_size)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%zu bytes in %zu iovs: "
			       "tagged mode sends at most max_msg_size (%zu)\n",
			       len, count, ibf_params.eager_size);
		return -FI_EINVAL;
	}
	return ibf_tagged_send_frame(ep, &hdr, ibf_fill_iov, &src,
				     FI_SEND | (tagged ? FI_TAGGED : FI_MSG),
				     context, comp, ep->base.cntr[IBF_CNTR_SEND]);
}

ssize_t ibf_tagged_send_frame(struct ibf_ep *ep, const struct ibf_tag_hdr *h,
			      size_t (*fill)(void *dst, const void *arg),
			      const void *arg, uint64_t op_flags, void *context,
			      int comp, struct ibf_cntr *cntr)
{
	struct ibf_tagged *t = ep->tagged;
	struct ibv_send_wr wr;
	struct ibf_tag_hdr *hdr;
	struct ibv_sge sge;
	struct ibf_op *op;
	uint8_t *mem;
	size_t len;
	ssize_t ret;

	ibf_lock_acquire(&ep->tx_lock);
	op = ibf_msg_tx_slot(ep, &ret);
	if (unlikely(!op)) {
		ibf_lock_release(&ep->tx_lock);
		return ret;
	}
	mem = t->tx_mem + (size_t)(op - ep->tx.ops) * t->slot;
	hdr = (struct ibf_tag_hdr *)mem;
	*hdr = *h;
	len = fill(hdr + 1, arg);
	sge.addr = (uintptr_t)mem;
	sge.length = (uint32_t)(sizeof(*hdr) + len);
	sge.lkey = t->tx_mr->lkey;
	op->context = context;
	op->flags = op_flags;
	op->len = len;
	op->buf = NULL;
	op->user_comp = comp;
	op->cntr = cntr;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = sge.length <= ep->inject_size ? IBV_SEND_INLINE : 0;
	wr.imm_data = 0;
	ret = ibf_msg_tx_post(ep, op, &wr);
	ibf_lock_release(&ep->tx_lock);
	return ret;
}

static void *ibf_alloc_reg(struct ibf_ep *ep, size_t len, int access,
			   struct ibv_mr **mr)
{
	void *mem;

	if (posix_memalign(&mem, 4096, len))
		return NULL;
	memset(mem, 0, len);
	*mr = ibv_reg_mr(ep->base.domain->pd, mem, len, access);
	if (!*mr) {
		IBF_WARN(FI_LOG_EP_CTRL, "cannot register %zu bytes of tagged-mode "
			 "buffers: %s\n", len, strerror(errno));
		free(mem);
		return NULL;
	}
	return mem;
}

int ibf_tagged_init(struct ibf_ep *ep)
{
	struct ibf_tagged *t;
	uint32_t i;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -FI_ENOMEM;
	t->ep = ep;
	t->rcq = ibf_ep_recv_cq(ep);
	t->slot = sizeof(struct ibf_tag_hdr) + ibf_params.eager_size;
	t->nbounce = t->nurecv = ep->rx.size;
	t->bounce = calloc(t->nbounce, sizeof(*t->bounce));
	t->held = calloc(t->nbounce, sizeof(*t->held));
	t->urecv = calloc(t->nurecv, sizeof(*t->urecv));
	t->ext = calloc(t->nurecv, sizeof(*t->ext));
	t->urecv_next = calloc(t->nurecv, sizeof(*t->urecv_next));
	if (!t->bounce || !t->held || !t->urecv || !t->ext || !t->urecv_next)
		goto err;
	for (i = 0; i < 2; i++)
		if (ibf_mq_init(&t->posted_q[i], t->nurecv) ||
		    ibf_mq_init(&t->unexp_q[i], t->nbounce))
			goto err;
	t->rx_mem = ibf_alloc_reg(ep, t->nbounce * t->slot, IBV_ACCESS_LOCAL_WRITE,
				  &t->rx_mr);
	t->tx_mem = t->rx_mem ? ibf_alloc_reg(ep, ep->tx.size * t->slot, 0,
					      &t->tx_mr) : NULL;
	if (!t->tx_mem)
		goto err;
	for (i = 0; i < t->nbounce; i++) {
		t->bounce[i].kind = IBF_OP_BOUNCE;
		t->bounce[i].release = ibf_tagged_release;
		t->bounce[i].owner = ep;
		t->bounce[i].user_comp = 1;
	}
	for (i = 0; i < t->nurecv; i++) {
		t->urecv[i].kind = IBF_OP_URECV;
		t->urecv[i].release = ibf_tagged_release;
		t->urecv[i].src = FI_ADDR_NOTAVAIL;
		t->urecv[i].owner = ep;
		t->urecv[i].user_comp = 1;
		t->urecv_next[i] = i + 1 < t->nurecv ? (int)i + 1 : -1;
	}
	t->free_head = 0;
	if (ep->base.info->caps & FI_ATOMIC) {
		t->reply = calloc(t->nbounce, sizeof(*t->reply));
		if (!t->reply)
			goto err;
		for (i = 0; i < t->nbounce; i++) {
			t->reply[i].kind = IBF_OP_REPLY;
			t->reply[i].release = ibf_tagged_release;
			t->reply[i].owner = ep;
		}
	}
	/* Every receive slot and every bounce may wait in the CQ at once. */
	if (ibf_cq_soft_reserve(t->rcq, t->nurecv + t->nbounce))
		goto err;
	t->reserved = 1;
	ep->tagged = t;
	return 0;
err:
	ep->tagged = t;
	ibf_tagged_fini(ep);
	return -FI_ENOMEM;
}

int ibf_tagged_post_bounces(struct ibf_ep *ep)
{
	struct ibf_tagged *t = ep->tagged;
	uint32_t i;

	for (i = 0; i < t->nbounce; i++)
		if (ibf_bounce_post(t, &t->bounce[i]))
			return -FI_EIO;
	return 0;
}

/* Called once the QP is gone and its completions drained. */
void ibf_tagged_fini(struct ibf_ep *ep)
{
	struct ibf_tagged *t = ep->tagged;

	if (!t)
		return;
	if (t->reserved)
		ibf_cq_soft_unreserve(t->rcq, t->nurecv + t->nbounce);
	if (t->rx_mr)
		ibv_dereg_mr(t->rx_mr);
	if (t->tx_mr)
		ibv_dereg_mr(t->tx_mr);
	free(t->rx_mem);
	free(t->tx_mem);
	for (int i = 0; i < 2; i++) {
		ibf_mq_fini(&t->posted_q[i]);
		ibf_mq_fini(&t->unexp_q[i]);
	}
	free(t->bounce);
	free(t->reply);
	free(t->held);
	free(t->urecv);
	free(t->ext);
	free(t->urecv_next);
	free(t);
	ep->tagged = NULL;
}

/* ---- the calls: fi_t* and, in tagged mode, fi_send and fi_recv ---- */

static ssize_t ibf_tg_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			    fi_addr_t src_addr, uint64_t tag, uint64_t ignore,
			    void *context)
{
	struct iovec iov = { buf, len };

	return ibf_tagged_recv(to_ibf_ep(ep), &iov, 1, tag, ignore, 1, context, 0,
			       ibf_rx_wants_comp_dflt(to_ibf_ep(ep)));
}

static ssize_t ibf_tg_trecvv(struct fid_ep *ep, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src_addr,
			     uint64_t tag, uint64_t ignore, void *context)
{
	return ibf_tagged_recv(to_ibf_ep(ep), iov, count, tag, ignore, 1, context, 0,
			       ibf_rx_wants_comp_dflt(to_ibf_ep(ep)));
}

static ssize_t ibf_tg_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *msg,
			       uint64_t flags)
{
	return ibf_tagged_recv(to_ibf_ep(ep), msg->msg_iov, msg->iov_count,
			       msg->tag, msg->ignore, 1, msg->context, flags,
			       ibf_rx_wants_comp(to_ibf_ep(ep), flags));
}

static ssize_t ibf_tg_tsend(struct fid_ep *ep_fid, const void *buf, size_t len,
			    void *desc, fi_addr_t dest_addr, uint64_t tag,
			    void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(ep, &iov, 1, tag, 0, 0, 1, context,
			       ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_tg_tsendv(struct fid_ep *ep_fid, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t dest_addr,
			     uint64_t tag, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_tagged_send(ep, iov, count, tag, 0, 0, 1, context,
			       ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_tg_tsendmsg(struct fid_ep *ep_fid, const struct fi_msg_tagged *msg,
			       uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_tagged_send(ep, msg->msg_iov, msg->iov_count, msg->tag,
			       msg->data, flags, 1, msg->context,
			       ibf_tx_wants_comp(ep, flags));
}

static ssize_t ibf_tg_tinject(struct fid_ep *ep, const void *buf, size_t len,
			      fi_addr_t dest_addr, uint64_t tag)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(to_ibf_ep(ep), &iov, 1, tag, 0, 0, 1, NULL, 0);
}

static ssize_t ibf_tg_tsenddata(struct fid_ep *ep_fid, const void *buf, size_t len,
				void *desc, uint64_t data, fi_addr_t dest_addr,
				uint64_t tag, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(ep, &iov, 1, tag, data, FI_REMOTE_CQ_DATA, 1,
			       context, ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_tg_tinjectdata(struct fid_ep *ep, const void *buf, size_t len,
				  uint64_t data, fi_addr_t dest_addr, uint64_t tag)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(to_ibf_ep(ep), &iov, 1, tag, data,
			       FI_REMOTE_CQ_DATA, 1, NULL, 0);
}

struct fi_ops_tagged ibf_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = ibf_tg_trecv,
	.recvv = ibf_tg_trecvv,
	.recvmsg = ibf_tg_trecvmsg,
	.send = ibf_tg_tsend,
	.sendv = ibf_tg_tsendv,
	.sendmsg = ibf_tg_tsendmsg,
	.inject = ibf_tg_tinject,
	.senddata = ibf_tg_tsenddata,
	.injectdata = ibf_tg_tinjectdata,
};

static ssize_t ibf_tg_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			   fi_addr_t src_addr, void *context)
{
	struct iovec iov = { buf, len };

	return ibf_tagged_recv(to_ibf_ep(ep), &iov, 1, 0, 0, 0, context, 0,
			       ibf_rx_wants_comp_dflt(to_ibf_ep(ep)));
}

static ssize_t ibf_tg_recvv(struct fid_ep *ep, const struct iovec *iov,
			    void **desc, size_t count, fi_addr_t src_addr,
			    void *context)
{
	return ibf_tagged_recv(to_ibf_ep(ep), iov, count, 0, 0, 0, context, 0,
			       ibf_rx_wants_comp_dflt(to_ibf_ep(ep)));
}

static ssize_t ibf_tg_recvmsg(struct fid_ep *ep, const struct fi_msg *msg,
			      uint64_t flags)
{
	return ibf_tagged_recv(to_ibf_ep(ep), msg->msg_iov, msg->iov_count, 0, 0,
			       0, msg->context, flags,
			       ibf_rx_wants_comp(to_ibf_ep(ep), flags));
}

static ssize_t ibf_tg_send(struct fid_ep *ep_fid, const void *buf, size_t len,
			   void *desc, fi_addr_t dest_addr, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(ep, &iov, 1, 0, 0, 0, 0, context,
			       ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_tg_sendv(struct fid_ep *ep_fid, const struct iovec *iov,
			    void **desc, size_t count, fi_addr_t dest_addr,
			    void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_tagged_send(ep, iov, count, 0, 0, 0, 0, context,
			       ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_tg_sendmsg(struct fid_ep *ep_fid, const struct fi_msg *msg,
			      uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);

	return ibf_tagged_send(ep, msg->msg_iov, msg->iov_count, 0, msg->data,
			       flags, 0, msg->context, ibf_tx_wants_comp(ep, flags));
}

static ssize_t ibf_tg_inject(struct fid_ep *ep, const void *buf, size_t len,
			     fi_addr_t dest_addr)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(to_ibf_ep(ep), &iov, 1, 0, 0, 0, 0, NULL, 0);
}

static ssize_t ibf_tg_senddata(struct fid_ep *ep_fid, const void *buf, size_t len,
			       void *desc, uint64_t data, fi_addr_t dest_addr,
			       void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(ep, &iov, 1, 0, data, FI_REMOTE_CQ_DATA, 0, context,
			       ibf_tx_wants_comp_dflt(ep));
}

static ssize_t ibf_tg_injectdata(struct fid_ep *ep, const void *buf, size_t len,
				 uint64_t data, fi_addr_t dest_addr)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_tagged_send(to_ibf_ep(ep), &iov, 1, 0, data, FI_REMOTE_CQ_DATA,
			       0, NULL, 0);
}

struct fi_ops_msg ibf_tagged_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ibf_tg_recv,
	.recvv = ibf_tg_recvv,
	.recvmsg = ibf_tg_recvmsg,
	.send = ibf_tg_send,
	.sendv = ibf_tg_sendv,
	.sendmsg = ibf_tg_sendmsg,
	.inject = ibf_tg_inject,
	.senddata = ibf_tg_senddata,
	.injectdata = ibf_tg_injectdata,
};
