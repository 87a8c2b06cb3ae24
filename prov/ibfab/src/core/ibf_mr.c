/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Memory regions.  desc is the ibf_mr itself (the data path reads its lkey);
 * the key is the rkey, or the application's requested key (dom->req_keys,
 * with addresses that are offsets into the region).  Remote rights are
 * granted only when asked for.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ibf.h"
#include "ibf_abi.h"
#include "ibf_cntr.h"

#define IBF_MR_ACCESS (FI_SEND | FI_RECV | FI_READ | FI_WRITE | \
		       FI_REMOTE_READ | FI_REMOTE_WRITE)
/* Bits 60-63 are provider specific (fabric.h): other layers' (ofi_rxm's
 * over ibfab, say) are none of ours to refuse. */
#define IBF_FLAGS_PROV_SPECIFIC (0xfULL << 60)

/* libfabric access bits to verbs access flags. */
int ibf_mr_access_to_ibv(uint64_t access)
{
	int ibv = 0;

	/* No bits: the buffer may be used for anything local. */
	if (!(access & IBF_MR_ACCESS))
		access |= FI_SEND | FI_RECV | FI_READ | FI_WRITE;
	/* The HCA writes into receive buffers and read targets. */
	if (access & (FI_RECV | FI_READ))
		ibv |= IBV_ACCESS_LOCAL_WRITE;
	if (access & FI_REMOTE_WRITE)
		ibv |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	if (access & FI_REMOTE_READ)
		ibv |= IBV_ACCESS_REMOTE_READ;
	return ibv;
}

/* ---- regions by key ---- */

static struct ibf_mr **ibf_mr_slot(struct ibf_domain *dom, uint32_t key)
{
	return &dom->mr_bucket[(key * 2654435761u) >> (32 - IBF_MR_BUCKET_BITS)];
}

/* The region of dom keyed key (a peer's bytes), or NULL; mr_lock held. */
static struct ibf_mr *ibf_mr_by_key(struct ibf_domain *dom, uint64_t key)
{
	struct ibf_mr *mr;

	if (key > UINT32_MAX)
		return NULL;
	for (mr = *ibf_mr_slot(dom, (uint32_t)key); mr; mr = mr->key_next)
		if (mr->key == key)
			return mr;
	return NULL;
}

/* Enter mr under its key: -FI_ENOKEY if a requested key is taken. */
static int ibf_mr_key_add(struct ibf_domain *dom, struct ibf_mr *mr)
{
	struct ibf_mr **slot = ibf_mr_slot(dom, (uint32_t)mr->key);
	int ret = 0;

	pthread_mutex_lock(&dom->mr_lock);
	if (dom->req_keys && ibf_mr_by_key(dom, mr->key)) {
		ret = -FI_ENOKEY;
	} else {
		mr->key_next = *slot;
		*slot = mr;
	}
	pthread_mutex_unlock(&dom->mr_lock);
	return ret;
}

static void ibf_mr_key_del(struct ibf_domain *dom, struct ibf_mr *mr)
{
	struct ibf_mr **p;

	pthread_mutex_lock(&dom->mr_lock);
	for (p = ibf_mr_slot(dom, (uint32_t)mr->key); *p; p = &(*p)->key_next) {
		if (*p == mr) {
			*p = mr->key_next;
			break;
		}
	}
	/* Peers that learned its device key forget it before they hear
	 * anything more from us (ibf_rdm_hdr.key_gen). */
	if (mr->told)
		__atomic_add_fetch(&dom->key_gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&dom->mr_lock);
}

int ibf_mr_key_lookup(struct ibf_domain *dom, uint64_t key,
		      struct ibf_mr_key_info *out, int told)
{
	struct ibf_mr *mr;

