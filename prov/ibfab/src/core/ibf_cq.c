/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Completion queue: an ibv_cq, polled in batches, each verbs completion
 * written straight into the caller's buffer in the format it asked for.
 *
 * Waiting: a CQ with a wait object has a completion channel.  Its fd and
 * an eventfd for fi_cq_signal sit behind one epoll fd, the CQ's wait object.
 * Blocking is always: poll, arm (ibv_req_notify_cq), poll again, then
 * sleep; so a completion that lands between the last poll and the arm is
 * seen by the second poll, never lost.  Events taken from the channel are
 * acked at once.
 *
 * cq->lock guards the batch of polled completions and the arm state; it is
 * taken only when the threading level lets threads share the CQ.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibf.h"
#include "ibf_abi.h"

static size_t ibf_cq_entry_size(enum fi_cq_format format)
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(struct fi_cq_tagged_entry);
	default:
		return 0;
	}
}

/* What a successful completion reports: flags, length, remote data. */
void ibf_wc_result(const struct ibv_wc *wc, const struct ibf_op *op,
			  uint64_t *flags, size_t *len, uint64_t *data)
{
	*flags = op->flags;
	*len = op->len;
	*data = 0;
	if (!(wc->opcode & IBV_WC_RECV))
		return;
	*len = wc->byte_len;
	if (wc->wc_flags & IBV_WC_WITH_IMM) {
		*flags |= FI_REMOTE_CQ_DATA;
		*data = ntohl(wc->imm_data);
	}
	/* A writedata that consumed this receive: no message arrived, and
	 * len is what the write placed in the target's buffer (fi_cq(3);
	 * the device's byte_len). */
	if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
		*flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
}

/* One entry in the CQ's format; the fields beyond it are not written. */
static void ibf_cq_write(const struct ibf_cq *cq, void *entry, void *context,
			 uint64_t flags, size_t len, void *buf, uint64_t data,
			 uint64_t tag)
{
	struct fi_cq_tagged_entry *e = entry;

	e->op_context = context;
	if (cq->format == FI_CQ_FORMAT_CONTEXT)
		return;
	e->flags = flags;
	e->len = len;
	if (cq->format == FI_CQ_FORMAT_MSG)
		return;
	e->buf = buf;
	e->data = data;
	if (cq->format == FI_CQ_FORMAT_TAGGED)
		e->tag = tag;
}

/* clear: flags the completion does not report (a multi-receive not yet
 * released). */
static void ibf_cq_fill(const struct ibf_cq *cq, void *entry,
			const struct ibv_wc *wc, const struct ibf_op *op,
			uint64_t clear)
{
	uint64_t flags, data;
	size_t len;

	ibf_wc_result(wc, op, &flags, &len, &data);
	ibf_cq_write(cq, entry, op->context, flags & ~clear, len,
		     (flags & FI_RECV) ? op->buf : NULL, data, 0);
}

/*
 * Take up to max completions out of the device CQ.  This is where an
 * FI_EP_MSG endpoint's counters count, once per completion, whoever reads
 * it later.  A writedata that consumed a receive counts as that receive,
 * as its completion is the receive's.
 */
static void ibf_cq_count(const struct ibv_wc *wc)
{
	struct ibf_op *op = (struct ibf_op *)(uintptr_t)wc->wr_id;

	if (unlikely(op->cntr))
		ibf_cntr_count(op->cntr, wc->status != IBV_WC_SUCCESS);
}

