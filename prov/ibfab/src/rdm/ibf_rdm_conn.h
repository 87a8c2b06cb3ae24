/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM connections: the layer under the protocol (ibf_rdm_conn.c, and the
 * rdma_cm side of it in ibf_rdm_cm.c).
 *
 * It keeps the endpoint's peers: one record per peer name, with one RC QP
 * at a time, made on the first operation to the peer (connect) or on the
 * peer's request (accept); the QP's send-queue slots ("credits"); the ops
 * waiting for the connection (queue) and for slots (stalled); retries of
 * peers not there yet; the end of a connection (a disconnect, or a work
 * request that failed other than by a flush) and the failure of what waited
 * on it.  It knows nothing of tags, matching or rendezvous: it moves
 * ops whose bytes the protocol layer built, and reports upward only through
 * struct ibf_rdm_upcalls.
 *
 * Peers are untrusted.  An arrival's connection is the one whose QP it came
 * in on (ibf_rdm_qp_conn), never what its bytes say; a connection request
 * must come from the host of the name it claims, and one naming a peer with
 * a live connection is refused (BUSY) while a PING finds out whether that
 * connection's peer is still there.
 *
 * Threads and locks: the endpoint's thread (ibf_rdm_cm.c) takes every
 * rdma_cm event under ep->cm_lock.  The data path reads conn->state,
 * conn->id, conn->qp_num and conn->credits atomically, without cm_lock, and
 * takes cm_lock only on the slow path (a connection not up).  Lock order:
 * ep->lock, then cm_lock.  Work for the application the thread finds (ops
 * of a failed connection) waits in ep->failed until progress
 * (ibf_rdm_cm_deliver), since the thread never touches a CQ.
 */
#ifndef IBF_RDM_CONN_H
#define IBF_RDM_CONN_H

#include <string.h>

#include "ibf_rdm_op.h"

/* Requested keys of one peer remembered: most applications use a few. */
#define IBF_RDM_KEY_CACHE 8

/*
 * Requests accepted and not yet established, at most: each holds a QP.
 * More are refused as BUSY, which the requester retries with backoff, so a
 * flood of requests costs the flooder, not the endpoint's memory.
 */
#define IBF_RDM_MAX_ACCEPTING 256

#define IBF_CONN_CHUNK 256
#define IBF_CONN_DIRS 256	/* at most 65536 connections per endpoint */
enum ibf_conn_state {
	IBF_CONN_IDLE,		/* never connected, or given up */
	IBF_CONN_CONNECTING,	/* our connect request is out */
	IBF_CONN_WAITING,	/* we lost a simultaneous connect: theirs comes */
	IBF_CONN_ACCEPTING,	/* we accepted theirs */
	IBF_CONN_CONNECTED,
	IBF_CONN_RETRY,		/* refused or unreachable: trying again later */
	IBF_CONN_STATES
};

