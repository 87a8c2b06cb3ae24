/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Completion queue: an ibv_cq, polled in batches, each verbs completion
 * written straight into the caller's buffer in the format it asked for;
 * the endpoints that complete by progress (RDM), progressed by each read.
 * This file is the object and its reads; ibf_cq_soft.c the completions
 * the provider makes, ibf_cq_report.c the device CQ's room and what is
 * taken out of it other than by a read, ibf_cq_wait.c blocking.
 *
 * Waiting: a CQ with a wait object has a completion channel.  Its fd and
 * an eventfd for fi_cq_signal sit behind one epoll fd, the CQ's wait object.
 *
 * cq->lock guards the batch of polled completions and the arm state; it is
 * taken only when the threading level lets threads share the CQ.
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_abi.h"
#include "ibf_cq_impl.h"

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

/* One entry in the CQ's format; the fields beyond it are not written.
 * The tagged format first, the one a tag-matching application (MPI) asks
 * for: one test on each of its completions, not three. */
static void ibf_cq_write(const struct ibf_cq *cq, void *entry, void *context,
			 uint64_t flags, size_t len, void *buf, uint64_t data,
			 uint64_t tag)
{
	struct fi_cq_tagged_entry *e = entry;

	e->op_context = context;
	if (cq->format == FI_CQ_FORMAT_TAGGED) {
		e->flags = flags;
		e->len = len;
		e->buf = buf;
		e->data = data;
		e->tag = tag;
		return;
	}
	if (cq->format == FI_CQ_FORMAT_CONTEXT)
		return;
	e->flags = flags;
	e->len = len;
	if (cq->format == FI_CQ_FORMAT_MSG)
		return;
	e->buf = buf;
	e->data = data;		/* FI_CQ_FORMAT_DATA */
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

/* ---- reads ---- */

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

/* Entry i of buf (and of src) from a soft completion. */
static inline void ibf_cq_write_soft(const struct ibf_cq *cq, void *buf,
				     fi_addr_t *src, size_t i,
				     const struct ibf_cq_soft_entry *s)
{
	ibf_cq_write(cq, (char *)buf + i * cq->entry_size, s->e.op_context,
		     s->e.flags, s->e.len, s->e.buf, s->e.data, s->e.tag);
	if (src)
		src[i] = s->src;
}

/* Nothing queued ahead of a new completion: no error to be read first,
 * no report, no soft completion of any endpoint. */
static inline int ibf_cq_nothing_queued(struct ibf_cq *cq)
{
	return !ibf_cq_peek(cq->has_err) &&
	       ibf_cq_peek(cq->rep_head) == ibf_cq_peek(cq->rep_tail) &&
	       ibf_cq_peek(cq->soft_head) ==
	       __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE);
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

IBF_INLINE_HOT int
ibf_cq_sink_take(struct ibf_cq_sink *sink, const struct ibf_op *op)
{
	struct ibf_cq *cq = sink->cq;
	size_t n = sink->n;

	/* Behind anything older, or no room: queue it. */
	if (n == sink->count || !ibf_cq_nothing_queued(cq))
		return 0;
	ibf_cq_write_op(cq, sink->buf, sink->src, n, op);
	sink->n = n + 1;
	return 1;
}

static struct fi_ops_cq ibf_cq_progress_ops, ibf_cq_sole_ops,
	ibf_cq_sole_safe_ops;

/*
 * cq->lock held: the read table for the endpoints bound now.  One that
 * reads for itself (sole_read) takes the whole read of a CQ it alone
 * feeds; otherwise reads progress inline (ibf_cq_progress_ops), which is
 * right for any CQ.  A thread already in another table reads right too.
 * With no lock, an endpoint that brings a read table of its own (its
 * sole_ops) has fi_cq_read jump straight into it, not through
 * ibf_cq_read_sole.
 * A sole read takes the endpoint's lock to progress and cq->lock only to
 * collect what the CQ holds, never both at once, so an empty read at
 * FI_THREAD_SAFE takes one lock, not two (fabtests/run-instr -T safe).
 */
static void ibf_cq_pick_ops(struct ibf_cq *cq)
{
	struct fi_ops_cq *ops = &ibf_cq_progress_ops;
	struct ibf_progress *sole = NULL;

	if (cq->neps == 1 && cq->eps[0]->sole_read) {
		sole = cq->eps[0];
		if (cq->lock.enabled)
			ops = &ibf_cq_sole_safe_ops;
		else if (sole->sole_ops)
			ops = sole->sole_ops;
		else
			ops = &ibf_cq_sole_ops;
	}
	__atomic_store_n(&cq->sole, sole, __ATOMIC_SEQ_CST);
	__atomic_store_n(&cq->cq_fid.ops, ops, __ATOMIC_RELAXED);
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
		ibf_cq_pick_ops(cq);	/* reads progress from now on */
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
	ibf_cq_pick_ops(cq);	/* never a sole read of an endpoint gone */
	ibf_lock_release(&cq->lock);
	/* Nor one under way: a read that found the old table may be in
	 * ep's sole_read still (it takes cq->lock at its end, so wait
	 * without it).  New reads no longer come there.  A reader that
	 * lost its CPU holds us up until it runs again: after a while,
	 * give ours up rather than spin through a whole time slice. */
	for (i = 0; __atomic_load_n(&cq->sole_readers, __ATOMIC_SEQ_CST); i++) {
		if (i < 1024)
			ibf_cpu_relax();
		else
			sched_yield();
	}
	if (cq->channel && fd >= 0)
		ibf_waitfd_unwatch(&cq->wait, fd);
}

/*
 * Called with cq->lock held, after progress wrote n entries: the rest of
 * buf from what the CQ holds (soft completions, reports, the device CQ).
 * Returns completions written, or -FI_E*.
 */
__attribute__((noinline)) ssize_t
ibf_cq_collect(struct ibf_cq *cq, void *buf, size_t count, fi_addr_t *src,
	       size_t n)
{
	struct ibf_cq_soft_entry *soft;
	struct ibf_cq_report *rep;
	struct ibv_wc *wc;
	struct ibf_op *op;
	uint64_t clear;
	int polled, ring, drained = 0;

	while (n < count && !cq->has_err) {
		if (unlikely(cq->soft_head !=
			     __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE))) {
			soft = &cq->soft[cq->soft_head & (cq->soft_size - 1)];
			if (soft->e.err) {
				ibf_cq_set(cq->has_err, IBF_CQ_ERR_SOFT);
				break;
			}
			/* One the application asked no completion of is
			 * only let go (a wing's held op). */
			if (soft->report)
				ibf_cq_write_soft(cq, buf, src, n++, soft);
			ibf_cq_soft_next(cq);
			continue;
		}
		if (unlikely(cq->rep_head != cq->rep_tail)) {
			rep = &cq->rep[cq->rep_head & (cq->rep_size - 1)];
			if (rep->e.err) {
				ibf_cq_set(cq->has_err, IBF_CQ_ERR_REPORT);
				break;
			}
			ibf_cq_set(cq->rep_head, cq->rep_head + 1);
			ibf_cq_write(cq, (char *)buf + n * cq->entry_size,
				     rep->e.op_context, rep->e.flags, rep->e.len,
				     rep->e.buf, rep->e.data, 0);
			if (src)
				src[n] = FI_ADDR_NOTAVAIL;
			n++;
			continue;
		}
		if (cq->wc_next == cq->wc_count) {
			/* A poll that came back short emptied the device CQ
			 * an instant ago: polling it again in this read
			 * would almost always find nothing, at the cost of
			 * an empty read. */
			if (drained)
				break;
			polled = ibf_cq_fetch(cq, cq->wc, IBF_CQ_BATCH);
			if (polled <= 0)
				break;
			drained = polled < IBF_CQ_BATCH;
			cq->wc_next = 0;
			cq->wc_count = polled;
		}
		wc = &cq->wc[cq->wc_next];
		op = (struct ibf_op *)(uintptr_t)wc->wr_id;
		/* Read once: the entries written below may alias *op as far
		 * as the compiler knows. */
		ring = op->kind == IBF_OP_RING;
		if (unlikely(ibf_cq_wing_owns(cq, op, wc))) {
			cq->wc_next++;
			continue;
		}
		if (unlikely(wc->status != IBV_WC_SUCCESS)) {
			ibf_cq_set(cq->has_err, IBF_CQ_ERR_WC);
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
		/* After the last read of *op. */
		if (likely(ring))
			ibf_ring_retire(op);
		else
			ibf_op_release(op);
	}
	if (n)
		return n;
	return cq->has_err ? -FI_EAVAIL : -FI_EAGAIN;
}

/*
 * Called with cq->lock held.  Returns completions written, or -FI_E*.
 * src, if not NULL, gets each completion's source (FI_SOURCE).  Kept
 * small: an application spinning on an RDM CQ runs this, progress and
 * ibf_cq_progressed, and returns (fabtests/run-instr counts it).
 */
static inline __attribute__((always_inline)) ssize_t
ibf_cq_poll(struct ibf_cq *cq, void *buf, size_t count,
	    fi_addr_t *src)
{
	if (cq->neps) {	/* endpoints whose completions come by progress */
		struct ibf_cq_sink sink = { cq, buf, src, count, 0 };

		ibf_cq_progress_eps(cq, &sink);
		return ibf_cq_progressed(cq, buf, count, src, sink.n, 1);
	}
	if (unlikely(cq->waiting))	/* a read since fi_trywait */
		__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
	return ibf_cq_collect(cq, buf, count, src, 0);
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

/* A read under the CQ's lock, progressing its endpoints. */
static inline __attribute__((always_inline)) ssize_t
ibf_cq_read_locked(struct ibf_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	ssize_t ret;

	ibf_lock_acquire(&cq->lock);
	ret = ibf_cq_poll(cq, buf, count, src);
	ibf_lock_release(&cq->lock);
	return ret;
}

ssize_t ibf_cq_collect_locking(struct ibf_cq *cq, void *buf, size_t count,
			       fi_addr_t *src, size_t n)
{
	ssize_t ret;

	ibf_lock_acquire(&cq->lock);
	ret = ibf_cq_collect(cq, buf, count, src, n);
	ibf_lock_release(&cq->lock);
	return ret;
}

static __attribute__((noinline)) ssize_t
ibf_cq_read_slow(struct ibf_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	return ibf_cq_read_locked(cq, buf, count, src);
}

/*
 * fi_cq_readfrom of a CQ that no endpoint progresses (ibf_cq_ops).  With
 * no lock to take either (FI_EP_MSG at FI_THREAD_DOMAIN and below), it
 * goes straight to what the CQ holds, by a jump, so that an empty read
 * sets up one frame, not two.
 */
ssize_t ibf_cq_readfrom(struct fid_cq *cq_fid, void *buf, size_t count,
			fi_addr_t *src_addr)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);

	if (unlikely(ibf_cq_read_args_bad(buf, count)))
		return -FI_EINVAL;
	if (likely(!cq->lock.enabled && !cq->neps)) {
		if (unlikely(cq->waiting))
			__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
		return ibf_cq_collect(cq, buf, count, src_addr, 0);
	}
	return ibf_cq_read_slow(cq, buf, count, src_addr);
}

