/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The reference the atomic tests check providers against: what an
 * operation makes of small values, computed plainly (ibft_atomic_ref.h).
 */
#include <stdint.h>
#include <stdio.h>

#include "ibft.h"
#include "ibft_atomic_ref.h"

size_t dt_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: case FI_FLOAT: return 4;
	case FI_INT64: case FI_UINT64: case FI_DOUBLE: return 8;
	default: return 0;
	}
}

/* Small values every type holds, so results are exact. */
void put(enum fi_datatype dt, void *p, int v)
{
	switch (dt) {
	case FI_INT8: *(int8_t *)p = (int8_t)v; break;
	case FI_UINT8: *(uint8_t *)p = (uint8_t)v; break;
	case FI_INT16: *(int16_t *)p = (int16_t)v; break;
	case FI_UINT16: *(uint16_t *)p = (uint16_t)v; break;
	case FI_INT32: *(int32_t *)p = v; break;
	case FI_UINT32: *(uint32_t *)p = (uint32_t)v; break;
	case FI_INT64: *(int64_t *)p = v; break;
	case FI_UINT64: *(uint64_t *)p = (uint64_t)v; break;
	case FI_FLOAT: *(float *)p = (float)v; break;
	case FI_DOUBLE: *(double *)p = v; break;
	default: break;
	}
}

double get(enum fi_datatype dt, const void *p)
{
	switch (dt) {
	case FI_INT8: return *(const int8_t *)p;
	case FI_UINT8: return *(const uint8_t *)p;
	case FI_INT16: return *(const int16_t *)p;
	case FI_UINT16: return *(const uint16_t *)p;
	case FI_INT32: return *(const int32_t *)p;
	case FI_UINT32: return *(const uint32_t *)p;
	case FI_INT64: return (double)*(const int64_t *)p;
	case FI_UINT64: return (double)*(const uint64_t *)p;
	case FI_FLOAT: return *(const float *)p;
	case FI_DOUBLE: return *(const double *)p;
	default: return 0;
	}
}

/* What op makes of old o with operand a and compare c (small values). */
double expect(enum fi_op op, double o, double a, double c)
{
	long lo = (long)o, la = (long)a, lc = (long)c;

	switch (op) {
	case FI_MIN: return a < o ? a : o;
	case FI_MAX: return a > o ? a : o;
	case FI_SUM: return o + a;
	case FI_PROD: return o * a;
	case FI_LOR: return lo || la;
	case FI_LAND: return lo && la;
	case FI_LXOR: return !lo != !la;
	case FI_BOR: return (double)(lo | la);
	case FI_BAND: return (double)(lo & la);
	case FI_BXOR: return (double)(lo ^ la);
	case FI_ATOMIC_READ: return o;
	case FI_ATOMIC_WRITE: return a;
	case FI_CSWAP: return c == o ? a : o;
	case FI_CSWAP_NE: return c != o ? a : o;
	case FI_CSWAP_LE: return c <= o ? a : o;
	case FI_CSWAP_LT: return c < o ? a : o;
	case FI_CSWAP_GE: return c >= o ? a : o;
	case FI_CSWAP_GT: return c > o ? a : o;
	case FI_MSWAP: return (double)((la & lc) | (lo & ~lc));
	default: return o;
	}
}


void ibft_atomic_all(int (*one)(int form, enum fi_op op, enum fi_datatype dt),
		     const char *name)
{
	static const enum fi_datatype dts[] = { FI_INT8, FI_UINT8, FI_INT16,
		FI_UINT16, FI_INT32, FI_UINT32, FI_INT64, FI_UINT64, FI_FLOAT,
		FI_DOUBLE };
	int form, op, i, r, passed = 0, failed = 0, none = 0;
	char first[96] = "";

	for (form = IBFT_PLAIN; form <= IBFT_COMPARE; form++) {
		for (op = FI_MIN; op < FI_ATOMIC_OP_LAST; op++) {
			for (i = 0; i < (int)(sizeof(dts) / sizeof(dts[0])); i++) {
				r = one(form, op, dts[i]);
				passed += r == 0;
				none += r == 1;
				if (r < 0 && !failed++)
					snprintf(first, sizeof(first), "form %d op "
						 "%d datatype %d", form, op, dts[i]);
			}
		}
	}
	IBFT_CHECK(!failed && passed, name, "%d passed, %d failed (first: %s), "
		   "%d not supported", passed, failed, first, none);
}
