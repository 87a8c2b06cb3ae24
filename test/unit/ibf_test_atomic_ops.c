/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The atomic request both endpoint kinds send (ibf_atomic_ops.c): the
 * API's arguments checked, a request built, served by a target (checked
 * against its regions, applied, answered in place) and its answer checked,
 * with no device: the domain's key table holds one fake region.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "ibf_atomic_ops.h"

#define EAGER 256

static struct ibf_domain dom;
static struct ibv_mr vmr;
static struct ibf_mr mr;
static uint64_t target[8] __attribute__((aligned(64)));

/* A domain whose every key bucket holds the one region over target. */
static void setup(void)
{
	unsigned i;

	memset(&dom, 0, sizeof(dom));
	pthread_mutex_init(&dom.mr_lock, NULL);
	vmr.addr = target;
	vmr.length = sizeof(target);
	vmr.rkey = 0x1234;
	mr.mr = &vmr;
	mr.key = vmr.rkey;	/* the device's keys, virtual addresses */
	mr.base = 0;
	mr.magic = IBF_MR_MAGIC;
	mr.ibv_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	for (i = 0; i < IBF_MR_BUCKETS; i++)
		dom.mr_bucket[i] = &mr;
	for (i = 0; i < 8; i++)
		target[i] = 100 * i;
}

TestSuite(atomic_ops, .init = setup);

static struct ibf_atomic_args args(enum ibf_atomic_kind kind, enum fi_op op,
				   enum fi_datatype dt, struct fi_ioc *opnd,
				   struct fi_ioc *cmp, struct fi_ioc *res,
				   struct fi_rma_ioc *rma)
{
	struct ibf_atomic_args a = { .kind = kind, .opnd = opnd,
		.nopnd = opnd ? 1 : 0, .cmp = cmp, .ncmp = cmp ? 1 : 0,
		.res = res, .nres = res ? 1 : 0, .rma = rma, .nrma = 1,
		.dt = dt, .op = op };

	return a;
}

Test(atomic_ops, args_checked)
{
	uint64_t v[64] = { 0 }, r[64];
	struct fi_ioc opnd = { v, 3 }, res = { r, 3 }, cmp = { v, 2 };
	struct fi_rma_ioc rma = { (uintptr_t)target, 3, vmr.rkey };
	struct ibf_atomic_args a;
	size_t count = 0;

	a = args(IBF_ATOMIC_FETCH, FI_SUM, FI_UINT64, &opnd, NULL, &res, &rma);
	cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count), 0);
	cr_assert_eq(count, 3);
	rma.addr += 4;
	cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count), -FI_EINVAL,
		     "unaligned");
	rma.addr -= 4;
	a = args(IBF_ATOMIC_COMPARE, FI_CSWAP, FI_UINT64, &opnd, &cmp, &res, &rma);
	cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count), -FI_EINVAL,
		     "compare count differs");
	a = args(IBF_ATOMIC_PLAIN, FI_BOR, FI_DOUBLE, &opnd, NULL, NULL, &rma);
	cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count), -FI_EOPNOTSUPP);
	opnd.count = rma.count = 64;	/* beyond one request */
	a = args(IBF_ATOMIC_PLAIN, FI_SUM, FI_UINT64, &opnd, NULL, NULL, &rma);
	cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count), -FI_EINVAL);
	cr_assert_eq(ibf_atomic_max(EAGER, FI_UINT64, 0),
		     (EAGER - sizeof(struct ibf_atomic_req)) / 8);
	cr_assert_eq(ibf_atomic_max(EAGER, FI_UINT64, 1),
		     (EAGER - sizeof(struct ibf_atomic_req)) / 16);
	opnd.count = rma.count = 1;
	a.nrma = 2;
	cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count), -FI_EINVAL);
	a.nrma = 1;
	{
		struct fi_ioc five[5] = { { v, 1 }, { v, 1 }, { v, 1 }, { v, 1 },
					  { v, 1 } };

		a.opnd = five;
		a.nopnd = 5;
		rma.count = 5;
		cr_assert_eq(ibf_atomic_args_check(&a, 4, EAGER, &count),
			     -FI_EINVAL, "over the iov limit");
		cr_assert_eq(ibf_atomic_args_check(&a, 5, EAGER, &count), 0);
		cr_assert_eq(count, 5);
	}
}

