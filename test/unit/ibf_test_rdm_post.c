/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDM engine's one post path (ibf_rdm_post.c), without a device.
 *
 * ibv_post_send is an inline call through the QP's context's ops, so a
 * fake QP whose ops.post_send is the mock below stands for the device: it
 * records the work requests it was given and answers as a test says (take
 * them all, refuse the first, or take the first of a chain and refuse the
 * second).  What is checked is what the engine owes the connection around
 * the post: the send-queue slots (credits) taken and given back, the count
 * of requests in flight, the peer's window, the op's life and count of
 * completions to come, and the error code each failure means; and the
 * connection's queue in front of it (ibf_rdm_conn_send): sends that wait
 * for the peer's window, in order, until its grant comes.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ibf_rdm.h"

/* ---- the mock device ---- */

static struct {
	int calls;
	int nwr;			/* work requests in the last chain */
	struct ibv_send_wr wr[4];	/* copies, next pointers as given */
	struct ibv_sge sge[4][2];
	uint64_t first[8];		/* each call's first wr_id */
	int refuse_at;			/* -1: take all; else the index refused */
	int err;			/* what the refusal says */
} dev;

static int mock_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	int i = 0, j;

	(void)qp;
	if (dev.calls < 8)
		dev.first[dev.calls] = wr->wr_id;
	dev.calls++;
	for (; wr && i < 4; wr = wr->next, i++) {
		if (i == dev.refuse_at) {
			*bad = wr;
			dev.nwr = i;
			return dev.err;
		}
		dev.wr[i] = *wr;
		for (j = 0; j < wr->num_sge && j < 2; j++)
			dev.sge[i][j] = wr->sg_list[j];
	}
	dev.nwr = i;
	return 0;
}

/* ---- a connection on a fake QP ---- */

static struct ibv_context ctx;
static struct ibv_qp qp = { .context = &ctx };
static struct rdma_cm_id id = { .qp = &qp };
static struct ibf_domain *dom;
static struct ibf_rdm_ep *ep;
static struct ibf_rdm_conn *conn;
static struct ibf_rdm_op *op;
static uint8_t mem[256];

static void setup(void)
{
	memset(&dev, 0, sizeof(dev));
	dev.refuse_at = -1;
	ctx.ops.post_send = mock_post_send;
	dom = calloc(1, sizeof(*dom));
	ep = calloc(1, sizeof(*ep));
	conn = calloc(1, sizeof(*conn));
	op = calloc(1, sizeof(*op));
	cr_assert(dom && ep && conn && op);
	dom->key_gen = 5;
	ep->base.domain = dom;
	ep->max_inline = 64;
	ep->note_off = 128;
	conn->ep = &ep->as_conns;
	conn->id = &id;
	conn->index = 3;
	conn->epoch = 2;
	conn->credits = 4;
	conn->window = 4;
	op->op.kind = IBF_OP_RDM;
	op->ep = &ep->as_ops;
	op->conn = conn;
	op->mem = mem;
	op->mem_lkey = 0x11;
	op->state = IBF_RDM_NEW;
}

static void teardown(void)
{
	free(op);
	free(conn);
	free(ep);
	free(dom);
}

/* An eager message of len bytes, built as the protocol builds it. */
static void eager(uint32_t len)
{
	ibf_rdm_hdr_set((struct ibf_rdm_hdr *)mem, IBF_RDM_EAGER, 0,
			ibf_rdm_key_gen(&ep->as_ops));
	op->wr_kind = IBF_RDM_WR_SEND;
	op->tx_state = IBF_RDM_TX;
	op->wire_len = IBF_RDM_HDR + len;
}

