/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * fi_ops_atomic for RDM and FI_EP_MSG endpoints, and the request format
 * both send (ibf_atomic_ops.h).  The API calls are the same for both; each
 * becomes a struct ibf_atomic_args handed to the endpoint kind's port,
 * which knows how its requests travel.
 */
#include "config.h"

#include <string.h>

#include "ibf_atomic_ops.h"

/* Operand bytes (and as many compare bytes) one request carries at most. */
static size_t ibf_atomic_room(size_t eager_size, enum ibf_atomic_kind kind)
{
	size_t room = eager_size - sizeof(struct ibf_atomic_req);

	return kind == IBF_ATOMIC_COMPARE ? room / 2 : room;
}

size_t ibf_atomic_max(size_t eager_size, enum fi_datatype dt, int compare)
{
	size_t size = ibf_atomic_size(dt);

	return size ? ibf_atomic_room(eager_size, compare ? IBF_ATOMIC_COMPARE :
				      IBF_ATOMIC_PLAIN) / size : 0;
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

int ibf_atomic_args_check(const struct ibf_atomic_args *a, size_t iov_limit,
			  size_t eager_size, size_t *count)
{
	size_t size = ibf_atomic_size(a->dt);
	size_t room = ibf_atomic_room(eager_size, a->kind);
	size_t n;

	if (!ibf_atomic_valid(a->dt, a->op, a->kind)) {
		char op[IBF_ENUM_STR], dt[IBF_ENUM_STR];

		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "atomic %s on %s is "
			       "not supported here (see fi_query_atomic)\n",
			       ibf_enum_str(op, sizeof(op), FI_TYPE_ATOMIC_OP, a->op),
			       ibf_enum_str(dt, sizeof(dt), FI_TYPE_ATOMIC_TYPE, a->dt));
		return -FI_EOPNOTSUPP;
	}
	if (a->nrma != 1 || !a->rma || a->nopnd > iov_limit ||
	    a->ncmp > iov_limit || a->nres > iov_limit ||
	    (a->op != FI_ATOMIC_READ && !a->opnd)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic takes one "
			       "remote ioc and at most %zu local ones each\n",
			       iov_limit);
		return -FI_EINVAL;
	}
	/* The iovs are counted only once their number is known sane. */
	n = a->op == FI_ATOMIC_READ ? ibf_ioc_count(a->res, a->nres) :
	    ibf_ioc_count(a->opnd, a->nopnd);
	if (!n || n > a->rma->count || a->rma->addr % size || n * size > room ||
	    (a->kind == IBF_ATOMIC_COMPARE && ibf_ioc_count(a->cmp, a->ncmp) != n) ||
	    (a->kind != IBF_ATOMIC_PLAIN && ibf_ioc_count(a->res, a->nres) != n)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "an atomic of %zu "
			       "elements at %#llx (remote count %zu): counts must "
			       "agree, be at most %zu (fi_atomicvalid) and the "
			       "address aligned to the datatype\n", n,
			       (unsigned long long)a->rma->addr, a->rma->count,
			       room / size);
		return -FI_EINVAL;
	}
	*count = n;
	return 0;
}

size_t ibf_atomic_req_build(void *wire, const struct ibf_atomic_args *a,
			    size_t count, uint32_t cookie)
{
	struct ibf_atomic_req *req = wire;
	uint8_t *p = (uint8_t *)(req + 1);
	size_t size = ibf_atomic_size(a->dt);

	req->addr = a->rma->addr;
	req->key = a->rma->key;
	req->cookie = cookie;
	req->count = (uint32_t)count;
	req->op = (uint8_t)a->op;
	req->datatype = (uint8_t)a->dt;
	req->kind = (uint8_t)a->kind;
	req->rsvd = 0;
	req->status = 0;
	if (a->op != FI_ATOMIC_READ)
		p += ibf_ioc_gather(p, a->opnd, a->nopnd, size);
	if (a->kind == IBF_ATOMIC_COMPARE)
		p += ibf_ioc_gather(p, a->cmp, a->ncmp, size);
	return (size_t)(p - (uint8_t *)wire);
}

/*
 * The rights a peer needs on the target region: to read it (an atomic
 * read), to write it (an atomic that returns nothing), or both (one that
 * returns the old values: they are the region's contents).
 */
static int ibf_atomic_rights(enum fi_op op, enum ibf_atomic_kind kind)
{
	if (op == FI_ATOMIC_READ)
		return IBV_ACCESS_REMOTE_READ;
	if (kind == IBF_ATOMIC_PLAIN)
		return IBV_ACCESS_REMOTE_WRITE;
	return IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
}

