/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Atomics on the target's CPU (ibf_atomic_apply.c): validity, each op's result,
 * and atomicity under threads mixing ops and widths on one word. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "ibf_atomic_apply.h"

Test(atomic, sizes_and_validity)
{
	cr_assert_eq(ibf_atomic_size(FI_UINT32), 4);
	cr_assert_eq(ibf_atomic_size(FI_DOUBLE), 8);
	cr_assert_eq(ibf_atomic_size(FI_LONG_DOUBLE), 0);
	cr_assert(ibf_atomic_valid(FI_UINT64, FI_SUM, IBF_ATOMIC_PLAIN));
	cr_assert(ibf_atomic_valid(FI_UINT32, FI_SUM, IBF_ATOMIC_FETCH));
	cr_assert(ibf_atomic_valid(FI_DOUBLE, FI_MAX, IBF_ATOMIC_FETCH));
	cr_assert(ibf_atomic_valid(FI_UINT64, FI_CSWAP, IBF_ATOMIC_COMPARE));
	cr_assert(!ibf_atomic_valid(FI_UINT64, FI_CSWAP, IBF_ATOMIC_PLAIN));
	cr_assert(!ibf_atomic_valid(FI_UINT64, FI_SUM, IBF_ATOMIC_COMPARE));
	cr_assert(ibf_atomic_valid(FI_INT8, FI_ATOMIC_READ, IBF_ATOMIC_FETCH));
	cr_assert(!ibf_atomic_valid(FI_INT8, FI_ATOMIC_READ, IBF_ATOMIC_PLAIN));
	cr_assert(!ibf_atomic_valid(FI_FLOAT, FI_BOR, IBF_ATOMIC_PLAIN));
	cr_assert(!ibf_atomic_valid(FI_DOUBLE, FI_MSWAP, IBF_ATOMIC_COMPARE));
	cr_assert(!ibf_atomic_valid(FI_FLOAT_COMPLEX, FI_SUM, IBF_ATOMIC_PLAIN));
	cr_assert(!ibf_atomic_valid(FI_UINT64, (enum fi_op)FI_ATOMIC_OP_LAST, IBF_ATOMIC_PLAIN));
}

static uint64_t one64(enum fi_op op, uint64_t v, uint64_t a, uint64_t c,
		      uint64_t *old)
{
	ibf_atomic_apply(FI_UINT64, op, &v, &a, &c, old, 1);
	return v;
}

Test(atomic, uint64_ops)
{
	uint64_t old;

	cr_assert_eq(one64(FI_SUM, 5, 7, 0, &old), 12);
	cr_assert_eq(old, 5);
	cr_assert_eq(one64(FI_SUM, UINT64_MAX, 2, 0, NULL), 1, "wraps");
	cr_assert_eq(one64(FI_PROD, 6, 7, 0, NULL), 42);
	cr_assert_eq(one64(FI_MIN, 6, 7, 0, NULL), 6);
	cr_assert_eq(one64(FI_MAX, 6, 7, 0, NULL), 7);
	cr_assert_eq(one64(FI_BOR, 0xf0, 0x0f, 0, NULL), 0xff);
	cr_assert_eq(one64(FI_BAND, 0xf0, 0x3c, 0, NULL), 0x30);
	cr_assert_eq(one64(FI_BXOR, 0xff, 0x0f, 0, NULL), 0xf0);
	cr_assert_eq(one64(FI_LOR, 0, 9, 0, NULL), 1);
	cr_assert_eq(one64(FI_LAND, 3, 0, 0, NULL), 0);
	cr_assert_eq(one64(FI_LXOR, 3, 4, 0, NULL), 0);
	cr_assert_eq(one64(FI_ATOMIC_WRITE, 3, 4, 0, &old), 4);
	cr_assert_eq(old, 3);
	cr_assert_eq(one64(FI_ATOMIC_READ, 3, 4, 0, &old), 3);
	cr_assert_eq(old, 3);
	cr_assert_eq(one64(FI_CSWAP, 3, 9, 3, &old), 9);
	cr_assert_eq(one64(FI_CSWAP, 3, 9, 4, &old), 3);
	cr_assert_eq(old, 3);
	cr_assert_eq(one64(FI_CSWAP_NE, 3, 9, 4, NULL), 9);
	cr_assert_eq(one64(FI_CSWAP_LE, 3, 9, 2, NULL), 9, "compare <= old");
	cr_assert_eq(one64(FI_CSWAP_LE, 3, 9, 4, NULL), 3);
	cr_assert_eq(one64(FI_CSWAP_LT, 3, 9, 3, NULL), 3);
	cr_assert_eq(one64(FI_CSWAP_GE, 3, 9, 3, NULL), 9);
	cr_assert_eq(one64(FI_CSWAP_GT, 3, 9, 4, NULL), 9);
	cr_assert_eq(one64(FI_MSWAP, 0xff00, 0x0ff0, 0x00ff, NULL), 0xfff0);
}

