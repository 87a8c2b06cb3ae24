/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM operations: pools, bounces and completion (ibf_rdm_op.h).
 * ep->lock held unless said otherwise.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_mr_cache.h"
#include "ibf_rdm_op.h"

void ibf_rdm_list_append(struct ibf_rdm_list *l, struct ibf_rdm_op *op)
{
	op->next = NULL;
	op->prev = l->tail;
	if (l->tail)
		l->tail->next = op;
	else
		l->head = op;
	l->tail = op;
}

void ibf_rdm_list_remove(struct ibf_rdm_list *l, struct ibf_rdm_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		l->head = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else
		l->tail = op->prev;
	op->next = op->prev = NULL;
}

/* ---- pools ---- */

/* What every op starts with: its endpoint, and its slot (if any). */
static void ibf_rdm_op_setup(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *op,
			     uint8_t *mem, uint32_t lkey, int is_bounce)
{
	uintptr_t p = (uintptr_t)op, first = (uintptr_t)ep->ops;

	op->op.kind = IBF_OP_RDM;	/* the CQ never holds one: no release */
	op->op.src = FI_ADDR_NOTAVAIL;
	op->ep = ep;
	op->mem = mem;
	op->mem_lkey = lkey;
	op->is_bounce = is_bounce;
	/* A send op lies in the array's first ntx; extra bounces live
	 * elsewhere, above or below it. */
	op->is_tx = p >= first && p < (uintptr_t)(ep->ops + ep->ntx);
}

/* Ops are laid out as [ntx sends][nrx receives][nbounce bounces]; sends
 * and bounces own a slot of the registered area each. */
int ibf_rdm_ops_init(struct ibf_rdm_ep_ops *ep)
{
	uint32_t i, n = ep->ntx + ep->nrx + ep->nbounce;
	size_t bytes = (size_t)(ep->ntx + ep->nbounce) * ep->slot;
	struct ibf_rdm_op *op;

	ep->srq_refill_at = ep->nbounce - ibf_rdm_repost_batch(ep);
	ep->ops = calloc(n, sizeof(*ep->ops));
	if (!ep->ops || posix_memalign((void **)&ep->mem, 4096, bytes))
		return -FI_ENOMEM;
	ep->mem_mr = ibv_reg_mr(ep->base.domain->pd, ep->mem, bytes,
				IBV_ACCESS_LOCAL_WRITE);
	if (!ep->mem_mr) {
		IBF_WARN(FI_LOG_EP_CTRL, "registering %zu bytes of eager "
			 "buffers: %s\n", bytes, strerror(errno));
		return ibf_errno_to_fi(errno);
	}
	for (i = 0; i < n; i++) {
		op = &ep->ops[i];
		if (i < ep->ntx) {
			ibf_rdm_op_setup(ep, op, ep->mem + (size_t)i * ep->slot,
					 ep->mem_mr->lkey, 0);
			op->next = ep->tx_free;
			ep->tx_free = op;
		} else if (i < ep->ntx + ep->nrx) {
			ibf_rdm_op_setup(ep, op, NULL, ep->mem_mr->lkey, 0);
			op->next = ep->rx_free;
			ep->rx_free = op;
		} else {
			ibf_rdm_op_setup(ep, op, ep->mem + (size_t)(i - ep->nrx) *
					 ep->slot, ep->mem_mr->lkey, 1);
		}
	}
	ep->extra_max = (uint32_t)ibf_params.rdm_unexp_max;
	return 0;
}

/* The ops of one chunk of extra bounces, with their registered slots. */
struct ibf_rdm_chunk {
	struct ibf_rdm_chunk *next;
	struct ibv_mr *mr;
	uint8_t *mem;
	uint32_t n;
	struct ibf_rdm_op ops[];
};

static void ibf_rdm_chunks_free(struct ibf_rdm_ep_ops *ep)
{
	struct ibf_rdm_chunk *c;

	while ((c = ep->chunks)) {
		ep->chunks = c->next;
		if (c->mr)
			ibv_dereg_mr(c->mr);
		free(c->mem);
		free(c);
	}
}

static void ibf_rdm_mw_close(struct ibf_rdm_op *op);

