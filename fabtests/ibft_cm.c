/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Connection management on FI_EP_MSG, server (-s ADDR) and client
 * (-d ADDR [-s ADDR]): private data with connect and accept, exactly as
 * long as it was sent (as upstream fabtests' fi_cm_data demands), a rejection
 * with data (FI_ECONNREFUSED and the data through fi_eq_readerr), a
 * connect to a port nobody listens on, FI_SHUTDOWN after fi_shutdown, the
 * names of both ends, and -n connect/shutdown/close rounds with no growth
 * in file descriptors.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ibft.h"

#define CONNECT_DATA "hello from the client"
#define ACCEPT_DATA "welcome, client"
#define REJECT_DATA "go away"

static size_t cm_data_size(struct fid *fid)
{
	size_t size = 0, len = sizeof(size);

	if (fi_getopt(fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &size, &len))
		return 0;
	return size;
}

/* Server: one accepted connection, until the client shuts it down. */
static int serve_one(struct ibft_conn *c, const struct ibft_conn_opts *o,
		     int check)
{
	struct fi_info *req;
	union ibft_cm_entry ev;
	int ret;

	ret = ibft_wait_connreq(c, &req);
	if (ret)
		return ret;
	if (check)
		IBFT_CHECK(c->cm_data_len == sizeof(CONNECT_DATA) &&
			   !memcmp(c->cm_data, CONNECT_DATA, sizeof(CONNECT_DATA)),
			   "connreq-data", "%zu bytes of private data, %zu sent, or "
			   "they differ", c->cm_data_len, sizeof(CONNECT_DATA));
	ret = ibft_accept(c, req, o);
	if (ret)
		return ret;
	ret = ibft_eq_wait(c->eq, &ev, sizeof(ev), 20000, NULL);
	if (check)
		IBFT_CHECK(ret == FI_SHUTDOWN && ev.e.fid == &c->ep->fid,
			   "shutdown-event", "event %d, fid %p (ep %p)", ret,
			   (void *)ev.e.fid, (void *)&c->ep->fid);
	fi_close(&c->ep->fid);
	c->ep = NULL;
	return ret == FI_SHUTDOWN ? 0 : -FI_EOTHER;
}

static void server(void)
{
	struct ibft_conn_opts o = { .cm_data = ACCEPT_DATA,
				    .cm_data_len = sizeof(ACCEPT_DATA) };
	struct ibft_conn c;
	struct fi_info *req;
	int i, ret;

	if (!IBFT_EXPECT(ibft_listen(&c, &o), 0, "listen"))
		goto out;
	IBFT_CHECK(cm_data_size(&c.pep->fid) >= sizeof(CONNECT_DATA),
		   "cm-data-size", "FI_OPT_CM_DATA_SIZE %zu", cm_data_size(&c.pep->fid));
	IBFT_EXPECT(serve_one(&c, &o, 1), 0, "serve-data");

	ret = ibft_wait_connreq(&c, &req);
	if (IBFT_EXPECT(ret, 0, "connreq-to-reject")) {
		IBFT_EXPECT(fi_reject(c.pep, req->handle, REJECT_DATA,
				      sizeof(REJECT_DATA)), 0, "reject");
		fi_freeinfo(req);
	}
	for (i = 0, ret = 0; i < ibft_opts.iters + 2 && !ret; i++)
		ret = serve_one(&c, &o, 0);
	IBFT_EXPECT(ret, 0, "serve-rounds");
out:
	ibft_close(&c);
}

static int client_connect(struct ibft_conn *c, union ibft_cm_entry *ev,
			  struct fi_eq_err_entry *err, const char *port)
{
	struct fi_info *hints = ibft_msg_hints_addr(), *info = NULL;
	struct ibft_conn_opts o = { 0 };
	int ret;

	memset(c, 0, sizeof(*c));
	ret = fi_getinfo(FI_VERSION(1, 17), ibft_opts.dst, port, 0, hints, &info);
	fi_freeinfo(hints);
	if (!ret)
		ret = ibft_open_active(c, &o, info);
	if (!ret)
		ret = fi_connect(c->ep, info->dest_addr, CONNECT_DATA,
				 sizeof(CONNECT_DATA));
	if (ret)	/* an error: an event (FI_CONNECTED) comes from the EQ alone */
		return ret > 0 ? -FI_EOTHER : ret;
	return ibft_eq_wait(c->eq, ev, sizeof(*ev), 20000, err);
}

static int same_host(const void *a, const char *host)
{
	const struct sockaddr_in *sin = a;
	char buf[INET_ADDRSTRLEN];

	return sin->sin_family == AF_INET &&
	       !strcmp(inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)), host);
}