static ssize_t ibf_cq_read(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return ibf_cq_readfrom(cq_fid, buf, count, NULL);
}

/*
 * The same for a CQ an RDM endpoint was bound to (ibf_cq_progress_ops,
 * from ibf_cq_add_ep on): every read progresses, so progress and the
 * lock are inline, in the one frame.  Either table is right for any CQ;
 * each is the shorter path for its kind.
 */
static ssize_t ibf_cq_readfrom_progress(struct fid_cq *cq_fid, void *buf,
					size_t count, fi_addr_t *src_addr)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);

	if (unlikely(ibf_cq_read_args_bad(buf, count)))
		return -FI_EINVAL;
	return ibf_cq_read_locked(cq, buf, count, src_addr);
}

static ssize_t ibf_cq_read_progress(struct fid_cq *cq_fid, void *buf,
				    size_t count)
{
	return ibf_cq_readfrom_progress(cq_fid, buf, count, NULL);
}

/*
 * And for a CQ one endpoint alone feeds (ibf_cq_sole_ops, from
 * ibf_cq_pick_ops): a jump to the endpoint's own read.  With no lock the
 * application serializes reads with binds and closes.
 */
static ssize_t ibf_cq_readfrom_sole(struct fid_cq *cq_fid, void *buf,
				    size_t count, fi_addr_t *src_addr)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);
	struct ibf_progress *ep = __atomic_load_n(&cq->sole, __ATOMIC_RELAXED);

	if (unlikely(ibf_cq_read_args_bad(buf, count)))
		return -FI_EINVAL;
	return ep->sole_read(ep, cq, buf, count, src_addr);
}

