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
 *   - an RTS with the retired window flag (4) naming a plain registration,
 *     which A must ignore (it once made A's FIN invalidate that key);
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

#include "ibf_rogue.h"

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
	struct comp cp = { 0 };
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
	struct comp cp = { 0 };
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
	struct comp c = { 0 };
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
	struct comp cp = { 0 };
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
	struct comp cp = { 0 };
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
 * 32 KiB by default): A's receive fails, and its QP with it. */
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
 * R sends an RTS with flag 4, which once said "a memory window the FIN
 * closes" (ibf_rdm_wire.h) and is retired, naming a plain registration of
 * its own: A ignores the flag and reads it, so A's receive has R's bytes,
 * and A's traffic with B goes on as before.
 */
static void window_rts_plain_key(struct node **ns)
{
	const size_t len = 64 << 10;
	uint8_t rts[sizeof(struct ibf_rdm_hdr) + sizeof(struct ibf_rdm_rts)];
	struct ibf_rdm_hdr *hdr = (void *)rts;
	struct ibf_rdm_rts *rt = (void *)(rts + sizeof(*hdr));
	uint8_t *src = xbuf(len), *rb = xbuf(len), m[16] = "after", r[16];
	struct ibv_mr *mr = NULL;
	struct comp c = { 0 };
	struct rogue g = { 0 };
	int ok;

	ok = !rogue_connect(&g, ibft_opts.dst, ibft_opts.dst, 50125,
			    (struct sockaddr *)ns[0]->name);
	if (ok)
		mr = ibv_reg_mr(g.pd, src, len, IBV_ACCESS_REMOTE_READ);
	if (!IBFT_CHECK(ok && mr, "hostile-window-rts-setup", "R did not "
			"connect to A, or register its buffer"))
		goto out;
	ibft_fill(src, len, 13);
	memset(rts, 0, sizeof(rts));
	hdr_init(hdr, IBF_RDM_RTS, g.mine, 15);
	hdr->flags = 4 | IBF_RDM_F_TAGGED;	/* the retired window flag */
	rt->len = len;
	rt->nseg = 1;
	rt->seg[0].addr = (uintptr_t)src;
	rt->seg[0].len = len;
	rt->seg[0].rkey = mr ? mr->rkey : 0;
	c.err = 0;
	ok = !fi_trecv(ns[0]->ep, rb, len, NULL, FI_ADDR_UNSPEC, 15, 0, rb) &&
	     !rogue_send(&g, rts, sizeof(rts)) &&
	     has_comp(ns[0], rb, WAIT_MS, &c) && !c.err && ibft_verify(rb, len, 13);
	rogue_drain(&g);
	IBFT_CHECK(ok, "hostile-window-rts-plain-key", "A did not read a "
		   "window RTS naming a plain registration whole (%s)",
		   c.err ? fi_strerror(c.err) : "no completion, or other bytes");
	ok = !fi_trecv(ns[1]->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 16, 0, r) &&
	     !POST(fi_tsend(ns[0]->ep, m, sizeof(m), NULL, ns[0]->peer[1], 16, m)) &&
	     has_comp(ns[1], r, WAIT_MS, &c) && !c.err && !memcmp(r, m, sizeof(m)) &&
	     has_comp(ns[0], m, WAIT_MS, &c) && !c.err;
	IBFT_CHECK(ok, "hostile-window-rts-peer-unharmed", "A's message to B "
		   "did not arrive after R's window RTS");
out:
	if (mr)
		ibv_dereg_mr(mr);
	rogue_close(&g);
	free(src);
	free(rb);
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
	struct rogue g = { 0 };
	struct node *ns[2];
	struct comp c = { 0 };
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

	window_rts_plain_key(ns);

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
