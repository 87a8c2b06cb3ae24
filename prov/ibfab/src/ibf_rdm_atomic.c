/*
 * RDM atomics: fi_atomic, fi_fetch_atomic, fi_compare_atomic and their
 * msg, iov and inject forms, to any peer of the AV (self included).
 *
 * Every atomic is a request message (ATOMIC: the target address, key,
 * op, datatype, count, then the operands and compare values), applied by
 * the target's progress with the CPU's atomics (ibf_atomic.h says why no
 * HCA atomic is ever used), and answered (ATOMIC_RESP: a status, then the
 * old values of a fetch) from the bounce it came in, so the target needs
 * no send op of its own.  The initiator's op completes when both its send
 * and the answer are in: the operation has been applied at the target
 * (FI_DELIVERY_COMPLETE).  Requests from one initiator to one target are
 * applied in order (one RC connection, one progress), hence
 * FI_ORDER_ATOMIC_RAR|RAW|WAR|WAW.
 *
 * The target trusts nothing in a request: its op and datatype, the count
 * against the bytes that came, the address's alignment, and the key, range
 * and rights against its own domain's regions (ibf_mr_target_check).  A
 * bad request is answered with an error, never applied.
 * ep->lock held unless said otherwise.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_atomic.h"
#include "ibf_rdm.h"

/* Operand bytes (and as many compare bytes) one request carries at most. */
static size_t ibf_rdm_atomic_bytes(size_t eager_size, int compare)
{
	size_t room = eager_size - sizeof(struct ibf_rdm_atomic);

	return compare ? room / 2 : room;
}

static size_t ibf_rdm_atomic_room(const struct ibf_rdm_ep *ep,
				  enum ibf_atomic_kind kind)
{
	return ibf_rdm_atomic_bytes(ep->eager_size, kind == IBF_ATOMIC_COMPARE);
}

size_t ibf_rdm_atomic_max(size_t eager_size, enum fi_datatype dt, int compare)
{
	size_t size = ibf_atomic_size(dt);

	return size ? ibf_rdm_atomic_bytes(eager_size, compare) / size : 0;
}

static size_t ibf_ioc_count(const struct fi_ioc *ioc, size_t n)
{
	size_t i, count = 0;

	for (i = 0; ioc && i < n; i++)
		count += ioc[i].count;
	return count;
}

/* Gather n iocs of size-byte elements into dst; returns bytes. */
static size_t ibf_ioc_gather(uint8_t *dst, const struct fi_ioc *ioc, size_t n,
			     size_t size)
{
	size_t i, done = 0;

	for (i = 0; i < n; i++) {
		memcpy(dst + done, ioc[i].addr, ioc[i].count * size);
		done += ioc[i].count * size;
	}
	return done;
}

/* What a request needs, checked before anything is taken. */
struct ibf_rdm_atomic_args {
	enum ibf_atomic_kind kind;
	const struct fi_ioc *opnd, *cmp;
	size_t nopnd, ncmp;
	struct fi_ioc *res;
	size_t nres;
	const struct fi_rma_ioc *rma;
	size_t nrma;
	enum fi_datatype dt;
	enum fi_op op;
};

