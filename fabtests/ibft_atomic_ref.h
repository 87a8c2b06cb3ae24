/*
 * Atomic tests' reference (ibft_atomic_ref.c): element sizes, small
 * values written and read in any datatype, and what each fi_op makes of
 * old value o, operand a and compare value c.
 */
#ifndef IBFT_ATOMIC_REF_H
#define IBFT_ATOMIC_REF_H

#include <stddef.h>

#include <rdma/fi_atomic.h>

size_t dt_size(enum fi_datatype dt);
void put(enum fi_datatype dt, void *p, int v);
double get(enum fi_datatype dt, const void *p);
double expect(enum fi_op op, double o, double a, double c);

#endif /* IBFT_ATOMIC_REF_H */
