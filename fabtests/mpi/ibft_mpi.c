/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * MPI over any libfabric provider: what an MPI library's OFI layer asks of
 * it (tag matching, probes, synchronous sends, cancel, truncation, bursts,
 * collectives).  Run with 2 or more ranks, e.g.
 *   mpirun -np 2 --mca pml cm --mca mtl ofi \
 *          --mca mtl_ofi_provider_include ibfab ibft_mpi
 * Rank 0 prints one "ok"/"not ok" line per check; exit status 1 on failure.
 *
 * "ibft_mpi mt" runs under MPI_THREAD_MULTIPLE (the OFI MTL then asks the
 * provider for FI_THREAD_SAFE) and adds threads exchanging at once.
 *
 * "ibft_mpi lat SIZE..." instead times a ping-pong between ranks 0 and 1:
 *   RESULT mpi_lat SIZE MIN_USEC MEDIAN_USEC   (half round trips)
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IBFT_MPI_GROUP "mpi"
#include "ibft_mpi_check.h"

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 13 + i * 7 + (i >> 9));
}

static int verify(const uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed * 13 + i * 7 + (i >> 9)))
			return 0;
	return 1;
}

/* Ranks pair up (0-1, 2-3, ...) and bounce each size both ways. */
static void test_pingpong(void)
{
	size_t sizes[] = { 0, 1, 8, 64, 1024, 8192, 8193, 65536, 1 << 20, 4 << 20 };
	size_t max = 4 << 20, i;
	uint8_t *s = malloc(max), *r = malloc(max);
	int peer = rank ^ 1, ok = 1, count;
	MPI_Status st;

	for (i = 0; peer < size && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill(s, sizes[i], (unsigned)i);
		memset(r, 0, sizes[i]);
		if (rank % 2 == 0) {
			MPI_Send(s, (int)sizes[i], MPI_BYTE, peer, (int)i, MPI_COMM_WORLD);
			MPI_Recv(r, (int)sizes[i], MPI_BYTE, peer, (int)i, MPI_COMM_WORLD, &st);
		} else {
			MPI_Recv(r, (int)sizes[i], MPI_BYTE, peer, (int)i, MPI_COMM_WORLD, &st);
			MPI_Send(r, (int)sizes[i], MPI_BYTE, peer, (int)i, MPI_COMM_WORLD);
		}
		MPI_Get_count(&st, MPI_BYTE, &count);
		ok &= count == (int)sizes[i] && verify(r, sizes[i], (unsigned)i);
	}
	check(ok, "pingpong-0B-4MiB");
	free(s);
	free(r);
}

/* Everyone sends to rank 0, which takes them with wildcards. */
static void test_any(void)
{
	int ok = 1, i, v, seen = 0;
	MPI_Status st;

	if (rank) {
		v = rank * 100;
		MPI_Send(&v, 1, MPI_INT, 0, 40 + rank, MPI_COMM_WORLD);
	} else {
		for (i = 1; i < size; i++) {
			MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
				 MPI_COMM_WORLD, &st);
			ok &= v == st.MPI_SOURCE * 100 && st.MPI_TAG == 40 + st.MPI_SOURCE;
			seen |= 1 << st.MPI_SOURCE;
		}
		ok &= seen == ((1 << size) - 2);
	}
	check(ok, "any-source-any-tag");
}

