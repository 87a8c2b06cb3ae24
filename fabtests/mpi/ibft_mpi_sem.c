/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * MPI semantics over any transport: what MPI programs do beyond plain
 * point-to-point, each with its data checked.  The expectations are MPI's,
 * so the same program runs over ob1/tcp, verbs;ofi_rxm and ibfab:
 *   mpirun -np 4 --mca pml cm --mca mtl ofi \
 *          --mca mtl_ofi_provider_include ibfab ibft_mpi_sem [mt]
 * "mt" asks for MPI_THREAD_MULTIPLE.  Tests (intercomm chains mprobe
 * directed nbc persistent datatypes zero replace many ssend cancel) that
 * the file IBFT_MPI_KNOWN lists for the transport IBFT_MPI_TRANSPORT are
 * reported as skips with the file's reason (see ibft_mpi_sem.known).
 * Needs 2 or more ranks (an even number for the intercommunicator
 * checks).  Rank 0 prints one "ok"/"not ok" line per check and
 * "# mpi-sem: checks passed N, failed N"; exit 1 on failure.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IBFT_MPI_GROUP "mpi-sem"
#include "ibft_mpi_check.h"

static unsigned char pattern(unsigned seed, size_t i)
{
	return (unsigned char)(seed * 31 + i * 7 + (i >> 10));
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(seed, i);
}

static int verify(const unsigned char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(seed, i))
			return 0;
	return 1;
}

/*
 * A test the transport is known to get wrong: a line "TEST TRANSPORT
 * REASON" of the file IBFT_MPI_KNOWN whose TRANSPORT is IBFT_MPI_TRANSPORT
 * ("mtl:ibfab") or its kind ("mtl").  Said, with the reason, not run.
 */
static int skipped(const char *name)
{
	const char *path = getenv("IBFT_MPI_KNOWN"), *tr = getenv("IBFT_MPI_TRANSPORT");
	char line[512], test[64], where[64];
	size_t kind = tr ? strcspn(tr, ":") : 0;
	int n, found = 0;
	FILE *f;

	if (!path || !tr || !(f = fopen(path, "r")))
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %63s %n", test, where, &n) != 2 ||
		    test[0] == '#' || strcmp(test, name))
			continue;
		found = !strcmp(where, tr) ||
			(strlen(where) == kind && !strncmp(where, tr, kind));
	}
	fclose(f);
	if (found && rank == 0) {
		line[strcspn(line, "\n")] = 0;
		printf("skip - mpi-sem-%s [%d ranks]: %s: %s\n", name, size, tr,
		       line + n);
		fflush(stdout);
	}
	return found;
}

/* Traffic on a communicator: a ring exchange and an allreduce. */
static int comm_traffic(MPI_Comm comm, int seed)
{
	int r, n, left, right, in = -1, sum = 0, want = 0, i;

	MPI_Comm_rank(comm, &r);
	MPI_Comm_size(comm, &n);
	right = (r + 1) % n;
	left = (r + n - 1) % n;
	MPI_Sendrecv(&r, 1, MPI_INT, right, seed, &in, 1, MPI_INT, left, seed,
		     comm, MPI_STATUS_IGNORE);
	MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, comm);
	for (i = 0; i < n; i++)
		want += i;
	return in == left && sum == want;
}

/*
 * Intercommunicators: even and odd ranks form two groups joined by an
 * intercommunicator (the case that hung over ibfab: Open MPI's collectives
 * on it post receives whose source is a rank of the remote group).
 */
