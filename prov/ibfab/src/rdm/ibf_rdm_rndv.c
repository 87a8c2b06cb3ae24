/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM rendezvous: messages above the eager size (ibf_rdm_proto.h).
 *
 * The sender opens its buffer to the peer and sends an RTS naming it:
 * through a memory window over the buffer's cached registration, bound on
 * the endpoint's binder (ibf_rdm_bind.h), where it can (no registration
 * once warm); else by registering each buffer for this send alone.  The
 * receiver, once a receive matches, registers that buffer (unless the
 * caller gave a descriptor), reads the message into it with RDMA READ in
 * pieces of the port's max_msg_sz, at most IBF_RDM_READS at a time, and
 * answers with a FIN from the bounce that held the RTS, which completes
 * the send; the sender unbinds its window then.  Reads and FINs that find
 * their connection's send queue full wait in its stalled list
 * (ibf_rdm_unstall goes on when slots return).
 * Every step is bound to the connection and life (epoch) the RTS came on,
 * and a FIN to the send's cookie, connection and life.
 * Called with ep->lock held.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm_proto.h"

/*
 * Open a one-buffer message to the peer through a memory window: no
 * registration once the op has a window and the buffer a cached one.  0,
 * or -FI_ENOSYS when it cannot be (see ibf_rdm_mw_open).
 */
static int ibf_rdm_rts_window(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			      const struct iovec *iov, size_t count)
{
	struct ibf_rdm_rts *rts = (void *)(op->mem + IBF_RDM_HDR);
	size_t i, n = 0, one = 0;
	uint32_t rkey;

	if (!ep->mw_ok)
		return -FI_ENOSYS;	/* registered per send: no scan */
	for (i = 0; i < count; i++)
		if (iov[i].iov_len) {
			n++;
			one = i;
		}
	if (n != 1 || ibf_rdm_mw_open(&ep->as_ops, op, iov[one].iov_base,
				      iov[one].iov_len, &rkey))
		return -FI_ENOSYS;
	rts->seg[0].addr = (uintptr_t)iov[one].iov_base;
	rts->seg[0].len = iov[one].iov_len;
	rts->seg[0].rkey = rkey;
	rts->nseg = 1;
	return 0;
}

/* Register each of the sender's buffers for this send alone. */
static int ibf_rdm_rts_register(struct ibf_rdm_ep_proto *ep,
				struct ibf_rdm_op *op,
				const struct iovec *iov, size_t count)
{
	struct ibf_rdm_rts *rts = (void *)(op->mem + IBF_RDM_HDR);
	struct ibv_mr *mr;
	size_t i;

	for (i = 0; i < count; i++) {
		if (!iov[i].iov_len)
			continue;
		mr = ibv_reg_mr(ep->base.domain->pd, iov[i].iov_base, iov[i].iov_len,
				IBV_ACCESS_REMOTE_READ);
		if (!mr) {
			int err = errno;	/* before the deregistrations */

			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "registering "
				       "a %zu-byte send buffer: %s\n",
				       iov[i].iov_len, strerror(err));
			ibf_rdm_unregister(op);
			return ibf_errno_to_fi_retry(err);
		}
		op->mr[op->nmr++] = mr;
		rts->seg[rts->nseg].addr = (uintptr_t)iov[i].iov_base;
		rts->seg[rts->nseg].len = iov[i].iov_len;
		rts->seg[rts->nseg].rkey = mr->rkey;
		rts->nseg++;
	}
	return 0;
}

/* Open the sender's buffers for the peer to read; fill the RTS (the
 * header before it is the caller's). */
int ibf_rdm_rts_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
		      const struct iovec *iov, size_t count, size_t len)
{
	struct ibf_rdm_rts *rts = (void *)(op->mem + IBF_RDM_HDR);
	int ret;

	rts->len = len;
	rts->cookie = (uint32_t)(op - ep->ops);
	rts->nseg = 0;
	if (ibf_rdm_rts_window(ep, op, iov, count)) {
		ret = ibf_rdm_rts_register(ep, op, iov, count);
		if (ret)
			return ret;
	}
	ep->stats.rndv++;
	ep->stats.rndv_windows += op->mw_use;
	op->wire_len = IBF_RDM_HDR + sizeof(*rts);
	op->tx_state = IBF_RDM_TX_RTS;
	op->reads_left = 2;	/* its own completion and the FIN */
	op->fin_seen = 0;
	return 0;
}

int ibf_rdm_rts_fits(const struct ibf_rdm_op *b, uint32_t byte_len)
{
	const struct ibf_rdm_rts *rts = (const void *)(b->mem + IBF_RDM_HDR);
	uint64_t sum = 0;
	uint32_t i;

	if (byte_len < IBF_RDM_HDR + offsetof(struct ibf_rdm_rts, seg) ||
	    rts->nseg > IBF_RDM_IOV ||
	    byte_len < IBF_RDM_HDR + offsetof(struct ibf_rdm_rts, seg) +
		       rts->nseg * sizeof(rts->seg[0]))
		return 0;
	for (i = 0; i < rts->nseg; i++) {
		if (rts->seg[i].len > rts->len - sum)
			return 0;
		sum += rts->seg[i].len;
	}
	return sum == rts->len;
}

