/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM memory windows' binder (ibf_rdm_bind.c): an endpoint's own RC queue
 * pair, connected to itself, on which the windows of rendezvous sends
 * (type 1) are bound and unbound.  Nothing on it ever crosses a wire, so
 * the device never retransmits on it: rdma_rxe runs a window's bind again
 * when it retransmits the queue pair the bind was posted on, which fails
 * and ends that queue pair (fi_ibfab(7), FI_IBFAB_RDM_RNDV_WINDOWS), so
 * windows are not bound on the connections that carry the reads.
 *
 * Each call waits for its work request's completion before it returns
 * (a local operation: on rxe it is done when the post returns, on an HCA
 * within a microsecond or so): a key handed to a peer is bound, and a
 * window unbound is closed to every peer, with nothing left in flight.
 * Called with ep->lock held.
 */
#ifndef IBF_RDM_BIND_H
#define IBF_RDM_BIND_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* rdma_rxe's vendor id (Soft-RoCE), as ibv_query_device gives it. */
#define IBF_SOFT_ROCE_VENDOR_ID 0xffffff

/*
 * Whether an endpoint on a device of attributes da opens its rendezvous
 * sends through windows: never where the device has no type 1 windows;
 * else as FI_IBFAB_RDM_RNDV_WINDOWS says (param 0 or 1), and when it is
 * unset (-1) on every device but Soft-RoCE (said at info level there).
 */
int ibf_rdm_windows_wanted(int param, const struct ibv_device_attr *da);

struct ibf_rdm_binder {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int dead;		/* a work request failed or never completed */
};

/* Make b on port of the PD's device: 0, or -FI_E* (said at warn level;
 * the endpoint then registers each rendezvous send instead). */
int ibf_rdm_binder_open(struct ibf_rdm_binder *b, struct ibv_pd *pd,
			uint8_t port);
/* Destroy b; its windows were unbound or freed first.  Idempotent. */
void ibf_rdm_binder_close(struct ibf_rdm_binder *b);
/* Bind type 1 window mw over [addr, addr + len) of mr for remote reads:
 * 0 and the key a peer reads with in *rkey, or -FI_E* (the window's state
 * is then unknown: free it). */
int ibf_rdm_binder_bind(struct ibf_rdm_binder *b, struct ibv_mw *mw,
			struct ibv_mr *mr, uint64_t addr, uint64_t len,
			uint32_t *rkey);
/* Unbind mw, bound on b: 0 once no key of it reads any more, or -FI_E*
 * (free it then, which closes it as well). */
int ibf_rdm_binder_unbind(struct ibf_rdm_binder *b, struct ibv_mw *mw,
			  struct ibv_mr *mr);

#endif
