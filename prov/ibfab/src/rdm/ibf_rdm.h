/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM: reliable, connectionless endpoints, natively on RC.
 *
 * An RDM endpoint listens on an rdma_cm port of its own; fi_getname gives
 * that address (a sockaddr), which peers insert into their AV.  The first
 * operation to a peer connects an RC QP to it; operations issued while it
 * forms wait in the connection's queue.  Every QP of the endpoint receives
 * through one SRQ of eager buffers ("bounces"), so memory does not grow
 * with the number of peers, and completes to the endpoint's CQs.
 *
 * The engine is in layers; each calls only the ones below it and core
 * (prov/ibfab/layers, checked by util/ibfab-layers), and each header
 * states its contract, locking and ownership:
 *
 *   API                ibf_rdm_ep.c (life cycle), ibf_rdm_sendrecv.c (fi_msg,
 *                      fi_tagged), ibf_rdm_rma_api.c (fi_rma),
 *                      ibf_rdm_atomic_api.c (fi_atomic): check arguments,
 *                      then call down (sends, RMA and atomics all through
 *                      ibf_rdm_submit)
 *   protocol           ibf_rdm_proto.h: ibf_rdm_submit, eager, RTS, READ,
 *                      FIN, progress (ibf_rdm_proto.c, ibf_rdm_rndv.c); RMA
 *                      (ibf_rdm_rma.c) and atomics (ibf_rdm_atomic.c)
 *   connections        ibf_rdm_conn.h: peers, QPs, credits, queues, the
 *                      one post path (ibf_rdm_post.c), flow control
 *                      (ibf_rdm_flow.c),
 *                      connect/accept/retry/teardown; reports up through
 *                      struct ibf_rdm_upcalls only
 *   operations         ibf_rdm_op.h: op pools, bounces, completion
 *   wire format        ibf_rdm_wire.h
 *   (core)             the matcher (ibf_match.h), the AV and names
 *                      (ibf_av.h), CQs, counters, MRs (ibf.h)
 *
 * The endpoint below holds every layer's state; each group of fields says
 * whose it is, and only that layer's file writes it.
 *
 * Threads: connections are made by a thread per endpoint (ibf_rdm_cm.c),
 * which blocks on the rdma_cm channel, so that neither the data path nor
 * the CQ ever makes a system call for them.  The thread and the data path
 * meet under ep->cm_lock, only on the slow path (a connection not up).
 * Everything else is guarded by ep->lock, taken only when the threading
 * level needs it; the CQ takes its lock first, then ep->lock.
 */
#ifndef IBF_RDM_H
#define IBF_RDM_H

#include "ibf.h"
#include "ibf_av.h"
#include "ibf_match.h"
#include "ibf_rdm_proto.h"

struct ibf_rdm_ep;

struct ibf_rdm_ep {
	/* ---- endpoint (ibf_rdm_ep.c) ---- */
	struct ibf_ep_base base;	/* fid, CQs, counters, op flags */
	struct ibf_progress hook;	/* how CQs and counters progress it */
	struct ibf_av *av;
	struct ibf_av_user av_user;	/* hears of removed addresses */
	struct ibf_lock lock;	/* the data path's, by threading level */
	int rma_event;		/* FI_RMA_EVENT: RMA tells its target */
	int atomic_target;	/* FI_ATOMIC: peers' atomics are applied */
	int event_added;	/* in its domain's event endpoints */
	size_t inject_size;
	size_t eager_size;
	size_t tx_iov_limit, rx_iov_limit;
	size_t min_multi_recv;	/* FI_OPT_MIN_MULTI_RECV */
	struct ibv_srq *srq;
	/* All QPs complete here; the user's CQs progress it when read. */
	struct ibv_cq *hcq;
	struct ibv_comp_channel *channel_cq;	/* if a user CQ can wait */
	unsigned cq_events;	/* taken, not yet acked */
	int auto_progress;	/* FI_PROGRESS_AUTO: the thread progresses too */
	int soft_reserved;
	const struct ibf_rdm_upcalls *up;	/* the layers' way up */
	/* The CQ read running progress now, or NULL (under lock). */
	struct ibf_cq_sink *sink;

	/* ---- connections (ibf_rdm_conn.c, ibf_rdm_cm.c) ---- */
	uint32_t max_inline;	/* learnt from the first QP */
	uint32_t max_read;	/* the port's max_msg_sz: one READ at most */
	struct rdma_event_channel *channel;
	struct rdma_cm_id *listen_id;
	struct ibf_name name;
	size_t namelen;
	pthread_t cm_thread;
	int cm_thread_started;
	int stop_fd;		/* eventfd: tells the thread to exit */
	pthread_mutex_t cm_lock;
	int cm_pending;		/* atomic: the thread left work for progress */
	uint32_t nstate[IBF_CONN_STATES];	/* connections in each state (cm_lock) */
	struct ibf_rdm_list failed;	/* ops whose connection failed */
	int dead_seen;		/* a connection died: RTS waiters to fail */
	/*
	 * Connections by index, in chunks that never move, so the CQ reads
	 * them without the thread's lock.
	 */
	struct ibf_rdm_conn **conn_dir[IBF_CONN_DIRS];
	uint32_t nconns;	/* atomic */
	struct ibf_rdm_conn **peers;	/* by fi_addr; the data path's */
	struct ibf_qp_map *qp_map;	/* atomic pointer */
	struct ibf_rdm_conn *conn_free;	/* reclaimed records (cm_lock) */
	int reclaim_due;	/* a record may be reclaimable (cm_lock) */
	/* A peer was refused at FI_IBFAB_RDM_MAX_CONNS: progress closes the
	 * least recently used idle connection (cm_lock). */
	int cap_due;
	uint32_t use_tick;	/* counts uses: conn->last_use (atomic) */
	/* Connections by peer name, chained (cm_lock); self halves not. */
	struct ibf_rdm_conn **by_name;
	uint32_t by_name_mask;
	size_t npeers;
	struct ibf_rdm_grave *graves;	/* dead ids not destroyed yet (cm_lock) */
	/* The accepting half of a connection to ourselves, and its record's
	 * use (gen) then: at most one alive (cm_lock). */
	struct ibf_rdm_conn *self_conn;
	uint32_t self_gen;
	int wake_fd;		/* eventfd: graves to destroy */
	int drains_out;		/* atomic: graves' drains posted, not seen */
	uint32_t sq_depth;
	int sq_posted;		/* atomic: send-side requests not completed */
	int post_trace;		/* each post logged (FI_LOG_LEVEL=debug) */

