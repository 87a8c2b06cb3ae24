/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Shared receive contexts (fi_srx_context): an SRQ whose receives any
 * bound FI_EP_MSG endpoint may consume, so receive buffers do not grow with
 * the number of connections.  Each QP reports to its own CQ, so slots come
 * back in any order: a free list, not a ring.  srx->lock guards the list
 * and the SRQ, taken only when the threading level needs it.
 */
#include "config.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_msg_post.h"
#include "ibf_noops.h"
#include "ibf_rdmacm.h"

/* A slot's op->release: back to its context's free list. */
static void ibf_srx_release(struct ibf_op *op)
{
	ibf_srx_put(op->owner, op);
}

void ibf_srx_put(struct ibf_srx *srx, struct ibf_op *op)
{
	ibf_lock_acquire(&srx->lock);
	srx->free[srx->nfree++] = (uint32_t)(op - srx->ops);
	ibf_lock_release(&srx->lock);
}

/* Receives posted here always complete: the context has no CQ binding. */
ssize_t ibf_srx_post(struct ibf_srx *srx, const struct iovec *iov,
			    void **desc, size_t count, void *context)
{
	struct ibv_sge sge[IBF_MAX_SGE];
	struct ibv_recv_wr wr;
	struct ibf_op *op;
	uint32_t idx;
	size_t len;
	ssize_t ret;

	if (unlikely(count > srx->iov_limit))
		return -FI_EINVAL;
	ret = ibf_fill_sge(sge, iov, desc, count, 1, &len);
	if (unlikely(ret))
		return ret;
	wr.next = NULL;
	wr.sg_list = sge;
	wr.num_sge = (int)count;

	ibf_lock_acquire(&srx->lock);
	if (unlikely(!srx->nfree)) {
		ibf_lock_release(&srx->lock);
		return -FI_EAGAIN;
	}
	idx = srx->free[--srx->nfree];
	op = &srx->ops[idx];
	op->context = context;
	op->flags = FI_RECV | FI_MSG;
	op->len = len;
	op->buf = count ? iov[0].iov_base : NULL;
	op->user_comp = 1;
	wr.wr_id = (uintptr_t)op;
	assert(srx->srq);	/* made with the context, kept to its close */
	ret = ibf_msg_post_recv(NULL, srx->srq, &srx->post_trace, &wr);
	if (unlikely(ret))
		srx->free[srx->nfree++] = idx;
	ibf_lock_release(&srx->lock);
	return ret;
}

static struct ibf_srx *to_srx(struct fid_ep *ep)
{
	return container_of(ep, struct ibf_srx, ep_fid);
}

static ssize_t ibf_srx_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
			    fi_addr_t src_addr, void *context)
{
	struct iovec iov = { buf, len };

	return ibf_srx_post(to_srx(ep), &iov, &desc, 1, context);
}

static ssize_t ibf_srx_recvv(struct fid_ep *ep, const struct iovec *iov,
			     void **desc, size_t count, fi_addr_t src_addr,
			     void *context)
{
	return ibf_srx_post(to_srx(ep), iov, desc, count, context);
}

static ssize_t ibf_srx_recvmsg(struct fid_ep *ep, const struct fi_msg *msg,
			       uint64_t flags)
{
	if (flags & FI_MULTI_RECV)
		return -FI_EBADFLAGS;
	return ibf_srx_post(to_srx(ep), msg->msg_iov, msg->desc, msg->iov_count,
			    msg->context);
}

static struct fi_ops_msg ibf_srx_msg_ops = {
	.size = sizeof(struct fi_ops_msg),
	.recv = ibf_srx_recv,
	.recvv = ibf_srx_recvv,
	.recvmsg = ibf_srx_recvmsg,
	.send = ibf_no_send,
	.sendv = ibf_no_sendv,
	.sendmsg = ibf_no_sendmsg,
	.inject = ibf_no_inject,
	.senddata = ibf_no_senddata,
	.injectdata = ibf_no_injectdata,
};

static ssize_t ibf_srx_rx_size_left(struct fid_ep *ep)
{
	return to_srx(ep)->nfree;
}

static int ibf_srx_getopt(fid_t fid, int level, int optname, void *optval,
			  size_t *optlen)
{
	return -FI_ENOPROTOOPT;
}

static int ibf_srx_setopt(fid_t fid, int level, int optname, const void *optval,
			  size_t optlen)
{
	return -FI_ENOPROTOOPT;
}

