/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM connections: records, QPs, credits, queues, and their end
 * (ibf_rdm_conn.h).  The rdma_cm side, run by the endpoint's thread, is in
 * ibf_rdm_cm.c; the table from QP number to connection in ibf_rdm_qpmap.c.
 *
 * The first send to a peer creates its connection record and starts an
 * rdma_cm connect (ibf_rdm_cm.c); the send waits in the record's queue.
 * Once the connection is established the queue is posted, then the record
 * is marked CONNECTED, after which senders post directly.
 *
 * A connection that fails or dies: its queued sends complete in error
 * (through ep->failed, picked up by progress, since the connection thread
 * never touches a CQ), the layer above is told (ibf_rdm_upcalls) so that
 * what waits on the ended life fails too, and the record goes back to
 * IDLE: a later send connects again.  A life is counted by conn->epoch; a
 * completion or arrival of an earlier life never acts on the current one.
 */
#include "config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm_conn.h"

struct ibf_rdm_conn *ibf_rdm_conn_at(struct ibf_rdm_ep_conns *ep,
				     uint32_t index)
{
	struct ibf_rdm_conn **chunk;

	if (unlikely(index >= __atomic_load_n(&ep->nconns, __ATOMIC_ACQUIRE)))
		return NULL;
	chunk = __atomic_load_n(&ep->conn_dir[index / IBF_CONN_CHUNK],
				__ATOMIC_ACQUIRE);
	return __atomic_load_n(&chunk[index % IBF_CONN_CHUNK], __ATOMIC_ACQUIRE);
}

/* The sender's fi_addr, looked up in the AV the first time it is needed. */
fi_addr_t ibf_rdm_conn_addr(struct ibf_rdm_conn *conn)
{
	if (unlikely(conn->fi_addr == FI_ADDR_NOTAVAIL))
		conn->fi_addr = ibf_av_find(conn->ep->av, &conn->name);
	return conn->fi_addr;
}

/* By address and port, the key aside: a plain address and the keyed name
 * of the endpoint there share a bucket. */
static uint32_t ibf_name_hash(const struct ibf_name *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	struct ibf_name plain = *name;
	size_t i;

	ibf_name_set_key(&plain, 0);
	for (i = 0; i < sizeof(plain.bytes); i++)
		h = (h ^ plain.bytes[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32));
}

/* cm_lock held: index conn by its name; the table doubles as it fills. */
static int ibf_rdm_name_add(struct ibf_rdm_ep_conns *ep,
			    struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_conn **tab, *c, *next;
	uint32_t n, i, b;

	if (!ep->by_name || ep->nconns > 2 * (ep->by_name_mask + 1)) {
		n = ep->by_name ? 2 * (ep->by_name_mask + 1) : 64;
		tab = calloc(n, sizeof(*tab));
		if (!tab)
			return -FI_ENOMEM;
		for (i = 0; ep->by_name && i <= ep->by_name_mask; i++) {
			for (c = ep->by_name[i]; c; c = next) {
				next = c->name_next;
				b = ibf_name_hash(&c->name) & (n - 1);
				c->name_next = tab[b];
				tab[b] = c;
			}
		}
		free(ep->by_name);
		ep->by_name = tab;
		ep->by_name_mask = n - 1;
	}
	b = ibf_name_hash(&conn->name) & ep->by_name_mask;
	conn->name_next = ep->by_name[b];
	ep->by_name[b] = conn;
	return 0;
}

/* cm_lock held: take conn out of the name index. */
static void ibf_rdm_name_del(struct ibf_rdm_ep_conns *ep,
			     struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_conn **p;

	p = &ep->by_name[ibf_name_hash(&conn->name) & ep->by_name_mask];
	for (; *p; p = &(*p)->name_next) {
		if (*p == conn) {
			*p = conn->name_next;
			return;
		}
	}
}

/* cm_lock held: a record reclaimed earlier (ibf_rdm_conns_reclaim), or a
 * new one at the next index. */
static struct ibf_rdm_conn *ibf_rdm_conn_alloc(struct ibf_rdm_ep_conns *ep)
{
	uint32_t index = ep->nconns, dir = index / IBF_CONN_CHUNK;
	struct ibf_rdm_conn *conn = ep->conn_free, **chunk;

