/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDM engine's progress (ibf_rdm_progress) on completions a test
 * makes up, without a device: failed receives, failed sends and the
 * grave a connection that ended leaves behind; the rendezvous read and
 * its FIN, and FINs a peer should not have sent.
 *
 * ibv_poll_cq, ibv_post_srq_recv and ibv_post_send are inline calls
 * through their object's context ops, so a fake context whose ops are the
 * mocks below stands for the device.  ibv_modify_qp, rdma_disconnect and
 * the destroys of the windows' binder are library calls: the link wraps
 * them (-Wl,--wrap, in Makefile.am).
 * The endpoint has one connection, live on QP 0x42, which had an earlier
 * life on QP 0x41 (both in its QP map), one bounce in the SRQ, one
 * send op, one receive op and a CQ for their completions.
 */
#define _GNU_SOURCE	/* pthread_tryjoin_np */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "ibf_cq_impl.h"	/* ibf_cq_soft_next: the CQ reader's step */
#include "ibf_mr_cache.h"
#include "ibf_rdm.h"

#define QP_NOW 0x42u	/* the connection's QP */
#define QP_OLD 0x41u	/* its QP of the life before */

/* ---- the mock device ---- */

static struct {
	struct ibv_wc cq[4];	/* what the next polls return */
	int ncq;
	int srq_posts;
	uint64_t srq_wr_id;
	int srq_chain;		/* receives in the last SRQ post's chain */
	int srq_refuse_at;	/* > 0: the next SRQ post takes that many */
	int sends;
	uint64_t send_wr_id;
	int modify_calls;
	enum ibv_qp_state modify_state;
	int disconnects;
	uint8_t sent[64];	/* the last send's bytes */
	struct ibv_send_wr wr;	/* the last work request, and its sge */
	struct ibv_sge sge;
	int refuse;		/* the next posts fail with ENOMEM (a full queue) */
	int chain;		/* work requests in the last post's chain */
	int mw_allocs, mw_deallocs;
} dev;

static int mock_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc)
{
	int n = dev.ncq < num ? dev.ncq : num;

	(void)cq;
	memcpy(wc, dev.cq, (size_t)n * sizeof(*wc));
	memmove(dev.cq, dev.cq + n, (size_t)(dev.ncq - n) * sizeof(*wc));
	dev.ncq -= n;
	return n;
}

static int mock_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			      struct ibv_recv_wr **bad)
{
	int i;

	(void)srq;
	dev.srq_posts++;
	dev.srq_wr_id = wr->wr_id;
	for (dev.srq_chain = 0; wr; wr = wr->next, dev.srq_chain++) {
		if (dev.srq_refuse_at && dev.srq_chain == dev.srq_refuse_at) {
			i = dev.srq_refuse_at;
			dev.srq_refuse_at = 0;
			dev.srq_chain = i;
			*bad = wr;
			return ENOMEM;
		}
	}
	return 0;
}

static int mock_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	(void)qp;
	if (dev.refuse) {
		dev.refuse--;
		*bad = wr;
		return ENOMEM;
	}
	dev.sends++;
	dev.send_wr_id = wr->wr_id;
	dev.wr = *wr;
	dev.chain = wr->next ? 2 : 1;
	if (wr->num_sge)
		dev.sge = wr->sg_list[0];
	if (wr->num_sge && wr->sg_list[0].length <= sizeof(dev.sent))
		memcpy(dev.sent, (void *)(uintptr_t)wr->sg_list[0].addr,
		       wr->sg_list[0].length);
	return 0;
}

static struct ibv_mw the_mw;

static struct ibv_mw *mock_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	cr_assert_eq(type, IBV_MW_TYPE_1);
	dev.mw_allocs++;
	the_mw = (struct ibv_mw){ .context = pd->context, .pd = pd,
				  .rkey = 0x12300, .type = type };
	return &the_mw;
}

static int mock_dealloc_mw(struct ibv_mw *mw)
{
	cr_assert_eq(mw, &the_mw);
	dev.mw_deallocs++;
	return 0;
}

int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int mask);
int __wrap_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int mask)
{
	(void)qp;
	dev.modify_calls++;
	if (mask & IBV_QP_STATE)
		dev.modify_state = attr->qp_state;
	return 0;
}

int __wrap_rdma_disconnect(struct rdma_cm_id *id);
int __wrap_rdma_disconnect(struct rdma_cm_id *id)
{
	(void)id;
	dev.disconnects++;
	return 0;
}

/* A completion for the next poll. */
static void complete_next(void *wr_id, enum ibv_wc_status status,
			  enum ibv_wc_opcode opcode, uint32_t qp_num)
{
	cr_assert_lt(dev.ncq, 4);
	dev.cq[dev.ncq++] = (struct ibv_wc){
		.wr_id = (uintptr_t)wr_id, .status = status,
		.opcode = opcode, .qp_num = qp_num,
	};
}

/* ---- an endpoint with one connection ---- */

static struct ibv_context ctx;
static struct ibv_cq hcq = { .context = &ctx };
static struct ibv_srq srq = { .context = &ctx };
static struct ibv_qp qp = { .context = &ctx, .qp_num = QP_NOW };
static struct rdma_cm_id id;
static struct ibf_domain *dom;
static struct ibf_rdm_ep *ep;
static struct ibf_rdm_conn *conn;
static struct ibf_rdm_op *bounce, *tx, *rx;
static struct ibf_cq *cq;
static struct ibf_qp_map map;
static uint64_t map_slots[2];
static uint8_t mem[2][256];

static void setup(void)
{
	memset(&dev, 0, sizeof(dev));
	ctx.ops.poll_cq = mock_poll_cq;
	ctx.ops.post_srq_recv = mock_post_srq_recv;
	ctx.ops.post_send = mock_post_send;
	ctx.ops.alloc_mw = mock_alloc_mw;
	ctx.ops.dealloc_mw = mock_dealloc_mw;
	id = (struct rdma_cm_id){ .qp = &qp };
	dom = calloc(1, sizeof(*dom));
	ep = calloc(1, sizeof(*ep));
	conn = calloc(1, sizeof(*conn));
	cr_assert(dom && ep && conn);
	ep->base.domain = dom;
	ep->hook = (struct ibf_progress){ ibf_rdm_progress, ibf_rdm_trywait };
	ep->up = &ibf_rdm_proto_upcalls;
	ep->hcq = &hcq;
	ep->srq = &srq;
	ep->sq_depth = 4;
	ep->max_read = 4096;
	cr_assert_eq(ibf_mq_init(&ep->recv_msg, 4) | ibf_mq_init(&ep->recv_tag, 4) |
		     ibf_mq_init(&ep->unexp_msg, 4) | ibf_mq_init(&ep->unexp_tag, 4), 0);
	ep->stop_fd = -1;
	ep->wake_fd = eventfd(0, EFD_NONBLOCK);
	cr_assert_geq(ep->wake_fd, 0);
	pthread_mutex_init(&ep->cm_lock, NULL);

	/* The ops: a send, a receive and a bounce, as the pools lay them. */
	ep->ops = calloc(3, sizeof(*ep->ops));
	cr_assert(ep->ops);
	ep->ntx = ep->nrx = ep->nbounce = 1;
	tx = &ep->ops[0];
	rx = &ep->ops[1];
	bounce = &ep->ops[2];
	tx->op.kind = rx->op.kind = bounce->op.kind = IBF_OP_RDM;
	tx->ep = rx->ep = bounce->ep = &ep->as_ops;
	tx->mem = mem[0];
	bounce->mem = mem[1];
	/* The CQ their completions go to: its soft ring alone. */
	cq = calloc(1, sizeof(*cq));
	cr_assert(cq);
	cr_assert_eq(ibf_cq_soft_reserve(cq, 4), 0);
	ep->base.tx_cq = ep->base.rx_cq = cq;
	tx->is_tx = 1;
	bounce->is_bounce = 1;
	bounce->state = IBF_RDM_BOUNCE_POSTED;
	ep->srq_posted = 1;

	/* The connection, in its second life (QP_OLD was the first). */
	ep->conn_dir[0] = calloc(IBF_CONN_CHUNK, sizeof(*ep->conn_dir[0]));
	cr_assert(ep->conn_dir[0]);
	ep->conn_dir[0][0] = conn;
	ep->nconns = 1;
	conn->ep = &ep->as_conns;
	conn->id = &id;
	conn->qp_num = QP_NOW;
	conn->epoch = 2;
	conn->credits = 3;
	conn->window = 4;
	conn->state = IBF_CONN_CONNECTED;
	ep->nstate[IBF_CONN_CONNECTED] = 1;
	/* Both QPs name it.  A map of two slots, both full: any probe finds
	 * either entry whatever the hash. */
	map_slots[0] = (uint64_t)QP_NOW << 32 | 1;
	map_slots[1] = (uint64_t)QP_OLD << 32 | 1;
	map = (struct ibf_qp_map){ .slot = map_slots, .mask = 1, .live = 2,
				   .used = 2 };
	ep->qp_map = &map;
}

