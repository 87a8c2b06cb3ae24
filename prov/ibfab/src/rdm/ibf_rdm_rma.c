/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM RMA, the protocol: how the requests of fi_write, fi_read and their
 * kin (checked in ibf_rdm_rma_api.c, started by ibf_rdm_submit) travel
 * to any peer of the AV (the endpoint's own address included), over the
 * peer's RC QP, made on first use as for messages.
 *
 * An RMA op is one RDMA WRITE or READ work request, or, above the port's
 * max_msg_sz (8 MiB on rxe), one per part of at most that size, posted in
 * order as earlier parts complete: max_msg_size holds for RMA as for
 * messages.  The target's HCA checks the key, the range and the rights,
 * and the initiator learns of a violation as a completion error.
 * fi_writedata adds a WDATA header sent right behind the write on the
 * same QP; RC delivers it after the written bytes, and the target reports
 * it as an FI_REMOTE_CQ_DATA completion carried by one of its receive ops
 * (so the CQ's room, sized for the ops, holds it).
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

#include "ibf_rdm_proto.h"

/* ---- initiator ---- */

/* The registered local side of an RMA op that goes through no slot: the
 * caller's desc if its region covers iov[i] with the rights needed, else
 * the registration cache's. */
static int ibf_rdm_rma_lkey(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			    const struct iovec *iov, void **desc, size_t i,
			    uint32_t *lkey)
{
	int read = op->wr_kind == IBF_RDM_WR_READ;

	if (desc && ibf_desc_covers(desc[i], iov[i].iov_base, iov[i].iov_len,
				    read, lkey))
		return 0;
	return ibf_rdm_reg_local(&ep->as_ops, op, iov[i].iov_base,
				 iov[i].iov_len,
				 read ? IBV_ACCESS_LOCAL_WRITE : 0, lkey);
}

/*
 * Prepare the next part of RMA op in parts (ibf_rdm_op.h): at most
 * max_read bytes of its iovs from where the last part stopped.
 */
static void ibf_rdm_rma_part_next(struct ibf_rdm_ep_proto *ep,
				  struct ibf_rdm_op *op)
{
	size_t chunk = IBF_MIN(op->rd_left, (size_t)ep->max_read);

	op->part_off += op->part_len;
	op->part_len = chunk;
	op->rd_left -= chunk;
	op->part_last = !op->rd_left;
	op->nsge = ibf_rdm_iov_sges(op, chunk, op->sge);
	op->part_ready = 1;
}

/*
 * An RMA above the port's max_msg_sz: its iovs registered, and its first
 * part prepared; ibf_rdm_rma_more posts the rest as parts complete.
 */
static int ibf_rdm_rma_split(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			     const struct iovec *iov, void **desc, size_t count,
			     size_t len)
{
	size_t i;
	int ret;

	for (i = 0; i < count; i++) {
		op->iov[i] = iov[i];
		if (!iov[i].iov_len)
			continue;
		ret = ibf_rdm_rma_lkey(ep, op, iov, desc, i, &op->lkey[i]);
		if (ret) {
			ibf_rdm_unregister(op);
			return ret;
		}
	}
	op->count = count;
	op->rma_split = 1;
	op->rd_iov = 0;
	op->rd_ioff = 0;
	op->rd_left = len;
	op->part_off = 0;
	op->part_len = 0;
	ibf_rdm_rma_part_next(ep, op);
	return 0;
}

/* The local side of op: the slot, or the caller's buffers (registered). */
static int ibf_rdm_rma_local(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			     const struct iovec *iov, void **desc, size_t count,
			     size_t len)
{
	uint32_t lkey;
	size_t i;
	int ret;

	op->nsge = 0;
	op->rma_split = 0;
	op->part_ready = 1;
	op->part_last = 1;
	op->part_off = 0;
	op->part_len = len;
	op->via_slot = len <= ep->eager_size;
	if (op->via_slot) {
		/* The loop, not the inline copy: written in here, the copy
		 * cost this function registers (an 8-byte write 968 -> 977,
		 * fabtests/run-instr). */
		if (op->wr_kind != IBF_RDM_WR_READ)
			ibf_rdm_copy_from_iov_any(op->mem + IBF_RDM_HDR, iov, count);
		for (i = 0; i < count; i++)
			op->iov[i] = iov[i];	/* a read's copy-out */
		op->count = count;
		op->sge[0].addr = (uintptr_t)(op->mem + IBF_RDM_HDR);
		op->sge[0].length = (uint32_t)len;
		op->sge[0].lkey = op->mem_lkey;
		op->nsge = len ? 1 : 0;
		return 0;
	}
	if (len > ep->max_read)
		return ibf_rdm_rma_split(ep, op, iov, desc, count, len);
	for (i = 0; i < count; i++) {
		if (!iov[i].iov_len)
			continue;
		ret = ibf_rdm_rma_lkey(ep, op, iov, desc, i, &lkey);
		if (ret) {
			ibf_rdm_unregister(op);
			return ret;
		}
		op->sge[op->nsge].addr = (uintptr_t)iov[i].iov_base;
		op->sge[op->nsge].length = (uint32_t)iov[i].iov_len;
		op->sge[op->nsge].lkey = lkey;
		op->nsge++;
	}
	return 0;
}

/*
 * The header that may go behind RMA op (remote CQ data, or a target with
 * FI_RMA_EVENT: decided at the post, ibf_rdm_post_built), telling the
 * target; its length, key and address (the application's) are for its
 * completion and counters only: nothing is accessed by them.
 */
static void ibf_rdm_rma_notice(struct ibf_rdm_ep_proto *ep,
			       struct ibf_rdm_op *op)
{
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	struct ibf_rdm_rma_note *note = (void *)(op->mem + ep->note_off);

	ibf_rdm_hdr_set(hdr, op->rma_kind == IBF_RDM_WR_READ ? IBF_RDM_RDONE :
			IBF_RDM_WDATA, op->rma_kind == IBF_RDM_WR_WRITE_DATA ?
			IBF_RDM_F_DATA : 0, ibf_rdm_key_gen(&ep->as_ops));
	hdr->tag = (uint32_t)op->rma_app_key;	/* a write's sequence: at post */
	hdr->data = op->rma_data;
	note->addr = op->rma_app_addr;
	note->len = op->op.len;
}

/* The build of an RMA without requested keys. */
static int ibf_rdm_rma_build_plain(struct ibf_rdm_ep_proto *ep,
				   struct ibf_rdm_op *op,
				   const struct ibf_rdm_req *req)
{
	op->wr_kind = req->rma.wr_kind;
	op->rma_kind = req->rma.wr_kind;
	op->rma_addr = req->rma.addr;
	op->rma_key = (uint32_t)req->rma.key;
	op->rma_app_addr = req->rma.addr;
	op->rma_app_key = req->rma.key;
	op->rma_data = req->data;
	op->read_err = 0;
	op->reads_left = 0;
	op->tx_state = IBF_RDM_TX_RMA;
	ibf_rdm_rma_notice(ep, op);
	return ibf_rdm_rma_local(ep, op, req->iov, req->desc, req->count,
				 req->len);
}

/* ---- requested keys (ibf_domain.req_keys) ---- */

/* What conn's peer told us of its region keyed key, in this life. */
static struct ibf_rdm_key_map *ibf_rdm_key_find(struct ibf_rdm_conn *conn,
						uint64_t key)
{
	uint32_t life = ibf_rdm_conn_epoch(conn);
	int i;

	if (__atomic_load_n(&conn->state, __ATOMIC_ACQUIRE) != IBF_CONN_CONNECTED)
		return NULL;	/* the next life may be another process's */
	for (i = 0; i < IBF_RDM_KEY_CACHE; i++)
		if (conn->keys[i].valid && conn->keys[i].key == key &&
		    conn->keys[i].life == life)
			return &conn->keys[i];
	return NULL;
}

static struct ibf_rdm_key_map *ibf_rdm_key_learn(struct ibf_rdm_conn *conn,
						 const struct ibf_rdm_keyr *r,
						 uint32_t life)
{
	struct ibf_rdm_key_map *m = NULL;
	int i;

	for (i = 0; i < IBF_RDM_KEY_CACHE && !m; i++)
		if (conn->keys[i].valid && conn->keys[i].key == r->key)
			m = &conn->keys[i];
	if (!m) {
		m = &conn->keys[conn->key_next];
		conn->key_next = (conn->key_next + 1) % IBF_RDM_KEY_CACHE;
	}
	m->key = r->key;
	m->base = r->base;
	m->len = r->len;
	m->rkey = r->rkey;
	m->access = r->access;
	m->life = life;
	m->valid = 1;
	return m;
}

void ibf_rdm_keys_forget(struct ibf_rdm_conn *conn, uint16_t gen)
{
	conn->peer_key_gen = gen;
	memset(conn->keys, 0, sizeof(conn->keys));
}

int ibf_rdm_key_covers(uint64_t len, uint32_t access, uint32_t need,
		       uint64_t off, uint64_t n)
{
	return (access & need) == need && off <= len && n <= len - off;
}

int ibf_rdm_keyr_check(const void *wire, uint32_t byte_len)
{
	const struct ibf_rdm_keyr *r = (const void *)((const uint8_t *)wire +
						      IBF_RDM_HDR);

	if (byte_len < IBF_RDM_HDR + sizeof(*r))
		return -FI_EINVAL;
	return r->status > 0 || r->status <= -4096 ? -FI_EINVAL : 0;
}

/* Point RMA op at the region m tells of, if it lies in it with the rights
 * it needs: the target's HCA would refuse it, and end the connection. */
static int ibf_rdm_key_apply(struct ibf_rdm_op *op, const struct ibf_rdm_key_map *m)
{
	uint32_t need = op->rma_kind == IBF_RDM_WR_READ ?
			IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;

	if (!ibf_rdm_key_covers(m->len, m->access, need, op->rma_app_addr,
				op->op.len)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an RMA %s of %zu "
			       "bytes at offset %#llx of the peer's region "
			       "keyed %#llx (%llu bytes, %s%s): out of its range "
			       "or rights\n",
			       op->rma_kind == IBF_RDM_WR_READ ? "read" : "write",
			       op->op.len, (unsigned long long)op->rma_app_addr,
			       (unsigned long long)m->key,
			       (unsigned long long)m->len,
			       m->access & IBV_ACCESS_REMOTE_READ ? "FI_REMOTE_READ " : "",
			       m->access & IBV_ACCESS_REMOTE_WRITE ? "FI_REMOTE_WRITE" : "");
		return -FI_EACCES;
	}
	op->rma_key = m->rkey;
	op->rma_addr = m->base + op->rma_app_addr;
	return 0;
}

/*
 * RMA op to ourselves (through the connecting half of a connection to our
 * own name) names a region of our own domain: looked up now, never
 * cached.  A cache would go stale, as the messages that would tell it a
 * key moved (their key_gen) arrive at the accepting half.
 */
static int ibf_rdm_key_own(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op)
{
	struct ibf_mr_key_info ki;
	struct ibf_rdm_key_map m = { 0 };

	if (ibf_mr_key_lookup(ep->base.domain, op->rma_app_key, &ki, 0)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an RMA to this "
			       "endpoint itself names key %#llx, which no "
			       "region of its domain has\n",
			       (unsigned long long)op->rma_app_key);
		return -FI_EACCES;
	}
	m.key = op->rma_app_key;
	m.base = ki.base;
	m.len = ki.len;
	m.rkey = ki.rkey;
	m.access = ki.access;
	return ibf_rdm_key_apply(op, &m);
}

