/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM operations: the bottom layer of the RDM engine (ibf_rdm_op.c).
 *
 * Every send, receive and eager buffer ("bounce") of an endpoint is an
 * ibf_rdm_op from one array allocated at fi_enable: sends and bounces own a
 * slot of one registered area (header + eager payload).  This layer hands
 * ops out and takes them back, posts bounces to the SRQ, and completes ops
 * to the endpoint's CQs.  It calls nothing of the RDM engine above it; an
 * op going back to the pool is told upward through ep->up (below).
 *
 * Ownership: an op belongs to exactly one place at a time, said by its
 * state: the free lists, a connection's queue or stalled list, the matcher,
 * or the device (posted work requests).  A completed op is free at once:
 * its completion is a copy the CQ owns.  Every op completes exactly once, after
 * the last work request that names it has completed, so its slot is never
 * reused under the device.
 * Locking: ep->lock held for all of it, except where said.
 */
#ifndef IBF_RDM_OP_H
#define IBF_RDM_OP_H

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"
#include "ibf_match.h"
#include "ibf_rdm_bind.h"
#include "ibf_rdm_wire.h"

struct ibf_rdm_conn;
struct ibf_rdm_ep_ops;
struct ibf_rdm_ep_conns;
struct ibf_rdm_op;

/*
 * The endpoint is one object, but no layer sees all of it: each layer's
 * header defines the part it owns, which holds the parts below it, and
 * its files take a pointer to that part.  A layer's part is open to the
 * layers above twice over, in the same bytes: its fields by name
 * (ep->lock, from any layer above) and whole (&ep->as_ops, to call the
					       * layer's functions).  C11 guarantees the two agree: an anonymous union
 * of two structs with the same members.  The compiler so keeps the layer
 * rule for data as util/ibfab-layers keeps it for calls: ibf_rdm_op.c
 * cannot name a connection's field, nor ibf_rdm_conn.c the matcher's.
 *
 *   struct ibf_rdm_ep_ops    operations (here): the endpoint's core, ops
 *   struct ibf_rdm_ep_conns  connections (ibf_rdm_conn.h)
 *   struct ibf_rdm_ep_proto  protocol (ibf_rdm_proto.h)
 *   struct ibf_rdm_ep        the endpoint, its API (ibf_rdm.h)
 */
#define IBF_RDM_PART(tag, name, ...) \
	union { \
		struct { __VA_ARGS__ }; \
		struct tag name; \
	}

/*
 * The one way up: what the connection and operation layers tell the layer
 * above them.  The endpoint sets ep->up at open; each is called with
 * ep->lock held unless said otherwise.
 */
struct ibf_rdm_upcalls {
	/* conn has send-queue slots again, or has ended: what waits in its
	 * stalled list goes on (or fails). */
	void (*slots_freed)(struct ibf_rdm_conn *conn);
	/* One or more connections have ended since the last call: what
	 * waits on their ended lives (rendezvous sends) fails. */
	void (*conns_ended)(struct ibf_rdm_ep_conns *ep);
	/* An op went back to a free list, while ep->freed_wanted. */
	void (*op_freed)(struct ibf_rdm_ep_ops *ep);
	/* FI_PROGRESS_AUTO: the endpoint's CQ channel fired (thread, no
	 * lock held). */
	void (*progress)(struct ibf_rdm_ep_conns *ep);
	/* Bounce b, which held a peer's request (b->req), is released. */
	void (*request_done)(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b);
};

/*
 * The operations layer's part: what every layer shares (the fid, the
 * lock, the SRQ and the device CQ, the way up) and the ops.
 */
