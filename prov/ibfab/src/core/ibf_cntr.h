/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The counter (ibf_cntr.c) as endpoints and CQs see it.
 */
#ifndef IBF_CNTR_H
#define IBF_CNTR_H

#include "ibf.h"

struct ibf_cntr {
	struct fid_cntr cntr_fid;
	struct ibf_domain *domain;
	uint64_t value, err;	/* atomic */
	int waitable;		/* FI_WAIT_UNSPEC or FI_WAIT_FD */
	struct ibf_waitfd wait;	/* endpoints' channels + an eventfd */
	int waiting;		/* fi_trywait passed; changes raise the fd (atomic) */
	/*
	 * Threads in fi_cntr_wait (ibf_cntr.c): one, the watcher, sleeps on
	 * the fd; the others on sleep_cond, which the watcher broadcasts
	 * each time it wakes.  sleepers is atomic (counts read it) but
	 * changes under sleep_mutex, as watcher and wakes do.
	 */
	pthread_mutex_t sleep_mutex;
	pthread_cond_t sleep_cond;
	int sleepers;
	int watcher;
	uint64_t wakes;
	struct ibf_lock lock;	/* the endpoints bound */
	/* Endpoints bound, each with the channels it sleeps on. */
	struct ibf_cntr_src { struct ibf_progress *ep; int fd[2]; } *src;
	int nsrc;
	int ref;		/* endpoints bound */
};
int ibf_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr,
		  struct fid_cntr **cntr, void *context);
/*
 * fi_ep_bind of counter c with flags: slot[k] (an endpoint's counters by
 * kind) takes c for each kind whose kind_flag[k] is in flags, the counter
 * it replaces let go.  0, or -FI_EINVAL / -FI_EBADFLAGS with a warning.
 * A flag no kind takes (FI_REMOTE_* where nothing counts them) binds
 * nothing.
 */
int ibf_cntr_bind_kinds(struct ibf_cntr **slot, const uint64_t *kind_flag,
			int nkinds, struct ibf_cntr *c, struct ibf_domain *dom,
			uint64_t flags);
/* An operation counted by c completed: err 0, or failed. */
void ibf_cntr_count(struct ibf_cntr *c, int err);
/*
 * An endpoint bound to c: c progresses it through its hook and sleeps on
 * fd[0] and fd[1], its completion channels (-1: none).  Bound for several
 * kinds of operation, it is added once.
 */
int ibf_cntr_add_ep(struct ibf_cntr *c, struct ibf_progress *ep,
		    const int fd[2]);
void ibf_cntr_del_ep(struct ibf_cntr *c, struct ibf_progress *ep);
/* fi_trywait on a counter: 0, -FI_EAGAIN, or -FI_EINVAL (no wait object). */
int ibf_cntr_trywait(struct ibf_cntr *c);

#endif /* IBF_CNTR_H */
