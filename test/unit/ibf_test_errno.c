/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* Each verbs completion status gets its own libfabric error; log lines
 * name enum values. */
#include <criterion/criterion.h>
#include <errno.h>

#include <rdma/fi_atomic.h>

#include "ibf.h"

Test(error_codes, wc_status_specific_codes)
{
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_SUCCESS), 0);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_LOC_LEN_ERR), FI_ETRUNC);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_REM_ACCESS_ERR), FI_EACCES);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_LOC_PROT_ERR), FI_EACCES);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_WR_FLUSH_ERR), FI_ECANCELED);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_RETRY_EXC_ERR), FI_ETIMEDOUT);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_RNR_RETRY_EXC_ERR), FI_ENORX);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_REM_OP_ERR), FI_EREMOTEIO);
	cr_assert_eq(ibf_wc_status_to_fi(IBV_WC_REM_INV_REQ_ERR), FI_EINVAL);
}

Test(error_codes, no_status_is_unmapped_or_success)
{
	int s;

	/* Every error status maps to a positive code, never to success. */
	for (s = IBV_WC_LOC_LEN_ERR; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++)
		cr_assert_gt(ibf_wc_status_to_fi((enum ibv_wc_status)s), 0,
			     "status %d", s);
	cr_assert_eq(ibf_wc_status_to_fi((enum ibv_wc_status)999), FI_EOTHER);
}

Test(error_codes, not_everything_is_eio)
{
	int s, eio = 0, total = 0;

	for (s = IBV_WC_LOC_LEN_ERR; s <= IBV_WC_RESP_TIMEOUT_ERR; s++, total++)
		eio += ibf_wc_status_to_fi((enum ibv_wc_status)s) == FI_EIO;
	cr_assert_lt(eio, 4, "%d of %d statuses map to FI_EIO", eio, total);
}

Test(error_codes, errno_to_fi)
{
	cr_assert_eq(ibf_errno_to_fi(0), 0);
	cr_assert_eq(ibf_errno_to_fi(ENOMEM), -FI_ENOMEM);
	cr_assert_eq(ibf_errno_to_fi(-ENOMEM), -FI_ENOMEM);
	cr_assert_eq(ibf_errno_to_fi(EOPNOTSUPP), -FI_EOPNOTSUPP);
	cr_assert_eq(ibf_errno_to_fi(ECONNREFUSED), -FI_ECONNREFUSED);
	cr_assert_eq(ibf_errno_to_fi(ETIMEDOUT), -FI_ETIMEDOUT);
	cr_assert_eq(ibf_errno_to_fi(EHOSTUNREACH), -FI_EHOSTUNREACH);
}

/* Log lines name enum values (issue: they printed numbers). */
Test(names, enums_by_name)
{
	char b[IBF_ENUM_STR];

	cr_expect_str_eq(ibf_enum_str(b, sizeof(b), FI_TYPE_ATOMIC_OP, FI_SUM), "FI_SUM");
	cr_expect_str_eq(ibf_enum_str(b, sizeof(b), FI_TYPE_ATOMIC_TYPE, FI_UINT64),
			 "FI_UINT64");
	cr_expect_str_eq(ibf_enum_str(b, sizeof(b), FI_TYPE_AV_TYPE, FI_AV_TABLE),
			 "FI_AV_TABLE");
	cr_expect_str_eq(ibf_enum_str(b, sizeof(b), IBF_TYPE_WAIT_OBJ, FI_WAIT_FD),
			 "FI_WAIT_FD");
	cr_expect_str_eq(ibf_enum_str(b, sizeof(b), FI_TYPE_ATOMIC_OP, 999),
			 "Unknown (999)");
	cr_expect_str_eq(ibf_enum_str(b, sizeof(b), IBF_TYPE_WAIT_OBJ, 77),
			 "Unknown (77)");
}
