/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM posting: the one way work goes on a connection's QP (ibf_rdm_conn.h).
 *
 * ibf_rdm_post owns what every post to a connection's send queue needs:
 * the connection's life loaded before its QP, the queue's slots
 * (credits), the count of requests in flight (ep->sq_posted), what a
 * failed post means as an error code, and one trace line per work request
 * at FI_LOG_LEVEL=debug.  The functions above it only build work
 * requests: a message whole in op->mem, an RMA part with the notice
 * behind it, a KEYQ, a rendezvous read, a grant.  (The grave's drains go
 * on QPs whose connection is over, without slots: ibf_rdm_grave.c.)
 *
 * Work requests are filled field by field, never zeroed whole: a
 * two-request chain is 256 bytes, and zeroing it cost more than the rest
 * of an RDMA write's post.  ibf_rdm_wr_init sets every field a device
 * reads for a send; an RDMA one adds wr.rdma.
 * ep->lock held, or cm_lock on the connection thread (its flush).
 */
#include "config.h"

#include <arpa/inet.h>
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "ibf_mr_cache.h"
#include "ibf_rdm_conn.h"
#include "ibf_rdmacm.h"

/* One line per work request, for FI_LOG_LEVEL=debug (ep->post_trace). */
static void __attribute__((noinline, cold))
ibf_rdm_post_trace(const struct ibf_rdm_conn *conn,
		   const struct ibv_send_wr *wr, uint32_t epoch)
{
	char who[48];

	snprintf(who, sizeof(who), "connection %u life %u", conn->index, epoch);
	ibf_post_trace(who, wr, __atomic_load_n(&conn->credits,
						 __ATOMIC_RELAXED));
}

/* ibf_rdm_post, written into each poster of this file: a call less on
 * every message. */
static inline __attribute__((always_inline))
int ibf_rdm_post_wrs(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		     struct ibv_send_wr *wr, int n, int held, uint32_t epoch)
{
	/*
	 * id loaded once, after the caller loaded the life: the connection
	 * thread clears conn->id when the connection ends, possibly after
	 * the caller saw it CONNECTED, and only then ends the life; so a post
	 * never carries a new life on an old QP (whose flushes would end the
	 * new one).  A dead id's QP lives on (in the error state) until the
	 * endpoint closes, so a post that loaded it just before completes
	 * flushed.
	 */
	struct rdma_cm_id *id = __atomic_load_n(&conn->id, __ATOMIC_ACQUIRE);
	struct ibv_send_wr *bad = wr;
	int i, ret, left;

	assert(n >= 1 && n <= 2 && held >= 0 && held <= n);
	if (unlikely(!id || !id->qp)) {
		ibf_rdm_credit_give(conn, held);
		return -FI_ENOTCONN;
	}
	for (i = held; i < n; i++) {
		if (unlikely(!ibf_rdm_credit_take(conn))) {
			ibf_rdm_credit_give(conn, i);
			return -FI_EAGAIN;
		}
	}
	for (i = 0; i < n; i++) {
		wr[i].wr_id = (uintptr_t)&op->op;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	op->post_conn = conn;
	op->post_epoch = epoch;
	__atomic_add_fetch(&conn->ep->sq_posted, n, __ATOMIC_RELAXED);
	if (unlikely(conn->ep->post_trace))
		ibf_rdm_post_trace(conn, wr, epoch);
	ibf_tsan_release(op);
	ret = ibv_post_send(id->qp, wr, &bad);
	if (likely(!ret))
		return n;
	/* What was not posted gives its slot back. */
	left = bad >= wr && bad < wr + n ? n - (int)(bad - wr) : n;
	__atomic_sub_fetch(&conn->ep->sq_posted, left, __ATOMIC_RELAXED);
	ibf_rdm_credit_give(conn, left);
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "posting to connection %u: "
		       "%s\n", conn->index, strerror(ret));
	if (left < n) {
		if (!op->read_err)
			op->read_err = ibf_errno_to_fi(ret);
		return n - left;
	}
	return ibf_errno_to_fi_retry(ret);
}