/*
 * Free every op's memory window, then the binder they were bound on: a
 * send still open (closed without its FIN) is unbound first.
 */
void ibf_rdm_ops_windows_free(struct ibf_rdm_ep_ops *ep)
{
	uint32_t i, n = ep->ntx + ep->nrx + ep->nbounce;

	for (i = 0; ep->ops && i < n; i++) {
		if (ep->ops[i].mw_use)
			ibf_rdm_mw_close(&ep->ops[i]);	/* a send still open */
		if (ep->ops[i].mw && ibv_dealloc_mw(ep->ops[i].mw))
			IBF_WARN(FI_LOG_EP_CTRL, "ibv_dealloc_mw: %s\n",
				 strerror(errno));
		ep->ops[i].mw = NULL;
	}
	ibf_rdm_binder_close(&ep->binder);
}

void ibf_rdm_ops_fini(struct ibf_rdm_ep_ops *ep)
{
	uint32_t i, n = ep->ntx + ep->nrx + ep->nbounce;

	ibf_rdm_ops_windows_free(ep);	/* before the registrations */
	for (i = 0; ep->ops && i < n; i++)
		ibf_rdm_unregister(&ep->ops[i]);
	ibf_rdm_chunks_free(ep);
	ep->spare = NULL;
	if (ep->mem_mr)
		ibv_dereg_mr(ep->mem_mr);
	free(ep->mem);
	free(ep->ops);
	ep->ops = NULL;
	ep->mem = NULL;
	ep->mem_mr = NULL;
}

static int ibf_rdm_is_tx(const struct ibf_rdm_op *op)
{
	return op->is_tx;
}

void ibf_rdm_ops_each(struct ibf_rdm_ep_ops *ep,
		      void (*fn)(struct ibf_rdm_op *op, void *arg), void *arg)
{
	uint32_t i, n = ep->ntx + ep->nrx + ep->nbounce;
	struct ibf_rdm_chunk *c;

	for (i = 0; ep->ops && i < n; i++)
		fn(&ep->ops[i], arg);
	for (c = ep->chunks; c; c = c->next)
		for (i = 0; i < c->n; i++)
			fn(&c->ops[i], arg);
}

int ibf_rdm_bounce_owned(struct ibf_rdm_ep_ops *ep, const void *p)
{
	uintptr_t a = (uintptr_t)p;
	const struct ibf_rdm_chunk *c;
	const struct ibf_rdm_op *first = ep->ops + ep->ntx + ep->nrx;

	if (a >= (uintptr_t)first && a < (uintptr_t)(first + ep->nbounce))
		return (a - (uintptr_t)first) % sizeof(*first) == 0;
	for (c = ep->chunks; c; c = c->next)
		if (a >= (uintptr_t)c->ops && a < (uintptr_t)(c->ops + c->n))
			return (a - (uintptr_t)c->ops) % sizeof(*first) == 0;
	return 0;
}

static const char *const ibf_rdm_op_names[IBF_RDM_OP_STATES] = {
	[IBF_RDM_FREE] = "free",
	[IBF_RDM_NEW] = "new",
	[IBF_RDM_TX] = "tx",
	[IBF_RDM_TX_RTS] = "tx-rts",
	[IBF_RDM_QUEUED] = "queued",
	[IBF_RDM_RX_POSTED] = "rx-posted",
	[IBF_RDM_RX_READ] = "rx-read",
	[IBF_RDM_BOUNCE_POSTED] = "bounce-posted",
	[IBF_RDM_BOUNCE_HELD] = "bounce-held",
	[IBF_RDM_BOUNCE_FIN] = "bounce-fin",
	[IBF_RDM_PROBE] = "probe",
	[IBF_RDM_DRAIN] = "drain",
	[IBF_RDM_BOUNCE_SPARE] = "bounce-spare",
	[IBF_RDM_TX_RMA] = "tx-rma",
	[IBF_RDM_TX_ATOMIC] = "tx-atomic",
	[IBF_RDM_BOUNCE_CLAIMED] = "bounce-claimed",
	[IBF_RDM_GRANT] = "grant",
	[IBF_RDM_TX_KEYQ] = "tx-keyq",
};