#define IBF_RDM_EP_OPS_FIELDS \
	struct ibf_ep_base base;	/* fid, CQs, counters, op flags */ \
	struct ibf_lock lock;	/* the data path's, by threading level */ \
	struct ibv_srq *srq; \
	/* All QPs complete here; the user's CQs progress it when read. */ \
	struct ibv_cq *hcq; \
	const struct ibf_rdm_upcalls *up;	/* the layers' way up */ \
	/* Set by the layer above while something waits for free ops: \
	 * only then is a freed op told (up->op_freed), not a call on \
	 * every completion. */ \
	int freed_wanted; \
	/* The CQ read running progress now, or NULL (under lock). */ \
	struct ibf_cq_sink *sink; \
	/* Sends, receives, bounces; one registered area. */ \
	struct ibf_rdm_op *ops; \
	uint32_t ntx, nrx, nbounce; \
	uint8_t *mem; \
	struct ibv_mr *mem_mr; \
	size_t slot;		/* header + eager payload + note */ \
	size_t note_off;	/* where an RMA notice's note sits in a slot */ \
	struct ibf_rdm_op *tx_free, *rx_free; \
	/* Freed ops whose completions wait unread in a CQ's soft ring: \
	 * back onto the free lists as readers give their room back, so \
	 * the ring keeps to the room reserved (struct ibf_cq_room). */ \
	struct ibf_rdm_op *tx_held, *rx_held; \
	struct ibf_cq_room tx_room, rx_room; \
	uint64_t dropped;	/* arrivals that did not fit: never acted on */ \
	/* Bounces: nbounce in the SRQ; spares replace those holding \
	 * messages. */ \
	uint32_t srq_posted; \
	uint32_t srq_refill_at;	/* nbounce less a batch: ibf_rdm_srq_short */ \
	struct ibf_rdm_op *spare; \
	struct ibf_rdm_chunk *chunks;	/* the extra bounces, allocated */ \
	uint32_t nextra, extra_max;	/* FI_IBFAB_RDM_UNEXP_MAX */ \
	int hcq_need;		/* entries hcq must have: grows with nextra */ \
	/* Rendezvous sends open their buffers through memory windows \
	 * (FI_IBFAB_RDM_RNDV_WINDOWS and the device's type 1 windows), \
	 * bound on binder; mw_freed: windows freed because they could not \
	 * be unbound. */ \
	int mw_ok; \
	struct ibf_rdm_binder binder; \
	uint64_t mw_freed;

struct ibf_rdm_ep_ops {
	IBF_RDM_EP_OPS_FIELDS
};

/* Extra bounces are added this many at a time. */
#define IBF_RDM_CHUNK 64

/* Our domain's key generation, for the headers we build (ibf_rdm_wire.h):
 * it moves when a region with a requested key closes. */
static inline uint16_t ibf_rdm_key_gen(const struct ibf_rdm_ep_ops *ep)
{
	return (uint16_t)__atomic_load_n(&ep->base.domain->key_gen,
					 __ATOMIC_ACQUIRE);
}

/* A bounce has left the SRQ with an arrival. */
static inline void ibf_rdm_bounce_arrived(struct ibf_rdm_ep_ops *ep)
{
	ep->srq_posted--;
}

enum ibf_rdm_op_state {
	IBF_RDM_FREE,		/* on its free list */
	IBF_RDM_NEW,		/* taken from it, not yet posted or queued */
	IBF_RDM_TX,		/* eager send posted */
	IBF_RDM_TX_RTS,		/* RTS posted or acknowledged, FIN awaited */
	IBF_RDM_QUEUED,		/* waiting for its connection */
	IBF_RDM_RX_POSTED,	/* an application receive, not matched */
	IBF_RDM_RX_READ,	/* reading a rendezvous message into it */
	IBF_RDM_BOUNCE_POSTED,	/* an eager buffer in the SRQ */
	IBF_RDM_BOUNCE_HELD,	/* holds an unexpected or claimed message */
	IBF_RDM_BOUNCE_FIN,	/* sending a FIN from its buffer */
	IBF_RDM_PROBE,		/* a connection's PING, in flight */
	IBF_RDM_DRAIN,		/* the last work request of a dead QP */
	IBF_RDM_BOUNCE_SPARE,	/* an eager buffer out of the SRQ, unused */
	IBF_RDM_TX_RMA,		/* an RMA write or read posted */
	IBF_RDM_TX_ATOMIC,	/* an atomic request sent, its answer awaited */
	IBF_RDM_BOUNCE_CLAIMED,	/* holds a message an FI_PEEK | FI_CLAIM took
				 * out of the unexpected queue for a claim */
	IBF_RDM_GRANT,		/* a connection's credit grant, in flight */
	IBF_RDM_TX_KEYQ,	/* an RMA asking its target for a requested
				 * key's region, or waiting to go once told */
	IBF_RDM_OP_STATES
};

