/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The completion queue as the rest of the provider sees it: the object,
 * the sink a read lends to the progress it runs, soft completions and
 * the hooks the wings give it.  Its files share more in ibf_cq_impl.h.
 */
#ifndef IBF_CQ_H
#define IBF_CQ_H

#include "ibf.h"

#define IBF_CQ_BATCH 16
/*
 * has_err, soft_head, soft_tail's rewrites, rep_head and rep_tail change
 * under cq->lock; a sole read (ibf_cq_pick_ops) looks at them without it,
 * to learn that nothing is held before it takes the lock.  Relaxed
 * atomics: plain moves on x86, and no data race for the compiler or for
 * ThreadSanitizer.
 */
#define ibf_cq_peek(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define ibf_cq_set(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
/* Where the error fi_cq_readerr will take waits, if one does. */
enum ibf_cq_err {
	IBF_CQ_ERR_NONE,
	IBF_CQ_ERR_WC,		/* the device completion at wc[wc_next] */
	IBF_CQ_ERR_SOFT,	/* the soft completion at soft_head */
	IBF_CQ_ERR_REPORT,	/* the report at rep_head */
};
struct ibf_cq {
	struct fid_cq cq_fid;
	struct ibf_domain *domain;
	struct ibv_cq *cq;
	struct ibv_comp_channel *channel;	/* NULL for FI_WAIT_NONE */
	struct ibf_lock lock;	/* guards what follows */
	enum fi_cq_format format;
	size_t entry_size;
	int armed;		/* ibv_req_notify_cq done, no event taken since */
	/*
	 * Completions polled but not yet handed out, in order.  Normally one
	 * batch; an endpoint closing on a shared CQ may park others' there.
	 */
	struct ibv_wc *wc;
	int wc_next, wc_count, wc_cap;
	enum ibf_cq_err has_err;	/* an error for fi_cq_readerr, and where */
	struct ibf_waitfd wait;	/* channel + fi_cq_signal's eventfd */
	int cqe_used;		/* queue slots of the endpoints using it */
	int ref;		/* endpoints bound */
	/*
	 * Completions the provider makes itself (RDM endpoints' that do not
	 * go straight into a reader's buffer; tagged mode's and FI_EP_MSG
	 * atomics'), copied where they complete.  Each producer reserves its
	 * room first and keeps within it (struct ibf_cq_soft_entry says how),
	 * so the ring never overflows.
	 */
	struct ibf_cq_soft_entry *soft;
	uint32_t soft_head, soft_tail, soft_size, soft_used;
	struct ibf_lock soft_lock;	/* producers of soft completions */
	int waiting;		/* fi_trywait passed; no read since (atomic) */
	int signaled;		/* fi_cq_signal called, no sread woken (atomic) */
	/*
	 * Endpoints whose completions come here by progress (RDM): a read
	 * progresses each through the hook it registered.
	 */
	struct ibf_progress **eps;
	int neps;
	/*
	 * The one endpoint whose sole_read takes the whole read (atomic, set
	 * with the read table by ibf_cq_pick_ops), or NULL.  With a lock,
	 * sole_readers counts reads inside it, which hold no lock of the
	 * CQ's: ibf_cq_del_ep waits for them, so that no progress of an
	 * endpoint is under way once it is unhooked.
	 */
	struct ibf_progress *sole;
	int sole_readers;
	/* A QP's completions come to the device CQ (an FI_EP_MSG endpoint
	 * reserved room in it: ibf_cq_reserve); until then reads do not poll
	 * it (RDM endpoints have CQs of their own).  Atomic, set once. */
	int hw_used;
	const struct ibf_cq_wc_hook *wc_hook;	/* set with hw_used */
	/*
	 * Completions a counter's progress took out of the device CQ (so
	 * counters advance without a CQ reader) that the application is still
	 * to read: copies, their slots already retired.  Read before anything
	 * newer; NULL until an endpoint with counters uses the CQ.
	 */
	struct ibf_cq_report *rep;
	uint32_t rep_head, rep_tail, rep_size;
	int unread;		/* an endpoint's own: nothing is reported */
};
struct ibf_cq_report {
	struct fi_cq_err_entry e;	/* e.err != 0: an error completion */
	uint32_t qp_num;		/* whose: a closing endpoint drops its own */
};
/* An endpoint the CQ progresses on each read; fd: the endpoint's
 * completion channel, or -1 if it has none. */
