/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Event queue: connection events from an rdma_cm event channel, turned
 * into fi_eq entries by the endpoint that owns each id, plus anything
 * fi_eq_write puts in.  Entries wait in a FIFO; an eventfd is readable
 * while the FIFO is not empty.  That eventfd and the channel's fd sit
 * behind one epoll fd, the EQ's wait object, so poll/epoll on it wakes for
 * both.  eq->lock guards the FIFO and the reading of the channel.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibf_abi.h"
#include "ibf.h"

struct ibf_eq_entry {
	struct ibf_eq_entry *next;
	uint32_t event;
	unsigned kind;		/* IBF_EQ_ERR, IBF_EQ_CONNREQ, or 0 */
	size_t len;		/* of data; an error entry's err_data follows it */
	size_t min_len;		/* what a reader's buffer must hold */
	size_t err_data_size;
	uint8_t data[];
};

int ibf_eq_push(struct ibf_eq *eq, uint32_t event, const void *buf,
		size_t len, unsigned kind, const void *err_data,
		size_t err_data_size)
{
	struct ibf_eq_entry *e;

	e = malloc(sizeof(*e) + len + err_data_size);
	if (!e)
		return -FI_ENOMEM;
	e->next = NULL;
	e->event = event;
	e->kind = kind;
	e->len = len;
	/* CM events: the entry itself; their private data fits if it can. */
	e->min_len = (event == FI_CONNREQ || event == FI_CONNECTED ||
		      event == FI_SHUTDOWN) && len > sizeof(struct fi_eq_cm_entry) ?
		     sizeof(struct fi_eq_cm_entry) : len;
	e->err_data_size = err_data_size;
	memcpy(e->data, buf, len);
	if (err_data_size)
		memcpy(e->data + len, err_data, err_data_size);

	pthread_mutex_lock(&eq->lock);
	if (eq->tail)
		eq->tail->next = e;
	else
		eq->head = e;
	eq->tail = e;
	if (eq->count++ == 0 && ibf_waitfd_raise(&eq->wait))
		IBF_WARN(FI_LOG_EQ, "eventfd write failed\n");
	pthread_mutex_unlock(&eq->lock);
	return 0;
}

/* Called with eq->lock held. */
static void ibf_eq_pop(struct ibf_eq *eq)
{
	struct ibf_eq_entry *e = eq->head;

	eq->head = e->next;
	if (!eq->head)
		eq->tail = NULL;
	free(e);
	if (--eq->count == 0)
		ibf_waitfd_lower(&eq->wait);
}

/*
 * Hand each pending CM event to its id's owner, then ack it (so owners copy
 * what they keep, such as private data).  Owners push entries, which
 * takes eq->lock, so the channel is read here without it; the channel fd is
 * non-blocking and rdma_get_cm_event is safe from several threads.
 */
static void ibf_eq_progress(struct ibf_eq *eq)
{
	struct rdma_cm_event *ev;
	struct ibf_cm_owner *owner;

	while (!rdma_get_cm_event(eq->channel, &ev)) {
		owner = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ?
			ev->listen_id->context : ev->id->context;
		if (owner && owner->on_event)
			owner->on_event(owner, eq, ev);
		rdma_ack_cm_event(ev);
	}
}

static ssize_t ibf_eq_read(struct fid_eq *eq_fid, uint32_t *event, void *buf,
			   size_t len, uint64_t flags)
{
	struct ibf_eq *eq = container_of(eq_fid, struct ibf_eq, eq_fid);
	struct ibf_eq_entry *e;
	ssize_t ret;

	ibf_eq_progress(eq);
	pthread_mutex_lock(&eq->lock);
	e = eq->head;
	if (!e) {
		ret = -FI_EAGAIN;
	} else if ((e->kind & IBF_EQ_ERR)) {
		ret = -FI_EAVAIL;
	} else if (len < e->min_len || (e->min_len && !buf)) {
		IBF_WARN(FI_LOG_EQ, "fi_eq_read: buffer of %zu bytes, the event "
			 "needs %zu\n", len, e->min_len);
		ret = -FI_ETOOSMALL;
	} else {
		if (event)
			*event = e->event;
		ret = IBF_MIN(len, e->len);
		memcpy(buf, e->data, ret);
		if (!(flags & FI_PEEK))
			ibf_eq_pop(eq);
	}
	pthread_mutex_unlock(&eq->lock);
	return ret;
}

