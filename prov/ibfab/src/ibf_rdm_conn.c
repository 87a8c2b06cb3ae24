/*
 * RDM connections on demand (see ibf_rdm.h).
 *
 * The first send to a peer creates its connection record and starts an
 * rdma_cm connect to the peer's listening address; the send waits in the
 * record's queue.  The endpoint's thread takes every rdma_cm event: it
 * resolves, connects, accepts, and once a connection is established posts
 * what was queued, then marks it CONNECTED, after which senders post
 * directly.  Private data carries each side's name and its index of the
 * connection, which the other side puts in the headers it sends.
 *
 * Both sides connecting at once: the side whose name (sockaddr bytes) is
 * lower keeps its own connect and rejects the other's with a tie-break
 * marker; the higher side accepts the lower's request and drops its own
 * attempt.  Either way one RC connection carries both directions.
 *
 * A connection that fails or dies: its queued sends complete in error,
 * rendezvous sends waiting for their FIN too (those posted get flush
 * errors from the device); the record goes back to IDLE, so a later send
 * connects again.  Work that must reach the application (error
 * completions) is left in ep->failed and picked up by the CQ
 * (ibf_rdm_cm_deliver), since this thread never touches a CQ.
 *
 * A peer where nothing listens yet (an RDM endpoint is connectionless to
 * the application, so a peer that starts a little later is no error), or
 * whose address or route cannot be resolved, is tried again, with pauses
 * that double from 10 ms to 1 s, until FI_IBFAB_RDM_CONNECT_TIMEOUT has
 * passed since the first try; only then do the queued operations fail.
 * Other refusals and a request that timed out are final.
 *
 * rdma_destroy_id waits for the id's events to be acked, so ids are never
 * destroyed while their event is handled: dead ones go to a graveyard
 * emptied at close, and a failed attempt's id (it never carried data) is
 * marked and destroyed by the thread as soon as its event is acked.
 */
#include "config.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ibf_rdm.h"

struct ibf_rdm_conn *ibf_rdm_conn_at(struct ibf_rdm_ep *ep, uint32_t index)
{
	struct ibf_rdm_conn **chunk;

	if (unlikely(index >= __atomic_load_n(&ep->nconns, __ATOMIC_ACQUIRE)))
		return NULL;
	chunk = __atomic_load_n(&ep->conn_dir[index / IBF_CONN_CHUNK],
				__ATOMIC_ACQUIRE);
	return __atomic_load_n(&chunk[index % IBF_CONN_CHUNK], __ATOMIC_ACQUIRE);
}

static uint32_t ibf_qp_hash(uint32_t qp_num)
{
	return (qp_num * 0x9e3779b1u) >> 7;
}

struct ibf_rdm_conn *ibf_rdm_qp_conn(struct ibf_rdm_ep *ep, uint32_t qp_num)
{
	struct ibf_qp_map *m = __atomic_load_n(&ep->qp_map, __ATOMIC_ACQUIRE);
	uint32_t i, n;
	uint64_t e;

	if (unlikely(!m))
		return NULL;
	for (i = ibf_qp_hash(qp_num), n = 0; n <= m->mask; i++, n++) {
		e = __atomic_load_n(&m->slot[i & m->mask], __ATOMIC_ACQUIRE);
		if (!e)
			return NULL;
		if ((uint32_t)(e >> 32) == qp_num)
			return ibf_rdm_conn_at(ep, (uint32_t)e - 1);
	}
	return NULL;
}

/* Put e in m (room is certain); 1 if it took an empty slot. */
static int ibf_qp_map_put(struct ibf_qp_map *m, uint64_t e)
{
	uint32_t i = ibf_qp_hash((uint32_t)(e >> 32));
	uint64_t cur;

	for (;; i++) {
		cur = m->slot[i & m->mask];
		if (!cur || (uint32_t)(cur >> 32) == (uint32_t)(e >> 32)) {
			__atomic_store_n(&m->slot[i & m->mask], e, __ATOMIC_RELEASE);
			return !cur;
		}
	}
}

/*
 * cm_lock held: conn's new QP, before it can carry anything.  A QP number
 * the device reuses (a failed attempt's QP is destroyed at once) is
 * overwritten.  At most half full: a full one is replaced by one twice
 * its size.
 */
static int ibf_rdm_qp_map_set(struct ibf_rdm_ep *ep, uint32_t qp_num,
			      struct ibf_rdm_conn *conn)
{
	struct ibf_qp_map *m = ep->qp_map, *n;
	uint32_t i, cap;

	if (!m || 2 * (m->used + 1) > m->mask + 1) {
		cap = m ? 2 * (m->mask + 1) : 64;
		n = calloc(1, sizeof(*n));
		if (n)
			n->slot = calloc(cap, sizeof(*n->slot));
		if (!n || !n->slot) {
			free(n);
			IBF_WARN(FI_LOG_EP_CTRL, "no memory for a QP of a "
				 "connection: refused\n");
			return -FI_ENOMEM;
		}
		n->mask = cap - 1;
		for (i = 0; m && i <= m->mask; i++)
			if (m->slot[i])
				n->used += ibf_qp_map_put(n, m->slot[i]);
		n->old = m;
		__atomic_store_n(&ep->qp_map, n, __ATOMIC_RELEASE);
		m = n;
	}
	m->used += ibf_qp_map_put(m, (uint64_t)qp_num << 32 | (conn->index + 1));
	return 0;
}

