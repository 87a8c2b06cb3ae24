/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Atomics on FI_EP_MSG endpoints.
 *
 * An endpoint opened with FI_ATOMIC runs in framed mode (ibf_msg_tagged.c),
 * since the requests and their answers must land in buffers of ibfab's,
 * not in the application's receives.  Each atomic is a framed request
 * (IBF_HDR_ATOMIC: struct ibf_atomic_req, then operands and compare
 * values) that the peer applies with its CPU (ibf_atomic_apply.h says why) and
 * answers (IBF_HDR_ATOMIC_RESP).  The atomic waits here, in a slot of its
 * own, for that answer; then its completion, with the old values copied
 * out for a fetch, goes to the send CQ: the operation has been applied at
 * the target (FI_DELIVERY_COMPLETE).  Requests on one connection are
 * applied in order.
 *
 * The request's send is the provider's own (op flags 0, context the
 * atomic's slot): it reports nothing, and if it fails the atomic fails.
 * Once the connection is gone (the endpoint's receive buffers flush, after
 * every answer that came before), each atomic still waiting fails with
 * FI_ECONNABORTED: whether its request was applied is unknown.
 *
 * ep->tx_lock guards the free slots.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_atomic_ops.h"
#include "ibf_msg_post.h"

#define IBF_MSG_ATOMIC_IOV 4	/* local iocs of each kind */

struct ibf_msg_atomic_slot {
	struct ibf_op op;	/* its completion (kind IBF_OP_MATOMIC) */
	struct iovec res[IBF_MSG_ATOMIC_IOV];	/* where old values go */
	size_t nres;
	size_t want;		/* result bytes the answer must bring */
	int waiting;		/* sent, not answered */
};

struct ibf_msg_atomic {
	struct ibf_ep *ep;
	struct ibf_msg_atomic_slot *slot;
	int *next;		/* free list links */
	int free_head;
	uint32_t n;
	struct ibf_cq *scq;	/* where atomics complete */
	int reserved;		/* soft ring room taken in scq */
};

int ibf_msg_atomic_init(struct ibf_ep *ep)
{
	struct ibf_msg_atomic *m;
	uint32_t i;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -FI_ENOMEM;
	m->ep = ep;
	m->n = ep->tx.size;
	m->scq = ibf_ep_send_cq(ep);
	m->slot = calloc(m->n, sizeof(*m->slot));
	m->next = calloc(m->n, sizeof(*m->next));
	if (!m->slot || !m->next)
		goto err;
	for (i = 0; i < m->n; i++) {
		m->slot[i].op.kind = IBF_OP_MATOMIC;
		m->slot[i].op.release = ibf_msg_atomic_release;
		m->slot[i].op.owner = ep;
		m->slot[i].op.src = FI_ADDR_NOTAVAIL;
		m->next[i] = i + 1 < m->n ? (int)i + 1 : -1;
	}
	if (ibf_cq_soft_reserve(m->scq, m->n))
		goto err;
	m->reserved = 1;
	ep->matomic = m;
	return 0;
err:
	ep->matomic = m;
	ibf_msg_atomic_fini(ep);
	return -FI_ENOMEM;
}

void ibf_msg_atomic_fini(struct ibf_ep *ep)
{
	struct ibf_msg_atomic *m = ep->matomic;

	if (!m)
		return;
	if (m->reserved)
		ibf_cq_soft_unreserve(m->scq, m->n);
	free(m->slot);
	free(m->next);
	free(m);
	ep->matomic = NULL;
}

void ibf_msg_atomic_release(struct ibf_op *op)
{
	struct ibf_ep *ep = ibf_op_ep(op);
	struct ibf_msg_atomic *m = ep->matomic;
	int i = (int)((struct ibf_msg_atomic_slot *)op - m->slot);

	ibf_lock_acquire(&ep->tx_lock);
	m->next[i] = m->free_head;
	m->free_head = i;
	ibf_lock_release(&ep->tx_lock);
}

/* What the request's frame carries. */
struct ibf_msg_atomic_req {
	const struct ibf_atomic_args *a;
	size_t count;
	uint32_t cookie;
};

static size_t ibf_msg_atomic_fill(void *dst, const void *arg)
{
	const struct ibf_msg_atomic_req *r = arg;

	return ibf_atomic_req_build(dst, r->a, r->count, r->cookie);
}

/* A free slot, taken (tx_lock inside), or NULL. */
static struct ibf_msg_atomic_slot *ibf_msg_atomic_take(struct ibf_msg_atomic *m)
{
	int i;

	ibf_lock_acquire(&m->ep->tx_lock);
	i = m->free_head;
	if (i >= 0)
		m->free_head = m->next[i];
	ibf_lock_release(&m->ep->tx_lock);
	return i >= 0 ? &m->slot[i] : NULL;
}

static void ibf_msg_atomic_fill_slot(struct ibf_ep *ep,
				     struct ibf_msg_atomic_slot *s,
				     const struct ibf_atomic_args *a,
				     size_t count, uint64_t flags, void *context)
{
	size_t size = ibf_atomic_size(a->dt), i;
	int plain = a->kind == IBF_ATOMIC_PLAIN;

	s->op.context = context;
	s->op.flags = FI_ATOMIC | (plain ? FI_WRITE : FI_READ);
	s->op.len = count * size;
	s->op.buf = NULL;
	s->op.data = s->op.tag = 0;
	s->op.olen = 0;
	s->op.err = 0;
	s->op.user_comp = !(flags & FI_INJECT) && ibf_tx_wants_comp(ep, flags);
	s->op.cntr = ep->base.cntr[plain ? IBF_CNTR_WRITE : IBF_CNTR_READ];
	s->nres = plain ? 0 : a->nres;
	for (i = 0; i < s->nres; i++) {
		s->res[i].iov_base = a->res[i].addr;
		s->res[i].iov_len = a->res[i].count * size;
	}
	s->want = plain ? 0 : count * size;
}

static ssize_t ibf_msg_atomic_post(struct fid_ep *ep_fid,
				   const struct ibf_atomic_args *a,
				   fi_addr_t dest, uint64_t flags, void *context)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	struct ibf_msg_atomic *m = ep->matomic;
	struct ibf_tag_hdr hdr = { .flags = IBF_HDR_ATOMIC };
	struct ibf_msg_atomic_req req = { .a = a };
	struct ibf_msg_atomic_slot *s;
	ssize_t ret;

	(void)dest;	/* a connected endpoint has one peer */
	if (unlikely(!(ep->base.info->caps & FI_ATOMIC))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic on an "
			       "endpoint opened without FI_ATOMIC\n");
		return -FI_EOPNOTSUPP;
	}
	ret = ibf_atomic_args_check(a, IBF_MSG_ATOMIC_IOV, ibf_params.eager_size,
				    &req.count);
	if (unlikely(ret))
		return ret;
	if (unlikely(!m || !ep->tagged))
		return -FI_EOPBADSTATE;	/* not enabled yet */
	s = ibf_msg_atomic_take(m);
	if (unlikely(!s))
		return -FI_EAGAIN;
	ibf_msg_atomic_fill_slot(ep, s, a, req.count, flags, context);
	req.cookie = (uint32_t)(s - m->slot);
	__atomic_store_n(&s->waiting, 1, __ATOMIC_RELEASE);
	ret = ibf_tagged_send_frame(ep, &hdr, ibf_msg_atomic_fill, &req, 0,
				    &s->op, 0, NULL);
	if (unlikely(ret)) {
		__atomic_store_n(&s->waiting, 0, __ATOMIC_RELEASE);
		ibf_msg_atomic_release(&s->op);
	}
	return ret;
}

