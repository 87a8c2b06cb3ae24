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
 * Wire format: every message is [struct ibf_rdm_hdr][payload].
 *   EAGER  payload is the message (at most FI_IBFAB_EAGER_SIZE bytes)
 *   RTS    a larger message: where to read it (struct ibf_rdm_rts)
 *   FIN    the receiver has read it (struct ibf_rdm_fin)
 *   PING   nothing: is the peer still there? (its completion says)
 * Tags are matched in software, in posting order, against the receives the
 * application posted; what arrives first waits in its bounce (unexpected).
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
#include "ibf_match.h"

struct ibf_rdm_ep;

/* ---- address vector ---- */
/* An RDM endpoint's address: a sockaddr_in or sockaddr_in6, zero padded. */
#define IBF_ADDR_MAX sizeof(struct sockaddr_in6)
struct ibf_name {
	uint8_t bytes[IBF_ADDR_MAX];
};

struct ibf_av_shm;

struct ibf_av {
	struct fid_av av_fid;
	struct ibf_domain *domain;
	enum fi_av_type type;
	uint32_t addr_format;	/* FI_SOCKADDR_IN or FI_SOCKADDR_IN6 */
	size_t addrlen;
	pthread_mutex_t lock;	/* inserts and removes from any thread */
	struct ibf_name *names;
	uint8_t *used;
	/*
	 * Bound endpoints, through av_next, under eps_lock: fi_av_remove
	 * takes it, then each endpoint's lock; the data path takes its
	 * endpoint's lock, then av->lock: never the two AV locks nested.
	 */
	pthread_mutex_t eps_lock;
	struct ibf_rdm_ep *eps;
	size_t count, cap;	/* slots handed out, slots allocated */
	int ref;		/* endpoints bound */
	/* A named AV lives in shared memory: names, used and map are there. */
	struct ibf_av_shm *shm;
	size_t shm_len;
	char *shm_name;		/* set by the creator, who unlinks it */
	int readonly;		/* opened with FI_READ */
	/* FI_EVENT: each insert call's outcome is written to this EQ. */
	int events;
	struct ibf_eq *eq;
};
int ibf_av_open(struct fid_domain *domain, struct fi_av_attr *attr,
		struct fid_av **av, void *context);
/* The name at fi_addr: 0, or -FI_ENOENT if there is none. */
int ibf_av_name(struct ibf_av *av, fi_addr_t addr, struct ibf_name *name);
/* The fi_addr of a name, or FI_ADDR_NOTAVAIL. */
fi_addr_t ibf_av_find(struct ibf_av *av, const struct ibf_name *name);
/* Canonical name of a sockaddr (port and address only); 0 or -FI_EINVAL. */
int ibf_name_from_sockaddr(struct ibf_name *name, const struct sockaddr *sa,
			   size_t len);

/* ---- wire ---- */
enum { IBF_RDM_EAGER = 1, IBF_RDM_RTS, IBF_RDM_FIN, IBF_RDM_PING };
#define IBF_RDM_F_TAGGED 1
#define IBF_RDM_F_DATA 2
struct ibf_rdm_hdr {
	uint64_t tag;
	uint64_t data;
	uint32_t conn;		/* the receiver's index of this connection: a
				 * hint only, the receiver knows the sender by
				 * the QP the message came in on */
	uint8_t type;
	uint8_t flags;
	uint16_t rsvd;
};

#define IBF_RDM_IOV IBF_RDM_IOV_LIMIT
struct ibf_rdm_seg {
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	uint32_t rsvd;
};
struct ibf_rdm_rts {
	uint64_t len;		/* the whole message */
	uint32_t cookie;	/* the sender's op, echoed in the FIN */
	uint32_t nseg;
	struct ibf_rdm_seg seg[IBF_RDM_IOV];
};
struct ibf_rdm_fin {
	uint32_t cookie;
	int32_t status;		/* 0, or -FI_E* the reader met */
};

/* Private data of a connect request and its accept. */
struct ibf_rdm_cm_data {
	uint32_t magic;
	uint32_t conn;		/* the sender's index of this connection */
	struct ibf_name name;	/* the connecting endpoint's address */
};
#define IBF_RDM_CM_MAGIC 0x1bfad301u
#define IBF_RDM_CM_TIEBREAK 0x1bfad3ffu	/* reject: use my connection */
/* Reject: I have a live connection with the name you claim; try again
 * later (if that one was dead, it will have ended by then). */