static int ibf_rdm_atomic_check(struct ibf_rdm_ep *ep,
				const struct ibf_rdm_atomic_args *a,
				size_t *count)
{
	size_t size = ibf_atomic_size(a->dt);
	size_t n = a->op == FI_ATOMIC_READ ? ibf_ioc_count(a->res, a->nres) :
		   ibf_ioc_count(a->opnd, a->nopnd);

	if (!ibf_atomic_valid(a->dt, a->op, a->kind)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "atomic op %d on "
			       "datatype %d is not supported here (see "
			       "fi_query_atomic)\n", a->op, a->dt);
		return -FI_EOPNOTSUPP;
	}
	if (a->nrma != 1 || !a->rma || a->nopnd > ep->tx_iov_limit ||
	    a->ncmp > ep->tx_iov_limit || a->nres > ep->tx_iov_limit ||
	    (a->op != FI_ATOMIC_READ && !a->opnd)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic takes one "
			       "remote ioc and at most %zu local ones each\n",
			       ep->tx_iov_limit);
		return -FI_EINVAL;
	}
	if (!n || n > a->rma->count || a->rma->addr % size ||
	    n * size > ibf_rdm_atomic_room(ep, a->kind) ||
	    (a->kind == IBF_ATOMIC_COMPARE && ibf_ioc_count(a->cmp, a->ncmp) != n) ||
	    (a->kind != IBF_ATOMIC_PLAIN && ibf_ioc_count(a->res, a->nres) != n)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic of %zu "
			       "elements at %#llx (remote count %zu): counts must "
			       "agree, be at most %zu (fi_atomicvalid) and the "
			       "address aligned to the datatype\n", n,
			       (unsigned long long)a->rma->addr, a->rma->count,
			       ibf_rdm_atomic_room(ep, a->kind) / size);
		return -FI_EINVAL;
	}
	*count = n;
	return 0;
}

/* The request in op->mem; where the old values go, in op->iov. */
static void ibf_rdm_atomic_build(struct ibf_rdm_ep *ep, struct ibf_rdm_op *op,
				 const struct ibf_rdm_atomic_args *a,
				 size_t count)
{
	struct ibf_rdm_hdr *hdr = (void *)op->mem;
	struct ibf_rdm_atomic *req = (void *)(op->mem + IBF_RDM_HDR);
	uint8_t *p = op->mem + IBF_RDM_HDR + sizeof(*req);
	size_t size = ibf_atomic_size(a->dt), i;

	hdr->type = IBF_RDM_ATOMIC;
	hdr->flags = 0;
	req->addr = a->rma->addr;
	req->key = a->rma->key;
	req->cookie = (uint32_t)(op - ep->ops);
	req->count = (uint32_t)count;
	req->op = (uint8_t)a->op;
	req->datatype = (uint8_t)a->dt;
	req->kind = (uint8_t)a->kind;
	req->status = 0;
	if (a->op != FI_ATOMIC_READ)
		p += ibf_ioc_gather(p, a->opnd, a->nopnd, size);
	if (a->kind == IBF_ATOMIC_COMPARE)
		p += ibf_ioc_gather(p, a->cmp, a->ncmp, size);
	op->count = a->kind == IBF_ATOMIC_PLAIN ? 0 : a->nres;
	for (i = 0; i < op->count; i++) {
		op->iov[i].iov_base = a->res[i].addr;
		op->iov[i].iov_len = a->res[i].count * size;
	}
	op->rd_left = a->kind == IBF_ATOMIC_PLAIN ? 0 : count * size;
	op->wire_len = (uint32_t)(p - op->mem);
	op->wr_kind = IBF_RDM_WR_SEND;
	op->tx_state = IBF_RDM_TX_ATOMIC;
	op->read_err = 0;
	op->fin_seen = 0;
	op->reads_left = 2;	/* its own completion, and the answer */
}

static ssize_t ibf_rdm_atomic_post(struct ibf_rdm_ep *ep,
				   const struct ibf_rdm_atomic_args *a,
				   fi_addr_t dest, uint64_t flags, void *context)
{
	struct ibf_rdm_op *op;
	size_t count;
	ssize_t ret;

	ret = ibf_rdm_atomic_check(ep, a, &count);
	if (unlikely(ret))
		return ret;
	if (unlikely(!(ep->info->caps & FI_ATOMIC))) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic on an "
			       "endpoint opened without FI_ATOMIC\n");
		return -FI_EOPNOTSUPP;
	}
	if (unlikely(!ep->enabled))
		return -FI_EOPBADSTATE;
	ibf_lock_acquire(&ep->lock);
	op = ibf_rdm_tx_begin(ep, dest, context, FI_ATOMIC |
			      (a->kind == IBF_ATOMIC_PLAIN ? FI_WRITE : FI_READ),
			      count * ibf_atomic_size(a->dt), flags, &ret);
	if (unlikely(!op))
		goto out;
	ibf_rdm_atomic_build(ep, op, a, count);
	ret = ibf_rdm_conn_send(op->conn, op);
	if (unlikely(ret))
		ibf_rdm_op_free(op);
	else
		ep->stats.atomics++;
