/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Counters (fi_cntr): a count of completed operations and one of failed
 * ones, bound to endpoints for some of their operations.
 *
 * An endpoint adds to its counters where it completes an operation
 * (ibf_cntr_count), whether or not a CQ entry is written (selective
 * completion, injects).  Progress is the application's: reading or waiting
 * on a counter progresses the endpoints bound to it, as reading a CQ does.
 * A counter opened with FI_WAIT_UNSPEC or FI_WAIT_FD sleeps in fi_cntr_wait
 * (and hands out, through FI_GETWAIT, an fd for poll/epoll after
 * fi_trywait) on the completion channels of its endpoints and on an
 * eventfd that fi_cntr_add and its kin raise.
 *
 * An RDM endpoint progresses its own queue pairs.  An FI_EP_MSG endpoint
 * completes to CQs: its operations count as their completions leave the
 * device CQ, so progressing the counter takes them out (ibf_cq_progress),
 * keeping for fi_cq_read what the application asked to see there.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"

static struct ibf_cntr *to_ibf_cntr(struct fid_cntr *c)
{
	return container_of(c, struct ibf_cntr, cntr_fid);
}

/* Progress every endpoint bound to c. */
static void ibf_cntr_progress(struct ibf_cntr *c)
{
	int i;

	ibf_lock_acquire(&c->lock);
	for (i = 0; i < c->nsrc; i++)
		c->src[i].ep->progress(c->src[i].ep, NULL);
	ibf_lock_release(&c->lock);
}

/*
 * Someone may sleep on the fd: an application after fi_trywait, or a
 * thread in fi_cntr_wait.  Seen after the count changed (both sides
 * store, then load, in sequential consistency), so a sleeper either sees
 * the new count or is woken by it.
 */
static int ibf_cntr_watched(struct ibf_cntr *c)
{
	return __atomic_load_n(&c->waiting, __ATOMIC_SEQ_CST) ||
	       __atomic_load_n(&c->sleepers, __ATOMIC_SEQ_CST);
}

static void ibf_cntr_wake(struct ibf_cntr *c)
{
	if (c->waitable && ibf_cntr_watched(c))
		ibf_waitfd_raise(&c->wait);
}

void ibf_cntr_count(struct ibf_cntr *c, int err)
{
	if (unlikely(err))
		__atomic_add_fetch(&c->err, 1, __ATOMIC_SEQ_CST);
	else
		__atomic_add_fetch(&c->value, 1, __ATOMIC_SEQ_CST);
	if (unlikely(ibf_cntr_watched(c)))
		ibf_cntr_wake(c);
}

/*
 * A read after fi_trywait: the fd goes quiet until the next trywait.  Not
 * while threads are in fi_cntr_wait: one may be on its way to sleep on a
 * raise it has not seen yet; their watcher lowers it when it wakes.
 */
static void ibf_cntr_unwait(struct ibf_cntr *c)
{
	if (unlikely(__atomic_load_n(&c->waiting, __ATOMIC_RELAXED))) {
		pthread_mutex_lock(&c->sleep_mutex);
		__atomic_store_n(&c->waiting, 0, __ATOMIC_SEQ_CST);
		if (!c->sleepers)
			ibf_waitfd_lower(&c->wait);
		pthread_mutex_unlock(&c->sleep_mutex);
	}
}

static uint64_t ibf_cntr_read(struct fid_cntr *cntr)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);

	ibf_cntr_unwait(c);
	ibf_cntr_progress(c);
	return __atomic_load_n(&c->value, __ATOMIC_ACQUIRE);
}

static uint64_t ibf_cntr_readerr(struct fid_cntr *cntr)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);

	ibf_cntr_unwait(c);
	ibf_cntr_progress(c);
	return __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
}

static int ibf_cntr_add(struct fid_cntr *cntr, uint64_t value)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);

	__atomic_add_fetch(&c->value, value, __ATOMIC_SEQ_CST);
	ibf_cntr_wake(c);
	return 0;
}

static int ibf_cntr_set(struct fid_cntr *cntr, uint64_t value)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);

	__atomic_store_n(&c->value, value, __ATOMIC_SEQ_CST);
	ibf_cntr_wake(c);
	return 0;
}

static int ibf_cntr_adderr(struct fid_cntr *cntr, uint64_t value)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);

	__atomic_add_fetch(&c->err, value, __ATOMIC_SEQ_CST);
	ibf_cntr_wake(c);
	return 0;
}

static int ibf_cntr_seterr(struct fid_cntr *cntr, uint64_t value)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);

	__atomic_store_n(&c->err, value, __ATOMIC_SEQ_CST);
	ibf_cntr_wake(c);
	return 0;
}