static void ibf_rdm_qp_map_free(struct ibf_rdm_ep *ep)
{
	struct ibf_qp_map *m = ep->qp_map, *old;

	for (; m; m = old) {
		old = m->old;
		free(m->slot);
		free(m);
	}
	ep->qp_map = NULL;
}

/* The sender's fi_addr, looked up in the AV the first time it is needed. */
fi_addr_t ibf_rdm_conn_addr(struct ibf_rdm_conn *conn)
{
	if (unlikely(conn->fi_addr == FI_ADDR_NOTAVAIL))
		conn->fi_addr = ibf_av_find(conn->ep->av, &conn->name);
	return conn->fi_addr;
}

/* cm_lock held. */
static struct ibf_rdm_conn *ibf_rdm_conn_new(struct ibf_rdm_ep *ep,
					     const struct ibf_name *name,
					     int self)
{
	uint32_t index = ep->nconns, dir = index / IBF_CONN_CHUNK;
	struct ibf_rdm_conn *conn, **chunk;

	if (dir >= IBF_CONN_DIRS) {
		IBF_WARN(FI_LOG_EP_CTRL, "%u connections: the most one RDM "
			 "endpoint keeps\n", index);
		return NULL;
	}
	chunk = ep->conn_dir[dir];
	if (!chunk) {
		chunk = calloc(IBF_CONN_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		__atomic_store_n(&ep->conn_dir[dir], chunk, __ATOMIC_RELEASE);
	}
	conn = calloc(1, sizeof(*conn));
	if (!conn)
		return NULL;
	conn->ep = ep;
	conn->index = index;
	conn->name = *name;
	conn->fi_addr = FI_ADDR_NOTAVAIL;
	conn->self = self;
	/* Key 1: our own name (both halves of a connection to ourselves);
	 * others by record, one record per name. */
	conn->peer_key = !memcmp(name, &ep->name, sizeof(*name)) ? 1 : index + 2;
	conn->credits = (int)ep->sq_depth;
	__atomic_store_n(&chunk[index % IBF_CONN_CHUNK], conn, __ATOMIC_RELEASE);
	__atomic_store_n(&ep->nconns, index + 1, __ATOMIC_RELEASE);
	return conn;
}

/* cm_lock held.  The sending connection to name, if there is one. */
static struct ibf_rdm_conn *ibf_rdm_conn_find(struct ibf_rdm_ep *ep,
					      const struct ibf_name *name)
{
	struct ibf_rdm_conn *conn;
	uint32_t i;

	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (!conn->self && !memcmp(&conn->name, name, sizeof(*name)))
			return conn;
	}
	return NULL;
}

/* cm_lock held: the id is done with; its QP stays until close. */
static void ibf_rdm_bury(struct ibf_rdm_ep *ep, struct rdma_cm_id *id)
{
	struct rdma_cm_id **tmp;

	if (!id)
		return;
	id->context = NULL;	/* its further events are ignored */
	if (id->qp) {
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		ibv_modify_qp(id->qp, &attr, IBV_QP_STATE);
	}
	if (ep->ngrave == ep->grave_cap) {
		tmp = realloc(ep->graveyard, (ep->grave_cap * 2 + 16) * sizeof(*tmp));
		if (!tmp) {
			IBF_WARN(FI_LOG_EP_CTRL, "no memory to keep a dead "
				 "connection: it is leaked\n");
			return;
		}
		ep->graveyard = tmp;
		ep->grave_cap = ep->grave_cap * 2 + 16;
	}
	ep->graveyard[ep->ngrave++] = id;
}

/* Tell the CQs there is work in ep->failed. */
static void ibf_rdm_set_pending(struct ibf_rdm_ep *ep)
{
	__atomic_store_n(&ep->cm_pending, 1, __ATOMIC_SEQ_CST);
	if (ep->tx_cq && ep->tx_cq->channel)
		ibf_waitfd_raise(&ep->tx_cq->wait);
	if (ep->rx_cq && ep->rx_cq != ep->tx_cq && ep->rx_cq->channel)
		ibf_waitfd_raise(&ep->rx_cq->wait);
}

static void ibf_rdm_fail_op(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
			    int err)
{
	op->op.err = err;
	ibf_rdm_list_append(&ep->failed, op);
}

/*
 * cm_lock held.  The connection is over: rendezvous sends waiting on it
 * fail (by epoch), and so does its queue unless keep_queue (the peer is
 * connecting anew, and the queue will go there).
 */
static void ibf_rdm_conn_end(struct ibf_rdm_conn *conn, int err, int keep_queue)
{
	struct ibf_rdm_ep *ep = conn->ep;
	struct ibf_rdm_op *op;
	char buf[64];

	if (err == -FI_ECONNABORTED && !conn->queue_head)
		IBF_INFO(FI_LOG_EP_CTRL, "%s disconnected\n",
			 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)));
	else
		IBF_WARN(FI_LOG_EP_CTRL, "connection to %s failed: %s\n",
			 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)),
			 fi_strerror(-err));
	while (!keep_queue && (op = conn->queue_head)) {
		conn->queue_head = op->next;
		ibf_rdm_fail_op(ep, op, err);
	}
	if (!conn->queue_head)
		conn->queue_tail = NULL;
	ibf_rdm_bury(ep, conn->id);
	ibf_rdm_bury(ep, conn->loser);
	conn->id = conn->loser = NULL;
	__atomic_store_n(&conn->qp_num, 0, __ATOMIC_RELEASE);
	conn->established = 0;
	__atomic_store_n(&conn->credits, (int)ep->sq_depth, __ATOMIC_RELAXED);
	__atomic_add_fetch(&conn->epoch, 1, __ATOMIC_RELEASE);
	ep->dead_seen = 1;
	__atomic_store_n(&conn->state, IBF_CONN_IDLE, __ATOMIC_RELEASE);
	ibf_rdm_set_pending(ep);
}