static void teardown(void)
{
	struct ibf_rdm_grave *g;

	while ((g = ep->graves)) {
		ep->graves = g->next;
		free(g);
	}
	ibf_mq_fini(&ep->recv_msg);
	ibf_mq_fini(&ep->recv_tag);
	ibf_mq_fini(&ep->unexp_msg);
	ibf_mq_fini(&ep->unexp_tag);
	free(cq->soft);
	free(cq);
	close(ep->wake_fd);
	pthread_mutex_destroy(&ep->cm_lock);
	free(ep->conn_dir[0]);
	free(ep->ops);
	free(conn);
	free(ep);
	free(dom);
}

static void progress(void)
{
	ibf_rdm_progress(&ep->hook, NULL);
}

/* How many times the connection thread was woken (its eventfd). */
static uint64_t wakes(void)
{
	uint64_t n = 0;

	if (read(ep->wake_fd, &n, sizeof(n)) != sizeof(n))
		return 0;
	return n;
}

TestSuite(rdm_progress, .init = setup, .fini = teardown);

/* A flushed receive is a QP's end already said: the bounce goes back to
 * the SRQ, and the connection is not touched. */
Test(rdm_progress, a_flushed_receive_goes_back_to_the_srq)
{
	complete_next(&bounce->op, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, QP_NOW);
	progress();
	cr_assert_eq(dev.srq_posts, 1);
	cr_assert_eq(dev.srq_wr_id, (uintptr_t)&bounce->op);
	cr_assert_eq(bounce->state, IBF_RDM_BOUNCE_POSTED);
	cr_assert_eq(ep->srq_posted, 1);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(conn->epoch, 2);
	cr_assert_eq(dev.disconnects, 0);
	cr_assert_null(ep->graves);
}

/* Bounces of an SRQ of 64 (batches of 4), each holding an arrival. */
static struct ibf_rdm_op *batch_bounces(int n)
{
	struct ibf_rdm_op *b = calloc((size_t)n, sizeof(*b));
	int i;

	cr_assert(b);
	ep->nbounce = 64;
	ep->srq_refill_at = 64 - ibf_rdm_repost_batch(&ep->as_ops);
	ep->srq_posted = 64;
	for (i = 0; i < n; i++) {
		b[i].op.kind = IBF_OP_RDM;
		b[i].ep = &ep->as_ops;
		b[i].mem = mem[1];
		b[i].is_bounce = 1;
		b[i].state = IBF_RDM_BOUNCE_POSTED;
	}
	return b;
}

/*
 * Released bounces go back to the SRQ a batch at a time, in one post:
 * arrivals and releases one by one, as a ping-pong makes them, post
 * nothing until the SRQ lacks a batch (a sixteenth of it), then all of
 * them in one chain.
 */
Test(rdm_progress, released_bounces_go_back_to_the_srq_in_one_post)
{
	struct ibf_rdm_op *b = batch_bounces(4);
	int i;

	cr_assert_eq(ibf_rdm_repost_batch(&ep->as_ops), 4);
	for (i = 0; i < 4; i++) {
		ibf_rdm_bounce_arrived(&ep->as_ops);
		ibf_rdm_bounce_release(&ep->as_ops, &b[i]);
		if (i < 3) {
			cr_assert_eq(dev.srq_posts, 0, "release %d posted", i);
			cr_assert_eq(b[i].state, IBF_RDM_BOUNCE_SPARE);
			progress();	/* nor does progress, short of a batch */
			cr_assert_eq(dev.srq_posts, 0);
		}
	}
	cr_assert_eq(dev.srq_posts, 1);
	cr_assert_eq(dev.srq_chain, 4);
	cr_assert_eq(ep->srq_posted, 64);
	cr_assert_null(ep->spare);
	for (i = 0; i < 4; i++)
		cr_assert_eq(b[i].state, IBF_RDM_BOUNCE_POSTED);
	ep->nbounce = 1;
	ep->srq_refill_at = 0;
	ep->srq_posted = 1;
	free(b);
}

/* The SRQ takes part of a batch: those it refused are spares again, and
 * counted out of the SRQ, for the next batch. */
Test(rdm_progress, bounces_the_srq_refuses_stay_spares)
{
	struct ibf_rdm_op *b = batch_bounces(4), *s, *in[2];
	int i, spares = 0, nin = 0;

	dev.srq_refuse_at = 2;
	for (i = 0; i < 4; i++) {
		ibf_rdm_bounce_arrived(&ep->as_ops);
		ibf_rdm_bounce_release(&ep->as_ops, &b[i]);
	}
	cr_assert_eq(dev.srq_posts, 1);
	cr_assert_eq(ep->srq_posted, 62);
	for (s = ep->spare; s; s = s->next) {
		cr_assert_eq(s->state, IBF_RDM_BOUNCE_SPARE);
		spares++;
	}
	cr_assert_eq(spares, 2);
	for (i = 0; i < 4; i++)
		if (b[i].state == IBF_RDM_BOUNCE_POSTED)
			in[nin++] = &b[i];
	cr_assert_eq(nin, 2);
	/* The two in the SRQ take arrivals: a batch short again, every
	 * spare goes in, the refused two with the one just released. */
	ibf_rdm_bounce_arrived(&ep->as_ops);
	ibf_rdm_bounce_arrived(&ep->as_ops);
	ibf_rdm_bounce_release(&ep->as_ops, in[0]);
	cr_assert_eq(dev.srq_posts, 2);
	cr_assert_eq(dev.srq_chain, 3);
	cr_assert_eq(ep->srq_posted, 63);
	cr_assert_null(ep->spare);
	/* One short: the next release waits for a batch. */
	ibf_rdm_bounce_release(&ep->as_ops, in[1]);
	cr_assert_eq(dev.srq_posts, 2);
	cr_assert_eq(ep->spare, in[1]);
	ep->nbounce = 1;
	ep->srq_refill_at = 0;
	ep->srq_posted = 1;
	free(b);
}

