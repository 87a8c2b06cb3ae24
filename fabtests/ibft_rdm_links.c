/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM when links fail (run by ibft_rdm): the wire cut while idle,
 * while connecting and during a rendezvous, and messages sent just before
 * a peer closes.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ibft_rdm_node.h"

/*
 * With FI_IBFAB_ACK_TIMEOUT set, the send across the dead wire fails in
 * about (retries + 1) acknowledgement timeouts: allowed twice that and 2 s
 * more for the emulated guest.  rdma_cm's own timeout on RoCE (2.1 s on
 * Linux 6.1) takes 15 s with 6 retries.
 */
static void link_down_in_time(int ok, long took_ms)
{
	const char *t = getenv("FI_IBFAB_ACK_TIMEOUT"), *r = getenv("FI_IBFAB_RETRY_COUNT");
	double limit;

	if (strcmp(ibft_opts.prov, "ibfab") || !t || atoi(t) < 1 || atoi(t) > 31 || !ok)
		return;
	limit = 2 * 4.096e-6 * (double)(1ull << atoi(t)) * ((r ? atoi(r) : 6) + 1) + 2;
	IBFT_CHECK(took_ms <= limit * 1000, "rdm-link-down-ack-timeout", "the "
		   "send failed after %ld ms, more than %.1f s with "
		   "FI_IBFAB_ACK_TIMEOUT=%s", took_ms, limit, t);
	printf("# the send across the dead wire failed after %ld ms\n", took_ms);
}

/*
 * The wire between two connected endpoints goes away and comes back, as
 * when a cable is pulled or the peer's node reboots: no rdma_cm event says
 * so, only the sends' retries run out.  A send across the dead wire
 * completes in error; once the wire is back, the next send gets through on
 * a new connection.  The commands that take the wire down and up come from
 * IBFT_LINK_DOWN and IBFT_LINK_UP (run-suite sets them in the guest, where
 * the wire is a veth pair); without them the test is skipped.
 */
void test_link_down(void)
{
	const char *down = getenv("IBFT_LINK_DOWN"), *up = getenv("IBFT_LINK_UP");
	uint8_t m[64] = "across", r[64];
	struct node *ns[2];
	struct comp c = { 0 };
	long t0, took;
	int ok, i;

	if (!down || !up || !ibft_opts.dst) {
		printf("skip - rdm-link-down [%s]: needs IBFT_LINK_DOWN, "
		       "IBFT_LINK_UP and two devices (-d)\n", ibft_opts.prov);
		return;
	}
	/* Measured in the guest: no completion in 120 s. */
	if (ibft_deviates("verbs;ofi_rxm", "rdm-link-down", "verbs connects "
			  "with retry_count 7, which Soft-RoCE takes as retry "
			  "for ever: a send across a dead wire never completes"))
		return;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ok = !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 1, 0, r) &&
	     !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 1, m)) &&
	     !wait_comp(ns[0], &c, WAIT_MS) && !c.err &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
	if (!IBFT_CHECK(ok, "rdm-link-down-before", "no exchange over the wire"))
		goto out;
	ok = system(down) == 0;
	t0 = now_ms();
	ok = ok && !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 2, m));
	/* Retries run out in seconds to tens of seconds, by the device. */
	ok = ok && !wait_comp(ns[0], &c, 120000);
	took = now_ms() - t0;
	IBFT_CHECK(ok && c.err && c.e.op_context == m, "rdm-link-down-error",
		   "a send across the dead wire: err %d", ok ? c.err : 0);
	link_down_in_time(ok, took);
	ok = system(up) == 0;
	sleep(2);	/* the port comes back up */
	ok = ok && !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 3, 0, r);
	/* The first sends may still meet the wire coming up: a few tries. */
	for (i = 0; ok && i < 5; i++) {
		ok = !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 3, m)) &&
		     !wait_comp(ns[0], &c, 60000);
		if (ok && !c.err)
			break;
		printf("# link back, send %d: err %d\n", i, ok ? c.err : -1);
	}
	ok = ok && !c.err && !wait_comp(ns[1], &c, WAIT_MS) && !c.err &&
	     c.e.op_context == r && !memcmp(r, m, sizeof(m));
	IBFT_CHECK(ok, "rdm-link-down-reconnect", "no message once the wire was "
		   "back");
