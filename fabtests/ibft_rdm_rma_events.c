/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What FI_EP_RDM RMA tells whom (run by ibft_rdm_rma): counters of both
 * sides, FI_RMA_EVENT at the target (and not without it), and an
 * endpoint opened without RMA capabilities.
 */
#include <stdlib.h>
#include <string.h>

#include "ibft_rdm_rma.h"

static struct fid_cntr *cntr_open(struct node *n)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP };
	struct fid_cntr *c = NULL;

	if (fi_cntr_open(n->domain, &attr, &c, NULL))
		return NULL;
	return c;
}

/* Closed after the endpoints they are bound to. */
static struct fid_cntr *wr, *rd, *rw;

/* FI_WRITE and FI_READ counters at A; FI_REMOTE_WRITE at B (writedata). */
void test_counters(void)
{
	const uint64_t fa[2] = { FI_WRITE, FI_READ }, fb[1] = { FI_REMOTE_WRITE };
	struct fid_cntr *ca[2], *cb[1];
	struct region t2 = { 0 };
	struct comp c = { 0 };
	ssize_t ret = 0;
	int i, ok;

	wr = cntr_open(ns[0]);
	rd = cntr_open(ns[0]);
	rw = cntr_open(ns[1]);
	ca[0] = wr;
	ca[1] = rd;
	cb[0] = rw;
	ok = wr && rd && rw;

	ok = ok && !node_ep_open_bind(ns[0], FI_SELECTIVE_COMPLETION, ca, fa, 2) &&
	     !node_ep_open_bind(ns[1], 0, cb, fb, 1) && !insert_all(ns, 2) &&
	     !region_open(ns[1], &t2, 8192, FI_REMOTE_WRITE | FI_REMOTE_READ);
	IBFT_CHECK(ok, "rma-cntr-bind", "counters with FI_WRITE, FI_READ, "
		   "FI_REMOTE_WRITE");
	for (i = 0; ok && i < 5; i++)
		ok = !(ret = POST(fi_write(ns[0]->ep, loc.buf, 100, loc.desc,
					   ns[0]->peer[1], t2.addr, t2.key, NULL)));
	for (i = 0; ok && i < 3; i++)
		ok = !(ret = POST(fi_read(ns[0]->ep, loc.buf, 100, loc.desc,
					  ns[0]->peer[1], t2.addr, t2.key, NULL)));
	ok = ok && !(ret = POST(fi_writedata(ns[0]->ep, loc.buf, 8, loc.desc, 5,
					     ns[0]->peer[1], t2.addr, t2.key,
					     NULL)));
	IBFT_CHECK(ok, "rma-cntr-post", "posting: %s", fi_strerror((int)-ret));
	for (i = 0; ok && i < 2000 && (fi_cntr_read(wr) < 6 ||
				       fi_cntr_read(rd) < 3 ||
				       fi_cntr_read(rw) < 1); i++)
		idle(ns[0], 10);
	ok = ok && fi_cntr_read(wr) == 6 && fi_cntr_read(rd) == 3 &&
	     fi_cntr_read(rw) == 1 && !fi_cntr_readerr(wr);
	IBFT_CHECK(ok, "rma-cntr", "write %llu (6), read %llu (3), remote "
		   "write %llu (1); errors %llu, %llu, %llu",
		   wr ? (unsigned long long)fi_cntr_read(wr) : 0ull,
		   rd ? (unsigned long long)fi_cntr_read(rd) : 0ull,
		   rw ? (unsigned long long)fi_cntr_read(rw) : 0ull,
		   wr ? (unsigned long long)fi_cntr_readerr(wr) : 0ull,
		   rd ? (unsigned long long)fi_cntr_readerr(rd) : 0ull,
		   rw ? (unsigned long long)fi_cntr_readerr(rw) : 0ull);
	/* The writedata's remote completion is still in B's CQ. */
	ok = !wait_comp(ns[1], &c, WAIT_MS) && (c.e.flags & FI_REMOTE_CQ_DATA);
	IBFT_CHECK(ok, "rma-cntr-remote-cq", "no remote completion at B");
	region_close(&t2);
}

/* test_counters' counters, once the endpoints they are bound to are closed. */
void counters_close(void)
{
	IBFT_CLOSE(wr);
	IBFT_CLOSE(rd);
	IBFT_CLOSE(rw);
	wr = rd = rw = NULL;
}

/*
 * FI_RMA_EVENT: the target's counters bound with FI_REMOTE_WRITE and
 * FI_REMOTE_READ count the writes and reads it was the target of, and a
 * counter bound to the region (fi_mr_bind) the writes into it, waited
 * for with fi_cntr_wait alone (it must progress the target).  FI_RMA_EVENT
 * is the target's capability: the initiator may be opened without it
 * (a_caps; OpenSHMEM opens its initiators so) and it is all the same.
 */