/*
 * A receive that failed otherwise (here, a message longer than the
 * bounce) leaves its QP in error for good: the connection's life ends
 * there, as a disconnect would end it, and the next send reconnects.
 * Its QP goes to a grave, in error, with a drain posted behind it.
 */
Test(rdm_progress, a_failed_receive_ends_the_connection)
{
	complete_next(&bounce->op, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, QP_NOW);
	progress();
	cr_assert_eq(dev.srq_posts, 1, "the bounce goes back all the same");
	cr_assert_eq(ep->srq_posted, 1);
	cr_assert_eq(dev.disconnects, 1, "the peer is told, if it can hear");
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_eq(conn->epoch, 3, "a new life: old sends fail");
	cr_assert_null(conn->id);
	cr_assert_eq(conn->qp_num, 0);
	cr_assert_eq(conn->credits, 4, "the next QP starts with every slot");
	cr_assert_eq(ep->nstate[IBF_CONN_CONNECTED], 0);
	cr_assert_eq(ep->nstate[IBF_CONN_IDLE], 1);
	cr_assert(ep->cm_pending, "progress hands the end to the thread");
	cr_assert_not_null(ep->graves);
	cr_assert_eq(ep->graves->id, &id);
	cr_assert_eq(dev.modify_calls, 1);
	cr_assert_eq(dev.modify_state, IBV_QPS_ERR);
	cr_assert_eq(dev.sends, 1, "the drain");
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&ep->graves->drain.op);
	cr_assert_eq(ep->drains_out, 1);
	cr_assert(!ep->graves->drained);
}

/* The same failure on the QP of a life that has ended already changes
 * nothing: the life after it is not the one that failed. */
Test(rdm_progress, a_failed_receive_of_an_old_life_is_ignored)
{
	complete_next(&bounce->op, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, QP_OLD);
	progress();
	cr_assert_eq(dev.srq_posts, 1);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(conn->epoch, 2);
	cr_assert_eq(dev.disconnects, 0);
	cr_assert_null(ep->graves);
}

/* A failure on a QP no connection has (a number unknown, or reused) only
 * returns the bounce. */
Test(rdm_progress, a_failed_receive_of_no_connection_returns_the_bounce)
{
	complete_next(&bounce->op, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0x77);
	progress();
	cr_assert_eq(dev.srq_posts, 1);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(dev.disconnects, 0);
}

/*
 * Once progress sees the drain complete, nothing of the dead QP is left
 * in the CQ: the grave is marked drained and the connection thread woken
 * to destroy QP and id.
 */
Test(rdm_progress, the_grave_drains_and_wakes_the_thread)
{
	struct ibf_rdm_grave *g;

	complete_next(&bounce->op, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, QP_NOW);
	progress();
	g = ep->graves;
	cr_assert_not_null(g);
	cr_assert_eq(wakes(), 0, "not before its drain");
	complete_next(&g->drain.op, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, QP_NOW);
	progress();
	cr_assert(g->drained);
	cr_assert_eq(ep->drains_out, 0);
	cr_assert_eq(wakes(), 1);
	cr_assert_eq(g->drain.state, IBF_RDM_DRAIN, "a drain never moves");
	cr_assert_eq(conn->epoch, 3, "its flush ends no further life");
}

/*
 * The peer posted no receive in time (RNR retries spent): the send fails
 * with -FI_ENORX, its slot comes back, and the connection's life ends so
 * the next send reconnects.  An inject has no context to report with:
 * its op goes straight back to the pool.
 */
Test(rdm_progress, a_send_the_peer_never_took_fails_and_ends_the_life)
{
	tx->state = IBF_RDM_TX;
	tx->conn = tx->post_conn = conn;
	tx->post_epoch = tx->epoch = 2;
	ep->sq_posted = 1;
	conn->credits = 2;	/* one slot held by the send */
	complete_next(&tx->op, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_SEND, QP_NOW);
	progress();
	cr_assert_eq(ep->sq_posted, 1, "the send's out, the grave's drain in");
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&ep->graves->drain.op);
	cr_assert_eq(tx->state, IBF_RDM_FREE);
	cr_assert_eq(ep->tx_free, tx);
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_eq(conn->epoch, 3);
	cr_assert_eq(dev.disconnects, 1);
	cr_assert_not_null(ep->graves);
}

/*
 * A send of the life before, flushed as that life ended: no further
 * death, and the slot it held belonged to the old QP (the new one started
 * with all of them), so the count is not touched.
 */
Test(rdm_progress, a_send_flushed_with_its_old_life_changes_nothing)
{
	tx->state = IBF_RDM_TX;
	tx->conn = tx->post_conn = conn;
	tx->post_epoch = tx->epoch = 1;
	ep->sq_posted = 1;
	complete_next(&tx->op, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, QP_OLD);
	progress();
	cr_assert_eq(tx->state, IBF_RDM_FREE);
	cr_assert_eq(conn->credits, 3);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);
	cr_assert_eq(conn->epoch, 2);
	cr_assert_eq(dev.disconnects, 0);
}

/* ---- rendezvous ---- */

static int ctx_app;	/* the application's context for its operations */

/* What the CQ holds: how many completions, and the first. */
static uint32_t cq_count(void)
{
	return cq->soft_tail - cq->soft_head;
}

static const struct ibf_cq_soft_entry *cq_first(void)
{
	return &cq->soft[cq->soft_head & (cq->soft_size - 1)];
}

/* The first completion the CQ holds is op's (a copy, op free again). */
static void cq_first_is(const struct ibf_rdm_op *op)
{
	const struct ibf_cq_soft_entry *s = cq_first();

	cr_assert_eq(s->e.op_context, op->op.context);
	cr_assert_eq(s->e.flags, op->op.flags);
	cr_assert_eq(s->e.err, op->op.err);
	cr_assert_eq(s->room, op < ep->ops + ep->ntx ? &ep->tx_room : &ep->rx_room,
		     "counted against its direction's room");
	cr_assert_eq(op->state, IBF_RDM_FREE, "freed where it completed");
}

/* A receive reading, from the bounce holding the RTS, 16 bytes the
 * sender's op 0 announced; its one read is out. */
static void reading(void)
{
	struct ibf_rdm_hdr *hdr = (void *)bounce->mem;
	struct ibf_rdm_rts *rts = (void *)(bounce->mem + IBF_RDM_HDR);

	hdr->type = IBF_RDM_RTS;
	rts->len = 16;
	rts->cookie = 0;
	rts->nseg = 1;
	rts->seg[0] = (struct ibf_rdm_seg){ .addr = 0x9000, .len = 16,
					    .rkey = 0x77 };
	bounce->state = IBF_RDM_BOUNCE_HELD;
	bounce->conn = conn;
	bounce->epoch = 2;
	ep->srq_posted = 0;	/* it holds a message: out of the SRQ */
	ep->nbounce = 0;	/* and no refill is due */
	rx->state = IBF_RDM_RX_READ;
	rx->bounce = bounce;
	rx->reads_left = 1;
	rx->rd_left = 0;
	rx->op.len = 16;
	rx->op.context = &ctx_app;
	rx->op.user_comp = 1;
	rx->post_conn = conn;
	rx->post_epoch = 2;
	ep->sq_posted = 1;
	conn->credits = 2;
}

/*
 * The read is done: the sender is told (a FIN with its cookie and status
 * 0, on the connection the RTS came on, from the bounce's own buffer),
 * the receive completes, and the bounce goes back to the SRQ once the
 * FIN has gone.
 */
