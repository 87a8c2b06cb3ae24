/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Passive endpoints: an rdma_cm id that listens.  Each connection request
 * becomes an FI_CONNREQ entry whose fi_info carries the request's id in a
 * struct ibf_connreq (info->handle), for fi_endpoint or fi_reject.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_msg.h"
#include "ibf_noops.h"
#include "ibf_rdmacm.h"

/* The fi_info an FI_CONNREQ hands out: the listener's, for this request. */
static struct fi_info *ibf_connreq_info(struct ibf_pep *pep,
					struct rdma_cm_id *id)
{
	struct sockaddr *src = rdma_get_local_addr(id);
	struct sockaddr *dst = rdma_get_peer_addr(id);
	struct ibf_connreq *req;
	struct fi_info *info;

	info = fi_dupinfo(pep->info);
	req = calloc(1, sizeof(*req));
	if (!info || !req)
		goto err;
	free(info->src_addr);
	free(info->dest_addr);
	info->src_addr = malloc(ibf_addr_len(src));
	info->dest_addr = malloc(ibf_addr_len(dst));
	if (!info->src_addr || !info->dest_addr)
		goto err;
	memcpy(info->src_addr, src, ibf_addr_len(src));
	info->src_addrlen = ibf_addr_len(src);
	memcpy(info->dest_addr, dst, ibf_addr_len(dst));
	info->dest_addrlen = ibf_addr_len(dst);
	/* A listener on any address may hear requests on any device. */
	free(info->domain_attr->name);
	info->domain_attr->name = strdup(ibv_get_device_name(id->verbs->device));
	if (!info->domain_attr->name)
		goto err;
	req->fid.fclass = FI_CLASS_CONNREQ;
	req->id = id;
	info->handle = &req->fid;
	return info;
err:
	free(req);
	fi_freeinfo(info);
	return NULL;
}

static void ibf_pep_on_cm_event(struct ibf_cm_owner *owner, struct ibf_eq *eq,
				struct rdma_cm_event *ev)
{
	struct ibf_pep *pep = container_of(owner, struct ibf_pep, owner);
	const struct rdma_conn_param *cp = &ev->param.conn;
	struct fi_eq_cm_entry *entry;
	const void *data;
	size_t len, size;

	/* Events of a request nobody took yet: nothing to report. */
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return;
	/* Until fi_endpoint takes it, the request's id belongs to no one. */
	ev->id->context = NULL;
	ibf_cm_unpack(cp->private_data, cp->private_data ? cp->private_data_len : 0,
		      &data, &len);
	size = sizeof(*entry) + len;
	entry = calloc(1, size);
	if (entry)
		entry->info = ibf_connreq_info(pep, ev->id);
	if (!entry || !entry->info) {
		IBF_WARN(FI_LOG_EP_CTRL, "no memory for a connection request: "
			 "rejecting it\n");
		rdma_reject(ev->id, NULL, 0);
		rdma_destroy_id(ev->id);
		free(entry);
		return;
	}
	entry->fid = &pep->pep_fid.fid;
	if (len)
		memcpy(entry->data, data, len);
	if (ibf_eq_push(eq, FI_CONNREQ, entry, size, IBF_EQ_CONNREQ, NULL, 0)) {
		rdma_reject(ev->id, NULL, 0);
		free(entry->info->handle);
		fi_freeinfo(entry->info);
		rdma_destroy_id(ev->id);
	}
	free(entry);
}

/* A passive endpoint whose address an active one took. */
static int ibf_pep_gone(const struct ibf_pep *pep)
{
	if (pep->id)
		return 0;
	IBF_WARN(FI_LOG_EP_CTRL, "this passive endpoint's address was given "
		 "to an active endpoint: only fi_close remains\n");
	return 1;
}

