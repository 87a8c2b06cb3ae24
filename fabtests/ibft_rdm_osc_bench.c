/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * One-sided FI_EP_RDM benchmarks for any provider with FI_RMA and
 * FI_ATOMIC, measured the way perftest measures raw verbs, so the two
 * stand side by side.  A second process (this program again) owns the
 * target memory, on -d, and progresses its endpoint throughout (a
 * provider may apply atomics in software).
 *
 *   ibft_rdm_osc_bench -p PROV -s ADDR0 -d ADDR1 -t TEST -m SIZE -n ITERS
 *
 *   put_lat   writes ping-ponged through memory, each side polling the
 *             last byte of its buffer (ib_write_lat): half a round trip
 *   get_lat   one read at a time, to its completion (ib_read_lat)
 *   put_bw, get_bw   64 in flight (ib_write_bw, ib_read_bw)
 *   fadd_lat  an 8-byte fetch-add at a time (ib_atomic_lat); -m 4 for a
 *             4-byte one
 *
 * Output: "RESULT TEST SIZE MIN MEDIAN" (usec) or "RESULT TEST SIZE MIB/S".
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include "ibft_rdm_node.h"

#define WINDOW 64

struct remote {
	uint64_t addr, key;
};

/* Each side's memory: [0, size) peers write or read, [size, 2 size) its
 * own source; registered, since a provider may ask for FI_MR_LOCAL. */
struct side {
	struct node *nd;
	fi_addr_t peer;
	uint8_t *mem;
	struct fid_mr *mr;
	void *desc;
	struct remote there;
	size_t size;
};

static int setup(struct side *s, int in, int out)
{
	uint8_t name[64];
	size_t nlen;
	struct remote here;
	int mr_mode, ret;

	want_mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		       FI_MR_LOCAL | FI_MR_ENDPOINT;
	s->nd = node_open(in == 3 ? 1 : 0, FI_RMA | FI_ATOMIC | FI_MSG, 0);
	if (!s->nd || swap_names(s->nd, in, out, name, &nlen) ||
	    fi_av_insert(s->nd->av, name, 1, &s->peer, 0, NULL) != 1)
		return -1;
	s->size = ibft_opts.max_size < 8 ? 8 : ibft_opts.max_size;
	if (posix_memalign((void **)&s->mem, 4096, 2 * s->size))
		return -1;
	memset(s->mem, 0, 2 * s->size);
	ret = fi_mr_reg(s->nd->domain, s->mem, 2 * s->size, FI_READ | FI_WRITE |
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &s->mr, NULL);
	mr_mode = s->nd->info->domain_attr->mr_mode;
	if (!ret && (mr_mode & FI_MR_ENDPOINT)) {
		ret = fi_mr_bind(s->mr, &s->nd->ep->fid, 0);
		if (!ret)
			ret = fi_mr_enable(s->mr);
	}
	if (ret) {
		fprintf(stderr, "fi_mr_reg: %s\n", fi_strerror(-ret));
		return -1;
	}
	s->desc = fi_mr_desc(s->mr);
	here.addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)s->mem : 0;
	here.key = fi_mr_key(s->mr);
	if (xwrite(out, &here, sizeof(here)) || xread(in, &s->there, sizeof(s->there)))
		return -1;
	return 0;
}

/* Read whatever the CQ has; -1 on an error completion. */
static int drain(struct side *s, int *done)
{
	struct fi_cq_tagged_entry e[16];
	struct fi_cq_err_entry err = { 0 };
	ssize_t n = fi_cq_read(s->nd->cq, e, 16);

	if (n > 0)
		*done += (int)n;
	if (n == -FI_EAVAIL) {
		fi_cq_readerr(s->nd->cq, &err, 0);
		fprintf(stderr, "completion: %s\n", fi_strerror(err.err));
		return -1;
	}
	return 0;
}

/* Post, reading the CQ while the provider says -FI_EAGAIN. */
#define POST_DRAIN(s, done, call) ({ ssize_t _r; int _e = 0;		\
	while ((_r = (call)) == -FI_EAGAIN && !(_e = drain(s, done)))	\
		;							\
	_r ? _r : _e; })

static int wait_done(struct side *s, int *done, int want)
{
	long end = now_ms() + WAIT_MS;

	while (*done < want)
		if (drain(s, done) || now_ms() > end)
			return -1;
	return 0;
}

static void report(const char *t, size_t size, double *v, int n, double scale)
{
	qsort(v, n, sizeof(double), ibft_cmp_double);
	printf("RESULT %s %zu %.2f %.2f\n", t, size, v[0] * scale, v[n / 2] * scale);
}

/* put_lat: the last byte of each side's buffer says which write came. */
static int put_lat_initiator(struct side *s)
{
	volatile uint8_t *flag = s->mem + s->size - 1;
	uint8_t *src = s->mem + s->size;
	int i, n = ibft_opts.iters, warm = 10, done = 0, posted = 0;
	double *rtt = calloc(n, sizeof(double)), t0;
	long end;

	if (!rtt)
		return -1;
	for (i = -warm; i < n; i++) {
		uint8_t seq = (uint8_t)(i + warm + 1);

		t0 = ibft_now_us();
		src[s->size - 1] = seq;
		if (POST_DRAIN(s, &done, fi_write(s->nd->ep, src, s->size, s->desc,
						  s->peer, s->there.addr,
						  s->there.key, NULL)))
			goto fail;
		posted++;
		for (end = now_ms() + WAIT_MS; *flag != seq; )
			if (drain(s, &done) || now_ms() > end)
				goto fail;
		if (i >= 0)
			rtt[i] = ibft_now_us() - t0;
	}
	report("put_lat", s->size, rtt, n, 0.5);
	free(rtt);
	return wait_done(s, &done, posted);
fail:
	free(rtt);
	return -1;
}