/* The request's fields and length against themselves and dom: 0 with
 * the target region held (ibf_mr_target_hold) and the address it names in
 * *at, or why not. */
static int ibf_atomic_req_check(struct ibf_domain *dom,
				const struct ibf_atomic_req *req, size_t len,
				size_t eager_size, void **at)
{
	enum fi_datatype dt = (enum fi_datatype)req->datatype;
	enum fi_op op = (enum fi_op)req->op;
	enum ibf_atomic_kind kind = (enum ibf_atomic_kind)req->kind;
	size_t size = ibf_atomic_size(dt), n = req->count, nopnd, ncmp;
	struct ibf_mr *mr;

	if (req->kind > IBF_ATOMIC_COMPARE || !ibf_atomic_valid(dt, op, kind))
		return -FI_EOPNOTSUPP;
	nopnd = op == FI_ATOMIC_READ ? 0 : n;
	ncmp = kind == IBF_ATOMIC_COMPARE ? n : 0;
	if (!n || n * size > ibf_atomic_room(eager_size, kind) ||
	    len != sizeof(*req) + (nopnd + ncmp) * size)
		return -FI_EINVAL;
	mr = ibf_mr_target_hold(dom, req->key, req->addr, n * size,
				ibf_atomic_rights(op, kind));
	if (!mr)
		return -FI_EACCES;
	*at = ibf_mr_target_addr(mr, req->addr);
	if ((uintptr_t)*at % size) {
		ibf_mr_target_release(dom);
		return -FI_EINVAL;
	}
	return 0;
}

size_t ibf_atomic_serve(struct ibf_domain *dom, void *wire, size_t len,
			size_t eager_size)
{
	struct ibf_atomic_req *req = wire;
	uint8_t *opnd = (uint8_t *)(req + 1);
	enum fi_datatype dt = (enum fi_datatype)req->datatype;
	enum fi_op op = (enum fi_op)req->op;
	size_t size, n = req->count;
	void *at = NULL;
	int ret;

	ret = ibf_atomic_req_check(dom, req, len, eager_size, &at);
	req->status = ret;
	if (ret) {
		char op[IBF_ENUM_STR], dt[IBF_ENUM_STR];

		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "refused a peer's "
			       "atomic (%s, %s, %u elements at %#llx, key "
			       "%#llx): %s\n",
			       ibf_enum_str(op, sizeof(op), FI_TYPE_ATOMIC_OP, req->op),
			       ibf_enum_str(dt, sizeof(dt), FI_TYPE_ATOMIC_TYPE,
					    req->datatype),
			       req->count, (unsigned long long)req->addr,
			       (unsigned long long)req->key, fi_strerror(-ret));
		return sizeof(*req);
	}
	size = ibf_atomic_size(dt);
	/*
	 * The old values overwrite the operands, element by element, each
	 * after its operand is read; compare values lie beyond them.
	 */
	ibf_atomic_apply(dt, op, at,
			 op == FI_ATOMIC_READ ? NULL : opnd,
			 req->kind == IBF_ATOMIC_COMPARE ? opnd + n * size : NULL,
			 req->kind == IBF_ATOMIC_PLAIN ? NULL : opnd, n);
	ibf_mr_target_release(dom);
	return sizeof(*req) + (req->kind == IBF_ATOMIC_PLAIN ? 0 : n * size);
}

int ibf_atomic_answer_check(const void *wire, size_t len, size_t want)
{
	const struct ibf_atomic_req *resp = wire;

	if (len < sizeof(*resp) || resp->status > 0 || resp->status <= -4096 ||
	    (!resp->status && len - sizeof(*resp) != want))
		return -FI_EINVAL;
	return 0;
}

/* ---- fi_ops_atomic ---- */

static const struct ibf_atomic_port *ibf_atomic_port_of(struct fid_ep *ep)
{
	return ep->atomic == &ibf_rdm_atomic_ops ? ibf_wing_ops.rdm_atomic :
						   ibf_wing_ops.msg_atomic;
}

static ssize_t ibf_atomic_call(struct fid_ep *ep, const struct ibf_atomic_args *a,
			       fi_addr_t dest, uint64_t flags, void *context)
{
	return ibf_atomic_port_of(ep)->post(ep, a, dest, flags, context);
}

/* The forms without an fi_msg_atomic take the endpoint's op_flags. */
static ssize_t ibf_atomic_call_dflt(struct fid_ep *ep,
				    const struct ibf_atomic_args *a,
				    fi_addr_t dest, void *context)
{
	const struct ibf_atomic_port *port = ibf_atomic_port_of(ep);

	return port->post(ep, a, dest, port->tx_op_flags(ep), context);
}

