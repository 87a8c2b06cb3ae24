/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdma_cm and QP settings both endpoint kinds use: the connection
 * parameters (reads in flight, retries), the RNR timer, moving a QP to the
 * error state, and address reuse for listeners.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ibf.h"
#include "ibf_rdmacm.h"

void ibf_cm_param_init(const struct ibv_device_attr *dev,
		       struct rdma_conn_param *cp, const void *wire,
		       uint8_t wire_len)
{
	memset(cp, 0, sizeof(*cp));
	cp->private_data = wire;
	cp->private_data_len = wire_len;
	/* RDMA reads in flight, each way. */
	cp->responder_resources = (uint8_t)IBF_MIN(dev->max_qp_rd_atom, 255);
	cp->initiator_depth = (uint8_t)IBF_MIN(dev->max_qp_init_rd_atom, 255);
	/*
	 * Transport retries before a send fails with a retry error: a dead
	 * peer node (or wire) must end in an error, not a hang.  6, not the
	 * field's largest value 7: Soft-RoCE (rdma_rxe) takes 7 to mean
	 * "retry for ever", as 7 means for rnr_retry.
	 */
	cp->retry_count = 6;
	cp->rnr_retry_count = 7;	/* wait for receives as long as it takes */
}

/*
 * The delay a peer waits after finding no receive posted here.  rdma_cm
 * leaves it at 0, which means 655 ms; a QP in RTS may change it.
 */
void ibf_qp_set_rnr_timer(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = (uint8_t)ibf_params.min_rnr_timer };

	if (qp && ibv_modify_qp(qp, &attr, IBV_QP_MIN_RNR_TIMER))
		IBF_INFO(FI_LOG_EP_CTRL, "cannot set min_rnr_timer: %s\n",
			 strerror(errno));
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
