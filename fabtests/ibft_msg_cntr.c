/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibft_msg_cntr: counters on FI_EP_MSG endpoints (fi_cntr(3)), between a
 * server (-s ADDR) and a client (-d ADDR [-s ADDR]).  One test per run:
 *   selective  the CQ is bound with FI_SELECTIVE_COMPLETION: sends,
 *              injects, receives, writes and reads count on their
 *              counters (sends and writes on one, reads on another) with
 *              no CQ entry, a writedata on the receive it consumed; the one operation asked with FI_COMPLETION is
 *              still in the CQ after counters were waited on; a counter
 *              wait times out, sleeps until a message arrives, and a
 *              counter's fd wakes poll(2) and names it in a poll set; a
 *              write with a wrong key counts as an error
 *   tagged     the same, on an endpoint opened with FI_TAGGED
 *   only       counters and no CQ at all: messages, writes and reads
 *   overflow   a CQ that reports every receive, which the server does not
 *              read while its receive counter progresses, until more
 *              messages came than the CQ keeps: the counter stops there
 *              (documented); then every message is read from the CQ in
 *              order, each where the multi-receive buffer put it, and the
 *              counter reaches the total
 * Counters are opened with FI_WAIT_UNSPEC and waited on with fi_cntr_wait.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Poll sets and fi_av_bind are libfabric 1.x API that 2.x deprecates:
 * these tests exercise them on purpose (ibfab serves 1.x callers). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "ibft.h"

#define N 24		/* messages each way */
#define SZ 64		/* bytes in each */
#define K 8		/* writes, and reads */
#define WAIT_MS 10000

struct region {
	uint64_t addr, key;
};

static struct ibft_conn_opts copts;
static int with_cq;

static int cntr_reaches(struct fid_cntr *c, uint64_t n, const char *name)
{
	int ret = fi_cntr_wait(c, n, WAIT_MS);

	return IBFT_CHECK(!ret, name, "fi_cntr_wait(%llu): %s (value %llu, "
			  "errors %llu)", (unsigned long long)n, fi_strerror(-ret),
			  (unsigned long long)fi_cntr_read(c),
			  (unsigned long long)fi_cntr_readerr(c));
}

/* With a CQ: nothing but the one operation asked with FI_COMPLETION. */
static void only_marked(struct ibft_conn *c, void *marker, const char *name)
{
	struct fi_cq_tagged_entry e[4];
	ssize_t n;

	if (!with_cq)
		return;
	n = fi_cq_read(c->cq, e, 4);
	IBFT_CHECK(n == 1 && e[0].op_context == marker, name, "fi_cq_read "
		   "gave %zd entries (first context %p, want %p)", n,
		   n > 0 ? e[0].op_context : NULL, marker);
	n = fi_cq_read(c->cq, e, 4);
	IBFT_CHECK(n == -FI_EAGAIN, name, "then %zd more", n);
}

/* A message asked with FI_COMPLETION where the CQ is selective. */
static int send_marked(struct ibft_conn *c, struct ibft_buf *b, size_t len,
		       void *ctx)
{
	struct iovec iov = { b->ptr, len };
	struct fi_msg m = { .msg_iov = &iov, .desc = &b->desc, .iov_count = 1,
			    .context = ctx };

	return (int)fi_sendmsg(c->ep, &m, with_cq ? FI_COMPLETION : 0);
}

static int recv_marked(struct ibft_conn *c, struct ibft_buf *b, size_t len,
		       void *ctx)
{
	struct iovec iov = { b->ptr, len };
	struct fi_msg m = { .msg_iov = &iov, .desc = &b->desc, .iov_count = 1,
			    .context = ctx };

	return (int)fi_recvmsg(c->ep, &m, with_cq ? FI_COMPLETION : 0);
}

/* The counter's fd after fi_trywait wakes poll(2) once a message lands;
 * a poll set holding the counter then names it. */