/* RMA op names its target by a requested key: posted at once if we know
 * that region, else it first asks the peer (a KEYQ from its own slot,
 * leaving the payload there alone). */
static int ibf_rdm_rma_keyed(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op)
{
	struct ibf_rdm_key_map *m;
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	struct ibf_rdm_keyq *q = (void *)(op->mem + ep->note_off);

	if (ibf_rdm_conn_to_self(&ep->as_conns, op->conn))
		return ibf_rdm_key_own(ep, op);
	m = ibf_rdm_key_find(op->conn, op->rma_app_key);
	if (m)
		return ibf_rdm_key_apply(op, m);
	ibf_rdm_hdr_set(hdr, IBF_RDM_KEYQ, 0, ibf_rdm_key_gen(&ep->as_ops));
	hdr->tag = 0;
	hdr->data = 0;
	q->key = op->rma_app_key;
	q->cookie = (uint32_t)(op - ep->ops);
	q->rsvd = 0;
	op->wr_kind = IBF_RDM_WR_KEYQ;
	op->tx_state = IBF_RDM_TX_KEYQ;
	op->fin_seen = 0;
	op->key_ready = 0;
	op->reads_left = 2;	/* its own completion, and the answer */
	return 0;
}

void ibf_rdm_keyq_resume(struct ibf_rdm_op *op)
{
	ssize_t ret = ibf_rdm_conn_send(op->conn, op);

	if (ret == -FI_EAGAIN) {
		ibf_rdm_op_to(op, IBF_RDM_TX_KEYQ);
		ibf_rdm_stall(op->conn, op);	/* a slot or a grant: again */
		return;
	}
	op->key_ready = 0;
	if (ret)
		ibf_rdm_complete(op, (int)ret);
	else if (op->rma_split && op->state == IBF_RDM_TX_RMA)
		ibf_rdm_rma_more(op);
}

