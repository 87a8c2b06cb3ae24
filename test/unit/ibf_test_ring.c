/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Work request rings: slots retire in order, across the wrap. */
#include <criterion/criterion.h>

#include "ibf.h"

#define N 8
static struct ibf_op ops[N];
static struct ibf_ring ring;

static void setup(void)
{
	ibf_ring_set(&ring, ops, N);
}

TestSuite(ring, .init = setup);

Test(ring, empty_ring_is_all_free)
{
	cr_assert_eq(ibf_ring_free(&ring), N);
}

Test(ring, retiring_a_later_slot_retires_earlier_ones)
{
	ring.head = 5;
	cr_assert_eq(ibf_ring_free(&ring), N - 5);
	ibf_ring_retire(&ops[3]);	/* slots 0..3: unsignalled, then signalled */
	cr_assert_eq(ring.tail, 4);
	cr_assert_eq(ibf_ring_free(&ring), N - 1);
	ibf_ring_retire(&ops[4]);
	cr_assert_eq(ibf_ring_free(&ring), N);
}

Test(ring, retire_across_the_wrap)
{
	ring.head = ring.tail = 0xfffffffe;	/* counters wrap too */
	ring.head += 6;
	cr_assert_eq(ibf_ring_free(&ring), 2);
	/* 0xfffffffe % 8 == 6: slots 6, 7, 0, 1, 2, 3 are in flight. */
	ibf_ring_retire(&ops[1]);
	cr_assert_eq(ring.tail, 0xfffffffeu + 4);
	cr_assert_eq(ibf_ring_free(&ring), 6);
	ibf_ring_retire(&ops[3]);
	cr_assert_eq(ibf_ring_free(&ring), N);
}