static ssize_t ibf_cq_read_sole(struct fid_cq *cq_fid, void *buf, size_t count)
{
	return ibf_cq_readfrom_sole(cq_fid, buf, count, NULL);
}

/*
 * The same with a lock (FI_THREAD_SAFE, ibf_cq_sole_safe_ops): counted,
 * for ibf_cq_del_ep.  The count goes up before the endpoint is looked at
 * (both sequentially consistent, against del_ep's store of NULL then
 * load of the count).
 */
static ssize_t ibf_cq_readfrom_sole_safe(struct fid_cq *cq_fid, void *buf,
					 size_t count, fi_addr_t *src_addr)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);
	struct ibf_progress *ep;
	ssize_t ret;

	if (unlikely(ibf_cq_read_args_bad(buf, count)))
		return -FI_EINVAL;
	__atomic_add_fetch(&cq->sole_readers, 1, __ATOMIC_SEQ_CST);
	ep = __atomic_load_n(&cq->sole, __ATOMIC_SEQ_CST);
	if (unlikely(!ep)) {	/* unhooked since this read began */
		__atomic_sub_fetch(&cq->sole_readers, 1, __ATOMIC_RELEASE);
		return ibf_cq_read_slow(cq, buf, count, src_addr);
	}
	ret = ep->sole_read(ep, cq, buf, count, src_addr);
	__atomic_sub_fetch(&cq->sole_readers, 1, __ATOMIC_RELEASE);
	return ret;
}

