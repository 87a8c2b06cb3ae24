/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The software cost of a message, for valgrind's callgrind: a ping-pong
 * (or one one-sided operation at a time) whose measured stretches are
 * bracketed by callgrind's client requests, so that set-up, warm-up and
 * the peer's start are never counted, and that counts the fi_cq_read calls
 * that found nothing, so their cost can be taken out.  Without callgrind
 * it does the same work, uncounted; fabtests/run-instr runs it under
 * callgrind and does the arithmetic.
 *
 *   ibft_instr -p PROV -s ADDR0 -d ADDR1 -t TEST -m SIZE -n N
 *
 *   rdm_send, rdm_tagged, msg_send   ping-pong of SIZE-byte messages
 *   rdm_write, rdm_read, rdm_fadd,   one operation at a time to its
 *   msg_write, msg_read              completion (fadd: 8-byte FI_SUM fetch)
 *
 * The second process (this program again) is the responder or the target;
 * it progresses its endpoint throughout.  Each process measures, in this
 * order, N then 3N iterations ("loop1", "loop2") and then 200 then 600
 * reads of an empty CQ ("idle1", "idle2"), each stretch dumped by callgrind
 * under its label, and prints for each
 *
 *   REGION PID ROLE LABEL ITERATIONS EMPTY_READS
 *
 * ROLE: "initiator" (the first process) or "peer".
 *
 * The difference of two stretches cancels what a stretch costs once.
 * Only the calling thread is counted: data progress is asked to be manual.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/fi_atomic.h>

#include "ibft_rdm_node.h"

#if defined(__has_include) && __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(label) ((void)(label))
#endif

/* Warm-up iterations: past what a provider does the first time it
 * does what it then does every few dozen messages (ibfab adds its first
 * extra eager buffers when its SRQ first lacks a batch of 16, with
 * buffers still held; its credit grants go every few dozen). */
#define WARM 64
#define IDLE 200
#define SPIN_CHECK 0xffff	/* empty reads between looks at the clock */

enum kind { PINGPONG, WRITE, READ, FADD };

struct remote {
	uint64_t addr, key;
};

/*
 * One side.  Its memory: [0, area) what the peer sends into, writes or
 * reads; [area, 2 area) our source; then the region flag the initiator
 * writes at the end of each stretch, its source, and a fetch's result.
 */
struct side {
	enum kind kind;
	int tagged, msg, initiator;
	struct node *nd;		/* FI_EP_RDM */
	struct ibft_conn conn;		/* FI_EP_MSG */
	struct fid_ep *ep;
	struct fid_cq *cq;
	fi_addr_t peer;
	uint8_t *mem;
	struct fid_mr *mr;
	void *desc;
	struct remote there;
	size_t size, area;
	int in, out;			/* pipes to the peer */
	uint64_t empty;			/* fi_cq_read calls that found nothing */
	int banked;			/* completions read while posting */
	long deadline;
	struct fi_context ctx[2];
};

/* Offsets past the two areas: the flag, its source, a fetch's result. */
#define FLAG_AT(s) (2 * (s)->area)
#define FLAG_SRC_AT(s) (2 * (s)->area + 8)
#define RESULT_AT(s) (2 * (s)->area + 16)

static volatile uint64_t *flag_of(struct side *s)
{
	return (volatile uint64_t *)(s->mem + FLAG_AT(s));
}

static uint64_t *result_of(struct side *s)
{
	return (uint64_t *)(s->mem + RESULT_AT(s));
}

/* One fi_cq_read of up to n entries: how many came, or -1 on an error. */
static int poll_once(struct side *s, int n)
{
	struct fi_cq_tagged_entry e[2];
	struct fi_cq_err_entry err = { 0 };
	ssize_t got = fi_cq_read(s->cq, e, IBFT_MIN(n, 2));

	if (got > 0)
		return (int)got;
	if (got == -FI_EAGAIN) {
		if ((++s->empty & SPIN_CHECK) == 0 && now_ms() > s->deadline) {
			fprintf(stderr, "ibft_instr: timed out\n");
			return -1;
		}
		return 0;
	}
	if (got == -FI_EAVAIL && fi_cq_readerr(s->cq, &err, 0) > 0)
		fprintf(stderr, "ibft_instr: completion error: %s\n",
			fi_strerror(err.err));
	else
		fprintf(stderr, "ibft_instr: fi_cq_read: %s\n", fi_strerror((int)-got));
	return -1;
}