	if (conn) {
		ep->conn_free = conn->name_next;
		conn->reclaimed = 0;
		return conn;
	}
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
	ep->nstate[IBF_CONN_IDLE]++;
	__atomic_store_n(&chunk[index % IBF_CONN_CHUNK], conn, __ATOMIC_RELEASE);
	__atomic_store_n(&ep->nconns, index + 1, __ATOMIC_RELEASE);
	return conn;
}

/* cm_lock held. */
struct ibf_rdm_conn *ibf_rdm_conn_new(struct ibf_rdm_ep_conns *ep,
				      const struct ibf_name *name, int self)
{
	struct ibf_rdm_conn *conn = ibf_rdm_conn_alloc(ep);

	if (!conn)
		return NULL;
	conn->name = *name;
	conn->fi_addr = FI_ADDR_NOTAVAIL;
	conn->self = self;
	conn->rx_life = 0;	/* the counts of the record's last peer */
	conn->owed = 0;
	conn->wimm_sent = 0;
	memset(&conn->wimm_seen, 0, sizeof(conn->wimm_seen));
	memset(conn->keys, 0, sizeof(conn->keys));
	conn->key_next = 0;
	conn->peer_key_gen = 0;
	/*
	 * Key 1: our own name (both halves of a connection to ourselves);
	 * others by record and use of the record, so that a reused record
	 * never matches what was meant for its previous peer.
	 */
	conn->gen++;
	conn->peer_key = ibf_name_matches(name, &ep->name) ? 1 :
			 ((uint64_t)conn->gen << 32 | conn->index) + 2;
	__atomic_store_n(&conn->credits, (int)ep->sq_depth, __ATOMIC_RELAXED);
	if (!self && ibf_rdm_name_add(ep, conn)) {
		conn->reclaimed = 1;
		conn->name_next = ep->conn_free;
		ep->conn_free = conn;
		return NULL;
	}
	return conn;
}

/* An op in use keeps the connections it names. */
static void ibf_rdm_op_keeps(struct ibf_rdm_op *op, void *unused)
{
	(void)unused;
	if (op->state == IBF_RDM_FREE ||
	    op->state == IBF_RDM_BOUNCE_POSTED || op->state == IBF_RDM_BOUNCE_SPARE)
		return;
	if (op->conn)
		op->conn->reclaim_mark = 0;
	if (op->post_conn)
		op->post_conn->reclaim_mark = 0;
}

/* Nothing waits on conn (queued or parked ops) and none of the connection
 * layer's own ops (PING, grant) is in flight on it.  Ops pointing at it
 * are seen apart (ibf_rdm_op_keeps). */
static int ibf_rdm_conn_unused(const struct ibf_rdm_conn *conn)
{
	return !conn->queue_head && !conn->stalled_head &&
	       (!conn->probe || __atomic_load_n(&conn->probe->state,
						__ATOMIC_ACQUIRE) != IBF_RDM_PROBE) &&
	       (!conn->grant || conn->grant->state != IBF_RDM_GRANT);
}

/*
 * Progress (ep->lock and cm_lock held): records of peers that are gone go
 * back for reuse, so that peers coming and going (a server's clients) do
 * not grow the endpoint.  A record is reused only when nothing can name it
 * any more: idle, nothing queued or parked, every QP of it destroyed (so
 * no arrival or completion can find it), no fi_addr of the AV cached on
 * it, and no op of the endpoint pointing at it (held messages, rendezvous,
 * the failed list).  One pass over the ops and the fi_addr cache.
 */
void ibf_rdm_conns_reclaim(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_conn *conn;
	uint32_t i, n = 0;

	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		conn->reclaim_mark = !conn->reclaimed && conn->state == IBF_CONN_IDLE &&
			!conn->id && !conn->loser && !conn->ngraves &&
			ibf_rdm_conn_unused(conn);
		n += conn->reclaim_mark;
	}
	if (!n)
		return;
	for (i = 0; i < ep->npeers; i++)
		if (ep->peers[i])
			ep->peers[i]->reclaim_mark = 0;
	ibf_rdm_ops_each(&ep->as_ops, ibf_rdm_op_keeps, NULL);
	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (!conn->reclaim_mark)
			continue;
		conn->reclaim_mark = 0;
		if (!conn->self)
			ibf_rdm_name_del(ep, conn);
		conn->reclaimed = 1;
		conn->name_next = ep->conn_free;
		ep->conn_free = conn;
	}
}

