/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* FI_EP_RDM: the template, what Open MPI asks for, names of endpoints. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm.h"

static struct fi_info *tmpl;
static char why[256];

static const struct ibf_dev_limits lim = {
	.dev_name = "rxe0",
	.fabric_name = "IB-0xfe80000000000000",
	.port = 1,
	.max_msg_sz = 1 << 23,	/* rxe: 8 MiB */
	.max_qp_wr = 1 << 20,
	.max_sge = 32,
	.max_cqe = 32767,
	.max_cq = 1 << 16,
	.max_qp = 1 << 16,
	.max_mr = 1 << 20,
	.max_srq = 1 << 10,
	.max_inline = 256,
};

static void setup(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	inet_pton(AF_INET, "198.18.0.1", &sin.sin_addr);
	ibf_params_load();
	tmpl = ibf_info_template_rdm(&lim, (struct sockaddr *)&sin);
	cr_assert_not_null(tmpl);
	why[0] = 0;
}

static void teardown(void)
{
	fi_freeinfo(tmpl);
}

TestSuite(rdm, .init = setup, .fini = teardown);

/* Open MPI 4.1's OFI MTL, field by field (ompi/mca/mtl/ofi). */
static struct fi_info *ompi_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->tx_attr->msg_order = FI_ORDER_SAS;
	h->rx_attr->msg_order = FI_ORDER_SAS;
	h->tx_attr->op_flags = FI_COMPLETION;
	h->rx_attr->op_flags = FI_COMPLETION;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->av_type = FI_AV_MAP;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->mr_mode = 0;
	return h;
}

static int match(struct fi_info *h, uint32_t version)
{
	return ibf_info_match(tmpl, version, h, why, sizeof(why));
}

Test(rdm, template_is_rdm_with_rma_keys)
{
	cr_assert_eq(tmpl->ep_attr->type, FI_EP_RDM);
	/* Exactly what Open MPI 4.1's OFI BTL accepts: no FI_MR_LOCAL, no
	 * FI_MR_ENDPOINT. */
	cr_assert_eq(tmpl->domain_attr->mr_mode,
		     FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	cr_assert_eq(tmpl->mode, 0);
	cr_assert(tmpl->caps & FI_TAGGED);
	cr_assert_eq(tmpl->caps & (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ |
				   FI_REMOTE_WRITE),
		     FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE);
	cr_assert_eq(tmpl->tx_attr->rma_iov_limit, 1);
	/* Messages are read in pieces: larger than the port's 8 MiB. */
	cr_assert_geq(tmpl->ep_attr->max_msg_size, 64u << 20);
	cr_assert_eq(tmpl->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	cr_assert_geq(tmpl->domain_attr->cq_data_size, 4);
	cr_assert_eq(tmpl->tx_attr->inject_size, ibf_params.eager_size);
}

/* Atomics are applied in order (MPICH asks before it uses fi_atomic for
 * MPI accumulates); RMA is not ordered, and says so. */
Test(rdm, atomics_ordered_rma_not)
{
	const uint64_t atomic = FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW |
				FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;
	struct fi_info *h = ompi_hints();

	cr_assert_eq(tmpl->tx_attr->msg_order & atomic, atomic);
	cr_assert_eq(tmpl->rx_attr->msg_order & atomic, atomic);
	cr_assert_eq(tmpl->tx_attr->msg_order & (FI_ORDER_RAW | FI_ORDER_WAW |
						 FI_ORDER_RMA_WAW), 0);
	cr_assert_geq(tmpl->ep_attr->max_order_raw_size, 8);
	cr_assert_eq(tmpl->ep_attr->max_order_war_size,
		     tmpl->ep_attr->max_order_raw_size);
	cr_assert_eq(tmpl->ep_attr->max_order_waw_size,
		     tmpl->ep_attr->max_order_raw_size);
	cr_assert_leq(tmpl->ep_attr->max_order_raw_size, ibf_params.eager_size);
	h->caps |= FI_ATOMIC;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->tx_attr->msg_order |= atomic;
	h->rx_attr->msg_order |= atomic;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	h->tx_attr->msg_order |= FI_ORDER_RMA_WAW;
	cr_assert_neq(match(h, FI_VERSION(1, 17)), 0, "RMA is not ordered");
	cr_assert(strstr(why, "msg_order"), "refused for: %s", why);
	fi_freeinfo(h);
}

/*
 * FI_RMA asked with no direction is every direction, and the answer says
 * so (fabtests 2.x binds its FI_RMA_EVENT counter with the answer's
 * FI_REMOTE_WRITE | FI_REMOTE_READ); asked with one, it is that one.  The
 * answer taken back as hints matches again (fi_multi_ep does that).
 */
Test(rdm, directions_implied_by_primary_caps)
{
	const uint64_t rma_dir = FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	struct fi_info *h = fi_allocinfo(), *again;

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_MSG | FI_RMA | FI_RMA_EVENT;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_expect_eq(tmpl->caps & rma_dir, rma_dir);
	cr_expect_eq(tmpl->caps & (FI_SEND | FI_RECV), FI_SEND | FI_RECV);
	cr_expect(tmpl->caps & FI_RMA_EVENT);
	cr_expect_eq(tmpl->tx_attr->caps & rma_dir, FI_READ | FI_WRITE);
	cr_expect_eq(tmpl->rx_attr->caps & rma_dir, FI_REMOTE_READ | FI_REMOTE_WRITE);
	cr_expect_eq(tmpl->caps & FI_TAGGED, 0, "not asked");
	again = fi_dupinfo(tmpl);
	fi_freeinfo(tmpl);
	setup();
	cr_assert_eq(match(again, FI_VERSION(1, 17)), 0, "the answer as hints: %s",
		     why);
	fi_freeinfo(again);

	fi_freeinfo(tmpl);
	setup();
	h->caps = FI_MSG | FI_RMA | FI_READ;
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_expect_eq(tmpl->caps & rma_dir, FI_READ, "a direction asked is kept");
	fi_freeinfo(h);
}

Test(rdm, open_mpi_hints_match_and_narrow)
{
	struct fi_info *h = ompi_hints();

	cr_assert_eq(match(h, FI_VERSION(1, 5)), 0, "refused: %s", why);
	cr_assert_eq(ibf_info_narrow(tmpl, FI_VERSION(1, 5), h), 0);
	cr_assert_eq(tmpl->domain_attr->mr_mode, 0);
	cr_assert_eq(tmpl->domain_attr->threading, FI_THREAD_DOMAIN);
	cr_assert_eq(tmpl->domain_attr->av_type, FI_AV_MAP);
	cr_assert(tmpl->caps & FI_DIRECTED_RECV);
	cr_assert_eq(tmpl->caps & FI_MSG, 0, "FI_MSG was not asked for");
	cr_assert_eq(tmpl->tx_attr->op_flags, FI_COMPLETION);
	fi_freeinfo(h);
}

Test(rdm, directed_recv_and_source_only_when_asked)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->caps & (FI_DIRECTED_RECV | FI_SOURCE), 0);
	fi_freeinfo(h);
}

