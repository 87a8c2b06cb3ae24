/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM cancel, and synchronous sends built as MPI libraries build
 * them (run by ibft_rdm -t cancel and -t ssend).
 *
 * Open MPI's OFI MTL sends MPI_Issend as a tagged message with a
 * protocol bit set, after posting an exact-tag, zero-byte receive for the
 * acknowledgement, which the receiver sends back (the same tag, the
 * acknowledgement bit instead, flags 0 so no completion) once its receive
 * matched.  The tests here run that protocol to self and to a peer, with
 * fi_cancel of contexts that are not posted receives in between, and
 * check that nothing completes early, nothing is left behind and nothing
 * takes the next messages on the same tags.
 */
#include <stdlib.h>
#include <string.h>

#include "ibft_rdm_node.h"

/* The MTL's protocol bits (CQ-data tag layout, mtl_ofi_types.h). */
#define SYNC_SEND 0x0000000100000000ULL
#define SYNC_ACK 0x0000000200000000ULL

void test_cancel(void)
{
	struct node *a = node_open(0, FI_TAGGED | FI_MSG, 0);
	uint8_t buf[16];
	struct comp c = { 0 };
	int ok;

	if (!a)
		goto out;
	ok = !fi_trecv(a->ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, 99, 0, buf);
	ok &= !fi_cancel(&a->ep->fid, buf);
	ok = ok && !wait_comp(a, &c, WAIT_MS);
	IBFT_CHECK(ok && c.err == FI_ECANCELED && c.e.op_context == buf,
		   "rdm-cancel", "err %d context %p", c.err, c.e.op_context);
	ok = !fi_recv(a->ep, buf, sizeof(buf), NULL, FI_ADDR_UNSPEC, buf + 1);
	ok &= !fi_cancel(&a->ep->fid, buf + 1);
	ok = ok && !wait_comp(a, &c, WAIT_MS);
	IBFT_CHECK(ok && c.err == FI_ECANCELED && c.e.op_context == buf + 1,
		   "rdm-cancel-msg", "err %d", c.err);
out:
	close_all();
}

/*
 * fi_cancel of a context no posted receive has: nothing is cancelled and
 * nothing is reported (fi_endpoint(3): no entry for fi_cancel itself).
 * The provider may answer 0 or -FI_ENOENT.
 */
static int cancel_none(struct node *n, void *context)
{
	ssize_t ret = fi_cancel(&n->ep->fid, context);

	return ret == 0 || ret == -FI_ENOENT;
}

static int send_flagged(struct node *n, void *buf, size_t len, fi_addr_t to,
			uint64_t tag, void *ctx, uint64_t flags)
{
	struct iovec iov = { buf, len };
	struct fi_msg_tagged m = {
		.msg_iov = len ? &iov : NULL, .iov_count = len ? 1 : 0,
		.addr = to, .tag = tag, .context = ctx,
	};

	return (int)POST(fi_tsendmsg(n->ep, &m, flags));
}

static int recv_flagged(struct node *n, void *buf, size_t len, fi_addr_t from,
			uint64_t tag, uint64_t ignore, void *ctx)
{
	struct iovec iov = { buf, len };
	struct fi_msg_tagged m = {
		.msg_iov = len ? &iov : NULL, .iov_count = len ? 1 : 0,
		.addr = from, .tag = tag, .ignore = ignore, .context = ctx,
	};

	return (int)fi_trecvmsg(n->ep, &m, FI_COMPLETION);
}

/* The completions one synchronous send can bring, by context. */
struct ssend_seen {
	struct fi_context2 send, ack, recv;
	int nsend, nack, nrecv;
	struct comp ack_c, recv_c;
};

/* Read n's next completion into seen; 0 if it is none of the three or
 * failed. */
static int ssend_take(struct node *n, struct ssend_seen *seen, int timeout_ms)
{
	struct comp c = { 0 };

	if (wait_comp(n, &c, timeout_ms) || c.err)
		return 0;
	if (c.e.op_context == &seen->send)
		return ++seen->nsend == 1;
	if (c.e.op_context == &seen->ack)
		return (seen->ack_c = c, ++seen->nack == 1);
	if (c.e.op_context == &seen->recv)
		return (seen->recv_c = c, ++seen->nrecv == 1);
	return 0;
}

/*
 * One synchronous send of len bytes from a to b (b == a: to self), with
 * cancels of contexts that are no posted receive on the way: before its
 * receive the send may complete locally, the acknowledgement's receive
 * may not.  Then the receive, the acknowledgement, and plain traffic on
 * the same tag.  *why says what failed.
 */