const char *ibf_rdm_op_state_name(enum ibf_rdm_op_state state)
{
	return ibf_state_name(ibf_rdm_op_names, IBF_RDM_OP_STATES, (int)state);
}

#define IBF_S(s) (1u << IBF_RDM_##s)
/*
 * The life of an op: the states each may go to.
 *
 * A send op is taken (NEW) and posted, or queued for its connection; a
 * post puts it in its kind's sending state before the device can
 * complete it (progress on another thread may see the completion at
 * once), so a post the queue or the peer's window refused leaves it
 * there: it may then be queued, posted again from the queue (the same
 * state), or freed unsent.  It ends freed, its completion copied out.
 * A part of a split RMA is posted in TX_RMA; a KEYQ answered
 * becomes its RMA; a failed RTS is a plain send whose late FIN is
 * ignored.  A receive is posted, may read a rendezvous message, and ends
 * the same way.  A bounce goes round the SRQ: posted, holding a message
 * (claimed by FI_PEEK | FI_CLAIM), sending a FIN from its buffer, and back
 * to the SRQ or the spares; it is still POSTED while its arrival is
 * handled, so POSTED may follow POSTED.  A PING or a grant is sent and
 * freed.  Drains are born DRAIN and never move.
 */
#define IBF_SENDING (IBF_S(FREE) | IBF_S(QUEUED))
static const uint32_t ibf_rdm_op_moves[IBF_RDM_OP_STATES] = {
	[IBF_RDM_FREE] = IBF_S(NEW) | IBF_S(PROBE) | IBF_S(GRANT) |
			 IBF_S(BOUNCE_POSTED),
	[IBF_RDM_NEW] = IBF_S(FREE) | IBF_S(QUEUED) | IBF_S(RX_POSTED) |
			IBF_S(TX) | IBF_S(TX_RTS) | IBF_S(TX_RMA) |
			IBF_S(TX_ATOMIC) | IBF_S(TX_KEYQ),
	[IBF_RDM_QUEUED] = IBF_S(FREE) | IBF_S(TX) |
			   IBF_S(TX_RTS) | IBF_S(TX_RMA) | IBF_S(TX_ATOMIC) |
			   IBF_S(TX_KEYQ),
	[IBF_RDM_TX] = IBF_SENDING | IBF_S(TX),
	[IBF_RDM_TX_RTS] = IBF_SENDING | IBF_S(TX_RTS) | IBF_S(TX),
	[IBF_RDM_TX_RMA] = IBF_SENDING | IBF_S(TX_RMA),
	[IBF_RDM_TX_ATOMIC] = IBF_SENDING | IBF_S(TX_ATOMIC),
	[IBF_RDM_TX_KEYQ] = IBF_SENDING | IBF_S(TX_KEYQ) | IBF_S(TX_RMA),
	[IBF_RDM_RX_POSTED] = IBF_S(FREE) | IBF_S(RX_READ),
	[IBF_RDM_RX_READ] = IBF_S(FREE),
	[IBF_RDM_BOUNCE_POSTED] = IBF_S(BOUNCE_POSTED) | IBF_S(BOUNCE_HELD) |
				  IBF_S(BOUNCE_FIN) | IBF_S(BOUNCE_SPARE),
	[IBF_RDM_BOUNCE_HELD] = IBF_S(BOUNCE_HELD) | IBF_S(BOUNCE_CLAIMED) |
				IBF_S(BOUNCE_FIN) | IBF_S(BOUNCE_POSTED) |
				IBF_S(BOUNCE_SPARE),
	[IBF_RDM_BOUNCE_CLAIMED] = IBF_S(BOUNCE_HELD) | IBF_S(BOUNCE_POSTED) |
				   IBF_S(BOUNCE_SPARE),
	[IBF_RDM_BOUNCE_FIN] = IBF_S(BOUNCE_FIN) | IBF_S(BOUNCE_POSTED) |
			       IBF_S(BOUNCE_SPARE),
	[IBF_RDM_BOUNCE_SPARE] = IBF_S(BOUNCE_POSTED),
	[IBF_RDM_PROBE] = IBF_S(FREE),
	[IBF_RDM_GRANT] = IBF_S(FREE),
	[IBF_RDM_DRAIN] = 0,
};
#undef IBF_SENDING
#undef IBF_S
_Static_assert(IBF_RDM_OP_STATES <= 32, "a state is a bit of a move mask");