static int ibf_cq_fetch_hw(struct ibf_cq *cq, struct ibv_wc *wc, int max)
{
	int n, i;

	n = ibv_poll_cq(cq->cq, max, wc);
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
static int ibf_cq_reports(const struct ibv_wc *wc, const struct ibf_op *op)
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

/* ---- soft completions (tagged mode) ---- */

int ibf_cq_soft_reserve(struct ibf_cq *cq, uint32_t n)
{
	uint32_t size, i, count;
	struct ibf_op **ring;
	int ret = 0;

	ibf_lock_acquire(&cq->lock);
	ibf_lock_acquire(&cq->soft_lock);
	if (cq->soft_used + n > cq->soft_size) {
		for (size = cq->soft_size ? cq->soft_size : 64;
		     size < cq->soft_used + n; size *= 2)
			;
		ring = calloc(size, sizeof(*ring));
		if (!ring) {
			ret = -FI_ENOMEM;
			goto out;
		}
		count = cq->soft_tail - cq->soft_head;
		for (i = 0; i < count; i++)
			ring[i] = cq->soft[(cq->soft_head + i) & (cq->soft_size - 1)];
		free(cq->soft);
		cq->soft = ring;
		cq->soft_size = size;
		cq->soft_head = 0;
		cq->soft_tail = count;
	}
	cq->soft_used += n;
out:
	ibf_lock_release(&cq->soft_lock);
	ibf_lock_release(&cq->lock);
	return ret;
}

void ibf_cq_soft_unreserve(struct ibf_cq *cq, uint32_t n)
{
	ibf_lock_acquire(&cq->lock);
	cq->soft_used -= n;
	ibf_lock_release(&cq->lock);
}

/*
 * Reservations make room certain: one slot per record that can be queued.
 * Producers (any endpoint, holding any CQ's lock or none) serialise on
 * soft_lock, a leaf lock; the reader, under cq->lock, takes entries up to
 * the tail it loads, so it never needs soft_lock to read.
 */
void ibf_cq_soft_push(struct ibf_cq *cq, struct ibf_op *op)
{
	uint32_t tail;

	if (unlikely(op->cntr))	/* tagged mode's receives count here */
		ibf_cntr_count(op->cntr, op->err != 0);
	ibf_lock_acquire(&cq->soft_lock);
	tail = cq->soft_tail;
	cq->soft[tail & (cq->soft_size - 1)] = op;
	__atomic_store_n(&cq->soft_tail, tail + 1, __ATOMIC_SEQ_CST);
	ibf_lock_release(&cq->soft_lock);
	/* Someone passed fi_trywait and may sleep on the fd: wake it. */
	if (cq->channel && __atomic_load_n(&cq->waiting, __ATOMIC_SEQ_CST))
		ibf_waitfd_raise(&cq->wait);
}

/* Take a closing endpoint's ops out of the soft ring. */
static void ibf_cq_soft_purge(struct ibf_cq *cq, const struct ibf_drain *d)
{
	uint32_t i, kept = cq->soft_head;

	ibf_lock_acquire(&cq->soft_lock);
	for (i = cq->soft_head; i != cq->soft_tail; i++) {
		struct ibf_op *op = cq->soft[i & (cq->soft_size - 1)];

		if (!d->soft_mine(op, d->arg))
			cq->soft[kept++ & (cq->soft_size - 1)] = op;
	}
	cq->soft_tail = kept;
	ibf_lock_release(&cq->soft_lock);
}

/*
 * RDM endpoints bound here: their completions go to a CQ of their own,
 * which reading either of their CQs progresses (data moves in fi_cq_read:
 * FI_PROGRESS_MANUAL), and whose channel this CQ's wait object watches.
 */
/* Entry i of buf (and of src, for FI_SOURCE) from a completed op. */
static inline void ibf_cq_write_op(const struct ibf_cq *cq, void *buf,
				   fi_addr_t *src, size_t i,
				   const struct ibf_op *op)
{
	ibf_cq_write(cq, (char *)buf + i * cq->entry_size, op->context,
		     op->flags, op->len, op->buf, op->data, op->tag);
	if (src)
		src[i] = op->src;
}

/* Nothing queued ahead of a new completion: no error to be read first,
 * no report, no soft completion of any endpoint. */
static inline int ibf_cq_nothing_queued(struct ibf_cq *cq)
{
	return !cq->has_err && cq->rep_head == cq->rep_tail &&
	       cq->soft_head == __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE);
}