/* What a send op posts (ibf_rdm_rma.c builds the RMA ones). */
enum ibf_rdm_wr_kind {
	IBF_RDM_WR_SEND,	/* a message built in its slot */
	IBF_RDM_WR_WRITE,
	IBF_RDM_WR_WRITE_DATA,	/* a write, then a WDATA header */
	IBF_RDM_WR_READ,
	IBF_RDM_WR_KEYQ,	/* a KEYQ: header, then ibf_rdm_keyq at note_off */
};

struct ibf_rdm_op {
	struct ibf_op op;	/* what the CQ reports; kind IBF_OP_RDM */
	struct ibf_rdm_ep_ops *ep;
	struct ibf_rdm_conn *conn;
	struct ibf_rdm_op *next, *prev;
	enum ibf_rdm_op_state state;
	enum ibf_rdm_op_state tx_state;	/* a send: its state once posted */
	int uncounted;		/* a peek: not an operation counters count */
	int is_bounce;
	int is_tx;		/* one of the send ops (set once, at setup) */
	/* A bounce holding a peer's request (ibf_rdm_wire.h): counted in its
	 * connection's held until released; credit_due: its credit is given
	 * back when it is. */
	int req;
	int credit_due;
	uint8_t *mem;		/* registered: header + eager payload */
	uint32_t mem_lkey;
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
	/* Registrations made for this op alone (a rendezvous send's, or
	 * memory the cache cannot watch), and those held from the cache. */
	struct ibv_mr *mr[IBF_RDM_IOV];
	int nmr;
	struct ibf_mr_cache_entry *mrc[IBF_RDM_IOV];
	int nmrc;
	/*
	 * A send op's memory window (type 1), allocated the first time the
	 * op opens its buffer to a peer that way and kept with the op (no
	 * system call once warm but the device's doorbells).  mw_use: bound
	 * for this send's RTS, over the registration mrc[0], until the
	 * send's end unbinds it (ibf_rdm_mw_close).
	 */
	struct ibv_mw *mw;
	uint8_t mw_use;
	/* A send waiting in a queue: what to post once connected. */
	uint32_t wire_len;	/* header + payload in mem */
	enum ibf_rdm_wr_kind wr_kind;
	/*
	 * An RMA: remote address and key; via_slot: the data goes through
	 * mem (a read is copied out to iov at the end).  It is posted in
	 * parts of at most the port's max_msg_sz: sge[0..nsge) is the next
	 * part, part_len bytes at rma_addr + part_off, the last one if
	 * part_last (a header follows that one if rma_notify).  An RMA in
	 * several parts (rma_split) keeps its iovs and lkeys in iov and
	 * lkey; rd_iov, rd_ioff and rd_left say where the part after the
	 * prepared one starts and how many bytes are left for it.
	 */
	struct ibv_sge sge[IBF_RDM_IOV];
	int nsge;
	int via_slot;
	int rma_notify;		/* a header follows it (ibf_rdm_rma.c) */
	int rma_split;
	int part_ready;		/* sge holds a part not yet posted */
	int part_last;
	uint64_t part_off;
	size_t part_len;
	uint64_t rma_addr;
	uint32_t rma_key;
	/* Requested keys (ibf_domain.req_keys): the application's key and
	 * offset, the RMA's kind and data, kept while its KEYQ is out;
	 * key_ready: the answer is in, the RMA waits for a slot. */
	uint64_t rma_app_key;
	uint64_t rma_app_addr;
	uint64_t rma_data;
	int rma_kind;
	int key_ready;
};

/* A state's name, for logs; whether an op may go from one to the other
 * (ibf_rdm_op.c holds the table of its life). */
const char *ibf_rdm_op_state_name(enum ibf_rdm_op_state state);
int ibf_rdm_op_move_ok(enum ibf_rdm_op_state from, enum ibf_rdm_op_state to);

/*
 * Every change of an op's state goes through here, so test builds check
 * it against the table (assert; compiled out with NDEBUG, so a plain
 * store in the shipped library).
 */
