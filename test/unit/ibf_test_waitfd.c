/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * fi_control(FI_GETWAIT, FI_GETWAITOBJ) as CQs, EQs and counters answer
 * it, one way for all three (they had drifted: a counter without a wait
 * object said -FI_EINVAL where a CQ said -FI_ENODATA, and a NULL arg got
 * -FI_ENODATA from a CQ).
 */
#include <criterion/criterion.h>

#include "ibf.h"
#include "ibf_util.h"

static struct ibf_waitfd w;

static void setup(void)
{
	cr_assert_eq(ibf_waitfd_open(&w, -1), 0);
}

static void teardown(void)
{
	ibf_waitfd_close(&w);
}

TestSuite(waitfd, .init = setup, .fini = teardown);

Test(waitfd, getwait_hands_out_the_epoll_fd)
{
	enum fi_wait_obj obj = FI_WAIT_UNSPEC;
	int fd = -1;

	cr_assert_eq(ibf_waitfd_control(&w, 1, FI_GETWAIT, &fd), 0);
	cr_assert_eq(fd, w.epoll_fd);
	cr_assert_eq(ibf_waitfd_control(&w, 1, FI_GETWAITOBJ, &obj), 0);
	cr_assert_eq(obj, FI_WAIT_FD);
}

Test(waitfd, no_wait_object)
{
	enum fi_wait_obj obj = FI_WAIT_UNSPEC;
	int fd = -7;

	cr_assert_eq(ibf_waitfd_control(&w, 0, FI_GETWAIT, &fd), -FI_ENODATA);
	cr_assert_eq(fd, -7, "nothing written");
	cr_assert_eq(ibf_waitfd_control(&w, 0, FI_GETWAITOBJ, &obj), 0);
	cr_assert_eq(obj, FI_WAIT_NONE);
}

Test(waitfd, bad_arguments)
{
	cr_assert_eq(ibf_waitfd_control(&w, 1, FI_GETWAIT, NULL), -FI_EINVAL);
	cr_assert_eq(ibf_waitfd_control(&w, 0, FI_GETWAIT, NULL), -FI_EINVAL);
	cr_assert_eq(ibf_waitfd_control(&w, 1, FI_GETWAITOBJ, NULL), -FI_EINVAL);
	cr_assert_eq(ibf_waitfd_control(&w, 1, FI_GETOPSFLAG, &w), -FI_ENOSYS);
}
