/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Tag matching: see ibf_match.h. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "ibf_match.h"
#include "ibf_util.h"

int ibf_mq_init(struct ibf_mq *q, size_t buckets)
{
	size_t n = 1;

	memset(q, 0, sizeof(*q));
	while (n < buckets)
		n <<= 1;
	q->bucket = calloc(n, sizeof(*q->bucket));
	if (!q->bucket)
		return -FI_ENOMEM;
	q->mask = (uint32_t)(n - 1);
	return 0;
}

void ibf_mq_fini(struct ibf_mq *q)
{
	free(q->bucket);
	memset(q, 0, sizeof(*q));
}

static struct ibf_mq_list *ibf_mq_bucket(const struct ibf_mq *q, uint64_t tag,
					 uint64_t src)
{
	uint64_t h = (tag ^ (src * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;

	return &q->bucket[(h >> 32) & q->mask];
}

/* Append e to l through the link at offset off within the entry. */
#define IBF_MQ_LINK(e, off) ((struct ibf_mq_link *)((char *)(e) + (off)))

static void ibf_mq_append(struct ibf_mq_list *l, struct ibf_mq_entry *e,
			  size_t off)
{
	struct ibf_mq_link *k = IBF_MQ_LINK(e, off);

	k->next = NULL;
	k->prev = l->tail;
	if (l->tail)
		IBF_MQ_LINK(l->tail, off)->next = e;
	else
		l->head = e;
	l->tail = e;
}

static void ibf_mq_unlink(struct ibf_mq_list *l, struct ibf_mq_entry *e,
			  size_t off)
{
	struct ibf_mq_link *k = IBF_MQ_LINK(e, off);

	if (k->prev)
		IBF_MQ_LINK(k->prev, off)->next = k->next;
	else
		l->head = k->next;
	if (k->next)
		IBF_MQ_LINK(k->next, off)->prev = k->prev;
	else
		l->tail = k->prev;
	k->next = k->prev = NULL;
}

#define KEY offsetof(struct ibf_mq_entry, key)
#define ALL offsetof(struct ibf_mq_entry, all)

static void ibf_mq_insert(struct ibf_mq *q, struct ibf_mq_entry *e,
			  struct ibf_mq_list *in)
{
	e->seq = q->seq++;
	e->in = in;
	ibf_mq_append(in, e, KEY);
	ibf_mq_append(&q->all, e, ALL);
	q->count++;
}

static void ibf_mq_remove(struct ibf_mq *q, struct ibf_mq_entry *e)
{
	ibf_mq_unlink(e->in, e, KEY);
	ibf_mq_unlink(&q->all, e, ALL);
	e->in = NULL;
	q->count--;
}

/* ---- posted receives ---- */

static int ibf_mq_exact(const struct ibf_mq_entry *r)
{
	return !r->ignore && r->src;
}

IBF_INLINE_HOT void ibf_mq_post(struct ibf_mq *q, struct ibf_mq_entry *r)
{
	if (ibf_mq_exact(r)) {
		q->nexact++;
		ibf_mq_insert(q, r, ibf_mq_bucket(q, r->tag, r->src));
	} else {
		ibf_mq_insert(q, r, &q->wild);
	}
}

IBF_INLINE_HOT struct ibf_mq_entry *
ibf_mq_posted_match(struct ibf_mq *q, uint64_t tag, uint64_t src)
{
	struct ibf_mq_entry *e = NULL, *w;

	/* No exact receive posted: no bucket holds one, nor need hashing. */
	if (q->nexact)
		for (e = ibf_mq_bucket(q, tag, src)->head; e; e = e->key.next)
			if (e->tag == tag && e->src == src)
				break;
	for (w = q->wild.head; w; w = w->key.next)
		if (ibf_mq_accepts(w, tag, src))
			break;
	if (!e || (w && w->seq < e->seq))
		return w;
	return e;
}

void ibf_mq_posted_remove(struct ibf_mq *q, struct ibf_mq_entry *r)
{
	if (r->in != &q->wild)
		q->nexact--;
	ibf_mq_remove(q, r);
}

/* ---- unexpected messages ---- */

void ibf_mq_park(struct ibf_mq *q, struct ibf_mq_entry *m)
{
	ibf_mq_insert(q, m, ibf_mq_bucket(q, m->tag, m->src));
}

struct ibf_mq_entry *ibf_mq_unexp_match(struct ibf_mq *q, uint64_t tag,
					uint64_t ignore, uint64_t src)
{
	struct ibf_mq_entry r = { .tag = tag, .ignore = ignore, .src = src };
	struct ibf_mq_entry *m;

	if (ibf_mq_exact(&r)) {
		for (m = ibf_mq_bucket(q, tag, src)->head; m; m = m->key.next)
			if (m->tag == tag && m->src == src)
				return m;
		return NULL;
	}
	for (m = q->all.head; m; m = m->all.next)
		if (ibf_mq_accepts(&r, m->tag, m->src))
			return m;
	return NULL;
}

void ibf_mq_unexp_remove(struct ibf_mq *q, struct ibf_mq_entry *m)
{
	ibf_mq_remove(q, m);
}
