/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * libFuzzer: an atomic request as a peer sends it (RDM and FI_EP_MSG's
 * framed mode both serve it with ibf_atomic_serve), and an answer as a
 * peer returns it (ibf_atomic_answer_check).  The target domain has one
 * region over a small buffer that grants read and write; whatever the
 * bytes, nothing outside that buffer and the request itself is touched.
 */
#include <stdlib.h>
#include <string.h>

#include "ibf_atomic_ops.h"

#define EAGER 8192

static struct ibf_domain dom;
static struct ibv_mr vmr;
static struct ibf_mr mr;
static uint64_t target[64] __attribute__((aligned(64)));

static void setup(void)
{
	unsigned i;

	pthread_mutex_init(&dom.mr_lock, NULL);
	vmr.addr = target;
	vmr.length = sizeof(target);
	vmr.rkey = 0x1234;
	mr.mr = &vmr;
	mr.magic = IBF_MR_MAGIC;
	mr.ibv_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	for (i = 0; i < IBF_MR_BUCKETS; i++)
		dom.mr_bucket[i] = &mr;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	uint8_t *wire;
	size_t want, answer;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (size > EAGER)
		return 0;
	/* The peer's bytes at the start of a bounce's payload: room for an
	 * eager message, which an answer (old values) may fill, no more. */
	wire = malloc(sizeof(struct ibf_atomic_req) + EAGER);
	memcpy(wire, data, size);
	if (size >= sizeof(struct ibf_atomic_req)) {
		/* Aim some requests at the region, so the apply path runs. */
		struct ibf_atomic_req *req = (void *)wire;

		if (req->rsvd & 1) {
			req->key = vmr.rkey;
			req->addr = (uintptr_t)target + (req->addr % sizeof(target));
		}
		answer = ibf_atomic_serve(&dom, wire, size, EAGER);
		if (answer > sizeof(struct ibf_atomic_req) + EAGER)
			abort();	/* an answer never outgrows the bounce */
	}
	memcpy(wire, data, size);
	want = size > 8 ? data[size - 1] : 0;
	(void)ibf_atomic_answer_check(wire, size, want);
	free(wire);
	return 0;
}
