/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM waiting and progress (run by ibft_rdm): fi_cq_sread, poll
 * sets, and automatic progress with nobody reading the CQ.
 */
/* Poll sets are libfabric 1.x API that 2.x deprecates: tested on purpose
 * (ibfab serves 1.x callers). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ibft_rdm_node.h"

/*
 * fi_cq_sread on an RDM endpoint's CQ (FI_WAIT_FD) sleeps until a message
 * arrives and wakes for each step of a rendezvous it must drive itself.
 */
void test_sread(void)
{
	size_t big = IBFT_MIN(ibft_opts.max_size, 1 << 20);
	uint8_t *s = xbuf(big), *r = xbuf(big), small[100], rs[100];
	struct fi_cq_tagged_entry e;
	struct node *ns[2];
	struct comp c = { 0 };
	int ok, got = 0, i;
	ssize_t n;

	want_wait = FI_WAIT_FD;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	want_wait = FI_WAIT_NONE;
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ibft_fill(small, sizeof(small), 1);
	ibft_fill(s, big, 2);
	ok = !fi_trecv(ns[1]->ep, rs, sizeof(rs), NULL, FI_ADDR_UNSPEC, 1, 0, rs);
	ok &= !fi_trecv(ns[1]->ep, r, big, NULL, FI_ADDR_UNSPEC, 2, 0, r);
	ok &= !POST(fi_tsend(ns[0]->ep, small, sizeof(small), NULL, ns[0]->peer[1], 1, small));
	ok &= !POST(fi_tsend(ns[0]->ep, s, big, NULL, ns[0]->peer[1], 2, s));
	/* Only the receiver's CQ is read, and only by blocking reads. */
	for (i = 0; ok && got < 2 && i < 20; i++) {
		n = fi_cq_sread(ns[1]->cq, &e, 1, NULL, 5000);
		if (n == 1)
			got++;
		else if (n != -FI_EAGAIN)
			ok = 0;
	}
	ok = ok && got == 2 && ibft_verify(rs, sizeof(rs), 1) && ibft_verify(r, big, 2);
	IBFT_CHECK(ok, "rdm-cq-sread", "%d of 2 receives through fi_cq_sread", got);
	ok = !wait_comp(ns[0], &c, WAIT_MS) && !c.err && !wait_comp(ns[0], &c, WAIT_MS) && !c.err;
	IBFT_CHECK(ok, "rdm-cq-sread-sends", "the sends did not complete");
out:
	free(s);
	free(r);
	close_all();
}

/* A poll set names the CQ that has a completion, and only it. */
void test_poll(void)
{
	struct fi_poll_attr attr = { 0 };
	struct fid_poll *ps = NULL;
	struct node *ns[2];
	uint8_t m[16] = "poll", r[16];
	struct fi_cq_tagged_entry e;
	void *ctx[4];
	long end;
	int ok, n = 0, ret;

	ns[0] = node_open(0, FI_MSG, 0);
	ns[1] = node_open(1, FI_MSG, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ret = fi_poll_open(ns[1]->domain, &attr, &ps);
	if (!IBFT_CHECK(!ret, "rdm-poll-open", "fi_poll_open: %s", fi_strerror(-ret)))
		goto out;
	ok = !fi_poll_add(ps, &ns[1]->cq->fid, 0);
	ok = ok && fi_poll(ps, ctx, 4) == 0;
	IBFT_CHECK(ok, "rdm-poll-empty", "an empty CQ was named");
	ok = !fi_recv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, r);
	ok &= !POST(fi_send(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], m));
	for (end = now_ms() + WAIT_MS; ok && !n && now_ms() < end;) {
		n = fi_poll(ps, ctx, 4);
		fi_cq_read(ns[0]->cq, &e, 1);	/* the sender's progress */
	}
	ok = ok && n == 1 && ctx[0] == ns[1] &&
	     fi_cq_read(ns[1]->cq, &e, 1) == 1 && e.op_context == r;
	IBFT_CHECK(ok, "rdm-poll", "fi_poll gave %d, context %p (want %p)", n,
		   n > 0 ? ctx[0] : NULL, (void *)ns[1]);
	IBFT_EXPECT(fi_poll_del(ps, &ns[1]->cq->fid, 0), 0, "rdm-poll-del");
out:
	IBFT_CLOSE(ps);
	close_all();
}

/*
 * FI_PROGRESS_AUTO: a rendezvous send completes while only the sender
 * reads its CQ; the receiver's reads and FIN happen without it.
 */
void test_auto_progress(void)
{
	size_t big = IBFT_MIN(ibft_opts.max_size, 1 << 20);
	uint8_t *s = xbuf(big), *r = xbuf(big);
	struct fi_info *h, *info = NULL;
	struct node *ns[2] = { 0 };
	struct comp c = { 0 };
	int ok;

	h = rdm_hints(FI_TAGGED);
	h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	ok = !fi_getinfo(FI_VERSION(1, 17), ibft_opts.src, NULL, FI_SOURCE, h, &info);
	fi_freeinfo(h);
	fi_freeinfo(info);
	if (!ok) {
		printf("skip - rdm-auto-progress [%s]: no FI_PROGRESS_AUTO offered\n",
		       ibft_opts.prov);
		goto out;
	}
	want_progress = FI_PROGRESS_AUTO;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	want_progress = FI_PROGRESS_UNSPEC;
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ibft_fill(s, big, 4);
	memset(r, 0, big);
	ok = !fi_trecv(ns[1]->ep, r, big, NULL, FI_ADDR_UNSPEC, 4, 0, r);
	ok &= !POST(fi_tsend(ns[0]->ep, s, big, NULL, ns[0]->peer[1], 4, s));
	if (!ibft_deviates("verbs;ofi_rxm", "rdm-auto-progress", "takes "
			   "FI_PROGRESS_AUTO, but a rendezvous send completes "
			   "only once the receiver reads its CQ")) {
		ok = ok && !wait_comp_alone(ns[0], &c, WAIT_MS) && !c.err;
		IBFT_CHECK(ok, "rdm-auto-progress", "the send did not complete "
			   "while the receiver was not reading its CQ");
	}
	ok = ok && !wait_comp(ns[1], &c, WAIT_MS) && !c.err && ibft_verify(r, big, 4);
	IBFT_CHECK(ok, "rdm-auto-progress-data", "the receive is wrong");
out:
	free(s);
	free(r);
	close_all();
}