Test(rdm_progress, a_finished_read_answers_with_a_fin)
{
	const struct ibf_rdm_hdr *hdr = (void *)dev.sent;
	const struct ibf_rdm_fin *fin = (void *)(dev.sent + IBF_RDM_HDR);

	reading();
	complete_next(&rx->op, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, QP_NOW);
	progress();
	cr_assert_eq(dev.sends, 1);
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&bounce->op);
	cr_assert_eq(hdr->type, IBF_RDM_FIN);
	cr_assert_eq(dev.wr.opcode, IBV_WR_SEND, "no window to close");
	cr_assert_eq(fin->cookie, 0);
	cr_assert_eq(fin->status, 0);
	cr_assert_eq(bounce->state, IBF_RDM_BOUNCE_FIN);
	cr_assert_eq(cq_count(), 1);
	cq_first_is(rx);
	cr_assert_eq(cq_first()->e.err, 0);
	cr_assert_eq(conn->state, IBF_CONN_CONNECTED);

	ep->nbounce = 1;
	complete_next(&bounce->op, IBV_WC_SUCCESS, IBV_WC_SEND, QP_NOW);
	progress();
	cr_assert_eq(dev.srq_posts, 1, "the FIN went: the bounce is free");
	cr_assert_eq(bounce->state, IBF_RDM_BOUNCE_POSTED);
}

/*
 * The sender's key refused the read (a remote access error): the receive
 * fails with -FI_EACCES.  The failed read left the QP in error, so that
 * life is over; its FIN cannot go on it, and the bounce goes straight
 * back to the SRQ (the sender learns from the connection's end).
 */
Test(rdm_progress, a_refused_read_fails_the_receive_and_the_life)
{
	reading();
	ep->nbounce = 1;
	complete_next(&rx->op, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, QP_NOW);
	progress();
	cr_assert_eq(cq_count(), 1);
	cq_first_is(rx);
	cr_assert_eq(rx->op.err, FI_EACCES);
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
	cr_assert_eq(conn->epoch, 3);
	cr_assert_eq(dev.sends, 1, "the grave's drain, no FIN");
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&ep->graves->drain.op);
	cr_assert_eq(dev.srq_posts, 1);
	cr_assert_eq(bounce->state, IBF_RDM_BOUNCE_POSTED);
}

/* An eager send of tx's on the connection completes: its slot comes
 * back, and goes to what waits for one. */
static void slot_comes_back(void)
{
	tx->state = IBF_RDM_TX;
	tx->conn = tx->post_conn = conn;
	tx->epoch = tx->post_epoch = 2;
	ep->sq_posted++;
	complete_next(&tx->op, IBV_WC_SUCCESS, IBV_WC_SEND, QP_NOW);
	progress();
}

/* The sender's op 0 sent an RTS on the live connection; a FIN arrives
 * in the bounce with the given cookie and status. */
static void fin_arrives(uint32_t cookie, int32_t status, uint32_t byte_len)
{
	struct ibf_rdm_hdr *hdr = (void *)bounce->mem;
	struct ibf_rdm_fin *fin = (void *)(bounce->mem + IBF_RDM_HDR);

	memset(hdr, 0, sizeof(*hdr));
	hdr->type = IBF_RDM_FIN;
	fin->cookie = cookie;
	fin->status = status;
	dev.cq[dev.ncq++] = (struct ibv_wc){
		.wr_id = (uintptr_t)&bounce->op, .status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV, .qp_num = QP_NOW, .byte_len = byte_len,
	};
	progress();
}

static void rts_out(void)
{
	tx->state = IBF_RDM_TX_RTS;
	tx->conn = tx->post_conn = conn;
	tx->epoch = tx->post_epoch = 2;
	tx->reads_left = 1;	/* its RTS completed already: the FIN is due */
	tx->op.context = &ctx_app;
	tx->op.user_comp = 1;
}

#define FIN_LEN (IBF_RDM_HDR + (uint32_t)sizeof(struct ibf_rdm_fin))

/* The reader's error comes back in the FIN: the send fails with it. */
Test(rdm_progress, a_fin_with_an_error_fails_the_send)
{
	rts_out();
	fin_arrives(0, -FI_EACCES, FIN_LEN);
	cr_assert_eq(cq_count(), 1);
	cq_first_is(tx);
	cr_assert_eq(tx->op.err, FI_EACCES);
	cr_assert_eq(ep->dropped, 0);
	cr_assert_eq(dev.srq_posts, 1);
}

/* FINs that complete nothing: each is dropped and counted, the send
 * stays waiting for the one FIN it is owed, and the bounce is reused. */
Test(rdm_progress, fins_a_peer_should_not_send_are_dropped)
{
	rts_out();
	fin_arrives(5, 0, FIN_LEN);		/* no op of ours */
	fin_arrives(0, 0, FIN_LEN - 1);		/* cut short */
	fin_arrives(0, 7, FIN_LEN);		/* not a status */
	tx->post_epoch = 1;			/* sent on the life before */
	fin_arrives(0, 0, FIN_LEN);
	tx->post_epoch = 2;
	cr_assert_eq(ep->dropped, 4);
	cr_assert_eq(cq_count(), 0);
	cr_assert_eq(tx->state, IBF_RDM_TX_RTS);
	cr_assert_eq(dev.srq_posts, 4);

	fin_arrives(0, 0, FIN_LEN);		/* the one it is owed */
	cr_assert_eq(cq_count(), 1);
	cr_assert_eq(tx->op.err, 0);
	fin_arrives(0, 0, FIN_LEN);		/* and never a second */
	cr_assert_eq(ep->dropped, 5);
	cr_assert_eq(cq_count(), 1);
}

/*
 * An RTS meets a receive the application posted: the receive reads the
 * message, but only with a send-queue slot of the connection; with none
 * it waits, and the first slot a completion gives back posts its read
 * (RDMA READ of the sender's segment, into the receive's buffer, under
 * its region's key).
 */
Test(rdm_progress, a_read_without_a_slot_waits_for_one)
{
	static uint8_t buf[16];
	struct ibv_mr vmr = { .addr = buf, .length = sizeof(buf), .lkey = 0x55 };
	struct ibf_mr mr = { .magic = IBF_MR_MAGIC, .mr = &vmr,
			     .ibv_access = IBV_ACCESS_LOCAL_WRITE };
	struct iovec iov = { buf, sizeof(buf) };
	void *desc = &mr;
	struct ibf_rdm_hdr *hdr = (void *)bounce->mem;
	struct ibf_rdm_rts *rts = (void *)(bounce->mem + IBF_RDM_HDR);
	struct ibf_rdm_op *r;

	rx->state = IBF_RDM_FREE;
	ep->rx_free = rx;
	r = ibf_rdm_rx_take(&ep->as_proto, &iov, &desc, 1, 0, 0, 0,
			    FI_COMPLETION,
			    &ctx_app, 0);
	cr_assert_eq(r, rx);
	ibf_rdm_recv_post(&ep->as_proto, r);

	memset(hdr, 0, sizeof(*hdr));
	hdr->type = IBF_RDM_RTS;
	rts->len = 16;
	rts->cookie = 3;
	rts->nseg = 1;
	rts->seg[0] = (struct ibf_rdm_seg){ .addr = 0x9000, .len = 16,
					    .rkey = 0x77 };
	conn->credits = 0;	/* every slot of the QP taken */
	dev.cq[dev.ncq++] = (struct ibv_wc){
		.wr_id = (uintptr_t)&bounce->op, .status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV, .qp_num = QP_NOW,
		.byte_len = IBF_RDM_HDR + offsetof(struct ibf_rdm_rts, seg) +
			    sizeof(struct ibf_rdm_seg),
	};
	progress();
	cr_assert_eq(r->state, IBF_RDM_RX_READ);
	cr_assert_eq(bounce->state, IBF_RDM_BOUNCE_HELD);
	cr_assert(r->stalled, "no slot: it waits");
	cr_assert_eq(dev.sends, 0);

	/* A send completes: its slot comes back, and goes to the read. */
	tx->state = IBF_RDM_TX;
	tx->conn = tx->post_conn = conn;
	tx->epoch = tx->post_epoch = 2;
	ep->sq_posted = 1;
	complete_next(&tx->op, IBV_WC_SUCCESS, IBV_WC_SEND, QP_NOW);
	progress();
	cr_assert(!r->stalled);
	cr_assert_eq(dev.sends, 1);
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&r->op);
	cr_assert_eq(dev.wr.opcode, IBV_WR_RDMA_READ);
	cr_assert_eq(dev.wr.wr.rdma.remote_addr, 0x9000);
	cr_assert_eq(dev.wr.wr.rdma.rkey, 0x77);
	cr_assert_eq(dev.sge.addr, (uintptr_t)buf);
	cr_assert_eq(dev.sge.length, 16);
	cr_assert_eq(dev.sge.lkey, 0x55);
	cr_assert_eq(conn->credits, 0, "the slot is the read's now");
	cr_assert_eq(r->reads_left, 1);
}