static int ibf_pep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct ibf_pep *pep = container_of(fid, struct ibf_pep, pep_fid.fid);
	int ret;

	if (!bfid || bfid->fclass != FI_CLASS_EQ) {
		IBF_WARN(FI_LOG_EP_CTRL, "a passive endpoint binds an EQ only\n");
		return -FI_EINVAL;
	}
	if (pep->eq)
		return -FI_EINVAL;
	if (ibf_pep_gone(pep))
		return -FI_EOPBADSTATE;
	pep->eq = container_of(bfid, struct ibf_eq, eq_fid.fid);
	ret = ibf_migrate_id(pep->id, pep->eq);
	if (ret) {
		pep->eq = NULL;
		return ret;
	}
	ibf_ref_get(&pep->eq->ref);
	return 0;
}

/*
 * fi_endpoint(3): an fi_info whose handle is a passive endpoint gives the
 * new active endpoint that endpoint's address.  Its rdma_cm id, bound to
 * the address, moves over; the passive endpoint is left with nothing but
 * fi_close.
 */
struct rdma_cm_id *ibf_pep_take_id(struct fid *handle)
{
	struct ibf_pep *pep = container_of(handle, struct ibf_pep, pep_fid.fid);
	struct rdma_cm_id *id = pep->id;

	if (!id || pep->listening) {
		IBF_WARN(FI_LOG_EP_CTRL, "info->handle is a passive endpoint "
			 "that is listening or already given away: an active "
			 "endpoint cannot take its address\n");
		return NULL;
	}
	/* The active endpoint resolves synchronously until it has an EQ. */
	if (pep->eq && rdma_migrate_id(id, NULL)) {
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_migrate_id: %s\n", strerror(errno));
		return NULL;
	}
	pep->id = NULL;
	return id;
}

static int ibf_pep_listen(struct fid_pep *pep_fid)
{
	struct ibf_pep *pep = container_of(pep_fid, struct ibf_pep, pep_fid);
	char buf[80];

	if (ibf_pep_gone(pep))
		return -FI_EOPBADSTATE;
	if (!pep->eq) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_listen: bind an EQ first\n");
		return -FI_ENOEQ;
	}
	if (rdma_listen(pep->id, 0)) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_listen on %s: %s\n",
			 ibf_addr_str(rdma_get_local_addr(pep->id), buf, sizeof(buf)),
			 strerror(errno));
		return ibf_errno_to_fi(errno);
	}
	pep->listening = 1;
	return 0;
}

static int ibf_pep_reject(struct fid_pep *pep_fid, fid_t handle,
			  const void *param, size_t paramlen)
{
	uint8_t wire[IBF_CM_WIRE_SIZE];
	struct ibf_connreq *req;
	int ret = 0;

	if (!handle || handle->fclass != FI_CLASS_CONNREQ) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_reject: handle is not an FI_CONNREQ's\n");
		return -FI_EINVAL;
	}
	if (paramlen > IBF_CM_DATA_SIZE) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_reject: %zu bytes of private data, at "
			 "most %d\n", paramlen, IBF_CM_DATA_SIZE);
		return -FI_EINVAL;
	}
	req = container_of(handle, struct ibf_connreq, fid);
	if (rdma_reject(req->id, wire, ibf_cm_pack(wire, param, paramlen)))
		ret = ibf_errno_to_fi(errno);
	rdma_destroy_id(req->id);
	free(req);
	return ret;
}

static int ibf_pep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct ibf_pep *pep = container_of(fid, struct ibf_pep, pep_fid.fid);

	if (ibf_pep_gone(pep))
		return -FI_EOPBADSTATE;
	return ibf_getname(pep->id, addr, addrlen);
}

static int ibf_pep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct ibf_pep *pep = container_of(fid, struct ibf_pep, pep_fid.fid);

	if (!addr || !ibf_addr_len(addr) || addrlen < ibf_addr_len(addr))
		return -FI_EINVAL;
	if (ibf_pep_gone(pep))
		return -FI_EOPBADSTATE;
	if (rdma_bind_addr(pep->id, addr))
		return ibf_errno_to_fi(errno);
	return 0;
}