	pthread_mutex_lock(&dom->mr_lock);
	mr = ibf_mr_by_key(dom, key);
	if (mr) {
		mr->told |= told;
		out->base = (uintptr_t)mr->mr->addr;
		out->len = mr->mr->length;
		out->rkey = mr->mr->rkey;
		out->access = (uint32_t)mr->ibv_access &
			      (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
	}
	pthread_mutex_unlock(&dom->mr_lock);
	return mr ? 0 : -FI_ENOKEY;
}

struct ibf_mr *ibf_mr_target_hold(struct ibf_domain *dom, uint64_t key,
				  uint64_t addr, size_t len, int ibv_access)
{
	struct ibf_mr *mr;
	uint64_t start, end;

	pthread_mutex_lock(&dom->mr_lock);
	mr = ibf_mr_by_key(dom, key);
	if (mr) {
		start = (uintptr_t)mr->mr->addr;
		end = start + mr->mr->length;
		addr += mr->base;	/* an offset: from its start */
		if (addr >= start && addr + len <= end && addr + len >= addr &&
		    (mr->ibv_access & ibv_access) == ibv_access)
			return mr;	/* held until ibf_mr_target_release */
	}
	pthread_mutex_unlock(&dom->mr_lock);
	return NULL;
}

void ibf_mr_target_release(struct ibf_domain *dom)
{
	pthread_mutex_unlock(&dom->mr_lock);
}

void ibf_mr_remote_event(struct ibf_domain *dom, uint64_t key, uint64_t addr,
			 uint64_t len, int read)
{
	struct ibf_mr *mr = ibf_mr_target_hold(dom, key, addr, len, read ?
					       IBV_ACCESS_REMOTE_READ :
					       IBV_ACCESS_REMOTE_WRITE);

	if (!mr) {
		FI_WARN_SPARSE(&ibf_prov, FI_LOG_MR, "a peer told of a remote "
			       "%s of %llu bytes at %#llx, key %#llx, that the "
			       "key does not grant: not counted\n",
			       read ? "read" : "write", (unsigned long long)len,
			       (unsigned long long)addr, (unsigned long long)key);
		return;
	}
	if (mr->cntr[read])
		ibf_cntr_count(mr->cntr[read], 0);
	ibf_mr_target_release(dom);
}

/* ---- counters bound to regions (FI_RMA_EVENT) ---- */

/* c now counts for a region of dom: it progresses dom's event endpoints. */
static int ibf_mr_cntr_attach(struct ibf_domain *dom, struct ibf_cntr *c)
{
	struct ibf_mr_cntr *tmp;
	int i, ret = 0;

	pthread_mutex_lock(&dom->event_lock);
	for (i = 0; i < dom->nmr_cntrs && dom->mr_cntrs[i].cntr != c; i++)
		;
	if (i < dom->nmr_cntrs) {
		dom->mr_cntrs[i].refs++;
		goto out;
	}
	tmp = realloc(dom->mr_cntrs, (dom->nmr_cntrs + 1) * sizeof(*tmp));
	if (!tmp) {
		ret = -FI_ENOMEM;
		goto out;
	}
	dom->mr_cntrs = tmp;
	dom->mr_cntrs[dom->nmr_cntrs++] = (struct ibf_mr_cntr){ c, 1 };
	for (i = 0; !ret && i < dom->nevent_eps; i++)
		ret = ibf_cntr_add_ep(c, dom->event_eps[i].ep,
				      (const int[2]){ dom->event_eps[i].fd, -1 });
out:
	pthread_mutex_unlock(&dom->event_lock);
	return ret;
}

static void ibf_mr_cntr_detach(struct ibf_domain *dom, struct ibf_cntr *c)
{
	int i, j;

	pthread_mutex_lock(&dom->event_lock);
	for (i = 0; i < dom->nmr_cntrs; i++) {
		if (dom->mr_cntrs[i].cntr != c || --dom->mr_cntrs[i].refs)
			continue;
		for (j = 0; j < dom->nevent_eps; j++)
			ibf_cntr_del_ep(c, dom->event_eps[j].ep);
		dom->mr_cntrs[i] = dom->mr_cntrs[--dom->nmr_cntrs];
		break;
	}
	pthread_mutex_unlock(&dom->event_lock);
}

int ibf_domain_event_ep_add(struct ibf_domain *dom, struct ibf_progress *ep,
			    int fd)
{
	struct ibf_event_ep *tmp;
	int i, ret = 0;

	pthread_mutex_lock(&dom->event_lock);
	tmp = realloc(dom->event_eps, (dom->nevent_eps + 1) * sizeof(*tmp));
	if (tmp) {
		dom->event_eps = tmp;
		dom->event_eps[dom->nevent_eps++] = (struct ibf_event_ep){ ep, fd };
		for (i = 0; !ret && i < dom->nmr_cntrs; i++)
			ret = ibf_cntr_add_ep(dom->mr_cntrs[i].cntr, ep,
					      (const int[2]){ fd, -1 });
	} else {
		ret = -FI_ENOMEM;
	}
	pthread_mutex_unlock(&dom->event_lock);
	return ret;
}

void ibf_domain_event_ep_del(struct ibf_domain *dom, struct ibf_progress *ep)
{
	int i, j;

	pthread_mutex_lock(&dom->event_lock);
	for (i = 0; i < dom->nevent_eps; i++) {
		if (dom->event_eps[i].ep != ep)
			continue;
		for (j = 0; j < dom->nmr_cntrs; j++)
			ibf_cntr_del_ep(dom->mr_cntrs[j].cntr, ep);
		dom->event_eps[i] = dom->event_eps[--dom->nevent_eps];
		break;
	}
	pthread_mutex_unlock(&dom->event_lock);
}

/* fi_mr_bind: a counter for the remote writes and/or reads it receives. */
static int ibf_mr_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ibf_mr *mr = container_of(fid, struct ibf_mr, mr_fid.fid);
	struct ibf_cntr *c;
	int k, ret;

