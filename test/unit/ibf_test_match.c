/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The tag matcher (ibf_match.c): posting order across exact and wildcard
 * receives, ignore bits, directed receives, unexpected messages in arrival
 * order, peek/claim (match, then remove), cancel, multi-receive (a receive
 * left posted), and a randomized comparison with the plainest matcher
 * there is: one list, walked in order.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_match.h"

static struct ibf_mq posted, unexp;

static void setup(void)
{
	cr_assert_eq(ibf_mq_init(&posted, 64), 0);
	cr_assert_eq(ibf_mq_init(&unexp, 64), 0);
}

static void teardown(void)
{
	ibf_mq_fini(&posted);
	ibf_mq_fini(&unexp);
}

TestSuite(match, .init = setup, .fini = teardown);

static struct ibf_mq_entry rx(uint64_t tag, uint64_t ignore, uint64_t src)
{
	struct ibf_mq_entry e = { .tag = tag, .ignore = ignore, .src = src };

	return e;
}

Test(match, exact_posted_first_wins_over_later_wildcard)
{
	struct ibf_mq_entry a = rx(5, 0, 1), w = rx(0, ~0ull, 0);

	ibf_mq_post(&posted, &a);
	ibf_mq_post(&posted, &w);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &a);
	cr_assert_eq(ibf_mq_posted_match(&posted, 6, 1), &w);
}

Test(match, wildcard_posted_first_wins_over_later_exact)
{
	struct ibf_mq_entry w = rx(0, ~0ull, 0), a = rx(5, 0, 1);

	ibf_mq_post(&posted, &w);
	ibf_mq_post(&posted, &a);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &w);
	ibf_mq_posted_remove(&posted, &w);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &a);
}

/* The bucket is skipped while no exact receive is posted (nexact): the
 * count follows exact receives in and out, and wildcard ones leave it. */
Test(match, bucket_looked_in_while_any_exact_receive_is_posted)
{
	struct ibf_mq_entry a = rx(5, 0, 1), b = rx(5, 0, 1), w = rx(0, ~0ull, 0);

	ibf_mq_post(&posted, &a);
	ibf_mq_posted_remove(&posted, &a);
	cr_assert_null(ibf_mq_posted_match(&posted, 5, 1));
	ibf_mq_post(&posted, &w);
	ibf_mq_post(&posted, &b);
	ibf_mq_posted_remove(&posted, &w);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &b);
	ibf_mq_post(&posted, &a);
	ibf_mq_posted_remove(&posted, &b);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &a);
	ibf_mq_posted_remove(&posted, &a);
	cr_assert_eq(posted.nexact, 0);
	cr_assert_null(ibf_mq_posted_match(&posted, 5, 1));
}

Test(match, ignore_bits)
{
	struct ibf_mq_entry r = rx(0x10, 0x0f, 0);

	ibf_mq_post(&posted, &r);
	cr_assert_eq(ibf_mq_posted_match(&posted, 0x1f, 3), &r);
	cr_assert_null(ibf_mq_posted_match(&posted, 0x20, 3));
}

Test(match, directed_receive_takes_its_source_only)
{
	struct ibf_mq_entry r = rx(7, 0, 2), any = rx(7, 0xff, 2);

	ibf_mq_post(&posted, &r);
	cr_assert_null(ibf_mq_posted_match(&posted, 7, 1));
	cr_assert_eq(ibf_mq_posted_match(&posted, 7, 2), &r);
	ibf_mq_post(&posted, &any);	/* wildcard tag, directed */
	cr_assert_null(ibf_mq_posted_match(&posted, 8, 1));
	cr_assert_eq(ibf_mq_posted_match(&posted, 8, 2), &any);
}

Test(match, same_key_in_posting_order)
{
	struct ibf_mq_entry a = rx(5, 0, 1), b = rx(5, 0, 1);

	ibf_mq_post(&posted, &a);
	ibf_mq_post(&posted, &b);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &a);
	ibf_mq_posted_remove(&posted, &a);
	cr_assert_eq(ibf_mq_posted_match(&posted, 5, 1), &b);
}

Test(match, multi_receive_stays_posted)
{
	struct ibf_mq_entry m = rx(0, ~0ull, 0);

	ibf_mq_post(&posted, &m);
	cr_assert_eq(ibf_mq_posted_match(&posted, 1, 1), &m);
	cr_assert_eq(ibf_mq_posted_match(&posted, 2, 3), &m);
	cr_assert_eq(posted.count, 1);
}

Test(match, unexpected_in_arrival_order)
{
	struct ibf_mq_entry m1 = rx(5, 0, 1), m2 = rx(6, 0, 1), m3 = rx(5, 0, 1);

	ibf_mq_park(&unexp, &m1);
	ibf_mq_park(&unexp, &m2);
	ibf_mq_park(&unexp, &m3);
	/* Peek: found, left parked. */
	cr_assert_eq(ibf_mq_unexp_match(&unexp, 5, 0, 1), &m1);
	cr_assert_eq(ibf_mq_unexp_match(&unexp, 5, 0, 1), &m1);
	/* Claim: found, then taken. */
	ibf_mq_unexp_remove(&unexp, &m1);
	cr_assert_eq(ibf_mq_unexp_match(&unexp, 5, 0, 1), &m3);
	cr_assert_eq(ibf_mq_unexp_match(&unexp, 0, ~0ull, 0), &m2);
	cr_assert_eq(ibf_mq_unexp_match(&unexp, 4, 3, 1), &m2);	/* 4..7 */
	cr_assert_null(ibf_mq_unexp_match(&unexp, 5, 0, 2));
	cr_assert_eq(ibf_mq_first(&unexp), &m2);
	cr_assert_eq(ibf_mq_next(&m2), &m3);
}

