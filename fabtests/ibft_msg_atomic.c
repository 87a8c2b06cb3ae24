/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_msg_atomic: atomics on FI_EP_MSG endpoints (fi_atomic(3)), a
 * client (-d ADDR [-s ADDR]) on a server's memory (-s ADDR).
 *
 * The client runs every (op, datatype) the provider says it supports, in
 * plain, fetching and compare forms, each checked (with an atomic read)
 * against the same operation done locally; several elements in one call,
 * as many as fi_atomicvalid says; bad calls refused at once (unaligned,
 * too many elements, an unsupported pair); a wrong key fails the
 * operation and the connection still works.  Meanwhile the server adds 1
 * to a counter in the same region with its CPU's atomics while the client
 * adds to it with fetch-adds, 32-bit adds on its low half and
 * compare-swap increments: the total comes out exact.
 *
 * -t refuse: the server is opened with FI_TAGGED and not FI_ATOMIC; the
 * client's atomic completes with an error instead of waiting for ever.
 * -t deadpeer: the server takes the client's atomic and leaves without
 * applying it; once the client reads FI_SHUTDOWN, the atomic completes
 * with FI_ECONNABORTED.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>

#include "ibft.h"
#include "ibft_atomic_ref.h"

#define WAIT_MS 10000
#define CPU_ADDS 2000	/* the server's own increments */
#define ROUNDS 40	/* the client's, each a mix */

struct region {
	uint64_t addr, key;
};

static struct ibft_conn c;
static struct region r;

/* The target: operands at [0, 64), the hammered counter at 64. */
static uint64_t target[16] __attribute__((aligned(64)));
#define COUNTER 8	/* index in target */

/* Wait for the completion of ctx: 0, or its error (positive). */
static int done(void *ctx)
{
	struct fi_cq_data_entry e = { 0 };
	struct fi_cq_err_entry err = { 0 };
	int ret = ibft_cq_wait(&c, &e, 1, 0, WAIT_MS);

	if (ret == 1)
		return e.op_context == ctx ? 0 : -1;
	if (ret == -FI_EAVAIL && fi_cq_readerr(c.cq, &err, 0) == 1)
		return err.op_context == ctx ? err.err : -1;
	return -1;
}

/* Post, making progress while the send queue is full. */
#define POST(call) ({							\
	ssize_t _r;							\
	while ((_r = (call)) == -FI_EAGAIN)				\
		fi_cq_read(c.cq, NULL, 0);				\
	_r;								\
})

/* The target's element at offset 0, read with an atomic read. */
static int read_back(enum fi_datatype dt, void *out)
{
	int ctx;

	return POST(fi_fetch_atomic(c.ep, NULL, 1, NULL, out, NULL, 0, r.addr,
				    r.key, dt, FI_ATOMIC_READ, &ctx)) ||
	       done(&ctx) ? -1 : 0;
}

/* One op on one datatype in one form: 0 passed, 1 not supported, -1 failed. */
static int one(int f, enum fi_op op, enum fi_datatype dt)
{
	uint8_t init[8], opnd[8], cmp[8], res[8], now[8];
	size_t count = 0;
	int ret, o = 6, a = 3, cv = 6, ctx;

	ret = f == IBFT_PLAIN ? fi_atomicvalid(c.ep, dt, op, &count) :
	      f == IBFT_FETCH ? fi_fetch_atomicvalid(c.ep, dt, op, &count) :
	      fi_compare_atomicvalid(c.ep, dt, op, &count);
	if (ret)
		return 1;
	if (!dt_size(dt) || !count)
		return -1;
	put(dt, init, o);
	put(dt, opnd, a);
	put(dt, cmp, cv);
	memset(res, 0, sizeof(res));
	if (POST(fi_atomic(c.ep, init, 1, NULL, 0, r.addr, r.key, dt,
			   FI_ATOMIC_WRITE, &ctx)) || done(&ctx))
		return -1;
	if (f == IBFT_PLAIN)
		ret = (int)POST(fi_atomic(c.ep, opnd, 1, NULL, 0, r.addr, r.key,
					  dt, op, &ctx));
	else if (f == IBFT_FETCH)
		ret = (int)POST(fi_fetch_atomic(c.ep, op == FI_ATOMIC_READ ? NULL :
						opnd, 1, NULL, res, NULL, 0,
						r.addr, r.key, dt, op, &ctx));
	else
		ret = (int)POST(fi_compare_atomic(c.ep, opnd, 1, NULL, cmp, NULL,
						  res, NULL, 0, r.addr, r.key,
						  dt, op, &ctx));
	if (ret || done(&ctx) || read_back(dt, now))
		return -1;
	if (get(dt, now) != expect(op, o, a, cv))
		return -1;
	if (f != IBFT_PLAIN && get(dt, res) != o)
		return -1;
	return 0;
}

