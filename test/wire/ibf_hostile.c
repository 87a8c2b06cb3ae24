/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * ibf_hostile: an RDM endpoint of ibfab against a peer that lies.
 *
 * Two ibfab endpoints, A (-s) and B (-d), talk as usual; a third party R,
 * written here with librdmacm and verbs alone, connects to A as an ibfab
 * endpoint would (from B's address, as a process on B's host could) and
 * then sends what a well-behaved peer never does:
 *   - a message whose header names B's connection, to pass for B and take
 *     a receive A posted for B alone (FI_DIRECTED_RECV);
 *   - FINs for every send slot of A's, to complete a rendezvous send A
 *     made to B while B has not read its buffer yet;
 *   - an RTS whose segments do not add up to its length, and a message
 *     shorter than a header;
 *   - connection requests claiming a name on another host, B's address
 *     while B is connected, an idle peer's address, and A's own (R does
 *     not know their keys);
 *   - as a listener A sends to: a refusal saying "I connect to you" (the
 *     answer to a simultaneous connect), and then never connecting;
 *   - a flood of connection requests it never completes;
 *   - (-t share, alone: it wants few buffers) a flood of messages no
 *     receive is posted for, ignoring the credits A gives;
 *   - (-t cap, alone: it wants a low connection cap) every connection A
 *     keeps for peers that ask.
 * A must act on none of them, and its traffic with B must go on as if R
 * had not been there.  White-box by nature (R speaks ibfab's wire format,
 * from ibf_rdm.h), so it runs against ibfab only.
 *
 * Output as the fabtests programs: "ok - NAME" / "not ok - NAME: why".
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "ibf_atomic_ops.h"	/* the atomic request format */
#include "ibf_rdm.h"	/* the wire format, and names */
#include "ibft.h"
#include "ibft_rdm_node.h"

#define ROGUE_BUF (64 << 10)
#define ROGUE_DEPTH 64

struct rogue {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint32_t mine;		/* A's index of R's connection */
	int outstanding;
};

static void rogue_close(struct rogue *g)
{
	if (g->id && g->id->qp)
		rdma_destroy_qp(g->id);
	if (g->mr)
		ibv_dereg_mr(g->mr);
	if (g->cq)
		ibv_destroy_cq(g->cq);
	if (g->pd)
		ibv_dealloc_pd(g->pd);
	if (g->id)
		rdma_destroy_id(g->id);
	free(g->buf);
	memset(g, 0, sizeof(*g));
}

/* R's key: what it puts in names it claims.  It does not know A's or B's. */
#define ROGUE_KEY 0x0badc0de0badc0deull

/* R connects to A from address src, as an ibfab RDM endpoint at
 * claim:port with key key would.  Synchronous rdma_cm: each call returns
 * once its event came. */
static int rogue_connect_key(struct rogue *g, const char *src, const char *claim,
			     uint16_t port, uint64_t key, const struct sockaddr *a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };
	struct ibf_rdm_cm_data d = { 0 };
	const struct ibf_rdm_cm_data *ans;

	memset(g, 0, sizeof(*g));
	g->buf = calloc(ROGUE_DEPTH, ROGUE_BUF);
	if (!g->buf || inet_pton(AF_INET, src, &sin.sin_addr) != 1 ||
	    rdma_create_id(NULL, &g->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(g->id, (struct sockaddr *)&sin, (struct sockaddr *)a, 2000) ||
	    rdma_resolve_route(g->id, 2000))
		return -1;
	g->pd = ibv_alloc_pd(g->id->verbs);
	g->cq = g->pd ? ibv_create_cq(g->id->verbs, 2 * ROGUE_DEPTH, NULL, NULL, 0) : NULL;
	g->mr = g->cq ? ibv_reg_mr(g->pd, g->buf, ROGUE_DEPTH * ROGUE_BUF,
				   IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!g->mr)
		return -1;
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = g->cq;
	qa.cap.max_send_wr = ROGUE_DEPTH;
	qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(g->id, g->pd, &qa))
		return -1;
	d.magic = IBF_RDM_CM_MAGIC;
	if (inet_pton(AF_INET, claim, &sin.sin_addr) != 1)
		return -1;
	sin.sin_port = htons(port);
	ibf_name_from_sockaddr(&d.name, (struct sockaddr *)&sin, sizeof(sin));
	ibf_name_set_key(&d.name, key);
	cp.private_data = &d;
	cp.private_data_len = sizeof(d);
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = 6;
	cp.rnr_retry_count = 7;
	if (rdma_connect(g->id, &cp) || !g->id->event ||
	    g->id->event->param.conn.private_data_len < sizeof(*ans))
		return -1;
	ans = g->id->event->param.conn.private_data;
	if (ans->magic != IBF_RDM_CM_MAGIC)
		return -1;
	g->mine = ans->conn;
	return 0;
}

static int rogue_connect(struct rogue *g, const char *src, const char *claim,
			 uint16_t port, const struct sockaddr *a)
{
	return rogue_connect_key(g, src, claim, port, ROGUE_KEY, a);
}

