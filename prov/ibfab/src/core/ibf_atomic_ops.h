/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * fi_ops_atomic of both endpoint kinds, and the request they send
 * (ibf_atomic_ops.c).
 *
 * An atomic travels as a request (struct ibf_atomic_req, then the
 * operands, then the compare values) to the target endpoint, which
 * applies it with the CPU (ibf_atomic_apply.h says why) and answers with the
 * same header (its status) and the old values of a fetch.  How a request
 * and its answer travel is the endpoint kind's business (an RDM
 * endpoint's eager messages, or a framed FI_EP_MSG endpoint's); what they
 * hold, how the API's arguments become one, and how a target checks and
 * applies one is here, once.
 */
#ifndef IBF_ATOMIC_OPS_H
#define IBF_ATOMIC_OPS_H

#include "ibf.h"
#include "ibf_atomic_apply.h"

/* On the wire, before the operands; in the answer, before the results. */
struct ibf_atomic_req {
	uint64_t addr;		/* the target's address (virtual) */
	uint64_t key;		/* its region's key */
	uint32_t cookie;	/* the sender's op, echoed in the answer */
	uint32_t count;		/* elements */
	uint8_t op, datatype, kind, rsvd;	/* enum fi_op, fi_datatype,
						 * ibf_atomic_kind */
	int32_t status;		/* the answer: 0 or -FI_E* */
};

/* One atomic call, as the API gave it. */
struct ibf_atomic_args {
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

/*
 * What an endpoint kind provides: posting one atomic (flags are the
 * call's operation flags), its default tx op_flags, the flags an inject
 * adds, and its eager size (which bounds one request).
 */
struct ibf_atomic_port {
	ssize_t (*post)(struct fid_ep *ep, const struct ibf_atomic_args *a,
			fi_addr_t dest, uint64_t flags, void *context);
	uint64_t (*tx_op_flags)(struct fid_ep *ep);
	size_t (*eager_size)(struct fid_ep *ep);
	uint64_t inject_flags;
};
/* Each wing's (ibf_rdm_atomic_api.c, ibf_msg_atomic.c), which the core's
 * fi_ops_atomic reaches through ibf_wing_ops. */
extern const struct ibf_atomic_port ibf_rdm_atomic_port;
extern const struct ibf_atomic_port ibf_msg_atomic_port;
extern struct fi_ops_atomic ibf_rdm_atomic_ops, ibf_msg_atomic_ops;

/* Elements of dt one request carries at most with this eager size. */
size_t ibf_atomic_max(size_t eager_size, enum fi_datatype dt, int compare);
/*
 * The call's arguments, checked (op and type, iov limits, counts that
 * agree and fit one request, an aligned address): 0 and the element
 * count, or -FI_EOPNOTSUPP / -FI_EINVAL with a warning.
 */
int ibf_atomic_args_check(const struct ibf_atomic_args *a, size_t iov_limit,
			  size_t eager_size, size_t *count);
/* The request for a (checked) into wire: returns its bytes. */
size_t ibf_atomic_req_build(void *wire, const struct ibf_atomic_args *a,
			    size_t count, uint32_t cookie);
/*
 * A target's side: the request of len bytes that arrived in wire, checked
 * against nothing but itself and dom's regions (remote read rights for an
 * atomic read, write rights for an atomic, both for one that fetches or
 * compares), applied while the region is held registered, and turned
 * into its answer in place (status, then the old values).  Returns the
 * answer's bytes; a refused request is answered with its error.
 */
size_t ibf_atomic_serve(struct ibf_domain *dom, void *wire, size_t len,
			size_t eager_size);
/*
 * An initiator's side: whether the answer of len bytes in wire fits a
 * request that awaited want bytes of results (0 or -FI_EINVAL); its
 * status is then the operation's.
 */
int ibf_atomic_answer_check(const void *wire, size_t len, size_t want);

#endif /* IBF_ATOMIC_OPS_H */
