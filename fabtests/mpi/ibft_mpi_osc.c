/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * MPI one-sided communication over any transport, each result checked.
 * Built for Open MPI's osc rdma over the OFI BTL, where every put, get
 * and atomic is an fi_write, fi_read or fi_atomic of the provider:
 *   mpirun -np 4 --mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include ibfab \
 *          --mca btl ofi,self --mca btl_ofi_provider_include ibfab \
 *          --mca osc rdma --mca osc_rdma_btls ofi ibft_mpi_osc
 * Covers MPI_Put, Get, Accumulate, Get_accumulate, Fetch_and_op and
 * Compare_and_swap on 4- and 8-byte integers and doubles; fence, shared
 * and exclusive lock/unlock, lock_all with flush, PSCW; windows made by
 * MPI_Win_create, MPI_Win_allocate and MPI_Win_create_dynamic; a counter
 * every rank hammers with a mix of atomics.  Rank 0 prints one "ok"/"not
 * ok" line per check and "# mpi-osc: checks passed N, failed N".
 * "ibft_mpi_osc putlat SIZE" is util/ibfab-bench's instead: rank 0 times
 * MPI_Put of SIZE bytes + MPI_Win_flush to rank 1 and prints
 * "RESULT mpi_putlat SIZE MIN MEDIAN" (usec).
 *
 * The windows that atomics target are MPI_Win_create'd: on one node, Open
 * MPI 4.1 places MPI_Win_allocate memory in shared memory, which osc rdma
 * then reaches with CPU atomics, not the network.  And no rank
 * compare-and-swaps into its own window: osc rdma (4.1,
 * ompi_osc_rdma_compare_and_swap) hands such a target to the BTL without
 * a registration handle, and the OFI BTL dereferences it (a segfault in
 * mca_btl_ofi_acswap, with any provider).  Fetch-and-op and accumulate
 * check for that case; compare-and-swap does not.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IBFT_MPI_GROUP "mpi-osc"
#include "ibft_mpi_check.h"

#define N 64		/* elements per rank in a window */

/* Each rank puts its slice into every rank's window, under fence. */
static void test_put_get_fence(MPI_Win win, int64_t *base)
{
	int64_t mine[N], back[N];
	int t, i, ok = 1, flavor = 0, found = 0;
	int *fp = NULL;
	const char *name_put, *name_get;

	MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fp, &found);
	flavor = found && fp ? *fp : 0;
	name_put = flavor == MPI_WIN_FLAVOR_ALLOCATE ? "put-fence-win-allocate" :
		   "put-fence-win-create";
	name_get = flavor == MPI_WIN_FLAVOR_ALLOCATE ? "get-fence-win-allocate" :
		   "get-fence-win-create";

	for (i = 0; i < N; i++)
		base[i] = -1;
	for (i = 0; i < N; i++)
		mine[i] = rank * 1000 + i;
	MPI_Win_fence(0, win);
	/* Rank r writes slot r of each target (N / size elements each). */
	for (t = 0; t < size; t++)
		MPI_Put(mine, N / size, MPI_INT64_T, t, rank * (N / size),
			N / size, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < N / size * size; i++)
		ok &= base[i] == (i / (N / size)) * 1000 + i % (N / size);
	check(ok, name_put);
	ok = 1;
	MPI_Win_fence(0, win);
	MPI_Get(back, N, MPI_INT64_T, (rank + 1) % size, 0, N, MPI_INT64_T, win);
	MPI_Win_fence(0, win);
	for (i = 0; i < N / size * size; i++)
		ok &= back[i] == base[i];
	check(ok, name_get);
}

/* Accumulate (sum) from every rank into rank 0, under shared locks. */
static void test_accumulate_types(MPI_Win w32, int32_t *b32, MPI_Win w64,
				  int64_t *b64, MPI_Win wd, double *bd)
{
	int32_t one32 = 1;
	int64_t one64 = 3;
	double half = 0.5;
	int r, ok;

	*b32 = 0;
	*b64 = 0;
	*bd = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	for (r = 0; r < 10; r++) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w32);
		MPI_Accumulate(&one32, 1, MPI_INT32_T, 0, 0, 1, MPI_INT32_T,
			       MPI_SUM, w32);
		MPI_Win_unlock(0, w32);
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w64);
		MPI_Accumulate(&one64, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T,
			       MPI_SUM, w64);
		MPI_Win_unlock(0, w64);
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wd);
		MPI_Accumulate(&half, 1, MPI_DOUBLE, 0, 0, 1, MPI_DOUBLE,
			       MPI_SUM, wd);
		MPI_Win_unlock(0, wd);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	ok = rank || (*b32 == 10 * size && *b64 == 30 * size && *bd == 5.0 * size);
	check(ok, "accumulate-int32-int64-double");
}

