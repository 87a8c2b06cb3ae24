/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Connection setup and data helpers shared by the MSG programs. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "ibft.h"


static void *sockaddr_of(const char *host, size_t *len)
{
	struct sockaddr_in *sin = calloc(1, sizeof(*sin));

	sin->sin_family = AF_INET;
	inet_pton(AF_INET, host, &sin->sin_addr);
	*len = sizeof(*sin);
	return sin;
}

struct fi_info *ibft_msg_hints_addr(void)
{
	struct fi_info *h = ibft_msg_hints();

	h->addr_format = FI_SOCKADDR_IN;
	if (!ibft_opts.server && ibft_opts.src)
		h->src_addr = sockaddr_of(ibft_opts.src, &h->src_addrlen);
	return h;
}

ssize_t ibft_eq_last_len;

int ibft_eq_wait(struct fid_eq *eq, void *buf, size_t len, int timeout_ms,
		 struct fi_eq_err_entry *err)
{
	uint32_t event;
	ssize_t ret;

	ret = fi_eq_sread(eq, &event, buf, len, timeout_ms, 0);
	ibft_eq_last_len = ret;
	if (ret == -FI_EAVAIL) {
		struct fi_eq_err_entry tmp = { 0 };

		if (!err)
			err = &tmp;
		fi_eq_readerr(eq, err, 0);
		return -FI_EAVAIL;
	}
	if (ret < 0)
		return (int)ret;
	return (int)event;
}

static int open_cntrs(struct ibft_conn *c)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP,
				     .wait_obj = FI_WAIT_UNSPEC };
	int ret;

	ret = fi_cntr_open(c->domain, &attr, &c->tx_cntr, &c->tx_cntr);
	if (!ret)
		ret = fi_cntr_open(c->domain, &attr, &c->rd_cntr, &c->rd_cntr);
	if (!ret)
		ret = fi_cntr_open(c->domain, &attr, &c->rx_cntr, &c->rx_cntr);
	return ret;
}

static int bind_cntrs(struct ibft_conn *c)
{
	int ret = fi_ep_bind(c->ep, &c->tx_cntr->fid, FI_SEND | FI_WRITE);

	if (!ret)
		ret = fi_ep_bind(c->ep, &c->rd_cntr->fid, FI_READ);
	if (!ret)
		ret = fi_ep_bind(c->ep, &c->rx_cntr->fid, FI_RECV);
	return ret;
}

static int open_fabric(struct ibft_conn *c, const struct ibft_conn_opts *o)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_FD };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	int ret;

	cq_attr.wait_obj = o->wait_fd ? FI_WAIT_FD : FI_WAIT_NONE;
	cq_attr.size = o->cq_size;
	if (o->tagged)
		cq_attr.format = FI_CQ_FORMAT_TAGGED;
	ret = fi_fabric(c->info->fabric_attr, &c->fabric, NULL);
	if (!ret)
		ret = fi_eq_open(c->fabric, &eq_attr, &c->eq, NULL);
	if (!ret)
		ret = fi_domain(c->fabric, c->info, &c->domain, NULL);
	if (!ret)
		ret = fi_cq_open(c->domain, &cq_attr, &c->cq, NULL);
	if (!ret && o->wait_fd)
		ret = fi_control(&c->cq->fid, FI_GETWAIT, &c->cq_fd);
	if (!ret && o->cntrs)
		ret = open_cntrs(c);
	if (ret)
		fprintf(stderr, "open_fabric: %s\n", fi_strerror(-ret));
	return ret;
}

static struct fi_info *getinfo(const struct ibft_conn_opts *o)
{
	struct fi_info *hints = ibft_msg_hints_addr(), *info = NULL;
	int ret;

	if (o->tx_size)
		hints->tx_attr->size = o->tx_size;
	if (o->rx_size)
		hints->rx_attr->size = o->rx_size;
	if (o->shared_rx)
		hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	if (o->tagged)
		hints->caps = FI_MSG | FI_TAGGED;
	hints->caps |= o->caps;
	hints->domain_attr->threading = o->threading;
	if (ibft_opts.server)
		ret = fi_getinfo(IBFT_VERSION, ibft_opts.src, ibft_opts.port,
				 FI_SOURCE, hints, &info);
	else
		ret = fi_getinfo(IBFT_VERSION, ibft_opts.dst, ibft_opts.port, 0,
				 hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		fprintf(stderr, "fi_getinfo: %s\n", fi_strerror(-ret));
		return NULL;
	}
	return info;
}

static int setup_ep(struct ibft_conn *c, const struct ibft_conn_opts *o,
		    struct fi_info *info)
{
	int ret = fi_endpoint(c->domain, info, &c->ep, NULL);

