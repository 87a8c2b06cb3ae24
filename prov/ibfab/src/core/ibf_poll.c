/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Poll sets: fi_poll over CQs and counters of a domain.  A poll reads
 * nothing out of the CQs; it progresses each and names those with
 * completions waiting (by the context given to fi_cq_open), for the caller
 * to read; and the counters whose values (or error counts) have changed
 * since the last poll looked at them.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf.h"
#include "ibf_cntr.h"
#include "ibf_cq.h"

/* A member: a CQ, or a counter and what the last poll saw of it. */
struct ibf_poll_member {
	struct ibf_cq *cq;
	struct ibf_cntr *cntr;
	uint64_t seen, seen_err;
};

struct ibf_poll {
	struct fid_poll poll_fid;
	struct ibf_domain *domain;
	pthread_mutex_t lock;	/* the member list: fi_poll may race add/del */
	struct ibf_poll_member *m;
	int count, cap;
};

static struct fid *ibf_poll_fid(const struct ibf_poll_member *m)
{
	return m->cq ? &m->cq->cq_fid.fid : &m->cntr->cntr_fid.fid;
}

static int *ibf_poll_ref(const struct ibf_poll_member *m)
{
	return m->cq ? &m->cq->ref : &m->cntr->ref;
}

/* Has counter member m moved since the last poll?  Progresses it. */
static int ibf_poll_cntr_moved(struct ibf_poll_member *m)
{
	uint64_t v = fi_cntr_read(&m->cntr->cntr_fid);
	uint64_t e = fi_cntr_readerr(&m->cntr->cntr_fid);
	int moved = v != m->seen || e != m->seen_err;

	m->seen = v;
	m->seen_err = e;
	return moved;
}

static struct ibf_poll *to_ibf_poll(struct fid_poll *p)
{
	return container_of(p, struct ibf_poll, poll_fid);
}

static int ibf_poll_poll(struct fid_poll *poll_fid, void **context, int count)
{
	struct ibf_poll *ps = to_ibf_poll(poll_fid);
	int i, n = 0;

	if (count < 0 || (count && !context))
		return -FI_EINVAL;
	pthread_mutex_lock(&ps->lock);
	for (i = 0; i < ps->count && n < count; i++)
		if (ps->m[i].cq ? ibf_cq_ready(ps->m[i].cq) :
				  ibf_poll_cntr_moved(&ps->m[i]))
			context[n++] = ibf_poll_fid(&ps->m[i])->context;
	pthread_mutex_unlock(&ps->lock);
	return n;
}

static int ibf_poll_add(struct fid_poll *poll_fid, struct fid *fid,
			uint64_t flags)
{
	struct ibf_poll *ps = to_ibf_poll(poll_fid);
	struct ibf_poll_member *tmp, add = { 0 };

	if (fid && fid->fclass == FI_CLASS_CQ) {
		add.cq = container_of(fid, struct ibf_cq, cq_fid.fid);
	} else if (fid && fid->fclass == FI_CLASS_CNTR) {
		add.cntr = container_of(fid, struct ibf_cntr, cntr_fid.fid);
		add.seen = fi_cntr_read(&add.cntr->cntr_fid);
		add.seen_err = fi_cntr_readerr(&add.cntr->cntr_fid);
	} else {
		IBF_WARN(FI_LOG_DOMAIN, "fi_poll_add: ibfab's poll sets hold "
			 "CQs and counters\n");
		return -FI_EINVAL;
	}
	pthread_mutex_lock(&ps->lock);
	if (ps->count == ps->cap) {
		tmp = realloc(ps->m, (ps->cap * 2 + 4) * sizeof(*tmp));
		if (!tmp) {
			pthread_mutex_unlock(&ps->lock);
			return -FI_ENOMEM;
		}
		ps->m = tmp;
		ps->cap = ps->cap * 2 + 4;
	}
	ps->m[ps->count++] = add;
	ibf_ref_get(ibf_poll_ref(&add));
	pthread_mutex_unlock(&ps->lock);
	return 0;
}

static int ibf_poll_del(struct fid_poll *poll_fid, struct fid *fid,
			uint64_t flags)
{
	struct ibf_poll *ps = to_ibf_poll(poll_fid);
	int i, ret = -FI_EINVAL;

	pthread_mutex_lock(&ps->lock);
	for (i = 0; i < ps->count; i++) {
		if (ibf_poll_fid(&ps->m[i]) == fid) {
			ibf_ref_put(ibf_poll_ref(&ps->m[i]));
			memmove(&ps->m[i], &ps->m[i + 1],
				(ps->count - i - 1) * sizeof(*ps->m));
			ps->count--;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&ps->lock);
	if (ret)
		IBF_WARN(FI_LOG_DOMAIN, "fi_poll_del: not in the poll set\n");
	return ret;
}

static int ibf_poll_close(struct fid *fid)
{
	struct ibf_poll *ps = container_of(fid, struct ibf_poll, poll_fid.fid);
	int i;

	for (i = 0; i < ps->count; i++)
		ibf_ref_put(ibf_poll_ref(&ps->m[i]));
	free(ps->m);
	pthread_mutex_destroy(&ps->lock);
	ibf_ref_put(&ps->domain->ref);
	free(ps);
	return 0;
}

static struct fi_ops ibf_poll_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_poll_close,
	.bind = ibf_no_bind,
	.control = ibf_no_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static struct fi_ops_poll ibf_poll_ops = {
	.size = sizeof(struct fi_ops_poll),
	.poll = ibf_poll_poll,
	.poll_add = ibf_poll_add,
	.poll_del = ibf_poll_del,
};

int ibf_poll_open(struct fid_domain *domain_fid, struct fi_poll_attr *attr,
		  struct fid_poll **poll_fid)
{
	struct ibf_domain *dom = to_ibf_domain(domain_fid);
	struct ibf_poll *ps;

	if (!poll_fid || (attr && attr->flags)) {
		IBF_WARN(FI_LOG_DOMAIN, "fi_poll_open: flags must be 0\n");
		return -FI_EINVAL;
	}
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return -FI_ENOMEM;
	ps->domain = dom;
	pthread_mutex_init(&ps->lock, NULL);
	ps->poll_fid.fid.fclass = FI_CLASS_POLL;
	ps->poll_fid.fid.ops = &ibf_poll_fi_ops;
	ps->poll_fid.ops = &ibf_poll_ops;
	ibf_ref_get(&dom->ref);
	*poll_fid = &ps->poll_fid;
	return 0;
}