/* The atomic in slot op fails with err (positive), unless it is done. */
void ibf_msg_atomic_fail(struct ibf_op *op, int err)
{
	struct ibf_msg_atomic_slot *s = (struct ibf_msg_atomic_slot *)op;

	if (!op || !__atomic_exchange_n(&s->waiting, 0, __ATOMIC_ACQ_REL))
		return;
	s->op.err = err;
	ibf_cq_soft_push(ibf_op_ep(op)->matomic->scq, &s->op);
}

void ibf_msg_atomic_fail_all(struct ibf_ep *ep, int err)
{
	struct ibf_msg_atomic *m = ep->matomic;
	uint32_t i;

	for (i = 0; m && i < m->n; i++)
		ibf_msg_atomic_fail(&m->slot[i].op, err);
}

/* Scatter the old values into the result iovs. */
static void ibf_msg_atomic_copy_out(struct ibf_msg_atomic_slot *s,
				    const uint8_t *src, size_t len)
{
	size_t i, done = 0, n;

	for (i = 0; i < s->nres && done < len; i++) {
		n = IBF_MIN(s->res[i].iov_len, len - done);
		memcpy(s->res[i].iov_base, src + done, n);
		done += n;
	}
}

void ibf_msg_atomic_on_answer(struct ibf_ep *ep, const void *wire, size_t len)
{
	const struct ibf_atomic_req *resp = wire;
	struct ibf_msg_atomic *m = ep->matomic;
	struct ibf_msg_atomic_slot *s;

	s = m && len >= sizeof(*resp) && resp->cookie < m->n ?
	    &m->slot[resp->cookie] : NULL;
	if (!s || !__atomic_exchange_n(&s->waiting, 0, __ATOMIC_ACQ_REL)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "dropped an atomic "
			       "answer for no atomic of ours\n");
		return;
	}
	if (ibf_atomic_answer_check(resp, len, s->want)) {
		s->op.err = FI_EIO;
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic's answer "
			       "is malformed (%zu bytes)\n", len);
	} else if (resp->status) {
		s->op.err = -resp->status;
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "the target refused "
			       "an atomic: %s (its log says why)\n",
			       fi_strerror(-resp->status));
	} else {
		ibf_msg_atomic_copy_out(s, (const uint8_t *)(resp + 1),
					len - sizeof(*resp));
	}
	ibf_cq_soft_push(m->scq, &s->op);
}

/* ---- what ibf_atomic_ops.c calls ---- */

static uint64_t ibf_msg_atomic_op_flags(struct fid_ep *ep_fid)
{
	return to_ibf_ep(ep_fid)->base.tx_op_flags;
}

static size_t ibf_msg_atomic_eager(struct fid_ep *ep_fid)
{
	(void)ep_fid;
	return ibf_params.eager_size;
}

const struct ibf_atomic_port ibf_msg_atomic_port = {
	.post = ibf_msg_atomic_post,
	.tx_op_flags = ibf_msg_atomic_op_flags,
	.eager_size = ibf_msg_atomic_eager,
	.inject_flags = FI_INJECT,
};
