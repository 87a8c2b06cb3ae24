/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* fi_mr_reg access bits to verbs access flags: remote only when asked. */
#include <criterion/criterion.h>

#include "ibf.h"

Test(mr_access, send_only_is_read_only_locally)
{
	cr_assert_eq(ibf_mr_access_to_ibv(FI_SEND), 0);
	cr_assert_eq(ibf_mr_access_to_ibv(FI_WRITE), 0);
}

Test(mr_access, recv_and_read_targets_are_writable)
{
	cr_assert_eq(ibf_mr_access_to_ibv(FI_RECV), IBV_ACCESS_LOCAL_WRITE);
	cr_assert_eq(ibf_mr_access_to_ibv(FI_READ), IBV_ACCESS_LOCAL_WRITE);
}

Test(mr_access, remote_rights_only_when_asked)
{
	int f = ibf_mr_access_to_ibv(FI_SEND | FI_RECV | FI_READ | FI_WRITE);

	cr_assert_eq(f & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE), 0);
	cr_assert_eq(ibf_mr_access_to_ibv(FI_REMOTE_READ), IBV_ACCESS_REMOTE_READ);
	/* Verbs demands local write with remote write. */
	cr_assert_eq(ibf_mr_access_to_ibv(FI_REMOTE_WRITE),
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
}

Test(mr_access, no_bits_means_all_local)
{
	cr_assert_eq(ibf_mr_access_to_ibv(0), IBV_ACCESS_LOCAL_WRITE);
}

Test(mr_access, wait_obj_check)
{
	cr_assert_eq(ibf_check_wait_obj(FI_WAIT_FD), 0);
	cr_assert_eq(ibf_check_wait_obj(FI_WAIT_NONE), 0);
	cr_assert_eq(ibf_check_wait_obj(FI_WAIT_UNSPEC), 0);
	cr_assert_eq(ibf_check_wait_obj(FI_WAIT_SET), -FI_ENOSYS);
	cr_assert_eq(ibf_check_wait_obj((enum fi_wait_obj)99), -FI_EINVAL);
}