int ibf_rdm_post(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		 struct ibv_send_wr *wr, int n, int held, uint32_t epoch)
{
	return ibf_rdm_post_wrs(conn, op, wr, n, held, epoch);
}

/* A send whose header is in op->mem, on conn's life epoch. */
static inline __attribute__((always_inline)) int
ibf_rdm_post_msg(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		 struct ibv_sge *sge, int nsge, int inl, uint32_t epoch)
{
	struct ibv_send_wr wr;
	int ret;

	ibf_rdm_wr_init(&wr, IBV_WR_SEND, sge, nsge,
			IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0));
	ret = ibf_rdm_post_wrs(conn, op, &wr, 1, 0, epoch);
	return ret < 0 ? ret : 0;
}

int ibf_rdm_post_send(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		      struct ibv_sge *sge, int nsge, int inl)
{
	return ibf_rdm_post_msg(conn, op, sge, nsge, inl,
				ibf_rdm_conn_epoch(conn));
}

/*
 * The prepared part of RMA op (ibf_rdm_op.h): its write or read, and
 * behind the last part (writedata, FI_RMA_EVENT) the header in op->mem,
 * both on one post (a slot each).  op->reads_left counts what was posted.
 */
static int ibf_rdm_post_rma(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	uint32_t epoch = ibf_rdm_conn_epoch(conn);	/* first: ibf_rdm_post */
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct ibv_sge hsge[2];
	struct ibv_send_wr wr[2];
	int n = op->part_last && op->rma_notify ? 2 : 1, ret;
	int inl = op->wr_kind != IBF_RDM_WR_READ && op->via_slot &&
		  op->op.len <= ep->max_inline;

	ibf_rdm_wr_init(&wr[0], op->wr_kind == IBF_RDM_WR_READ ?
			IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, op->sge, op->nsge,
			IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0));
	wr[0].wr.rdma.remote_addr = op->rma_addr + op->part_off;
	wr[0].wr.rdma.rkey = op->rma_key;
	if (n == 2) {
		struct ibf_rdm_hdr *hdr = (void *)op->mem;
		struct ibf_rdm_rma_note *note = (void *)(op->mem + ep->note_off);

		note->last = op->part_len;
		if (op->wr_kind != IBF_RDM_WR_READ) {
			/* The target sees this write (its immediate) and takes
			 * the notice behind it only with the same sequence. */
			uint32_t seq = conn->wimm_sent + 1;

			wr[0].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr[0].imm_data = htonl(seq);
			hdr->tag = (uint64_t)seq << 32 | (uint32_t)hdr->tag;
		}
		hsge[0] = (struct ibv_sge){ (uintptr_t)op->mem, IBF_RDM_HDR,
					    op->mem_lkey };
		hsge[1] = (struct ibv_sge){ (uintptr_t)op->mem + ep->note_off,
					    sizeof(struct ibf_rdm_rma_note),
					    op->mem_lkey };
		ibf_rdm_wr_init(&wr[1], IBV_WR_SEND, hsge, 2, IBV_SEND_SIGNALED |
				(IBF_RDM_HDR + sizeof(struct ibf_rdm_rma_note) <=
				 ep->max_inline ? IBV_SEND_INLINE : 0));
	}
	op->epoch = epoch;
	ibf_rdm_op_to(op, op->tx_state);
	/* Before the post: its completions may be taken at once by progress
	 * on another thread (a queued op is posted by the connection's). */
	op->reads_left += n;
	op->part_ready = 0;
	ret = ibf_rdm_post_wrs(conn, op, wr, n, 0, epoch);
	if (likely(ret > 0)) {
		/* The write went, so its immediate's sequence is spent.  A
		 * header refused behind it (ret 1 of 2) fails the op, as
		 * ibf_rdm_post said, once the write completes. */
		if (wr[0].opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
			conn->wimm_sent++;
		op->reads_left -= n - ret;
		return 0;
	}
	op->reads_left -= n;
	op->part_ready = 1;
	return ret;
}

