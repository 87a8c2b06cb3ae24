/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_rdm_cntr: counters on RDM endpoints (fi_cntr(3)).
 *
 * A sends to B; A's send counter and B's receive counter count what
 * completes, whether or not a CQ entry is written (injects, selective
 * completion); failures count as errors; fi_cntr_add/set/adderr/seterr;
 * fi_cntr_wait returns at the threshold, times out, and sleeps until a
 * message arrives; a counter's fd (FI_WAIT_FD) wakes poll(2) after
 * fi_trywait; a poll set names a counter that moved; an endpoint closes
 * while another thread reads its counter; threads asleep in fi_cntr_wait
 * together wake at their thresholds, whoever reads meanwhile, and sleep
 * without spinning.
 *
 *   ibft_rdm_cntr -p PROV -s ADDR_A [-d ADDR_B]
 */
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Poll sets and fi_av_bind are libfabric 1.x API that 2.x deprecates:
 * these tests exercise them on purpose (ibfab serves 1.x callers). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "ibft.h"
#include "ibft_rdm_node.h"

#define EAGER 64
#define BIG (256 * 1024)	/* above any eager size: rendezvous */

static struct fid_cntr *cntr_open(struct node *n, enum fi_wait_obj wait)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP,
				     .wait_obj = wait };
	struct fid_cntr *c = NULL;
	int ret = fi_cntr_open(n->domain, &attr, &c, &n->ring);

	IBFT_CHECK(!ret, "cntr-open", "fi_cntr_open(wait %d): %s", wait,
		   fi_strerror(-ret));
	return ret ? NULL : c;
}

/* n's endpoint again, with counters bound (before fi_enable) and its
 * send CQ selective. */
static int rebind(struct node *n, struct fid_cntr *tx, struct fid_cntr *rx)
{
	int ret = node_ep_open(n, FI_SELECTIVE_COMPLETION, tx, rx);

	return IBFT_CHECK(!ret, "cntr-bind", "binding counters: %s",
			  fi_strerror(-ret)) ? 0 : -1;
}

static void check_bad_open(struct node *n)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP + 7 };
	struct fid_cntr *c = NULL;
	int ret;

	if (ibft_deviates("verbs;ofi_rxm", "cntr-open-bad-events", "rxm opens "
			  "a counter of any events value"))
		return;
	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	IBFT_CHECK(ret < 0, "cntr-open-bad-events", "fi_cntr_open with events "
		   "%d returned %d", attr.events, ret);
	if (!ret)
		fi_close(&c->fid);
}

/* A counter opened with FI_WAIT_NONE has no wait object to hand out:
 * FI_GETWAIT says -FI_ENODATA, as a CQ or EQ does (fi_eq(3)), and
 * FI_GETWAITOBJ says FI_WAIT_NONE. */
static void check_getwait_none(struct node *n)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP,
				     .wait_obj = FI_WAIT_NONE };
	enum fi_wait_obj obj = FI_WAIT_UNSPEC;
	struct fid_cntr *c = NULL;
	int fd = -1, ret, ret2 = -1;

	if (ibft_deviates("verbs;ofi_rxm", "cntr-getwait-none", "rxm's counters "
			  "take no fi_control command (-FI_ENOSYS)"))
		return;
	ret = fi_cntr_open(n->domain, &attr, &c, NULL);
	if (!ret) {
		ret = fi_control(&c->fid, FI_GETWAIT, &fd);
		ret2 = fi_control(&c->fid, FI_GETWAITOBJ, &obj);
		fi_close(&c->fid);
	}
	IBFT_CHECK(ret == -FI_ENODATA && !ret2 && obj == FI_WAIT_NONE,
		   "cntr-getwait-none", "FI_GETWAIT %d (want -FI_ENODATA), "
		   "FI_GETWAITOBJ %d giving %d", ret, ret2, (int)obj);
}

/* fi_cntr_add/set/adderr/seterr on a counter bound to nothing. */
static void check_arithmetic(struct node *n)
{
	struct fid_cntr *c = cntr_open(n, FI_WAIT_NONE);
	int ok;

	if (!c)
		return;
	ok = !fi_cntr_set(c, 10) && !fi_cntr_add(c, 5) && fi_cntr_read(c) == 15 &&
	     !fi_cntr_adderr(c, 2) && !fi_cntr_adderr(c, 1) &&
	     fi_cntr_readerr(c) == 3 && !fi_cntr_seterr(c, 0) &&
	     fi_cntr_readerr(c) == 0;
	IBFT_CHECK(ok, "cntr-arithmetic", "set/add/adderr/seterr on an unbound "
		   "counter");
	fi_close(&c->fid);
}