#define IBF_RDM_CM_BUSY 0x1bfad3feu

/* ---- connections ---- */
#define IBF_CONN_CHUNK 256
#define IBF_CONN_DIRS 256	/* at most 65536 connections per endpoint */
enum ibf_conn_state {
	IBF_CONN_IDLE,		/* never connected, or given up */
	IBF_CONN_CONNECTING,	/* our connect request is out */
	IBF_CONN_WAITING,	/* we lost a simultaneous connect: theirs comes */
	IBF_CONN_ACCEPTING,	/* we accepted theirs */
	IBF_CONN_CONNECTED,
	IBF_CONN_RETRY,		/* refused or unreachable: trying again later */
};

struct ibf_rdm_op;
struct ibf_rdm_conn {
	struct ibf_rdm_ep *ep;
	uint32_t index;		/* in ep->conns; our id in headers to us */
	uint32_t remote;	/* the peer's index: goes in our headers */
	int state;		/* enum ibf_conn_state; CONNECTED read atomically */
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
	uint32_t retry_pause_ms;
};

/* ---- operations ---- */
enum ibf_rdm_op_state {
	IBF_RDM_FREE,
	IBF_RDM_TX,		/* eager send or FIN posted */
	IBF_RDM_TX_RTS,		/* RTS posted or acknowledged, FIN awaited */
	IBF_RDM_QUEUED,		/* waiting for its connection */
	IBF_RDM_RX_POSTED,	/* an application receive, not matched */
	IBF_RDM_RX_READ,	/* reading a rendezvous message into it */
	IBF_RDM_BOUNCE_POSTED,	/* an eager buffer in the SRQ */
	IBF_RDM_BOUNCE_HELD,	/* holds an unexpected or claimed message */
	IBF_RDM_BOUNCE_FIN,	/* sending a FIN from its buffer */
	IBF_RDM_DONE,		/* its completion waits in a CQ */
	IBF_RDM_PROBE,		/* a connection's PING, in flight */
};

struct ibf_rdm_op {
	struct ibf_op op;	/* what the CQ reports; kind IBF_OP_RDM */
	struct ibf_rdm_ep *ep;
	struct ibf_rdm_conn *conn;
	struct ibf_rdm_op *next, *prev;
	int state;		/* enum ibf_rdm_op_state */
	int is_bounce;
	uint8_t *mem;		/* registered: header + eager payload */
	/* An application receive. */
	struct iovec iov[IBF_RDM_IOV];
	void *desc[IBF_RDM_IOV];
	size_t count;
	/*
	 * In the matcher: a receive's tag, ignore bits (all of them for an
	 * untagged receive) and source (FI_DIRECTED_RECV: its peer's key,
	 * whichever of its fi_addrs the receive gave; 0: any); a held
	 * message's tag and sender's key.
	 */
	struct ibf_mq_entry me;
	int tagged;
	int multi;		/* FI_MULTI_RECV: stays posted while room is left */
	int stalled;		/* parked in its connection's stalled list */
	size_t mr_off;		/* FI_MULTI_RECV: bytes of the buffer used */
	struct ibf_rdm_op *bounce;	/* the RTS being read into it */
	uint32_t epoch;		/* its connection's life: when sent; a bounce: on arrival */
	uint32_t post_epoch;	/* its connection's life at its last post */
	struct ibf_rdm_conn *post_conn;	/* the connection of its last post */
	int reads_left;		/* reads in flight; an RTS: its wc and FIN */
	int fin_seen;		/* an RTS: its FIN came (a second is ignored) */
	int read_err;
	/* Where the next read starts: sender's segment, our iov, bytes left. */
	uint32_t rd_seg;
	uint64_t rd_soff;
	size_t rd_iov, rd_ioff, rd_left;
	uint32_t lkey[IBF_RDM_IOV];
	/* Registrations made for a rendezvous (sender's or receiver's). */
	struct ibv_mr *mr[IBF_RDM_IOV];
	int nmr;
	/* A send waiting in a queue: what to post once connected. */
	uint32_t wire_len;	/* header + payload in mem */
};

struct ibf_rdm_list {
	struct ibf_rdm_op *head, *tail;
};

/*
 * QP number -> connection, for every QP the endpoint's connections have had
 * (they live until it closes).  Written by the connection thread under
 * cm_lock, read by the data path without it: slots are single 64-bit
 * words, and a full table is replaced by a larger one, the old kept until
 * close, so a reader never sees freed memory.
 */