out:
	if (up)
		(void)!system(up);
	close_all();
}

/*
 * The wire goes away after the peers' addresses are known (another pair
 * of endpoints has just talked across it), and an endpoint then sends to a
 * peer it never connected to: the connection request goes unanswered,
 * which the CM would retry for a minute or more.  The send fails within
 * the provider's connect time limit (10 s for ibfab) instead.
 */
void test_link_down_connect(void)
{
	const char *down = getenv("IBFT_LINK_DOWN"), *up = getenv("IBFT_LINK_UP");
	uint8_t m[64] = "unanswered", r[64];
	struct node *ns[4];
	struct comp c = { 0 };
	long t0, took = -1;
	int ok;

	if (!down || !up || !ibft_opts.dst) {
		printf("skip - rdm-link-down-connect [%s]: needs IBFT_LINK_DOWN, "
		       "IBFT_LINK_UP and two devices (-d)\n", ibft_opts.prov);
		return;
	}
	/* Measured in the guest: fi_tsend answered -FI_EAGAIN for 20 s. */
	if (ibft_deviates("verbs;ofi_rxm", "rdm-link-down-connect", "rxm "
			  "refuses the send (-FI_EAGAIN) while its connect "
			  "request goes unanswered, as long as the CM retries it"))
		return;
	for (int i = 0; i < 4; i++)
		if (!(ns[i] = node_open(i, FI_TAGGED, 0)))
			goto out;
	if (insert_all(ns, 4))
		goto out;
	/* 0 and 1 talk: each side knows the other's link address now. */
	ok = !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 1, 0, r) &&
	     !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 1, m)) &&
	     !wait_comp(ns[0], &c, WAIT_MS) && !c.err &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
	if (!IBFT_CHECK(ok, "rdm-link-down-connect-before", "no exchange over "
			"the wire"))
		goto out;
	ok = system(down) == 0;
	t0 = now_ms();
	ok = ok && !POST(fi_tsend(ns[2]->ep, m, sizeof(m), NULL, ns[2]->peer[3], 2, m));
	ok = ok && !wait_comp(ns[2], &c, 120000);
	took = now_ms() - t0;
	printf("# a send to a peer never reached: err %d after %ld ms\n",
	       ok ? c.err : 0, took);
	IBFT_CHECK(ok && c.err && c.e.op_context == m && took < 30000,
		   "rdm-link-down-connect", "a send to a peer whose connection "
		   "request goes unanswered: %s after %ld ms (limit 30 s)",
		   !ok ? "no completion" : c.err ? "error" : "success", took);
out:
	if (up)
		(void)!system(up);
	sleep(2);	/* the port comes back up */
	close_all();
}

/*
 * A rendezvous message B holds unexpected outlives the connection it came
 * on: the wire dies (A's sends fail, A's connection ends), comes back, and
 * A connects anew.  When B then posts the receive that matches the old
 * message, the message is gone with its connection: the receive completes
 * in error, and the new connection, with a rendezvous send of A's under
 * way on it, is not touched by reads or answers of the old one.
 */
