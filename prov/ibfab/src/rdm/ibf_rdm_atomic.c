/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM atomics, the protocol: how the requests of fi_atomic,
 * fi_fetch_atomic, fi_compare_atomic and their msg, iov and inject forms
 * (checked in ibf_rdm_atomic_api.c, started by ibf_rdm_submit) are
 * carried out, to any peer of the AV (self included).
 *
 * Every atomic is a request message (ATOMIC: struct ibf_atomic_req, then
 * the operands and compare values; ibf_atomic_ops.h), applied by the
 * target's progress with the CPU's atomics (ibf_atomic_apply.h says why no HCA
 * atomic is ever used), and answered (ATOMIC_RESP: a status, then the old
 * values of a fetch) from the bounce it came in, so the target needs
 * no send op of its own.  The initiator's op completes when both its send
 * and the answer are in: the operation has been applied at the target
 * (FI_DELIVERY_COMPLETE).  Requests from one initiator to one target are
 * applied in order (one RC connection, one progress), hence
 * FI_ORDER_ATOMIC_RAR|RAW|WAR|WAW.
 *
 * The target trusts nothing in a request (ibf_atomic_serve checks it); a
 * bad request is answered with an error, never applied.
 * ep->lock held unless said otherwise.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_atomic_ops.h"
#include "ibf_rdm_proto.h"

void ibf_rdm_atomic_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			  const struct ibf_rdm_req *req)
{
	const struct ibf_atomic_args *a = req->atomic;
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	size_t size = ibf_atomic_size(a->dt), i;

	ibf_rdm_hdr_set(hdr, IBF_RDM_ATOMIC, 0, ibf_rdm_key_gen(&ep->as_ops));
	op->wire_len = IBF_RDM_HDR +
		       (uint32_t)ibf_atomic_req_build(op->mem + IBF_RDM_HDR, a,
						      req->count,
						      (uint32_t)(op - ep->ops));
	op->count = a->kind == IBF_ATOMIC_PLAIN ? 0 : a->nres;
	for (i = 0; i < op->count; i++) {
		op->iov[i].iov_base = a->res[i].addr;
		op->iov[i].iov_len = a->res[i].count * size;
	}
	op->rd_left = a->kind == IBF_ATOMIC_PLAIN ? 0 : req->len;
	op->wr_kind = IBF_RDM_WR_SEND;
	op->tx_state = IBF_RDM_TX_ATOMIC;
	op->read_err = 0;
	op->fin_seen = 0;
	op->reads_left = 2;	/* its own completion, and the answer */
}

/* Its request went (or failed). */
void ibf_rdm_atomic_sent(struct ibf_rdm_op *op, int err)
{
	if (err && !op->read_err)
		op->read_err = err;
	if (--op->reads_left == 0)
		ibf_rdm_complete(op, op->read_err);
}

/* ---- target ---- */

void ibf_rdm_on_atomic(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		       uint32_t byte_len)
{
	struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_atomic_req *req = (void *)(b->mem + IBF_RDM_HDR);
	size_t answer;

	if (byte_len < IBF_RDM_HDR + sizeof(*req)) {
		ibf_rdm_drop(&ep->as_ops, b, "an atomic request cut short");
		return;
	}
	if (unlikely(!ep->atomic_target)) {
		/* Opened without FI_ATOMIC: refused, answered, not applied. */
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "refused a peer's "
			       "atomic: this endpoint was opened without "
			       "FI_ATOMIC\n");
		req->status = -FI_EOPNOTSUPP;
		answer = sizeof(*req);
	} else {
		answer = ibf_atomic_serve(ep->base.domain, req,
					  byte_len - IBF_RDM_HDR, ep->eager_size);
	}
	if (!req->status) {
		ep->stats.atomics_applied++;
		if (ep->rma_event)
			ibf_mr_remote_event(ep->base.domain, req->key, req->addr,
					    (uint64_t)req->count *
					    ibf_atomic_size((enum fi_datatype)req->datatype),
					    req->op == FI_ATOMIC_READ);
		if (ep->base.cntr[IBF_CNTR_REMOTE_WRITE] && req->op != FI_ATOMIC_READ)
			ibf_cntr_count(ep->base.cntr[IBF_CNTR_REMOTE_WRITE], 0);
	}
	ibf_rdm_hdr_set(hdr, IBF_RDM_ATOMIC_RESP, 0,
			ibf_rdm_key_gen(&ep->as_ops));
	b->wire_len = IBF_RDM_HDR + (uint32_t)answer;
	ibf_rdm_reply_post(ep, b);
}

/* An answer in bounce b: for a request of ours to its sender, once. */
void ibf_rdm_on_atomic_resp(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			    uint32_t byte_len)
{
	const struct ibf_atomic_req *resp = (const void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_op *op;
	size_t got;

	if (byte_len < IBF_RDM_HDR + sizeof(*resp)) {
		ibf_rdm_drop(&ep->as_ops, b, "an atomic answer cut short");
		return;
	}
	op = resp->cookie < ep->ntx ? &ep->ops[resp->cookie] : NULL;
	got = byte_len - IBF_RDM_HDR - sizeof(*resp);
	if (!op || op->state != IBF_RDM_TX_ATOMIC || op->fin_seen ||
	    op->post_conn != b->conn ||
	    op->post_epoch != __atomic_load_n(&b->conn->epoch, __ATOMIC_ACQUIRE) ||
	    ibf_atomic_answer_check(resp, byte_len - IBF_RDM_HDR, op->rd_left)) {
		ibf_rdm_drop(&ep->as_ops, b, "an atomic answer for no request of ours "
			     "to its sender");
		return;
	}
	op->fin_seen = 1;
	if (resp->status) {
		op->read_err = resp->status;
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "the target refused "
			       "an atomic: %s (its log says why)\n",
			       fi_strerror(-resp->status));
	} else if (got) {
		ibf_copy_to_iov(op->iov, op->count,
				    b->mem + IBF_RDM_HDR + sizeof(*resp), got);
	}
	ibf_rdm_bounce_release(&ep->as_ops, b);
	if (--op->reads_left == 0)
		ibf_rdm_complete(op, op->read_err);
}