int ibf_cq_add_ep(struct ibf_cq *cq, struct ibf_progress *p, int fd);
void ibf_cq_del_ep(struct ibf_cq *cq, struct ibf_progress *p, int fd);
/* ops: the read table of a CQ a sole_read takes whole, with no lock, but
 * for read, which is the endpoint's (struct ibf_progress's sole_ops). */
void ibf_cq_sole_ops_derive(struct fi_ops_cq *ops,
			    ssize_t (*read)(struct fid_cq *cq, void *buf,
					    size_t count));
/* A read's arguments: no buffer for count entries is -FI_EINVAL. */
static inline int ibf_cq_read_args_bad(const void *buf, size_t count)
{
	return !buf && count;
}
/*
 * A read of the CQ in progress: fi_cq_read's own buffer, which the
 * progress it runs may write completions of that CQ into directly,
 * instead of copying them into the soft ring to be copied out again.
 */
struct ibf_cq_sink {
	struct ibf_cq *cq;
	void *buf;
	fi_addr_t *src;		/* FI_SOURCE addresses, or NULL */
	size_t count, n;	/* room, and entries written */
};
/*
 * The reader holds the caller op's endpoint lock (and cq->lock, unless
 * its read is a sole read): write op's completion into the sink if it
 * may go there now (room left, nothing older waiting in the CQ).
 * Returns 1 if it did; the caller then frees op.  0: queue it as before.
 * Without cq->lock another reader may be taking older entries out at
 * the same time; seeing them still there only queues this one.
 */
int ibf_cq_sink_take(struct ibf_cq_sink *sink, const struct ibf_op *op);

/* Called with cq->lock held (if it has one): the rest of buf, past the n
 * entries progress wrote, from what the CQ holds.  Entries or -FI_E*. */
ssize_t ibf_cq_collect(struct ibf_cq *cq, void *buf, size_t count,
		       fi_addr_t *src, size_t n);

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
	       !ibf_cq_peek(cq->has_err) &&
	       ibf_cq_peek(cq->soft_head) ==
	       __atomic_load_n(&cq->soft_tail, __ATOMIC_ACQUIRE);
}

/* ibf_cq_collect under cq->lock, for a read that does not hold it. */
ssize_t ibf_cq_collect_locking(struct ibf_cq *cq, void *buf, size_t count,
			       fi_addr_t *src, size_t n);

/*
 * The end of every read that progresses endpoints (ibf_cq.c's, and a
 * sole_read's), after progress wrote n of count entries into buf.
 * locked: the caller holds cq->lock (a sole read does not: it takes the
 * lock only to collect, so that its empty read takes one lock, the
 * endpoint's, even at FI_THREAD_SAFE).
 */
static inline __attribute__((always_inline)) ssize_t
ibf_cq_progressed(struct ibf_cq *cq, void *buf, size_t count, fi_addr_t *src,
		  size_t n, int locked)
{
	/* After progress: what it queued meanwhile woke a sleeper in
	 * fi_cq_sread, which may find more than this read takes. */
	if (unlikely(cq->waiting))
		__atomic_store_n(&cq->waiting, 0, __ATOMIC_RELAXED);
	/* Progress filled buf, or nothing else is held: collecting would
	 * add nothing (a ping-pong's reads of two mostly find one). */
	if (n == count || ibf_cq_holds_nothing(cq))
		return n ? (ssize_t)n : -FI_EAGAIN;
	if (!locked)
		return ibf_cq_collect_locking(cq, buf, count, src, n);
	return ibf_cq_collect(cq, buf, count, src, n);
}


/*
 * A producer's share of a CQ's soft ring (an RDM endpoint's direction).
 * The producer queues a completion under its own lock and frees the op
 * at once, but keeps it out of use while the copy is unread: the op
 * waits on a list of the producer's.  The reader gives the share back
 * once the entry is out, with no lock of the producer's, by counting it
 * here; the producer takes that many ops back into use when it runs out.
 * So (ops in use + entries unread) stays within the room it reserved,
 * and an application that never reads cannot overrun the ring.
 */
struct ibf_cq_room {
	uint32_t returned;	/* atomic: given back since last taken */
};

/*
 * A soft completion: a copy of what its op reports, made where it
 * completed.  report: the reader writes it (an error is always read
 * through fi_cq_readerr); otherwise it is only let go.  Let go by the
 * reader: a share given back to room (RDM), or hold released (FI_EP_MSG's
 * tagged mode and atomics, whose slot is their bound: a bounce the peer's
 * next message lands in, an atomic slot, stays taken until its completion
 * is read).
 */
