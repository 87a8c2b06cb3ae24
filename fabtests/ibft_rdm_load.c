/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM under load (run by ibft_rdm): many endpoints all to all,
 * bursts beyond the queues, and a backlog of unexpected messages.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ibft_rdm_node.h"

/* 8 or more endpoints, each sending to each. */
void test_many(int count)
{
	struct node *ns[MAX_NODES];
	static uint8_t rbuf[MAX_NODES][MAX_NODES][256];
	uint8_t sbuf[256];
	struct comp c = { 0 };
	int i, j, ok = 1, got;

	for (i = 0; i < count; i++)
		if (!(ns[i] = node_open(i, FI_TAGGED | FI_SOURCE, 0)))
			goto out;
	if (insert_all(ns, count))
		goto out;
	for (i = 0; i < count; i++)
		for (j = 0; j < count; j++)
			if (i != j)
				ok &= !POST(fi_trecv(ns[i]->ep, rbuf[i][j], 256, NULL,
						     FI_ADDR_UNSPEC, j, 0, rbuf[i][j]));
	for (i = 0; i < count; i++) {
		for (j = 0; j < count; j++) {
			if (i == j)
				continue;
			ibft_fill(sbuf, sizeof(sbuf), i * 16 + j);
			ok &= !POST(fi_tinject(ns[i]->ep, sbuf, sizeof(sbuf),
					       ns[i]->peer[j], i));
		}
	}
	for (i = 0; ok && i < count; i++) {
		for (got = 0; ok && got < count - 1; got++) {
			ok = !wait_comp(ns[i], &c, WAIT_MS) && !c.err;
			j = (int)c.e.tag;
			ok = ok && j < count && c.src == ns[i]->peer[j] &&
			     ibft_verify(rbuf[i][j], 256, j * 16 + i);
		}
	}
	IBFT_CHECK(ok, "rdm-many-peers", "%d endpoints all-to-all: a message was "
		   "lost or wrong", count);
out:
	close_all();
}

/*
 * Many messages in flight both ways at once, eager and rendezvous mixed,
 * posted before the connection is up: more than a send queue holds.
 */
void test_burst(void)
{
	enum { N = 96, BIG = 20000, SMALL = 100 };
	static uint8_t rbuf[2][N][BIG], sbuf[2][N][BIG];
	struct node *ns[2];
	struct comp c;
	size_t len;
	int i, k, ok = 1, got[2] = { 0 }, sent[2] = { 0 };

	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	for (k = 0; k < 2; k++)
		for (i = 0; i < N; i++)
			ok &= !POST(fi_trecv(ns[k]->ep, rbuf[k][i], BIG, NULL,
					     FI_ADDR_UNSPEC, i, 0, rbuf[k][i]));
	for (i = 0; ok && i < N; i++) {
		for (k = 0; k < 2; k++) {
			len = i % 3 ? SMALL : BIG;
			ibft_fill(sbuf[k][i], len, k * N + i);
			ok &= !POST(fi_tsend(ns[k]->ep, sbuf[k][i], len, NULL,
					     ns[k]->peer[!k], i, sbuf[k][i]));
		}
	}
	/* Each side: N sends and N receives complete, data intact. */
	for (k = 0; ok && k < 2; k++) {
		while (ok && got[k] + sent[k] < 2 * N) {
			ok = !wait_comp(ns[k], &c, WAIT_MS) && !c.err;
			if (!ok)
				break;
			if (c.e.flags & FI_SEND) {
				sent[k]++;
				continue;
			}
			i = (int)c.e.tag;
			len = i % 3 ? SMALL : BIG;
			ok = i < N && c.e.len == len &&
			     ibft_verify(rbuf[k][i], len, !k * N + i);
			got[k]++;
		}
	}
	IBFT_CHECK(ok, "rdm-burst", "side 0: %d sent, %d received; side 1: %d, "
		   "%d (of %d each)", sent[0], got[0], sent[1], got[1], N);
out:
	close_all();
}

/*
 * More messages arrive than the receiver has eager buffers (FI_IBFAB_RX_SIZE,
 * 384) before it posts a receive for any of them, and the one it waits for
 * comes last: it must get in (MPI's one-sided over two-sided waits like
 * this), then every earlier message be delivered intact, in order per tag.
 */
void test_unexpected_backlog(void)
{
	enum { N = 1200, SMALL = 1000, NBIG = 16, BIG = 20000 };
	struct node *ns[2];
	struct comp c;
	uint8_t *sbuf = xbuf(BIG), *big[NBIG], *rbig[NBIG];
	uint8_t *rbuf = xbuf((size_t)N * SMALL);
	uint8_t go = 7, rgo = 0;
	int i, ok = 1, got = 0, sent = 0;

	for (i = 0; i < NBIG; i++) {
		big[i] = xbuf(BIG);
		rbig[i] = xbuf(BIG);
	}
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	for (i = 1; ok && i <= N; i++) {
		ibft_fill(sbuf, SMALL, i);
		ok = !POST(fi_tinject(ns[1]->ep, sbuf, SMALL, ns[1]->peer[0], i));
	}
	for (i = 0; ok && i < NBIG; i++) {
		ibft_fill(big[i], BIG, N + 1 + i);
		ok = !POST(fi_tsend(ns[1]->ep, big[i], BIG, NULL, ns[1]->peer[0],
				    N + 1 + i, big[i]));
	}
	ok = ok && !POST(fi_tsend(ns[1]->ep, &go, 1, NULL, ns[1]->peer[0], 0, &go));
	IBFT_CHECK(ok, "rdm-unexp-backlog-send", "%d messages no receive was "
		   "posted for, then one: a send was refused or never left", N + NBIG);
	ok = ok && !POST(fi_trecv(ns[0]->ep, &rgo, 1, NULL, FI_ADDR_UNSPEC, 0, 0, &rgo));
	while (ok) {
		ok = !wait_comp(ns[0], &c, WAIT_MS) && !c.err;
		if (ok && c.e.op_context == &rgo)
			break;
	}
	IBFT_CHECK(ok && rgo == go, "rdm-unexp-backlog-last", "the message "
		   "waited for, sent after %d that no receive was posted for, "
		   "did not arrive", N + NBIG);
	for (i = 0; ok && i < N + NBIG; i++) {
		uint8_t *at = i < N ? rbuf + (size_t)i * SMALL : rbig[i - N];

		ok = !POST(fi_trecv(ns[0]->ep, at, i < N ? SMALL : BIG, NULL,
				    FI_ADDR_UNSPEC, i + 1, 0, at));
	}
	while (ok && got < N + NBIG) {
		ok = !wait_comp(ns[0], &c, WAIT_MS) && !c.err;
		if (!ok)
			break;
		i = (int)c.e.tag - 1;
		ok = i >= 0 && i < N + NBIG &&
		     c.e.len == (size_t)(i < N ? SMALL : BIG) &&
		     ibft_verify(c.e.op_context, c.e.len, i + 1);
		got++;
	}
	while (ok && sent < NBIG + 1) {	/* the sender's own completions */
		ok = !wait_comp(ns[1], &c, WAIT_MS) && !c.err;
		sent += ok;
	}
	IBFT_CHECK(ok, "rdm-unexp-backlog", "%d of %d held messages delivered "
		   "intact, %d of %d sends completed", got, N + NBIG, sent,
		   NBIG + 1);
out:
	close_all();
	for (i = 0; i < NBIG; i++) {
		free(big[i]);
		free(rbig[i]);
	}
	free(sbuf);
	free(rbuf);
}