static inline void ibf_rdm_op_to(struct ibf_rdm_op *op,
				 enum ibf_rdm_op_state to)
{
	assert(ibf_rdm_op_move_ok(op->state, to));
	op->state = to;
}

/* The same for a state other threads read atomically (PROBE, GRANT). */
static inline void ibf_rdm_op_to_atomic(struct ibf_rdm_op *op,
					enum ibf_rdm_op_state to)
{
	assert(ibf_rdm_op_move_ok(__atomic_load_n(&op->state, __ATOMIC_RELAXED),
				  to));
	__atomic_store_n(&op->state, to, __ATOMIC_RELEASE);
}

static inline struct ibf_rdm_op *ibf_rdm_op_of(struct ibf_mq_entry *e)
{
	return e ? container_of(e, struct ibf_rdm_op, me) : NULL;
}

/* A doubly linked list of ops (through next and prev). */
struct ibf_rdm_list {
	struct ibf_rdm_op *head, *tail;
};
void ibf_rdm_list_append(struct ibf_rdm_list *l, struct ibf_rdm_op *op);
void ibf_rdm_list_remove(struct ibf_rdm_list *l, struct ibf_rdm_op *op);

/* Make the ops and their registered area; free them (after the CQs are
 * drained and every QP is gone). */
int ibf_rdm_ops_init(struct ibf_rdm_ep_ops *ep);
void ibf_rdm_ops_fini(struct ibf_rdm_ep_ops *ep);
/* Free the ops' memory windows and their binder: after the drain. */
void ibf_rdm_ops_windows_free(struct ibf_rdm_ep_ops *ep);

/* A free send op, or NULL; a free receive op, or NULL. */
struct ibf_rdm_op *ibf_rdm_tx_get(struct ibf_rdm_ep_ops *ep);
struct ibf_rdm_op *ibf_rdm_rx_get(struct ibf_rdm_ep_ops *ep);
/* The held receive ops CQ readers made room for since the last call,
 * onto the free list: the first free one, or NULL if none is free. */
struct ibf_rdm_op *ibf_rdm_rx_reclaim(struct ibf_rdm_ep_ops *ep);
/* Whether a receive op may be taken. */
static inline int ibf_rdm_rx_any(struct ibf_rdm_ep_ops *ep)
{
	return ep->rx_free || ibf_rdm_rx_reclaim(ep);
}
/* Back to its free list, unreported (a post that failed, a spent op). */
void ibf_rdm_op_free(struct ibf_rdm_op *op);

/* Bounce b is free again: to the spares, which go back to the SRQ a
 * batch at a time. */
void ibf_rdm_bounce_release(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b);
/* Post every bounce (fi_enable). */
int ibf_rdm_bounces_post(struct ibf_rdm_ep_ops *ep);
/* Top the SRQ up to nbounce from the spares, growing them if need be, up
 * to FI_IBFAB_RDM_UNEXP_MAX; progress and a release call it when the SRQ
 * lacks a batch (ibf_rdm_srq_short). */
void ibf_rdm_bounce_refill(struct ibf_rdm_ep_ops *ep);

/*
 * Bounces go back to the SRQ in batches of up to a sixteenth of it (at
 * most IBF_RDM_REPOST_MAX, at least 1): the SRQ then never lacks more than
 * that, far less than the credits leave free (ibf_rdm_flow.c), and a
 * sender that still found it empty would wait (rnr_retry 7), not fail.
 */
#define IBF_RDM_REPOST_MAX 16

static inline uint32_t ibf_rdm_repost_batch(const struct ibf_rdm_ep_ops *ep)
{
	return IBF_MIN(IBF_MAX(ep->nbounce / 16, 1u), IBF_RDM_REPOST_MAX);
}

/* Whether the SRQ lacks a batch of bounces (one load and compare: every
 * progress asks). */
static inline int ibf_rdm_srq_short(const struct ibf_rdm_ep_ops *ep)
{
	return ep->srq_posted <= ep->srq_refill_at;
}
/* Whether p is one of the endpoint's bounces (a pointer handed back by the
 * application, FI_CLAIM). */
int ibf_rdm_bounce_owned(struct ibf_rdm_ep_ops *ep, const void *p);
/* Call fn on every op, the extra bounces included. */
void ibf_rdm_ops_each(struct ibf_rdm_ep_ops *ep,
		      void (*fn)(struct ibf_rdm_op *op, void *arg), void *arg);