static void ibf_rdm_conn_fail(struct ibf_rdm_conn *conn, int err)
{
	ibf_rdm_conn_end(conn, err, 0);
}

/*
 * A work request posted on conn in its life "epoch" failed other than by a
 * flush: retries exhausted (the peer's node or link is gone), a remote or
 * local access or protection error.  The QP is in the error state for good,
 * and no rdma_cm event may ever say so (a node that dies sends no
 * disconnect): end that life as a disconnect would, so that what waits on
 * it fails and the next send connects anew.  ep->lock held.
 */
void ibf_rdm_conn_broken(struct ibf_rdm_conn *conn, uint32_t epoch, int err)
{
	struct ibf_rdm_ep *ep = conn->ep;
	struct rdma_cm_id *id;

	pthread_mutex_lock(&ep->cm_lock);
	id = conn->id;
	if (epoch == conn->epoch && id && conn->established) {
		rdma_disconnect(id);	/* the peer learns, if it can hear */
		ibf_rdm_conn_fail(conn, err);
	}
	pthread_mutex_unlock(&ep->cm_lock);
}

int ibf_rdm_post_send(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		      struct ibv_sge *sge, int nsge, int inl)
{
	/*
	 * Loaded once: the connection thread clears conn->id when the
	 * connection ends, possibly after the caller saw it CONNECTED.  A
	 * dead id's QP lives on (in the error state) until the endpoint
	 * closes, so a post that loaded it just before completes flushed.
	 */
	struct rdma_cm_id *id = __atomic_load_n(&conn->id, __ATOMIC_ACQUIRE);
	struct ibv_send_wr wr = { 0 }, *bad;
	int ret;

	if (unlikely(!id || !id->qp))
		return -FI_ENOTCONN;
	if (unlikely(!ibf_rdm_credit_take(conn)))
		return -FI_EAGAIN;
	wr.wr_id = (uintptr_t)&op->op;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0);
	((struct ibf_rdm_hdr *)op->mem)->conn = conn->remote;
	op->post_conn = conn;
	op->post_epoch = conn->epoch;
	__atomic_add_fetch(&conn->ep->sq_posted, 1, __ATOMIC_RELAXED);
	ret = ibv_post_send(id->qp, &wr, &bad);
	if (unlikely(ret)) {
		__atomic_sub_fetch(&conn->ep->sq_posted, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&conn->credits, 1, __ATOMIC_RELEASE);
		return ret == ENOMEM ? -FI_EAGAIN : ibf_errno_to_fi(ret);
	}
	return 0;
}

/* A queued op, built whole in op->mem: post it. */
int ibf_rdm_post_built(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)op->mem,
		.length = op->wire_len,
		.lkey = conn->ep->mem_mr->lkey,
	};

	op->epoch = conn->epoch;
	if (((struct ibf_rdm_hdr *)op->mem)->type == IBF_RDM_RTS) {
		op->state = IBF_RDM_TX_RTS;
		op->reads_left = 2;	/* its own completion, and the FIN */
		op->fin_seen = 0;
	} else {
		op->state = IBF_RDM_TX;
	}
	return ibf_rdm_post_send(conn, op, &sge, 1,
				 op->wire_len <= conn->ep->max_inline);
}

/*
 * cm_lock held, connection established: post the queue, then go direct.
 * A queue longer than the QP's send queue is posted as slots come back
 * (ibf_rdm_credit_return calls again); until it is empty, new sends queue
 * behind it, so order holds.
 */
static void ibf_rdm_conn_flush(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_op *op;
	int ret;

	while ((op = conn->queue_head)) {
		ret = ibf_rdm_post_built(conn, op);
		if (ret == -FI_EAGAIN)
			return;		/* the rest when slots come back */
		conn->queue_head = op->next;
		if (ret) {
			IBF_WARN(FI_LOG_EP_DATA, "posting a queued send: %s\n",
				 fi_strerror(-ret));
			ibf_rdm_fail_op(conn->ep, op, ret);
			ibf_rdm_set_pending(conn->ep);
		}
	}
	conn->queue_tail = NULL;
	__atomic_store_n(&conn->state, IBF_CONN_CONNECTED, __ATOMIC_RELEASE);
}

void ibf_rdm_credit_return(struct ibf_rdm_op *op)
{
	struct ibf_rdm_conn *conn = op->post_conn;

	/* A completion of a QP before the connection's last death gives
	 * nothing back: the new QP started with all its slots. */
	if (!conn || op->post_epoch != __atomic_load_n(&conn->epoch, __ATOMIC_ACQUIRE))
		return;
	__atomic_add_fetch(&conn->credits, 1, __ATOMIC_RELEASE);
	if (unlikely(conn->stalled_head))
		ibf_rdm_unstall(conn);
	if (unlikely(__atomic_load_n(&conn->queue_head, __ATOMIC_RELAXED) &&
		     conn->id && conn->established)) {
		pthread_mutex_lock(&conn->ep->cm_lock);
		if (conn->established && conn->state != IBF_CONN_CONNECTED)
			ibf_rdm_conn_flush(conn);
		pthread_mutex_unlock(&conn->ep->cm_lock);
	}
}