/* Whether conn is up with nothing of ours in flight or waiting on it
 * (what ops point at it is seen apart). */
static int ibf_rdm_conn_quiet(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;

	return conn->state == IBF_CONN_CONNECTED && !conn->self && conn->id &&
	       __atomic_load_n(&conn->credits, __ATOMIC_ACQUIRE) == (int)ep->sq_depth &&
	       !conn->held && ibf_rdm_conn_unused(conn);
}

/* Uses of the endpoint since conn's last (the tick wraps: a difference). */
static uint32_t ibf_rdm_conn_age(const struct ibf_rdm_conn *conn)
{
	return __atomic_load_n(&conn->ep->use_tick, __ATOMIC_RELAXED) -
	       __atomic_load_n(&conn->last_use, __ATOMIC_RELAXED);
}

void ibf_rdm_conns_cap(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_conn *conn, *lru = NULL;
	uint32_t i, n = 0;
	char buf[64];

	for (i = 0; i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		conn->reclaim_mark = ibf_rdm_conn_quiet(conn);
		n += conn->reclaim_mark;
	}
	if (n)
		ibf_rdm_ops_each(&ep->as_ops, ibf_rdm_op_keeps, NULL);
	for (i = 0; n && i < ep->nconns; i++) {
		conn = ibf_rdm_conn_at(ep, i);
		if (conn->reclaim_mark && (!lru || ibf_rdm_conn_age(conn) >
					   ibf_rdm_conn_age(lru)))
			lru = conn;
		conn->reclaim_mark = 0;
	}
	if (!lru) {
		IBF_INFO(FI_LOG_EP_CTRL, "%u connections (FI_IBFAB_RDM_MAX_CONNS), "
			 "none idle: new peers wait\n", ep->nstate[IBF_CONN_CONNECTED]);
		return;
	}
	IBF_INFO(FI_LOG_EP_CTRL, "%u connections (FI_IBFAB_RDM_MAX_CONNS): the "
		 "least recently used idle one, to %s, closes for a new peer\n",
		 ep->nstate[IBF_CONN_CONNECTED],
		 ibf_addr_str((const void *)&lru->name, buf, sizeof(buf)));
	rdma_disconnect(lru->id);
	ibf_rdm_conn_fail(lru, -FI_ECONNABORTED);
}

void ibf_rdm_conns_reclaim_soon(struct ibf_rdm_ep_conns *ep)
{
	pthread_mutex_lock(&ep->cm_lock);
	ep->reclaim_due = 1;
	pthread_mutex_unlock(&ep->cm_lock);
	__atomic_store_n(&ep->cm_pending, 1, __ATOMIC_SEQ_CST);
}

static const char *const ibf_conn_names[IBF_CONN_STATES] = {
	[IBF_CONN_IDLE] = "idle",
	[IBF_CONN_CONNECTING] = "connecting",
	[IBF_CONN_WAITING] = "waiting",
	[IBF_CONN_ACCEPTING] = "accepting",
	[IBF_CONN_CONNECTED] = "connected",
	[IBF_CONN_RETRY] = "retry",
};

const char *ibf_conn_state_name(enum ibf_conn_state state)
{
	return ibf_state_name(ibf_conn_names, IBF_CONN_STATES, (int)state);
}

#define IBF_C(s) (1u << IBF_CONN_##s)
/*
 * The life of a connection: the states each may go to.  Ours is tried
 * (CONNECTING) from idle, or again after a pause (RETRY) or after losing
 * a simultaneous connect and waiting for the winner's request (WAITING);
 * a peer's request is accepted in any state but a live one.  Either
 * comes up (CONNECTED, which a drained queue says again), and any ends
 * back in IDLE.
 */
