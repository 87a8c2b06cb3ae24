/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Error entries handed to an application are its API version's size:
 * nothing past the struct it was built with is written (issue: an
 * application built against 1.17 had 8 bytes written past its
 * fi_cq_err_entry by an ibfab built against 2.x).
 */
#include <stddef.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ibf_abi.h"

#define FILL 0xa5

/* The size each version's fi_cq_err_entry has, and this build's. */
static const struct {
	int major, minor;
	size_t size;
} versions[] = {
	{ 1, 0, 72 }, { 1, 4, 72 }, { 1, 5, 80 }, { 1, 17, 80 }, { 1, 19, 80 },
	{ 1, 20, sizeof(struct fi_cq_err_entry) },
	{ 2, 0, sizeof(struct fi_cq_err_entry) },
};

Test(abi, cq_err_entry_sizes)
{
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		cr_expect_eq(ibf_cq_err_size(FI_VERSION(versions[i].major,
							versions[i].minor)),
			     versions[i].size, "API %d.%d", versions[i].major,
			     versions[i].minor);
	cr_expect_eq(ibf_cq_err_size(0), sizeof(struct fi_cq_err_entry));
}

Test(abi, cq_err_copy_writes_nothing_past_the_callers_struct)
{
	struct fi_cq_err_entry e;
	uint8_t buf[sizeof(struct fi_cq_err_entry) + 64];
	struct fi_cq_err_entry *user = (void *)buf;
	char caller_data[16];

	memset(&e, 0x11, sizeof(e));
	e.op_context = &e;
	e.err = FI_EIO;
	e.prov_errno = 12;
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		uint32_t api = FI_VERSION(versions[i].major, versions[i].minor);
		size_t size = versions[i].size, j;

		memset(buf, FILL, sizeof(buf));
		if (api >= FI_VERSION(1, 5)) {
			user->err_data = caller_data;
			user->err_data_size = sizeof(caller_data);
		}
		ibf_cq_err_copy(api, user, &e);
		for (j = size; j < sizeof(buf); j++)
			cr_assert_eq(buf[j], FILL, "API %d.%d: byte %zu written "
				     "(its struct has %zu)", versions[i].major,
				     versions[i].minor, j, size);
		cr_expect_eq(user->op_context, &e);
		cr_expect_eq(user->err, FI_EIO);
		cr_expect_eq(user->prov_errno, 12);
#if IBF_HEADERS_GE(1, 20)
		/* No FI_AV_AUTH_KEY: no source to name (fi_cq(3)). */
		if (api >= FI_VERSION(1, 20))
			cr_expect_eq(user->src_addr, FI_ADDR_NOTAVAIL, "API %d.%d",
				     versions[i].major, versions[i].minor);
#endif
		if (api >= FI_VERSION(1, 5)) {
			/* The caller's buffer is kept, and we put nothing in. */
			cr_expect_eq(user->err_data, caller_data);
			cr_expect_eq(user->err_data_size, 0);
		} else {
			cr_expect_null(user->err_data);
		}
	}
}

Test(abi, eq_err_entry_sizes)
{
	cr_expect_eq(ibf_eq_err_size(FI_VERSION(1, 4)),
		     offsetof(struct fi_eq_err_entry, err_data) + sizeof(void *));
	cr_expect_eq(ibf_eq_err_size(FI_VERSION(1, 5)), sizeof(struct fi_eq_err_entry));
	cr_expect_eq(ibf_eq_err_size(0), sizeof(struct fi_eq_err_entry));
}