void ibf_rdm_stall(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	op->stalled = 1;
	op->next = NULL;
	if (conn->stalled_tail)
		conn->stalled_tail->next = op;
	else
		conn->stalled_head = op;
	conn->stalled_tail = op;
}

/*
 * conn's QP on id, made its current one: arrivals on it are conn's
 * (ep->qp_map) from before the peer can send on it.  cm_lock held.
 */
static int ibf_rdm_qp_create(struct ibf_rdm_conn *conn, struct rdma_cm_id *id)
{
	struct ibf_rdm_ep *ep = conn->ep;
	struct ibv_qp_init_attr attr = { 0 };
	int ret;

	attr.qp_type = IBV_QPT_RC;
	attr.send_cq = ep->hcq;
	attr.recv_cq = ep->hcq;
	attr.srq = ep->srq;
	attr.cap.max_send_wr = ep->sq_depth;
	attr.cap.max_send_sge = IBF_RDM_IOV;
	attr.cap.max_inline_data = ep->max_inline;
	if (rdma_create_qp(id, ep->domain->pd, &attr)) {
		/* Fewer inline bytes may do; learn the device's limit once. */
		attr.cap.max_inline_data = 0;
		if (!ep->max_inline || rdma_create_qp(id, ep->domain->pd, &attr)) {
			IBF_WARN(FI_LOG_EP_CTRL, "rdma_create_qp(send %u): %s\n",
				 ep->sq_depth, strerror(errno));
			return ibf_errno_to_fi(errno);
		}
	}
	ep->max_inline = attr.cap.max_inline_data;
	ret = ibf_rdm_qp_map_set(ep, id->qp->qp_num, conn);
	if (!ret)
		__atomic_store_n(&conn->qp_num, id->qp->qp_num, __ATOMIC_RELEASE);
	return ret;
}

static void ibf_rdm_cm_data(struct ibf_rdm_ep *ep, struct ibf_rdm_conn *conn,
			    struct ibf_rdm_cm_data *d)
{
	memset(d, 0, sizeof(*d));
	d->magic = IBF_RDM_CM_MAGIC;
	d->conn = conn->index;
	d->name = ep->name;
}

/* id->context of a failed attempt, destroyed once its event is acked. */
static char ibf_rdm_attempt_over;

/* IB CM's reject reason when nothing listens on the service (port). */
#define IBF_REJ_NO_LISTENER 8

#define IBF_RETRY_FIRST_MS 10
#define IBF_RETRY_MAX_MS 1000

static int ibf_rdm_conn_attempt(struct ibf_rdm_conn *conn);

/* Start connecting conn (cm_lock held): the first of its attempts. */
static int ibf_rdm_conn_start(struct ibf_rdm_conn *conn)
{
	conn->retry_until_ns = ibf_now_ns() +
			       (uint64_t)ibf_params.rdm_connect_ms * 1000000u;
	conn->retry_pause_ms = IBF_RETRY_FIRST_MS;
	return ibf_rdm_conn_attempt(conn);
}

/*
 * An attempt failed with err (cm_lock held): try again later while time is
 * left, else fail what waits.  The attempt's id goes once its event is
 * acked; its QP never carried anything.
 */
static void ibf_rdm_conn_retry(struct ibf_rdm_conn *conn, int err)
{
	struct ibf_rdm_ep *ep = conn->ep;
	uint64_t now = ibf_now_ns();
	char buf[64];

	if (now >= conn->retry_until_ns) {
		ibf_rdm_conn_fail(conn, err);
		return;
	}
	IBF_INFO(FI_LOG_EP_CTRL, "%s: %s; trying again in %u ms\n",
		 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)),
		 fi_strerror(-err), conn->retry_pause_ms);
	conn->id->context = &ibf_rdm_attempt_over;
	conn->id = NULL;
	conn->retry_at_ns = now + (uint64_t)conn->retry_pause_ms * 1000000u;
	conn->retry_pause_ms = IBF_MIN(conn->retry_pause_ms * 2, IBF_RETRY_MAX_MS);
	__atomic_store_n(&conn->state, IBF_CONN_RETRY, __ATOMIC_RELEASE);
	ep->nretry++;
}

/*
 * The thread, between events (cm_lock held): start the attempts that are
 * due; returns how long poll may sleep before the next one, or -1.
 */
static int ibf_rdm_retry_due(struct ibf_rdm_ep *ep)
{
	uint64_t now, next = UINT64_MAX;
	struct ibf_rdm_conn *conn;
	uint32_t i;
	int ret;

	if (!ep->nretry)
		return -1;
	now = ibf_now_ns();
	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (conn->state != IBF_CONN_RETRY)
			continue;
		if (conn->retry_at_ns > now) {
			next = IBF_MIN(next, conn->retry_at_ns);
			continue;
		}
		ep->nretry--;
		ret = ibf_rdm_conn_attempt(conn);
		if (ret)
			ibf_rdm_conn_fail(conn, ret);
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now) / 1000000u) + 1;
}

/* Destroy a failed attempt's id, its event acked (cm_lock not held). */
static void ibf_rdm_attempt_destroy(struct rdma_cm_id *id)
{
	if (id->context != &ibf_rdm_attempt_over)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* One connect attempt: resolve, then (in the thread) route and connect. */
static int ibf_rdm_conn_attempt(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep *ep = conn->ep;
	struct sockaddr_storage src;
	struct rdma_cm_id *id;
	int ret;

	if (rdma_create_id(ep->channel, &id, conn, RDMA_PS_TCP))
		return ibf_errno_to_fi(errno);
	memcpy(&src, &ep->name, sizeof(ep->name));
	ibf_addr_set_port((struct sockaddr *)&src, 0);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src,
			      (struct sockaddr *)&conn->name,
			      ibf_params.cm_timeout_ms)) {
		ret = ibf_errno_to_fi(errno);
		rdma_destroy_id(id);
		return ret;
	}
	conn->id = id;
	__atomic_store_n(&conn->state, IBF_CONN_CONNECTING, __ATOMIC_RELEASE);
	return 0;
}