/* Read until want completions have come (counting those banked). */
static int reap(struct side *s, int want)
{
	int got;

	want -= s->banked;
	s->banked = 0;
	while (want > 0) {
		got = poll_once(s, want);
		if (got < 0)
			return -1;
		want -= got;
	}
	if (want < 0)
		s->banked = -want;
	return 0;
}

/* Post, reading the CQ while the provider says -FI_EAGAIN. */
#define POST_REAP(s, call) ({ ssize_t _r; int _g = 0;			\
	while ((_r = (call)) == -FI_EAGAIN &&				\
	       (_g = poll_once(s, 2)) >= 0)				\
		(s)->banked += _g;					\
	_g < 0 ? -1 : _r; })

static int post_send(struct side *s)
{
	uint8_t *src = s->mem + s->area;
	ssize_t ret = s->tagged ?
		POST_REAP(s, fi_tsend(s->ep, src, s->size, s->desc, s->peer, 1,
				      &s->ctx[0])) :
		POST_REAP(s, fi_send(s->ep, src, s->size, s->desc, s->peer,
				     &s->ctx[0]));

	if (ret)
		fprintf(stderr, "ibft_instr: send: %s\n", fi_strerror((int)-ret));
	return ret ? -1 : 0;
}

static int post_recv(struct side *s)
{
	ssize_t ret = s->tagged ?
		POST_REAP(s, fi_trecv(s->ep, s->mem, s->size, s->desc,
				      FI_ADDR_UNSPEC, 1, 0, &s->ctx[1])) :
		POST_REAP(s, fi_recv(s->ep, s->mem, s->size, s->desc,
				     FI_ADDR_UNSPEC, &s->ctx[1]));

	if (ret)
		fprintf(stderr, "ibft_instr: recv: %s\n", fi_strerror((int)-ret));
	return ret ? -1 : 0;
}

/* k from our memory at loff to the peer's at roff (a read: the other way). */
static int post_one_sided(struct side *s, enum kind k, size_t loff, size_t roff,
			  size_t len)
{
	static const uint64_t one = 1;
	uint64_t raddr = s->there.addr + roff;
	ssize_t ret;

	if (k == WRITE)
		ret = POST_REAP(s, fi_write(s->ep, s->mem + loff, len, s->desc,
					    s->peer, raddr, s->there.key, &s->ctx[0]));
	else if (k == READ)
		ret = POST_REAP(s, fi_read(s->ep, s->mem + loff, len, s->desc,
					   s->peer, raddr, s->there.key, &s->ctx[0]));
	else
		ret = POST_REAP(s, fi_fetch_atomic(s->ep, &one, 1, NULL, result_of(s),
						   s->desc, s->peer, raddr,
						   s->there.key, FI_UINT64, FI_SUM,
						   &s->ctx[0]));
	if (ret)
		fprintf(stderr, "ibft_instr: one-sided: %s\n", fi_strerror((int)-ret));
	return ret ? -1 : 0;
}

/* n iterations of this side's part.  r: the stretch, which the initiator
 * of one-sided operations writes into the target's flag when done. */
static int body(struct side *s, int n, uint64_t r)
{
	int i;

	if (s->kind != PINGPONG && !s->initiator) {
		while (*flag_of(s) < r)
			if (poll_once(s, 1))	/* nothing completes here */
				return -1;
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (s->kind != PINGPONG) {
			if (post_one_sided(s, s->kind, s->area, 0, s->size) ||
			    reap(s, 1))
				return -1;
		} else if (s->initiator) {
			if (post_send(s) || reap(s, 2) || post_recv(s))
				return -1;
		} else if (reap(s, 1) || post_recv(s) || post_send(s) || reap(s, 1)) {
			return -1;
		}
	}
	return 0;
}

/* Both sides pass this point before either goes on. */
static int barrier(struct side *s)
{
	char x = 'b';

	return xwrite(s->out, &x, 1) || xread(s->in, &x, 1) ? -1 : 0;
}

static void report(struct side *s, const char *label, int n, uint64_t empty)
{
	printf("REGION %d %s %s %d %llu\n", (int)getpid(),
	       s->initiator ? "initiator" : "peer", label, n,
	       (unsigned long long)empty);
	fflush(stdout);
}

