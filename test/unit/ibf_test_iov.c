/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Sums of application iov lengths (ibf_iov_sum, and ibf_fill_sge for
 * FI_EP_MSG's verbs segments): a sum that wraps past SIZE_MAX, or a
 * segment verbs cannot carry, is refused rather than truncated; and the
 * copies into and out of iovs (ibf_copy, ibf_copy_to_iov).
 */
#include <criterion/criterion.h>
#include <string.h>

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

/* ibf_copy at every size around its branches (0-3 bytes, 4-7, 8-16,
 * memcpy's above): the bytes asked for, and none beside them. */
Test(iov, copy_every_small_size)
{
	uint8_t src[64], dst[64 + 2];
	size_t n, i;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 1);
	for (n = 0; n <= 40; n++) {
		memset(dst, 0xee, sizeof(dst));
		ibf_copy(dst + 1, src, n);
		cr_assert_eq(dst[0], 0xee, "size %zu wrote before", n);
		cr_assert_arr_eq(dst + 1, src, n, "size %zu", n);
		cr_assert_eq(dst[n + 1], 0xee, "size %zu wrote past", n);
	}
}

/* One iov (inline path) and several (the loop): what fits is copied and
 * counted, the rest is the overflow. */
Test(iov, copy_to_iov_one_and_several)
{
	uint8_t src[24], a[8], b[8], c[32];
	struct iovec one = { c, sizeof(c) }, small = { a, 5 };
	struct iovec two[2] = { { a, sizeof(a) }, { b, 4 } };
	size_t i;

	for (i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(100 + i);
	cr_assert_eq(ibf_copy_to_iov(&one, 1, src, sizeof(src)), sizeof(src));
	cr_assert_arr_eq(c, src, sizeof(src));
	memset(a, 0, sizeof(a));
	cr_assert_eq(ibf_copy_to_iov(&small, 1, src, 12), 5);	/* truncated */
	cr_assert_arr_eq(a, src, 5);
	cr_assert_eq(a[5], 0);
	cr_assert_eq(ibf_copy_to_iov(two, 2, src, sizeof(src)), 12);
	cr_assert_arr_eq(a, src, 8);
	cr_assert_arr_eq(b, src + 8, 4);
	cr_assert_eq(ibf_copy_to_iov(two, 0, src, sizeof(src)), 0);
}