out:
	ibf_lock_release(&ep->lock);
	return ret;
}

/* Its request went (or failed). */
void ibf_rdm_atomic_sent(struct ibf_rdm_op *op, int err)
{
	if (err && !op->read_err)
		op->read_err = err;
	if (--op->reads_left == 0)
		ibf_rdm_complete(op, op->read_err);
}

/* ---- target ---- */

/* The request in bounce b, checked; its answer built over it. */
static int ibf_rdm_atomic_apply(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
				uint32_t byte_len)
{
	struct ibf_rdm_atomic *req = (void *)(b->mem + IBF_RDM_HDR);
	enum fi_datatype dt = (enum fi_datatype)req->datatype;
	enum fi_op op = (enum fi_op)req->op;
	enum ibf_atomic_kind kind = (enum ibf_atomic_kind)req->kind;
	size_t size = ibf_atomic_size(dt);
	uint8_t *opnd = b->mem + IBF_RDM_HDR + sizeof(*req);
	size_t n = req->count, nopnd, ncmp;

	if (req->kind > IBF_ATOMIC_COMPARE || !ibf_atomic_valid(dt, op, kind))
		return -FI_EOPNOTSUPP;
	nopnd = op == FI_ATOMIC_READ ? 0 : n;
	ncmp = kind == IBF_ATOMIC_COMPARE ? n : 0;
	if (!n || n * size > ibf_rdm_atomic_room(ep, kind) ||
	    byte_len != IBF_RDM_HDR + sizeof(*req) + (nopnd + ncmp) * size ||
	    req->addr % size)
		return -FI_EINVAL;
	if (ibf_mr_target_check(ep->domain, req->key, req->addr, n * size,
				op == FI_ATOMIC_READ ? IBV_ACCESS_REMOTE_READ :
				IBV_ACCESS_REMOTE_WRITE))
		return -FI_EACCES;
	/*
	 * The old values overwrite the operands, element by element, each
	 * after its operand is read; compare values lie beyond them.
	 */
	ibf_atomic_apply(dt, op, (void *)(uintptr_t)req->addr,
			 nopnd ? opnd : NULL, ncmp ? opnd + n * size : NULL,
			 kind == IBF_ATOMIC_PLAIN ? NULL : opnd, n);
	return 0;
}

void ibf_rdm_on_atomic(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
		       uint32_t byte_len)
{
	struct ibf_rdm_hdr *hdr = (void *)b->mem;
	struct ibf_rdm_atomic *req = (void *)(b->mem + IBF_RDM_HDR);
	int ret;

	if (byte_len < IBF_RDM_HDR + sizeof(*req)) {
		ibf_rdm_drop(ep, b, "an atomic request cut short");
		return;
	}
	ret = ibf_rdm_atomic_apply(ep, b, byte_len);
	if (ret)
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "refused a peer's "
			       "atomic (op %u, datatype %u, %u elements at "
			       "%#llx, key %#llx): %s\n", req->op, req->datatype,
			       req->count, (unsigned long long)req->addr,
			       (unsigned long long)req->key, fi_strerror(-ret));
	else
		ep->stats.atomics_applied++;
	if (!ret && ep->rma_event)
		ibf_mr_remote_event(ep->domain, req->key, req->op == FI_ATOMIC_READ);
	if (!ret && ep->cntr[IBF_RDM_CNTR_REMOTE_WRITE] && req->op != FI_ATOMIC_READ)
		ibf_cntr_count(ep->cntr[IBF_RDM_CNTR_REMOTE_WRITE], 0);
	hdr->type = IBF_RDM_ATOMIC_RESP;
	req->status = ret;
	b->wire_len = IBF_RDM_HDR + sizeof(*req);
	if (!ret && req->kind != IBF_ATOMIC_PLAIN)
		b->wire_len += req->count * (uint32_t)ibf_atomic_size(req->datatype);
	ibf_rdm_reply_post(ep, b);
}