struct ibf_rdm_conn {
	struct ibf_rdm_ep_conns *ep;
	uint32_t index;		/* in ep->conns; our id in headers to us */
	enum ibf_conn_state state;	/* CONNECTED read atomically */
	struct ibf_name name;
	fi_addr_t fi_addr;	/* FI_ADDR_NOTAVAIL until found in the AV */
	struct rdma_cm_id *id;	/* the connection (with its QP) */
	struct rdma_cm_id *loser;	/* our connect that lost the tie-break */
	struct ibf_rdm_op *queue_head, *queue_tail;	/* waiting to be posted */
	int self;		/* the accepting half of a connection to ourselves */
	uint32_t epoch;		/* counts deaths: RTS waiters of an old life fail */
	/*
	 * Send queue slots free on this connection's QP (atomic): each post
	 * takes one, each send-side completion of this life gives it back.
	 * Reads and answers that found none wait in "stalled" (ep->lock).
	 */
	int credits;
	struct ibf_rdm_op *stalled_head, *stalled_tail;
	int established;	/* its QP is up (cm_lock; read as a hint) */
	/*
	 * The number of its current QP (atomic; 0 between lives).  Arrivals
	 * find their connection by QP (ep->qp_map), never by what the peer
	 * wrote; one on an earlier QP of the connection is still delivered
	 * (the sender was told it was), but is of a life that has ended.
	 */
	uint32_t qp_num;
	/*
	 * The peer's key in the matcher: one per name (the connecting and
	 * accepting records of a connection to ourselves share it).
	 */
	uint64_t peer_key;
	/*
	 * A request named this connection's peer while it was up: a PING
	 * (one at a time, state atomic) finds out whether the peer is still
	 * there; if not, its failure ends the connection.
	 */
	struct ibf_rdm_op *probe;
	struct ibf_rdm_hdr probe_hdr;
	/* Connecting to a peer not there yet (cm_lock): when to give up,
	 * when to try next, and the pause after that. */
	uint64_t retry_until_ns, retry_at_ns;
	uint64_t retry_first_ns;	/* this round of attempts began */
	uint64_t step_ns;	/* the attempt's last step was taken */
	uint32_t retry_pause_ms;
	struct ibf_rdm_conn *name_next;	/* in ep->by_name (cm_lock) */
	uint32_t ngraves;	/* its ids not destroyed yet (cm_lock) */
	uint32_t gen;		/* uses of the record: part of peer_key */
	/*
	 * The protocol's (ep->lock): the sequence of our last write with a
	 * notice on this connection, and the peer's last such write seen
	 * here (its QP, sequence, length), which its notice must match.
	 */
	uint32_t wimm_sent;
	/*
	 * Requested keys (ibf_rdm_rma.c; ep->lock): the peer's regions we
	 * learned, each for the life it was told in, forgotten when the
	 * peer's key generation changes; round robin.
	 */
	struct ibf_rdm_key_map {
		uint64_t key, base, len;
		uint32_t rkey, access, life;
		int valid;
	} keys[IBF_RDM_KEY_CACHE];
	int key_next;
	uint16_t peer_key_gen;
	struct {
		uint32_t qp_num, seq;
		uint64_t len;
		int valid;
	} wimm_seen;
	int reclaimed;		/* in ep->conn_free, for the next peer */
	int reclaim_mark;	/* ibf_rdm_conns_reclaim's */
	/*
	 * Flow control (ibf_rdm_flow.c; wire format in ibf_rdm_wire.h).
	 * As sender: requests we may still send this life (atomic; set by
	 * the connection thread as a life starts, from the peer's private
	 * data), and the most the peer said it takes.
	 */
	int window;
	int window_max;
	/* The peer counts RMA that lands in it (FI_RMA_EVENT): our RMA to it
	 * carry a notice (the connection thread sets it as a life starts). */
	int peer_rma_event;
	/* As receiver (ep->lock): requests the peer may still send in life
	 * rx_life - 1 (0: none seen yet), credits it earned that are not
	 * granted yet, how many make a grant in that life (set with
	 * rx_life), and our grant op (one in flight at a time). */
	int rx_left;
	uint32_t rx_life;
	uint32_t owed;
	uint32_t grant_batch;
	struct ibf_rdm_op *grant;
	/* A grant was due but could not be posted (no send-queue slot): the
	 * next send completion on conn tries again. */
	int grant_stuck;
	/* The protocol's (ep->lock): the peer's requests we hold now. */
	uint32_t held;
	/* ep->use_tick when last sent to or heard from, or accepted
	 * (atomic). */
	uint32_t last_use;
};


/* Drains out at once; the CQ has room for them beyond the ops' needs. */
#define IBF_RDM_DRAINS 32

/* A dead id, until its QP is drained and both are destroyed
 * (ibf_rdm_grave.c). */
struct ibf_rdm_grave {
	struct ibf_rdm_op drain;	/* state IBF_RDM_DRAIN */
	struct rdma_cm_id *id;
	struct ibf_rdm_conn *conn;	/* NULL: no connection's (a refusal) */
	int drained;		/* atomic: nothing of it is left in the CQ */
	int waiting;		/* for its drain to be posted (the budget) */
	int stuck;		/* the drain could not be posted: at close */
	struct ibf_rdm_grave *next;
};

/*
 * QP number -> connection, for every QP of the endpoint's connections not
 * destroyed yet.  Written by the connection thread under cm_lock, read by
 * progress without it: slots are single 64-bit words; a destroyed QP's
 * slot becomes a tombstone, which lookups step over; a table that fills
 * (live and tombstones) is replaced by a fresh one sized for what lives,
 * and the old one is freed by progress at its next call, when no lookup
 * can still be in it (progress calls never overlap: the endpoint's lock or
 * the application's threading level sees to that).
 */