int ibf_rdm_op_move_ok(enum ibf_rdm_op_state from, enum ibf_rdm_op_state to)
{
	return ibf_state_move_ok(ibf_rdm_op_moves, ibf_rdm_op_names,
				 IBF_RDM_OP_STATES, (int)from, (int)to, "an op");
}

/*
 * As many held ops as CQ readers gave room back for since the last call,
 * onto the free list (ep->lock held): the list's first op, or NULL.
 */
static struct ibf_rdm_op *ibf_rdm_unhold(struct ibf_rdm_op **held,
					 struct ibf_rdm_op **free_list,
					 struct ibf_cq_room *room)
{
	uint32_t n = __atomic_exchange_n(&room->returned, 0, __ATOMIC_ACQUIRE);
	struct ibf_rdm_op *op;

	while (n-- && (op = *held)) {	/* one held op per entry read */
		*held = op->next;
		op->next = *free_list;
		*free_list = op;
	}
	return *free_list;
}

struct ibf_rdm_op *ibf_rdm_rx_reclaim(struct ibf_rdm_ep_ops *ep)
{
	return ibf_rdm_unhold(&ep->rx_held, &ep->rx_free, &ep->rx_room);
}

/* The first op of a free list (refilled from held if it is empty). */
static inline struct ibf_rdm_op *ibf_rdm_get(struct ibf_rdm_op **free_list,
					     struct ibf_rdm_op **held,
					     struct ibf_cq_room *room)
{
	struct ibf_rdm_op *op = *free_list;

	if (unlikely(!op) && !(op = ibf_rdm_unhold(held, free_list, room)))
		return NULL;	/* all in use, or their completions unread */
	*free_list = op->next;
	ibf_rdm_op_to(op, IBF_RDM_NEW);
	return op;
}

struct ibf_rdm_op *ibf_rdm_tx_get(struct ibf_rdm_ep_ops *ep)
{
	return ibf_rdm_get(&ep->tx_free, &ep->tx_held, &ep->tx_room);
}

struct ibf_rdm_op *ibf_rdm_rx_get(struct ibf_rdm_ep_ops *ep)
{
	return ibf_rdm_get(&ep->rx_free, &ep->rx_held, &ep->rx_room);
}

/* Freed: onto its free list, or, while its completion waits unread in a
 * CQ (held), onto the held list. */
static inline void ibf_rdm_op_put(struct ibf_rdm_op *op, int held)
{
	struct ibf_rdm_ep_ops *ep = op->ep;
	struct ibf_rdm_op **list;

	ibf_rdm_op_to(op, IBF_RDM_FREE);
	if (ibf_rdm_is_tx(op))
		list = held ? &ep->tx_held : &ep->tx_free;
	else
		list = held ? &ep->rx_held : &ep->rx_free;
	op->next = *list;
	*list = op;
}

void ibf_rdm_op_free(struct ibf_rdm_op *op)
{
	op->op.prov_errno = 0;	/* reused clean (the usual put never sets it) */
	ibf_rdm_op_put(op, 0);
}

/* ---- bounces ---- */

/*
 * The SRQ holds nbounce bounces while it can, less at most a batch of
 * released ones waiting among the spares.  A bounce that holds
 * a message (unexpected, or an RTS being read) is replaced from the spares,
 * which grow, a chunk at a time, up to FI_IBFAB_RDM_UNEXP_MAX: senders
 * never wait for receives the application has not posted yet (a wait that
 * deadlocks any protocol whose next receive hangs on a message queued
 * behind), and the memory is spent only when a backlog first reaches it.
 * Each extra bounce may send a FIN, so the endpoint's CQ grows with them.
 */
