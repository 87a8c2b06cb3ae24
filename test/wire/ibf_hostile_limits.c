/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibf_hostile's runs alone: -t share (a peer floods messages ignoring its
 * credits; the others still get their share) and -t cap (a peer holds
 * every connection A keeps for peers that ask).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibf_rogue.h"

/*
 * Item 5 of the safety review, from the wire: R floods T with messages no
 * receive is posted for, and never waits for credits.  T has few eager
 * buffers (-t share runs this alone, with FI_IBFAB_RDM_UNEXP_MAX=0 and
 * FI_IBFAB_RX_SIZE=64): once R is past the credits T gave it, T ends
 * R's connection, and a message C sends to a receive T posted arrives.
 */
void share_flood(void)
{
	enum { N = 100 };
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + 16] = { 0 };
	uint8_t r[16] = "", m[16] = "from C";
	struct rogue g = { 0 }, g2 = { 0 };
	struct node *ns[2];
	struct comp c = { 0 };
	int ok, sent = 0, tries;

	setenv("FI_IBFAB_RDM_UNEXP_MAX", "0", 1);
	setenv("FI_IBFAB_RX_SIZE", "64", 1);
	ns[0] = node_open(0, FI_TAGGED, 0);	/* T */
	ns[1] = node_open(1, FI_TAGGED, 0);	/* C */
	ok = ns[0] && ns[1] && !insert_all(ns, 2) &&
	     !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 2, 0, r) &&
	     !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50128,
			    (struct sockaddr *)ns[0]->name);
	if (!IBFT_CHECK(ok, "hostile-share-setup", "T, C and R connected to T"))
		goto out;
	hdr_init((void *)msg, IBF_RDM_EAGER, g.mine, 5);
	while (sent < N && !rogue_send(&g, msg, sizeof(msg)))
		sent++;
	ok = !POST(fi_tsend(ns[1]->ep, m, sizeof(m), NULL, ns[1]->peer[0], 2, m)) &&
	     has_comp(ns[0], r, 8000, &c) && !c.err && !strcmp((char *)r, "from C");
	IBFT_CHECK(ok, "hostile-flood-others-go-on", "after R sent %d messages no "
		   "receive was posted for, ignoring credits, C's message to a "
		   "receive T had posted did not arrive in 8 s", sent);
	rogue_drain(&g);
	/* R keeps its connection (it never disconnects) and asks again: T
	 * takes the request once it has ended R's first connection. */
	for (tries = 0; tries < 20; tries++) {
		if (!rogue_connect(&g2, ibft_opts.dst, ibft_opts.dst, 50128,
				   (struct sockaddr *)ns[0]->name))
			break;
		rogue_close(&g2);
		idle(ns[0], 250);
	}
	IBFT_CHECK(tries < 20, "hostile-flood-ends-connection", "R sent %d "
		   "messages past the credits T gave it, and T kept its "
		   "connection: R's new request was refused %d times", sent, tries);
out:
	rogue_close(&g2);
	rogue_close(&g);
	close_all();
}

/*
 * Item 12c of the safety review: T keeps at most FI_IBFAB_RDM_MAX_CONNS
 * (2 here; -t cap runs this alone) connections peers ask for.  R takes
 * both with two names and uses the first; a new peer C still gets in:
 * T closes the least recently used idle one (R's second), not R's first.
 */
void conn_cap(void)
{
	uint8_t r[16] = "", m[16] = "from C";
	struct rogue g1 = { 0 }, g2 = { 0 };
	struct node *ns[2];
	struct comp c = { 0 };
	int ok;

	setenv("FI_IBFAB_RDM_MAX_CONNS", "2", 1);
	ns[0] = node_open(0, FI_TAGGED, 0);	/* T */
	ns[1] = node_open(1, FI_TAGGED, 0);	/* C */
	ok = ns[0] && ns[1] && !insert_all(ns, 2) &&
	     !rogue_connect_key(&g1, ibft_opts.dst, ibft_opts.dst, 50130, ROGUE_KEY,
				(struct sockaddr *)ns[0]->name) &&
	     !rogue_connect_key(&g2, ibft_opts.dst, ibft_opts.dst, 50131, ROGUE_KEY + 1,
				(struct sockaddr *)ns[0]->name) &&
	     rogue_reaches(&g1, ns[0], 6, WAIT_MS);
	if (!IBFT_CHECK(ok, "hostile-cap-setup", "T, C, and R's two connections "
			"to T (the first used)"))
		goto out;
	ok = !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 3, 0, r) &&
	     !POST(fi_tsend(ns[1]->ep, m, sizeof(m), NULL, ns[1]->peer[0], 3, m)) &&
	     has_comp(ns[0], r, WAIT_MS, &c) && !c.err && !strcmp((char *)r, "from C");
	IBFT_CHECK(ok, "hostile-cap-new-peer-served", "with R holding T's two "
		   "connections, a new peer's message did not arrive");
	IBFT_CHECK(!rogue_reaches(&g2, ns[0], 7, 2000), "hostile-cap-lru-closed",
		   "T keeps 2 connections, and a third peer came: R's idle one "
		   "still delivers");
	IBFT_CHECK(rogue_reaches(&g1, ns[0], 8, WAIT_MS), "hostile-cap-recent-kept",
		   "T closed the connection R used last, not the idle one");
out:
	rogue_close(&g2);
	rogue_close(&g1);
	close_all();
}
