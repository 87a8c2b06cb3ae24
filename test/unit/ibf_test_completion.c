/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/* What a verbs completion becomes in the application's CQ entry. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <string.h>

#include "ibf.h"
#include "ibf_cq.h"

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

/* ---- completions written straight into a reader's buffer (the sink) ---- */

static struct ibf_op done_op = {
	.context = (void *)0x1234, .flags = FI_RECV | FI_TAGGED, .len = 8,
	.buf = (void *)0x5000, .data = 77, .tag = 0xabc, .src = 3,
};

static void sink_setup(struct ibf_cq *cq, struct ibf_cq_sink *sink,
		       enum fi_cq_format format, void *buf, fi_addr_t *src,
		       size_t count)
{
	memset(cq, 0, sizeof(*cq));
	cq->format = format;
	cq->entry_size = format == FI_CQ_FORMAT_CONTEXT ? sizeof(struct fi_cq_entry) :
			 format == FI_CQ_FORMAT_MSG ? sizeof(struct fi_cq_msg_entry) :
			 format == FI_CQ_FORMAT_DATA ? sizeof(struct fi_cq_data_entry) :
			 sizeof(struct fi_cq_tagged_entry);
	*sink = (struct ibf_cq_sink){ cq, buf, src, count, 0 };
}

/* Each format's entry holds its fields, and nothing is written past it
 * (the tagged format is written apart from the others: ibf_cq_write). */
Test(completion, sink_msg_and_data_formats_write_their_fields_only)
{
	union {
		struct fi_cq_msg_entry msg[2];
		struct fi_cq_data_entry data[2];
		unsigned char byte[2 * sizeof(struct fi_cq_tagged_entry)];
	} u;
	struct ibf_cq_sink sink;
	struct ibf_cq cq;
	size_t i;

	memset(&u, 0xa5, sizeof(u));
	sink_setup(&cq, &sink, FI_CQ_FORMAT_MSG, &u, NULL, 1);
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1);
	cr_assert_eq(u.msg[0].op_context, done_op.context);
	cr_assert_eq(u.msg[0].flags, FI_RECV | FI_TAGGED);
	cr_assert_eq(u.msg[0].len, 8);
	for (i = sizeof(struct fi_cq_msg_entry); i < sizeof(u); i++)
		cr_assert_eq(u.byte[i], 0xa5, "byte %zu past a MSG entry", i);

	memset(&u, 0xa5, sizeof(u));
	sink_setup(&cq, &sink, FI_CQ_FORMAT_DATA, &u, NULL, 1);
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1);
	cr_assert_eq(u.data[0].op_context, done_op.context);
	cr_assert_eq(u.data[0].len, 8);
	cr_assert_eq(u.data[0].buf, done_op.buf);
	cr_assert_eq(u.data[0].data, 77);
	for (i = sizeof(struct fi_cq_data_entry); i < sizeof(u); i++)
		cr_assert_eq(u.byte[i], 0xa5, "byte %zu past a DATA entry", i);
}

Test(completion, sink_writes_the_entry_in_the_cq_format)
{
	struct fi_cq_tagged_entry e[2];
	fi_addr_t src[2] = { 0, 0 };
	struct ibf_cq_sink sink;
	struct ibf_cq cq;

	sink_setup(&cq, &sink, FI_CQ_FORMAT_TAGGED, e, src, 2);
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1);
	cr_assert_eq(sink.n, 1);
	cr_assert_eq(e[0].op_context, done_op.context);
	cr_assert_eq(e[0].flags, FI_RECV | FI_TAGGED);
	cr_assert_eq(e[0].len, 8);
	cr_assert_eq(e[0].buf, done_op.buf);
	cr_assert_eq(e[0].data, 77);
	cr_assert_eq(e[0].tag, 0xabc);
	cr_assert_eq(src[0], 3, "FI_SOURCE of the entry");
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1);
	cr_assert_eq(sink.n, 2, "the second goes after the first");
}

Test(completion, sink_context_format_writes_the_context_only)
{
	struct fi_cq_entry e[2] = { { (void *)1 }, { (void *)2 } };
	struct ibf_cq_sink sink;
	struct ibf_cq cq;

	sink_setup(&cq, &sink, FI_CQ_FORMAT_CONTEXT, e, NULL, 2);
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1);
	cr_assert_eq(e[0].op_context, done_op.context);
	cr_assert_eq(e[1].op_context, (void *)2, "the next entry untouched");
}

Test(completion, sink_full_queues_instead)
{
	struct fi_cq_tagged_entry e[1];
	struct ibf_cq_sink sink;
	struct ibf_cq cq;

	sink_setup(&cq, &sink, FI_CQ_FORMAT_TAGGED, e, NULL, 1);
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1);
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 0, "no room: queue it");
	cr_assert_eq(sink.n, 1);
}

/* Order: a completion never passes one the CQ already holds. */
Test(completion, sink_waits_behind_what_the_cq_holds)
{
	struct fi_cq_tagged_entry e[4];
	struct ibf_cq_sink sink;
	struct ibf_cq cq;

	sink_setup(&cq, &sink, FI_CQ_FORMAT_TAGGED, e, NULL, 4);
	cq.soft_tail = 1;	/* a soft completion not read yet */
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 0, "behind a soft one");
	cq.soft_tail = 0;
	cq.rep_tail = 1;	/* a report kept by a counter's progress */
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 0, "behind a report");
	cq.rep_tail = 0;
	cq.has_err = 2;		/* an error for fi_cq_readerr first */
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 0, "behind an error");
	cq.has_err = 0;
	cr_assert_eq(ibf_cq_sink_take(&sink, &done_op), 1, "nothing held: taken");
	cr_assert_eq(sink.n, 1);
}