#define IBF_QP_MAP_TOMB UINT64_MAX	/* no QP number is 0xffffffff */
struct ibf_qp_map {
	uint64_t *slot;		/* qp_num << 32 | (conn index + 1); 0: empty */
	uint32_t mask;
	uint32_t live, used;	/* QPs in it; and with tombstones */
	struct ibf_qp_map *retired;	/* replaced, to be freed */
};

/*
 * The connection layer's part of the endpoint (ibf_rdm_conn.c,
 * ibf_rdm_cm.c, ibf_rdm_post.c, ibf_rdm_flow.c, ibf_rdm_grave.c,
 * ibf_rdm_qpmap.c), over
 * the operations layer's (ibf_rdm_op.h says how the parts nest).
 */
#define IBF_RDM_EP_CONNS_FIELDS \
	IBF_RDM_PART(ibf_rdm_ep_ops, as_ops, IBF_RDM_EP_OPS_FIELDS); \
	struct ibf_av *av;	/* peers' names by fi_addr */ \
	int rma_event;		/* FI_RMA_EVENT: told to peers at connect */ \
	int auto_progress;	/* FI_PROGRESS_AUTO: the thread progresses too */ \
	struct ibv_comp_channel *channel_cq;	/* if a user CQ can wait */ \
	uint32_t max_inline;	/* learnt from the first QP */ \
	uint32_t max_read;	/* the port's max_msg_sz: one READ at most */ \
	struct rdma_event_channel *channel; \
	struct rdma_cm_id *listen_id; \
	struct ibf_name name; \
	size_t namelen; \
	pthread_t cm_thread; \
	int cm_thread_started; \
	int stop_fd;		/* eventfd: tells the thread to exit */ \
	pthread_mutex_t cm_lock; \
	int cm_pending;		/* atomic: the thread left work for progress */ \
	uint32_t nstate[IBF_CONN_STATES];	/* in each state (cm_lock) */ \
	/* The slowest step of a connect attempt lately, and when it was \
	 * seen: how busy this endpoint's CM is (cm_lock, ibf_rdm_cm.c). */ \
	uint64_t cm_lag_ns, cm_lag_at_ns; \
	struct ibf_rdm_list failed;	/* ops whose connection failed */ \
	int dead_seen;		/* a connection died: RTS waiters to fail */ \
	/* Connections by index, in chunks that never move, so the CQ \
	 * reads them without the thread's lock. */ \
	struct ibf_rdm_conn **conn_dir[IBF_CONN_DIRS]; \
	uint32_t nconns;	/* atomic */ \
	struct ibf_rdm_conn **peers;	/* by fi_addr; the data path's */ \
	struct ibf_qp_map *qp_map;	/* atomic pointer */ \
	struct ibf_rdm_conn *conn_free;	/* reclaimed records (cm_lock) */ \
	int reclaim_due;	/* a record may be reclaimable (cm_lock) */ \
	/* A peer was refused at FI_IBFAB_RDM_MAX_CONNS: progress closes \
	 * the least recently used idle connection (cm_lock). */ \
	int cap_due; \
	uint32_t use_tick;	/* counts uses: conn->last_use (atomic) */ \
	/* Connections by peer name, chained (cm_lock); self halves not. */ \
	struct ibf_rdm_conn **by_name; \
	uint32_t by_name_mask; \
	size_t npeers; \
	struct ibf_rdm_grave *graves;	/* dead ids not destroyed (cm_lock) */ \
	/* The accepting half of a connection to ourselves, and its \
	 * record's use (gen) then: at most one alive (cm_lock). */ \
	struct ibf_rdm_conn *self_conn; \
	uint32_t self_gen; \
	int wake_fd;		/* eventfd: graves to destroy */ \
	int drains_out;		/* atomic: graves' drains posted, not seen */ \
	uint32_t sq_depth; \
	int sq_posted;		/* atomic: send-side requests not completed */ \
	int post_trace;		/* each post logged (FI_LOG_LEVEL=debug) */

struct ibf_rdm_ep_conns {
	IBF_RDM_EP_CONNS_FIELDS
};