static int ssend_one(struct node *a, fi_addr_t a_to_b, struct node *b,
		     fi_addr_t b_to_a, size_t len, uint64_t tag, const char **why)
{
	uint8_t *s = xbuf(len), *r = xbuf(len), v1 = 0x5a, v2 = 0;
	struct ssend_seen seen = { 0 };
	struct fi_context2 stray;
	int ok = 0;

	ibft_fill(s, len, (unsigned)tag);
	memset(r, 0, len);
	*why = "posting the acknowledgement's receive or the send";
	if (recv_flagged(a, NULL, 0, a_to_b, tag | SYNC_ACK, 0, &seen.ack) ||
	    send_flagged(a, s, len, a_to_b, tag | SYNC_SEND, &seen.send, FI_COMPLETION))
		goto out;
	*why = "fi_cancel of a context that is not a posted receive";
	if (!cancel_none(a, &seen.send) || !cancel_none(a, &stray) ||
	    !cancel_none(b, &seen.send))
		goto out;
	*why = "something completed before the receive was posted";
	if (idle(a, 300) > 1 || (idle(a, 0) == 1 && !ssend_take(a, &seen, 0)) ||
	    seen.nack || (b != a && idle(b, 0)))
		goto out;
	*why = "the receive";
	if (recv_flagged(b, r, len, FI_ADDR_UNSPEC, tag, SYNC_SEND, &seen.recv))
		goto out;
	while (!seen.nrecv)	/* to self, the send may complete first */
		if (!ssend_take(b, &seen, WAIT_MS) || seen.nack)
			goto out;
	if (seen.recv_c.e.len != len || seen.recv_c.e.tag != (tag | SYNC_SEND) ||
	    memcmp(s, r, len))
		goto out;
	*why = "fi_cancel of a completed receive's context";
	if (!cancel_none(b, &seen.recv))
		goto out;
	/* The acknowledgement, as the MTL sends it: flags 0, no context. */
	*why = "the acknowledgement";
	if (send_flagged(b, NULL, 0, b_to_a,
			 (seen.recv_c.e.tag | SYNC_ACK) & ~SYNC_SEND, NULL, 0))
		goto out;
	while (!seen.nack || !seen.nsend)
		if (!ssend_take(a, &seen, WAIT_MS))
			goto out;
	if (seen.ack_c.e.len || seen.ack_c.e.tag != (tag | SYNC_ACK))
		goto out;
	*why = "a completion left over after the exchange";
	if (idle(a, 200) || (b != a && idle(b, 0)))
		goto out;
	/* Plain traffic on the tag goes to the receive posted for it. */
	*why = "plain traffic on the same tag afterwards";
	memset(&seen, 0, sizeof(seen));
	if (recv_flagged(b, &v2, 1, FI_ADDR_UNSPEC, tag, SYNC_SEND, &seen.recv) ||
	    send_flagged(a, &v1, 1, a_to_b, tag, &seen.send, FI_COMPLETION))
		goto out;
	while (!seen.nsend || !seen.nrecv)
		if (!ssend_take(seen.nsend ? b : a, &seen, WAIT_MS))
			goto out;
	ok = v2 == v1 && !idle(a, 100) && (b == a || !idle(b, 0));
out:
	free(s);
	free(r);
	return ok;
}

void test_ssend(void)
{
	static const size_t sizes[] = { 8, 4096, 65536 };
	struct node *ns[2];
	const char *why = "";
	char name[64];

	ns[0] = node_open(0, FI_TAGGED | FI_DIRECTED_RECV, FI_SELECTIVE_COMPLETION);
	ns[1] = node_open(1, FI_TAGGED | FI_DIRECTED_RECV, FI_SELECTIVE_COMPLETION);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t tag = 0x10 + i;
		int ok;

		/* why is read after the call: not in the same argument list. */
		ok = ssend_one(ns[0], ns[0]->peer[0], ns[0], ns[0]->peer[0],
			       sizes[i], tag, &why);
		snprintf(name, sizeof(name), "rdm-ssend-self-%zu", sizes[i]);
		IBFT_CHECK(ok, name, "%s", why);
		ok = ssend_one(ns[0], ns[0]->peer[1], ns[1], ns[1]->peer[0],
			       sizes[i], tag, &why);
		snprintf(name, sizeof(name), "rdm-ssend-peer-%zu", sizes[i]);
		IBFT_CHECK(ok, name, "%s", why);
	}
out:
	close_all();
}
