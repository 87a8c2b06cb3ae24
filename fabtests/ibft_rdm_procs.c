/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM tests with threads or second processes (run by ibft_rdm):
 * thread safety, simultaneous connects, a peer killed mid-run, a shared
 * AV.  Second processes are ibft_rdm again (IBFT_RDM_CHILD says the role).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ibft_rdm_node.h"

/*
 * FI_SHARED_AV: a named AV one process fills, another opens FI_READ and
 * sends with (the child sends to the first address, found at map_addr).
 */
int shared_av_child(void)
{
	const char *name = getenv("IBFT_AV_NAME");
	uint8_t m[32] = "through a shared AV";
	struct node *n;
	struct comp c = { 0 };
	int ok;

	want_av_name = name;
	want_av_flags = FI_READ;
	n = node_open(0, FI_MSG | FI_SHARED_AV, 0);
	ok = n && n->av_map &&
	     !POST(fi_send(n->ep, m, sizeof(m), NULL, n->av_map[0], m)) &&
	     !wait_comp(n, &c, WAIT_MS) && !c.err;
	close_all();
	return ok ? 0 : 1;
}

void test_shared_av(void)
{
	struct fi_av_attr attr = { .type = FI_AV_TABLE, .count = 16 };
	struct fid_av *av = NULL;
	struct child ch = { .pid = -1, .to = -1, .from = -1 };
	struct node *b;
	uint8_t r[32] = "";
	fi_addr_t fa;
	struct comp c = { 0 };
	char name[64];
	int ok, st = 0;
	struct fi_info *h = rdm_hints(FI_MSG | FI_SHARED_AV), *info = NULL;

	ok = !fi_getinfo(FI_VERSION(1, 17), ibft_opts.src, NULL, FI_SOURCE, h, &info);
	fi_freeinfo(h);
	fi_freeinfo(info);
	if (!ok) {
		printf("skip - rdm-shared-av [%s]: no FI_SHARED_AV offered\n",
		       ibft_opts.prov);
		return;
	}
	b = node_open(1, FI_MSG | FI_SHARED_AV, 0);
	if (!b)
		goto out;
	snprintf(name, sizeof(name), "ibft-rdm-%d", (int)getpid());
	attr.name = name;
	ok = !fi_av_open(b->domain, &attr, &av, NULL) &&
	     fi_av_insert(av, b->name, 1, &fa, 0, NULL) == 1;
	if (!IBFT_CHECK(ok, "rdm-shared-av-open", "a named AV could not be made"))
		goto out;
	ok = !fi_recv(b->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, r);
	setenv("IBFT_AV_NAME", name, 1);
	ok = ok && !spawn(&ch, "sharedav");
	ok = ok && !wait_comp(b, &c, WAIT_MS) && !c.err &&
	     !strcmp((char *)r, "through a shared AV");
	if (ch.pid > 0) {	/* spawned: its pipes closed, it is waited for */
		close(ch.to);
		close(ch.from);
		waitpid(ch.pid, &st, 0);
	}
	IBFT_CHECK(ok && WIFEXITED(st) && !WEXITSTATUS(st), "rdm-shared-av",
		   "the child's message did not arrive (child exit %d)",
		   WIFEXITED(st) ? WEXITSTATUS(st) : -1);
out:
	IBFT_CLOSE(av);
	close_all();
}

/*
 * FI_THREAD_SAFE: threads post receives, send and read CQs on the same two
 * endpoints at once; every message arrives once, intact.
 */
enum { THREADS = 4, PER_THREAD = 64, TLEN = 64 };	/* receives fit rx_size */

struct thr {
	struct node *a, *b;
	int id;
	uint8_t (*rbuf)[TLEN];
	int *seen;		/* [THREADS * PER_THREAD], under lock */
	pthread_mutex_t *lock;
	int *received;		/* total, under lock */
	int bad;
};

static void *thr_recv_post(void *arg)
{
	struct thr *t = arg;
	int i, k;

	for (i = 0; i < PER_THREAD; i++) {
		k = t->id * PER_THREAD + i;
		while (fi_trecv(t->b->ep, t->rbuf[k], TLEN, NULL, FI_ADDR_UNSPEC,
				0, ~0ULL, t->rbuf[k]) == -FI_EAGAIN)
			;
	}
	return NULL;
}

/* A thread found something wrong (the threads of a test share the flag). */
static void mark_bad(int *bad, int wrong)
{
	if (wrong)
		__atomic_store_n(bad, 1, __ATOMIC_RELAXED);
}