static void fd_and_pollset(struct ibft_conn *c, uint64_t want)
{
	struct fi_poll_attr pattr = { 0 };
	struct fid_poll *ps = NULL;
	struct fid *fids[1] = { &c->rx_cntr->fid };
	struct pollfd pfd = { .events = POLLIN };
	void *ctx[2];
	int ret, n, woke = 0;

	ret = fi_poll_open(c->domain, &pattr, &ps);
	if (!IBFT_CHECK(!ret, "cntr-pollset-open", "%s", fi_strerror(-ret)))
		return;
	ret = fi_poll_add(ps, &c->rx_cntr->fid, 0);
	IBFT_CHECK(!ret, "cntr-pollset-add", "%s", fi_strerror(-ret));
	n = fi_poll(ps, ctx, 2);
	IBFT_CHECK(n == 0, "cntr-pollset-quiet", "fi_poll before: %d", n);
	ret = fi_control(&c->rx_cntr->fid, FI_GETWAIT, &pfd.fd);
	IBFT_CHECK(!ret, "cntr-fd", "FI_GETWAIT: %s", fi_strerror(-ret));
	while (!ret && fi_cntr_read(c->rx_cntr) < want) {
		if (fi_trywait(c->fabric, fids, 1) == -FI_EAGAIN)
			continue;
		if (poll(&pfd, 1, WAIT_MS) <= 0)
			break;
		woke = 1;
	}
	IBFT_CHECK(fi_cntr_read(c->rx_cntr) >= want, "cntr-fd-wakes",
		   "the counter's fd %s, count %llu of %llu",
		   woke ? "woke" : "never woke",
		   (unsigned long long)fi_cntr_read(c->rx_cntr),
		   (unsigned long long)want);
	n = fi_poll(ps, ctx, 2);
	IBFT_CHECK(n == 1 && ctx[0] == &c->rx_cntr, "cntr-pollset-names",
		   "fi_poll: %d (context %p, want %p)", n, n > 0 ? ctx[0] : NULL,
		   (void *)&c->rx_cntr);
	fi_poll_del(ps, &c->rx_cntr->fid, 0);
	fi_close(&ps->fid);
}

static void server(struct ibft_conn *c)
{
	struct ibft_buf in, out, region;
	struct region r;
	int marker, i, ok = 1, ret;

	if (ibft_buf_alloc(c, &in, (N + 4) * SZ, FI_RECV) ||
	    ibft_buf_alloc(c, &out, SZ, FI_SEND) ||
	    ibft_buf_alloc(c, &region, K * SZ, FI_REMOTE_WRITE | FI_REMOTE_READ)) {
		IBFT_CHECK(0, "buffers", "registration failed");
		return;
	}
	/* N silent receives and one marked. */
	for (i = 0; i < N && ok; i++)
		ok = !fi_recv(c->ep, in.ptr + i * SZ, SZ, in.desc, 0, NULL);
	ok = ok && !recv_marked(c, &in, 0, &marker);
	if (cntr_reaches(c->rx_cntr, N + 1, "cntr-recv-counts")) {
		int good = 1;

		for (i = 0; i < N; i++)
			good = good && ibft_verify(in.ptr + i * SZ, SZ, 100 + i);
		IBFT_CHECK(good, "cntr-recv-data", "a message is wrong");
	}
	/*
	 * The CQ holds the marked receive alone.  Looked at before the
	 * region's address goes: the client writes once it has it, and in
	 * tagged mode its writedata is reported as soon as it lands.  The
	 * silent send after it adds nothing either (the writedata check
	 * below reads exactly one entry).
	 */
	only_marked(c, &marker, "cntr-cq-keeps-marked-recv");
	for (i = 0; i < K; i++)
		ibft_fill(region.ptr + i * SZ, SZ, 500 + i);
	r.addr = (uintptr_t)region.ptr;
	r.key = region.key;
	memcpy(out.ptr, &r, sizeof(r));
	ok = ok && !fi_send(c->ep, out.ptr, sizeof(r), out.desc, 0, NULL);
	IBFT_CHECK(ok, "server-post", "posting failed");
	cntr_reaches(c->tx_cntr, 1, "cntr-send-counts");

	/* The client's writes end with a writedata, which takes a receive
	 * and counts as one; its remote CQ data is reported all the same. */
	ok = !fi_recv(c->ep, in.ptr, SZ, in.desc, 0, NULL);
	if (cntr_reaches(c->rx_cntr, N + 2, "cntr-writedata-counts")) {
		for (i = 0; i < K; i++)
			ok = ok && ibft_verify(region.ptr + i * SZ, SZ, 700 + i);
		IBFT_CHECK(ok, "cntr-write-data", "the region is not as written");
	}
	if (with_cq) {
		/* Room for either format: tagged mode's CQ is TAGGED. */
		struct fi_cq_tagged_entry e = { 0 };
		ssize_t n = fi_cq_read(c->cq, &e, 1);

		IBFT_CHECK(n == 1 && (e.flags & FI_REMOTE_CQ_DATA) && e.data == 77,
			   "cntr-writedata-reported", "fi_cq_read: %zd (flags "
			   "%#llx data %llu)", n, (unsigned long long)e.flags,
			   (unsigned long long)e.data);
	}
	if (copts.no_cq)
		goto out;	/* the only-counters run ends here */

	/* A wait that cannot be met times out; one that can sleeps. */
	ret = fi_cntr_wait(c->rx_cntr, N + 100, 100);
	IBFT_CHECK(ret == -FI_ETIMEDOUT, "cntr-wait-times-out", "fi_cntr_wait: %s",
		   fi_strerror(-ret));
	ok = !fi_recv(c->ep, in.ptr, SZ, in.desc, 0, NULL) &&
	     !fi_recv(c->ep, in.ptr + SZ, SZ, in.desc, 0, NULL);
	IBFT_CHECK(ok, "server-post-late", "posting failed");
	cntr_reaches(c->rx_cntr, N + 3, "cntr-wait-sleeps");
	fd_and_pollset(c, N + 4);
	/* The client's bad write breaks the connection; wait for it. */
	fi_cntr_wait(c->rx_cntr, N + 100, 3000);
out:
	ibft_buf_free(&in);
	ibft_buf_free(&out);
	ibft_buf_free(&region);
}

