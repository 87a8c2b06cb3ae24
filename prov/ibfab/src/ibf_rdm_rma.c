/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM RMA: fi_write, fi_read and their kin, to any peer of the AV (the
 * endpoint's own address included), over the peer's RC QP, made on first
 * use as for messages.  The API calls and the protocol both live here.
 *
 * An RMA op is one RDMA WRITE or READ work request: the target's HCA
 * checks the key, the range and the rights, and the initiator learns of a
 * violation as a completion error.  fi_writedata adds a WDATA header sent
 * right behind the write on the same QP; RC delivers it after the written
 * bytes, and the target reports it as an FI_REMOTE_CQ_DATA completion
 * carried by one of its receive ops (so the CQ's room, sized for the ops,
 * holds it).
 *
 * Local buffers need no registration (mr_mode has no FI_MR_LOCAL): up to
 * eager_size bytes go through the op's registered slot (copied in for a
 * write, out when a read completes); larger ones use the caller's desc if
 * its region covers them with the rights needed (ibf_desc_covers), else
 * the domain's registration cache's (ibf_mr_cache.h).
 *
 * A write's completion is the RC acknowledgment: the target's HCA has
 * placed the data, and whatever the target learns later from this
 * endpoint sees it (FI_DELIVERY_COMPLETE as fi_cq(3) defines it).
 * ep->lock held unless said otherwise.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm.h"

/* ---- initiator ---- */

/* The local side of op: the slot, or the caller's buffers (registered). */
static int ibf_rdm_rma_local(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
			     const struct iovec *iov, void **desc, size_t count,
			     size_t len)
{
	int access = op->wr_kind == IBF_RDM_WR_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
	uint32_t lkey;
	size_t i;
	int ret;

	op->nsge = 0;
	op->via_slot = len <= ep->eager_size;
	if (op->via_slot) {
		if (op->wr_kind != IBF_RDM_WR_READ)
			ibf_rdm_copy_from_iov(op->mem + IBF_RDM_HDR, iov, count);
		for (i = 0; i < count; i++)
			op->iov[i] = iov[i];	/* a read's copy-out */
		op->count = count;
		op->sge[0].addr = (uintptr_t)(op->mem + IBF_RDM_HDR);
		op->sge[0].length = (uint32_t)len;
		op->sge[0].lkey = op->mem_lkey;
		op->nsge = len ? 1 : 0;
		return 0;
	}
	for (i = 0; i < count; i++) {
		if (!iov[i].iov_len)
			continue;
		if (!desc || !ibf_desc_covers(desc[i], iov[i].iov_base,
					      iov[i].iov_len,
					      op->wr_kind == IBF_RDM_WR_READ,
					      &lkey)) {
			ret = ibf_rdm_reg_local(ep, op, iov[i].iov_base,
						iov[i].iov_len, access, &lkey);
			if (ret) {
				ibf_rdm_unregister(op);
				return ret;
			}
		}
		op->sge[op->nsge].addr = (uintptr_t)iov[i].iov_base;
		op->sge[op->nsge].length = (uint32_t)iov[i].iov_len;
		op->sge[op->nsge].lkey = lkey;
		op->nsge++;
	}
	return 0;
}

static int ibf_rdm_rma_build(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
			     int kind, const struct iovec *iov, void **desc,
			     size_t count, size_t len, uint64_t addr,
			     uint64_t key, uint64_t data)
{
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	struct ibf_rdm_rma_note *note = (void *)(op->mem + ep->note_off);

	op->wr_kind = kind;
	op->rma_addr = addr;
	op->rma_key = (uint32_t)key;
	op->read_err = 0;
	op->tx_state = IBF_RDM_TX_RMA;
	/*
	 * The header that may go behind (remote CQ data, or a target with
	 * FI_RMA_EVENT: decided at the post, ibf_rdm_post_built), telling
	 * the target; its length and key are for its completion and
	 * counters only: nothing is accessed by them.
	 */
	hdr->type = kind == IBF_RDM_WR_READ ? IBF_RDM_RDONE : IBF_RDM_WDATA;
	hdr->flags = kind == IBF_RDM_WR_WRITE_DATA ? IBF_RDM_F_DATA : 0;
	hdr->tag = (uint32_t)key;	/* a write's sequence: at post */
	hdr->data = data;
	note->addr = addr;
	note->len = len;
	return ibf_rdm_rma_local(ep, op, iov, desc, count, len);
}

