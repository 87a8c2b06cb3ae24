/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Atomic operations on the target's CPU (ibf_atomic_apply.h says why).
 *
 * Each element is read, its new value computed in its own type, and
 * written back with a compare-and-swap on the element's width, retried
 * until no one changed it meanwhile.  Values travel as raw bits in the low
 * bytes of a uint64_t (little-endian hosts, as everywhere in ibfab).
 */
#include "config.h"

#include <string.h>

#include "ibf_atomic_apply.h"

size_t ibf_atomic_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return 4;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
		return 8;
	default:
		return 0;	/* complex, long double: no CAS this wide */
	}
}

static int ibf_atomic_integral(enum fi_datatype dt)
{
	return dt != FI_FLOAT && dt != FI_DOUBLE;
}

int ibf_atomic_valid(enum fi_datatype dt, enum fi_op op,
		     enum ibf_atomic_kind kind)
{
	if (!ibf_atomic_size(dt))
		return 0;
	switch (op) {
	case FI_MIN:
	case FI_MAX:
	case FI_SUM:
	case FI_PROD:
	case FI_ATOMIC_WRITE:
		return kind != IBF_ATOMIC_COMPARE;
	case FI_LOR:
	case FI_LAND:
	case FI_LXOR:
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
		return kind != IBF_ATOMIC_COMPARE && ibf_atomic_integral(dt);
	case FI_ATOMIC_READ:
		return kind == IBF_ATOMIC_FETCH;
	case FI_CSWAP:
	case FI_CSWAP_NE:
	case FI_CSWAP_LE:
	case FI_CSWAP_LT:
	case FI_CSWAP_GE:
	case FI_CSWAP_GT:
		return kind == IBF_ATOMIC_COMPARE;
	case FI_MSWAP:
		return kind == IBF_ATOMIC_COMPARE && ibf_atomic_integral(dt);
	default:
		return 0;
	}
}

/*
 * The new value of one element of type T: old o, operand a, compare c.
 * Bitwise and logical ops exist for integral types only (ibf_atomic_valid
 * keeps floats away from them; the float instances never reach them).
 */
#define IBF_ATOMIC_COMPUTE(T, INTEGRAL, ARITH)					\
static uint64_t ibf_atomic_new_##T(enum fi_op op, uint64_t ob, uint64_t ab,	\
				   uint64_t cb)					\
{										\
	T o, a, c, n;								\
	uint64_t nb = 0;							\
										\
	memcpy(&o, &ob, sizeof(T));						\
	memcpy(&a, &ab, sizeof(T));						\
	memcpy(&c, &cb, sizeof(T));						\
	switch (op) {								\
	case FI_MIN: n = a < o ? a : o; break;					\
	case FI_MAX: n = a > o ? a : o; break;					\
	case FI_SUM: n = (T)ARITH(o, +, a); break;				\
	case FI_PROD: n = (T)ARITH(o, *, a); break;				\
	case FI_ATOMIC_WRITE: n = a; break;					\
	case FI_CSWAP: n = c == o ? a : o; break;				\
	case FI_CSWAP_NE: n = c != o ? a : o; break;				\
	case FI_CSWAP_LE: n = c <= o ? a : o; break;				\
	case FI_CSWAP_LT: n = c < o ? a : o; break;				\
	case FI_CSWAP_GE: n = c >= o ? a : o; break;				\
	case FI_CSWAP_GT: n = c > o ? a : o; break;				\
	default: n = INTEGRAL(op, o, a, c); break;				\
	}									\
	memcpy(&nb, &n, sizeof(T));						\
	return nb;								\
}

#define IBF_ATOMIC_BITS(op, o, a, c)						\
	((op) == FI_LOR ? (o || a) : (op) == FI_LAND ? (o && a) :		\
	 (op) == FI_LXOR ? (!o != !a) : (op) == FI_BOR ? (o | a) :		\
	 (op) == FI_BAND ? (o & a) : (op) == FI_BXOR ? (o ^ a) :		\
	 (op) == FI_MSWAP ? ((a & c) | (o & ~c)) : o)