static const uint32_t ibf_conn_moves[IBF_CONN_STATES] = {
	[IBF_CONN_IDLE] = IBF_C(CONNECTING) | IBF_C(ACCEPTING),
	[IBF_CONN_CONNECTING] = IBF_C(IDLE) | IBF_C(RETRY) | IBF_C(WAITING) |
				IBF_C(ACCEPTING) | IBF_C(CONNECTED),
	[IBF_CONN_WAITING] = IBF_C(IDLE) | IBF_C(CONNECTING) | IBF_C(ACCEPTING),
	[IBF_CONN_RETRY] = IBF_C(IDLE) | IBF_C(CONNECTING) | IBF_C(ACCEPTING),
	[IBF_CONN_ACCEPTING] = IBF_C(IDLE) | IBF_C(CONNECTED),
	[IBF_CONN_CONNECTED] = IBF_C(IDLE) | IBF_C(CONNECTED),
};
#undef IBF_C

int ibf_conn_move_ok(enum ibf_conn_state from, enum ibf_conn_state to)
{
	return ibf_state_move_ok(ibf_conn_moves, ibf_conn_names, IBF_CONN_STATES,
				 (int)from, (int)to, "a connection");
}

void ibf_rdm_conn_state(struct ibf_rdm_conn *conn, enum ibf_conn_state state)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;

	assert(ibf_conn_move_ok(conn->state, state));
	assert(ep->nstate[conn->state] > 0);	/* counted where it is */
	/* Connected means a QP to carry it. */
	assert(state != IBF_CONN_CONNECTED ||
	       __atomic_load_n(&conn->id, __ATOMIC_ACQUIRE));
	IBF_DBG(FI_LOG_EP_CTRL, "connection %u: %s -> %s\n", conn->index,
		ibf_conn_state_name(conn->state), ibf_conn_state_name(state));
	ep->nstate[conn->state]--;
	ep->nstate[state]++;
	__atomic_store_n(&conn->state, state, __ATOMIC_RELEASE);
}

/* cm_lock held.  The record of exactly name, and (*bucket) where any
 * record of its address and port would be. */
static struct ibf_rdm_conn *ibf_rdm_conn_exact(struct ibf_rdm_ep_conns *ep,
					       const struct ibf_name *name,
					       struct ibf_rdm_conn **bucket)
{
	struct ibf_rdm_conn *conn;

	*bucket = ep->by_name ? ep->by_name[ibf_name_hash(name) & ep->by_name_mask] :
		  NULL;
	for (conn = *bucket; conn; conn = conn->name_next)
		if (!memcmp(&conn->name, name, sizeof(*name)))
			return conn;
	return NULL;
}

/* cm_lock held.  The sending connection to name, if there is one: the
 * same name, else (name a plain address) the endpoint's at that address. */
struct ibf_rdm_conn *ibf_rdm_conn_find(struct ibf_rdm_ep_conns *ep,
				       const struct ibf_name *name)
{
	struct ibf_rdm_conn *conn, *bucket;

	conn = ibf_rdm_conn_exact(ep, name, &bucket);
	if (conn || ibf_name_key(name))
		return conn;
	for (conn = bucket; conn; conn = conn->name_next)
		if (ibf_name_matches(name, &conn->name))
			return conn;
	return NULL;
}

struct ibf_rdm_conn *ibf_rdm_conn_claim(struct ibf_rdm_ep_conns *ep,
					const struct ibf_name *name)
{
	struct ibf_rdm_conn *conn, *bucket;

	conn = ibf_rdm_conn_exact(ep, name, &bucket);
	if (conn)
		return conn;
	for (conn = bucket; conn; conn = conn->name_next) {
		if (!ibf_name_key(&conn->name) && ibf_name_matches(&conn->name, name)) {
			/* The application named it by address: this is the
			 * endpoint there (the bucket does not change). */
			ibf_name_set_key(&conn->name, ibf_name_key(name));
			return conn;
		}
	}
	return NULL;
}

/* Tell the CQs there is work in ep->failed. */
void ibf_rdm_set_pending(struct ibf_rdm_ep_conns *ep)
{
	__atomic_store_n(&ep->cm_pending, 1, __ATOMIC_SEQ_CST);
	if (ep->base.tx_cq && ep->base.tx_cq->channel)
		ibf_waitfd_raise(&ep->base.tx_cq->wait);
	if (ep->base.rx_cq && ep->base.rx_cq != ep->base.tx_cq &&
	    ep->base.rx_cq->channel)
		ibf_waitfd_raise(&ep->base.rx_cq->wait);
}