static ssize_t ibf_cq_read_sole_safe(struct fid_cq *cq_fid, void *buf,
				     size_t count)
{
	return ibf_cq_readfrom_sole_safe(cq_fid, buf, count, NULL);
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
		e = cq->rep[cq->rep_head & (cq->rep_size - 1)].e;
		ibf_cq_set(cq->rep_head, cq->rep_head + 1);
	} else if (cq->has_err == IBF_CQ_ERR_SOFT) {
		e = cq->soft[cq->soft_head & (cq->soft_size - 1)].e;
		ibf_cq_soft_next(cq);
	} else {
		wc = &cq->wc[cq->wc_next++];
		op = (struct ibf_op *)(uintptr_t)wc->wr_id;
		ibf_cq_err_fill(&e, wc, op);
		IBF_DBG(FI_LOG_CQ, "error completion on qp %u: %s (vendor %#x)\n",
			wc->qp_num, ibv_wc_status_str(wc->status), wc->vendor_err);
		ibf_op_release(op);
	}
	ibf_cq_set(cq->has_err, IBF_CQ_ERR_NONE);
	/* The caller's struct is its API version's size. */
	ibf_cq_err_copy(cq->domain->fabric->api_version, err, &e);
	ibf_lock_release(&cq->lock);
	return 1;
}

static const char *ibf_cq_strerror(struct fid_cq *cq, int prov_errno,
				   const void *err_data, char *buf, size_t len)
{
	/* 0: the error is ibfab's own (a broken connection, a refused
	 * argument), not a device's status; err says what it is. */
	const char *s = prov_errno ? ibv_wc_status_str((enum ibv_wc_status)prov_errno) :
		"no device status: the error code says what failed";

	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
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

static struct fi_ops_cq ibf_cq_progress_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = ibf_cq_read_progress,
	.readfrom = ibf_cq_readfrom_progress,
	.readerr = ibf_cq_readerr,
	.sread = ibf_cq_sread,
	.sreadfrom = ibf_cq_sreadfrom,
	.signal = ibf_cq_signal,
	.strerror = ibf_cq_strerror,
};

static struct fi_ops_cq ibf_cq_sole_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = ibf_cq_read_sole,
	.readfrom = ibf_cq_readfrom_sole,
	.readerr = ibf_cq_readerr,
	.sread = ibf_cq_sread,
	.sreadfrom = ibf_cq_sreadfrom,
	.signal = ibf_cq_signal,
	.strerror = ibf_cq_strerror,
};

static struct fi_ops_cq ibf_cq_sole_safe_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = ibf_cq_read_sole_safe,
	.readfrom = ibf_cq_readfrom_sole_safe,
	.readerr = ibf_cq_readerr,
	.sread = ibf_cq_sread,
	.sreadfrom = ibf_cq_sreadfrom,
	.signal = ibf_cq_signal,
	.strerror = ibf_cq_strerror,
};

void ibf_cq_sole_ops_derive(struct fi_ops_cq *ops,
			    ssize_t (*read)(struct fid_cq *cq, void *buf,
					    size_t count))
{
	*ops = ibf_cq_sole_ops;
	ops->read = read;
}

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
