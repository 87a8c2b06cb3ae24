/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Control objects: fabric, domain, MR, CQ, EQ opened and closed in loops
 * with no growth in file descriptors or memory, their wait objects, and
 * the error codes the man pages give for misuse; endpoints of both types
 * bound wrongly (fi_ep_bind, fi_control).
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "ibft.h"

struct objs {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
};

static int open_objs(struct objs *o)
{
	struct fi_info *hints = ibft_msg_hints();
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_FD, .flags = FI_WRITE };
	int ret;

	memset(o, 0, sizeof(*o));
	ret = fi_getinfo(FI_VERSION(1, 17), ibft_opts.src, NULL,
			 ibft_opts.src ? FI_SOURCE : 0, hints, &o->info);
	fi_freeinfo(hints);
	if (ret)
		return ret;
	ret = fi_fabric(o->info->fabric_attr, &o->fabric, NULL);
	if (!ret)
		ret = fi_domain(o->fabric, o->info, &o->domain, NULL);
	if (!ret)
		ret = fi_eq_open(o->fabric, &eq_attr, &o->eq, NULL);
	return ret;
}

static int close_objs(struct objs *o)
{
	int ret = 0;

	if (o->eq)
		ret |= fi_close(&o->eq->fid);
	if (o->domain)
		ret |= fi_close(&o->domain->fid);
	if (o->fabric)
		ret |= fi_close(&o->fabric->fid);
	fi_freeinfo(o->info);
	return ret;
}

/* One round: every object kind opened, used lightly, closed. */
static int round_trip(char *buf, size_t len)
{
	static const enum fi_cq_format formats[] = {
		FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA
	};
	struct objs o;
	struct fid_mr *mr;
	struct fid_cq *cq;
	size_t i;
	int ret, fd;

	ret = open_objs(&o);
	if (ret)
		goto out;
	ret = fi_mr_reg(o.domain, buf, len, FI_SEND | FI_RECV | FI_REMOTE_WRITE |
			FI_REMOTE_READ, 0, 0, 0, &mr, NULL);
	if (ret)
		goto out;
	ret = fi_close(&mr->fid);
	for (i = 0; !ret && i < sizeof(formats) / sizeof(formats[0]); i++) {
		struct fi_cq_attr attr = { .format = formats[i], .size = 64,
					   .wait_obj = FI_WAIT_FD };

		ret = fi_cq_open(o.domain, &attr, &cq, NULL);
		if (ret)
			break;
		ret = fi_control(&cq->fid, FI_GETWAIT, &fd);
		fi_close(&cq->fid);
	}
	if (!ret)
		ret = fi_control(&o.eq->fid, FI_GETWAIT, &fd);
out:
	ret |= close_objs(&o);
	return ret;
}

static void check_loops(void)
{
	size_t len = 1 << 16;
	char *buf = calloc(1, len);
	int i, ret = 0, fds0, fds1;
	long rss0, rss1;

	/* The first rounds load libraries and caches for good. */
	for (i = 0; i < 3 && !ret; i++)
		ret = round_trip(buf, len);
	fds0 = ibft_count_fds();
	rss0 = ibft_rss_kib();
	for (i = 0; i < ibft_opts.iters && !ret; i++)
		ret = round_trip(buf, len);
	fds1 = ibft_count_fds();
	rss1 = ibft_rss_kib();
	IBFT_EXPECT(ret, 0, "open-close-loop");
	IBFT_CHECK(fds1 == fds0, "open-close-no-fd-growth",
		   "%d fds before %d rounds, %d after", fds0, ibft_opts.iters, fds1);
	IBFT_CHECK(rss1 - rss0 < 1024, "open-close-no-memory-growth",
		   "RSS grew %ld KiB over %d rounds", rss1 - rss0, ibft_opts.iters);
	free(buf);
}

