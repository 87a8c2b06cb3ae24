/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_rdm_atomic: atomics on RDM endpoints (fi_atomic(3)).
 *
 * Every (op, datatype) the provider says it supports, in plain, fetching
 * and compare forms, checked against the same operation done locally;
 * the sizes fi_atomicvalid reports; several endpoints (the target itself
 * among them) hammering one 64-bit counter with a mix of fetch-add,
 * compare-swap increments and 32-bit adds on its low half, losing
 * nothing; a wrong key fails the operation, not the peer; a region a peer
 * may only write returns nothing, an endpoint opened without FI_ATOMIC
 * applies no peer's atomic, and a region closed while another thread
 * applies atomics to it is free once fi_close returns.
 *
 *   ibft_rdm_atomic -p PROV -s ADDR_A [-d ADDR_B]
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>

#include "ibft.h"
#include "ibft_atomic_ref.h"
#include "ibft_rdm_node.h"

#define NODES 4
static struct node *ns[NODES];
static struct fid_mr *mr;
static uint64_t key, base;
static uint8_t target[64] __attribute__((aligned(64)));

/* One op on one datatype in one form: 0 passed, 1 not supported, -1 failed. */
static int one(int f, enum fi_op op, enum fi_datatype dt)
{
	struct fid_ep *ep = ns[1]->ep;
	uint8_t opnd[8], cmp[8], res[8];
	size_t count = 0, size = dt_size(dt);
	struct comp c = { 0 };
	int ret, o = 6, a = 3, cv = 6;

	ret = f == IBFT_PLAIN ? fi_atomicvalid(ep, dt, op, &count) :
	      f == IBFT_FETCH ? fi_fetch_atomicvalid(ep, dt, op, &count) :
	      fi_compare_atomicvalid(ep, dt, op, &count);
	if (ret)
		return 1;
	if (!size || !count)
		return -1;
	put(dt, target, o);
	put(dt, opnd, a);
	put(dt, cmp, cv);
	memset(res, 0, sizeof(res));
	if (f == IBFT_PLAIN)
		ret = (int)POST(fi_atomic(ep, opnd, 1, NULL, ns[1]->peer[0],
					  base, key, dt, op, &c));
	else if (f == IBFT_FETCH)
		ret = (int)POST(fi_fetch_atomic(ep, op == FI_ATOMIC_READ ? NULL : opnd,
						1, NULL, res, NULL, ns[1]->peer[0],
						base, key, dt, op, &c));
	else
		ret = (int)POST(fi_compare_atomic(ep, opnd, 1, NULL, cmp, NULL, res,
						  NULL, ns[1]->peer[0], base, key,
						  dt, op, &c));
	if (ret || wait_comp(ns[1], &c, WAIT_MS) || c.err)
		return -1;
	if (get(dt, target) != expect(op, o, a, cv))
		return -1;
	if (f != IBFT_PLAIN && get(dt, res) != o)
		return -1;
	return 0;
}

static void test_all_ops(void)
{
	ibft_atomic_all(one, "atomic-all-ops");
	/* What MPI one-sided needs without asking (Open MPI's BTL). */
	IBFT_CHECK(!one(IBFT_PLAIN, FI_SUM, FI_UINT64) &&
		   !one(IBFT_FETCH, FI_SUM, FI_UINT64) &&
		   !one(IBFT_FETCH, FI_SUM, FI_UINT32) &&
		   !one(IBFT_FETCH, FI_ATOMIC_WRITE, FI_UINT64) &&
		   !one(IBFT_COMPARE, FI_CSWAP, FI_UINT64) &&
		   !one(IBFT_COMPARE, FI_CSWAP, FI_UINT32), "atomic-btl-set",
		   "sum, swap and compare-swap on 32 and 64 bits");
}