/* Progress the endpoints that complete here by progress (their hooks). */
static inline void ibf_cq_progress_eps(struct ibf_cq *cq,
				       struct ibf_cq_sink *sink)
{
	int i;

	if (likely(cq->neps == 1)) {	/* one endpoint per CQ, the usual */
		cq->eps[0]->progress(cq->eps[0], sink);
		return;
	}
	for (i = 0; i < cq->neps; i++)
		cq->eps[i]->progress(cq->eps[i], sink);
}

int ibf_cq_sink_take(struct ibf_cq_sink *sink, const struct ibf_op *op)
{
	struct ibf_cq *cq = sink->cq;

	/* Behind anything older, or no room: queue it. */
	if (sink->n == sink->count || !ibf_cq_nothing_queued(cq))
		return 0;
	ibf_cq_write_op(cq, sink->buf, sink->src, sink->n++, op);
	return 1;
}

int ibf_cq_add_ep(struct ibf_cq *cq, struct ibf_progress *ep, int fd)
{
	struct ibf_progress **tmp;
	int ret = 0;

	if (cq->channel && fd >= 0 && (ret = ibf_waitfd_watch(&cq->wait, fd)))
		return ret;
	ibf_lock_acquire(&cq->lock);
	tmp = realloc(cq->eps, (cq->neps + 1) * sizeof(*tmp));
	if (tmp) {
		cq->eps = tmp;
		cq->eps[cq->neps++] = ep;
	}
	ibf_lock_release(&cq->lock);
	if (!tmp && cq->channel && fd >= 0)
		ibf_waitfd_unwatch(&cq->wait, fd);
	return tmp ? 0 : -FI_ENOMEM;
}

void ibf_cq_del_ep(struct ibf_cq *cq, struct ibf_progress *ep, int fd)
{
	int i;

	ibf_lock_acquire(&cq->lock);
	for (i = 0; i < cq->neps; i++) {
		if (cq->eps[i] == ep) {
			cq->eps[i] = cq->eps[--cq->neps];
			break;
		}
	}
	ibf_lock_release(&cq->lock);
	if (cq->channel && fd >= 0)
		ibf_waitfd_unwatch(&cq->wait, fd);
}

/*
 * Called with cq->lock held, after progress wrote n entries: the rest of
 * buf from what the CQ holds (soft completions, reports, the device CQ).
 * Returns completions written, or -FI_E*.
 */
static __attribute__((noinline)) ssize_t
ibf_cq_collect(struct ibf_cq *cq, void *buf, size_t count, fi_addr_t *src,
	       size_t n)
{
	struct ibf_cq_report *rep;
	struct ibv_wc *wc;
	struct ibf_op *op;
	uint64_t clear;
	int polled;

	while (n < count && !cq->has_err) {
		if (unlikely(cq->soft_head !=
			     __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE))) {
			op = cq->soft[cq->soft_head & (cq->soft_size - 1)];
			if (op->err) {
				cq->has_err = IBF_CQ_ERR_SOFT;
				break;
			}
			cq->soft_head++;
			if (!op->user_comp) {
				/* Pushed only to be released: a wing's op
				 * the application asked no completion of. */
				ibf_op_release(op);
				continue;
			}
			ibf_cq_write_op(cq, buf, src, n++, op);
			ibf_op_release(op);
			continue;
		}
		if (unlikely(cq->rep_head != cq->rep_tail)) {
			rep = &cq->rep[cq->rep_head & (cq->rep_size - 1)];
			if (rep->e.err) {
				cq->has_err = IBF_CQ_ERR_REPORT;
				break;
			}
			cq->rep_head++;
			ibf_cq_write(cq, (char *)buf + n * cq->entry_size,
				     rep->e.op_context, rep->e.flags, rep->e.len,
				     rep->e.buf, rep->e.data, 0);
			if (src)
				src[n] = FI_ADDR_NOTAVAIL;
			n++;
			continue;
		}
		if (cq->wc_next == cq->wc_count) {
			polled = ibf_cq_fetch(cq, cq->wc, IBF_CQ_BATCH);
			if (polled <= 0)
				break;
			cq->wc_next = 0;
			cq->wc_count = polled;
		}
		wc = &cq->wc[cq->wc_next];
		op = (struct ibf_op *)(uintptr_t)wc->wr_id;
		if (unlikely(ibf_cq_wing_owns(cq, op, wc))) {
			cq->wc_next++;
			continue;
		}
		if (unlikely(wc->status != IBV_WC_SUCCESS)) {
			cq->has_err = IBF_CQ_ERR_WC;
			break;
		}
		cq->wc_next++;
		clear = ibf_cq_multi_clear(cq, op, wc);
		if (ibf_cq_reports(wc, op)) {
			ibf_cq_fill(cq, (char *)buf + n * cq->entry_size, wc, op,
				    clear);
			if (src)
				src[n] = FI_ADDR_NOTAVAIL;
			n++;
		}
		ibf_op_release(op);	/* after the last read of *op */
	}
	if (n)
		return n;
	return cq->has_err ? -FI_EAVAIL : -FI_EAGAIN;
}