/* b's receive for the SRQ (all of its slot), b POSTED from now on. */
static void ibf_rdm_bounce_wr(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b,
			      struct ibv_recv_wr *wr, struct ibv_sge *sge)
{
	sge->addr = (uintptr_t)b->mem;
	sge->length = (uint32_t)ep->slot;
	sge->lkey = b->mem_lkey;
	wr->wr_id = (uintptr_t)&b->op;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->next = NULL;
	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_POSTED);
	b->conn = NULL;
	ibf_tsan_release(b);
}

/* Post the n chained receives of wr[] in one call; the bounces of those
 * the SRQ refused go back to the spares.  0 or -FI_E*. */
static int ibf_rdm_bounces_push(struct ibf_rdm_ep_ops *ep,
				struct ibv_recv_wr *wr, int n)
{
	struct ibv_recv_wr *bad = NULL;
	struct ibf_rdm_op *b;
	int ret, i, posted;

	ret = ibv_post_srq_recv(ep->srq, wr, &bad);
	if (likely(!ret)) {
		ep->srq_posted += (uint32_t)n;
		return 0;
	}
	/* Those before the one it names went in (ibv_post_srq_recv(3)). */
	posted = bad >= wr && bad < wr + n ? (int)(bad - wr) : 0;
	ep->srq_posted += (uint32_t)posted;
	IBF_WARN(FI_LOG_EP_DATA, "ibv_post_srq_recv: %s: %d eager buffers "
		 "fewer until the next try\n", strerror(ret), n - posted);
	for (i = posted; i < n; i++) {
		b = container_of((struct ibf_op *)(uintptr_t)wr[i].wr_id,
				 struct ibf_rdm_op, op);
		ibf_rdm_op_to(b, IBF_RDM_BOUNCE_SPARE);
		b->next = ep->spare;
		ep->spare = b;
	}
	return ibf_errno_to_fi(ret);
}

static int ibf_rdm_bounce_post(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b)
{
	struct ibv_recv_wr wr;
	struct ibv_sge sge;

	ibf_rdm_bounce_wr(ep, b, &wr, &sge);
	return ibf_rdm_bounces_push(ep, &wr, 1);
}

/*
 * A released bounce joins the spares, and the SRQ takes them back a batch
 * at a time (ibf_rdm_srq_short): one ibv_post_srq_recv, one lock in the
 * driver, for up to IBF_RDM_REPOST_MAX of them.
 */
void ibf_rdm_bounce_release(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b)
{
	if (b->req)
		ep->up->request_done(ep, b);	/* its credit, its share */
	ibf_rdm_op_to(b, IBF_RDM_BOUNCE_SPARE);
	b->conn = NULL;
	b->next = ep->spare;
	ep->spare = b;
	if (ibf_rdm_srq_short(ep))
		ibf_rdm_bounce_refill(ep);
}

