/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibf_match_bench: what one match costs in ibfab's tag matcher
 * (ibf_match.c) with 1, 100 and 10,000 receives posted, beside a plain
 * list walked in posting order (how RDM endpoints matched before).
 *
 * Each step matches an arrival against the posted receives, removes the
 * receive it found and posts it again, so the count stays put; arrivals
 * pick receives at random.  Exact: every receive names a tag and a source
 * (MPI's common case).  Wildcard: every receive ignores some tag bits, the
 * case no hash helps (both walk the list).  Needs no device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ibf_match.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The plain list: every receive in one linked list, walked in posting
 * order to the first that accepts (the queue's own posting-order list). */
static struct ibf_mq_entry *plain_match(struct ibf_mq *q, uint64_t tag,
					uint64_t src)
{
	struct ibf_mq_entry *r;

	for (r = ibf_mq_first(q); r; r = ibf_mq_next(r))
		if (ibf_mq_accepts(r, tag, src))
			return r;
	return NULL;
}

static double bench(int n, int wildcard, int plain, int steps)
{
	struct ibf_mq_entry *e = calloc(n, sizeof(*e)), *r;
	struct ibf_mq q;
	double t0, t;
	int i, k;

	ibf_mq_init(&q, 2 * (size_t)n);
	for (i = 0; i < n; i++) {
		e[i].tag = (uint64_t)i << 4;
		e[i].ignore = wildcard ? 0xf : 0;
		e[i].src = 1 + (uint64_t)(i % 8);
		ibf_mq_post(&q, &e[i]);
	}
	srand(7);
	t0 = now_ns();
	for (k = 0; k < steps; k++) {
		i = rand() % n;
		r = plain ? plain_match(&q, e[i].tag, e[i].src) :
			    ibf_mq_posted_match(&q, e[i].tag, e[i].src);
		if (r != &e[i]) {
			fprintf(stderr, "wrong match\n");
			exit(1);
		}
		ibf_mq_posted_remove(&q, r);
		ibf_mq_post(&q, r);
	}
	t = (now_ns() - t0) / steps;
	ibf_mq_fini(&q);
	free(e);
	return t;
}

int main(void)
{
	static const int counts[] = { 1, 100, 10000 };
	int i;

	printf("tag matching: ns per match (match, remove, post again), by receives posted\n");
	printf("%-10s %8s | %-12s | %-12s\n", "receives", "posted", "ibf_match", "plain list");
	for (i = 0; i < 3; i++) {
		int n = counts[i], steps = n >= 10000 ? 20000 : 200000;

		printf("%-10s %8d | %12.1f | %12.1f\n", "exact", n, bench(n, 0, 0, steps),
		       bench(n, 0, 1, steps));
	}
	for (i = 0; i < 3; i++) {
		int n = counts[i], steps = n >= 10000 ? 20000 : 200000;

		printf("%-10s %8d | %12.1f | %12.1f\n", "wildcard", n, bench(n, 1, 0, steps),
		       bench(n, 1, 1, steps));
	}
	return 0;
}