static void *thr_send(void *arg)
{
	struct thr *t = arg;
	struct fi_cq_tagged_entry e[8];
	uint8_t m[TLEN];
	long end = now_ms() + WAIT_MS;
	int i;
	ssize_t ret;

	for (i = 0; i < PER_THREAD; i++) {
		ibft_fill(m, TLEN, t->id * PER_THREAD + i);
		while ((ret = fi_tinject(t->a->ep, m, TLEN, t->a->peer[1],
					 (uint64_t)(t->id * PER_THREAD + i))) == -FI_EAGAIN &&
		       now_ms() < end)
			fi_cq_read(t->a->cq, e, 8);	/* frees send slots */
		if (ret)
			printf("# sender %d: send %d: %s\n", t->id, i,
			       fi_strerror((int)-ret));
		mark_bad(&t->bad, ret != 0);
	}
	return NULL;
}

static void *thr_reap(void *arg)
{
	struct thr *t = arg;
	struct fi_cq_tagged_entry e[8];
	struct fi_cq_err_entry err = { 0 };
	long end = now_ms() + WAIT_MS * 2;
	uint8_t *buf;
	ssize_t n, i;
	int done = 0, k;

	while (!done && now_ms() < end) {
		fi_cq_read(t->a->cq, e, 8);
		n = fi_cq_read(t->b->cq, e, 8);
		if (n == -FI_EAVAIL) {
			fi_cq_readerr(t->b->cq, &err, 0);
			mark_bad(&t->bad, 1);
		}
		pthread_mutex_lock(t->lock);
		for (i = 0; i < n; i++) {
			k = (int)e[i].tag;
			buf = e[i].op_context;
			if (k < 0 || k >= THREADS * PER_THREAD || t->seen[k]++ ||
			    e[i].len != TLEN || !ibft_verify(buf, TLEN, k))
				mark_bad(&t->bad, 1);
			(*t->received)++;
		}
		done = *t->received == THREADS * PER_THREAD;
		pthread_mutex_unlock(t->lock);
	}
	mark_bad(&t->bad, !done);
	return NULL;
}

static int run_threads(void *(*fn)(void *), struct thr *t)
{
	pthread_t th[THREADS];
	int i, bad = 0;

	for (i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, fn, &t[i]);
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		bad |= t[i].bad;
	}
	return bad;
}

/*
 * FI_THREAD_ENDPOINT: each endpoint used by one thread, each CQ read by
 * one thread, but the CQs are read while the endpoints post (fi_domain(3):
 * only access to one object is serialized).  A CQ read progresses its
 * endpoints, so it runs beside their own calls.  Every message arrives
 * once, whole.
 */
#define EP_MSGS 3000
struct ep_thr {
	struct node *a, *b;
	uint8_t (*rbuf)[TLEN];
	int *seen, received, bad, done;
};

static void *ep_thr_send(void *arg)
{
	struct ep_thr *t = arg;
	uint8_t m[TLEN];
	long end = now_ms() + 4 * WAIT_MS;
	ssize_t ret = 0;
	int i;

	for (i = 0; i < EP_MSGS && !ret; i++) {
		ibft_fill(m, TLEN, (unsigned)i);
		while ((ret = fi_tinject(t->a->ep, m, TLEN, t->a->peer[1],
					 (uint64_t)i)) == -FI_EAGAIN && now_ms() < end)
			;	/* the reaper's reads free the slots */
	}
	mark_bad(&t->bad, ret != 0);
	return NULL;
}

static void *ep_thr_recv(void *arg)
{
	struct ep_thr *t = arg;
	long end = now_ms() + 4 * WAIT_MS;
	ssize_t ret = 0;
	int i;

	for (i = 0; i < EP_MSGS && !ret; i++)
		while ((ret = fi_trecv(t->b->ep, t->rbuf[i], TLEN, NULL, FI_ADDR_UNSPEC,
				       (uint64_t)i, 0, t->rbuf[i])) == -FI_EAGAIN &&
		       now_ms() < end)
			;
	mark_bad(&t->bad, ret != 0);
	return NULL;
}

