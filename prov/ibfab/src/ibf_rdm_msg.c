/*
 * RDM messaging: sends, receives, tag matching, rendezvous (ibf_rdm.h).
 *
 * Sending: a message of at most eager_size bytes is copied behind its
 * header into the op's registered buffer, so the application needs no
 * registration and the buffer is free on return (which is what makes
 * fi_inject possible up to eager_size).  A larger one is registered where
 * it is and announced by an RTS; the receiver reads it straight into the
 * matched receive's buffer with RDMA READ and answers FIN, which completes
 * the send.
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

static void ibf_rdm_unregister(struct ibf_rdm_op *op)
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
	ibf_lock_release(&ep->lock);
}

static size_t ibf_iov_len(const struct iovec *iov, size_t count)
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

/* Register the sender's buffers for the peer to read; fill the RTS. */
static int ibf_rdm_rts_build(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
			     const struct iovec *iov, size_t count, size_t len)
{
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	struct ibf_rdm_rts *rts = (void *)(op->mem + IBF_HDR);
	struct ibv_mr *mr;
	size_t i;

	hdr->type = IBF_RDM_RTS;
	rts->len = len;
	rts->cookie = (uint32_t)(op - ep->ops);
	rts->nseg = 0;
	for (i = 0; i < count; i++) {
		if (!iov[i].iov_len)
			continue;
		mr = ibv_reg_mr(ep->domain->pd, iov[i].iov_base, iov[i].iov_len,
				IBV_ACCESS_REMOTE_READ);
		if (!mr) {
			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "registering "
				       "a %zu-byte send buffer: %s\n",
				       iov[i].iov_len, strerror(errno));
			ibf_rdm_unregister(op);
			return errno == ENOMEM ? -FI_EAGAIN : ibf_errno_to_fi(errno);
		}
		op->mr[op->nmr++] = mr;
		rts->seg[rts->nseg].addr = (uintptr_t)iov[i].iov_base;
		rts->seg[rts->nseg].len = iov[i].iov_len;
		rts->seg[rts->nseg].rkey = mr->rkey;
		rts->nseg++;
	}
	op->wire_len = IBF_HDR + sizeof(*rts);
	return 0;
}

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
	len = ibf_iov_len(iov, count);
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
	op->op.user_comp = !(flags & FI_INJECT) &&
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
		if (likely(__atomic_load_n(&conn->state, __ATOMIC_ACQUIRE) ==
			   IBF_CONN_CONNECTED))
			ret = ibf_rdm_post_built(conn, op);
		else
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

static int ibf_rdm_match(const struct ibf_rdm_op *r, const struct ibf_rdm_op *b)
{
	if (r->tagged && ((r->op.tag ^ b->op.tag) & ~r->ignore))
		return 0;
	return r->want == FI_ADDR_UNSPEC || r->want == b->op.src;
}

static struct ibf_rdm_op *ibf_rdm_find(struct ibf_rdm_list *l,
				       const struct ibf_rdm_op *r)
{
	struct ibf_rdm_op *b;

	for (b = l->head; b; b = b->next)
		if (ibf_rdm_match(r, b))
			return b;
	return NULL;
}

/* A bounce is done with: back to the SRQ. */
static void ibf_rdm_bounce_done(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b)
{
	ibf_rdm_bounce_post(ep, b);
}

/* Post the FIN built in bounce b; a full send queue parks it. */
static void ibf_rdm_fin_post(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b)
{
	struct ibf_rdm_conn *conn = b->conn;
	struct rdma_cm_id *id = __atomic_load_n(&conn->id, __ATOMIC_ACQUIRE);
	struct ibv_sge sge = {
		.addr = (uintptr_t)b->mem,
		.length = IBF_HDR + sizeof(struct ibf_rdm_fin),
		.lkey = ep->mem_mr->lkey,
	};
	int ret = -FI_ENOTCONN;

	if (id && id->qp)
		ret = ibf_rdm_post_send(conn, b, &sge, 1,
					sge.length <= ep->max_inline);
	if (ret == -FI_EAGAIN) {
		ibf_rdm_stall(conn, b);
	} else if (ret) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "cannot answer a "
			       "rendezvous: %s\n", fi_strerror(-ret));
		ibf_rdm_bounce_done(ep, b);
	}
}