/* Send len bytes of msg to A; waits for room, not for A. */
static int rogue_send(struct rogue *g, const void *msg, uint32_t len)
{
	static unsigned slot;
	struct ibv_wc wc[16];
	uint8_t *at = g->buf + (slot++ % ROGUE_DEPTH) * ROGUE_BUF;
	struct ibv_sge sge = { (uintptr_t)at, len, g->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	long end = now_ms() + WAIT_MS;
	int n;

	if (len > ROGUE_BUF)
		return -1;
	while (g->outstanding >= ROGUE_DEPTH - 1 && now_ms() < end) {
		n = ibv_poll_cq(g->cq, 16, wc);
		g->outstanding -= n > 0 ? n : 0;
		poll_all();	/* A must take them in */
	}
	memcpy(at, msg, len);
	if (ibv_post_send(g->id->qp, &wr, &bad))
		return -1;
	g->outstanding++;
	return 0;
}

static void rogue_drain(struct rogue *g)
{
	struct ibv_wc wc[16];
	long end = now_ms() + WAIT_MS;
	int n;

	while (g->outstanding > 0 && now_ms() < end) {
		n = ibv_poll_cq(g->cq, 16, wc);
		g->outstanding -= n > 0 ? n : 0;
		poll_all();
	}
}

/* A's completion for ctx, if one is waiting after ms of progress. */
static int has_comp(struct node *n, void *ctx, int ms, struct comp *out)
{
	long end = now_ms() + ms;

	while (now_ms() < end) {
		poll_all();
		while (n->head != n->tail) {
			*out = n->ring[n->head++ % COMP_RING];
			if (out->e.op_context == ctx)
				return 1;
		}
	}
	return 0;
}

/*
 * R listens on host; A sends to it.  R refuses every request as the winner
 * of a simultaneous connect would, and never connects itself.  A's send must
 * fail within its connect time limit, not wait for ever.  1 if it did.
 */
static int rogue_tiebreak_liar(struct node *a, const char *host, int limit_ms)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct ibf_rdm_cm_data d = { .magic = IBF_RDM_CM_TIEBREAK };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid = NULL;
	struct rdma_cm_event *ev;
	fi_addr_t to = FI_ADDR_NOTAVAIL;
	uint8_t m[8] = "liar";
	int refused = 0, failed = 0;
	struct comp *c;
	long end;

	if (!ch || fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) ||
	    inet_pton(AF_INET, host, &sin.sin_addr) != 1 ||
	    rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sin) || rdma_listen(lid, 8))
		goto out;
	sin.sin_port = rdma_get_src_port(lid);
	if (fi_av_insert(a->av, &sin, 1, &to, 0, NULL) != 1 ||
	    POST(fi_send(a->ep, m, sizeof(m), NULL, to, m)))
		goto out;
	for (end = now_ms() + limit_ms; now_ms() < end && !failed;) {
		poll_all();
		while (a->head != a->tail) {
			c = &a->ring[a->head++ % COMP_RING];
			if (c->e.op_context == m)
				failed = c->err != 0;
		}
		if (rdma_get_cm_event(ch, &ev))
			continue;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *req = ev->id;

			rdma_reject(req, &d, sizeof(d));
			rdma_ack_cm_event(ev);
			rdma_destroy_id(req);
			refused++;
		} else {
			rdma_ack_cm_event(ev);
		}
	}
	if (!refused)
		fprintf(stderr, "# the liar never got a request\n");
out:
	if (lid)
		rdma_destroy_id(lid);
	if (ch)
		rdma_destroy_event_channel(ch);
	return refused && failed;
}

#define FLOOD 300

/*
 * R floods A with FLOOD connection requests from its host, each claiming a
 * name of its own there (or all claiming *claim), and completes none: its
 * ids have no QP, so librdmacm leaves each answer (REP) to R, which never
 * confirms it.  A holds each one it accepts as accepted and not yet
 * established, with a QP.  Counts the requests A accepted, those it
 * refused as BUSY, those it refused otherwise, and those no answer came to
 * in the CM's time (UNREACHABLE: A's connection thread, creating a QP per
 * request on an emulated CPU, fell behind the flood; A did nothing wrong).
 */
struct flood_count {
	int accepted, busy, refused, unanswered;
};

static void rogue_flood(const char *host, const struct sockaddr *a,
			const struct ibf_name *claim, struct flood_count *n)
{
	static struct rdma_cm_id *ids[FLOOD];
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibf_rdm_cm_data d;
	struct rdma_conn_param cp;
	struct rdma_cm_event *ev;
	int i, answered = 0;
	long end;

	memset(n, 0, sizeof(*n));
	if (!ch || fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK) ||
	    inet_pton(AF_INET, host, &sin.sin_addr) != 1)
		goto out;
	for (i = 0; i < FLOOD; i++)
		if (rdma_create_id(ch, &ids[i], (void *)(intptr_t)i, RDMA_PS_TCP) ||
		    rdma_resolve_addr(ids[i], (struct sockaddr *)&sin,
				      (struct sockaddr *)a, 2000))
			goto out;
	for (end = now_ms() + 120000; answered < FLOOD && now_ms() < end;) {
		poll_all();
		if (rdma_get_cm_event(ch, &ev))
			continue;
		i = (int)(intptr_t)ev->id->context;
		switch (ev->event) {
		case RDMA_CM_EVENT_ADDR_RESOLVED:
			rdma_resolve_route(ev->id, 2000);
			break;
		case RDMA_CM_EVENT_ROUTE_RESOLVED:
			memset(&d, 0, sizeof(d));
			memset(&cp, 0, sizeof(cp));
			d.magic = IBF_RDM_CM_MAGIC;
			sin.sin_port = htons(51000 + i);
			ibf_name_from_sockaddr(&d.name, (struct sockaddr *)&sin,
					       sizeof(sin));
			ibf_name_set_key(&d.name, ROGUE_KEY + (uint64_t)i);
			if (claim)
				d.name = *claim;
			cp.private_data = &d;
			cp.private_data_len = sizeof(d);
			cp.responder_resources = cp.initiator_depth = 1;
			/* None: nothing will flow.  Far above the numbers the
			 * device gives real QPs: A's CM refuses a request
			 * naming a QP of a live connection as stale. */
			cp.qp_num = 0xf00000 + i;
			cp.retry_count = 6;
			rdma_connect(ev->id, &cp);
			break;
		case RDMA_CM_EVENT_CONNECT_RESPONSE:
			n->accepted++;
			answered++;
			break;
		case RDMA_CM_EVENT_REJECTED:
			if (ev->param.conn.private_data &&
			    ev->param.conn.private_data_len >= sizeof(uint32_t) &&
			    *(const uint32_t *)ev->param.conn.private_data ==
			    IBF_RDM_CM_BUSY)
				n->busy++;
			else {
				n->refused++;
				printf("# flood: request %d refused: status %d, "
				       "%u bytes of private data\n", i,
				       ev->status, ev->param.conn.private_data_len);
			}
			answered++;
			break;
		case RDMA_CM_EVENT_UNREACHABLE:
			n->unanswered++;
			answered++;
			break;
		default:
			printf("# flood: request %d: %s\n", i,
			       rdma_event_str(ev->event));
			answered++;	/* an error here: counted as none */
			break;
		}
		rdma_ack_cm_event(ev);
	}
	printf("# flood: %d requests, %d accepted, %d refused as busy, %d "
	       "refused otherwise, %d unanswered\n", FLOOD, n->accepted,
	       n->busy, n->refused, n->unanswered);