static void *ep_thr_reap(void *arg)
{
	struct ep_thr *t = arg;
	struct fi_cq_tagged_entry e[16];
	struct fi_cq_err_entry err = { 0 };
	long end = now_ms() + 4 * WAIT_MS;
	ssize_t n, i;
	int k;

	while (t->received < EP_MSGS && now_ms() < end) {
		fi_cq_read(t->a->cq, e, 16);
		n = fi_cq_read(t->b->cq, e, 16);
		if (n == -FI_EAVAIL) {
			fi_cq_readerr(t->b->cq, &err, 0);
			mark_bad(&t->bad, 1);
			continue;
		}
		for (i = 0; i < n; i++) {
			k = (int)((uint8_t (*)[TLEN])e[i].op_context - t->rbuf);
			if (k < 0 || k >= EP_MSGS || e[i].tag != (uint64_t)k ||
			    t->seen[k]++ || !ibft_verify(t->rbuf[k], TLEN, (unsigned)k))
				mark_bad(&t->bad, 1);
			t->received++;
		}
	}
	return NULL;
}

static void test_thread_endpoint(void)
{
	static uint8_t rbuf[EP_MSGS][TLEN];
	static int seen[EP_MSGS];
	struct ep_thr t = { .rbuf = rbuf, .seen = seen };
	pthread_t th[3];
	struct node *ns[2];

	if (ibft_deviates("verbs;ofi_rxm", "rdm-thread-endpoint", "libfabric "
			  "1.17's rxm crashed (SIGSEGV in fi_close of its "
			  "endpoint, CI on 4f36cfa) after this check, as it "
			  "does on cntr-close-while-read"))
		return;
	want_threading = FI_THREAD_ENDPOINT;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	want_threading = FI_THREAD_DOMAIN;
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	t.a = ns[0];
	t.b = ns[1];
	memset(seen, 0, sizeof(seen));
	pthread_create(&th[0], NULL, ep_thr_recv, &t);
	pthread_create(&th[1], NULL, ep_thr_reap, &t);
	pthread_create(&th[2], NULL, ep_thr_send, &t);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	IBFT_CHECK(!t.bad && t.received == EP_MSGS, "rdm-thread-endpoint",
		   "%d of %d messages; some wrong, doubled or failed: %s",
		   t.received, EP_MSGS, t.bad ? "yes" : "no");
out:
	close_all();
}

void test_threads(void)
{
	static uint8_t rbuf[THREADS * PER_THREAD][TLEN];
	static int seen[THREADS * PER_THREAD];
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct thr t[THREADS];
	struct node *ns[2];
	int i, received = 0, bad;

	want_threading = FI_THREAD_SAFE;
	ns[0] = node_open(0, FI_TAGGED, 0);
	ns[1] = node_open(1, FI_TAGGED, 0);
	want_threading = FI_THREAD_DOMAIN;
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < THREADS; i++)
		t[i] = (struct thr){ ns[0], ns[1], i, rbuf, seen, &lock, &received, 0 };
	bad = run_threads(thr_recv_post, t);
	/* Senders and reapers at once: a thread each, sharing both CQs. */
	{
		pthread_t snd[THREADS];

		for (i = 0; i < THREADS; i++)
			pthread_create(&snd[i], NULL, thr_send, &t[i]);
		bad |= run_threads(thr_reap, t);
		for (i = 0; i < THREADS; i++)
			pthread_join(snd[i], NULL);
	}
	for (i = 0; i < THREADS; i++)
		bad |= t[i].bad;
	IBFT_CHECK(!bad && received == THREADS * PER_THREAD, "rdm-thread-safe",
		   "%d of %d messages, some wrong or doubled: %s", received,
		   THREADS * PER_THREAD, bad ? "yes" : "no");
out:
	close_all();
	test_thread_endpoint();
}

/*
 * Both sides send first, at the same moment, to a peer not yet connected:
 * each ends with its message received and its send complete.  The same
 * protocol runs in the parent (idx 0) and the child (idx 1).
 */
int simul_side(int in, int out, int idx)
{
	struct node *n = node_open(idx, FI_TAGGED, 0);
	uint8_t peer[64], m[64] = "hello", r[64];
	size_t plen;
	struct comp c = { 0 };
	char x;
	int ok;

	ok = n && !swap_names(n, in, out, peer, &plen) &&
	     fi_av_insert(n->av, peer, 1, &n->peer[1], 0, NULL) == 1;
	ok = ok && !fi_trecv(n->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 3, 0, r);
	ok = ok && !xwrite(out, "r", 1) && !xread(in, &x, 1);
	ok = ok && !POST(fi_tsend(n->ep, m, sizeof(m), NULL, n->peer[1], 3, m));
	ok = ok && !wait_comp(n, &c, WAIT_MS) && !c.err &&
	     !wait_comp(n, &c, WAIT_MS) && !c.err && !memcmp(r, "hello", 6);
	/* Close only once the other side is done too. */
	xwrite(out, "d", 1);
	xread(in, &x, 1);
	close_all();
	return ok;
}

