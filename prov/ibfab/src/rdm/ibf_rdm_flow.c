/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Flow control of requests between RDM endpoints (ibf_rdm_conn.h).
 *
 * Every QP of an endpoint receives into one SRQ of eager buffers, and a
 * request (EAGER, RTS, ATOMIC, WDATA) may keep its buffer until the
 * application takes it.  Without a limit, one peer that sends faster than
 * the application receives takes every buffer, and then no message of any
 * other peer can land, not even one a posted receive waits for.  So a
 * peer sends a request only with a credit of ours:
 *   - each life of a connection starts with the window our private data
 *     gave (ibf_rdm_window_ours);
 *   - a request spends one; its credit comes back once we are done with
 *     it, or at once while its sender holds no more than its share of our
 *     buffers (the protocol decides: ibf_rdm_proto.c);
 *   - credits owed go back in batches, as a SEND WITH IMMEDIATE of no
 *     bytes (immediate: how many) from the connection's grant op;
 *   - a request with no credit is a peer that ignores the protocol: the
 *     caller ends its connection, and it costs no one else.
 * A sender out of credits queues its requests (ibf_rdm_conn_send) until
 * grants come, and answers -FI_EAGAIN once its ops are all taken: it is
 * slowed while the others go on.  ep->lock held unless said otherwise.
 */
#include "config.h"

#include <arpa/inet.h>

#include "ibf_rdm_conn.h"

/* A window no peer may claim beyond, nor we give less than. */
#define IBF_RDM_WINDOW_MIN 4
#define IBF_RDM_WINDOW_MAX 128
#define IBF_RDM_WINDOW_LIMIT (1u << 16)

uint32_t ibf_rdm_window_ours(const struct ibf_rdm_ep_conns *ep)
{
	return IBF_MIN(IBF_MAX(ep->nbounce / 4, IBF_RDM_WINDOW_MIN),
		       IBF_RDM_WINDOW_MAX);
}

/* Credits are granted once this many are owed: half the window, so that
 * a sender that keeps its peer busy never waits for a grant. */
static uint32_t ibf_rdm_grant_batch(uint32_t window)
{
	return IBF_MAX(window / 2, 1);
}

/* ---- as sender ---- */

void ibf_rdm_window_set(struct ibf_rdm_conn *conn, uint32_t window)
{
	int w = (int)IBF_MIN(IBF_MAX(window, 1), IBF_RDM_WINDOW_LIMIT);

	conn->window_max = w;
	__atomic_store_n(&conn->window, w, __ATOMIC_RELEASE);
}

void ibf_rdm_window_untake(struct ibf_rdm_conn *conn)
{
	__atomic_add_fetch(&conn->window, 1, __ATOMIC_RELEASE);
}

void ibf_rdm_grant_arrived(struct ibf_rdm_conn *conn, uint32_t epoch, uint32_t n)
{
	int w;

	if (ibf_rdm_epoch_over(conn, epoch))
		return;		/* the new life started with its own window */
	w = __atomic_load_n(&conn->window, __ATOMIC_RELAXED);
	/* More than the peer's window: its own buffers it would overrun. */
	n = IBF_MIN(n, (uint32_t)(conn->window_max - IBF_MIN(w, conn->window_max)));
	__atomic_add_fetch(&conn->window, (int)n, __ATOMIC_RELEASE);
	if (n && conn->stalled_head)
		conn->ep->up->slots_freed(conn);	/* may wait for a credit */
	if (n)
		ibf_rdm_queue_resume(conn);
}

/* ---- as receiver ---- */

/* The receiver's counts belong to the connection's current life. */
static void ibf_rdm_flow_sync(struct ibf_rdm_conn *conn, uint32_t epoch)
{
	uint32_t window;

	if (conn->rx_life == epoch + 1)
		return;
	window = ibf_rdm_window_ours(conn->ep);
	conn->rx_life = epoch + 1;
	conn->rx_left = (int)window;
	/* Worked out once a life, not at each arrival: 9 instructions a
	 * message (fabtests/run-instr). */
	conn->grant_batch = ibf_rdm_grant_batch(window);
	conn->owed = 0;
	conn->grant_stuck = 0;	/* what the old life owed is gone */
}

int ibf_rdm_request_arrived(struct ibf_rdm_conn *conn, uint32_t epoch)
{
	if (ibf_rdm_epoch_over(conn, epoch))
		return 0;	/* of a life that ended: nothing to grant */
	ibf_rdm_flow_sync(conn, epoch);
	if (unlikely(conn->rx_left <= 0))
		return -FI_EIO;
	conn->rx_left--;
	return 0;
}

/* Grant what is owed, from the connection's grant op (not in flight). */
static void ibf_rdm_grant_post(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_op *op = conn->grant;
	uint32_t epoch = ibf_rdm_conn_epoch(conn);	/* first: ibf_rdm_post */
	struct ibv_send_wr wr;
	int ret;

	if (!op || op->state == IBF_RDM_GRANT)
		return;		/* what is owed goes when it completes */
	ibf_rdm_wr_init(&wr, IBV_WR_SEND_WITH_IMM, NULL, 0, IBV_SEND_SIGNALED);
	wr.imm_data = htonl(conn->owed);
	ibf_rdm_op_to(op, IBF_RDM_GRANT);
	ret = ibf_rdm_post(conn, op, &wr, 1, 0, epoch);
	conn->grant_stuck = ret < 0;
	if (unlikely(ret < 0)) {
		/* A full send queue: the next completion of conn retries
		 * (ibf_rdm_grant_retry).  No QP: the life is over. */
		ibf_rdm_op_to(op, IBF_RDM_FREE);
		return;
	}
	conn->rx_left += (int)conn->owed;
	conn->owed = 0;
}

void ibf_rdm_credit_owe(struct ibf_rdm_conn *conn, uint32_t epoch, uint32_t n)
{
	if (ibf_rdm_epoch_over(conn, epoch))
		return;
	ibf_rdm_flow_sync(conn, epoch);
	conn->owed += n;
	if (conn->owed >= conn->grant_batch)
		ibf_rdm_grant_post(conn);
}

void ibf_rdm_grant_retry(struct ibf_rdm_conn *conn)
{
	/* A life's first arrival set rx_life and grant_batch together. */
	if (conn->rx_life == __atomic_load_n(&conn->epoch, __ATOMIC_ACQUIRE) + 1 &&
	    conn->owed >= conn->grant_batch)
		ibf_rdm_grant_post(conn);
}

void ibf_rdm_grant_done(struct ibf_rdm_op *op)
{
	ibf_rdm_op_to(op, IBF_RDM_FREE);
	ibf_rdm_grant_retry(op->conn);
}
