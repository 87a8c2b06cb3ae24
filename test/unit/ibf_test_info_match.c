/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Hint matching and narrowing against a made-up device; no device needed. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ibf.h"
#include "ibf_abi.h"

static struct fi_info *tmpl;
static char why[256];

static const struct ibf_dev_limits lim = {
	.dev_name = "mlx5_0",
	.fabric_name = "IB-0xfe80000000000000",
	.port = 1,
	.max_msg_sz = 1 << 30,
	.max_qp_wr = 16384,
	.max_sge = 30,
	.max_cqe = 1 << 22,
	.max_cq = 1 << 16,
	.max_qp = 1 << 16,
	.max_mr = 1 << 20,
	.max_inline = 220,
};

static void setup(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };

	inet_pton(AF_INET, "198.18.0.1", &sin.sin_addr);
	ibf_params_load();
	tmpl = ibf_info_template(&lim, (struct sockaddr *)&sin);
	cr_assert_not_null(tmpl);
	why[0] = 0;
}

static void teardown(void)
{
	fi_freeinfo(tmpl);
}

TestSuite(info, .init = setup, .fini = teardown);

static struct fi_info *msg_hints(void)
{
	struct fi_info *h = fi_allocinfo();

	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_MSG;
	h->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	return h;
}

static int match(struct fi_info *h)
{
	return ibf_info_match(tmpl, FI_VERSION(1, 17), h, why, sizeof(why));
}

/* The hint is refused, and the reason names it. */
static void refused(struct fi_info *h, const char *word)
{
	cr_assert_eq(match(h), -FI_ENODATA);
	cr_assert(strstr(why, word), "reason \"%s\" does not name %s", why, word);
	fi_freeinfo(h);
}

Test(info, template_has_device_limits)
{
	cr_assert_eq(tmpl->ep_attr->type, FI_EP_MSG);
	cr_assert_eq(tmpl->addr_format, FI_SOCKADDR_IN);
	cr_assert_eq(tmpl->ep_attr->max_msg_size, 1 << 30);
	cr_assert_eq(tmpl->tx_attr->inject_size, 220);
	cr_assert_str_eq(tmpl->domain_attr->name, "mlx5_0");
	cr_assert_eq(tmpl->domain_attr->mr_mode, IBF_MR_MODE);
	cr_assert_null(tmpl->fabric_attr->prov_name, "the core names the provider");
}

Test(info, null_hints_match)
{
	cr_assert_eq(match(NULL), 0);
}

Test(info, msg_hints_match)
{
	struct fi_info *h = msg_hints();

	cr_assert_eq(match(h), 0, "%s", why);
	fi_freeinfo(h);
}

Test(info, refuses_other_ep_types)
{
	struct fi_info *h = msg_hints();

	h->ep_attr->type = FI_EP_DGRAM;
	refused(h, "ep_type");
}

Test(info, refuses_unsupported_caps)
{
	struct fi_info *h = msg_hints();

	h->caps |= FI_RMA_EVENT;	/* RDM endpoints only */
	refused(h, "caps");
}

/* FI_ATOMIC frames an FI_EP_MSG endpoint's messages, as FI_TAGGED does. */
Test(info, atomic_only_when_asked_and_then_framed)
{
	struct fi_info *h = msg_hints();

	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->caps & FI_ATOMIC, 0, "FI_ATOMIC changes the endpoint");
	cr_assert_eq(tmpl->tx_attr->caps & FI_ATOMIC, 0);
	fi_freeinfo(h);

	fi_freeinfo(tmpl);
	setup();
	h = msg_hints();
	h->caps = FI_MSG | FI_RMA | FI_ATOMIC;
	cr_assert_eq(match(h), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert(tmpl->caps & FI_ATOMIC);
	cr_assert(tmpl->tx_attr->caps & FI_ATOMIC);
	cr_assert_eq(tmpl->caps & FI_TAGGED, 0, "FI_TAGGED was not asked");
	cr_assert_eq(tmpl->ep_attr->max_msg_size, ibf_params.eager_size);
	cr_assert_eq(tmpl->caps & FI_MULTI_RECV, 0);
	fi_freeinfo(h);

	fi_freeinfo(tmpl);
	setup();
	h = msg_hints();
	h->caps = FI_MSG | FI_ATOMIC;
	h->ep_attr->max_msg_size = ibf_params.eager_size + 1;
	refused(h, "FI_IBFAB_EAGER_SIZE");
}

Test(info, refuses_scalable_and_missing_mr_bits)
{
	struct fi_info *h = msg_hints();

	h->domain_attr->mr_mode = IBF_MR_SCALABLE;
	refused(h, "FI_MR_SCALABLE");
	h = msg_hints();
	h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	refused(h, "FI_MR_LOCAL");
	h = msg_hints();
	h->domain_attr->mr_mode = 0;
	refused(h, "mr_mode");
}