	if (!bfid || bfid->fclass != FI_CLASS_CNTR || !flags ||
	    (flags & ~(FI_REMOTE_WRITE | FI_REMOTE_READ))) {
		IBF_WARN(FI_LOG_MR, "fi_mr_bind takes a counter, with "
			 "FI_REMOTE_WRITE and/or FI_REMOTE_READ (FI_RMA_EVENT)\n");
		return -FI_EINVAL;
	}
	c = container_of(bfid, struct ibf_cntr, cntr_fid.fid);
	if (c->domain != mr->domain)
		return -FI_EINVAL;
	for (k = 0; k < 2; k++) {
		if (!(flags & (k ? FI_REMOTE_READ : FI_REMOTE_WRITE)))
			continue;
		ret = ibf_mr_cntr_attach(mr->domain, c);
		if (ret)
			return ret;
		ibf_ref_get(&c->ref);
		pthread_mutex_lock(&mr->domain->mr_lock);
		if (mr->cntr[k]) {
			struct ibf_cntr *old = mr->cntr[k];

			pthread_mutex_unlock(&mr->domain->mr_lock);
			ibf_mr_cntr_detach(mr->domain, old);
			ibf_ref_put(&old->ref);
			pthread_mutex_lock(&mr->domain->mr_lock);
		}
		mr->cntr[k] = c;
		pthread_mutex_unlock(&mr->domain->mr_lock);
	}
	return 0;
}

/* FI_ENABLE: a region with counters bound is ready as soon as bound. */
static int ibf_mr_control(struct fid *fid, int command, void *arg)
{
	(void)fid;
	(void)arg;
	return command == FI_ENABLE ? 0 : -FI_ENOSYS;
}

static int ibf_mr_close(struct fid *fid)
{
	struct ibf_mr *mr = container_of(fid, struct ibf_mr, mr_fid.fid);
	int ret, k;

	ibf_mr_key_del(mr->domain, mr);
	for (k = 0; k < 2; k++) {
		if (!mr->cntr[k])
			continue;
		ibf_mr_cntr_detach(mr->domain, mr->cntr[k]);
		ibf_ref_put(&mr->cntr[k]->ref);
		mr->cntr[k] = NULL;
	}
	ret = ibv_dereg_mr(mr->mr);
	if (ret) {
		IBF_WARN(FI_LOG_MR, "ibv_dereg_mr: %s\n", strerror(ret));
		return ibf_errno_to_fi(ret);
	}
	mr->magic = 0;
	ibf_ref_put(&mr->domain->ref);
	free(mr);
	return 0;
}