/* The KEYQ and its answer are both in: the RMA goes, or fails. */
static void ibf_rdm_keyq_done(struct ibf_rdm_ep_proto *ep,
			      struct ibf_rdm_op *op)
{
	if (op->read_err) {
		ibf_rdm_complete(op, op->read_err);
		return;
	}
	op->wr_kind = op->rma_kind;
	op->tx_state = IBF_RDM_TX_RMA;
	ibf_rdm_rma_notice(ep, op);
	op->key_ready = 1;
	ibf_rdm_keyq_resume(op);
}

void ibf_rdm_keyq_sent(struct ibf_rdm_op *op, int err)
{
	if (err && !op->read_err)
		op->read_err = err;
	if (--op->reads_left == 0)
		ibf_rdm_keyq_done(ibf_rdm_proto_of_ops(op->ep), op);
}

/* A peer asks which of our regions has a requested key: told from bounce
 * b, which goes back to the SRQ once the answer is sent. */
void ibf_rdm_on_keyq(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		     uint32_t byte_len)
{
	struct ibf_rdm_hdr *hdr = (void *)b->mem;
	const struct ibf_rdm_keyq *q = (const void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_keyr r = { 0 };
	struct ibf_mr_key_info ki = { 0 };

	if (byte_len < IBF_RDM_HDR + sizeof(*q)) {
		ibf_rdm_drop(&ep->as_ops, b, "a key question cut short");
		return;
	}
	r.key = q->key;
	r.cookie = q->cookie;
	r.status = ep->base.domain->req_keys ?
		   ibf_mr_key_lookup(ep->base.domain, q->key, &ki, 1) : -FI_ENOKEY;
	if (r.status)
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a peer named key "
			       "%#llx: no region of ours has it%s\n",
			       (unsigned long long)q->key, ep->base.domain->req_keys ?
			       "" : " (this domain's keys are the device's)");
	r.base = ki.base;
	r.len = ki.len;
	r.rkey = ki.rkey;
	r.access = ki.access;
	memcpy(b->mem + IBF_RDM_HDR, &r, sizeof(r));
	ibf_rdm_hdr_set(hdr, IBF_RDM_KEYR, 0, ibf_rdm_key_gen(&ep->as_ops));
	b->wire_len = IBF_RDM_HDR + sizeof(r);
	ibf_rdm_reply_post(ep, b);
}