int ibf_rdm_conn_get(struct ibf_rdm_ep *ep, fi_addr_t addr,
		     struct ibf_rdm_conn **out)
{
	struct ibf_rdm_conn *conn, **peers;
	struct ibf_name name;
	size_t n;

	if (ibf_av_name(ep->av, addr, &name)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "fi_addr %llu is not "
			       "in the endpoint's AV: insert the peer first\n",
			       (unsigned long long)addr);
		return -FI_EINVAL;
	}
	pthread_mutex_lock(&ep->cm_lock);
	conn = ibf_rdm_conn_find(ep, &name);
	if (!conn)
		conn = ibf_rdm_conn_new(ep, &name, 0);
	pthread_mutex_unlock(&ep->cm_lock);
	if (!conn)
		return -FI_ENOMEM;
	if (addr >= ep->npeers) {
		n = IBF_MAX(addr + 1, ep->npeers * 2);
		peers = realloc(ep->peers, n * sizeof(*peers));
		if (!peers)
			return -FI_ENOMEM;
		memset(peers + ep->npeers, 0, (n - ep->npeers) * sizeof(*peers));
		ep->peers = peers;
		ep->npeers = n;
	}
	/* FI_SOURCE reports the first of a peer's fi_addrs. */
	if (conn->fi_addr == FI_ADDR_NOTAVAIL)
		conn->fi_addr = addr;
	ep->peers[addr] = conn;
	*out = conn;
	return 0;
}

ssize_t ibf_rdm_conn_submit(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	struct ibf_rdm_ep *ep = conn->ep;
	int ret = 0;

	pthread_mutex_lock(&ep->cm_lock);
	switch (__atomic_load_n(&conn->state, __ATOMIC_ACQUIRE)) {
	case IBF_CONN_CONNECTED:
		/* Under cm_lock: the connection cannot end meanwhile. */
		ret = ibf_rdm_post_built(conn, op);
		pthread_mutex_unlock(&ep->cm_lock);
		return ret;
	case IBF_CONN_IDLE:
		ret = ibf_rdm_conn_start(conn);
		break;
	default:
		break;
	}
	if (!ret) {
		op->state = IBF_RDM_QUEUED;
		op->next = NULL;
		if (conn->queue_tail)
			conn->queue_tail->next = op;
		else
			conn->queue_head = op;
		conn->queue_tail = op;
	}
	pthread_mutex_unlock(&ep->cm_lock);
	if (ret) {
		char buf[64];

		IBF_WARN(FI_LOG_EP_CTRL, "cannot connect to %s: %s\n",
			 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)),
			 fi_strerror(-ret));
	}
	return ret;
}

/* ---- events ---- */

static void ibf_rdm_reject(struct rdma_cm_id *id, uint32_t magic)
{
	struct ibf_rdm_cm_data d = { .magic = magic };

	rdma_reject(id, magic ? &d : NULL, magic ? sizeof(d) : 0);
}

/* Accept id as conn's connection (cm_lock held). */
static void ibf_rdm_accept(struct ibf_rdm_ep *ep, struct ibf_rdm_conn *conn,
			   struct rdma_cm_id *id, uint32_t remote)
{
	struct ibf_rdm_cm_data d;
	struct rdma_conn_param cp;
	int ret;

	id->context = conn;
	ret = ibf_rdm_qp_create(conn, id);
	if (ret) {
		ibf_rdm_reject(id, 0);
		ibf_rdm_bury(ep, id);
		return;
	}
	ibf_rdm_cm_data(ep, conn, &d);
	ibf_cm_param_init(&ep->domain->dev_attr, &cp, &d, sizeof(d));
	/*
	 * Before accepting: the peer may send as soon as it has our answer,
	 * and a rendezvous it sends is read (and answered) through conn->id.
	 */
	conn->remote = remote;
	__atomic_store_n(&conn->id, id, __ATOMIC_RELEASE);
	if (rdma_accept(id, &cp)) {
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_accept: %s\n", strerror(errno));
		__atomic_store_n(&conn->id, NULL, __ATOMIC_RELEASE);
		ibf_rdm_bury(ep, id);
		return;
	}
	__atomic_store_n(&conn->state, IBF_CONN_ACCEPTING, __ATOMIC_RELEASE);
}

/*
 * Is conn's peer still there?  A PING on its QP (cm_lock held): if the
 * peer is gone, the send fails once the transport's retries run out, and
 * that failure ends the connection (ibf_rdm_conn_broken) when a CQ of the
 * endpoint is next read.  Sent inline: it needs no registered memory.
 */