static struct fi_ops ibf_mr_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_mr_close,
	.bind = ibf_mr_bind,
	.control = ibf_mr_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static void ibf_mr_warn_pin(const void *buf, size_t len, int err)
{
	struct rlimit rl;

	if (err != ENOMEM && err != EAGAIN)
		return;
	if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY)
		IBF_WARN(FI_LOG_MR, "cannot pin %zu bytes at %p: RLIMIT_MEMLOCK "
			 "is %llu KiB; raise it (ulimit -l unlimited)\n", len,
			 buf, (unsigned long long)rl.rlim_cur >> 10);
	else
		IBF_WARN(FI_LOG_MR, "cannot pin %zu bytes at %p: out of memory\n",
			 len, buf);
}

/*
 * A requested key in a domain whose keys are the provider's: ignored, as
 * fi_mr(3) says, and most applications that pass one read fi_mr_key.
 * One that writes to the key it asked for (fabtests' fi_multi_mr) fails
 * only at its peer, far from here: said at info level, once a process.
 */
static void ibf_mr_say_key_ignored(uint64_t requested_key, uint64_t key)
{
	static int said;

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	IBF_INFO(FI_LOG_MR, "fi_mr_reg: requested_key %#llx ignored: this "
		 "domain's keys are the provider's (FI_MR_PROV_KEY: this "
		 "region's is %#llx, from fi_mr_key) and peers name its bytes "
		 "by virtual address (FI_MR_VIRT_ADDR).  For keys of its own "
		 "and offsets, leave both out of the hints' mr_mode (FI_EP_RDM "
		 "with RMA or atomics) or set FI_IBFAB_RDM_REQUESTED_KEYS=1 "
		 "(said once)\n", (unsigned long long)requested_key,
		 (unsigned long long)key);
}