/* The connection layer's endpoint, from the part an op names. */
static inline struct ibf_rdm_ep_conns *ibf_rdm_conns_of(struct ibf_rdm_ep_ops *ep)
{
	return container_of(ep, struct ibf_rdm_ep_conns, as_ops);
}

/* ---- for the layers above ---- */

/* Listen on info's src_addr (fi_endpoint), start the endpoint's thread
 * (fi_enable), stop it and disconnect every peer (every QP ends in the
 * error state), destroy QPs, ids and the channel (after the CQs are
 * drained). */
int ibf_rdm_cm_listen(struct ibf_rdm_ep_conns *ep, const struct fi_info *info);
int ibf_rdm_cm_start(struct ibf_rdm_ep_conns *ep);
/* The thread's two steps (cm_lock held), also driven by the unit tests:
 * one rdma_cm event taken; the connections' timers that are due fired,
 * answering how long it may sleep before the next (ms), or -1. */
void ibf_rdm_cm_event(struct ibf_rdm_ep_conns *ep, struct rdma_cm_event *ev);
int ibf_rdm_timers_due(struct ibf_rdm_ep_conns *ep);
void ibf_rdm_cm_stop(struct ibf_rdm_ep_conns *ep);
void ibf_rdm_cm_destroy(struct ibf_rdm_ep_conns *ep);

/* The connection to the peer at addr, made or being made (ep->lock held;
 * the data path's ep->peers[addr] caches it). */
int ibf_rdm_conn_get(struct ibf_rdm_ep_conns *ep, fi_addr_t addr,
		     struct ibf_rdm_conn **conn);
/* Send op, built whole in op->mem (wire_len bytes, tx_state set): posted
 * now if conn is up, else queued while conn (re)connects, or until the
 * peer grants a request beyond its window; -FI_EAGAIN when the send
 * queue is full. */
