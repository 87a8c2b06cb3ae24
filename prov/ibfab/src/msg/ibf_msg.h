/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The FI_EP_MSG wing: an endpoint is one RC queue pair connected through
 * librdmacm (ibf_msg_cm.c), with its passive side (ibf_msg_pep.c), shared
 * receive contexts (ibf_msg_srx.c), send and receive (ibf_msg_sendrecv.c,
 * posting in ibf_msg_post.h), RMA (ibf_msg_rma.c), tagged mode
 * (ibf_msg_tagged.c) and atomics carried in tagged-mode frames
 * (ibf_msg_atomic.c).  It builds on core/ibf.h.
 */
#ifndef IBF_MSG_H
#define IBF_MSG_H

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"

struct ibf_ep;
struct ibf_srx;

/* Tagged mode: each message carries this before its payload. */
struct ibf_tag_hdr {
	uint64_t tag;
	uint32_t data;
	uint32_t flags;		/* IBF_HDR_* */
};
#define IBF_HDR_TAGGED 1
#define IBF_HDR_DATA 2
#define IBF_HDR_ATOMIC 4	/* an atomic request (ibf_atomic_ops.h) */
#define IBF_HDR_ATOMIC_RESP 8	/* its answer */
#define IBF_HDR_KNOWN (IBF_HDR_TAGGED | IBF_HDR_DATA | IBF_HDR_ATOMIC | \
		       IBF_HDR_ATOMIC_RESP)

/* What a framed message a peer sent is (ibf_msg_tagged.c), checked before any
 * of it is used: a message (payload for a receive), an atomic request or
 * answer (payload for ibf_atomic_ops.c), or bytes to drop. */
enum ibf_frame_kind {
	IBF_FRAME_DROP, IBF_FRAME_MSG, IBF_FRAME_ATOMIC, IBF_FRAME_ATOMIC_RESP
};
struct ibf_frame {
	enum ibf_frame_kind kind;
	const char *why;	/* a drop's reason */
	uint64_t tag;		/* IBF_FRAME_MSG: 0 untagged */
	uint32_t data;
	uint32_t flags;
	const uint8_t *payload;	/* within the len bytes parsed */
	size_t len;
};
void ibf_frame_parse(const void *mem, size_t len, struct ibf_frame *f);

/* ---- connection management (ibf_msg_cm.c, ibf_msg_pep.c) ---- */
/*
 * Private data limits of rdma_cm over the TCP port space: 56 bytes with a
 * connect, 196 with an accept, 148 with a reject, and what arrives is
 * padded to those sizes.  ibfab sends one length byte before the caller's
 * data, so the peer gets exactly what was sent; the caller has one size
 * for all three, as FI_OPT_CM_DATA_SIZE reports it.
 */
#define IBF_CM_DATA_SIZE 55
#define IBF_CM_WIRE_SIZE (IBF_CM_DATA_SIZE + 1)

/* Frame the caller's private data for the wire; returns the wire length. */
uint8_t ibf_cm_pack(uint8_t *wire, const void *data, size_t len);
/* The caller's private data inside what arrived. */
void ibf_cm_unpack(const void *wire, size_t wire_len, const void **data,
		   size_t *len);

/* Move a disconnected endpoint's QP to the error state, so what it holds
 * flushes (see ibf_msg_cm.c: Soft-RoCE needs it for late receives). */
void ibf_ep_qp_to_error(struct ibf_ep *ep);

struct ibf_pep {
	struct fid_pep pep_fid;
	struct ibf_cm_owner owner;
	struct ibf_fabric *fabric;
	struct rdma_cm_id *id;
	struct ibf_eq *eq;
	struct fi_info *info;
	int listening;
};
int ibf_pep_open(struct fid_fabric *fabric, struct fi_info *info,
		 struct fid_pep **pep, void *context);

/* A passive endpoint's bound id for a new active endpoint, or NULL. */
struct rdma_cm_id *ibf_pep_take_id(struct fid *handle);
int ibf_getname(struct rdma_cm_id *id, void *addr, size_t *addrlen);
int ibf_migrate_id(struct rdma_cm_id *id, struct ibf_eq *eq);

/* ---- shared receive context (ibf_msg_srx.c): an SRQ ---- */
struct ibf_srx {
	struct fid_ep ep_fid;		/* FI_CLASS_SRX_CTX */
	struct ibf_domain *domain;
	struct ibv_srq *srq;
	struct ibf_lock lock;		/* guards the free list and the SRQ */
	struct ibf_op *ops;
	uint32_t *free;			/* stack of free slot indices */
	uint32_t nfree, size;
	size_t iov_limit;
	int ref;			/* endpoints bound */
	int post_trace;			/* each post logged (FI_LOG_LEVEL=debug) */
};
/*
 * A shared receive context's slots complete in any order (each QP reports
 * to its own CQ), so they go back to a free list rather than a ring.
 */
void ibf_srx_put(struct ibf_srx *srx, struct ibf_op *op);
int ibf_srx_open(struct fid_domain *domain, struct fi_rx_attr *attr,
		 struct fid_ep **rx_ep, void *context);
