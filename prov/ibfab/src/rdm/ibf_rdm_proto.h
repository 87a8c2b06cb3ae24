/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The RDM protocol: messages on top of connections (ibf_rdm_proto.c for
 * eager messages, matching and progress; ibf_rdm_rndv.c for rendezvous).
 *
 * Sending: a message of at most eager_size bytes is copied behind its
 * header into the op's registered slot, so the application needs no
 * registration and its buffer is free on return.  A larger one goes by
 * rendezvous: the sender registers its buffers and sends an RTS naming
 * them; the receiver, once a receive matches, reads the message with RDMA
 * READ and answers with a FIN, which completes the send.
 *
 * Receiving: each arrival lands in a bounce of the SRQ, is checked against
 * its length and its connection (ibf_rdm_conn.h says how a sender is
 * known), and is matched against the posted receives of its kind (tagged
 * or not) in the matcher (ibf_match.h); if none matches it waits in its
 * bounce, in arrival order, for a receive (or a peek) that does.  A
 * rendezvous is bound to the connection and life it came on: one whose
 * connection has ended since fails rather than read or answer on a new QP.
 *
 * Calls go down only: to the matcher, the connection layer and the
 * operation layer.  What those report comes up through the handlers of
 * ibf_rdm_proto_upcalls.  ep->lock held unless said otherwise.
 */
#ifndef IBF_RDM_PROTO_H
#define IBF_RDM_PROTO_H

#include "ibf_rdm_conn.h"

extern const struct ibf_rdm_upcalls ibf_rdm_proto_upcalls;

/*
 * The protocol's part of the endpoint, over the connection layer's
 * (ibf_rdm_op.h says how the parts nest).
 */
#define IBF_RDM_EP_PROTO_FIELDS \
	IBF_RDM_PART(ibf_rdm_ep_conns, as_conns, IBF_RDM_EP_CONNS_FIELDS); \
	struct ibf_progress hook;	/* how CQs and counters progress it */ \
	struct fi_ops_cq sole_cq_ops;	/* hook.sole_ops, with no lock */ \
	unsigned cq_events;	/* taken, not yet acked */ \
	size_t eager_size; \
	size_t min_multi_recv;	/* FI_OPT_MIN_MULTI_RECV */ \
	int atomic_target;	/* FI_ATOMIC: peers' atomics are applied */ \
	/* Posted receives and held messages (bounces), untagged and \
	 * tagged. */ \
	struct ibf_mq recv_msg, recv_tag; \
	struct ibf_mq unexp_msg, unexp_tag; \
	/* Set when messages for a posted multi-receive buffer found no \
	 * op free to report them: they wait in unexp_msg, in order, for \
	 * freed ops.  Cleared by the drain that finds none left. */ \
	int multi_waiting; \
	int multi_draining; \
	/* Remote CQ data that found no receive op free to carry it. */ \
	struct ibf_rdm_list wdata_wait; \
	/* Peers' requests held now (each peer's: conn->held): a peer is \
	 * granted credits early while it holds at most half of the eager \
	 * buffers the others leave (ibf_rdm_proto.c, ibf_rdm_share). */ \
	uint32_t held; \
	/* What one-sided work the endpoint did, said at close \
	 * (FI_LOG_LEVEL info): how a user sees that RMA and atomics went \
	 * through ibfab; and how its rendezvous sends opened their \
	 * buffers. */ \
	struct { \
		uint64_t writes, reads, atomics, atomics_applied; \
		uint64_t rndv, rndv_windows; \
	} stats;

struct ibf_rdm_ep_proto {
	IBF_RDM_EP_PROTO_FIELDS
};

/* Whether something waits for free ops: a multi-receive's messages, or
 * remote CQ data. */
static inline int ibf_rdm_ops_awaited(const struct ibf_rdm_ep_proto *ep)
{
	return ep->multi_waiting || ep->wdata_wait.head != NULL;
}

/* Said to the operations layer after either changes, so that it tells
 * each op freed only while something waits for one. */
static inline void ibf_rdm_freed_want(struct ibf_rdm_ep_proto *ep)
{
	ep->as_ops.freed_wanted = ibf_rdm_ops_awaited(ep);
}

/* The protocol's endpoint, from the part a lower layer handed up. */
static inline struct ibf_rdm_ep_proto *
ibf_rdm_proto_of(struct ibf_rdm_ep_conns *ep)
{
	return container_of(ep, struct ibf_rdm_ep_proto, as_conns);
}

static inline struct ibf_rdm_ep_proto *
ibf_rdm_proto_of_ops(struct ibf_rdm_ep_ops *ep)
{
	return container_of(ep, struct ibf_rdm_ep_proto, as_ops);
}