/* Build, serve, check the answer: the target changed, old values back. */
Test(atomic_ops, fetch_add_round_trip)
{
	uint64_t v[2] = { 5, 7 }, r[2];
	struct fi_ioc opnd = { v, 2 }, res = { r, 2 };
	struct fi_rma_ioc rma = { (uintptr_t)&target[1], 2, vmr.rkey };
	struct ibf_atomic_args a =
		args(IBF_ATOMIC_FETCH, FI_SUM, FI_UINT64, &opnd, NULL, &res, &rma);
	uint8_t wire[EAGER];
	struct ibf_atomic_req *req = (void *)wire;
	size_t len, answer;

	len = ibf_atomic_req_build(wire, &a, 2, 42);
	cr_assert_eq(len, sizeof(*req) + 16);
	answer = ibf_atomic_serve(&dom, wire, len, EAGER);
	cr_assert_eq(req->status, 0);
	cr_assert_eq(req->cookie, 42);
	cr_assert_eq(answer, sizeof(*req) + 16);
	cr_assert_eq(target[1], 105);
	cr_assert_eq(target[2], 207);
	memcpy(r, req + 1, 16);
	cr_assert_eq(r[0], 100);
	cr_assert_eq(r[1], 200);
	cr_assert_eq(ibf_atomic_answer_check(wire, answer, 16), 0);
	cr_assert_eq(ibf_atomic_answer_check(wire, answer, 8), -FI_EINVAL,
		     "an answer of the wrong length");
	cr_assert_eq(ibf_atomic_answer_check(wire, 4, 0), -FI_EINVAL);
	req->status = 5;
	cr_assert_eq(ibf_atomic_answer_check(wire, answer, 16), -FI_EINVAL,
		     "a positive status is no status");
}

Test(atomic_ops, compare_swap_and_read)
{
	uint32_t want = 9, cmp = 0, old = 77;
	struct fi_ioc opnd = { &want, 1 }, c = { &cmp, 1 }, res = { &old, 1 };
	struct fi_rma_ioc rma = { (uintptr_t)&target[0], 1, vmr.rkey };
	struct ibf_atomic_args a =
		args(IBF_ATOMIC_COMPARE, FI_CSWAP, FI_UINT32, &opnd, &c, &res, &rma);
	uint8_t wire[EAGER];
	size_t len = ibf_atomic_req_build(wire, &a, 1, 1);

	cr_assert_eq(ibf_atomic_serve(&dom, wire, len, EAGER),
		     sizeof(struct ibf_atomic_req) + 4);
	memcpy(&old, &target[0], 4);	/* the low half, little-endian */
	cr_assert_eq(old, 9);
	a = args(IBF_ATOMIC_FETCH, FI_ATOMIC_READ, FI_UINT32, NULL, NULL, &res, &rma);
	len = ibf_atomic_req_build(wire, &a, 1, 2);
	cr_assert_eq(len, sizeof(struct ibf_atomic_req));
	ibf_atomic_serve(&dom, wire, len, EAGER);
	memcpy(&old, wire + sizeof(struct ibf_atomic_req), 4);
	cr_assert_eq(old, 9);
}

/* What a peer's bytes may not do: each refused, nothing applied. */
static int32_t served(void (*spoil)(struct ibf_atomic_req *, size_t *))
{
	uint64_t v = 1;
	struct fi_ioc opnd = { &v, 1 };
	struct fi_rma_ioc rma = { (uintptr_t)&target[3], 1, vmr.rkey };
	struct ibf_atomic_args a =
		args(IBF_ATOMIC_PLAIN, FI_SUM, FI_UINT64, &opnd, NULL, NULL, &rma);
	uint8_t wire[EAGER];
	struct ibf_atomic_req *req = (void *)wire;
	size_t len = ibf_atomic_req_build(wire, &a, 1, 7);

	spoil(req, &len);
	cr_assert_eq(ibf_atomic_serve(&dom, wire, len, EAGER), sizeof(*req));
	cr_assert_eq(target[3], 300, "a refused request was applied");
	return req->status;
}

static void wrong_key(struct ibf_atomic_req *r, size_t *l) { r->key ^= 1; (void)l; }
static void past_end(struct ibf_atomic_req *r, size_t *l) { r->addr += 5 * 8; (void)l; }
static void unaligned(struct ibf_atomic_req *r, size_t *l) { r->addr += 2; (void)l; }
static void cut_short(struct ibf_atomic_req *r, size_t *l) { (void)r; *l -= 4; }
static void too_long(struct ibf_atomic_req *r, size_t *l) { (void)r; *l += 8; }
static void no_elements(struct ibf_atomic_req *r, size_t *l) { r->count = 0; (void)l; }
static void huge_count(struct ibf_atomic_req *r, size_t *l) { r->count = 1u << 31; (void)l; }
static void bad_op(struct ibf_atomic_req *r, size_t *l) { r->op = 200; (void)l; }
static void bad_kind(struct ibf_atomic_req *r, size_t *l) { r->kind = 9; (void)l; }
static void bad_type(struct ibf_atomic_req *r, size_t *l) { r->datatype = 250; (void)l; }

Test(atomic_ops, hostile_requests_refused)
{
	cr_assert_eq(served(wrong_key), -FI_EACCES);
	cr_assert_eq(served(past_end), -FI_EACCES);
	cr_assert_eq(served(unaligned), -FI_EINVAL);
	cr_assert_eq(served(cut_short), -FI_EINVAL);
	cr_assert_eq(served(too_long), -FI_EINVAL);
	cr_assert_eq(served(no_elements), -FI_EINVAL);
	cr_assert_eq(served(huge_count), -FI_EINVAL);
	cr_assert_eq(served(bad_op), -FI_EOPNOTSUPP);
	cr_assert_eq(served(bad_kind), -FI_EOPNOTSUPP);
	cr_assert_eq(served(bad_type), -FI_EOPNOTSUPP);
}