	if (!ret && o->shared_rx && !c->srx)
		ret = fi_srx_context(c->domain, info->rx_attr, &c->srx, NULL);
	if (!ret && o->shared_rx)
		ret = fi_ep_bind(c->ep, &c->srx->fid, 0);
	if (!ret)
		ret = fi_ep_bind(c->ep, &c->eq->fid, 0);
	if (!ret && !o->no_cq)
		ret = fi_ep_bind(c->ep, &c->cq->fid,
				 FI_TRANSMIT | FI_RECV | o->cq_bind_flags);
	if (!ret && o->cntrs)
		ret = bind_cntrs(c);
	if (!ret)
		ret = fi_enable(c->ep);
	if (ret)
		fprintf(stderr, "setup_ep: %s\n", fi_strerror(-ret));
	return ret;
}

static int wait_connected(struct ibft_conn *c)
{
	union ibft_cm_entry entry;
	struct fi_eq_err_entry err = { 0 };
	int ret;

	ret = ibft_eq_wait(c->eq, &entry, sizeof(entry), 10000, &err);
	if (ret == FI_CONNECTED) {
		return 0;
	}
	fprintf(stderr, "waiting for FI_CONNECTED: %d (%s) err %d\n", ret,
		ret < 0 ? fi_strerror(-ret) : "another event", err.err);
	return ret == -FI_EAVAIL ? -err.err : -FI_EOTHER;
}

int ibft_open_active(struct ibft_conn *c, const struct ibft_conn_opts *o,
		     struct fi_info *info)
{
	int ret;

	c->info = info;
	ret = open_fabric(c, o);
	if (!ret)
		ret = setup_ep(c, o, info);
	return ret;
}

int ibft_listen(struct ibft_conn *c, const struct ibft_conn_opts *o)
{
	int ret;

	memset(c, 0, sizeof(*c));
	c->cq_fd = -1;
	c->info = getinfo(o);
	if (!c->info)
		return -FI_ENODATA;
	ret = open_fabric(c, o);
	if (!ret)
		ret = fi_passive_ep(c->fabric, c->info, &c->pep, NULL);
	if (!ret)
		ret = fi_pep_bind(c->pep, &c->eq->fid, 0);
	if (!ret)
		ret = fi_listen(c->pep);
	if (ret)
		fprintf(stderr, "listen: %s\n", fi_strerror(-ret));
	return ret;
}

int ibft_wait_connreq(struct ibft_conn *c, struct fi_info **req)
{
	union ibft_cm_entry entry;
	int ret;

	ret = ibft_eq_wait(c->eq, &entry, sizeof(entry), 20000, NULL);
	if (ret != FI_CONNREQ) {
		fprintf(stderr, "waiting for FI_CONNREQ: %d\n", ret);
		return ret < 0 ? ret : -FI_EOTHER;
	}
	*req = entry.e.info;
	c->cm_data_len = (size_t)ibft_eq_last_len - sizeof(entry.e);
	memcpy(c->cm_data, entry.e.data, IBFT_MIN(c->cm_data_len, sizeof(c->cm_data)));
	return 0;
}

int ibft_accept(struct ibft_conn *c, struct fi_info *req,
		const struct ibft_conn_opts *o)
{
	int ret = setup_ep(c, o, req);

	fi_freeinfo(req);
	if (!ret)
		ret = fi_accept(c->ep, o->cm_data, o->cm_data_len);
	if (!ret)
		ret = wait_connected(c);
	return ret;
}

int ibft_connect(struct ibft_conn *c, const struct ibft_conn_opts *o)
{
	struct fi_info *req;
	int ret;

	if (ibft_opts.server) {
		ret = ibft_listen(c, o);
		if (!ret)
			ret = ibft_wait_connreq(c, &req);
		if (!ret)
			ret = ibft_accept(c, req, o);
		return ret;
	}
	memset(c, 0, sizeof(*c));
	c->cq_fd = -1;
	ret = ibft_open_active(c, o, getinfo(o));
	if (!c->info)
		return -FI_ENODATA;
	if (!ret)
		ret = fi_connect(c->ep, c->info->dest_addr, o->cm_data, o->cm_data_len);
	if (!ret)
		ret = wait_connected(c);
	return ret;
}