void test_rma_event(uint64_t a_caps, const char *name)
{
	struct fid_cntr *c[2] = { NULL, NULL }, *mc = NULL;
	const uint64_t f[2] = { FI_REMOTE_WRITE, FI_REMOTE_READ };
	struct region t = { 0 };
	uint8_t buf[64];
	struct node *a, *b;
	int i, ok;

	if (ibft_deviates("verbs;ofi_rxm", name, "rxm offers no FI_RMA_EVENT"))
		return;
	want_mr_mode = rma_mr_mode();
	a = node_open(0, a_caps, 0);
	b = node_open(1, FI_MSG | FI_RMA | FI_RMA_EVENT, 0);
	if (!a || !b)
		goto out;
	c[0] = cntr_open(b);
	c[1] = cntr_open(b);
	mc = cntr_open(b);
	ok = c[0] && c[1] && mc && !node_ep_open_bind(b, 0, c, f, 2) &&
	     !insert_all((struct node *[]){ a, b }, 2) &&
	     !region_open(b, &t, 4096, FI_REMOTE_WRITE | FI_REMOTE_READ) &&
	     !fi_mr_bind(t.mr, &mc->fid, FI_REMOTE_WRITE);
	for (i = 0; ok && i < 3; i++)
		ok = !POST(fi_write(a->ep, buf, sizeof(buf), NULL, a->peer[1],
				    t.addr, t.key, NULL));
	for (i = 0; ok && i < 2; i++)
		ok = !POST(fi_read(a->ep, buf, sizeof(buf), NULL, a->peer[1],
				   t.addr, t.key, NULL));
	/* A's five complete with A alone progressed (with requested keys,
	 * B must answer A's question first: both are); then B's region
	 * counter is waited for alone, and must progress B to see the
	 * notices. */
	for (i = 0; ok && i < 5; i++) {
		struct comp cp;

		ok = !(reqkey ? wait_comp : wait_comp_alone)(a, &cp, WAIT_MS) &&
		     !cp.err;
	}
	ok = ok && !fi_cntr_wait(mc, 3, WAIT_MS);
	for (i = 0; ok && i < 2000 && (fi_cntr_read(c[0]) < 3 ||
				       fi_cntr_read(c[1]) < 2); i++)
		idle(a, 10);
	ok = ok && fi_cntr_read(c[0]) == 3 && fi_cntr_read(c[1]) == 2 &&
	     fi_cntr_read(mc) == 3;
	IBFT_CHECK(ok, name, "the target counted %llu writes (3) and "
		   "%llu reads (2); the region's counter %llu (3)",
		   c[0] ? (unsigned long long)fi_cntr_read(c[0]) : 0ull,
		   c[1] ? (unsigned long long)fi_cntr_read(c[1]) : 0ull,
		   mc ? (unsigned long long)fi_cntr_read(mc) : 0ull);
	region_close(&t);
	IBFT_CLOSE(mc);
out:
	for (i = 0; i < 2; i++) {
		struct node *n = i ? b : a;

		if (n && n->ep) {
			fi_close(&n->ep->fid);
			n->ep = NULL;
		}
	}
	for (i = 0; i < 2; i++)
		IBFT_CLOSE(c[i]);
	close_all();
}

/* Opened for messages only: RMA is refused, not attempted. */
void test_no_rma_caps(void)
{
	struct node *a, *b;
	uint8_t buf[8];
	int ret;

	want_mr_mode = 0;
	a = node_open(0, FI_MSG, 0);
	b = node_open(1, FI_MSG, 0);
	if (!a || !b || insert_all((struct node *[]){ a, b }, 2))
		goto out;
	IBFT_CHECK(!(a->info->caps & FI_RMA) &&
		   a->info->domain_attr->mr_mode == 0, "rma-msg-only-info",
		   "messaging caps got mr_mode %#x, caps %#llx",
		   a->info->domain_attr->mr_mode,
		   (unsigned long long)a->info->caps);
	if (ibft_deviates("verbs;ofi_rxm", "rma-refused-without-cap",
			  "rxm posts RMA on an endpoint opened without FI_RMA"))
		goto out;
	ret = (int)fi_write(a->ep, buf, sizeof(buf), NULL, a->peer[1], 0, 1, NULL);
	IBFT_CHECK(ret == -FI_EOPNOTSUPP || ret == -FI_ENOSYS,
		   "rma-refused-without-cap", "fi_write returned %d", ret);
out:
	close_all();
}