static int ibf_pep_close(struct fid *fid)
{
	struct ibf_pep *pep = container_of(fid, struct ibf_pep, pep_fid.fid);

	if (pep->id)
		rdma_destroy_id(pep->id);
	if (pep->eq)
		ibf_ref_put(&pep->eq->ref);
	ibf_ref_put(&pep->fabric->ref);
	fi_freeinfo(pep->info);
	free(pep);
	return 0;
}

static int ibf_pep_getopt(fid_t fid, int level, int optname, void *optval,
			  size_t *optlen)
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_CM_DATA_SIZE)
		return -FI_ENOPROTOOPT;
	return ibf_getopt_size(optval, optlen, IBF_CM_DATA_SIZE);
}

static int ibf_pep_setopt(fid_t fid, int level, int optname, const void *optval,
			  size_t optlen)
{
	return -FI_ENOPROTOOPT;
}

static struct fi_ops ibf_pep_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_pep_close,
	.bind = ibf_pep_bind,
	.control = ibf_no_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static struct fi_ops_ep ibf_pep_ops = {
	.size = sizeof(struct fi_ops_ep),
	.cancel = ibf_no_cancel,
	.getopt = ibf_pep_getopt,
	.setopt = ibf_pep_setopt,
	.tx_ctx = (void *)ibf_no_ctx,
	.rx_ctx = (void *)ibf_no_ctx,
	.rx_size_left = ibf_no_size_left,
	.tx_size_left = ibf_no_size_left,
};

static struct fi_ops_cm ibf_pep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = ibf_pep_setname,
	.getname = ibf_pep_getname,
	.getpeer = ibf_no_getpeer,
	.connect = ibf_no_connect,
	.listen = ibf_pep_listen,
	.accept = ibf_no_accept,
	.reject = ibf_pep_reject,
	.shutdown = ibf_no_shutdown,
	.join = ibf_no_join,
};

int ibf_pep_open(struct fid_fabric *fabric, struct fi_info *info,
		 struct fid_pep **pep_fid, void *context)
{
	struct ibf_fabric *fab = container_of(fabric, struct ibf_fabric, fabric_fid);
	struct ibf_pep *pep;
	char buf[80];
	int ret;

	if (!info || !pep_fid || (info->ep_attr && info->ep_attr->type != FI_EP_MSG &&
				  info->ep_attr->type != FI_EP_UNSPEC)) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_passive_ep needs an FI_EP_MSG info\n");
		return -FI_EINVAL;
	}
	pep = calloc(1, sizeof(*pep));
	if (!pep)
		return -FI_ENOMEM;
	pep->fabric = fab;
	pep->owner.on_event = ibf_pep_on_cm_event;
	pep->info = fi_dupinfo(info);
	if (!pep->info) {
		ret = -FI_ENOMEM;
		goto err;
	}
	if (rdma_create_id(NULL, &pep->id, &pep->owner, RDMA_PS_TCP)) {
		ret = ibf_errno_to_fi(errno);
		goto err;
	}
	ibf_cm_reuse_addr(pep->id);
	if (info->src_addr && rdma_bind_addr(pep->id, info->src_addr)) {
		ret = ibf_errno_to_fi(errno);
		IBF_WARN(FI_LOG_EP_CTRL, "fi_passive_ep: cannot bind %s: %s\n",
			 ibf_addr_str(info->src_addr, buf, sizeof(buf)),
			 fi_strerror(-ret));
		goto err;
	}
	pep->pep_fid.fid.fclass = FI_CLASS_PEP;
	pep->pep_fid.fid.context = context;
	pep->pep_fid.fid.ops = &ibf_pep_fi_ops;
	pep->pep_fid.ops = &ibf_pep_ops;
	pep->pep_fid.cm = &ibf_pep_cm_ops;
	ibf_ref_get(&fab->ref);
	*pep_fid = &pep->pep_fid;
	return 0;
err:
	if (pep->id)
		rdma_destroy_id(pep->id);
	fi_freeinfo(pep->info);
	free(pep);
	return ret;
}