/*
 * The RTS's work request has completed.  A failed one fails the send,
 * without waiting for a FIN that cannot come (a late one is ignored).
 */
void ibf_rdm_rts_sent(struct ibf_rdm_op *op, int err)
{
	if (err) {
		if (!op->read_err)
			op->read_err = err;
		if (!op->fin_seen) {
			op->fin_seen = 1;
			op->reads_left--;
		}
	}
	if (--op->reads_left == 0)
		ibf_rdm_complete(op, op->read_err);
}

/*
 * The connection an RTS held in b came on has ended since (b->epoch is
 * its life then): the sender's buffers and keys went with it, and a new
 * connection to the same peer must not carry reads or answers for it.
 */
static int ibf_rdm_bounce_stale(const struct ibf_rdm_op *b)
{
	return ibf_rdm_epoch_over(b->conn, b->epoch);
}

void ibf_rdm_reply_post(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b)
{
	struct ibf_rdm_conn *conn = b->conn;
	struct ibv_sge sge = {
		.addr = (uintptr_t)b->mem,
		.length = b->wire_len,
		.lkey = b->mem_lkey,
	};
	int ret;

	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_FIN);
	if (ibf_rdm_bounce_stale(b)) {
		ibf_rdm_bounce_release(&ep->as_ops, b);	/* no one to answer any more */
		return;
	}
	ret = ibf_rdm_post_send(conn, b, &sge, 1, sge.length <= ep->max_inline);
	if (ret == -FI_EAGAIN) {
		ibf_rdm_stall(conn, b);
		return;
	}
	if (ret) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "cannot answer a "
			       "peer: %s\n", fi_strerror(-ret));
		ibf_rdm_bounce_release(&ep->as_ops, b);
	}
}

