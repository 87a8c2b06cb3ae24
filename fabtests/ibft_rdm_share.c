/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * One peer that sends faster than the application receives must not
 * starve the others.  A provider holds messages no receive was posted for
 * in buffers of its own; if one peer can fill them all, a message another
 * peer sends to a receive that is posted cannot land, and an application
 * waiting for it hangs.  fi_msg(3) lets a provider refuse a send for now
 * (-FI_EAGAIN): the greedy peer is slowed, the others go on.
 *
 * T has few receive buffers (run it with FI_IBFAB_RX_SIZE=64 and
 * FI_IBFAB_RDM_UNEXP_MAX=0 for ibfab: 64 in all), A floods it
 * with messages no receive is posted for, then C sends one to a receive T
 * posted first.  Then T receives A's messages: every one arrives, in order.
 *
 * And a peer whose application is away (MPICH's sendrecv3 sleeps a
 * second) must not hold up the sender's posts: with the connection up, A
 * sends three times T's window of requests while T is not progressed at
 * all; each send is taken at once (queued beyond the window, not refused),
 * and once T receives, all arrive in order.
 */
#include <stdlib.h>
#include <string.h>

#include "ibft_rdm_node.h"

enum { SHARE_N = 256, SHARE_LEN = 64, SHARE_RX = 64, SHARE_FLOOD_MS = 3000 };
/* Three windows of T's 64 buffers (ibfab gives each peer a quarter). */
enum { AWAY_N = 48 };


/* A sends message i (tag 1, bytes from seed i + 1): 0, or -FI_EAGAIN. */
static ssize_t share_send(struct node *a, fi_addr_t to_t, uint8_t *sbuf, int i)
{
	uint8_t *at = sbuf + (size_t)i * SHARE_LEN;

	ibft_fill(at, SHARE_LEN, (unsigned)i + 1);
	return fi_tsend(a->ep, at, SHARE_LEN, NULL, to_t, 1, at);
}

/* The completions T and A have: T's receives, message *got on, each
 * whole and in order (bytes from seed i + 1), and A's sends (*done so
 * far); 0 at the first that is not. */
static int share_take(struct node *t, struct node *a, uint8_t *rbuf,
		      int *got, int *done)
{
	struct comp c = { 0 };
	uint8_t *at;

	while (!wait_comp(t, &c, 0)) {
		at = rbuf + (size_t)*got * SHARE_LEN;
		if (c.err || c.e.op_context != at || c.e.len != SHARE_LEN ||
		    !ibft_verify(at, SHARE_LEN, (unsigned)*got + 1))
			return 0;
		(*got)++;
	}
	while (!wait_comp(a, &c, 0)) {
		if (c.err)
			return 0;
		(*done)++;
	}
	return 1;
}

/* T takes A's messages in order while A sends the rest; 1 if every one
 * of them arrived whole and in order, and A's sends all completed. */
static int share_drain(struct node *t, struct node *a, uint8_t *sbuf,
		       uint8_t *rbuf, int sent)
{
	int posted = 0, got = 0, done = 0;
	long end = now_ms() + 4 * WAIT_MS;
	uint8_t *at;

	while ((got < SHARE_N || done < SHARE_N) && now_ms() < end) {
		at = rbuf + (size_t)posted * SHARE_LEN;
		if (posted < SHARE_N && posted - got < SHARE_RX / 2 &&
		    !fi_trecv(t->ep, at, SHARE_LEN, NULL, FI_ADDR_UNSPEC, 1, 0, at))
			posted++;
		if (sent < SHARE_N && !share_send(a, a->peer[0], sbuf, sent))
			sent++;
		poll_all();
		if (!share_take(t, a, rbuf, &got, &done))
			return 0;
	}
	return got == SHARE_N && done == SHARE_N;
}