static ssize_t ibf_rdm_rma(struct ibf_rdm_ep *ep, int kind,
			   const struct iovec *iov, void **desc, size_t count,
			   fi_addr_t dest, const struct fi_rma_iov *rma,
			   uint64_t data, uint64_t flags, void *context)
{
	struct ibf_rdm_op *op;
	size_t len;
	ssize_t ret;

	if (unlikely(!rma)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "RMA with no remote iov\n");
		return -FI_EINVAL;
	}
	if (unlikely(ibf_rdm_iov_check(iov, count, ep->tx_iov_limit, &len, "RMA")))
		return -FI_EINVAL;
	if (unlikely(len > rma->len || len > ep->max_read)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "RMA of %zu bytes to "
			       "a %zu-byte remote buffer (one RMA carries at "
			       "most %u bytes)\n", len, rma->len, ep->max_read);
		return len > rma->len ? -FI_EINVAL : -FI_EMSGSIZE;
	}
	if (unlikely((flags & FI_INJECT) && len > ep->inject_size)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "inject of %zu bytes: "
			       "inject_size is %zu\n", len, ep->inject_size);
		return -FI_EINVAL;
	}
	if (unlikely(!(ep->info->caps & FI_RMA))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "RMA on an endpoint "
			       "opened without FI_RMA\n");
		return -FI_EOPNOTSUPP;
	}
	if (unlikely(!ep->enabled))
		return -FI_EOPBADSTATE;
	ibf_lock_acquire(&ep->lock);
	op = ibf_rdm_tx_begin(ep, dest, context, FI_RMA |
			      (kind == IBF_RDM_WR_READ ? FI_READ : FI_WRITE),
			      len, flags, &ret);
	if (unlikely(!op))
		goto out;
	ret = ibf_rdm_rma_build(ep, op, kind, iov, desc, count, len, rma->addr,
				rma->key, data);
	if (likely(!ret))
		ret = ibf_rdm_conn_send(op->conn, op);
	if (unlikely(ret)) {
		ibf_rdm_unregister(op);
		ibf_rdm_op_free(op);
	} else if (kind == IBF_RDM_WR_READ) {
		ep->stats.reads++;
	} else {
		ep->stats.writes++;
	}
out:
	ibf_lock_release(&ep->lock);
	return ret;
}

/* One completion of RMA op (its write or read; a writedata's header). */
void ibf_rdm_rma_sent(struct ibf_rdm_op *op, const struct ibv_wc *wc)
{
	if (unlikely(wc->status != IBV_WC_SUCCESS) && !op->read_err) {
		op->read_err = -ibf_wc_status_to_fi(wc->status);
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an RMA %s of "
				       "%zu bytes at %#llx, key %#x, failed: %s%s\n",
				       op->wr_kind == IBF_RDM_WR_READ ? "read" : "write",
				       op->op.len, (unsigned long long)op->rma_addr,
				       op->rma_key, ibv_wc_status_str(wc->status),
				       wc->status == IBV_WC_REM_ACCESS_ERR ?
				       " (the peer's region: its key, range and "
				       "FI_REMOTE_READ/WRITE access)" : "");
	}
	if (--op->reads_left)
		return;
	if (!op->read_err && op->via_slot && op->wr_kind == IBF_RDM_WR_READ)
		ibf_copy_to_iov(op->iov, op->count, op->mem + IBF_RDM_HDR,
				    op->op.len);
	ibf_rdm_complete(op, op->read_err);
}

/* ---- target ---- */

/* Report the WDATA (with remote CQ data) in bounce b with receive op r,
 * then free b.  b->op.len: the write's length, as the device said. */
static void ibf_rdm_wdata_report(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
				 struct ibf_rdm_op *b)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	const struct ibf_rdm_rma_note *note = (const void *)(b->mem + IBF_RDM_HDR);

	if (ep->rma_event)
		ibf_mr_remote_event(ep->domain, (uint32_t)hdr->tag, note->addr,
				    b->op.len, 0);
	r->op.context = NULL;
	r->op.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	r->op.buf = NULL;
	r->op.len = b->op.len;
	r->op.olen = 0;
	r->op.tag = 0;
	r->op.data = hdr->data;
	r->op.src = ibf_rdm_conn_addr(b->conn);
	r->op.user_comp = 1;
	r->uncounted = 0;
	r->nmr = 0;
	r->nmrc = 0;
	r->multi = 0;
	r->state = IBF_RDM_RX_POSTED;
	ibf_rdm_bounce_release(ep, b);
	ibf_rdm_complete(r, 0);
}