Test(rdm, refusals_name_the_hint)
{
	struct fi_info *h = ompi_hints();

	h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), -FI_ENODATA);
	h->ep_attr->rx_ctx_cnt = 0;
	h->ep_attr->type = FI_EP_DGRAM;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), -FI_ENODATA);
	cr_assert(strstr(why, "FI_EP_RDM"), "%s", why);
	fi_freeinfo(h);
}

Test(rdm, both_progress_models)
{
	struct fi_info *h = ompi_hints();

	h->domain_attr->data_progress = FI_PROGRESS_AUTO;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->data_progress, FI_PROGRESS_AUTO);
	fi_freeinfo(h);
}

Test(rdm, any_mr_mode_is_fine)
{
	struct fi_info *h = ompi_hints();

	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, 0, "nothing needs registering");
	fi_freeinfo(h);
}

/* RMA asked for, with the keys it needs: the BTL's mr_mode, exactly. */
Test(rdm, rma_hints_get_device_keys)
{
	struct fi_info *h = ompi_hints();
	uint64_t need = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;

	h->caps = FI_RMA | FI_MSG | FI_LOCAL_COMM | FI_REMOTE_COMM;
	h->domain_attr->mr_mode = (int)need;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, need);
	cr_assert(tmpl->caps & FI_RMA);
	cr_assert_eq(tmpl->tx_attr->rma_iov_limit, 1);
	fi_freeinfo(h);
}

/* MPICH adds FI_MR_ENDPOINT (and FI_MR_LOCAL): accepted, not required. */
Test(rdm, rma_with_mr_endpoint_and_local_in_hints)
{
	struct fi_info *h = ompi_hints();

	h->caps = FI_RMA | FI_TAGGED;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT | FI_MR_LOCAL;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode & (FI_MR_ENDPOINT | FI_MR_LOCAL), 0);
	fi_freeinfo(h);
}