/* Several elements in one call: as many as fi_atomicvalid says. */
static void test_count(void)
{
	size_t count = 0, i;
	uint64_t *opnd, *res;
	struct comp c = { 0 };
	int ok;

	ok = !fi_fetch_atomicvalid(ns[1]->ep, FI_UINT64, FI_SUM, &count) &&
	     count >= 1;
	count = count > 8 ? 8 : count;	/* the target region holds 8 */
	opnd = calloc(count ? count : 1, 8);
	res = calloc(count ? count : 1, 8);
	for (i = 0; ok && i < count; i++) {
		((uint64_t *)target)[i] = 100 * i;
		opnd[i] = i + 1;
	}
	ok = ok && !POST(fi_fetch_atomic(ns[1]->ep, opnd, count, NULL, res, NULL,
					 ns[1]->peer[0], base, key, FI_UINT64,
					 FI_SUM, &c)) &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
	for (i = 0; ok && i < count; i++)
		ok = res[i] == 100 * i && ((uint64_t *)target)[i] == 101 * i + 1;
	IBFT_CHECK(ok, "atomic-count", "%zu elements in one fetch-add", count);
	free(opnd);
	free(res);
}

/*
 * Every node (node 0, the target, too) adds to one counter at node 0:
 * fetch-adds, compare-swap increments (retried on a miss), and 32-bit
 * adds of +1 and -1 on its low half.  The total must come out exact.
 */
static void test_hammer(void)
{
	enum { ROUNDS = 60 };
	/* Results land when their op completes: one place per node. */
	uint64_t one = 1, fetched[NODES], old, want, got;
	uint32_t up = 1, down = UINT32_MAX;
	struct comp c = { 0 };
	int n, r, ok = 1, posted;

	memset(target, 0, sizeof(target));
	for (r = 0; ok && r < ROUNDS; r++) {
		for (n = 0, posted = 0; ok && n < NODES; n++) {
			struct fid_ep *ep = ns[n]->ep;
			fi_addr_t to = ns[n]->peer[0];

			switch ((r + n) % 3) {
			case 0:
				ok = !POST(fi_fetch_atomic(ep, &one, 1, NULL,
							   &fetched[n], NULL, to,
							   base, key,
							   FI_UINT64, FI_SUM, &c));
				posted++;
				break;
			case 1:
				ok = !POST(fi_atomic(ep, &up, 1, NULL, to, base,
						     key, FI_UINT32, FI_SUM, &c)) &&
				     !POST(fi_atomic(ep, &down, 1, NULL, to, base,
						     key, FI_UINT32, FI_SUM, &c)) &&
				     !POST(fi_atomic(ep, &one, 1, NULL, to, base,
						     key, FI_UINT64, FI_SUM, &c));
				posted += 3;
				break;
			default:
				do {
					ok = !POST(fi_fetch_atomic(ep, NULL, 1, NULL,
								   &old, NULL, to,
								   base, key,
								   FI_UINT64,
								   FI_ATOMIC_READ, &c)) &&
					     !wait_comp(ns[n], &c, WAIT_MS) && !c.err;
					want = old + 1;
					ok = ok && !POST(fi_compare_atomic(ep, &want, 1,
							NULL, &old, NULL, &got, NULL,
							to, base, key, FI_UINT64,
							FI_CSWAP, &c)) &&
					     !wait_comp(ns[n], &c, WAIT_MS) && !c.err;
				} while (ok && got != old);
				break;
			}
		}
		/* Each node's posted ops complete (the CAS ones already did). */
		for (n = 0; ok && n < NODES; n++) {
			int k = (r + n) % 3 == 0 ? 1 : (r + n) % 3 == 1 ? 3 : 0;

			while (ok && k--)
				ok = !wait_comp(ns[n], &c, WAIT_MS) && !c.err;
		}
		(void)posted;
	}
	IBFT_CHECK(ok && *(uint64_t *)target == (uint64_t)ROUNDS * NODES,
		   "atomic-hammer", "%d nodes x %d rounds of mixed 64- and "
		   "32-bit ops on one counter: %llu (want %d)", NODES, ROUNDS,
		   (unsigned long long)*(uint64_t *)target, ROUNDS * NODES);
}