struct ibf_qp_map {
	uint64_t *slot;		/* qp_num << 32 | (conn index + 1); 0: empty */
	uint32_t mask, used;
	struct ibf_qp_map *old;
};

struct ibf_rdm_ep {
	struct fid_ep ep_fid;
	struct ibf_domain *domain;
	struct fi_info *info;
	struct ibf_av *av;
	struct ibf_rdm_ep *av_next;
	struct ibf_cq *tx_cq, *rx_cq;
	int enabled;
	struct ibf_lock lock;	/* the data path's, by threading level */
	uint64_t tx_op_flags, rx_op_flags;
	int tx_selective, rx_selective;
	size_t inject_size;
	size_t eager_size;
	size_t tx_iov_limit, rx_iov_limit;
	size_t min_multi_recv;	/* FI_OPT_MIN_MULTI_RECV */
	uint32_t max_inline;	/* learnt from the first QP */
	uint32_t max_read;	/* the port's max_msg_sz: one READ at most */

	/* Listening, connecting, and the thread doing both. */
	struct rdma_event_channel *channel;
	struct rdma_cm_id *listen_id;
	struct ibf_name name;
	size_t namelen;
	pthread_t cm_thread;
	int cm_thread_started;
	int stop_fd;		/* eventfd: tells the thread to exit */
	pthread_mutex_t cm_lock;
	int cm_pending;		/* atomic: the thread left work for progress */
	int nretry;		/* connections in IBF_CONN_RETRY (cm_lock) */
	struct ibf_rdm_list failed;	/* ops whose connection failed */
	int dead_seen;		/* a connection died: RTS waiters to fail */
	/*
	 * Connections by index, in chunks that never move, so the CQ reads
	 * them without the thread's lock (a header names one by index).
	 */
	struct ibf_rdm_conn **conn_dir[IBF_CONN_DIRS];
	uint32_t nconns;	/* atomic */
	struct ibf_rdm_conn **peers;	/* by fi_addr; the data path's */
	struct ibf_qp_map *qp_map;	/* atomic pointer */
	size_t npeers;
	struct ibv_srq *srq;
	/* All QPs complete here; the user's CQs progress it when read. */
	struct ibv_cq *hcq;
	struct ibv_comp_channel *channel_cq;	/* if a user CQ can wait */
	unsigned cq_events;	/* taken, not yet acked */
	int auto_progress;	/* FI_PROGRESS_AUTO: the thread progresses too */
	struct rdma_cm_id **graveyard;	/* ids of dead connections */
	size_t ngrave, grave_cap;
	uint32_t sq_depth;
	int sq_posted;		/* atomic: send-side requests not completed */

	/* Operations: sends, receives, bounces; one registered area. */
	struct ibf_rdm_op *ops;
	uint32_t ntx, nrx, nbounce;
	uint8_t *mem;
	struct ibv_mr *mem_mr;
	size_t slot;		/* header + eager payload */
	struct ibf_rdm_op *tx_free, *rx_free;
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
	int soft_reserved;
	uint64_t dropped;	/* arrivals that did not fit: never acted on */
};

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
	return container_of(ep, struct ibf_rdm_ep, ep_fid);
}

/* ibf_rdm_ep.c */
int ibf_rdm_ep_open(struct fid_domain *domain, struct fi_info *info,
		    struct fid_ep **ep, void *context);
struct ibf_rdm_op *ibf_rdm_tx_get(struct ibf_rdm_ep *ep);
void ibf_rdm_list_append(struct ibf_rdm_list *l, struct ibf_rdm_op *op);
void ibf_rdm_list_remove(struct ibf_rdm_list *l, struct ibf_rdm_op *op);
int ibf_rdm_bounce_post(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b);

/* ibf_rdm_cm.c */
int ibf_rdm_cm_listen(struct ibf_rdm_ep *ep, const struct fi_info *info);
int ibf_rdm_cm_start(struct ibf_rdm_ep *ep);
/* Stop the thread and disconnect: every QP ends in the error state. */
void ibf_rdm_cm_stop(struct ibf_rdm_ep *ep);
/* Destroy QPs, ids and the channel (after the CQs are drained). */
void ibf_rdm_cm_destroy(struct ibf_rdm_ep *ep);
/* Slow path of a send: the connection to addr, made or being made. */
int ibf_rdm_conn_get(struct ibf_rdm_ep *ep, fi_addr_t addr,
		     struct ibf_rdm_conn **conn);