static int same_name(const struct sockaddr_storage *a,
		     const struct sockaddr_storage *b)
{
	const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;

	return x->sin_family == y->sin_family && x->sin_port == y->sin_port &&
	       x->sin_addr.s_addr == y->sin_addr.s_addr;
}

/*
 * fi_endpoint(3): with info->handle a passive endpoint, the active endpoint
 * takes that endpoint's address (fi_msg_sockets does this to connect from
 * a chosen port).  The name stays through fi_enable.
 */
static void client_takes_pep_address(void)
{
	struct fi_info *hints = ibft_msg_hints_addr(), *src = NULL, *info = NULL;
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_FD };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fid_cq *cq = NULL;
	struct sockaddr_storage want, got;
	struct sockaddr_in *sin = (struct sockaddr_in *)&want;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_pep *pep = NULL;
	struct fid_ep *ep = NULL;
	struct fid_eq *eq = NULL;
	size_t len = sizeof(want);
	int ret;

	/* Without -s (loopback) the client's own address is the server's. */
	ret = fi_getinfo(IBFT_VERSION, ibft_opts.src ? ibft_opts.src : ibft_opts.dst,
			 NULL, FI_SOURCE, hints, &src);
	if (!ret)
		ret = fi_fabric(src->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_eq_open(fabric, &eq_attr, &eq, NULL);
	memset(&want, 0, sizeof(want));
	if (!ret) {
		/* Unbound, as fi_msg_sockets opens it: fi_setname binds it. */
		memcpy(&want, src->src_addr, src->src_addrlen);
		free(src->src_addr);
		src->src_addr = NULL;
		src->src_addrlen = 0;
		ret = fi_passive_ep(fabric, src, &pep, NULL);
	}
	sin->sin_port = htons((uint16_t)(atoi(ibft_opts.port) + 2000));
	if (!ret)
		ret = fi_setname(&pep->fid, &want, sizeof(*sin));
	if (!IBFT_EXPECT(ret, 0, "pep-setname"))
		goto out;
	hints->handle = &pep->fid;
	ret = fi_getinfo(IBFT_VERSION, ibft_opts.dst, ibft_opts.port, 0, hints, &info);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	if (!ret)
		ret = fi_endpoint(domain, info, &ep, NULL);
	if (!IBFT_EXPECT(ret, 0, "endpoint-from-pep"))
		goto out;
	ret = fi_getname(&ep->fid, &got, &len);
	IBFT_CHECK(!ret && same_name(&got, &want), "endpoint-takes-pep-address",
		   "the endpoint's port is %d, the passive endpoint's %d",
		   ntohs(((struct sockaddr_in *)&got)->sin_port),
		   ntohs(sin->sin_port));
	fi_close(&pep->fid);
	pep = NULL;
	ret = fi_cq_open(domain, &cq_attr, &cq, NULL);
	if (!ret)
		ret = fi_ep_bind(ep, &eq->fid, 0);
	if (!ret)
		ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV);
	if (!ret)
		ret = fi_enable(ep);
	len = sizeof(got);
	if (!ret)
		ret = fi_getname(&ep->fid, &got, &len);
	IBFT_CHECK(!ret && same_name(&got, &want), "endpoint-keeps-pep-address",
		   "after fi_enable: %s", fi_strerror(-ret));
out:
	IBFT_CLOSE(ep);
	IBFT_CLOSE(cq);
	IBFT_CLOSE(pep);
	IBFT_CLOSE(domain);
	IBFT_CLOSE(eq);
	IBFT_CLOSE(fabric);
	hints->handle = NULL;
	fi_freeinfo(hints);
	fi_freeinfo(src);
	fi_freeinfo(info);
}

