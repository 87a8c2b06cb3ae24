/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The device CQ's room, and what is taken out of it other than by a read:
 * completions a counter's progress takes (kept as reports, in order, for
 * the application to read), and those of an endpoint that closes (its own
 * dropped, everyone else's parked).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ibf_cq_impl.h"

/* What a failed verbs completion of op reports (fi_cq_readerr). */
void ibf_cq_err_fill(struct fi_cq_err_entry *e, const struct ibv_wc *wc,
			    const struct ibf_op *op)
{
	e->op_context = op->context;
	e->flags = op->flags;
	e->len = op->len;
	e->buf = (op->flags & FI_RECV) ? op->buf : NULL;
	e->err = ibf_wc_status_to_fi(wc->status);
	e->prov_errno = wc->status;
}

static void ibf_cq_report_fill(struct ibf_cq_report *r, const struct ibv_wc *wc,
			       const struct ibf_op *op, uint64_t clear)
{
	uint64_t flags, data;
	size_t len;

	memset(&r->e, 0, sizeof(r->e));
	r->qp_num = wc->qp_num;
	if (wc->status != IBV_WC_SUCCESS) {
		ibf_cq_err_fill(&r->e, wc, op);
		return;
	}
	ibf_wc_result(wc, op, &flags, &len, &data);
	r->e.op_context = op->context;
	r->e.flags = flags & ~clear;
	r->e.len = len;
	r->e.data = data;
	r->e.buf = (op->flags & FI_RECV) ? op->buf : NULL;
}

/* cq->lock held, a free report slot: keep a completion for fi_cq_read. */
static void ibf_cq_report(struct ibf_cq *cq, const struct ibv_wc *wc,
			  const struct ibf_op *op, uint64_t clear)
{
	ibf_cq_report_fill(&cq->rep[cq->rep_tail & (cq->rep_size - 1)], wc, op,
			   clear);
	ibf_cq_set(cq->rep_tail, cq->rep_tail + 1);	/* then it is held */
}

/*
 * cq->lock held: one completion out of the batch, retired or reported;
 * -FI_ENOSPC, with nothing done, if it needs a report and none is free
 * (it is settled again later, so a multi-receive must not move first).
 */
static int ibf_cq_settle(struct ibf_cq *cq, const struct ibv_wc *wc)
{
	struct ibf_op *op = (struct ibf_op *)(uintptr_t)wc->wr_id;
	uint64_t clear = 0;
	int report;

	if (ibf_cq_wing_owns(cq, op, wc))
		return 0;
	report = !cq->unread &&
		 (wc->status != IBV_WC_SUCCESS || ibf_cq_reports(wc, op));
	if (report && cq->rep_tail - cq->rep_head == cq->rep_size)
		return -FI_ENOSPC;
	if (wc->status == IBV_WC_SUCCESS)
		clear = ibf_cq_multi_clear(cq, op, wc);
	if (report)
		ibf_cq_report(cq, wc, op, clear);
	ibf_op_release(op);
	return 0;
}

/*
 * cq->lock held: take every completion out of the device CQ (where
 * counters count); returns how many were taken.  Keeps what the
 * application is to read as reports, in order after those it has not
 * read yet.  Stops, with a warning, if the reports fill: the application
 * is not reading a CQ it bound.
 */
int ibf_cq_progress_locked(struct ibf_cq *cq)
{
	int polled, taken = 0;

	if (cq->has_err == IBF_CQ_ERR_WC)
		ibf_cq_set(cq->has_err, IBF_CQ_ERR_NONE);	/* the error at wc_next is reported below */
	while (cq->unread && cq->soft_head !=
	       __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE))
		ibf_cq_soft_next(cq);
	for (;;) {
		if (cq->wc_next == cq->wc_count) {
			polled = ibf_cq_fetch(cq, cq->wc, IBF_CQ_BATCH);
			if (polled <= 0)
				break;
			taken += polled;
			cq->wc_next = 0;
			cq->wc_count = polled;
		}
		if (ibf_cq_settle(cq, &cq->wc[cq->wc_next])) {
			FI_WARN_ONCE(&ibf_prov, FI_LOG_CQ, "a CQ holds %u unread "
				     "completions: read it (fi_cq_read) or bind "
				     "it with FI_SELECTIVE_COMPLETION\n",
				     cq->rep_size);
			break;
		}
		cq->wc_next++;
	}
	return taken;
}

void ibf_cq_progress(struct ibf_cq *cq)
{
	uint32_t before;

	ibf_lock_acquire(&cq->lock);
	before = cq->rep_tail;
	ibf_cq_progress_locked(cq);
	ibf_lock_release(&cq->lock);
	if (cq->rep_tail != before && cq->channel &&
	    __atomic_load_n(&cq->waiting, __ATOMIC_SEQ_CST))
		ibf_waitfd_raise(&cq->wait);	/* a reader may sleep */
}

/*
 * cq->lock held: room for a report of every completion the device CQ can
 * hold, which is at most what its endpoints can have outstanding.  A full
 * report ring is a CQ overrun, as it would be in the device.
 */