void test_link_down_stale_rts(void)
{
	const char *down = getenv("IBFT_LINK_DOWN"), *up = getenv("IBFT_LINK_UP");
	size_t big = IBFT_MIN(ibft_opts.max_size, 1 << 20);
	uint8_t *s1 = xbuf(big), *s2 = xbuf(big), *r1 = xbuf(big), *r2 = xbuf(big);
	uint8_t m[64] = "small", r[64];
	struct node *ns[2];
	struct comp c = { 0 };
	int ok, i, errs = 0;

	if (!down || !up || !ibft_opts.dst ||
	    ibft_deviates("verbs;ofi_rxm", "rdm-link-down-stale-rts", "verbs "
			  "retries for ever on Soft-RoCE (see rdm-link-down)"))
		goto out;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	ibft_fill(s1, big, 20);
	ibft_fill(s2, big, 24);
	/* B holds A's first large message, unexpected. */
	ok = !POST(fi_tsend(ns[0]->ep, s1, big, NULL, ns[0]->peer[1], 20, s1));
	idle(ns[0], 500);
	/* The wire dies: A's sends fail, the large one with them. */
	ok = ok && system(down) == 0;
	ok = ok && !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 21, m));
	for (i = 0; ok && errs < 2 && i < 2; i++)
		errs += !wait_comp(ns[0], &c, 120000) && c.err;
	IBFT_CHECK(ok && errs == 2, "rdm-stale-rts-sends-fail", "%d of 2 sends "
		   "across the dead wire failed", errs);
	ok = system(up) == 0;
	sleep(2);
	/* A connects anew (B lets its old connection go once it is found
	 * dead) and a small message gets through. */
	ok = ok && !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 22, 0, r);
	for (i = 0; ok && i < 5; i++) {
		ok = !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 22, m)) &&
		     !wait_comp(ns[0], &c, 60000);
		if (ok && !c.err)
			break;
	}
	ok = ok && !c.err && !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
	if (!IBFT_CHECK(ok, "rdm-stale-rts-reconnect", "no message once the "
			"wire was back"))
		goto out;
	/* A large send on the new connection, not received yet. */
	ok = !POST(fi_tsend(ns[0]->ep, s2, big, NULL, ns[0]->peer[1], 24, s2));
	idle(ns[0], 300);
	/* B receives the old message: gone with its connection. */
	ok = ok && !fi_trecv(ns[1]->ep, r1, big, NULL, FI_ADDR_UNSPEC, 20, 0, r1) &&
	     !wait_comp(ns[1], &c, WAIT_MS);
	IBFT_CHECK(ok && c.err && c.e.op_context == r1, "rdm-stale-rts-fails",
		   "the message of a connection that ended: err %d", ok ? c.err : 0);
	/* The new connection's message is whole. */
	ok = !fi_trecv(ns[1]->ep, r2, big, NULL, FI_ADDR_UNSPEC, 24, 0, r2) &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err && ibft_verify(r2, big, 24) &&
	     !wait_comp(ns[0], &c, WAIT_MS) && !c.err && c.e.op_context == s2;
	IBFT_CHECK(ok, "rdm-stale-rts-new-connection-unharmed", "the new "
		   "connection's rendezvous send did not complete whole");
out:
	if (up)
		(void)!system(up);
	free(s1);
	free(s2);
	free(r1);
	free(r2);
	close_all();
}

/*
 * Messages a peer sent just before it closed: their sends completed, so
 * they were delivered, and the receiver must report them even if it reads
 * its CQ only after it has seen the peer disconnect.
 */
void test_messages_before_close(void)
{
	enum { N = 16 };
	uint8_t m[N][32], r[N][32] = { { 0 } };
	struct node *ns[2];
	struct comp c = { 0 };
	int i, ok, got = 0;

	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	for (i = 0, ok = 1; ok && i < N; i++) {
		snprintf((char *)m[i], sizeof(m[i]), "before close %d", i);
		ok = !fi_trecv(ns[1]->ep, r[i], sizeof(r[i]), NULL, FI_ADDR_UNSPEC,
			       (uint64_t)i, 0, r[i]) &&
		     !POST(fi_tsend(ns[0]->ep, m[i], sizeof(m[i]), NULL,
				    ns[0]->peer[1], (uint64_t)i, m[i]));
	}
	/* Only the sender progresses until its sends are done; then it
	 * closes, and the receiver's connection thread sees it go. */
	for (i = 0; ok && i < N; i++)
		ok = !wait_comp_alone(ns[0], &c, WAIT_MS) && !c.err;
	node_close(ns[0]);
	usleep(500000);
	while (ok && got < N && !wait_comp(ns[1], &c, 5000)) {
		ok = !c.err;
		got += ok;
	}
	for (i = 0; i < N; i++)
		ok = ok && !strcmp((char *)r[i], (char *)m[i]);
	IBFT_CHECK(ok && got == N, "rdm-messages-before-close", "%d of %d "
		   "messages sent before the peer closed were received", got, N);
out:
	close_all();
}