Test(info, mr_basic_needs_local_mr_mode)
{
	struct fi_info *h = msg_hints();

	h->domain_attr->mr_mode = IBF_MR_BASIC;
	refused(h, "FI_LOCAL_MR");
	h = msg_hints();
	h->domain_attr->mr_mode = IBF_MR_BASIC;
	h->mode |= IBF_LOCAL_MR;
	cr_assert_eq(match(h), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, IBF_MR_BASIC);
	cr_assert(tmpl->mode & IBF_LOCAL_MR);
	fi_freeinfo(h);
}

Test(info, old_api_unspec_mr_mode_is_basic)
{
	struct fi_info *h = msg_hints();

	h->domain_attr->mr_mode = IBF_MR_UNSPEC;
	h->mode |= IBF_LOCAL_MR;
	cr_assert_eq(ibf_info_match(tmpl, FI_VERSION(1, 4), h, why, sizeof(why)), 0);
	cr_assert_eq(ibf_info_match(tmpl, FI_VERSION(1, 5), h, why, sizeof(why)),
		     -FI_ENODATA);
	fi_freeinfo(h);
}

Test(info, refuses_names_that_differ)
{
	struct fi_info *h = msg_hints();

	h->domain_attr->name = strdup("mlx5_1");
	refused(h, "domain name");
	h = msg_hints();
	h->fabric_attr->name = strdup("IB-0x1");
	refused(h, "fabric name");
}

Test(info, refuses_limits_beyond_device)
{
	struct fi_info *h = msg_hints();

	h->tx_attr->size = 16385;
	refused(h, "tx size");
	h = msg_hints();
	h->rx_attr->iov_limit = 31;
	refused(h, "rx iov_limit");
	h = msg_hints();
	h->tx_attr->inject_size = 221;
	refused(h, "inject_size");
	h = msg_hints();
	h->ep_attr->max_msg_size = (size_t)1 << 31;
	refused(h, "max_msg_size");
	h = msg_hints();
	h->tx_attr->rma_iov_limit = 2;
	refused(h, "rma_iov_limit");
	h = msg_hints();
	h->domain_attr->cq_data_size = 8;
	refused(h, "cq_data_size");
}

Test(info, refuses_shared_contexts_and_auth_keys)
{
	struct fi_info *h = msg_hints();

	h->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	refused(h, "ctx_cnt");
	h = msg_hints();
	h->ep_attr->auth_key_size = 8;
	refused(h, "auth_key");
}

Test(info, shared_rx_context_needs_an_srq)
{
	struct fi_info *h = msg_hints();

	h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	refused(h, "SRQ");

	tmpl->domain_attr->max_ep_srx_ctx = 1;	/* as for a device with SRQs */
	h = msg_hints();
	h->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	cr_assert_eq(match(h), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->ep_attr->rx_ctx_cnt, FI_SHARED_CONTEXT);
	fi_freeinfo(h);
}

Test(info, refuses_wrong_addr_format)
{
	struct fi_info *h = msg_hints();

	h->addr_format = FI_SOCKADDR_IN6;
	refused(h, "addr_format");
}

Test(info, any_sockaddr_format_matches)
{
	struct fi_info *h = msg_hints();

	h->addr_format = FI_SOCKADDR;
	cr_assert_eq(match(h), 0, "%s", why);
	fi_freeinfo(h);
}

Test(info, cq_data_needs_rx_cq_data_mode)
{
	struct fi_info *h = msg_hints();

	h->mode = FI_CONTEXT;
	h->domain_attr->cq_data_size = 4;
	refused(h, "FI_RX_CQ_DATA");
}

Test(info, without_rx_cq_data_no_remote_data)
{
	struct fi_info *h = msg_hints();

	h->mode = FI_CONTEXT;
	cr_assert_eq(match(h), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->cq_data_size, 0);
	cr_assert_eq(tmpl->mode & FI_RX_CQ_DATA, 0);
	fi_freeinfo(h);
}

Test(info, narrow_picks_defaults_then_hints)
{
	struct fi_info *h = msg_hints();

	ibf_info_narrow(tmpl, FI_VERSION(1, 17), NULL);
	cr_assert_eq(tmpl->tx_attr->size, 384);
	cr_assert_eq(tmpl->tx_attr->iov_limit, 4);
	cr_assert_eq(tmpl->tx_attr->inject_size, 220, "the device's inline limit");
	fi_freeinfo(tmpl);
	setup();
	h->tx_attr->size = 4096;
	h->rx_attr->size = 8;
	h->tx_attr->inject_size = 64;
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->tx_attr->size, 4096);
	cr_assert_eq(tmpl->rx_attr->size, 8);
	cr_assert_eq(tmpl->tx_attr->inject_size, 64);
	fi_freeinfo(h);
}

