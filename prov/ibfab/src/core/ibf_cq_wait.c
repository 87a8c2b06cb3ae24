/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Waiting on a CQ: fi_trywait, fi_cq_sread and fi_cq_signal.  Blocking is
 * always: poll, arm (ibv_req_notify_cq), poll again, then sleep; so a
 * completion that lands between the last poll and the arm is seen by the
 * second poll, never lost.  Events taken from the channel are acked at
 * once.
 */
#include "config.h"

#include <string.h>
#include <time.h>

#include "ibf_cq_impl.h"

/* Take every pending channel event; a taken event disarms the CQ. */
static void ibf_cq_take_events(struct ibf_cq *cq)
{
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	while (!ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx)) {
		ibv_ack_cq_events(ev_cq, 1);
		cq->armed = 0;
	}
}

static int ibf_cq_arm(struct ibf_cq *cq)
{
	int ret;

	if (cq->armed)
		return 0;
	ret = ibv_req_notify_cq(cq->cq, 0);
	if (ret) {
		IBF_WARN(FI_LOG_CQ, "ibv_req_notify_cq: %s\n", strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	cq->armed = 1;
	return 0;
}

int ibf_cq_trywait(struct ibf_cq *cq)
{
	int ret, i;

	if (!cq->channel)
		return -FI_EINVAL;
	ibf_lock_acquire(&cq->lock);
	/* Before looking at the soft ring: a producer after us will wake us. */
	__atomic_store_n(&cq->waiting, 1, __ATOMIC_SEQ_CST);
	ibf_cq_take_events(cq);
	ret = ibf_cq_arm(cq);
	if (!ret && (cq->has_err || cq->wc_next < cq->wc_count ||
		     cq->rep_head != cq->rep_tail || cq->soft_head != __atomic_load_n(&cq->soft_tail, __ATOMIC_SEQ_CST)))
		ret = -FI_EAGAIN;
	for (i = 0; !ret && i < cq->neps; i++)
		ret = cq->eps[i]->trywait(cq->eps[i]);
	if (!ret) {
		/* Armed: anything polled now would not raise an event. */
		cq->wc_count = ibf_cq_fetch(cq, cq->wc, IBF_CQ_BATCH);
		cq->wc_next = 0;
		if (cq->wc_count < 0)
			cq->wc_count = 0;
		if (cq->wc_count)
			ret = -FI_EAGAIN;
	}
	ibf_lock_release(&cq->lock);
	return ret;
}

int ibf_cq_cntr_trywait(struct ibf_cq *cq)
{
	int ret;

	if (!cq->channel)
		return -FI_EAGAIN;	/* nothing to sleep on: poll */
	ibf_lock_acquire(&cq->lock);
	ibf_cq_take_events(cq);
	ret = ibf_cq_arm(cq);
	/* Armed: what came before is taken now, what comes later raises
	 * the channel. */
	if (!ret && ibf_cq_progress_locked(cq))
		ret = -FI_EAGAIN;
	ibf_lock_release(&cq->lock);
	return ret;
}

ssize_t ibf_cq_sreadfrom(struct fid_cq *cq_fid, void *buf, size_t count,
				fi_addr_t *src_addr, const void *cond, int timeout)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);
	struct timespec deadline;
	ssize_t ret;
	int wait_ms = timeout;

	if (!cq->channel) {
		IBF_WARN(FI_LOG_CQ, "fi_cq_sread on a CQ opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	ibf_deadline(&deadline, timeout);
	for (;;) {
		ret = ibf_cq_readfrom(cq_fid, buf, count, src_addr);
		if (ret != -FI_EAGAIN)
			return ret;
		ret = ibf_cq_trywait(cq);
		if (ret == -FI_EAGAIN)
			continue;
		if (ret)
			return ret;
		if (timeout >= 0)
			wait_ms = ibf_ms_left(&deadline);
		ret = ibf_waitfd_wait(&cq->wait, wait_ms);
		if (ret < 0)
			return ret;
		/*
		 * The eventfd: a completion made by the provider (read it on
		 * the next turn), or fi_cq_signal, which alone may end the
		 * wait with nothing to read (-FI_EAGAIN).
		 */
		if (ibf_waitfd_lower(&cq->wait) &&
		    __atomic_exchange_n(&cq->signaled, 0, __ATOMIC_ACQ_REL))
			return ibf_cq_readfrom(cq_fid, buf, count, src_addr);
		if (ret == 0 && timeout >= 0 && !ibf_ms_left(&deadline))
			return ibf_cq_readfrom(cq_fid, buf, count, src_addr);
	}
}

ssize_t ibf_cq_sread(struct fid_cq *cq_fid, void *buf, size_t count,
			    const void *cond, int timeout)
{
	return ibf_cq_sreadfrom(cq_fid, buf, count, NULL, cond, timeout);
}

int ibf_cq_signal(struct fid_cq *cq_fid)
{
	struct ibf_cq *cq = container_of(cq_fid, struct ibf_cq, cq_fid);

	if (!cq->channel)
		return -FI_EINVAL;
	__atomic_store_n(&cq->signaled, 1, __ATOMIC_RELEASE);
	return ibf_waitfd_raise(&cq->wait);
}

int ibf_cq_make_wait(struct ibf_cq *cq)
{
	cq->channel = ibv_create_comp_channel(cq->domain->verbs);
	if (!cq->channel)
		return ibf_errno_to_fi(errno);
	return ibf_waitfd_open(&cq->wait, cq->channel->fd);
}