/*
 * Nothing held anywhere: no QP completes into the device CQ, no error, no
 * soft completion.  Reports and batches of device completions come from
 * the device CQ alone, so with it unused (hw_used is set once, before any
 * QP exists) neither can be held.  hw_used is tested first: an RDM CQ's
 * empty read then makes two more tests, not six.
 */
static inline int ibf_cq_holds_nothing(struct ibf_cq *cq)
{
	return !__atomic_load_n(&cq->hw_used, __ATOMIC_ACQUIRE) &&
	       !cq->has_err &&
	       cq->soft_head == __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE);
}

/*
 * Called with cq->lock held.  Returns completions written, or -FI_E*.
 * src, if not NULL, gets each completion's source (FI_SOURCE).  Kept
 * small: an application spinning on an RDM CQ runs this, progress and
 * the check above, and returns (fabtests/run-instr counts it).
 */
static ssize_t ibf_cq_poll(struct ibf_cq *cq, void *buf, size_t count,
			   fi_addr_t *src)
{
	int eps = cq->neps;
	size_t n = 0;

	if (eps) {	/* endpoints whose completions come by progress */
		struct ibf_cq_sink sink = { cq, buf, src, count, 0 };

		ibf_cq_progress_eps(cq, &sink);
		n = sink.n;
	}
	/* After progress: what it queued meanwhile woke a sleeper in
	 * fi_cq_sread, which may find more than this read takes. */
	if (unlikely(cq->waiting))
		__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
	if (eps && (n == count || (!n && ibf_cq_holds_nothing(cq))))
		return n ? (ssize_t)n : -FI_EAGAIN;
	return ibf_cq_collect(cq, buf, count, src, n);
}

int ibf_cq_bind(struct ibf_cq *cq, struct ibf_domain *dom, uint64_t flags,
		struct ibf_cq **tx, struct ibf_cq **rx, int *tx_selective,
		int *rx_selective)
{
	if (cq->domain != dom) {
		IBF_WARN(FI_LOG_EP_CTRL, "CQ and endpoint are on different domains\n");
		return -FI_EINVAL;
	}
	if (!(flags & (FI_TRANSMIT | FI_RECV))) {
		IBF_WARN(FI_LOG_EP_CTRL, "bind a CQ with FI_TRANSMIT and/or FI_RECV\n");
		return -FI_EBADFLAGS;
	}
	if (((flags & FI_TRANSMIT) && *tx) || ((flags & FI_RECV) && *rx)) {
		IBF_WARN(FI_LOG_EP_CTRL, "a CQ is already bound for that direction\n");
		return -FI_EINVAL;
	}
	if (flags & FI_TRANSMIT) {
		*tx = cq;
		*tx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		ibf_ref_get(&cq->ref);
	}
	if (flags & FI_RECV) {
		*rx = cq;
		*rx_selective = !!(flags & FI_SELECTIVE_COMPLETION);
		ibf_ref_get(&cq->ref);
	}
	return 0;
}