/*
 * The RTS itself failed (the peer stopped answering): the send fails
 * with -FI_ETIMEDOUT at once, without waiting for a FIN that cannot
 * come, and the connection's life ends.
 */
Test(rdm_progress, a_failed_rts_fails_the_send_at_once)
{
	rts_out();
	tx->reads_left = 2;	/* its RTS's completion and the FIN */
	ep->sq_posted = 1;
	complete_next(&tx->op, IBV_WC_RETRY_EXC_ERR, IBV_WC_SEND, QP_NOW);
	progress();
	cr_assert_eq(cq_count(), 1);
	cq_first_is(tx);
	cr_assert_eq(tx->op.err, FI_ETIMEDOUT);
	cr_assert_eq(conn->state, IBF_CONN_IDLE);
}

/*
 * The FIN finds the send queue full (the device refuses the post): the
 * bounce waits with it, and the next slot a completion gives back sends
 * it; the receive has completed meanwhile.
 */
Test(rdm_progress, a_fin_the_queue_refuses_goes_with_the_next_slot)
{
	reading();
	dev.refuse = 1;
	complete_next(&rx->op, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, QP_NOW);
	progress();
	cr_assert_eq(dev.sends, 0);
	cr_assert(bounce->stalled, "the FIN waits for a slot");
	cr_assert_eq(cq_count(), 1, "the receive is done all the same");

	slot_comes_back();
	cr_assert_eq(dev.sends, 1);
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&bounce->op);
	cr_assert(!bounce->stalled);
	cr_assert_eq(((struct ibf_rdm_hdr *)dev.sent)->type, IBF_RDM_FIN);
}

/*
 * Issue 19: a completion is written where it completes and its op freed
 * there, under the ep->lock progress holds.  A completion queued in the
 * CQ is a copy; its op is FREE at once, but not to be taken while the
 * completion is unread (the ring has room for nrx, here 1): an
 * application that never reads cannot overrun the CQ.  The CQ reader's
 * step takes no lock of the endpoint's: the test holds ep->lock while it
 * reads, as another thread posting on the endpoint could (the timeout
 * fails the test if the read waits for it).
 */
Test(rdm_progress, a_queued_completion_frees_its_op_and_holds_its_room,
     .timeout = 10)
{
	reading();
	complete_next(&rx->op, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, QP_NOW);
	progress();
	cr_assert_eq(cq_count(), 1);
	cq_first_is(rx);
	cr_assert_eq(ep->rx_held, rx, "held while its completion is unread");
	cr_assert_null(ibf_rdm_rx_get(&ep->as_ops), "its completion is unread");
	cr_assert(!ibf_rdm_rx_any(&ep->as_ops));

	ibf_lock_init(&ep->lock, 1);
	ibf_lock_acquire(&ep->lock);
	ibf_cq_soft_next(cq);	/* the CQ reader's step */
	ibf_lock_release(&ep->lock);
	cr_assert_eq(cq_count(), 0);
	cr_assert_eq(ibf_rdm_rx_get(&ep->as_ops), rx, "read: it may be taken");
	cr_assert_eq(rx->state, IBF_RDM_NEW);
	cr_assert_null(ibf_rdm_rx_get(&ep->as_ops), "one op, taken");
	ibf_lock_fini(&ep->lock);
}

/*
 * A CQ that one endpoint alone feeds, with no lock, is read by the
 * endpoint's own read (struct ibf_progress's sole_read): fi_cq_read goes
 * straight there, and a completion goes straight into the reader's
 * buffer.  Once the endpoint is unbound, or on a CQ with a lock, reads
 * take the CQ's own path and never that endpoint's.
 */
static int sole_reads;

static ssize_t counted_sole_read(struct ibf_progress *p, struct ibf_cq *c,
				 void *buf, size_t count, fi_addr_t *src)
{
	sole_reads++;
	return ibf_rdm_sole_read(p, c, buf, count, src);
}

Test(rdm_progress, a_cq_one_endpoint_feeds_is_read_by_that_endpoint)
{
	struct fi_cq_tagged_entry e[2];
	fi_addr_t src[2];

	ep->hook.sole_read = counted_sole_read;
	cq->format = FI_CQ_FORMAT_TAGGED;
	cq->entry_size = sizeof(e[0]);
	cr_assert_eq(ibf_cq_add_ep(cq, &ep->hook, -1), 0);

	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), -FI_EAGAIN);
	cr_assert_eq(sole_reads, 1);
	cr_assert_eq(fi_cq_read(&cq->cq_fid, NULL, 1), -FI_EINVAL);
	cr_assert_eq(sole_reads, 1, "arguments are checked before");
	reading();
	complete_next(&rx->op, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, QP_NOW);
	rx->op.src = 7;
	cr_assert_eq(fi_cq_readfrom(&cq->cq_fid, e, 2, src), 1);
	cr_assert_eq(sole_reads, 2);
	cr_assert_eq(e[0].op_context, &ctx_app);
	cr_assert_eq(e[0].len, 16);
	cr_assert_eq(src[0], 7);
	cr_assert_eq(cq_count(), 0, "written into the reader's buffer");
	cr_assert_eq(dev.sends, 1, "and the read's FIN went");

	ibf_cq_del_ep(cq, &ep->hook, -1);
	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), -FI_EAGAIN);
	cr_assert_eq(sole_reads, 2, "unbound: no read goes to it");

	/* FI_THREAD_SAFE: the endpoint still reads it, and an empty read
	 * takes the endpoint's lock alone.  Held by another thread, the
	 * CQ's lock would stop a read that took it: the alarm ends the test
	 * as a crash instead. */
	ibf_lock_init(&cq->lock, 1);
	cr_assert_eq(ibf_cq_add_ep(cq, &ep->hook, -1), 0);
	cq->lock.busy = 1;
	alarm(10);
	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), -FI_EAGAIN);
	alarm(0);
	cr_assert_eq(sole_reads, 3, "a CQ with a lock is its endpoint's to read");
	cq->lock.busy = 0;
	/* What the CQ holds is collected under its lock, let go after. */
	rx->op.context = &ctx_app;
	rx->op.user_comp = 1;
	ibf_cq_soft_write(cq, &rx->op, &ep->rx_room);
	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), 1);
	cr_assert_eq(sole_reads, 4);
	cr_assert_eq(e[0].op_context, &ctx_app);
	cr_assert_eq(cq->lock.busy, 0, "the CQ's lock was let go");
	cr_assert_eq(cq_count(), 0);
	ibf_cq_del_ep(cq, &ep->hook, -1);
	ibf_lock_fini(&cq->lock);
	free(cq->eps);
}