static void all_ops(void)
{
	ibft_atomic_all(one, "msg-atomic-all-ops");
	IBFT_CHECK(!one(IBFT_FETCH, FI_SUM, FI_UINT64) &&
		   !one(IBFT_FETCH, FI_SUM, FI_UINT32) &&
		   !one(IBFT_COMPARE, FI_CSWAP, FI_UINT64) &&
		   !one(IBFT_COMPARE, FI_CSWAP, FI_UINT32), "msg-atomic-core-set",
		   "fetch-add and compare-swap on 32 and 64 bits");
}

/* Several elements in one call, over two result iocs. */
static void vector(void)
{
	uint64_t init[8], opnd[8], res[8] = { 0 };
	struct fi_ioc op_ioc = { opnd, 0 }, res_ioc[2];
	size_t count = 0, i;
	int ok, ctx;

	ok = !fi_fetch_atomicvalid(c.ep, FI_UINT64, FI_SUM, &count) && count >= 2;
	IBFT_CHECK(ok, "msg-atomic-valid-count", "fi_fetch_atomicvalid: count %zu",
		   count);
	if (!ok)
		return;
	count = count > 8 ? 8 : count;
	for (i = 0; i < count; i++) {
		init[i] = 100 * i;
		opnd[i] = i + 1;
	}
	op_ioc.count = count;
	res_ioc[0] = (struct fi_ioc){ res, count / 2 };
	res_ioc[1] = (struct fi_ioc){ res + count / 2, count - count / 2 };
	ok = !POST(fi_atomic(c.ep, init, count, NULL, 0, r.addr, r.key, FI_UINT64,
			     FI_ATOMIC_WRITE, &ctx)) && !done(&ctx) &&
	     !POST(fi_fetch_atomicv(c.ep, &op_ioc, NULL, 1, res_ioc, NULL, 2, 0,
				    r.addr, r.key, FI_UINT64, FI_SUM, &ctx)) &&
	     !done(&ctx);
	for (i = 0; ok && i < count; i++)
		ok = res[i] == 100 * i;
	ok = ok && !POST(fi_fetch_atomic(c.ep, NULL, count, NULL, res, NULL, 0,
					 r.addr, r.key, FI_UINT64, FI_ATOMIC_READ,
					 &ctx)) && !done(&ctx);
	for (i = 0; ok && i < count; i++)
		ok = res[i] == 101 * i + 1;
	IBFT_CHECK(ok, "msg-atomic-vector", "%zu elements in one fetch-add", count);
}

/* Calls refused before anything is sent. */
static void refused(void)
{
	uint64_t v = 1, res;
	size_t count = 0;
	uint64_t *many;
	int ctx;

	IBFT_EXPECT(fi_atomic(c.ep, &v, 1, NULL, 0, r.addr + 4, r.key, FI_UINT64,
			      FI_SUM, &ctx), -FI_EINVAL, "msg-atomic-unaligned");
	fi_atomicvalid(c.ep, FI_UINT64, FI_SUM, &count);
	many = calloc(count + 1, sizeof(*many));
	IBFT_EXPECT(fi_atomic(c.ep, many, count + 1, NULL, 0, r.addr, r.key,
			      FI_UINT64, FI_SUM, &ctx), -FI_EINVAL,
		    "msg-atomic-too-many");
	free(many);
	IBFT_EXPECT(fi_fetch_atomic(c.ep, &v, 1, NULL, &res, NULL, 0, r.addr,
				    r.key, FI_DOUBLE, FI_BOR, &ctx),
		    -FI_EOPNOTSUPP, "msg-atomic-bad-pair");
}

/* A wrong key fails the operation; the next one works. */
static void bad_key(void)
{
	uint64_t one = 1, old = 0;
	int ret, ctx;

	ret = (int)POST(fi_fetch_atomic(c.ep, &one, 1, NULL, &old, NULL, 0,
					r.addr, r.key ^ 0x5a5a00, FI_UINT64,
					FI_SUM, &ctx));
	ret = ret ? -1 : done(&ctx);
	IBFT_CHECK(ret == FI_EACCES, "msg-atomic-bad-key", "completion: %d "
		   "(want FI_EACCES %d)", ret, FI_EACCES);
	ret = (int)POST(fi_fetch_atomic(c.ep, &one, 1, NULL, &old, NULL, 0,
					r.addr, r.key, FI_UINT64, FI_ATOMIC_READ,
					&ctx));
	IBFT_CHECK(!ret && !done(&ctx), "msg-atomic-after-error",
		   "an atomic after the failed one");
}