/* A receive into the shared queue, posted there or through a bound endpoint. */
ssize_t ibf_srx_post(struct ibf_srx *srx, const struct iovec *iov,
		     void **desc, size_t count, void *context);

/* ---- endpoint (FI_EP_MSG) ---- */
#define IBF_MAX_SGE 32

enum ibf_ep_state {
	IBF_EP_IDLE,		/* opened, maybe enabled */
	IBF_EP_CONNECTING,	/* fi_connect or fi_accept called */
	IBF_EP_CONNECTED,
	IBF_EP_SHUTDOWN,	/* disconnected, by either side */
	IBF_EP_ERROR,		/* rejected or unreachable */
	IBF_EP_STATES
};
/* A state's name, for logs. */
const char *ibf_ep_state_name(enum ibf_ep_state state);
/* Every change of ep->state (atomic) goes through here, said at debug
 * level; it answers the state before. */
enum ibf_ep_state ibf_ep_set_state(struct ibf_ep *ep, enum ibf_ep_state to);

struct ibf_ep {
	struct ibf_ep_base base;	/* fid, CQs, counters, op flags */
	struct ibf_cm_owner owner;
	struct rdma_cm_id *id;
	struct ibf_eq *eq;
	/* Bound with counters and no CQ: a CQ of its own nobody reads. */
	struct ibf_cq *own_cq;
	struct ibf_progress cntr_hook;	/* how counters progress it */
	struct ibf_srx *srx;	/* receives come from here, if bound */
	enum ibf_ep_state state;	/* atomic */
	int active;		/* called fi_connect */

	/* Transmit side; tx_lock guards the ring head and the QP's SQ. */
	struct ibf_lock tx_lock;
	struct ibf_ring tx;
	uint32_t tx_unsignalled;	/* posts since the last signalled */
	uint32_t tx_signal_every;	/* keep the ring reclaimable */
	int post_trace;		/* each post logged (FI_LOG_LEVEL=debug) */
	size_t tx_iov_limit;
	size_t inject_size;

	/* Receive side; rx_lock guards the ring head and the QP's RQ. */
	struct ibf_lock rx_lock;
	struct ibf_ring rx;
	size_t rx_iov_limit;
	size_t min_multi_recv;	/* FI_OPT_MIN_MULTI_RECV */
	/*
	 * FI_MULTI_RECV: messages fill a multi-receive buffer before any
	 * receive posted after it.  The QP's receive queue cannot put the
	 * buffer's rest back at its head, so while a buffer is in use
	 * (rx_multi_busy) later receives wait here, in order, and are posted
	 * when it is released (rx_lock; a FIFO of rx.size entries).
	 */
	struct ibf_rx_wait *rx_wait;
	uint32_t rx_wait_first, rx_wait_count;
	int rx_multi_busy;
	int tag_mode;			/* opened with FI_TAGGED or FI_ATOMIC */
	struct ibf_tagged *tagged;	/* its state, from fi_enable */
	struct ibf_msg_atomic *matomic;	/* FI_ATOMIC: atomics awaiting answers */
};

/*
 * Tagged mode (ibf_msg_tagged.c).  An endpoint opened with FI_TAGGED frames
 * every message with a header (tag, data) and receives into eager buffers
 * of its own, so messages can wait for a matching receive.
 */
struct ibf_tagged;
int ibf_tagged_init(struct ibf_ep *ep);
/* A slot whose completion has been read (its op->release). */
void ibf_tagged_release(struct ibf_op *op);
void ibf_tagged_fini(struct ibf_ep *ep);
int ibf_tagged_post_bounces(struct ibf_ep *ep);
/* A bounce buffer's verbs completion, in the CQ (its lock held). */
void ibf_tagged_on_bounce(struct ibf_cq *cq, struct ibf_op *op,
			  const struct ibv_wc *wc);
/* An atomic answer's send completed (the CQ, its lock held). */
void ibf_tagged_on_reply(struct ibf_op *op, const struct ibv_wc *wc);
/* Answers still in the send queue: what closing waits to see flushed. */
int ibf_tagged_replying(struct ibf_ep *ep);
/*
 * One framed message from the next send slot: the header h, then what
 * fill(dst, arg) writes (it returns the bytes; at most
 * FI_IBFAB_EAGER_SIZE).  Its completion reports op_flags and context if
 * comp (errors always), and counts on cntr.
 */
ssize_t ibf_tagged_send_frame(struct ibf_ep *ep, const struct ibf_tag_hdr *h,
			      size_t (*fill)(void *dst, const void *arg),
			      const void *arg, uint64_t op_flags, void *context,
			      int comp, struct ibf_cntr *cntr);

/*
 * Atomics on FI_EP_MSG endpoints (ibf_msg_atomic.c), in framed mode.
 * init at fi_enable (after ibf_tagged_init), fini once the QP is drained.
 */
