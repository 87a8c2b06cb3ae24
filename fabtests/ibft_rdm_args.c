/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM: arguments no provider may trust (run by ibft_rdm -t args):
 * iov lengths whose sum wraps, and a claim with a stale context.
 * Lengths whose sum wraps past SIZE_MAX add up to a few bytes, so a
 * provider that sums them without a check takes its small-message path
 * and then copies the full lengths: each call must fail with -FI_EINVAL
 * (or another error), and the endpoint must go on working.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ibft_rdm_node.h"

void test_iov_wrap(void)
{
	struct node *ns[2];
	uint8_t buf[64] = "wrapped", in[64] = "";
	/* 16 + (SIZE_MAX - 7) = 8 (mod 2^64): a "small" message. */
	struct iovec wrap[2] = { { buf, 16 }, { buf + 16, SIZE_MAX - 7 } };
	struct comp c = { 0 };
	int ok;

	ns[0] = node_open(0, FI_MSG | FI_TAGGED, 0);
	ns[1] = node_open(1, FI_MSG | FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ok = fi_sendv(ns[0]->ep, wrap, NULL, 2, ns[0]->peer[1], buf) < 0;
	IBFT_CHECK(ok, "rdm-iov-wrap-sendv", "fi_sendv took lengths whose sum wraps");
	ok = fi_tsendv(ns[0]->ep, wrap, NULL, 2, ns[0]->peer[1], 3, buf) < 0;
	IBFT_CHECK(ok, "rdm-iov-wrap-tsendv", "fi_tsendv took lengths whose sum wraps");
	/* rxm posts such a receive, which then takes the next message. */
	if (ibft_deviates("verbs;ofi_rxm", "rdm-iov-wrap-recvv", "fi_recvv "
			  "with lengths whose sum wraps is posted"))
		goto out;
	ok = fi_recvv(ns[1]->ep, wrap, NULL, 2, FI_ADDR_UNSPEC, in) < 0;
	IBFT_CHECK(ok, "rdm-iov-wrap-recvv", "fi_recvv took lengths whose sum wraps");
	/* Nothing was sent or posted: the next message is the first. */
	ok = !fi_recv(ns[1]->ep, in, sizeof(in), NULL, FI_ADDR_UNSPEC, in) &&
	     !POST(fi_send(ns[0]->ep, buf, 8, NULL, ns[0]->peer[1], buf)) &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err && c.e.len == 8 &&
	     c.e.op_context == in && !memcmp(in, "wrapped", 8) &&
	     !wait_comp(ns[0], &c, WAIT_MS) && c.e.op_context == buf &&
	     !idle(ns[1], 100);
	IBFT_CHECK(ok, "rdm-iov-wrap-then-send", "a send after the refusals: "
		   "err %d, %zu bytes", c.err, c.e.len);
out:
	close_all();
}

/*
 * FI_CLAIM with a stale context: a copy of the context of a claim that
 * was completed already, whose message buffer by then holds another,
 * unexpected, message (BURST of them go by, so every buffer is used
 * again).  The claim is refused, and every message is received once.
 */
#define BURST 600
void test_stale_claim(void)
{
	struct node *ns[2];
	struct fi_context ctx, stale;
	uint8_t r[8], m[8] = "m";
	uint32_t *seen = calloc(BURST, sizeof(*seen)), v;
	struct comp c = { 0 };
	int i, ok, dup = 0, lost = 0;

	if (ibft_deviates("verbs;ofi_rxm", "rdm-claim-stale-context", "a claim "
			  "with a stale context is taken"))
		goto out;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ok = !POST(fi_tinject(ns[0]->ep, m, 1, ns[0]->peer[1], 50));
	do {	/* peek and claim it once it is there */
		ok = ok && !trecv_flags(ns[1], 50, FI_PEEK | FI_CLAIM, &ctx, NULL, 0) &&
		     !wait_comp(ns[1], &c, WAIT_MS);
	} while (ok && c.err == FI_ENOMSG);
	stale = ctx;
	ok = ok && !c.err && !trecv_flags(ns[1], 50, FI_CLAIM, &ctx, r, sizeof(r)) &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err && r[0] == 'm';
	/* Every buffer of the receiver holds a message in turn. */
	for (i = 0; ok && i < BURST; i++) {
		v = (uint32_t)i;
		ok = !POST(fi_tinject(ns[0]->ep, &v, sizeof(v), ns[0]->peer[1], 51));
		if (i % 64 == 63)
			idle(ns[1], 50);
	}
	idle(ns[1], 300);
	ok = ok && trecv_flags(ns[1], 51, FI_CLAIM, &stale, r, sizeof(r)) < 0;
	IBFT_CHECK(ok, "rdm-claim-stale-context", "FI_CLAIM with the context of "
		   "a claim already taken was accepted");
	/* And each message still arrives, once. */
	for (i = 0; i < BURST + 1; i++) {
		v = UINT32_MAX;
		if (fi_trecv(ns[1]->ep, &v, sizeof(v), NULL, FI_ADDR_UNSPEC, 51, 0,
			     &v) || wait_comp(ns[1], &c, i < BURST ? WAIT_MS : 300))
			break;
		if (v < BURST)
			dup += seen[v]++ > 0;
	}
	fi_cancel(&ns[1]->ep->fid, &v);
	for (i = 0; i < BURST; i++)
		lost += !seen[i];
	IBFT_CHECK(!dup && !lost, "rdm-claim-stale-every-message-once", "%d "
		   "messages received twice, %d never", dup, lost);
out:
	free(seen);
	close_all();
}