/* Reads a counter until told to stop: progress of what is bound to it. */
struct cntr_reader {
	struct fid_cntr *c;
	int stop;
	uint64_t reads;
};

static void *cntr_reader_run(void *arg)
{
	struct cntr_reader *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		fi_cntr_read(r->c);
		r->reads++;
	}
	return NULL;
}

/*
 * fi_close of an endpoint while another thread reads a counter bound to it
 * (FI_THREAD_SAFE): the read progresses the endpoint, so the close must
 * leave the counter before it drains and frees what progress walks.  Run
 * under ThreadSanitizer or AddressSanitizer, a close that does it the
 * other way round shows as a race or a use after free.
 */
static void check_close_while_read(struct node *b)
{
	struct cntr_reader r = { 0 };
	struct fid_cntr *c = NULL;
	struct node *n;
	pthread_t th;
	fi_addr_t to_b;
	uint8_t m[EAGER] = "";
	int ok, i, started = 0;

	if (ibft_deviates("verbs;ofi_rxm", "cntr-close-while-read", "libfabric "
			  "1.17's rxm crashes (SIGSEGV in libfabric.so) when an "
			  "endpoint closes while another thread reads its counter"))
		return;
	want_threading = FI_THREAD_SAFE;
	n = node_open(0, FI_MSG, 0);
	want_threading = FI_THREAD_DOMAIN;
	ok = n && (c = cntr_open(n, FI_WAIT_UNSPEC)) && !rebind(n, c, NULL) &&
	     fi_av_insert(n->av, b->name, 1, &to_b, 0, NULL) == 1;
	r.c = c;
	started = ok && !pthread_create(&th, NULL, cntr_reader_run, &r);
	for (i = 0; started && ok && i < 16; i++)
		ok = !POST(fi_send(n->ep, m, sizeof(m), NULL, to_b, NULL));
	while (started && ok && fi_cntr_read(c) < 16)
		poll_all();	/* B takes them in */
	ok = ok && started && !fi_close(&n->ep->fid);
	if (n)
		n->ep = NULL;
	if (started) {
		__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
		pthread_join(th, NULL);
	}
	IBFT_CHECK(ok && c && fi_cntr_read(c) == 16 && !fi_close(&c->fid),
		   "cntr-close-while-read", "an endpoint closed while another "
		   "thread read its counter (%llu reads): the close, or the "
		   "counter after it, failed", (unsigned long long)r.reads);
	node_close(n);
}

/* A thread in fi_cntr_wait for threshold, for up to WAIT_MS. */
struct cntr_sleeper {
	struct fid_cntr *c;
	uint64_t threshold;
	int ret;
	long ms;
	pthread_t th;
	int started;
};

static void *cntr_sleeper_run(void *arg)
{
	struct cntr_sleeper *s = arg;
	long t0 = now_ms();

	s->ret = fi_cntr_wait(s->c, s->threshold, WAIT_MS);
	s->ms = now_ms() - t0;
	return NULL;
}

static void sleeper_start(struct cntr_sleeper *s, struct fid_cntr *c,
			  uint64_t threshold)
{
	s->c = c;
	s->threshold = threshold;
	s->ret = -FI_EOTHER;
	s->started = !pthread_create(&s->th, NULL, cntr_sleeper_run, s);
}

/* 1 when s returned 0 in less than half its time. */
static int sleeper_join(struct cntr_sleeper *s)
{
	if (s->started)
		pthread_join(s->th, NULL);
	s->started = 0;
	return s->ret == 0 && s->ms < WAIT_MS / 2;
}

/* CPU time this process used, in ms. */
static long cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/*
 * Threads asleep in fi_cntr_wait on one counter while another reads it
 * and adds to it (FI_THREAD_SAFE).  One sleeper: a read between its
 * sleep and the add must not swallow the wake (SOS's mt_lock_test hung
 * so: its threads read and wait on one counter while ibfab's
 * FI_PROGRESS_AUTO thread counts into it, and a read cleared the flag
 * that told a count to raise the fd).  Three sleepers, for one more and
 * two more: the first add wakes the first only, and the two left sleep,
 * not spin (under 100 ms of CPU in 400 ms), until a read and the second
 * add wake them both.
 */