ssize_t ibf_rdm_conn_send(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
/* ---- posting (ibf_rdm_post.c) ---- */

/*
 * The one post to a connection's send queue: work requests wr[0..n) (n
 * 1 or 2, filled by ibf_rdm_wr_init and the caller) for op, chained, on
 * conn's life epoch, loaded by the caller before this loads conn's QP.
 * Each takes a slot (credit), but the first held the caller took.
 * Returns n; or, when the device took only the first of two, 1 with
 * op->read_err set; or -FI_EAGAIN (no slot, or the queue is full),
 * -FI_ENOTCONN (conn has no QP: it ended, perhaps since the caller saw it
 * connected; held slots are given back), -FI_E* (the device refused).
 * Traced at FI_LOG_LEVEL=debug.
 */
int ibf_rdm_post(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		 struct ibv_send_wr *wr, int n, int held, uint32_t epoch);
/* What a device reads of a work request for a send; wr_id and next are
 * ibf_rdm_post's, an RDMA one's wr.rdma the caller's.  Never zeroed whole:
 * see ibf_rdm_post.c. */
static inline void ibf_rdm_wr_init(struct ibv_send_wr *wr,
				   enum ibv_wr_opcode opcode,
				   struct ibv_sge *sge, int nsge,
				   unsigned int flags)
{
	wr->sg_list = sge;
	wr->num_sge = nsge;
	wr->opcode = opcode;
	wr->send_flags = flags;
	wr->imm_data = 0;
}
/* Post a send whose header is in op->mem: 0 or as ibf_rdm_post. */
int ibf_rdm_post_send(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		      struct ibv_sge *sge, int nsge, int inl);
/* Send op, built whole in op->mem, in the state the protocol gave: 0, or
 * -FI_EAGAIN also when op is a request and the peer's window is spent. */
int ibf_rdm_post_built(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
/* Post the next part of RMA op (ibf_rdm_op.h), one that is not its first,
 * on the connection life its first went on: 0, -FI_EAGAIN when conn's send
 * queue is full, -FI_ECONNABORTED when that life ended. */
int ibf_rdm_post_rma_next(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
/* Post an RDMA READ of the peer's (addr, rkey) into sge for op on conn
 * (the caller took a slot, which a failure gives back): 0 or as
 * ibf_rdm_post. */
int ibf_rdm_post_read(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		      struct ibv_sge *sge, int nsge, uint64_t addr,
		      uint32_t rkey);
/* Whether op is a request (ibf_rdm_wire.h): a message, an atomic or a
 * KEYQ, or a write with a notice behind it; each takes a credit of the
 * peer's (an RMA in parts at its first post). */
static inline int ibf_rdm_is_request(const struct ibf_rdm_op *op)
{
	return op->wr_kind == IBF_RDM_WR_SEND || op->wr_kind == IBF_RDM_WR_KEYQ ||
	       (op->rma_notify && op->wr_kind != IBF_RDM_WR_READ);
}

/* Take one from a count other threads also take from: 1, or 0 if it is
 * at 0. */
static inline int ibf_rdm_take_one(int *count)
{
	int c = __atomic_load_n(count, __ATOMIC_RELAXED);

	while (c > 0)
		if (__atomic_compare_exchange_n(count, &c, c - 1, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
	return 0;
}
/* Take a send queue slot of conn's QP: 1, or 0 if there is none. */
static inline int ibf_rdm_credit_take(struct ibf_rdm_conn *conn)
{
	return ibf_rdm_take_one(&conn->credits);
}
/* Give back n slots taken for posts that did not happen. */
void ibf_rdm_credit_give(struct ibf_rdm_conn *conn, int n);

/* ---- flow control (ibf_rdm_flow.c) ---- */

/* Take a credit to send conn's peer a request: 1, or 0 if there is none
 * (the caller says -FI_EAGAIN; a grant brings more). */
static inline int ibf_rdm_window_take(struct ibf_rdm_conn *conn)
{
	return ibf_rdm_take_one(&conn->window);
}
void ibf_rdm_window_untake(struct ibf_rdm_conn *conn);
/* A life of conn starts: the peer takes window requests before a grant
 * (its private data's word; connection thread, cm_lock held). */
void ibf_rdm_window_set(struct ibf_rdm_conn *conn, uint32_t window);
/* A life of conn starts: whether the peer counts RMA landing in it (its
 * private data's flags; connection thread, cm_lock held). */
static inline void ibf_rdm_peer_events_set(struct ibf_rdm_conn *conn,
					   uint32_t flags)
{
	__atomic_store_n(&conn->peer_rma_event,
			 !!(flags & IBF_RDM_CM_F_RMA_EVENT), __ATOMIC_RELAXED);
}
/* The window this endpoint gives each peer (its private data's). */
uint32_t ibf_rdm_window_ours(const struct ibf_rdm_ep_conns *ep);
/* A grant of n credits came on conn's QP in life epoch. */
void ibf_rdm_grant_arrived(struct ibf_rdm_conn *conn, uint32_t epoch, uint32_t n);
/* A request came from conn's peer in life epoch: 0, or -FI_EIO if it
 * had no credit for it (the caller ends the connection). */
int ibf_rdm_request_arrived(struct ibf_rdm_conn *conn, uint32_t epoch);
/* The peer earned n credits back in life epoch: granted once enough are
 * owed to be worth a message. */
void ibf_rdm_credit_owe(struct ibf_rdm_conn *conn, uint32_t epoch, uint32_t n);
/* conn's grant op (op, in state IBF_RDM_GRANT) has completed. */
void ibf_rdm_grant_done(struct ibf_rdm_op *op);
/* conn's send queue has a slot again: what is owed may go now. */
void ibf_rdm_grant_retry(struct ibf_rdm_conn *conn);
/* conn's queue may go on: it has slots and credits again (ep->lock). */
void ibf_rdm_queue_resume(struct ibf_rdm_conn *conn);
/* Park op until conn has a free slot (ibf_rdm_upcalls.slots_freed). */
void ibf_rdm_stall(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
/* Take the first stalled op of conn while conn has a slot or has ended;
 * NULL if none may go. */
struct ibf_rdm_op *ibf_rdm_unstall_next(struct ibf_rdm_conn *conn);

/* A send-side completion (or flush) of op, with status: its slot back,
 * what waited for one goes on, and a failure other than a flush ends the
 * connection's life it was posted in.  Returns 1 if op was the connection
 * layer's own (a PING, a drain), which the caller leaves alone. */
int ibf_rdm_send_done(struct ibf_rdm_op *op, enum ibv_wc_status status);

/* The connection whose QP (now or in an earlier life) qp_num is; NULL if
 * none of ours. */
struct ibf_rdm_conn *ibf_rdm_qp_conn(struct ibf_rdm_ep_conns *ep,
				     uint32_t qp_num);
/* The connection's life an arrival on qp_num belongs to. */
uint32_t ibf_rdm_arrival_epoch(struct ibf_rdm_conn *conn, uint32_t qp_num);
/* A work request of conn's life epoch failed, or was flushed while that
 * life was on: its QP is in error for good, so that life ends (ep->lock
 * held). */
void ibf_rdm_conn_broken(struct ibf_rdm_conn *conn, uint32_t epoch, int err);
/* conn's life now (the thread ends lives under cm_lock; the data path
 * reads it without). */
static inline uint32_t ibf_rdm_conn_epoch(struct ibf_rdm_conn *conn)
{
	return __atomic_load_n(&conn->epoch, __ATOMIC_ACQUIRE);
}
/* Whether a life of conn has ended. */
static inline int ibf_rdm_epoch_over(struct ibf_rdm_conn *conn, uint32_t epoch)
{
	return epoch != __atomic_load_n(&conn->epoch, __ATOMIC_ACQUIRE);
}
/* The peer's fi_addr (FI_SOURCE), looked up in the AV when first needed. */
fi_addr_t ibf_rdm_conn_addr(struct ibf_rdm_conn *conn);
struct ibf_rdm_conn *ibf_rdm_conn_at(struct ibf_rdm_ep_conns *ep,
				     uint32_t index);

/* Progress: complete what the thread left (ops of failed connections),
 * free the QP maps it replaced, tell the layer above of ended connections
 * (CQ lock, not ep->lock).  The thread sets ep->cm_pending for each. */
void ibf_rdm_cm_deliver(struct ibf_rdm_ep_conns *ep);

/* ---- between ibf_rdm_conn.c and ibf_rdm_cm.c (cm_lock held) ---- */

struct ibf_rdm_conn *ibf_rdm_conn_new(struct ibf_rdm_ep_conns *ep,
				      const struct ibf_name *name, int self);
struct ibf_rdm_conn *ibf_rdm_conn_find(struct ibf_rdm_ep_conns *ep,
				       const struct ibf_name *name);
/*
 * The private data of a peer's connection request (from peer), accept
 * (for a connection to want) and reject: checked before anything of it
 * is used, copied out (the event's bytes may be unaligned).  0, or
 * -FI_EINVAL (not ibfab's, cut short) or -FI_EACCES (a request naming
 * another host or no key; an accept from another endpoint than want).
 */
int ibf_rdm_cm_request_parse(const void *pd, size_t len,
			     const struct sockaddr *peer, struct ibf_rdm_cm_data *d);
int ibf_rdm_cm_accept_parse(const void *pd, size_t len,
			    const struct ibf_name *want, struct ibf_rdm_cm_data *d);
/* The magic a reject carries (IBF_RDM_CM_TIEBREAK, _BUSY, _REFUSED), or 0. */
uint32_t ibf_rdm_cm_reject_parse(const void *pd, size_t len);
/* The record a request from the keyed name belongs to: its own, or one
 * the application made for the plain address it is at (which learns the
 * key); NULL if none. */
struct ibf_rdm_conn *ibf_rdm_conn_claim(struct ibf_rdm_ep_conns *ep,
					const struct ibf_name *name);
/* conn's QP on id, made its current one (arrivals on it are conn's). */
int ibf_rdm_qp_create(struct ibf_rdm_conn *conn, struct rdma_cm_id *id);

/* ibf_rdm_qpmap.c.  cm_lock held: qp_num is conn's new QP (0 or
 * -FI_ENOMEM). */
int ibf_rdm_qp_map_set(struct ibf_rdm_ep_conns *ep, uint32_t qp_num,
		       struct ibf_rdm_conn *conn);
/* qp_num's QP is destroyed: arrivals can no longer name it. */
void ibf_rdm_qp_map_del(struct ibf_rdm_ep_conns *ep, uint32_t qp_num);
/* cm_lock held, by progress before it looks anything up: the tables
 * replaced before, taken off for the caller to free with
 * ibf_rdm_qp_maps_free. */
struct ibf_qp_map *ibf_rdm_qp_maps_retired(struct ibf_rdm_ep_conns *ep);
void ibf_rdm_qp_maps_free(struct ibf_qp_map *m);
/* At close: the table and every table it replaced. */
void ibf_rdm_qp_map_free(struct ibf_rdm_ep_conns *ep);

/* ibf_rdm_grave.c.  Done with id (of conn, or NULL): its QP to the error
 * state and drained, then id and QP destroyed by the thread. */
void ibf_rdm_bury(struct ibf_rdm_ep_conns *ep, struct rdma_cm_id *id,
		  struct ibf_rdm_conn *conn);
void ibf_rdm_grave_drained(struct ibf_rdm_op *drain);
void ibf_rdm_grave_wake(struct ibf_rdm_ep_conns *ep);
int ibf_rdm_graves_reap(struct ibf_rdm_ep_conns *ep);
void ibf_rdm_graves_destroy(struct ibf_rdm_ep_conns *ep);
/* Records nothing names any more go back for reuse (progress, ep->lock
 * and cm_lock held). */
void ibf_rdm_conns_reclaim(struct ibf_rdm_ep_conns *ep);
/* At FI_IBFAB_RDM_MAX_CONNS: close the least recently used connection
 * that nothing is in flight or waiting on, if any (progress, ep->lock and
 * cm_lock held). */
void ibf_rdm_conns_cap(struct ibf_rdm_ep_conns *ep);
/* An fi_addr went out of the AV: its record may be reusable; the next
 * progress looks (ep->lock held). */
void ibf_rdm_conns_reclaim_soon(struct ibf_rdm_ep_conns *ep);
/* Tell progress (and CQs that wait) the thread left work for it. */
void ibf_rdm_set_pending(struct ibf_rdm_ep_conns *ep);
/* conn goes to state; ep->nstate counts them (cm_lock held).  The one
 * writer of conn->state: a debug log line names each change. */
void ibf_rdm_conn_state(struct ibf_rdm_conn *conn, enum ibf_conn_state state);
/* A state's name, for logs. */
const char *ibf_conn_state_name(enum ibf_conn_state state);
/* Whether a connection may go from one state to the other (the table of
 * its life, ibf_rdm_conn.c; asserted by ibf_rdm_conn_state). */
int ibf_conn_move_ok(enum ibf_conn_state from, enum ibf_conn_state to);
/* The connection is over: what waits on it fails with err. */
void ibf_rdm_conn_fail(struct ibf_rdm_conn *conn, int err);
/* End conn's life but keep its queue, for a new connection (cm_lock). */
void ibf_rdm_conn_reset(struct ibf_rdm_conn *conn);
/* Established: post the queue, then let senders post directly. */
void ibf_rdm_conn_flush(struct ibf_rdm_conn *conn);
/* Start connecting conn: the first of its attempts (ibf_rdm_cm.c). */
int ibf_rdm_conn_start(struct ibf_rdm_conn *conn);
/* Is conn's peer still there?  A PING finds out. */
void ibf_rdm_probe(struct ibf_rdm_conn *conn);

/* ---- inline, for every layer ---- */

/* Whether conn is either half of a connection to ep itself. */
static inline int ibf_rdm_conn_to_self(const struct ibf_rdm_ep_conns *ep,
				       const struct ibf_rdm_conn *conn)
{
	return conn->self || !memcmp(&conn->name, &ep->name, sizeof(ep->name));
}

/* Note a use of conn (a send to or an arrival from its peer), for the
 * choice of the least recently used at FI_IBFAB_RDM_MAX_CONNS. */
static inline void ibf_rdm_conn_used(struct ibf_rdm_conn *conn)
{
	/* Atomic words (plain moves on x86): the connection thread reads
	 * the tick when it accepts a peer. */
	uint32_t t = __atomic_load_n(&conn->ep->use_tick, __ATOMIC_RELAXED) + 1;

	__atomic_store_n(&conn->ep->use_tick, t, __ATOMIC_RELAXED);
	__atomic_store_n(&conn->last_use, t, __ATOMIC_RELAXED);
}

#endif /* IBF_RDM_CONN_H */
