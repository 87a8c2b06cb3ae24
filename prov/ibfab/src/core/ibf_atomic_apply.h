/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Atomic operations, executed by the CPU of the target (ibf_atomic_apply.c).
 *
 * Design: verbs offers only 64-bit fetch-add and compare-swap in hardware,
 * and an HCA atomic is atomic only with respect to that HCA's other
 * atomics, never with a CPU's.  So ibfab never uses them: every fi_atomic
 * (any op, type and size) travels as a request to the target endpoint,
 * whose progress applies it here, element by element, with the CPU's own
 * atomic instructions (a compare-and-swap loop where there is no single
 * instruction).  Every operation on a location is therefore atomic with
 * respect to every other, from any mix of peers, ops and sizes, and with
 * respect to the application's own C11/GCC atomics on that memory.
 *
 * No device, no lock, no allocation: unit-tested alone.
 */
#ifndef IBF_ATOMIC_H
#define IBF_ATOMIC_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>

enum ibf_atomic_kind {
	IBF_ATOMIC_PLAIN,	/* fi_atomic: no result */
	IBF_ATOMIC_FETCH,	/* fi_fetch_atomic: the old value back */
	IBF_ATOMIC_COMPARE,	/* fi_compare_atomic: compare operand too */
};

/* Bytes of one element of dt; 0 if ibfab does not handle dt. */
size_t ibf_atomic_size(enum fi_datatype dt);
/* Whether (op, dt) is valid for kind (as fi_atomicvalid and its kin). */
int ibf_atomic_valid(enum fi_datatype dt, enum fi_op op,
		     enum ibf_atomic_kind kind);
/*
 * Apply op to count elements at dst (naturally aligned) with operand
 * (and compare, for the compare ops), each element atomically; the old
 * values go to result if it is not NULL.  (op, dt) must be valid.
 */
void ibf_atomic_apply(enum fi_datatype dt, enum fi_op op, void *dst,
		      const void *operand, const void *compare, void *result,
		      size_t count);

#endif /* IBF_ATOMIC_H */
