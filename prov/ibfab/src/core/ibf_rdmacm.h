/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdma_cm and QP helpers both endpoint kinds use (ibf_rdmacm.c): the
 * connection parameters, a QP's settings in RTS, its move to the error state,
 * address reuse for listeners, and the post paths' debug trace.
 */
#ifndef IBF_RDMACM_H
#define IBF_RDMACM_H

#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/*
 * Connection parameters ibfab uses everywhere (reads, retries), and id's
 * acknowledgement timeout: call just before rdma_connect or rdma_accept.
 */
void ibf_cm_param_init(struct rdma_cm_id *id, const struct ibv_device_attr *dev,
		       struct rdma_conn_param *cp, const void *wire,
		       uint8_t wire_len);
/*
 * Call once the QP is in RTS: sets min_rnr_timer (rdma_cm leaves it at
 * 655 ms), and at info level says the QP's acknowledgement timeout and
 * retries.
 */
void ibf_qp_in_rts(struct ibv_qp *qp);
/* Move a QP to the error state: what it holds completes flushed. */
int ibf_qp_to_error(struct ibv_qp *qp);
/*
 * A listener's port can be bound again while ids of an earlier owner
 * linger (as SO_REUSEADDR lets a TCP server restart); two listeners on
 * one address are still refused.
 */
void ibf_cm_reuse_addr(struct rdma_cm_id *id);
/*
 * The wings' post paths, at FI_LOG_LEVEL=debug (asked of fi_log_enabled
 * once, at open): one line per work request of the chain wr, "post: WHO:
 * write of 8 bytes in 1 sge inline signalled, S slots left".
 */
int ibf_post_trace_on(void);
void ibf_post_trace(const char *who, const struct ibv_send_wr *wr, int slots);
/* The same for a receive's work requests. */
void ibf_post_trace_recv(const char *who, const struct ibv_recv_wr *wr);

#endif /* IBF_RDMACM_H */
