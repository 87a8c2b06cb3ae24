/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What a verbs completion becomes in the application's CQ entry. */
#include <arpa/inet.h>
#include <criterion/criterion.h>

#include "ibf.h"

static struct ibf_op send_op = { .flags = FI_SEND | FI_MSG, .len = 100 };
static struct ibf_op recv_op = { .flags = FI_RECV | FI_MSG, .len = 4096 };

Test(completion, send_reports_its_own_length)
{
	struct ibv_wc wc = { .opcode = IBV_WC_SEND, .byte_len = 0 };
	uint64_t flags, data;
	size_t len;

	ibf_wc_result(&wc, &send_op, &flags, &len, &data);
	cr_assert_eq(flags, FI_SEND | FI_MSG);
	cr_assert_eq(len, 100);
	cr_assert_eq(data, 0);
}

Test(completion, receive_reports_what_arrived)
{
	struct ibv_wc wc = { .opcode = IBV_WC_RECV, .byte_len = 17 };
	uint64_t flags, data;
	size_t len;

	ibf_wc_result(&wc, &recv_op, &flags, &len, &data);
	cr_assert_eq(flags, FI_RECV | FI_MSG);
	cr_assert_eq(len, 17);
}

Test(completion, senddata_brings_remote_cq_data)
{
	struct ibv_wc wc = { .opcode = IBV_WC_RECV, .byte_len = 8,
			     .wc_flags = IBV_WC_WITH_IMM, .imm_data = htonl(0xdeadbeef) };
	uint64_t flags, data;
	size_t len;

	ibf_wc_result(&wc, &recv_op, &flags, &len, &data);
	cr_assert_eq(flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA);
	cr_assert_eq(data, 0xdeadbeef);
	cr_assert_eq(len, 8);
}

Test(completion, writedata_is_a_remote_write_not_a_message)
{
	struct ibv_wc wc = { .opcode = IBV_WC_RECV_RDMA_WITH_IMM, .byte_len = 65536,
			     .wc_flags = IBV_WC_WITH_IMM, .imm_data = htonl(7) };
	uint64_t flags, data;
	size_t len;

	ibf_wc_result(&wc, &recv_op, &flags, &len, &data);
	cr_assert_eq(flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
	cr_assert_eq(data, 7);
	/* fi_cq(3): the bytes the write placed in the target buffer. */
	cr_assert_eq(len, 65536, "the write's length");
}