/* A write of 8 bytes through the op's slot, with remote CQ data. */
static void writedata(void)
{
	op->wr_kind = IBF_RDM_WR_WRITE_DATA;
	op->rma_kind = IBF_RDM_WR_WRITE_DATA;
	op->tx_state = IBF_RDM_TX_RMA;
	op->op.len = 8;
	op->via_slot = 1;
	op->part_last = 1;
	op->part_len = 8;
	op->rma_addr = 0x1000;
	op->rma_key = 0x22;
	op->sge[0] = (struct ibv_sge){ (uintptr_t)mem + IBF_RDM_HDR, 8, 0x11 };
	op->nsge = 1;
}

TestSuite(rdm_post, .init = setup, .fini = teardown);

Test(rdm_post, a_message_takes_a_slot_and_its_window)
{
	struct ibf_rdm_hdr *hdr = (void *)mem;

	eager(8);
	cr_assert_eq(ibf_rdm_post_built(conn, op), 0);
	cr_assert_eq(dev.calls, 1);
	cr_assert_eq(dev.nwr, 1);
	cr_assert_eq(dev.wr[0].opcode, IBV_WR_SEND);
	cr_assert_eq(dev.wr[0].send_flags, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	cr_assert_eq(dev.wr[0].wr_id, (uintptr_t)&op->op);
	cr_assert_null(dev.wr[0].next);
	cr_assert_eq(dev.wr[0].num_sge, 1);
	cr_assert_eq(dev.sge[0][0].addr, (uintptr_t)mem);
	cr_assert_eq(dev.sge[0][0].length, IBF_RDM_HDR + 8);
	cr_assert_eq(dev.sge[0][0].lkey, 0x11);
	cr_assert_eq(conn->credits, 3);
	cr_assert_eq(conn->window, 3);
	cr_assert_eq(ep->sq_posted, 1);
	cr_assert_eq(op->post_conn, conn);
	cr_assert_eq(op->post_epoch, 2);
	cr_assert_eq(op->epoch, 2);
	cr_assert_eq(op->state, IBF_RDM_TX);
	/* The header is the protocol's: the post leaves it as built. */
	cr_assert_eq(hdr->type, IBF_RDM_EAGER);
	cr_assert_eq(hdr->key_gen, 5);
	cr_assert_eq(hdr->rsvd, 0);
}

Test(rdm_post, a_message_above_max_inline_is_not_inline)
{
	eager(100);
	cr_assert_eq(ibf_rdm_post_built(conn, op), 0);
	cr_assert_eq(dev.wr[0].send_flags, IBV_SEND_SIGNALED);
}

Test(rdm_post, no_slot_is_eagain_and_nothing_is_posted)
{
	eager(8);
	conn->credits = 0;
	cr_assert_eq(ibf_rdm_post_built(conn, op), -FI_EAGAIN);
	cr_assert_eq(dev.calls, 0);
	cr_assert_eq(conn->credits, 0);
	cr_assert_eq(conn->window, 4, "the window is given back");
	cr_assert_eq(ep->sq_posted, 0);
}

Test(rdm_post, no_window_is_eagain_and_takes_no_slot)
{
	eager(8);
	conn->window = 0;
	cr_assert_eq(ibf_rdm_post_built(conn, op), -FI_EAGAIN);
	cr_assert_eq(dev.calls, 0);
	cr_assert_eq(conn->credits, 4);
}

Test(rdm_post, no_qp_is_enotconn)
{
	eager(8);
	conn->id = NULL;
	cr_assert_eq(ibf_rdm_post_built(conn, op), -FI_ENOTCONN);
	cr_assert_eq(dev.calls, 0);
	cr_assert_eq(conn->credits, 4);
	cr_assert_eq(conn->window, 4);
}

Test(rdm_post, a_full_queue_is_eagain_and_gives_everything_back)
{
	eager(8);
	dev.refuse_at = 0;
	dev.err = ENOMEM;
	cr_assert_eq(ibf_rdm_post_built(conn, op), -FI_EAGAIN);
	cr_assert_eq(dev.calls, 1);
	cr_assert_eq(conn->credits, 4);
	cr_assert_eq(conn->window, 4);
	cr_assert_eq(ep->sq_posted, 0);
}

Test(rdm_post, a_refusal_says_what_the_device_said)
{
	eager(8);
	dev.refuse_at = 0;
	dev.err = EINVAL;
	cr_assert_eq(ibf_rdm_post_built(conn, op), -FI_EINVAL);
	cr_assert_eq(conn->credits, 4);
	cr_assert_eq(ep->sq_posted, 0);
}

/* A write with remote CQ data: the write carries a sequence as its
 * immediate, and the notice behind it (a send of header and note) the
 * same sequence; two slots, one window credit, two completions due. */
Test(rdm_post, writedata_is_a_write_and_its_notice_chained)
{
	struct ibf_rdm_hdr *hdr = (void *)mem;

	writedata();
	hdr->tag = 0xabcd;
	cr_assert_eq(ibf_rdm_post_built(conn, op), 0);
	cr_assert_eq(dev.nwr, 2);
	cr_assert_eq(dev.wr[0].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	cr_assert_eq(dev.wr[0].imm_data, htonl(1));
	cr_assert_eq(dev.wr[0].wr.rdma.remote_addr, 0x1000);
	cr_assert_eq(dev.wr[0].wr.rdma.rkey, 0x22);
	cr_assert(dev.wr[0].send_flags & IBV_SEND_INLINE);
	cr_assert_eq(dev.wr[1].opcode, IBV_WR_SEND);
	cr_assert_eq(dev.wr[1].num_sge, 2);
	cr_assert_eq(dev.sge[1][1].addr, (uintptr_t)mem + ep->note_off);
	cr_assert_null(dev.wr[1].next);
	cr_assert_eq(dev.wr[0].wr_id, dev.wr[1].wr_id);
	cr_assert_eq(hdr->tag, (1ULL << 32) | 0xabcd);
	cr_assert_eq(conn->wimm_sent, 1);
	cr_assert_eq(conn->credits, 2);
	cr_assert_eq(conn->window, 3);
	cr_assert_eq(ep->sq_posted, 2);
	cr_assert_eq(op->reads_left, 2);
}

Test(rdm_post, writedata_with_one_slot_waits_whole)
{
	writedata();
	conn->credits = 1;
	cr_assert_eq(ibf_rdm_post_built(conn, op), -FI_EAGAIN);
	cr_assert_eq(dev.calls, 0);
	cr_assert_eq(conn->credits, 1);
	cr_assert_eq(conn->window, 4);
	cr_assert_eq(op->reads_left, 0);
	cr_assert(op->part_ready, "the part is still to post");
	cr_assert_eq(conn->wimm_sent, 0, "no sequence spent");
}

/* The device took the write but not the notice: the op fails once the
 * write completes, and only the write's slot stays taken. */
Test(rdm_post, a_notice_refused_behind_its_write_fails_the_op)
{
	writedata();
	dev.refuse_at = 1;
	dev.err = ENOMEM;
	cr_assert_eq(ibf_rdm_post_built(conn, op), 0);
	cr_assert_eq(dev.nwr, 1);
	cr_assert_eq(op->reads_left, 1);
	cr_assert_eq(op->read_err, -FI_ENOMEM);
	cr_assert_eq(conn->credits, 3);
	cr_assert_eq(ep->sq_posted, 1);
	cr_assert_eq(conn->wimm_sent, 1, "the write's sequence is spent");
}

/* A rendezvous read: the caller took its slot first (it moves the receive
 * on before posting); a connection gone gives that slot back. */
Test(rdm_post, a_read_on_a_dead_connection_gives_its_slot_back)
{
	struct ibv_sge sge = { (uintptr_t)mem, 64, 0x11 };

	cr_assert(ibf_rdm_credit_take(conn));
	conn->id = NULL;
	cr_assert_eq(ibf_rdm_post_read(conn, op, &sge, 1, 0x2000, 0x33),
		     -FI_ENOTCONN);
	cr_assert_eq(conn->credits, 4);
	cr_assert_eq(dev.calls, 0);
}

Test(rdm_post, a_read_posts_with_its_held_slot)
{
	struct ibv_sge sge = { (uintptr_t)mem, 64, 0x11 };

	cr_assert(ibf_rdm_credit_take(conn));
	cr_assert_eq(ibf_rdm_post_read(conn, op, &sge, 1, 0x2000, 0x33), 0);
	cr_assert_eq(dev.wr[0].opcode, IBV_WR_RDMA_READ);
	cr_assert_eq(dev.wr[0].wr.rdma.remote_addr, 0x2000);
	cr_assert_eq(dev.wr[0].wr.rdma.rkey, 0x33);
	cr_assert_eq(dev.wr[0].send_flags, IBV_SEND_SIGNALED);
	cr_assert_eq(conn->credits, 3, "one slot, taken once");
	cr_assert_eq(ep->sq_posted, 1);
}

/* A read refused for a full queue is -FI_EAGAIN like every other post
 * (it was -FI_ENOMEM before the post path was one). */
Test(rdm_post, a_read_refused_for_a_full_queue_is_eagain)
{
	struct ibv_sge sge = { (uintptr_t)mem, 64, 0x11 };

	cr_assert(ibf_rdm_credit_take(conn));
	dev.refuse_at = 0;
	dev.err = ENOMEM;
	cr_assert_eq(ibf_rdm_post_read(conn, op, &sge, 1, 0x2000, 0x33),
		     -FI_EAGAIN);
	cr_assert_eq(conn->credits, 4);
	cr_assert_eq(ep->sq_posted, 0);
}

/* ---- the queue in front of the post (ibf_rdm_conn_send) ---- */

static struct ibf_rdm_op *more[2];

static void queue_setup(void)
{
	int i;

	setup();
	conn->state = IBF_CONN_CONNECTED;
	ep->nstate[IBF_CONN_CONNECTED] = 1;	/* the endpoint counts it */
	conn->established = 1;
	conn->window = 1;
	conn->window_max = 4;
	eager(8);
	for (i = 0; i < 2; i++) {
		more[i] = calloc(1, sizeof(*more[i]));
		cr_assert_not_null(more[i]);
		*more[i] = *op;
	}
}

static void queue_teardown(void)
{
	free(more[0]);
	free(more[1]);
	teardown();
}

TestSuite(rdm_queue, .init = queue_setup, .fini = queue_teardown);

/* The peer's window spent: sends wait in the connection's queue, in
 * order, and the grant that comes from the peer posts them. */
Test(rdm_queue, sends_beyond_the_window_wait_for_the_grant_in_order)
{
	cr_assert_eq(ibf_rdm_conn_send(conn, op), 0);
	cr_assert_eq(dev.calls, 1);
	cr_assert_eq(ibf_rdm_conn_send(conn, more[0]), 0);
	cr_assert_eq(ibf_rdm_conn_send(conn, more[1]), 0);
	cr_assert_eq(dev.calls, 1, "nothing beyond the window is posted");
	cr_assert_eq(more[0]->state, IBF_RDM_QUEUED);
	cr_assert_eq(conn->queue_head, more[0]);
	cr_assert_eq(conn->window, 0);
	cr_assert_eq(conn->credits, 3, "a waiting send holds no slot");

	ibf_rdm_grant_arrived(conn, conn->epoch, 2);
	cr_assert_eq(dev.calls, 3);
	cr_assert_eq(dev.first[1], (uintptr_t)&more[0]->op);
	cr_assert_eq(dev.first[2], (uintptr_t)&more[1]->op);
	cr_assert_null(conn->queue_head);
	cr_assert_eq(more[1]->state, IBF_RDM_TX);
	cr_assert_eq(conn->window, 0);
	cr_assert_eq(conn->credits, 1);
}

/* A grant of an ended life of the connection grants nothing. */
Test(rdm_queue, a_grant_of_an_earlier_life_grants_nothing)
{
	cr_assert_eq(ibf_rdm_conn_send(conn, op), 0);
	cr_assert_eq(ibf_rdm_conn_send(conn, more[0]), 0);
	ibf_rdm_grant_arrived(conn, conn->epoch - 1, 2);
	cr_assert_eq(dev.calls, 1);
	cr_assert_eq(conn->queue_head, more[0]);
	cr_assert_eq(conn->window, 0);
}

/* A peer may not grant beyond the window it gave: its own buffers. */
Test(rdm_queue, a_grant_beyond_the_window_is_cut_to_it)
{
	ibf_rdm_grant_arrived(conn, conn->epoch, 100);
	cr_assert_eq(conn->window, 4);
}

/* The send queue full (no slot) with window left: the caller hears
 * -FI_EAGAIN at once, nothing waits, and the window is not spent. */
Test(rdm_queue, a_full_send_queue_is_eagain_to_the_caller)
{
	conn->window = 4;
	conn->credits = 1;
	cr_assert_eq(ibf_rdm_conn_send(conn, op), 0);
	cr_assert_eq(ibf_rdm_conn_send(conn, more[0]), -FI_EAGAIN);
	cr_assert_null(conn->queue_head);
	cr_assert_eq(conn->window, 3);
	cr_assert_eq(dev.calls, 1);
}

/* Credits owed reach a grant's worth while the send queue has no slot:
 * the grant waits, and the next send completion on the connection posts
 * it (and only a grant that found no slot waits for one). */
Test(rdm_queue, a_grant_that_found_no_slot_goes_with_the_next_completion)
{
	struct ibf_rdm_op *grant = more[1];

	grant->state = IBF_RDM_FREE;
	conn->grant = grant;
	conn->window = 4;
	conn->credits = 1;
	cr_assert_eq(ibf_rdm_conn_send(conn, op), 0);
	cr_assert_eq(conn->credits, 0);
	cr_assert_eq(dev.calls, 1);

	/* The batch is half our window: 2 at the smallest SRQ. */
	ibf_rdm_credit_owe(conn, conn->epoch, 1);
	cr_assert_eq(dev.calls, 1, "one credit owed is not a grant's worth");
	cr_assert_eq(conn->grant_stuck, 0);
	ibf_rdm_credit_owe(conn, conn->epoch, 1);
	cr_assert_eq(dev.calls, 1, "no slot: the grant cannot go");
	cr_assert_eq(conn->grant_stuck, 1);
	cr_assert_eq(conn->owed, 2);
	cr_assert_eq(grant->state, IBF_RDM_FREE);

	cr_assert_eq(ibf_rdm_send_done(op, IBV_WC_SUCCESS), 0);
	cr_assert_eq(dev.calls, 2, "the freed slot carries the grant");
	cr_assert_eq(dev.wr[0].opcode, IBV_WR_SEND_WITH_IMM);
	cr_assert_eq(ntohl(dev.wr[0].imm_data), 2);
	cr_assert_eq(dev.first[1], (uintptr_t)&grant->op);
	cr_assert_eq(grant->state, IBF_RDM_GRANT);
	cr_assert_eq(conn->owed, 0);
	cr_assert_eq(conn->grant_stuck, 0);
	cr_assert_eq(conn->credits, 0);
}

/* A grant stuck in a life that ended is not retried in the next: the new
 * life owes nothing yet, so its completions need not try. */
Test(rdm_queue, a_new_life_forgets_a_stuck_grant)
{
	conn->rx_life = conn->epoch;	/* the life before this one */
	conn->grant_stuck = 1;
	conn->owed = 3;
	ibf_rdm_credit_owe(conn, conn->epoch, 1);
	cr_assert_eq(conn->rx_life, conn->epoch + 1);
	cr_assert_eq(conn->owed, 1);
	cr_assert_eq(conn->grant_stuck, 0);
}