static void check_cq(struct objs *o)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD };
	struct fi_cq_data_entry entry;
	struct fi_cq_err_entry err = { 0 };
	struct fid_cq *cq;
	struct fid *fids[1];
	int fd = -1;

	if (!IBFT_EXPECT(fi_cq_open(o->domain, &attr, &cq, NULL), 0, "cq-open-wait-fd"))
		return;
	IBFT_EXPECT(fi_cq_read(cq, &entry, 1), -FI_EAGAIN, "cq-read-empty");
	IBFT_EXPECT(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN, "cq-readerr-empty");
	IBFT_EXPECT(fi_cq_sread(cq, &entry, 1, NULL, 20), -FI_EAGAIN, "cq-sread-timeout");
	IBFT_EXPECT(fi_control(&cq->fid, FI_GETWAIT, &fd), 0, "cq-getwait");
	IBFT_CHECK(fd >= 0, "cq-getwait-fd", "fd %d", fd);
	fids[0] = &cq->fid;
	IBFT_EXPECT(fi_trywait(o->fabric, fids, 1), 0, "cq-trywait-empty");
	if (fd >= 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		IBFT_EXPECT(poll(&p, 1, 0), 0, "cq-fd-quiet-when-empty");
	}
	IBFT_EXPECT(fi_close(&cq->fid), 0, "cq-close");

	attr.format = (enum fi_cq_format)99;
	IBFT_EXPECT(fi_cq_open(o->domain, &attr, &cq, NULL), -FI_EINVAL,
		    "cq-open-bad-format");
}

static void check_eq(struct objs *o)
{
	struct fi_eq_entry in = { .context = (void *)0x1234, .data = 42 }, out;
	struct fi_eq_err_entry err = { 0 };
	struct pollfd p = { .events = POLLIN };
	uint32_t event = 0;
	int fd = -1;

	IBFT_EXPECT(fi_eq_read(o->eq, &event, &out, sizeof(out), 0), -FI_EAGAIN,
		    "eq-read-empty");
	IBFT_EXPECT(fi_eq_sread(o->eq, &event, &out, sizeof(out), 20, 0),
		    -FI_EAGAIN, "eq-sread-timeout");
	IBFT_EXPECT(fi_eq_readerr(o->eq, &err, 0), -FI_EAGAIN, "eq-readerr-empty");
	IBFT_EXPECT(fi_control(&o->eq->fid, FI_GETWAIT, &fd), 0, "eq-getwait");
	IBFT_EXPECT(fi_eq_write(o->eq, FI_NOTIFY, &in, sizeof(in), 0),
		    sizeof(in), "eq-write");
	p.fd = fd;
	IBFT_EXPECT(poll(&p, 1, 1000), 1, "eq-fd-readable-after-write");
	memset(&out, 0, sizeof(out));
	IBFT_EXPECT(fi_eq_sread(o->eq, &event, &out, sizeof(out), 1000, 0),
		    sizeof(out), "eq-sread-written");
	IBFT_CHECK(event == FI_NOTIFY && out.context == in.context &&
		   out.data == in.data, "eq-event-data", "event %u context %p data %lu",
		   event, out.context, (unsigned long)out.data);
	IBFT_EXPECT(fi_eq_read(o->eq, &event, &out, sizeof(out), 0), -FI_EAGAIN,
		    "eq-read-empty-again");
}

static void check_mr(struct objs *o)
{
	size_t len = 1 << 16;
	char *buf = calloc(1, len);
	struct iovec iov[2] = { { buf, len / 2 }, { buf + len / 2, len / 2 } };
	struct fid_mr *mr = NULL;

	if (IBFT_EXPECT(fi_mr_reg(o->domain, buf, len, FI_RECV | FI_REMOTE_WRITE,
				  0, 0, 0, &mr, NULL), 0, "mr-reg")) {
		IBFT_CHECK(fi_mr_desc(mr) != NULL, "mr-desc", "NULL descriptor");
		if (!ibft_deviates("verbs", "domain-close-busy-with-mr",
				   "libfabric 1.17 verbs frees the domain before "
				   "returning -FI_EBUSY; closing it again crashes"))
			IBFT_EXPECT(fi_close(&o->domain->fid), -FI_EBUSY,
				    "domain-close-busy-with-mr");
		IBFT_EXPECT(fi_close(&mr->fid), 0, "mr-close");
	}
	if (o->info->domain_attr->mr_iov_limit < 2)
		IBFT_EXPECT(fi_mr_regv(o->domain, iov, 2, FI_SEND, 0, 0, 0, &mr, NULL),
			    -FI_EINVAL, "mr-regv-over-iov-limit");
	free(buf);
}

/*
 * fi_ep_bind and fi_control on an endpoint of info's type, opened on
 * domain; needed: what it must have bound before fi_enable (an EQ for
 * FI_EP_MSG, an AV for FI_EP_RDM).  Names carry the type.
 */
