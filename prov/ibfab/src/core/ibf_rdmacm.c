/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdma_cm and QP settings both endpoint kinds use: the connection
 * parameters (reads in flight, retries, the acknowledgement timeout), the
 * RNR timer, moving a QP to the error state, and address reuse for
 * listeners.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ibf.h"
#include "ibf_rdmacm.h"

/*
 * How long the QP of id waits for an acknowledgement before it sends
 * again, when FI_IBFAB_ACK_TIMEOUT says: rdma_cm applies it as the QP
 * moves to RTS, so before rdma_connect or rdma_accept.
 */
static void ibf_cm_set_ack_timeout(struct rdma_cm_id *id)
{
	uint8_t t = (uint8_t)ibf_params.ack_timeout;

	if (t && rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT,
				 &t, sizeof(t)))
		IBF_WARN(FI_LOG_EP_CTRL, "FI_IBFAB_ACK_TIMEOUT=%u not applied "
			 "(RDMA_OPTION_ID_ACK_TIMEOUT: %s); the connection keeps "
			 "rdma_cm's timeout\n", t, strerror(errno));
}

void ibf_cm_param_init(struct rdma_cm_id *id, const struct ibv_device_attr *dev,
		       struct rdma_conn_param *cp, const void *wire,
		       uint8_t wire_len)
{
	ibf_cm_set_ack_timeout(id);
	memset(cp, 0, sizeof(*cp));
	cp->private_data = wire;
	cp->private_data_len = wire_len;
	/* RDMA reads in flight, each way. */
	cp->responder_resources = (uint8_t)IBF_MIN(dev->max_qp_rd_atom, 255);
	cp->initiator_depth = (uint8_t)IBF_MIN(dev->max_qp_init_rd_atom, 255);
	/*
	 * Transport retries before a send fails with a retry error: a dead
	 * peer node (or wire) must end in an error, not a hang.  At most 6
	 * (FI_IBFAB_RETRY_COUNT), not the field's largest value 7: Soft-RoCE
	 * (rdma_rxe) takes 7 to mean "retry for ever", as 7 means for
	 * rnr_retry.
	 */
	cp->retry_count = (uint8_t)ibf_params.retry_count;
	cp->rnr_retry_count = 7;	/* wait for receives as long as it takes */
}

/*
 * How long a send to a dead peer takes to fail, as the QP has it: said at
 * info level only (asking the QP is a system call).
 */
static void ibf_qp_log_timeouts(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	double ms;

	if (!fi_log_enabled(&ibf_prov, FI_LOG_INFO, FI_LOG_EP_CTRL) ||
	    ibv_query_qp(qp, &attr, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT, &init))
		return;
	ms = 4.096e-3 * (double)(1ull << attr.timeout);	/* 4.096 us x 2^t */
	IBF_INFO(FI_LOG_EP_CTRL, "QP %u: ack timeout %u (%.0f ms), %u retries: "
		 "a dead peer fails sends in about %.1f s (FI_IBFAB_ACK_TIMEOUT, "
		 "FI_IBFAB_RETRY_COUNT)\n", qp->qp_num, attr.timeout, ms,
		 attr.retry_cnt, ms * (attr.retry_cnt + 1) / 1000);
}

/*
 * Sets the delay a peer waits after finding no receive posted here
 * (rdma_cm leaves it at 0, which means 655 ms; a QP in RTS may change
 * it), and says the QP's timeouts at info level.
 */
void ibf_qp_in_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = (uint8_t)ibf_params.min_rnr_timer };

	if (!qp)
		return;
	if (ibv_modify_qp(qp, &attr, IBV_QP_MIN_RNR_TIMER))
		IBF_INFO(FI_LOG_EP_CTRL, "cannot set min_rnr_timer: %s\n",
			 strerror(errno));
	ibf_qp_log_timeouts(qp);
}

/* Every work request the QP holds completes flushed; 0 or an errno. */
int ibf_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	return ibv_modify_qp(qp, &attr, IBV_QP_STATE) ? errno : 0;
}

void ibf_cm_reuse_addr(struct rdma_cm_id *id)
{
	int one = 1;

	if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
			    &one, sizeof(one)))
		IBF_INFO(FI_LOG_EP_CTRL, "RDMA_OPTION_ID_REUSEADDR: %s\n",
			 strerror(errno));
}

static const char *ibf_wr_name(enum ibv_wr_opcode opcode)
{
	switch (opcode) {
	case IBV_WR_SEND:
		return "send";
	case IBV_WR_SEND_WITH_IMM:
		return "send with immediate";
	case IBV_WR_RDMA_WRITE:
		return "write";
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return "write with immediate";
	case IBV_WR_RDMA_READ:
		return "read";
	case IBV_WR_SEND_WITH_INV:
		return "send with invalidate";
	case IBV_WR_BIND_MW:
		return "window bind";
	default:
		return "other";
	}
}

int ibf_post_trace_on(void)
{
	return fi_log_enabled(&ibf_prov, FI_LOG_DEBUG, FI_LOG_EP_DATA);
}

/* The bytes a work request's sges hold. */
static uint64_t ibf_sge_bytes(const struct ibv_sge *sg, int n)
{
	uint64_t len = 0;
	int j;

	for (j = 0; j < n; j++)
		len += sg[j].length;
	return len;
}

void ibf_post_trace(const char *who, const struct ibv_send_wr *wr, int slots)
{
	for (; wr; wr = wr->next)
		fi_log(&ibf_prov, FI_LOG_DEBUG, FI_LOG_EP_DATA, __func__,
		       __LINE__, "post: %s: %s of %llu bytes in %d sge%s%s, "
		       "%d slots left\n", who, ibf_wr_name(wr->opcode),
		       (unsigned long long)ibf_sge_bytes(wr->sg_list, wr->num_sge),
		       wr->num_sge,
		       wr->send_flags & IBV_SEND_INLINE ? " inline" : "",
		       wr->send_flags & IBV_SEND_SIGNALED ? " signalled" : "",
		       slots);
}

void ibf_post_trace_recv(const char *who, const struct ibv_recv_wr *wr)
{
	for (; wr; wr = wr->next)
		fi_log(&ibf_prov, FI_LOG_DEBUG, FI_LOG_EP_DATA, __func__,
		       __LINE__, "post: %s: receive of %llu bytes in %d sge\n",
		       who, (unsigned long long)ibf_sge_bytes(wr->sg_list,
							      wr->num_sge),
		       wr->num_sge);
}