int ibf_cq_ready(struct ibf_cq *cq)
{
	int ready, polled;

	ibf_lock_acquire(&cq->lock);
	if (cq->neps)
		ibf_cq_progress_eps(cq, NULL);
	ready = !ibf_cq_nothing_queued(cq) || cq->wc_next < cq->wc_count;
	if (!ready) {
		polled = ibf_cq_fetch(cq, cq->wc, IBF_CQ_BATCH);
		if (polled > 0) {
			cq->wc_next = 0;
			cq->wc_count = polled;
			ready = 1;
		}
	}
	ibf_lock_release(&cq->lock);
	return ready;
}

/* What a failed verbs completion of op reports (fi_cq_readerr). */
static void ibf_cq_err_fill(struct fi_cq_err_entry *e, const struct ibv_wc *wc,
			    const struct ibf_op *op)
{
	e->op_context = op->context;
	e->flags = op->flags;
	e->len = op->len;
	e->buf = (op->flags & FI_RECV) ? op->buf : NULL;
	e->err = ibf_wc_status_to_fi(wc->status);
	e->prov_errno = wc->status;
}

/* cq->lock held, a free report slot: keep a completion for fi_cq_read. */
static void ibf_cq_report(struct ibf_cq *cq, const struct ibv_wc *wc,
			  const struct ibf_op *op, uint64_t clear)
{
	struct ibf_cq_report *r = &cq->rep[cq->rep_tail++ & (cq->rep_size - 1)];
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
static int ibf_cq_progress_locked(struct ibf_cq *cq)
{
	int polled, taken = 0;

	if (cq->has_err == IBF_CQ_ERR_WC)
		cq->has_err = IBF_CQ_ERR_NONE;	/* the error at wc_next is reported below */
	while (cq->unread && cq->soft_head !=
	       __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE))
		ibf_op_release(cq->soft[cq->soft_head++ & (cq->soft_size - 1)]);
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

static ssize_t ibf_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			       fi_addr_t *src_addr)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);
	ssize_t ret;

	if (unlikely(!buf && count))
		return -FI_EINVAL;
	ibf_lock_acquire(&cq->lock);
	ret = ibf_cq_poll(cq, buf, count, src_addr);
	ibf_lock_release(&cq->lock);
	return ret;
}

static ssize_t ibf_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return ibf_cq_readfrom(cq_fid, buf, count, NULL);
}

static ssize_t ibf_cq_readerr(struct fid_cq *cq_fid, struct fi_cq_err_entry *err,
			      uint64_t flags)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);
	struct fi_cq_err_entry e = { 0 };
	struct ibv_wc *wc;
	struct ibf_op *op;

	if (!err)
		return -FI_EINVAL;
	ibf_lock_acquire(&cq->lock);
	if (!cq->has_err) {
		ibf_lock_release(&cq->lock);
		return -FI_EAGAIN;
	}
	if (cq->has_err == IBF_CQ_ERR_REPORT) {
		e = cq->rep[cq->rep_head++ & (cq->rep_size - 1)].e;
	} else if (cq->has_err == IBF_CQ_ERR_SOFT) {
		op = cq->soft[cq->soft_head++ & (cq->soft_size - 1)];
		e.op_context = op->context;
		e.flags = op->flags;
		e.len = op->len;
		e.buf = op->buf;
		e.data = op->data;
		e.tag = op->tag;
		e.olen = op->olen;
		e.err = op->err;
		ibf_op_release(op);
	} else {
		wc = &cq->wc[cq->wc_next++];
		op = (struct ibf_op *)(uintptr_t)wc->wr_id;
		ibf_cq_err_fill(&e, wc, op);
		IBF_DBG(FI_LOG_CQ, "error completion on qp %u: %s (vendor %#x)\n",
			wc->qp_num, ibv_wc_status_str(wc->status), wc->vendor_err);
		ibf_op_release(op);
	}
	cq->has_err = IBF_CQ_ERR_NONE;
	/* The caller's struct is its API version's size. */
	ibf_cq_err_copy(cq->domain->fabric->api_version, err, &e);
	ibf_lock_release(&cq->lock);
	return 1;
}