/* An answer in bounce b: for a request of ours to its sender, once. */
void ibf_rdm_on_atomic_resp(struct ibf_rdm_ep *ep, struct ibf_rdm_op *b,
			    uint32_t byte_len)
{
	const struct ibf_rdm_atomic *resp = (const void *)(b->mem + IBF_RDM_HDR);
	struct ibf_rdm_op *op;
	size_t got;

	if (byte_len < IBF_RDM_HDR + sizeof(*resp)) {
		ibf_rdm_drop(ep, b, "an atomic answer cut short");
		return;
	}
	op = resp->cookie < ep->ntx ? &ep->ops[resp->cookie] : NULL;
	got = byte_len - IBF_RDM_HDR - sizeof(*resp);
	if (!op || op->state != IBF_RDM_TX_ATOMIC || op->fin_seen ||
	    op->post_conn != b->conn ||
	    op->post_epoch != __atomic_load_n(&b->conn->epoch, __ATOMIC_ACQUIRE) ||
	    resp->status > 0 || resp->status <= -4096 ||
	    (!resp->status && got != op->rd_left)) {
		ibf_rdm_drop(ep, b, "an atomic answer for no request of ours "
			     "to its sender");
		return;
	}
	op->fin_seen = 1;
	if (resp->status) {
		op->read_err = resp->status;
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "the target refused "
			       "an atomic: %s (its log says why)\n",
			       fi_strerror(-resp->status));
	} else if (got) {
		ibf_rdm_copy_to_iov(op->iov, op->count,
				    b->mem + IBF_RDM_HDR + sizeof(*resp), got);
	}
	ibf_rdm_bounce_release(ep, b);
	if (--op->reads_left == 0)
		ibf_rdm_complete(op, op->read_err);
}

/* ---- fi_ops_atomic ---- */

static ssize_t ibf_rdm_atomic_call(struct fid_ep *ep_fid,
				   const struct ibf_rdm_atomic_args *a,
				   fi_addr_t dest, uint64_t flags, void *context)
{
	return ibf_rdm_atomic_post(to_ibf_rdm_ep(ep_fid), a, dest, flags, context);
}