out:
	for (i = 0; i < FLOOD; i++)
		if (ids[i])
			rdma_destroy_id(ids[i]);	/* A sees them refused */
	if (ch)
		rdma_destroy_event_channel(ch);
}

static void hdr_init(struct ibf_rdm_hdr *h, uint8_t type, uint32_t conn,
		     uint64_t tag)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->conn = conn;
	h->tag = tag;
	h->flags = IBF_RDM_F_TAGGED;
}

/* R sends A an eager tagged message (tag) on its own connection. */
static int rogue_eager(struct rogue *g, uint64_t tag, const char *text)
{
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + 16] = { 0 };

	hdr_init((void *)msg, IBF_RDM_EAGER, g->mine, tag);
	snprintf((char *)msg + sizeof(struct ibf_rdm_hdr), 16, "%s", text);
	if (rogue_send(g, msg, sizeof(msg)))
		return -1;
	rogue_drain(g);
	return 0;
}

/*
 * R claims the name of a peer C that A has in its AV but has not talked
 * to yet (no live connection to refuse R with): its address and port,
 * from C's host, with no key or with R's (it does not know C's).  A may
 * refuse R; if it takes R, R must not be C: its message does not take
 * A's receive directed at C, and A's send to C reaches C.
 */
static void claim_idle_peer(struct node *a, uint64_t key, const char *name)
{
	struct node *c = node_open(1, FI_TAGGED | FI_DIRECTED_RECV, 0);
	uint8_t r[64] = "", rc[64] = "", m[64] = "from A", mc[64] = "from C";
	fi_addr_t to_c = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	struct rogue g = { 0 };
	struct comp cp;
	char check[96];
	int ok, in;

	if (!c || fi_av_insert(a->av, c->name, 1, &to_c, 0, NULL) != 1 ||
	    fi_av_insert(c->av, a->name, 1, &to_a, 0, NULL) != 1) {
		IBFT_CHECK(0, name, "C could not be set up");
		goto out;
	}
	in = !rogue_connect_key(&g, ibft_opts.dst, ibft_opts.dst,
				ntohs(((struct sockaddr_in *)c->name)->sin_port),
				key, (struct sockaddr *)a->name);
	ok = !fi_trecv(a->ep, r, sizeof(r), NULL, to_c, 20, 0, r) &&
	     (!in || !rogue_eager(&g, 20, "from R"));
	snprintf(check, sizeof(check), "%s-directed", name);
	IBFT_CHECK(ok && !has_comp(a, r, 1000, &cp), check, "R, claiming C's "
		   "name, took A's receive directed at C (got \"%s\")", (char *)r);
	ok = !fi_trecv(c->ep, rc, sizeof(rc), NULL, FI_ADDR_UNSPEC, 21, 0, rc) &&
	     !POST(fi_tsend(a->ep, m, sizeof(m), NULL, to_c, 21, m)) &&
	     has_comp(c, rc, 5000, &cp) && !cp.err && !strcmp((char *)rc, "from A");
	snprintf(check, sizeof(check), "%s-send", name);
	IBFT_CHECK(ok, check, "A's send to C did not reach C after R claimed "
		   "C's name");
	ok = !POST(fi_tsend(c->ep, mc, sizeof(mc), NULL, to_a, 20, mc)) &&
	     has_comp(a, r, 5000, &cp) && !cp.err && !strcmp((char *)r, "from C");
	snprintf(check, sizeof(check), "%s-unharmed", name);
	IBFT_CHECK(ok, check, "C's message did not take A's receive directed "
		   "at C (got \"%s\")", (char *)r);
	if (!ok)
		fi_cancel(&a->ep->fid, r);
out:
	rogue_close(&g);
	node_close(c);
}

/*
 * R claims A's own name (address and port, from A's host, with no key or
 * R's): it is not A, so if A takes it, its message does not take a
 * receive A directed at itself.
 */