static ssize_t ibf_atomic_write(struct fid_ep *ep, const void *buf, size_t count,
				void *desc, fi_addr_t dest, uint64_t addr,
				uint64_t key, enum fi_datatype dt,
				enum fi_op op, void *context)
{
	struct fi_ioc ioc = { (void *)buf, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_PLAIN, .opnd = &ioc,
		.nopnd = 1, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;	/* operands are copied into the request */
	return ibf_atomic_call_dflt(ep, &a, dest, context);
}

static ssize_t ibf_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov,
				 void **desc, size_t count, fi_addr_t dest,
				 uint64_t addr, uint64_t key,
				 enum fi_datatype dt, enum fi_op op,
				 void *context)
{
	struct fi_rma_ioc rma = { addr, ibf_ioc_count(iov, count), key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_PLAIN, .opnd = iov,
		.nopnd = count, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	return ibf_atomic_call_dflt(ep, &a, dest, context);
}

/* The fields an fi_msg_atomic gives (operands, remote ioc, op, type). */
static void ibf_atomic_args_msg(struct ibf_atomic_args *a,
				const struct fi_msg_atomic *msg)
{
	a->opnd = msg->msg_iov;
	a->nopnd = msg->iov_count;
	a->rma = msg->rma_iov;
	a->nrma = msg->rma_iov_count;
	a->dt = msg->datatype;
	a->op = msg->op;
}

static ssize_t ibf_atomic_writemsg(struct fid_ep *ep,
				   const struct fi_msg_atomic *msg,
				   uint64_t flags)
{
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_PLAIN };

	if (!msg)
		return -FI_EINVAL;
	ibf_atomic_args_msg(&a, msg);
	return ibf_atomic_call(ep, &a, msg->addr, flags, msg->context);
}

static ssize_t ibf_atomic_inject(struct fid_ep *ep, const void *buf,
				 size_t count, fi_addr_t dest, uint64_t addr,
				 uint64_t key, enum fi_datatype dt,
				 enum fi_op op)
{
	struct fi_ioc ioc = { (void *)buf, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_PLAIN, .opnd = &ioc,
		.nopnd = 1, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	return ibf_atomic_call(ep, &a, dest,
			       ibf_atomic_port_of(ep)->inject_flags, NULL);
}

static ssize_t ibf_atomic_readwrite(struct fid_ep *ep, const void *buf,
				    size_t count, void *desc, void *result,
				    void *result_desc, fi_addr_t dest,
				    uint64_t addr, uint64_t key,
				    enum fi_datatype dt, enum fi_op op,
				    void *context)
{
	struct fi_ioc ioc = { (void *)buf, count }, res = { result, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_FETCH,
		.opnd = buf ? &ioc : NULL, .nopnd = buf ? 1 : 0, .res = &res,
		.nres = 1, .rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	(void)result_desc;	/* results are copied out of the answer */
	return ibf_atomic_call_dflt(ep, &a, dest, context);
}

static ssize_t ibf_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov,
				     void **desc, size_t count,
				     struct fi_ioc *resultv, void **result_desc,
				     size_t result_count, fi_addr_t dest,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op,
				     void *context)
{
	struct fi_rma_ioc rma = { addr, ibf_ioc_count(resultv, result_count), key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_FETCH, .opnd = iov,
		.nopnd = count, .res = resultv, .nres = result_count,
		.rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	(void)result_desc;
	return ibf_atomic_call_dflt(ep, &a, dest, context);
}

static ssize_t ibf_atomic_readwritemsg(struct fid_ep *ep,
				       const struct fi_msg_atomic *msg,
				       struct fi_ioc *resultv,
				       void **result_desc, size_t result_count,
				       uint64_t flags)
{
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_FETCH };

	(void)result_desc;
	if (!msg)
		return -FI_EINVAL;
	ibf_atomic_args_msg(&a, msg);
	a.res = resultv;
	a.nres = result_count;
	return ibf_atomic_call(ep, &a, msg->addr, flags & ~FI_INJECT,
			       msg->context);
}

static ssize_t ibf_atomic_compwrite(struct fid_ep *ep, const void *buf,
				    size_t count, void *desc,
				    const void *compare, void *compare_desc,
				    void *result, void *result_desc,
				    fi_addr_t dest, uint64_t addr, uint64_t key,
				    enum fi_datatype dt, enum fi_op op,
				    void *context)
{
	struct fi_ioc ioc = { (void *)buf, count }, cmp = { (void *)compare, count };
	struct fi_ioc res = { result, count };
	struct fi_rma_ioc rma = { addr, count, key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_COMPARE, .opnd = &ioc,
		.nopnd = 1, .cmp = &cmp, .ncmp = 1, .res = &res, .nres = 1,
		.rma = &rma, .nrma = 1, .dt = dt, .op = op };

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return ibf_atomic_call_dflt(ep, &a, dest, context);
}

static ssize_t ibf_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov,
				     void **desc, size_t count,
				     const struct fi_ioc *comparev,
				     void **compare_desc, size_t compare_count,
				     struct fi_ioc *resultv, void **result_desc,
				     size_t result_count, fi_addr_t dest,
				     uint64_t addr, uint64_t key,
				     enum fi_datatype dt, enum fi_op op,
				     void *context)
{
	struct fi_rma_ioc rma = { addr, ibf_ioc_count(iov, count), key };
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_COMPARE, .opnd = iov,
		.nopnd = count, .cmp = comparev, .ncmp = compare_count,
		.res = resultv, .nres = result_count, .rma = &rma, .nrma = 1,
		.dt = dt, .op = op };

	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return ibf_atomic_call_dflt(ep, &a, dest, context);
}

