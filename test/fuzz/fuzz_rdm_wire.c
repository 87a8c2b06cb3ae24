/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * libFuzzer: an RDM arrival's payload as its receiver checks it before
 * acting on it: an RTS's segments against its length (ibf_rdm_rts_fits,
 * which must accept only segments that add up to the length and lie in
 * the bytes received), names as peers give them (the key, matching), and
 * a KEYR's region against the RMA it is for (ibf_rdm_key_covers).
 */
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t slot = IBF_RDM_HDR + sizeof(struct ibf_rdm_rts);
	struct ibf_rdm_op b = { 0 };
	const struct ibf_rdm_rts *rts;
	struct ibf_name a, c;
	uint64_t sum = 0;
	uint32_t i;

	if (size > slot)
		return 0;
	/* A bounce's slot: the arrival's bytes, then what the slot held. */
	b.mem = calloc(1, slot);
	memcpy(b.mem, data, size);
	rts = (const void *)(b.mem + IBF_RDM_HDR);
	if (ibf_rdm_rts_fits(&b, (uint32_t)size)) {
		if (size < IBF_RDM_HDR + offsetof(struct ibf_rdm_rts, seg) +
			   rts->nseg * sizeof(rts->seg[0]))
			abort();	/* read segments it did not receive */
		for (i = 0; i < rts->nseg; i++)
			sum += rts->seg[i].len;
		if (sum != rts->len)
			abort();
	}
	free(b.mem);
	if (size >= IBF_RDM_HDR + sizeof(struct ibf_rdm_keyr) + 2 * sizeof(uint64_t)) {
		const struct ibf_rdm_keyr *r = (const void *)(data + IBF_RDM_HDR);
		uint64_t off, n;
		size_t at = IBF_RDM_HDR + sizeof(*r);

		memcpy(&off, data + at, sizeof(off));
		memcpy(&n, data + at + sizeof(off), sizeof(n));
		if (!ibf_rdm_keyr_check(data, (uint32_t)size) &&
		    (r->status > 0 || r->status <= -4096))
			abort();	/* a status no errno is */
		if (ibf_rdm_key_covers(r->len, r->access, IBV_ACCESS_REMOTE_WRITE,
				       off, n) &&
		    (off + n < off || off + n > r->len ||
		     !(r->access & IBV_ACCESS_REMOTE_WRITE)))
			abort();	/* past the region, or without the right */
	}
	if (size >= 2 * sizeof(struct ibf_name)) {
		memcpy(&a, data, sizeof(a));
		memcpy(&c, data + sizeof(a), sizeof(c));
		if (ibf_name_matches(&a, &c) && ibf_name_key(&a) &&
		    memcmp(&a, &c, sizeof(a)))
			abort();	/* a keyed name matched another */
		(void)ibf_name_from_sockaddr(&a, (const void *)data, size);
	}
	return 0;
}