static void test_probe(void)
{
	int ok = 1, flag = 0, count, v[64], i;
	size_t big = 1 << 20;
	uint8_t *b = malloc(big);
	MPI_Message msg;
	MPI_Status st;

	if (rank == 1) {
		for (i = 0; i < 64; i++)
			v[i] = i;
		MPI_Send(v, 64, MPI_INT, 0, 7, MPI_COMM_WORLD);
		MPI_Send(v, 16, MPI_INT, 0, 8, MPI_COMM_WORLD);
		fill(b, big, 9);
		MPI_Send(b, (int)big, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
	} else if (rank == 0) {
		MPI_Probe(1, 7, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_INT, &count);
		ok &= count == 64 && st.MPI_SOURCE == 1 && st.MPI_TAG == 7;
		MPI_Recv(v, 64, MPI_INT, 1, 7, MPI_COMM_WORLD, &st);
		ok &= v[63] == 63;
		while (!flag)
			MPI_Iprobe(MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &flag, &st);
		MPI_Get_count(&st, MPI_INT, &count);
		ok &= count == 16;
		MPI_Recv(v, 16, MPI_INT, 1, 8, MPI_COMM_WORLD, &st);
		MPI_Mprobe(1, 9, MPI_COMM_WORLD, &msg, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		ok &= count == (int)big;
		memset(b, 0, big);
		MPI_Mrecv(b, (int)big, MPI_BYTE, &msg, &st);
		ok &= verify(b, big, 9);
	}
	check(ok, "probe-iprobe-mprobe");
	free(b);
}

static void test_ssend(void)
{
	int ok = 1, v = 5;
	MPI_Status st;

	if (rank == 0) {
		MPI_Ssend(&v, 1, MPI_INT, 1, 11, MPI_COMM_WORLD);
	} else if (rank == 1) {
		v = 0;
		MPI_Recv(&v, 1, MPI_INT, 0, 11, MPI_COMM_WORLD, &st);
		ok = v == 5;
	}
	check(ok, "ssend");
}

static void test_cancel(void)
{
	int ok = 1, flag, v;
	MPI_Request req;
	MPI_Status st;

	MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &req);
	MPI_Cancel(&req);
	MPI_Wait(&req, &st);
	MPI_Test_cancelled(&st, &flag);
	ok = flag;
	check(ok, "cancel-recv");
}

static void test_truncate(void)
{
	int ok = 1, v[8] = { 0 }, err, cls;
	MPI_Status st;

	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (rank == 1) {
		MPI_Send(v, 8, MPI_INT, 0, 12, MPI_COMM_WORLD);
	} else if (rank == 0) {
		err = MPI_Recv(v, 4, MPI_INT, 1, 12, MPI_COMM_WORLD, &st);
		MPI_Error_class(err, &cls);
		ok = err != MPI_SUCCESS && cls == MPI_ERR_TRUNCATE;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	check(ok, "truncate");
}

/* Each rank exchanges a burst with every other, nonblocking. */
static void test_burst(void)
{
	enum { N = 32, LEN = 4096 };
	int peers = size - 1, ok = 1, p, i, k;
	MPI_Request *reqs = malloc(sizeof(*reqs) * 2 * N * peers);
	uint8_t *s = malloc((size_t)N * LEN), *r = malloc((size_t)N * LEN * size);

	for (i = 0; i < N; i++)
		fill(s + (size_t)i * LEN, LEN, rank * 64 + i);
	k = 0;
	for (p = 0; p < size; p++) {
		if (p == rank)
			continue;
		for (i = 0; i < N; i++)
			MPI_Irecv(r + ((size_t)p * N + i) * LEN, LEN, MPI_BYTE, p, i,
				  MPI_COMM_WORLD, &reqs[k++]);
	}
	for (p = 0; p < size; p++) {
		if (p == rank)
			continue;
		for (i = 0; i < N; i++)
			MPI_Isend(s + (size_t)i * LEN, LEN, MPI_BYTE, p, i,
				  MPI_COMM_WORLD, &reqs[k++]);
	}
	MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
	for (p = 0; p < size; p++)
		for (i = 0; p != rank && i < N; i++)
			ok &= verify(r + ((size_t)p * N + i) * LEN, LEN, p * 64 + i);
	check(ok, "isend-irecv-waitall");
	free(reqs);
	free(s);
	free(r);
}

static void test_collectives(void)
{
	int ok = 1, i, sum, *a = malloc(sizeof(int) * size), *b = malloc(sizeof(int) * size);
	double buf[1024];

	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	check(sum == size * (size - 1) / 2, "allreduce");
	for (i = 0; i < size; i++)
		a[i] = rank * 1000 + i;
	MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD);
	for (i = 0; i < size; i++)
		ok &= b[i] == i * 1000 + rank;
	check(ok, "alltoall");
	for (i = 0; i < 1024; i++)
		buf[i] = rank == 0 ? i * 0.5 : -1;
	MPI_Bcast(buf, 1024, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	ok = 1;
	for (i = 0; i < 1024; i++)
		ok &= buf[i] == i * 0.5;
	check(ok, "bcast");
	free(a);
	free(b);
}

/* MPI_THREAD_MULTIPLE: threads of ranks 0 and 1 exchange at once. */
enum { MT_THREADS = 4, MT_ROUNDS = 50, MT_LEN = 16384 };

struct mt_arg {
	int id, ok;
};

static void *mt_thread(void *p)
{
	struct mt_arg *a = p;
	uint8_t *s = malloc(MT_LEN), *r = malloc(MT_LEN);
	int peer = rank ^ 1, i;
	MPI_Request req[2];

	for (i = 0; i < MT_ROUNDS; i++) {
		fill(s, MT_LEN, a->id * 1000 + i + rank);
		MPI_Irecv(r, MT_LEN, MPI_BYTE, peer, 100 + a->id, MPI_COMM_WORLD, &req[0]);
		MPI_Isend(s, MT_LEN, MPI_BYTE, peer, 100 + a->id, MPI_COMM_WORLD, &req[1]);
		MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
		a->ok &= verify(r, MT_LEN, a->id * 1000 + i + peer);
	}
	free(s);
	free(r);
	return NULL;
}

static void test_threads(void)
{
	pthread_t th[MT_THREADS];
	struct mt_arg arg[MT_THREADS];
	int i, ok = 1;

	for (i = 0; rank < 2 && i < MT_THREADS; i++) {
		arg[i] = (struct mt_arg){ i, 1 };
		pthread_create(&th[i], NULL, mt_thread, &arg[i]);
	}
	for (i = 0; rank < 2 && i < MT_THREADS; i++) {
		pthread_join(th[i], NULL);
		ok &= arg[i].ok;
	}
	check(ok, "thread-multiple");
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void bench_lat(int argc, char **argv)
{
	int n = 200, i, a;
	double *rtt = malloc(sizeof(double) * n), t0;

	for (a = 2; a < argc; a++) {
		size_t len = strtoul(argv[a], NULL, 0);
		uint8_t *buf = calloc(1, len ? len : 1);

		for (i = -20; i < n && rank < 2; i++) {
			t0 = MPI_Wtime();
			if (rank == 0) {
				MPI_Send(buf, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, 0, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, 0, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				MPI_Send(buf, (int)len, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
			}
			if (i >= 0)
				rtt[i] = (MPI_Wtime() - t0) * 1e6;
		}
		if (rank == 0) {
			qsort(rtt, n, sizeof(double), cmp_double);
			printf("RESULT mpi_lat %zu %.2f %.2f\n", len, rtt[0] / 2,
			       rtt[n / 2] / 2);
		}
		free(buf);
	}
	free(rtt);
}

int main(int argc, char **argv)
{
	int mt = argc > 1 && !strcmp(argv[1], "mt"), provided;

	if (mt) {
		MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
		if (provided != MPI_THREAD_MULTIPLE) {
			fprintf(stderr, "MPI_THREAD_MULTIPLE not provided (%d)\n",
				provided);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	} else {
		MPI_Init(&argc, &argv);
	}
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		if (rank == 0)
			fprintf(stderr, "ibft_mpi needs 2 or more ranks\n");
		MPI_Finalize();
		return 2;
	}
	if (argc > 1 && !strcmp(argv[1], "lat")) {
		bench_lat(argc, argv);
		MPI_Finalize();
		return 0;
	}
	test_pingpong();
	test_any();
	test_probe();
	test_ssend();
	test_cancel();
	test_truncate();
	test_burst();
	test_collectives();
	if (mt)
		test_threads();
	if (rank == 0)
		printf("# mpi: checks passed %d, failed %d\n", passed, failed);
	MPI_Finalize();
	return failed ? 1 : 0;
}
