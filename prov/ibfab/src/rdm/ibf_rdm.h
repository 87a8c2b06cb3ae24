/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * FI_EP_RDM: reliable, connectionless endpoints, natively on RC.
 *
 * An RDM endpoint listens on an rdma_cm port of its own; fi_getname gives
 * that address (a sockaddr), which peers insert into their AV.  The first
 * operation to a peer connects an RC QP to it; operations issued while it
 * forms wait in the connection's queue.  Every QP of the endpoint receives
 * through one SRQ of eager buffers ("bounces"), so memory does not grow
 * with the number of peers, and completes to the endpoint's CQs.
 *
 * The engine is in layers; each calls only the ones below it and core
 * (prov/ibfab/layers, checked by util/ibfab-layers), and each header
 * states its contract, locking and ownership:
 *
 *   API                ibf_rdm_ep.c (life cycle), ibf_rdm_sendrecv.c (fi_msg,
 *                      fi_tagged), ibf_rdm_rma_api.c (fi_rma),
 *                      ibf_rdm_atomic_api.c (fi_atomic): check arguments,
 *                      then call down (sends, RMA and atomics all through
 *                      ibf_rdm_submit)
 *   protocol           ibf_rdm_proto.h: ibf_rdm_submit, eager, RTS, READ,
 *                      FIN, progress (ibf_rdm_proto.c, ibf_rdm_rndv.c); RMA
 *                      (ibf_rdm_rma.c) and atomics (ibf_rdm_atomic.c)
 *   connections        ibf_rdm_conn.h: peers, QPs, credits, queues, the
 *                      one post path (ibf_rdm_post.c), flow control
 *                      (ibf_rdm_flow.c),
 *                      connect/accept/retry/teardown; reports up through
 *                      struct ibf_rdm_upcalls only
 *   operations         ibf_rdm_op.h: op pools, bounces, completion
 *   wire format        ibf_rdm_wire.h
 *   (core)             the matcher (ibf_match.h), the AV and names
 *                      (ibf_av.h), CQs, counters, MRs (ibf.h)
 *
 * The endpoint is split the same way: each layer's header defines its
 * part (struct ibf_rdm_ep_ops, _conns, _proto, then struct ibf_rdm_ep
 * here), which holds the parts below it, and each layer's files include
 * only their own header, so none can name a field of a layer above it
 * (ibf_rdm_op.h says how the parts nest).
 *
 * Threads: connections are made by a thread per endpoint (ibf_rdm_cm.c),
 * which blocks on the rdma_cm channel, so that neither the data path nor
 * the CQ ever makes a system call for them.  The thread and the data path
 * meet under ep->cm_lock, only on the slow path (a connection not up).
 * Everything else is guarded by ep->lock, taken only when the threading
 * level needs it; the CQ takes its lock first, then ep->lock.
 */
#ifndef IBF_RDM_H
#define IBF_RDM_H

#include "ibf.h"
#include "ibf_av.h"
#include "ibf_match.h"
#include "ibf_rdm_proto.h"

/*
 * The endpoint: the protocol's part (which holds the connection and
 * operation layers' parts, ibf_rdm_op.h says how) and what only its API
 * and life cycle use.
 */
struct ibf_rdm_ep {
	IBF_RDM_PART(ibf_rdm_ep_proto, as_proto, IBF_RDM_EP_PROTO_FIELDS);
	struct ibf_av_user av_user;	/* hears of removed addresses */
	int event_added;	/* in its domain's event endpoints */
	size_t inject_size;
	size_t tx_iov_limit, rx_iov_limit;
	int soft_reserved;
};

/*
 * Send-side work requests an endpoint can have at once, on one QP or all:
 * every send, IBF_RDM_READS reads per receive, a FIN per bounce.  Each QP's
 * send queue and the send CQ are sized by it, so neither can overflow.
 */
static inline size_t ibf_rdm_sq_need(const struct ibf_rdm_ep *ep)
{
	return (size_t)ep->ntx + IBF_RDM_READS * (size_t)ep->nrx + ep->nbounce;
}

static inline struct ibf_rdm_ep *to_ibf_rdm_ep(struct fid_ep *ep)
{
	return container_of(ep, struct ibf_rdm_ep, base.ep_fid);
}

/* ibf_rdm_ep.c */
int ibf_rdm_ep_open(struct fid_domain *domain, struct fi_info *info,
		    struct fid_ep **ep, void *context);

/* ibf_rdm_sendrecv.c */
extern struct fi_ops_msg ibf_rdm_msg_ops;
extern struct fi_ops_tagged ibf_rdm_tagged_ops;

/* ibf_rdm_rma_api.c */
extern struct fi_ops_rma ibf_rdm_rma_ops;

/* ibf_atomic_ops.c, through ibf_rdm_atomic_api.c */
extern struct fi_ops_atomic ibf_rdm_atomic_ops;

#endif /* IBF_RDM_H */