/* The target's side of put_lat: answer each write with one. */
static int put_lat_target(struct side *s)
{
	volatile uint8_t *flag = s->mem + s->size - 1;
	uint8_t *src = s->mem + s->size;
	int i, n = ibft_opts.iters, warm = 10, done = 0;
	long end;

	for (i = -warm; i < n; i++) {
		uint8_t seq = (uint8_t)(i + warm + 1);

		for (end = now_ms() + WAIT_MS; *flag != seq; )
			if (drain(s, &done) || now_ms() > end)
				return -1;
		src[s->size - 1] = seq;
		if (POST_DRAIN(s, &done, fi_write(s->nd->ep, src, s->size, s->desc,
						  s->peer, s->there.addr,
						  s->there.key, NULL)))
			return -1;
	}
	return wait_done(s, &done, n + warm);
}

/* One operation at a time, each to its completion. */
static int one_at_a_time(struct side *s, const char *t)
{
	int i, n = ibft_opts.iters, warm = 10, done = 0;
	double *lat = calloc(n, sizeof(double)), t0;
	uint8_t *dst = s->mem + s->size;
	uint64_t one = 1, old;
	ssize_t ret;

	if (!lat)
		return -1;
	for (i = -warm; i < n; i++) {
		t0 = ibft_now_us();
		if (!strcmp(t, "get_lat"))
			ret = POST_DRAIN(s, &done, fi_read(s->nd->ep, dst, s->size,
					s->desc, s->peer, s->there.addr,
					s->there.key, NULL));
		else
			ret = POST_DRAIN(s, &done, fi_fetch_atomic(s->nd->ep, &one, 1,
					NULL, &old, NULL, s->peer, s->there.addr,
					s->there.key, s->size == 4 ? FI_UINT32 :
					FI_UINT64, FI_SUM, NULL));
		if (ret || wait_done(s, &done, i + warm + 1))
			goto fail;
		if (i >= 0)
			lat[i] = ibft_now_us() - t0;
	}
	report(t, s->size, lat, n, 1.0);
	free(lat);
	return 0;
fail:
	free(lat);
	return -1;
}

/* WINDOW in flight; MiB/s over the whole run. */
static int window(struct side *s, const char *t)
{
	int rounds = IBFT_MIN(ibft_opts.iters / WINDOW + 1, 1000), i, k, done = 0;
	int get = !strcmp(t, "get_bw");
	uint8_t *src = s->mem + s->size;
	double t0 = 0;

	for (i = -1; i < rounds; i++) {
		if (i == 0)
			t0 = ibft_now_us();
		for (k = 0; k < WINDOW; k++)
			if (POST_DRAIN(s, &done, get ?
				       fi_read(s->nd->ep, src, s->size, s->desc,
					       s->peer, s->there.addr, s->there.key, NULL) :
				       fi_write(s->nd->ep, src, s->size, s->desc,
						s->peer, s->there.addr, s->there.key, NULL)))
				return -1;
		if (wait_done(s, &done, (i + 2) * WINDOW))
			return -1;
	}
	printf("RESULT %s %zu %.1f\n", t, s->size, (double)rounds * WINDOW *
	       s->size / ((ibft_now_us() - t0) / 1e6) / (1 << 20));
	return 0;
}

/* The target: progress its endpoint until the initiator says it is done. */
static int serve(struct side *s, int in)
{
	struct pollfd p = { .fd = in, .events = POLLIN };
	int done = 0;
	char x;

	while (poll(&p, 1, 0) == 0)
		if (drain(s, &done))
			return -1;
	return xread(in, &x, 1);
}

int main(int argc, char **argv)
{
	struct side s = { 0 };
	struct child ch;
	const char *t;
	int ret, st, child = getenv("IBFT_RDM_CHILD") != NULL;

	ibft_parse(argc, argv, "(-s ADDR0 -d ADDR1 -t put_lat|get_lat|put_bw|get_bw|fadd_lat)");
	ibft_argv = argv;
	t = ibft_opts.test;
	if (!ibft_opts.src || !t) {
		fprintf(stderr, "ibft_rdm_osc_bench needs -s and -t\n");
		return 2;
	}
	if (child) {
		if (setup(&s, 3, 4))
			return 1;
		ret = !strcmp(t, "put_lat") ? put_lat_target(&s) : serve(&s, 3);
		xwrite(4, "x", 1);
		fi_close(&s.mr->fid);
		close_all();
		return ret ? 1 : 0;
	}
	if (spawn(&ch, "osc") || setup(&s, ch.from, ch.to))
		return 1;
	if (!strcmp(t, "put_lat"))
		ret = put_lat_initiator(&s);
	else if (!strcmp(t, "get_lat") || !strcmp(t, "fadd_lat"))
		ret = one_at_a_time(&s, t);
	else
		ret = window(&s, t);
	if (strcmp(t, "put_lat"))
		xwrite(ch.to, "d", 1);
	{
		char x;

		xread(ch.from, &x, 1);	/* the child is done with our memory */
	}
	fi_close(&s.mr->fid);
	close_all();
	close(ch.to);
	close(ch.from);
	waitpid(ch.pid, &st, 0);
	return ret || !WIFEXITED(st) || WEXITSTATUS(st);
}
