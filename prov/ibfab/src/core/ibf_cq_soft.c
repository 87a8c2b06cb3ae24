/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Soft completions: the ones the provider makes itself rather than the
 * device (an FI_EP_MSG endpoint's tagged mode and atomics; an RDM
 * endpoint's, when they cannot go straight into a reader's buffer), in a
 * ring each producer reserves its room in first.
 */
#include "config.h"

#include <stdlib.h>

#include "ibf_cq_impl.h"

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
void ibf_cq_soft_purge(struct ibf_cq *cq, const struct ibf_drain *d)
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
