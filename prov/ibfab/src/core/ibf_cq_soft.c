/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Soft completions: the ones the provider makes itself rather than the
 * device (an FI_EP_MSG endpoint's tagged mode and atomics; an RDM
 * endpoint's, when they cannot go straight into a reader's buffer),
 * copied into a ring each producer reserves its room in first.
 */
#include "config.h"

#include <stdlib.h>

#include "ibf_cq_impl.h"

int ibf_cq_soft_reserve(struct ibf_cq *cq, uint32_t n)
{
	uint32_t size, i, count;
	struct ibf_cq_soft_entry *ring;
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
		ibf_cq_set(cq->soft_head, 0);
		ibf_cq_set(cq->soft_tail, count);
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
 * Reservations make room certain: one slot per completion that can be
 * queued and not yet let go.  Producers (any endpoint, holding any CQ's
 * lock or none) serialise on soft_lock, a leaf lock; the reader, under
 * cq->lock, takes entries up to the tail it loads, so it never needs
 * soft_lock to read.
 */
static void ibf_cq_soft_queue(struct ibf_cq *cq, const struct ibf_op *op,
			      struct ibf_cq_room *room, struct ibf_op *hold)
{
	struct ibf_cq_soft_entry *s;
	uint32_t tail;

	ibf_lock_acquire(&cq->soft_lock);
	tail = cq->soft_tail;
	s = &cq->soft[tail & (cq->soft_size - 1)];
	s->e = (struct fi_cq_err_entry){
		.op_context = op->context, .flags = op->flags, .len = op->len,
		.buf = op->buf, .data = op->data, .tag = op->tag,
		.olen = op->olen, .err = op->err,
		.prov_errno = op->err ? op->prov_errno : 0,
	};
	s->src = op->src;
	s->report = op->user_comp;
	s->room = room;
	s->hold = hold;
	__atomic_store_n(&cq->soft_tail, tail + 1, __ATOMIC_SEQ_CST);
	ibf_lock_release(&cq->soft_lock);
	/* Someone passed fi_trywait and may sleep on the fd: wake it. */
	if (cq->channel && __atomic_load_n(&cq->waiting, __ATOMIC_SEQ_CST))
		ibf_waitfd_raise(&cq->wait);
}

void ibf_cq_soft_write(struct ibf_cq *cq, const struct ibf_op *op,
		       struct ibf_cq_room *room)
{
	ibf_cq_soft_queue(cq, op, room, NULL);
}

void ibf_cq_soft_push(struct ibf_cq *cq, struct ibf_op *op)
{
	if (unlikely(op->cntr))	/* tagged mode's receives count here */
		ibf_cntr_count(op->cntr, op->err != 0);
	ibf_cq_soft_queue(cq, op, NULL, op);
}

/* cq->lock held: the entry at soft_head is out of the ring; let it go. */
void ibf_cq_soft_next(struct ibf_cq *cq)
{
	struct ibf_cq_soft_entry *s = &cq->soft[cq->soft_head & (cq->soft_size - 1)];
	struct ibf_cq_room *room = s->room;
	struct ibf_op *hold = s->hold;

	ibf_cq_set(cq->soft_head, cq->soft_head + 1);
	if (room)	/* after the last read of *s: its slot may be reused */
		__atomic_add_fetch(&room->returned, 1, __ATOMIC_RELEASE);
	if (hold)
		ibf_op_release(hold);
}

/* Take a closing endpoint's entries out of the soft ring. */
void ibf_cq_soft_purge(struct ibf_cq *cq, const struct ibf_drain *d)
{
	uint32_t i, kept = cq->soft_head;

	ibf_lock_acquire(&cq->soft_lock);
	for (i = cq->soft_head; i != cq->soft_tail; i++) {
		struct ibf_cq_soft_entry *s = &cq->soft[i & (cq->soft_size - 1)];

		if (!d->soft_mine(s, d->arg))
			cq->soft[kept++ & (cq->soft_size - 1)] = *s;
	}
	ibf_cq_set(cq->soft_tail, kept);
	ibf_lock_release(&cq->soft_lock);
}
