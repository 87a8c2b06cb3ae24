/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM under load (run by ibft_rdm): many endpoints all to all,
 * bursts beyond the queues, a backlog of unexpected messages, and a send
 * CQ nobody reads.
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

enum { BURST_N = 96, BURST_BIG = 40000, BURST_SMALL = 100 };

/* The length of the burst's message i: every third one big. */
static size_t burst_len(int i)
{
	return i % 3 ? BURST_SMALL : BURST_BIG;
}

/* Which of bufs[0..N) an op's context is; -1 if none. */
static int burst_index(uint8_t *const *bufs, int n, const void *context)
{
	int i;

	for (i = 0; i < n; i++)
		if (bufs[i] == context)
			return i;
	return -1;
}

/*
 * Many messages in flight both ways at once, eager and rendezvous mixed,
 * posted before the connection is up: more than a send queue holds.
 * BURST_BIG is above every provider's eager size (ibfab's 32 KiB, rxm's
 * 16 KiB), so a third of the messages are rendezvous sends, 32 of them in
 * flight each way: run-suite also runs this over a wire that drops packets
 * (rdm.burst.lossy), where the device retransmits under them.
 *
 * An error fails the check but does not end the count: every send must
 * still complete, once, and every receive but one whose message's send
 * failed, and each op that completes without error must be intact (a
 * connection that fails costs its own ops, it loses none silently); the
 * failure line says whether that held, for run-suite, which tells a
 * device that gave up retransmitting from a failure of the provider's.
 */