/* Post op (built whole in op->mem) on conn, or queue it while conn forms. */
ssize_t ibf_rdm_conn_submit(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
int ibf_rdm_post_built(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
/* Take a send queue slot of conn's QP: 1, or 0 if there is none. */
static inline int ibf_rdm_credit_take(struct ibf_rdm_conn *conn)
{
	int c = __atomic_load_n(&conn->credits, __ATOMIC_RELAXED);

	while (c > 0)
		if (__atomic_compare_exchange_n(&conn->credits, &c, c - 1, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return 1;
	return 0;
}

/* A send-side completion of op: its slot back, and what waited for one. */
void ibf_rdm_credit_return(struct ibf_rdm_op *op);
/* Park op until conn has a free slot (ep->lock held). */
void ibf_rdm_stall(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op);
/* Post a send whose header is in op->mem (conn filled in here);
 * -FI_EAGAIN when conn's send queue is full, -FI_ENOTCONN when conn has no
 * QP (it ended, perhaps since the caller saw it connected). */
int ibf_rdm_post_send(struct ibf_rdm_conn *conn, struct ibf_rdm_op *op,
		      struct ibv_sge *sge, int nsge, int inl);
/* A work request of conn's life epoch failed (not flushed) with err: that
 * life ends, as on a disconnect (ep->lock held). */
void ibf_rdm_conn_broken(struct ibf_rdm_conn *conn, uint32_t epoch, int err);
/* Work the connection thread left for progress (CQ lock, not ep lock). */
void ibf_rdm_cm_deliver(struct ibf_rdm_ep *ep);
struct ibf_rdm_conn *ibf_rdm_conn_at(struct ibf_rdm_ep *ep, uint32_t index);
/* The connection whose QP (now or in an earlier life) qp_num is; NULL if
 * none of ours. */
struct ibf_rdm_conn *ibf_rdm_qp_conn(struct ibf_rdm_ep *ep, uint32_t qp_num);
fi_addr_t ibf_rdm_conn_addr(struct ibf_rdm_conn *conn);

/*
 * fi_inject and its kin: the buffer is free on return and no completion is
 * written.  FI_INJECT alone (in op_flags or fi_sendmsg's flags) frees the
 * buffer but keeps the completion, as fi_msg(3) says; hence a flag of our
 * own, in the bits libfabric leaves to providers.
 */
#define IBF_RDM_NO_COMP (1ULL << 61)
#define IBF_RDM_INJECT (FI_INJECT | IBF_RDM_NO_COMP)

/* ibf_rdm_msg.c */
extern struct fi_ops_msg ibf_rdm_msg_ops;
extern struct fi_ops_tagged ibf_rdm_tagged_ops;
void ibf_rdm_release(struct ibf_op *op);
ssize_t ibf_rdm_cancel(struct ibf_rdm_ep *ep, void *context);
void ibf_rdm_unregister(struct ibf_rdm_op *op);
/* An arrival in bounce b that does not fit: counted, said, never acted on;
 * b goes back to the SRQ. */
void ibf_rdm_drop(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b, const char *why);
size_t ibf_rdm_iov_len(const struct iovec *iov, size_t count);

/* ibf_rdm_rndv.c: rendezvous (ep->lock held) */
/* Register a large send's buffers and build its RTS in op->mem. */
int ibf_rdm_rts_build(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
		      const struct iovec *iov, size_t count, size_t len);
/* Receive r matched the RTS in bounce b: read the message into r. */
void ibf_rdm_read_start(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
			struct ibf_rdm_op *b);
void ibf_rdm_on_read(struct ibf_rdm_ep *ep, struct ibf_rdm_op *r,
		     const struct ibv_wc *wc);
/* A FIN arrived in bounce b: its send completes. */
void ibf_rdm_on_fin(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b);
/* Drop a held message (FI_DISCARD): an RTS still gets its FIN. */
void ibf_rdm_discard(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b);
/* Post what waited in conn->stalled while conn has slots (ep->lock held). */
void ibf_rdm_unstall(struct ibf_rdm_conn *conn);
void ibf_rdm_auto_progress(struct ibf_rdm_ep *ep);
/* An op is finished: report it (err 0 or -FI_E*), or free it if silent. */
void ibf_rdm_complete(struct ibf_rdm_op *op, int err);

#endif /* IBF_RDM_H */