static ssize_t ibf_atomic_compwritemsg(struct fid_ep *ep,
				       const struct fi_msg_atomic *msg,
				       const struct fi_ioc *comparev,
				       void **compare_desc, size_t compare_count,
				       struct fi_ioc *resultv, void **result_desc,
				       size_t result_count, uint64_t flags)
{
	struct ibf_atomic_args a = { .kind = IBF_ATOMIC_COMPARE };

	(void)compare_desc;
	(void)result_desc;
	if (!msg)
		return -FI_EINVAL;
	ibf_atomic_args_msg(&a, msg);
	a.cmp = comparev;
	a.ncmp = compare_count;
	a.res = resultv;
	a.nres = result_count;
	return ibf_atomic_call(ep, &a, msg->addr, flags & ~FI_INJECT,
			       msg->context);
}

/* fi_atomicvalid and its kin: the most elements one call carries. */
static int ibf_atomic_valid_count(struct fid_ep *ep, enum fi_datatype dt,
				  enum fi_op op, enum ibf_atomic_kind kind,
				  size_t *count)
{
	if (!ibf_atomic_valid(dt, op, kind))
		return -FI_EOPNOTSUPP;
	if (count)
		*count = ibf_atomic_max(ibf_atomic_port_of(ep)->eager_size(ep),
					dt, kind == IBF_ATOMIC_COMPARE);
	return 0;
}

static int ibf_atomic_writevalid(struct fid_ep *ep, enum fi_datatype dt,
				 enum fi_op op, size_t *count)
{
	return ibf_atomic_valid_count(ep, dt, op, IBF_ATOMIC_PLAIN, count);
}

static int ibf_atomic_readwritevalid(struct fid_ep *ep, enum fi_datatype dt,
				     enum fi_op op, size_t *count)
{
	return ibf_atomic_valid_count(ep, dt, op, IBF_ATOMIC_FETCH, count);
}

static int ibf_atomic_compwritevalid(struct fid_ep *ep, enum fi_datatype dt,
				     enum fi_op op, size_t *count)
{
	return ibf_atomic_valid_count(ep, dt, op, IBF_ATOMIC_COMPARE, count);
}

/* Two tables with the same calls: which one an endpoint has says its kind. */
#define IBF_ATOMIC_OPS {						\
	.size = sizeof(struct fi_ops_atomic),				\
	.write = ibf_atomic_write,					\
	.writev = ibf_atomic_writev,					\
	.writemsg = ibf_atomic_writemsg,				\
	.inject = ibf_atomic_inject,					\
	.readwrite = ibf_atomic_readwrite,				\
	.readwritev = ibf_atomic_readwritev,				\
	.readwritemsg = ibf_atomic_readwritemsg,			\
	.compwrite = ibf_atomic_compwrite,				\
	.compwritev = ibf_atomic_compwritev,				\
	.compwritemsg = ibf_atomic_compwritemsg,			\
	.writevalid = ibf_atomic_writevalid,				\
	.readwritevalid = ibf_atomic_readwritevalid,			\
	.compwritevalid = ibf_atomic_compwritevalid,			\
}
struct fi_ops_atomic ibf_rdm_atomic_ops = IBF_ATOMIC_OPS;
struct fi_ops_atomic ibf_msg_atomic_ops = IBF_ATOMIC_OPS;