static const char *ibf_cq_strerror(struct fid_cq *cq, int prov_errno,
				   const void *err_data, char *buf, size_t len)
{
	const char *s = ibv_wc_status_str((enum ibv_wc_status)prov_errno);

	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

/* Take every pending channel event; a taken event disarms the CQ. */
static void ibf_cq_take_events(struct ibf_cq *cq)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (!ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx)) {
		ibv_ack_cq_events(ev_cq, 1);
		cq->armed = 0;
	}
}

static int ibf_cq_arm(struct ibf_cq *cq)
{
	int ret;

	if (cq->armed)
		return 0;
	ret = ibv_req_notify_cq(cq->cq, 0);
	if (ret) {
		IBF_WARN(FI_LOG_CQ, "ibv_req_notify_cq: %s\n", strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	cq->armed = 1;
	return 0;
}

int ibf_cq_trywait(struct ibf_cq *cq)
{
	int ret, i;

	if (!cq->channel)
		return -FI_EINVAL;
	ibf_lock_acquire(&cq->lock);
	/* Before looking at the soft ring: a producer after us will wake us. */
	__atomic_store_n(&cq->waiting, 1, __ATOMIC_SEQ_CST);
	ibf_cq_take_events(cq);
	ret = ibf_cq_arm(cq);
	if (!ret && (cq->has_err || cq->wc_next < cq->wc_count ||
		     cq->rep_head != cq->rep_tail || cq->soft_head != __atomic_load_n(&cq->soft_tail, __ATOMIC_SEQ_CST)))
		ret = -FI_EAGAIN;
	for (i = 0; !ret && i < cq->neps; i++)
		ret = cq->eps[i]->trywait(cq->eps[i]);
	if (!ret) {
		/* Armed: anything polled now would not raise an event. */
		cq->wc_count = ibf_cq_fetch(cq, cq->wc, IBF_CQ_BATCH);
		cq->wc_next = 0;
		if (cq->wc_count < 0)
			cq->wc_count = 0;
		if (cq->wc_count)
			ret = -FI_EAGAIN;
	}
	ibf_lock_release(&cq->lock);
	return ret;
}

int ibf_cq_cntr_trywait(struct ibf_cq *cq)
{
	int ret;

	if (!cq->channel)
		return -FI_EAGAIN;	/* nothing to sleep on: poll */
	ibf_lock_acquire(&cq->lock);
	ibf_cq_take_events(cq);
	ret = ibf_cq_arm(cq);
	/* Armed: what came before is taken now, what comes later raises
	 * the channel. */
	if (!ret && ibf_cq_progress_locked(cq))
		ret = -FI_EAGAIN;
	ibf_lock_release(&cq->lock);
	return ret;
}

static ssize_t ibf_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);
	struct timespec deadline;
	ssize_t ret;
	int wait_ms = timeout;

	if (!cq->channel) {
		IBF_WARN(FI_LOG_CQ, "fi_cq_sread on a CQ opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	ibf_deadline(&deadline, timeout);
	for (;;) {
		ret = ibf_cq_readfrom(cq_fid, buf, count, src_addr);
		if (ret != -FI_EAGAIN)
			return ret;
		ret = ibf_cq_trywait(cq);
		if (ret == -FI_EAGAIN)
			continue;
		if (ret)
			return ret;
		if (timeout >= 0)
			wait_ms = ibf_ms_left(&deadline);
		ret = ibf_waitfd_wait(&cq->wait, wait_ms);
		if (ret < 0)
			return ret;
		/*
		 * The eventfd: a completion made by the provider (read it on
		 * the next turn), or fi_cq_signal, which alone may end the
		 * wait with nothing to read (-FI_EAGAIN).
		 */
		if (ibf_waitfd_lower(&cq->wait) &&
		    __atomic_exchange_n(&cq->signaled, 0, __ATOMIC_ACQ_REL))
			return ibf_cq_readfrom(cq_fid, buf, count, src_addr);
		if (ret == 0 && timeout >= 0 && !ibf_ms_left(&deadline))
			return ibf_cq_readfrom(cq_fid, buf, count, src_addr);
	}
}

static ssize_t ibf_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count,
			    const void *cond, int timeout)
{
	return ibf_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

static int ibf_cq_signal(struct fid_cq *cq_fid)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);

	if (!cq->channel)
		return -FI_EINVAL;
	__atomic_store_n(&cq->signaled, 1, __ATOMIC_RELEASE);
	return ibf_waitfd_raise(&cq->wait);
}