/*
 * An endpoint that needs no lock (FI_THREAD_DOMAIN) gives its CQs a read
 * table of its own (struct ibf_progress's sole_ops): fi_cq_read goes
 * straight to the endpoint's read, not through the CQ's jump to its
 * sole_read, and still checks its arguments and writes completions into
 * the reader's buffer.  fi_cq_readfrom keeps the jump.  A CQ with a
 * lock, or one the endpoint no longer feeds alone, never takes the table.
 */
Test(rdm_progress, an_unlocked_endpoint_s_cq_read_is_the_endpoint_s_own)
{
	struct fi_cq_tagged_entry e[2];
	fi_addr_t src[2];

	ep->hook.sole_read = counted_sole_read;
	ibf_cq_sole_ops_derive(&ep->sole_cq_ops, ibf_rdm_cq_read_unlocked);
	ep->hook.sole_ops = &ep->sole_cq_ops;
	cq->format = FI_CQ_FORMAT_TAGGED;
	cq->entry_size = sizeof(e[0]);
	cr_assert_eq(ibf_cq_add_ep(cq, &ep->hook, -1), 0);
	cr_assert_eq(cq->cq_fid.ops, &ep->sole_cq_ops);

	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), -FI_EAGAIN);
	cr_assert_eq(fi_cq_read(&cq->cq_fid, NULL, 1), -FI_EINVAL);
	cr_assert_eq(sole_reads, 0, "no jump through the CQ's read");
	reading();
	complete_next(&rx->op, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, QP_NOW);
	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), 1);
	cr_assert_eq(sole_reads, 0);
	cr_assert_eq(e[0].op_context, &ctx_app);
	cr_assert_eq(e[0].len, 16);
	cr_assert_eq(cq_count(), 0, "written into the reader's buffer");
	cr_assert_eq(fi_cq_readfrom(&cq->cq_fid, e, 2, src), -FI_EAGAIN);
	cr_assert_eq(sole_reads, 1, "readfrom takes the endpoint's sole_read");

	ibf_cq_del_ep(cq, &ep->hook, -1);
	cr_assert_neq(cq->cq_fid.ops, &ep->sole_cq_ops, "unbound: not its table");
	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), -FI_EAGAIN);
	cr_assert_eq(sole_reads, 1);

	ibf_lock_init(&cq->lock, 1);
	cr_assert_eq(ibf_cq_add_ep(cq, &ep->hook, -1), 0);
	cr_assert_neq(cq->cq_fid.ops, &ep->sole_cq_ops, "a CQ with a lock");
	cr_assert_eq(fi_cq_read(&cq->cq_fid, e, 2), -FI_EAGAIN);
	cr_assert_eq(sole_reads, 2, "read through the jump, which counts");
	ibf_cq_del_ep(cq, &ep->hook, -1);
	ibf_lock_fini(&cq->lock);
	free(cq->eps);
}

/*
 * FI_THREAD_SAFE: a sole read holds no lock of the CQ's while it
 * progresses, so ibf_cq_del_ep (an endpoint closing) must wait for one
 * under way: after it returns nothing progresses the endpoint, whose
 * device CQ is destroyed next.  The reader here stays inside the
 * endpoint's read until told; del_ep must not return before.
 */
static int held_in_read, let_go;

static ssize_t holding_sole_read(struct ibf_progress *p, struct ibf_cq *c,
				 void *buf, size_t count, fi_addr_t *src)
{
	__atomic_store_n(&held_in_read, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&let_go, __ATOMIC_SEQ_CST))
		usleep(1000);
	return ibf_rdm_sole_read(p, c, buf, count, src);
}

static void *read_once(void *arg)
{
	struct fi_cq_tagged_entry e[2];

	(void)arg;
	return (void *)(intptr_t)fi_cq_read(&cq->cq_fid, e, 2);
}

static void *unhook(void *arg)
{
	(void)arg;
	ibf_cq_del_ep(cq, &ep->hook, -1);
	return NULL;
}

Test(rdm_progress, unhooking_waits_for_a_sole_read_under_way)
{
	pthread_t reader, closer;
	void *ret;
	int i;

	cq->format = FI_CQ_FORMAT_TAGGED;
	cq->entry_size = sizeof(struct fi_cq_tagged_entry);
	ibf_lock_init(&cq->lock, 1);
	ep->hook.sole_read = holding_sole_read;
	cr_assert_eq(ibf_cq_add_ep(cq, &ep->hook, -1), 0);
	cr_assert_eq(pthread_create(&reader, NULL, read_once, NULL), 0);
	while (!__atomic_load_n(&held_in_read, __ATOMIC_SEQ_CST))
		usleep(1000);
	cr_assert_eq(pthread_create(&closer, NULL, unhook, NULL), 0);
	for (i = 0; i < 50 && cq->neps; i++)
		usleep(1000);
	cr_assert_eq(cq->neps, 0, "unhooked from the table at once");
	usleep(50000);
	cr_assert_eq(pthread_tryjoin_np(closer, &ret), EBUSY,
		     "del_ep returned with a read of the endpoint under way");
	__atomic_store_n(&let_go, 1, __ATOMIC_SEQ_CST);
	cr_assert_eq(pthread_join(reader, &ret), 0);
	cr_assert_eq((intptr_t)ret, -FI_EAGAIN);
	cr_assert_eq(pthread_join(closer, NULL), 0);
	cr_assert_eq(cq->sole_readers, 0);
	ibf_lock_fini(&cq->lock);
	free(cq->eps);
}

/*
 * Remote CQ data that came when no receive op could be taken waits;
 * once the application reads the completion holding the room, the next
 * progress (the next read) reports the data with the op.
 */
