/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_rdm_rma: RMA on RDM endpoints (fi_rma(3)), between two endpoints
 * and from an endpoint to itself.
 *
 * A writes into and reads from B's registered buffer at sizes that go
 * inline, through a bounce and straight from the caller's memory, with
 * several local iovs; fi_writedata reaches B's CQ as FI_REMOTE_CQ_DATA;
 * injects are free on return; counters bound with FI_WRITE, FI_READ and
 * FI_REMOTE_WRITE count; a wrong key or a range beyond the region fails
 * the operation (not the process) and the next one to that peer works;
 * an endpoint without FI_RMA refuses; RMA above the device's largest work
 * request, up to max_msg_size, works.  Local buffers are registered only
 * when the provider's mr_mode says FI_MR_LOCAL.
 *
 *   ibft_rdm_rma -p PROV -s ADDR_A [-d ADDR_B]
 *   IBFT_RMA_BIG=BYTES ibft_rdm_rma ...   (only a write and read that big)
 *   IBFT_MR_REQKEY=1 ibft_rdm_rma ...     (requested keys and offsets)
 */
#include <malloc.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "ibft_rdm_rma.h"

static const size_t sizes[] = { 1, 64, 4000, 8192, 60000, 300000, RBUF };

int region_open(struct node *n, struct region *r, size_t len,
		uint64_t access)
{
	int mr_mode = n->info->domain_attr->mr_mode;
	int ret;

	r->buf = xbuf(len);
	r->len = len;
	r->mr = NULL;
	ret = node_mr_reg(n, r->buf, len, access, &r->mr);
	if (ret) {
		IBFT_CHECK(0, "rma-mr-reg", "fi_mr_reg(%zu bytes): %s", len,
			   fi_strerror(-ret));
		free(r->buf);
		r->buf = NULL;
		return -1;
	}
	r->key = fi_mr_key(r->mr);
	r->addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)r->buf : 0;
	r->desc = fi_mr_desc(r->mr);
	return 0;
}

