/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM connections: the end of an id and its QP (ibf_rdm_conn.h).
 *
 * An id that is done with (a refused request, a lost or failed connect, a
 * connection that ended) cannot be destroyed at once: rdma_destroy_id
 * waits for its events to be acked, and its QP may still have completions
 * on their way to the endpoint's CQ that name ops of ours, and arrivals
 * that name it by number.  So it becomes a grave: its QP goes to the error
 * state and gets one more work request, a "drain", posted after
 * everything else; the device completes a QP's send requests in order, so
 * once progress has seen the drain complete, nothing of that QP is left in
 * the CQ (at most IBF_RDM_DRAINS drains are out at once: the CQ has room
 * for that many more than the ops need).  Progress marks the grave
 * drained and wakes the endpoint's
 * thread, which takes the QP's number out of the map and destroys QP and
 * id between events (all of them acked by then).  An id without a QP
 * needs no drain.  A QP the drain cannot be posted to waits for the
 * endpoint's close, as does everything if the application stops reading
 * its CQs (manual progress).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibf_rdm_conn.h"
#include "ibf_rdmacm.h"

/*
 * Post g's drain, if the budget allows (cm_lock held): drains are
 * completions no op accounts for, so the CQ has room for IBF_RDM_DRAINS
 * of them at once; the others wait for the reaping of earlier ones.
 */
static void ibf_rdm_grave_drain(struct ibf_rdm_ep_conns *ep,
				struct ibf_rdm_grave *g)
{
	struct ibv_send_wr wr = { 0 }, *bad;

	if (__atomic_load_n(&ep->drains_out, __ATOMIC_ACQUIRE) >= IBF_RDM_DRAINS)
		return;
	g->waiting = 0;
	wr.wr_id = (uintptr_t)&g->drain.op;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	__atomic_add_fetch(&ep->sq_posted, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&ep->drains_out, 1, __ATOMIC_RELAXED);
	ibf_tsan_release(&g->drain);
	if (ibv_post_send(g->id->qp, &wr, &bad)) {
		__atomic_sub_fetch(&ep->sq_posted, 1, __ATOMIC_RELAXED);
		__atomic_sub_fetch(&ep->drains_out, 1, __ATOMIC_RELAXED);
		g->stuck = 1;	/* until the endpoint closes */
	}
}

/* cm_lock held. */
void ibf_rdm_bury(struct ibf_rdm_ep_conns *ep, struct rdma_cm_id *id,
		  struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_grave *g;

	if (!id)
		return;
	id->context = NULL;	/* its further events are ignored */
	g = calloc(1, sizeof(*g));
	if (!g) {
		IBF_WARN(FI_LOG_EP_CTRL, "no memory to bury a connection's "
			 "id: it is leaked\n");
		return;
	}
	g->id = id;
	g->conn = conn;
	g->drain.ep = &ep->as_ops;
	g->drain.op.kind = IBF_OP_RDM;
	g->drain.state = IBF_RDM_DRAIN;
	if (!id->qp) {
		g->drained = 1;
	} else {
		ibf_qp_to_error(id->qp);
		g->waiting = 1;
		ibf_rdm_grave_drain(ep, g);
	}
	if (conn)
		conn->ngraves++;
	g->next = ep->graves;
	ep->graves = g;
	/* Progress may have seen the drain already (atomic: it writes it). */
	if (__atomic_load_n(&g->drained, __ATOMIC_ACQUIRE))
		ibf_rdm_grave_wake(ep);
}

void ibf_rdm_grave_wake(struct ibf_rdm_ep_conns *ep)
{
	uint64_t one = 1;

	if (ep->wake_fd >= 0 && write(ep->wake_fd, &one, sizeof(one)) < 0)
		IBF_DBG(FI_LOG_EP_CTRL, "cannot wake the connection thread\n");
}

/* Progress saw a grave's drain complete (ep->lock held). */
void ibf_rdm_grave_drained(struct ibf_rdm_op *drain)
{
	struct ibf_rdm_grave *g = container_of(drain, struct ibf_rdm_grave, drain);
	struct ibf_rdm_ep_conns *ep = ibf_rdm_conns_of(drain->ep);

	__atomic_sub_fetch(&ep->drains_out, 1, __ATOMIC_RELEASE);
	/* The last touch of g: once the thread sees it drained, it frees it. */
	__atomic_store_n(&g->drained, 1, __ATOMIC_RELEASE);
	ibf_rdm_grave_wake(ep);
}

static void ibf_rdm_grave_destroy(struct ibf_rdm_ep_conns *ep,
				  struct ibf_rdm_grave *g)
{
	if (g->id->qp) {
		ibf_rdm_qp_map_del(ep, g->id->qp->qp_num);
		rdma_destroy_qp(g->id);
	}
	rdma_destroy_id(g->id);
	if (g->conn && !--g->conn->ngraves && g->conn->state == IBF_CONN_IDLE)
		ep->reclaim_due = 1;	/* progress may reuse the record */
	free(g);
}

/*
 * The thread, between events (cm_lock held, every event acked): destroy
 * the drained graves.  Returns how many were.
 */
int ibf_rdm_graves_reap(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_grave **p = &ep->graves, *g;
	uint64_t n;
	int reaped = 0;

	if (ep->wake_fd >= 0 && read(ep->wake_fd, &n, sizeof(n)) < 0)
		n = 0;	/* nothing was said: look all the same */
	while ((g = *p)) {
		if (!__atomic_load_n(&g->drained, __ATOMIC_ACQUIRE)) {
			if (g->waiting)
				ibf_rdm_grave_drain(ep, g);
			p = &g->next;
			continue;
		}
		*p = g->next;
		ibf_rdm_grave_destroy(ep, g);
		reaped++;
	}
	if (ep->reclaim_due)
		ibf_rdm_set_pending(ep);
	return reaped;
}

/* Close: every grave, drained or not (the CQs are drained by now). */
void ibf_rdm_graves_destroy(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_grave *g;

	while ((g = ep->graves)) {
		ep->graves = g->next;
		ibf_rdm_grave_destroy(ep, g);
	}
}
