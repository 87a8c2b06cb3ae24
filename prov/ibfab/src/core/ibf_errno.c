/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Error codes: each verbs status gets its own libfabric error. */
#include "config.h"

#include "ibf.h"

int ibf_wc_status_to_fi_failed(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_LOC_LEN_ERR:
		return FI_ETRUNC;	/* the receive buffer was too small */
	case IBV_WC_LOC_QP_OP_ERR:
	case IBV_WC_LOC_EEC_OP_ERR:
		return FI_EINVAL;
	case IBV_WC_LOC_PROT_ERR:
	case IBV_WC_MW_BIND_ERR:
		return FI_EACCES;	/* local buffer not registered as used */
	case IBV_WC_WR_FLUSH_ERR:
		return FI_ECANCELED;	/* flushed: the endpoint is in error */
	case IBV_WC_BAD_RESP_ERR:
	case IBV_WC_GENERAL_ERR:
	case IBV_WC_FATAL_ERR:
		return FI_EIO;
	case IBV_WC_LOC_ACCESS_ERR:
	case IBV_WC_REM_ACCESS_ERR:
		return FI_EACCES;	/* wrong key, address or rights */
	case IBV_WC_REM_INV_REQ_ERR:
		return FI_EINVAL;	/* e.g. a message too long for the peer */
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_REM_INV_RD_REQ_ERR:
		return FI_EREMOTEIO;
	case IBV_WC_RETRY_EXC_ERR:
		return FI_ETIMEDOUT;	/* no ACK: the peer is gone or unreachable */
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return FI_ENORX;	/* the peer posted no receive in time */
	case IBV_WC_LOC_RDD_VIOL_ERR:
	case IBV_WC_INV_EECN_ERR:
	case IBV_WC_INV_EEC_STATE_ERR:
		return FI_EOTHER;
	case IBV_WC_RESP_TIMEOUT_ERR:
		return FI_ETIMEDOUT;
	case IBV_WC_TM_ERR:
	case IBV_WC_TM_RNDV_INCOMPLETE:
		return FI_EIO;
	}
	return FI_EOTHER;
}

/*
 * errno from rdma-core (positive, or negative) to -FI_E*.  libfabric's
 * codes below 256 are errno's own, so only the few that name the trouble
 * better in libfabric's terms are changed.
 */
int ibf_errno_to_fi(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case EPERM:
		return -FI_EACCES;
	case ENXIO:
		return -FI_ENODEV;
	case ENOSYS:
		return -FI_EOPNOTSUPP;
	case ENETUNREACH:
		return -FI_EHOSTUNREACH;
	default:
		return -err;
	}
}

int ibf_errno_to_fi_retry(int err)
{
	return err == ENOMEM || err == -ENOMEM ? -FI_EAGAIN :
	       ibf_errno_to_fi(err);
}
