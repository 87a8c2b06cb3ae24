/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * libFuzzer: an FI_EP_MSG endpoint's framed messages (tagged and atomic
 * modes) as a peer sends them: ibf_frame_parse, then for a message its
 * payload scattered into receive buffers (ibf_copy_to_iov, what delivery
 * does), for an atomic answer its check (requests are fuzz_atomic's).
 * The first three bytes choose the receive's iov sizes; the rest is the
 * frame.
 */
#include <stdlib.h>
#include <string.h>

#include "ibf_msg.h"
#include "ibf_atomic_ops.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t bufs[3][64];
	struct iovec iov[3];
	struct ibf_frame f;
	uint8_t *frame;
	size_t i, n, fits;

	if (size < 3)
		return 0;
	for (i = 0; i < 3; i++)
		iov[i] = (struct iovec){ bufs[i], data[i] % (sizeof(bufs[i]) + 1) };
	size -= 3;
	frame = malloc(size ? size : 1);	/* exactly the bytes: ASan sees past them */
	memcpy(frame, data + 3, size);
	ibf_frame_parse(frame, size, &f);
	if (size < sizeof(struct ibf_tag_hdr) && f.kind != IBF_FRAME_DROP)
		abort();	/* a runt taken for a frame */
	if (f.kind == IBF_FRAME_DROP && !f.why)
		abort();	/* a drop says why */
	if (f.kind != IBF_FRAME_DROP &&
	    (f.payload != frame + sizeof(struct ibf_tag_hdr) ||
	     f.len != size - sizeof(struct ibf_tag_hdr)))
		abort();	/* the payload is the frame's, all of it */
	if (f.kind == IBF_FRAME_MSG) {
		n = ibf_copy_to_iov(iov, 3, f.payload, f.len);
		fits = iov[0].iov_len + iov[1].iov_len + iov[2].iov_len;
		if (n != (f.len < fits ? f.len : fits))
			abort();	/* what fits is copied, no more */
		if (!(f.flags & IBF_HDR_TAGGED) && f.tag)
			abort();	/* an untagged message has no tag */
	} else if (f.kind == IBF_FRAME_ATOMIC_RESP) {
		(void)ibf_atomic_answer_check(f.payload, f.len, f.len % 64);
	}
	free(frame);
	return 0;
}