void ibft_close(struct ibft_conn *c)
{
	IBFT_CLOSE(c->ep);
	IBFT_CLOSE(c->srx);
	IBFT_CLOSE(c->pep);
	IBFT_CLOSE(c->cq);
	IBFT_CLOSE(c->tx_cntr);
	IBFT_CLOSE(c->rd_cntr);
	IBFT_CLOSE(c->rx_cntr);
	IBFT_CLOSE(c->domain);
	IBFT_CLOSE(c->eq);
	IBFT_CLOSE(c->fabric);
	fi_freeinfo(c->info);
	memset(c, 0, sizeof(*c));
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Block on the CQ's fd: trywait, then epoll, as fi_cq(3) describes. */
static int wait_fd(struct ibft_conn *c, int timeout_ms)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct fid *fids[1] = { &c->cq->fid };
	int ep = epoll_create1(0), n = 0;

	epoll_ctl(ep, EPOLL_CTL_ADD, c->cq_fd, &ev);
	if (fi_trywait(c->fabric, fids, 1) == 0)
		n = epoll_wait(ep, &ev, 1, timeout_ms);
	close(ep);
	return n;
}

int ibft_cq_wait(struct ibft_conn *c, struct fi_cq_data_entry *e, int n,
		 int use_fd, int timeout_ms)
{
	long deadline = now_ms() + timeout_ms;
	int got = 0;
	ssize_t ret;

	while (got < n) {
		ret = fi_cq_read(c->cq, &e[got], n - got);
		if (ret > 0) {
			got += (int)ret;
			continue;
		}
		if (ret != -FI_EAGAIN)
			return (int)ret;
		if (now_ms() > deadline)
			return -FI_ETIMEDOUT;
		if (use_fd)
			wait_fd(c, 100);
	}
	return got;
}

int ibft_cq_wait_err(struct ibft_conn *c, struct fi_cq_err_entry *err,
		     int timeout_ms)
{
	struct fi_cq_data_entry e = { 0 };
	long deadline = now_ms() + timeout_ms;
	ssize_t ret;

	for (;;) {
		ret = fi_cq_read(c->cq, &e, 1);
		if (ret == -FI_EAVAIL) {
			memset(err, 0, sizeof(*err));
			return (int)fi_cq_readerr(c->cq, err, 0);
		}
		if (ret > 0)
			return -FI_EOTHER;	/* a success where an error was due */
		if (ret != -FI_EAGAIN)
			return (int)ret;
		if (now_ms() > deadline)
			return -FI_ETIMEDOUT;
	}
}

int ibft_buf_alloc(struct ibft_conn *c, struct ibft_buf *b, size_t len,
		   uint64_t access)
{
	int ret;

	memset(b, 0, sizeof(*b));
	b->len = len;
	if (posix_memalign((void **)&b->ptr, 4096, len ? len : 1))
		return -FI_ENOMEM;
	memset(b->ptr, 0, len);
	ret = fi_mr_reg(c->domain, b->ptr, len, access, 0, 0, 0, &b->mr, NULL);
	if (ret) {
		fprintf(stderr, "fi_mr_reg(%zu): %s\n", len, fi_strerror(-ret));
		free(b->ptr);
		b->ptr = NULL;
		return ret;
	}
	b->desc = fi_mr_desc(b->mr);
	b->key = fi_mr_key(b->mr);
	return 0;
}

void ibft_buf_free(struct ibft_buf *b)
{
	IBFT_CLOSE(b->mr);
	free(b->ptr);
	memset(b, 0, sizeof(*b));
}

void ibft_fill(uint8_t *p, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 8));
}

int ibft_verify(const uint8_t *p, size_t len, unsigned seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed * 31 + i * 7 + (i >> 8)))
			return 0;
	return 1;
}

int ibft_ctl_send(struct ibft_conn *c, struct ibft_buf *b, const void *msg,
		  size_t len)
{
	struct fi_cq_data_entry e = { 0 };
	ssize_t ret;

	memcpy(b->ptr, msg, len);
	do {
		ret = fi_send(c->ep, b->ptr, len, b->desc, 0, b);
		if (ret == -FI_EAGAIN)
			fi_cq_read(c->cq, &e, 0);
	} while (ret == -FI_EAGAIN);
	if (ret)
		return (int)ret;
	ret = ibft_cq_wait(c, &e, 1, 0, 10000);
	return ret == 1 && e.op_context == b && (e.flags & FI_SEND) ? 0 : -FI_EOTHER;
}

int ibft_ctl_recv(struct ibft_conn *c, struct ibft_buf *b, void *msg,
		  size_t len)
{
	struct fi_cq_data_entry e = { 0 };
	ssize_t ret;

	ret = fi_recv(c->ep, b->ptr, len, b->desc, 0, b);
	if (ret)
		return (int)ret;
	ret = ibft_cq_wait(c, &e, 1, 0, 10000);
	if (ret != 1 || e.op_context != b || !(e.flags & FI_RECV))
		return -FI_EOTHER;
	memcpy(msg, b->ptr, len);
	return 0;
}
