/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Application structs by API version (ibf_abi.h). */
#include "config.h"

#include <stddef.h>
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
}

size_t ibf_eq_err_size(uint32_t api)
{
	if (!ibf_api_ge(api, 1, 5))
		return IBF_END_OF(struct fi_eq_err_entry, err_data);
	return sizeof(struct fi_eq_err_entry);
}