/* An answer in bounce b: for a KEYQ of ours to its sender, once. */
void ibf_rdm_on_keyr(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		     uint32_t byte_len)
{
	const struct ibf_rdm_keyr *r = (const void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_op *op;

	if (ibf_rdm_keyr_check(b->mem, byte_len)) {
		ibf_rdm_drop(&ep->as_ops, b, "a key answer cut short or out of range");
		return;
	}
	op = r->cookie < ep->ntx ? &ep->ops[r->cookie] : NULL;
	if (!op || op->state != IBF_RDM_TX_KEYQ || op->fin_seen ||
	    op->key_ready || op->post_conn != b->conn ||
	    op->post_epoch != __atomic_load_n(&b->conn->epoch, __ATOMIC_ACQUIRE) ||
	    r->key != op->rma_app_key) {
		ibf_rdm_drop(&ep->as_ops, b, "a key answer for no question of ours to "
			     "its sender");
		return;
	}
	op->fin_seen = 1;
	if (r->status) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "the peer has no "
			       "region keyed %#llx for an RMA\n",
			       (unsigned long long)r->key);
		if (!op->read_err)
			op->read_err = -FI_EACCES;
	} else {
		struct ibf_rdm_key_map *m = ibf_rdm_key_learn(b->conn, r, b->epoch);

		if (!op->read_err)
			op->read_err = ibf_rdm_key_apply(op, m);
	}
	ibf_rdm_bounce_release(&ep->as_ops, b);
	if (--op->reads_left == 0)
		ibf_rdm_keyq_done(ep, op);
}

