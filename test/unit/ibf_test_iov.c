/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Sums of application iov lengths (ibf_iov_sum, and ibf_fill_sge for
 * FI_EP_MSG's verbs segments): a sum that wraps past SIZE_MAX, or a
 * segment verbs cannot carry, is refused rather than truncated.
 */
#include <criterion/criterion.h>

#include "ibf_msg_post.h"

Test(iov, sum_fits)
{
	struct iovec iov[3] = { { NULL, 1 }, { NULL, 2 }, { NULL, SIZE_MAX - 3 } };
	size_t len = 7;

	cr_assert_eq(ibf_iov_sum(iov, 0, &len), 0);
	cr_assert_eq(len, 0);
	cr_assert_eq(ibf_iov_sum(iov, 3, &len), 0);
	cr_assert_eq(len, SIZE_MAX);
}

Test(iov, sum_wraps)
{
	/* 16 + (SIZE_MAX - 7) is 8 modulo 2^64. */
	struct iovec iov[2] = { { NULL, 16 }, { NULL, SIZE_MAX - 7 } };
	size_t len = 7;

	cr_assert_eq(ibf_iov_sum(iov, 2, &len), -1);
	cr_assert_eq(len, 7, "a refused sum was stored");
	iov[0].iov_len = SIZE_MAX;
	iov[1].iov_len = 1;
	cr_assert_eq(ibf_iov_sum(iov, 2, &len), -1);
}

Test(iov, sge_takes_no_segment_over_4g)
{
	static char buf[16];
	struct iovec iov[2] = { { buf, 16 }, { buf, (size_t)UINT32_MAX + 9 } };
	struct ibv_sge sge[2];
	size_t len = 0;

	cr_assert_eq(ibf_fill_sge(sge, iov, NULL, 2, 0, &len), -FI_EMSGSIZE);
	iov[1].iov_len = UINT32_MAX;
	cr_assert_eq(ibf_fill_sge(sge, iov, NULL, 2, 0, &len), 0);
	cr_assert_eq(len, (size_t)UINT32_MAX + 16);
	cr_assert_eq(sge[1].length, UINT32_MAX);
}