/* Fetch_and_op, Compare_and_swap, Get_accumulate on 4 and 8 bytes. */
static void test_atomics(MPI_Win w32, int32_t *b32, MPI_Win w64, int64_t *b64)
{
	int32_t one32 = 1, old32 = -1, cmp32, new32;
	int64_t one64 = 1, old64 = -1, cmp64, new64, got[2] = { 0, 0 }, two[2] = { 5, 7 };
	int r, ok = 1;

	*b32 = 0;
	*b64 = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, w32);
	MPI_Win_lock_all(0, w64);
	for (r = 0; r < 20; r++) {
		MPI_Fetch_and_op(&one32, &old32, MPI_INT32_T, 0, 0, MPI_SUM, w32);
		MPI_Win_flush(0, w32);
		ok &= old32 >= 0 && old32 < 20 * size;
		/* A CAS increment, retried until it lands (not into our own
		 * window: see the top of the file). */
		if (rank == 0) {
			MPI_Fetch_and_op(&one64, &old64, MPI_INT64_T, 0, 0,
					 MPI_SUM, w64);
			MPI_Win_flush(0, w64);
			continue;
		}
		do {
			MPI_Fetch_and_op(NULL, &cmp64, MPI_INT64_T, 0, 0,
					 MPI_NO_OP, w64);
			MPI_Win_flush(0, w64);
			new64 = cmp64 + 1;
			MPI_Compare_and_swap(&new64, &cmp64, &old64, MPI_INT64_T,
					     0, 0, w64);
			MPI_Win_flush(0, w64);
		} while (old64 != cmp64);
	}
	MPI_Win_unlock_all(w64);
	MPI_Win_unlock_all(w32);
	MPI_Barrier(MPI_COMM_WORLD);
	ok &= rank || (*b32 == 20 * size && *b64 == 20 * size);
	check(ok, "fetch-and-op-and-cas");

	/* 32-bit CAS: each other rank claims slot 0 once; exactly one wins. */
	*b32 = -1;
	MPI_Barrier(MPI_COMM_WORLD);
	r = 0;
	if (rank) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, w32);
		cmp32 = -1;
		new32 = rank;
		MPI_Compare_and_swap(&new32, &cmp32, &old32, MPI_INT32_T, 0, 0, w32);
		MPI_Win_unlock(0, w32);
		r = old32 == -1;
	}
	MPI_Allreduce(MPI_IN_PLACE, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	check(r == 1, "cas-int32-one-winner");

	/* Get_accumulate of two 64-bit values, exclusive lock. */
	b64[0] = 0;
	b64[1] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, w64);
	MPI_Get_accumulate(two, 2, MPI_INT64_T, got, 2, MPI_INT64_T, 0, 0, 2,
			   MPI_INT64_T, MPI_SUM, w64);
	MPI_Win_unlock(0, w64);
	MPI_Barrier(MPI_COMM_WORLD);
	ok = got[0] % 5 == 0 && got[1] % 7 == 0 && got[0] / 5 == got[1] / 7;
	ok &= rank || (b64[0] == 5 * size && b64[1] == 7 * size);
	check(ok, "get-accumulate-exclusive");
	(void)one64;
}

/* PSCW: even ranks expose, odd ranks put into their left neighbour. */
static void test_pscw(MPI_Win win, int64_t *base)
{
	MPI_Group world, peer;
	int64_t v = 4242 + rank;
	int other, ok = 1;

	if (size % 2)
		return;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	other = rank % 2 ? rank - 1 : rank + 1;
	MPI_Group_incl(world, 1, &other, &peer);
	base[0] = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank % 2 == 0) {
		MPI_Win_post(peer, 0, win);
		MPI_Win_wait(win);
		ok = base[0] == 4242 + other;
	} else {
		MPI_Win_start(peer, 0, win);
		MPI_Put(&v, 1, MPI_INT64_T, other, 0, 1, MPI_INT64_T, win);
		MPI_Win_complete(win);
	}
	check(ok, "pscw");
	MPI_Group_free(&peer);
	MPI_Group_free(&world);
}

/* A dynamic window: memory attached after creation, named by address. */
static void test_dynamic(void)
{
	MPI_Win win;
	int64_t *mem = calloc(N, sizeof(*mem)), v = 77 + rank, back = 0;
	MPI_Aint addr, *all = malloc(size * sizeof(*all));
	int right = (rank + 1) % size, ok;

	MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	MPI_Win_attach(win, mem, N * sizeof(*mem));
	MPI_Get_address(mem, &addr);
	MPI_Allgather(&addr, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD);
	MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
	MPI_Put(&v, 1, MPI_INT64_T, right, all[right] + 8, 1, MPI_INT64_T, win);
	MPI_Win_flush(right, win);
	MPI_Get(&back, 1, MPI_INT64_T, right, all[right] + 8, 1, MPI_INT64_T, win);
	MPI_Win_unlock(right, win);
	MPI_Barrier(MPI_COMM_WORLD);
	ok = back == v && mem[1] == 77 + (rank + size - 1) % size;
	check(ok, "win-create-dynamic");
	MPI_Win_detach(win, mem);
	MPI_Win_free(&win);
	free(mem);
	free(all);
}