/* MPICH 4.x's ch4:ofi hints (src/mpid/ch4/netmod/ofi/init_settings.c). */
static struct fi_info *mpich_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |
		  FI_ATOMIC | FI_TAGGED | FI_DIRECTED_RECV | FI_MSG | FI_MULTI_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_ASYNC_IOV | FI_RX_CQ_DATA;
	h->addr_format = FI_FORMAT_UNSPEC;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->av_type = FI_AV_TABLE;
	h->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	h->domain_attr->resource_mgmt = FI_RM_ENABLED;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_LOCAL | FI_MR_ENDPOINT;
	h->tx_attr->op_flags = FI_COMPLETION | FI_DELIVERY_COMPLETE;
	h->rx_attr->op_flags = FI_COMPLETION;
	return h;
}

Test(rdm, mpich_hints_get_an_rdm_entry)
{
	struct fi_info *h = mpich_hints();
	uint64_t want = h->caps;

	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	cr_assert_eq(ibf_info_narrow(tmpl, FI_VERSION(1, 17), h), 0);
	cr_assert_eq(tmpl->ep_attr->type, FI_EP_RDM);
	cr_assert_eq(tmpl->caps & want, want, "caps %#llx lack %#llx",
		     (unsigned long long)tmpl->caps,
		     (unsigned long long)(want & ~tmpl->caps));
	cr_assert_eq(tmpl->mode & ~h->mode, 0, "a mode bit MPICH did not offer");
	cr_assert_geq(tmpl->domain_attr->cq_data_size, 4);
	/* Echoed exactly: MPICH refuses FI_THREAD_SAFE for FI_THREAD_DOMAIN. */
	cr_assert_eq(tmpl->domain_attr->threading, FI_THREAD_DOMAIN);
	cr_assert_eq(tmpl->domain_attr->av_type, FI_AV_TABLE);
	cr_assert_eq(tmpl->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	cr_assert_eq(tmpl->domain_attr->mr_mode,
		     FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	cr_assert_eq(tmpl->tx_attr->op_flags, FI_COMPLETION | FI_DELIVERY_COMPLETE);
	cr_assert_eq(tmpl->tx_attr->rma_iov_limit, 1);
	fi_freeinfo(h);
}

/* Open MPI 4.1's OFI BTL: FI_RMA | FI_ATOMIC, the three mr_mode bits. */
Test(rdm, open_mpi_btl_hints)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_RMA | FI_ATOMIC;
	h->mode = FI_CONTEXT;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	cr_assert_eq(match(h, FI_VERSION(1, 5)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 5), h);
	cr_assert_eq(tmpl->caps & (FI_RMA | FI_ATOMIC), FI_RMA | FI_ATOMIC);
	cr_assert_eq(tmpl->domain_attr->mr_mode,
		     FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	cr_assert_eq(tmpl->domain_attr->mr_mode & (FI_MR_LOCAL | FI_MR_ENDPOINT), 0);
	fi_freeinfo(h);
}

/* FI_RMA_EVENT costs every RMA a notice: given only to those who ask. */
Test(rdm, rma_event_only_when_asked)
{
	struct fi_info *h = ompi_hints();

	h->caps = FI_RMA | FI_MSG;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->caps & FI_RMA_EVENT, 0);
	fi_freeinfo(h);
	teardown();
	setup();
	h = ompi_hints();
	h->caps = FI_RMA | FI_MSG | FI_RMA_EVENT;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert(tmpl->caps & FI_RMA_EVENT);
	fi_freeinfo(h);
}

/* Caps left open and no keys in mr_mode: RMA with keys the application
 * chooses and offsets (mr_mode without PROV_KEY and VIRT_ADDR). */
Test(rdm, open_caps_without_keys_get_requested_keys)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, 0);
	cr_assert(tmpl->caps & FI_RMA);
	cr_assert(tmpl->caps & FI_TAGGED);
	fi_freeinfo(h);
}

/* MPICH's first hints: RMA and atomics with FI_MR_ENDPOINT alone. */
Test(rdm, endpoint_only_mr_mode_gets_requested_keys)
{
	struct fi_info *h = ompi_hints();

	h->caps |= FI_RMA | FI_ATOMIC;
	h->domain_attr->mr_mode = FI_MR_ENDPOINT;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, 0);
	cr_assert(tmpl->caps & FI_RMA && tmpl->caps & FI_ATOMIC);
	fi_freeinfo(h);
}

/* Both allowed: the device's keys and virtual addresses win (no round
 * trip to learn a key); FI_MR_SCALABLE is requested keys by name. */
