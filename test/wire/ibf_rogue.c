/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* R, the rogue peer (ibf_rogue.h): connecting, sending, receiving. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibf_rogue.h"

void rogue_close(struct rogue *g)
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


/* R connects to A from address src, as an ibfab RDM endpoint at
 * claim:port with key key would.  Synchronous rdma_cm: each call returns
 * once its event came. */
int rogue_connect_key(struct rogue *g, const char *src, const char *claim,
		      uint16_t port, uint64_t key, const struct sockaddr *a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct ibv_qp_init_attr qa = { 0 };
	struct rdma_conn_param cp = { 0 };
	struct ibf_rdm_cm_data d = { 0 };
	const struct ibf_rdm_cm_data *ans;
	uint8_t ack_timeout = 14;

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
	/* R's sends to a QP A has closed fail after 7 x 67 ms, not 7 of
	 * rdma_cm's 2.1 s: the tests that end R's connection drain them. */
	if (rdma_set_option(g->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
			    &ack_timeout, sizeof(ack_timeout)))
		return -1;
	if (rdma_connect(g->id, &cp) || !g->id->event ||
	    g->id->event->param.conn.private_data_len < sizeof(*ans))
		return -1;
	ans = g->id->event->param.conn.private_data;
	if (ans->magic != IBF_RDM_CM_MAGIC)
		return -1;
	g->mine = ans->conn;
	return 0;
}

int rogue_connect(struct rogue *g, const char *src, const char *claim,
		  uint16_t port, const struct sockaddr *a)
{
	return rogue_connect_key(g, src, claim, port, ROGUE_KEY, a);
}

/* Send len bytes of msg to A; waits for room, not for A. */
int rogue_send(struct rogue *g, const void *msg, uint32_t len)
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

void rogue_drain(struct rogue *g)
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
int has_comp(struct node *n, void *ctx, int ms, struct comp *out)
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
 * R floods A with FLOOD connection requests from its host, each claiming a
 * name of its own there (or all claiming *claim), and completes none: its
 * ids have no QP, so librdmacm leaves each answer (REP) to R, which never
 * confirms it.  A holds each one it accepts as accepted and not yet
 * established, with a QP.  Counts the requests A accepted, those it
 * refused as BUSY, those it refused otherwise, and those no answer came to
 * in the CM's time (UNREACHABLE: A's connection thread, creating a QP per
 * request on an emulated CPU, fell behind the flood; A did nothing wrong).
 */

void rogue_flood(const char *host, const struct sockaddr *a,
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

void hdr_init(struct ibf_rdm_hdr *h, uint8_t type, uint32_t conn,
	      uint64_t tag)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->rsvd = conn;	/* any value: never read */
	h->tag = tag;
	h->flags = IBF_RDM_F_TAGGED;
}

/* R sends A an eager tagged message (tag) on its own connection. */
int rogue_eager(struct rogue *g, uint64_t tag, const char *text)
{
	uint8_t msg[sizeof(struct ibf_rdm_hdr) + 16] = { 0 };

	hdr_init((void *)msg, IBF_RDM_EAGER, g->mine, tag);
	snprintf((char *)msg + sizeof(struct ibf_rdm_hdr), 16, "%s", text);
	if (rogue_send(g, msg, sizeof(msg)))
		return -1;
	rogue_drain(g);
	return 0;
}

/* R writes 64 bytes at addr under key, with immediate seq: the last part
 * of an RMA, as far as A can tell. */
int rogue_write_imm(struct rogue *g, uint64_t addr, uint32_t key,
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

/* R posts one receive, into the last slot of its buffer; rogue_recv_wait
 * waits for it: the bytes received, or -1. */
int rogue_recv(struct rogue *g, uint8_t **at)
{
	struct ibv_sge sge = { (uintptr_t)g->buf + (ROGUE_DEPTH - 1) * ROGUE_BUF,
			       ROGUE_BUF, g->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;

	*at = (uint8_t *)(uintptr_t)sge.addr;
	return ibv_post_recv(g->id->qp, &wr, &bad) ? -1 : 0;
}

int rogue_recv_wait(struct rogue *g, int ms)
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

/* R's eager tagged message reaches T's receive for any source, tag
 * tag, within ms: 1 if it did. */
int rogue_reaches(struct rogue *g, struct node *t, uint64_t tag, int ms)
{
	uint8_t r[16] = "";
	struct comp c = { 0 };
	int got;

	if (fi_trecv(t->ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, tag, 0, r))
		return 0;
	got = !rogue_eager(g, tag, "from R") && has_comp(t, r, ms, &c) && !c.err;
	if (!got && !fi_cancel(&t->ep->fid, r))
		has_comp(t, r, 1000, &c);	/* its cancellation, taken here */
	return got;
}
