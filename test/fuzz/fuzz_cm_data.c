/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * libFuzzer: the private data of an RDM connection request, accept and
 * reject, as a peer sends it (ibf_rdm_cm_*_parse).  A request is checked
 * against a requester on 198.18.0.2; an accept against the name we
 * connected to.  The parsers copy the bytes out before use: no read past
 * them, no unaligned access, and what they accept satisfies the rules.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ibf_rdm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(4000) };
	struct ibf_rdm_cm_data d;
	struct ibf_name want;
	uint8_t *pd = malloc(size ? size : 1);

	memcpy(pd, data, size);
	inet_pton(AF_INET, "198.18.0.2", &peer.sin_addr);
	if (!ibf_rdm_cm_request_parse(pd, size, (struct sockaddr *)&peer, &d)) {
		/* Taken: ours, on the requester's host, with a key. */
		if (d.magic != IBF_RDM_CM_MAGIC || !ibf_name_key(&d.name) ||
		    !ibf_addr_same_host((struct sockaddr *)&peer,
					(struct sockaddr *)&d.name))
			abort();
	}
	ibf_name_from_sockaddr(&want, (struct sockaddr *)&peer, sizeof(peer));
	if (size > 40)
		ibf_name_set_key(&want, data[size - 1] | 1);
	if (!ibf_rdm_cm_accept_parse(pd, size, &want, &d) &&
	    !ibf_name_matches(&want, &d.name))
		abort();
	(void)ibf_rdm_cm_reject_parse(pd, size);
	(void)ibf_rdm_cm_request_parse(pd, size, NULL, &d);
	free(pd);
	return 0;
}