/* One measured stretch of n iterations. */
static int loop_region(struct side *s, const char *label, int n, uint64_t r)
{
	uint64_t e0;
	int ret;

	if (barrier(s))
		return -1;
	e0 = s->empty;
	CALLGRIND_TOGGLE_COLLECT;
	ret = body(s, n, r);
	CALLGRIND_TOGGLE_COLLECT;
	CALLGRIND_DUMP_STATS_AT(label);
	report(s, label, n, s->empty - e0);
	if (!ret && s->kind != PINGPONG && s->initiator) {
		*(uint64_t *)(s->mem + FLAG_SRC_AT(s)) = r;
		ret = post_one_sided(s, WRITE, FLAG_SRC_AT(s), FLAG_AT(s), 8) ||
		      reap(s, 1);
	}
	return ret;
}

/* n reads of a CQ nothing completes into. */
static int idle_region(struct side *s, const char *label, int n)
{
	uint64_t e0 = s->empty;
	int i, ret = 0;

	CALLGRIND_TOGGLE_COLLECT;
	for (i = 0; i < n && !ret; i++)
		ret = poll_once(s, 1);
	CALLGRIND_TOGGLE_COLLECT;
	CALLGRIND_DUMP_STATS_AT(label);
	report(s, label, n, s->empty - e0);
	if (ret)
		fprintf(stderr, "ibft_instr: a completion came while idle\n");
	return ret ? -1 : 0;
}

static int reg_mem(struct side *s)
{
	uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE |
			  FI_REMOTE_READ | FI_REMOTE_WRITE;
	size_t len = 2 * s->area + 64;
	int ret;

	if (posix_memalign((void **)&s->mem, 4096, len))
		return -1;
	memset(s->mem, 0, len);
	if (s->msg) {
		ret = fi_mr_reg(s->conn.domain, s->mem, len, access, 0, 0, 0,
				&s->mr, NULL);
	} else {
		ret = node_mr_reg(s->nd, s->mem, len, access, &s->mr);
	}
	if (ret) {
		fprintf(stderr, "ibft_instr: fi_mr_reg: %s\n", fi_strerror(-ret));
		return -1;
	}
	s->desc = fi_mr_desc(s->mr);
	return 0;
}

/*
 * The threading level asked for: FI_THREAD_DOMAIN, the level at which no
 * provider needs a lock, so the counts compare the data paths alone; or
 * FI_THREAD_SAFE with IBFT_INSTR_THREADING=safe, what a provider gives an
 * application that names none (libfabric's fabtests, Open MPI 4.1's MTL).
 */
static enum fi_threading instr_threading(void)
{
	const char *t = getenv("IBFT_INSTR_THREADING");

	return t && !strcmp(t, "safe") ? FI_THREAD_SAFE : FI_THREAD_DOMAIN;
}

/* The child (responder) listens on -d, the parent connects from -s. */
static int open_msg(struct side *s)
{
	struct ibft_conn_opts o = { .tx_size = 64, .rx_size = 64,
				    .caps = FI_RMA,
				    .threading = instr_threading() };
	struct fi_info *req;
	char x = 'l';
	int ret;

	if (!s->initiator) {
		ibft_opts.server = 1;
		ibft_opts.src = ibft_opts.dst;
		ret = ibft_listen(&s->conn, &o);
		if (!ret && xwrite(s->out, &x, 1))
			ret = -1;
		if (!ret)
			ret = ibft_wait_connreq(&s->conn, &req);
		if (!ret)
			ret = ibft_accept(&s->conn, req, &o);
	} else {
		ret = xread(s->in, &x, 1) ? -1 : ibft_connect(&s->conn, &o);
	}
	s->ep = s->conn.ep;
	s->cq = s->conn.cq;
	return ret;
}

static int open_rdm(struct side *s)
{
	uint64_t caps = FI_MSG | FI_RMA | FI_ATOMIC | (s->tagged ? FI_TAGGED : 0);
	uint8_t name[64];
	size_t nlen;

	want_mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		       FI_MR_LOCAL | FI_MR_ENDPOINT;
	want_progress = FI_PROGRESS_MANUAL;
	want_threading = instr_threading();
	s->nd = node_open(s->initiator ? 0 : 1, caps, 0);
	if (!s->nd || swap_names(s->nd, s->in, s->out, name, &nlen) ||
	    fi_av_insert(s->nd->av, name, 1, &s->peer, 0, NULL) != 1)
		return -1;
	s->ep = s->nd->ep;
	s->cq = s->nd->cq;
	return 0;
}