Test(match, cancel_by_walking_in_posting_order)
{
	struct ibf_mq_entry e[5];
	struct ibf_mq_entry *x;
	int i;

	for (i = 0; i < 5; i++) {
		e[i] = rx((uint64_t)i, i % 2 ? ~0ull : 0, i % 2 ? 0 : 1);
		ibf_mq_post(&posted, &e[i]);
	}
	for (x = ibf_mq_first(&posted); x && x != &e[2]; x = ibf_mq_next(x))
		;
	cr_assert_eq(x, &e[2]);
	ibf_mq_posted_remove(&posted, x);
	cr_assert_neq(ibf_mq_posted_match(&posted, 2, 1), &e[2]);
	cr_assert_eq(ibf_mq_posted_match(&posted, 2, 1), &e[1]);	/* wildcard */
	for (i = 0, x = ibf_mq_first(&posted); x; x = ibf_mq_next(x), i++)
		;
	cr_assert_eq(i, 4);
	cr_assert_eq(posted.count, 4);
}

Test(match, ten_thousand_exact_receives)
{
	enum { N = 10000 };
	struct ibf_mq_entry *e = calloc(N, sizeof(*e));
	int i;

	for (i = 0; i < N; i++) {
		e[i] = rx((uint64_t)i << 8, 0, 1 + (uint64_t)(i % 7));
		ibf_mq_post(&posted, &e[i]);
	}
	for (i = N - 1; i >= 0; i -= 97)
		cr_assert_eq(ibf_mq_posted_match(&posted, (uint64_t)i << 8,
						 1 + (uint64_t)(i % 7)), &e[i]);
	cr_assert_null(ibf_mq_posted_match(&posted, 5, 1));
	free(e);
}

/* The plainest matcher: one list each, walked in order. */
struct ref {
	struct ibf_mq_entry *e[512];
	int n;
};

static struct ibf_mq_entry *ref_posted(struct ref *p, uint64_t tag, uint64_t src)
{
	for (int i = 0; i < p->n; i++)
		if (ibf_mq_accepts(p->e[i], tag, src))
			return p->e[i];
	return NULL;
}

static struct ibf_mq_entry *ref_unexp(struct ref *u, uint64_t tag,
				      uint64_t ignore, uint64_t src)
{
	struct ibf_mq_entry r = { .tag = tag, .ignore = ignore, .src = src };

	for (int i = 0; i < u->n; i++)
		if (ibf_mq_accepts(&r, u->e[i]->tag, u->e[i]->src))
			return u->e[i];
	return NULL;
}

static void ref_remove(struct ref *l, struct ibf_mq_entry *e)
{
	for (int i = 0; i < l->n; i++) {
		if (l->e[i] == e) {
			memmove(&l->e[i], &l->e[i + 1], (l->n - i - 1) * sizeof(e));
			l->n--;
			return;
		}
	}
	cr_assert_fail("not in the reference list");
}

/*
 * Random receives (exact, wildcard tag, any source) and messages over few
 * tags and sources, so that matches and near misses abound: every choice
 * must be the plain matcher's.
 */
Test(match, same_choices_as_a_plain_list)
{
	enum { STEPS = 20000, POOL = 512 };
	static struct ibf_mq_entry pool[POOL];
	static struct ref rp, ru;
	struct ibf_mq_entry *free_list[POOL], *got, *want;
	int nfree = POOL, i, step;

	srand(12345);
	for (i = 0; i < POOL; i++)
		free_list[i] = &pool[i];
	rp.n = ru.n = 0;
	for (step = 0; step < STEPS; step++) {
		uint64_t tag = (uint64_t)(rand() % 6), src = 1 + (uint64_t)(rand() % 3);
		int kind = rand() % 4;

		if (rand() % 2 && nfree) {	/* a receive is posted */
			uint64_t ignore = kind == 0 ? 3 : 0;
			uint64_t rsrc = kind == 1 ? 0 : src;

			want = ref_unexp(&ru, tag, ignore, rsrc);
			got = ibf_mq_unexp_match(&unexp, tag, ignore, rsrc);
			cr_assert_eq(got, want, "step %d: posting matched wrong", step);
			if (got) {
				ibf_mq_unexp_remove(&unexp, got);
				ref_remove(&ru, got);
				free_list[nfree++] = got;
			} else {
				struct ibf_mq_entry *r = free_list[--nfree];

				*r = rx(tag, ignore, rsrc);
				ibf_mq_post(&posted, r);
				rp.e[rp.n++] = r;
			}
		} else if (nfree) {		/* a message arrives */
			want = ref_posted(&rp, tag, src);
			got = ibf_mq_posted_match(&posted, tag, src);
			cr_assert_eq(got, want, "step %d: arrival matched wrong", step);
			if (got && kind == 3) {
				continue;	/* a multi-receive: stays */
			} else if (got) {
				ibf_mq_posted_remove(&posted, got);
				ref_remove(&rp, got);
				free_list[nfree++] = got;
			} else {
				struct ibf_mq_entry *m = free_list[--nfree];

				*m = rx(tag, 0, src);
				ibf_mq_park(&unexp, m);
				ru.e[ru.n++] = m;
			}
		}
	}
	cr_assert_eq(posted.count, (size_t)rp.n);
	cr_assert_eq(unexp.count, (size_t)ru.n);
}
