/*
 * FI_EP_RDM: arguments no provider may trust (run by ibft_rdm -t args).
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