static void ibf_rdm_probe(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep *ep = conn->ep;
	struct ibv_sge sge = {
		.addr = (uintptr_t)&conn->probe_hdr,
		.length = sizeof(conn->probe_hdr),
	};
	struct ibf_rdm_op *op = conn->probe;

	if (conn->state != IBF_CONN_CONNECTED || ep->max_inline < sge.length)
		return;
	if (!op) {
		op = calloc(1, sizeof(*op));
		if (!op)
			return;
		op->ep = ep;
		op->conn = conn;
		op->op.kind = IBF_OP_RDM;
		op->mem = (uint8_t *)&conn->probe_hdr;
		conn->probe = op;
	} else if (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE) == IBF_RDM_PROBE) {
		return;		/* one is out */
	}
	memset(&conn->probe_hdr, 0, sizeof(conn->probe_hdr));
	conn->probe_hdr.type = IBF_RDM_PING;
	__atomic_store_n(&op->state, IBF_RDM_PROBE, __ATOMIC_RELEASE);
	if (ibf_rdm_post_send(conn, op, &sge, 1, 1))
		__atomic_store_n(&op->state, IBF_RDM_FREE, __ATOMIC_RELEASE);
}

static void ibf_rdm_on_request(struct ibf_rdm_ep *ep, struct rdma_cm_event *ev)
{
	const struct ibf_rdm_cm_data *d = ev->param.conn.private_data;
	struct rdma_cm_id *id = ev->id;
	struct ibf_rdm_conn *conn;
	int self;

	if (!d || ev->param.conn.private_data_len < sizeof(*d) ||
	    d->magic != IBF_RDM_CM_MAGIC) {
		IBF_WARN(FI_LOG_EP_CTRL, "a connection request that is not from "
			 "an ibfab RDM endpoint: rejected\n");
		ibf_rdm_reject(id, 0);
		ibf_rdm_bury(ep, id);
		return;
	}
	/* A name is an address: the request must come from its host. */
	if (!ibf_addr_same_host(rdma_get_peer_addr(id),
				(const struct sockaddr *)&d->name)) {
		char claimed[64], from[64];

		IBF_WARN(FI_LOG_EP_CTRL, "a connection request from %s claims "
			 "to be %s: rejected\n",
			 ibf_addr_str(rdma_get_peer_addr(id), from, sizeof(from)),
			 ibf_addr_str((const void *)&d->name, claimed, sizeof(claimed)));
		ibf_rdm_reject(id, 0);
		ibf_rdm_bury(ep, id);
		return;
	}
	self = !memcmp(&d->name, &ep->name, sizeof(ep->name));
	conn = self ? NULL : ibf_rdm_conn_find(ep, &d->name);
	if (!conn)
		conn = ibf_rdm_conn_new(ep, &d->name, self);
	if (!conn) {
		ibf_rdm_reject(id, 0);
		ibf_rdm_bury(ep, id);
		return;
	}
	switch (conn->state) {
	case IBF_CONN_CONNECTING:
		if (memcmp(&ep->name, &d->name, sizeof(ep->name)) < 0) {
			/* Ours wins; the peer accepts it instead. */
			ibf_rdm_reject(id, IBF_RDM_CM_TIEBREAK);
			ibf_rdm_bury(ep, id);
			return;
		}
		conn->loser = conn->id;
		conn->id = NULL;
		break;
	case IBF_CONN_ACCEPTING:
	case IBF_CONN_CONNECTED:
		/*
		 * A live connection is never replaced on a request's word:
		 * anyone on the peer's host may claim its name.  The peer may
		 * also have died and come back (its node crashed: no
		 * disconnect came); then the PING fails, the connection ends,
		 * and the requester's next try, which BUSY asks for, is taken.
		 */
		ibf_rdm_reject(id, IBF_RDM_CM_BUSY);
		ibf_rdm_bury(ep, id);
		ibf_rdm_probe(conn);
		return;
	case IBF_CONN_RETRY:
		/* The peer is up now: its connection carries our queue. */
		ep->nretry--;
		break;
	default:
		break;
	}
	ibf_rdm_accept(ep, conn, id, d->conn);
}

static void ibf_rdm_on_established(struct ibf_rdm_conn *conn,
				   struct rdma_cm_event *ev)
{
	const struct ibf_rdm_cm_data *d = ev->param.conn.private_data;

	if (conn->state == IBF_CONN_CONNECTING) {
		if (!d || ev->param.conn.private_data_len < sizeof(*d) ||
		    d->magic != IBF_RDM_CM_MAGIC) {
			ibf_rdm_conn_fail(conn, -FI_EOTHER);
			return;
		}
		conn->remote = d->conn;
	}
	ibf_qp_set_rnr_timer(conn->id->qp);
	conn->established = 1;
	ibf_rdm_conn_flush(conn);
}

/* The magic of a reject's private data, or 0. */
static uint32_t ibf_rdm_reject_magic(const struct rdma_cm_event *ev)
{
	const struct ibf_rdm_cm_data *d = ev->param.conn.private_data;

	return d && ev->param.conn.private_data_len >= sizeof(d->magic) ?
	       d->magic : 0;
}