/* A wrong key: the operation fails, the peer stays usable. */
static void test_bad_key(void)
{
	uint64_t one = 1, old;
	struct comp c = { 0 };
	int ret, ok;

	ret = (int)POST(fi_fetch_atomic(ns[1]->ep, &one, 1, NULL, &old, NULL,
					ns[1]->peer[0], base, key ^ 0x5a5a00,
					FI_UINT64, FI_SUM, &c));
	ok = ret < 0 || (!wait_comp(ns[1], &c, WAIT_MS) && c.err);
	IBFT_CHECK(ok, "atomic-bad-key", "an atomic with a wrong key did not fail");
	if (ibft_deviates("verbs;ofi_rxm", "atomic-after-error", "rxm keeps "
			  "the broken connection"))
		return;
	*(uint64_t *)target = 5;
	ok = !POST(fi_fetch_atomic(ns[1]->ep, &one, 1, NULL, &old, NULL,
				   ns[1]->peer[0], base, key, FI_UINT64, FI_SUM,
				   &c)) &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err && old == 5 &&
	     *(uint64_t *)target == 6;
	IBFT_CHECK(ok, "atomic-after-error", "a good atomic after the failure");
}

/* An atomic of form f (op, operand 0) from ns[1] to (to, addr, k): the
 * completion's error, 0 if it succeeded; res holds what came back. */
static int atomic_err(int f, fi_addr_t to, uint64_t addr, uint64_t k,
		      enum fi_op op, uint64_t *res)
{
	uint64_t opnd = 0, cmp = 0;
	struct comp c = { 0 };
	int ret;

	if (f == IBFT_PLAIN)
		ret = (int)POST(fi_atomic(ns[1]->ep, &opnd, 1, NULL, to, addr, k,
					  FI_UINT64, op, &c));
	else if (f == IBFT_FETCH)
		ret = (int)POST(fi_fetch_atomic(ns[1]->ep, &opnd, 1, NULL, res,
						NULL, to, addr, k, FI_UINT64, op, &c));
	else
		ret = (int)POST(fi_compare_atomic(ns[1]->ep, &opnd, 1, NULL, &cmp,
						  NULL, res, NULL, to, addr, k,
						  FI_UINT64, op, &c));
	if (ret)
		return -ret;
	if (wait_comp(ns[1], &c, WAIT_MS))
		return -1;
	return c.err;
}

/*
 * A region registered FI_REMOTE_WRITE alone: a peer may change it but
 * never learn what it holds, so every atomic that returns the old value
 * (fetching OR of 0, compare-and-swap, atomic read) fails with FI_EACCES
 * and brings nothing back; a plain atomic works.
 */
static void test_write_only_region(void)
{
	static uint64_t secret[2] __attribute__((aligned(64)));
	uint64_t res = 7, k, addr;
	struct fid_mr *wmr = NULL;
	int ret, ok;

	secret[0] = 0x1122334455667788ULL;
	ret = node_mr_reg(ns[0], secret, sizeof(secret), FI_REMOTE_WRITE, &wmr);
	if (!IBFT_CHECK(!ret, "atomic-write-only-mr", "fi_mr_reg: %s",
			fi_strerror(-ret)))
		goto out;
	k = fi_mr_key(wmr);
	addr = base ? (uintptr_t)secret : 0;
	ok = atomic_err(IBFT_FETCH, ns[1]->peer[0], addr, k, FI_BOR, &res) == FI_EACCES &&
	     atomic_err(IBFT_COMPARE, ns[1]->peer[0], addr, k, FI_CSWAP, &res) == FI_EACCES &&
	     atomic_err(IBFT_FETCH, ns[1]->peer[0], addr, k, FI_ATOMIC_READ, &res) == FI_EACCES;
	IBFT_CHECK(ok && res == 7, "atomic-write-only-no-fetch", "a fetch from a "
		   "region registered FI_REMOTE_WRITE alone was not refused "
		   "with FI_EACCES (got back %#llx)", (unsigned long long)res);
	ok = !atomic_err(IBFT_PLAIN, ns[1]->peer[0], addr, k, FI_BOR, NULL) &&
	     secret[0] == 0x1122334455667788ULL;
	IBFT_CHECK(ok, "atomic-write-only-plain", "a plain atomic on a "
		   "writable region failed");
out:
	IBFT_CLOSE(wmr);
}

/* A target endpoint opened without FI_ATOMIC refuses peers' atomics:
 * the initiator's atomic fails, the memory is untouched. */
