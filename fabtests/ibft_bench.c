/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Latency and bandwidth over FI_EP_MSG, for any provider, in the manner
 * of perftest, so that the numbers sit beside ib_write_lat and friends:
 *   -t lat_send   send/recv ping-pong; half the round trip
 *   -t lat_write  RDMA write ping-pong, each side polling its buffer's last
 *                 byte (as ib_write_lat does); half the round trip
 *   -t bw_write   a window of 64 RDMA writes kept in flight; MB/s
 *   -t bw_send    a window of sends into pre-posted receives; MB/s
 * -m SIZE bytes, -n iterations.  Busy-polls.  Prints
 *   RESULT test size min_usec median_usec       (latency)
 *   RESULT test size MiB/s                       (bandwidth, as perftest;
 *                                                4 significant digits)
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ibft.h"

#define WINDOW 64

struct remote {
	uint64_t addr, key;
};

static void report_lat(const char *test, size_t size, double *s, int n)
{
	qsort(s, n, sizeof(*s), ibft_cmp_double);
	printf("RESULT %s %zu %.2f %.2f\n", test, size, s[0] / 2, s[n / 2] / 2);
}

/* Spin on the CQ for n completions; -1 on an error. */
static int reap(struct ibft_conn *c, int n)
{
	struct fi_cq_data_entry e[WINDOW];
	int got = 0;
	ssize_t ret;

	while (got < n) {
		ret = fi_cq_read(c->cq, e, IBFT_MIN(n - got, WINDOW));
		if (ret > 0)
			got += (int)ret;
		else if (ret != -FI_EAGAIN)
			return -1;
	}
	return 0;
}

static ssize_t post_retry(ssize_t (*post)(void *), void *arg, struct ibft_conn *c)
{
	ssize_t ret;

	while ((ret = post(arg)) == -FI_EAGAIN)
		reap(c, 0);
	return ret;
}

struct send_args {
	struct ibft_conn *c;
	struct ibft_buf *b;
	size_t size;
};

static ssize_t do_send(void *p)
{
	struct send_args *a = p;

	return fi_send(a->c->ep, a->b->ptr, a->size, a->b->desc, 0, NULL);
}

static ssize_t do_recv(void *p)
{
	struct send_args *a = p;

	return fi_recv(a->c->ep, a->b->ptr, a->size, a->b->desc, 0, NULL);
}

static void lat_send(struct ibft_conn *c, struct ibft_buf *b, size_t size, int n)
{
	struct send_args a = { c, b, size };
	double *s = calloc(n, sizeof(*s)), t;
	int i;

	for (i = 0; i < n + 10; i++) {
		post_retry(do_recv, &a, c);
		t = ibft_now_us();
		if (!ibft_opts.server) {
			post_retry(do_send, &a, c);
			reap(c, 2);
		} else {
			reap(c, 1);
			post_retry(do_send, &a, c);
			reap(c, 1);
		}
		if (i >= 10)
			s[i - 10] = ibft_now_us() - t;
	}
	if (!ibft_opts.server)
		report_lat("lat_send", size, s, n);
	free(s);
}

static void lat_write(struct ibft_conn *c, struct ibft_buf *b, struct remote *r,
		      size_t size, int n)
{
	volatile uint8_t *last = b->ptr + size - 1;
	double *s = calloc(n, sizeof(*s)), t;
	uint8_t *src = b->ptr + b->len / 2;	/* the outgoing half */
	int i, outstanding = 0;
	ssize_t ret;

	*last = 0;
	for (i = 1; i <= n + 10; i++) {
		t = ibft_now_us();
		if (ibft_opts.server)
			while (*last != (uint8_t)i)
				;
		src[size - 1] = (uint8_t)i;
		while ((ret = fi_write(c->ep, src, size, b->desc, 0, r->addr,
				       r->key, NULL)) == -FI_EAGAIN) {
			reap(c, outstanding);
			outstanding = 0;
		}
		if (ret) {	/* not a full queue: the run ends here */
			fprintf(stderr, "lat_write: fi_write: %s\n",
				fi_strerror((int)-ret));
			free(s);
			return;
		}
		outstanding++;
		if (!ibft_opts.server)
			while (*last != (uint8_t)i)
				;
		if (outstanding >= WINDOW / 2) {
			reap(c, outstanding);
			outstanding = 0;
		}
		if (i > 10)
			s[i - 11] = ibft_now_us() - t;
	}
	reap(c, outstanding);
	if (!ibft_opts.server)
		report_lat("lat_write", size, s, n);
	free(s);
}