void test_simultaneous(void)
{
	struct child ch;
	int i, ok = 1, st;

	for (i = 0; ok && i < 3; i++) {
		if (spawn(&ch, "simul"))
			return (void)IBFT_CHECK(0, "rdm-simultaneous-connect", "fork");
		ok = simul_side(ch.from, ch.to, 0);
		close(ch.to);
		close(ch.from);
		waitpid(ch.pid, &st, 0);
		ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	IBFT_CHECK(ok, "rdm-simultaneous-connect", "a side did not get its "
		   "message (round %d)", i);
}

/* The child: an endpoint that answers one message, then waits to die. */
void victim_side(int in, int out)
{
	struct node *n = node_open(1, FI_TAGGED, 0);
	uint8_t peer[64], r[64];
	size_t plen;
	struct comp c = { 0 };
	char x;

	if (!n || swap_names(n, in, out, peer, &plen) ||
	    fi_av_insert(n->av, peer, 1, &n->peer[0], 0, NULL) != 1)
		_exit(1);
	fi_trecv(n->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 1, 0, r);
	while (wait_comp(n, &c, WAIT_MS))
		;
	POST(fi_tsend(n->ep, r, sizeof(r), NULL, n->peer[0], 2, r));
	wait_comp(n, &c, WAIT_MS);
	xwrite(out, "k", 1);
	for (;;)	/* killed here, endpoint open, without a word */
		read(in, &x, 1) > 0 ? (void)0 : pause();
}

void test_dead_peer(void)
{
	struct child ch;
	struct node *a, *ns[2];
	size_t plen, big = IBFT_MIN(ibft_opts.max_size, 1 << 20);
	uint8_t peer[64], m[64] = "ping", r[64], *s = xbuf(big);
	fi_addr_t victim;
	struct comp c = { 0 };
	int ok, errs = 0, nctx = 0, i, st, rxm;
	char x;

	/* The child first: it must not inherit our open endpoint. */
	if (spawn(&ch, "victim") || !(a = node_open(0, FI_TAGGED, 0))) {
		free(s);
		close_all();
		return;
	}
	ok = !swap_names(a, ch.from, ch.to, peer, &plen) &&
	     fi_av_insert(a->av, peer, 1, &victim, 0, NULL) == 1;
	ok = ok && !fi_trecv(a->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 2, 0, r);
	ok = ok && !POST(fi_tsend(a->ep, m, sizeof(m), NULL, victim, 1, m));
	ok = ok && !wait_comp(a, &c, WAIT_MS) && !c.err &&
	     !wait_comp(a, &c, WAIT_MS) && !c.err;
	ok = ok && !xread(ch.from, &x, 1);
	IBFT_CHECK(ok, "rdm-dead-peer-before", "no exchange with the child");
	/* A rendezvous send the child never reads, then the child dies. */
	ok = ok && !POST(fi_tsend(a->ep, s, big, NULL, victim, 5, s));
	kill(ch.pid, SIGKILL);
	waitpid(ch.pid, &st, 0);
	/* And sends after its death. */
	for (i = 0; ok && i < 3; i++) {
		ssize_t ret = POST(fi_tsend(a->ep, m, sizeof(m), NULL, victim, 6, m + i + 1));

		nctx += ret == 0;
	}
	/* Every accepted operation completes, in error, with its context. */
	rxm = ibft_deviates("verbs;ofi_rxm", "rdm-dead-peer-errors", "a rendezvous "
			    "send to a peer that died completes without error");
	for (i = 0; ok && i < 1 + nctx; i++) {
		if (wait_comp(a, &c, rxm ? 5000 : 60000)) {
			ok = 0;
			break;
		}
		errs += c.err != 0 && c.e.op_context != NULL;
		if (getenv("IBFT_VERBOSE"))
			printf("# dead peer: completion err %d context %p\n", c.err,
			       c.e.op_context);
	}
	if (!rxm)
		IBFT_CHECK(ok && errs == 1 + nctx, "rdm-dead-peer-errors", "%d of %d "
			   "operations completed in error with a context", errs,
			   1 + nctx);
	/* The endpoint still works with everyone else. */
	ns[0] = a;
	ns[1] = node_open(1, FI_TAGGED | FI_SOURCE, 0);
	ok = ns[1] && !insert_all(ns, 2);
	ok = ok && !pingpong_one(a, a->peer[1], ns[1], ns[1]->peer[0], 4096, 1,
				 s, s + 8192, 3);
	IBFT_CHECK(ok, "rdm-dead-peer-survivor", "the endpoint no longer works");
	close(ch.to);
	close(ch.from);
	free(s);
	close_all();
}

/*
 * A peer whose eager messages are larger than ours (FI_IBFAB_EAGER_SIZE
 * set otherwise in its process): its 48 KiB eager message does not fit
 * our receive buffers, the receive fails and our QP with it.  That must
 * end the connection, as a failed send does, so that our next message
 * to the peer reconnects and arrives (it used to be flushed, connection
 * after connection, until the peer disconnected).  The child sends the
 * large message, then waits for ours.
 */
/* Above our eager size (32 KiB by default), within the child's (64 KiB). */
#define BIG_EAGER (48 << 10)

int big_eager_side(int in, int out)
{
	struct node *n = node_open(1, FI_TAGGED, 0);
	uint8_t peer[64], *big = xbuf(BIG_EAGER), r[64] = "";
	size_t plen;
	struct comp c = { 0 };
	char x;

	if (!n || swap_names(n, in, out, peer, &plen) ||
	    fi_av_insert(n->av, peer, 1, &n->peer[0], 0, NULL) != 1)
		return 1;
	memset(big, 7, BIG_EAGER);
	fi_trecv(n->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 32, 0, r);
	POST(fi_tsend(n->ep, big, BIG_EAGER, NULL, n->peer[0], 30, big));
	while (!wait_comp(n, &c, WAIT_MS) && c.e.op_context != big)
		;
	xwrite(out, c.e.op_context == big && c.err ? "e" : "?", 1);
	while (!wait_comp(n, &c, 3 * WAIT_MS) && c.e.op_context != r)
		;
	xwrite(out, c.e.op_context == r && !c.err &&
		    !strcmp((char *)r, "after") ? "k" : "n", 1);
	xread(in, &x, 1);
	free(big);
	close_all();
	return 0;
}

void test_receive_failure(void)
{
	struct child ch = { .pid = -1, .to = -1, .from = -1 };
	struct node *a;
	uint8_t peer[64], m[64] = "after", *big = xbuf(2 * BIG_EAGER);
	size_t plen;
	fi_addr_t b;
	struct comp c = { 0 };
	int ok, st;
	char x = 0, y = 0;

	if (!strcmp(ibft_opts.prov, "verbs;ofi_rxm")) {
		printf("skip - rdm-receive-failure-ends-connection [%s]: sets "
		       "ibfab's FI_IBFAB_EAGER_SIZE\n", ibft_opts.prov);
		free(big);
		return;
	}
	setenv("FI_IBFAB_EAGER_SIZE", "65536", 1);	/* the child's */
	ok = !spawn(&ch, "bigeager");
	unsetenv("FI_IBFAB_EAGER_SIZE");
	a = ok ? node_open(0, FI_TAGGED, 0) : NULL;
	ok = a && !swap_names(a, ch.from, ch.to, peer, &plen) &&
	     fi_av_insert(a->av, peer, 1, &b, 0, NULL) == 1 &&
	     !fi_trecv(a->ep, big, 2 * BIG_EAGER, NULL, FI_ADDR_UNSPEC, 30, 0, big);
	/* The large message fails at both ends; we see ours go by. */
	ok = ok && !xread(ch.from, &x, 1) && x == 'e';
	if (a)
		idle(a, 500);
	ok = ok && !POST(fi_tsend(a->ep, m, sizeof(m), NULL, b, 32, m));
	while (ok && !wait_comp(a, &c, 3 * WAIT_MS) && c.e.op_context != m)
		;
	ok = ok && c.e.op_context == m && !c.err && !xread(ch.from, &y, 1) &&
	     y == 'k';
	IBFT_CHECK(ok, "rdm-receive-failure-ends-connection", "after our receive "
		   "of a peer's too-large message failed, our next message to "
		   "it: error %d (the peer's large send: %c, our message "
		   "there: %c)", c.err, x ? x : '?', y ? y : '?');
	if (a)
		fi_cancel(&a->ep->fid, big);
	if (ch.pid > 0) {	/* spawned: told to end, and waited for */
		xwrite(ch.to, "x", 1);
		waitpid(ch.pid, &st, 0);
	}
	free(big);
	close_all();
}