/* Answer an RTS held in bounce b; b goes back to the SRQ after. */
static void ibf_rdm_fin_send(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			     int status)
{
	struct ibf_rdm_rts *rts = (void *)(b->mem + IBF_HDR);
	struct ibf_rdm_fin *fin = (void *)(b->mem + IBF_HDR);
	struct ibf_rdm_hdr *hdr = (void *)b->mem;
	uint32_t cookie = rts->cookie;

	hdr->type = IBF_RDM_FIN;
	hdr->flags = 0;
	fin->cookie = cookie;
	fin->status = status;
	b->state = IBF_RDM_BOUNCE_FIN;
	ibf_rdm_fin_post(ep, b);
}

/* Drop a held message (FI_DISCARD): an RTS still gets its FIN. */
static void ibf_rdm_discard(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b)
{
	if (((struct ibf_rdm_hdr *)b->mem)->type == IBF_RDM_RTS)
		ibf_rdm_fin_send(ep, b, 0);
	else
		ibf_rdm_bounce_done(ep, b);
}

/* The lkey of a receive buffer: the caller's MR, or one made now. */
static int ibf_rdm_rx_lkey(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
			   size_t i, uint32_t *lkey)
{
	struct ibv_mr *mr;

	if (r->desc[i] && !ibf_desc_lkey(r->desc[i], lkey))
		return 0;
	mr = ibv_reg_mr(ep->domain->pd, r->iov[i].iov_base, r->iov[i].iov_len,
			IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "registering a %zu-byte "
			       "receive buffer: %s\n", r->iov[i].iov_len,
			       strerror(errno));
		return ibf_errno_to_fi(errno);
	}
	r->mr[r->nmr++] = mr;
	*lkey = mr->lkey;
	return 0;
}

/*
 * Post the next read of the message an RTS announces into r: at most
 * max_read bytes of one of the sender's segments, scattered over r's iovs
 * from where the last read stopped.  0, or -FI_E* if it cannot be posted.
 */
static int ibf_rdm_read_next(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r)
{
	const struct ibf_rdm_rts *rts = (void *)(r->bounce->mem + IBF_HDR);
	struct rdma_cm_id *id = __atomic_load_n(&r->bounce->conn->id,
						__ATOMIC_ACQUIRE);
	const struct ibf_rdm_seg *seg;
	struct ibv_sge sge[IBF_RDM_IOV];
	struct ibv_send_wr wr, *bad;
	size_t n, chunk;
	int nsge = 0, ret;

	if (!id || !id->qp)
		return -FI_ENOTCONN;
	if (!ibf_rdm_credit_take(r->bounce->conn))
		return -FI_EAGAIN;
	while (r->rd_seg < rts->nseg && r->rd_soff == rts->seg[r->rd_seg].len) {
		r->rd_seg++;
		r->rd_soff = 0;
	}
	if (r->rd_seg >= rts->nseg) {
		__atomic_add_fetch(&r->bounce->conn->credits, 1, __ATOMIC_RELEASE);
		return -FI_EIO;	/* the segments hold less than the length */
	}
	seg = &rts->seg[r->rd_seg];
	chunk = IBF_MIN(IBF_MIN(seg->len - r->rd_soff, (uint64_t)ep->max_read),
			r->rd_left);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uintptr_t)&r->op;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = sge;
	wr.wr.rdma.remote_addr = seg->addr + r->rd_soff;
	wr.wr.rdma.rkey = seg->rkey;
	r->rd_soff += chunk;
	r->rd_left -= chunk;
	while (chunk && nsge < IBF_RDM_IOV) {
		while (r->rd_iov < r->count - 1 &&
		       r->rd_ioff == r->iov[r->rd_iov].iov_len) {
			r->rd_iov++;
			r->rd_ioff = 0;
		}
		n = IBF_MIN(chunk, r->iov[r->rd_iov].iov_len - r->rd_ioff);
		sge[nsge].addr = (uintptr_t)r->iov[r->rd_iov].iov_base + r->rd_ioff;
		sge[nsge].length = (uint32_t)n;
		sge[nsge].lkey = r->lkey[r->rd_iov];
		nsge++;
		r->rd_ioff += n;
		chunk -= n;
	}
	wr.num_sge = nsge;
	r->post_conn = r->bounce->conn;
	r->post_epoch = r->post_conn->epoch;
	__atomic_add_fetch(&ep->sq_posted, 1, __ATOMIC_RELAXED);
	ret = ibv_post_send(id->qp, &wr, &bad);
	if (ret) {
		__atomic_sub_fetch(&ep->sq_posted, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&r->post_conn->credits, 1, __ATOMIC_RELEASE);
		return ibf_errno_to_fi(ret);
	}
	r->reads_left++;
	return 0;
}