static struct fi_ops_ep ibf_srx_ep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ibf_no_cancel,
	.getopt = ibf_srx_getopt,
	.setopt = ibf_srx_setopt,
	.tx_ctx = (void *)ibf_no_ctx,
	.rx_ctx = (void *)ibf_no_ctx,
	.rx_size_left = ibf_srx_rx_size_left,
	.tx_size_left = ibf_no_size_left,
};

static void ibf_srx_destroy(struct ibf_srx *srx)
{
	if (srx->srq)
		ibv_destroy_srq(srx->srq);
	ibf_lock_fini(&srx->lock);
	free(srx->ops);
	free(srx->free);
	free(srx);
}

static int ibf_srx_close(struct fid *fid)
{
	struct ibf_srx *srx = container_of(fid, struct ibf_srx, ep_fid.fid);
	struct ibf_domain *dom = srx->domain;

	if (ibf_ref_read(&srx->ref)) {
		IBF_WARN(FI_LOG_EP_CTRL, "shared receive context still bound to "
			 "%d endpoint(s): close them first\n", ibf_ref_read(&srx->ref));
		return -FI_EBUSY;
	}
	ibf_srx_destroy(srx);
	ibf_ref_put(&dom->ref);
	return 0;
}

static struct fi_ops ibf_srx_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_srx_close,
	.bind = ibf_no_bind,
	.control = ibf_no_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

int ibf_srx_open(struct fid_domain *domain_fid, struct fi_rx_attr *attr,
		 struct fid_ep **rx_ep, void *context)
{
	struct ibf_domain *dom = to_ibf_domain(domain_fid);
	struct ibv_srq_init_attr init = { 0 };
	struct ibf_srx *srx;
	size_t size;
	uint32_t i;
	int ret;

	if (!rx_ep)
		return -FI_EINVAL;
	if (!dom->dev_attr.max_srq) {
		IBF_WARN(FI_LOG_EP_CTRL, "%s has no shared receive queues\n",
			 dom->info->domain_attr->name);
		return -FI_ENOSYS;
	}
	size = attr && attr->size ? attr->size : ibf_params.rx_size;
	size = IBF_MIN(size, (size_t)dom->dev_attr.max_srq_wr);
	srx = calloc(1, sizeof(*srx));
	if (!srx)
		return -FI_ENOMEM;
	srx->domain = dom;
	srx->size = (uint32_t)size;
	srx->post_trace = ibf_post_trace_on();	/* once: not per post */
	srx->iov_limit = attr && attr->iov_limit ? attr->iov_limit : ibf_params.rx_iov_limit;
	srx->iov_limit = IBF_MIN(IBF_MIN(srx->iov_limit, (size_t)dom->dev_attr.max_srq_sge),
				 IBF_MAX_SGE);
	ibf_lock_init(&srx->lock, ibf_threading_needs_lock(dom->info->domain_attr->threading));
	srx->ops = calloc(size, sizeof(*srx->ops));
	srx->free = calloc(size, sizeof(*srx->free));
	if (!srx->ops || !srx->free) {
		ret = -FI_ENOMEM;
		goto err;
	}
	for (i = 0; i < size; i++) {
		srx->ops[i].owner = srx;
		srx->ops[i].kind = IBF_OP_SRX;
		srx->ops[i].release = ibf_srx_release;
		srx->free[i] = (uint32_t)(size - 1 - i);
	}
	srx->nfree = (uint32_t)size;
	init.attr.max_wr = (uint32_t)size;
	init.attr.max_sge = (uint32_t)srx->iov_limit;
	srx->srq = ibv_create_srq(dom->pd, &init);
	if (!srx->srq) {
		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_EP_CTRL, "ibv_create_srq(%zu): %s\n", size,
			 fi_strerror(-ret));
		goto err;
	}
	srx->ep_fid.fid.fclass = FI_CLASS_SRX_CTX;
	srx->ep_fid.fid.context = context;
	srx->ep_fid.fid.ops = &ibf_srx_fi_ops;
	srx->ep_fid.ops = &ibf_srx_ep_ops;
	srx->ep_fid.msg = &ibf_srx_msg_ops;
	srx->ep_fid.tagged = &ibf_no_tagged_ops;
	ibf_ref_get(&dom->ref);
	*rx_ep = &srx->ep_fid;
	return 0;
err:
	ibf_srx_destroy(srx);
	return ret;
}
