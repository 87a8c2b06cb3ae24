/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Atomic tests' reference (ibft_atomic_ref.c): element sizes, small
 * values written and read in any datatype, what each fi_op makes of old
 * value o, operand a and compare value c, and the run over every call.
 */
#ifndef IBFT_ATOMIC_REF_H
#define IBFT_ATOMIC_REF_H

#include <stddef.h>

#include <rdma/fi_atomic.h>

size_t dt_size(enum fi_datatype dt);
void put(enum fi_datatype dt, void *p, int v);
double get(enum fi_datatype dt, const void *p);
double expect(enum fi_op op, double o, double a, double c);

/* The three forms of atomic call. */
enum { IBFT_PLAIN, IBFT_FETCH, IBFT_COMPARE };
/*
 * one(form, op, dt) for every form, op and datatype: 0 passed, 1 not
 * supported (the valid call said so), -1 failed.  One check, name,
 * passes if something passed and nothing failed.
 */
void ibft_atomic_all(int (*one)(int form, enum fi_op op, enum fi_datatype dt),
		     const char *name);

#endif /* IBFT_ATOMIC_REF_H */