static void ibf_rdm_fail_op(struct ibf_rdm_ep_conns *ep, struct ibf_rdm_op *op,
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
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct ibf_rdm_op *op;
	char buf[64];

	if (keep_queue)
		IBF_INFO(FI_LOG_EP_CTRL, "connection to %s ended; connecting "
			 "anew\n", ibf_addr_str((const void *)&conn->name, buf,
			 sizeof(buf)));
	else if (err == -FI_ECONNABORTED && !conn->queue_head)
		IBF_INFO(FI_LOG_EP_CTRL, "%s disconnected\n",
			 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)));
	else
		IBF_WARN(FI_LOG_EP_CTRL, "connection to %s failed: %s\n",
			 ibf_addr_str((const void *)&conn->name, buf, sizeof(buf)),
			 fi_strerror(-err));
	while (!keep_queue && (op = conn->queue_head)) {
		__atomic_store_n(&conn->queue_head, op->next, __ATOMIC_RELAXED);
		ibf_rdm_fail_op(ep, op, err);
	}
	if (!conn->queue_head)
		conn->queue_tail = NULL;
	ibf_rdm_bury(ep, conn->id, conn);
	ibf_rdm_bury(ep, conn->loser, conn);
	__atomic_store_n(&conn->id, NULL, __ATOMIC_RELEASE);
	conn->loser = NULL;
	__atomic_store_n(&conn->qp_num, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&conn->established, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&conn->credits, (int)ep->sq_depth, __ATOMIC_RELAXED);
	__atomic_add_fetch(&conn->epoch, 1, __ATOMIC_RELEASE);
	ep->dead_seen = 1;
	ibf_rdm_conn_state(conn, IBF_CONN_IDLE);
	ibf_rdm_set_pending(ep);
}

void ibf_rdm_conn_fail(struct ibf_rdm_conn *conn, int err)
{
	ibf_rdm_conn_end(conn, err, 0);
}

void ibf_rdm_conn_reset(struct ibf_rdm_conn *conn)
{
	ibf_rdm_conn_end(conn, 0, 1);
}

/*
 * A work request posted on conn in its life "epoch" failed other than by a
 * flush: retries exhausted (the peer's node or link is gone), a remote or
 * local access or protection error, or a receive the peer's message did
 * not fit.  The QP is in the error state for good, and no rdma_cm event
 * may ever say so (a node that dies sends no disconnect): end that life
 * as a disconnect would, so that what waits on it fails and the next
 * send connects anew.  That life may not be known as established yet: an
 * accepting side's QP receives before its ESTABLISHED event is taken (a
 * peer that sends at once), and the active side's between librdmacm's
 * move to RTS and that event.  ep->lock held.
 */
void ibf_rdm_conn_broken(struct ibf_rdm_conn *conn, uint32_t epoch, int err)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct rdma_cm_id *id;

	pthread_mutex_lock(&ep->cm_lock);
	id = conn->id;
	if (epoch == conn->epoch && id) {
		rdma_disconnect(id);	/* the peer learns, if it can hear */
		ibf_rdm_conn_fail(conn, err);
	}
	pthread_mutex_unlock(&ep->cm_lock);
}

/*
 * post_built's ret was -FI_EAGAIN because op is a request and the peer's
 * window is spent (not because the send queue is full): only the peer's
 * progress brings more, and its application may be away a while.
 */
static int ibf_rdm_window_spent(struct ibf_rdm_conn *conn,
				const struct ibf_rdm_op *op, int ret)
{
	return ret == -FI_EAGAIN && ibf_rdm_is_request(op) &&
	       __atomic_load_n(&conn->window, __ATOMIC_ACQUIRE) <= 0;
}

/*
 * cm_lock held, connection established: post the queue, then go direct.
 * A queue longer than the QP's send queue or the peer's window is posted
 * as slots and grants come back (ibf_rdm_queue_resume); until it is
 * empty, new sends queue behind it, so order holds.
 */