static void as_built(struct ibf_atomic_req *r, size_t *l) { (void)r; (void)l; }

/* A region a peer may only read: no atomic that writes. */
Test(atomic_ops, read_only_region_refuses_writes)
{
	mr.ibv_access = IBV_ACCESS_REMOTE_READ;
	cr_assert_eq(served(as_built), -FI_EACCES);
}

/* A fetching atomic of kind k, op op (operand 0), on target[2]: status. */
static int32_t fetch_status(enum ibf_atomic_kind k, enum fi_op op,
			    size_t *answer)
{
	uint64_t v = 0, c = 200;
	struct fi_ioc opnd = { &v, 1 }, cmp = { &c, 1 };
	struct fi_rma_ioc rma = { (uintptr_t)&target[2], 1, vmr.rkey };
	struct ibf_atomic_args a = args(k, op, FI_UINT64, &opnd,
					k == IBF_ATOMIC_COMPARE ? &cmp : NULL,
					NULL, &rma);
	uint8_t wire[EAGER];
	size_t len = ibf_atomic_req_build(wire, &a, 1, 7);

	*answer = ibf_atomic_serve(&dom, wire, len, EAGER);
	return ((struct ibf_atomic_req *)wire)->status;
}

/*
 * A region a peer may only write: nothing that returns its contents.  A
 * fetching OR of 0 would otherwise read it (the review's reproduction),
 * and so would a compare-and-swap's old value.
 */
Test(atomic_ops, write_only_region_refuses_fetches)
{
	size_t answer;

	mr.ibv_access = IBV_ACCESS_REMOTE_WRITE;
	cr_assert_eq(fetch_status(IBF_ATOMIC_FETCH, FI_BOR, &answer), -FI_EACCES);
	cr_assert_eq(answer, sizeof(struct ibf_atomic_req), "the answer carries data");
	cr_assert_eq(fetch_status(IBF_ATOMIC_COMPARE, FI_CSWAP, &answer), -FI_EACCES);
	cr_assert_eq(fetch_status(IBF_ATOMIC_FETCH, FI_ATOMIC_READ, &answer), -FI_EACCES);
	cr_assert_eq(target[2], 200, "a refused atomic changed the region");
	/* Writing without reading back is what it grants. */
	cr_assert_eq(fetch_status(IBF_ATOMIC_PLAIN, FI_SUM, &answer), 0);
	cr_assert_eq(answer, sizeof(struct ibf_atomic_req));
}

/* Read and write rights: fetches and compares are served. */
Test(atomic_ops, read_write_region_serves_fetches)
{
	size_t answer;

	cr_assert_eq(fetch_status(IBF_ATOMIC_FETCH, FI_BOR, &answer), 0);
	cr_assert_eq(answer, sizeof(struct ibf_atomic_req) + 8);
	cr_assert_eq(fetch_status(IBF_ATOMIC_COMPARE, FI_CSWAP, &answer), 0);
	cr_assert_eq(target[2], 0, "the compare-and-swap did not swap");
}

static void *try_lock(void *arg)
{
	int ret = pthread_mutex_trylock(arg);

	if (!ret)
		pthread_mutex_unlock(arg);
	return (void *)(intptr_t)ret;
}

static int lock_busy(void)
{
	pthread_t t;
	void *ret;

	pthread_create(&t, NULL, try_lock, &dom.mr_lock);
	pthread_join(t, &ret);
	return (intptr_t)ret == EBUSY;
}

/*
 * While a peer's atomic is applied its region stays registered: the key
 * table's lock, which fi_close(mr) takes to unlink the region before
 * deregistering it, is held from the check to the end of the write, and
 * let go afterwards, whether the request was served or refused.
 */
Test(atomic_ops, region_held_while_applied)
{
	size_t answer;

	cr_assert_eq(ibf_mr_target_hold(&dom, vmr.rkey, (uintptr_t)target, 8,
					IBV_ACCESS_REMOTE_WRITE), &mr);
	cr_assert(lock_busy(), "a close could unlink the region during the write");
	ibf_mr_target_release(&dom);
	cr_assert(!lock_busy());
	cr_assert_null(ibf_mr_target_hold(&dom, vmr.rkey ^ 1, (uintptr_t)target, 8,
					  IBV_ACCESS_REMOTE_WRITE));
	cr_assert(!lock_busy(), "a refused check kept the lock");
	cr_assert_eq(fetch_status(IBF_ATOMIC_FETCH, FI_SUM, &answer), 0);
	cr_assert(!lock_busy(), "a served atomic kept the lock");
	mr.ibv_access = 0;
	cr_assert_eq(fetch_status(IBF_ATOMIC_FETCH, FI_SUM, &answer), -FI_EACCES);
	cr_assert(!lock_busy(), "a refused atomic kept the lock");
}