static void check_wait_while_read(void)
{
	struct cntr_sleeper s[3] = { { 0 } };
	struct fid_cntr *c = NULL;
	struct node *n;
	uint64_t v;
	long cpu = -1;
	int ok, i;

	want_threading = FI_THREAD_SAFE;
	n = node_open(0, FI_MSG, 0);
	want_threading = FI_THREAD_DOMAIN;
	if (!n || !(c = cntr_open(n, FI_WAIT_UNSPEC))) {
		node_close(n);
		return;
	}
	v = fi_cntr_read(c);
	sleeper_start(&s[0], c, v + 1);
	usleep(300 * 1000);	/* asleep by now */
	fi_cntr_read(c);
	ok = !fi_cntr_add(c, 1);
	ok = sleeper_join(&s[0]) && ok;
	IBFT_CHECK(ok, "cntr-wait-while-read", "fi_cntr_wait for a count "
		   "another thread added after reading the counter: %s after "
		   "%ld ms", fi_strerror(-s[0].ret), s[0].ms);

	v = fi_cntr_read(c);
	for (i = 0; i < 3; i++)
		sleeper_start(&s[i], c, v + (i ? 2 : 1));
	usleep(300 * 1000);
	ok = !fi_cntr_add(c, 1);
	ok = sleeper_join(&s[0]) && ok;
	if (ok) {
		cpu = cpu_ms();
		usleep(400 * 1000);
		cpu = cpu_ms() - cpu;
	}
	fi_cntr_read(c);
	ok = !fi_cntr_add(c, 1) && ok;
	for (i = 1; i < 3; i++)
		ok = sleeper_join(&s[i]) && ok;
	IBFT_CHECK(ok && cpu < 100, "cntr-wait-sleepers", "three threads in "
		   "fi_cntr_wait, for one and two more: returned %s, %s, %s "
		   "(%ld, %ld, %ld ms); %ld ms of CPU while two slept 400 ms",
		   fi_strerror(-s[0].ret), fi_strerror(-s[1].ret),
		   fi_strerror(-s[2].ret), s[0].ms, s[1].ms, s[2].ms, cpu);
	fi_close(&c->fid);
	node_close(n);
}