Test(rdm, device_keys_preferred_scalable_taken)
{
	struct fi_info *h = ompi_hints();

	h->caps |= FI_RMA;
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_ENDPOINT;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode,
		     FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY);
	fi_freeinfo(tmpl);
	setup();
	/* FI_IBFAB_RDM_REQUESTED_KEYS: the application's keys all the same. */
	ibf_params.rdm_requested_keys = 1;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	ibf_params.rdm_requested_keys = 0;
	cr_assert_eq(tmpl->domain_attr->mr_mode, FI_MR_ALLOCATED);
	fi_freeinfo(h);
	fi_freeinfo(tmpl);
	setup();
	h = ompi_hints();
	h->caps |= FI_RMA;
	h->domain_attr->mr_mode = FI_MR_SCALABLE;
	cr_assert_eq(match(h, FI_VERSION(1, 4)), 0, "refused: %s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 4), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, FI_MR_SCALABLE);
	cr_assert(tmpl->caps & FI_RMA);
	fi_freeinfo(h);
}

/* ---- endpoint names (ibf_av.c) ---- */

Test(name, ipv4_keeps_address_port_and_key)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7000) };
	struct ibf_name n;
	const struct sockaddr_in *out = (const void *)n.bytes;

	inet_pton(AF_INET, "198.18.0.2", &sin.sin_addr);
	memset(sin.sin_zero, 0xaa, sizeof(sin.sin_zero));
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&sin, sizeof(sin)), 0);
	cr_assert_eq(out->sin_port, htons(7000));
	cr_assert_eq(out->sin_addr.s_addr, sin.sin_addr.s_addr);
	cr_assert_eq(ibf_name_key(&n), 0xaaaaaaaaaaaaaaaaull, "the key was dropped");
	/* Two names of one endpoint compare equal byte for byte. */
	for (size_t i = sizeof(struct sockaddr_in); i < sizeof(n.bytes); i++)
		cr_assert_eq(n.bytes[i], 0, "byte %zu not zeroed", i);
}

/*
 * Keys: a name with another key is another endpoint, even at the same
 * address and port; a plain address (no key) names whatever endpoint is
 * there; the kernel's sockaddr carries no key.
 */
Test(name, keys_tell_endpoints_apart)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7000) };
	struct sockaddr_storage ss;
	struct ibf_name plain, b, impostor;

	inet_pton(AF_INET, "198.18.0.2", &sin.sin_addr);
	cr_assert_eq(ibf_name_from_sockaddr(&plain, (void *)&sin, sizeof(sin)), 0);
	cr_assert_eq(ibf_name_key(&plain), 0);
	b = impostor = plain;
	ibf_name_set_key(&b, 0x1122334455667788ull);
	ibf_name_set_key(&impostor, 0x1122334455667789ull);
	cr_assert(ibf_name_matches(&b, &b));
	cr_assert(!ibf_name_matches(&b, &impostor), "another key passed for b");
	cr_assert(!ibf_name_matches(&impostor, &b));
	cr_assert(ibf_name_matches(&plain, &b), "a plain address names who is there");
	cr_assert(!ibf_name_matches(&b, &plain), "a keyless claim passed for b");
	ibf_name_sockaddr(&b, &ss);
	cr_assert_eq(memcmp(&ss, &sin, sizeof(sin)), 0, "a key went to the kernel");
}

Test(name, ipv6_key_is_flowinfo)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(9) };
	struct ibf_name n, m;

	inet_pton(AF_INET6, "fd00::1", &s6.sin6_addr);
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&s6, sizeof(s6)), 0);
	m = n;
	ibf_name_set_key(&n, 0xdeadbeefcafef00dull);
	cr_assert_eq(ibf_name_key(&n), 0xcafef00dull);
	cr_assert(!ibf_name_matches(&n, &m));
	cr_assert(ibf_name_matches(&m, &n));
}

Test(name, ipv6)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(9) };
	struct ibf_name n;

	inet_pton(AF_INET6, "fd00::1", &s6.sin6_addr);
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&s6, sizeof(s6)), 0);
	cr_assert_eq(((struct sockaddr_in6 *)n.bytes)->sin6_port, htons(9));
}

Test(name, refuses_what_names_no_endpoint)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(7000) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(9) };
	uint8_t junk[16];
	struct ibf_name n;

	/* wildcard host */
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&sin, sizeof(sin)), -FI_EINVAL);
	inet_pton(AF_INET, "198.18.0.2", &sin.sin_addr);
	/* port 0, too short, not an inet family, NULL */
	sin.sin_port = 0;
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&sin, sizeof(sin)), -FI_EINVAL);
	sin.sin_port = htons(7000);
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&sin, 8), -FI_EINVAL);
	memset(junk, 0xff, sizeof(junk));
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)junk, sizeof(junk)), -FI_EINVAL);
	cr_assert_eq(ibf_name_from_sockaddr(&n, NULL, 16), -FI_EINVAL);
	/* an IPv6 address given the IPv4 length */
	inet_pton(AF_INET6, "fd00::1", &s6.sin6_addr);
	cr_assert_eq(ibf_name_from_sockaddr(&n, (void *)&s6, sizeof(sin)), -FI_EINVAL);
}