static void client(void)
{
	struct fi_eq_err_entry err;
	struct sockaddr_storage ss;
	union ibft_cm_entry ev;
	struct ibft_conn c;
	char err_data[256], port[16];
	size_t len;
	int i, ret, fds0 = 0;

	ret = client_connect(&c, &ev, NULL, ibft_opts.port);
	if (IBFT_EXPECT(ret, FI_CONNECTED, "connect-with-data")) {
		IBFT_CHECK(ev.e.fid == &c.ep->fid, "connected-fid", "fid %p",
			   (void *)ev.e.fid);
		IBFT_CHECK(ibft_eq_last_len == sizeof(ev.e) + sizeof(ACCEPT_DATA) &&
			   !memcmp(ev.e.data, ACCEPT_DATA, sizeof(ACCEPT_DATA)),
			   "accept-data", "event of %zd bytes for %zu of data, or "
			   "they differ", ibft_eq_last_len, sizeof(ACCEPT_DATA));
		len = sizeof(ss);
		IBFT_CHECK(!fi_getpeer(c.ep, &ss, &len) && same_host(&ss, ibft_opts.dst),
			   "getpeer", "peer is not %s", ibft_opts.dst);
		len = sizeof(ss);
		IBFT_CHECK(!fi_getname(&c.ep->fid, &ss, &len) && len >= sizeof(struct sockaddr_in),
			   "getname", "no local name");
		len = 1;
		if (!ibft_deviates("verbs", "getname-too-small", "libfabric 1.17 "
				   "verbs truncates without -FI_ETOOSMALL"))
			IBFT_EXPECT(fi_getname(&c.ep->fid, &ss, &len), -FI_ETOOSMALL,
				    "getname-too-small");
		IBFT_EXPECT(fi_shutdown(c.ep, 0), 0, "shutdown");
	}
	ibft_close(&c);

	memset(&err, 0, sizeof(err));
	err.err_data = err_data;
	err.err_data_size = sizeof(err_data);
	ret = client_connect(&c, &ev, &err, ibft_opts.port);
	IBFT_EXPECT(ret, -FI_EAVAIL, "rejected-error-event");
	IBFT_EXPECT(err.err, FI_ECONNREFUSED, "rejected-econnrefused");
	IBFT_CHECK(err.err_data_size == sizeof(REJECT_DATA) &&
		   !memcmp(err_data, REJECT_DATA, sizeof(REJECT_DATA)),
		   "reject-data", "%zu bytes of reject data", err.err_data_size);
	ibft_close(&c);

	snprintf(port, sizeof(port), "%d", atoi(ibft_opts.port) + 1000);
	memset(&err, 0, sizeof(err));
	ret = client_connect(&c, &ev, &err, port);
	IBFT_CHECK(ret == -FI_EAVAIL && err.err, "no-listener-error",
		   "event %d err %d", ret, err.err);
	ibft_close(&c);

	for (i = 0; i < ibft_opts.iters + 2; i++) {
		if (i == 2)
			fds0 = ibft_count_fds();
		memset(&err, 0, sizeof(err));
		ret = client_connect(&c, &ev, &err, ibft_opts.port);
		if (ret != FI_CONNECTED)
			break;
		fi_shutdown(c.ep, 0);
		ibft_close(&c);
	}
	IBFT_CHECK(ret == FI_CONNECTED, "connect-rounds", "round %d: event %d, "
		   "error %d (%s), provider error %d", i, ret, err.err,
		   fi_strerror(err.err), err.prov_errno);
	ibft_close(&c);
	IBFT_CHECK(ibft_count_fds() == fds0, "connect-rounds-no-fd-growth",
		   "%d fds after round 2, %d at the end", fds0, ibft_count_fds());
	client_takes_pep_address();
}

int main(int argc, char **argv)
{
	ibft_parse(argc, argv, "");
	if (ibft_opts.server)
		server();
	else
		client();
	return ibft_finish();
}