int main(int argc, char **argv)
{
	/* r: the fourth receive (BIG) starts 3 * EAGER in. */
	uint8_t *s = xbuf(BIG), *r = xbuf(4 * EAGER + BIG), small[8];
	struct fid_cntr *tx = NULL, *rx = NULL;
	struct fid_poll *ps = NULL;
	struct fi_poll_attr pattr = { 0 };
	struct node *ns[2];
	struct pollfd pfd;
	struct fid *fids[1];
	void *ctx[4];
	long t0;
	int ok, fd = -1, i, n;

	ibft_parse(argc, argv, "A's address (-s), B's (-d, or A's)");
	ns[0] = node_open(0, FI_MSG, 0);
	ns[1] = node_open(1, FI_MSG, 0);
	if (!ns[0] || !ns[1])
		goto out;
	check_bad_open(ns[0]);
	check_getwait_none(ns[0]);
	check_arithmetic(ns[0]);
	check_wait_while_read();
	tx = cntr_open(ns[0], FI_WAIT_UNSPEC);
	rx = cntr_open(ns[1], FI_WAIT_FD);
	if (!tx || !rx || rebind(ns[0], tx, NULL) || rebind(ns[1], NULL, rx) ||
	    insert_all(ns, 2))
		goto out;

	/* Counted: eager sends, a rendezvous send, an inject; none writes a
	 * CQ entry (selective), all complete. */
	for (i = 0; i < 5; i++)
		fi_recv(ns[1]->ep, r + i * EAGER, i == 3 ? BIG : EAGER, NULL,
			FI_ADDR_UNSPEC, NULL);
	ok = !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL)) &&
	     !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL)) &&
	     !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL)) &&
	     !POST(fi_send(ns[0]->ep, s, BIG, NULL, ns[0]->peer[1], NULL)) &&
	     !POST(fi_inject(ns[0]->ep, s, 8, ns[0]->peer[1]));
	/* Both read every turn: each progresses its side of the rendezvous. */
	for (t0 = now_ms(); ok && now_ms() - t0 < WAIT_MS &&
	     (fi_cntr_read(tx) < 5) + (fi_cntr_read(rx) < 5);)
		;
	IBFT_CHECK(ok && fi_cntr_read(tx) == 5 && fi_cntr_read(rx) == 5 &&
		   !fi_cntr_readerr(tx) && !fi_cntr_readerr(rx),
		   "cntr-counts-completions", "send counter %llu, receive "
		   "counter %llu (5 each), errors %llu/%llu",
		   (unsigned long long)fi_cntr_read(tx),
		   (unsigned long long)fi_cntr_read(rx),
		   (unsigned long long)fi_cntr_readerr(tx),
		   (unsigned long long)fi_cntr_readerr(rx));

	/* A receive too small: an error, not a completion. */
	fi_recv(ns[1]->ep, small, sizeof(small), NULL, FI_ADDR_UNSPEC, small);
	ok = !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL));
	for (t0 = now_ms(); ok && now_ms() - t0 < WAIT_MS && !fi_cntr_readerr(rx);)
		poll_all();	/* the error entry is written: take it */
	IBFT_CHECK(ok && fi_cntr_readerr(rx) == 1 && fi_cntr_read(rx) == 5,
		   "cntr-counts-errors", "after a truncated receive: %llu "
		   "completions, %llu errors (5, 1)",
		   (unsigned long long)fi_cntr_read(rx),
		   (unsigned long long)fi_cntr_readerr(rx));
	fi_cntr_seterr(rx, 0);

	/* fi_cntr_wait: a timeout, then a sleep a message ends. */
	t0 = now_ms();
	ok = fi_cntr_wait(rx, 6, 300) == -FI_ETIMEDOUT && now_ms() - t0 >= 250;
	IBFT_CHECK(ok, "cntr-wait-times-out", "fi_cntr_wait did not time out "
		   "after 300 ms (%ld ms)", now_ms() - t0);
	fi_recv(ns[1]->ep, r, EAGER, NULL, FI_ADDR_UNSPEC, NULL);
	ok = !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL)) &&
	     !fi_cntr_wait(rx, 6, WAIT_MS) && fi_cntr_read(rx) == 6;
	IBFT_CHECK(ok, "cntr-wait-wakes", "fi_cntr_wait did not return once a "
		   "message came (counter %llu)",
		   (unsigned long long)fi_cntr_read(rx));
	ok = !fi_cntr_wait(tx, 6, WAIT_MS);
	IBFT_CHECK(ok, "cntr-wait-send", "the send counter did not reach 6");

	/* FI_WAIT_FD: poll(2) on the fd after fi_trywait.  Measured: rxm's
	 * fd never wakes (nothing progresses it while the caller sleeps). */
	if (ibft_deviates("verbs;ofi_rxm", "cntr-wait-fd", "rxm's counter fd "
			  "is raised by its own progress only, which nothing "
			  "runs while the application sleeps on the fd"))
		goto poll_set;
	ok = !fi_control(&rx->fid, FI_GETWAIT, &fd) && fd >= 0;
	fi_recv(ns[1]->ep, r, EAGER, NULL, FI_ADDR_UNSPEC, NULL);
	fids[0] = &rx->fid;
	for (i = 0; ok && i < 100 && fi_trywait(ns[1]->fabric, fids, 1); i++)
		fi_cntr_read(rx);
	ok = ok && i < 100 &&
	     !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL));
	pfd.fd = fd;
	pfd.events = POLLIN;
	ok = ok && poll(&pfd, 1, WAIT_MS) == 1;
	for (t0 = now_ms(); ok && now_ms() - t0 < WAIT_MS && fi_cntr_read(rx) < 7;)
		;
	IBFT_CHECK(ok && fi_cntr_read(rx) == 7, "cntr-wait-fd", "the counter's "
		   "fd did not wake poll(2) for a message (counter %llu)",
		   (unsigned long long)fi_cntr_read(rx));

	/* A poll set names the counter that moved (and not again until it
	 * moves again; the first poll may report where it stood). */
poll_set:
	ok = !fi_poll_open(ns[1]->domain, &pattr, &ps) &&
	     !fi_poll_add(ps, &rx->fid, 0) && fi_poll(ps, ctx, 4) >= 0 &&
	     fi_poll(ps, ctx, 4) == 0;
	fi_recv(ns[1]->ep, r, EAGER, NULL, FI_ADDR_UNSPEC, NULL);
	ok = ok && !POST(fi_send(ns[0]->ep, s, EAGER, NULL, ns[0]->peer[1], NULL));
	for (n = 0, t0 = now_ms(); ok && !n && now_ms() - t0 < WAIT_MS;)
		n = fi_poll(ps, ctx, 4);
	IBFT_CHECK(ok && n == 1 && ctx[0] == &ns[1]->ring && fi_poll(ps, ctx, 4) == 0,
		   "cntr-poll-set", "fi_poll on a counter that moved returned %d", n);
	check_close_while_read(ns[1]);
out:
	if (ps) {
		if (rx)
			fi_poll_del(ps, &rx->fid, 0);
		fi_close(&ps->fid);
	}
	/* Endpoints first, then the counters, then the rest. */
	for (i = 0; i < nnodes; i++) {
		IBFT_CLOSE(nodes[i]->ep);
		nodes[i]->ep = NULL;
	}
	IBFT_CHECK((!tx || !fi_close(&tx->fid)) && (!rx || !fi_close(&rx->fid)),
		   "cntr-close", "a counter whose endpoints are closed did not "
		   "close");
	close_all();
	free(s);
	free(r);
	return ibft_finish();
}