static ssize_t ibf_eq_readerr(struct fid_eq *eq_fid, struct fi_eq_err_entry *err,
			      uint64_t flags)
{
	struct ibf_eq *eq = container_of(eq_fid, struct ibf_eq, eq_fid);
	struct ibf_eq_entry *e;
	void *user_data;
	size_t user_size;
	uint32_t api;
	ssize_t ret;

	if (!err)
		return -FI_EINVAL;
	ibf_eq_progress(eq);
	pthread_mutex_lock(&eq->lock);
	e = eq->head;
	if (!e || !(e->kind & IBF_EQ_ERR)) {
		pthread_mutex_unlock(&eq->lock);
		return -FI_EAGAIN;
	}
	/* The caller's struct is its API version's size: before 1.5 it has
	 * no err_data_size, and err_data is ours to set. */
	api = eq->fabric->api_version;
	user_data = ibf_api_ge(api, 1, 5) ? err->err_data : NULL;
	user_size = ibf_api_ge(api, 1, 5) ? err->err_data_size : 0;
	memcpy(err, e->data, ibf_eq_err_size(api));
	if (user_size && user_data) {
		/* The caller's buffer (API >= 1.5). */
		err->err_data = user_data;
		err->err_data_size = IBF_MIN(user_size, e->err_data_size);
		memcpy(user_data, e->data + e->len, err->err_data_size);
	} else {
		/* Ours, valid until the next read. */
		free(eq->err_data);
		eq->err_data = e->err_data_size ? malloc(e->err_data_size) : NULL;
		if (eq->err_data)
			memcpy(eq->err_data, e->data + e->len, e->err_data_size);
		err->err_data = eq->err_data;
		if (ibf_api_ge(api, 1, 5))
			err->err_data_size = eq->err_data ? e->err_data_size : 0;
	}
	ret = (ssize_t)ibf_eq_err_size(api);
	if (!(flags & FI_PEEK))
		ibf_eq_pop(eq);
	pthread_mutex_unlock(&eq->lock);
	return ret;
}

static ssize_t ibf_eq_write(struct fid_eq *eq_fid, uint32_t event,
			    const void *buf, size_t len, uint64_t flags)
{
	struct ibf_eq *eq = container_of(eq_fid, struct ibf_eq, eq_fid);
	int ret;

	if (len && !buf)
		return -FI_EINVAL;
	ret = ibf_eq_push(eq, event, buf, len, 0, NULL, 0);
	return ret ? ret : (ssize_t)len;
}

int ibf_eq_trywait(struct ibf_eq *eq)
{
	int empty;

	ibf_eq_progress(eq);
	pthread_mutex_lock(&eq->lock);
	empty = !eq->head;
	pthread_mutex_unlock(&eq->lock);
	return empty ? 0 : -FI_EAGAIN;
}

static ssize_t ibf_eq_sread(struct fid_eq *eq_fid, uint32_t *event, void *buf,
			    size_t len, int timeout, uint64_t flags)
{
	struct ibf_eq *eq = container_of(eq_fid, struct ibf_eq, eq_fid);
	struct timespec deadline;
	ssize_t ret;
	int n;

	if (eq->wait_obj == FI_WAIT_NONE) {
		IBF_WARN(FI_LOG_EQ, "fi_eq_sread on an EQ opened with FI_WAIT_NONE\n");
		return -FI_EINVAL;
	}
	ibf_deadline(&deadline, timeout);
	for (;;) {
		ret = ibf_eq_read(eq_fid, event, buf, len, flags);
		if (ret != -FI_EAGAIN)
			return ret;
		n = ibf_waitfd_wait(&eq->wait, timeout < 0 ? -1 : ibf_ms_left(&deadline));
		if (n < 0)
			return n;
		if (n == 0)
			return ibf_eq_read(eq_fid, event, buf, len, flags);
	}
}

static const char *ibf_eq_strerror(struct fid_eq *eq, int prov_errno,
				   const void *err_data, char *buf, size_t len)
{
	static __thread char own[64];

	if (!buf || !len) {
		buf = own;
		len = sizeof(own);
	}
	/* prov_errno is the rdma_cm event's status: for a rejection, the IB
	 * CM reason (28: rejected by the peer application). */
	snprintf(buf, len, "rdma_cm status %d%s", prov_errno,
		 prov_errno == 28 ? " (rejected by the peer)" : "");
	return buf;
}

static int ibf_eq_control(struct fid *fid, int command, void *arg)
{
	struct ibf_eq *eq = container_of(fid, struct ibf_eq, eq_fid.fid);

	return ibf_waitfd_control(&eq->wait, eq->wait_obj != FI_WAIT_NONE,
				  command, arg);
}

/* A connection request nobody read: reject it and free what it held. */
static void ibf_eq_drop_connreq(struct ibf_eq_entry *e)
{
	struct fi_eq_cm_entry *cm = (struct fi_eq_cm_entry *)e->data;
	struct ibf_connreq *req;

	if (!cm->info)
		return;
	req = container_of(cm->info->handle, struct ibf_connreq, fid);
	rdma_reject(req->id, NULL, 0);
	rdma_destroy_id(req->id);
	free(req);
	fi_freeinfo(cm->info);
}