void ibf_rdm_conn_flush(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_op *op, *next;
	int ret;

	while ((op = conn->queue_head)) {
		/* Before the post: once posted, op may complete and be freed
		 * (its next reused) by progress on another thread. */
		next = op->next;
		ret = ibf_rdm_post_built(conn, op);
		if (ret == -FI_EAGAIN)
			return;		/* the rest when slots come back */
		/* Atomic: progress reads it as a hint without cm_lock. */
		__atomic_store_n(&conn->queue_head, next, __ATOMIC_RELAXED);
		if (ret) {
			IBF_WARN(FI_LOG_EP_DATA, "posting a queued send: %s\n",
				 fi_strerror(-ret));
			ibf_rdm_fail_op(conn->ep, op, ret);
			ibf_rdm_set_pending(conn->ep);
		}
	}
	conn->queue_tail = NULL;
	ibf_rdm_conn_state(conn, IBF_CONN_CONNECTED);
}

static void ibf_rdm_credit_return(struct ibf_rdm_op *op)
{
	struct ibf_rdm_conn *conn = op->post_conn;
	struct ibf_rdm_ep_conns *ep;

	/* A completion of a QP before the connection's last death gives
	 * nothing back: the new QP started with all its slots. */
	if (!conn || op->post_epoch != __atomic_load_n(&conn->epoch, __ATOMIC_ACQUIRE))
		return;
	ep = conn->ep;
	__atomic_add_fetch(&conn->credits, 1, __ATOMIC_RELEASE);
	if (unlikely(conn->stalled_head))
		ep->up->slots_freed(conn);
	/* Not on every completion while credits are owed (almost always):
	 * only a grant that found no slot is waiting for this one. */
	if (unlikely(conn->grant_stuck))
		ibf_rdm_grant_retry(conn);
	ibf_rdm_queue_resume(conn);
}

void ibf_rdm_queue_resume(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;

	/* Hints, read without cm_lock (the thread writes them under it),
	 * and read again under it. */
	if (likely(!__atomic_load_n(&conn->queue_head, __ATOMIC_RELAXED)) ||
	    !__atomic_load_n(&conn->id, __ATOMIC_RELAXED) ||
	    !__atomic_load_n(&conn->established, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ep->cm_lock);
	if (conn->established &&
	    (conn->state != IBF_CONN_CONNECTED || conn->queue_head))
		ibf_rdm_conn_flush(conn);
	pthread_mutex_unlock(&ep->cm_lock);
}

/* What failed, at warn level: out of line, so that the completion path
 * ibf_rdm_send_failed is folded into stays as short as before. */
static void __attribute__((noinline, cold))
ibf_rdm_send_failed_say(const struct ibf_rdm_op *op, enum ibv_wc_status status)
{
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a work request (%s) failed: "
		       "%s; its connection ends\n",
		       ibf_rdm_op_state_name(op->state), ibv_wc_status_str(status));
}

/*
 * A send of op's failed.  A flush on a life that has not ended means its
 * QP went to the error state with no completion of ours to say why: the
 * peer's write or read broke the responder's rules (a bad key), its
 * message did not fit and that failure was taken first, or the device
 * failed a request of its own (rxe running a window's bind again when it
 * retransmits: fi_ibfab(7)).  Nothing will ever flow there again, so that
 * life ends too.
 */
static void ibf_rdm_send_failed(struct ibf_rdm_op *op, enum ibv_wc_status status)
{
	struct ibf_rdm_conn *conn = op->post_conn;
	int err = -ibf_wc_status_to_fi(status);

	if (status == IBV_WC_WR_FLUSH_ERR) {
		if (op->post_epoch != ibf_rdm_conn_epoch(conn))
			return;		/* flushed as that life ended */
		err = -FI_ECONNABORTED;
	} else {
		ibf_rdm_send_failed_say(op, status);
	}
	ibf_rdm_conn_broken(conn, op->post_epoch, err);
}

/*
 * The first failed status of op's work requests, for its error entry's
 * prov_errno (fi_cq_strerror names it).  Kept on every op: the connection
 * layer's own (PING, drain, grant) and bounces are never reported, and
 * an op that is reported is cleared as it is freed.  Out of line: inlined,
 * the send completion it sits in counted 15 instructions more.
 */
static void __attribute__((noinline, cold))
ibf_rdm_keep_status(struct ibf_rdm_op *op, enum ibv_wc_status status)
{
	if (!op->op.prov_errno)
		op->op.prov_errno = status;
}