/* The counter the server's CPU adds to: what the client added. */
static uint64_t hammer(void)
{
	uint64_t one = 1, fetched, old, want, got, added = 0;
	uint32_t up = 1, down = UINT32_MAX;
	uint64_t at = r.addr + COUNTER * 8;
	int i, ok = 1, ctx;

	for (i = 0; ok && i < ROUNDS; i++) {
		switch (i % 3) {
		case 0:
			ok = !POST(fi_fetch_atomic(c.ep, &one, 1, NULL, &fetched,
						   NULL, 0, at, r.key, FI_UINT64,
						   FI_SUM, &ctx)) && !done(&ctx);
			break;
		case 1:	/* +1 and -1 on the low half, then +1 on the word */
			ok = !POST(fi_atomic(c.ep, &up, 1, NULL, 0, at, r.key,
					     FI_UINT32, FI_SUM, &ctx)) && !done(&ctx) &&
			     !POST(fi_atomic(c.ep, &down, 1, NULL, 0, at, r.key,
					     FI_UINT32, FI_SUM, &ctx)) && !done(&ctx) &&
			     !POST(fi_atomic(c.ep, &one, 1, NULL, 0, at, r.key,
					     FI_UINT64, FI_SUM, &ctx)) && !done(&ctx);
			break;
		default:
			do {
				ok = !POST(fi_fetch_atomic(c.ep, NULL, 1, NULL, &old,
							   NULL, 0, at, r.key,
							   FI_UINT64, FI_ATOMIC_READ,
							   &ctx)) && !done(&ctx);
				want = old + 1;
				ok = ok && !POST(fi_compare_atomic(c.ep, &want, 1,
						NULL, &old, NULL, &got, NULL, 0,
						at, r.key, FI_UINT64, FI_CSWAP,
						&ctx)) && !done(&ctx);
			} while (ok && got != old);
			break;
		}
		added += ok;
	}
	IBFT_CHECK(ok, "msg-atomic-hammer-ops", "an operation failed in round %d",
		   i);
	return added;
}

static void client(void)
{
	struct ibft_buf ctl;
	uint64_t added;

	if (ibft_buf_alloc(&c, &ctl, 64, FI_SEND | FI_RECV) ||
	    !IBFT_EXPECT(ibft_ctl_recv(&c, &ctl, &r, sizeof(r)), 0,
			 "msg-atomic-region"))
		return;
	refused();
	all_ops();
	vector();
	added = hammer();
	bad_key();
	IBFT_EXPECT(ibft_ctl_send(&c, &ctl, &added, sizeof(added)), 0,
		    "msg-atomic-done");
	ibft_buf_free(&ctl);
}

/* Progress (the client's atomics are applied here) while adding with the
 * CPU, until the client says how much it added. */
