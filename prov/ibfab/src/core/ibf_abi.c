/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Application structs by API version (ibf_abi.h). */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ibf_abi.h"

/* The end of a member: where a struct of a version that ends with it
 * stops. */
#define IBF_END_OF(type, member) \
	(offsetof(type, member) + sizeof(((type *)0)->member))

size_t ibf_cq_err_size(uint32_t api)
{
	if (!ibf_api_ge(api, 1, 5))	/* err_data_size came in 1.5 */
		return IBF_END_OF(struct fi_cq_err_entry, err_data);
	if (!ibf_api_ge(api, 1, 20))	/* src_addr in 1.20 */
		return IBF_END_OF(struct fi_cq_err_entry, err_data_size);
	return sizeof(struct fi_cq_err_entry);
}

void ibf_cq_err_copy(uint32_t api, struct fi_cq_err_entry *user,
		     const struct fi_cq_err_entry *e)
{
	/* From 1.5 err_data may be the caller's buffer: kept, and left
	 * empty.  Before, it is the provider's to set (none). */
	void *buf = ibf_api_ge(api, 1, 5) ? user->err_data : NULL;

	memcpy(user, e, ibf_cq_err_size(api));
	user->err_data = buf;
	if (ibf_api_ge(api, 1, 5))
		user->err_data_size = 0;
#if IBF_HEADERS_GE(1, 20)
	/* An authorization key's handle with FI_AV_AUTH_KEY (which ibfab
	 * does not offer), else none (fi_cq(3)). */
	if (ibf_api_ge(api, 1, 20))
		user->src_addr = FI_ADDR_NOTAVAIL;
#endif
}

size_t ibf_eq_err_size(uint32_t api)
{
	if (!ibf_api_ge(api, 1, 5))
		return IBF_END_OF(struct fi_eq_err_entry, err_data);
	return sizeof(struct fi_eq_err_entry);
}

void ibf_info_at_api(struct fi_info *info, uint32_t api)
{
#if IBF_HEADERS_GE(2, 0)
	if (ibf_api_ge(api, 2, 0)) {
		/* 2.0 has no completion order (FI_ORDER_STRICT is gone), and
		 * one progress model, for control and data alike. */
		info->tx_attr->comp_order = 0;
		info->rx_attr->comp_order = 0;
		info->domain_attr->control_progress = info->domain_attr->progress;
	}
#else
	(void)api;
#endif
#if IBF_HEADERS_GE(1, 20)
	/* Counters, of events and of errors, are 64-bit counts in memory. */
	info->domain_attr->max_cntr_value = UINT64_MAX;
	info->domain_attr->max_err_cntr_value = UINT64_MAX;
#else
	(void)info;
#endif
}