static void test_intercomm(void)
{
	MPI_Comm local, inter, merged;
	int color = rank % 2, rsize, lrank, i, ok = 1, v, sum, want = 0;
	int token = -1;

	if (size % 2) {
		check(1, "intercomm-skipped-odd-size");
		return;
	}
	MPI_Comm_split(MPI_COMM_WORLD, color, rank, &local);
	MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 7, &inter);
	MPI_Comm_remote_size(inter, &rsize);
	MPI_Comm_rank(inter, &lrank);
	ok = rsize == size / 2;
	check(ok, "intercomm-create");

	/* The remote group's ranks are those of the other parity. */
	for (i = 0; i < size; i += 2)
		want += color ? i : i + 1;
	for (i = 0; i < 50 && ok; i++) {
		MPI_Barrier(inter);
		v = rank;
		MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, inter);
		ok = sum == want;
	}
	check(ok, "intercomm-barrier-allreduce");

	/* Point-to-point across: local rank k talks to remote rank k. */
	MPI_Sendrecv(&rank, 1, MPI_INT, lrank, 3, &token, 1, MPI_INT, lrank, 3,
		     inter, MPI_STATUS_IGNORE);
	check(token == (color ? rank - 1 : rank + 1), "intercomm-sendrecv");

	/* Bcast from the remote group's root 0 (world rank 0). */
	v = color == 0 && lrank == 0 ? 4242 : -1;
	if (color == 0)
		MPI_Bcast(&v, 1, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL,
			  inter);
	else
		MPI_Bcast(&v, 1, MPI_INT, 0, inter);
	check(color == 0 ? 1 : v == 4242, "intercomm-bcast");

	/* Merged, the odd group first: ranks follow. */
	MPI_Intercomm_merge(inter, color == 0, &merged);
	MPI_Comm_rank(merged, &v);
	ok = v == (color ? rank / 2 : size / 2 + rank / 2);
	check(ok && comm_traffic(merged, 11), "intercomm-merge");
	MPI_Comm_free(&merged);
	MPI_Comm_free(&inter);
	MPI_Comm_free(&local);
}

/* Communicators made from communicators, with traffic on each. */
static void test_comm_chains(void)
{
	MPI_Comm dup, split, dup2, created;
	MPI_Group world, half;
	int ranks[64], n = 0, i, ok;

	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	ok = comm_traffic(dup, 1);
	MPI_Comm_split(dup, rank < size / 2, size - rank, &split);	/* reversed */
	ok &= comm_traffic(split, 2);
	MPI_Comm_dup(split, &dup2);
	ok &= comm_traffic(dup2, 3);
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	for (i = 0; i < size && n < 64; i += 2)
		ranks[n++] = i;
	MPI_Group_incl(world, n, ranks, &half);
	MPI_Comm_create(dup, half, &created);
	if (created != MPI_COMM_NULL) {
		ok &= comm_traffic(created, 4);
		MPI_Comm_free(&created);
	} else {
		ok &= rank % 2 == 1;
	}
	/* The same tag on sibling communicators never crosses over. */
	ok &= comm_traffic(dup, 5) && comm_traffic(dup2, 5);
	MPI_Group_free(&half);
	MPI_Group_free(&world);
	MPI_Comm_free(&dup2);
	MPI_Comm_free(&split);
	MPI_Comm_free(&dup);
	check(ok, "comm-split-dup-create-chains");
}

/* Matched probes: every rank sends rank 0 messages of growing size. */
static void test_mprobe(void)
{
	size_t sizes[] = { 0, 16, 4096, 8192, 8193, 65536, 1 << 20 };
	int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0])), ok = 1, i, p;
	unsigned char *buf = malloc(1 << 20), *in = malloc(1 << 20);
	MPI_Request *reqs = calloc((size_t)nsizes, sizeof(*reqs));

	if (rank != 0) {
		for (i = 0; i < nsizes; i++) {
			fill(buf, sizes[i], (unsigned)(rank * 100 + i));
			MPI_Send(buf, (int)sizes[i], MPI_BYTE, 0, 20 + i,
				 MPI_COMM_WORLD);
		}
	} else {
		for (p = 0; p < (size - 1) * nsizes; p++) {
			MPI_Message msg;
			MPI_Status st;
			MPI_Request rq;
			int count, flag = 0, blocking = p % 2;

			if (blocking) {
				MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG,
					   MPI_COMM_WORLD, &msg, &st);
			} else {
				while (!flag)
					MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG,
						    MPI_COMM_WORLD, &flag, &msg, &st);
			}
			MPI_Get_count(&st, MPI_BYTE, &count);
			i = st.MPI_TAG - 20;
			if (i < 0 || i >= nsizes || count != (int)sizes[i]) {
				ok = 0;
				break;
			}
			memset(in, 0, sizes[i]);
			if (blocking) {
				MPI_Mrecv(in, count, MPI_BYTE, &msg, &st);
			} else {
				MPI_Imrecv(in, count, MPI_BYTE, &msg, &rq);
				MPI_Wait(&rq, &st);
			}
			ok &= verify(in, sizes[i], (unsigned)(st.MPI_SOURCE * 100 + i));
		}
	}
	check(ok, "mprobe-improbe-mrecv-eager-and-rendezvous");
	free(reqs);
	free(buf);
	free(in);
}