int ibf_rdm_bounces_post(struct ibf_rdm_ep_ops *ep)
{
	uint32_t i;
	int ret;

	for (i = 0; i < ep->nbounce; i++) {
		ret = ibf_rdm_bounce_post(ep, &ep->ops[ep->ntx + ep->nrx + i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Room in the CQ for n more FINs, then n more spares; 0 or -FI_E*. */
static int ibf_rdm_bounce_grow(struct ibf_rdm_ep_ops *ep)
{
	uint32_t i, n = IBF_MIN(IBF_RDM_CHUNK, ep->extra_max - ep->nextra);
	struct ibf_rdm_chunk *c;
	int cqe = ep->hcq_need + (int)n;

	if (!n)
		return -FI_ENOMEM;
	if (ep->hcq->cqe < cqe && ibv_resize_cq(ep->hcq, cqe)) {
		IBF_WARN(FI_LOG_EP_DATA, "ibv_resize_cq(%d): %s: no more eager "
			 "buffers than %u; senders wait for receives\n", cqe,
			 strerror(errno), ep->nbounce + ep->nextra);
		ep->extra_max = ep->nextra;
		return -FI_ENOMEM;
	}
	ep->hcq_need = cqe;
	c = calloc(1, sizeof(*c) + n * sizeof(c->ops[0]));
	if (!c || posix_memalign((void **)&c->mem, 4096, n * ep->slot) ||
	    !(c->mr = ibv_reg_mr(ep->base.domain->pd, c->mem, n * ep->slot,
				 IBV_ACCESS_LOCAL_WRITE))) {
		IBF_WARN(FI_LOG_EP_DATA, "%u more eager buffers: out of "
			 "memory; senders wait for receives\n", n);
		if (c)
			free(c->mem);
		free(c);
		ep->extra_max = ep->nextra;
		return -FI_ENOMEM;
	}
	c->n = n;
	for (i = 0; i < n; i++) {
		struct ibf_rdm_op *b = &c->ops[i];

		ibf_rdm_op_setup(ep, b, c->mem + (size_t)i * ep->slot,
				 c->mr->lkey, 1);
		b->state = IBF_RDM_BOUNCE_SPARE;	/* born a spare */
		b->next = ep->spare;
		ep->spare = b;
	}
	c->next = ep->chunks;
	ep->chunks = c;
	ep->nextra += n;
	IBF_INFO(FI_LOG_EP_DATA, "messages wait for receives: %u eager "
		 "buffers now\n", ep->nbounce + ep->nextra);
	return 0;
}

void ibf_rdm_bounce_refill(struct ibf_rdm_ep_ops *ep)
{
	struct ibv_recv_wr wr[IBF_RDM_REPOST_MAX];
	struct ibv_sge sge[IBF_RDM_REPOST_MAX];
	struct ibf_rdm_op *b;
	int n;

	while (ep->srq_posted < ep->nbounce) {
		for (n = 0; n < IBF_RDM_REPOST_MAX &&
			    ep->srq_posted + (uint32_t)n < ep->nbounce; n++) {
			if (!ep->spare && ibf_rdm_bounce_grow(ep))
				break;
			b = ep->spare;
			ep->spare = b->next;
			ibf_rdm_bounce_wr(ep, b, &wr[n], &sge[n]);
			if (n)
				wr[n - 1].next = &wr[n];
		}
		if (!n || ibf_rdm_bounces_push(ep, wr, n))
			return;
	}
}

void ibf_rdm_drop(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *b,
		  const char *why)
{
	ep->dropped++;
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an arrival dropped (%llu "
		       "so far): %s\n", (unsigned long long)ep->dropped, why);
	ibf_rdm_bounce_release(ep, b);
}

/* ---- completion ---- */

/*
 * A window that could not be bound or unbound: freed, which closes it at
 * once, so no peer reads on; the next send allocates another.
 */
static void ibf_rdm_mw_free(struct ibf_rdm_op *op)
{
	if (ibv_dealloc_mw(op->mw))
		IBF_WARN(FI_LOG_EP_DATA, "ibv_dealloc_mw: %s: a peer may "
			 "still read a finished send's buffer\n",
			 strerror(errno));
	op->mw = NULL;
	op->ep->mw_freed++;
}

/* The window of op's send is done with (its FIN came, or the send ended
 * without one): unbound, and kept for op's next send. */
static void ibf_rdm_mw_close(struct ibf_rdm_op *op)
{
	if (ibf_rdm_binder_unbind(&op->ep->binder, op->mw, op->mrc[0]->handle))
		ibf_rdm_mw_free(op);
	op->mw_use = 0;
}

int ibf_rdm_mw_open(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *op,
		    void *addr, size_t len, uint32_t *rkey)
{
	struct ibf_mr_cache *cache;
	struct ibf_mr_cache_entry *e;
	int uncacheable;

	if (!ep->mw_ok)
		return -FI_ENOSYS;
	cache = ibf_domain_mr_cache(ep->base.domain);
	if (!cache) {
		ep->mw_ok = 0;	/* the domain's choice, for good: ask no more */
		return -FI_ENOSYS;
	}
	if (!op->mw) {
		op->mw = ibv_alloc_mw(ep->base.domain->pd, IBV_MW_TYPE_1);
		if (!op->mw) {
			IBF_WARN(FI_LOG_EP_DATA, "ibv_alloc_mw: %s: rendezvous "
				 "sends register their buffers each time\n",
				 strerror(errno));
			ep->mw_ok = 0;
			return -FI_ENOSYS;
		}
	}
	e = ibf_mr_cache_get(cache, addr, len, IBV_ACCESS_MW_BIND, &uncacheable);
	if (!e)
		return -FI_ENOSYS;	/* registered per send, or said there */
	assert(!op->nmrc && !op->mw_use);
	if (ibf_rdm_binder_bind(&ep->binder, op->mw, e->handle,
				(uintptr_t)addr, len, rkey)) {
		ibf_mr_cache_put(cache, e);
		ibf_rdm_mw_free(op);
		ep->mw_ok = 0;		/* the binder said why */
		return -FI_ENOSYS;
	}
	op->mrc[op->nmrc++] = e;
	op->mw_use = 1;
	return 0;
}

void ibf_rdm_unregister_any(struct ibf_rdm_op *op)
{
	if (op->mw_use)
		ibf_rdm_mw_close(op);	/* before the registration under it */
	while (op->nmr)
		ibv_dereg_mr(op->mr[--op->nmr]);
	while (op->nmrc)
		ibf_mr_cache_put(op->ep->base.domain->mr_cache, op->mrc[--op->nmrc]);
}

int ibf_rdm_reg_local(struct ibf_rdm_ep_ops *ep, struct ibf_rdm_op *op,
		      void *addr, size_t len, int access, uint32_t *lkey)
{
	struct ibf_mr_cache *cache = ibf_domain_mr_cache(ep->base.domain);
	struct ibf_mr_cache_entry *e;
	struct ibv_mr *mr;
	int uncacheable = 1;

	if (cache) {
		e = ibf_mr_cache_get(cache, addr, len, access, &uncacheable);
		if (e) {
			op->mrc[op->nmrc++] = e;
			*lkey = e->lkey;
			return 0;
		}
	}
	if (uncacheable) {
		mr = ibv_reg_mr(ep->base.domain->pd, addr, len, access);
		if (mr) {
			op->mr[op->nmr++] = mr;
			*lkey = mr->lkey;
			return 0;
		}
	}
	FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "registering %zu bytes at "
		       "%p: %s\n", len, addr, strerror(errno));
	return ibf_errno_to_fi_retry(errno);
}

static struct ibf_cq *ibf_rdm_op_cq(struct ibf_rdm_op *op)
{
	struct ibf_rdm_ep_ops *ep = op->ep;

	if (ibf_rdm_is_tx(op))
		return ep->base.tx_cq ? ep->base.tx_cq : ep->base.rx_cq;
	return ep->base.rx_cq ? ep->base.rx_cq : ep->base.tx_cq;
}

/* The counter op's completion adds to, if one is bound. */
static struct ibf_cntr *ibf_rdm_op_cntr(struct ibf_rdm_op *op)
{
	struct ibf_rdm_ep_ops *ep = op->ep;
	uint64_t f = op->op.flags;

	if (unlikely(f & (FI_RMA | FI_ATOMIC)))
		return ep->base.cntr[(f & FI_REMOTE_WRITE) ? IBF_CNTR_REMOTE_WRITE :
				(f & FI_REMOTE_READ) ? IBF_CNTR_REMOTE_READ :
				(f & FI_READ) ? IBF_CNTR_READ :
				IBF_CNTR_WRITE];
	if (ibf_rdm_is_tx(op))
		return ep->base.cntr[IBF_CNTR_SEND];
	return op->uncounted ? NULL : ep->base.cntr[IBF_CNTR_RECV];
}

/* Every completion but the usual kind (ibf_rdm_complete): counted,
 * unregistered, failed, or queued in the CQ's ring.  Apart, so that the
 * usual kind saves no registers for it. */
static void __attribute__((noinline))
ibf_rdm_complete_any(struct ibf_rdm_op *op, int err)
{
	struct ibf_rdm_ep_ops *ep = op->ep;
	struct ibf_cntr *cntr = ibf_rdm_op_cntr(op);
	struct ibf_cq *cq = ibf_rdm_op_cq(op);

	/* Counted whether or not a completion is written (fi_cntr(3)). */
	if (unlikely(cntr != NULL))
		ibf_cntr_count(cntr, err);
	ibf_rdm_unregister(op);
	if (err && !op->op.context && !op->op.user_comp) {
		/* An inject: it has no context to report an error with. */
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "a send without "
			       "context failed: %s\n", fi_strerror(-err));
		ibf_rdm_op_free(op);
		return;
	}
	/* Silent, or written straight into the reader's buffer: done. */
	if (!err && (!op->op.user_comp ||
		     (ep->sink && ep->sink->cq == cq &&
		      ibf_cq_sink_take(ep->sink, &op->op)))) {
		op->op.prov_errno = 0;
		ibf_rdm_op_put(op, 0);
		if (unlikely(ep->freed_wanted))
			ep->up->op_freed(ep);
		return;
	}
	/* Copied into the CQ's ring, op freed but held until the copy is
	 * read (the reader gives its room back to this direction's). */
	op->op.err = -err;
	ibf_cq_soft_write(cq, &op->op, ibf_rdm_is_tx(op) ? &ep->tx_room :
							  &ep->rx_room);
	op->op.prov_errno = 0;	/* copied: reused clean */
	ibf_rdm_op_put(op, 1);
}

/* err: 0 or -FI_E*; the CQ reports it positive, as fi_cq_readerr does. */
IBF_INLINE_HOT void ibf_rdm_complete(struct ibf_rdm_op *op, int err)
{
	struct ibf_rdm_ep_ops *ep = op->ep;
	struct ibf_cq *cq;

	/* Posted or queued first, and completed once (then it is FREE). */
	assert(op->state != IBF_RDM_NEW && op->state != IBF_RDM_FREE);
	/* The usual kind: a success no counter counts, holding no
	 * registration, written straight into the buffer of the CQ read
	 * that runs progress (or asked for no completion).  Which counter
	 * is asked only of an endpoint that has one. */
	if (likely(!err && !op->nmr && !op->nmrc &&
		   !(ep->base.counted && ibf_rdm_op_cntr(op)))) {
		cq = ibf_rdm_op_cq(op);
		if (!op->op.user_comp ||
		    (ep->sink && ep->sink->cq == cq &&
		     ibf_cq_sink_take(ep->sink, &op->op))) {
			ibf_rdm_op_put(op, 0);
			if (unlikely(ep->freed_wanted))
				ep->up->op_freed(ep);
			return;
		}
	}
	ibf_rdm_complete_any(op, err);
}

/* ---- buffers ---- */

int ibf_rdm_iov_sges(struct ibf_rdm_op *op, size_t len, struct ibv_sge *sge)
{
	int nsge = 0;
	size_t n;

	while (len && nsge < IBF_RDM_IOV) {
		while (op->rd_iov < op->count - 1 &&
		       op->rd_ioff == op->iov[op->rd_iov].iov_len) {
			op->rd_iov++;
			op->rd_ioff = 0;
		}
		n = IBF_MIN(len, op->iov[op->rd_iov].iov_len - op->rd_ioff);
		sge[nsge].addr = (uintptr_t)op->iov[op->rd_iov].iov_base + op->rd_ioff;
		sge[nsge].length = (uint32_t)n;
		sge[nsge].lkey = op->lkey[op->rd_iov];
		nsge++;
		op->rd_ioff += n;
		len -= n;
	}
	return nsge;
}

size_t ibf_rdm_iov_len(const struct iovec *iov, size_t count)
{
	size_t len;

	return ibf_iov_sum(iov, count, &len) ? SIZE_MAX : len;
}

int ibf_rdm_iov_check_any(const struct iovec *iov, size_t count,
			  size_t limit, size_t *len, const char *what)
{
	size_t sum = 0;

	if (unlikely(count > limit || (count && !iov) ||
		     ibf_iov_sum(iov, count, &sum))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "%s with %zu iovs "
			       "(iov_limit %zu)%s\n", what, count, limit,
			       count <= limit && iov ? " whose lengths add up "
			       "past SIZE_MAX" : "");
		return -FI_EINVAL;
	}
	*len = sum;
	return 0;
}

void ibf_rdm_copy_from_iov_any(uint8_t *dst, const struct iovec *iov,
			       size_t count)
{
	size_t i;

	for (i = 0; i < count; i++) {
		memcpy(dst, iov[i].iov_base, iov[i].iov_len);
		dst += iov[i].iov_len;
	}
}