#define IBF_ATOMIC_NO_BITS(op, o, a, c) (o)
/* Integers wrap (in unsigned arithmetic: signed overflow is undefined). */
#define IBF_ATOMIC_WRAP(x, OP, y) ((uint64_t)(x) OP (uint64_t)(y))
#define IBF_ATOMIC_FLOAT(x, OP, y) ((x) OP (y))

IBF_ATOMIC_COMPUTE(int8_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(uint8_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(int16_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(uint16_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(int32_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(uint32_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(int64_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(uint64_t, IBF_ATOMIC_BITS, IBF_ATOMIC_WRAP)
IBF_ATOMIC_COMPUTE(float, IBF_ATOMIC_NO_BITS, IBF_ATOMIC_FLOAT)
IBF_ATOMIC_COMPUTE(double, IBF_ATOMIC_NO_BITS, IBF_ATOMIC_FLOAT)

static uint64_t ibf_atomic_new(enum fi_datatype dt, enum fi_op op,
			       uint64_t o, uint64_t a, uint64_t c)
{
	switch (dt) {
	case FI_INT8: return ibf_atomic_new_int8_t(op, o, a, c);
	case FI_UINT8: return ibf_atomic_new_uint8_t(op, o, a, c);
	case FI_INT16: return ibf_atomic_new_int16_t(op, o, a, c);
	case FI_UINT16: return ibf_atomic_new_uint16_t(op, o, a, c);
	case FI_INT32: return ibf_atomic_new_int32_t(op, o, a, c);
	case FI_UINT32: return ibf_atomic_new_uint32_t(op, o, a, c);
	case FI_INT64: return ibf_atomic_new_int64_t(op, o, a, c);
	case FI_UINT64: return ibf_atomic_new_uint64_t(op, o, a, c);
	case FI_FLOAT: return ibf_atomic_new_float(op, o, a, c);
	case FI_DOUBLE: return ibf_atomic_new_double(op, o, a, c);
	default: return o;
	}
}

/* The element's bits, loaded atomically. */
static uint64_t ibf_atomic_load(const void *p, size_t size)
{
	switch (size) {
	case 1: return __atomic_load_n((const uint8_t *)p, __ATOMIC_ACQUIRE);
	case 2: return __atomic_load_n((const uint16_t *)p, __ATOMIC_ACQUIRE);
	case 4: return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
	default: return __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
	}
}

/* Replace *p's bits old with new; 0 (and old updated) if they changed. */
static int ibf_atomic_cas(void *p, size_t size, uint64_t *old, uint64_t new)
{
	int ok;

	switch (size) {
	case 1: {
		uint8_t e = (uint8_t)*old;

		ok = __atomic_compare_exchange_n((uint8_t *)p, &e, (uint8_t)new, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		*old = e;
		return ok;
	}
	case 2: {
		uint16_t e = (uint16_t)*old;

		ok = __atomic_compare_exchange_n((uint16_t *)p, &e, (uint16_t)new, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		*old = e;
		return ok;
	}
	case 4: {
		uint32_t e = (uint32_t)*old;

		ok = __atomic_compare_exchange_n((uint32_t *)p, &e, (uint32_t)new, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
		*old = e;
		return ok;
	}
	default:
		return __atomic_compare_exchange_n((uint64_t *)p, old, new, 0,
						   __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	}
}

void ibf_atomic_apply(enum fi_datatype dt, enum fi_op op, void *dst,
		      const void *operand, const void *compare, void *result,
		      size_t count)
{
	size_t size = ibf_atomic_size(dt), i;
	uint64_t old, a = 0, c = 0, n;

	for (i = 0; i < count; i++) {
		uint8_t *at = (uint8_t *)dst + i * size;

		if (operand)
			memcpy(&a, (const uint8_t *)operand + i * size, size);
		if (compare)
			memcpy(&c, (const uint8_t *)compare + i * size, size);
		old = ibf_atomic_load(at, size);
		if (op != FI_ATOMIC_READ) {
			do {
				n = ibf_atomic_new(dt, op, old, a, c);
			} while (n != old && !ibf_atomic_cas(at, size, &old, n));
		}
		if (result)
			memcpy((uint8_t *)result + i * size, &old, size);
	}
}