void ibf_rdm_on_write_imm(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			  const struct ibv_wc *wc)
{
	struct ibf_rdm_conn *conn = b->conn;

	conn->wimm_seen.qp_num = wc->qp_num;
	conn->wimm_seen.seq = ntohl(wc->imm_data);
	conn->wimm_seen.len = wc->byte_len;
	conn->wimm_seen.valid = 1;
	ibf_rdm_bounce_release(ep, b);
}

/*
 * Whether the notice in b tells of the write that came just before it on
 * the same QP (its sequence and length): the only way a peer gets remote
 * CQ data or a write event reported.  The write is used up either way.
 */
static int ibf_rdm_wdata_bound(struct ibf_rdm_op *b, const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	const struct ibf_rdm_rma_note *note = (const void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_conn *conn = b->conn;
	int ok;

	ok = wc->byte_len >= IBF_RDM_HDR + sizeof(*note) &&
	     conn->wimm_seen.valid && conn->wimm_seen.qp_num == wc->qp_num &&
	     conn->wimm_seen.seq == (uint32_t)(hdr->tag >> 32) &&
	     conn->wimm_seen.len == note->len;
	conn->wimm_seen.valid = 0;
	b->op.len = ok ? note->len : 0;
	return ok;
}

/*
 * Remote CQ data of a write, in bounce b.  Without an rx CQ it is counted
 * only; without a free receive op to carry it, it waits, in order, until
 * one is freed (ibf_rdm_wdata_drain).
 */
void ibf_rdm_on_wdata(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
		      const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_rdm_op *r;

	if (unlikely(!ibf_rdm_wdata_bound(b, wc))) {
		ibf_rdm_drop(ep, b, "a write notice that no write came before");
		return;
	}
	if (!(hdr->flags & IBF_RDM_F_DATA)) {
		/* FI_RMA_EVENT alone: a remote write to count. */
		ibf_rdm_on_remote_event(ep, b, IBF_RDM_CNTR_REMOTE_WRITE);
		return;
	}
	if (!ep->rx_cq) {
		if (ep->cntr[IBF_RDM_CNTR_REMOTE_WRITE])
			ibf_cntr_count(ep->cntr[IBF_RDM_CNTR_REMOTE_WRITE], 0);
		ibf_rdm_bounce_release(ep, b);
		return;
	}
	r = ep->wdata_wait.head ? NULL : ibf_rdm_rx_get(ep);
	if (likely(r)) {
		ibf_rdm_wdata_report(ep, r, b);
		return;
	}
	b->state = IBF_RDM_BOUNCE_HELD;
	ibf_rdm_list_append(&ep->wdata_wait, b);
}

void ibf_rdm_on_remote_event(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			     int kind)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	const struct ibf_rdm_rma_note *note = (const void *)(b->mem + IBF_RDM_HDR);
	int read = kind == IBF_RDM_CNTR_REMOTE_READ;

	if (ep->cntr[kind])
		ibf_cntr_count(ep->cntr[kind], 0);
	/* And the counter bound to the region, if the key grants what was
	 * done over the whole range. */
	if (ep->rma_event)
		ibf_mr_remote_event(ep->domain, (uint32_t)hdr->tag, note->addr,
				    read ? note->len : b->op.len, read);
	ibf_rdm_bounce_release(ep, b);
}

void ibf_rdm_wdata_drain(struct ibf_rdm_ep *ep)
{
	struct ibf_rdm_op *b, *r;

	while ((b = ep->wdata_wait.head) && (r = ibf_rdm_rx_get(ep))) {
		ibf_rdm_list_remove(&ep->wdata_wait, b);
		ibf_rdm_wdata_report(ep, r, b);
	}
}

/* ---- fi_ops_rma ---- */

static ssize_t ibf_rdm_read(struct fid_ep *ep_fid, void *buf, size_t len,
			    void *desc, fi_addr_t src, uint64_t addr,
			    uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_READ, &iov, &desc, 1, src, &rma, 0,
			   ep->tx_op_flags, context);
}