/* Arms every endpoint bound: 0 when none has anything to progress, so a
 * sleep on the fd misses nothing; -FI_EAGAIN otherwise. */
static int ibf_cntr_arm(struct ibf_cntr *c)
{
	int ret = 0, i;

	ibf_lock_acquire(&c->lock);
	for (i = 0; !ret && i < c->nsrc; i++)
		ret = c->src[i].ep->trywait(c->src[i].ep);
	ibf_lock_release(&c->lock);
	return ret;
}

/*
 * fi_trywait: 0 when the application may sleep on the fd and miss
 * nothing; -FI_EAGAIN when there is work (progress and look again).
 * Sets "waiting", under sleep_mutex so that no watcher in fi_cntr_wait
 * lowers the fd after deciding it was not watched: changes from here on
 * raise it until the next read.
 */
int ibf_cntr_trywait(struct ibf_cntr *c)
{
	if (!c->waitable)
		return -FI_EINVAL;
	pthread_mutex_lock(&c->sleep_mutex);
	__atomic_store_n(&c->waiting, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&c->sleep_mutex);
	return ibf_cntr_arm(c);
}

/* 0 when the count reached threshold, -FI_EAVAIL when an operation
 * failed since the wait began (errs), -FI_ETIMEDOUT, 1 to go on. */
static int ibf_cntr_done(struct ibf_cntr *c, uint64_t threshold, uint64_t errs,
			 const struct timespec *deadline, int timeout)
{
	if (__atomic_load_n(&c->value, __ATOMIC_SEQ_CST) >= threshold)
		return 0;
	if (__atomic_load_n(&c->err, __ATOMIC_SEQ_CST) != errs)
		return -FI_EAVAIL;
	if (timeout >= 0 && !ibf_ms_left(deadline))
		return -FI_ETIMEDOUT;
	return 1;
}

/*
 * sleep_mutex held: sleep on the fd, the watcher of those in
 * fi_cntr_wait, until it is raised, an endpoint's channel fires or the
 * deadline passes.  Then lower the fd (unless the application watches it
 * too: its next read lowers it) and wake the others to look again.
 */
static int ibf_cntr_watch(struct ibf_cntr *c, const struct timespec *deadline,
			  int timeout)
{
	int ret;

	c->watcher = 1;
	pthread_mutex_unlock(&c->sleep_mutex);
	ret = ibf_waitfd_wait(&c->wait, timeout >= 0 ? ibf_ms_left(deadline) : -1);
	pthread_mutex_lock(&c->sleep_mutex);
	c->watcher = 0;
	if (!__atomic_load_n(&c->waiting, __ATOMIC_SEQ_CST))
		ibf_waitfd_lower(&c->wait);
	c->wakes++;
	pthread_cond_broadcast(&c->sleep_cond);
	return ret < 0 ? ret : 0;
}

/* sleep_mutex held: another thread watches the fd; sleep until it wakes
 * (c->wakes moves on from wakes) or the deadline passes. */
static void ibf_cntr_follow(struct ibf_cntr *c, uint64_t wakes,
			    const struct timespec *deadline, int timeout)
{
	while (c->wakes == wakes) {
		if (timeout < 0)
			pthread_cond_wait(&c->sleep_cond, &c->sleep_mutex);
		else if (pthread_cond_timedwait(&c->sleep_cond, &c->sleep_mutex,
						deadline))
			break;
	}
}

/*
 * Until the count reaches threshold (0), an operation fails
 * (-FI_EAVAIL), or timeout ms pass (-FI_ETIMEDOUT; -1: no limit).  A
 * counter without a wait object polls.
 *
 * Threads of an FI_THREAD_SAFE domain may wait on one counter together,
 * while others read it and an FI_PROGRESS_AUTO thread counts into it
 * (OpenSHMEM's mt_lock_test).  Each counts itself in c->sleepers, so
 * every change raises the fd while any is here, and no read lowers it
 * under them.  One sleeps on the fd; the rest wait for it to wake, so
 * none spins on a raise meant for another.  A thread looks at the count
 * after it noted c->wakes and after it armed the endpoints: a change it
 * did not see either raises the fd after that, or was taken by a watcher
 * that woke since, which moved c->wakes on.
 */
