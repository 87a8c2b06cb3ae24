/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What the CQ's files (ibf_cq.c: the object and its reads; ibf_cq_soft.c:
 * completions the provider makes; ibf_cq_report.c: the device CQ's room,
 * what counters take out of it, and a closing endpoint's drain;
 * ibf_cq_wait.c: blocking reads and fi_trywait) share, and nothing else
 * includes.  Locking as ibf_cq.c says.
 */
#ifndef IBF_CQ_IMPL_H
#define IBF_CQ_IMPL_H

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"

/*
 * Take up to max completions out of the device CQ.  This is where an
 * FI_EP_MSG endpoint's counters count, once per completion, whoever reads
 * it later.  A writedata that consumed a receive counts as that receive,
 * as its completion is the receive's.
 */
static inline void ibf_cq_count(const struct ibv_wc *wc)
{
	struct ibf_op *op = (struct ibf_op *)(uintptr_t)wc->wr_id;

	if (unlikely(op->cntr))
		ibf_cntr_count(op->cntr, wc->status != IBV_WC_SUCCESS);
}

static inline int ibf_cq_fetch_hw(struct ibf_cq *cq, struct ibv_wc *wc, int max)
{
	int n, i;

	n = ibv_poll_cq(cq->cq, max, wc);
	/* Only an endpoint with counters makes ops that count, and it gave
	 * each of its CQs reports first (ibf_cq_use_reports): without them
	 * no completion here has a counter to look for. */
	if (unlikely(cq->rep))
		for (i = 0; i < n; i++)
			ibf_cq_count(&wc[i]);
	return n;
}

/* Inline: an RDM endpoint's CQ is never filled by a QP, and its every
 * read comes here. */
static inline int ibf_cq_fetch(struct ibf_cq *cq, struct ibv_wc *wc, int max)
{
	if (!__atomic_load_n(&cq->hw_used, __ATOMIC_ACQUIRE))
		return 0;	/* nothing fills it */
	return ibf_cq_fetch_hw(cq, wc, max);
}

/*
 * A device completion the endpoint's wing deals with itself (struct
 * ibf_cq_wc_hook): any but a ring slot's, and failures.  A plain ring
 * slot's success, the usual case, makes no call.
 */
static inline int ibf_cq_wing_owns(struct ibf_cq *cq, struct ibf_op *op,
				   const struct ibv_wc *wc)
{
	if (likely(op->kind == IBF_OP_RING && wc->status == IBV_WC_SUCCESS))
		return 0;
	return cq->wc_hook->own(cq, op, wc);
}

/* Does this successful completion reach the application's CQ? */
static inline int ibf_cq_reports(const struct ibv_wc *wc, const struct ibf_op *op)
{
	/*
	 * Remote CQ data is reported even for a silent receive.  Only a
	 * receive: some devices (rxe) flag the sender's completion of a write
	 * with immediate data too, and a silent send (an inject) must stay
	 * silent.
	 */
	return op->user_comp || ((wc->opcode & IBV_WC_RECV) &&
				 (wc->wc_flags & IBV_WC_WITH_IMM));
}

/* A completed multi-receive: what its completion does not report yet. */
static inline uint64_t ibf_cq_multi_clear(struct ibf_cq *cq, struct ibf_op *op,
					  const struct ibv_wc *wc)
{
	if (unlikely(op->flags & FI_MULTI_RECV))
		return cq->wc_hook->multi_next(op, wc);
	return 0;
}

/* ibf_cq.c */
ssize_t ibf_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			fi_addr_t *src_addr);

/* ibf_cq_soft.c, cq->lock held: the oldest soft completion is out, let
 * it go; take a closing endpoint's out of the ring. */
void ibf_cq_soft_next(struct ibf_cq *cq);
void ibf_cq_soft_purge(struct ibf_cq *cq, const struct ibf_drain *d);

/* ibf_cq_report.c */
void ibf_cq_err_fill(struct fi_cq_err_entry *e, const struct ibv_wc *wc,
		     const struct ibf_op *op);
int ibf_cq_progress_locked(struct ibf_cq *cq);

/* ibf_cq_wait.c */
int ibf_cq_make_wait(struct ibf_cq *cq);
ssize_t ibf_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			 fi_addr_t *src_addr, const void *cond, int timeout);
ssize_t ibf_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count,
		     const void *cond, int timeout);
int ibf_cq_signal(struct fid_cq *cq_fid);

#endif /* IBF_CQ_IMPL_H */