static void claim_self(struct node *a, uint64_t key, const char *name)
{
	uint8_t r[64] = "", m[64] = "from A";
	struct rogue g = { 0 };
	struct comp cp;
	char check[96];
	int ok, in;

	in = !rogue_connect_key(&g, ibft_opts.src, ibft_opts.src,
				ntohs(((struct sockaddr_in *)a->name)->sin_port),
				key, (struct sockaddr *)a->name);
	ok = !fi_trecv(a->ep, r, sizeof(r), NULL, a->peer[0], 22, 0, r) &&
	     (!in || !rogue_eager(&g, 22, "from R"));
	IBFT_CHECK(ok && !has_comp(a, r, 1000, &cp), name, "R, claiming A's "
		   "own name, took A's receive directed at itself (got \"%s\")",
		   (char *)r);
	/* A's own message to itself takes it. */
	ok = !POST(fi_tsend(a->ep, m, sizeof(m), NULL, a->peer[0], 22, m)) &&
	     has_comp(a, r, 5000, &cp) && !cp.err && !strcmp((char *)r, "from A");
	snprintf(check, sizeof(check), "%s-unharmed", name);
	IBFT_CHECK(ok, check, "A's message to itself did not take its receive "
		   "(got \"%s\")", (char *)r);
	if (!ok)
		fi_cancel(&a->ep->fid, r);
	rogue_close(&g);
}

/*
 * R, knowing A's name (as any peer A gave it to does), sends FLOOD
 * requests from A's host claiming to be A itself, completes none, and
 * goes.  A takes at most one such request (a connection to itself has one
 * accepting half), and once R has gone a new peer gets in at once: no
 * record of R's stays counted as accepting.
 */
static void self_claim_flood(struct node *a)
{
	struct ibf_name me;
	struct node *n;
	uint8_t r[64] = "", m[64] = "new peer";
	fi_addr_t to_a;
	struct comp c;
	struct flood_count f;
	int ok;

	memcpy(&me, a->name, sizeof(me));
	rogue_flood(ibft_opts.src, (struct sockaddr *)a->name, &me, &f);
	IBFT_CHECK(f.accepted <= 1 && f.busy > 0 && !f.refused, "hostile-self-"
		   "claim-flood", "of %d requests naming A itself, A accepted %d "
		   "and refused %d as busy, %d otherwise (at most one may be "
		   "taken, the others refused BUSY)", FLOOD, f.accepted, f.busy,
		   f.refused);
	n = node_open(1, FI_TAGGED | FI_DIRECTED_RECV, 0);
	ok = n && fi_av_insert(n->av, a->name, 1, &to_a, 0, NULL) == 1 &&
	     !fi_trecv(a->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 15, 0, r) &&
	     !POST(fi_tsend(n->ep, m, sizeof(m), NULL, to_a, 15, m)) &&
	     has_comp(a, r, WAIT_MS, &c) && !c.err && has_comp(n, m, WAIT_MS, &c) &&
	     !c.err;
	IBFT_CHECK(ok, "hostile-self-claim-flood-over-new-peer-served", "a new "
		   "peer could not reach A after requests naming A itself");
	node_close(n);
}

/* Close target t's endpoint, then its region mr (either may be NULL);
 * what is bound to the endpoint is the caller's to close after. */
static void target_close_ep_mr(struct node *t, struct fid_mr *mr)
{
	if (t && t->ep) {
		fi_close(&t->ep->fid);
		t->ep = NULL;
	}
	if (mr)
		fi_close(&mr->fid);
}

/*
 * R sends an FI_RMA_EVENT endpoint E write notices (WDATA) with no write
 * before them: five naming a region E registered for remote reads only,
 * whose counter is bound FI_REMOTE_WRITE, and one with remote CQ data
 * (0xdeadbeef) claiming a write of 4 GiB - 1 bytes.  E counts nothing
 * and reports no CQ data: they come only with a real write.
 */
static void forged_rma_notices(void)
{
	static uint8_t ro[4096] __attribute__((aligned(64)));
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + sizeof(struct ibf_rdm_rma_note)];
	struct ibf_rdm_rma_note *note = (void *)(msg + sizeof(struct ibf_rdm_hdr));
	struct fi_cntr_attr cattr = { .events = FI_CNTR_EVENTS_COMP };
	struct fid_cntr *c = NULL, *mc = NULL;
	const uint64_t f = FI_REMOTE_WRITE;
	struct fid_mr *mr = NULL;
	struct rogue g = { 0 };
	struct node *e;
	struct comp cp;
	uint64_t key;
	int i, ok;

	want_mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		       FI_MR_LOCAL | FI_MR_ENDPOINT;
	e = node_open(0, FI_TAGGED | FI_RMA | FI_RMA_EVENT, 0);
	want_mr_mode = 0;
	ok = e && !fi_cntr_open(e->domain, &cattr, &c, NULL) &&
	     !fi_cntr_open(e->domain, &cattr, &mc, NULL) &&
	     !node_ep_open_bind(e, 0, &c, &f, 1) &&
	     !node_mr_reg(e, ro, sizeof(ro), FI_REMOTE_READ, &mr) &&
	     !fi_mr_bind(mr, &mc->fid, FI_REMOTE_WRITE) &&
	     !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50125,
			    (struct sockaddr *)e->name);
	if (!IBFT_CHECK(ok, "hostile-forged-rma-setup", "E, its counters, its "
			"region or R's connection to it"))
		goto out;
	key = fi_mr_key(mr);
	for (i = 0; ok && i < 6; i++) {
		hdr_init((void *)msg, IBF_RDM_WDATA, g.mine, (uint64_t)(i + 1) << 32 | key);
		((struct ibf_rdm_hdr *)msg)->flags = i == 5 ? IBF_RDM_F_DATA : 0;
		((struct ibf_rdm_hdr *)msg)->data = 0xdeadbeef;
		note->addr = (uintptr_t)ro;
		note->len = i == 5 ? 0xffffffffu : 64;
		ok = !rogue_send(&g, msg, sizeof(msg));
	}
	rogue_drain(&g);
	ok = ok && !has_comp(e, NULL, 1000, &cp);
	IBFT_CHECK(ok, "hostile-forged-cq-data", "E reported remote CQ data "
		   "%#llx of a %zu-byte write that never came",
		   (unsigned long long)cp.e.data, cp.e.len);
	IBFT_CHECK(fi_cntr_read(c) == 0 && fi_cntr_read(mc) == 0,
		   "hostile-forged-rma-events", "write notices with no write "
		   "counted: the endpoint's FI_REMOTE_WRITE counter %llu, the "
		   "read-only region's %llu", (unsigned long long)fi_cntr_read(c),
		   (unsigned long long)fi_cntr_read(mc));