static int ibf_cq_control(struct fid *fid, int command, void *arg)
{
	struct ibf_cq *cq = container_of(fid, struct ibf_cq, cq_fid.fid);

	return ibf_waitfd_control(&cq->wait, cq->channel != NULL, command, arg);
}

static void ibf_cq_destroy(struct ibf_cq *cq)
{
	free(cq->wc);
	free(cq->rep);
	free(cq->soft);
	free(cq->eps);
	if (cq->cq)
		ibv_destroy_cq(cq->cq);
	if (cq->channel)
		ibv_destroy_comp_channel(cq->channel);
	ibf_waitfd_close(&cq->wait);
	ibf_lock_fini(&cq->soft_lock);
	ibf_lock_fini(&cq->lock);
	free(cq);
}

static int ibf_cq_close(struct fid *fid)
{
	struct ibf_cq *cq = container_of(fid, struct ibf_cq, cq_fid.fid);
	struct ibf_domain *dom = cq->domain;

	if (ibf_ref_read(&cq->ref)) {
		IBF_WARN(FI_LOG_CQ, "CQ still bound to %d endpoint(s): close "
			 "them first\n", ibf_ref_read(&cq->ref));
		return -FI_EBUSY;
	}
	ibf_cq_destroy(cq);
	ibf_ref_put(&dom->ref);
	return 0;
}

static int ibf_cq_check_attr(const struct fi_cq_attr *attr)
{
	char name[IBF_ENUM_STR];
	int ret;

	if (!ibf_cq_entry_size(attr->format == FI_CQ_FORMAT_UNSPEC ?
			       FI_CQ_FORMAT_CONTEXT : attr->format)) {
		IBF_WARN(FI_LOG_CQ, "CQ format %s is not one of CONTEXT, MSG, "
			 "DATA or TAGGED\n", ibf_enum_str(name, sizeof(name),
			 FI_TYPE_CQ_FORMAT, attr->format));
		return -FI_EINVAL;
	}
	ret = ibf_check_wait_obj(attr->wait_obj);
	if (ret) {
		IBF_WARN(FI_LOG_CQ, "CQ wait object %s: use FI_WAIT_NONE, "
			 "FI_WAIT_UNSPEC or FI_WAIT_FD\n", ibf_enum_str(name,
			 sizeof(name), IBF_TYPE_WAIT_OBJ, attr->wait_obj));
		return ret;
	}
	if (attr->wait_cond != FI_CQ_COND_NONE) {
		IBF_WARN(FI_LOG_CQ, "CQ wait condition %d not supported\n",
			 attr->wait_cond);
		return -FI_ENOSYS;
	}
	if (attr->flags & ~FI_AFFINITY) {
		IBF_WARN(FI_LOG_CQ, "CQ flags %#llx not supported\n",
			 (unsigned long long)attr->flags);
		return -FI_EBADFLAGS;
	}
	return 0;
}