/* An event on one of conn's ids (cm_lock held). */
static void ibf_rdm_conn_event(struct ibf_rdm_ep *ep, struct ibf_rdm_conn *conn,
			       struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct ibf_rdm_cm_data d;
	struct rdma_conn_param cp;

	if (id == conn->loser) {
		if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED &&
		    ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) {
			ibf_rdm_bury(ep, id);
			conn->loser = NULL;
		}
		return;
	}
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id, ibf_params.cm_timeout_ms))
			ibf_rdm_conn_fail(conn, ibf_errno_to_fi(errno));
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (ibf_rdm_qp_create(conn, id)) {
			ibf_rdm_conn_fail(conn, -FI_ENOMEM);
			break;
		}
		ibf_rdm_cm_data(ep, conn, &d);
		ibf_cm_param_init(&ep->domain->dev_attr, &cp, &d, sizeof(d));
		if (rdma_connect(id, &cp))
			ibf_rdm_conn_fail(conn, ibf_errno_to_fi(errno));
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		ibf_rdm_on_established(conn, ev);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (ibf_rdm_reject_magic(ev) == IBF_RDM_CM_TIEBREAK) {
			/* The peer's connect is the one: wait for it. */
			ibf_rdm_bury(ep, id);
			conn->id = NULL;
			__atomic_store_n(&conn->state, IBF_CONN_WAITING,
					 __ATOMIC_RELEASE);
		} else if (ev->status == IBF_REJ_NO_LISTENER ||
			   ibf_rdm_reject_magic(ev) == IBF_RDM_CM_BUSY) {
			/* Nothing listens there (yet), or the peer still
			 * holds a connection of ours it has to let go. */
			ibf_rdm_conn_retry(conn, -FI_ECONNREFUSED);
		} else {
			ibf_rdm_conn_fail(conn, -FI_ECONNREFUSED);
		}
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		ibf_rdm_conn_retry(conn, -FI_EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		/*
		 * Not retried: the peer may have accepted a request whose
		 * answer was lost, and a second attempt would end that
		 * connection with messages on it.
		 */
		ibf_rdm_conn_fail(conn, -FI_EHOSTUNREACH);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rdma_disconnect(id);
		ibf_rdm_conn_fail(conn, -FI_ECONNABORTED);
		break;
	default:
		break;
	}
}

static void ibf_rdm_cm_event(struct ibf_rdm_ep *ep, struct rdma_cm_event *ev)
{
	struct ibf_rdm_conn *conn;

	IBF_DBG(FI_LOG_EP_CTRL, "%s on id %p\n", rdma_event_str(ev->event),
		(void *)ev->id);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		ibf_rdm_on_request(ep, ev);
		return;
	}
	conn = ev->id->context;
	if (!conn || (void *)conn == &ibf_rdm_attempt_over ||
	    ev->id == ep->listen_id)
		return;		/* a buried id, a failed attempt, the listener */
	if (conn->self) {
		/* The accepting half of a connection to ourselves. */
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			conn->established = 1;
			__atomic_store_n(&conn->state, IBF_CONN_CONNECTED,
					 __ATOMIC_RELEASE);
		}
		else if (ev->event == RDMA_CM_EVENT_DISCONNECTED)
			ibf_rdm_conn_fail(conn, -FI_ECONNABORTED);
		return;
	}
	ibf_rdm_conn_event(ep, conn, ev);
}

/*
 * The endpoint's thread: rdma_cm events always; with FI_PROGRESS_AUTO also
 * its CQ, so data moves (rendezvous reads, FINs, matching) while the
 * application is not in fi_cq_read.
 */