out:
	rogue_close(&g);
	target_close_ep_mr(e, mr);
	if (c)
		fi_close(&c->fid);
	if (mc)
		fi_close(&mc->fid);
	node_close(e);
}

/* R writes 64 bytes at addr under key, with immediate seq: the last part
 * of an RMA, as far as A can tell. */
static int rogue_write_imm(struct rogue *g, uint64_t addr, uint32_t key,
			   uint32_t seq)
{
	struct ibv_sge sge = { (uintptr_t)g->buf, 64, g->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.imm_data = htonl(seq);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = key;
	if (ibv_post_send(g->id->qp, &wr, &bad))
		return -1;
	g->outstanding++;
	return 0;
}

/*
 * A write in parts (above the port's max_msg_sz) leaves a trace at the
 * target only with its last part: the notice's total length is the
 * peer's word.  R writes 64 bytes with an immediate into E's 4 KiB
 * region and then claims, with remote CQ data, a write of 1 MiB: E
 * reports nothing, as the key does not reach that far.  Claiming the
 * region's 4 KiB instead is a write R could have made, and is reported.
 */
static void claimed_parts(void)
{
	static uint8_t rw[4096] __attribute__((aligned(64)));
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + sizeof(struct ibf_rdm_rma_note)];
	struct ibf_rdm_rma_note *note = (void *)(msg + sizeof(struct ibf_rdm_hdr));
	struct fid_mr *mr = NULL;
	struct rogue g = { 0 };
	struct node *e;
	struct comp cp;
	uint64_t key;
	int i, ok, got[2] = { 0, 0 };

	want_mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		       FI_MR_LOCAL | FI_MR_ENDPOINT;
	e = node_open(0, FI_TAGGED | FI_RMA, 0);
	want_mr_mode = 0;
	ok = e && !node_mr_reg(e, rw, sizeof(rw), FI_REMOTE_WRITE, &mr) &&
	     !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50129,
			    (struct sockaddr *)e->name);
	if (!IBFT_CHECK(ok, "hostile-claimed-parts-setup", "E, its region or "
			"R's connection to it"))
		goto out;
	key = fi_mr_key(mr);
	for (i = 0; ok && i < 2; i++) {
		ok = !rogue_write_imm(&g, (uintptr_t)rw, (uint32_t)key, i + 1);
		hdr_init((void *)msg, IBF_RDM_WDATA, g.mine,
			 (uint64_t)(i + 1) << 32 | key);
		((struct ibf_rdm_hdr *)msg)->flags = IBF_RDM_F_DATA;
		((struct ibf_rdm_hdr *)msg)->data = 0xabc0 + i;
		note->addr = (uintptr_t)rw;
		note->len = i ? sizeof(rw) : 1 << 20;
		note->last = 64;
		ok = ok && !rogue_send(&g, msg, sizeof(msg));
		rogue_drain(&g);
		while (ok && has_comp(e, NULL, 1000, &cp))
			if (!cp.err && cp.e.data == 0xabc0 + (uint64_t)i &&
			    cp.e.len == note->len)
				got[i]++;
	}
	IBFT_CHECK(ok && !got[0], "hostile-claimed-parts-beyond-key", "E "
		   "reported remote CQ data of a 1 MiB write in parts into a "
		   "4 KiB region (R wrote 64 bytes)");
	IBFT_CHECK(ok && got[1] == 1, "hostile-claimed-parts-within-key", "E "
		   "reported %d times (once) a 4 KiB write in parts whose last "
		   "part came", got[1]);
out:
	rogue_close(&g);
	target_close_ep_mr(e, mr);
	node_close(e);
}

/* R writes 64 bytes to A under a key A never gave: A's QP answers with a
 * remote access error and goes to the error state, with no completion of
 * A's to say so. */
static int rogue_bad_write(struct rogue *g)
{
	struct ibv_sge sge = { (uintptr_t)g->buf, 64, g->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = 0x10000;
	wr.wr.rdma.rkey = 0xbadbad;
	if (ibv_post_send(g->id->qp, &wr, &bad))
		return -1;
	g->outstanding++;
	return 0;
}

/* R sends A a message larger than A's receive buffers (FI_IBFAB_EAGER_SIZE,
 * 16 KiB by default): A's receive fails, and its QP with it. */
static int rogue_oversized(struct rogue *g)
{
	static uint8_t big[40 << 10];

	hdr_init((void *)big, IBF_RDM_EAGER, g->mine, 40);
	return rogue_send(g, big, sizeof(big));
}

/*
 * R breaks A's QP of its connection (kill), at once after connecting, and
 * keeps that connection: it never disconnects.  A must end it then (as for
 * a failed send), not keep it as live for ever: R's next connection
 * request, claiming the same name, is taken.  (Such requests used to be
 * refused BUSY for ever: the PING A sends to check a live connection was
 * flushed, and a flush was taken for the end of a life already over; and a
 * receive that failed before A took the connection's ESTABLISHED event was
 * ignored.)
 */
static void qp_killer(struct node *a, int (*kill)(struct rogue *), const char *name,
		      const char *what)
{
	struct rogue g = { 0 }, g2 = { 0 };
	int ok, tries;

	ok = !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50126,
			    (struct sockaddr *)a->name) && !kill(&g);
	rogue_drain(&g);
	idle(a, 500);
	for (tries = 0; ok && tries < 20; tries++) {
		if (!rogue_connect(&g2, ibft_opts.dst, ibft_opts.dst, 50126,
				   (struct sockaddr *)a->name))
			break;
		rogue_close(&g2);
		idle(a, 250);
	}
	IBFT_CHECK(ok && tries < 20, name, "after %s, R's connection stayed "
		   "live at A: R's new request was refused %d times", what, tries);
	rogue_close(&g2);
	rogue_close(&g);
}