static void test_target_without_atomic(void)
{
	static uint64_t word[2] __attribute__((aligned(64)));
	struct node *plain = node_open(0, FI_MSG | FI_RMA, 0);
	struct fid_mr *pmr = NULL;
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	uint64_t res = 7;
	int ret, err;

	if (!plain)
		return;
	word[0] = 40;
	ret = node_mr_reg(plain, word, sizeof(word),
			  FI_REMOTE_READ | FI_REMOTE_WRITE, &pmr);
	if (!ret)
		ret = fi_av_insert(ns[1]->av, plain->name, 1, &to, 0, NULL) == 1 ? 0 : -1;
	if (!IBFT_CHECK(!ret, "atomic-no-cap-setup", "%s", fi_strerror(-ret)))
		goto out;
	err = atomic_err(IBFT_FETCH, to, (plain->info->domain_attr->mr_mode &
					  FI_MR_VIRT_ADDR) ? (uintptr_t)word : 0,
			 fi_mr_key(pmr), FI_SUM, &res);
	IBFT_CHECK(err && err != -1 && word[0] == 40 && res == 7,
		   "atomic-target-without-fi-atomic", "an atomic to an endpoint "
		   "opened without FI_ATOMIC: error %d, word %llu", err,
		   (unsigned long long)word[0]);
out:
	IBFT_CLOSE(pmr);
	node_close(plain);
}

/* Reads an endpoint's CQ until told to stop: applies peers' atomics. */
struct applier {
	struct node *t;
	int stop;
};

static void *applier_run(void *arg)
{
	struct applier *a = arg;
	struct fi_cq_tagged_entry e[4];

	while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE))
		fi_cq_read(a->t->cq, e, 4);
	return NULL;
}

/*
 * fi_close of a region while another thread's CQ reads apply a peer's
 * atomics to it (FI_THREAD_SAFE): once the close returns the memory is
 * the application's to free, so no atomic may still be writing it.  Under
 * ThreadSanitizer, a provider that writes after dropping the region's
 * lock shows as a race between its write and the application's free.
 * The initiator waits on its own CQ alone, so nothing else orders them.
 */