static void bw(struct ibft_conn *c, struct ibft_buf *b, struct ibft_buf *ctl,
	       struct remote *r, size_t size, int n, int send)
{
	int posted = 0, done = 0, i;
	double t;
	ssize_t ret;
	char msg[8];

	if (ibft_opts.server) {
		/* Receivers: keep receives posted for the sends, then sync. */
		if (send) {
			for (i = 0; i < n; i++) {
				while ((ret = fi_recv(c->ep, b->ptr, size, b->desc, 0,
						      NULL)) == -FI_EAGAIN)
					reap(c, 1), done++;
				if (ret) {
					fprintf(stderr, "bw: fi_recv: %s\n",
						fi_strerror((int)-ret));
					break;
				}
				posted++;
			}
			reap(c, posted - done);
		}
		ibft_ctl_send(c, ctl, "done", 5);
		return;
	}
	t = ibft_now_us();
	while (done < n) {
		while (posted < n && posted - done < WINDOW) {
			ret = send ? fi_send(c->ep, b->ptr, size, b->desc, 0, NULL) :
			      fi_write(c->ep, b->ptr, size, b->desc, 0, r->addr,
				       r->key, NULL);
			if (ret)
				break;
			posted++;
		}
		reap(c, 1);
		done++;
	}
	ibft_ctl_recv(c, ctl, msg, 5);
	t = ibft_now_us() - t;
	printf("RESULT %s %zu %.4g\n", send ? "bw_send" : "bw_write", size,
	       (double)size * n / t * 1e6 / (1 << 20));
}

int main(int argc, char **argv)
{
	struct ibft_conn_opts o = { .tx_size = 256, .rx_size = 256 };
	struct ibft_buf b, ctl;
	struct ibft_conn c;
	struct remote r;
	const char *t;
	size_t size;

	ibft_parse(argc, argv, "-t lat_send|lat_write|bw_write|bw_send -m SIZE");
	t = ibft_opts.test ? ibft_opts.test : "lat_write";
	size = ibft_opts.max_size ? ibft_opts.max_size : 8;
	if (ibft_connect(&c, &o)) {
		fprintf(stderr, "connect failed\n");
		return 1;
	}
	if (ibft_buf_alloc(&c, &b, 2 * size + 64, FI_SEND | FI_RECV | FI_WRITE |
			   FI_REMOTE_WRITE) ||
	    ibft_buf_alloc(&c, &ctl, 64, FI_SEND | FI_RECV))
		return 1;
	/* Each side learns the other's buffer. */
	r.addr = (uintptr_t)b.ptr;
	r.key = b.key;
	if (ibft_opts.server) {
		ibft_ctl_send(&c, &ctl, &r, sizeof(r));
		ibft_ctl_recv(&c, &ctl, &r, sizeof(r));
	} else {
		struct remote mine = r;

		ibft_ctl_recv(&c, &ctl, &r, sizeof(r));
		ibft_ctl_send(&c, &ctl, &mine, sizeof(mine));
	}
	if (!strcmp(t, "lat_send"))
		lat_send(&c, &b, size, ibft_opts.iters);
	else if (!strcmp(t, "lat_write"))
		lat_write(&c, &b, &r, size, ibft_opts.iters);
	else
		bw(&c, &b, &ctl, &r, size, ibft_opts.iters, !strcmp(t, "bw_send"));
	ibft_buf_free(&b);
	ibft_buf_free(&ctl);
	ibft_close(&c);
	return 0;
}