/* R posts one receive, into the last slot of its buffer; rogue_recv_wait
 * waits for it: the bytes received, or -1. */
static int rogue_recv(struct rogue *g, uint8_t **at)
{
	struct ibv_sge sge = { (uintptr_t)g->buf + (ROGUE_DEPTH - 1) * ROGUE_BUF,
			       ROGUE_BUF, g->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	*at = (uint8_t *)(uintptr_t)sge.addr;
	return ibv_post_recv(g->id->qp, &wr, &bad) ? -1 : 0;
}

static int rogue_recv_wait(struct rogue *g, int ms)
{
	struct ibv_wc wc;
	long end = now_ms() + ms;

	while (now_ms() < end) {
		poll_all();
		if (ibv_poll_cq(g->cq, 1, &wc) == 1) {
			if (wc.wr_id == 1)
				return wc.status == IBV_WC_SUCCESS ? (int)wc.byte_len : -1;
			g->outstanding--;	/* one of its sends */
		}
	}
	return -1;
}

/*
 * Item 1 of the safety review, from the wire: R sends an atomic fetching
 * OR of 0 on a region T registered FI_REMOTE_WRITE alone.  T answers
 * -FI_EACCES and sends back nothing of the region.
 */
static void fetch_from_write_only(void)
{
	static uint64_t secret[2] __attribute__((aligned(64)));
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + sizeof(struct ibf_atomic_req) + 8];
	struct ibf_atomic_req *req = (void *)(msg + sizeof(struct ibf_rdm_hdr));
	const struct ibf_atomic_req *ans;
	struct fid_mr *mr = NULL;
	struct rogue g = { 0 };
	struct node *t;
	uint8_t *at = NULL;
	int ok, got = -1;

	secret[0] = 0x5ec2e75ec2e75ec2ull;
	want_mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
		       FI_MR_LOCAL | FI_MR_ENDPOINT;
	t = node_open(0, FI_TAGGED | FI_ATOMIC, 0);
	want_mr_mode = 0;
	ok = t && !node_mr_reg(t, secret, sizeof(secret), FI_REMOTE_WRITE, &mr) &&
	     !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50127,
			    (struct sockaddr *)t->name) && !rogue_recv(&g, &at);
	if (!IBFT_CHECK(ok, "hostile-atomic-setup", "T, its region or R"))
		goto out;
	memset(msg, 0, sizeof(msg));
	hdr_init((void *)msg, IBF_RDM_ATOMIC, g.mine, 0);
	req->addr = (uintptr_t)secret;
	req->key = fi_mr_key(mr);
	req->cookie = 7;
	req->count = 1;
	req->op = FI_BOR;
	req->datatype = FI_UINT64;
	req->kind = IBF_ATOMIC_FETCH;
	ok = !rogue_send(&g, msg, sizeof(msg));
	got = ok ? rogue_recv_wait(&g, WAIT_MS) : -1;
	ans = (const void *)(at + sizeof(struct ibf_rdm_hdr));
	ok = got >= (int)(sizeof(struct ibf_rdm_hdr) + sizeof(*ans)) &&
	     ans->status == -FI_EACCES &&
	     got == (int)(sizeof(struct ibf_rdm_hdr) + sizeof(*ans));
	IBFT_CHECK(ok, "hostile-atomic-fetch-write-only", "a fetching atomic on "
		   "a region a peer may only write: answer of %d bytes, status "
		   "%d%s", got, got > 0 ? ans->status : 0,
		   got > (int)(sizeof(struct ibf_rdm_hdr) + sizeof(*ans)) &&
		   !memcmp((const uint8_t *)(ans + 1), secret, 8) ?
		   " with the region's contents" : "");
out:
	rogue_close(&g);
	target_close_ep_mr(t, mr);
	node_close(t);
}

/*
 * Item 5 of the safety review, from the wire: R floods T with messages no
 * receive is posted for, and never waits for credits.  T has few eager
 * buffers (-t share runs this alone, with FI_IBFAB_RDM_UNEXP_MAX=0 and
 * FI_IBFAB_RX_SIZE=64): once R is past the credits T gave it, T ends
 * R's connection, and a message C sends to a receive T posted arrives.
 */
static void share_flood(void)
{
	enum { N = 100 };
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + 16] = { 0 };
	uint8_t r[16] = "", m[16] = "from C";
	struct rogue g = { 0 }, g2 = { 0 };
	struct node *ns[2];
	struct comp c;
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

/* R's eager tagged message reaches T's receive for any source, tag
 * tag, within ms: 1 if it did. */