static int ibf_cq_make_wait(struct ibf_cq *cq)
{
	cq->channel = ibv_create_comp_channel(cq->domain->verbs);
	if (!cq->channel)
		return ibf_errno_to_fi(errno);
	return ibf_waitfd_open(&cq->wait, cq->channel->fd);
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
	cq->rep_tail = kept;
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
	cq->has_err = IBF_CQ_ERR_NONE;	/* the next poll finds it again */
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

static struct fi_ops ibf_cq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_cq_close,
	.bind = ibf_no_bind,
	.control = ibf_cq_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static struct fi_ops_cq ibf_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = ibf_cq_read,
	.readfrom = ibf_cq_readfrom,
	.readerr = ibf_cq_readerr,
	.sread = ibf_cq_sread,
	.sreadfrom = ibf_cq_sreadfrom,
	.signal = ibf_cq_signal,
	.strerror = ibf_cq_strerror,
};

int ibf_cq_open(struct fid_domain *domain_fid, struct fi_cq_attr *attr,
		struct fid_cq **cq_fid, void *context)
{
	struct ibf_domain *dom = to_ibf_domain(domain_fid);
	struct ibf_cq *cq;
	size_t size;
	int vector = 0, ret;

	if (!attr || !cq_fid) {
		IBF_WARN(FI_LOG_CQ, "fi_cq_open needs attributes\n");
		return -FI_EINVAL;
	}
	ret = ibf_cq_check_attr(attr);
	if (ret)
		return ret;
	size = attr->size ? attr->size : ibf_params.cq_size;
	if (size > (size_t)dom->dev_attr.max_cqe) {
		IBF_INFO(FI_LOG_CQ, "CQ size %zu clamped to %s's limit %d\n",
			 size, dom->info->domain_attr->name, dom->dev_attr.max_cqe);
		size = dom->dev_attr.max_cqe;
	}
	if (attr->flags & FI_AFFINITY)
		vector = attr->signaling_vector % IBF_MAX(dom->verbs->num_comp_vectors, 1);

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return -FI_ENOMEM;
	cq->domain = dom;
	cq->wait.epoll_fd = cq->wait.event_fd = -1;
	cq->wc_cap = IBF_CQ_BATCH;
	cq->wc = calloc(cq->wc_cap, sizeof(*cq->wc));
	if (!cq->wc) {
		free(cq);
		return -FI_ENOMEM;
	}
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ?
		     FI_CQ_FORMAT_CONTEXT : attr->format;
	cq->entry_size = ibf_cq_entry_size(cq->format);
	ibf_lock_init(&cq->lock, ibf_threading_needs_lock(dom->info->domain_attr->threading));
	/* FI_PROGRESS_AUTO: RDM endpoints' threads make soft completions. */
	ibf_lock_init(&cq->soft_lock, cq->lock.enabled ||
		      dom->info->domain_attr->data_progress == FI_PROGRESS_AUTO);
	if (attr->wait_obj != FI_WAIT_NONE) {
		ret = ibf_cq_make_wait(cq);
		if (ret) {
			IBF_WARN(FI_LOG_CQ, "CQ wait object: %s\n", fi_strerror(-ret));
			goto err;
		}
	}
	cq->cq = ibv_create_cq(dom->verbs, (int)size, cq, cq->channel, vector);
	if (!cq->cq) {
		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_CQ, "ibv_create_cq(%zu entries): %s\n", size,
			 fi_strerror(-ret));
		goto err;
	}
	cq->cq_fid.fid.fclass = FI_CLASS_CQ;
	cq->cq_fid.fid.context = context;
	cq->cq_fid.fid.ops = &ibf_cq_fi_ops;
	cq->cq_fid.ops = &ibf_cq_ops;
	ibf_ref_get(&dom->ref);
	*cq_fid = &cq->cq_fid;
	return 0;
err:
	ibf_cq_destroy(cq);
	return ret;
}