/* An arrival in bounce b that does not fit: counted, said, never acted on;
 * b goes back to the SRQ. */
void ibf_rdm_drop(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b,
		  const char *why);

/*
 * op is finished (err 0 or -FI_E*): its completion is written where the
 * CQ keeps it (the reader's buffer, or a copy in the CQ's soft ring) and
 * op is freed, here, under the ep->lock already held; silent ones
 * (selective completion, inject) are only freed.  Reading the CQ then
 * touches no op and no lock of the endpoint's (issue 19).
 */
void ibf_rdm_complete(struct ibf_rdm_op *op, int err);
/* Drop the registrations op made or holds (its window first, which
 * lies on one of them). */
void ibf_rdm_unregister_any(struct ibf_rdm_op *op);
static inline void ibf_rdm_unregister(struct ibf_rdm_op *op)
{
	if (unlikely(op->nmr || op->nmrc))	/* most ops register nothing */
		ibf_rdm_unregister_any(op);
}
/*
 * The lkey of [addr, addr + len) for the device's own use by op (access:
 * IBV_ACCESS_LOCAL_WRITE if it writes there): from the domain's
 * registration cache, else registered for op alone.  Held until op's
 * ibf_rdm_unregister.  0 or -FI_E*.
 */
int ibf_rdm_reg_local(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *op,
		      void *addr, size_t len, int access, uint32_t *lkey);
/*
 * Send op's memory window over [addr, addr + len), for its peer to read,
 * bound on a registration from the domain's cache: its key in *rkey and
 * op->mw_use set; or -FI_ENOSYS when the endpoint has no windows, the
 * memory cannot be cached or the bind failed (the caller registers per
 * send).  Unbound at op's ibf_rdm_unregister.
 */
int ibf_rdm_mw_open(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *op,
		    void *addr, size_t len, uint32_t *rkey);

/*
 * The sges of the next len bytes of op's iovs (op->iov, op->lkey), from
 * where the last call stopped (op->rd_iov, op->rd_ioff, which it moves
 * on): how many, at most IBF_RDM_IOV.  A rendezvous read's and an RMA
 * part's local side.
 */
int ibf_rdm_iov_sges(struct ibf_rdm_op *op, size_t len, struct ibv_sge *sge);
/* The bytes of iov[0..count); SIZE_MAX if they add up past it. */
size_t ibf_rdm_iov_len(const struct iovec *iov, size_t count);
/* An application's iovs for what ("a send"): at most limit of them, and
 * lengths whose sum fits, into *len; else -FI_EINVAL and a warning. */
int ibf_rdm_iov_check_any(const struct iovec *iov, size_t count,
			  size_t limit, size_t *len, const char *what);
/* Inline for the one-buffer call every fi_send and fi_recv makes. */
static inline int ibf_rdm_iov_check(const struct iovec *iov, size_t count,
				    size_t limit, size_t *len,
				    const char *what)
{
	if (likely(count == 1 && limit && iov)) {
		*len = iov[0].iov_len;
		return 0;
	}
	return ibf_rdm_iov_check_any(iov, count, limit, len, what);
}
/* Gather count iovs into dst. */
void ibf_rdm_copy_from_iov_any(uint8_t *dst, const struct iovec *iov,
			       size_t count);
static inline void ibf_rdm_copy_from_iov(uint8_t *dst, const struct iovec *iov,
					 size_t count)
{
	if (count == 1)
		ibf_copy(dst, iov[0].iov_base, iov[0].iov_len);
	else
		ibf_rdm_copy_from_iov_any(dst, iov, count);
}

/*
 * fi_inject and its kin: the buffer is free on return and no completion is
 * written.  FI_INJECT alone (in op_flags or fi_sendmsg's flags) frees the
 * buffer but keeps the completion, as fi_msg(3) says; hence a flag of our
 * own, in the bits libfabric leaves to providers.
 */
#define IBF_RDM_NO_COMP (1ULL << 61)
#define IBF_RDM_INJECT (FI_INJECT | IBF_RDM_NO_COMP)

#endif /* IBF_RDM_OP_H */