static int rogue_reaches(struct rogue *g, struct node *t, uint64_t tag, int ms)
{
	uint8_t r[16] = "";
	struct comp c;
	int got;

	if (fi_trecv(t->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, tag, 0, r))
		return 0;
	got = !rogue_eager(g, tag, "from R") && has_comp(t, r, ms, &c) && !c.err;
	if (!got && !fi_cancel(&t->ep->fid, r))
		has_comp(t, r, 1000, &c);	/* its cancellation, taken here */
	return got;
}

/*
 * Item 12c of the safety review: T keeps at most FI_IBFAB_RDM_MAX_CONNS
 * (2 here; -t cap runs this alone) connections peers ask for.  R takes
 * both with two names and uses the first; a new peer C still gets in:
 * T closes the least recently used idle one (R's second), not R's first.
 */
static void conn_cap(void)
{
	uint8_t r[16] = "", m[16] = "from C";
	struct rogue g1 = { 0 }, g2 = { 0 };
	struct node *ns[2];
	struct comp c;
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

int main(int argc, char **argv)
{
	size_t big = 1 << 20;
	uint8_t m[64] = "from B", forged[sizeof(struct ibf_rdm_hdr) + 64];
	uint8_t fin[sizeof(struct ibf_rdm_hdr) + sizeof(struct ibf_rdm_fin)];
	uint8_t rts[sizeof(struct ibf_rdm_hdr) + sizeof(struct ibf_rdm_rts)];
	uint8_t r[64], *s, *rb;
	struct ibf_rdm_rts *rt;
	struct ibf_rdm_fin *f;
	struct rogue g;
	struct node *ns[2];
	struct comp c;
	uint32_t b_conn, i;
	int ok;

	ibft_parse(argc, argv, "A's address (-s), B's (-d); -t share|cap");
	if (strcmp(ibft_opts.prov, "ibfab")) {
		printf("skip - hostile [%s]: speaks ibfab's wire format\n", ibft_opts.prov);
		return ibft_finish();
	}
	if (!ibft_opts.src || !ibft_opts.dst) {
		fprintf(stderr, "ibf_hostile needs -s ADDR_A -d ADDR_B\n");
		return 2;
	}
	if (ibft_opts.test && !strcmp(ibft_opts.test, "share")) {
		share_flood();
		return ibft_finish();
	}
	if (ibft_opts.test && !strcmp(ibft_opts.test, "cap")) {
		conn_cap();
		return ibft_finish();
	}
	/* Connects give up after 3 s (rogue_tiebreak_liar waits for it). */
	setenv("FI_IBFAB_RDM_CONNECT_TIMEOUT", "3000", 0);
	s = xbuf(big);
	rb = xbuf(big);
	ns[0] = node_open(0, FI_TAGGED | FI_DIRECTED_RECV, 0);
	ns[1] = node_open(1, FI_TAGGED | FI_DIRECTED_RECV, 0);
	if (!ns[0] || !ns[1] || insert_all(ns, 2))
		goto out;
	/* B talks to A first: A's first connection (index 0) is B's. */
	ok = !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 1, 0, r) &&
	     !POST(fi_tsend(ns[1]->ep, m, sizeof(m), NULL, ns[1]->peer[0], 1, m)) &&
	     has_comp(ns[0], r, WAIT_MS, &c) && !c.err && has_comp(ns[1], m, WAIT_MS, &c);
	b_conn = 0;
	ok = ok && !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50123,
				  (struct sockaddr *)ns[0]->name);
	if (!IBFT_CHECK(ok && g.mine != b_conn, "hostile-setup", "B and R "
			"connected to A (R's index %u)", g.mine))
		goto out;

	/* R poses as B for a receive only B may match. */
	ok = !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, ns[0]->peer[1], 7, 0, r);
	hdr_init((void *)forged, IBF_RDM_EAGER, b_conn, 7);
	memcpy(forged + sizeof(struct ibf_rdm_hdr), "forged", 7);
	ok = ok && !rogue_send(&g, forged, sizeof(forged));
	rogue_drain(&g);
	IBFT_CHECK(ok && !has_comp(ns[0], r, 1000, &c), "hostile-poses-as-peer",
		   "a message naming B's connection, sent by R, took a receive "
		   "directed at B");
	ok = !POST(fi_tsend(ns[1]->ep, m, sizeof(m), NULL, ns[1]->peer[0], 7, m)) &&
	     has_comp(ns[0], r, WAIT_MS, &c) && !c.err && !memcmp(r, "from B", 7);
	IBFT_CHECK(ok, "hostile-peer-unharmed", "B's message to the directed "
		   "receive did not arrive whole");

	/* R answers, on its own connection, a rendezvous send A made to B. */
	ibft_fill(s, big, 9);
	ok = !POST(fi_tsend(ns[0]->ep, s, big, NULL, ns[0]->peer[1], 9, s));
	hdr_init((void *)fin, IBF_RDM_FIN, g.mine, 0);
	f = (void *)(fin + sizeof(struct ibf_rdm_hdr));
	for (i = 0; ok && i < 1024; i++) {
		f->cookie = i;
		f->status = 0;
		ok = !rogue_send(&g, fin, sizeof(fin));
	}
	rogue_drain(&g);
	IBFT_CHECK(ok && !has_comp(ns[0], s, 1000, &c), "hostile-forged-fin",
		   "FINs from R completed a send A made to B, B not having "
		   "read it");
	/* And the same FINs naming B's connection. */
	hdr_init((void *)fin, IBF_RDM_FIN, b_conn, 0);
	for (i = 0; ok && i < 1024; i++) {
		f->cookie = i;
		ok = !rogue_send(&g, fin, sizeof(fin));
	}
	rogue_drain(&g);
	IBFT_CHECK(ok && !has_comp(ns[0], s, 1000, &c), "hostile-forged-fin-as-peer",
		   "FINs from R naming B's connection completed A's send to B");

	/* Malformed: an RTS whose segments do not make its length, a runt. */
	hdr_init((void *)rts, IBF_RDM_RTS, g.mine, 11);
	rt = (void *)(rts + sizeof(struct ibf_rdm_hdr));
	memset(rt, 0, sizeof(*rt));
	rt->len = 1 << 20;
	rt->nseg = 1;
	rt->seg[0].len = 16;
	ok = !rogue_send(&g, rts, sizeof(rts)) && !rogue_send(&g, rts, 4);
	rogue_drain(&g);
	ok = ok && !fi_trecv(ns[0]->ep, rb, big, NULL, FI_ADDR_UNSPEC, 11, 0, rb);
	IBFT_CHECK(ok && !has_comp(ns[0], rb, 1000, &c), "hostile-bad-rts",
		   "an RTS whose segments do not add up was matched");
	fi_cancel(&ns[0]->ep->fid, rb);

	/* B reads its message now: A's send completes, once, whole. */
	ok = !fi_trecv(ns[1]->ep, rb, big, NULL, FI_ADDR_UNSPEC, 9, 0, rb) &&
	     has_comp(ns[1], rb, WAIT_MS, &c) && !c.err && ibft_verify(rb, big, 9) &&
	     has_comp(ns[0], s, WAIT_MS, &c) && !c.err;
	IBFT_CHECK(ok, "hostile-rendezvous-unharmed", "A's send to B did not "
		   "complete as B read it");
	rogue_close(&g);

	/* R claims a name on another host than its own. */
	ok = rogue_connect(&g, ibft_opts.dst, ibft_opts.src, 50124,
			   (struct sockaddr *)ns[0]->name) != 0;
	rogue_close(&g);
	IBFT_CHECK(ok, "hostile-claims-other-host", "A took a connection from "
		   "%s claiming to be %s:50124", ibft_opts.dst, ibft_opts.src);
	/* R claims B's address and port, from B's host, while B is
	 * connected: without B's key it is another peer, and B's traffic
	 * stays B's. */
	rogue_connect(&g, ibft_opts.dst, ibft_opts.dst,
		      ntohs(((struct sockaddr_in *)ns[1]->name)->sin_port),
		      (struct sockaddr *)ns[0]->name);
	rogue_close(&g);
	ok = !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 12, 0, r) &&
	     !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 12, m)) &&
	     has_comp(ns[1], r, WAIT_MS, &c) && !c.err && !memcmp(r, m, sizeof(m));
	IBFT_CHECK(ok, "hostile-live-peer-unharmed", "A's message to B did not "
		   "reach B after R claimed B's name");
	claim_idle_peer(ns[0], 0, "hostile-claims-idle-peer-nokey");
	claim_idle_peer(ns[0], ROGUE_KEY, "hostile-claims-idle-peer");
	claim_self(ns[0], 0, "hostile-claims-self-nokey");
	claim_self(ns[0], ROGUE_KEY, "hostile-claims-self");
	{
		struct flood_count f;

		/* A few may go unanswered on a busy emulated host; a receiver
		 * that dropped requests would leave dozens. */
		rogue_flood(ibft_opts.dst, (struct sockaddr *)ns[0]->name, NULL, &f);
		IBFT_CHECK(f.accepted > 0 && f.accepted <= 256 && f.busy > 0 &&
			   !f.refused && f.unanswered <= FLOOD / 20 &&
			   f.accepted + f.busy + f.unanswered == FLOOD,
			   "hostile-request-flood", "of %d connection requests "
			   "never completed, A accepted %d (each with a QP), "
			   "refused %d as busy and %d otherwise (its cap is 256), "
			   "and %d went unanswered", FLOOD, f.accepted, f.busy,
			   f.refused, f.unanswered);
	}
	/* R has gone (its ids destroyed): a new peer gets in. */
	{
		struct node *n = node_open(1, FI_TAGGED | FI_DIRECTED_RECV, 0);
		fi_addr_t to_a;

		ok = n && fi_av_insert(n->av, ns[0]->name, 1, &to_a, 0, NULL) == 1 &&
		     !fi_trecv(ns[0]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 14, 0, r) &&
		     !POST(fi_tsend(n->ep, m, sizeof(m), NULL, to_a, 14, m)) &&
		     has_comp(ns[0], r, WAIT_MS, &c) && !c.err;
		IBFT_CHECK(ok, "hostile-flood-over-new-peer-served", "a new peer "
			   "could not reach A after the flood");
	}
	qp_killer(ns[0], rogue_oversized, "hostile-oversized-ends-connection",
		  "a message that did not fit");
	qp_killer(ns[0], rogue_bad_write, "hostile-bad-key-write-ends-connection",
		  "a write under a key A never gave");
	self_claim_flood(ns[0]);
	forged_rma_notices();
	claimed_parts();
	fetch_from_write_only();
	IBFT_CHECK(rogue_tiebreak_liar(ns[0], ibft_opts.dst, 30000),
		   "hostile-tiebreak-liar", "A's send to a peer that refused it as "
		   "the winner of a simultaneous connect, and never connected, did "
		   "not fail within 30 s (its connect time limit is 3 s)");
	ok = !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 13, 0, r) &&
	     !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 13, m)) &&
	     has_comp(ns[1], r, WAIT_MS, &c) && !c.err;
	IBFT_CHECK(ok, "hostile-liar-costs-only-its-own", "A's message to B did "
		   "not reach B after the liar");
out:
	free(s);
	free(rb);
	close_all();
	return ibft_finish();
}