static int ibf_cntr_wait(struct fid_cntr *cntr, uint64_t threshold, int timeout)
{
	struct ibf_cntr *c = to_ibf_cntr(cntr);
	uint64_t errs = __atomic_load_n(&c->err, __ATOMIC_SEQ_CST), wakes;
	struct timespec deadline;
	int ret;

	ibf_deadline(&deadline, timeout);
	ibf_cntr_unwait(c);	/* a wait reads: this thread's trywait is over */
	if (!c->waitable) {
		do
			ibf_cntr_progress(c);
		while ((ret = ibf_cntr_done(c, threshold, errs, &deadline,
					    timeout)) > 0);
		return ret;
	}
	pthread_mutex_lock(&c->sleep_mutex);
	__atomic_add_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		wakes = c->wakes;
		pthread_mutex_unlock(&c->sleep_mutex);
		ibf_cntr_progress(c);
		ret = ibf_cntr_done(c, threshold, errs, &deadline, timeout);
		if (ret > 0)
			ret = ibf_cntr_arm(c);
		if (!ret)
			ret = ibf_cntr_done(c, threshold, errs, &deadline, timeout);
		pthread_mutex_lock(&c->sleep_mutex);
		if (ret <= 0 && ret != -FI_EAGAIN)
			break;
		if (ret == -FI_EAGAIN || c->wakes != wakes)
			continue;
		if (!c->watcher) {
			ret = ibf_cntr_watch(c, &deadline, timeout);
			if (ret < 0)
				break;
		} else {
			ibf_cntr_follow(c, wakes, &deadline, timeout);
		}
	}
	__atomic_sub_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&c->sleep_mutex);
	return ret;
}

static struct fi_ops_cntr ibf_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr),
	.read = ibf_cntr_read,
	.readerr = ibf_cntr_readerr,
	.add = ibf_cntr_add,
	.set = ibf_cntr_set,
	.wait = ibf_cntr_wait,
	.adderr = ibf_cntr_adderr,
	.seterr = ibf_cntr_seterr,
};

/* c->lock held: does an endpoint still bound sleep on fd (a shared CQ)? */
static int ibf_cntr_fd_used(struct ibf_cntr *c, int fd)
{
	int i;

	for (i = 0; i < c->nsrc; i++)
		if (c->src[i].fd[0] == fd || c->src[i].fd[1] == fd)
			return 1;
	return 0;
}

int ibf_cntr_bind_kinds(struct ibf_cntr **slot, const uint64_t *kind_flag,
			int nkinds, struct ibf_cntr *c, struct ibf_domain *dom,
			uint64_t flags)
{
	uint64_t all = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
		       FI_REMOTE_WRITE;
	int k;

	if (c->domain != dom || !flags || (flags & ~all)) {
		IBF_WARN(FI_LOG_EP_CTRL, "a counter binds to an endpoint of its "
			 "domain with FI_SEND, FI_RECV, FI_READ, FI_WRITE, "
			 "FI_REMOTE_READ or FI_REMOTE_WRITE (flags 0x%llx)\n",
			 (unsigned long long)flags);
		return c->domain != dom ? -FI_EINVAL : -FI_EBADFLAGS;
	}
	for (k = 0; k < nkinds; k++) {
		if (!(flags & kind_flag[k]))
			continue;
		if (slot[k])
			ibf_ref_put(&slot[k]->ref);
		slot[k] = c;
		ibf_ref_get(&c->ref);
	}
	return 0;
}

static void ibf_cntr_unwatch(struct ibf_cntr *c, const int *fd, int nfd)
{
	int i;

	for (i = 0; c->waitable && i < nfd; i++)
		if (fd[i] >= 0 && !ibf_cntr_fd_used(c, fd[i]))
			ibf_waitfd_unwatch(&c->wait, fd[i]);
}

void ibf_cntr_del_ep(struct ibf_cntr *c, struct ibf_progress *ep)
{
	struct ibf_cntr_src gone;
	int i;

	ibf_lock_acquire(&c->lock);
	for (i = 0; i < c->nsrc; i++) {
		if (c->src[i].ep == ep) {
			gone = c->src[i];
			c->src[i] = c->src[--c->nsrc];
			ibf_cntr_unwatch(c, gone.fd, 2);
			break;
		}
	}
	ibf_lock_release(&c->lock);
}

