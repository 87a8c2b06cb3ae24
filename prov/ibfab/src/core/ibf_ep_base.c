/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * What every endpoint kind shares (struct ibf_ep_base, in ibf.h): one
 * fi_ep_bind for CQs and counters and one fi_control, each handing the
 * rest to the kind through its ops, so both kinds answer alike.
 */
#include "config.h"

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"

/* The fi_ep_bind flag each counter kind answers to. */
static const uint64_t ibf_cntr_kind_flag[IBF_CNTR_KINDS] = {
	[IBF_CNTR_SEND] = FI_SEND,
	[IBF_CNTR_RECV] = FI_RECV,
	[IBF_CNTR_READ] = FI_READ,
	[IBF_CNTR_WRITE] = FI_WRITE,
	[IBF_CNTR_REMOTE_READ] = FI_REMOTE_READ,
	[IBF_CNTR_REMOTE_WRITE] = FI_REMOTE_WRITE,
};

static struct ibf_ep_base *to_base(struct fid *fid)
{
	return container_of(fid, struct ibf_ep_base, ep_fid.fid);
}

int ibf_ep_base_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ibf_ep_base *b = to_base(fid);
	int ret;

	if (!bfid) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_ep_bind: no fid to bind\n");
		return -FI_EINVAL;
	}
	if (b->enabled) {
		IBF_WARN(FI_LOG_EP_CTRL, "bind before fi_enable\n");
		return -FI_EOPBADSTATE;
	}
	switch (bfid->fclass) {
	case FI_CLASS_CQ:
		return ibf_cq_bind(container_of(bfid, struct ibf_cq, cq_fid.fid),
				   b->domain, flags, &b->tx_cq, &b->rx_cq,
				   &b->tx_selective, &b->rx_selective);
	case FI_CLASS_CNTR:
		ret = ibf_cntr_bind_kinds(b->cntr, ibf_cntr_kind_flag,
					  b->ops->ncntr,
					  container_of(bfid, struct ibf_cntr,
						       cntr_fid.fid),
					  b->domain, flags);
		b->counted = ibf_ep_base_has_cntr(b);
		return ret;
	default:
		ret = b->ops->bind(b, bfid, flags);
		if (ret != -FI_ENOSYS)
			return ret;
		/* -FI_EINVAL, as libfabric's own providers answer it. */
		IBF_WARN(FI_LOG_EP_CTRL, "cannot bind fid class %zu to an %s "
			 "endpoint (it takes %s)\n", bfid->fclass,
			 b->ops->name, b->ops->binds);
		return -FI_EINVAL;
	}
}

int ibf_ep_base_has_cntr(const struct ibf_ep_base *b)
{
	int k;

	for (k = 0; k < IBF_CNTR_KINDS; k++)
		if (b->cntr[k])
			return 1;
	return 0;
}

int ibf_ep_base_cntr_waits(const struct ibf_ep_base *b)
{
	int k;

	for (k = 0; k < IBF_CNTR_KINDS; k++)
		if (b->cntr[k] && b->cntr[k]->waitable)
			return 1;
	return 0;
}

int ibf_ep_base_attach_cntrs(struct ibf_ep_base *b, struct ibf_progress *hook,
			     const int fd[2])
{
	int k, ret;

	for (k = 0; k < IBF_CNTR_KINDS; k++) {
		if (b->cntr[k] && (ret = ibf_cntr_add_ep(b->cntr[k], hook, fd))) {
			ibf_ep_base_detach_cntrs(b, hook);
			return ret;
		}
	}
	return 0;
}

void ibf_ep_base_detach_cntrs(struct ibf_ep_base *b, struct ibf_progress *hook)
{
	int k;

	for (k = 0; k < IBF_CNTR_KINDS; k++)
		if (b->cntr[k])
			ibf_cntr_del_ep(b->cntr[k], hook);
}

static void ibf_ep_base_unbind(struct ibf_ep_base *b)
{
	int k;

	for (k = 0; k < IBF_CNTR_KINDS; k++) {
		if (b->cntr[k])
			ibf_ref_put(&b->cntr[k]->ref);
		b->cntr[k] = NULL;
	}
	if (b->tx_cq)
		ibf_ref_put(&b->tx_cq->ref);
	if (b->rx_cq)
		ibf_ref_put(&b->rx_cq->ref);
	b->tx_cq = b->rx_cq = NULL;
}

void ibf_ep_base_close(struct ibf_ep_base *b)
{
	ibf_ep_base_unbind(b);
	ibf_ref_put(&b->domain->ref);
	fi_freeinfo(b->info);
	b->info = NULL;
}

int ibf_ep_base_control(struct fid *fid, int command, void *arg)
{
	struct ibf_ep_base *b = to_base(fid);

	switch (command) {
	case FI_ENABLE:
		return b->ops->enable(b);
	case FI_GETOPSFLAG:
	case FI_SETOPSFLAG:
		return ibf_ep_opsflag(command, arg, &b->tx_op_flags,
				      &b->rx_op_flags);
	default:
		return -FI_ENOSYS;
	}
}