int ibf_rdm_rma_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
		      const struct ibf_rdm_req *req)
{
	int ret = ibf_rdm_rma_build_plain(ep, op, req);

	if (unlikely(ep->base.domain->req_keys) && likely(!ret))
		ret = ibf_rdm_rma_keyed(ep, op);
	return ret;
}

/* RMA op is over: each part has completed, or failed. */
static void ibf_rdm_rma_done(struct ibf_rdm_op *op)
{
	if (!op->read_err && op->via_slot && op->wr_kind == IBF_RDM_WR_READ)
		ibf_copy_to_iov(op->iov, op->count, op->mem + IBF_RDM_HDR,
				    op->op.len);
	ibf_rdm_complete(op, op->read_err);
}

/*
 * Keep up to IBF_RDM_READS parts of RMA op in flight while parts are left;
 * park it when its connection's send queue is full (ibf_rdm_unstall goes
 * on); finish once nothing is left in flight.  A part that fails ends the
 * posting: the op fails once those in flight are back.
 */
void ibf_rdm_rma_more(struct ibf_rdm_op *op)
{
	struct ibf_rdm_conn *conn = op->post_conn;
	int ret;

	while (!op->stalled && !op->read_err && op->reads_left < IBF_RDM_READS) {
		if (!op->part_ready) {
			if (op->part_last)
				break;		/* all posted */
			ibf_rdm_rma_part_next(ibf_rdm_proto_of_ops(op->ep), op);
		}
		ret = ibf_rdm_post_rma_next(conn, op);
		if (ret == -FI_EAGAIN)
			ibf_rdm_stall(conn, op);
		else if (ret)
			op->read_err = ret;
	}
	if (!op->stalled && !op->reads_left)
		ibf_rdm_rma_done(op);
}

/* One completion of RMA op (a part; a writedata's header). */
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
	op->reads_left--;
	if (unlikely(op->rma_split))
		ibf_rdm_rma_more(op);
	else if (!op->reads_left)
		ibf_rdm_rma_done(op);
}

/* ---- target ---- */

/* Report the WDATA (with remote CQ data) in bounce b with receive op r,
 * then free b.  b->op.len: the write's length, as the device said. */
static void ibf_rdm_wdata_report(struct ibf_rdm_ep_proto *ep,
				 struct ibf_rdm_op *r,
				 struct ibf_rdm_op *b)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	const struct ibf_rdm_rma_note *note = (const void *)(b->mem + IBF_RDM_HDR);

	if (ep->rma_event)
		ibf_mr_remote_event(ep->base.domain, (uint32_t)hdr->tag, note->addr,
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
	ibf_rdm_op_to(r, IBF_RDM_RX_POSTED);
	ibf_rdm_bounce_release(&ep->as_ops, b);
	ibf_rdm_complete(r, 0);
}