/* Reads in flight per receive: enough to keep the link busy, few enough
 * that the send queues need not grow with the message size. */
#define IBF_RDM_READS 2

/*
 * What one send (fi_msg, fi_tagged), RMA (fi_rma) or atomic (fi_atomic)
 * call asks for, its arguments already checked by the API layer
 * (ibf_rdm_sendrecv.c, ibf_rdm_rma_api.c, ibf_rdm_atomic_api.c).
 */
enum ibf_rdm_req_kind {
	IBF_RDM_REQ_SEND,
	IBF_RDM_REQ_RMA,
	IBF_RDM_REQ_ATOMIC,
};

struct ibf_atomic_args;

struct ibf_rdm_req {
	enum ibf_rdm_req_kind kind;
	fi_addr_t dest;
	void *context;
	uint64_t op_flags;	/* what its completion reports */
	uint64_t flags;		/* the call's (FI_INJECT, FI_COMPLETION...) */
	size_t len;		/* the bytes it moves */
	const struct iovec *iov;
	void **desc;
	size_t count;
	uint64_t data;		/* remote CQ data */
	union {
		struct {
			uint64_t tag;
			int tagged;
		} send;
		struct {
			int wr_kind;	/* IBF_RDM_WR_READ, _WRITE, _WRITE_DATA */
			uint64_t addr;
			uint64_t key;
		} rma;
		const struct ibf_atomic_args *atomic;
	};
};

/*
 * Carry out req (takes ep->lock): the one way a send, an RMA or an
 * atomic starts.  It finds (or starts making) the peer's connection,
 * takes an op, has the request's kind build it, sends it, and on any
 * failure gives back what the build took.  0, or -FI_EOPBADSTATE (not
 * enabled), -FI_EAGAIN (no op or no room: try again after progress), or
 * what the build or the send said.
 */
ssize_t ibf_rdm_submit(struct ibf_rdm_ep_proto *ep,
		       const struct ibf_rdm_req *req);

/* A free receive op filled from the caller's arguments (not yet posted),
 * or NULL when none is free.  want: the peer's key for a directed
 * receive, 0 for any. */
struct ibf_rdm_op *ibf_rdm_rx_take(struct ibf_rdm_ep_proto *ep,
				   const struct iovec *iov, void **desc,
				   size_t count, uint64_t want, uint64_t tag,
				   uint64_t ignore, uint64_t flags,
				   void *context, int tagged);
/* Receive r takes what waits for it, or waits for what comes. */
void ibf_rdm_recv_post(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r);
/* The first held tagged message receive r would take, or NULL; take it
 * out of the matcher. */
struct ibf_rdm_op *ibf_rdm_unexp_find(struct ibf_rdm_ep_proto *ep,
				      const struct ibf_rdm_op *r);
void ibf_rdm_unexp_take(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b);
/* Receive r takes the message held in bounce b (out of the matcher). */
void ibf_rdm_deliver(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
		     struct ibf_rdm_op *b);
/* Drop a held message (FI_DISCARD): an RTS still gets its FIN. */
void ibf_rdm_discard(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b);
/* Cancel the posted receive with this context: 0 or -FI_ENOENT. */
ssize_t ibf_rdm_recv_cancel(struct ibf_rdm_ep_proto *ep, void *context);

/*
 * The endpoint's progress hook (struct ibf_progress, ep->hook), which its
 * CQs and counters call: move its data (what the connection thread left,
 * then what the device completed; sink: the CQ read running it, or NULL),
 * trywait: 0 when armed with nothing to do, or -FI_EAGAIN, and sole_read:
 * the whole read of a CQ the endpoint alone feeds with no lock.
 */
void ibf_rdm_progress(struct ibf_progress *hook, struct ibf_cq_sink *sink);
ssize_t ibf_rdm_sole_read(struct ibf_progress *hook, struct ibf_cq *cq,
			  void *buf, size_t count, fi_addr_t *src);
ssize_t ibf_rdm_sole_read_unlocked(struct ibf_progress *hook, struct ibf_cq *cq,
				   void *buf, size_t count, fi_addr_t *src);
/* And with no lock, fi_cq_read itself (hook.sole_ops's read). */
ssize_t ibf_rdm_cq_read_unlocked(struct fid_cq *cq_fid, void *buf, size_t count);
int ibf_rdm_trywait(struct ibf_progress *hook);

/* ---- ibf_rdm_rndv.c, for ibf_rdm_proto.c ---- */

/* Register a large send's buffers and build its RTS in op->mem. */
int ibf_rdm_rts_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
		      const struct iovec *iov, size_t count, size_t len);