void test_fair_share(void)
{
	uint8_t *sbuf = xbuf((size_t)SHARE_N * SHARE_LEN);
	uint8_t *rbuf = xbuf((size_t)SHARE_N * SHARE_LEN);
	uint8_t m[16] = "from C", r[16] = { 0 };
	struct node *ns[3];
	struct comp c = { 0 };
	int sent = 0, refused = 0, ok;
	long end;

	ns[0] = node_open(0, FI_TAGGED, 0);	/* T */
	ns[1] = node_open(1, FI_TAGGED, 0);	/* A */
	ns[2] = node_open(1, FI_TAGGED, 0);	/* C */
	ok = ns[0] && ns[1] && ns[2] && !insert_all(ns, 3) &&
	     !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 2, 0, r);
	if (!IBFT_CHECK(ok, "rdm-share-setup", "three endpoints and a receive"))
		goto out;
	/* A sends what it can for a while; T's application receives none. */
	end = now_ms() + SHARE_FLOOD_MS;
	while (sent < SHARE_N && now_ms() < end) {
		ssize_t ret = share_send(ns[1], ns[1]->peer[0], sbuf, sent);

		if (ret == -FI_EAGAIN) {
			refused++;
			poll_all();
		} else if (ret) {
			break;
		} else {
			sent++;
		}
	}
	idle(ns[0], 1000);	/* A's messages land before C's is sent */
	ok = !POST(fi_tsend(ns[2]->ep, m, sizeof(m), NULL, ns[2]->peer[0], 2, m));
	end = now_ms() + 8000;
	while (ok && now_ms() < end && (wait_comp(ns[0], &c, 100) ||
					c.e.op_context != r))
		;
	ok = ok && c.e.op_context == r && !c.err && !memcmp(r, m, sizeof(m));
	IBFT_CHECK(ok, "rdm-share-others-go-on", "after A sent %d messages no "
		   "receive was posted for (%d tries refused for now), C's message "
		   "to a receive T had posted did not arrive in 8 s", sent, refused);
	printf("# A sent %d of %d before C; %d tries refused for now\n", sent,
	       SHARE_N, refused);
	IBFT_CHECK(share_drain(ns[0], ns[1], sbuf, rbuf, sent),
		   "rdm-share-greedy-delivered", "once T received, A's %d messages "
		   "did not all arrive whole and in order, or its sends did not "
		   "all complete", SHARE_N);
out:
	free(sbuf);
	free(rbuf);
	close_all();
}

/* T receives n messages of tag from A in order (bytes from seed i + 1),
 * and A's n sends complete (done of them have): 1 when all did. */
static int away_drain(struct node *t, struct node *a, uint8_t *rbuf, int n,
		      uint64_t tag, int done)
{
	int i, got = 0, ok = 1;
	long end = now_ms() + 4 * WAIT_MS;

	for (i = 0; ok && i < n; i++)
		ok = !POST(fi_trecv(t->ep, rbuf + (size_t)i * SHARE_LEN, SHARE_LEN,
				    NULL, FI_ADDR_UNSPEC, tag, 0,
				    rbuf + (size_t)i * SHARE_LEN));
	while (ok && (got < n || done < n) && now_ms() < end) {
		poll_all();
		if (!share_take(t, a, rbuf, &got, &done))
			return 0;
	}
	return ok && got == n && done == n;
}

void test_away_peer(void)
{
	uint8_t *sbuf = xbuf((size_t)AWAY_N * SHARE_LEN);
	uint8_t *rbuf = xbuf((size_t)AWAY_N * SHARE_LEN);
	uint8_t m[16] = "hello", r[16] = { 0 };
	struct node *ns[2];
	struct comp c = { 0 };
	int i, refused = 0, done = 0, ok;
	ssize_t ret = 0;

	if (ibft_deviates("verbs;ofi_rxm", "rdm-away-peer", "rxm refuses a "
			  "send (-FI_EAGAIN) once its credits for the peer are "
			  "spent, until the peer's progress returns them"))
		goto out;
	ns[0] = node_open(0, FI_TAGGED, 0);	/* T */
	ns[1] = node_open(1, FI_TAGGED, 0);	/* A */
	ok = ns[0] && ns[1] && !insert_all(ns, 2) &&
	     !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 3, 0, r) &&
	     !POST(fi_tsend(ns[1]->ep, m, sizeof(m), NULL, ns[1]->peer[0], 3, m)) &&
	     !wait_comp(ns[0], &c, WAIT_MS) && !c.err &&
	     !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
	if (!IBFT_CHECK(ok, "rdm-away-setup", "two endpoints, one message"))
		goto out;
	/* T is not progressed from here until every send is posted. */
	for (i = 0; i < AWAY_N; i++) {
		uint8_t *at = sbuf + (size_t)i * SHARE_LEN;

		ibft_fill(at, SHARE_LEN, (unsigned)i + 1);
		while ((ret = fi_tsend(ns[1]->ep, at, SHARE_LEN, NULL,
				       ns[1]->peer[0], 4, at)) == -FI_EAGAIN &&
		       refused < 1000) {
			refused++;
			if (!wait_comp_alone(ns[1], &c, 10))
				done++;
		}
		if (ret)
			break;
	}
	IBFT_CHECK(!ret && !refused, "rdm-away-peer", "%d sends to a peer whose "
		   "application is away: send %d answered %s, %d tries refused "
		   "for now (a send should not wait for the peer's progress)",
		   AWAY_N, i, fi_strerror((int)-ret), refused);
	IBFT_CHECK(away_drain(ns[0], ns[1], rbuf, i, 4, done), "rdm-away-delivered",
		   "once the peer received, the %d messages did not all arrive "
		   "whole and in order, or the sends did not all complete", i);
out:
	free(sbuf);
	free(rbuf);
	close_all();
}