Test(info, narrow_caps_to_what_was_asked)
{
	struct fi_info *h = msg_hints();

	h->caps = FI_RMA | FI_WRITE;
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->caps & IBF_MSG_PRIMARY_CAPS, FI_RMA | FI_WRITE);
	cr_assert(tmpl->caps & FI_REMOTE_COMM, "secondary caps stay");
	cr_assert_eq(tmpl->rx_attr->caps & FI_MSG, 0);
	fi_freeinfo(h);
}

Test(info, narrow_keeps_threading_hint)
{
	struct fi_info *h = msg_hints();

	h->domain_attr->threading = FI_THREAD_DOMAIN;
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->threading, FI_THREAD_DOMAIN);
	fi_freeinfo(h);
}

Test(info, messaging_alone_needs_local_registration_only)
{
	struct fi_info *h = msg_hints();

	h->caps = FI_MSG;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED;
	cr_assert_eq(match(h), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->domain_attr->mr_mode, FI_MR_LOCAL | FI_MR_ALLOCATED);
	cr_assert_eq(tmpl->caps & FI_RMA, 0);
	fi_freeinfo(h);

	fi_freeinfo(tmpl);	/* a fresh template: narrowing took RMA away */
	setup();
	h = msg_hints();
	h->caps = FI_MSG | FI_RMA;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED;
	refused(h, "FI_MR_PROV_KEY");
}

Test(info, tagged_only_when_asked_and_then_eager_sized)
{
	struct fi_info *h = msg_hints();

	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert_eq(tmpl->caps & FI_TAGGED, 0, "FI_TAGGED changes the endpoint");
	fi_freeinfo(h);

	fi_freeinfo(tmpl);
	setup();
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), NULL);
	cr_assert_eq(tmpl->caps & FI_TAGGED, 0, "not even with no hints");

	fi_freeinfo(tmpl);
	setup();
	h = msg_hints();
	h->caps = FI_MSG | FI_TAGGED;
	cr_assert_eq(match(h), 0, "%s", why);
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), h);
	cr_assert(tmpl->caps & FI_TAGGED);
	cr_assert_eq(tmpl->ep_attr->max_msg_size, ibf_params.eager_size);
	cr_assert_eq(tmpl->caps & FI_MULTI_RECV, 0);
	fi_freeinfo(h);

	fi_freeinfo(tmpl);
	setup();
	h = msg_hints();
	h->caps = FI_MSG | FI_TAGGED;
	h->ep_attr->max_msg_size = ibf_params.eager_size + 1;
	refused(h, "FI_IBFAB_EAGER_SIZE");
}

/*
 * What each version is told where the meaning changed.  Below 2.0 an MSG
 * endpoint completes in order (FI_ORDER_STRICT); 2.0 has no completion
 * order and one progress model.  Counters count to 2^64 - 1 (1.20's
 * max_cntr_value, max_err_cntr_value).  The 2.0 and 1.20 checks need
 * headers that have those fields (util/ibfab-libfabric builds them).
 */
Test(info, each_version_in_its_terms)
{
	tmpl->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	ibf_info_narrow(tmpl, FI_VERSION(1, 17), NULL);
	cr_expect_eq(tmpl->tx_attr->comp_order, IBF_ORDER_STRICT);
	cr_expect_eq(tmpl->rx_attr->comp_order, IBF_ORDER_STRICT);
	cr_expect_eq(tmpl->domain_attr->control_progress, FI_PROGRESS_AUTO);
#if IBF_HEADERS_GE(1, 20)
	cr_expect_eq(tmpl->domain_attr->max_cntr_value, UINT64_MAX);
	cr_expect_eq(tmpl->domain_attr->max_err_cntr_value, UINT64_MAX);
#endif
#if IBF_HEADERS_GE(2, 0)
	fi_freeinfo(tmpl);
	setup();
	tmpl->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	ibf_info_narrow(tmpl, FI_VERSION(2, 0), NULL);
	cr_expect_eq(tmpl->tx_attr->comp_order, 0);
	cr_expect_eq(tmpl->rx_attr->comp_order, 0);
	cr_expect_eq(tmpl->domain_attr->progress, FI_PROGRESS_MANUAL);
	cr_expect_eq(tmpl->domain_attr->control_progress, FI_PROGRESS_MANUAL,
		     "2.0: one progress model");
	cr_expect_eq(tmpl->domain_attr->max_cntr_value, UINT64_MAX);
#endif
}