void ibf_rdm_on_write_imm(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			  const struct ibv_wc *wc)
{
	struct ibf_rdm_conn *conn = b->conn;

	conn->wimm_seen.qp_num = wc->qp_num;
	conn->wimm_seen.seq = ntohl(wc->imm_data);
	conn->wimm_seen.len = wc->byte_len;
	conn->wimm_seen.valid = 1;
	ibf_rdm_bounce_release(&ep->as_ops, b);
}

/*
 * Whether the notice in b tells of the write that came just before it on
 * the same QP (its sequence, and the length of that write, the last part
 * of the RMA): the only way a peer gets remote CQ data or a write event
 * reported.  The write is used up either way.
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
	     conn->wimm_seen.len == note->last && note->last <= note->len &&
	     note->len <= IBF_RDM_MAX_MSG_SIZE;
	conn->wimm_seen.valid = 0;
	if (ok && note->last != note->len) {
		/* In parts: those before the last left no trace here, so the
		 * length is the peer's word, taken only within what its key
		 * lets it write. */
		struct ibf_mr *mr = ibf_mr_target_hold(b->ep->base.domain,
						       (uint32_t)hdr->tag,
						       note->addr, note->len,
						       IBV_ACCESS_REMOTE_WRITE);

		ok = mr != NULL;
		if (mr)
			ibf_mr_target_release(b->ep->base.domain);
	}
	b->op.len = ok ? note->len : 0;
	return ok;
}

/*
 * Remote CQ data of a write, in bounce b.  Without an rx CQ it is counted
 * only; without a free receive op to carry it, it waits, in order, until
 * one is freed (ibf_rdm_wdata_drain).
 */
void ibf_rdm_on_wdata(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		      const struct ibv_wc *wc)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_rdm_op *r;

	if (unlikely(!ibf_rdm_wdata_bound(b, wc))) {
		ibf_rdm_drop(&ep->as_ops, b, "a write notice that no write came before");
		return;
	}
	if (!(hdr->flags & IBF_RDM_F_DATA)) {
		/* FI_RMA_EVENT alone: a remote write to count. */
		ibf_rdm_on_remote_event(ep, b, IBF_CNTR_REMOTE_WRITE);
		return;
	}
	if (!ep->base.rx_cq) {
		if (ep->base.cntr[IBF_CNTR_REMOTE_WRITE])
			ibf_cntr_count(ep->base.cntr[IBF_CNTR_REMOTE_WRITE], 0);
		ibf_rdm_bounce_release(&ep->as_ops, b);
		return;
	}
	r = ep->wdata_wait.head ? NULL : ibf_rdm_rx_get(&ep->as_ops);
	if (likely(r)) {
		ibf_rdm_wdata_report(ep, r, b);
		return;
	}
	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_HELD);
	ibf_rdm_list_append(&ep->wdata_wait, b);
	ibf_rdm_freed_want(ep);
}

void ibf_rdm_on_remote_event(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			     int kind)
{
	const struct ibf_rdm_hdr *hdr = (void *)b->mem;
	const struct ibf_rdm_rma_note *note = (const void *)(b->mem + IBF_RDM_HDR);
	int read = kind == IBF_CNTR_REMOTE_READ;

	if (ep->base.cntr[kind])
		ibf_cntr_count(ep->base.cntr[kind], 0);
	/* And the counter bound to the region, if the key grants what was
	 * done over the whole range. */
	if (ep->rma_event)
		ibf_mr_remote_event(ep->base.domain, (uint32_t)hdr->tag, note->addr,
				    read ? note->len : b->op.len, read);
	ibf_rdm_bounce_release(&ep->as_ops, b);
}

void ibf_rdm_wdata_drain(struct ibf_rdm_ep_proto *ep)
{
	struct ibf_rdm_op *b, *r;

	while ((b = ep->wdata_wait.head) && (r = ibf_rdm_rx_get(&ep->as_ops))) {
		ibf_rdm_list_remove(&ep->wdata_wait, b);
		ibf_rdm_wdata_report(ep, r, b);
	}
	ibf_rdm_freed_want(ep);
}