/* The rendezvous into r is over (read, failed or empty): FIN, complete. */
static void ibf_rdm_read_done(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r)
{
	ibf_rdm_fin_send(ep, r->bounce, r->read_err);
	ibf_rdm_complete(r, r->read_err ? r->read_err :
			 (r->op.olen ? -FI_ETRUNC : 0));
}

/*
 * Keep up to IBF_RDM_READS reads in flight into r while bytes are left;
 * park r when its connection's send queue is full (ibf_rdm_unstall goes
 * on); finish once nothing is left in flight.
 */
static void ibf_rdm_read_more(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r)
{
	int ret;

	while (!r->stalled && !r->read_err && r->rd_left &&
	       r->reads_left < IBF_RDM_READS) {
		ret = ibf_rdm_read_next(ep, r);
		if (ret == -FI_EAGAIN)
			ibf_rdm_stall(r->bounce->conn, r);
		else if (ret)
			r->read_err = ret;
	}
	if (!r->stalled && !r->reads_left)
		ibf_rdm_read_done(ep, r);
}

static void ibf_rdm_read_start(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
			       struct ibf_rdm_op *b)
{
	const struct ibf_rdm_rts *rts = (void *)(b->mem + IBF_HDR);
	size_t cap = ibf_iov_len(r->iov, r->count), i;
	size_t want = IBF_MIN(rts->len, cap);
	int ret = 0;

	r->op.len = want;
	r->op.olen = rts->len - want;
	r->bounce = b;
	r->read_err = 0;
	r->reads_left = 0;
	r->rd_seg = 0;
	r->rd_soff = 0;
	r->rd_iov = 0;
	r->rd_ioff = 0;
	r->rd_left = want;
	b->state = IBF_RDM_BOUNCE_HELD;
	r->state = IBF_RDM_RX_READ;
	for (i = 0; want && !ret && i < r->count; i++)
		if (r->iov[i].iov_len)
			ret = ibf_rdm_rx_lkey(ep, r, i, &r->lkey[i]);
	r->read_err = ret;
	ibf_rdm_read_more(ep, r);
}

/* One read into r has completed (or failed): the next, or the end. */
static void ibf_rdm_on_read(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
			    const struct ibv_wc *wc)
{
	r->reads_left--;
	if (wc->status != IBV_WC_SUCCESS && !r->read_err)
		r->read_err = -ibf_wc_status_to_fi(wc->status);
	ibf_rdm_read_more(ep, r);
}

void ibf_rdm_unstall(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep *ep = conn->ep;
	struct ibf_rdm_op *op;

	while ((op = conn->stalled_head) &&
	       (!conn->id || __atomic_load_n(&conn->credits, __ATOMIC_ACQUIRE) > 0)) {
		conn->stalled_head = op->next;
		if (!conn->stalled_head)
			conn->stalled_tail = NULL;
		op->stalled = 0;
		if (op->is_bounce)
			ibf_rdm_fin_post(ep, op);	/* may park it again */
		else
			ibf_rdm_read_more(ep, op);
		if (op->stalled)
			break;		/* no slot after all: in order, later */
	}
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
	ibf_rdm_bounce_done(ep, b);
	ibf_rdm_complete(r, r->op.olen ? -FI_ETRUNC : 0);
}