int ibf_rdm_send_done(struct ibf_rdm_op *op, enum ibv_wc_status status)
{
	__atomic_sub_fetch(&ibf_rdm_conns_of(op->ep)->sq_posted, 1,
			   __ATOMIC_RELAXED);
	ibf_rdm_credit_return(op);
	if (unlikely(status != IBV_WC_SUCCESS)) {
		ibf_rdm_keep_status(op, status);
		if (op->post_conn)
			ibf_rdm_send_failed(op, status);
	}
	switch (__atomic_load_n(&op->state, __ATOMIC_ACQUIRE)) {
	case IBF_RDM_PROBE:
		/* A PING: its outcome was all it had to say. */
		ibf_rdm_op_to_atomic(op, IBF_RDM_FREE);
		return 1;
	case IBF_RDM_DRAIN:
		ibf_rdm_grave_drained(op);
		return 1;
	case IBF_RDM_GRANT:
		ibf_rdm_grant_done(op);
		return 1;
	default:
		return 0;
	}
}

/* Append op to the singly linked list head..tail (through next). */
static void ibf_rdm_fifo_push(struct ibf_rdm_op **head, struct ibf_rdm_op **tail,
			      struct ibf_rdm_op *op)
{
	op->next = NULL;
	if (*tail)
		(*tail)->next = op;
	else
		__atomic_store_n(head, op, __ATOMIC_RELAXED);	/* a hint to others */
	*tail = op;
}

void ibf_rdm_stall(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	op->stalled = 1;
	ibf_rdm_fifo_push(&conn->stalled_head, &conn->stalled_tail, op);
}

struct ibf_rdm_op *ibf_rdm_unstall_next(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_op *op = conn->stalled_head;

	if (!op || (conn->id &&
		    __atomic_load_n(&conn->credits, __ATOMIC_ACQUIRE) <= 0))
		return NULL;
	conn->stalled_head = op->next;
	if (!conn->stalled_head)
		conn->stalled_tail = NULL;
	op->stalled = 0;
	return op;
}

/* The op conn grants credits with: it carries no bytes. */
static struct ibf_rdm_op *ibf_rdm_grant_op(struct ibf_rdm_conn *conn)
{
	struct ibf_rdm_op *op = calloc(1, sizeof(*op));

	if (op) {
		op->ep = &conn->ep->as_ops;
		op->conn = conn;
		op->op.kind = IBF_OP_RDM;
		op->state = IBF_RDM_FREE;	/* born free, not a move */
	}
	return op;
}

/*
 * conn's QP on id, made its current one: arrivals on it are conn's
 * (ep->qp_map) from before the peer can send on it.  cm_lock held.
 */
int ibf_rdm_qp_create(struct ibf_rdm_conn *conn, struct rdma_cm_id *id)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	struct ibv_qp_init_attr attr = { 0 };
	int ret;

	if (!conn->grant && !(conn->grant = ibf_rdm_grant_op(conn)))
		return -FI_ENOMEM;
	attr.qp_type = IBV_QPT_RC;
	attr.send_cq = ep->hcq;
	attr.recv_cq = ep->hcq;
	attr.srq = ep->srq;
	attr.cap.max_send_wr = ep->sq_depth + 1;	/* and its drain */
	attr.cap.max_send_sge = IBF_RDM_IOV;
	attr.cap.max_inline_data = ep->max_inline;
	if (rdma_create_qp(id, ep->base.domain->pd, &attr)) {
		/* Fewer inline bytes may do; learn the device's limit once. */
		attr.cap.max_inline_data = 0;
		if (!ep->max_inline || rdma_create_qp(id, ep->base.domain->pd, &attr)) {
			IBF_WARN(FI_LOG_EP_CTRL, "rdma_create_qp(send %u): %s\n",
				 ep->sq_depth, strerror(errno));
			return ibf_errno_to_fi(errno);
		}
	}
	/* Written only when it shrinks (the first QP, at most): the data
	 * path reads it without cm_lock. */
	if (attr.cap.max_inline_data < ep->max_inline)
		ep->max_inline = attr.cap.max_inline_data;
	ret = ibf_rdm_qp_map_set(ep, id->qp->qp_num, conn);
	if (!ret)
		__atomic_store_n(&conn->qp_num, id->qp->qp_num, __ATOMIC_RELEASE);
	return ret;
}