void test_burst(void)
{
	enum { N = BURST_N };
	uint8_t *rbuf[2][N] = { { NULL } }, *sbuf[2][N] = { { NULL } };
	struct node *ns[2];
	/* 0: not completed; 1: completed; 2: completed with an error. */
	uint8_t got_tag[2][N] = { { 0 } }, sent_tag[2][N] = { { 0 } };
	struct comp c = { .err = 0 }, first = { .err = 0 };
	size_t len;
	int i, k, ok = 1, done = 0, nerr = 0, err_side = -1, is_send;
	uint8_t *slot;
	long end;

	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	for (k = 0; k < 2; k++) {
		for (i = 0; i < N; i++) {
			len = burst_len(i);
			rbuf[k][i] = xbuf(len);
			sbuf[k][i] = xbuf(len);
			ok &= !POST(fi_trecv(ns[k]->ep, rbuf[k][i], len, NULL,
					     FI_ADDR_UNSPEC, i, 0, rbuf[k][i]));
		}
	}
	for (i = 0; ok && i < N; i++) {
		for (k = 0; k < 2; k++) {
			len = burst_len(i);
			ibft_fill(sbuf[k][i], len, k * N + i);
			ok &= !POST(fi_tsend(ns[k]->ep, sbuf[k][i], len, NULL,
					     ns[k]->peer[!k], i, sbuf[k][i]));
		}
	}
	/* Both sides read in turn, so a stall says whose ops are missing. */
	end = now_ms() + WAIT_MS;
	while (ok && done < 4 * N && now_ms() < end) {
		for (k = 0; ok && k < 2; k++) {
			if (wait_comp(ns[k], &c, 0))
				continue;
			end = now_ms() + WAIT_MS;	/* it moves */
			done++;
			i = burst_index(sbuf[k], N, c.e.op_context);
			is_send = i >= 0;
			if (!is_send)
				i = burst_index(rbuf[k], N, c.e.op_context);
			ok = i >= 0;		/* one of ours */
			if (!ok)
				break;
			slot = is_send ? &sent_tag[k][i] : &got_tag[k][i];
			ok = !*slot;		/* and once */
			if (!ok)
				break;
			*slot = c.err ? 2 : 1;
			if (c.err) {
				if (!nerr++) {
					first = c;
					err_side = k;
				}
				continue;
			}
			if (!is_send) {
				len = burst_len(i);
				ok = (int)c.e.tag == i && c.e.len == len &&
				     ibft_verify(rbuf[k][i], len, !k * N + i);
			}
		}
	}
	/* Every send completed; every receive too, but one whose message's
	 * send failed (nothing came for it: it stays posted). */
	for (k = 0; k < 2; k++)
		for (i = 0; i < N; i++)
			ok &= sent_tag[k][i] && (got_tag[k][i] || sent_tag[!k][i] == 2);
	IBFT_CHECK(ok && !nerr, "rdm-burst", "%d of %d ops completed, %d with "
		   "errors%s", done, 4 * N, nerr, ok ? ", each once, the rest "
		   "intact" : "");
	if (err_side >= 0)
		printf("# side %d: first error completion: %s, %s, tag %llu\n",
		       err_side, fi_strerror(first.err),
		       burst_index(sbuf[err_side], N, first.e.op_context) >= 0 ?
		       "send" : "receive", (unsigned long long)first.e.tag);
	for (k = 0; !(ok && !nerr) && k < 2; k++) {
		char miss[256];
		size_t m = 0;

		for (i = 0; i < N && m < sizeof(miss) - 16; i++)
			if (got_tag[k][i] != 1 || sent_tag[k][i] != 1)
				m += (size_t)snprintf(miss + m, sizeof(miss) - m,
						      " %s%d%s",
						      got_tag[k][i] == 1 ? "" : "r",
						      i, sent_tag[k][i] == 1 ? "" : "s");
		miss[m] = 0;
		printf("# side %d lacks (rI: receive I, Is: send I; I %% 3 == 0 "
		       "is rendezvous; errors included):%s\n", k, miss);
	}
out:
	close_all();
	for (k = 0; k < 2; k++)
		for (i = 0; i < N; i++) {
			free(rbuf[k][i]);
			free(sbuf[k][i]);
		}
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
	struct comp c = { 0 };
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

/* The next send completion in scq (everyone progressed meanwhile): its
 * context is want's.  0, or -1 on a timeout, an error or another. */
static int send_comp(struct fid_cq *scq, void *want)
{
	struct fi_cq_tagged_entry e;
	long end = now_ms() + WAIT_MS;
	ssize_t r;

	while ((r = fi_cq_read(scq, &e, 1)) == -FI_EAGAIN && now_ms() < end)
		poll_all();
	if (r != 1 || e.op_context != want) {
		printf("# send completion: %zd, context %p, expected %p\n", r,
		       r == 1 ? e.op_context : NULL, want);
		return -1;
	}
	return 0;
}

/*
 * A sender reads its receive CQ (which progresses it) but not its send CQ,
 * bound apart: its send completions wait there unread, and none may be
 * lost or overwritten however many sends follow.  ibfab copies each
 * completion into the CQ where it completes and frees its op at once, so
 * it counts the unread ones against tx_size: once tx_size wait, a send
 * answers -FI_EAGAIN until the application reads one, and never before
 * (checked for ibfab; other providers may queue more).
 */
void test_unread_send_cq(void)
{
	enum { TX = 16, N = TX + 8, LEN = 64 };
	static uint8_t rbuf[N][LEN], sbuf[N][LEN];
	static struct fi_context ctx[N];
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fid_cq *scq;
	struct node *ns[2];
	struct comp c = { 0 };
	int i, ok = 1, done = 0, stalls = 0, early = 0, got = 0;
	long end;
	ssize_t r;

	want_tx_size = TX;
	ns[0] = node_open(0, FI_TAGGED, 0);
	want_tx_size = 0;
	ns[1] = node_open(1, FI_TAGGED, 0);
	if (!ns[0] || !ns[1])
		goto out;
	/* ns[0]'s endpoint again, its sends completing to a CQ of their own */
	ok = !fi_cq_open(ns[0]->domain, &attr, &ns[0]->tx_cq, NULL) &&
	     !node_ep_open(ns[0], 0, NULL, NULL) && !insert_all(ns, 2);
	scq = ns[0]->tx_cq;
	IBFT_CHECK(ok, "rdm-unread-send-cq-open", "an endpoint with a send CQ "
		   "of its own (tx_size %d)", TX);
	for (i = 0; ok && i < N; i++)
		ok = !POST(fi_trecv(ns[1]->ep, rbuf[i], LEN, NULL,
				    FI_ADDR_UNSPEC, i, 0, rbuf[i]));
	for (i = 0; ok && i < N; i++) {
		ibft_fill(sbuf[i], LEN, i);
		/* With room left, a send must go; once tx_size completions
		 * wait unread, 300 ms of progress show it will not. */
		end = now_ms() + (i - done < TX ? WAIT_MS : 300);
		while ((r = fi_tsend(ns[0]->ep, sbuf[i], LEN, NULL,
				     ns[0]->peer[1], i, &ctx[i])) == -FI_EAGAIN &&
		       now_ms() < end)
			poll_all();
		if (r == -FI_EAGAIN) {
			stalls++;
			early += i - done < TX;
			ok = !send_comp(scq, &ctx[done]);	/* read one */
			done++;
			i--;	/* and send this one again */
			continue;
		}
		ok = !r;
	}
	for (; ok && done < N; done++)
		ok = !send_comp(scq, &ctx[done]);
	IBFT_CHECK(ok, "rdm-unread-send-cq", "%d of %d send completions read, "
		   "in order, each once", done, N);
	for (; ok && got < N; got++) {
		ok = !wait_comp(ns[1], &c, WAIT_MS) && !c.err &&
		     c.e.tag == (uint64_t)got && c.e.len == LEN &&
		     ibft_verify(rbuf[got], LEN, got);
	}
	IBFT_CHECK(ok, "rdm-unread-send-cq-data", "%d of %d messages arrived "
		   "intact", got, N);
	printf("# %d sends refused until a completion was read (%d with "
	       "room left)\n", stalls, early);
	if (!strcmp(ibft_opts.prov, "ibfab"))
		IBFT_CHECK(ok && stalls == N - TX && !early,
			   "rdm-unread-send-cq-bound", "%d refusals, %d of them "
			   "with room left (expected %d, 0)", stalls, early,
			   N - TX);
out:
	close_all();
}