Test(atomic, narrow_signed_and_float)
{
	int8_t i8[2] = { -100, 100 }, a8[2] = { -100, 100 }, r8[2];
	int32_t i32 = -5, a32 = 3;
	double d = 1.5, ad = 2.25, rd;
	float f = 2.0f, af = -1.0f, cf = 2.0f;

	ibf_atomic_apply(FI_INT8, FI_SUM, i8, a8, NULL, r8, 2);
	cr_assert_eq(i8[0], 56, "-200 wraps to 56: %d", i8[0]);
	cr_assert_eq(i8[1], -56);
	cr_assert_eq(r8[0], -100);
	ibf_atomic_apply(FI_INT32, FI_MIN, &i32, &a32, NULL, NULL, 1);
	cr_assert_eq(i32, -5, "signed comparison");
	ibf_atomic_apply(FI_DOUBLE, FI_SUM, &d, &ad, NULL, &rd, 1);
	cr_assert_eq(d, 3.75);
	cr_assert_eq(rd, 1.5);
	ibf_atomic_apply(FI_FLOAT, FI_CSWAP, &f, &af, &cf, NULL, 1);
	cr_assert_eq(f, -1.0f);
}

Test(atomic, only_its_own_bytes)
{
	uint8_t mem[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint16_t a = 0x1010;

	ibf_atomic_apply(FI_UINT16, FI_SUM, mem + 2, &a, NULL, NULL, 1);
	cr_assert_eq(mem[1], 2);
	cr_assert_eq(mem[2], 0x13);
	cr_assert_eq(mem[3], 0x14);
	cr_assert_eq(mem[4], 5);
}

/*
 * Threads hammer one 64-bit counter with a mix: 64-bit fetch-add, 64-bit
 * compare-swap increments, 32-bit adds on its low half (kept from carrying
 * by adding and subtracting), and plain reads.  Nothing is lost.
 */
#define THREADS 4
#define ITERS 50000
static uint64_t counter;

static void *hammer(void *arg)
{
	uintptr_t id = (uintptr_t)arg;
	uint64_t one = 1, old, want;
	uint32_t up = 1, down = (uint32_t)-1;
	int i;

	for (i = 0; i < ITERS; i++) {
		switch ((i + id) % 4) {
		case 0:
			ibf_atomic_apply(FI_UINT64, FI_SUM, &counter, &one, NULL,
					 &old, 1);
			break;
		case 1:
			do {
				ibf_atomic_apply(FI_UINT64, FI_ATOMIC_READ, &counter,
						 NULL, NULL, &old, 1);
				want = old + 1;
				ibf_atomic_apply(FI_UINT64, FI_CSWAP, &counter, &want,
						 &old, &want, 1);
			} while (want != old);
			break;
		case 2:
			/* +1 then -1 on the low word, then +1 on the whole. */
			ibf_atomic_apply(FI_UINT32, FI_SUM, &counter, &up, NULL,
					 NULL, 1);
			ibf_atomic_apply(FI_UINT32, FI_SUM, &counter, &down, NULL,
					 NULL, 1);
			ibf_atomic_apply(FI_UINT64, FI_SUM, &counter, &one, NULL,
					 NULL, 1);
			break;
		default:
			ibf_atomic_apply(FI_UINT64, FI_SUM, &counter, &one, NULL,
					 NULL, 1);
			break;
		}
	}
	return NULL;
}

Test(atomic, threads_mixing_ops_and_widths_lose_nothing)
{
	pthread_t t[THREADS];
	uintptr_t i;

	counter = 0;
	for (i = 0; i < THREADS; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, hammer, (void *)i), 0);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(counter, (uint64_t)THREADS * ITERS, "%llu",
		     (unsigned long long)counter);
}