static void client(struct ibft_conn *c)
{
	struct ibft_buf out, in, local;
	struct fi_cq_err_entry err = { 0 };
	struct region r;
	int marker, i, ok = 1, ret;

	if (ibft_buf_alloc(c, &out, (N + 4) * SZ, FI_SEND) ||
	    ibft_buf_alloc(c, &in, SZ, FI_RECV) ||
	    ibft_buf_alloc(c, &local, 2 * K * SZ, FI_WRITE | FI_READ)) {
		IBFT_CHECK(0, "buffers", "registration failed");
		return;
	}
	ok = !fi_recv(c->ep, in.ptr, SZ, in.desc, 0, NULL);
	/* Half sent, half injected, then one marked. */
	for (i = 0; i < N && ok; i++) {
		ibft_fill(out.ptr + i * SZ, SZ, 100 + i);
		for (;;) {
			ret = i % 2 ? (int)fi_send(c->ep, out.ptr + i * SZ, SZ,
						   out.desc, 0, NULL) :
				      (int)fi_inject(c->ep, out.ptr + i * SZ,
						     SZ, 0);
			if (ret != -FI_EAGAIN)
				break;
			fi_cntr_read(c->tx_cntr);	/* progress */
		}
		ok = !ret;
	}
	ok = ok && !send_marked(c, &out, 0, &marker);
	IBFT_CHECK(ok, "client-post", "sending failed");
	cntr_reaches(c->tx_cntr, N + 1, "cntr-send-counts");
	if (!cntr_reaches(c->rx_cntr, 1, "cntr-recv-counts"))
		goto out;
	only_marked(c, &marker, "cntr-cq-keeps-marked-send");

	/* K writes on the send counter, K reads on the read counter. */
	memcpy(&r, in.ptr, sizeof(r));
	for (i = 0, ok = 1; i < K && ok; i++)
		ok = !fi_read(c->ep, local.ptr + (K + i) * SZ, SZ, local.desc, 0,
			      r.addr + i * SZ, r.key, NULL);
	IBFT_CHECK(ok, "client-read-post", "posting failed");
	if (cntr_reaches(c->rd_cntr, K, "cntr-read-counts")) {
		for (i = 0; i < K; i++)
			ok = ok && ibft_verify(local.ptr + (K + i) * SZ, SZ, 500 + i);
		IBFT_CHECK(ok, "cntr-read-data", "a read brought the wrong data");
	}
	for (i = 0, ok = 1; i < K && ok; i++) {
		ibft_fill(local.ptr + i * SZ, SZ, 700 + i);
		ok = !fi_write(c->ep, local.ptr + i * SZ, SZ, local.desc, 0,
			       r.addr + i * SZ, r.key, NULL);
	}
	IBFT_CHECK(ok, "client-write-post", "posting failed");
	cntr_reaches(c->tx_cntr, N + 1 + K, "cntr-write-counts");
	IBFT_EXPECT(fi_cntr_read(c->rd_cntr), K, "cntr-read-apart");
	ok = !fi_writedata(c->ep, local.ptr, SZ, local.desc, 77, 0, r.addr,
			   r.key, NULL);
	IBFT_CHECK(ok, "client-writedata-post", "posting failed");
	cntr_reaches(c->tx_cntr, N + 2 + K, "cntr-writedata-counts");
	if (copts.no_cq)
		goto out;

	/* Give the server time to sleep in fi_cntr_wait, then in poll(2). */
	usleep(300000);
	ok = !fi_send(c->ep, out.ptr, 8, out.desc, 0, NULL);
	usleep(300000);
	ok = ok && !fi_send(c->ep, out.ptr, 8, out.desc, 0, NULL);
	if (!ok)	/* the count below then says what is missing */
		printf("# a late send was refused\n");
	cntr_reaches(c->tx_cntr, N + 4 + K, "cntr-late-sends");

	/* A wrong key: an error on the counter and in the CQ. */
	ok = !fi_write(c->ep, local.ptr, SZ, local.desc, 0, r.addr, r.key + 99,
		       &marker);
	/* fi_cntr_wait ends with -FI_EAVAIL on an error during the wait;
	 * the error may come first, so the error count is what is checked. */
	ret = fi_cntr_wait(c->tx_cntr, N + 5 + K, 2000);
	for (i = 0; i < 2000 && fi_cntr_readerr(c->tx_cntr) < 1; i++)
		usleep(1000);
	IBFT_CHECK(ok && fi_cntr_readerr(c->tx_cntr) == 1 &&
		   fi_cntr_read(c->tx_cntr) == N + 4 + K, "cntr-error-counts",
		   "fi_cntr_wait: %s; %llu errors, %llu done", fi_strerror(-ret),
		   (unsigned long long)fi_cntr_readerr(c->tx_cntr),
		   (unsigned long long)fi_cntr_read(c->tx_cntr));
	ret = (int)fi_cq_read(c->cq, &err, 1);
	if (ret == -FI_EAVAIL)
		ret = (int)fi_cq_readerr(c->cq, &err, 0);
	IBFT_CHECK(ret == 1 && err.op_context == &marker && err.err,
		   "cntr-error-in-cq", "fi_cq_readerr: %d (context %p err %d)",
		   ret, err.op_context, err.err);
out:
	ibft_buf_free(&out);
	ibft_buf_free(&in);
	ibft_buf_free(&local);
}