/*
 * MPI_ANY_SOURCE and directed receives on one tag: rank 0 posts a receive
 * from each peer and wildcards; each message goes to the earliest posted
 * receive that matches it (MPI's ordering rule).
 */
static void test_any_and_directed(void)
{
	int n = size - 1, i, ok = 1, got[64] = { 0 };
	int *vals = calloc((size_t)(2 * n), sizeof(int));
	MPI_Request *rq = calloc((size_t)(2 * n), sizeof(*rq));
	MPI_Status *st = calloc((size_t)(2 * n), sizeof(*st));

	if (rank == 0) {
		/* Directed first, then as many wildcards: each peer sends 2. */
		for (i = 0; i < n; i++)
			MPI_Irecv(&vals[i], 1, MPI_INT, i + 1, 30, MPI_COMM_WORLD, &rq[i]);
		for (i = 0; i < n; i++)
			MPI_Irecv(&vals[n + i], 1, MPI_INT, MPI_ANY_SOURCE, 30,
				  MPI_COMM_WORLD, &rq[n + i]);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Waitall(2 * n, rq, st);
		for (i = 0; i < n; i++)	/* each peer's first message */
			ok &= vals[i] == (i + 1) * 10 && st[i].MPI_SOURCE == i + 1;
		for (i = 0; i < n; i++) {
			int src = st[n + i].MPI_SOURCE;

			ok &= src >= 1 && src < size && src < 64 &&
			      vals[n + i] == src * 10 + 1;
			if (src >= 1 && src < 64)
				got[src]++;
		}
		for (i = 1; i < size && i < 64; i++)
			ok &= got[i] == 1;
	} else {
		int v[2] = { rank * 10, rank * 10 + 1 };

		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Send(&v[0], 1, MPI_INT, 0, 30, MPI_COMM_WORLD);
		MPI_Send(&v[1], 1, MPI_INT, 0, 30, MPI_COMM_WORLD);
	}
	check(ok, "any-source-and-directed-same-tag");
	free(vals);
	free(rq);
	free(st);
}

/* Nonblocking collectives while point-to-point runs between pairs. */
static void test_nbc_overlap(void)
{
	int peer = rank ^ 1, v = rank + 1, sum = 0, b = rank == 0 ? 99 : 0;
	int *sc = malloc(sizeof(int) * (size_t)size), *sd = malloc(sizeof(int) * (size_t)size);
	int *rc = malloc(sizeof(int) * (size_t)size), *rd = malloc(sizeof(int) * (size_t)size);
	int *sb = malloc(sizeof(int) * (size_t)size * 2), *rb = malloc(sizeof(int) * (size_t)size * 2);
	unsigned char *ps = malloc(65536), *pr = malloc(65536);
	MPI_Request rq[5];
	int i, nrq = 3, ok = 1;

	for (i = 0; i < size; i++) {
		sc[i] = 1 + (i % 2);	/* rank i gets 1 or 2 ints from each */
		sd[i] = 2 * i;
		sb[2 * i] = rank * 1000 + i;
		sb[2 * i + 1] = rank * 1000 + i + 500;
		rc[i] = 1 + (rank % 2);
		rd[i] = 2 * i;
	}
	memset(rb, -1, sizeof(int) * (size_t)size * 2);
	MPI_Iallreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
	MPI_Ibcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, &rq[1]);
	MPI_Ialltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, MPI_COMM_WORLD,
		       &rq[2]);
	if (peer < size) {
		fill(ps, 65536, (unsigned)rank);
		MPI_Irecv(pr, 65536, MPI_BYTE, peer, 40, MPI_COMM_WORLD, &rq[3]);
		MPI_Isend(ps, 65536, MPI_BYTE, peer, 40, MPI_COMM_WORLD, &rq[4]);
		nrq = 5;
	}
	MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE);
	ok = sum == size * (size + 1) / 2 && b == 99;
	for (i = 0; i < size; i++) {
		ok &= rb[2 * i] == i * 1000 + rank;
		if (rank % 2)
			ok &= rb[2 * i + 1] == i * 1000 + rank + 500;
	}
	if (peer < size)
		ok &= verify(pr, 65536, (unsigned)peer);
	check(ok, "nonblocking-collectives-overlap-p2p");
	free(sc); free(sd); free(rc); free(rd); free(sb); free(rb);
	free(ps); free(pr);
}

