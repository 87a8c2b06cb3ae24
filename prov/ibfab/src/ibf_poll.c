/*
 * Poll sets: fi_poll over CQs of a domain.  A poll reads nothing out of
 * the CQs; it progresses each and names those with completions waiting
 * (by the context given to fi_cq_open), for the caller to read.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf.h"

struct ibf_poll {
	struct fid_poll poll_fid;
	struct ibf_domain *domain;
	pthread_mutex_t lock;	/* the member list: fi_poll may race add/del */
	struct ibf_cq **cqs;
	int count, cap;
};

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
		if (ibf_cq_ready(ps->cqs[i]))
			context[n++] = ps->cqs[i]->cq_fid.fid.context;
	pthread_mutex_unlock(&ps->lock);
	return n;
}

static int ibf_poll_add(struct fid_poll *poll_fid, struct fid *fid,
			uint64_t flags)
{
	struct ibf_poll *ps = to_ibf_poll(poll_fid);
	struct ibf_cq **tmp;

	if (!fid || fid->fclass != FI_CLASS_CQ) {
		IBF_WARN(FI_LOG_DOMAIN, "fi_poll_add: ibfab's poll sets hold "
			 "CQs only\n");
		return -FI_EINVAL;
	}
	pthread_mutex_lock(&ps->lock);
	if (ps->count == ps->cap) {
		tmp = realloc(ps->cqs, (ps->cap * 2 + 4) * sizeof(*tmp));
		if (!tmp) {
			pthread_mutex_unlock(&ps->lock);
			return -FI_ENOMEM;
		}
		ps->cqs = tmp;
		ps->cap = ps->cap * 2 + 4;
	}
	ps->cqs[ps->count++] = container_of(fid, struct ibf_cq, cq_fid.fid);
	ibf_ref_get(&ps->cqs[ps->count - 1]->ref);
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
		if (&ps->cqs[i]->cq_fid.fid == fid) {
			ibf_ref_put(&ps->cqs[i]->ref);
			memmove(&ps->cqs[i], &ps->cqs[i + 1],
				(ps->count - i - 1) * sizeof(*ps->cqs));
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
		ibf_ref_put(&ps->cqs[i]->ref);
	free(ps->cqs);
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