#define OV_MSGS 600	/* more than a 32-entry CQ's reports keep */

static void overflow_server(struct ibft_conn *c)
{
	struct fi_cq_data_entry e[8];
	size_t min = SZ;
	struct ibft_buf in;
	int got = 0, bad = 0, last_flag = 0, ret, i;
	uint64_t stalled;

	if (ibft_buf_alloc(c, &in, OV_MSGS * SZ, FI_RECV)) {
		IBFT_CHECK(0, "buffers", "registration failed");
		return;
	}
	ret = fi_setopt(&c->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV,
			&min, sizeof(min));
	if (!ret)
		ret = (int)fi_recvmsg(c->ep, &(struct fi_msg){
			.msg_iov = &(struct iovec){ in.ptr, OV_MSGS * SZ },
			.desc = &in.desc, .iov_count = 1, .context = &in },
			FI_MULTI_RECV | FI_COMPLETION);
	IBFT_EXPECT(ret, 0, "overflow-post");
	/* Nobody reads the CQ: the counter moves until its reports fill. */
	fi_cntr_wait(c->rx_cntr, OV_MSGS, 2000);
	stalled = fi_cntr_read(c->rx_cntr);
	IBFT_CHECK(stalled > 0 && stalled < OV_MSGS, "overflow-counter-stops",
		   "the receive counter read %llu of %d with the CQ unread",
		   (unsigned long long)stalled, OV_MSGS);
	/* Now read everything: in order, each message where it landed. */
	while (got < OV_MSGS) {
		ret = ibft_cq_wait(c, e, 1, 0, WAIT_MS);
		if (ret != 1) {
			bad++;
			break;
		}
		if (!(e[0].flags & FI_RECV) || e[0].op_context != &in ||
		    e[0].len != SZ || (uint8_t *)e[0].buf != in.ptr + got * SZ ||
		    !ibft_verify(e[0].buf, SZ, 100 + got))
			bad++;
		last_flag = !!(e[0].flags & FI_MULTI_RECV);
		if (last_flag && got != OV_MSGS - 1)
			bad++;	/* released before it was full */
		got++;
	}
	IBFT_CHECK(got == OV_MSGS && !bad && last_flag, "overflow-cq-in-order",
		   "%d of %d messages read, %d wrong, last FI_MULTI_RECV %d",
		   got, OV_MSGS, bad, last_flag);
	IBFT_EXPECT(fi_cntr_read(c->rx_cntr), OV_MSGS, "overflow-counter-total");
	for (i = 0; i < 8 && fi_cq_read(c->cq, e, 8) != -FI_EAGAIN; i++)
		bad++;
	IBFT_CHECK(!bad, "overflow-cq-then-empty", "more entries than messages");
	ibft_buf_free(&in);
}