/* A FIN: the peer has read our rendezvous send. */
static void ibf_rdm_on_fin(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b)
{
	const struct ibf_rdm_fin *fin = (void *)(b->mem + IBF_HDR);
	struct ibf_rdm_op *op;

	if (fin->cookie < ep->ntx && ep->ops[fin->cookie].state == IBF_RDM_TX_RTS) {
		op = &ep->ops[fin->cookie];
		if (fin->status)
			op->read_err = fin->status;
		if (--op->reads_left == 0)
			ibf_rdm_complete(op, op->read_err);
	} else {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a FIN for no "
			       "rendezvous send: ignored\n");
	}
	ibf_rdm_bounce_done(ep, b);
}

static struct ibf_rdm_op *ibf_rdm_rx_take(struct ibf_rdm_ep *ep,
					  const struct iovec *iov, void **desc,
					  size_t count, fi_addr_t src,
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

	c = ibf_rdm_rx_take(ep, &iov, r->desc, 1, FI_ADDR_UNSPEC, 0, 0, 0,
			    r->op.context, 0);
	c->op.user_comp = r->op.user_comp;
	r->mr_off += take;
	if (r->iov[0].iov_len - r->mr_off < ep->min_multi_recv) {
		ibf_rdm_list_remove(&ep->recv_msg, r);
		c->op.flags |= FI_MULTI_RECV;
		c->op.user_comp = 1;	/* the buffer's release is always told */
		ibf_rdm_op_free(r);
	}
	ibf_rdm_deliver(ep, c, b);
}

static void ibf_rdm_on_recv(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			    const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_rdm_list *posted;
	struct ibf_rdm_op *r;

	if (unlikely(wc->status != IBV_WC_SUCCESS || wc->byte_len < IBF_HDR ||
		     !(b->conn = ibf_rdm_conn_at(ep, hdr->conn)))) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a bad "
				       "arrival (%s, %u bytes): dropped\n",
				       ibv_wc_status_str(wc->status), wc->byte_len);
		ibf_rdm_bounce_done(ep, b);
		return;
	}
	switch (hdr->type) {
	case IBF_RDM_FIN:
		ibf_rdm_on_fin(ep, b);
		return;
	case IBF_RDM_EAGER:
		b->op.len = wc->byte_len - IBF_HDR;
		break;
	case IBF_RDM_RTS:
		if (((const struct ibf_rdm_rts *)(b->mem + IBF_HDR))->nseg > IBF_RDM_IOV) {
			ibf_rdm_bounce_done(ep, b);
			return;
		}
		b->op.len = ((const struct ibf_rdm_rts *)(b->mem + IBF_HDR))->len;
		break;
	default:
		ibf_rdm_bounce_done(ep, b);
		return;
	}
	b->op.tag = hdr->tag;
	b->op.data = hdr->data;
	b->op.src = ibf_rdm_conn_addr(b->conn);
	b->tagged = !!(hdr->flags & IBF_RDM_F_TAGGED);
	posted = b->tagged ? &ep->recv_tag : &ep->recv_msg;
	for (r = posted->head; r; r = r->next)
		if (ibf_rdm_match(r, b))
			break;
	if (r && !r->multi) {
		ibf_rdm_list_remove(posted, r);
		ibf_rdm_deliver(ep, r, b);
		return;
	}
	if (r && ep->rx_free) {
		ibf_rdm_deliver_multi(ep, r, b);
		return;
	}
	b->state = IBF_RDM_BOUNCE_HELD;
	ibf_rdm_list_append(b->tagged ? &ep->unexp_tag : &ep->unexp_msg, b);
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
	if (op->is_bounce)
		ibf_rdm_bounce_done(ep, op);	/* its FIN went */
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
					  size_t count, fi_addr_t src,
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
	r->want = (ep->info->caps & FI_DIRECTED_RECV) ? src : FI_ADDR_UNSPEC;
	if (r->want == FI_ADDR_NOTAVAIL)
		r->want = FI_ADDR_UNSPEC;
	r->op.tag = tag;
	r->ignore = ignore;
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
	struct ibf_rdm_list *unexp;

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
	r = ibf_rdm_rx_take(ep, iov, desc, count, src, tag, ignore, flags,
			    context, tagged);
	if (unlikely(!r)) {
		ibf_lock_release(&ep->lock);
		return -FI_EAGAIN;
	}
	unexp = tagged ? &ep->unexp_tag : &ep->unexp_msg;
	if (unlikely(r->multi)) {
		/* Take what waits, while the buffer has room and ops are free. */
		ibf_rdm_list_append(&ep->recv_msg, r);
		while (r->state == IBF_RDM_RX_POSTED && ep->rx_free &&
		       (b = ibf_rdm_find(unexp, r))) {
			ibf_rdm_list_remove(unexp, b);
			ibf_rdm_deliver_multi(ep, r, b);
		}
		ibf_lock_release(&ep->lock);
		return 0;
	}
	b = unlikely(unexp->head != NULL) ? ibf_rdm_find(unexp, r) : NULL;
	if (b) {
		ibf_rdm_list_remove(unexp, b);
		ibf_rdm_deliver(ep, r, b);
	} else {
		ibf_rdm_list_append(tagged ? &ep->recv_tag : &ep->recv_msg, r);
	}
	ibf_lock_release(&ep->lock);
	return 0;
}