static void *ibf_rdm_cm_thread(void *arg)
{
	struct ibf_rdm_ep *ep = arg;
	struct pollfd fds[3] = {
		{ .fd = ep->channel->fd, .events = POLLIN },
		{ .fd = ep->stop_fd, .events = POLLIN },
		{ .fd = ep->auto_progress ? ep->channel_cq->fd : -1, .events = POLLIN },
	};
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int timeout = -1;

	if (ep->auto_progress)
		ibf_rdm_auto_progress(ep);	/* arms the CQ */
	for (;;) {
		if (poll(fds, 3, timeout) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		if (fds[2].revents)
			ibf_rdm_auto_progress(ep);
		while (!rdma_get_cm_event(ep->channel, &ev)) {
			id = ev->id;
			pthread_mutex_lock(&ep->cm_lock);
			ibf_rdm_cm_event(ep, ev);
			pthread_mutex_unlock(&ep->cm_lock);
			rdma_ack_cm_event(ev);
			ibf_rdm_attempt_destroy(id);
		}
		pthread_mutex_lock(&ep->cm_lock);
		timeout = ibf_rdm_retry_due(ep);
		pthread_mutex_unlock(&ep->cm_lock);
	}
	return NULL;
}

/* ---- life cycle ---- */

int ibf_rdm_cm_listen(struct ibf_rdm_ep *ep, const struct fi_info *info)
{
	struct ibv_port_attr port;
	struct sockaddr_storage src;
	char buf[64];

	if (!info->src_addr || !info->src_addrlen ||
	    info->src_addrlen > sizeof(src)) {
		IBF_WARN(FI_LOG_EP_CTRL, "an RDM endpoint needs the src_addr of "
			 "an ibfab fi_info\n");
		return -FI_EINVAL;
	}
	memset(&src, 0, sizeof(src));
	memcpy(&src, info->src_addr, info->src_addrlen);
	ep->channel = rdma_create_event_channel();
	if (!ep->channel)
		return ibf_errno_to_fi(errno);
	if (ibf_fd_set_nonblock(ep->channel->fd) ||
	    rdma_create_id(ep->channel, &ep->listen_id, NULL, RDMA_PS_TCP))
		return ibf_errno_to_fi(errno);
	ibf_cm_reuse_addr(ep->listen_id);
	if (rdma_bind_addr(ep->listen_id, (struct sockaddr *)&src)) {
		int ret = ibf_errno_to_fi(errno);

		IBF_WARN(FI_LOG_EP_CTRL, "cannot bind %s: %s\n",
			 ibf_addr_str((struct sockaddr *)&src, buf, sizeof(buf)),
			 strerror(errno));
		return ret;
	}
	if (ep->listen_id->verbs != ep->domain->verbs) {
		IBF_WARN(FI_LOG_EP_CTRL, "%s is not on the domain's device\n",
			 ibf_addr_str((struct sockaddr *)&src, buf, sizeof(buf)));
		return -FI_EINVAL;
	}
	if (rdma_listen(ep->listen_id, 1024))
		return ibf_errno_to_fi(errno);
	ep->max_read = 1u << 30;
	if (!ibv_query_port(ep->domain->verbs, ep->listen_id->port_num, &port) &&
	    port.max_msg_sz)
		ep->max_read = IBF_MIN(port.max_msg_sz, 1u << 30);
	ep->namelen = ibf_addr_len(rdma_get_local_addr(ep->listen_id));
	return ibf_name_from_sockaddr(&ep->name,
				      rdma_get_local_addr(ep->listen_id),
				      ep->namelen);
}

int ibf_rdm_cm_start(struct ibf_rdm_ep *ep)
{
	int ret;

	ep->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (ep->stop_fd < 0)
		return ibf_errno_to_fi(errno);
	ret = pthread_create(&ep->cm_thread, NULL, ibf_rdm_cm_thread, ep);
	if (ret) {
		IBF_WARN(FI_LOG_EP_CTRL, "pthread_create: %s\n", strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	ep->cm_thread_started = 1;
	return 0;
}

void ibf_rdm_cm_stop(struct ibf_rdm_ep *ep)
{
	struct ibf_rdm_conn *conn;
	uint64_t one = 1;
	uint32_t i;

	if (ep->cm_thread_started) {
		if (write(ep->stop_fd, &one, sizeof(one)) != sizeof(one))
			IBF_WARN(FI_LOG_EP_CTRL, "cannot stop the connection "
				 "thread\n");
		pthread_join(ep->cm_thread, NULL);
		ep->cm_thread_started = 0;
	}
	/* Peers see DISCONNECTED; our QPs flush what they hold. */
	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (conn->id && (conn->state == IBF_CONN_ACCEPTING ||
				 conn->state == IBF_CONN_CONNECTED))
			rdma_disconnect(conn->id);
		ibf_rdm_bury(ep, conn->id);
		ibf_rdm_bury(ep, conn->loser);
		conn->id = conn->loser = NULL;
	}
}

void ibf_rdm_cm_destroy(struct ibf_rdm_ep *ep)
{
	struct rdma_cm_event *ev;
	uint32_t i;

	/*
	 * Ack what is left, or rdma_destroy_id would wait for it; a request
	 * that came too late is refused, and its id is ours to destroy.
	 */
	while (ep->channel && !rdma_get_cm_event(ep->channel, &ev)) {
		struct rdma_cm_id *late = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ?
					  ev->id : NULL;

		if (late)
			rdma_reject(late, NULL, 0);
		rdma_ack_cm_event(ev);
		if (late)
			rdma_destroy_id(late);
	}
	for (i = 0; i < ep->ngrave; i++) {
		if (ep->graveyard[i]->qp)
			rdma_destroy_qp(ep->graveyard[i]);
		rdma_destroy_id(ep->graveyard[i]);
	}
	free(ep->graveyard);
	ibf_rdm_qp_map_free(ep);
	for (i = 0; i < ep->nconns; i++) {
		struct ibf_rdm_conn *conn = ibf_rdm_conn_at(ep, i);

		free(conn->probe);
		free(conn);
	}
	for (i = 0; i < IBF_CONN_DIRS; i++)
		free(ep->conn_dir[i]);
	if (ep->listen_id)
		rdma_destroy_id(ep->listen_id);
	if (ep->channel)
		rdma_destroy_event_channel(ep->channel);
	if (ep->stop_fd >= 0)
		close(ep->stop_fd);
}

void ibf_rdm_cm_deliver(struct ibf_rdm_ep *ep)
{
	struct ibf_rdm_list failed;
	struct ibf_rdm_op *op;
	uint32_t i;
	int dead;

	ibf_lock_acquire(&ep->lock);
	pthread_mutex_lock(&ep->cm_lock);
	__atomic_store_n(&ep->cm_pending, 0, __ATOMIC_SEQ_CST);
	failed = ep->failed;
	ep->failed.head = ep->failed.tail = NULL;
	dead = ep->dead_seen;
	ep->dead_seen = 0;
	pthread_mutex_unlock(&ep->cm_lock);

	while ((op = failed.head)) {
		ibf_rdm_list_remove(&failed, op);
		ibf_rdm_complete(op, op->op.err);
	}
	/* Reads and answers parked on a connection that died now fail. */
	for (i = 0; dead && i < ep->nconns; i++) {
		struct ibf_rdm_conn *conn = ibf_rdm_conn_at(ep, i);

		if (conn->stalled_head)
			ibf_rdm_unstall(conn);
	}
	/*
	 * Rendezvous sends whose FIN will never come: their connection died
	 * (its epoch moved on).  Each completes, in error, once its own work
	 * request has too (the device flushes it if it has not).
	 */
	for (i = 0; dead && i < ep->ntx; i++) {
		op = &ep->ops[i];
		if (op->state != IBF_RDM_TX_RTS ||
		    op->epoch == __atomic_load_n(&op->conn->epoch, __ATOMIC_RELAXED))
			continue;
		op->epoch = op->conn->epoch;	/* counted once */
		op->read_err = -FI_ECONNABORTED;
		if (--op->reads_left == 0)
			ibf_rdm_complete(op, op->read_err);
	}
	ibf_lock_release(&ep->lock);
}