struct ibf_msg_atomic;
int ibf_msg_atomic_init(struct ibf_ep *ep);
/* An answered atomic whose completion has been read (its op->release). */
void ibf_msg_atomic_release(struct ibf_op *op);
void ibf_msg_atomic_fini(struct ibf_ep *ep);
/* An answer of len bytes from the peer (tagged mode, the CQ's lock held). */
void ibf_msg_atomic_on_answer(struct ibf_ep *ep, const void *wire, size_t len);
/*
 * The atomic whose request went in a send of the provider's own (op, or
 * NULL) fails with err (positive FI_E*), unless it completed; all of an
 * endpoint's still waiting do, once its connection is gone.
 */
void ibf_msg_atomic_fail(struct ibf_op *op, int err);
void ibf_msg_atomic_fail_all(struct ibf_ep *ep, int err);
/* Bounces still posted: what closing must wait to see flushed. */
int ibf_tagged_outstanding(struct ibf_ep *ep);
ssize_t ibf_tagged_cancel(struct ibf_ep *ep, void *context);
/* A flushed bounce of a closing endpoint: forget it. */
void ibf_tagged_drop(struct ibf_op *op);
extern struct fi_ops_msg ibf_tagged_msg_ops;
extern struct fi_ops_tagged ibf_tagged_ops;

/* A receive that waits for a multi-receive buffer's release. */
struct ibf_rx_wait {
	struct ibv_sge *sge;	/* rx_iov_limit of them, after the FIFO */
	uint32_t count;
	size_t len;
	void *buf;
	void *context;
	int comp;
	uint64_t flags;
};

/*
 * A multi-receive buffer has one verbs receive posted at a time, over its
 * unused rest; each message that lands there moves the rest past itself
 * and posts it again, until less than min_multi_recv is left.  Called by
 * the CQ with the completed slot; returns whether the buffer is released.
 */
int ibf_ep_multi_recv_next(struct ibf_op *op, uint32_t byte_len);

/* The endpoint a tagged-mode op (bounce, receive, answer) or an atomic's
 * slot belongs to (op->owner, which core keeps untyped). */
static inline struct ibf_ep *ibf_op_ep(const struct ibf_op *op)
{
	return op->owner;
}

static inline struct ibf_ep *to_ibf_ep(struct fid_ep *ep)
{
	return container_of(ep, struct ibf_ep, base.ep_fid);
}

/*
 * The CQs sends and receives complete to: one bound CQ serves both; an
 * endpoint with counters alone completes to a CQ of its own.  Only a CQ
 * bound for a direction reports that direction's completions.
 */
static inline struct ibf_cq *ibf_ep_send_cq(const struct ibf_ep *ep)
{
	const struct ibf_ep_base *b = &ep->base;

	return b->tx_cq ? b->tx_cq : b->rx_cq ? b->rx_cq : ep->own_cq;
}

static inline struct ibf_cq *ibf_ep_recv_cq(const struct ibf_ep *ep)
{
	const struct ibf_ep_base *b = &ep->base;

	return b->rx_cq ? b->rx_cq : b->tx_cq ? b->tx_cq : ep->own_cq;
}

int ibf_ep_open(struct fid_domain *domain, struct fi_info *info,
		struct fid_ep **ep, void *context);
void ibf_ep_on_cm_event(struct ibf_cm_owner *owner, struct ibf_eq *eq,
			struct rdma_cm_event *event);
int ibf_ep_create_qp(struct ibf_ep *ep);
extern struct fi_ops_cm ibf_ep_cm_ops;
extern struct fi_ops_msg ibf_msg_ops;
extern struct fi_ops_rma ibf_rma_ops;

/* Does the caller want a completion for an operation with these flags? */
static inline int ibf_tx_wants_comp(const struct ibf_ep *ep, uint64_t flags)
{
	return ep->base.tx_cq &&
	       (!ep->base.tx_selective || (flags & FI_COMPLETION));
}

static inline int ibf_rx_wants_comp(const struct ibf_ep *ep, uint64_t flags)
{
	return ep->base.rx_cq &&
	       (!ep->base.rx_selective || (flags & FI_COMPLETION));
}

/* The same for a call that takes the endpoint's op_flags. */
static inline int ibf_tx_wants_comp_dflt(const struct ibf_ep *ep)
{
	return ibf_tx_wants_comp(ep, ep->base.tx_op_flags);
}

static inline int ibf_rx_wants_comp_dflt(const struct ibf_ep *ep)
{
	return ibf_rx_wants_comp(ep, ep->base.rx_op_flags);
}

/* One transmit work request, as the msg and rma calls describe it. */
struct ibf_tx {
	const struct iovec *iov;
	void **desc;
	size_t count;
	enum ibv_wr_opcode opcode;
	uint64_t remote_addr;
	uint64_t rkey;
	uint64_t data;		/* remote CQ data, with FI_REMOTE_CQ_DATA */
	uint64_t flags;		/* FI_INJECT, FI_FENCE, FI_REMOTE_CQ_DATA */
	uint64_t cq_flags;	/* what its completion reports */
	void *context;
	int comp;		/* the caller wants a completion */
	uint64_t tag;		/* tagged mode */
};

/* ibf_msg_post.h has the posting helpers, inline for the msg and rma calls. */
#endif /* IBF_MSG_H */