int ibf_rdm_post_rma_next(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	/* Every part on the life the first went on: a new QP has not seen
	 * the parts before, nor would its peer take the notice. */
	if (ibf_rdm_epoch_over(conn, op->epoch))
		return -FI_ECONNABORTED;
	return ibf_rdm_post_rma(conn, op);
}

/*
 * Whether RMA op carries a notice behind it to conn's peer: remote CQ data
 * always; else if the peer counts what lands in it (FI_RMA_EVENT is the
 * target's: the initiator's caps do not matter).  Known once the peer's
 * private data is in, so decided at the post.
 */
static void ibf_rdm_rma_notify_set(const struct ibf_rdm_conn *conn,
				   struct ibf_rdm_op *op)
{
	op->rma_notify = op->wr_kind == IBF_RDM_WR_WRITE_DATA ||
			 __atomic_load_n(&conn->peer_rma_event, __ATOMIC_RELAXED);
}

/* A KEYQ: its header, and its question where an RMA's note goes. */
static int ibf_rdm_post_keyq(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
			     uint32_t epoch)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct ibv_sge sge[2] = {
		{ (uintptr_t)op->mem, IBF_RDM_HDR, op->mem_lkey },
		{ (uintptr_t)op->mem + ep->note_off,
		  sizeof(struct ibf_rdm_keyq), op->mem_lkey },
	};

	return ibf_rdm_post_msg(conn, op, sge, 2, IBF_RDM_HDR +
				sizeof(struct ibf_rdm_keyq) <= ep->max_inline,
				epoch);
}

IBF_INLINE_HOT int
ibf_rdm_post_built(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	uint32_t epoch;
	int request, ret;

	if (unlikely(op->wr_kind != IBF_RDM_WR_SEND &&
		     op->wr_kind != IBF_RDM_WR_KEYQ))
		ibf_rdm_rma_notify_set(conn, op);
	request = ibf_rdm_is_request(op);
	if (request && unlikely(!ibf_rdm_window_take(conn)))
		return -FI_EAGAIN;	/* the peer's grant brings more */
	if (unlikely(op->wr_kind != IBF_RDM_WR_SEND &&
		     op->wr_kind != IBF_RDM_WR_KEYQ)) {
		ret = ibf_rdm_post_rma(conn, op);
	} else {
		struct ibv_sge sge = {
			.addr = (uintptr_t)op->mem,
			.length = op->wire_len,
			.lkey = op->mem_lkey,
		};

		epoch = ibf_rdm_conn_epoch(conn);	/* first: ibf_rdm_post */
		op->epoch = epoch;
		ibf_rdm_op_to(op, op->tx_state);
		ret = unlikely(op->wr_kind == IBF_RDM_WR_KEYQ) ?
		      ibf_rdm_post_keyq(conn, op, epoch) :
		      ibf_rdm_post_msg(conn, op, &sge, 1,
				       op->wire_len <= conn->ep->max_inline,
				       epoch);
	}
	if (unlikely(ret) && request)
		ibf_rdm_window_untake(conn);
	return ret;
}

int ibf_rdm_post_read(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		      struct ibv_sge *sge, int nsge, uint64_t addr,
		      uint32_t rkey)
{
	uint32_t epoch = ibf_rdm_conn_epoch(conn);	/* first: ibf_rdm_post */
	struct ibv_send_wr wr;
	int ret;

	ibf_rdm_wr_init(&wr, IBV_WR_RDMA_READ, sge, nsge, IBV_SEND_SIGNALED);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	ret = ibf_rdm_post_wrs(conn, op, &wr, 1, 1, epoch);
	return ret < 0 ? ret : 0;
}

void ibf_rdm_credit_give(struct ibf_rdm_conn *conn, int n)
{
	if (n)
		__atomic_add_fetch(&conn->credits, n, __ATOMIC_RELEASE);
}