static void check_ep_binds(const char *type, struct fid_domain *domain,
			   struct fi_info *info, struct fid *needed)
{
	struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_DATA };
	struct fid_ep *ep = NULL;
	struct fid_cq *cq = NULL;
	uint64_t flags = FI_TRANSMIT;
	char name[64];

#define NAME(n) (snprintf(name, sizeof(name), "%s-%s", type, n), name)
	if (!IBFT_EXPECT(fi_endpoint(domain, info, &ep, NULL), 0, NAME("ep-open")) ||
	    !IBFT_EXPECT(fi_cq_open(domain, &attr, &cq, NULL), 0, NAME("cq-open")))
		goto out;
	IBFT_EXPECT(fi_ep_bind(ep, NULL, 0), -FI_EINVAL, NAME("bind-null"));
	/* An endpoint takes no endpoint. */
	IBFT_EXPECT(fi_ep_bind(ep, &ep->fid, 0), -FI_EINVAL,
		    NAME("bind-wrong-class"));
	IBFT_EXPECT(fi_ep_bind(ep, needed, 0), 0, NAME("bind-needed"));
	IBFT_EXPECT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0,
		    NAME("bind-cq"));
	/* What an endpoint holds cannot close under it, whatever its kind. */
	IBFT_EXPECT(fi_close(&cq->fid), -FI_EBUSY, NAME("cq-close-while-bound"));
	IBFT_EXPECT(fi_close(needed), -FI_EBUSY, NAME("needed-close-while-bound"));
	IBFT_EXPECT(fi_control(&ep->fid, FI_GETOPSFLAG, &flags), 0,
		    NAME("getopsflag"));
	IBFT_EXPECT(fi_control(&ep->fid, 0x7fff, NULL), -FI_ENOSYS,
		    NAME("control-unknown"));
	if (!IBFT_EXPECT(fi_enable(ep), 0, NAME("enable")))
		goto out;
	if (!ibft_deviates("verbs", NAME("bind-after-enable"), "libfabric "
			   "1.17's verbs takes a CQ after fi_enable"))
		IBFT_EXPECT(fi_ep_bind(ep, &cq->fid, FI_RECV), -FI_EOPBADSTATE,
			    NAME("bind-after-enable"));
#undef NAME
out:
	IBFT_CLOSE(ep);
	IBFT_CLOSE(cq);
}

/* An FI_EP_RDM endpoint of provider -p, where it has one. */
static void check_rdm_ep_binds(void)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_info *hints = ibft_msg_hints(), *info = NULL;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_av *av = NULL;
	int ret;

	hints->ep_attr->type = FI_EP_RDM;
	ret = fi_getinfo(IBFT_VERSION, ibft_opts.src, NULL,
			 ibft_opts.src ? FI_SOURCE : 0, hints, &info);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA) {
		printf("skip - rdm-ep-binds [%s]: no FI_EP_RDM endpoint\n",
		       ibft_opts.prov);
		return;
	}
	if (!ret)
		ret = fi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = fi_domain(fabric, info, &domain, NULL);
	if (!ret)
		ret = fi_av_open(domain, &av_attr, &av, NULL);
	if (IBFT_EXPECT(ret, 0, "rdm-open-fabric-domain-av"))
		check_ep_binds("rdm", domain, info, &av->fid);
	IBFT_CLOSE(av);
	IBFT_CLOSE(domain);
	IBFT_CLOSE(fabric);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	struct objs o;
	int ret;

	ibft_parse(argc, argv, "");
	ret = open_objs(&o);
	if (!IBFT_EXPECT(ret, 0, "open-fabric-domain-eq")) {
		close_objs(&o);
		return ibft_finish();
	}
	check_cq(&o);
	check_eq(&o);
	check_mr(&o);
	/* Seen in libfabric 1.17: verbs' fi_endpoint refuses an info taken
	 * with FI_SOURCE alone (-FI_EINVAL); verbs;ofi_rxm answers
	 * FI_GETOPSFLAG -FI_ENOSYS and its fi_enable here -FI_EINVAL. */
	if (!ibft_deviates("verbs", "ep-binds", "fi_endpoint refuses a "
			   "source-only info; rxm has no FI_GETOPSFLAG")) {
		check_ep_binds("msg", o.domain, o.info, &o.eq->fid);
		check_rdm_ep_binds();
	}
	IBFT_EXPECT(close_objs(&o), 0, "close-all");
	check_loops();
	return ibft_finish();
}