void region_close(struct region *r)
{
	IBFT_CLOSE(r->mr);
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* A local buffer as the provider wants it: registered only if it says so. */
int local_open(struct node *n, struct region *r, size_t len)
{
	if (n->info->domain_attr->mr_mode & FI_MR_LOCAL)
		return region_open(n, r, len, FI_READ | FI_WRITE | FI_SEND | FI_RECV);
	memset(r, 0, sizeof(*r));
	r->buf = xbuf(len);
	r->len = len;
	return 0;
}

/*
 * IBFT_MR_REQKEY=1: the application chooses keys and addresses regions
 * from their start (mr_mode without FI_MR_PROV_KEY and FI_MR_VIRT_ADDR),
 * as OpenSHMEM and MPICH ask first; else the device's keys and virtual
 * addresses.
 */
int reqkey;
uint64_t rma_mr_mode(void)
{
	return reqkey ? FI_MR_ALLOCATED | FI_MR_LOCAL | FI_MR_ENDPOINT :
	       FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
	       FI_MR_LOCAL | FI_MR_ENDPOINT;
}

/* The next completion of n that is not a remote one; -1 on timeout. */
static int wait_local(struct node *n, struct comp *c)
{
	return wait_comp(n, c, WAIT_MS);
}

struct node *ns[2];
struct region tgt, loc;

static int open_pair(void)
{
	want_mr_mode = rma_mr_mode();
	ns[0] = node_open(0, FI_MSG | FI_RMA, 0);
	ns[1] = node_open(1, FI_MSG | FI_RMA, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		return -1;
	if (reqkey)
		IBFT_CHECK(!(ns[0]->info->domain_attr->mr_mode &
			     (FI_MR_PROV_KEY | FI_MR_VIRT_ADDR)), "rma-reqkey-mode",
			   "asked for requested keys and offsets, got mr_mode %#x",
			   ns[0]->info->domain_attr->mr_mode);
	if (region_open(ns[1], &tgt, RBUF, FI_REMOTE_WRITE | FI_REMOTE_READ) ||
	    local_open(ns[0], &loc, RBUF))
		return -1;
	return 0;
}

/* Write len bytes in three local pieces, then read them back. */
static void test_write_read(void)
{
	struct comp c = { 0 };
	size_t i, len, a, b;
	int ok = 1;

	for (i = 0; ok && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct iovec iov[3];
		void *desc[3] = { loc.desc, loc.desc, loc.desc };

		len = sizes[i];
		a = len / 3;
		b = len / 2;
		ibft_fill(loc.buf, len, (unsigned)(100 + i));
		memset(tgt.buf, 0, len);
		iov[0] = (struct iovec){ loc.buf, a };
		iov[1] = (struct iovec){ loc.buf + a, b - a };
		iov[2] = (struct iovec){ loc.buf + b, len - b };
		ok = !POST(fi_writev(ns[0]->ep, iov, desc, 3, ns[0]->peer[1],
				     tgt.addr, tgt.key, &c)) &&
		     !wait_local(ns[0], &c) && !c.err &&
		     (c.e.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE) &&
		     ibft_verify(tgt.buf, len, (unsigned)(100 + i));
		IBFT_CHECK(ok, "rma-writev", "%zu bytes in 3 iovs: %s", len,
			   c.err ? fi_strerror(c.err) : "data or flags wrong");
		if (!ok)
			break;
		ibft_fill(tgt.buf, len, (unsigned)(200 + i));
		memset(loc.buf, 0, len);
		ok = !POST(fi_read(ns[0]->ep, loc.buf, len, loc.desc,
				   ns[0]->peer[1], tgt.addr, tgt.key, &c)) &&
		     !wait_local(ns[0], &c) && !c.err &&
		     (c.e.flags & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ) &&
		     ibft_verify(loc.buf, len, (unsigned)(200 + i));
		IBFT_CHECK(ok, "rma-read", "%zu bytes: %s", len,
			   c.err ? fi_strerror(c.err) : "data or flags wrong");
	}
}

/* At an offset, into the middle of the region: addresses are virtual. */
static void test_offset(void)
{
	struct comp c = { 0 };
	size_t off = 4096 + 13, len = 5000;
	int ok;

	memset(tgt.buf, 0, RBUF);
	ibft_fill(loc.buf, len, 7);
	ok = !POST(fi_write(ns[0]->ep, loc.buf, len, loc.desc, ns[0]->peer[1],
			    tgt.addr + off, tgt.key, &c)) &&
	     !wait_local(ns[0], &c) && !c.err &&
	     ibft_verify(tgt.buf + off, len, 7) && tgt.buf[off - 1] == 0 &&
	     tgt.buf[off + len] == 0;
	IBFT_CHECK(ok, "rma-write-offset", "%zu bytes at offset %zu", len, off);
}

/* Remote CQ data: B's CQ says FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE,
 * with the data, after the bytes are there. */
static void test_writedata(void)
{
	const size_t lens[] = { 0, 100, 100000 };
	struct comp c = { 0 }, r = { 0 };
	size_t i;
	int ok = 1;

	for (i = 0; ok && i < 3; i++) {
		uint64_t data = 0x1234567800000000ull + i;

		ibft_fill(loc.buf, lens[i], (unsigned)(300 + i));
		memset(tgt.buf, 0, lens[i] + 1);
		ok = !POST(fi_writedata(ns[0]->ep, loc.buf, lens[i], loc.desc,
					data, ns[0]->peer[1], tgt.addr, tgt.key,
					&c)) &&
		     !wait_local(ns[0], &c) && !c.err &&
		     !wait_comp(ns[1], &r, WAIT_MS) && !r.err &&
		     (r.e.flags & FI_REMOTE_CQ_DATA) && (r.e.flags & FI_RMA) &&
		     (r.e.flags & FI_REMOTE_WRITE) &&
		     (r.e.data & 0xffffffffull) == (data & 0xffffffffull) &&
		     ibft_verify(tgt.buf, lens[i], (unsigned)(300 + i));
		IBFT_CHECK(ok, "rma-writedata", "%zu bytes: remote completion "
			   "flags %#llx data %#llx", lens[i],
			   (unsigned long long)r.e.flags,
			   (unsigned long long)r.e.data);
	}
}

/* Injects: the buffer is free on return; a writedata behind them (same
 * peer, RC order) says they landed. */
static void test_inject(void)
{
	uint8_t small[64];
	struct comp r;
	int i, ok = 1;

	memset(tgt.buf, 0, 64 * 8);
	for (i = 0; ok && i < 8; i++) {
		ibft_fill(small, 64, (unsigned)(400 + i));
		ok = !POST(fi_inject_write(ns[0]->ep, small, 64, ns[0]->peer[1],
					   tgt.addr + 64 * i, tgt.key));
		memset(small, 0xee, sizeof(small));	/* ours again */
	}
	ok = ok && !POST(fi_inject_writedata(ns[0]->ep, small, 0, 77,
					     ns[0]->peer[1], tgt.addr, tgt.key)) &&
	     !wait_comp(ns[1], &r, WAIT_MS) && !r.err && r.e.data == 77;
	for (i = 0; ok && i < 8; i++)
		ok = ibft_verify(tgt.buf + 64 * i, 64, (unsigned)(400 + i));
	IBFT_CHECK(ok, "rma-inject", "8 inject writes and an inject writedata");
	ok = idle(ns[0], 200) == 0;
	IBFT_CHECK(ok, "rma-inject-silent", "an inject wrote a completion");
}

/*
 * Without FI_MR_LOCAL a desc is optional: one whose region does not cover
 * the buffer, or lacks the local rights a read needs, must not break the
 * read (nor the connection).
 */
static void test_desc_hint(void)
{
	struct region small;
	uint8_t *big = xbuf(300000);
	struct comp c = { 0 };
	int ok;

	if (ns[0]->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		free(big);
		return;		/* descs are required there, and must fit */
	}
	if (region_open(ns[0], &small, 4096, FI_REMOTE_READ)) {
		free(big);
		return;
	}
	ibft_fill(tgt.buf, 300000, 21);
	ok = !POST(fi_read(ns[0]->ep, big, 300000, small.desc, ns[0]->peer[1],
			   tgt.addr, tgt.key, &c)) &&
	     !wait_local(ns[0], &c) && !c.err && ibft_verify(big, 300000, 21);
	IBFT_CHECK(ok, "rma-desc-hint", "a read with the desc of a 4 KiB "
		   "remote-read-only region: %s",
		   c.err ? fi_strerror(c.err) : "data wrong");
	region_close(&small);
	free(big);
}

/* One RMA from p (write) or into p (read) of len bytes; data checked. */
static int rma_once(uint8_t *p, size_t len, int read, unsigned seed)
{
	struct comp c = { 0 };

	if (read) {
		ibft_fill(tgt.buf, len, seed);
		memset(p, 0, len);
	} else {
		ibft_fill(p, len, seed);
		memset(tgt.buf, 0, len);
	}
	if (read ? POST(fi_read(ns[0]->ep, p, len, NULL, ns[0]->peer[1],
				tgt.addr, tgt.key, &c)) :
		   POST(fi_write(ns[0]->ep, p, len, NULL, ns[0]->peer[1],
				 tgt.addr, tgt.key, &c)))
		return 0;
	if (wait_local(ns[0], &c) || c.err)
		return 0;
	return ibft_verify(read ? p : tgt.buf, len, seed);
}

/*
 * Memory the provider registered itself (no FI_MR_LOCAL) and may keep
 * registered: unmapped and mapped again at the same address, or freed and
 * allocated again, it has new pages.  An RMA from or into it must use
 * them, not the old ones a stale registration still pins.
 */
static void test_reregistration(void)
{
	size_t len = 256 * 1024;
	uint8_t *p, *q;
	int ok, r;

	if (ns[0]->info->domain_attr->mr_mode & FI_MR_LOCAL)
		return;		/* the application registers: nothing to keep */
	for (r = 0; r < 2; r++) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ok = p != MAP_FAILED && rma_once(p, len, r, 31) &&
		     rma_once(p, len, r, 32);
		if (p != MAP_FAILED)
			munmap(p, len);
		q = p == MAP_FAILED ? MAP_FAILED :
		    mmap(p, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		ok = ok && q == p && rma_once(q, len, r, 33);
		IBFT_CHECK(ok, r ? "rma-read-after-remap" : "rma-write-after-remap",
			   "an RMA %s memory unmapped and mapped again at the "
			   "same address", r ? "into" : "from");
		if (q != MAP_FAILED)
			munmap(q, len);
	}
	/* malloc and free of large blocks are mmap and munmap. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	for (r = 0; r < 2; r++) {
		p = malloc(len);
		ok = p && rma_once(p, len, r, 41);
		free(p);
		q = malloc(len);
		ok = ok && q && rma_once(q, len, r, 42);
		IBFT_CHECK(ok, r ? "rma-read-after-free-malloc" :
			   "rma-write-after-free-malloc", "an RMA %s memory "
			   "freed and allocated again (%s address)",
			   r ? "into" : "from", p == q ? "same" : "another");
		free(q);
	}
}

/*
 * RMA above the port's max_msg_sz (8 MiB on rxe), up to the max_msg_size
 * the provider advertises: a provider that posts one work request per RMA
 * cannot.  Words numbered from seed, so a part written at the wrong
 * place, twice or not at all shows (ibft_fill repeats every 64 KiB).
 */
static void big_fill(uint8_t *p, size_t len, uint64_t seed)
{
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t w = (i / 8 + seed) * 0x9e3779b97f4a7c15ull;

		memcpy(p + i, &w, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)(i ^ seed);
}

static int big_same(const uint8_t *p, size_t len, uint64_t seed)
{
	uint8_t w[4096];
	size_t i, n;

	for (i = 0; i < len; i += n) {
		n = IBFT_MIN(sizeof(w), len - i);
		/* The words of [i, i + n): i is a multiple of 8. */
		big_fill(w, n, seed + i / 8);
		if (n % 8)
			for (size_t j = n - n % 8; j < n; j++)
				w[j] = (uint8_t)((i + j) ^ seed);
		if (memcmp(p + i, w, n))
			return 0;
	}
	return 1;
}

#define BIG_WAIT_MS 300000

/* A write of len in three local iovs, then a read of it back. */
static int big_write_read(struct region *t, struct region *l, size_t len)
{
	size_t a = len / 3, b = len - len / 5;
	struct iovec iov[3] = {
		{ l->buf, a }, { l->buf + a, b - a }, { l->buf + b, len - b },
	};
	void *desc[3] = { l->desc, l->desc, l->desc };
	struct comp c = { 0 };
	int ok;

	big_fill(l->buf, len, 5);
	memset(t->buf, 0, len);
	ok = !POST(fi_writev(ns[0]->ep, iov, desc, 3, ns[0]->peer[1], t->addr,
			     t->key, &c)) &&
	     !wait_comp(ns[0], &c, BIG_WAIT_MS) && !c.err &&
	     big_same(t->buf, len, 5);
	IBFT_CHECK(ok, "rma-big-writev", "%zu bytes in 3 iovs: %s", len,
		   c.err ? fi_strerror(c.err) : "not completed or data wrong");
	if (!ok)
		return 0;
	big_fill(t->buf, len, 6);
	memset(l->buf, 0, len);
	ok = !POST(fi_readv(ns[0]->ep, iov, desc, 3, ns[0]->peer[1], t->addr,
			    t->key, &c)) &&
	     !wait_comp(ns[0], &c, BIG_WAIT_MS) && !c.err &&
	     big_same(l->buf, len, 6);
	IBFT_CHECK(ok, "rma-big-readv", "%zu bytes into 3 iovs: %s", len,
		   c.err ? fi_strerror(c.err) : "not completed or data wrong");
	return ok;
}

/*
 * Five writedatas of len at once, the same bytes to the same place: each
 * remote CQ data once, after its bytes.  With send queues of 8 (run-suite's
 * qp8 run), parts and notices wait for slots.
 */
#define BIG_AT_ONCE 5
static void big_writedata_many(struct region *t, struct region *l, size_t len)
{
	struct comp c[BIG_AT_ONCE] = { 0 }, r = { 0 };
	unsigned seen = 0;
	int i, ok = 1;

	big_fill(l->buf, len, 7);
	memset(t->buf, 0, len);
	for (i = 0; ok && i < BIG_AT_ONCE; i++)
		ok = !POST(fi_writedata(ns[0]->ep, l->buf, len, l->desc,
					0x5a00 + i, ns[0]->peer[1], t->addr,
					t->key, &c[i]));
	for (i = 0; ok && i < BIG_AT_ONCE; i++)
		ok = !wait_comp(ns[0], &r, BIG_WAIT_MS) && !r.err;
	for (i = 0; ok && i < BIG_AT_ONCE; i++) {
		ok = !wait_comp(ns[1], &r, WAIT_MS) && !r.err &&
		     (r.e.flags & FI_REMOTE_CQ_DATA) && r.e.data >= 0x5a00 &&
		     r.e.data < 0x5a00 + BIG_AT_ONCE &&
		     !(seen & 1u << (r.e.data - 0x5a00));
		if (ok)
			seen |= 1u << (r.e.data - 0x5a00);
	}
	ok = ok && big_same(t->buf, len, 7);
	IBFT_CHECK(ok, "rma-big-writedata-at-once", "%d of %zu bytes: %s",
		   BIG_AT_ONCE, len, r.err ? fi_strerror(r.err) :
		   "not completed, remote CQ data missing, or the data wrong");
}

/*
 * IBFT_RMA_BIG=N: N bytes (write and read only), else 20 MiB and a bit;
 * either way no more than the provider's max_msg_size.
 */
static void test_big(void)
{
	const char *env = getenv("IBFT_RMA_BIG");
	size_t len = env ? strtoull(env, NULL, 0) : (20u << 20) + 12345;
	struct region t, l;

	len = IBFT_MIN(len, ns[0]->info->ep_attr->max_msg_size);
	if (region_open(ns[1], &t, len, FI_REMOTE_WRITE | FI_REMOTE_READ))
		return;
	if (region_open(ns[0], &l, len, FI_READ | FI_WRITE)) {
		region_close(&t);
		return;
	}
	if (big_write_read(&t, &l, len) && !env)
		big_writedata_many(&t, &l, len);
	region_close(&l);
	region_close(&t);
}

/* To ourselves: A's own address, A's own region. */
static void test_self(void)
{
	struct region mine;
	struct comp c = { 0 };
	int ok;

	if (region_open(ns[0], &mine, 8192, FI_REMOTE_WRITE | FI_REMOTE_READ))
		return;
	memset(mine.buf, 0, 8192);
	ibft_fill(loc.buf, 3000, 9);
	ok = !POST(fi_write(ns[0]->ep, loc.buf, 3000, loc.desc, ns[0]->peer[0],
			    mine.addr, mine.key, &c)) &&
	     !wait_local(ns[0], &c) && !c.err && ibft_verify(mine.buf, 3000, 9);
	IBFT_CHECK(ok, "rma-self", "a write to our own address");
	region_close(&mine);
}

/* A wrong key, a range past the region: the op fails, the next works. */
static void test_bad_access(void)
{
	struct comp c = { 0 };
	int ok, ret;

	ret = (int)POST(fi_write(ns[0]->ep, loc.buf, 100, loc.desc, ns[0]->peer[1],
				 tgt.addr, tgt.key ^ 0x5a5a00, &c));
	ok = ret < 0 || (!wait_local(ns[0], &c) && c.err);
	IBFT_CHECK(ok, "rma-bad-key", "a write with a wrong key did not fail");
	/* What the provider adds must not contradict the error. */
	if (ret >= 0 && c.err)
		IBFT_CHECK(c.why[0] && strncasecmp(c.why, "success", 7),
			   "rma-bad-key-strerror", "fi_cq_strerror of its "
			   "prov_errno says \"%s\"", c.why);
	ret = (int)POST(fi_write(ns[0]->ep, loc.buf, 4096, loc.desc, ns[0]->peer[1],
				 tgt.addr + RBUF - 100, tgt.key, &c));
	ok = ret < 0 || (!wait_local(ns[0], &c) && c.err);
	IBFT_CHECK(ok, "rma-past-region", "a write past the region did not fail");
	if (ibft_deviates("verbs;ofi_rxm", "rma-after-error", "rxm keeps the "
			  "broken connection: the next write fails (canceled)"))
		return;
	ibft_fill(loc.buf, 100, 11);
	ok = !POST(fi_write(ns[0]->ep, loc.buf, 100, loc.desc, ns[0]->peer[1],
			    tgt.addr, tgt.key, &c)) &&
	     !wait_local(ns[0], &c) && !c.err && ibft_verify(tgt.buf, 100, 11);
	IBFT_CHECK(ok, "rma-after-error", "a good write after the failures: %s",
		   c.err ? fi_strerror(c.err) : "data wrong");
}

/* n's region of len bytes at buf under requested key, readable and
 * writable by peers (bound to n's endpoint where mr_mode asks). */
static int reg_keyed(struct node *n, void *buf, size_t len, uint64_t key,
		     struct fid_mr **mr)
{
	int ret = fi_mr_reg(n->domain, buf, len, FI_REMOTE_WRITE | FI_REMOTE_READ,
			    0, key, 0, mr, NULL);

	if (!ret && (n->info->domain_attr->mr_mode & FI_MR_ENDPOINT) &&
	    !(ret = fi_mr_bind(*mr, &n->ep->fid, 0)))
		ret = fi_mr_enable(*mr);
	return ret;
}

/*
 * Requested keys (IBFT_MR_REQKEY): a key taken twice is refused; a key
 * B never registered fails the write (-FI_EACCES), and the next works;
 * B closes a region A has written and registers another buffer under its
 * key, tells A by a message, and A's next write lands in the new buffer;
 * an atomic names a region by key and offset.
 */
static void test_reqkey(void)
{
	static uint8_t one[4096], two[4096];
	struct fid_mr *m1 = NULL, *m2 = NULL, *dup = NULL;
	uint64_t v = 5, old = 0, addend = 3;
	uint8_t msg[16] = "moved", got[16] = "";
	struct node *a, *b;
	struct comp c = { 0 };
	int ok, ret;

	want_mr_mode = rma_mr_mode();
	a = node_open(0, FI_MSG | FI_RMA | FI_ATOMIC, 0);
	b = node_open(1, FI_MSG | FI_RMA | FI_ATOMIC, 0);
	if (!a || !b || insert_all((struct node *[]){ a, b }, 2))
		goto out;
	ok = !reg_keyed(b, one, sizeof(one), 77, &m1);
	if (!IBFT_CHECK(ok && fi_mr_key(m1) == 77, "rma-reqkey-reg",
			"a region keyed 77: key %llu", m1 ?
			(unsigned long long)fi_mr_key(m1) : 0ull))
		goto out;
	ret = fi_mr_reg(b->domain, two, sizeof(two), FI_REMOTE_WRITE, 0, 77, 0,
			&dup, NULL);
	IBFT_CHECK(ret == -FI_ENOKEY, "rma-reqkey-taken", "a second region "
		   "keyed 77: %d (-FI_ENOKEY)", ret);
	IBFT_CLOSE(dup);
	ret = (int)POST(fi_write(a->ep, msg, 8, NULL, a->peer[1], 0, 78, &c));
	ok = !ret && !wait_comp(a, &c, WAIT_MS) && c.err == FI_EACCES;
	IBFT_CHECK(ok, "rma-reqkey-unknown", "a write under key 78, which B "
		   "never registered: %s", ret ? fi_strerror(-ret) :
		   fi_strerror(c.err));
	ok = !POST(fi_write(a->ep, msg, 8, NULL, a->peer[1], 100, 77, &c)) &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err && !memcmp(one + 100, msg, 8);
	IBFT_CHECK(ok, "rma-reqkey-offset", "a write at offset 100 of key 77: "
		   "%s", c.err ? fi_strerror(c.err) : "not there");
	/* B moves key 77 to another buffer, then tells A. */
	fi_close(&m1->fid);
	m1 = NULL;
	ok = !reg_keyed(b, two, sizeof(two), 77, &m2) &&
	     !fi_recv(a->ep, got, sizeof(got), NULL, FI_ADDR_UNSPEC, got) &&
	     !POST(fi_send(b->ep, msg, sizeof(msg), NULL, b->peer[0], msg)) &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err && !wait_comp(b, &c, WAIT_MS);
	memset(one, 0, sizeof(one));
	ok = ok && !POST(fi_write(a->ep, "again!!", 8, NULL, a->peer[1], 200, 77,
				  &c)) &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err &&
	     !memcmp(two + 200, "again!!", 8) && one[200] == 0;
	IBFT_CHECK(ok, "rma-reqkey-moved", "after B registered another buffer "
		   "under key 77 and said so, A's write went %s",
		   c.err ? fi_strerror(c.err) : one[200] ? "to the old buffer" :
		   "nowhere");
	memcpy(two + 8, &v, sizeof(v));
	ok = !POST(fi_fetch_atomic(a->ep, &addend, 1, NULL, &old, NULL,
				   a->peer[1], 8, 77, FI_UINT64, FI_SUM, &c)) &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err && old == 5 &&
	     !memcmp(two + 8, &(uint64_t){ 8 }, 8);
	IBFT_CHECK(ok, "rma-reqkey-atomic", "a fetch-add at offset 8 of key 77: "
		   "old %llu (5), %s", (unsigned long long)old,
		   c.err ? fi_strerror(c.err) : "");
out:
	IBFT_CLOSE(m1);
	IBFT_CLOSE(m2);
	close_all();
}

/*
 * Requested keys, an endpoint to itself: it reads 256 bytes of its own
 * 512-byte region keyed 79, closes it, registers 4 KiB under key 79 and
 * writes 1 KiB there.  MPICH's ch4:ofi does so for a long message a rank
 * sends itself: it registers the buffer under a key it frees and reuses
 * at the next, and reads it with fi_read from its own address.
 */
static void test_reqkey_self(void)
{
	static uint8_t small[512], big[4096], buf[1024];
	struct fid_mr *m = NULL;
	struct node *a;
	struct comp c = { 0 };
	int ok;

	want_mr_mode = rma_mr_mode();
	a = node_open(0, FI_MSG | FI_RMA, 0);
	if (!a || insert_all((struct node *[]){ a }, 1))
		goto out;
	memset(small, 's', sizeof(small));
	ok = !reg_keyed(a, small, sizeof(small), 79, &m) &&
	     !POST(fi_read(a->ep, buf, 256, NULL, a->peer[0], 0, 79, &c)) &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err && buf[255] == 's';
	IBFT_CHECK(ok, "rma-reqkey-self-read", "a read from its own region "
		   "keyed 79: %s", c.err ? fi_strerror(c.err) : "not there");
	IBFT_CLOSE(m);
	memset(buf, 'b', sizeof(buf));
	ok = ok && !reg_keyed(a, big, sizeof(big), 79, &m) &&
	     !POST(fi_write(a->ep, buf, sizeof(buf), NULL, a->peer[0], 0, 79,
			    &c)) &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err && big[1023] == 'b';
	IBFT_CHECK(ok, "rma-reqkey-self-moved", "key 79 moved to a larger "
		   "region: a 1 KiB write to itself %s",
		   c.err ? fi_strerror(c.err) : "failed or did not land");
	IBFT_CLOSE(m);
out:
	close_all();
}

/*
 * IBFT_NO_UFFD=1: this process may not use userfaultfd (as a user whose
 * kernel does not allow it), so the provider's registration cache cannot
 * watch memory: every RMA must work all the same, registering per
 * operation.  A seccomp filter answers the system call with ENOSYS.
 */
static int deny_userfaultfd(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_userfaultfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	       prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(int argc, char **argv)
{
	ibft_parse(argc, argv, "-s ADDR_A [-d ADDR_B]");
	reqkey = getenv("IBFT_MR_REQKEY") != NULL;
	if (getenv("IBFT_NO_UFFD") && deny_userfaultfd()) {
		fprintf(stderr, "ibft_rdm_rma: cannot deny userfaultfd: %s\n",
			strerror(errno));
		return 2;
	}
	if (!ibft_opts.src) {
		fprintf(stderr, "ibft_rdm_rma needs -s ADDR_A\n");
		return 2;
	}
	if (getenv("IBFT_RMA_BIG")) {
		if (!open_pair())
			test_big();
		region_close(&tgt);
		region_close(&loc);
		close_all();
		return ibft_finish();
	}
	if (!open_pair()) {
		test_write_read();
		test_offset();
		test_writedata();
		test_inject();
		test_self();
		test_desc_hint();
		test_reregistration();
		test_big();
		test_bad_access();	/* rxm's connection stays broken after */
	}
	region_close(&tgt);
	if (ns[0] && ns[1] && loc.buf)
		test_counters();
	region_close(&loc);
	/* Endpoints, then the counters bound to them, then the rest. */
	for (int i = 0; i < 2; i++) {
		if (ns[i] && ns[i]->ep) {
			fi_close(&ns[i]->ep->fid);
			ns[i]->ep = NULL;
		}
	}
	counters_close();
	close_all();
	test_rma_event(FI_MSG | FI_RMA | FI_RMA_EVENT, "rma-event");
	test_rma_event(FI_MSG | FI_RMA, "rma-event-initiator-without-cap");
	test_no_rma_caps();
	if (reqkey) {
		test_reqkey();
		test_reqkey_self();
	}
	return ibft_finish();
}