int ibf_cntr_add_ep(struct ibf_cntr *c, struct ibf_progress *ep,
		    const int fd[2])
{
	struct ibf_cntr_src *tmp;
	int ret = 0, i;

	ibf_lock_acquire(&c->lock);
	for (i = 0; i < c->nsrc; i++) {
		if (c->src[i].ep == ep) {
			ibf_lock_release(&c->lock);
			return 0;
		}
	}
	tmp = realloc(c->src, (c->nsrc + 1) * sizeof(*tmp));
	if (tmp) {
		c->src = tmp;
		c->src[c->nsrc++] = (struct ibf_cntr_src){ ep, { fd[0], fd[1] } };
	}
	ibf_lock_release(&c->lock);
	if (!tmp)
		return -FI_ENOMEM;
	for (i = 0; c->waitable && i < 2; i++) {
		ret = fd[i] >= 0 ? ibf_waitfd_watch(&c->wait, fd[i]) : 0;
		if (ret && ret != -EEXIST) {	/* EEXIST: a CQ shared */
			ibf_cntr_del_ep(c, ep);	/* unwatches what it may */
			return ret;
		}
	}
	return 0;
}

static int ibf_cntr_close(struct fid *fid)
{
	struct ibf_cntr *c = container_of(fid, struct ibf_cntr, cntr_fid.fid);

	if (ibf_ref_read(&c->ref)) {
		IBF_WARN(FI_LOG_CQ, "counter still bound to %d endpoint(s): "
			 "close them first\n", ibf_ref_read(&c->ref));
		return -FI_EBUSY;
	}
	if (c->waitable)
		ibf_waitfd_close(&c->wait);
	free(c->src);
	pthread_cond_destroy(&c->sleep_cond);
	pthread_mutex_destroy(&c->sleep_mutex);
	ibf_lock_fini(&c->lock);
	ibf_ref_put(&c->domain->ref);
	free(c);
	return 0;
}

static int ibf_cntr_control(struct fid *fid, int command, void *arg)
{
	struct ibf_cntr *c = container_of(fid, struct ibf_cntr, cntr_fid.fid);

	return ibf_waitfd_control(&c->wait, c->waitable, command, arg);
}

static struct fi_ops ibf_cntr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_cntr_close,
	.bind = ibf_no_bind,
	.control = ibf_cntr_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

/* fi_cntr_wait's sleepers time out on the clock of ibf_deadline. */
static int ibf_cntr_sleep_init(struct ibf_cntr *c)
{
	pthread_condattr_t attr;
	int ret;

	ret = pthread_condattr_init(&attr);
	if (ret)
		return -ret;
	ret = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (!ret)
		ret = pthread_cond_init(&c->sleep_cond, &attr);
	pthread_condattr_destroy(&attr);
	if (!ret && (ret = pthread_mutex_init(&c->sleep_mutex, NULL)))
		pthread_cond_destroy(&c->sleep_cond);
	return -ret;
}

int ibf_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr, void *context)
{
	struct ibf_domain *dom = container_of(domain, struct ibf_domain, domain_fid);
	enum fi_wait_obj wait = attr ? attr->wait_obj : FI_WAIT_NONE;
	struct ibf_cntr *c;
	int ret;

	if (!cntr)
		return -FI_EINVAL;
	if (attr && attr->events != FI_CNTR_EVENTS_COMP) {
		IBF_WARN(FI_LOG_CQ, "counters count completions only "
			 "(FI_CNTR_EVENTS_COMP)\n");
		return -FI_ENOSYS;
	}
	if (wait != FI_WAIT_NONE && wait != FI_WAIT_UNSPEC && wait != FI_WAIT_FD) {
		char w[IBF_ENUM_STR];

		IBF_WARN(FI_LOG_CQ, "counter wait object %s: FI_WAIT_NONE, "
			 "FI_WAIT_UNSPEC and FI_WAIT_FD are supported\n",
			 ibf_enum_str(w, sizeof(w), IBF_TYPE_WAIT_OBJ, wait));
		return -FI_ENOSYS;
	}
	if (attr && attr->flags) {
		IBF_WARN(FI_LOG_CQ, "counter flags 0x%llx: none is supported\n",
			 (unsigned long long)attr->flags);
		return -FI_EBADFLAGS;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	c->cntr_fid.fid.fclass = FI_CLASS_CNTR;
	c->cntr_fid.fid.context = context;
	c->cntr_fid.fid.ops = &ibf_cntr_fi_ops;
	c->cntr_fid.ops = &ibf_cntr_ops;
	c->domain = dom;
	c->waitable = wait != FI_WAIT_NONE;
	ret = ibf_cntr_sleep_init(c);
	if (!ret && c->waitable && (ret = ibf_waitfd_open(&c->wait, -1))) {
		pthread_cond_destroy(&c->sleep_cond);
		pthread_mutex_destroy(&c->sleep_mutex);
	}
	if (ret) {
		free(c);
		return ret;
	}
	ibf_lock_init(&c->lock, 1);
	ibf_ref_get(&dom->ref);
	*cntr = &c->cntr_fid;
	return 0;
}