/* FI_PEEK, with FI_CLAIM or FI_DISCARD or neither. */
static ssize_t ibf_rdm_peek(struct ibf_rdm_ep *ep, const struct fi_msg_tagged *msg,
			    uint64_t flags)
{
	struct ibf_rdm_op *r, *b;

	if ((flags & FI_CLAIM) && !msg->context) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "FI_CLAIM needs a "
			       "struct fi_context as context\n");
		return -FI_EINVAL;
	}
	ibf_lock_acquire(&ep->lock);
	r = ibf_rdm_rx_take(ep, NULL, NULL, 0, msg->addr, msg->tag, msg->ignore,
			    FI_COMPLETION, msg->context, 1);
	if (!r) {
		ibf_lock_release(&ep->lock);
		return -FI_EAGAIN;
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
		ibf_rdm_list_remove(&ep->unexp_tag, b);
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
	ibf_lock_acquire(&ep->lock);
	r = ibf_rdm_rx_take(ep, msg->msg_iov, msg->desc, msg->iov_count,
			    FI_ADDR_UNSPEC, msg->tag, msg->ignore, flags,
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
	struct ibf_rdm_list *lists[2] = { &ep->recv_tag, &ep->recv_msg };
	struct ibf_rdm_op *r;
	int i;

	ibf_lock_acquire(&ep->lock);
	for (i = 0; i < 2; i++) {
		for (r = lists[i]->head; r; r = r->next) {
			if (r->op.context != context)
				continue;
			ibf_rdm_list_remove(lists[i], r);
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
			    msg->addr, 0, msg->data, flags, msg->context, 0);
}

static ssize_t ibf_rdm_m_inject(struct fid_ep *ep_fid, const void *buf,
				size_t len, fi_addr_t dest)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), &iov, 1, dest, 0, 0,
			    FI_INJECT, NULL, 0);
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
			    FI_INJECT | FI_REMOTE_CQ_DATA, NULL, 0);
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
			    msg->addr, msg->tag, msg->data, flags, msg->context, 1);
}

static ssize_t ibf_rdm_t_inject(struct fid_ep *ep_fid, const void *buf,
				size_t len, fi_addr_t dest, uint64_t tag)
{
	struct iovec iov = { (void *)buf, len };

	return ibf_rdm_send(to_ibf_rdm_ep(ep_fid), &iov, 1, dest, tag, 0,
			    FI_INJECT, NULL, 1);
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
			    FI_INJECT | FI_REMOTE_CQ_DATA, NULL, 1);
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
