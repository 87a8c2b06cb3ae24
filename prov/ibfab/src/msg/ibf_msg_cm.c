/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Connection management of FI_EP_MSG endpoints over librdmacm: fi_connect,
 * fi_accept, fi_shutdown, names, and the rdma_cm events that become
 * FI_CONNECTED, FI_SHUTDOWN and error entries on the endpoint's EQ.
 *
 * Private data travels as rdma_cm carries it; what arrives is padded to
 * the protocol's size (fi_eq(3) allows that).  CM events are handled in
 * whichever thread reads the EQ; the endpoint's state is atomic.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ibf_msg.h"
#include "ibf_noops.h"
#include "ibf_rdmacm.h"

uint8_t ibf_cm_pack(uint8_t *wire, const void *data, size_t len)
{
	wire[0] = (uint8_t)len;
	if (len)
		memcpy(wire + 1, data, len);
	return (uint8_t)(len + 1);
}

void ibf_cm_unpack(const void *wire, size_t wire_len, const void **data,
		   size_t *len)
{
	const uint8_t *w = wire;

	*data = NULL;
	*len = 0;
	if (!w || !wire_len)
		return;
	*data = w + 1;
	*len = IBF_MIN((size_t)w[0], wire_len - 1);
}

/* An address for fi_getname/fi_getpeer; none: -FI_EADDRNOTAVAIL. */
static int ibf_copy_name(const struct sockaddr *sa, void *addr, size_t *addrlen)
{
	size_t len = ibf_addr_len(sa);

	if (!addrlen)
		return -FI_EINVAL;
	if (!len)
		return -FI_EADDRNOTAVAIL;
	if (*addrlen < len || !addr) {
		*addrlen = len;
		return -FI_ETOOSMALL;
	}
	memcpy(addr, sa, len);
	*addrlen = len;
	return 0;
}

int ibf_getname(struct rdma_cm_id *id, void *addr, size_t *addrlen)
{
	int ret = ibf_copy_name(rdma_get_local_addr(id), addr, addrlen);

	if (ret == -FI_EADDRNOTAVAIL)
		IBF_WARN(FI_LOG_EP_CTRL, "fi_getname: no address bound yet\n");
	return ret;
}

/* Move an id's events to the EQ's channel (a no-op if they go there). */
int ibf_migrate_id(struct rdma_cm_id *id, struct ibf_eq *eq)
{
	if (id->channel == eq->channel)
		return 0;
	if (rdma_migrate_id(id, eq->channel)) {
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_migrate_id: %s\n", strerror(errno));
		return ibf_errno_to_fi(errno);
	}
	return 0;
}

static void ibf_conn_param(struct ibf_ep *ep, struct rdma_conn_param *cp,
			   uint8_t *wire, const void *param, size_t paramlen)
{
	ibf_cm_param_init(ep->id, &ep->base.domain->dev_attr, cp, wire,
			  ibf_cm_pack(wire, param, paramlen));
}

static int ibf_ep_check_cm(struct ibf_ep *ep, size_t paramlen, const char *call)
{
	if (paramlen > IBF_CM_DATA_SIZE) {
		IBF_WARN(FI_LOG_EP_CTRL, "%s: %zu bytes of private data, at most "
			 "%d (FI_OPT_CM_DATA_SIZE)\n", call, paramlen, IBF_CM_DATA_SIZE);
		return -FI_EINVAL;
	}
	if (!ep->base.enabled || !ep->eq) {
		IBF_WARN(FI_LOG_EP_CTRL, "%s: bind an EQ and CQs and fi_enable "
			 "the endpoint first\n", call);
		return -FI_EOPBADSTATE;
	}
	if (__atomic_load_n(&ep->state, __ATOMIC_ACQUIRE) != IBF_EP_IDLE) {
		IBF_WARN(FI_LOG_EP_CTRL, "%s: endpoint already connecting or "
			 "connected\n", call);
		return -FI_EOPBADSTATE;
	}
	return 0;
}

/* Resolve a destination given only now, then make the deferred QP. */
static int ibf_ep_resolve(struct ibf_ep *ep, const void *addr)
{
	char buf[80];

	if (ep->id->route.addr.dst_addr.sa_family && ep->id->qp)
		return 0;
	if (!addr) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_connect: no destination (none in "
			 "the fi_info either)\n");
		return -FI_EINVAL;
	}
	if (rdma_resolve_addr(ep->id, NULL, (struct sockaddr *)addr,
			      ibf_params.cm_timeout_ms) ||
	    rdma_resolve_route(ep->id, ibf_params.cm_timeout_ms)) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_connect: cannot reach %s: %s\n",
			 ibf_addr_str(addr, buf, sizeof(buf)), strerror(errno));
		return -FI_EHOSTUNREACH;
	}
	if (ep->id->verbs != ep->base.domain->verbs) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_connect: %s is reached through %s, "
			 "not this domain's device\n", ibf_addr_str(addr, buf, sizeof(buf)),
			 ibv_get_device_name(ep->id->verbs->device));
		return -FI_EINVAL;
	}
	return ep->id->qp ? 0 : ibf_ep_create_qp(ep);
}