static int ibf_mr_reg_one(struct ibf_domain *dom, const void *buf, size_t len,
			  uint64_t access, uint64_t requested_key,
			  uint64_t flags, void *context, struct fid_mr **mr_fid)
{
	struct ibf_mr *mr;
	int ret;

	if (!mr_fid || (!buf && len)) {
		IBF_WARN(FI_LOG_MR, "fi_mr_reg: NULL %s\n", mr_fid ? "buffer" : "mr");
		return -FI_EINVAL;
	}
	if (flags & ~IBF_FLAGS_PROV_SPECIFIC) {
		IBF_WARN(FI_LOG_MR, "fi_mr_reg: flags %#llx not supported "
			 "(no FI_RMA_EVENT, no device memory)\n",
			 (unsigned long long)flags);
		return -FI_EBADFLAGS;
	}
	if (access & ~(IBF_MR_ACCESS | FI_MSG | FI_RMA)) {
		IBF_WARN(FI_LOG_MR, "fi_mr_reg: access %#llx not supported\n",
			 (unsigned long long)access);
		return -FI_EINVAL;
	}
	if (dom->req_keys && requested_key > UINT32_MAX) {
		IBF_WARN(FI_LOG_MR, "fi_mr_reg: requested_key %#llx: keys are "
			 "at most 4 bytes (mr_key_size)\n",
			 (unsigned long long)requested_key);
		return -FI_EKEYREJECTED;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return -FI_ENOMEM;
	mr->ibv_access = ibf_mr_access_to_ibv(access);
	mr->mr = ibv_reg_mr(dom->pd, (void *)buf, len, mr->ibv_access);
	if (!mr->mr) {
		ret = errno;
		ibf_mr_warn_pin(buf, len, ret);
		IBF_WARN(FI_LOG_MR, "ibv_reg_mr(%p, %zu): %s\n", buf, len,
			 strerror(ret));
		free(mr);
		return ibf_errno_to_fi(ret);
	}
	mr->domain = dom;
	mr->magic = IBF_MR_MAGIC;
	mr->mr_fid.fid.fclass = FI_CLASS_MR;
	mr->mr_fid.fid.context = context;
	mr->mr_fid.fid.ops = &ibf_mr_fi_ops;
	mr->mr_fid.mem_desc = mr;
	mr->key = dom->req_keys ? requested_key : mr->mr->rkey;
	mr->base = dom->req_keys ? (uintptr_t)buf : 0;
	mr->mr_fid.key = mr->key;
	if (requested_key && !dom->req_keys && requested_key != mr->key)
		ibf_mr_say_key_ignored(requested_key, mr->key);
	ret = ibf_mr_key_add(dom, mr);
	if (ret) {
		IBF_WARN(FI_LOG_MR, "fi_mr_reg: requested_key %#llx is in use "
			 "in this domain\n", (unsigned long long)requested_key);
		ibv_dereg_mr(mr->mr);
		free(mr);
		return ret;
	}
	ibf_ref_get(&dom->ref);
	*mr_fid = &mr->mr_fid;
	return 0;
}

static struct ibf_domain *ibf_mr_domain(struct fid *fid)
{
	if (!fid || fid->fclass != FI_CLASS_DOMAIN) {
		IBF_WARN(FI_LOG_MR, "memory is registered with a domain\n");
		return NULL;
	}
	return container_of(fid, struct ibf_domain, domain_fid.fid);
}

static int ibf_mr_reg(struct fid *fid, const void *buf, size_t len,
		      uint64_t access, uint64_t offset, uint64_t requested_key,
		      uint64_t flags, struct fid_mr **mr, void *context)
{
	struct ibf_domain *dom = ibf_mr_domain(fid);

	if (!dom)
		return -FI_EINVAL;
	return ibf_mr_reg_one(dom, buf, len, access, requested_key, flags,
			      context, mr);
}

static int ibf_mr_regv(struct fid *fid, const struct iovec *iov, size_t count,
		       uint64_t access, uint64_t offset, uint64_t requested_key,
		       uint64_t flags, struct fid_mr **mr, void *context)
{
	struct ibf_domain *dom = ibf_mr_domain(fid);

	if (!dom)
		return -FI_EINVAL;
	if (count > 1 || (count && !iov)) {
		IBF_WARN(FI_LOG_MR, "fi_mr_regv: %zu iovs, mr_iov_limit is 1\n",
			 count);
		return -FI_EINVAL;
	}
	return ibf_mr_reg_one(dom, count ? iov->iov_base : NULL,
			      count ? iov->iov_len : 0, access, requested_key,
			      flags, context, mr);
}

static int ibf_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr,
			  uint64_t flags, struct fid_mr **mr)
{
	struct ibf_domain *dom = ibf_mr_domain(fid);

	if (!attr || !dom)
		return -FI_EINVAL;
	/* iface came in 1.10: an older caller's struct ends before it. */
	if (ibf_api_ge(dom->fabric->api_version, 1, 10) &&
	    attr->iface != FI_HMEM_SYSTEM) {
		char i[IBF_ENUM_STR];

		IBF_WARN(FI_LOG_MR, "fi_mr_regattr: iface %s: ibfab registers "
			 "host memory only\n", ibf_enum_str(i, sizeof(i),
			 FI_TYPE_HMEM_IFACE, attr->iface));
		return -FI_ENOSYS;
	}
	return ibf_mr_regv(fid, attr->mr_iov, attr->iov_count, attr->access,
			   attr->offset, attr->requested_key, flags, mr,
			   attr->context);
}

struct fi_ops_mr ibf_mr_ops = {
	.size = sizeof(struct fi_ops_mr),
	.reg = ibf_mr_reg,
	.regv = ibf_mr_regv,
	.regattr = ibf_mr_regattr,
};
