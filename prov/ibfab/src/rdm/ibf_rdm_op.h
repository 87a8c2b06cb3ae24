/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM operations: the bottom layer of the RDM engine (ibf_rdm_op.c).
 *
 * Every send, receive and eager buffer ("bounce") of an endpoint is an
 * ibf_rdm_op from one array allocated at fi_enable: sends and bounces own a
 * slot of one registered area (header + eager payload).  This layer hands
 * ops out and takes them back, posts bounces to the SRQ, and completes ops
 * to the endpoint's CQs.  It calls nothing of the RDM engine above it; an
 * op going back to the pool is told upward through ep->up (ibf_rdm_conn.h).
 *
 * Ownership: an op belongs to exactly one place at a time, said by its
 * state: the free lists, a connection's queue or stalled list, the matcher,
 * the device (posted work requests), or a CQ (DONE).  Every op completes
 * exactly once, after the last work request that names it has completed,
 * so its slot is never reused under the device.
 * Locking: ep->lock held for all of it, except where said.
 */
#ifndef IBF_RDM_OP_H
#define IBF_RDM_OP_H

#include "ibf.h"
#include "ibf_match.h"
#include "ibf_rdm_wire.h"

struct ibf_rdm_ep;
struct ibf_rdm_conn;

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
	IBF_RDM_DONE,		/* its completion waits in a CQ */
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
	struct ibf_rdm_ep *ep;
	struct ibf_rdm_conn *conn;
	struct ibf_rdm_op *next, *prev;
	enum ibf_rdm_op_state state;
	enum ibf_rdm_op_state tx_state;	/* a send: its state once posted */
	int uncounted;		/* a peek: not an operation counters count */
	int is_bounce;
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
int ibf_rdm_ops_init(struct ibf_rdm_ep *ep);
void ibf_rdm_ops_fini(struct ibf_rdm_ep *ep);

/* A free send op, or NULL; a free receive op, or NULL. */
struct ibf_rdm_op *ibf_rdm_tx_get(struct ibf_rdm_ep *ep);
struct ibf_rdm_op *ibf_rdm_rx_get(struct ibf_rdm_ep *ep);
/* Back to its free list, unreported (a post that failed, a spent op). */
void ibf_rdm_op_free(struct ibf_rdm_op *op);

/* Bounce b is free again: back to the SRQ, or to the spares if it was
 * replaced there while it held a message. */
int ibf_rdm_bounce_release(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b);
/* Post every bounce (fi_enable). */
int ibf_rdm_bounces_post(struct ibf_rdm_ep *ep);
/* Top the SRQ up to nbounce from the spares, growing them if need be, up
 * to FI_IBFAB_RDM_UNEXP_MAX; progress calls it when the SRQ is short. */
void ibf_rdm_bounce_refill(struct ibf_rdm_ep *ep);
/* Whether p is one of the endpoint's bounces (a pointer handed back by the
 * application, FI_CLAIM). */
int ibf_rdm_bounce_owned(struct ibf_rdm_ep *ep, const void *p);
/* Call fn on every op, the extra bounces included. */
void ibf_rdm_ops_each(struct ibf_rdm_ep *ep,
		      void (*fn)(struct ibf_rdm_op *op, void *arg), void *arg);
/* An arrival in bounce b that does not fit: counted, said, never acted on;
 * b goes back to the SRQ. */
void ibf_rdm_drop(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b, const char *why);

/* op is finished: report it to its CQ (err 0 or -FI_E*), or free it if
 * it is silent (selective completion, inject). */
void ibf_rdm_complete(struct ibf_rdm_op *op, int err);
/* The CQ has handed op's completion out (CQ lock held, not ep->lock). */
void ibf_rdm_release(struct ibf_op *op);
/* Drop the registrations op made or holds. */
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
int ibf_rdm_reg_local(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
		      void *addr, size_t len, int access, uint32_t *lkey);

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
void ibf_rdm_copy_from_iov(uint8_t *dst, const struct iovec *iov, size_t count);

/*
 * fi_inject and its kin: the buffer is free on return and no completion is
 * written.  FI_INJECT alone (in op_flags or fi_sendmsg's flags) frees the
 * buffer but keeps the completion, as fi_msg(3) says; hence a flag of our
 * own, in the bits libfabric leaves to providers.
 */
#define IBF_RDM_NO_COMP (1ULL << 61)
#define IBF_RDM_INJECT (FI_INJECT | IBF_RDM_NO_COMP)

#endif /* IBF_RDM_OP_H */