/* Persistent requests, started many times. */
static void test_persistent(void)
{
	int peer = rank ^ 1, out = 0, in = -1, i, ok = 1;
	MPI_Request rq[2];

	if (peer >= size) {
		check(1, "persistent-requests");
		return;
	}
	MPI_Send_init(&out, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, &rq[0]);
	MPI_Recv_init(&in, 1, MPI_INT, peer, 50, MPI_COMM_WORLD, &rq[1]);
	for (i = 0; i < 100 && ok; i++) {
		out = rank * 1000 + i;
		MPI_Startall(2, rq);
		MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
		ok = in == peer * 1000 + i;
	}
	MPI_Request_free(&rq[0]);
	MPI_Request_free(&rq[1]);
	check(ok, "persistent-requests");
}

/* Derived datatypes: vector, indexed, struct, and MPI_BOTTOM. */
static void test_datatypes(void)
{
	int peer = rank ^ 1, ok = 1, i;
	double mat[8][8], col[8];
	int idx_src[20], idx_dst[6], bl[3] = { 1, 2, 3 }, disp[3] = { 1, 5, 12 };
	struct { int a; double b; char c[5]; } s_out, s_in;
	MPI_Datatype vec, indexed, st, bottom;
	MPI_Aint sd[3], base, addrs[2];
	int sbl[3] = { 1, 1, 5 }, bbl[2] = { 1, 1 };
	MPI_Datatype stypes[3] = { MPI_INT, MPI_DOUBLE, MPI_CHAR };
	MPI_Datatype btypes[2] = { MPI_INT, MPI_DOUBLE };
	int b_int_out = rank + 7, b_int_in = -1;
	double b_dbl_out = rank * 0.5, b_dbl_in = -1;

	if (peer >= size) {
		check(1, "derived-datatypes");
		return;
	}
	for (i = 0; i < 64; i++)
		mat[i / 8][i % 8] = rank * 100 + i;
	MPI_Type_vector(8, 1, 8, MPI_DOUBLE, &vec);	/* column 3 */
	MPI_Type_commit(&vec);
	MPI_Sendrecv(&mat[0][3], 1, vec, peer, 60, col, 8, MPI_DOUBLE, peer, 60,
		     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	for (i = 0; i < 8; i++)
		ok &= col[i] == peer * 100 + i * 8 + 3;

	for (i = 0; i < 20; i++)
		idx_src[i] = rank * 50 + i;
	MPI_Type_indexed(3, bl, disp, MPI_INT, &indexed);
	MPI_Type_commit(&indexed);
	MPI_Sendrecv(idx_src, 1, indexed, peer, 61, idx_dst, 6, MPI_INT, peer,
		     61, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	ok &= idx_dst[0] == peer * 50 + 1 && idx_dst[1] == peer * 50 + 5 &&
	      idx_dst[2] == peer * 50 + 6 && idx_dst[3] == peer * 50 + 12 &&
	      idx_dst[5] == peer * 50 + 14;

	MPI_Get_address(&s_out, &base);
	MPI_Get_address(&s_out.a, &sd[0]);
	MPI_Get_address(&s_out.b, &sd[1]);
	MPI_Get_address(&s_out.c, &sd[2]);
	for (i = 0; i < 3; i++)
		sd[i] -= base;
	MPI_Type_create_struct(3, sbl, sd, stypes, &st);
	MPI_Type_commit(&st);
	s_out.a = rank;
	s_out.b = rank * 1.25;
	memcpy(s_out.c, "mpi!", 5);
	memset(&s_in, 0, sizeof(s_in));
	MPI_Sendrecv(&s_out, 1, st, peer, 62, &s_in, 1, st, peer, 62,
		     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	ok &= s_in.a == peer && s_in.b == peer * 1.25 && !strcmp(s_in.c, "mpi!");

	/* Absolute addresses from MPI_BOTTOM. */
	MPI_Get_address(&b_int_out, &addrs[0]);
	MPI_Get_address(&b_dbl_out, &addrs[1]);
	MPI_Type_create_struct(2, bbl, addrs, btypes, &bottom);
	MPI_Type_commit(&bottom);
	{
		MPI_Datatype bottom_in;
		MPI_Aint in_addrs[2];

		MPI_Get_address(&b_int_in, &in_addrs[0]);
		MPI_Get_address(&b_dbl_in, &in_addrs[1]);
		MPI_Type_create_struct(2, bbl, in_addrs, btypes, &bottom_in);
		MPI_Type_commit(&bottom_in);
		MPI_Sendrecv(MPI_BOTTOM, 1, bottom, peer, 63, MPI_BOTTOM, 1,
			     bottom_in, peer, 63, MPI_COMM_WORLD,
			     MPI_STATUS_IGNORE);
		MPI_Type_free(&bottom_in);
	}
	ok &= b_int_in == peer + 7 && b_dbl_in == peer * 0.5;
	MPI_Type_free(&vec);
	MPI_Type_free(&indexed);
	MPI_Type_free(&st);
	MPI_Type_free(&bottom);
	check(ok, "derived-datatypes-vector-indexed-struct-bottom");
}

/* Zero-byte messages, tagged, wildcard and directed, and their status. */
static void test_zero_bytes(void)
{
	int peer = rank ^ 1, count = -1, ok = 1, i;
	MPI_Status st;
	MPI_Request rq;

	if (peer >= size) {
		check(1, "zero-byte-messages");
		return;
	}
	for (i = 0; i < 20 && ok; i++) {
		MPI_Irecv(NULL, 0, MPI_BYTE, i % 2 ? MPI_ANY_SOURCE : peer,
			  70 + i, MPI_COMM_WORLD, &rq);
		MPI_Send(NULL, 0, MPI_BYTE, peer, 70 + i, MPI_COMM_WORLD);
		MPI_Wait(&rq, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		ok = count == 0 && st.MPI_SOURCE == peer && st.MPI_TAG == 70 + i;
	}
	check(ok, "zero-byte-messages");
}

static void test_sendrecv_replace(void)
{
	int buf[1024], i, ok = 1, right = (rank + 1) % size,
	    left = (rank + size - 1) % size;

	for (i = 0; i < 1024; i++)
		buf[i] = rank * 10000 + i;
	MPI_Sendrecv_replace(buf, 1024, MPI_INT, right, 80, left, 80,
			     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	for (i = 0; i < 1024; i++)
		ok &= buf[i] == left * 10000 + i;
	check(ok, "sendrecv-replace");
}

/* Many requests outstanding on one peer at once, completed out of order. */
#define MANY 1200
static void test_many_outstanding(void)
{
	int peer = rank ^ 1, i, ok = 1;
	int *out = malloc(sizeof(int) * MANY), *in = malloc(sizeof(int) * MANY);
	MPI_Request *rq = malloc(sizeof(*rq) * 2 * MANY);

	if (peer >= size) {
		check(1, "many-outstanding-requests");
		free(out); free(in); free(rq);
		return;
	}
	for (i = 0; i < MANY; i++) {
		out[i] = rank * MANY + i;
		in[i] = -1;
		/* Posted in reverse tag order: matching goes by tag. */
		MPI_Irecv(&in[MANY - 1 - i], 1, MPI_INT, peer, 1000 + MANY - 1 - i,
			  MPI_COMM_WORLD, &rq[i]);
	}
	for (i = 0; i < MANY; i++)
		MPI_Isend(&out[i], 1, MPI_INT, peer, 1000 + i, MPI_COMM_WORLD,
			  &rq[MANY + i]);
	MPI_Waitall(2 * MANY, rq, MPI_STATUSES_IGNORE);
	for (i = 0; i < MANY; i++)
		ok &= in[i] == peer * MANY + i;
	check(ok, "many-outstanding-requests");
	free(out);
	free(in);
	free(rq);
}

/*
 * Synchronous sends, to self and to a peer, as MPI test suites (mpi4py's
 * test_p2p_obj among them) run them: an MPI_Issend may not complete before
 * its receive has matched it, it completes once it has, and nothing is
 * left behind to take the next messages on the same tags.  A 2-rank
 * communicator pairs each rank with rank ^ 1 (a lone last rank pairs with
 * itself).
 */
static const int ssend_sizes[] = { 1, 8, 100, 1000, 4000 };
#define NSSEND ((int)(sizeof(ssend_sizes) / sizeof(ssend_sizes[0])))

static MPI_Comm pair_comm(void)
{
	MPI_Comm pair;

	MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair);
	return pair;
}

/* Nothing waits on comm: no message a later receive could take. */
static int comm_quiet(MPI_Comm comm)
{
	int flag = 1, tries;

	/* Give a straggler time to arrive before saying there is none. */
	for (tries = 0; tries < 200 && flag == 1; tries++)
		MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag,
			   MPI_STATUS_IGNORE);
	flag = 0;
	for (tries = 0; tries < 200 && !flag; tries++)
		MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag,
			   MPI_STATUS_IGNORE);
	return !flag;
}

/* comm's rank r as a rank of MPI_COMM_WORLD. */
static int to_world(MPI_Comm comm, int r)
{
	MPI_Group g, world;
	int w = -1;

	MPI_Comm_group(comm, &g);
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_translate_ranks(g, 1, &r, world, &w);
	MPI_Group_free(&g);
	MPI_Group_free(&world);
	return w;
}

/* Plain traffic on the tags just used: each receive gets its own message. */
static int same_tag_traffic(MPI_Comm comm, int to)
{
	int i, ok = 1;

	for (i = 0; i < 3; i++) {
		int v = 1000 * rank + i, w = -1, x = -1;
		MPI_Request rq;

		MPI_Irecv(&w, 1, MPI_INT, to, 0, comm, &rq);
		MPI_Send(&v, 1, MPI_INT, to, 0, comm);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		MPI_Issend(&v, 1, MPI_INT, to, 1, comm, &rq);
		MPI_Recv(&x, 1, MPI_INT, to, 1, comm, MPI_STATUS_IGNORE);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		ok &= w == 1000 * to_world(comm, to) + i &&
		      x == 1000 * to_world(comm, to) + i;
	}
	return ok;
}

/* Issend, Test (false), the matching receive, Test until true. */
static int ssend_round(MPI_Comm comm, int to, int n, unsigned seed)
{
	unsigned char out[4000], in[4000];
	MPI_Request rq;
	MPI_Status st;
	int flag = 1, ok, count = -1;

	fill(out, sizeof(out), seed + (unsigned)rank);
	memset(in, 0, sizeof(in));
	MPI_Issend(out, n, MPI_BYTE, to, 0, comm, &rq);
	/* Our peer's receive waits for our all-clear: ours cannot have matched. */
	MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
	ok = !flag;
	MPI_Barrier(comm);
	MPI_Recv(in, n, MPI_BYTE, to, 0, comm, &st);
	MPI_Get_count(&st, MPI_BYTE, &count);
	ok &= count == n && verify(in, (size_t)n, seed + (unsigned)to_world(comm, to));
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	return ok;
}

/*
 * round() for each size, to self (seeds from seed) and to the pair's
 * other rank (from seed + 10), then plain traffic on the same tags and
 * nothing left over: one check for self, one for the pair.
 */
typedef int (*sync_round)(MPI_Comm comm, int to, int n, unsigned seed);
static void self_and_pair(sync_round round, unsigned seed, const char *self_check,
			  const char *pair_check)
{
	MPI_Comm pair = pair_comm();
	int i, ok_self = 1, ok_pair = 1, prank, psize, to;

	MPI_Comm_rank(pair, &prank);
	MPI_Comm_size(pair, &psize);
	to = (prank + 1) % psize;
	for (i = 0; i < NSSEND; i++) {
		ok_self &= round(MPI_COMM_SELF, 0, ssend_sizes[i], seed + (unsigned)i);
		ok_pair &= round(pair, to, ssend_sizes[i], seed + 10 + (unsigned)i);
	}
	ok_self &= same_tag_traffic(MPI_COMM_SELF, 0) && comm_quiet(MPI_COMM_SELF);
	ok_pair &= same_tag_traffic(pair, to) && comm_quiet(pair);
	check(ok_self, self_check);
	check(ok_pair, pair_check);
	MPI_Comm_free(&pair);
}

static void test_ssend(void)
{
	self_and_pair(ssend_round, 40, "issend-self-completes-after-its-receive",
		      "issend-pair-completes-after-its-receive");
}

/*
 * MPI_Cancel of a synchronous send that nobody has received (mpi4py's
 * testCancel on MPI_COMM_SELF): Cancel, then MPI_Request_get_status; a
 * send that was cancelled completes and its message is never received;
 * one that was not stays incomplete until its receive matches, then
 * completes with the data.  Either way the tags are clean afterwards.
 */
static int cancel_round(MPI_Comm comm, int to, int n, unsigned seed)
{
	unsigned char out[4000], in[4000];
	MPI_Request rq;
	MPI_Status st;
	int flag = 0, mine = 0, theirs, ok = 1, count = -1, peer = to_world(comm, to);

	fill(out, sizeof(out), seed + (unsigned)rank);
	memset(in, 0, sizeof(in));
	MPI_Issend(out, n, MPI_BYTE, to, 0, comm, &rq);
	MPI_Cancel(&rq);
	MPI_Request_get_status(rq, &flag, &st);
	if (flag)
		MPI_Test_cancelled(&st, &mine);
	/* Whether the send to us was cancelled decides our receive. */
	theirs = mine;
	if (peer != rank)
		MPI_Sendrecv(&mine, 1, MPI_INT, peer, 90, &theirs, 1, MPI_INT,
			     peer, 90, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	if (!theirs) {
		MPI_Recv(in, n, MPI_BYTE, to, 0, comm, &st);
		MPI_Get_count(&st, MPI_BYTE, &count);
		ok = count == n && verify(in, (size_t)n, seed + (unsigned)peer);
	}
	MPI_Wait(&rq, &st);
	MPI_Test_cancelled(&st, &flag);
	return ok && flag == mine;
}

static void test_ssend_cancel(void)
{
	self_and_pair(cancel_round, 60, "issend-self-cancel-then-receive",
		      "issend-pair-cancel-then-receive");
}

int main(int argc, char **argv)
{
	int provided, want = MPI_THREAD_SINGLE;

	if (argc > 1 && !strcmp(argv[1], "mt"))
		want = MPI_THREAD_MULTIPLE;
	MPI_Init_thread(&argc, &argv, want, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		if (rank == 0)
			fprintf(stderr, "ibft_mpi_sem needs 2 or more ranks\n");
		MPI_Finalize();
		return 2;
	}
	check(provided >= want, "thread-level");
	static const struct {
		const char *name;
		void (*run)(void);
	} tests[] = {
		{ "intercomm", test_intercomm },
		{ "chains", test_comm_chains },
		{ "mprobe", test_mprobe },
		{ "directed", test_any_and_directed },
		{ "nbc", test_nbc_overlap },
		{ "persistent", test_persistent },
		{ "datatypes", test_datatypes },
		{ "zero", test_zero_bytes },
		{ "replace", test_sendrecv_replace },
		{ "many", test_many_outstanding },
		{ "ssend", test_ssend },
		{ "cancel", test_ssend_cancel },
	};
	size_t i;

	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!skipped(tests[i].name))
			tests[i].run();
	if (rank == 0) {
		printf("# mpi-sem: checks passed %d, failed %d\n", passed, failed);
		fflush(stdout);
	}
	MPI_Finalize();
	return failed ? 1 : 0;
}