int ibf_rdm_conn_get(struct ibf_rdm_ep_conns *ep, fi_addr_t addr,
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

/*
 * A request beyond the peer's window is queued, not refused: a peer whose
 * application is busy elsewhere (MPICH's sendrecv3 sleeps a second) grants
 * nothing meanwhile, and a sender should not have to wait for it to post
 * a send.  What bounds the queue is the sender's own ops (tx_size): they
 * answer -FI_EAGAIN once all are taken.  The peer's buffers stay as safe
 * as before, since nothing queued is sent before its grant.
 *
 * Here when the connection is not up, or ended since the caller looked,
 * or sends wait for the peer's window: queue and (re)connect.
 */
static ssize_t __attribute__((noinline))
ibf_rdm_conn_send_queued(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op)
{
	struct ibf_rdm_ep_conns *ep = conn->ep;
	int ret = 0;

	pthread_mutex_lock(&ep->cm_lock);
	switch (__atomic_load_n(&conn->state, __ATOMIC_ACQUIRE)) {
	case IBF_CONN_CONNECTED:
		/* Under cm_lock: the connection cannot end meanwhile. */
		if (conn->queue_head)
			break;		/* behind those, so order holds */
		ret = ibf_rdm_post_built(conn, op);
		if (!ibf_rdm_window_spent(conn, op, ret)) {
			pthread_mutex_unlock(&ep->cm_lock);
			return ret;
		}
		ret = 0;
		break;
	case IBF_CONN_IDLE:
		ret = ibf_rdm_conn_start(conn);
		break;
	default:
		break;
	}
	if (!ret) {
		ibf_rdm_op_to(op, IBF_RDM_QUEUED);
		ibf_rdm_fifo_push(&conn->queue_head, &conn->queue_tail, op);
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

/* The usual send, on a connection that is up with nothing queued, is
 * posted in the caller's frame; the rest queues (apart, above). */
IBF_INLINE_HOT ssize_t ibf_rdm_conn_send(struct ibf_rdm_conn *conn,
					 struct ibf_rdm_op *op)
{
	int ret;

	if (likely(__atomic_load_n(&conn->state, __ATOMIC_ACQUIRE) ==
		   IBF_CONN_CONNECTED) &&
	    likely(!__atomic_load_n(&conn->queue_head, __ATOMIC_RELAXED))) {
		ret = ibf_rdm_post_built(conn, op);
		if (likely(ret != -FI_ENOTCONN) &&
		    likely(!ibf_rdm_window_spent(conn, op, ret)))
			return ret;
	}
	return ibf_rdm_conn_send_queued(conn, op);
}

void ibf_rdm_cm_deliver(struct ibf_rdm_ep_conns *ep)
{
	struct ibf_rdm_list failed;
	struct ibf_qp_map *retired;
	struct ibf_rdm_op *op;
	uint32_t i;
	int dead;

	ibf_lock_acquire(&ep->lock);
	pthread_mutex_lock(&ep->cm_lock);
	__atomic_store_n(&ep->cm_pending, 0, __ATOMIC_SEQ_CST);
	retired = ibf_rdm_qp_maps_retired(ep);
	failed = ep->failed;
	ep->failed.head = ep->failed.tail = NULL;
	dead = ep->dead_seen;
	ep->dead_seen = 0;
	if (ep->reclaim_due) {
		ep->reclaim_due = 0;
		ibf_rdm_conns_reclaim(ep);
	}
	if (ep->cap_due) {
		ep->cap_due = 0;
		ibf_rdm_conns_cap(ep);
	}
	pthread_mutex_unlock(&ep->cm_lock);
	ibf_rdm_qp_maps_free(retired);

	while ((op = failed.head)) {
		ibf_rdm_list_remove(&failed, op);
		ibf_rdm_complete(op, op->op.err);
	}
	if (dead) {
		/* What was parked on a connection that ended now fails. */
		for (i = 0; i < ep->nconns; i++) {
			struct ibf_rdm_conn *conn = ibf_rdm_conn_at(ep, i);

			if (conn->stalled_head)
				ep->up->slots_freed(conn);
		}
		ep->up->conns_ended(ep);
	}
	ibf_lock_release(&ep->lock);
}