/* All ranks hammer one counter at the last rank with mixed atomics. */
static void test_hammer(MPI_Win w64, int64_t *b64)
{
	int64_t one = 1, old, cmp, nv;
	int target = size - 1, r, ok;

	*b64 = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, w64);
	for (r = 0; r < 100; r++) {
		switch (r % 3) {
		case 0:
			MPI_Accumulate(&one, 1, MPI_INT64_T, target, 0, 1,
				       MPI_INT64_T, MPI_SUM, w64);
			break;
		case 1:
			MPI_Fetch_and_op(&one, &old, MPI_INT64_T, target, 0,
					 MPI_SUM, w64);
			break;
		default:
			if (rank == target) {	/* no CAS into our own window */
				MPI_Accumulate(&one, 1, MPI_INT64_T, target, 0, 1,
					       MPI_INT64_T, MPI_SUM, w64);
				break;
			}
			do {
				MPI_Fetch_and_op(NULL, &cmp, MPI_INT64_T, target,
						 0, MPI_NO_OP, w64);
				MPI_Win_flush(target, w64);
				nv = cmp + 1;
				MPI_Compare_and_swap(&nv, &cmp, &old, MPI_INT64_T,
						     target, 0, w64);
				MPI_Win_flush(target, w64);
			} while (old != cmp);
			break;
		}
	}
	MPI_Win_unlock_all(w64);
	MPI_Barrier(MPI_COMM_WORLD);
	ok = rank != target || *b64 == 100 * size;
	check(ok, "hammer-one-counter");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Put + flush latency, rank 0 to rank 1. */
static void put_latency(int size_bytes)
{
	enum { WARM = 10, ITERS = 200 };
	char *mem = calloc(size_bytes ? size_bytes : 1, 1);
	char *src = calloc(size_bytes ? size_bytes : 1, 1);
	double t[ITERS], t0;
	MPI_Win win;
	int i;

	MPI_Win_create(mem, size_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	if (rank == 0) {
		MPI_Win_lock_all(0, win);
		for (i = -WARM; i < ITERS; i++) {
			t0 = MPI_Wtime();
			MPI_Put(src, size_bytes, MPI_BYTE, 1, 0, size_bytes, MPI_BYTE, win);
			MPI_Win_flush(1, win);
			if (i >= 0)
				t[i] = (MPI_Wtime() - t0) * 1e6;
		}
		MPI_Win_unlock_all(win);
		qsort(t, ITERS, sizeof(double), cmp_double);
		printf("RESULT mpi_putlat %d %.2f %.2f\n", size_bytes, t[0], t[ITERS / 2]);
		fflush(stdout);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_free(&win);
	free(mem);
	free(src);
}

int main(int argc, char **argv)
{
	MPI_Win wcreate, w32, w64, wd;
	int64_t *created, *b64;
	int32_t *b32;
	double *bd;
	int64_t *alloc64;
	MPI_Win walloc;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc > 2 && !strcmp(argv[1], "putlat")) {
		put_latency(atoi(argv[2]));
		MPI_Finalize();
		return 0;
	}

	created = calloc(N, sizeof(*created));
	MPI_Win_create(created, N * sizeof(*created), sizeof(*created),
		       MPI_INFO_NULL, MPI_COMM_WORLD, &wcreate);
	b32 = calloc(N, sizeof(*b32));
	MPI_Win_create(b32, N * sizeof(*b32), sizeof(*b32), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &w32);
	b64 = calloc(N, sizeof(*b64));
	MPI_Win_create(b64, N * sizeof(*b64), sizeof(*b64), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &w64);
	bd = calloc(N, sizeof(*bd));
	MPI_Win_create(bd, N * sizeof(*bd), sizeof(*bd), MPI_INFO_NULL,
		       MPI_COMM_WORLD, &wd);
	MPI_Win_allocate(N * sizeof(*alloc64), sizeof(*alloc64), MPI_INFO_NULL,
			 MPI_COMM_WORLD, &alloc64, &walloc);

	test_put_get_fence(wcreate, created);
	test_put_get_fence(walloc, alloc64);
	test_accumulate_types(w32, b32, w64, b64, wd, bd);
	test_atomics(w32, b32, w64, b64);
	test_pscw(wcreate, created);
	test_dynamic();
	test_hammer(w64, b64);

	MPI_Win_free(&walloc);
	MPI_Win_free(&wd);
	MPI_Win_free(&w64);
	MPI_Win_free(&w32);
	MPI_Win_free(&wcreate);
	free(created);
	free(b32);
	free(b64);
	free(bd);
	if (rank == 0) {
		printf("# mpi-osc: checks passed %d, failed %d\n", passed, failed);
		fflush(stdout);
	}
	MPI_Finalize();
	return failed ? 1 : 0;
}