static int ibf_ep_connect(struct fid_ep *ep_fid, const void *addr,
			  const void *param, size_t paramlen)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	uint8_t wire[IBF_CM_WIRE_SIZE];
	struct rdma_conn_param cp;
	int ret;

	ret = ibf_ep_check_cm(ep, paramlen, "fi_connect");
	if (!ret)
		ret = ibf_ep_resolve(ep, addr);
	if (!ret)
		ret = ibf_migrate_id(ep->id, ep->eq);
	if (ret)
		return ret;
	ibf_conn_param(ep, &cp, wire, param, paramlen);
	ep->active = 1;
	ibf_ep_set_state(ep, IBF_EP_CONNECTING);
	if (rdma_connect(ep->id, &cp)) {
		ret = ibf_errno_to_fi(errno);
		ibf_ep_set_state(ep, IBF_EP_IDLE);
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_connect: %s\n", fi_strerror(-ret));
	}
	return ret;
}

/*
 * Move a disconnected endpoint's QP to the error state (again).  The device
 * must flush a receive posted to a QP in error (IB spec C10-42), but
 * Soft-RoCE keeps the receive queue in user memory and looks at it only when
 * something moves the QP: without this, a receive posted after the
 * connection died would wait forever.  Also for a disconnect that came
 * before the connection was established, which nobody answered.
 */
void ibf_ep_qp_to_error(struct ibf_ep *ep)
{
	if (ep->id && ep->id->qp && ibf_qp_to_error(ep->id->qp))
		IBF_WARN(FI_LOG_EP_CTRL, "cannot move a disconnected QP to the "
			 "error state: %s; its receives stay posted until "
			 "fi_close\n", strerror(errno));
}

static int ibf_ep_accept(struct fid_ep *ep_fid, const void *param,
			 size_t paramlen)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	uint8_t wire[IBF_CM_WIRE_SIZE];
	struct rdma_conn_param cp;
	int ret;

	ret = ibf_ep_check_cm(ep, paramlen, "fi_accept");
	if (ret)
		return ret;
	if (!ep->id->qp) {
		IBF_WARN(FI_LOG_EP_CTRL, "fi_accept: the endpoint does not come "
			 "from a connection request\n");
		return -FI_EOPBADSTATE;
	}
	ret = ibf_migrate_id(ep->id, ep->eq);
	if (ret)
		return ret;
	ibf_conn_param(ep, &cp, wire, param, paramlen);
	ibf_ep_set_state(ep, IBF_EP_CONNECTING);
	if (rdma_accept(ep->id, &cp)) {
		ret = ibf_errno_to_fi(errno);
		ibf_ep_set_state(ep, IBF_EP_IDLE);
		IBF_WARN(FI_LOG_EP_CTRL, "rdma_accept: %s\n", fi_strerror(-ret));
		return ret;
	}
	/* librdmacm has taken the QP to RTS by now. */
	ibf_qp_in_rts(ep->id->qp);
	return 0;
}

static const char *const ibf_ep_state_names[IBF_EP_STATES] = {
	[IBF_EP_IDLE] = "idle",
	[IBF_EP_CONNECTING] = "connecting",
	[IBF_EP_CONNECTED] = "connected",
	[IBF_EP_SHUTDOWN] = "shutdown",
	[IBF_EP_ERROR] = "error",
};

const char *ibf_ep_state_name(enum ibf_ep_state state)
{
	return ibf_state_name(ibf_ep_state_names, IBF_EP_STATES, (int)state);
}

/* A change of ep's state, at debug level (both ways of making one). */
static void ibf_ep_state_said(const struct ibf_ep *ep, enum ibf_ep_state from,
			      enum ibf_ep_state to)
{
	IBF_DBG(FI_LOG_EP_CTRL, "endpoint %p: %s -> %s\n", (const void *)ep,
		ibf_ep_state_name(from), ibf_ep_state_name(to));
}

enum ibf_ep_state ibf_ep_set_state(struct ibf_ep *ep, enum ibf_ep_state to)
{
	enum ibf_ep_state from;

	assert((unsigned)to < IBF_EP_STATES);
	/* Connected means a QP to carry it. */
	assert(to != IBF_EP_CONNECTED || (ep->id && ep->id->qp));
	from = __atomic_exchange_n(&ep->state, to, __ATOMIC_ACQ_REL);
	ibf_ep_state_said(ep, from, to);
	return from;
}

static int ibf_ep_shutdown(struct fid_ep *ep_fid, uint64_t flags)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	enum ibf_ep_state state = IBF_EP_CONNECTED;

	/* Only the first shutdown of a connection disconnects it. */
	if (!__atomic_compare_exchange_n(&ep->state, &state, IBF_EP_SHUTDOWN, 0,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return state == IBF_EP_SHUTDOWN ? 0 : -FI_ENOTCONN;
	ibf_ep_state_said(ep, IBF_EP_CONNECTED, IBF_EP_SHUTDOWN);
	if (rdma_disconnect(ep->id))
		return ibf_errno_to_fi(errno);
	return 0;
}

static int ibf_ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
	struct ibf_ep *ep = container_of(fid, struct ibf_ep, base.ep_fid.fid);

	return ibf_getname(ep->id, addr, addrlen);
}