static void ibf_eq_destroy(struct ibf_eq *eq)
{
	pthread_mutex_lock(&eq->lock);
	while (eq->head) {
		if (eq->head->kind & IBF_EQ_CONNREQ)
			ibf_eq_drop_connreq(eq->head);
		ibf_eq_pop(eq);
	}
	pthread_mutex_unlock(&eq->lock);
	if (eq->channel)
		rdma_destroy_event_channel(eq->channel);
	ibf_waitfd_close(&eq->wait);
	free(eq->err_data);
	pthread_mutex_destroy(&eq->lock);
	free(eq);
}

static int ibf_eq_close(struct fid *fid)
{
	struct ibf_eq *eq = container_of(fid, struct ibf_eq, eq_fid.fid);
	struct ibf_fabric *fab = eq->fabric;

	if (ibf_ref_read(&eq->ref)) {
		IBF_WARN(FI_LOG_EQ, "EQ still bound to %d endpoint(s): close "
			 "them first\n", ibf_ref_read(&eq->ref));
		return -FI_EBUSY;
	}
	ibf_eq_destroy(eq);
	ibf_ref_put(&fab->ref);
	return 0;
}

static struct fi_ops ibf_eq_fi_ops = {
	.size = sizeof(struct fi_ops),
	.close = ibf_eq_close,
	.bind = ibf_no_bind,
	.control = ibf_eq_control,
	.ops_open = ibf_no_ops_open,
	.tostr = ibf_no_tostr,
	.ops_set = ibf_no_ops_set,
};

static struct fi_ops_eq ibf_eq_ops = {
	.size = sizeof(struct fi_ops_eq),
	.read = ibf_eq_read,
	.readerr = ibf_eq_readerr,
	.write = ibf_eq_write,
	.sread = ibf_eq_sread,
	.strerror = ibf_eq_strerror,
};

static int ibf_eq_check_attr(const struct fi_eq_attr *attr)
{
	int ret = ibf_check_wait_obj(attr->wait_obj);

	if (ret) {
		char w[IBF_ENUM_STR];

		IBF_WARN(FI_LOG_EQ, "EQ wait object %s: use FI_WAIT_NONE, "
			 "FI_WAIT_UNSPEC or FI_WAIT_FD\n",
			 ibf_enum_str(w, sizeof(w), IBF_TYPE_WAIT_OBJ, attr->wait_obj));
		return ret;
	}
	if (attr->flags & ~(FI_WRITE | FI_AFFINITY)) {
		IBF_WARN(FI_LOG_EQ, "EQ flags %#llx not supported\n",
			 (unsigned long long)attr->flags);
		return -FI_EBADFLAGS;
	}
	return 0;
}

static int ibf_eq_make_wait(struct ibf_eq *eq)
{
	eq->channel = rdma_create_event_channel();
	if (!eq->channel)
		return ibf_errno_to_fi(errno);
	return ibf_waitfd_open(&eq->wait, eq->channel->fd);
}

int ibf_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr,
		struct fid_eq **eq_fid, void *context)
{
	struct ibf_fabric *fab = container_of(fabric, struct ibf_fabric, fabric_fid);
	struct ibf_eq *eq;
	int ret;

	if (!attr || !eq_fid) {
		IBF_WARN(FI_LOG_EQ, "fi_eq_open needs attributes\n");
		return -FI_EINVAL;
	}
	ret = ibf_eq_check_attr(attr);
	if (ret)
		return ret;
	eq = calloc(1, sizeof(*eq));
	if (!eq)
		return -FI_ENOMEM;
	eq->wait.epoll_fd = eq->wait.event_fd = -1;
	pthread_mutex_init(&eq->lock, NULL);
	eq->wait_obj = attr->wait_obj == FI_WAIT_NONE ? FI_WAIT_NONE : FI_WAIT_FD;
	ret = ibf_eq_make_wait(eq);
	if (ret) {
		IBF_WARN(FI_LOG_EQ, "EQ event channel: %s\n", fi_strerror(-ret));
		ibf_eq_destroy(eq);
		return ret;
	}
	eq->fabric = fab;
	eq->eq_fid.fid.fclass = FI_CLASS_EQ;
	eq->eq_fid.fid.context = context;
	eq->eq_fid.fid.ops = &ibf_eq_fi_ops;
	eq->eq_fid.ops = &ibf_eq_ops;
	ibf_ref_get(&fab->ref);
	*eq_fid = &eq->eq_fid;
	return 0;
}