static ssize_t ibf_rdm_readv(struct fid_ep *ep_fid, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src,
			     uint64_t addr, uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct fi_rma_iov rma = { addr, ibf_rdm_iov_len(iov, count), key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_READ, iov, desc, count, src, &rma, 0,
			   ep->tx_op_flags, context);
}

/* One remote segment (rma_iov_limit 1). */
static int ibf_rdm_rma_msg_ok(const struct fi_msg_rma *msg)
{
	if (msg && msg->rma_iov_count == 1 && msg->rma_iov)
		return 1;
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "fi_readmsg/fi_writemsg "
		       "takes one remote iov (rma_iov_limit 1)\n");
	return 0;
}

static ssize_t ibf_rdm_readmsg(struct fid_ep *ep_fid,
			       const struct fi_msg_rma *msg, uint64_t flags)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	if (!ibf_rdm_rma_msg_ok(msg))
		return -FI_EINVAL;
	return ibf_rdm_rma(ep, IBF_RDM_WR_READ, msg->msg_iov, msg->desc,
			   msg->iov_count, msg->addr, msg->rma_iov, 0,
			   flags & ~FI_INJECT, msg->context);
}

static ssize_t ibf_rdm_write(struct fid_ep *ep_fid, const void *buf,
			     size_t len, void *desc, fi_addr_t dest,
			     uint64_t addr, uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE, &iov, &desc, 1, dest, &rma, 0,
			   ep->tx_op_flags, context);
}

static ssize_t ibf_rdm_writev(struct fid_ep *ep_fid, const struct iovec *iov,
			      void **desc, size_t count, fi_addr_t dest,
			      uint64_t addr, uint64_t key, void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct fi_rma_iov rma = { addr, ibf_rdm_iov_len(iov, count), key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE, iov, desc, count, dest, &rma,
			   0, ep->tx_op_flags, context);
}

static ssize_t ibf_rdm_writemsg(struct fid_ep *ep_fid,
				const struct fi_msg_rma *msg, uint64_t flags)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);

	if (!ibf_rdm_rma_msg_ok(msg))
		return -FI_EINVAL;
	return ibf_rdm_rma(ep, (flags & FI_REMOTE_CQ_DATA) ?
			   IBF_RDM_WR_WRITE_DATA : IBF_RDM_WR_WRITE,
			   msg->msg_iov, msg->desc, msg->iov_count, msg->addr,
			   msg->rma_iov, msg->data, flags, msg->context);
}

static ssize_t ibf_rdm_inject_write(struct fid_ep *ep_fid, const void *buf,
				    size_t len, fi_addr_t dest, uint64_t addr,
				    uint64_t key)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE, &iov, NULL, 1, dest, &rma, 0,
			   IBF_RDM_INJECT, NULL);
}

static ssize_t ibf_rdm_writedata(struct fid_ep *ep_fid, const void *buf,
				 size_t len, void *desc, uint64_t data,
				 fi_addr_t dest, uint64_t addr, uint64_t key,
				 void *context)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE_DATA, &iov, &desc, 1, dest,
			   &rma, data, ep->tx_op_flags, context);
}

static ssize_t ibf_rdm_inject_writedata(struct fid_ep *ep_fid, const void *buf,
					size_t len, uint64_t data,
					fi_addr_t dest, uint64_t addr,
					uint64_t key)
{
	struct ibf_rdm_ep *ep = to_ibf_rdm_ep(ep_fid);
	struct iovec iov = { (void *)buf, len };
	struct fi_rma_iov rma = { addr, len, key };

	return ibf_rdm_rma(ep, IBF_RDM_WR_WRITE_DATA, &iov, NULL, 1, dest, &rma,
			   data, IBF_RDM_INJECT, NULL);
}

struct fi_ops_rma ibf_rdm_rma_ops = {
	.size = sizeof(struct fi_ops_rma),
	.read = ibf_rdm_read,
	.readv = ibf_rdm_readv,
	.readmsg = ibf_rdm_readmsg,
	.write = ibf_rdm_write,
	.writev = ibf_rdm_writev,
	.writemsg = ibf_rdm_writemsg,
	.inject = ibf_rdm_inject_write,
	.writedata = ibf_rdm_writedata,
	.injectdata = ibf_rdm_inject_writedata,
};