static int ibf_ep_getpeer(struct fid_ep *ep_fid, void *addr, size_t *addrlen)
{
	struct ibf_ep *ep = to_ibf_ep(ep_fid);
	int ret = ibf_copy_name(rdma_get_peer_addr(ep->id), addr, addrlen);

	return ret == -FI_EADDRNOTAVAIL ? -FI_ENOTCONN : ret;
}

static int ibf_ep_setname(fid_t fid, void *addr, size_t addrlen)
{
	struct ibf_ep *ep = container_of(fid, struct ibf_ep, base.ep_fid.fid);

	if (!addr || addrlen < ibf_addr_len(addr) || !ibf_addr_len(addr))
		return -FI_EINVAL;
	if (rdma_bind_addr(ep->id, addr))
		return ibf_errno_to_fi(errno);
	return 0;
}

struct fi_ops_cm ibf_ep_cm_ops = {
	.size = sizeof(struct fi_ops_cm),
	.setname = ibf_ep_setname,
	.getname = ibf_ep_getname,
	.getpeer = ibf_ep_getpeer,
	.connect = ibf_ep_connect,
	.listen = ibf_no_listen,
	.accept = ibf_ep_accept,
	.reject = ibf_no_reject,
	.shutdown = ibf_ep_shutdown,
	.join = ibf_no_join,
};

/* An FI_CONNECTED or FI_SHUTDOWN entry, with any private data after it. */
static void ibf_ep_push_cm(struct ibf_ep *ep, struct ibf_eq *eq, uint32_t event,
			   const void *data, size_t len)
{
	struct fi_eq_cm_entry *entry;
	size_t size = sizeof(*entry) + len;

	entry = calloc(1, size);
	if (!entry) {
		IBF_WARN(FI_LOG_EP_CTRL, "no memory for a CM event: lost\n");
		return;
	}
	entry->fid = &ep->base.ep_fid.fid;
	if (len)
		memcpy(entry->data, data, len);
	ibf_eq_push(eq, event, entry, size, 0, NULL, 0);
	free(entry);
}

static void ibf_ep_push_err(struct ibf_ep *ep, struct ibf_eq *eq, int err,
			    int prov_errno, const void *data, size_t len)
{
	struct fi_eq_err_entry e = { 0 };

	e.fid = &ep->base.ep_fid.fid;
	e.context = ep->base.ep_fid.fid.context;
	e.err = err;
	e.prov_errno = prov_errno;
	ibf_eq_push(eq, 0, &e, sizeof(e), IBF_EQ_ERR, data, len);
}

void ibf_ep_on_cm_event(struct ibf_cm_owner *owner, struct ibf_eq *eq,
			struct rdma_cm_event *ev)
{
	struct ibf_ep *ep = container_of(owner, struct ibf_ep, owner);
	const struct rdma_conn_param *cp = &ev->param.conn;
	const void *data;
	size_t len;

	ibf_cm_unpack(cp->private_data, cp->private_data ? cp->private_data_len : 0,
		      &data, &len);
	switch (ev->event) {
	case RDMA_CM_EVENT_ESTABLISHED:
		if (ep->active)
			ibf_qp_in_rts(ep->id->qp);
		ibf_ep_set_state(ep, IBF_EP_CONNECTED);
		/* Only the connecting side gets the acceptor's data. */
		ibf_ep_push_cm(ep, eq, FI_CONNECTED, data, ep->active ? len : 0);
		break;
	case RDMA_CM_EVENT_REJECTED:
		ibf_ep_set_state(ep, IBF_EP_ERROR);
		ibf_ep_push_err(ep, eq, FI_ECONNREFUSED, ev->status, data, len);
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		ibf_ep_set_state(ep, IBF_EP_ERROR);
		ibf_ep_push_err(ep, eq, ev->event == RDMA_CM_EVENT_UNREACHABLE ?
				FI_ETIMEDOUT : FI_EHOSTUNREACH, ev->status, NULL, 0);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		/* The peer's disconnect: answer it, so our QP flushes too.
		 * One that came before ESTABLISHED (its RTU lost or late)
		 * has nobody to answer, but our receives must flush all the
		 * same. */
		switch (ibf_ep_set_state(ep, IBF_EP_SHUTDOWN)) {
		case IBF_EP_CONNECTED:
			rdma_disconnect(ep->id);
			break;
		case IBF_EP_CONNECTING:
			ibf_ep_qp_to_error(ep);
			break;
		default:
			break;
		}
		ibf_ep_push_cm(ep, eq, FI_SHUTDOWN, NULL, 0);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		ibf_ep_set_state(ep, IBF_EP_ERROR);
		ibf_ep_push_err(ep, eq, FI_ENODEV, 0, NULL, 0);
		break;
	default:
		break;
	}
}
