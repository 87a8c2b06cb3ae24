/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * RDM memory windows' binder: see ibf_rdm_bind.h.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ibf.h"
#include "ibf_rdm_bind.h"

/* Polls of an empty CQ before a bind is taken for lost: far beyond a
 * local operation's time (nothing crosses a wire), and still under a
 * second on an emulated CPU. */
#define IBF_RDM_BIND_SPINS (1u << 22)

int ibf_rdm_windows_wanted(int param, const struct ibv_device_attr *da)
{
	if (!param || da->max_mw <= 0 ||
	    !(da->device_cap_flags & IBV_DEVICE_MEM_WINDOW))
		return 0;
	/*
	 * Soft-RoCE, unless asked: under loss rxe asks again for a read
	 * from softirq, on another CPU than the reader's FIN, and the
	 * repeat can reach the sender after the FIN closed its window;
	 * answering it through the closed window ends the connection
	 * with nothing but flushes.  A fabric (or an HCA's RoCE) keeps a
	 * queue pair's packets in order, so there the repeat comes first.
	 */
	if (param < 0 && da->vendor_id == IBF_SOFT_ROCE_VENDOR_ID) {
		IBF_INFO(FI_LOG_EP_CTRL, "Soft-RoCE: rendezvous sends register "
			 "their buffers (FI_IBFAB_RDM_RNDV_WINDOWS=1 opens them "
			 "through memory windows instead; see fi_ibfab(7))\n");
		return 0;
	}
	return 1;
}

/* Init, then ready to receive from and send to itself, then to send. */
static int ibf_rdm_binder_connect(struct ibv_qp *qp, uint8_t port)
{
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;

	if (ibv_query_port(qp->context, port, &pa))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = port;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = pa.active_mtu;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.port_num = port;
	if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
		/* RoCE: GID 0 is always there (the port's link-local). */
		if (ibv_query_gid(qp->context, port, 0, &a.ah_attr.grh.dgid))
			return errno;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
	} else {
		a.ah_attr.dlid = pa.lid;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		return errno;
	return 0;
}

int ibf_rdm_binder_open(struct ibf_rdm_binder *b, struct ibv_pd *pd,
			uint8_t port)
{
	struct ibv_qp_init_attr ia;
	int err;

	memset(b, 0, sizeof(*b));
	b->cq = ibv_create_cq(pd->context, 2, NULL, NULL, 0);
	if (!b->cq) {
		err = errno;
		goto fail;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = b->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 1;		/* one at a time, waited for */
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	b->qp = ibv_create_qp(pd, &ia);
	if (!b->qp) {
		err = errno;
		goto fail;
	}
	err = ibf_rdm_binder_connect(b->qp, port);
	if (err)
		goto fail;
	return 0;
fail:
	IBF_WARN(FI_LOG_EP_CTRL, "a queue pair for memory windows: %s: "
		 "rendezvous sends register their buffers each time\n",
		 strerror(err));
	ibf_rdm_binder_close(b);
	return ibf_errno_to_fi(err);
}

void ibf_rdm_binder_close(struct ibf_rdm_binder *b)
{
	if (b->qp && ibv_destroy_qp(b->qp))
		IBF_WARN(FI_LOG_EP_CTRL, "ibv_destroy_qp (windows): %s\n",
			 strerror(errno));
	b->qp = NULL;
	if (b->cq && ibv_destroy_cq(b->cq))
		IBF_WARN(FI_LOG_EP_CTRL, "ibv_destroy_cq (windows): %s\n",
			 strerror(errno));
	b->cq = NULL;
}

/* Post mw's bind (len 0: its unbind) and wait for its completion. */
static int ibf_rdm_binder_do(struct ibf_rdm_binder *b, struct ibv_mw *mw,
			     struct ibv_mr *mr, uint64_t addr, uint64_t len)
{
	struct ibv_mw_bind bind = {
		.wr_id = (uintptr_t)mw,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = {
			.mr = mr, .addr = addr, .length = len,
			.mw_access_flags = len ? IBV_ACCESS_REMOTE_READ : 0,
		},
	};
	struct ibv_wc wc;
	uint32_t spins;
	int ret;

	if (unlikely(b->dead || !b->qp))
		return -FI_EIO;
	ret = ibv_bind_mw(b->qp, mw, &bind);
	if (unlikely(ret)) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_EP_DATA, "ibv_bind_mw: %s\n",
			       strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	for (spins = 0; spins < IBF_RDM_BIND_SPINS; spins++) {
		ret = ibv_poll_cq(b->cq, 1, &wc);
		if (likely(ret == 1 && wc.status == IBV_WC_SUCCESS))
			return 0;
		if (ret) {
			b->dead = 1;
			IBF_WARN(FI_LOG_EP_DATA, "a memory window's %s failed: "
				 "%s: rendezvous sends register their buffers "
				 "from now on\n", len ? "bind" : "unbind",
				 ret < 0 ? "ibv_poll_cq" :
				 ibv_wc_status_str(wc.status));
			return -FI_EIO;
		}
	}
	b->dead = 1;
	IBF_WARN(FI_LOG_EP_DATA, "a memory window's %s did not complete: "
		 "rendezvous sends register their buffers from now on\n",
		 len ? "bind" : "unbind");
	return -FI_ETIMEDOUT;
}

int ibf_rdm_binder_bind(struct ibf_rdm_binder *b, struct ibv_mw *mw,
			struct ibv_mr *mr, uint64_t addr, uint64_t len,
			uint32_t *rkey)
{
	int ret = ibf_rdm_binder_do(b, mw, mr, addr, len);

	if (!ret)
		*rkey = mw->rkey;	/* ibv_bind_mw gave it the bind's key */
	return ret;
}

int ibf_rdm_binder_unbind(struct ibf_rdm_binder *b, struct ibv_mw *mw,
			  struct ibv_mr *mr)
{
	return ibf_rdm_binder_do(b, mw, mr, 0, 0);
}