	/* ---- operations (ibf_rdm_op.c) ---- */
	/* Sends, receives, bounces; one registered area. */
	struct ibf_rdm_op *ops;
	uint32_t ntx, nrx, nbounce;
	uint8_t *mem;
	struct ibv_mr *mem_mr;
	size_t slot;		/* header + eager payload + note */
	size_t note_off;	/* where an RMA notice's note sits in a slot */
	struct ibf_rdm_op *tx_free, *rx_free;
	uint64_t dropped;	/* arrivals that did not fit: never acted on */
	/* Bounces: nbounce in the SRQ; spares replace those holding messages. */
	uint32_t srq_posted;
	struct ibf_rdm_op *spare;
	struct ibf_rdm_chunk *chunks;	/* the extra bounces, allocated */
	uint32_t nextra, extra_max;	/* FI_IBFAB_RDM_UNEXP_MAX */
	int hcq_need;		/* entries hcq must have: grows with nextra */

	/* ---- protocol (ibf_rdm_proto.c, ibf_rdm_rndv.c) ---- */
	/* Posted receives and held messages (bounces), untagged and tagged. */
	struct ibf_mq recv_msg, recv_tag;
	struct ibf_mq unexp_msg, unexp_tag;
	/*
	 * Set when messages for a posted multi-receive buffer found no op
	 * free to report them: they wait in unexp_msg, in order, for freed
	 * ops.  Cleared by the drain that finds none left.
	 */
	int multi_waiting;
	int multi_draining;
	/* Remote CQ data that found no receive op free to carry it. */
	struct ibf_rdm_list wdata_wait;
	/* Peers' requests held now (each peer's: conn->held): a peer is
	 * granted credits early while it holds at most half of the eager
	 * buffers the others leave (ibf_rdm_proto.c, ibf_rdm_share). */
	uint32_t held;
	/* What one-sided work the endpoint did, said at close (FI_LOG_LEVEL
	 * info): how a user sees that RMA and atomics went through ibfab. */
	struct {
		uint64_t writes, reads, atomics, atomics_applied;
	} stats;
};

/* Extra bounces are added this many at a time. */
#define IBF_RDM_CHUNK 64

/* A bounce has left the SRQ with an arrival. */
/* Our domain's key generation, for the headers we build (ibf_rdm_wire.h):
 * it moves when a region with a requested key closes. */
static inline uint16_t ibf_rdm_key_gen(const struct ibf_rdm_ep *ep)
{
	return (uint16_t)__atomic_load_n(&ep->base.domain->key_gen,
					 __ATOMIC_ACQUIRE);
}

static inline void ibf_rdm_bounce_arrived(struct ibf_rdm_ep *ep)
{
	ep->srq_posted--;
}

/* Progress: free the QP maps replaced since the last call.  One atomic
 * load when there are none (the common case, inline on every poll). */
static inline void ibf_rdm_qp_map_retire(struct ibf_rdm_ep *ep)
{
	struct ibf_qp_map *m = __atomic_load_n(&ep->qp_map, __ATOMIC_ACQUIRE);

	if (unlikely(m && __atomic_load_n(&m->retired, __ATOMIC_RELAXED)))
		ibf_rdm_qp_map_free_retired(ep);
}

/* Whether conn is either half of a connection to ep itself. */
static inline int ibf_rdm_conn_to_self(const struct ibf_rdm_ep *ep,
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

/* Reads in flight per receive: enough to keep the link busy, few enough
 * that the send queues need not grow with the message size. */
#define IBF_RDM_READS 2

/*
 * Send-side work requests an endpoint can have at once, on one QP or all:
 * every send, IBF_RDM_READS reads per receive, a FIN per bounce.  Each QP's
 * send queue and the send CQ are sized by it, so neither can overflow.
 */
static inline size_t ibf_rdm_sq_need(const struct ibf_rdm_ep *ep)
{
	return (size_t)ep->ntx + IBF_RDM_READS * (size_t)ep->nrx + ep->nbounce;
}

static inline struct ibf_rdm_ep *to_ibf_rdm_ep(struct fid_ep *ep)
{
	return container_of(ep, struct ibf_rdm_ep, base.ep_fid);
}

/* ibf_rdm_ep.c */
int ibf_rdm_ep_open(struct fid_domain *domain, struct fi_info *info,
		    struct fid_ep **ep, void *context);

/* ibf_rdm_sendrecv.c */
extern struct fi_ops_msg ibf_rdm_msg_ops;
extern struct fi_ops_tagged ibf_rdm_tagged_ops;

/* ibf_rdm_rma_api.c */
extern struct fi_ops_rma ibf_rdm_rma_ops;

/* ibf_atomic_ops.c, through ibf_rdm_atomic_api.c */
extern struct fi_ops_atomic ibf_rdm_atomic_ops;

#endif /* IBF_RDM_H */