static int ibf_cq_reports_fit(struct ibf_cq *cq)
{
	uint32_t size = cq->rep_size ? cq->rep_size : 64, i;
	struct ibf_cq_report *rep;

	while (size < (uint32_t)cq->cq->cqe)
		size *= 2;
	if (size == cq->rep_size)
		return 0;
	rep = calloc(size, sizeof(*rep));
	if (!rep)
		return -FI_ENOMEM;
	for (i = cq->rep_head; i != cq->rep_tail; i++)
		rep[i & (size - 1)] = cq->rep[i & (cq->rep_size - 1)];
	free(cq->rep);
	cq->rep = rep;
	cq->rep_size = size;
	return 0;
}

int ibf_cq_reserve(struct ibf_cq *cq, int entries,
		   const struct ibf_cq_wc_hook *hook)
{
	int want, ret = 0;

	ibf_lock_acquire(&cq->lock);
	want = cq->cqe_used + entries;
	if (want > cq->cq->cqe) {
		if (want > cq->domain->dev_attr.max_cqe) {
			IBF_WARN(FI_LOG_CQ, "endpoints on this CQ need %d entries, "
				 "the device allows %d: use smaller tx/rx sizes or "
				 "more CQs\n", want, cq->domain->dev_attr.max_cqe);
			ret = -FI_ENOSPC;
		} else if ((ret = ibv_resize_cq(cq->cq, want))) {
			IBF_WARN(FI_LOG_CQ, "ibv_resize_cq(%d): %s; open the CQ "
				 "with size >= %d\n", want, strerror(ret), want);
			ret = -FI_ENOSPC;
		}
	}
	if (!ret && cq->rep)
		ret = ibf_cq_reports_fit(cq);
	if (!ret) {
		cq->cqe_used = want;
		cq->wc_hook = hook;
		__atomic_store_n(&cq->hw_used, 1, __ATOMIC_RELEASE);
	}
	ibf_lock_release(&cq->lock);
	return ret;
}

int ibf_cq_use_reports(struct ibf_cq *cq)
{
	int ret;

	ibf_lock_acquire(&cq->lock);
	ret = ibf_cq_reports_fit(cq);
	ibf_lock_release(&cq->lock);
	return ret;
}

void ibf_cq_unreserve(struct ibf_cq *cq, int entries)
{
	ibf_lock_acquire(&cq->lock);
	cq->cqe_used -= entries;
	ibf_lock_release(&cq->lock);
}

/* Called with cq->lock held: park a completion that is not ours to drop. */
static int ibf_cq_park(struct ibf_cq *cq, const struct ibv_wc *wc)
{
	struct ibv_wc *tmp;

	if (cq->wc_count == cq->wc_cap) {
		tmp = realloc(cq->wc, 2 * cq->wc_cap * sizeof(*tmp));
		if (!tmp)
			return -FI_ENOMEM;
		cq->wc = tmp;
		cq->wc_cap *= 2;
	}
	cq->wc[cq->wc_count++] = *wc;
	return 0;
}

/* Take a closing endpoint's reports out (their memory is the caller's,
 * but their contexts belong to an endpoint that is gone). */
static void ibf_cq_report_purge(struct ibf_cq *cq, const struct ibf_drain *d)
{
	uint32_t i, kept = cq->rep_head;
	struct ibv_wc wc = { 0 };

	for (i = cq->rep_head; i != cq->rep_tail; i++) {
		wc.qp_num = cq->rep[i & (cq->rep_size - 1)].qp_num;
		if (!d->mine(&wc, d->arg))
			cq->rep[kept++ & (cq->rep_size - 1)] =
				cq->rep[i & (cq->rep_size - 1)];
	}
	ibf_cq_set(cq->rep_tail, kept);
}

/*
 * An endpoint is closing and its QPs are in the error state, so every work
 * request it still has will complete (flushed).  Take its completions out
 * of the CQ, keeping everyone else's in order, until it has none left to
 * flush.  Afterwards no completion in this CQ points into its memory.
 * Returns when d->busy() says so, or after a second if the device never
 * flushes.
 */
void ibf_cq_drain(struct ibf_cq *cq, const struct ibf_drain *d)
{
	struct ibv_wc wc[IBF_CQ_BATCH];
	struct timespec start, now;
	int i, n, kept;

	ibf_lock_acquire(&cq->lock);
	for (i = kept = cq->wc_next; i < cq->wc_count; i++) {
		if (d->mine(&cq->wc[i], d->arg))
			d->drop(&cq->wc[i], d->arg);
		else
			cq->wc[kept++] = cq->wc[i];
	}
	if (cq->soft && d->soft_mine)
		ibf_cq_soft_purge(cq, d);
	if (cq->rep)
		ibf_cq_report_purge(cq, d);
	cq->wc_count = kept;
	ibf_cq_set(cq->has_err, IBF_CQ_ERR_NONE);	/* the next poll finds it again */
	clock_gettime(CLOCK_MONOTONIC, &start);
	while (d->busy(d->arg)) {
		n = ibv_poll_cq(cq->cq, IBF_CQ_BATCH, wc);
		for (i = 0; i < n; i++) {
			if (d->mine(&wc[i], d->arg)) {
				d->drop(&wc[i], d->arg);
				continue;
			}
			ibf_cq_count(&wc[i]);
			if (ibf_cq_park(cq, &wc[i]))
				IBF_WARN(FI_LOG_CQ, "no memory to keep a completion "
					 "while closing an endpoint: it is lost\n");
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (n <= 0 && now.tv_sec - start.tv_sec > 1)
			break;
	}
	ibf_lock_release(&cq->lock);
}