static void test_close_while_applied(void)
{
	uint64_t *word = aligned_alloc(64, 64), one = 1;
	struct applier a = { 0 };
	struct fid_mr *wmr = NULL;
	struct node *t, *p;
	fi_addr_t to_t;
	struct comp c = { 0 };
	pthread_t th;
	ssize_t ret = 0;
	int i, ok, started = 0;
	long end;

	want_threading = FI_THREAD_SAFE;
	t = node_open(0, FI_MSG | FI_ATOMIC, 0);
	p = node_open(1, FI_MSG | FI_ATOMIC, 0);
	want_threading = FI_THREAD_DOMAIN;
	ok = word && t && p && !node_mr_reg(t, word, 64, FI_REMOTE_READ |
					    FI_REMOTE_WRITE, &wmr) &&
	     fi_av_insert(p->av, t->name, 1, &to_t, 0, NULL) == 1;
	if (ok)
		*word = 0;
	a.t = t;
	started = ok && !pthread_create(&th, NULL, applier_run, &a);
	for (i = 0; started && ok && i < 32; i++) {
		end = now_ms() + WAIT_MS;
		while ((ret = fi_atomic(p->ep, &one, 1, NULL, to_t,
					(t->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
					(uintptr_t)word : 0, fi_mr_key(wmr), FI_UINT64,
					FI_SUM, &c)) == -FI_EAGAIN && now_ms() < end)
			;
		ok = !ret && !wait_comp_alone(p, &c, WAIT_MS) && !c.err;
	}
	ok = ok && started && !fi_close(&wmr->fid);
	if (started)
		wmr = NULL;
	ok = ok && *word == 32;
	free(word);	/* the application's again */
	if (started) {
		__atomic_store_n(&a.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
	}
	IBFT_CHECK(ok, "atomic-close-while-applied", "32 atomics applied by "
		   "another thread's CQ reads, then fi_close of the region and "
		   "free: a step failed");
	IBFT_CLOSE(wmr);
	node_close(p);
	node_close(t);
}

/*
 * Atomics from one endpoint to one peer are applied in the order they
 * were issued, and the endpoint says so (msg_order, max_order_*_size;
 * MPICH sends MPI accumulates through fi_atomic only then): 32
 * FI_ATOMIC_WRITEs of 1..32 to one word, each followed by an
 * FI_ATOMIC_READ of it, all issued before any completes.  Each read sees
 * the write just before it (FI_ORDER_ATOMIC_RAW), and the word ends at 32
 * (WAW).
 */
static void test_order(void)
{
	const uint64_t want = FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAW;
	uint64_t *word = (uint64_t *)target, val[32], seen[32];
	struct comp c = { 0 };
	int i, ok = 1, bad = -1;

	if (!IBFT_CHECK((ns[1]->info->tx_attr->msg_order & want) == want,
			"atomic-order-info", "msg_order %#llx has no "
			"FI_ORDER_ATOMIC_RAW|WAW (atomics are applied in order)",
			(unsigned long long)ns[1]->info->tx_attr->msg_order) ||
	    !IBFT_CHECK(ns[1]->info->ep_attr->max_order_raw_size >= 8 &&
			ns[1]->info->ep_attr->max_order_waw_size >= 8,
			"atomic-order-sizes", "max_order_raw_size %zu, "
			"max_order_waw_size %zu: below one 8-byte atomic",
			ns[1]->info->ep_attr->max_order_raw_size,
			ns[1]->info->ep_attr->max_order_waw_size))
		return;
	*word = 0;
	for (i = 0; ok && i < 32; i++) {
		val[i] = (uint64_t)i + 1;
		seen[i] = 0;
		ok = !POST(fi_atomic(ns[1]->ep, &val[i], 1, NULL, ns[1]->peer[0],
				     base, key, FI_UINT64, FI_ATOMIC_WRITE, &val[i])) &&
		     !POST(fi_fetch_atomic(ns[1]->ep, NULL, 1, NULL, &seen[i], NULL,
					   ns[1]->peer[0], base, key, FI_UINT64,
					   FI_ATOMIC_READ, &seen[i]));
	}
	for (i = 0; ok && i < 64; i++)
		ok = !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
	for (i = 0; ok && i < 32; i++)
		if (seen[i] != val[i]) {
			bad = i;
			ok = 0;
		}
	IBFT_CHECK(ok && *word == 32, "atomic-order", "issued in one go: read "
		   "%d saw %llu (the write before it: %d); the word ends at %llu "
		   "(32)", bad, bad >= 0 ? (unsigned long long)seen[bad] : 0ull,
		   bad + 1, (unsigned long long)*word);
}

int main(int argc, char **argv)
{
	int i, ret;

	ibft_parse(argc, argv, "-s ADDR_A [-d ADDR_B]");
	if (!ibft_opts.src) {
		fprintf(stderr, "ibft_rdm_atomic needs -s ADDR_A\n");
		return 2;
	}
	want_mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		       FI_MR_LOCAL | FI_MR_ENDPOINT;
	for (i = 0; i < NODES; i++)
		if (!(ns[i] = node_open(i, FI_MSG | FI_ATOMIC, 0)))
			goto out;
	if (insert_all(ns, NODES))
		goto out;
	ret = node_mr_reg(ns[0], target, sizeof(target),
			  FI_REMOTE_READ | FI_REMOTE_WRITE, &mr);
	if (!IBFT_CHECK(!ret, "atomic-mr", "fi_mr_reg: %s", fi_strerror(-ret)))
		goto out;
	key = fi_mr_key(mr);
	base = (ns[0]->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
	       (uintptr_t)target : 0;
	if (ibft_deviates("verbs;ofi_rxm", "atomic-all-ops", "rxm's atomics "
			  "need FI_MR_LOCAL descs this test does not pass"))
		goto out;
	test_all_ops();
	test_count();
	test_hammer();
	test_bad_key();
	test_write_only_region();
	test_target_without_atomic();
	test_close_while_applied();
	test_order();
out:
	IBFT_CLOSE(mr);
	close_all();
	return ibft_finish();
}
