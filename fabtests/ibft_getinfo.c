/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * fi_getinfo as an application sees it: which domains are listed, whether
 * their attributes are usable (fi_info->nic included), and whether hints
 * that cannot be met give -FI_ENODATA.  Run with -D naming the domains
 * that must be listed and -s/-d naming two local addresses on different
 * devices.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibft.h"

#define MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)

static int getinfo(const char *node, const char *service, uint64_t flags,
		   struct fi_info *hints, struct fi_info **info)
{
	*info = NULL;
	return fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, info);
}

static int listed(struct fi_info *info, const char *domain)
{
	for (; info; info = info->next)
		if (!strcmp(info->domain_attr->name, domain))
			return 1;
	return 0;
}

static void check_domains_listed(void)
{
	struct fi_info *hints = ibft_msg_hints(), *info;
	char *list, *dom, *save;
	int ret;

	ret = getinfo(NULL, NULL, 0, hints, &info);
	IBFT_EXPECT(ret, 0, "getinfo-msg");
	list = strdup(ibft_opts.domains ? ibft_opts.domains : "");
	for (dom = strtok_r(list, ",", &save); dom; dom = strtok_r(NULL, ",", &save)) {
		char name[128];

		snprintf(name, sizeof(name), "getinfo-lists-%s", dom);
		IBFT_CHECK(listed(info, dom), name, "domain %s not listed", dom);
	}
	free(list);
	/* IBFT_DOMAINS_ONLY: the provider was told to use -D's domains alone
	 * (ibfab: FI_IBFAB_DEVICE), and lists no other. */
	if (getenv("IBFT_DOMAINS_ONLY")) {
		const char *other = NULL, *l;
		struct fi_info *cur;
		size_t n;

		for (cur = info; cur && !other; cur = cur->next) {
			n = strlen(cur->domain_attr->name);
			l = ibft_opts.domains ? ibft_opts.domains : "";
			while (*l && (strncmp(l, cur->domain_attr->name, n) ||
				      (l[n] && l[n] != ',')))
				l += strcspn(l, ",") + (l[strcspn(l, ",")] == ',');
			if (!*l)
				other = cur->domain_attr->name;
		}
		IBFT_CHECK(!other, "getinfo-domains-only", "domain %s listed too",
			   other);
	}
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

static void check_attributes(void)
{
	struct fi_info *hints = ibft_msg_hints(), *info, *cur;
	int bad = 0;
	char why[256] = "";

	if (getinfo(NULL, NULL, 0, hints, &info)) {
		IBFT_CHECK(0, "getinfo-attributes", "no info");
		fi_freeinfo(hints);
		return;
	}
	for (cur = info; cur && !bad; cur = cur->next) {
		const char *d = cur->domain_attr->name;

		if (cur->ep_attr->type != FI_EP_MSG)
			bad = snprintf(why, sizeof(why), "%s: ep type %d", d, cur->ep_attr->type);
		else if ((cur->caps & (FI_MSG | FI_RMA)) != (FI_MSG | FI_RMA))
			bad = snprintf(why, sizeof(why), "%s: caps lack FI_MSG|FI_RMA", d);
		else if (cur->addr_format != FI_SOCKADDR_IN &&
			 cur->addr_format != FI_SOCKADDR_IN6 &&
			 cur->addr_format != FI_SOCKADDR_IB)
			bad = snprintf(why, sizeof(why), "%s: addr_format %u", d, cur->addr_format);
		else if (!cur->src_addr || !cur->src_addrlen)
			bad = snprintf(why, sizeof(why), "%s: no src_addr", d);
		else if (!cur->ep_attr->max_msg_size || !cur->tx_attr->size ||
			 !cur->rx_attr->size || !cur->tx_attr->iov_limit ||
			 !cur->rx_attr->iov_limit)
			bad = snprintf(why, sizeof(why), "%s: a zero limit", d);
		else if ((cur->domain_attr->mr_mode & MR_MODE) & ~MR_MODE)
			bad = snprintf(why, sizeof(why), "%s: mr_mode %#x", d,
				       cur->domain_attr->mr_mode);
		else if (!(cur->domain_attr->mr_mode & FI_MR_LOCAL))
			bad = snprintf(why, sizeof(why), "%s: verbs needs FI_MR_LOCAL", d);
	}
	IBFT_CHECK(!bad, "getinfo-attributes", "%s", why);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/*
 * fi_info->nic names each entry's device and says what its link is, so
 * that a consumer can pick the NIC nearest a process (Open MPI 5 reads
 * it).  Each entry's nic is printed, to set providers side by side.
 */
static void check_nic(void)
{
	struct fi_info *hints = ibft_msg_hints(), *info, *cur;
	const char *shown = "";
	struct fid_nic *n;
	char why[256] = "";
	int bad = 0;

	if (getinfo(NULL, NULL, 0, hints, &info)) {
		IBFT_CHECK(0, "getinfo-nic", "no info");
		fi_freeinfo(hints);
		return;
	}
	for (cur = info; cur && !bad; cur = cur->next) {
		const char *d = cur->domain_attr->name;

		n = cur->nic;
		if (!n || !n->device_attr || !n->bus_attr || !n->link_attr)
			bad = snprintf(why, sizeof(why), "%s: no nic", d);
		else if (!n->device_attr->name || strcmp(n->device_attr->name, d))
			bad = snprintf(why, sizeof(why), "%s: nic names device %s",
				       d, n->device_attr->name);
		else if (!n->device_attr->vendor_id || !n->device_attr->device_id)
			bad = snprintf(why, sizeof(why), "%s: no vendor or device id", d);
		else if (n->link_attr->state != FI_LINK_UP || !n->link_attr->mtu ||
			 !n->link_attr->network_type)
			bad = snprintf(why, sizeof(why), "%s: link state %d, mtu %zu",
				       d, n->link_attr->state, n->link_attr->mtu);
		else if (strcmp(d, shown) && (shown = d))	/* once a domain */
			printf("# %s: %s vendor %s device %s fw %s driver %s bus %s, "
			       "%s link, mtu %zu, %zu bit/s\n", d,
			       n->device_attr->name, n->device_attr->vendor_id,
			       n->device_attr->device_id,
			       n->device_attr->firmware ? n->device_attr->firmware : "-",
			       n->device_attr->driver ? n->device_attr->driver : "-",
			       n->bus_attr->bus_type == FI_BUS_PCI ? "PCI" : "none",
			       n->link_attr->network_type, n->link_attr->mtu,
			       n->link_attr->speed);
	}
	IBFT_CHECK(!bad, "getinfo-nic", "%s", why);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* A hint nobody can meet: -FI_ENODATA and no list. */
static void expect_nodata(const char *name, struct fi_info *hints)
{
	struct fi_info *info;
	int ret = getinfo(NULL, NULL, 0, hints, &info);

	IBFT_EXPECT(ret, -FI_ENODATA, name);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

static void check_bad_hints(void)
{
	struct fi_info *h;

	h = ibft_msg_hints();
	h->ep_attr->type = FI_EP_SOCK_STREAM;
	expect_nodata("hint-ep-type-sock-stream", h);

	h = ibft_msg_hints();
	h->domain_attr->mr_mode = 2;	/* FI_MR_SCALABLE, which 2.x deprecates */
	expect_nodata("hint-mr-scalable", h);

	h = ibft_msg_hints();
	h->domain_attr->name = strdup("no-such-device");
	expect_nodata("hint-domain-name", h);

	if (!ibft_deviates("verbs", "hint-fabric-name",
			   "libfabric 1.17 verbs ignores the fabric name hint")) {
		h = ibft_msg_hints();
		h->fabric_attr->name = strdup("no-such-fabric");
		expect_nodata("hint-fabric-name", h);
	}

	h = ibft_msg_hints();
	h->caps |= FI_TRIGGER;
	expect_nodata("hint-caps-trigger", h);

	h = ibft_msg_hints();
	h->tx_attr->size = (size_t)1 << 40;
	expect_nodata("hint-tx-size-huge", h);

	h = ibft_msg_hints();
	h->tx_attr->inject_size = (size_t)1 << 30;
	expect_nodata("hint-inject-size-huge", h);

	h = ibft_msg_hints();
	h->ep_attr->max_msg_size = SIZE_MAX;
	expect_nodata("hint-max-msg-size-huge", h);
}

static int host_is(const void *sa, const char *host)
{
	const struct sockaddr_in *sin = sa;
	char buf[INET_ADDRSTRLEN];

	if (!sa || sin->sin_family != AF_INET)
		return 0;
	return !strcmp(inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)), host);
}

/* FI_SOURCE: exactly the device that owns the address. */
static void check_source(const char *addr, const char *want_dom)
{
	struct fi_info *hints = ibft_msg_hints(), *info, *cur;
	char name[128];
	int ret, ok = 1;

	hints->addr_format = FI_SOCKADDR_IN;
	ret = getinfo(addr, ibft_opts.port, FI_SOURCE, hints, &info);
	snprintf(name, sizeof(name), "getinfo-source-%s", addr);
	if (!IBFT_EXPECT(ret, 0, name))
		goto out;
	for (cur = info; cur; cur = cur->next)
		ok &= host_is(cur->src_addr, addr) &&
		      ntohs(((struct sockaddr_in *)cur->src_addr)->sin_port) ==
		      atoi(ibft_opts.port) &&
		      (!want_dom || !strcmp(cur->domain_attr->name, want_dom));
	IBFT_CHECK(ok, name, "an entry has another address, port or domain "
		   "than %s:%s on %s", addr, ibft_opts.port, want_dom ? want_dom : "?");
out:
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* A destination: the entries carry it, and the route's source address. */
static void check_dest(const char *dst, const char *src)
{
	struct fi_info *hints = ibft_msg_hints(), *info, *cur;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	char name[128];
	int ret, ok = 1;

	hints->addr_format = FI_SOCKADDR_IN;
	if (src) {
		inet_pton(AF_INET, src, &sin.sin_addr);
		hints->src_addr = malloc(sizeof(sin));
		memcpy(hints->src_addr, &sin, sizeof(sin));
		hints->src_addrlen = sizeof(sin);
	}
	ret = getinfo(dst, ibft_opts.port, 0, hints, &info);
	snprintf(name, sizeof(name), "getinfo-dest-%s-from-%s", dst, src ? src : "any");
	if (!IBFT_EXPECT(ret, 0, name))
		goto out;
	for (cur = info; cur; cur = cur->next)
		ok &= host_is(cur->dest_addr, dst) &&
		      (!src || host_is(cur->src_addr, src));
	IBFT_CHECK(ok, name, "an entry lacks dest %s or src %s", dst, src ? src : "");
out:
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/*
 * An answer passed back as hints, its source address cleared (as
 * fabtests' fi_multi_ep makes more endpoints): it names its domain, and
 * that domain's entry comes back, though the route to the destination
 * would leave from another device (here the two devices share a host).
 */
static void check_answer_as_hints(const char *dst, const char *src)
{
	struct fi_info *hints = ibft_msg_hints(), *info = NULL, *again = NULL, *h2;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int ret;

	if (ibft_deviates("verbs", "getinfo-answer-as-hints", "verbs takes the "
			  "route's device over the domain the hints name"))
		goto out;
	hints->addr_format = FI_SOCKADDR_IN;
	inet_pton(AF_INET, src, &sin.sin_addr);
	hints->src_addr = malloc(sizeof(sin));
	memcpy(hints->src_addr, &sin, sizeof(sin));
	hints->src_addrlen = sizeof(sin);
	ret = getinfo(dst, ibft_opts.port, 0, hints, &info);
	if (!IBFT_EXPECT(ret, 0, "getinfo-answer-as-hints-first"))
		goto out;
	h2 = fi_dupinfo(info);
	free(h2->src_addr);
	h2->src_addr = NULL;
	h2->src_addrlen = 0;
	h2->next = NULL;
	ret = getinfo(NULL, NULL, 0, h2, &again);
	IBFT_CHECK(!ret && again && !strcmp(again->domain_attr->name,
					     info->domain_attr->name),
		   "getinfo-answer-as-hints", "the answer for %s from %s (on "
		   "%s), passed back as hints without its source: %s%s",
		   dst, src, info->domain_attr->name, ret ? fi_strerror(-ret) :
		   again ? "another domain, " : "no fi_info",
		   ret || !again ? "" : again->domain_attr->name);
	fi_freeinfo(h2);
out:
	fi_freeinfo(again);
	fi_freeinfo(info);
	fi_freeinfo(hints);
}

/* IBFT_GETINFO_REFUSED=1: one fi_getinfo no entry can meet (every entry
 * refuses a transmit queue of 2^40), for check_refusals_logged. */
static int refused_child(void)
{
	struct fi_info *h = fi_allocinfo(), *info = NULL;
	int ret;

	h->fabric_attr->prov_name = strdup(ibft_opts.prov);
	h->tx_attr->size = (size_t)1 << 40;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &info);
	fi_freeinfo(info);
	fi_freeinfo(h);
	return ret == -FI_ENODATA ? 0 : 1;
}

/*
 * When fi_getinfo finds nothing, the log at FI_LOG_LEVEL=info says why
 * for each entry it tried, RDM and MSG alike (it used to keep only the
 * last: MPICH's refusal read as an MSG entry's).  This program again, in
 * a process of its own with that log level, its stderr read here.
 */
static void check_refusals_logged(void)
{
	char line[512], cmd[1024];
	int rdm = 0, msg = 0, st;
	FILE *f;

	if (ibft_deviates("verbs", "getinfo-refusals-logged", "ibfab's own "
			  "log lines"))
		return;
	snprintf(cmd, sizeof(cmd), "IBFT_GETINFO_REFUSED=1 FI_LOG_LEVEL=info "
		 "/proc/%d/exe -p '%s' 2>&1 >/dev/null", (int)getpid(),
		 ibft_opts.prov);
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strstr(line, "no match: "))
			continue;
		rdm |= !!strstr(line, "FI_EP_RDM on ");
		msg |= !!strstr(line, "FI_EP_MSG on ");
	}
	st = f ? pclose(f) : -1;
	IBFT_CHECK(st == 0 && rdm && msg, "getinfo-refusals-logged", "the log "
		   "named the refusal of %s%s%s (exit %d)", rdm ? "" : "no RDM",
		   rdm || msg ? " " : " and ", msg ? "" : "no MSG entry", st);
}

int main(int argc, char **argv)
{
	ibft_parse(argc, argv, "(-s ADDR1 -d ADDR2: addresses of two devices)");
	if (getenv("IBFT_GETINFO_REFUSED"))
		return refused_child();
	check_domains_listed();
	check_attributes();
	check_nic();
	check_bad_hints();
	check_refusals_logged();
	if (ibft_opts.src)
		check_source(ibft_opts.src, NULL);
	if (ibft_opts.dst) {
		check_source(ibft_opts.dst, NULL);
		check_dest(ibft_opts.dst, NULL);
		if (ibft_opts.src) {
			check_dest(ibft_opts.dst, ibft_opts.src);
			check_answer_as_hints(ibft_opts.src, ibft_opts.dst);
		}
	}
	return ibft_finish();
}