/*
 * fi_getinfo(3): tx_attr->caps holds transmit capabilities only, rx_attr's
 * receive ones only, both within info->caps; domain capabilities such as
 * FI_LOCAL_COMM live in info->caps and domain_attr.  Checked for both
 * templates, as offered and as narrowed for each primary capability.
 */
#define TX_ONLY (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_SEND | \
		 FI_READ | FI_WRITE | FI_FENCE | FI_TRIGGER)
#define RX_ONLY (FI_MSG | FI_RMA | FI_TAGGED | FI_ATOMIC | FI_RECV | \
		 FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | \
		 FI_SOURCE | FI_MULTI_RECV | FI_RMA_EVENT | FI_TRIGGER)

static void assert_direction_caps(const struct fi_info *info, uint64_t asked)
{
	cr_assert_eq(info->tx_attr->caps & ~TX_ONLY, 0,
		     "tx caps %#llx beyond transmit caps (asked %#llx)",
		     (unsigned long long)info->tx_attr->caps,
		     (unsigned long long)asked);
	cr_assert_eq(info->rx_attr->caps & ~RX_ONLY, 0,
		     "rx caps %#llx beyond receive caps (asked %#llx)",
		     (unsigned long long)info->rx_attr->caps,
		     (unsigned long long)asked);
	cr_assert_eq(info->tx_attr->caps & ~info->caps, 0);
	cr_assert_eq(info->rx_attr->caps & ~info->caps, 0);
}

Test(rdm, direction_caps_hold_only_their_direction)
{
	static const uint64_t asks[] = {
		0, FI_MSG, FI_TAGGED, FI_MSG | FI_TAGGED, FI_DIRECTED_RECV,
		FI_TAGGED | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_DIRECTED_RECV,
		FI_MSG | FI_MULTI_RECV | FI_SOURCE,
	};
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct fi_info *msg;
	size_t i;

	inet_pton(AF_INET, "198.18.0.1", &sin.sin_addr);
	msg = ibf_info_template(&lim, (struct sockaddr *)&sin);
	assert_direction_caps(tmpl, 0);
	assert_direction_caps(msg, 0);
	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		struct fi_info *t[2] = { fi_dupinfo(tmpl), fi_dupinfo(msg) };
		struct fi_info *h = fi_allocinfo();
		int k;

		h->caps = asks[i];
		h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
					  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
		h->mode = FI_RX_CQ_DATA | FI_CONTEXT;
		for (k = 0; k < 2; k++) {
			if (!ibf_info_match(t[k], FI_VERSION(1, 17), h, why,
					    sizeof(why))) {
				ibf_info_narrow(t[k], FI_VERSION(1, 17), h);
				assert_direction_caps(t[k], asks[i]);
			}
			fi_freeinfo(t[k]);
		}
		fi_freeinfo(h);
	}
	fi_freeinfo(msg);
}

/* Applications that copy info->caps into the attributes still match. */
Test(rdm, domain_caps_in_direction_hints_tolerated)
{
	struct fi_info *h = ompi_hints();

	h->tx_attr->caps = h->caps & ~FI_DIRECTED_RECV;
	h->rx_attr->caps = h->caps;
	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "%s", why);
	fi_freeinfo(h);
}

/*
 * MPI keeps more than a thousand receives posted on one endpoint, and
 * Open MPI's MTL spins inside MPI_Irecv while the provider says
 * -FI_EAGAIN: an RDM endpoint takes thousands unless told otherwise.
 */
Test(rdm, takes_thousands_of_posted_receives)
{
	struct fi_info *h = ompi_hints();

	cr_assert_eq(match(h, FI_VERSION(1, 17)), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_geq(tmpl->rx_attr->size, 4096);
	fi_freeinfo(h);
}

/* Counters: both kinds of endpoint have them. */
Test(rdm, counters_on_rdm_and_msg)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct fi_info *msg;

	inet_pton(AF_INET, "198.18.0.1", &sin.sin_addr);
	msg = ibf_info_template(&lim, (struct sockaddr *)&sin);
	cr_assert_not_null(msg);
	cr_assert_gt(tmpl->domain_attr->cntr_cnt, 0);
	cr_assert_gt(msg->domain_attr->cntr_cnt, 0);
	fi_freeinfo(msg);
}