Test(rdm_progress, remote_cq_data_waiting_for_an_op_goes_once_one_is_read)
{
	struct ibf_rdm_hdr *hdr = (void *)bounce->mem;

	rx->op.context = &ctx_app;
	rx->op.user_comp = 1;
	ep->rx_held = rx;	/* free, but its completion is unread */
	ibf_cq_soft_write(cq, &rx->op, &ep->rx_room);
	hdr->type = IBF_RDM_WDATA;
	hdr->data = 0x5eed;
	bounce->state = IBF_RDM_BOUNCE_HELD;
	bounce->conn = conn;
	bounce->op.len = 8;
	ep->srq_posted = 0;	/* it holds a message: out of the SRQ */
	ep->nbounce = 0;	/* and no refill is due */
	ibf_rdm_list_append(&ep->wdata_wait, bounce);

	progress();
	cr_assert_eq(ep->wdata_wait.head, bounce, "no op yet: it waits");
	cr_assert_eq(cq_count(), 1);
	ibf_cq_soft_next(cq);
	progress();
	cr_assert_null(ep->wdata_wait.head, "the data was reported");
	cr_assert_eq(cq_count(), 1);
	cq_first_is(rx);
	cr_assert_eq(cq_first()->e.data, 0x5eed);
	cr_assert_eq(cq_first()->e.flags,
		     FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	cr_assert(bounce->state == IBF_RDM_BOUNCE_POSTED ||
		  bounce->state == IBF_RDM_BOUNCE_SPARE, "its bounce is free");
}

/* ---- memory windows (issue 20 item 5) ---- */

/*
 * A rendezvous send opens its buffer through a memory window (type 1)
 * bound on the endpoint's binder, a QP of its own (ibf_rdm_bind.c), over
 * a registration from the domain's cache made with IBV_ACCESS_MW_BIND
 * alone.  The cache here registers through the test (win_reg), so it runs
 * without a device; it still watches memory with userfaultfd, and without
 * that there are no windows to test.  The binder's binds complete at once
 * into its own CQ, as on rxe, with dev.bind_status.
 */
static struct ibv_pd pd = { .context = &ctx };
static struct ibv_mr win_mr = { .context = &ctx, .pd = &pd, .lkey = 0x66 };
static struct ibv_context bctx;
static struct ibv_cq bcq = { .context = &bctx };
static struct ibv_qp bqp = { .context = &ctx, .qp_num = 0x77 };
static int cache_regs;
static uint8_t *win_buf;
#define WIN_LEN 4096

static struct {
	int binds, unbinds, pending, silent, destroyed;
	enum ibv_wc_status status;
	struct ibv_mw_bind last;	/* the last bind, not an unbind */
	uint32_t done_at_unbind;	/* completions the CQ had then */
} bnd;

static int mock_bind_mw(struct ibv_qp *q, struct ibv_mw *mw,
			struct ibv_mw_bind *b)
{
	cr_assert_eq(q, &bqp, "windows are bound on the binder alone");
	cr_assert_eq(b->send_flags & IBV_SEND_SIGNALED, IBV_SEND_SIGNALED);
	cr_assert_eq(bnd.pending, 0, "one at a time");
	if (b->bind_info.length) {
		bnd.binds++;
		bnd.last = *b;
		mw->rkey = ibv_inc_rkey(mw->rkey);	/* the provider's part */
	} else {
		bnd.unbinds++;
		bnd.done_at_unbind = cq_count();
	}
	bnd.pending = !bnd.silent;
	return 0;
}

static int mock_bind_poll(struct ibv_cq *c, int num, struct ibv_wc *wc)
{
	cr_assert_eq(c, &bcq);
	(void)num;
	if (!bnd.pending)
		return 0;
	bnd.pending = 0;
	*wc = (struct ibv_wc){ .status = bnd.status, .opcode = IBV_WC_BIND_MW };
	return 1;
}

int __real_ibv_destroy_qp(struct ibv_qp *q);
int __wrap_ibv_destroy_qp(struct ibv_qp *q);
int __wrap_ibv_destroy_qp(struct ibv_qp *q)
{
	if (q != &bqp)
		return __real_ibv_destroy_qp(q);
	bnd.destroyed++;
	return 0;
}

int __real_ibv_destroy_cq(struct ibv_cq *c);
int __wrap_ibv_destroy_cq(struct ibv_cq *c);
int __wrap_ibv_destroy_cq(struct ibv_cq *c)
{
	return c == &bcq ? 0 : __real_ibv_destroy_cq(c);
}

static void *win_reg(void *c, void *addr, size_t len, int access,
		     uint32_t *lkey)
{
	(void)c;
	cr_assert_eq(addr, win_buf);
	cr_assert_eq(len, WIN_LEN);
	cr_assert_eq(access, IBV_ACCESS_MW_BIND, "no remote right is cached");
	cache_regs++;
	*lkey = win_mr.lkey;
	return &win_mr;
}

static int cache_deregs;

static void win_dereg(void *c, void *handle)
{
	(void)c;
	cr_assert_eq(handle, &win_mr);
	cache_deregs++;
}

static const struct ibf_mr_cache_ops win_ops = { win_reg, win_dereg };

static void windows_on(void)
{
	int ret = ibf_mr_cache_open(&dom->mr_cache, &win_ops, NULL, 8);

	if (ret == -FI_ENOSYS)
		cr_skip_test("no userfaultfd here: no cache, so no windows");
	cr_assert_eq(ret, 0);
	memset(&bnd, 0, sizeof(bnd));
	ctx.ops.bind_mw = mock_bind_mw;
	bctx.ops.poll_cq = mock_bind_poll;
	dom->mr_cache_tried = 1;
	dom->pd = &pd;
	ep->mw_ok = 1;
	ep->binder = (struct ibf_rdm_binder){ .cq = &bcq, .qp = &bqp };
	win_buf = mmap(NULL, WIN_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(win_buf, MAP_FAILED);
}

static void windows_off(void)
{
	ibf_rdm_unregister(tx);
	ibf_mr_cache_close(dom->mr_cache);
	munmap(win_buf, WIN_LEN);
}

/* Send op tx, free, sends the page win_buf to the connection's peer:
 * built and posted.  Returns the key its RTS gives the peer. */
static uint32_t window_send(void)
{
	struct iovec iov = { win_buf, WIN_LEN };
	struct ibf_rdm_rts *rts = (void *)(tx->mem + IBF_RDM_HDR);

	tx->state = IBF_RDM_NEW;
	tx->conn = conn;
	tx->op.context = &ctx_app;
	tx->op.user_comp = 1;
	tx->read_err = 0;
	ibf_rdm_hdr_set((void *)tx->mem, IBF_RDM_RTS, 0, 0);
	cr_assert_eq(ibf_rdm_rts_build(&ep->as_proto, tx, &iov, 1, WIN_LEN), 0);
	cr_assert_eq(ibf_rdm_post_built(conn, tx), 0);
	return rts->seg[0].rkey;
}

/* The RTS completes. */
static void window_send_completes(void)
{
	complete_next(&tx->op, IBV_WC_SUCCESS, IBV_WC_SEND, QP_NOW);
	progress();
}

/*
 * The window is bound on the binder, for reading alone, over the cached
 * registration, before the RTS goes (alone, on the connection's QP) with
 * the key the bind gave.  The FIN ends the send: the window is unbound
 * before the send completes, and stays with the op, so the next send
 * allocates and registers nothing, and binds it under the next key.
 */
Test(rdm_progress, a_window_is_bound_before_the_rts_and_unbound_at_the_fin)
{
	uint32_t key, key2;

	windows_on();
	key = window_send();
	cr_assert_eq(bnd.binds, 1);
	cr_assert_eq(bnd.last.bind_info.mr, &win_mr);
	cr_assert_eq(bnd.last.bind_info.addr, (uintptr_t)win_buf);
	cr_assert_eq(bnd.last.bind_info.length, WIN_LEN);
	cr_assert_eq(bnd.last.bind_info.mw_access_flags, IBV_ACCESS_REMOTE_READ);
	cr_assert_eq(key, the_mw.rkey, "the RTS names the bind's key");
	cr_assert_neq(key, 0x12300, "a new key");
	cr_assert_eq(key & ~0xffu, 0x12300, "of the same window");
	cr_assert_eq(dev.sends, 1, "the RTS alone on the connection");
	cr_assert_eq(dev.chain, 1);
	cr_assert_eq(dev.wr.opcode, IBV_WR_SEND);
	cr_assert_eq(((struct ibf_rdm_hdr *)tx->mem)->flags & 4, 0,
		     "no retired window flag");

	window_send_completes();
	cr_assert_eq(cq_count(), 0, "the FIN is awaited");
	cr_assert_eq(bnd.unbinds, 0, "the peer may read until its FIN");
	fin_arrives(0, 0, FIN_LEN);
	cr_assert_eq(bnd.unbinds, 1);
	cr_assert_eq(bnd.done_at_unbind, 0, "unbound before the completion");
	cr_assert_eq(cq_count(), 1);
	cr_assert_eq(tx->op.err, 0);
	cr_assert_eq(dev.mw_deallocs, 0);
	cr_assert_eq(tx->mw, &the_mw, "kept for the next send");
	cr_assert_eq(tx->mw_use, 0);
	cr_assert_eq(ep->mw_freed, 0);

	key2 = window_send();
	cr_assert_eq(bnd.binds, 2);
	cr_assert_eq(dev.mw_allocs, 1, "no new window");
	cr_assert_eq(cache_regs, 1, "no new registration");
	cr_assert_eq(key2, ibv_inc_rkey(key));
	cr_assert_eq(ep->stats.rndv, 2);
	cr_assert_eq(ep->stats.rndv_windows, 2);
	windows_off();
}

/*
 * A bind that fails, or never completes: the window is freed (its state
 * unknown), the registration goes back to the cache, and the endpoint
 * stops using windows (the caller registers the send instead).
 */
static void a_failed_bind(int silent)
{
	uint32_t rkey = 0;

	windows_on();
	bnd.status = IBV_WC_MW_BIND_ERR;
	bnd.silent = silent;
	cr_assert_eq(ibf_rdm_mw_open(&ep->as_ops, tx, win_buf, WIN_LEN, &rkey),
		     -FI_ENOSYS);
	cr_assert_eq(bnd.binds, 1);
	cr_assert_eq(dev.mw_deallocs, 1);
	cr_assert_null(tx->mw);
	cr_assert_eq(tx->mw_use, 0);
	cr_assert_eq(tx->nmrc, 0, "the registration went back");
	cr_assert_eq(ep->mw_ok, 0, "no windows from now on");
	cr_assert_eq(ep->binder.dead, 1);
	cr_assert_eq(ibf_rdm_mw_open(&ep->as_ops, tx, win_buf, WIN_LEN, &rkey),
		     -FI_ENOSYS);
	cr_assert_eq(bnd.binds, 1, "not tried again");
	windows_off();
}

Test(rdm_progress, a_failed_bind_turns_windows_off)
{
	a_failed_bind(0);
}

Test(rdm_progress, a_bind_that_never_completes_turns_windows_off)
{
	a_failed_bind(1);
}

/* An unbind that fails: the window is freed, which closes it as well,
 * before the send completes; the next send allocates another. */
Test(rdm_progress, a_window_that_cannot_be_unbound_is_freed)
{
	windows_on();
	window_send();
	window_send_completes();
	bnd.status = IBV_WC_MW_BIND_ERR;
	fin_arrives(0, 0, FIN_LEN);
	cr_assert_eq(bnd.unbinds, 1);
	cr_assert_eq(cq_count(), 1);
	cr_assert_eq(tx->op.err, 0, "the peer read it: the send is done");
	cr_assert_eq(dev.mw_deallocs, 1);
	cr_assert_null(tx->mw);
	cr_assert_eq(ep->mw_freed, 1);
	windows_off();
}

/* The RTS fails (its connection ended): the send fails with no FIN to
 * wait for, and its window is unbound. */
Test(rdm_progress, a_failed_rts_unbinds_its_window)
{
	windows_on();
	window_send();
	complete_next(&tx->op, IBV_WC_RETRY_EXC_ERR, IBV_WC_SEND, QP_NOW);
	progress();
	cr_assert_eq(cq_count(), 1);
	cr_assert_neq(tx->op.err, 0);
	cr_assert_eq(bnd.unbinds, 1);
	cr_assert_eq(tx->mw_use, 0);
	windows_off();
}

/*
 * The reader's side: an RTS is answered with a plain FIN, also when it
 * carries the retired window flag (4) and the FIN first found the queue
 * full and went later: a peer cannot make this side invalidate a key.
 */
Test(rdm_progress, the_fin_is_a_plain_send_whatever_the_rts_flags)
{
	reading();
	((struct ibf_rdm_hdr *)bounce->mem)->flags = 4;
	dev.refuse = 1;
	complete_next(&rx->op, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, QP_NOW);
	progress();
	cr_assert(bounce->stalled);
	slot_comes_back();
	cr_assert_eq(dev.sends, 1);
	cr_assert_eq(dev.send_wr_id, (uintptr_t)&bounce->op);
	cr_assert_eq(((struct ibf_rdm_hdr *)dev.sent)->type, IBF_RDM_FIN);
	cr_assert_eq(dev.wr.opcode, IBV_WR_SEND);
}

/* The RTS in the bounce, with its two segments, arrives. */
static void two_segments_arrive(void)
{
	dev.cq[dev.ncq++] = (struct ibv_wc){
		.wr_id = (uintptr_t)&bounce->op, .status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV, .qp_num = QP_NOW,
		.byte_len = IBF_RDM_HDR + offsetof(struct ibf_rdm_rts, seg) +
			    2 * sizeof(struct ibf_rdm_seg),
	};
	progress();
}

/* Flag 4 (retired) means nothing: an RTS with it in two segments is
 * read like any other. */
Test(rdm_progress, an_rts_with_the_retired_window_flag_is_not_dropped)
{
	struct ibf_rdm_hdr *hdr = (void *)bounce->mem;
	struct ibf_rdm_rts *rts = (void *)(bounce->mem + IBF_RDM_HDR);

	memset(hdr, 0, sizeof(*hdr));
	hdr->type = IBF_RDM_RTS;
	hdr->flags = 4;
	rts->len = 32;
	rts->nseg = 2;
	rts->seg[0] = (struct ibf_rdm_seg){ .addr = 0x9000, .len = 16, .rkey = 1 };
	rts->seg[1] = (struct ibf_rdm_seg){ .addr = 0xa000, .len = 16, .rkey = 2 };
	two_segments_arrive();
	cr_assert_eq(ep->dropped, 0);
}

/*
 * At close one window still open (its FIN never came) is unbound, and
 * every window is freed, idle ones too, then the binder; the op's
 * registration is dropped after without freeing the window a second time.
 */
Test(rdm_progress, closing_frees_open_and_idle_windows_once)
{
	windows_on();
	window_send();
	window_send_completes();
	fin_arrives(0, 0, FIN_LEN);
	cr_assert_eq(tx->mw, &the_mw, "idle, kept for the next send");
	ibf_rdm_ops_windows_free(&ep->as_ops);
	cr_assert_eq(dev.mw_deallocs, 1, "the idle window freed");
	cr_assert_null(tx->mw);
	cr_assert_eq(bnd.destroyed, 1, "the binder too");
	cr_assert_null(ep->binder.qp);

	ep->binder = (struct ibf_rdm_binder){ .cq = &bcq, .qp = &bqp };
	window_send();		/* a new window, bound; no FIN comes */
	window_send_completes();
	cr_assert_eq(tx->mw_use, 1);
	ibf_rdm_ops_windows_free(&ep->as_ops);
	cr_assert_eq(bnd.unbinds, 2, "the open window unbound");
	cr_assert_eq(dev.mw_deallocs, 2, "and freed");
	cr_assert_null(tx->mw);
	cr_assert_eq(tx->mw_use, 0);
	windows_off();		/* drops the registration */
	cr_assert_eq(dev.mw_deallocs, 2, "not freed twice");
	ibf_rdm_ops_windows_free(&ep->as_ops);
	cr_assert_eq(bnd.destroyed, 2, "a second call is harmless");
}