/* Answer an RTS held in bounce b; b goes back to the SRQ after. */
static void ibf_rdm_fin_send(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			     int status)
{
	struct ibf_rdm_rts *rts = (void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_fin *fin = (void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_hdr *hdr = (void *)b->mem;
	uint32_t cookie = rts->cookie;

	ibf_rdm_hdr_set(hdr, IBF_RDM_FIN, 0, ibf_rdm_key_gen(&ep->as_ops));
	fin->cookie = cookie;
	fin->status = status;
	b->wire_len = IBF_RDM_HDR + sizeof(*fin);
	ibf_rdm_reply_post(ep, b);
}

/* Drop a held message (FI_DISCARD): an RTS still gets its FIN. */
void ibf_rdm_discard(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b)
{
	if (((struct ibf_rdm_hdr *)b->mem)->type == IBF_RDM_RTS)
		ibf_rdm_fin_send(ep, b, 0);
	else
		ibf_rdm_bounce_release(&ep->as_ops, b);
}

/* The lkey of a receive buffer: the caller's MR if it fits, else the
 * registration cache's (or one for this receive alone). */
static int ibf_rdm_rx_lkey(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
			   size_t i, uint32_t *lkey)
{
	if (ibf_desc_covers(r->desc[i], r->iov[i].iov_base, r->iov[i].iov_len,
			    1, lkey))
		return 0;	/* a desc is a hint: used where it fits */
	return ibf_rdm_reg_local(&ep->as_ops, r, r->iov[i].iov_base,
				 r->iov[i].iov_len,
				 IBV_ACCESS_LOCAL_WRITE, lkey);
}

/*
 * Post the next read of the message an RTS announces into r: at most
 * max_read bytes of one of the sender's segments, scattered over r's iovs
 * from where the last read stopped.  0, or -FI_E* if it cannot be posted.
 */
static int ibf_rdm_read_next(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r)
{
	const struct ibf_rdm_rts *rts = (void *)(r->bounce->mem + IBF_RDM_HDR);
	struct ibf_rdm_conn *conn = r->bounce->conn;
	const struct ibf_rdm_seg *seg;
	struct ibv_sge sge[IBF_RDM_IOV];
	uint64_t addr;
	size_t chunk;
	int nsge, ret;

	if (ibf_rdm_bounce_stale(r->bounce))
		return -FI_ECONNABORTED;
	/* The slot first: what follows moves r on. */
	if (!ibf_rdm_credit_take(conn))
		return -FI_EAGAIN;
	while (r->rd_seg < rts->nseg && r->rd_soff == rts->seg[r->rd_seg].len) {
		r->rd_seg++;
		r->rd_soff = 0;
	}
	if (r->rd_seg >= rts->nseg) {
		ibf_rdm_credit_give(conn, 1);
		return -FI_EIO;	/* the segments hold less than the length */
	}
	seg = &rts->seg[r->rd_seg];
	chunk = IBF_MIN(IBF_MIN(seg->len - r->rd_soff, (uint64_t)ep->max_read),
			r->rd_left);
	addr = seg->addr + r->rd_soff;
	r->rd_soff += chunk;
	r->rd_left -= chunk;
	nsge = ibf_rdm_iov_sges(r, chunk, sge);
	ret = ibf_rdm_post_read(conn, r, sge, nsge, addr, seg->rkey);
	if (ret)
		return ret;
	r->reads_left++;
	return 0;
}

/* The rendezvous into r is over (read, failed or empty): FIN, complete. */
static void ibf_rdm_read_done(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r)
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
static void ibf_rdm_read_more(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r)
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

void ibf_rdm_read_start(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
			struct ibf_rdm_op *b)
{
	const struct ibf_rdm_rts *rts = (void *)(b->mem + IBF_RDM_HDR);
	size_t cap = ibf_rdm_iov_len(r->iov, r->count), i;
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
	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_HELD);
	ibf_rdm_op_to(r, IBF_RDM_RX_READ);
	for (i = 0; want && !ret && i < r->count; i++)
		if (r->iov[i].iov_len)
			ret = ibf_rdm_rx_lkey(ep, r, i, &r->lkey[i]);
	r->read_err = ret;
	ibf_rdm_read_more(ep, r);
}

/* One read into r has completed (or failed): the next, or the end. */
void ibf_rdm_on_read(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
		     const struct ibv_wc *wc)
{
	r->reads_left--;
	if (wc->status != IBV_WC_SUCCESS && !r->read_err)
		r->read_err = -ibf_wc_status_to_fi(wc->status);
	ibf_rdm_read_more(ep, r);
}

void ibf_rdm_unstall(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_proto *ep = ibf_rdm_proto_of(conn->ep);
	struct ibf_rdm_op *op;

	while ((op = ibf_rdm_unstall_next(conn))) {
		if (op->is_bounce)
			ibf_rdm_reply_post(ep, op);	/* may park it again */
		else if (op->state == IBF_RDM_TX_RMA)
			ibf_rdm_rma_more(op);
		else if (op->state == IBF_RDM_TX_KEYQ)
			ibf_rdm_keyq_resume(op);
		else
			ibf_rdm_read_more(ep, op);
		if (op->stalled)
			break;		/* no slot after all: in order, later */
	}
}

/*
 * Rendezvous sends (and atomics, key questions) whose FIN (answer) will
 * never come: their connection died (its epoch moved on).  Each completes, in error, once its own work request
 * has too (the device flushes it if it has not).
 */
void ibf_rdm_rndv_fail_ended(struct ibf_rdm_ep_proto *ep)
{
	struct ibf_rdm_op *op;
	uint32_t i;

	for (i = 0; i < ep->ntx; i++) {
		op = &ep->ops[i];
		if ((op->state != IBF_RDM_TX_ATOMIC &&
		     ((op->state != IBF_RDM_TX_KEYQ && op->state != IBF_RDM_TX_RTS) ||
		      op->fin_seen)) ||
		    !ibf_rdm_epoch_over(op->conn, op->epoch))
			continue;
		op->epoch = ibf_rdm_conn_epoch(op->conn);	/* counted once */
		if (op->state == IBF_RDM_TX_RTS)
			op->fin_seen = 1;	/* nor by a failed work request */
		op->read_err = -FI_ECONNABORTED;
		if (--op->reads_left == 0)
			ibf_rdm_complete(op, op->read_err);
	}
}

/* A FIN: the peer has read our rendezvous send. */
void ibf_rdm_on_fin(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b)
{
	const struct ibf_rdm_fin *fin = (void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_op *op = fin->cookie < ep->ntx ? &ep->ops[fin->cookie] : NULL;

	/*
	 * Only the peer the RTS went to, in the life of the connection it
	 * went on, answers it, once, with 0 or an error code: anything else
	 * would complete a send whose buffer is still being read.
	 */
	if (op && op->state == IBF_RDM_TX_RTS && !op->fin_seen &&
	    op->post_conn == b->conn &&
	    op->post_epoch == __atomic_load_n(&b->conn->epoch, __ATOMIC_ACQUIRE) &&
	    fin->status <= 0 && fin->status > -4096) {
		op->fin_seen = 1;
		if (fin->status)
			op->read_err = fin->status;
		if (--op->reads_left == 0)
			ibf_rdm_complete(op, op->read_err);
		ibf_rdm_bounce_release(&ep->as_ops, b);
	} else {
		ibf_rdm_drop(&ep->as_ops, b, "a FIN for no rendezvous send of its sender's");
	}
}
