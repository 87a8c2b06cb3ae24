/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Tag matching: the posted receives and the unexpected messages of an
 * endpoint, one mechanism for every endpoint type that matches in software.
 *
 * A receive names a tag, bits of it to ignore, and a source (a nonzero
 * peer key) or any source (0).  A message carries a tag and its source's
 * key.  A message matches the first receive posted, in posting order, that
 * accepts it; a receive takes the first message, in arrival order, that it
 * accepts.
 *
 * Cost.  A receive with an exact tag and an exact source (what MPI posts
 * for most receives) lives in a hash bucket of its (tag, source); the
 * others (wildcards) in one list in posting order.  An arrival looks at its
 * bucket and at the wildcard list, and takes whichever candidate was posted
 * first (a sequence number says): constant expected cost with any number
 * of exact receives posted.  With none posted (every receive takes any
 * source, as a ping-pong's or MPI_ANY_SOURCE's do) it skips the bucket.
 * Unexpected messages are kept both in their bucket and in one list in
 * arrival order: an exact receive looks in its bucket, a wildcard one
 * walks the list.
 *
 * Entries are the callers' (embedded in their operation records); the
 * queues only link them.  No allocation after ibf_mq_init, no locking: the
 * caller holds whatever lock guards its endpoint.
 */
#ifndef IBF_MATCH_H
#define IBF_MATCH_H

#include <stddef.h>
#include <stdint.h>

struct ibf_mq_entry;

struct ibf_mq_link {
	struct ibf_mq_entry *next, *prev;
};

struct ibf_mq_list {
	struct ibf_mq_entry *head, *tail;
};

struct ibf_mq_entry {
	uint64_t tag;
	uint64_t ignore;	/* a receive's; 0 for a message */
	uint64_t src;		/* peer key; 0: any (a receive) */
	uint64_t seq;		/* posting or arrival order */
	struct ibf_mq_link key;	/* in its bucket, or (posted) the wildcard list */
	struct ibf_mq_link all;	/* in posting or arrival order */
	struct ibf_mq_list *in;	/* the list "key" links it into */
};

struct ibf_mq {
	struct ibf_mq_list *bucket;
	uint32_t mask;		/* buckets - 1 */
	struct ibf_mq_list wild;	/* posted: wildcard receives */
	struct ibf_mq_list all;		/* every entry, in order */
	uint64_t seq;
	size_t count;
	size_t nexact;			/* posted: receives in buckets */
};

/* buckets: rounded up to a power of two (at least 1). 0 or -FI_ENOMEM. */
int ibf_mq_init(struct ibf_mq *q, size_t buckets);
void ibf_mq_fini(struct ibf_mq *q);

static inline int ibf_mq_accepts(const struct ibf_mq_entry *r, uint64_t tag,
				 uint64_t src)
{
	return !((r->tag ^ tag) & ~r->ignore) && (!r->src || r->src == src);
}

/* ---- posted receives ---- */
void ibf_mq_post(struct ibf_mq *q, struct ibf_mq_entry *r);
/* The receive a message (tag, src) goes to, or NULL; left posted. */
struct ibf_mq_entry *ibf_mq_posted_match(struct ibf_mq *q, uint64_t tag,
					 uint64_t src);
void ibf_mq_posted_remove(struct ibf_mq *q, struct ibf_mq_entry *r);

/* ---- unexpected messages ---- */
void ibf_mq_park(struct ibf_mq *q, struct ibf_mq_entry *m);
/* The first message, in arrival order, a receive (tag, ignore, src) takes,
 * or NULL; left parked. */
struct ibf_mq_entry *ibf_mq_unexp_match(struct ibf_mq *q, uint64_t tag,
					uint64_t ignore, uint64_t src);
void ibf_mq_unexp_remove(struct ibf_mq *q, struct ibf_mq_entry *m);

/* Either queue's entries in posting or arrival order (for cancel and
 * draining): first, next (NULL at the end). */
static inline struct ibf_mq_entry *ibf_mq_first(const struct ibf_mq *q)
{
	return q->all.head;
}

static inline struct ibf_mq_entry *ibf_mq_next(const struct ibf_mq_entry *e)
{
	return e->all.next;
}

static inline int ibf_mq_empty(const struct ibf_mq *q)
{
	return !q->all.head;
}

#endif /* IBF_MATCH_H */