static int setup(struct side *s)
{
	struct remote here;
	uint64_t mr_mode;

	if (s->msg ? open_msg(s) : open_rdm(s))
		return -1;
	if (reg_mem(s))
		return -1;
	mr_mode = (s->msg ? s->conn.info : s->nd->info)->domain_attr->mr_mode;
	here.addr = (mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)s->mem : 0;
	here.key = fi_mr_key(s->mr);
	if (xwrite(s->out, &here, sizeof(here)) ||
	    xread(s->in, &s->there, sizeof(s->there)))
		return -1;
	return 0;
}

static int parse_test(struct side *s, const char *t)
{
	static const struct {
		const char *name;
		enum kind kind;
		int tagged;
	} tests[] = {
		{ "send", PINGPONG, 0 }, { "tagged", PINGPONG, 1 },
		{ "write", WRITE, 0 }, { "read", READ, 0 }, { "fadd", FADD, 0 },
	};
	size_t i;

	if (!strncmp(t, "msg_", 4))
		s->msg = 1;
	else if (strncmp(t, "rdm_", 4))
		return -1;
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (!strcmp(t + 4, tests[i].name)) {
			s->kind = tests[i].kind;
			s->tagged = tests[i].tagged;
			/* FI_EP_MSG with FI_TAGGED or FI_ATOMIC is not asked. */
			return s->msg && (s->tagged || s->kind == FADD) ? -1 : 0;
		}
	}
	return -1;
}

/* The whole run of one side: warm up, two stretches, two idle ones. */
static int run(struct side *s)
{
	int n = ibft_opts.iters, ret;

	s->deadline = now_ms() + 120000;
	if (s->kind == PINGPONG && post_recv(s))
		return -1;
	ret = barrier(s) || loop_region(s, "warm", WARM, 1) ||
	      loop_region(s, "loop1", n, 2) || loop_region(s, "loop2", 3 * n, 3);
	/* Nothing in flight from here: settle, then read an empty CQ. */
	ret = ret || barrier(s) || idle_region(s, "settle", IDLE) ||
	      idle_region(s, "idle1", IDLE) || idle_region(s, "idle2", 3 * IDLE) ||
	      barrier(s);
	if (!ret && s->kind == FADD && s->initiator &&
	    *result_of(s) != (uint64_t)(WARM + 4 * n - 1)) {
		fprintf(stderr, "ibft_instr: the last fetch returned %llu, not %d\n",
			(unsigned long long)*result_of(s), WARM + 4 * n - 1);
		ret = -1;
	}
	return ret ? -1 : 0;
}

static void teardown(struct side *s)
{
	IBFT_CLOSE(s->mr);
	if (s->msg)
		ibft_close(&s->conn);
	else
		close_all();
	free(s->mem);
}

int main(int argc, char **argv)
{
	struct side s = { 0 };
	struct child ch;
	int ret, st;

	ibft_parse(argc, argv, "-s ADDR0 -d ADDR1 -t TEST -m SIZE");
	ibft_argv = argv;
	if (!ibft_opts.src || !ibft_opts.dst || !ibft_opts.test ||
	    parse_test(&s, ibft_opts.test) || ibft_opts.iters < 1) {
		fprintf(stderr, "ibft_instr needs -s, -d, -n >= 1 and -t "
			"rdm_{send,tagged,write,read,fadd} or msg_{send,write,read}\n");
		return 2;
	}
	s.size = s.kind == FADD ? 8 : ibft_opts.max_size;
	s.area = (s.size + 63) & ~(size_t)63;
	if (getenv("IBFT_RDM_CHILD")) {
		s.in = 3;
		s.out = 4;
		ret = setup(&s) || run(&s);
		teardown(&s);
		return ret ? 1 : 0;
	}
	s.initiator = 1;
	if (spawn(&ch, "instr"))
		return 1;
	s.in = ch.from;
	s.out = ch.to;
	ret = setup(&s) || run(&s);
	teardown(&s);
	close(ch.to);
	close(ch.from);
	waitpid(ch.pid, &st, 0);
	return ret || !WIFEXITED(st) || WEXITSTATUS(st);
}