static void server(void)
{
	struct ibft_buf ctl;
	struct fid_mr *mr = NULL;
	struct fi_cq_data_entry e = { 0 };
	uint64_t added = 0, cpu = 0;
	int ret, got = 0;

	ret = fi_mr_reg(c.domain, target, sizeof(target),
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL);
	if (!IBFT_CHECK(!ret, "msg-atomic-mr", "fi_mr_reg: %s", fi_strerror(-ret)) ||
	    ibft_buf_alloc(&c, &ctl, 64, FI_SEND | FI_RECV))
		return;
	r.addr = (c.info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ?
		 (uintptr_t)target : 0;
	r.key = fi_mr_key(mr);
	if (!IBFT_EXPECT(ibft_ctl_send(&c, &ctl, &r, sizeof(r)), 0,
			 "msg-atomic-region") ||
	    !IBFT_EXPECT(fi_recv(c.ep, ctl.ptr, 64, ctl.desc, 0, &ctl), 0,
			 "msg-atomic-post"))
		goto out;
	while (!got) {
		ret = (int)fi_cq_read(c.cq, &e, 1);
		if (ret == 1 && e.op_context == &ctl) {
			memcpy(&added, ctl.ptr, sizeof(added));
			got = 1;
		} else if (ret < 0 && ret != -FI_EAGAIN) {
			break;
		}
		if (cpu < CPU_ADDS) {
			__atomic_fetch_add(&target[COUNTER], 1, __ATOMIC_SEQ_CST);
			cpu++;
		}
	}
	for (; cpu < CPU_ADDS; cpu++)
		__atomic_fetch_add(&target[COUNTER], 1, __ATOMIC_SEQ_CST);
	IBFT_CHECK(got && target[COUNTER] == cpu + added, "msg-atomic-hammer",
		   "counter %llu: the CPU added %llu, the client %llu",
		   (unsigned long long)target[COUNTER], (unsigned long long)cpu,
		   (unsigned long long)added);
	sleep(1);	/* let the client see its last send complete */
out:
	ibft_buf_free(&ctl);
	fi_close(&mr->fid);
}

/* The server took no FI_ATOMIC: the client's atomic fails, and says so. */
static void client_refused(void)
{
	struct ibft_buf ctl;
	uint64_t one = 1, old, added = 0;
	int ret, ctx;

	if (ibft_buf_alloc(&c, &ctl, 64, FI_SEND | FI_RECV) ||
	    !IBFT_EXPECT(ibft_ctl_recv(&c, &ctl, &r, sizeof(r)), 0,
			 "msg-atomic-region"))
		return;
	ret = (int)POST(fi_fetch_atomic(c.ep, &one, 1, NULL, &old, NULL, 0,
					r.addr, r.key, FI_UINT64, FI_SUM, &ctx));
	ret = ret ? -1 : done(&ctx);
	IBFT_CHECK(ret == FI_EOPNOTSUPP, "msg-atomic-peer-refuses",
		   "completion: %d (want FI_EOPNOTSUPP %d)", ret, FI_EOPNOTSUPP);
	IBFT_EXPECT(ibft_ctl_send(&c, &ctl, &added, sizeof(added)), 0,
		    "msg-atomic-done");
	ibft_buf_free(&ctl);
}

/* The server leaves with the client's atomic unapplied. */
static void server_leaves(void)
{
	struct ibft_buf ctl;
	char go[4];

	r.addr = (uintptr_t)target;
	r.key = 0;	/* never reached */
	if (ibft_buf_alloc(&c, &ctl, 64, FI_SEND | FI_RECV) ||
	    !IBFT_EXPECT(ibft_ctl_send(&c, &ctl, &r, sizeof(r)), 0,
			 "msg-atomic-region") ||
	    !IBFT_EXPECT(ibft_ctl_recv(&c, &ctl, go, sizeof(go)), 0,
			 "msg-atomic-go"))
		return;
	sleep(1);	/* the atomic lands; its CQ is never read again */
	ibft_buf_free(&ctl);
}

static void client_left(void)
{
	union ibft_cm_entry entry;
	struct ibft_buf ctl;
	uint64_t one = 1, old;
	int ret, ctx, ev;

	if (ibft_buf_alloc(&c, &ctl, 64, FI_SEND | FI_RECV) ||
	    !IBFT_EXPECT(ibft_ctl_recv(&c, &ctl, &r, sizeof(r)), 0,
			 "msg-atomic-region") ||
	    !IBFT_EXPECT(ibft_ctl_send(&c, &ctl, "go", 3), 0, "msg-atomic-go"))
		return;
	ret = (int)POST(fi_fetch_atomic(c.ep, &one, 1, NULL, &old, NULL, 0,
					r.addr, r.key, FI_UINT64, FI_SUM, &ctx));
	IBFT_EXPECT(ret, 0, "msg-atomic-posted");
	ev = ibft_eq_wait(c.eq, &entry, sizeof(entry), 20000, NULL);
	IBFT_EXPECT(ev, FI_SHUTDOWN, "msg-atomic-shutdown");
	ret = ret ? -1 : done(&ctx);
	IBFT_CHECK(ret == FI_ECONNABORTED || ret == FI_ECANCELED,
		   "msg-atomic-dead-peer-fails", "completion: %d (want "
		   "FI_ECONNABORTED %d)", ret, FI_ECONNABORTED);
	ibft_buf_free(&ctl);
}

int main(int argc, char **argv)
{
	struct ibft_conn_opts copts = { .caps = FI_ATOMIC };
	const char *test;
	int refuse, dead, ret;

	ibft_parse(argc, argv, "[-t refuse|deadpeer]");
	test = ibft_opts.test ? ibft_opts.test : "";
	if (!strncmp(test, "atomic-", 7))
		test += 7;	/* run-suite's names */
	refuse = !strcmp(test, "refuse");
	dead = !strcmp(test, "deadpeer");
	if (refuse && ibft_opts.server) {
		copts.caps = FI_TAGGED;	/* framed, but no atomics */
	}
	ret = ibft_connect(&c, &copts);
	if (IBFT_EXPECT(ret, 0, "connect")) {
		if (ibft_opts.server && dead)
			server_leaves();
		else if (ibft_opts.server)
			server();
		else if (dead)
			client_left();
		else if (refuse)
			client_refused();
		else
			client();
	}
	ibft_close(&c);
	return ibft_finish();
}