static void overflow_client(struct ibft_conn *c)
{
	struct ibft_buf out;
	int i, ret = 0;

	if (ibft_buf_alloc(c, &out, OV_MSGS * SZ, FI_SEND)) {
		IBFT_CHECK(0, "buffers", "registration failed");
		return;
	}
	for (i = 0; i < OV_MSGS && !ret; i++) {
		ibft_fill(out.ptr + i * SZ, SZ, 100 + i);
		while ((ret = (int)fi_send(c->ep, out.ptr + i * SZ, SZ, out.desc,
					   0, NULL)) == -FI_EAGAIN)
			fi_cntr_read(c->tx_cntr);	/* progress */
	}
	IBFT_EXPECT(ret, 0, "overflow-sends-posted");
	/* The server reads after its counter stopped: give it the time. */
	ret = fi_cntr_wait(c->tx_cntr, OV_MSGS, 3 * WAIT_MS);
	IBFT_CHECK(!ret, "overflow-sends-complete", "fi_cntr_wait: %s (%llu of "
		   "%d)", fi_strerror(-ret),
		   (unsigned long long)fi_cntr_read(c->tx_cntr), OV_MSGS);
	ibft_buf_free(&out);
}

int main(int argc, char **argv)
{
	const char *test;
	struct ibft_conn c;
	int ret;

	ibft_parse(argc, argv, "(-t selective|tagged|only|overflow)");
	test = ibft_opts.test ? ibft_opts.test : "selective";
	if (!strncmp(test, "cntr-", 5))
		test += 5;	/* run-suite's names */
	copts.cntrs = 1;
	copts.cq_bind_flags = FI_SELECTIVE_COMPLETION;
	if (!strcmp(test, "tagged"))
		copts.tagged = 1;
	else if (!strcmp(test, "only"))
		copts.no_cq = 1;
	else if (!strcmp(test, "overflow")) {
		/* The server's every receive reported (the client's sends
		 * not: it reads no CQ either); a CQ of 32 for 16 + 16. */
		copts.cq_bind_flags = ibft_opts.server ? 0 : FI_SELECTIVE_COMPLETION;
		copts.caps = FI_MSG | FI_MULTI_RECV;
		copts.tx_size = copts.rx_size = 16;
		copts.cq_size = 32;
	} else if (strcmp(test, "selective"))
		IBFT_CHECK(0, "test-name", "no test %s", test);
	with_cq = !copts.no_cq;
	ret = ibft_connect(&c, &copts);
	if (IBFT_EXPECT(ret, 0, "connect")) {
		if (!strcmp(test, "overflow"))
			(ibft_opts.server ? overflow_server : overflow_client)(&c);
		else if (ibft_opts.server)
			server(&c);
		else
			client(&c);
	}
	ibft_close(&c);
	return ibft_finish();
}