/* Whether an arrival of byte_len bytes in b holds a sane RTS. */
int ibf_rdm_rts_fits(const struct ibf_rdm_op *b, uint32_t byte_len);
/* Receive r matched the RTS in bounce b: read the message into r. */
void ibf_rdm_read_start(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
			struct ibf_rdm_op *b);
/* One read into r has completed (or failed). */
void ibf_rdm_on_read(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *r,
		     const struct ibv_wc *wc);
/* A FIN arrived in bounce b: its send completes. */
void ibf_rdm_on_fin(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b);
/* Rendezvous send op's RTS completed: with the FIN, what it waits for. */
void ibf_rdm_rts_sent(struct ibf_rdm_op *op, int err);
/* Post the answer built in bounce b (b->wire_len bytes) to its sender;
 * b goes back to the SRQ once it is sent (a full queue parks it). */
void ibf_rdm_reply_post(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b);
/* Reads, FINs and RMA parts parked on conn go on (or fail, if it ended). */
void ibf_rdm_unstall(struct ibf_rdm_conn *conn);
/* Rendezvous sends and atomics of ended connection lives fail. */
void ibf_rdm_rndv_fail_ended(struct ibf_rdm_ep_proto *ep);

/* ---- ibf_rdm_rma.c, for ibf_rdm_proto.c ---- */

/* Build RMA op from req: its local side (the slot, or the caller's
 * buffers registered), its notice, and with requested keys the question
 * that finds the remote region first.  0 or -FI_E*. */
int ibf_rdm_rma_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
		      const struct ibf_rdm_req *req);

/* One completion of an RMA op (it completes after its last). */
void ibf_rdm_rma_sent(struct ibf_rdm_op *op, const struct ibv_wc *wc);
/* The next parts of an RMA in parts go on (a slot came back, or its
 * connection ended: then it fails). */
void ibf_rdm_rma_more(struct ibf_rdm_op *op);
/* Requested keys: an RMA's KEYQ went (or failed); one waiting for a slot
 * once told tries again; a KEYQ or KEYR came in bounce b; the peer's key
 * generation is now gen (what we learned of its keys is forgotten). */
void ibf_rdm_keyq_sent(struct ibf_rdm_op *op, int err);
void ibf_rdm_keyq_resume(struct ibf_rdm_op *op);
void ibf_rdm_on_keyq(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		     uint32_t byte_len);
void ibf_rdm_on_keyr(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		     uint32_t byte_len);
void ibf_rdm_keys_forget(struct ibf_rdm_conn *conn, uint16_t gen);
/* A KEYR's bytes (header first) against themselves: 0 or -FI_EINVAL.
 * Whether n bytes at off lie in a region of len bytes that grants need
 * (IBV_ACCESS_REMOTE_*) of access.  Both pure: the fuzzer's too. */
int ibf_rdm_keyr_check(const void *wire, uint32_t byte_len);
int ibf_rdm_key_covers(uint64_t len, uint32_t access, uint32_t need,
		       uint64_t off, uint64_t n);
/* A peer's RDMA WRITE WITH IMMEDIATE (bounce b, empty) landed: its
 * notice is due next on the same QP. */
void ibf_rdm_on_write_imm(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			  const struct ibv_wc *wc);
/* A WDATA arrived in bounce b: a remote CQ data completion, if the write
 * it tells of came just before it. */
void ibf_rdm_on_wdata(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		      const struct ibv_wc *wc);
/* An FI_RMA_EVENT notice in bounce b (its note checked for length):
 * count it (kind: the counter).  b->op.len: the verified length of a
 * write; a read's is the note's. */
void ibf_rdm_on_remote_event(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			     int kind);
/* Receive ops were freed: report the WDATAs that waited for one. */
void ibf_rdm_wdata_drain(struct ibf_rdm_ep_proto *ep);

/* ---- ibf_rdm_atomic.c, for ibf_rdm_proto.c ---- */

/* Build atomic op from req: the request in its slot, where the old
 * values of a fetch go. */
void ibf_rdm_atomic_build(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *op,
			  const struct ibf_rdm_req *req);

/* An atomic request (b, byte_len bytes) to apply and answer; an answer
 * to one of ours; our request's own completion (err 0 or -FI_E*). */
void ibf_rdm_on_atomic(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
		       uint32_t byte_len);
void ibf_rdm_on_atomic_resp(struct ibf_rdm_ep_proto *ep, struct ibf_rdm_op *b,
			    uint32_t byte_len);
void ibf_rdm_atomic_sent(struct ibf_rdm_op *op, int err);

#endif /* IBF_RDM_PROTO_H */