static ssize_t ibf_rdm_atomic_write(struct fid_ep *ep_fid, const void *buf,
				    size_t count, void *desc, fi_addr_t dest,
				    uint64_t addr, uint64_t key,
				    enum fi_datatype dt, enum fi_op op,
				    void *context)
{
	struct fi_ioc ioc = { (void *)buf, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_PLAIN, .opnd = &ioc,
		.nopnd = 1, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	return ibf_rdm_atomic_call(ep_fid, &a, dest,
				   to_ibf_rdm_ep(ep_fid)->tx_op_flags, context);
}

static ssize_t ibf_rdm_atomic_writev(struct fid_ep *ep_fid,
				     const struct fi_ioc *iov, void **desc,
				     size_t count, fi_addr_t dest,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op,
				     void *context)
{
	struct fi_rma_ioc rma = { addr, ibf_ioc_count(iov, count), key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_PLAIN, .opnd = iov,
		.nopnd = count, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	return ibf_rdm_atomic_call(ep_fid, &a, dest,
				   to_ibf_rdm_ep(ep_fid)->tx_op_flags, context);
}

/* The fields an fi_msg_atomic gives (operands, remote ioc, op, type). */
static void ibf_rdm_atomic_args_msg(struct ibf_rdm_atomic_args *a,
				    const struct fi_msg_atomic *msg)
{
	a->opnd = msg->msg_iov;
	a->nopnd = msg->iov_count;
	a->rma = msg->rma_iov;
	a->nrma = msg->rma_iov_count;
	a->dt = msg->datatype;
	a->op = msg->op;
}

static ssize_t ibf_rdm_atomic_writemsg(struct fid_ep *ep_fid,
				       const struct fi_msg_atomic *msg,
				       uint64_t flags)
{
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_PLAIN };

	if (!msg)
		return -FI_EINVAL;
	ibf_rdm_atomic_args_msg(&a, msg);
	return ibf_rdm_atomic_call(ep_fid, &a, msg->addr, flags, msg->context);
}

static ssize_t ibf_rdm_atomic_inject(struct fid_ep *ep_fid, const void *buf,
				     size_t count, fi_addr_t dest,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op)
{
	struct fi_ioc ioc = { (void *)buf, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_PLAIN, .opnd = &ioc,
		.nopnd = 1, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	return ibf_rdm_atomic_call(ep_fid, &a, dest, IBF_RDM_INJECT, NULL);
}

static ssize_t ibf_rdm_atomic_readwrite(struct fid_ep *ep_fid, const void *buf,
					size_t count, void *desc, void *result,
					void *result_desc, fi_addr_t dest,
					uint64_t addr, uint64_t key,
					enum fi_datatype dt, enum fi_op op,
					void *context)
{
	struct fi_ioc ioc = { (void *)buf, count }, res = { result, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_FETCH,
		.opnd = buf ? &ioc : NULL, .nopnd = buf ? 1 : 0, .res = &res,
		.nres = 1, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	(void)result_desc;
	return ibf_rdm_atomic_call(ep_fid, &a, dest,
				   to_ibf_rdm_ep(ep_fid)->tx_op_flags, context);
}

static ssize_t ibf_rdm_atomic_readwritev(struct fid_ep *ep_fid,
					 const struct fi_ioc *iov, void **desc,
					 size_t count, struct fi_ioc *resultv,
					 void **result_desc, size_t result_count,
					 fi_addr_t dest, uint64_t addr,
					 uint64_t key, enum fi_datatype dt,
					 enum fi_op op, void *context)
{
	struct fi_rma_ioc rma = { addr, ibf_ioc_count(resultv, result_count), key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_FETCH, .opnd = iov,
		.nopnd = count, .res = resultv, .nres = result_count,
		.rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	(void)result_desc;
	return ibf_rdm_atomic_call(ep_fid, &a, dest,
				   to_ibf_rdm_ep(ep_fid)->tx_op_flags, context);
}

static ssize_t ibf_rdm_atomic_readwritemsg(struct fid_ep *ep_fid,
					   const struct fi_msg_atomic *msg,
					   struct fi_ioc *resultv,
					   void **result_desc,
					   size_t result_count, uint64_t flags)
{
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_FETCH };

	(void)result_desc;
	if (!msg)
		return -FI_EINVAL;
	ibf_rdm_atomic_args_msg(&a, msg);
	a.res = resultv;
	a.nres = result_count;
	return ibf_rdm_atomic_call(ep_fid, &a, msg->addr, flags & ~FI_INJECT,
				   msg->context);
}

static ssize_t ibf_rdm_atomic_compwrite(struct fid_ep *ep_fid, const void *buf,
					size_t count, void *desc,
					const void *compare, void *compare_desc,
					void *result, void *result_desc,
					fi_addr_t dest, uint64_t addr,
					uint64_t key, enum fi_datatype dt,
					enum fi_op op, void *context)
{
	struct fi_ioc ioc = { (void *)buf, count }, cmp = { (void *)compare, count };
	struct fi_ioc res = { result, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_COMPARE, .opnd = &ioc,
		.nopnd = 1, .cmp = &cmp, .ncmp = 1, .res = &res, .nres = 1,
		.rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return ibf_rdm_atomic_call(ep_fid, &a, dest,
				   to_ibf_rdm_ep(ep_fid)->tx_op_flags, context);
}

static ssize_t ibf_rdm_atomic_compwritev(struct fid_ep *ep_fid,
					 const struct fi_ioc *iov, void **desc,
					 size_t count,
					 const struct fi_ioc *comparev,
					 void **compare_desc,
					 size_t compare_count,
					 struct fi_ioc *resultv,
					 void **result_desc,
					 size_t result_count, fi_addr_t dest,
					 uint64_t addr, uint64_t key,
					 enum fi_datatype dt, enum fi_op op,
					 void *context)
{
	struct fi_rma_ioc rma = { addr, ibf_ioc_count(iov, count), key };
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_COMPARE, .opnd = iov,
		.nopnd = count, .cmp = comparev, .ncmp = compare_count,
		.res = resultv, .nres = result_count, .rma = &rma, .nrma = 1,
		.dt = dt, .op = op };

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return ibf_rdm_atomic_call(ep_fid, &a, dest,
				   to_ibf_rdm_ep(ep_fid)->tx_op_flags, context);
}

static ssize_t ibf_rdm_atomic_compwritemsg(struct fid_ep *ep_fid,
					   const struct fi_msg_atomic *msg,
					   const struct fi_ioc *comparev,
					   void **compare_desc,
					   size_t compare_count,
					   struct fi_ioc *resultv,
					   void **result_desc,
					   size_t result_count, uint64_t flags)
{
	struct ibf_rdm_atomic_args a = { .kind = IBF_ATOMIC_COMPARE };

	(void)compare_desc;
	(void)result_desc;
	if (!msg)
		return -FI_EINVAL;
	ibf_rdm_atomic_args_msg(&a, msg);
	a.cmp = comparev;
	a.ncmp = compare_count;
	a.res = resultv;
	a.nres = result_count;
	return ibf_rdm_atomic_call(ep_fid, &a, msg->addr, flags & ~FI_INJECT,
				   msg->context);
}

/* fi_atomicvalid and its kin: the most elements one call carries. */
static int ibf_rdm_atomic_valid(struct ibf_rdm_ep *ep, enum fi_datatype dt,
				enum fi_op op, enum ibf_atomic_kind kind,
				size_t *count)
{
	if (!ibf_atomic_valid(dt, op, kind))
		return -FI_EOPNOTSUPP;
	if (count)
		*count = ibf_rdm_atomic_room(ep, kind) / ibf_atomic_size(dt);
	return 0;
}

static int ibf_rdm_writevalid(struct fid_ep *ep_fid, enum fi_datatype dt,
			      enum fi_op op, size_t *count)
{
	return ibf_rdm_atomic_valid(to_ibf_rdm_ep(ep_fid), dt, op,
				    IBF_ATOMIC_PLAIN, count);
}

static int ibf_rdm_readwritevalid(struct fid_ep *ep_fid, enum fi_datatype dt,
				  enum fi_op op, size_t *count)
{
	return ibf_rdm_atomic_valid(to_ibf_rdm_ep(ep_fid), dt, op,
				    IBF_ATOMIC_FETCH, count);
}

static int ibf_rdm_compwritevalid(struct fid_ep *ep_fid, enum fi_datatype dt,
				  enum fi_op op, size_t *count)
{
	return ibf_rdm_atomic_valid(to_ibf_rdm_ep(ep_fid), dt, op,
				    IBF_ATOMIC_COMPARE, count);
}

struct fi_ops_atomic ibf_rdm_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic),
	.write = ibf_rdm_atomic_write,
	.writev = ibf_rdm_atomic_writev,
	.writemsg = ibf_rdm_atomic_writemsg,
	.inject = ibf_rdm_atomic_inject,
	.readwrite = ibf_rdm_atomic_readwrite,
	.readwritev = ibf_rdm_atomic_readwritev,
	.readwritemsg = ibf_rdm_atomic_readwritemsg,
	.compwrite = ibf_rdm_atomic_compwrite,
	.compwritev = ibf_rdm_atomic_compwritev,
	.compwritemsg = ibf_rdm_atomic_compwritemsg,
	.writevalid = ibf_rdm_writevalid,
	.readwritevalid = ibf_rdm_readwritevalid,
	.compwritevalid = ibf_rdm_compwritevalid,
};