struct ibf_cq_soft_entry {
	struct fi_cq_err_entry e;	/* e.err != 0: an error completion */
	fi_addr_t src;			/* FI_SOURCE (RDM) */
	int report;
	struct ibf_cq_room *room;
	struct ibf_op *hold;
};

/* Room for n more soft completions (a producer's reservation). */
int ibf_cq_soft_reserve(struct ibf_cq *cq, uint32_t n);
void ibf_cq_soft_unreserve(struct ibf_cq *cq, uint32_t n);
/* Queue op's completion (any thread; the producer's lock held): its copy,
 * whose read gives room a share back; op free for the caller at once. */
void ibf_cq_soft_write(struct ibf_cq *cq, const struct ibf_op *op,
		       struct ibf_cq_room *room);
/* Queue op's completion and hold op until it is read (then released). */
void ibf_cq_soft_push(struct ibf_cq *cq, struct ibf_op *op);

/* What a successful verbs completion of op reports to the application. */
void ibf_wc_result(const struct ibv_wc *wc, const struct ibf_op *op,
		   uint64_t *flags, size_t *len, uint64_t *data);

/*
 * What a wing does with device completions of its own before the CQ
 * reports them (FI_EP_MSG: tagged-mode bounces and atomic answers, failed
 * sends of its own, multi-receive buffers).  Called with cq->lock held.
 * own: for a completion of any op but a ring slot's, and for a failed
 * one: 1 if it was the wing's and is dealt with (op released or kept),
 * so the CQ reports nothing; 0: the CQ reports it as usual.
 * multi_next: a multi-receive (FI_MULTI_RECV) completed; moves its buffer
 * on and returns the flags its report must not carry yet.
 */
struct ibf_cq_wc_hook {
	int (*own)(struct ibf_cq *cq, struct ibf_op *op, const struct ibv_wc *wc);
	uint64_t (*multi_next)(struct ibf_op *op, const struct ibv_wc *wc);
};
/* Room for an endpoint's queues, so completions can never overrun; the
 * endpoint's QPs complete into the device CQ from then on, and hook
 * (the same for every endpoint of a CQ) handles what is its own. */
int ibf_cq_reserve(struct ibf_cq *cq, int entries,
		   const struct ibf_cq_wc_hook *hook);
void ibf_cq_unreserve(struct ibf_cq *cq, int entries);
/* What a closing endpoint takes out of a CQ (ibf_cq_drain). */
struct ibf_drain {
	int (*mine)(const struct ibv_wc *wc, void *arg);	/* its completion? */
	void (*drop)(const struct ibv_wc *wc, void *arg);	/* forget one */
	int (*busy)(void *arg);		/* work requests still to flush? */
	/* Its soft completion?  Dropped unread (or NULL). */
	int (*soft_mine)(const struct ibf_cq_soft_entry *s, void *arg);
	void *arg;
};
void ibf_cq_drain(struct ibf_cq *cq, const struct ibf_drain *d);
int ibf_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr,
		struct fid_cq **cq, void *context);
/* fi_ep_bind of a CQ: set the endpoint's CQ(s) for the directions in flags. */
int ibf_cq_bind(struct ibf_cq *cq, struct ibf_domain *dom, uint64_t flags,
		struct ibf_cq **tx, struct ibf_cq **rx, int *tx_selective,
		int *rx_selective);
/* Progress cq; does it have a completion (or an error) to read? */
int ibf_cq_ready(struct ibf_cq *cq);
/*
 * Counters of FI_EP_MSG endpoints (ibf_cntr.c calls these).  A counter
 * counts a completion when it leaves the device CQ, so progressing one
 * takes everything out of the CQ: silent completions are retired, the
 * rest kept as reports for fi_cq_read.  ibf_cq_use_reports makes room for
 * them (0 or -FI_ENOMEM); ibf_cq_cntr_trywait arms the CQ for a counter
 * about to sleep on its channel: 0, or -FI_EAGAIN (progress first, or the
 * CQ has no channel to sleep on).
 */
int ibf_cq_use_reports(struct ibf_cq *cq);
void ibf_cq_progress(struct ibf_cq *cq);
int ibf_cq_cntr_trywait(struct ibf_cq *cq);

/* fi_trywait on a CQ: 0, or -FI_EAGAIN (ibf_cq_wait.c). */
int ibf_cq_trywait(struct ibf_cq *cq);

#endif /* IBF_CQ_H */
